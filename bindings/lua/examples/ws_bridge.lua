-- ws_bridge.lua - a WebSocket endpoint that bridges each client to an
-- upstream WebSocket: every client connection gets its own upstream
-- connection, and messages (text or binary) pass both ways in order.
--
--   luajit ws_bridge.lua --port N --upstream ws://HOST:PORT/PATH [--timeout MS]
--
-- Prints "listening on PORT" once ready (--port 0 picks a free one). The
-- client's path and query are added to the upstream URL's path, so
-- ws://bridge/room/1?x=2 talks to UPSTREAM/room/1?x=2. A close passes
-- through with its code and reason; an upstream that cannot be reached,
-- refuses the upgrade or does not open within --timeout (default 5000 ms)
-- closes the client with 1014 (bad gateway) and the cause as the reason;
-- an upstream lost without a close frame closes the client with 1014 too.
-- Backpressure: a side that cannot send waits (its messages queue behind
-- the send), so a slow reader slows the other side's relay.

local here = (debug.getinfo(1, "S").source:match("^@(.*)/examples/[^/]*$")) or "."
package.path = here .. "/?.lua;" .. package.path
local nanosrv = require("nanosrv")
local bit = require("bit")

local port, upstream, timeout = 0, nil, 5000
do
    local i = 1
    while i <= #arg do
        local name, v = arg[i], arg[i + 1]
        if name == "--port" and tonumber(v) then port = tonumber(v)
        elseif name == "--upstream" and v and v:find("^wss?://") then upstream = v
        elseif name == "--timeout" and tonumber(v) then timeout = tonumber(v)
        else
            io.stderr:write("usage: ws_bridge.lua --port N --upstream ws://HOST:PORT/PATH [--timeout MS]\n")
            os.exit(2)
        end
        i = i + 2
    end
end
if not upstream then
    io.stderr:write("ws_bridge.lua: --upstream ws://HOST:PORT/PATH is required\n")
    os.exit(2)
end
local base = upstream:gsub("/$", "")

-- Close codes a peer may send (RFC 6455 7.4): 1005, 1006 and 1015 only
-- describe what happened, so they become 1000 (no code given) or 1014.
local function sendable(code)
    if code == 1005 then return 1000 end
    if (code >= 1000 and code <= 1003) or (code >= 1007 and code <= 1014) or (code >= 3000 and code <= 4999) then
        return code
    end
    return 1014
end
-- A close reason is at most 123 bytes (cut on a UTF-8 boundary).
local function reason(s)
    s = tostring(s or "")
    if #s <= 123 then return s end
    local n = 123
    while n > 0 and bit.band(s:byte(n + 1) or 0, 0xC0) == 0x80 do n = n - 1 end
    return s:sub(1, n)
end

local srv = nanosrv.server {}

local function relay_upstream(client, up)
    -- The upstream's messages, in order, until its close.
    for _ = 1, math.huge do
        local data, typ, code = up:receive()
        if typ == "close" then
            if not client.closed then client:close(sendable(code), reason(data)) end
            return
        elseif data == nil then
            if typ == "closed" then return end -- a failure (nil, message) comes before its close
        elseif not client:send(data, typ) then
            up:close(1001, "client gone")
            return
        end
    end
end

local function on_open(client, req)
    local url = base .. req.path .. (req.query ~= "" and ("?" .. req.query) or "")
    local up, err = srv:websocket(url, { timeout = timeout })
    if not up then
        client:close(1014, reason("upstream: " .. tostring(err)))
        return
    end
    up:settimeout(nil) -- --timeout was for the open; an idle upstream is fine
    client.data.up = up
    if client.closed then up:close(1001, "client gone") return end -- left while we connected
    srv:spawn(relay_upstream, client, up)
end

-- Route patterns: "/" itself and every path below it.
local handlers = {
    open = on_open,
    -- Runs after open (a connection's handlers run in order), and waits
    -- while the upstream's output is full.
    message = function(client, data, opcode)
        local up = client.data.up
        if up then up:send(data, opcode) end
    end,
    close = function(client, code, why)
        local up = client.data.up
        if up and not up.closed then up:close(sendable(code), reason(why)) end
    end,
}
srv:websocket("/", handlers)
srv:websocket("/*", handlers)

local ok, bound = pcall(srv.listen, srv, "http://127.0.0.1:" .. port)
if not ok then
    io.stderr:write("ws_bridge.lua: ", tostring(bound), "\n")
    os.exit(1)
end
io.stdout:write("listening on ", bound, "\n")
io.stdout:flush()
srv:drain_on_signal()
srv:run()
