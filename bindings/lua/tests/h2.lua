-- HTTP/2 (h2c with prior knowledge) through the binding, unchanged: a server
-- with the library's http2 option, driven from the test's thread while curl
-- runs beside it; plain, streamed and file replies, a POST body, split
-- cookie fields and a 404, each compared with the HTTP/1.1 answer.
-- Skipped when the library has no HTTP/2. Every wait is bounded.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

if not nanosrv.features.http2 then
    io.write("1..0 # SKIP the library is built without HTTP/2 (nghttp2)\n")
    os.exit(0)
end
if not os.execute("curl --version >/dev/null 2>&1") then
    io.write("1..0 # SKIP curl not installed\n")
    os.exit(0)
end

local H2_ALL = nanosrv.H2_ALL -- NSV_H2_TLS | NSV_H2_PRIOR | NSV_H2_UPGRADE, from the cdef
local srv = nanosrv.server { http2 = H2_ALL, max_body = 8 * 1048576 }
local port = srv:listen("http://127.0.0.1:0")
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))

local function write(path, data)
    local f = assert(io.open(path, "wb"))
    f:write(data)
    f:close()
end

-- A big file with varied bytes (a sha-free check: the bytes compared whole).
local parts = {}
for i = 1, 20000 do parts[i] = string.format("%07d line of the file\n", i * 7919 % 1000003) end
local BIG = table.concat(parts)
write(dir .. "/big.txt", BIG)

srv:route("GET", "/hello/:name", function(req, res)
    res:send(200, "hi " .. req.params.name, "Content-Type: text/plain\r\nX-Name: " .. req.params.name .. "\r\n")
end)
srv:route("POST", "/echo", function(req, res)
    res:send(200, req.body, "Content-Type: application/octet-stream\r\n")
end)
srv:route("GET", "/cookies", function(req, res) res:send(200, req:header("cookie") or "") end)
srv:route("GET", "/proto", function(req, res) res:send(200, req.http2 and "h2" or "h1") end)
srv:route("GET", "/stream", function(_, res)
    res:start(200, "Content-Type: text/plain\r\n")
    for i = 0, 4 do res:write("part " .. i .. "\n") end
    res:finish()
end)
srv:route("GET", "/file", function(_, res) res:send_file(dir .. "/big.txt") end)

-- curl in the background; the server is polled until it has finished.
local n = 0
local function curl(path, args, http2)
    n = n + 1
    local base = dir .. "/c" .. n
    local _, out = T.run(string.format("curl -sS --max-time 10 %s -o %s.body -D %s.head "
        .. "-w '%%{http_code} %%{http_version}' %s 'http://127.0.0.1:%d%s'",
        http2 == false and "--http1.1" or "--http2-prior-knowledge", base, base, args or "", port, path),
        function() srv:poll(10) end, 15000)
    local st, ver = out:match("^(%d+) (%S+)")
    return tonumber(st), ver, T.slurp(base .. ".body") or "", T.slurp(base .. ".head") or ""
end

local function same(path, args, name)
    local st, ver, body, head = curl(path, args)
    local st1, ver1, body1 = curl(path, args, false)
    T.ok(ver == "2" and ver1 == "1.1", name .. ": curl spoke HTTP/2 (and HTTP/1.1 the second time)",
         tostring(ver) .. " " .. tostring(ver1))
    T.ok(st == st1 and body == body1, name .. ": same status and body over h2 and HTTP/1.1",
         string.format("%s/%s, %d/%d bytes", tostring(st), tostring(st1), #body, #body1))
    return st, body, head
end

local st, body, head = same("/hello/ann", nil, "plain reply")
T.is(body, "hi ann", "plain reply body")
T.like(head:lower(), "x%-name: ann", "the handler's header reaches the h2 response")
T.ok(not head:lower():find("\nconnection:") and not head:lower():find("transfer%-encoding"),
     "no connection-specific header in the h2 response", head)
local payload = BIG:sub(1, 300000)
write(dir .. "/payload", payload)
st, body = same("/echo", "--data-binary @" .. dir .. "/payload", "POST body")
T.ok(st == 200 and body == payload, "POST body of 300000 bytes echoed")
st, body = same("/stream", nil, "streamed reply")
T.is(body, "part 0\npart 1\npart 2\npart 3\npart 4\n", "streamed reply body")
st, body = same("/file", nil, "file reply")
T.ok(st == 200 and body == BIG, "file reply: " .. #BIG .. " bytes")
st = same("/nothing", nil, "404")
T.is(st, 404, "unrouted path: 404")
local cst, cver, cbody = curl("/cookies", "-H 'cookie: a=1' -H 'cookie: b=2'")
T.ok(cst == 200 and cver == "2" and cbody == "a=1; b=2", "split cookie fields arrive joined with '; '", cbody)
local _, _, p2 = curl("/proto")
local _, _, p1 = curl("/proto", nil, false)
T.ok(p2 == "h2" and p1 == "h1", "req.http2 tells the stream from an HTTP/1.1 request", p2 .. " " .. p1)

srv:close()
os.execute("rm -rf " .. dir)
T.done()
