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

local function ask(s, raw, head)
    local c = T.connect(s.port)
    local r = c:request(raw, head, 3000)
    c:close()
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

local expect = {
    ["GET /"] = '{"method":"GET","path":"/","query":"","body_len":0}',
    ["quote and backslash escaped"] = '{"method":"GET","path":"/q","query":"a=\\"b\\"&c=\\\\d","body_len":0}',
    ["POST /echo echoes bytes"] = "bin\0ary\r\n\255",
    ["chunked body echoed"] = "abcde",
    ["POST elsewhere counts the body"] = '{"method":"POST","path":"/other","query":"","body_len":5}',
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

stop(lua)
if ref then stop(ref) end

-- Limits from flags, and a bad flag.
local small = start("luajit " .. ECHO_LUA, "--max-body 16 --routes 3")
if T.ok(small ~= nil, "echo.lua starts with --max-body and --routes") then
    local r = ask(small, T.req("POST", "/echo", string.rep("x", 100)))
    T.is(r and r.status, 413, "--max-body limits the body")
    r = ask(small, T.req("GET", "/dummy/2/abc"))
    T.is(r and r.body, '{"method":"GET","path":"/dummy/2/abc","query":"","body_len":0}', "--routes adds routes")
    stop(small)
end
local ok, how, code = os.execute("luajit " .. ECHO_LUA .. " --nope 1 >/dev/null 2>&1")
T.ok(ok ~= true and ok ~= 0 and (code == 2 or ok == 512), "unknown flag exits with status 2")

T.done()
