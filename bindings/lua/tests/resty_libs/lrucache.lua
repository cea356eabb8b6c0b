-- Content handler for tests/resty_libs.lua: lua-resty-lrucache (plain and
-- pureffi), as for content_by_lua_file. The caches live in a module, so
-- they persist across requests as in one nginx worker.
local caches = require("lru_state")
local uri = ngx.var.uri

if uri == "/count" then
    -- Requests share the cache: the n-th request sees n-1 earlier hits.
    local c = caches.plain
    local n = (c:get("hits") or 0) + 1
    c:set("hits", n)
    ngx.say("hits: ", n)
    return
end

for _, name in ipairs({ "plain", "pureffi" }) do
    local lru = caches.fresh(name, 2)
    lru:set("a", 1)
    lru:set("b", 2)
    lru:get("a")       -- "a" is now the most recently used
    lru:set("c", 3)    -- evicts "b", the least recently used
    local out = { name, tostring(lru:get("a")), tostring(lru:get("b")), tostring(lru:get("c")) }
    lru:delete("a")
    out[#out + 1] = tostring(lru:get("a"))
    -- A TTL in seconds against ngx.now: expired after the sleep, and get
    -- returns nil plus the stale value.
    lru:set("t", "old", 0.05)
    out[#out + 1] = tostring(lru:get("t"))
    ngx.sleep(0.2)
    local v, stale = lru:get("t")
    out[#out + 1] = tostring(v) .. "/" .. tostring(stale)
    if lru.count then out[#out + 1] = "count=" .. lru:count() .. "/" .. lru:capacity() end
    ngx.say(table.concat(out, " "))
end
