-- The Lua snippets of README.md's "Web applications" section run as
-- written (they set up servers and routes without serving).
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local f = assert(io.open(T.bindir .. "/README.md", "rb"))
local text = f:read("*a")
f:close()
text = text:match("\n## Web applications\n(.-)\n## ") or ""
local n = 0
for code in text:gmatch("\n```lua\n(.-)\n```") do
    n = n + 1
    local fn, err = loadstring(code, "README snippet " .. n)
    T.ok(fn ~= nil, "README snippet " .. n .. " compiles", err)
    if fn then
        local ok, rerr = pcall(fn)
        T.ok(ok, "README snippet " .. n .. " runs", rerr)
    end
end
T.ok(n >= 5, "README has its Lua snippets (" .. n .. ")")
T.done()
