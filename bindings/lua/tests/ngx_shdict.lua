-- ngx.shared.DICT (nanosrv/shdict.lua): return values and error strings
-- as lua-nginx-module's (tests/ngx_cases/shdict.lua over HTTP; the same
-- output nginx gives, see ngx_reference.lua), expiry under a controlled
-- clock, the byte budget with LRU eviction, and sizes.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")
local ngxmod = require("nanosrv.ngx")
local shdict = require("nanosrv.shdict")

-- Over HTTP, through ngx.shared.
local srv = nanosrv.server {}
local port = srv:listen("http://127.0.0.1:0")
ngxmod.shared_dict("ngx_test", "1m")
ngxmod.serve(srv, assert(loadfile(T.dir .. "/ngx_cases/shdict.lua")))
local c = T.connect(port, function() srv:poll(2) end)
local r = c:request(T.req("GET", "/"))
c:close()
T.is(r and r.body, (table.concat({
    "set true nil false",
    "get v",
    "set flags true nil false",
    "get flags 1.5 7",
    "bool true false",
    "get missing nil",
    "bad value nil bad value type",
    "empty key nil empty key",
    "add existing false exists false",
    "add new true nil false",
    "safe_add existing false exists false",
    "replace missing false not found false",
    "replace true v2",
    "incr missing nil not found",
    "incr init 12 nil false",
    "incr 9",
    "incr float 9.5",
    "incr string nil not a number",
    "delete true nil",
    "set nil deletes true nil",
    "ttl none 0",
    "ttl missing nil not found",
    "expire missing nil not found",
    "expire true",
    "ttl set true",
    "get_stale 9.5 nil false",
    "lpush 1 2 3",
    "llen 3 0",
    "get list nil value is a list",
    "push non-list nil value not a list",
    "pop 3 b a nil",
    "bad list value nil bad value type",
    "keys 3 1",
    "stale after flush_all nil",
    "keys after flush_all 0",
    "flush_expired 0 0",
    "after flush_expired nil nil",
    "capacity 1048576",
}, "\n") .. "\n"), "every operation's results as OpenResty's")

-- Expiry, with the clock in the test's hands (no waiting).
local now = 1000
shdict.set_clock(function() return now end)
local d = ngxmod.shared_dict("expiry", "64k")
T.ok(d:set("k", "v", 10), "set with exptime")
now = now + 9.5
T.is(d:get("k"), "v", "alive before its exptime")
T.ok(math.abs(d:ttl("k") - 0.5) < 1e-9, "ttl counts down")
now = now + 1
T.is(d:get("k"), nil, "gone after its exptime")
local v, flags, stale = d:get_stale("k")
T.ok(v == "v" and flags == nil and stale == true, "get_stale: the expired value, stale = true")
T.ok(d:add("k", "new"), "add over an expired key succeeds")
d:set("e", 1, 5)
T.ok(d:expire("e", 0) and d:ttl("e") == 0, "expire(key, 0): no expiry any more")
now = now + 100
T.is(d:get("e"), 1, "... so it stays")
d:set("x1", 1, 1); d:set("x2", 2, 1)
now = now + 2
T.is(d:flush_expired(), 2, "flush_expired counts what it removed")
T.is(d:incr("c", 1, 0, 3), 1, "incr with init and init_ttl")
now = now + 4
T.ok(d:get("c") == nil and select(2, d:incr("c", 1)) == "not found", "init_ttl applies")
T.is(#d:get_keys(0), 2, "get_keys(0): every live key (k and e)")

-- The byte budget and LRU eviction.
local small = ngxmod.shared_dict("small", "8k")
T.is(small:capacity(), 8192, "capacity is the configured size")
local value = ("x"):rep(1000)
local forcible_at
for i = 1, 20 do
    if i == 3 then small:get("k1") end -- k1 recently used: k2 is the oldest then
    local ok, err, forcible = small:set("k" .. i, value)
    if not ok then T.ok(false, "set in a full dictionary evicts", err) break end
    if forcible and not forcible_at then forcible_at = i end
end
T.ok(forcible_at ~= nil, "a full dictionary evicts: forcible = true (at set #" .. tostring(forcible_at) .. ")")
T.ok(small:get("k1") == nil or small:get("k2") == nil, "the least recently used entries went")
T.ok(small:get("k20") == value, "the newest entry is there")
T.ok(small:free_space() >= 0 and small:free_space() < 8192, "free_space within the budget")
local ok, err = small:safe_set("big", value)
T.ok(ok == false and err == "no memory", "safe_set in a full dictionary: false, \"no memory\"")
ok, err = small:set("huge", ("y"):rep(9000))
T.ok(ok == false and err == "no memory", "a value larger than the dictionary: \"no memory\"")
T.ok(small:get("k20") == value, "... and nothing was evicted for it")
local l = ngxmod.shared_dict("lists", "8k")
local n
for i = 1, 1000 do
    n, err = l:rpush("q", ("z"):rep(100))
    if not n then break end
end
T.is(err, "no memory", "a list that outgrows the dictionary: \"no memory\"")

-- Sizes and names
T.is(shdict.parse_size("10m"), 10485760, "10m"); T.is(shdict.parse_size("512k"), 524288, "512k")
T.is(shdict.parse_size("10x"), nil, "a bad size")
T.raises("size of at least 8k", "a dictionary smaller than 8k is refused", ngxmod.shared_dict, "tiny", 100)
T.raises("nil key", "a nil key raises", function() return d:get(nil) end)
T.ok(select(2, d:get("")) == "empty key" and select(2, d:set(("k"):rep(65536), 1)) == "key too long", "empty and too long keys")
T.is(ngxmod.shared_dict("auto", "1m") and shdict.get("first_use"):capacity(), 1048576, "a dictionary made on first use has 1 MiB")

srv:close()
T.done()
