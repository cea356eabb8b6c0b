-- tools/ngx-lua-ref.sh: the reference nginx + lua-nginx-module, unpacked
-- beside Debian's luajit. It must really be the module on OpenResty's LuaJIT
-- (not Debian's libluajit), keep bodies in memory, answer the echo contract
-- with bench/peers/resty_echo.lua, and stop by its PID.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")

local ROOT = T.bindir .. "/../.."
local SCRIPT = ROOT .. "/tools/ngx-lua-ref.sh"
local REF = ROOT .. "/build/ngx-lua-ref"

local function sh(cmd)
    local p = io.popen(cmd .. "; echo \"rc=$?\"", "r")
    local out = p:read("*a")
    p:close()
    local rc = tonumber(out:match("rc=(%d+)\n$"))
    return rc, (out:gsub("rc=%d+\n$", ""))
end

local function mtime(path)
    local _, out = sh("stat -c %Y " .. T.shq(path) .. " 2>/dev/null")
    return out
end

local rc, out = sh(SCRIPT .. " fetch 2>&1")
if not T.is(rc, 0, "fetch: the reference can run") then
    T.ok(false, "fetch failed, nothing else can be checked", out)
    T.done()
end
local stamp = mtime(REF .. "/.stamp")
rc = sh(SCRIPT .. " fetch 2>&1")
T.ok(rc == 0 and mtime(REF .. "/.stamp") == stamp, "a second fetch does nothing (stamp kept)")
-- Only unpacked: the conflicting packages are not installed.
local _, st = sh("dpkg-query -W -f='${Status}' libluajit2-5.1-2 libnginx-mod-http-lua 2>/dev/null")
T.ok(not st:find("install ok installed"), "libluajit2-5.1-2 and libnginx-mod-http-lua are not installed", st)
_, st = sh("dpkg-query -W -f='${Status}' luajit")
T.like(st, "install ok installed", "Debian's luajit stays installed")

local tmp = os.tmpname()
os.remove(tmp)
local dir = tmp .. ".ngx"
local handler = dir .. "-version.lua"
os.execute("mkdir -p " .. T.shq(dir))
local f = assert(io.open(handler, "wb"))
f:write([[
local cjson = require "cjson"
ngx.req.read_body()
local body = ngx.req.get_body_data()
ngx.header["Content-Type"] = "application/json"
ngx.print(cjson.encode({
    ngx_lua = ngx.config.ngx_lua_version, nginx = ngx.config.nginx_version, jit = jit.version,
    -- table.isempty exists only in OpenResty's LuaJIT.
    openresty_luajit = (pcall(require, "table.isempty")),
    resty_core = package.loaded["resty.core"] ~= nil,
    body = body and #body or -1, file = ngx.req.get_body_file() ~= nil,
}))
]])
f:close()
os.execute("chmod 755 " .. T.shq(dir) .. "; chmod 644 " .. T.shq(handler))

local cjson_ok, cjson = pcall(require, "cjson")
T.ok(cjson_ok, "lua-cjson is installed", cjson)

local function curl(port, args)
    local _, body = sh("curl -s --max-time 10 " .. (args or "") .. " http://127.0.0.1:" .. port .. "/x 2>&1")
    local ok, v = pcall(cjson.decode, body)
    return ok and v or { raw = body }
end

local function alive(pid) return (sh("kill -0 " .. pid .. " 2>/dev/null")) == 0 end

local function stop_ref(d, pid)
    local src = sh(SCRIPT .. " stop " .. T.shq(d) .. " 2>&1")
    -- Never leave it behind, even when stop failed.
    if pid and alive(pid) then os.execute("kill -KILL -- -" .. pid .. " 2>/dev/null") end
    return src
end

rc, out = sh(SCRIPT .. " start " .. T.shq(dir) .. " " .. T.shq(handler) .. " 2>&1")
local port, pid = out:match("^(%d+) (%d+)\n$")
T.ok(rc == 0 and port, "start prints PORT PID", out)
if port then
    T.ok(tonumber(port) > 0 and alive(pid), "nginx runs as PID " .. pid)
    local v = curl(port)
    T.ok(type(v.ngx_lua) == "number" and v.ngx_lua >= 10000, "lua-nginx-module answers",
         v.raw or tostring(v.ngx_lua))
    T.like(tostring(v.jit), "^LuaJIT 2%.1", "jit.version")
    T.is(v.openresty_luajit, true, "OpenResty's LuaJIT (table.isempty)")
    T.is(v.resty_core, true, "resty.core loaded from the unpacked lua-resty-core")
    T.is(v.body, -1, "no body: get_body_data() is nil")
    -- The worker maps the unpacked libluajit, not /usr/lib's.
    local _, maps = sh("for w in $(pgrep -P " .. pid .. "); do cat /proc/$w/maps; done")
    T.ok(maps:find("build/ngx-lua-ref/usr/lib/x86_64-linux-gnu/libluajit-5.1.so", 1, true) ~= nil
         and not maps:find(" /usr/lib/x86_64-linux-gnu/libluajit-5.1.so", 1, true),
         "the worker maps the unpacked libluajit only")
    -- Bodies stay in memory (get_body_data() is nil for a body spilled to a file).
    v = curl(port, "--data-binary @" .. T.shq(handler))
    T.ok(v.body and v.body > 0 and v.file == false, "a small body is in memory", v.raw)
    local big = dir .. "/big.bin"
    os.execute("head -c 4194304 /dev/zero > " .. T.shq(big))
    v = curl(port, "-H 'Expect:' --data-binary @" .. T.shq(big))
    T.ok(v.body == 4194304 and v.file == false, "a 4 MiB body is in memory, whole", v.raw or v.body)

    -- stop: the PID is gone and the port refuses.
    local src = stop_ref(dir, pid)
    T.is(src, 0, "stop exits 0")
    T.ok(not alive(pid), "nginx PID " .. pid .. " is gone")
    rc = sh("curl -s -o /dev/null --max-time 3 http://127.0.0.1:" .. port .. "/")
    T.ok(rc ~= 0, "the port refuses after stop")
end

-- The bench handler in the reference: the echo contract, and the same
-- answers from examples/resty.lua running the same file.
local echo = ROOT .. "/bench/peers/resty_echo.lua"
local edir = dir .. "-echo"
rc, out = sh(SCRIPT .. " start " .. T.shq(edir) .. " " .. T.shq(echo) .. " 2>&1")
port, pid = out:match("^(%d+) (%d+)\n$")
T.ok(rc == 0 and port, "start with bench/peers/resty_echo.lua", out)
if port then
    local function ask(p, raw, head)
        local c = T.connect(tonumber(p))
        local r = c:request(raw, head, 3000)
        c:close()
        return r or { headers = {} }
    end
    local cases = {
        { "GET described", T.req("GET", "/users/42?x=1&y=2"),
          '{"method":"GET","path":"/users/42","query":"x=1&y=2","body_len":0}', "application/json" },
        { "quote and backslash escaped", T.req("GET", '/q?a="b"&c=\\d'),
          '{"method":"GET","path":"/q","query":"a=\\"b\\"&c=\\\\d","body_len":0}', "application/json" },
        { "POST /echo echoes bytes", T.req("POST", "/echo", "bin\0ary\r\n\255"), "bin\0ary\r\n\255",
          "application/octet-stream" },
        { "PUT /echo echoes", T.req("PUT", "/echo", "put body"), "put body", "application/octet-stream" },
        { "POST elsewhere counts the body", T.req("POST", "/other", "12345"),
          '{"method":"POST","path":"/other","query":"","body_len":5}', "application/json" },
        { "chunked body echoed",
          "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
          "abcde", "application/octet-stream" },
        { "a 4 KiB query", T.req("GET", "/items?" .. ("k=v&"):rep(1024)),
          '{"method":"GET","path":"/items","query":"' .. ("k=v&"):rep(1024) .. '","body_len":0}', "application/json" },
    }
    for _, c in ipairs(cases) do
        local r = ask(port, c[2])
        T.ok(r.status == 200 and r.body == c[3] and r.headers["content-type"] == c[4], "nginx+lua: " .. c[1],
             string.format("%s %q %s", tostring(r.status), tostring(r.body), tostring(r.headers["content-type"])))
    end
    local lib = os.getenv("NANOSRV_LIBRARY") or (ROOT .. "/build/libnanosrv.so.1")
    local resty, first = T.start("env NANOSRV_LIBRARY=" .. T.shq(lib) .. " luajit " ..
                                 T.shq(T.bindir .. "/examples/resty.lua") .. " --port 0 " .. T.shq(echo))
    if T.ok(resty ~= nil, "examples/resty.lua runs bench/peers/resty_echo.lua", first) then
        for _, c in ipairs(cases) do
            local w, r = ask(port, c[2]), ask(resty.port, c[2])
            T.ok(r.status == w.status and r.body == w.body and r.headers["content-type"] == w.headers["content-type"],
                 "resty answers as nginx+lua: " .. c[1],
                 string.format("resty %s %q %s\nnginx %s %q %s", tostring(r.status), tostring(r.body),
                               tostring(r.headers["content-type"]), tostring(w.status), tostring(w.body),
                               tostring(w.headers["content-type"])))
        end
        T.stop(resty)
    end
    T.is(stop_ref(edir, pid), 0, "stop the echo reference")
    T.ok(not alive(pid), "echo reference PID " .. pid .. " is gone")
end

-- Usage errors name what is wrong and exit 1.
rc, out = sh(SCRIPT .. " start " .. T.shq(dir .. "-x") .. " /nonexistent/handler.lua 2>&1")
T.ok(rc == 1 and out:find("/nonexistent/handler.lua: not readable", 1, true), "missing handler is named", out)
rc, out = sh(SCRIPT .. " stop " .. T.shq(dir .. "-none") .. " 2>&1")
T.ok(rc == 1 and out:find("no nginx started there", 1, true), "stop without start is an error", out)

os.execute("rm -rf " .. T.shq(dir) .. " " .. T.shq(edir) .. " " .. T.shq(handler))
T.done()
