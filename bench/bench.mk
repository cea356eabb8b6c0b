# Benchmarks (included by the top Makefile). See bench/METHOD.md.
#   make bench         every case and server, 3 rounds of 5 s
#   make bench-quick   the quick subset, under 3 minutes
#   make bench BENCH_ARGS="--cases get-50 --servers ceiling,nginx"
#   make bench-proxy   http-proxy vs nginx proxy_pass only (PROXY_BENCH_ARGS="--rounds 5")
BENCH_BIN    := $(BUILD)/bench
BENCH_CFLAGS := -O2 -Wall -Wextra -Werror
BENCH_TOOLS  := $(BENCH_BIN)/ceiling $(BENCH_BIN)/ws_load $(BENCH_BIN)/tcp_load $(BENCH_BIN)/mhd_server
BENCH_ARGS   ?=
# Debian packages for the load tools and the peer servers; the last two lines are
# the Python app cases' frameworks and reference servers (bench/METHOD.md).
BENCH_PKGS   := build-essential util-linux procps wrk nginx \
                libmicrohttpd-dev luajit python3 gunicorn python3-flask uvicorn python3-websockets \
                python3-cffi python3-fastapi python3-starlette python3-multipart python3-django \
                python3-uvicorn python3-uvloop python3-httptools python3-hypercorn python3-wsproto

.PHONY: bench bench-quick bench-deps bench-tools bench-tcp bench-proxy bench-lb

bench: lib examples bench-tools
	$(PYTHON) bench/run.py --out $(BUILD) $(BENCH_ARGS)
	$(PYTHON) bench/tcp_bench.py --out $(BUILD)
	$(PYTHON) bench/proxy_bench.py --out $(BUILD)
	RUNS=$(LB_BENCH_RUNS) SECS=$(LB_BENCH_SECS) sh bench/lb.sh $(BUILD)

# wrk -> echo-server direct vs through HAProxy (send-proxy-v2), and the cost
# of the latency histograms (--no-metrics-latency), bench/lb.sh.
LB_BENCH_RUNS ?= 3
LB_BENCH_SECS ?= 5
bench-lb: lib examples
	RUNS=$(LB_BENCH_RUNS) SECS=$(LB_BENCH_SECS) sh bench/lb.sh $(BUILD)

# build/http-proxy against nginx proxy_pass, the same echo-server upstream (bench/METHOD.md "proxy").
bench-proxy: lib examples bench-tools
	$(PYTHON) bench/proxy_bench.py --out $(BUILD) $(PROXY_BENCH_ARGS)

# Raw TCP echo, py-netty's cases: C tcp-echo, Python asyncio and node:net, and
# each binding's examples/tcp_echo against its baseline (bench/METHOD.md).
bench-tcp: lib examples bench-tools
	$(PYTHON) bench/tcp_bench.py --out $(BUILD)

bench-quick: lib examples bench-tools
	$(PYTHON) bench/run.py --quick --out $(BUILD) $(BENCH_ARGS)

bench-tools: $(BENCH_TOOLS)

# Installs only what is missing, so a prepared machine pays one dpkg query.
# Node comes from Debian only when no node is on PATH; the ws package for the
# Node peer comes from bench/package-lock.json, the frameworks of the Node app
# cases (Express, Fastify, Hono: devDependencies) from the binding's lock
# through bindings/node-ffi/install.sh.
bench-deps:
	@missing=""; \
	for p in $(BENCH_PKGS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	    echo "bench: installing$$missing"; \
	    if [ "$$(id -u)" != 0 ]; then echo "bench: need root to apt-get install$$missing" >&2; exit 1; fi; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	fi
	@test -d bench/node_modules/ws || (cd bench && npm ci --no-audit --no-fund --loglevel=error) || \
	    echo "bench: npm ci failed; the Node peer runs without WebSocket" >&2
	@bindings/node-ffi/install.sh >/dev/null || \
	    echo "bench: bindings/node-ffi/install.sh failed; the Node app cases are skipped" >&2

$(BENCH_BIN)/ceiling: bench/ceiling.c | bench-deps
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_BIN)/ws_load: bench/ws_load.c | bench-deps
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_BIN)/tcp_load: bench/tcp_load.c | bench-deps
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_BIN)/mhd_server: bench/peers/mhd_server.c | bench-deps
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lmicrohttpd

# The HTTP client (bench/client_bench.c, one loop) against curl --parallel and
# Node's fetch, the same echo-server: bench/client_bench.py describes the method.
#   make bench-client CLIENT_BENCH_ARGS="--requests 50000 --concurrency 1,16,64 --rounds 3"
CLIENT_BENCH_ARGS ?=
.PHONY: bench-client

bench-client: lib examples $(BENCH_BIN)/client_bench
	$(PYTHON) bench/client_bench.py --out $(BUILD) $(CLIENT_BENCH_ARGS)

$(BENCH_BIN)/client_bench: bench/client_bench.c $(BUILD)/$(SONAME) $(BUILD)/libnanosrv.so
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -Ilibnanosrv/include -o $@ $< -L$(BUILD) -lnanosrv -Wl,-rpath,'$$ORIGIN/..' -pthread
