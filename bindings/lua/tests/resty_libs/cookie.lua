-- Content handler for tests/resty_libs.lua: lua-resty-cookie reads the
-- Cookie header (ngx.var.http_cookie) and sets cookies (ngx.header, a
-- table for the repeated Set-Cookie), before any output.
local ck = require("resty.cookie")
local cookie, err = ck:new()
if not cookie then ngx.say("new: ", err) return end
local ok1, e1 = cookie:set({ key = "s1", value = "v1", path = "/", httponly = true })
local ok2, e2 = cookie:set({ key = "s2", value = "v2", max_age = 60 })
local all = cookie:get_all() or {}
local names = {}
for k in pairs(all) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do ngx.say(k, "=", all[k]) end
ngx.say("one: ", tostring(cookie:get("b")))
ngx.say("set: ", tostring(ok1), " ", tostring(e1), " ", tostring(ok2), " ", tostring(e2))
