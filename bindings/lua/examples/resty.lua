-- resty.lua - run an OpenResty content handler (content_by_lua_file) on
-- nanosrv:
--
--   luajit bindings/lua/examples/resty.lua [--host 127.0.0.1] [--port 8080]
--       [--cert FILE --key FILE] [--shdict NAME=SIZE ...] [--max-body N]
--       [--log-level LEVEL] [--default-type TYPE] [--threads N]
--       [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS] HANDLER.lua
--
-- HANDLER.lua is compiled once (lua_code_cache on) and runs for every
-- request, with the global ngx bound to it. Prints "listening on PORT".
-- --proxy-protocol: every connection starts with a PROXY protocol header
-- (v1 or v2) from a load balancer, like nginx's "listen ... proxy_protocol"
-- with "real_ip_header proxy_protocol": ngx.var.remote_addr is the client,
-- ngx.var.proxy_protocol_addr / _port / _server_addr / _server_port the
-- header's fields, ngx.var.realip_remote_addr the front.
-- SIGINT and SIGTERM drain (requests in flight finish), then exit 0.

local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "."
package.path = here .. "/../?.lua;" .. package.path

local USAGE = [[
usage: resty.lua [--host ADDR] [--port N] [--cert FILE --key FILE] [--shdict NAME=SIZE ...]
                 [--max-body BYTES] [--log-level LEVEL] [--default-type TYPE] [--threads N]
                 [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS] HANDLER.lua
  --host ADDR         address to listen on (127.0.0.1)
  --port N            port, 0 = any free one (8080)
  --cert/--key FILE   serve https with this certificate and key (PEM)
  --shdict NAME=SIZE  size of ngx.shared.NAME, e.g. cache=10m (default 1m on first use)
  --max-body BYTES    largest request body (1m), like client_max_body_size
  --log-level LEVEL   stderr, emerg, alert, crit, error (default), warn, notice, info, debug
  --default-type TYPE Content-Type when the handler sets none (text/plain); "" for none
  --threads N         I/O threads (sharded server)
  --proxy-protocol    connections come from a load balancer that sends a PROXY header (v1 or v2)
  --proxy-from CIDRS  with --proxy-protocol: the fronts allowed to connect ("10.0.0.0/8, ::1")
  --allow CIDRS       serve only these clients (like nginx's allow; deny all others)
  --deny CIDRS        never serve these clients (checked before --allow)
]]

local function usage(msg)
    io.stderr:write("resty.lua: ", msg, "\n", USAGE)
    os.exit(2)
end

local o = { host = "127.0.0.1", port = 8080, shdict = {}, max_body = 1048576, log_level = "error", listen = {} }
local LEVELS = { stderr = true, emerg = true, alert = true, crit = true, error = true, err = true, warn = true,
                 notice = true, info = true, debug = true }
do
    local i = 1
    local function value(name)
        local v = arg[i + 1]
        if v == nil then usage(name .. " needs a value") end
        i = i + 2
        return v
    end
    local function number(name, v, min)
        local n = tonumber(v)
        if not n or n ~= math.floor(n) or n < min then usage(name .. " needs a whole number >= " .. min .. ", got '" .. v .. "'") end
        return n
    end
    while i <= #arg do
        local a = arg[i]
        if a == "--host" then o.host = value(a)
        elseif a == "--port" then o.port = number(a, value(a), 0); if o.port > 65535 then usage("--port must be 0..65535") end
        elseif a == "--cert" then o.cert = value(a)
        elseif a == "--key" then o.key = value(a)
        elseif a == "--shdict" then
            local v = value(a)
            local name, size = v:match("^([%w_]+)=(%w+)$")
            if not name then usage("--shdict needs NAME=SIZE (like cache=10m), got '" .. v .. "'") end
            o.shdict[#o.shdict + 1] = { name, size }
        elseif a == "--max-body" then
            local v = value(a)
            o.max_body = require("nanosrv.shdict").parse_size(v)
            if not o.max_body then usage("--max-body needs a size (like 1048576, 512k or 10m), got '" .. v .. "'") end
        elseif a == "--log-level" then
            o.log_level = value(a):lower()
            if not LEVELS[o.log_level] then usage("--log-level must be one of stderr, emerg, alert, crit, error, warn, notice, info, debug") end
        elseif a == "--default-type" then o.default_type = value(a)
        elseif a == "--threads" then o.threads = number(a, value(a), 0)
        elseif a == "--proxy-protocol" then o.listen.proxy_protocol = true; i = i + 1
        elseif a == "--proxy-from" then o.listen.proxy_from = value(a)
        elseif a == "--allow" then o.listen.allow = value(a)
        elseif a == "--deny" then o.listen.deny = value(a)
        elseif a == "-h" or a == "--help" then io.stdout:write(USAGE); os.exit(0)
        elseif a:sub(1, 1) == "-" then usage("unknown option " .. a)
        elseif o.handler then usage("one handler file expected, got '" .. o.handler .. "' and '" .. a .. "'")
        else o.handler = a; i = i + 1 end
    end
end
if not o.handler then usage("no handler file given") end
if (o.cert == nil) ~= (o.key == nil) then usage("--cert and --key go together") end

local chunk, err = loadfile(o.handler)
if not chunk then usage("cannot load handler: " .. tostring(err)) end
-- Modules next to the handler, as a lua_package_path would give them.
local hdir = o.handler:match("^(.*)/[^/]*$") or "."
package.path = hdir .. "/?.lua;" .. package.path

local nanosrv = require("nanosrv")
local ngxmod = require("nanosrv.ngx")

for _, d in ipairs(o.shdict) do
    local ok, e = pcall(ngxmod.shared_dict, d[1], d[2])
    if not ok then usage("--shdict " .. d[1] .. "=" .. d[2] .. ": " .. tostring(e):gsub("^.-%(", "(")) end
end
ngxmod.set_log_level(o.log_level)

local sopts = { max_body = o.max_body }
if o.threads then sopts.threads = o.threads end
if o.cert then sopts.tls_cert_file, sopts.tls_key_file = o.cert, o.key end
local ok, srv = pcall(nanosrv.server, sopts)
if not ok then io.stderr:write("resty.lua: ", tostring(srv), "\n"); os.exit(1) end

local scheme = o.cert and "https://" or "http://"
local host = o.host:find(":", 1, true) and "[" .. o.host .. "]" or o.host
local port
ok, port = pcall(srv.listen, srv, scheme .. host .. ":" .. o.port, o.listen)
if not ok then io.stderr:write("resty.lua: ", tostring(port), "\n"); os.exit(1) end

local ngx = ngxmod.serve(srv, chunk, { max_body = o.max_body, default_type = o.default_type, port = port })
_G.print = ngx._print -- print() in handlers logs at NOTICE, as in OpenResty

-- SIGINT/SIGTERM: drain (listeners close, answers in flight go out), then
-- poll returns nil and the process exits 0.
local DRAIN_MS = 10000
if type(srv.drain_on_signal) == "function" then
    srv:drain_on_signal({ "INT", "TERM" }, DRAIN_MS)
else
    local C = nanosrv._internal and nanosrv._internal.C
    local has = C and pcall(function() return C.nsv_drain_on_signal end)
    if has then
        C.nsv_drain_on_signal(srv._h, 2, DRAIN_MS)
        C.nsv_drain_on_signal(srv._h, 15, DRAIN_MS)
    end
end

io.stdout:write("listening on ", port, "\n")
io.stdout:flush()
srv:run()
os.exit(0)
