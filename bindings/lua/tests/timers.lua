-- Timers and light threads: srv:timer_at / srv:timer_every with their
-- arguments and OpenResty's premature flag at drain, the pending and
-- running counts, srv:timer / srv:every cancel, srv:sleep on library
-- timers (0 yields once), srv:spawn and thread:wait.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local srv = nanosrv.server {}
local function until_(cond, rounds)
    for _ = 1, rounds or 2000 do
        if cond() then return true end
        srv:poll(5)
    end
    return cond() and true or false
end
local function capture_log(f)
    local lines, real = {}, io.stderr
    io.stderr = { write = function(_, ...) for _, s in ipairs({ ... }) do lines[#lines + 1] = tostring(s) end end,
                  flush = function() end }
    local ok, err = pcall(f)
    io.stderr = real
    if not ok then error(err, 0) end
    return table.concat(lines)
end

-- timer_at -------------------------------------------------------------------
do
    local got
    local ok = srv:timer_at(0.03, function(premature, a, b, c)
        got = { premature, a, b, c, coroutine.running() ~= nil }
    end, "x", 42, nil)
    T.is(ok, true, "timer_at returns true")
    T.is(srv:timers_pending(), 1, "one timer pending")
    T.ok(until_(function() return got end), "the timer fired")
    T.ok(got and got[1] == false and got[2] == "x" and got[3] == 42 and got[4] == nil,
         "fn(premature = false, ...) with its arguments")
    T.is(got and got[5], true, "in a coroutine")
    T.is(srv:timers_pending(), 0, "none pending after it fired")
end

-- order, fractional seconds, a timer that sleeps (running count) ------------
do
    local order, slept = {}, false
    srv:timer_at(0.06, function() order[#order + 1] = "late" end)
    srv:timer_at(0.001, function()
        order[#order + 1] = "early"
        srv:sleep(80)
        slept = true
    end)
    T.is(srv:timers_pending(), 2, "two pending")
    T.ok(until_(function() return #order == 1 end), "the earlier one fired first")
    T.is(srv:timers_running(), 1, "one running while it sleeps")
    T.ok(until_(function() return slept end), "it finished its sleep")
    T.is(table.concat(order, ","), "early,late", "they fired in the order of their delays")
    T.is(srv:timers_running(), 0, "none running after")
end

-- timer_every ------------------------------------------------------------------
do
    local n, args = 0, nil
    T.is(srv:timer_every(0.01, function(premature, a, b)
        n = n + 1
        args = { premature, a, b }
    end, "every", 7), true, "timer_every returns true")
    T.ok(until_(function() return n >= 3 end), "it fired three times")
    T.ok(args and args[1] == false and args[2] == "every" and args[3] == 7, "with premature = false and its arguments")
    T.is(srv:timers_pending(), 1, "an every timer stays pending")
end

-- errors in a timer --------------------------------------------------------------
do
    local after = false
    local text = capture_log(function()
        srv:timer_at(0, function() error("timer exploded") end)
        srv:timer_at(0, function() after = true end)
        until_(function() return after end)
    end)
    T.like(text, "timer handler failed: .*timer exploded", "a failing timer is logged")
    T.like(text, "stack traceback", "with a traceback")
    T.ok(after, "and the next timer still runs")
end

-- bad arguments --------------------------------------------------------------------
T.raises("delay in seconds >= 0", "timer_at: a negative delay is refused", srv.timer_at, srv, -1, function() end)
T.raises("function expected", "timer_at: fn must be a function", srv.timer_at, srv, 1, "nope")
T.raises("interval in seconds > 0", "timer_every: 0 is refused", srv.timer_every, srv, 0, function() end)

-- srv:timer / srv:every and cancel -------------------------------------------------
do
    local fired, ticks = false, 0
    local t1 = srv:timer(20, function() fired = true end)
    local t2 = srv:every(5, function() ticks = ticks + 1 end)
    T.is(t1:cancel(), true, "cancel a pending timer: true")
    T.is(t1:cancel(), false, "a second cancel: false")
    until_(function() return ticks >= 2 end)
    T.is(t2:cancel(), true, "cancel an every timer")
    local at = ticks
    for _ = 1, 10 do srv:poll(5) end
    T.ok(not fired, "a cancelled timer never fires")
    T.is(ticks, at, "a cancelled every timer stops")
    local inside
    srv:timer(1, function()
        srv:sleep(1) -- srv:timer callbacks run in coroutines too
        inside = true
    end)
    T.ok(until_(function() return inside end), "a srv:timer callback may sleep")
end

-- sleep(0) yields once ----------------------------------------------------------------
do
    local step = 0
    srv:spawn(function()
        step = 1
        srv:sleep(0)
        step = 2
    end)
    T.is(step, 1, "spawn runs fn at once, until it waits")
    srv:poll(0)
    T.is(step, 2, "sleep(0) is resumed by the next poll")
    local err
    capture_log(function() err = select(2, srv:spawn(function() srv:sleep(-1) end):wait()) end)
    T.like(err, "milliseconds >= 0", "sleep: a negative time is refused")
end

-- spawn and wait -----------------------------------------------------------------------
do
    local th = srv:spawn(function(a, b)
        srv:sleep(30)
        return a + b, "sum"
    end, 1, 2)
    T.is(th.status, "running", "a spawned thread that sleeps is running")
    local got
    srv:spawn(function() got = { th:wait() } end)
    T.ok(until_(function() return got end), "wait from another coroutine returns once it ends")
    T.ok(got and got[1] == 3 and got[2] == "sum", "with its results")
    T.is(th.status, "dead", "then its status is dead")
    local again = { th:wait() }
    T.ok(again[1] == 3 and again[2] == "sum", "wait on a dead thread (outside a coroutine) returns its results")

    local bad, res
    local text = capture_log(function()
        bad = srv:spawn(function() srv:sleep(1); error("thread exploded") end)
        srv:spawn(function() res = { bad:wait() } end)
        until_(function() return res end)
    end)
    T.ok(res and res[1] == nil and tostring(res[2]):find("thread exploded"), "a failed thread: wait returns nil, err")
    T.like(text, "thread handler failed: .*thread exploded", "a failed thread is logged")
    T.like(text, "stack traceback", "with a traceback")
    local slow = srv:spawn(function() srv:sleep(20) end)
    T.raises("wait needs a coroutine", "wait on a running thread outside a coroutine is a clear error", slow.wait, slow)
    until_(function() return slow.status == "dead" end)
end

-- premature at drain ------------------------------------------------------------------------
do
    local d = nanosrv.server {}
    d:listen("http://127.0.0.1:0")
    local got = {}
    d:timer_at(30, function(premature, tag) got[#got + 1] = { premature, tag } end, "first")
    d:timer_every(30, function(premature, tag) got[#got + 1] = { premature, tag } end, "every")
    T.is(d:timers_pending(), 2, "two timers pending before the drain")
    d:drain(1000)
    T.is(#got, 2, "at drain both ran at once")
    T.ok(got[1] and got[1][1] == true and got[1][2] == "first", "timer_at: premature = true, with its argument")
    T.ok(got[2] and got[2][1] == true and got[2][2] == "every", "timer_every: premature = true, with its argument")
    T.is(d:timers_pending(), 0, "none pending after the drain")
    local ok, err = d:timer_at(1, function() end)
    T.ok(ok == nil and err == "process exiting", "timer_at after the drain: nil, \"process exiting\"", err)
    d:close()
end

srv:close()
T.done()
