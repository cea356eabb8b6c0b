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
# the Python app cases' frameworks and reference servers (bench/METHOD.md), then
# h2load and h2o for the HTTP/2 case and openssl for the handshakes.
BENCH_PKGS   := build-essential util-linux procps wrk nginx \
                libmicrohttpd-dev luajit python3 gunicorn python3-flask uvicorn python3-websockets \
                python3-cffi python3-fastapi python3-starlette python3-multipart python3-django \
                python3-uvicorn python3-uvloop python3-httptools python3-hypercorn python3-wsproto \
                nghttp2-client h2o openssl

.PHONY: bench bench-quick bench-deps bench-tools bench-tcp bench-proxy bench-lb bench-ws-deflate

bench: lib examples bench-tools
	$(PYTHON) bench/run.py --out $(BUILD) $(BENCH_ARGS)
	$(PYTHON) bench/tcp_bench.py --out $(BUILD)
	$(PYTHON) bench/proxy_bench.py --out $(BUILD)
	$(PYTHON) bench/h2_bench.py --out $(BUILD) $(H2_BENCH_ARGS)
	$(PYTHON) bench/tls_handshake.py --out $(BUILD) $(TLS_BENCH_ARGS)
	node bench/ws_deflate_bench.js --build $(BUILD) $(WS_DEFLATE_BENCH_ARGS)
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

# Compressed WebSocket echo (permessage-deflate): echo-server vs a Node `ws`
# server, the same Node `ws` client (bench/METHOD.md "ws-deflate").
WS_DEFLATE_BENCH_ARGS ?=
bench-ws-deflate: lib examples | bench-deps
	node bench/ws_deflate_bench.js --build $(BUILD) $(WS_DEFLATE_BENCH_ARGS)

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

# TLS handshakes/s, full and resumed, ECDSA P-256 and RSA-2048: echo-server
# against nginx on the same certificate and cipher suite (bench/METHOD.md "tls").
#   make bench-tls TLS_BENCH_ARGS="--rounds 5 --certs ecdsa --modes new,reuse"
TLS_BENCH_ARGS ?=
# HTTP/2: h2load -c 20 -m 16 over h2c and h2 against nginx, h2o and echo-server
# (bench/METHOD.md "h2"); echo-server's rows say n/a when it has no HTTP/2.
#   make bench-h2 H2_BENCH_ARGS="--rounds 5 --transports h2"
H2_BENCH_ARGS ?=
.PHONY: bench-tls bench-h2

bench-tls: lib examples
	$(PYTHON) bench/tls_handshake.py --out $(BUILD) $(TLS_BENCH_ARGS)

bench-h2: lib examples
	$(PYTHON) bench/h2_bench.py --out $(BUILD) $(H2_BENCH_ARGS)
