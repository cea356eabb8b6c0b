-- The echo contract: examples/echo.lua as a subprocess, answered byte for
-- byte like the C reference (echo-server next to the library) when present.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local ECHO_LUA = T.bindir .. "/examples/echo.lua"
local C_ECHO = (nanosrv.library_path:match("^(.*)/[^/]*$") or ".") .. "/echo-server"
if not io.open(C_ECHO, "rb") then C_ECHO = nil end

-- Start a server; returns {pid, port, pipe} or nil. `timeout` guarantees the
-- process can never outlive the test, and forwards our SIGTERM to it.
local function start(cmd, args)
    local p = io.popen("echo $$; exec timeout -s KILL 120 " .. cmd .. " --port 0 " .. (args or "") .. " 2>&1", "r")
    local pid = tonumber(p:read("*l"))
    local line = p:read("*l") or ""
    local port = tonumber(line:match("^listening on (%d+)$"))
    if not port then
        if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
        p:close()
        return nil, line
    end
    return { pid = pid, port = port, pipe = p }
end

local function stop(s)
    os.execute("kill " .. s.pid .. " 2>/dev/null")
    s.pipe:close()
end

-- The description names the client's address and port: the port must be
-- this client's own, and is written PORT so that answers compare.
local function ask(s, raw, head)
    local c = T.connect(s.port)
    local mine = c:local_port()
    local r = c:request(raw, head, 3000)
    c:close()
    if r and r.body then r.body = r.body:gsub('"peer_port":' .. mine .. "}$", '"peer_port":PORT}') end
    return r
end

local lua = assert(start("luajit " .. ECHO_LUA), "echo.lua did not start")
T.ok(lua.port > 0, "echo.lua prints 'listening on PORT'")
local ref = C_ECHO and start(C_ECHO)

local cases = {
    { "GET /", T.req("GET", "/") },
    { "path, query", T.req("GET", "/users/42?x=1&y=2") },
    { "percent-encoded path kept raw", T.req("GET", "/a%22b/%5C?q=%01") },
    { "quote and backslash escaped", T.req("GET", '/q?a="b"&c=\\d') },
    { "UTF-8 and DEL verbatim", T.req("GET", "/caf\195\169?x=\127") },
    { "DELETE /echo is described", T.req("DELETE", "/echo") },
    { "POST elsewhere counts the body", T.req("POST", "/other", "12345") },
    { "POST /echo echoes bytes", T.req("POST", "/echo", "bin\0ary\r\n\255") },
    { "PUT /echo echoes", T.req("PUT", "/echo", "put body") },
    { "empty POST /echo", T.req("POST", "/echo", "") },
    { "chunked body echoed", "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n" },
    { "HEAD /", T.req("HEAD", "/"), true },
    { "bad request", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" },
}

local PEER = ',"peer":"127.0.0.1","peer_port":PORT}'
local expect = {
    ["GET /"] = '{"method":"GET","path":"/","query":"","body_len":0' .. PEER,
    ["quote and backslash escaped"] = '{"method":"GET","path":"/q","query":"a=\\"b\\"&c=\\\\d","body_len":0' .. PEER,
    ["POST /echo echoes bytes"] = "bin\0ary\r\n\255",
    ["chunked body echoed"] = "abcde",
    ["POST elsewhere counts the body"] = '{"method":"POST","path":"/other","query":"","body_len":5' .. PEER,
}

for _, case in ipairs(cases) do
    local name, raw, head = case[1], case[2], case[3]
    local r = ask(lua, raw, head)
    if not T.ok(r ~= nil, name .. ": answered") then
        r = { headers = {} }
    end
    if expect[name] then T.is(r.body, expect[name], name .. ": body") end
    if ref then
        local w = ask(ref, raw, head) or { headers = {} }
        T.ok(r.status == w.status and r.body == w.body and
             r.headers["content-type"] == w.headers["content-type"],
             name .. ": same as the C echo-server",
             string.format("lua %s %q\nC   %s %q", tostring(r.status), tostring(r.body),
                           tostring(w.status), tostring(w.body)))
    else
        T.skip(name .. ": same as the C echo-server", "no echo-server next to the library")
    end
end

-- Keep-alive: several requests on one connection.
do
    local c = T.connect(lua.port)
    local n = 0
    for i = 1, 5 do
        local r = c:request(T.req("POST", "/echo", "msg" .. i), false, 3000)
        if r and r.body == "msg" .. i then n = n + 1 end
    end
    c:close()
    T.is(n, 5, "keep-alive connection serves 5 requests")
end

-- WebSocket echo on /ws when the library has it.
if nanosrv.features.websocket then
    local c = T.connect(lua.port)
    c:send("GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" ..
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    local r = c:wait(function(b) return b:find("\r\n\r\n", 1, true) and b end, 3000)
    T.like(r, "^HTTP/1.1 101", "/ws upgrades")
    T.like(r, "s3pPLMBiTxaQ9kYGzzhZRbK%+xOo=", "/ws accept key")
    c.buf = c.buf:sub((c.buf:find("\r\n\r\n", 1, true)) + 4)
    -- One masked text frame "hello" (mask 0x01020304).
    local payload, mask = "hello", { 1, 2, 3, 4 }
    local masked = payload:gsub("()(.)", function(i, ch)
        return string.char(bit.bxor(ch:byte(), mask[(i - 1) % 4 + 1]))
    end)
    c:send(string.char(0x81, 0x80 + #payload, 1, 2, 3, 4) .. masked)
    local frame = c:wait(function(b) if #b >= 2 + #payload then return b end end, 3000)
    T.is(frame, string.char(0x81, #payload) .. payload, "/ws echoes a text frame")
    c:close()
else
    T.skip("/ws echo", "WebSocket functions not in this library")
end

-- POST /upload (multipart parsed while it streams in) and GET /sse.
local function sh(cmd)
    local p = io.popen(cmd, "r")
    local out = p:read("*a")
    p:close()
    return out
end
local function sha_file(path) return (sh("sha256sum " .. path):match("^(%x+)")) end
do
    local mp = "Content-Type: multipart/form-data; boundary=xx\r\n"
    local ucases = {
        { "upload: two parts", T.req("POST", "/upload", "--xx\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n" ..
          "--xx\r\nContent-Disposition: form-data; name=\"f\"; filename=\"q\\\"x.txt\"\r\nContent-Type: text/plain\r\n\r\n" ..
          "hello\r\n--xx--\r\n", mp),
          200, '[{"name":"a","filename":null,"content_type":null,"size":1,"sha256":' ..
               '"6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"},' ..
               '{"name":"f","filename":"q\\"x.txt","content_type":"text/plain","size":5,"sha256":' ..
               '"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}]' },
        { "upload: bad header line", T.req("POST", "/upload", "--xx\r\nbroken header\r\n\r\nhello\r\n--xx--\r\n", mp), 400 },
        { "upload: no final boundary", T.req("POST", "/upload", "--xx\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--xx", mp), 400 },
        { "upload: not multipart", T.req("POST", "/upload", "x=1", "Content-Type: application/x-www-form-urlencoded\r\n"), 415 },
        { "upload: bad boundary", T.req("POST", "/upload", "x", "Content-Type: multipart/form-data; boundary=\r\n"), 400 },
        { "upload: empty body", T.req("POST", "/upload", "", mp), 400 },
    }
    for _, case in ipairs(ucases) do
        local name, raw, status, body = case[1], case[2], case[3], case[4]
        local r = ask(lua, raw) or { headers = {} }
        T.is(r.status, status, name .. ": status")
        if body then T.is(r.body, body, name .. ": JSON") end
        if ref then
            local w = ask(ref, raw) or { headers = {} }
            T.ok(r.status == w.status and r.body == w.body and r.headers["content-type"] == w.headers["content-type"],
                 name .. ": same as the C echo-server",
                 string.format("lua %s %q\nC   %s %q", tostring(r.status), tostring(r.body),
                               tostring(w.status), tostring(w.body)))
        end
    end

    -- curl -F with a 300 kB file.
    local file = os.tmpname()
    sh("head -c 300000 /dev/urandom > " .. file)
    local out = sh("curl -s -F a=1 -F 'f=@" .. file .. ";type=image/png' http://127.0.0.1:" .. lua.port .. "/upload")
    T.like(out, '"name":"f","filename":"[^"]+","content_type":"image/png","size":300000,"sha256":"' ..
           sha_file(file) .. '"', "curl -F: the file part's type, size and sha256")
    if ref then
        T.is(out, sh("curl -s -F a=1 -F 'f=@" .. file .. ";type=image/png' http://127.0.0.1:" .. ref.port .. "/upload"),
             "curl -F: same JSON as the C echo-server")
    end
    os.remove(file)

    -- curl -N reads the event stream.
    out = sh("curl -s -N --max-time 10 'http://127.0.0.1:" .. lua.port .. "/sse?n=5'")
    T.is(out, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n", "GET /sse?n=5: five events, then the end")
    out = sh("curl -s -i --max-time 10 'http://127.0.0.1:" .. lua.port .. "/sse?n=x'")
    T.like(out, "^HTTP/1.1 400", "GET /sse with a bad n: 400")
end

stop(lua)
if ref then stop(ref) end

-- A 150 MiB upload from Python's http.client: memory stays flat.
do
    local big = start("luajit " .. ECHO_LUA, "--max-body 209715200")
    if T.ok(big ~= nil, "echo.lua starts with --max-body 200 MiB") then
        local pid = tonumber(sh("pgrep -P " .. big.pid):match("%d+"))
        local function kib(field)
            local f = io.open("/proc/" .. tostring(pid) .. "/status")
            local s = f and f:read("*a") or ""
            if f then f:close() end
            return tonumber(s:match(field .. ":%s*(%d+)")) or 0
        end
        local before = kib("VmRSS")
        local out = sh("/usr/bin/python3 " .. T.dir .. "/support/upload_client.py " .. big.port .. " 150")
        local status, want, json = out:match("^(%d+)\n(%x+)\n(.*)$")
        T.is(status, "200", "150 MiB upload answered 200")
        T.like(json, '^%[{"name":"note","filename":null,"content_type":null,"size":5,', "the field part first")
        T.like(json, '"name":"file","filename":"big.bin","content_type":"application/octet%-stream","size":157286400,"sha256":"'
               .. tostring(want) .. '"}%]', "the file part's size and sha256, hashed while streaming")
        local grew = kib("VmHWM") - before
        T.ok(pid and grew < 16 * 1024, "peak RSS grew " .. grew .. " KiB for a 150 MiB upload (under 16 MiB)")
        stop(big)
    end
end

-- Limits from flags, and a bad flag.
local small = start("luajit " .. ECHO_LUA, "--max-body 16 --routes 3")
if T.ok(small ~= nil, "echo.lua starts with --max-body and --routes") then
    local r = ask(small, T.req("POST", "/echo", string.rep("x", 100)))
    T.is(r and r.status, 413, "--max-body limits the body")
    r = ask(small, T.req("GET", "/dummy/2/abc"))
    T.is(r and r.body, '{"method":"GET","path":"/dummy/2/abc","query":"","body_len":0' .. PEER, "--routes adds routes")
    stop(small)
end
local ok, how, code = os.execute("luajit " .. ECHO_LUA .. " --nope 1 >/dev/null 2>&1")
T.ok(ok ~= true and ok ~= 0 and (code == 2 or ok == 512), "unknown flag exits with status 2")

T.done()
