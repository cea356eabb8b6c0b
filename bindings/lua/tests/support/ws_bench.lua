-- Message rate of the WebSocket client against the library's own echo in
-- the same process (one loop does both sides, so a round trip costs both
-- halves). Not a test: run by hand,
--   NANOSRV_LIBRARY=build/libnanosrv.so.1 luajit bindings/lua/tests/support/ws_bench.lua [N] [SIZE]
-- Prints messages per second for: the coroutine form one at a time (send,
-- receive), the coroutine form with 64 in flight, and the callback form
-- with 64 in flight.
local dir = (debug.getinfo(1, "S").source:match("^@(.*)/tests/support/[^/]*$")) or "bindings/lua"
package.path = dir .. "/?.lua;" .. package.path
local nanosrv = require("nanosrv")

local N, SIZE = tonumber(arg[1]) or 100000, tonumber(arg[2]) or 32
local msg = string.rep("x", SIZE)
local srv = nanosrv.server {}
local port = srv:listen("http://127.0.0.1:0")
srv:websocket("/echo", { message = function(ws, data, op) ws:send(data, op) end })
local url = "ws://127.0.0.1:" .. port .. "/echo"

local function report(name, t0)
    local s = (nanosrv.millis() - t0) / 1000
    print(string.format("%-34s %8d msgs  %6.2f s  %9.0f msg/s", name, N, s, N / s))
end

local function coro(name, window)
    local done = false
    srv:spawn(function()
        local ws = assert(srv:websocket(url))
        local t0 = nanosrv.millis()
        local sent = 0
        for _ = 1, math.min(window, N) do ws:send(msg); sent = sent + 1 end
        for _ = 1, N do
            assert(ws:receive() == msg)
            if sent < N then ws:send(msg); sent = sent + 1 end
        end
        report(name, t0)
        ws:close()
        done = true
    end)
    while not done do srv:poll(10) end
end

coro("coroutine form, 1 in flight", 1)
coro("coroutine form, 64 in flight", 64)

do
    local got, sent, t0 = 0, 0, nil
    srv:ws_connect(url, nil, {
        open = function(ws)
            t0 = nanosrv.millis()
            for _ = 1, 64 do ws:send(msg); sent = sent + 1 end
        end,
        message = function(ws)
            got = got + 1
            if sent < N then ws:send(msg); sent = sent + 1 end
            if got == N then report("callback form, 64 in flight", t0); ws:close() end
        end,
    })
    while got < N do srv:poll(10) end
end
srv:close()
