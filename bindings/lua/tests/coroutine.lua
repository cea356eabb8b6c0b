-- Every handler runs in a pooled coroutine: sleeping handlers do not delay
-- others, a request kept across a wait reads its own data, WebSocket and
-- raw TCP handlers of one connection stay in order while one waits, errors
-- after a wait answer 500 with a log line, pooled coroutines carry nothing
-- from one request to the next, a bare yield is resumed by the next poll,
-- and coroutines = false calls handlers directly.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local srv = nanosrv.server { idle_timeout_ms = 20000 }
local pump = function() srv:poll(5) end
local function until_(cond, rounds)
    for _ = 1, rounds or 2000 do
        if cond() then return true end
        pump()
    end
    return cond() and true or false
end

-- Capture what the binding logs (handler failures) while f runs.
local function capture_log(f)
    local lines, real = {}, io.stderr
    io.stderr = { write = function(_, ...) for _, s in ipairs({ ... }) do lines[#lines + 1] = tostring(s) end end,
                  flush = function() end }
    local ok, err = pcall(f)
    io.stderr = real
    if not ok then error(err, 0) end
    return table.concat(lines)
end

local log = {}
srv:route("GET", "/slow/:n", function(req, res)
    srv:sleep(300)
    log[#log + 1] = "slow" .. req.params.n
    res:send(200, "slow " .. req.params.n)
end)
srv:route("GET", "/fast", function(req, res)
    log[#log + 1] = "fast"
    res:send(200, "fast")
end)
local port = srv:listen("http://127.0.0.1:0")

-- 20 sleepers, then a fast request --------------------------------------
do
    local slow = {}
    for n = 1, 20 do
        slow[n] = T.connect(port, pump)
        slow[n]:send(T.req("GET", "/slow/" .. n))
    end
    until_(function() return false end, 5) -- the sleepers are in
    local fast = T.connect(port, pump)
    local r = fast:request(T.req("GET", "/fast"))
    T.is(r and r.body, "fast", "the fast request is answered while 20 handlers sleep")
    local good = 0
    for n = 1, 20 do
        local s = slow[n]:response(false, 5000)
        if s and s.status == 200 and s.body == "slow " .. n then good = good + 1 end
        slow[n]:close()
    end
    fast:close()
    T.is(good, 20, "every sleeper gets its own answer")
    T.is(log[1], "fast", "the fast handler finished before any sleeper")
    T.is(#log, 21, "21 handlers ran")
end

-- A request kept across a sleep reads its own data ------------------------
srv:route("POST", "/keep/:id", function(req, res)
    local early = req.method -- read before the wait, from the batch
    srv:sleep(50 + (tonumber(req.params.id) % 3) * 20)
    res:send(200, table.concat({ early, req.params.id, req:header("x-tag") or "-", req.query, req.body,
                                 req.path }, "|"))
end)
do
    local cs = {}
    for id = 1, 8 do
        cs[id] = T.connect(port, pump)
        cs[id]:send(T.req("POST", "/keep/" .. id .. "?q=" .. id, "body-" .. id, "X-Tag: tag" .. id .. "\r\n"))
    end
    local good = 0
    for id = 1, 8 do
        local r = cs[id]:response(false, 5000)
        local want = table.concat({ "POST", id, "tag" .. id, "q=" .. id, "body-" .. id, "/keep/" .. id }, "|")
        if r and r.body == want then good = good + 1 else T.ok(false, "kept request " .. id, r and r.body) end
        cs[id]:close()
    end
    T.is(good, 8, "requests kept across a sleep read their own method, params, headers, query, body and path")
end

-- Saved outside the handler: raises once a later poll ran -------------------
local saved = {}
srv:route("GET", "/save/:how", function(req, res)
    if req.params.how == "wait" then srv:sleep(1) end
    saved[req.params.how] = req
    res:send(200, "saved")
end)
do
    local c = T.connect(port, pump)
    for _, how in ipairs({ "now", "wait" }) do
        local r = c:request(T.req("GET", "/save/" .. how))
        T.is(r and r.body, "saved", "handler that saves its request (" .. how .. ")")
    end
    pump()
    pump()
    for _, how in ipairs({ "now", "wait" }) do
        T.raises("used after the next poll", "a request saved by a handler that " ..
                 (how == "now" and "did not wait" or "waited") .. " raises after it ended",
                 function() return saved[how].path end)
    end
    c:close()
end

-- Errors after a yield: 500 and a log line; the pool survives --------------
local cos = {}
local held = setmetatable({}, { __mode = "v" })
srv:route("GET", "/boom", function(req, res)
    cos[#cos + 1] = coroutine.running()
    local big = { string.rep("x", 1000) } -- a local the failed handler held
    held[1], held[2] = big, req
    srv:sleep(5)
    error("boom after a wait " .. #big[1])
end)
srv:route("GET", "/clean", function(req, res)
    cos[#cos + 1] = coroutine.running()
    res:send(200, "clean " .. req.path)
end)
do
    local c = T.connect(port, pump)
    local r
    local text = capture_log(function() r = c:request(T.req("GET", "/boom")) end)
    T.is(r and r.status, 500, "an error after a wait answers 500")
    T.like(text, "request handler failed: .*boom after a wait 1000", "and is logged")
    T.like(text, "stack traceback", "with a traceback")
    r = c:request(T.req("GET", "/clean"))
    T.is(r and r.body, "clean /clean", "the next request is answered")
    T.ok(cos[1] == cos[2], "the failed handler's coroutine went back to the pool and served the next request")
    c:close()
    pump()
    collectgarbage()
    collectgarbage()
    T.ok(held[1] == nil and held[2] == nil, "the pooled coroutine keeps nothing of the failed request")
end

-- No coroutine.create per request: the pool serves them --------------------
do
    local seen, n = {}, 0
    srv:route("GET", "/which", function(req, res)
        local co = coroutine.running()
        if not seen[co] then seen[co] = true; n = n + 1 end
        res:send(200, "ok")
    end)
    local c = T.connect(port, pump)
    local good = 0
    for _ = 1, 50 do
        local r = c:request(T.req("GET", "/which"))
        if r and r.body == "ok" then good = good + 1 end
    end
    c:close()
    T.is(good, 50, "50 requests in a row")
    T.is(n, 1, "all ran in one pooled coroutine")
end

-- A bare coroutine.yield() is resumed by the next poll ---------------------
srv:route("GET", "/bare", function(req, res)
    local got = coroutine.yield()
    res:send(200, "resumed " .. tostring(got) .. " " .. req.path)
end)
do
    local c = T.connect(port, pump)
    local r = c:request(T.req("GET", "/bare"))
    T.is(r and r.body, "resumed nil /bare", "a handler's bare yield is resumed (with no values) by the next poll")
    c:close()
end

-- WebSocket: messages of one connection in order while a handler sleeps ---
local wslog = {}
srv:websocket("/ws", {
    open = function(ws, req)
        srv:sleep(20) -- the open request stays readable across the wait
        ws.data.path = req.path
    end,
    message = function(ws, data)
        local ms = tonumber(data:match("sleep(%d+)") or 0)
        if ms > 0 then srv:sleep(ms) end
        wslog[#wslog + 1] = data
        ws:send(ws.data.path .. ":" .. data)
    end,
})
do
    local a = T.ws_connect(port, "/ws", pump)
    local b = T.ws_connect(port, "/ws", pump)
    until_(function() return false end, 10)
    a:ws_send(1, "a1 sleep200")
    a:ws_send(1, "a2")
    a:ws_send(1, "a3 sleep30")
    a:ws_send(1, "a4")
    until_(function() return false end, 4)
    b:ws_send(1, "b1")
    local got = {}
    for i = 1, 4 do
        local f = a:ws_read(3000)
        got[i] = f and f[2] or "?"
    end
    T.is(table.concat(got, ","), "/ws:a1 sleep200,/ws:a2,/ws:a3 sleep30,/ws:a4",
         "messages of one WebSocket are handled in order while one sleeps")
    local fb = b:ws_read(3000)
    T.is(fb and fb[2], "/ws:b1", "another WebSocket is served meanwhile")
    T.is(wslog[1], "b1", "its message was handled before the sleeping connection's")
    a:close()
    b:close()
end

-- Raw TCP: on_data of one connection in order while one waits -------------
local tport = srv:listen("tcp://127.0.0.1:0", {
    on_data = function(conn, data)
        if data:find("wait") then srv:sleep(100) end
        conn:send("[" .. data .. "]")
    end,
    on_eof = function(conn) conn:send("<eof>"); conn:close() end,
})
do
    local c = T.connect(tport, pump)
    c:send("first-wait")
    until_(function() return false end, 3)
    c:send("second")
    until_(function() return false end, 3)
    require("ffi").C.shutdown(c.fd, 1)
    c:wait_closed(5000)
    T.is(c.buf, "[first-wait][second]<eof>", "raw TCP handlers of a connection run in order, eof last")
    c:close()
end

-- Calls that need a coroutine, outside one ---------------------------------
T.raises("sleep needs a coroutine", "srv:sleep outside a coroutine is a clear error", srv.sleep, srv, 1)

-- coroutines = false: direct calls ------------------------------------------
do
    local direct = nanosrv.server { coroutines = false }
    local inside
    direct:route("GET", "/", function(req, res)
        inside = coroutine.running() ~= nil
        res:send(200, "direct")
    end)
    direct:route("GET", "/sleep", function(req, res) direct:sleep(1); res:send(200, "never") end)
    direct:route("GET", "/co", function(req, res) direct:sleep(1); res:send(200, "slept") end, { coroutine = true })
    local dport = direct:listen("http://127.0.0.1:0")
    local c = T.connect(dport, function() direct:poll(5) end)
    local r = c:request(T.req("GET", "/"))
    T.is(r and r.body, "direct", "coroutines = false: the handler answers")
    T.is(inside, false, "and runs on the main stack")
    local text = capture_log(function() r = c:request(T.req("GET", "/sleep")) end)
    T.is(r and r.status, 500, "coroutines = false: sleep in a plain handler fails with 500")
    T.like(text, "sleep needs a coroutine", "with a clear message")
    r = c:request(T.req("GET", "/co"))
    T.is(r and r.body, "slept", "the route option coroutine = true still gives one")
    c:close()
    direct:close()
end

srv:close()
T.done()
