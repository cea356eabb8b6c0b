-- tcp_proxy.lua - raw TCP port forwarder: every connection accepted on
-- --port is relayed to --to HOST:PORT, both ways, byte for byte.
--
--   luajit tcp_proxy.lua --port N --to HOST:PORT [--tls] [--ca FILE] [--insecure]
--
-- Prints "listening on PORT" once ready. Backpressure: a side that is past
-- its high water mark pauses reading of the other side until it drains.
-- Half-close passes through (one side ends, the other is told so once the
-- bytes before the end are sent). --tls connects upstream with TLS,
-- verifying its certificate against --ca (default: the system bundle), or
-- not at all with --insecure.

local here = (debug.getinfo(1, "S").source:match("^@(.*)/examples/[^/]*$")) or "."
package.path = here .. "/?.lua;" .. package.path
local nanosrv = require("nanosrv")

local port, to, tls, opts = 0, nil, false, {}
do
    local i = 1
    while i <= #arg do
        local name, v = arg[i], arg[i + 1]
        if name == "--tls" then tls, i = true, i - 1
        elseif name == "--insecure" then opts.tls_verify_server, i = false, i - 1
        elseif name == "--port" and tonumber(v) then port = tonumber(v)
        elseif name == "--to" and v and v:find(":%d+$") then to = v
        elseif name == "--ca" and v then opts.tls_client_ca_file = v
        else
            io.stderr:write("usage: tcp_proxy.lua --port N --to HOST:PORT [--tls] [--ca FILE] [--insecure]\n")
            os.exit(2)
        end
        i = i + 2
    end
end
if not to then
    io.stderr:write("tcp_proxy.lua: --to HOST:PORT is required\n")
    os.exit(2)
end

local srv = nanosrv.server(opts)
local upstream_url = (tls and "tls://" or "tcp://") .. to

-- The handlers of both sides: conn.data.other is the connection at the
-- other end.
local relay = {
    on_data = function(conn, data) conn.data.other:send(data) end,
    -- This side cannot take more: stop reading the side that feeds it.
    on_writable = function(conn, writable)
        local other = conn.data.other
        if writable then other:resume() else other:pause() end
    end,
    on_eof = function(conn) conn.data.other:shutdown() end,
    on_close = function(conn) conn.data.other:close() end,
    on_error = function(conn, msg) io.stderr:write("tcp_proxy.lua: ", tostring(conn.id), ": ", msg, "\n") end,
}

local ok, bound = pcall(srv.listen, srv, "tcp://0.0.0.0:" .. port, {
    on_open = function(client)
        local up = srv:connect(upstream_url, relay)
        client.data.other, up.data.other = up, client
    end,
    on_data = relay.on_data, on_writable = relay.on_writable, on_eof = relay.on_eof,
    on_close = relay.on_close, on_error = relay.on_error,
})
if not ok then
    io.stderr:write("tcp_proxy.lua: ", tostring(bound), "\n")
    os.exit(1)
end
io.stdout:write("listening on ", bound, "\n")
io.stdout:flush()
srv:run()
