-- echo.lua - the echo contract of examples/echo_server.c, in Lua.
--
--   luajit echo.lua [--port N | --listen-fd N] [--threads N] [--busy-us N] [--routes N]
--                   [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]
--                   [--max-body N] [--max-header-bytes N] [--shed 0|1] [--reuseport]
--                   [--cert FILE --key FILE [--ca FILE | --ca-optional FILE]]
--                   [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS]
--                   [--access-log common|combined|json] [--drain-ms N] [--no-metrics-latency]
--
-- Prints "listening on PORT" once ready. POST|PUT /echo answers the body
-- byte for byte; /ws echoes WebSocket messages when the library has
-- WebSocket support; POST /upload parses a multipart/form-data body while it
-- streams in and answers one JSON object per part (name, filename,
-- content_type, size, sha256), 400 for a malformed body, 415 for another
-- type; GET /sse?n=N sends N server-sent events with data 0..N-1, then ends;
-- GET /metrics answers the metrics in the Prometheus text format, GET
-- /healthz "ok", GET /readyz "ready" (503 "draining" once a drain started);
-- everything else gets a JSON description of the request: method, path,
-- query, body_len, the client's peer and peer_port, and "front" (the load
-- balancer's address) when a PROXY protocol header named the client.
-- With --cert and --key it serves https and wss instead of http and ws (the
-- description then adds "sni" and "subject"); --ca asks for client
-- certificates signed by that CA (--ca-optional lets clients without one in),
-- and the description carries the verified client subject.
-- Behind a load balancer: --proxy-protocol makes every connection start
-- with a PROXY protocol header (v1 or v2); --proxy-from lists the fronts
-- allowed to connect; --allow and --deny are client address lists
-- ("10.0.0.0/8, ::1"). --reuseport lets several processes bind the port;
-- --listen-fd N serves the listening socket N; with neither --port nor
-- --listen-fd, sockets passed by systemd socket activation (LISTEN_FDS) are
-- served, else port 8080. --access-log writes one line per request to
-- stdout after the "listening on" line. --no-metrics-latency turns the
-- latency histograms off; --shed 0 refuses new connections at --max-conns
-- instead of closing idle ones for room.
-- SIGTERM/SIGINT drain, as the C server does: in-flight requests finish
-- (--drain-ms, default 5000, at most), then it exits 0 (the library handles
-- the signal: LuaJIT cannot run Lua in a signal handler).

-- Find nanosrv.lua next to this directory when run from a source tree.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/examples/[^/]*$")) or "."
package.path = here .. "/?.lua;" .. package.path

local ffi = require("ffi")
local nanosrv = require("nanosrv")
local sha256 = dofile(here .. "/examples/sha256.lua")

local flags = { port = 8080, threads = 0, ["busy-us"] = 0, routes = 0, ["drain-ms"] = 5000 }
local lib_opts = { ["request-timeout-ms"] = true, ["idle-timeout-ms"] = true, ["max-conns"] = true,
                   ["max-body"] = true, ["max-header-bytes"] = true, shed = true }
local files = { cert = "tls_cert_file", key = "tls_key_file", ca = "tls_ca_file", ["ca-optional"] = "tls_ca_file" }
local lists = { ["proxy-from"] = "proxy_from", allow = "allow", deny = "deny" }
local ACCESS = { common = true, combined = true, json = true }
local opts, listen_opts, port_given, listen_fd, access = {}, {}, false, nil, nil
local USAGE = "usage: echo.lua [--port N | --listen-fd N] [--threads N] [--busy-us N] [--routes N]\n" ..
              "       [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]\n" ..
              "       [--max-body N] [--max-header-bytes N] [--shed 0|1] [--reuseport]\n" ..
              "       [--cert FILE --key FILE [--ca FILE | --ca-optional FILE]]\n" ..
              "       [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS]\n" ..
              "       [--access-log common|combined|json] [--drain-ms N] [--no-metrics-latency]\n" ..
              "Without --port or --listen-fd it serves the sockets of systemd socket activation\n" ..
              "(LISTEN_FDS) when there are some, else port 8080.\n"
local function usage()
    io.stderr:write(USAGE)
    os.exit(2)
end
do
    local i = 1
    while i <= #arg do
        local name, v = (arg[i]:match("^%-%-(.+)$")), arg[i + 1]
        if name == "help" or arg[i] == "-h" then
            io.stdout:write(USAGE)
            os.exit(0)
        elseif name == "proxy-protocol" then listen_opts.proxy_protocol = true; i = i - 1
        elseif name == "reuseport" then opts.reuseport = true; i = i - 1
        elseif name == "no-metrics-latency" then opts.metrics_latency = false; i = i - 1
        elseif name and v and lists[name] then listen_opts[lists[name]] = v
        elseif name == "access-log" and v and ACCESS[v] then access = v
        elseif name and v and files[name] then
            if opts[files[name]] then usage() end -- --ca and --ca-optional are one choice
            opts[files[name]] = v
            if name == "ca" then opts.tls_verify_client = "required" end
            if name == "ca-optional" then opts.tls_verify_client = "optional" end
        elseif name == "listen-fd" and v and tonumber(v) then listen_fd = tonumber(v)
        elseif not name or not v or not (flags[name] or lib_opts[name]) or not tonumber(v) then
            usage()
        elseif flags[name] then
            flags[name] = tonumber(v)
            if name == "port" then port_given = true end
        else opts[name:gsub("-", "_")] = tonumber(v) end
        i = i + 2
    end
end
if (port_given and listen_fd) or flags["drain-ms"] < 0 then usage() end
if (opts.tls_cert_file == nil) ~= (opts.tls_key_file == nil) or (opts.tls_ca_file and not opts.tls_cert_file) then
    io.stderr:write("echo.lua: --cert and --key go together (and --ca needs them)\n")
    os.exit(2)
end
if flags.threads > 0 then opts.threads = flags.threads end

if access then opts.access_log = access end
local ok, srv = pcall(nanosrv.server, opts)
if not ok then
    io.stderr:write("echo.lua: ", tostring(srv), "\n")
    os.exit(2)
end

-- --busy-us: burn CPU like a real handler would (monotonic clock, as in C).
local spin = function() end
if flags["busy-us"] > 0 then
    ffi.cdef [[
        struct nsv_echo_timespec { long tv_sec; long tv_nsec; };
        int clock_gettime(int clk, struct nsv_echo_timespec *ts);
    ]]
    local ts, us = ffi.new("struct nsv_echo_timespec"), flags["busy-us"]
    local function now_us()
        ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
        return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
    end
    spin = function()
        local t0 = now_us()
        while now_us() - t0 < us do end
    end
end

-- JSON string escaping exactly as echo_server.c: '"' and '\' backslashed,
-- bytes below 0x20 as \u00XX, everything else verbatim. The "needs
-- escaping?" test is one strcspn call rather than a Lua loop: an inner loop
-- would split the JIT trace of the request path. strcspn also stops at an
-- embedded NUL, which needs escaping too (Lua strings end with a NUL).
ffi.cdef "size_t strcspn(const char *s, const char *reject);"
local SPECIAL, ESC = '"\\', { ['"'] = '\\"', ["\\"] = "\\\\", ["\0"] = "\\u0000" }
for b = 1, 0x1f do
    SPECIAL = SPECIAL .. string.char(b)
    ESC[string.char(b)] = string.format("\\u%04x", b)
end
local strcspn = ffi.C.strcspn
local function json_str(s)
    if strcspn(s, SPECIAL) == #s then return '"' .. s .. '"' end
    return '"' .. s:gsub('[%z\1-\31"\\]', ESC) .. '"'
end

local OCTET = "Content-Type: application/octet-stream\r\n"
local JSON = "Content-Type: application/json\r\n"

local function echo(req, res)
    spin()
    res:send(200, req.body, OCTET)
end
srv:route("POST", "/echo", echo)
srv:route("PUT", "/echo", echo)

local function describe(req, res)
    spin()
    -- The C server caps path and query at 8192 bytes in its description.
    local path, query = req.path, req.query
    if #path > 8192 then path = path:sub(1, 8192) end
    if #query > 8192 then query = query:sub(1, 8192) end
    local tls, front = "", ""
    if req.tls then
        local t = req.tls
        tls = ',"sni":' .. json_str(t.sni) .. ',"subject":' .. json_str(t.subject)
    end
    local proxy = req.proxy -- the client's address came in a PROXY protocol header
    if proxy then front = ',"front":' .. json_str(proxy.front:sub(1, 128)) end
    res:send(200, '{"method":' .. json_str(req.method) .. ',"path":' .. json_str(path) ..
                  ',"query":' .. json_str(query) .. ',"body_len":' .. req.body_len .. tls ..
                  ',"peer":' .. json_str(req.peer:sub(1, 128)) .. ',"peer_port":' .. req.port .. front .. '}', JSON)
end
srv:fallback(describe)
for i = 0, flags.routes - 1 do srv:route("GET", "/dummy/" .. i .. "/:id", describe) end

-- POST /upload: the body streams in (the handler runs in a coroutine and
-- waits for each piece), every part is hashed as it passes, so a file of
-- any size costs one piece of memory. Answers and texts as echo-server's.
local multipart = nanosrv.multipart()
local TEXT = "Content-Type: text/plain\r\n"
local function upload(req, res)
    local p, _, status = multipart.new(req:header("content-type"), { max_parts = 10000 })
    if not p then
        return res:send(status, status == 415 and "not multipart/form-data\n" or "bad multipart boundary\n", TEXT)
    end
    if not req.streamed then return res:send(400, "empty multipart body\n", TEXT) end
    local out, sum, size = {}, nil, 0
    for chunk in req:body_chunks() do
        local ok, recs = pcall(p.feed, p, chunk)
        if not ok then
            if not nanosrv.is_http_error(recs) then error(recs, 0) end
            return res:send(400, recs.message .. "\n", TEXT)
        end
        for k = 1, #recs do
            local r = recs[k]
            if r.type == "data" then
                sum:update(r.data)
                size = size + #r.data
            elseif r.type == "part" then
                out[#out + 1] = '{"name":' .. json_str(r.name) ..
                                ',"filename":' .. (r.filename and json_str(r.filename) or "null") ..
                                ',"content_type":' .. (r.content_type and json_str(r.content_type) or "null")
                sum, size = sha256.new(), 0
            elseif r.type == "part_end" then
                out[#out] = out[#out] .. string.format(',"size":%d,"sha256":"%s"}', size, sum:hex())
            end
        end
    end
    if not pcall(p.finish, p) then return res:send(400, "missing final boundary\n", TEXT) end
    res:send(200, "[" .. table.concat(out, ",") .. "]", JSON)
end
srv:route("POST", "/upload", upload, { stream_body = true })

-- GET /sse?n=N: N events, paced by the client (send waits while it is behind);
-- n is 0 .. 1e7, digits only, else 400, as in the C echo-server.
local SSE_MAX = 10000000
srv:route("GET", "/sse", function(req, res)
    local q = req:query_args().n
    if type(q) == "table" then q = q[1] end -- repeated: the first, as the C echo-server
    local n = type(q) == "string" and #q <= 9 and q:match("^%d+$") and tonumber(q)
    if not n or n > SSE_MAX then
        return res:send(400, "n must be a number of events, 0.." .. SSE_MAX .. "\n", TEXT)
    end
    local sse = res:sse()
    for i = 0, n - 1 do
        if not sse:send { data = tostring(i) } then return end -- the client left
    end
    sse:close()
end, { coroutine = true })

if nanosrv.features.websocket then
    srv:websocket("/ws", { message = function(ws, data, opcode) ws:send(data, opcode) end })
end

-- Operations: the Prometheus text, liveness, and readiness that fails from
-- the drain's start (for the keep-alive connections a front still holds).
local PROM = "Content-Type: text/plain; version=0.0.4\r\n"
srv:route("GET", "/metrics", function(_, res)
    local mok, text = pcall(srv.metrics_text, srv)
    if not mok then return res:send(500, tostring(text), TEXT) end
    res:send(200, text, PROM)
end)
srv:route("GET", "/healthz", function(_, res) res:send(200, "ok", TEXT) end)
srv:route("GET", "/readyz", function(_, res)
    if srv:draining() then return res:send(503, "draining", TEXT) end
    res:send(200, "ready", TEXT)
end)

-- The sockets: --listen-fd N, else systemd's when neither flag names one,
-- else a socket of our own on the port.
local scheme = opts.tls_cert_file and "https" or "http"
-- The listener options come after, so that a bad address list exits 2
-- (a usage error) and a port in use 1, as in the C server.
local lok, port, lid
local function inherited() -- malformed LISTEN_* variables are a usage error
    local iok, fds = pcall(nanosrv.inherited_fds, false)
    if not iok then
        io.stderr:write("echo.lua: LISTEN_FDS: ", tostring(fds), "\n")
        os.exit(2)
    end
    return #fds
end
if listen_fd then
    lok, port, lid = pcall(srv.listen_fd, srv, listen_fd, scheme .. "://0.0.0.0:0")
elseif not port_given and inherited() > 0 then
    local got
    lok, got = pcall(srv.listen_inherited, srv, scheme .. "://0.0.0.0:0")
    if lok then
        port, lid = got[1].port, {}
        for k, l in ipairs(got) do lid[k] = l.id end
    else
        port = got
    end
else
    lok, port, lid = pcall(srv.listen, srv, scheme .. "://0.0.0.0:" .. flags.port)
end
if not lok then
    io.stderr:write("echo.lua: ", tostring(port), "\n")
    os.exit(1)
end
for _, id in ipairs(type(lid) == "table" and lid or { lid }) do
    local sok, err = pcall(srv.set_listener, srv, id, listen_opts)
    if not sok then
        io.stderr:write("echo.lua: ", tostring(err), "\n")
        os.exit(2)
    end
end
srv:drain_on_signal({ "SIGINT", "SIGTERM" }, flags["drain-ms"])
io.stdout:write("listening on ", port, "\n")
io.stdout:flush()
srv:run()
srv:close()
os.exit(0)
