-- examples/echo.lua's operations flags as child processes, answered like
-- the C echo-server next to the library when present: --proxy-protocol
-- (curl --haproxy-protocol and a raw v1 header), /metrics, /healthz,
-- /readyz, --access-log in each format (the same lines as the C server's
-- once time, port and duration are set aside), a bad address list (exit
-- 2), and sockets from systemd-socket-activate (LISTEN_FDS, --listen-fd).
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local ECHO_LUA = "luajit " .. T.bindir .. "/examples/echo.lua"
local C_ECHO = (nanosrv.library_path:match("^(.*)/[^/]*$") or ".") .. "/echo-server"
if not io.open(C_ECHO, "rb") then C_ECHO = nil end

local function start(cmd, args) return T.start(cmd .. " --port 0 " .. args) end

local function ask(s, raw, from)
    local c = T.connect(s.port, nil, from)
    local r = c:request(raw, false, 3000)
    c:close()
    return r
end

local function curl(args)
    local rc, out = T.run("curl -sS --max-time 5 " .. args, nil, 10000)
    return rc, out
end

local function same_as_c(name, lua_r, c_r)
    if not C_ECHO then return T.skip(name .. ": same as the C echo-server", "no echo-server next to the library") end
    T.ok(lua_r and c_r and lua_r.status == c_r.status and lua_r.body == c_r.body and
         lua_r.headers["content-type"] == c_r.headers["content-type"], name .. ": same as the C echo-server",
         string.format("lua %s %q\nC   %s %q", tostring(lua_r and lua_r.status), tostring(lua_r and lua_r.body),
                       tostring(c_r and c_r.status), tostring(c_r and c_r.body)))
end

-- --proxy-protocol, /metrics, /healthz, /readyz, --access-log json -------------------
local lua = assert(start(ECHO_LUA, "--proxy-protocol --access-log json"), "echo.lua --proxy-protocol did not start")
local ref = C_ECHO and start(C_ECHO, "--proxy-protocol --access-log json")
local servers = { lua, ref }

local V1 = "PROXY TCP4 203.0.113.7 198.51.100.1 4242 443\r\n"
local r = ask(lua, V1 .. T.req("GET", "/who?x=1"))
T.is(r and r.body, '{"method":"GET","path":"/who","query":"x=1","body_len":0,"peer":"203.0.113.7","peer_port":4242,' ..
     '"front":"127.0.0.1"}', "a raw v1 header: peer, peer_port and front in the description")
same_as_c("v1 description", r, ref and ask(ref, V1 .. T.req("GET", "/who?x=1")))

local rc, out = curl("--haproxy-protocol --interface 127.0.0.2 -A ua-test http://127.0.0.1:" .. lua.port .. "/c")
T.ok(rc == 0 and out:find('"peer":"127.0.0.2","peer_port":%d+,"front":"127.0.0.2"}$'),
     "curl --haproxy-protocol --interface 127.0.0.2: the client's address", out)
if ref then curl("--haproxy-protocol --interface 127.0.0.2 -A ua-test http://127.0.0.1:" .. ref.port .. "/c") end

local c = T.connect(lua.port)
c:send(T.req("GET", "/"))
T.ok(c:wait_closed(3000) and c.buf == "", "no PROXY header: closed with nothing answered")
c:close()

for _, path in ipairs({ "/healthz", "/readyz" }) do
    local a = ask(lua, V1 .. T.req("GET", path))
    T.ok(a and a.status == 200, path .. ": 200")
    same_as_c(path, a, ref and ask(ref, V1 .. T.req("GET", path)))
end
r = ask(lua, V1 .. T.req("GET", "/metrics"))
T.is(r and r.headers["content-type"], "text/plain; version=0.0.4", "/metrics: the Prometheus Content-Type")
T.like(r and r.body, "\nnanosrv_requests_total %d+\n", "/metrics: the text exposition")
T.like(r and r.body, "\nnanosrv_proxy_errors_total 1\n", "/metrics: the request without a header counted")
if ref then ask(ref, V1 .. T.req("GET", "/metrics")) end

-- The access lines, in order, against the C server's.
local function lines_of(s, n)
    local out = {}
    for i = 1, n do out[i] = s.pipe:read("*l") or "" end
    return out
end
-- time, port and duration differ between two servers; nothing else may.
local function norm(line)
    return (line:gsub('^{"time":"[^"]*"', '{"time":T'):gsub('"port":%d+', '"port":P')
                :gsub('"duration_ms":[%d.]+', '"duration_ms":D'):gsub("%[[^]]+%]", "[T]"))
end
local got = lines_of(lua, 5)
T.like(got[1], '^{"time":"%d%d%d%d%-%d%d%-%d%dT[%d:]+%.%d%d%dZ","peer":"203%.0%.113%.7","port":4242,"method":"GET",' ..
       '"target":"/who%?x=1","status":200,"bytes_out":%d+,"bytes_in":%d+,"duration_ms":%d+%.%d%d%d,"user_agent":"",' ..
       '"referer":""}$', "--access-log json: a line per request on stdout")
T.like(got[2], '"peer":"127%.0%.0%.2".*"target":"/c".*"user_agent":"ua%-test"', "the curl request's line")
if ref then
    local want = lines_of(ref, 5)
    local same = true
    for i = 1, 5 do same = same and norm(got[i]) == norm(want[i]) end
    T.ok(same, "the same JSON lines as the C echo-server", table.concat(got, "\n") .. "\n--\n" .. table.concat(want, "\n"))
else
    T.skip("the same JSON lines as the C echo-server", "no echo-server")
end
for _, s in ipairs(servers) do T.stop(s) end

-- common and combined, against the C server's -------------------------------------------
for _, fmt in ipairs({ "common", "combined" }) do
    local l = assert(start(ECHO_LUA, "--access-log " .. fmt))
    local w = C_ECHO and start(C_ECHO, "--access-log " .. fmt)
    local args = "-o /dev/null -A 'agent \"q\"' -e http://ref.example/ 'http://127.0.0.1:%d/p%%22?a=1'"
    curl(args:format(l.port))
    ask(l, "GET /x HTTP/1.0\r\nUser-Agent: caf\195\169\255\r\n\r\n")
    local mine = lines_of(l, 2)
    T.like(mine[1], '^127%.0%.0%.1 %- %- %[[^]]+%] "GET /p%%22%?a=1 HTTP/1%.1" 200 %d+' ..
           (fmt == "combined" and ' "http://ref%.example/" "agent \\x22q\\x22"$' or "$"), fmt .. ": nginx's line")
    if w then
        curl(args:format(w.port))
        ask(w, "GET /x HTTP/1.0\r\nUser-Agent: caf\195\169\255\r\n\r\n")
        local theirs = lines_of(w, 2)
        T.ok(norm(mine[1]) == norm(theirs[1]) and norm(mine[2]) == norm(theirs[2]), fmt .. ": the C echo-server's lines",
             table.concat(mine, "\n") .. "\n--\n" .. table.concat(theirs, "\n"))
        T.stop(w)
    else
        T.skip(fmt .. ": the C echo-server's lines", "no echo-server")
    end
    T.stop(l)
end

-- A bad address list is a usage error -----------------------------------------------------
rc, out = T.run(ECHO_LUA .. " --port 0 --allow '127.0.0.1, 10.0.0.1/8'", nil, 10000)
local _, _, err = T.run(ECHO_LUA .. " --port 0 --deny 300.1.1.1", nil, 10000)
T.is(rc, 2, "--allow with a bad entry exits 2")
T.like(err, "300%.1%.1%.1", "the library's detail names the entry")

-- examples/resty.lua --proxy-protocol: nginx's variables ------------------------------------
do
    local handler = os.tmpname() .. ".lua"
    local f = assert(io.open(handler, "w"))
    f:write('ngx.say(ngx.var.remote_addr, " ", ngx.var.proxy_protocol_addr, " ", ngx.var.proxy_protocol_server_port, ' ..
            '" ", ngx.var.realip_remote_addr)\n')
    f:close()
    local s = T.start("luajit " .. T.bindir .. "/examples/resty.lua --port 0 --proxy-protocol " .. handler)
    if T.ok(s ~= nil, "resty.lua --proxy-protocol starts") then
        local rc2, body = curl("--haproxy-protocol --interface 127.0.0.2 http://127.0.0.1:" .. s.port .. "/")
        T.is(rc2 == 0 and body, "127.0.0.2 127.0.0.2 " .. s.port .. " 127.0.0.2\n",
             "resty.lua --proxy-protocol: remote_addr and proxy_protocol_addr the client, the server port, the front")
        local r2 = ask(s, "PROXY TCP4 192.0.2.1 192.0.2.2 1000 8443\r\n" .. T.req("GET", "/"))
        T.is(r2 and r2.body, "192.0.2.1 192.0.2.1 8443 127.0.0.1\n", "a raw header: the header's client, realip_remote_addr the front")
        T.stop(s)
    end
    os.remove(handler)
end

-- systemd socket activation -----------------------------------------------------------------
local function free_port()
    local s = nanosrv.server {}
    local p = s:listen("http://127.0.0.1:0")
    s:close()
    return p
end
local has_activate = os.execute("command -v systemd-socket-activate >/dev/null 2>&1") == 0
for _, extra in ipairs({ "", "--listen-fd 3" }) do
    local name = extra == "" and "LISTEN_FDS" or "--listen-fd 3"
    if not has_activate then
        T.skip(name .. ": an inherited socket is served", "no systemd-socket-activate")
    else
        local port = free_port()
        -- It binds, then executes the server at the first connection, with
        -- an environment of its own.
        local env = ""
        for _, k in ipairs({ "NANOSRV_LIBRARY", "NANOSRV_CDEF", "NANOSRV_ABI_JSON", "PATH" }) do
            if os.getenv(k) then env = env .. " -E " .. T.shq(k .. "=" .. os.getenv(k)) end
        end
        local p = io.popen("echo $$; exec timeout -s KILL 60 systemd-socket-activate" .. env .. " -l 127.0.0.1:" ..
                           port .. " " .. ECHO_LUA .. " " .. extra .. " 2>/dev/null", "r")
        local pid = tonumber(p:read("*l"))
        local h
        for _ = 1, 200 do -- until it listens
            h = T.spawn("curl -sS --max-time 5 http://127.0.0.1:" .. port .. "/sd", 10)
            local st = T.wait_spawned(h, nil, 10000)
            if st == 0 or st ~= 7 then break end
            os.execute("sleep 0.02")
        end
        local line = p:read("*l")
        T.is(line, "listening on " .. port, name .. ": echo.lua serves the inherited socket on its port")
        local rc2, body = T.run("curl -sS --max-time 5 http://127.0.0.1:" .. port .. "/sd2", nil, 10000)
        T.ok(rc2 == 0 and body:find('"path":"/sd2"', 1, true), name .. ": it answers", body)
        os.execute("kill " .. tostring(pid) .. " 2>/dev/null")
        p:close()
    end
end

T.done()
