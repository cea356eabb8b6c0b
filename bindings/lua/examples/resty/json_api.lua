-- A small JSON API with lua-cjson:
--   GET  /items        -> the list
--   POST /items {...}  -> 201 and the stored item (JSON body, "name" required)
--   GET  /items/N      -> one item, or 404 {"error": "..."}
-- Items live in ngx.shared.items (this process only).
local cjson = require("cjson")
local items = ngx.shared.items

local function reply(status, value)
    ngx.status = status
    ngx.header.content_type = "application/json"
    ngx.say(cjson.encode(value))
    return ngx.exit(ngx.OK)
end

local method, uri = ngx.req.get_method(), ngx.var.uri
if uri == "/items" and method == "GET" then
    local list = {}
    for i = 1, items:get("count") or 0 do
        local v = items:get("item:" .. i)
        if v then list[#list + 1] = cjson.decode(v) end
    end
    -- lua-cjson writes an empty table as {}: give the list as text then
    if #list == 0 then
        ngx.header.content_type = "application/json"
        return ngx.say('{"count":0,"items":[]}')
    end
    return reply(200, { items = list, count = #list })
elseif uri == "/items" and method == "POST" then
    ngx.req.read_body()
    local ok, body = pcall(cjson.decode, ngx.req.get_body_data() or "")
    if not ok or type(body) ~= "table" or type(body.name) ~= "string" then
        return reply(400, { error = "expected a JSON object with a string \"name\"" })
    end
    local id = items:incr("count", 1, 0)
    local item = { id = id, name = body.name, tags = type(body.tags) == "table" and body.tags or nil }
    items:set("item:" .. id, cjson.encode(item))
    return reply(201, item)
end
local id = tonumber(uri:match("^/items/(%d+)$"))
if id and method == "GET" then
    local v = items:get("item:" .. id)
    if not v then return reply(404, { error = "no item " .. id }) end
    ngx.header.content_type = "application/json"
    return ngx.print(v, "\n")
end
return reply(404, { error = "no route " .. method .. " " .. uri })
