-- The HTTP client (nanosrv/http.lua): srv:http_request (callbacks) and
-- srv:fetch (coroutines) against routes of the same loop, a separate
-- echo-server process (plain and https with a private CA), Python's
-- http.server and a silent listener: headers, 8 MiB bodies exact,
-- streamed uploads with backpressure, 20 concurrent fetches from 20
-- handlers, errors (refused, timeouts, URL, header injection), pause and
-- resume, cancel, and streamed responses read slowly.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")
local E = nanosrv.errors

local BUILD = nanosrv.library_path:match("^(.*)/[^/]*$") or "."
local ECHO_BIN = BUILD .. "/echo-server"

-- Certificates for https (a private CA, a server certificate for 127.0.0.1).
local DIR = os.tmpname()
os.remove(DIR)
assert(os.execute("mkdir -p " .. DIR) == 0)
local function p(name) return DIR .. "/" .. name end
local function sh(cmd) return os.execute(cmd .. " >/dev/null 2>&1") == 0 end
local EC = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
local certs = sh(("openssl req -x509 %s -keyout %s -out %s -subj /CN=Test-CA -days 2"):format(EC, p("ca.key"), p("ca.crt")))
    and sh(("openssl req %s -keyout %s -out %s -subj /CN=localhost"):format(EC, p("srv.key"), p("srv.csr")))
    and sh("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' >" .. p("srv.ext"))
    and sh(("openssl x509 -req -in %s -CA %s -CAkey %s -CAcreateserial -out %s -days 2 -extfile %s"):format(
        p("srv.csr"), p("ca.crt"), p("ca.key"), p("srv.crt"), p("srv.ext")))
T.ok(certs, "certificates made with openssl")
local f = io.open(p("file.txt"), "wb")
local FILE_BODY = string.rep("line of the file\n", 1000)
f:write(FILE_BODY)
f:close()

-- Child processes, each bounded by timeout(1) and stopped by PID.
local echo = T.start(ECHO_BIN .. " --port 0 --max-body 16777216")
T.ok(echo ~= nil, "echo-server started")
local echo_tls = T.start(ECHO_BIN .. " --port 0 --max-body 16777216 --cert " .. p("srv.crt") .. " --key " .. p("srv.key"))
T.ok(echo_tls ~= nil, "echo-server with --cert/--key started")
local py = io.popen("echo $$; exec timeout -s KILL 120 /usr/bin/python3 -u -m http.server 0 --bind 127.0.0.1 "
                    .. "--directory " .. DIR .. " 2>/dev/null", "r")
local py_pid = tonumber(py:read("*l"))
local PY = tonumber((py:read("*l") or ""):match("port (%d+)"))
T.ok(PY ~= nil, "python3 http.server started")
local ECHO, ECHO_TLS = echo and echo.port or 1, echo_tls and echo_tls.port or 1

-- The server under test, and a second one with its own client options.
-- More connections per origin than the default 8: the 20 gateway handlers
-- below hold one each to the same upstream at once.
local srv = nanosrv.server { tls_client_ca_file = p("ca.crt"), idle_timeout_ms = 30000, http_conns_per_origin = 32 }
local srv2 = nanosrv.server { http_head_timeout_ms = 300, max_output = 262144 }
local PORT = srv:listen("http://127.0.0.1:0")
local BASE = "http://127.0.0.1:" .. PORT
local SILENT = srv:listen("tcp://127.0.0.1:0", { on_data = function() end, on_eof = function() end })
local REFUSED
do -- a port nothing listens on: bound, then closed
    local s = nanosrv.server()
    REFUSED = s:listen("http://127.0.0.1:0")
    s:close()
end

local function pump() srv:poll(2); srv2:poll(0) end
local function pump_until(cond, rounds)
    for _ = 1, rounds or 5000 do
        if cond() then return true end
        pump()
    end
    return cond()
end
-- Run f in a coroutine of s and pump until it ends (bounded).
local function co_run(s, fn)
    local th = s:spawn(fn)
    T.ok(pump_until(function() return th.status == "dead" end), "the test coroutine finished")
    return th:wait()
end

-- Routes of the same loop --------------------------------------------------
srv:route("GET", "/hello", function(req, res)
    res:send(200, '{"hello":"world","q":"' .. req.query .. '"}',
             { ["Content-Type"] = "application/json", ["Set-Cookie"] = { "a=1", "b=2" }, ["X-Mixed-Case"] = "yes" })
end)
srv:route("GET", "/slow/:ms", function(req, res)
    local ms = tonumber(req.params.ms)
    srv:sleep(ms)
    res:send(200, "slept " .. ms)
end)
local BIG_N = 4 * 1048576
local PIECE = string.rep("abcdefghijklmnop", 4096) -- 64 KiB
srv:route("GET", "/big", function(_, res)
    res:start(200, { ["Content-Type"] = "application/octet-stream" })
    for _ = 1, BIG_N / #PIECE do
        if not res:write(PIECE) then return end
    end
    res:finish()
end)
srv:route("GET", "/status/:n", function(req, res) res:send(tonumber(req.params.n), "status " .. req.params.n) end)
srv:route("POST", "/len", function(req, res) res:send(200, tostring(#req:read_body())) end, { stream_body = true })
-- 20 handlers that each wait for an upstream answer: the upstream here
-- only answers once all 20 have asked, so they must be waiting at once.
local waiting_for_all, MAXN = 0, 20
srv:route("GET", "/double/:n", function(req, res)
    waiting_for_all = waiting_for_all + 1
    for _ = 1, 1000 do
        if waiting_for_all >= MAXN then break end
        srv:sleep(10)
    end
    res:send(200, tostring(2 * tonumber(req.params.n)))
end)
srv:route("GET", "/gw/:n", function(req, res)
    local n = req.params.n
    local a, aerr = srv:fetch("http://127.0.0.1:" .. ECHO .. "/item?n=" .. n)
    local b, berr = srv:fetch(BASE .. "/double/" .. n, { timeout = 15000 })
    if not a or not b then return res:send(502, tostring(aerr or berr)) end
    res:send(200, n .. " " .. nanosrv.json_string(a.body, "$.query") .. " " .. b.body .. "\n")
end)

-- Callback form ---------------------------------------------------------------
do
    local got, resp, ended, errs = {}, nil, false, {}
    local q = srv:http_request({ url = BASE .. "/hello?x=1", headers = { Accept = "application/json" } }, {
        on_response = function(r) resp = r end,
        on_body = function(chunk) got[#got + 1] = chunk end,
        on_end = function() ended = true end,
        on_error = function(msg) errs[#errs + 1] = msg end,
    })
    T.ok(q and q.id ~= nil, "http_request returns a request object at once")
    T.ok(pump_until(function() return ended or #errs > 0 end), "callbacks: the request ended")
    T.is(resp and resp.status, 200, "on_response: status")
    T.is(resp and resp.reason, "OK", "on_response: reason phrase")
    T.is(resp and resp.headers["content-type"], "application/json", "headers: lower-case keys")
    T.is(resp and resp.headers["Content-Type"], "application/json", "headers: any case finds them")
    T.is(resp and resp.headers["X-MIXED-CASE"], "yes", "headers: upper case finds them too")
    local sc = resp and resp.headers["set-cookie"]
    T.ok(type(sc) == "table" and sc[1] == "a=1" and sc[2] == "b=2", "a repeated header is an array, in order")
    T.is(resp and resp:header("Set-Cookie"), "a=1, b=2", "resp:header joins repeats")
    local names = {}
    for _, kv in ipairs(resp and resp.raw or {}) do names[#names + 1] = kv[1] end
    T.like(table.concat(names, ","), "X%-Mixed%-Case", "raw: names as sent")
    T.is(table.concat(got), '{"hello":"world","q":"x=1"}', "on_body pieces make the body")
    T.ok(resp and resp.keepalive, "the connection went back to the pool (keepalive)")
    T.is(#errs, 0, "no error callback")
    T.ok(q.done and not q:cancel(), "a finished request: done, cancel returns false")
end

-- Coroutine form, same loop, Python's http.server ---------------------------
co_run(srv, function()
    local res, err = srv:fetch(BASE .. "/hello?y=2")
    T.is(res and res.status, 200, "fetch: status", err)
    T.is(res and res.body, '{"hello":"world","q":"y=2"}', "fetch: whole body")
    T.is(res and res.headers["Content-Type"], "application/json", "fetch: headers, any case")
    res = srv:fetch(BASE .. "/status/404")
    T.ok(res and res.status == 404 and res.body == "status 404", "a 404 is a response, not an error")
    res = srv:fetch(BASE .. "/status/204")
    T.ok(res and res.status == 204 and res.body == "", "204: no body")
    res, err = srv:fetch("http://127.0.0.1:" .. (PY or 1) .. "/file.txt")
    T.ok(res and res.status == 200 and res.body == FILE_BODY, "http.server: the file, exact", err)
    T.ok(res and res.http10 and not res.keepalive, "http.server answers HTTP/1.0: not kept alive")
    res = srv:fetch("http://127.0.0.1:" .. (PY or 1) .. "/missing")
    T.is(res and res.status, 404, "http.server: 404")
    res, err = srv:fetch(BASE .. "/len", { body = "12345" })
    T.ok(res and res.body == "5", "a body string: POST by default", err)
end)

-- echo-server: 8 MiB exact both ways; streamed uploads ------------------------
local BIG = {}
for i = 1, 8 * 1024 do BIG[i] = string.format("%07d", i) .. string.rep(string.char(i % 256), 1017) end
BIG = table.concat(BIG) -- 8 MiB, every KiB different
co_run(srv, function()
    local res, err = srv:fetch("http://127.0.0.1:" .. ECHO .. "/echo", { method = "PUT", body = BIG })
    T.ok(res and res.status == 200 and #res.body == #BIG, "8 MiB echoed: length", err or (res and #res.body))
    T.ok(res and res.body == BIG, "8 MiB echoed: exact bytes")
    local res2 = srv:fetch("http://127.0.0.1:" .. ECHO .. "/echo", { method = "PUT", body = BIG, max_body = 1048576 })
    T.ok(res2 == nil, "max_body smaller than the answer: nil")
    local _, merr, mcode = srv:fetch("http://127.0.0.1:" .. ECHO .. "/echo", { body = BIG, max_body = 1048576 })
    T.like(merr, "max_body %(1048576 bytes%)", "max_body: the error says so")
    T.is(mcode, E.ETOOBIG, "max_body: code NSV_ETOOBIG")
end)

-- Streamed upload from a coroutine: a body function, chunked; srv2 has a
-- small max_output, so the writer has to wait for room.
co_run(srv2, function()
    local k = 0
    local res, err = srv2:fetch("http://127.0.0.1:" .. ECHO .. "/echo", { body = function()
        k = k + 1
        if k > #BIG / 65536 then return nil end
        return BIG:sub((k - 1) * 65536 + 1, k * 65536)
    end })
    T.ok(res and res.body == BIG, "streamed upload (chunked), 8 MiB echoed exactly", err or (res and res.status .. " " .. #res.body))
    T.ok(res and res.request.write_waits > 0, "the body writer waited for room (backpressure)",
         res and res.request.write_waits)
    k = 0
    res, err = srv2:fetch(BASE .. "/len", { content_length = 3 * 65536, body = function()
        k = k + 1
        if k > 3 then return nil end
        return PIECE
    end })
    T.is(res and res.body, tostring(3 * 65536), "streamed upload with content_length", err)
    local live = 0
    T.raises("NSV_ERANGE", "a body function past content_length raises", function()
        local sent = false
        srv2:fetch(BASE .. "/len", { content_length = 3, body = function()
            if sent then return nil end
            sent = true
            return "abcdef"
        end })
    end)
    T.raises("body function exploded", "a body function that raises: its error", function()
        srv2:fetch(BASE .. "/len", { body = function() error("body function exploded", 0) end })
    end)
    for _ in pairs(srv2._httpreqs) do live = live + 1 end
    T.is(live, 0, "no request is left behind by either")
end)

-- Streamed upload with callbacks: write until busy, go on from on_writable.
do
    local total, sent, ended, body = #BIG, 0, false, {}
    local q
    local function pumpw()
        while sent < total do
            local ok = q:write(BIG:sub(sent + 1, sent + 65536))
            if not ok then return end
            sent = math.min(total, sent + 65536)
        end
        if not q.finished then q.finished = true; q:finish() end
    end
    q = srv2:http_request({ url = "http://127.0.0.1:" .. ECHO .. "/echo", method = "PUT", body_stream = true,
                            content_length = total }, {
        on_writable = function() pumpw() end,
        on_body = function(c) body[#body + 1] = c end,
        on_end = function() ended = true end,
        on_error = function(m) ended = m end,
    })
    pumpw()
    T.ok(sent < total, "write outside a coroutine: false when the output is full", sent)
    T.ok(pump_until(function() return ended end), "callback upload ended")
    T.ok(ended == true and table.concat(body) == BIG, "callback upload with content_length: echoed exactly",
         tostring(ended))
    T.raises("NSV_ESTATE", "write after finish raises with the library's reason", function()
        local q2 = srv2:http_request({ url = "http://127.0.0.1:" .. ECHO .. "/echo", method = "PUT",
                                       body_stream = true }, {})
        q2:finish()
        q2:write("late")
    end)
    T.raises("NSV_ERANGE", "writing past content_length raises", function()
        local q2 = srv2:http_request({ url = "http://127.0.0.1:" .. ECHO .. "/echo", method = "PUT",
                                       body_stream = true, content_length = 2 }, {})
        local ok, err = pcall(q2.write, q2, "abc")
        q2:cancel()
        if not ok then error(err, 0) end
    end)
end

-- 20 concurrent fetches from 20 handlers --------------------------------------
do
    local h = T.spawn("seq 1 " .. MAXN .. " | xargs -P " .. MAXN .. " -I{} curl -sS --max-time 20 " .. BASE .. "/gw/{}", 40)
    local rc, out, err = T.wait_spawned(h, pump, 30000)
    T.is(rc, 0, "20 clients through the gateway route", err)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    table.sort(lines, function(a, b) return tonumber(a:match("%d+")) < tonumber(b:match("%d+")) end)
    local want = {}
    for n = 1, MAXN do want[n] = n .. " n=" .. n .. " " .. 2 * n end
    T.is(table.concat(lines, "|"), table.concat(want, "|"), "each handler got its own answers")
    T.is(waiting_for_all, MAXN, "all 20 handlers were waiting on their fetch at once")
end

-- Errors ---------------------------------------------------------------------------
co_run(srv, function()
    local res, err, code = srv:fetch("http://127.0.0.1:" .. REFUSED .. "/")
    T.ok(res == nil and code == E.ECONNREFUSED, "refused port: nil, err, NSV_ECONNREFUSED", err)
    T.like(err, "connection refused %(NSV_ECONNREFUSED%)", "refused: the message says so")
    res, err, code = srv:fetch("http://127.0.0.1:" .. SILENT .. "/", { timeout = 200 })
    T.ok(res == nil and code == E.ETIMEDOUT, "silent server, timeout = 200: NSV_ETIMEDOUT", err)
    T.like(err, "within 200 ms %(the timeout option%)", "the per-call timeout names itself")
    res, err, code = srv:fetch("ftp://127.0.0.1/")
    T.ok(res == nil and code == E.EURL, "bad scheme: nil, err, NSV_EURL", err)
    T.like(err, "scheme 'ftp'", "bad scheme: the message names it")
    res, err = srv:fetch(BASE .. "/hello#frag")
    T.like(err, "fragment", "a fragment is refused, named")
    res, err, code = srv:fetch("http://no-such-host.invalid/")
    T.ok(res == nil and code == E.ENOTFOUND, "unknown host: NSV_ENOTFOUND", err)
end)
co_run(srv2, function()
    local res, err, code = srv2:fetch("http://127.0.0.1:" .. SILENT .. "/")
    T.ok(res == nil and code == E.ETIMEDOUT, "silent server, http_head_timeout_ms = 300: NSV_ETIMEDOUT", err)
    T.like(err, "head", "the server option's timeout is named")
end)
co_run(srv, function()
    T.raises("bad argument #1 to 'fetch' %(url string expected", "fetch(42) raises", srv.fetch, srv, 42)
    T.raises("bad argument #2 to 'fetch' %(unknown option 'tiemout'%)", "an unknown option raises",
             srv.fetch, srv, BASE, { tiemout = 1 })
    T.raises("header 'X%-Evil' value contains CR, LF", "header injection in a table value raises",
             srv.fetch, srv, BASE, { headers = { ["X-Evil"] = "a\r\nInjected: 1" } })
    T.raises("header name must be an HTTP token", "a bad header name raises",
             srv.fetch, srv, BASE, { headers = { ["X Bad"] = "1" } })
    T.raises("bad argument #2 to 'fetch' %(invalid argument %(NSV_EINVAL%): nsv_http_request: headers",
             "injection in a header block: refused by the library, its detail in the error",
             srv.fetch, srv, BASE, { headers = "X-A: 1\r\nX-B: 2\r\nEvil\r\n" })
    T.raises("Host", "Host is the library's to write", srv.fetch, srv, BASE, { headers = { Host = "evil" } })
    T.raises("Content%-Length", "Content-Length is the library's to write",
             srv.fetch, srv, BASE, { headers = { ["Content-Length"] = "5" } })
    T.raises("method", "a bad method raises", srv.fetch, srv, BASE, { method = "GE T" })
end)
T.raises("fetch needs a coroutine", "fetch outside a coroutine raises", srv.fetch, srv, BASE)
T.raises("bad argument #2 to 'http_request' %(unknown callback 'on_bdy'%)", "an unknown callback raises",
         srv.http_request, srv, { url = BASE }, { on_bdy = print })
T.raises("bad argument #1 to 'http_request' %(url must be a string%)", "http_request without url raises",
         srv.http_request, srv, {}, {})

-- Pause and resume ---------------------------------------------------------------
do
    local q, got, ended, resp = nil, {}, false, nil
    q = srv:http_request({ url = BASE .. "/big" }, {
        on_response = function(r) resp = r; q:pause() end,
        on_body = function(c) got[#got + 1] = c end,
        on_end = function() ended = true end,
        on_error = function(m) ended = m end,
    })
    T.ok(pump_until(function() return resp ~= nil end), "pause: the head came")
    local before = q.received
    for _ = 1, 100 do pump() end
    T.ok(q.paused and q.received == before and not ended, "paused: no body arrives (" .. before .. " bytes before)",
         q.received)
    T.ok(q:resume() and not q.paused, "resume")
    T.ok(pump_until(function() return ended end), "resumed: the body ends")
    local body = table.concat(got)
    T.ok(ended == true and #body == BIG_N and body == string.rep(PIECE, BIG_N / #PIECE), "resumed: 4 MiB exact",
         tostring(ended) .. " " .. #body)
end
-- A streamed fetch read slowly pauses the response (backpressure) and
-- still gets every byte.
co_run(srv, function()
    local res, err = srv:fetch(BASE .. "/big", { stream = true, buffer = 65536 })
    T.is(res and res.body, nil, "stream = true: no body field")
    local n, ok = 0, true
    for chunk in res:body_chunks() do
        if chunk:sub(1, 16) ~= PIECE:sub(1, 16) and (n % #PIECE) == 0 then ok = false end
        n = n + #chunk
        srv:sleep(1)
    end
    T.ok(n == BIG_N and ok, "streamed fetch: every byte", err or n)
    T.ok(res.pauses > 0, "reading paused while the reader was behind", res.pauses)
    local r2 = srv:fetch(BASE .. "/big", { stream = true })
    local first = r2:read_chunk()
    r2:close()
    local c, cerr = r2:read_chunk()
    T.ok(first and #first > 0 and c == nil and cerr == "closed", "res:close drops the rest", cerr)
    local r3 = srv:fetch("http://127.0.0.1:" .. SILENT .. "/", { stream = true, timeout = 100 })
    T.is(r3, nil, "stream = true and no head: nil, err")
end)

-- Cancel ------------------------------------------------------------------------
do
    local calls, marker = 0, false
    local function count() calls = calls + 1 end
    local q = srv:http_request({ url = BASE .. "/slow/50" },
                               { on_response = count, on_body = count, on_end = count, on_error = count })
    T.is(q:cancel(), true, "cancel returns true")
    T.is(q:cancel(), false, "a second cancel returns false")
    srv:http_request({ url = BASE .. "/slow/200" }, { on_end = function() marker = true end })
    T.ok(pump_until(function() return marker end), "a later request ended")
    T.is(calls, 0, "no callback runs for a cancelled request")
    local pieces, ended = 0, false
    local q2
    q2 = srv:http_request({ url = BASE .. "/big" }, {
        on_body = function() pieces = pieces + 1; q2:cancel() end,
        on_end = function() ended = true end,
    })
    marker = false
    srv:http_request({ url = BASE .. "/slow/300" }, { on_end = function() marker = true end })
    T.ok(pump_until(function() return marker end), "cancel in on_body: a later request ended")
    T.ok(pieces == 1 and not ended, "cancel in on_body: no more callbacks", pieces)
    local wrote = q2:write("x")
    T.is(wrote, nil, "write on a cancelled request: nil, 'closed'")
    -- A callback that raises is logged and its request cancelled.
    local after = 0
    srv:http_request({ url = BASE .. "/big" }, {
        on_body = function() after = after + 1; error("callback exploded") end,
        on_end = function() after = after + 100 end,
    })
    marker = false
    srv:http_request({ url = BASE .. "/slow/300" }, { on_end = function() marker = true end })
    T.ok(pump_until(function() return marker end) and after == 1, "a raising callback cancels its request", after)
end

-- Per-call timeout with callbacks ---------------------------------------------------
do
    local msg, code
    srv:http_request({ url = "http://127.0.0.1:" .. SILENT .. "/", timeout = 100 },
                     { on_error = function(m, c) msg, code = m, c end })
    T.ok(pump_until(function() return msg end) and code == E.ETIMEDOUT, "callbacks: timeout -> on_error", msg)
end

-- https: verified against the private CA; unverifiable with the system one --------
co_run(srv, function()
    local res, err = srv:fetch("https://localhost:" .. ECHO_TLS .. "/who")
    T.ok(res and res.status == 200 and res.tls, "https with tls_client_ca_file: 200 over TLS", err)
    T.like(res and res.body, '"path":"/who"', "https: the echo-server's JSON")
    res, err = srv:fetch("https://localhost:" .. ECHO_TLS .. "/echo", { body = BIG })
    T.ok(res and res.body == BIG, "https: 8 MiB echoed exactly", err or (res and res.status .. " " .. res.body:sub(1, 200)))
end)
co_run(srv2, function()
    local res, err, code = srv2:fetch("https://localhost:" .. ECHO_TLS .. "/who")
    T.ok(res == nil and code == E.ETLS, "https with the system CA bundle: NSV_ETLS", err)
end)

-- A sharded server: requests start from the polling thread and run on
-- the workers; handlers on the workers' requests fetch from the same server.
do
    local sh = nanosrv.server { threads = 2 }
    local sport = sh:listen("http://127.0.0.1:0")
    sh:route("GET", "/hi/:n", function(req, res) res:send(200, "hi " .. req.params.n) end)
    sh:route("GET", "/gw/:n", function(req, res)
        local r, err = sh:fetch("http://127.0.0.1:" .. sport .. "/hi/" .. req.params.n)
        res:send(200, r and ("got " .. r.body) or tostring(err))
    end)
    local th = sh:spawn(function()
        local good = 0
        for n = 1, 10 do
            local r = sh:fetch("http://127.0.0.1:" .. sport .. "/gw/" .. n)
            if r and r.body == "got hi " .. n then good = good + 1 end
        end
        return good
    end)
    for _ = 1, 3000 do
        if th.status == "dead" then break end
        sh:poll(5)
    end
    T.is(th.status == "dead" and th:wait(), 10, "sharded server: 10 fetches through a fetching handler")
    sh:close()
end

if echo then T.stop(echo) end
if echo_tls then T.stop(echo_tls) end
if py_pid then os.execute("kill " .. py_pid .. " 2>/dev/null") end
py:close()
os.execute("rm -rf " .. DIR)
srv:close()
srv2:close()
T.done()
