-- The Lua snippets of README.md's "HTTP client" section and of
-- docs/OPENRESTY.md's "HTTP client" paragraph run as written.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local function section(path, pat)
    local f = assert(io.open(path, "rb"))
    local text = f:read("*a")
    f:close()
    return text:match(pat) or ""
end
local sources = {
    { "README.md", section(T.bindir .. "/README.md", "\n## HTTP client\n(.-)\n## ") },
    { "OPENRESTY.md", section(T.bindir .. "/../../docs/OPENRESTY.md", "\n### HTTP client\n(.-)\n##") },
}
for _, src in ipairs(sources) do
    local n = 0
    for code in src[2]:gmatch("\n```lua\n(.-)\n```") do
        n = n + 1
        local name = src[1] .. " HTTP client snippet " .. n
        local fn, err = loadstring(code, name)
        T.ok(fn ~= nil, name .. " compiles", err)
        if fn then -- in a child: a snippet that never stops is killed, not waited for
            local file = os.tmpname()
            local f = assert(io.open(file, "wb"))
            f:write("package.path = ", string.format("%q", package.path), " .. package.path\n", code, "\n")
            f:close()
            local rc, _, rerr = T.run("luajit " .. file, nil, 20000)
            os.remove(file)
            T.ok(rc == 0, name .. " runs", rerr)
        end
    end
    T.ok(n >= 1, src[1] .. " has HTTP client snippets (" .. n .. ")")
end
T.done()
