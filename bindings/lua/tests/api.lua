-- API tests: an in-process server driven from the test's own thread, talked
-- to over real loopback sockets.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

-- Loading -------------------------------------------------------------------
local ver, num, abi = nanosrv.version()
T.like(ver, "^%d+%.%d+%.%d+$", "version string")
T.ok(num >= 10000 and abi == 1, "version number and ABI")
T.ok(type(nanosrv.library_path) == "string", "library path recorded")
T.is(nanosrv.errors.ESTALE, -3, "error codes exported")

-- Server and routes ----------------------------------------------------------
local srv = nanosrv.server { max_body = 65536, request_timeout_ms = 5000, arena = 512, batch = 8 }
T.is(srv:get("max_body"), 65536, "options from the constructor")
T.is(srv:get("workers"), 0, "single loop has 0 workers")
local port = srv:listen("http://127.0.0.1:0")
T.ok(type(port) == "number" and port > 0, "listen returns the ephemeral port")
local pump = function() srv:poll(5) end

local saved = {}
srv:route("GET", "/users/:id", function(req, res)
    saved.req = req
    res:send(200, table.concat({ req.method, req.path, req.query, req.params.id, req:param(1),
                                 tostring(req.params.nope), req:header("x-test") or "-",
                                 req.peer, tostring(req.port > 0), tostring(req.keepalive) }, "|"),
             { ["Content-Type"] = "text/plain", ["X-Multi"] = { "a", "b" } })
end)
srv:route("POST", "/echo", function(req, res) res:send(201, req.body, "X-Len: " .. req.body_len .. "\r\n") end)
srv:route("GET", "/stream", function(req, res)
    res:start(200, { ["Content-Type"] = "text/plain" })
    res:write("one,")
    res:write("")
    res:write("two")
    res:finish()
end)
srv:route("GET", "/boom", function() error("handler exploded") end)
srv:route("GET", "/boom-stream", function(_, res) res:start(200); res:write("partial"); error("mid-stream") end)
srv:route("GET", "/twice", function(_, res)
    res:send(200, "first")
    saved.twice_ok, saved.twice_err = pcall(res.send, res, 200, "second")
end)
srv:route("GET", "/later", function(_, res) saved.later = res end)
srv:route("GET", "/headers", function(req, res)
    local h = req:headers()
    res:send(200, (h["x-a"] or "") .. ";" .. (h.host or ""))
end)
srv:route("GET", "/reenter", function(_, res)
    saved.reenter_ok, saved.reenter_err = pcall(srv.poll, srv, 0)
    res:send(200, "ok")
end)
srv:route("GET", "/files/*", function(req, res) res:send(200, req.params["*"]) end)
srv:route("GET", "/badtypes", function(_, res)
    saved.bad = {
        { pcall(res.send, res, "200", "x") },
        { pcall(res.send, res, 200, {}) },
        { pcall(res.send, res, 200, "x", 42) },
        { pcall(res.send, res, 99, "x") },
    }
    res:send(200, "ok")
end)

local c = T.connect(port, pump)
local r = c:request(T.req("GET", "/users/42?x=1", nil, "X-Test: yes\r\n"))
T.is(r and r.status, 200, "GET with a route parameter")
T.is(r and r.body, "GET|/users/42|x=1|42|42|nil|yes|127.0.0.1|true|true", "request fields read lazily")
T.is(r and r.headers["content-type"], "text/plain", "headers from a table")
T.ok(r and c.buf == "", "exactly one response")

-- The request object is dead after the next poll.
srv:poll(0)
T.raises("used after the next poll", "request data is invalid after the next poll", function() return saved.req.path end)
T.raises("read%-only", "request fields are read-only", function() saved.req.path = "x" end)

local big = string.rep("0123456789", 1000) -- larger than the 512-byte arena
r = c:request(T.req("POST", "/echo", big))
T.is(r and r.status, 201, "POST status")
T.ok(r and r.body == big, "10 KB body through a 512-byte arena (grown on demand)")
T.is(r and r.headers["x-len"], "10000", "string header block")

r = c:request(T.req("GET", "/stream"))
T.ok(r and r.chunked, "streamed response is chunked")
T.is(r and r.body, "one,two", "streamed chunks")

-- A long stream paced by writable()/on_drain() while the client reads late.
do
    local res
    srv:route("GET", "/big", function(_, r2) r2:start(200); res = r2 end)
    local bc = T.connect(port, pump)
    bc:send(T.req("GET", "/big"))
    local chunk, sent, total, paused, drained = string.rep("z", 65536), 0, 12 * 1048576, false, false
    for _ = 1, 4000 do
        pump()
        if res then
            if not res:writable() then paused = true; break end
            if sent >= total then break end
            res:write(chunk)
            sent = sent + #chunk
        end
    end
    T.ok(paused and sent < total, "writable() turns false while the client does not read (" .. sent .. " bytes sent)")
    res:on_drain(function() drained = true end)
    local got, tail = 0, ""
    local function take()
        bc:fill(5)
        got = got + #bc.buf
        tail = (tail .. bc.buf):sub(-5)
        bc.buf = ""
    end
    for _ = 1, 2000 do
        if drained then break end
        pump(); take()
    end
    T.ok(drained, "on_drain runs once the client read (" .. got .. " bytes)")
    for _ = 1, 20000 do
        pump()
        if sent < total and res:writable() then
            res:write(chunk)
            sent = sent + #chunk
        elseif sent >= total and res:replied() == false then
            res:finish()
        end
        take()
        if tail == "0\r\n\r\n" then break end
    end
    T.ok(tail == "0\r\n\r\n" and got > total, "the whole stream arrived (" .. got .. " bytes)")
    bc:close()
end

r = c:request(T.req("HEAD", "/users/1"), true)
T.is(r and r.status, 200, "HEAD answered by the GET route")

r = c:request(T.req("GET", "/nowhere"))
T.is(r and r.status, 404, "default fallback is 404")

r = c:request(T.req("GET", "/boom"))
T.is(r and r.status, 500, "a raising handler gives 500")
r = c:request(T.req("GET", "/users/7"))
T.is(r and r.status, 200, "the loop continues after a handler error")

r = c:request(T.req("GET", "/twice"))
T.is(r and r.body, "first", "first reply goes out")
T.ok(saved.twice_ok == false, "replying twice raises")
T.like(saved.twice_err, "NSV_ESTATE", "reply twice: NSV_ESTATE with the library's message")

r = c:request(T.req("GET", "/headers", nil, "X-A: 1\r\nx-a: 2\r\n"))
T.is(r and r.body, "1, 2;t", "req:headers() joins repeats")

r = c:request(T.req("GET", "/reenter"))
T.is(r and r.status, 200, "handler continues after a re-entrant poll")
T.like(saved.reenter_err, "inside a handler", "poll from a handler raises")

r = c:request(T.req("GET", "/files/a/b.txt"))
T.is(r and r.body, "a/b.txt", "wildcard parameter")

r = c:request(T.req("GET", "/badtypes"))
T.is(r and r.body, "ok", "handler survives its own bad calls")
T.like(saved.bad[1][2], "status number expected", "send: status must be a number")
T.like(saved.bad[2][2], "body must be a string", "send: body must be a string")
T.like(saved.bad[3][2], "headers must be a string or a table", "send: headers type")
T.like(saved.bad[4][2], "NSV_EINVAL", "send: status out of range is NSV_EINVAL")

-- Deferred answer: the response object outlives its handler.
c:send(T.req("GET", "/later"))
c:wait(function() return saved.later end, 2000)
T.ok(saved.later ~= nil, "handler kept its response")
for _ = 1, 3 do srv:poll(1) end
saved.later:send(200, "late")
r = c:response()
T.is(r and r.body, "late", "deferred reply after later polls")

-- A stream cut by an error closes the connection.
r = c:request(T.req("GET", "/boom-stream"))
T.ok(r == nil and c:wait_closed(2000), "error mid-stream closes the connection")
c:close()

-- Stale ids: keep a response, let its connection close, use it again.
local closed_conns = 0
srv:on("close", function() closed_conns = closed_conns + 1 end)
saved.later = nil
local c2 = T.connect(port, pump)
c2:send(T.req("GET", "/later"))
c2:wait(function() return saved.later end, 2000)
saved.later:send(200, "x")
T.ok(c2:response() ~= nil, "response before the close")
c2:close()
for _ = 1, 200 do
    srv:poll(5)
    if closed_conns > 0 then break end
end
T.ok(closed_conns > 0, "close hook sees the connection go")
-- A late reply is a no-op that returns false (the client left).
T.is(select(2, pcall(saved.later.send, saved.later, 200, "x")), false, "reply to a closed connection returns false")
T.is(select(2, pcall(saved.later.write, saved.later, "x")), false, "stream to a closed connection returns false")
T.is(select(2, pcall(saved.later.close, saved.later)), false, "close a closed connection returns false")
T.is(saved.later.closed, true, "the late response says closed")

-- Custom fallback.
srv:fallback(function(req, res) res:send(418, req.path) end)
local c3 = T.connect(port, pump)
r = c3:request(T.req("GET", "/teapot"))
T.is(r and r.status, 418, "custom fallback")
c3:close()

-- Errors -----------------------------------------------------------------------
T.raises("unknown option 'bogus'", "unknown option", nanosrv.server, { bogus = 1 })
T.raises("needs a number", "option with a non-number", nanosrv.server, { max_body = "big" })
T.raises("NSV_ERANGE", "option out of range", nanosrv.server, { max_body = -5 })
T.raises("options table expected", "server() with a non-table", nanosrv.server, 5)
T.raises("NSV_EURL", "listen on a malformed URL", srv.listen, srv, "nope")
T.raises("NSV_EADDRINUSE", "listen on a port in use", srv.listen, srv, "http://127.0.0.1:" .. port)
T.raises("NSV_EEXIST", "duplicate route", srv.route, srv, "GET", "/users/:id", function() end)
T.raises("handler function expected", "route without a handler", srv.route, srv, "GET", "/x", 5)
T.raises("string expected", "route with a non-string method", srv.route, srv, 1, "/x", function() end)
T.raises("timeout in ms expected", "poll with a bad timeout", srv.poll, srv, "soon")

-- stop() ends run() at once; a stopped server stays stopped.
local s2 = nanosrv.server()
local p2 = s2:listen("http://127.0.0.1:0")
local stopped_in_handler = false
s2:route("GET", "/stop", function(_, res) s2:stop(); stopped_in_handler = true end)
local c4 = T.connect(p2)
c4:send(T.req("GET", "/stop"))
s2:run() -- returns because the handler stopped it
T.ok(stopped_in_handler, "run() returns after a handler calls stop()")
T.is(s2:poll(0), nil, "poll returns nil once stopped")
c4:close()
s2:close()
T.raises("server is closed", "calls after close raise", s2.listen, s2, "http://127.0.0.1:0")
s2:close() -- closing twice is harmless

-- drain(): requests in flight are answered, then run() returns.
local s3 = nanosrv.server()
local p3 = s3:listen("http://127.0.0.1:0")
local pending
s3:route("GET", "/a", function(_, res) pending = res end)
s3:route("GET", "/go", function(_, res)
    s3:drain(2000) -- inside a handler: starts the drain, the outer run() finishes it
    pending:send(200, "drained")
    res:send(200, "go")
end)
local ca = T.connect(p3, function() s3:poll(5) end)
ca:send(T.req("GET", "/a"))
ca:wait(function() return pending end, 2000)
local cg = T.connect(p3)
cg:send(T.req("GET", "/go"))
s3:run()
ca.pump = nil
r = ca:response(false, 2000)
T.is(r and r.body, "drained", "drain lets a deferred reply go out")
r = cg:response(false, 2000)
T.is(r and r.body, "go", "drain answers the request that started it")
T.ok(cg:wait_closed(2000), "connections are closed after the drain")
ca:close(); cg:close()
s3:close()

-- WebSocket -----------------------------------------------------------------------
if not nanosrv.features.websocket then
    T.skip("websocket", "WebSocket functions not in this library")
else
    local ws_srv = nanosrv.server()
    local pw = ws_srv:listen("http://127.0.0.1:0")
    local log, socks = {}, {}
    local room
    room = ws_srv:websocket("/room/:name", {
        open = function(ws, req)
            ws.data.name = req.params.name
            socks[#socks + 1] = ws
            log[#log + 1] = "open " .. req.params.name
        end,
        message = function(ws, data, opcode)
            if data == "boom" then error("ws handler exploded") end
            if data == "bye" then return ws:close(4000, "see you") end
            if data == "all" then return ws_srv:broadcast(room, "to all", nanosrv.TEXT) end
            if data == "many" then return ws_srv:send_many(socks, "to many") end
            ws:send(ws.data.name .. ":" .. data, opcode)
        end,
        close = function(ws, code, reason) log[#log + 1] = "close " .. ws.data.name .. " " .. code end,
    })
    T.ok(type(room) == "number", "websocket() returns a route id")
    local wpump = function() ws_srv:poll(5) end
    local a, head = T.ws_connect(pw, "/room/a", wpump)
    T.like(head, "^HTTP/1.1 101", "WebSocket upgrade")
    local b = T.ws_connect(pw, "/room/b", wpump)
    a:ws_send(1, "hi")
    local f = a:ws_read(2000)
    T.ok(f and f[1] == 1 and f[2] == "a:hi", "text message echoed with per-socket data")
    a:ws_send(2, "\0\1\2")
    f = a:ws_read(2000)
    T.ok(f and f[1] == 2 and f[2] == "a:\0\1\2", "binary opcode kept")
    a:ws_send(1, "all")
    local fa, fb = a:ws_read(2000), b:ws_read(2000)
    T.ok(fa and fb and fa[2] == "to all" and fb[2] == "to all", "broadcast reaches every socket of the route")
    b:ws_send(1, "many")
    fa, fb = a:ws_read(2000), b:ws_read(2000)
    T.ok(fa and fb and fa[2] == "to many" and fb[2] == "to many", "send_many")
    b:ws_send(1, "bye")
    fb = b:ws_read(2000)
    T.ok(fb and fb[1] == 8 and fb[2]:sub(1, 2) == "\15\160" and fb[2]:sub(3) == "see you", "server close frame 4000")
    a:ws_send(1, "boom")
    fa = a:ws_read(2000)
    T.ok(fa and fa[1] == 8 and fa[2]:sub(1, 2) == "\3\243", "a raising message handler closes with 1011")
    -- Answer the close frames as a client should, then hang up.
    b:ws_send(8, "\15\160"); a:ws_send(8, "\3\243")
    a:close(); b:close()
    for _ = 1, 200 do
        ws_srv:poll(5)
        if #log >= 4 then break end
    end
    table.sort(log)
    T.is(table.concat(log, ","), "close a 1011,close b 4000,open a,open b", "open and close handlers")
    T.is(select(2, pcall(socks[1].send, socks[1], "late")), false, "send on a closed WebSocket returns false")
    T.raises("table of handlers expected", "websocket() needs handlers", ws_srv.websocket, ws_srv, "/x", 5)
    ws_srv:close()
end

-- Sharded servers ------------------------------------------------------------------
local sok, sh = pcall(nanosrv.server, { threads = 2 })
if not sok then
    T.skip("sharded server", "not available: " .. tostring(sh))
else
    T.is(sh:workers(), 2, "sharded server has 2 workers")
    local ps = sh:listen("http://127.0.0.1:0")
    sh:route("GET", "/w/:n", function(req, res) res:send(200, req.params.n) end)
    local ok_all = true
    for i = 1, 6 do
        local cs = T.connect(ps, function() sh:poll(5) end)
        local rr = cs:request(T.req("GET", "/w/" .. i))
        ok_all = ok_all and rr ~= nil and rr.body == tostring(i)
        cs:close()
    end
    T.ok(ok_all, "sharded server answers from one Lua state")
    sh:close()
end

srv:close()
T.done()
