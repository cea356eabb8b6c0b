-- nanosrv/shdict.lua - ngx.shared.DICT: an in-process dictionary per name
-- with a byte budget, expiry in seconds and LRU eviction, with the return
-- values and error strings of lua-nginx-module's shared dictionaries.
--
-- It lives in the Lua state of the server (one process): it is not shared
-- between processes. Sizes are counted per entry as key + value + a fixed
-- overhead, so how many entries fit differs from nginx's slab allocator.

local M = {}

local DEFAULT_SIZE = 1048576
local OVERHEAD = 64 -- per entry, for the node and its queue links
local MAX_KEY = 65535

local sizes, dicts = {}, {}
local clock = os.clock -- replaced below by a wall-ish monotonic clock
do
    local ok, nanosrv = pcall(require, "nanosrv")
    if ok and nanosrv.millis then clock = function() return nanosrv.millis() / 1000 end end
end
M._clock = function() return clock() end
function M.set_clock(f) clock = f end

local Dict = {}
Dict.__index = Dict

local function new_dict(name, bytes)
    return setmetatable({ name = name, cap = bytes, used = 0, map = {}, head = nil, tail = nil }, Dict)
end

-- The queue: head = most recently used, tail = next to evict.
local function unlink(d, n)
    if n.p then n.p.n = n.n else d.head = n.n end
    if n.n then n.n.p = n.p else d.tail = n.p end
    n.p, n.n = nil, nil
end
local function push_head(d, n)
    n.n = d.head
    n.p = nil
    if d.head then d.head.p = n end
    d.head = n
    if not d.tail then d.tail = n end
end
local function remove(d, n)
    unlink(d, n)
    d.map[n.key] = nil
    d.used = d.used - n.size
end

local function expired(n, now)
    return n.exp ~= 0 and n.exp <= now
end

local function check_key(key, fname)
    local t = type(key)
    if t == "number" then key = tostring(key)
    elseif key == nil then error("bad argument #1 to '" .. fname .. "' (nil key)", 3)
    elseif t ~= "string" then error("bad argument #1 to '" .. fname .. "' (string key expected, got " .. t .. ")", 3) end
    if key == "" then return nil, "empty key" end
    if #key > MAX_KEY then return nil, "key too long" end
    return key
end

local function value_size(v)
    local t = type(v)
    if t == "string" then return #v end
    if t == "number" then return 8 end
    return 1
end

-- Make room for need bytes: expired entries from the tail first, then
-- (unless safe) the least recently used ones. Returns ok, forcible.
local function make_room(d, need, safe, now)
    if need > d.cap then return false, false end
    local n = d.tail
    while n and d.used + need > d.cap do
        local p = n.p
        if expired(n, now) then remove(d, n) end
        n = p
    end
    if d.used + need <= d.cap then return true, false end
    if safe then return false, false end
    local forcible = false
    while d.tail and d.used + need > d.cap do
        remove(d, d.tail)
        forcible = true
    end
    return d.used + need <= d.cap, forcible
end

local function check_exptime(exptime, fname)
    if exptime == nil then return 0 end
    if type(exptime) ~= "number" or exptime < 0 then
        error("bad argument #3 to '" .. fname .. "' (exptime must be a number >= 0)", 4)
    end
    return exptime
end

local function store(d, fname, key, value, exptime, flags, mode)
    local err
    key, err = check_key(key, fname)
    if not key then return false, err, false end
    local vt = type(value)
    if vt ~= "string" and vt ~= "number" and vt ~= "boolean" and value ~= nil then
        return nil, "bad value type"
    end
    exptime = check_exptime(exptime, fname)
    if flags ~= nil and type(flags) ~= "number" then error("bad argument #4 to '" .. fname .. "' (flags must be a number)", 3) end
    local now = clock()
    local old = d.map[key]
    local live = old and not expired(old, now)
    if mode == "add" and live then return false, "exists", false end
    if mode == "replace" and not live then return false, "not found", false end
    if old then remove(d, old) end
    if value == nil then return true, nil, false end
    local size = OVERHEAD + #key + value_size(value)
    local ok, forcible = make_room(d, size, mode == "safe", now)
    if not ok then return false, "no memory", false end
    local n = { key = key, value = value, flags = flags or 0, exp = exptime > 0 and now + exptime or 0, size = size }
    d.map[key] = n
    d.used = d.used + size
    push_head(d, n)
    return true, nil, forcible
end

function Dict:set(key, value, exptime, flags) return store(self, "set", key, value, exptime, flags, "set") end
function Dict:safe_set(key, value, exptime, flags) return store(self, "safe_set", key, value, exptime, flags, "safe") end
function Dict:add(key, value, exptime, flags) return store(self, "add", key, value, exptime, flags, "add") end
function Dict:safe_add(key, value, exptime, flags)
    local key2, err = check_key(key, "safe_add")
    if not key2 then return false, err, false end
    local old = self.map[key2]
    if old and not expired(old, clock()) then return false, "exists", false end
    return store(self, "safe_add", key2, value, exptime, flags, "safe")
end
function Dict:replace(key, value, exptime, flags) return store(self, "replace", key, value, exptime, flags, "replace") end
function Dict:delete(key) return (store(self, "delete", key, nil, 0, nil, "set")) end

local function lookup(d, key, fname)
    local err
    key, err = check_key(key, fname)
    if not key then return nil, err end
    local n = d.map[key]
    return n, nil, key
end

function Dict:get(key)
    local n, err = lookup(self, key, "get")
    if err then return nil, err end
    if not n then return nil end
    if expired(n, clock()) then return nil end
    if n.list then return nil, "value is a list" end
    unlink(self, n)
    push_head(self, n)
    if n.flags ~= 0 then return n.value, n.flags end
    return n.value
end

-- Also an expired value (not yet evicted), with stale = true.
function Dict:get_stale(key)
    local n, err = lookup(self, key, "get_stale")
    if err then return nil, err end
    if not n then return nil end
    if n.list then return nil, "value is a list" end
    local stale = expired(n, clock())
    return n.value, n.flags ~= 0 and n.flags or nil, stale
end

function Dict:incr(key, value, init, init_ttl)
    if type(value) ~= "number" then error("bad argument #2 to 'incr' (number expected, got " .. type(value) .. ")", 2) end
    if init ~= nil and type(init) ~= "number" then error("bad argument #3 to 'incr' (number expected)", 2) end
    local n, err, k = lookup(self, key, "incr")
    if err then return nil, err end
    local now = clock()
    if not n or expired(n, now) then
        if init == nil then return nil, "not found" end
        if init_ttl ~= nil and (type(init_ttl) ~= "number" or init_ttl < 0) then
            error("bad argument #4 to 'incr' (init_ttl must be a number >= 0)", 2)
        end
        local ok, e, forcible = store(self, "incr", k, init + value, init_ttl or 0, nil, "set")
        if not ok then return nil, e end
        return init + value, nil, forcible
    end
    if n.list or type(n.value) ~= "number" then return nil, "not a number" end
    n.value = n.value + value
    unlink(self, n)
    push_head(self, n)
    return n.value
end

function Dict:ttl(key)
    local n, err = lookup(self, key, "ttl")
    if err then return nil, err end
    local now = clock()
    if not n or expired(n, now) then return nil, "not found" end
    if n.exp == 0 then return 0 end
    return n.exp - now
end

function Dict:expire(key, exptime)
    local n, err = lookup(self, key, "expire")
    if err then return nil, err end
    if type(exptime) ~= "number" or exptime < 0 then error("bad argument #2 to 'expire' (exptime must be a number >= 0)", 2) end
    local now = clock()
    if not n or expired(n, now) then return nil, "not found" end
    n.exp = exptime > 0 and now + exptime or 0
    return true
end

-- Drops every entry: after it, get_stale finds none and flush_expired
-- counts none, as with lua-resty-core's.
function Dict:flush_all()
    self.map, self.head, self.tail, self.used = {}, nil, nil, 0
end

function Dict:flush_expired(max)
    max = max or 0
    local now, count = clock(), 0
    local n = self.tail
    while n do
        local p = n.p
        if expired(n, now) then
            remove(self, n)
            count = count + 1
            if max > 0 and count >= max then break end
        end
        n = p
    end
    return count
end

function Dict:get_keys(max)
    max = max or 1024
    local out, now = {}, clock()
    local n = self.head
    while n do
        if not expired(n, now) then
            out[#out + 1] = n.key
            if max > 0 and #out >= max then break end
        end
        n = n.n
    end
    return out
end

function Dict:capacity() return self.cap end
function Dict:free_space() return self.cap - self.used end

-- Lists: a key holds either a value or a list of strings and numbers.
local function push(d, fname, key, value, front)
    local n, err, k = lookup(d, key, fname)
    if err then return nil, err end
    local vt = type(value)
    if vt ~= "string" and vt ~= "number" then return nil, "bad value type" end
    local now = clock()
    if n and expired(n, now) then remove(d, n); n = nil end
    if n and not n.list then return nil, "value not a list" end
    local add = value_size(value) + 16
    if not n then
        local size = OVERHEAD + #k + add
        local ok = make_room(d, size, false, now)
        if not ok then return nil, "no memory" end
        n = { key = k, list = { h = 1, t = 0 }, flags = 0, exp = 0, size = size }
        d.map[k] = n
        d.used = d.used + size
        push_head(d, n)
    else
        unlink(d, n) -- keep it out of the eviction it may cause
        local ok = make_room(d, add, false, now)
        push_head(d, n)
        if not ok then return nil, "no memory" end
        n.size = n.size + add
        d.used = d.used + add
    end
    local l = n.list
    if front then l.h = l.h - 1; l[l.h] = value else l.t = l.t + 1; l[l.t] = value end
    return l.t - l.h + 1
end

local function pop(d, fname, key, front)
    local n, err = lookup(d, key, fname)
    if err then return nil, err end
    if not n or expired(n, clock()) then return nil end
    if not n.list then return nil, "value not a list" end
    local l = n.list
    local v
    if front then v = l[l.h]; l[l.h] = nil; l.h = l.h + 1 else v = l[l.t]; l[l.t] = nil; l.t = l.t - 1 end
    local sz = value_size(v) + 16
    n.size = n.size - sz
    d.used = d.used - sz
    if l.t < l.h then remove(d, n) end
    return v
end

function Dict:lpush(key, value) return push(self, "lpush", key, value, true) end
function Dict:rpush(key, value) return push(self, "rpush", key, value, false) end
function Dict:lpop(key) return pop(self, "lpop", key, true) end
function Dict:rpop(key) return pop(self, "rpop", key, false) end
function Dict:llen(key)
    local n, err = lookup(self, key, "llen")
    if err then return nil, err end
    if not n or expired(n, clock()) then return 0 end
    if not n.list then return nil, "value not a list" end
    return n.list.t - n.list.h + 1
end

---------------------------------------------------------------------------

-- Sizes like nginx's: 10m, 512k, 1048576.
function M.parse_size(s)
    if type(s) == "number" then return s end
    if type(s) ~= "string" then return nil end
    local n, unit = s:lower():match("^(%d+)([kmg]?)$")
    if not n then return nil end
    return tonumber(n) * (unit == "k" and 1024 or unit == "m" and 1048576 or unit == "g" and 1073741824 or 1)
end

-- The byte budget of a dictionary, before or after its first use.
function M.define(name, bytes)
    if type(name) ~= "string" or name == "" then error("bad argument #1 to 'shared_dict' (name expected)", 2) end
    local n = M.parse_size(bytes)
    if not n or n < 8192 then
        error("bad argument #2 to 'shared_dict' (size of at least 8k expected, like 10m, 512k or 65536)", 2)
    end
    sizes[name] = n
    local d = dicts[name]
    if d then d.cap = n end
    return dicts[name] or M.get(name)
end

function M.get(name)
    local d = dicts[name]
    if not d then
        d = new_dict(name, sizes[name] or DEFAULT_SIZE)
        dicts[name] = d
    end
    return d
end

-- ngx.shared: a dictionary by name, made on first use.
function M.registry()
    return setmetatable({}, {
        __index = function(_, name)
            if type(name) ~= "string" then return nil end
            return M.get(name)
        end,
        __newindex = function() error("ngx.shared is read-only", 2) end,
    })
end

M.Dict = Dict
return M
