-- A nanosrv WebSocket echo for tests/resty_libs.lua: every message goes back
-- with its opcode; "close" makes the server close with 1000 "bye".
-- Prints "listening on PORT".
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "."
package.path = here .. "/../../?.lua;" .. package.path
local nanosrv = require("nanosrv")
local srv = nanosrv.server {}
srv:websocket("/echo", {
    message = function(ws, data, opcode)
        if data == "close" then return ws:close(1000, "bye") end
        ws:send(data, opcode)
    end,
})
local port = srv:listen("http://127.0.0.1:0")
io.stdout:write("listening on ", port, "\n")
io.stdout:flush()
srv:run()
