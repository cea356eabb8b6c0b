-- The Lua snippets of README.md's "Web applications", "TLS", "Raw TCP" and "Operations"
-- sections run as written (the TLS one in a directory holding the files it
-- names, made with the openssl command), and those of "WebSocket client"
-- in a child process each (one that never stops is killed).
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local f = assert(io.open(T.bindir .. "/README.md", "rb"))
local text = f:read("*a")
f:close()
local web = text:match("\n## Web applications\n(.-)\n## [^#]") or ""
local tls = text:match("\n## TLS\n(.-)\n## ") or ""
local tcp = text:match("\n## Raw TCP\n(.-)\n## ") or ""
local ops = text:match("\n## Operations: load balancers, metrics, access log\n(.-)\n## [^#]") or ""

-- server.crt / server.key / clients-ca.crt for the TLS snippet.
local ffi = require("ffi")
ffi.cdef "int chdir(const char *path);"
local dir = os.tmpname()
os.remove(dir)
local made = os.execute("mkdir -p " .. dir .. " && cd " .. dir .. " && " ..
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.crt " ..
    "-subj /CN=localhost -days 2 >/dev/null 2>&1 && cp server.crt clients-ca.crt") == 0
T.ok(made, "certificate files for the TLS snippet")
local function in_dir(fn)
    return function()
        local here = os.getenv("PWD") or "."
        ffi.C.chdir(dir)
        local ok, err = pcall(fn)
        ffi.C.chdir(here)
        if not ok then error(err, 0) end
    end
end

local n = 0
local snippets = {}
for code in web:gmatch("\n```lua\n(.-)\n```") do snippets[#snippets + 1] = { code } end
for code in tls:gmatch("\n```lua\n(.-)\n```") do snippets[#snippets + 1] = { code, true } end
for code in tcp:gmatch("\n```lua\n(.-)\n```") do snippets[#snippets + 1] = { code } end
for code in ops:gmatch("\n```lua\n(.-)\n```") do snippets[#snippets + 1] = { code } end
for _, sn in ipairs(snippets) do
    local code = sn[1]
    n = n + 1
    local fn, err = loadstring(code, "README snippet " .. n)
    T.ok(fn ~= nil, "README snippet " .. n .. " compiles", err)
    if fn then
        if sn[2] then fn = in_dir(fn) end
        local ok, rerr = pcall(fn)
        T.ok(ok, "README snippet " .. n .. " runs", rerr)
    end
end
T.ok(n >= 9, "README has its Lua snippets (" .. n .. ")")

local wsc = text:match("\n## WebSocket client\n(.-)\n## ") or ""
local nws = 0
for code in wsc:gmatch("\n```lua\n(.-)\n```") do
    nws = nws + 1
    local name = "README WebSocket client snippet " .. nws
    local fn, err = loadstring(code, name)
    T.ok(fn ~= nil, name .. " compiles", err)
    if fn then
        local file = os.tmpname()
        local f = assert(io.open(file, "wb"))
        f:write("package.path = ", string.format("%q", package.path), " .. package.path\n", code, "\n")
        f:close()
        local rc, _, rerr = T.run("luajit " .. file, nil, 20000)
        os.remove(file)
        T.ok(rc == 0, name .. " runs", rerr)
    end
end
T.ok(nws >= 2, "README has its WebSocket client snippets (" .. nws .. ")")
os.execute("rm -rf " .. dir)
T.done()
