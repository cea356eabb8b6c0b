-- examples/ws_bridge.lua as its users run it, in a child process between a
-- python3-websockets client and a python3-websockets echo upstream:
-- messages both ways in order, the client's path and query passed on,
-- closes passed through with their codes, and an upstream that cannot be
-- reached closing the client with 1014.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local PEER = "/usr/bin/python3 " .. T.dir .. "/support/ws_peer.py "
local BRIDGE = "luajit " .. T.bindir .. "/examples/ws_bridge.lua --port 0 --upstream "

local up, line = T.start(PEER .. "server")
if not T.ok(up, "the upstream echo (python3-websockets) starts", line) then T.done() end
local br
br, line = T.start(BRIDGE .. "ws://127.0.0.1:" .. up.port .. "/")
if not T.ok(br, "ws_bridge.lua prints its port", line) then T.stop(up); T.done() end
local via = "ws://127.0.0.1:" .. br.port

local rc, out, err = T.run(PEER .. "client " .. via .. "/room/1", nil, 30000)
T.is(out, "text True\nbinary True\nbig True\nordered True\nclose 4000 bye\n",
     "a python3-websockets client through the bridge: text, binary, 300 KB, 200 in order, the upstream's close")
T.ok(rc == 0, "the client exits 0", err)

-- This process as a client of the bridge: the path reaches the upstream,
-- and our close code reaches it too.
local srv = nanosrv.server {}
local done, got = false, {}
srv:spawn(function()
    local ws, e = srv:websocket(via .. "/a/b?c=d", { timeout = 5000 })
    if not ws then got.err = e; done = true; return end
    ws:send("path?")
    got.path = ws:receive()
    ws:close(4005, "from lua")
    local probe = srv:websocket(via .. "/last-close")
    for _ = 1, 100 do
        got.last = probe and probe:receive()
        if probe then probe:close() end
        if got.last == "4005 from lua" then break end
        srv:sleep(10)
        probe = srv:websocket(via .. "/last-close")
    end
    done = true
end)
local deadline = nanosrv.millis() + 10000
while not done and nanosrv.millis() < deadline do srv:poll(5) end
T.is(got.path, "/a/b?c=d", "the client's path and query reach the upstream", got.err)
T.is(got.last, "4005 from lua", "the client's close code and reason reach the upstream")
srv:close()
T.stop(br)

-- An upstream nobody listens on.
local refused
do
    local s = nanosrv.server()
    refused = s:listen("http://127.0.0.1:0")
    s:close()
end
br, line = T.start(BRIDGE .. "ws://127.0.0.1:" .. refused .. "/")
if T.ok(br, "a bridge to an unreachable upstream starts", line) then
    rc, out, err = T.run(PEER .. "expect-close " .. "ws://127.0.0.1:" .. br.port .. "/", nil, 20000)
    T.like(out, "^close 1014 upstream: connection refused %(NSV_ECONNREFUSED%)",
           "its client is closed with 1014 and the cause")
    T.stop(br)
end
T.stop(up)
T.done()
