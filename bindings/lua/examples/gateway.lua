-- gateway.lua - a small API gateway: one route asks an upstream JSON API
-- two questions at once with the HTTP client and answers with the
-- combined result, on the same loop that serves.
--
--   luajit gateway.lua [PORT] [UPSTREAM]      then: curl localhost:PORT/users/1/summary
--
-- UPSTREAM is the base URL of the API (e.g. http://127.0.0.1:9000); without
-- it this server also plays the upstream under /api/. GET /users/:id/summary
-- fetches UPSTREAM/api/users/:id and UPSTREAM/api/users/:id/orders in two
-- light threads and answers {"id", "name", "orders", "total"}. An upstream
-- 404 is passed on; an unreachable upstream is a 502, a slow one a 504.
-- Prints "listening on PORT" once ready.

local here = (debug.getinfo(1, "S").source:match("^@(.*)/examples/[^/]*$")) or "."
package.path = here .. "/?.lua;" .. package.path
local nanosrv = require("nanosrv")

local srv = nanosrv.server { http_conns_per_origin = 16, http_head_timeout_ms = 5000 }
local port = srv:listen("http://127.0.0.1:" .. (arg[1] or "8080"))
local UPSTREAM = arg[2] or ("http://127.0.0.1:" .. port)
local JSON = { ["Content-Type"] = "application/json" }

-- The demo upstream: users and their orders.
local USERS = { ["1"] = { name = "Ada", orders = { 12.5, 30 } }, ["2"] = { name = "Linus", orders = {} } }
srv:route("GET", "/api/users/:id", function(req, res)
    local u = USERS[req.params.id]
    if not u then return res:send(404, '{"error":"no such user"}', JSON) end
    res:send(200, string.format('{"id":%s,"name":"%s"}', req.params.id, u.name), JSON)
end)
srv:route("GET", "/api/users/:id/orders", function(req, res)
    local u = USERS[req.params.id]
    if not u then return res:send(404, '{"error":"no such user"}', JSON) end
    local items = {}
    for i, amount in ipairs(u.orders) do items[i] = string.format('{"amount":%g}', amount) end
    res:send(200, '{"orders":[' .. table.concat(items, ",") .. "]}", JSON)
end)

-- One upstream call: the response, or nil and the status to answer with.
local function call(path)
    local res, err, code = srv:fetch(UPSTREAM .. path, { headers = { Accept = "application/json" }, timeout = 3000 })
    if not res then
        return nil, code == nanosrv.errors.ETIMEDOUT and 504 or 502, err
    end
    if res.status ~= 200 then return nil, res.status == 404 and 404 or 502, "upstream answered " .. res.status end
    return res
end

srv:route("GET", "/users/:id/summary", function(req, res)
    local id = req.params.id
    if not id:match("^%d+$") then return res:send(400, '{"error":"id must be a number"}', JSON) end
    -- Both questions at once: each fetch waits in its own thread.
    local user_th = srv:spawn(call, "/api/users/" .. id)
    local orders_th = srv:spawn(call, "/api/users/" .. id .. "/orders")
    local user, ustatus, uerr = user_th:wait()
    local orders, ostatus, oerr = orders_th:wait()
    if not user or not orders then
        local status, why = ustatus or ostatus, uerr or oerr
        return res:send(status, string.format('{"error":"%s"}', tostring(why):gsub('[%c"\\]', "")), JSON)
    end
    local n, total = 0, 0
    for k = 0, 1000 do
        local amount = nanosrv.json_number(orders.body, "$.orders[" .. k .. "].amount")
        if not amount then break end
        n, total = n + 1, total + amount
    end
    local name = nanosrv.json_string(user.body, "$.name") or ""
    res:send(200, string.format('{"id":%s,"name":"%s","orders":%d,"total":%g}', id, name:gsub('[%c"\\]', ""),
                                n, total), JSON)
end)

print("listening on " .. port)
io.stdout:flush()
srv:drain_on_signal()
srv:run()
