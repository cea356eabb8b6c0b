-- OpenResty libraries from Debian, unchanged, in content handlers run by
-- examples/resty.lua (a child process per part): lua-resty-redis against a
-- local redis-server, lua-resty-websocket's client against a nanosrv
-- WebSocket echo, lua-resty-lrucache and lua-resty-cookie. The libraries are only
-- unpacked (resty_libs/fetch.sh says why). Children get ephemeral loopback
-- ports, are stopped by PID, and every wait is bounded.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")

local HERE = T.dir .. "/resty_libs"
local RESTY = T.bindir .. "/examples/resty.lua"
local CURL = "curl -sS --max-time 10 "

local ok_fetch, luadir = T.run("sh " .. T.shq(HERE .. "/fetch.sh"), nil, 120000)
luadir = (luadir or ""):match("([^\n]+)\n?$")
if not T.ok(ok_fetch == 0 and luadir, "Debian's OpenResty libraries unpacked (resty_libs/fetch.sh)",
            "fetch.sh failed, so no library can be tried") then
    T.done()
end
local lib = os.getenv("NANOSRV_LIBRARY") or (T.bindir .. "/../../build/libnanosrv.so.1")
-- Handlers find resty.* shims next to them (resty.lua puts the handler's
-- directory on package.path); the libraries come from LUA_PATH.
local ENV = "env NANOSRV_LIBRARY=" .. T.shq(lib) .. " LUA_PATH=" .. T.shq(luadir .. "/?.lua;;")

-- Start a command that prints "listening on PORT": {pid, port, base}.
local function start(cmd)
    local base = os.tmpname()
    os.execute("( sh -c " .. T.shq("exec timeout -s KILL 120 " .. cmd) .. " >" .. base .. ".out 2>" .. base ..
               ".err </dev/null & echo $! >" .. base .. ".pid; wait $!; echo $? >" .. base .. ".rc ) >/dev/null 2>&1 &")
    local s = { base = base }
    for _ = 1, 1000 do
        s.port = tonumber((T.slurp(base .. ".out") or ""):match("listening on (%d+)\n"))
        s.pid = tonumber(T.slurp(base .. ".pid") or "")
        if s.port and s.pid then return s end
        if T.slurp(base .. ".rc") then break end
        os.execute("sleep 0.01")
    end
    s.err = T.slurp(base .. ".err")
    return s
end
local function stop(s)
    if s.pid then os.execute("kill " .. s.pid .. " 2>/dev/null") end
    for _ = 1, 500 do
        if (T.slurp(s.base .. ".rc") or ""):find("\n") then break end
        os.execute("sleep 0.01")
    end
    local err = T.slurp(s.base .. ".err") or ""
    for _, ext in ipairs({ "", ".out", ".err", ".pid", ".rc" }) do os.remove(s.base .. ext) end
    return err
end
local function resty(handler) return start(ENV .. " luajit " .. RESTY .. " --port 0 " .. HERE .. "/" .. handler) end
local function get(s, target, extra)
    local _, out = T.run(CURL .. (extra or "") .. " " .. T.shq("http://127.0.0.1:" .. s.port .. target), nil, 15000)
    return out
end

-- A port nothing listens on (bound then closed), and a server on one.
local function free_port()
    local _, out = T.run("python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); " ..
                         "print(s.getsockname()[1])'", nil, 10000)
    return tonumber(out)
end
-- Start a server that takes --port (redis-server, memcached) on a free
-- port; ready once `probe PORT` succeeds. {pid, port} or nil.
local function start_daemon(cmd, probe)
    for _ = 1, 5 do
        local port = free_port()
        local base = os.tmpname()
        os.execute("( sh -c " .. T.shq("exec timeout -s KILL 120 " .. cmd:gsub("PORT", port)) .. " >" .. base ..
                   ".log 2>&1 </dev/null & echo $! >" .. base .. ".pid ) >/dev/null 2>&1")
        for _ = 1, 200 do
            if os.execute(probe:gsub("PORT", port) .. " >/dev/null 2>&1") == 0 then
                return { pid = tonumber(T.slurp(base .. ".pid")), port = port, base = base }
            end
            os.execute("sleep 0.02")
        end
        os.execute("kill " .. (T.slurp(base .. ".pid") or "0") .. " 2>/dev/null")
    end
end
local function stop_daemon(d)
    os.execute("kill " .. d.pid .. " 2>/dev/null")
    os.remove(d.base .. ".log")
    os.remove(d.base .. ".pid")
end
local function have(cmd) return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == 0 end

---------------------------------------------------------------------------
-- 1. lua-resty-redis
---------------------------------------------------------------------------
local redis = have("redis-server") and have("redis-cli") and
    start_daemon("redis-server --port PORT --bind 127.0.0.1 --save '' --appendonly no --daemonize no",
                 "redis-cli -h 127.0.0.1 -p PORT ping")
if T.ok(redis, "redis-server started on a free loopback port", "redis-server (Debian redis-server) missing or not starting") then
    local s = resty("redis.lua")
    if T.ok(s.port, "resty.lua serves the redis handler", s.err) then
        local q = "?port=" .. redis.port
        local want = "set: OK\nget: v-a\ndel: 1\nmissing: null\nincr: 1 2\n"
        local r1, r2, r3 = get(s, "/basic" .. q .. "&key=a"), get(s, "/basic" .. q .. "&key=a"), get(s, "/basic" .. q .. "&key=a")
        T.is(r1, "reused: 0\n" .. want, "connect, set, get, del (ngx.null), incr")
        T.is(r2, "reused: 1\n" .. want, "set_keepalive: the next request reuses the connection (get_reused_times 1)")
        T.is(r3, "reused: 2\n" .. want, "get_reused_times grows across requests (2)")
        T.is(get(s, "/pipeline" .. q .. "&key=p"), "pipeline: OK OK 42 2 [42,2,null]\n",
             "init_pipeline/commit_pipeline: five replies in order, nested multi-bulk with null")
        T.is(get(s, "/error" .. q .. "&key=e"), "incr: false ERR value is not an integer or out of range\n",
             "a redis error reply: false plus the server's message")
        T.is(get(s, "/basic?port=" .. free_port()), "connect: connection refused\n",
             "connect to a closed port: the cosocket's \"connection refused\"")
        -- 20 requests at once, each blocking its redis connection 0.1 s
        -- (BLPOP): every answer is its own key's.
        local conns = {}
        for i = 1, 20 do
            conns[i] = T.connect(s.port)
            conns[i]:send(T.req("GET", "/concurrent" .. q .. "&key=c" .. i))
        end
        local right = 0
        local bad
        for i = 1, 20 do
            local r = conns[i]:wait(function(b) return T.parse_response(b, false, false) end, 10000)
            conns[i]:close()
            if r and r.status == 200 and r.body == "own-c" .. i .. "\n" then right = right + 1
            else bad = bad or ("request " .. i .. ": " .. tostring(r and r.body or conns[i].buf)) end
        end
        T.is(right, 20, "20 concurrent requests on 20 redis connections each get their own answer")
        if bad then io.write("# ", bad, "\n") end
        T.like(get(s, "/basic" .. q .. "&key=z"), "^reused: [1-9]%d*\n", "after the burst a pooled connection is reused")
        local err = stop(s)
        T.ok(not err:find("[error]", 1, true), "no error logged by the redis handler", err)
    end
    stop_daemon(redis)
end

---------------------------------------------------------------------------
-- 2. lua-resty-websocket's client
---------------------------------------------------------------------------
do
    local echo = start(ENV .. " luajit " .. HERE .. "/ws_echo_server.lua")
    local s = resty("websocket.lua")
    if T.ok(echo.port and s.port, "a nanosrv WebSocket echo and the websocket handler run", (echo.err or "") .. (s.err or "")) then
        local out = get(s, "/?port=" .. echo.port)
        T.like(out, "\ntext: text 20 same\n", "send_text / recv_frame: the text frame comes back")
        T.like(out, "\nbinary: binary 256 same\n", "send_binary: all 256 byte values come back")
        T.like(out, "\ntext 70000: text 70000 same\n", "a 70000-byte frame (64-bit length) comes back")
        T.like(out, "\nserver close: close bye 1000\n", "the server's close frame: type close, reason, code")
        T.like(out, "\ndone\n$", "the handler ran to its end", out)
        -- lua-resty-websocket's client.lua does `local re_match = ngx.re.match`
        -- at load and matches the URI and the status line with it.
        T.ok(out:find("ngx.re shimmed: false", 1, true),
             "ngx.re.match is provided (lua-resty-websocket client.lua indexes it at load)",
             "nanosrv.ngx has no ngx.re: the frames above went through resty_libs/re_shim.lua")
        T.is(get(s, "/?port=" .. free_port()):match("^[^\n]*connect: [^\n]*"), "connect: failed to connect: connection refused",
             "connect to a closed port: the client's error string")
        local err = stop(s)
        T.ok(not err:find("[error]", 1, true), "no error logged by the websocket handler", err)
    end
    stop(echo)
    stop(s)
end

---------------------------------------------------------------------------
-- 3. lua-resty-lrucache (plain and pureffi)
---------------------------------------------------------------------------
do
    local s = resty("lrucache.lua")
    if T.ok(s.port, "resty.lua serves the lrucache handler", s.err) then
        local out = get(s, "/")
        T.like(out, "^plain 1 nil 3 nil old nil/old count=2/2\n",
               "resty.lrucache: LRU eviction, delete, TTL against ngx.now across ngx.sleep, count/capacity")
        T.like(out, "\npureffi 1 nil 3 nil old nil/old count=2/2\n$", "resty.lrucache.pureffi: the same")
        T.is(get(s, "/count"), "hits: 1\n", "a module-level cache: first request")
        T.is(get(s, "/count"), "hits: 2\n", "the cache persists across requests")
        local err = stop(s)
        T.ok(not err:find("[error]", 1, true), "no error logged by the lrucache handler", err)
    end
end

---------------------------------------------------------------------------
-- 4. lua-resty-cookie
---------------------------------------------------------------------------
do
    local s = resty("cookie.lua")
    if T.ok(s.port, "resty.lua serves the cookie handler", s.err) then
        local out = get(s, "/", "-i -H 'Cookie: a=1; b=two; c=3'")
        T.like(out, "\r\n\r\na=1\nb=two\nc=3\none: two\nset: true nil true nil\n$", "get_all and get read the Cookie header")
        local cookies = {}
        for v in out:gmatch("\n[Ss]et%-[Cc]ookie: ([^\r\n]*)") do cookies[#cookies + 1] = v end
        T.is(table.concat(cookies, " | "), "s1=v1; Path=/; HttpOnly | s2=v2; Max-Age=60",
             "two set() calls: two Set-Cookie headers, in order")
        T.like(get(s, "/"), "^one: nil\n", "no Cookie header: get gives nil")
        local err = stop(s)
        T.ok(not err:find("[error]", 1, true), "no error logged by the cookie handler", err)
    end
end

T.done()
