-- app.lua - a small JSON API with a streamed endpoint and a chat room.
--
--   luajit app.lua [PORT]      then: curl localhost:PORT/todos
--
-- GET /todos, GET /todos/:id, POST /todos {"title": "..."} (parsed with the
-- library's JSON path reader), GET /count/:n streams n lines, /chat is a
-- WebSocket room that relays every message to everyone.

local here = (debug.getinfo(1, "S").source:match("^@(.*)/examples/[^/]*$")) or "."
package.path = here .. "/?.lua;" .. package.path
local nanosrv = require("nanosrv")

local srv = nanosrv.server { max_body = 64 * 1024, request_timeout_ms = 10000 }
local JSON = { ["Content-Type"] = "application/json" }

local todos, next_id = {}, 1
local function todo_json(t)
    return string.format('{"id":%d,"title":"%s"}', t.id, t.title:gsub('[%c"\\]', ""))
end

srv:route("GET", "/todos", function(_, res)
    local out = {}
    for _, t in ipairs(todos) do out[#out + 1] = todo_json(t) end
    res:send(200, "[" .. table.concat(out, ",") .. "]", JSON)
end)

srv:route("GET", "/todos/:id", function(req, res)
    local t = todos[tonumber(req.params.id) or 0]
    if not t then return res:send(404, '{"error":"no such todo"}', JSON) end
    res:send(200, todo_json(t), JSON)
end)

srv:route("POST", "/todos", function(req, res)
    local title = nanosrv.json_string(req.body, "$.title")
    if not title or title == "" then return res:send(400, '{"error":"title required"}', JSON) end
    local t = { id = next_id, title = title }
    todos[next_id], next_id = t, next_id + 1
    res:send(201, todo_json(t), { ["Content-Type"] = "application/json", Location = "/todos/" .. t.id })
end)

srv:route("GET", "/count/:n", function(req, res)
    local n = math.min(tonumber(req.params.n) or 0, 1000)
    res:start(200, "Content-Type: text/plain\r\n")
    for i = 1, n do res:write(i .. "\n") end
    res:finish()
end)

if nanosrv.features.websocket then
    local chat
    chat = srv:websocket("/chat", {
        open = function(ws, req) ws.data.who = req.peer .. ":" .. req.port end,
        message = function(ws, data) srv:broadcast(chat, ws.data.who .. ": " .. data) end,
        close = function(ws, code) io.stderr:write(ws.data.who, " left (", code, ")\n") end,
    })
end

local port = srv:listen("http://127.0.0.1:" .. (arg[1] or "8080"))
print("app listening on http://127.0.0.1:" .. port)
io.stdout:flush()
srv:run()
