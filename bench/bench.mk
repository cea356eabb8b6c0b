# Benchmarks (included by the top Makefile). See bench/METHOD.md.
#   make bench         every case and server, 3 rounds of 5 s
#   make bench-quick   the quick subset, under 3 minutes
#   make bench BENCH_ARGS="--cases get-50 --servers ceiling,nginx"
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

.PHONY: bench bench-quick bench-deps bench-tools bench-tcp

bench: lib examples bench-tools
	$(PYTHON) bench/run.py --out $(BUILD) $(BENCH_ARGS)
	$(PYTHON) bench/tcp_bench.py --out $(BUILD)

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
