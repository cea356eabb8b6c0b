-- Error paths of nanosrv/ngx.lua: a handler that raises (500 page and a
-- log line with the traceback), ngx.exit's ways of ending, and header
-- injection through ngx.header / ngx.redirect (an error, never on the
-- wire). Handler: tests/ngx_cases/errors.lua, served in-process.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")
local ngxmod = require("nanosrv.ngx")

local logs = {}
ngxmod.set_log_output({ write = function(_, ...) for _, s in ipairs({ ... }) do logs[#logs + 1] = tostring(s) end end,
                        flush = function() end })
local function take_log()
    local s = table.concat(logs)
    logs = {}
    return s
end

local srv = nanosrv.server {}
local port = srv:listen("http://127.0.0.1:0")
ngxmod.serve(srv, assert(loadfile(T.dir .. "/ngx_cases/errors.lua")))
local pump = function() srv:poll(2) end

-- One request; returns the parsed response (or nil) and everything the
-- client received before the connection closed or the answer completed.
local function fetch(target)
    local c = T.connect(port, pump)
    c:send(T.req("GET", target))
    local res = c:wait(function(b)
        local r, rest = T.parse_response(b, false, false)
        if r then r.raw = b:sub(1, #b - #rest) end
        if r or c.closed then return r or false end
    end, 5000)
    local raw = c.buf
    if res then raw = res.raw end
    c:close()
    return res or nil, raw
end

local page500 = "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n" ..
                "<center><h1>500 Internal Server Error</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

local r = fetch("/raise")
T.ok(r and r.status == 500 and r.body == page500, "a raising handler: nginx's 500 page")
T.is(r and r.headers.connection, "close", "... with Connection: close")
local log = take_log()
T.like(log, "^%d%d%d%d/%d%d/%d%d %d%d:%d%d:%d%d %[error%] %d+#%d+: %*%d+ lua entry thread aborted: runtime error: " ..
            "[^\n]*errors%.lua:4: boom\nstack traceback:\n", "log line: nginx's shape, the message and a traceback")
T.like(log, "errors%.lua:4: in main chunk, client: 127%.0%.0%.1, server: , request: \"GET /raise HTTP/1%.1\", host: \"t\"\n$",
       "traceback ends at the handler, then the request")
T.ok(not log:find("nanosrv.lua", 1, true), "the dispatch frames are left out of the traceback")

r = fetch("/raise_table")
T.ok(r and r.status == 500, "raising a table: 500")
T.like(take_log(), "runtime error: table: 0x", "... logged")

local res, raw = fetch("/raise_after_say")
T.ok(res == nil and raw == "", "raise after buffered output: connection closed, nothing sent (as nginx)")
T.like(take_log(), "runtime error: [^\n]*late boom", "... logged")

res, raw = fetch("/raise_after_flush")
T.ok(res == nil and raw:find("^HTTP/1%.1 200") and raw:find("partial\n", 1, true) and not raw:find("\r\n0\r\n\r\n", 1, true),
     "raise after a flush: the stream is cut without its last chunk", raw)
take_log()

res, raw = fetch("/exit_error")
T.ok(res == nil and raw == "", "ngx.exit(ngx.ERROR): closed without an answer")
res, raw = fetch("/exit_444")
T.ok(res == nil and raw == "", "ngx.exit(444): closed without an answer")

r = fetch("/exit_pcall")
T.ok(r and r.status == 403 and not r.body:find("not sent"), "ngx.exit caught by pcall: the answer is the 403, nothing after it")

for _, case in ipairs({ "/inject_value", "/inject_name", "/inject_list" }) do
    r = fetch(case)
    T.ok(r and r.status == 500 and not r.raw:find("X-Evil", 1, true), case .. ": 500, nothing injected")
    T.like(take_log(), "ngx%.header: header [^\n]* (%a+)", case .. ": the log says which header broke which rule")
end
r = fetch("/inject_caught")
T.is(r and r.body, "false ngx.header: header 'X-A' value contains CR, LF, NUL or another control character\nno case /inject_caught\n",
     "the error can be caught, and names the header and the rule")
r = fetch("/redirect_bad")
T.ok(r and r.status == 500 and not r.raw:find("evil", 1, true), "ngx.redirect with CR LF in the uri: 500, nothing injected")
T.like(take_log(), "uri contains CR, LF", "... logged")
r = fetch("/redirect_status")
T.ok(r and r.status == 500, "ngx.redirect with status 200: 500")
T.like(take_log(), "only ngx%.HTTP_MOVED_TEMPORARILY, ngx%.HTTP_MOVED_PERMANENTLY", "... with OpenResty's message")
r = fetch("/print_bad")
T.ok(r and r.status == 500 and r.body == page500, "ngx.say(function): 500 page (nothing was sent)")
T.like(take_log(), "bad argument to 'print'", "... logged")
r = fetch("/var_set")
T.ok(r and r.status == 500, "assigning a built-in ngx.var: 500")
T.like(take_log(), 'variable "remote_addr" not changeable', "... as nginx says it")

-- The server goes on, and no request is left bound to a coroutine.
r = fetch("/unknown")
T.ok(r and r.status == 200 and r.body == "no case /unknown\n", "the server still serves after every error")
T.is(next(ngxmod._states), nil, "no request stays bound to a coroutine after its handler ended")

srv:close()
T.done()
