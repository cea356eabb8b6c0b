-- The WebSocket client: srv:websocket(url) (waits in a coroutine) and
-- srv:ws_connect(url, opts, handlers) against the library's own WebSocket
-- server in this process and a python3-websockets server in a child, and
-- its failures: refused, an answer without 101, no answer in time, bad
-- arguments.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")
local E = nanosrv.errors

-- Certificates for wss:// (a private CA, a server certificate for localhost).
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

local tls = nanosrv.features.tls and certs
local srv = nanosrv.server(tls and { tls_cert_file = p("srv.crt"), tls_key_file = p("srv.key"),
                                     tls_client_ca_file = p("ca.crt") } or {})
-- Other servers of the test (a sharded one, one without the CA): each
-- wait polls them all.
local others = {}
local port = srv:listen("http://127.0.0.1:0")
local TLS_PORT = tls and srv:listen("https://127.0.0.1:0")
local base = "ws://127.0.0.1:" .. port

-- The in-process peer: an echo with a few commands.
local seen = {}
srv:websocket("/echo", {
    open = function(_, req)
        seen.token, seen.path, seen.query = req:header("x-token"), req.path, req.query
    end,
    message = function(ws, data, op)
        if data == "quit" then return ws:close(4001, "done") end
        local n = data:match("^burst:(%d+)$")
        if n then
            for i = 1, tonumber(n) do ws:send(string.format("%04d", i) .. string.rep(".", 996)) end
            return
        end
        if data == "slow" then srv:sleep(1) end
        ws:send(data, op)
    end,
    close = function(_, code, reason) seen.close = code .. " " .. reason end,
})
srv:route("GET", "/plain", function(_, res) res:send(200, "not a websocket") end)
local SILENT = srv:listen("tcp://127.0.0.1:0", { on_data = function() end, on_eof = function() end })
local REFUSED
do
    local s = nanosrv.server()
    REFUSED = s:listen("http://127.0.0.1:0")
    s:close()
end

-- Poll until cond() holds (bounded); returns whether it did.
local function poll_until(cond, limit_ms)
    local deadline = nanosrv.millis() + (limit_ms or 5000)
    while not cond() and nanosrv.millis() < deadline do
        srv:poll(#others > 0 and 1 or 5)
        for _, o in ipairs(others) do o:poll(1) end
    end
    return cond() and true or false
end

-- fn in a light thread while this loop polls (bounded); its checks are
-- TAP lines, and a raise or a hang is one failing line.
local function run(name, fn, limit_ms, on)
    local done, err = false, nil
    (on or srv):spawn(function()
        local ok, e = xpcall(fn, debug.traceback)
        done, err = true, not ok and e or nil
    end)
    poll_until(function() return done end, limit_ms or 10000)
    T.ok(done and not err, name .. " ran to its end", err or (not done and "did not end in time"))
end

if not T.ok(nanosrv.features.websocket, "the library has WebSocket functions") then T.done() end

---------------------------------------------------------------------------
-- The coroutine form against the library's own server.
---------------------------------------------------------------------------

run("coroutine form", function()
    local ws, err = srv:websocket(base .. "/echo?room=1", { headers = { ["X-Token"] = "t1" }, timeout = 3000 })
    if not T.ok(ws, "srv:websocket(url) opens", err) then return end
    T.is(seen.token, "t1", "its headers reach the server")
    T.is(seen.path .. "?" .. seen.query, "/echo?room=1", "path and query as given")
    T.ok(ws.opened and ws.status == 101 and ws.tls == false and ws.protocol == nil,
         "open: status 101, no TLS, no subprotocol")
    T.ok(type(ws.headers) == "table" and type(ws.headers["sec-websocket-accept"]) == "string",
         "the 101's headers, by lower-case name")
    T.ok(ws:send("hello"), "send text")
    local d, typ = ws:receive()
    T.ok(d == "hello" and typ == "text", "receive: the echo, text", tostring(d) .. " " .. tostring(typ))
    ws:send("\0\1\255", "binary")
    d, typ = ws:receive()
    T.ok(d == "\0\1\255" and typ == "binary", "binary keeps every byte and its type")
    local big = string.rep("abcdefgh", 80000)
    ws:send(big, nanosrv.BINARY)
    d = ws:receive()
    T.ok(d == big, "a 640 KB message both ways", d and #d)
    for i = 1, 100 do ws:send("m" .. i) end
    local order = true
    for i = 1, 100 do
        d = ws:receive()
        if d ~= "m" .. i then order = false end
    end
    T.ok(order, "100 messages come back in order")

    ws:settimeout(30)
    d, err = ws:receive()
    T.ok(d == nil and err == "timeout", "receive with nothing coming: nil, \"timeout\"", tostring(err))
    ws:settimeout(nil)
    ws:send("still here")
    T.is(ws:receive(), "still here", "the socket is usable after a receive timeout")

    -- lua-resty-websocket's names
    T.is(ws:send_text("resty"), 5, "send_text returns the bytes")
    local data, ftyp, ferr = ws:recv_frame()
    T.ok(data == "resty" and ftyp == "text" and ferr == nil, "recv_frame: data, typ")

    -- The reader falls behind: past `buffer` unread bytes reading pauses,
    -- nothing is lost.
    local slow = assert(srv:websocket(base .. "/echo", { buffer = 4096 }))
    slow:send("burst:40")
    srv:sleep(50)
    local all = true
    for i = 1, 40 do
        d = slow:receive()
        if not d or d:sub(1, 4) ~= string.format("%04d", i) then all = false end
    end
    T.ok(all, "40 KB that waited unread all arrive, in order")
    T.ok(slow.pauses >= 1, "reading was paused while they waited", slow.pauses)
    slow:close()

    -- The server closes.
    ws:send("quit")
    d, typ, err = ws:receive()
    T.ok(d == "done" and typ == "close" and err == 4001, "the server's close: reason, \"close\", code",
         string.format("%s %s %s", tostring(d), tostring(typ), tostring(err)))
    d, err = ws:receive()
    T.ok(d == nil and err == "closed", "then nil, \"closed\"")
    T.ok(poll_until(function() return ws.closed end, 3000), "ws.closed once the connection is gone")
    local ok, why = ws:send("late")
    T.ok(ok == false and why == "closed", "a late send: false, \"closed\"")
end)

run("coroutine form: the client closes", function()
    seen.close = nil
    local ws, err = srv:websocket(base .. "/echo")
    if not T.ok(ws, "opens without options", err) then return end
    T.ok(ws:close(4002, "bye now"), "close(code, reason)")
    local ok, why = ws:close()
    T.ok(ok == false and why == "closed", "a second close: false, \"closed\"")
    local d, typ, code = ws:receive()
    T.ok(d == "bye now" and typ == "close" and code == 4002, "receive reports our close",
         string.format("%s %s %s", tostring(d), tostring(typ), tostring(code)))
    for _ = 1, 400 do
        if seen.close then break end
        srv:sleep(5)
    end
    T.is(seen.close, "4002 bye now", "the server's close handler gets our code and reason")
end)

---------------------------------------------------------------------------
-- The callback form.
---------------------------------------------------------------------------

do
    seen.close = nil
    local got = {}
    local ws = srv:ws_connect(base .. "/echo", { headers = "X-Token: t2\r\n" }, {
        open = function(w)
            got[#got + 1] = "open " .. tostring(w.status)
            w:send("slow")
        end,
        message = function(w, data, typ)
            srv:sleep(1) -- handlers run in coroutines: they may wait
            got[#got + 1] = "message " .. data .. " " .. typ
            w:close(1000, "enough")
        end,
        close = function(_, code, reason) got[#got + 1] = "close " .. code .. " " .. reason end,
        error = function(_, msg) got[#got + 1] = "error " .. msg end,
    })
    T.ok(ws and ws.opened == false, "ws_connect returns the socket at once")
    poll_until(function() return got[3] ~= nil and seen.close ~= nil end)
    T.is(table.concat(got, " | "), "open 101 | message slow text | close 1000 enough",
         "open, message (type by name), close, in order")
    T.is(seen.token, "t2", "a header block reaches the server")
    T.is(seen.close, "1000 enough", "the server saw our close")
    local r, err = pcall(ws.receive, ws)
    T.ok(not r and tostring(err):find("srv:ws_connect gives messages to its handlers", 1, true),
         "receive is for the coroutine form", err)
end

do -- a handler that raises closes the socket with 1011
    seen.close = nil
    local closed
    local old = io.stderr
    io.stderr = { write = function() end, flush = function() end } -- the expected log line
    srv:ws_connect(base .. "/echo", nil, {
        open = function(w) w:send("x") end,
        message = function() error("boom") end,
        close = function(_, code) closed = code end,
    })
    poll_until(function() return closed and seen.close end)
    io.stderr = old
    T.ok(closed == 1011 and seen.close == "1011 ", "a raising message handler closes with 1011",
         tostring(closed) .. " / " .. tostring(seen.close))
end

---------------------------------------------------------------------------
-- Failures
---------------------------------------------------------------------------

run("failures (coroutine form)", function()
    local ws, err, code = srv:websocket("ws://127.0.0.1:" .. REFUSED .. "/")
    T.ok(ws == nil and code == E.ECONNREFUSED and tostring(err):find("NSV_ECONNREFUSED", 1, true),
         "refused: nil, err, ECONNREFUSED", err)
    ws, err, code = srv:websocket(base .. "/plain")
    T.ok(ws == nil and code == E.EPARSE and tostring(err):find("200", 1, true),
         "an answer without 101: nil, err naming the status, EPARSE", err)
    ws, err, code = srv:websocket(base .. "/nowhere")
    T.ok(ws == nil and code == E.EPARSE and tostring(err):find("404", 1, true), "a 404 answer: EPARSE", err)
    local t0 = nanosrv.millis()
    ws, err, code = srv:websocket("ws://127.0.0.1:" .. SILENT .. "/", { timeout = 200 })
    T.ok(ws == nil and code == E.ETIMEDOUT and tostring(err):find("timeout option", 1, true),
         "a server that never answers: ETIMEDOUT after the timeout option", err)
    T.ok(nanosrv.millis() - t0 < 5000, "the timeout ended the wait")
    srv:set("http_head_timeout_ms", 200)
    ws, err, code = srv:websocket("ws://127.0.0.1:" .. SILENT .. "/")
    srv:set("http_head_timeout_ms", 30000)
    T.ok(ws == nil and code == E.ETIMEDOUT, "... or after the server's http_head_timeout_ms", err)
    ws, err, code = srv:websocket("ws://127.0.0.1:1/#frag")
    T.ok(ws == nil and code == E.EURL, "a URL with a fragment: nil, err, EURL", err)
end)

do
    local got = {}
    srv:ws_connect("ws://127.0.0.1:" .. REFUSED .. "/", { timeout = 3000 }, {
        open = function() got[#got + 1] = "open" end,
        error = function(_, msg, code) got[#got + 1] = "error " .. tostring(code == E.ECONNREFUSED) end,
        close = function(_, code) got[#got + 1] = "close " .. code end,
    })
    poll_until(function() return got[2] ~= nil end)
    T.is(table.concat(got, " | "), "error true | close 1006", "callback form, refused: error, then close 1006")
    got = {}
    local ws = srv:ws_connect("ws://127.0.0.1:" .. SILENT .. "/", { timeout = 100 }, {
        error = function(_, msg, code) got[#got + 1] = "error " .. tostring(code == E.ETIMEDOUT) end,
        close = function(_, code) got[#got + 1] = "close " .. code end,
    })
    poll_until(function() return got[2] ~= nil end)
    T.is(table.concat(got, " | "), "error true | close 1006", "callback form, no answer in time: error, then close")
    T.ok(ws.closed and ws.error and ws.error:find("NSV_ETIMEDOUT", 1, true), "ws.closed, ws.error", ws.error)
end

T.raises("needs a coroutine", "srv:websocket(url) outside a coroutine raises", srv.websocket, srv, base .. "/echo")
T.raises("bad argument #1 to 'ws_connect' %(url must be a string%)", "a url that is not a string",
         srv.ws_connect, srv, 5, {}, {})
T.raises("bad argument #2 to 'ws_connect' %(unknown option 'bogus'%)", "an unknown option",
         srv.ws_connect, srv, base, { bogus = 1 }, {})
T.raises("bad argument #3 to 'ws_connect' %(table of handlers expected%)", "no handlers",
         srv.ws_connect, srv, base)
T.raises("bad argument #3 to 'ws_connect' %(unknown handler 'on_message'%)", "an unknown handler",
         srv.ws_connect, srv, base, {}, { on_message = print })
T.raises("header 'X%-A' value contains CR", "a header value with CR", srv.ws_connect, srv, base,
         { headers = { ["X-A"] = "a\r\nb" } }, {})
T.raises("bad argument #2 to 'ws_connect' %(.*NSV_EINVAL", "a header the library writes itself (Upgrade)",
         srv.ws_connect, srv, base, { headers = { Upgrade = "x" } }, {})
T.raises("timeout must be a number", "a bad timeout", srv.ws_connect, srv, base, { timeout = -1 }, {})
do
    local ok, err = pcall(function() srv:ws_connect(base, { bogus = 1 }, {}) end)
    T.ok(not ok and tostring(err):find("ws_client.lua:%d+: bad argument"), "errors name the caller's line", err)
end

---------------------------------------------------------------------------
-- A sender whose peer reads slowly: the server's ws:send waits (in its
-- coroutine) while the output is full, instead of failing.
---------------------------------------------------------------------------

do
    local fsrv = nanosrv.server { max_output = 131072 }
    local fport = fsrv:listen("http://127.0.0.1:0")
    local sent = {}
    fsrv:websocket("/flood", {
        message = function(ws, data)
            local n = tonumber(data)
            local piece = string.rep("z", 65532)
            for i = 1, n do
                local ok, err = ws:send(string.format("%04d", i) .. piece, "binary")
                if not ok then sent.err = err; break end
                sent.n = i
            end
            sent.waits = ws.send_waits
        end,
    })
    others[#others + 1] = fsrv
    run("a slow reader", function()
        local ws, err = srv:websocket("ws://127.0.0.1:" .. fport .. "/flood", { buffer = 65536 })
        if not T.ok(ws, "opens", err) then return end
        ws:send("256") -- 16 MiB, far past max_output and the socket buffers
        srv:sleep(300)
        local all = true
        for i = 1, 256 do
            local d = ws:receive()
            if not d or #d ~= 65536 or d:sub(1, 4) ~= string.format("%04d", i) then all = false; break end
        end
        T.ok(all, "256 messages of 64 KiB arrive whole and in order")
        T.ok(sent.n == 256 and not sent.err, "every send returned true", sent.err)
        T.ok((sent.waits or 0) > 0, "the sender waited for room (ws.send_waits)", sent.waits)
        ws:close()
    end, 20000)
    others[#others] = nil
    fsrv:close()
end

-- A peer that sends faster than the handler works: past 64 queued
-- messages the socket stops being read until the handler catches up.
do
    local order, pauses, count = true, nil, 0
    srv:websocket("/slowhandler", {
        message = function(ws, data)
            srv:sleep(1)
            count = count + 1
            if data ~= "q" .. count then order = false end
            pauses = ws.queue_pauses
            if count == 200 then ws:send("done") end
        end,
    })
    run("a fast sender", function()
        local ws, err = srv:websocket(base .. "/slowhandler")
        if not T.ok(ws, "opens", err) then return end
        for i = 1, 200 do ws:send("q" .. i) end
        T.is(ws:receive(), "done", "the handler got all 200")
        ws:close()
    end, 20000)
    T.ok(order, "in order")
    T.ok((pauses or 0) >= 1, "reading paused while they queued (ws.queue_pauses)", pauses)
end

-- ws:pause() / ws:resume() on the server's socket.
do
    local sws, got = nil, {}
    srv:websocket("/pausable", {
        open = function(ws) sws = ws; T.ok(ws:pause() and ws.paused, "server socket: pause") end,
        message = function(_, data) got[#got + 1] = data end,
    })
    local cws = srv:ws_connect(base .. "/pausable", nil, { open = function(w) w:send("while paused") end })
    poll_until(function() return cws.opened end)
    for _ = 1, 20 do srv:poll(2) end
    T.is(#got, 0, "nothing is read while paused")
    T.ok(sws and sws:resume() and not sws.paused, "resume")
    poll_until(function() return got[1] ~= nil end)
    T.is(got[1], "while paused", "what waited is read after resume")
    cws:close()
end

---------------------------------------------------------------------------
-- wss://, a sharded server
---------------------------------------------------------------------------

if tls then
    run("wss://", function()
        local ws, err = srv:websocket("wss://localhost:" .. TLS_PORT .. "/echo", { timeout = 5000 })
        if not T.ok(ws, "wss:// opens, the server verified against tls_client_ca_file", err) then return end
        T.ok(ws.tls, "ws.tls")
        ws:send("over tls")
        T.is(ws:receive(), "over tls", "echo over TLS")
        ws:close()
    end)
    local plain = nanosrv.server {}
    others[#others + 1] = plain
    run("wss:// unverified", function()
        local ws, err, code = plain:websocket("wss://localhost:" .. TLS_PORT .. "/echo", { timeout = 5000 })
        T.ok(ws == nil and code == E.ETLS, "a server the CA list does not vouch for: nil, err, ETLS", err)
    end, nil, plain)
    others[#others] = nil
    plain:close()
else
    T.skip("wss://", "the library is built without TLS")
end

do
    local sharded = nanosrv.server { threads = 2 }
    others[#others + 1] = sharded
    run("sharded server as the client", function()
        local ws, err = sharded:websocket(base .. "/echo", { timeout = 5000 })
        if not T.ok(ws, "a sharded server opens a WebSocket", err) then return end
        for i = 1, 20 do ws:send("s" .. i) end
        local all = true
        for i = 1, 20 do
            if ws:receive() ~= "s" .. i then all = false end
        end
        T.ok(all, "20 messages echoed in order through a sharded client")
        ws:close(1000, "sharded bye")
        local d, typ, code = ws:receive()
        T.ok(typ == "close" and code == 1000, "its close", tostring(d) .. " " .. tostring(code))
    end, nil, sharded)
    others[#others] = nil
    sharded:close()
end

---------------------------------------------------------------------------
-- Against python3-websockets (a child process).
---------------------------------------------------------------------------

local peer, line = T.start("/usr/bin/python3 " .. T.dir .. "/support/ws_peer.py server")
if not T.ok(peer, "the python3-websockets server starts", line) then
    srv:close()
    T.done()
end
local py = "ws://127.0.0.1:" .. peer.port

run("coroutine form against python3-websockets", function()
    local ws, err = srv:websocket(py .. "/protocol", { protocols = { "v2.chat", "chat" }, timeout = 5000 })
    if not T.ok(ws, "opens", err) then return end
    T.is(ws.protocol, "chat", "ws.protocol: the subprotocol the server chose")
    T.is(ws:receive(), "chat", "... the one the server says it chose")
    ws:close()
    ws, err = srv:websocket(py .. "/headers", { headers = { { "X-Token", "abc" } }, protocols = "chat" })
    if not T.ok(ws, "opens with a list of header pairs", err) then return end
    T.is(ws:receive(), "x-token=abc", "the header reached the server")
    local blob = {}
    for i = 0, 255 do blob[#blob + 1] = string.char(i) end
    blob = table.concat(blob):rep(4096) -- 1 MiB
    ws:send(blob, "binary")
    local d, typ = ws:receive()
    T.ok(d == blob and typ == "binary", "1 MiB binary echoed byte for byte", d and #d)
    ws:send("héllo wörld")
    d, typ = ws:receive()
    T.ok(d == "héllo wörld" and typ == "text", "UTF-8 text echoed")
    ws:send("close-me")
    d, typ, err = ws:receive()
    T.ok(d == "bye" and typ == "close" and err == 4000, "the server's close: \"bye\", \"close\", 4000",
         string.format("%s %s %s", tostring(d), tostring(typ), tostring(err)))

    ws = assert(srv:websocket(py .. "/"))
    ws:close(4002, "lua bye")
    local last
    for _ = 1, 100 do
        local probe = srv:websocket(py .. "/last-close")
        last = probe and probe:receive()
        if probe then probe:close() end
        if last == "4002 lua bye" then break end
        srv:sleep(10)
    end
    T.is(last, "4002 lua bye", "the server saw our close code and reason")
end)

do
    local got = {}
    srv:ws_connect(py .. "/", {}, {
        open = function(w) w:send("one"); w:send("two") end,
        message = function(w, data)
            got[#got + 1] = data
            if #got == 2 then w:send("close-me") end
        end,
        close = function(_, code, reason) got[#got + 1] = code .. " " .. reason end,
    })
    poll_until(function() return got[3] ~= nil end)
    T.is(table.concat(got, " | "), "one | two | 4000 bye", "callback form against python3-websockets")
end

T.stop(peer)
srv:close()
os.execute("rm -rf " .. DIR)
T.done()
