-- The Lua snippets of docs/OPENRESTY.md and of README.md's "OpenResty-style
-- handlers" section run as written; the README one then serves a request
-- (its srv:close() deferred to the end).
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local readme = T.slurp(T.bindir .. "/README.md") or ""
local doc = T.slurp(T.bindir .. "/../../docs/OPENRESTY.md") or ""
local section = readme:match("\n## OpenResty%-style handlers\n(.-)\n## ") or ""
T.ok(section ~= "", "README.md has the OpenResty-style handlers section")

local snippets = {}
for code in section:gmatch("\n```lua\n(.-)\n```") do snippets[#snippets + 1] = { "README", code } end
for code in doc:gmatch("\n```lua\n(.-)\n```") do snippets[#snippets + 1] = { "OPENRESTY.md", code } end
T.ok(#snippets >= 2, "snippets found (" .. #snippets .. ")")

for i, sn in ipairs(snippets) do
    local code = sn[2]
    local served
    if sn[1] == "README" then
        -- Keep the server open for one request, then close it.
        code = code:gsub("srv:close%(%)\n?$", "return srv, port\n")
    end
    local fn, err = loadstring(code, sn[1] .. " snippet " .. i)
    T.ok(fn ~= nil, sn[1] .. " snippet " .. i .. " compiles", err)
    if fn then
        -- print() of a snippet would land in the TAP stream
        setfenv(fn, setmetatable({ print = function() end }, { __index = _G, __newindex = _G }))
        local ok, srv, port = pcall(fn)
        T.ok(ok, sn[1] .. " snippet " .. i .. " runs", srv)
        if ok and sn[1] == "README" then
            local c = T.connect(port, function() srv:poll(2) end)
            local r = c:request(T.req("GET", "/a"))
            c:close()
            served = r and r.body
            T.is(served, "hello from /a (1)\n", "README snippet serves a request")
            T.is(r and r.headers["x-hits"], "1", "... with its header")
            srv:close()
        end
    end
end
T.done()
