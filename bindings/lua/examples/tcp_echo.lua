-- tcp_echo.lua - raw TCP echo server, the contract of examples/tcp_echo.c.
--
--   luajit tcp_echo.lua --port N [--threads N] [--cert FILE --key FILE]
--
-- Prints "listening on PORT" once ready. Echoes every byte in order; when
-- the client ends its side it sends what remains, then ends its own
-- (half-close). A client that does not read is paused at the high water
-- mark instead of buffered. With --cert and --key it listens on tls://.

local here = (debug.getinfo(1, "S").source:match("^@(.*)/examples/[^/]*$")) or "."
package.path = here .. "/?.lua;" .. package.path
local nanosrv = require("nanosrv")

local opts, port, cert, key = {}, 0, nil, nil
do
    local i = 1
    while i <= #arg do
        local name, v = arg[i], arg[i + 1]
        if name == "--port" and tonumber(v) then port = tonumber(v)
        elseif name == "--threads" and tonumber(v) then opts.threads = tonumber(v)
        elseif name == "--cert" and v then cert = v
        elseif name == "--key" and v then key = v
        else
            io.stderr:write("usage: tcp_echo.lua --port N [--threads N] [--cert FILE --key FILE]\n")
            os.exit(2)
        end
        i = i + 2
    end
end
if (cert == nil) ~= (key == nil) then
    io.stderr:write("tcp_echo.lua: --cert and --key go together\n")
    os.exit(2)
end
opts.tls_cert_file, opts.tls_key_file = cert, key

local ok, srv = pcall(nanosrv.server, opts)
local lok, bound
if ok then
    lok, bound = pcall(srv.listen, srv, (cert and "tls" or "tcp") .. "://0.0.0.0:" .. port, {
        on_data = function(conn, data) conn:send(data) end,
        -- The peer is not reading: stop reading it until our output drains.
        on_writable = function(conn, writable)
            if writable then conn:resume() else conn:pause() end
        end,
        -- Its side ended: send what remains, then end ours.
        on_eof = function(conn) conn:shutdown() end,
        on_error = function(conn, msg) io.stderr:write("tcp_echo.lua: ", tostring(conn.id), ": ", msg, "\n") end,
    })
end
if not ok or not lok then
    io.stderr:write("tcp_echo.lua: ", tostring(ok and bound or srv), "\n")
    os.exit(1)
end
io.stdout:write("listening on ", bound, "\n")
io.stdout:flush()
srv:run()
