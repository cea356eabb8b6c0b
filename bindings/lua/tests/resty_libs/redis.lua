-- Content handler for tests/resty_libs.lua: lua-resty-redis, written as for
-- content_by_lua_file. ?port= is the redis-server's, ?key= the key to use.
local redis = require("resty.redis")
local args = ngx.req.get_uri_args()
local port = tonumber(args.port)
local key = args.key or "k"

local red = redis:new()
red:set_timeouts(2000, 2000, 2000)
local ok, err = red:connect("127.0.0.1", port)
if not ok then
    ngx.say("connect: ", err)
    return
end
local uri = ngx.var.uri

if uri == "/basic" then
    ngx.say("reused: ", red:get_reused_times())
    ngx.say("set: ", red:set(key, "v-" .. key))
    ngx.say("get: ", red:get(key))
    ngx.say("del: ", red:del(key))
    local v = red:get(key)
    ngx.say("missing: ", v == ngx.null and "null" or tostring(v))
    ngx.say("incr: ", red:incr(key .. ":n"), " ", red:incr(key .. ":n"))
    red:del(key .. ":n")
elseif uri == "/pipeline" then
    red:init_pipeline()
    red:set(key .. ":a", "1")
    red:set(key .. ":b", "2")
    red:incrby(key .. ":a", 41)
    red:get(key .. ":b")
    red:mget(key .. ":a", key .. ":b", key .. ":none")
    local res, perr = red:commit_pipeline()
    if not res then ngx.say("pipeline: ", perr) return end
    local out = {}
    for i, v in ipairs(res) do
        if type(v) == "table" then
            for j, x in ipairs(v) do v[j] = x == ngx.null and "null" or x end
            out[i] = "[" .. table.concat(v, ",") .. "]"
        else
            out[i] = tostring(v)
        end
    end
    ngx.say("pipeline: ", table.concat(out, " "))
    red:del(key .. ":a", key .. ":b")
elseif uri == "/error" then
    red:set(key, "text")
    local res, rerr = red:incr(key)
    ngx.say("incr: ", tostring(res), " ", tostring(rerr))
    red:del(key)
elseif uri == "/concurrent" then
    -- Each request writes its own key, waits on the server (BLPOP on an
    -- empty list times out after 0.1 s) and reads it back.
    red:set(key, "own-" .. key)
    red:blpop(key .. ":empty", 0.1)
    ngx.say(red:get(key))
    red:del(key)
end

local kok, kerr = red:set_keepalive(10000, 100)
if not kok then ngx.say("keepalive: ", kerr) end
