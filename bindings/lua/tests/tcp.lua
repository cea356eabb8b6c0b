-- Raw TCP: examples/tcp_echo.lua and examples/tcp_proxy.lua as processes
-- under a real client (random payloads up to 8 MiB, half-close), then the
-- connection lifecycle in process: open, data, end of input, writable
-- (water marks), pause/resume, close after flush, abort, shutdown, errors,
-- outbound connections, late calls, timers and wakeups.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local CLIENT = "/usr/bin/python3 " .. T.dir .. "/support/stream_client.py"

-- tcp_echo.lua and tcp_proxy.lua (in front of it) ----------------------------
local echo = assert(T.start("luajit " .. T.bindir .. "/examples/tcp_echo.lua --port 0"), "tcp_echo.lua did not start")
T.ok(echo.port > 0, "tcp_echo.lua prints 'listening on PORT'")
local proxy = assert(T.start("luajit " .. T.bindir .. "/examples/tcp_proxy.lua --port 0 --to 127.0.0.1:" .. echo.port),
                     "tcp_proxy.lua did not start")
for _, size in ipairs({ 1, 1000, 65536, 1048576, 8 * 1048576 }) do
    local rc, out, err = T.run(CLIENT .. " echo " .. echo.port .. " " .. size, nil, 120000)
    T.is(rc == 0 and out:gsub("%s+$", ""), "ok " .. size, "tcp_echo.lua: " .. size .. " random bytes, half-close", err)
    rc, out, err = T.run(CLIENT .. " echo " .. proxy.port .. " " .. size, nil, 120000)
    T.is(rc == 0 and out:gsub("%s+$", ""), "ok " .. size, "tcp_proxy.lua -> tcp_echo.lua: " .. size .. " bytes, half-close")
end
do -- several clients at once through the proxy
    local hs = {}
    for i = 1, 4 do hs[i] = T.spawn(CLIENT .. " echo " .. proxy.port .. " " .. (i * 300000), 120) end
    local good = 0
    for i = 1, 4 do
        local rc, out = T.wait_spawned(hs[i], nil, 120000)
        if rc == 0 and out:find("^ok") then good = good + 1 end
    end
    T.is(good, 4, "four concurrent clients through the proxy")
end
T.stop(proxy)
T.stop(echo)

-- In process ---------------------------------------------------------------
local srv = nanosrv.server { idle_timeout_ms = 20000 }
local pump = function() srv:poll(2) end
local function until_(cond, rounds)
    for _ = 1, rounds or 1000 do
        if cond() then return true end
        pump()
    end
    return cond() and true or false
end

T.raises("needs a table of handlers", "a tcp:// listener without handlers is refused", srv.listen, srv, "tcp://127.0.0.1:0")
T.raises("unknown handler 'on_bogus'", "unknown handler names are refused", srv.listen, srv, "tcp://127.0.0.1:0",
         { on_bogus = function() end })
T.raises("handlers are for tcp", "handlers on an http listener are refused", srv.listen, srv, "http://127.0.0.1:0",
         { on_data = function() end })

local log, conns = {}, {}
local behaviour = {} -- per test: what the server does with a connection
local port = srv:listen("tcp://127.0.0.1:0", {
    on_open = function(c)
        conns[#conns + 1] = c
        log[#log + 1] = "open"
        local b = behaviour.open
        if b then b(c) end
    end,
    on_data = function(c, d)
        c.data.got = (c.data.got or "") .. d
        local b = behaviour.data
        if b then b(c, d) end
    end,
    on_eof = function(c)
        log[#log + 1] = "eof"
        c:send("bye:" .. (c.data.got or ""))
        c:shutdown()
    end,
    on_writable = function(c, ok)
        log[#log + 1] = "writable " .. tostring(ok)
        if not ok then c.data.writable_at_false = c.writable end
    end,
    on_close = function(c) log[#log + 1] = "close" end,
})

-- Open, data, end of input, a reply after it, then our end: the client
-- reads everything and then EOF.
do
    log, conns = {}, {}
    local c = T.connect(port, pump)
    T.ok(until_(function() return #conns == 1 end), "on_open runs for an accepted connection")
    local sc = conns[1]
    T.ok(sc.peer == "127.0.0.1" and sc.port > 0 and sc.tls == false, "peer address, port and tls flag",
         tostring(sc.peer) .. ":" .. tostring(sc.port))
    c:send("hello ")
    c:send("world")
    T.ok(until_(function() return sc.data.got == "hello world" end), "on_data delivers the bytes in order")
    require("ffi").C.shutdown(c.fd, 1) -- SHUT_WR: half-close
    local closed = c:wait_closed(5000)
    T.ok(closed and c.buf == "bye:hello world", "half-close: the server answers after our end, then ends", c.buf)
    T.ok(until_(function() return sc.closed end), "on_close once both sides ended")
    T.is(table.concat(log, ","), "open,eof,close", "events in order")
    T.is(sc:send("late"), false, "send after close returns false")
    T.is(sc:close(), false, "close after close returns false")
    T.is(sc:shutdown(), false, "shutdown after close returns false")
    c:close()
end

-- Water marks: a client that does not read makes on_writable(false), and
-- reading brings on_writable(true); the bytes all arrive.
do
    log, conns = {}, {}
    local piece = string.rep("0123456789abcdef", 16384) -- 256 KiB
    local blob = ""
    behaviour.open = function(c)
        T.ok(c:set_water_marks(4096, 1024), "set_water_marks")
        -- Until the kernel's socket buffer is full and output queues here.
        for _ = 1, 64 do
            c:send(piece)
            blob = blob .. piece
            if c:queued() > 4096 then break end
        end
        c.data.queued_after_send = c:queued()
    end
    local c = T.connect(port, pump)
    T.ok(until_(function() return #conns == 1 end), "second connection opened")
    local sc = conns[1]
    -- The client reads while the test waits, so the output may have drained
    -- (and on_writable(true) come) by the time the test looks: what counts
    -- is that on_writable(false) came, with conn.writable false then.
    local function saw(what) for _, e in ipairs(log) do if e == what then return true end end end
    T.ok(until_(function() return saw("writable false") end), "on_writable(false) past the high water mark",
         table.concat(log, ","))
    T.ok(sc.data.writable_at_false == false and sc.data.queued_after_send > 4096,
         "conn.writable is false while output waits")
    local got = c:wait(function(b) if #b >= #blob then return true end end, 20000)
    T.ok(got and c.buf == blob, "every queued byte arrives once the client reads", #c.buf)
    T.ok(until_(function() return sc.writable end), "on_writable(true) at the low water mark", table.concat(log, ","))
    T.raises("bad argument", "set_water_marks needs numbers", sc.set_water_marks, sc, "a", 1)
    T.raises("NSV_ERANGE", "set_water_marks with low > high raises", sc.set_water_marks, sc, 10, 20)
    c:close()
    T.ok(until_(function() return sc.closed end), "client close seen")
    behaviour.open = nil
end

-- Pause / resume: nothing is delivered while paused, all of it after.
do
    log, conns = {}, {}
    behaviour.open = function(c) c:pause() end
    local c = T.connect(port, pump)
    T.ok(until_(function() return #conns == 1 end), "third connection opened")
    local sc = conns[1]
    T.ok(sc.paused, "conn.paused after pause()")
    c:send("while paused")
    for _ = 1, 50 do pump() end
    T.is(sc.data.got, nil, "no on_data while paused")
    T.ok(sc:resume() and not sc.paused, "resume()")
    T.ok(until_(function() return sc.data.got == "while paused" end), "the bytes arrive after resume")
    behaviour.open = nil
    c:close()
    until_(function() return sc.closed end)
end

-- Close after flush, and abort.
do
    log, conns = {}, {}
    local blob = string.rep("x", 3 * 1048576)
    behaviour.open = function(c) c:send(blob); c:close() end
    local c = T.connect(port, pump)
    local closed = c:wait_closed(20000)
    T.ok(closed and #c.buf == #blob, "close() sends the queued output first", #c.buf)
    c:close()
    behaviour.open = function(c2) c2:send(blob); c2:abort() end
    c = T.connect(port, pump)
    closed = c:wait_closed(5000)
    T.ok(closed and #c.buf < #blob, "abort() drops the queued output", #c.buf)
    c:close()
    behaviour.open = nil
end

-- A handler that raises: logged, its connection reset, the server goes on.
do
    conns = {}
    behaviour.data = function() error("handler exploded") end
    local c = T.connect(port, pump)
    c:send("boom")
    T.ok(c:wait_closed(5000), "a raising on_data resets its connection")
    c:close()
    behaviour.data = nil
    c = T.connect(port, pump)
    c:send("fine")
    T.ok(until_(function() return conns[#conns] and conns[#conns].data.got == "fine" end), "the server goes on")
    c:close()
end

-- Outbound: srv:connect to our own listener, echoing through on_data.
do
    local eport = srv:listen("tcp://127.0.0.1:0", {
        on_data = function(c, d) c:send(d) end,
    })
    local ev, got = {}, {}
    local out = srv:connect("tcp://127.0.0.1:" .. eport, {
        on_connect = function(c) ev[#ev + 1] = "connect"; c:send("ping") end,
        on_data = function(c, d)
            got[#got + 1] = d
            if table.concat(got) == "pingpong" then c:shutdown() elseif #table.concat(got) == 4 then c:send("pong") end
        end,
        on_eof = function() ev[#ev + 1] = "eof" end,
        on_close = function() ev[#ev + 1] = "close" end,
    })
    T.ok(type(out) == "table" and out.id ~= nil, "connect returns the connection at once")
    T.ok(until_(function() return ev[#ev] == "close" end, 3000), "outbound: connect, echo, half-close, close",
         table.concat(ev, ","))
    T.is(table.concat(got), "pingpong", "outbound: bytes echoed")
    T.is(table.concat(ev, ","), "connect,eof,close", "outbound events in order")

    -- Refused: on_error names the cause, on_close follows.
    ev = {}
    local r = srv:connect("tcp://127.0.0.1:1", {
        on_error = function(_, msg, code) ev[#ev + 1] = nanosrv.errname(code) .. " " .. msg end,
        on_close = function() ev[#ev + 1] = "close" end,
    })
    T.ok(until_(function() return ev[#ev] == "close" end, 3000) and ev[1]:find("NSV_ECONNREFUSED"),
         "refused connect: on_error with the cause, then on_close", table.concat(ev, " | "))
    T.is(r:send("x"), false, "send on the failed connection returns false")
    T.raises("NSV_EURL", "connect with a bad URL raises", srv.connect, srv, "udp://x:1", {})
    T.raises("handlers table expected", "connect needs handlers", srv.connect, srv, "tcp://127.0.0.1:1")
end

-- Timers and wakeups (nsv_timer_add, nsv_wakeup_conn).
do
    local fired, reps = {}, 0
    local ok, err = pcall(function()
        srv:timer(10, function() fired[#fired + 1] = "once" end)
        local cancelled = srv:timer(20, function() fired[#fired + 1] = "cancelled" end)
        local every
        every = srv:every(5, function(t)
            reps = reps + 1
            if reps == 3 then t:cancel() end
        end)
        T.ok(cancelled:cancel(), "cancel a pending timer")
        T.ok(until_(function() return #fired >= 1 and reps >= 3 end, 2000), "a one-shot and a repeating timer fire",
             table.concat(fired, ",") .. " reps " .. reps)
        for _ = 1, 30 do pump() end
        T.ok(#fired == 1 and fired[1] == "once" and reps == 3, "cancelled timers do not fire again",
             table.concat(fired, ",") .. " reps " .. reps)
        T.is(every.active, false, "a cancelled repeating timer is inactive")

        -- A wakeup with a payload, delivered to on_wakeup in order with data.
        conns = {}
        local woke = {}
        local wport = srv:listen("tcp://127.0.0.1:0", {
            on_open = function(c) conns[#conns + 1] = c end,
            on_wakeup = function(c, data) woke[#woke + 1] = data; c:send("woke:" .. data) end,
        })
        local c = T.connect(wport, pump)
        T.ok(until_(function() return #conns == 1 end), "wakeup target connected")
        T.ok(srv:wakeup(conns[1], "payload\0bytes"), "wakeup queued")
        local got = c:wait(function(b) if b == "woke:payload\0bytes" then return b end end, 3000)
        T.ok(got ~= nil, "on_wakeup receives the payload; the connection answers", c.buf)
        c:close()
        T.ok(until_(function() return conns[1].closed end), "wakeup target closed")
        T.is(srv:wakeup(conns[1], "late"), false, "wakeup of a closed connection returns false")
    end)
    if not ok then
        T.ok(false, "timers and wakeups", err)
    end
end

srv:close()
T.done()
