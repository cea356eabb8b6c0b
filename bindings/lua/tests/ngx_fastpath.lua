-- The ngx layer's hot path keeps the running request in a table the core
-- updates as it resumes coroutines, and reuses request records: these
-- check that a request never sees another's state through either.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")
local ngxmod = require("nanosrv.ngx")

local logs = {}
ngxmod.set_log_output({ write = function(_, ...) for _, s in ipairs({ ... }) do logs[#logs + 1] = tostring(s) end end,
                        flush = function() end })

local srv = nanosrv.server {}
local port = srv:listen("http://127.0.0.1:0")
local late = {} -- what the outliving thread's calls returned
local ngx
ngx = ngxmod.serve(srv, function()
    local uri = ngx.var.uri
    if uri == "/outlive" then
        -- A thread that outlives its request, then writes: it must reach
        -- no other request's answer.
        ngx.thread.spawn(function()
            ngx.sleep(0.05)
            late.say = { ngx.say("LEAK") }
            late.status = ngx.status
        end)
        ngx.status = 202
        ngx.header["X-Mine"] = "outlive"
        ngx.say("parent")
    elseif uri == "/co" then
        -- A coroutine of the handler's own calls the API for its request.
        local co = coroutine.create(function()
            ngx.print("in-co ")
            coroutine.yield()
            ngx.print(ngx.var.uri)
        end)
        coroutine.resume(co)
        ngx.print("| ")
        coroutine.resume(co)
    elseif uri == "/sleepy" then
        ngx.header["X-Mine"] = ngx.var.arg_n
        ngx.sleep(0.01 * tonumber(ngx.var.arg_n))
        ngx.say("sleepy ", ngx.var.arg_n, " ", ngx.var.uri)
    else
        ngx.say("plain ", uri, " ", tostring(ngx.header["X-Mine"]), " ", ngx.status)
    end
end)
local pump = function() srv:poll(2) end

local function fetch(target)
    local c = T.connect(port, pump)
    c:send(T.req("GET", target))
    local res = c:wait(function(b) return (T.parse_response(b, false, c.closed)) end, 5000)
    c:close()
    return res or { status = 0, headers = {}, body = "" }
end

local r = fetch("/outlive")
T.is(r.status, 202, "the parent answers")
T.is(r.body, "parent\n", "the parent's output only")
-- Requests while the thread sleeps (they reuse records of ended requests).
local bodies = {}
for i = 1, 5 do
    local x = fetch("/p" .. i)
    bodies[#bodies + 1] = x.body .. "|" .. tostring(x.headers["x-mine"])
end
T.is(table.concat(bodies, ","), "plain /p1 nil 0\n|nil,plain /p2 nil 0\n|nil,plain /p3 nil 0\n|nil,"
     .. "plain /p4 nil 0\n|nil,plain /p5 nil 0\n|nil", "later requests start clean: no header, status or output of another")
local deadline = nanosrv.millis() + 3000
while late.say == nil and nanosrv.millis() < deadline do srv:poll(5) end
T.is(late.say and late.say[2], "seen eof", "the thread's late ngx.say finds its own ended request")
T.is(late.status, 202, "and its own status")
r = fetch("/after")
T.is(r.body, "plain /after nil 0\n", "no LEAK in a request after the thread ended")

r = fetch("/co")
T.is(r.body, "in-co | /co", "a coroutine the handler made itself uses the handler's request")

-- Several requests waiting at once, resumed in another order than they
-- started: each resumes bound to its own request.
local cs = {}
for i, n in ipairs({ 3, 1, 2 }) do
    cs[i] = T.connect(port, pump)
    cs[i]:send(T.req("GET", "/sleepy?n=" .. n))
end
local got = {}
for i, n in ipairs({ 3, 1, 2 }) do
    local x = cs[i]:wait(function(b) return (T.parse_response(b, false, cs[i].closed)) end, 5000)
    cs[i]:close()
    got[#got + 1] = x and (x.body .. "|" .. tostring(x.headers["x-mine"])) or "none"
end
T.is(table.concat(got, ","), "sleepy 3 /sleepy\n|3,sleepy 1 /sleepy\n|1,sleepy 2 /sleepy\n|2",
     "interleaved waits: each request keeps its own variables, headers and output")

T.is(next(ngxmod._states), nil, "no request stays bound after the handlers ended")
T.is(table.concat(logs), "", "nothing logged")
srv:close()
T.done()
