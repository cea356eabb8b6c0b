-- examples/gateway.lua as its users run it: a child process answering curl
-- with results combined from two upstream calls; an upstream 404 passed
-- on, a refused upstream a 502, a silent one a 504.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local EXAMPLE = T.bindir .. "/examples/gateway.lua"
local CURL = "curl -sS --max-time 15 -w ' %{http_code}' "

-- A silent upstream (accepts, never answers) and a port nothing listens on.
local srv = nanosrv.server()
local SILENT = srv:listen("tcp://127.0.0.1:0", { on_data = function() end, on_eof = function() end })
local REFUSED
do
    local s = nanosrv.server()
    REFUSED = s:listen("http://127.0.0.1:0")
    s:close()
end
local function pump() srv:poll(5) end

local gw = T.start("luajit " .. EXAMPLE .. " 0")
T.ok(gw ~= nil, "gateway.lua prints its port")
local base = "http://127.0.0.1:" .. (gw and gw.port or 1)
local function get(b, path)
    local rc, out, err = T.run(CURL .. b .. path, pump, 20000)
    return rc == 0 and out or ("curl failed: " .. tostring(err))
end
T.is(get(base, "/users/1/summary"), '{"id":1,"name":"Ada","orders":2,"total":42.5} 200',
     "a summary combined from two upstream answers")
T.is(get(base, "/users/2/summary"), '{"id":2,"name":"Linus","orders":0,"total":0} 200', "a user without orders")
T.like(get(base, "/users/99/summary"), " 404$", "an upstream 404 is passed on")
T.like(get(base, "/users/x/summary"), " 400$", "a bad id is a 400")
if gw then T.stop(gw) end

local bad = T.start("luajit " .. EXAMPLE .. " 0 http://127.0.0.1:" .. REFUSED)
T.like(bad and get("http://127.0.0.1:" .. bad.port, "/users/1/summary"), "NSV_ECONNREFUSED.* 502$",
       "a refused upstream: 502 naming the cause")
if bad then T.stop(bad) end
local slow = T.start("luajit " .. EXAMPLE .. " 0 http://127.0.0.1:" .. SILENT)
T.like(slow and get("http://127.0.0.1:" .. slow.port, "/users/1/summary"), "NSV_ETIMEDOUT.* 504$",
       "a silent upstream: 504 after the call's timeout")
if slow then T.stop(slow) end
srv:close()
T.done()
