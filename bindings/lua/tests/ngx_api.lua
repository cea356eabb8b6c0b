-- The ngx API (nanosrv/ngx.lua) through real HTTP requests: the handler
-- tests/ngx_cases/api.lua served in-process by ngxmod.serve, with the
-- outputs lua-nginx-module gives for the same requests (checked against
-- nginx by ngx_reference.lua). Every wait is bounded.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")
local ngxmod = require("nanosrv.ngx")

local logs = {}
ngxmod.set_log_output({ write = function(_, ...) for _, s in ipairs({ ... }) do logs[#logs + 1] = tostring(s) end end,
                        flush = function() end })
local function log_text() return table.concat(logs) end

local srv = nanosrv.server { max_body = 65536 }
local port = srv:listen("http://127.0.0.1:0")
ngxmod.shared_dict("ngx_test", "64k")
local ngx = ngxmod.serve(srv, assert(loadfile(T.dir .. "/ngx_cases/api.lua")))
T.ok(_G.ngx == ngx, "ngxmod.serve sets the global ngx")
local pump = function() srv:poll(2) end

-- One request on a new connection: the parsed response with .raw (the
-- whole response as received).
local function fetch(target, extra, body, method)
    local c = T.connect(port, pump)
    if target:find(" HTTP/1", 1, true) then
        c:send(target) -- a whole request of the caller's
    else
        c:send(T.req(method or (body and "POST" or "GET"), target, body, extra))
    end
    local head = method == "HEAD"
    local res = c:wait(function(b)
        local r, rest = T.parse_response(b, head, c.closed)
        if r then r.raw = b:sub(1, #b - #rest) end
        return r
    end, 5000)
    c:close()
    return res or { status = 0, headers = {}, body = "", raw = c.buf }
end
local function body_of(target, extra, body) return fetch(target, extra, body).body end

-- Output
local r = fetch("/say")
T.is(r.status, 200, "ngx.say: 200")
T.is(r.body, "a12.50truefalsenilnullxy3\npq\n0.33333333333333 1e+20 9.007199254741e+15 100\n",
     "ngx.say/print: numbers, -0, booleans, nil, ngx.null, nested tables flattened")
T.is(r.headers["content-length"], tostring(#r.body), "never flushed: one reply with Content-Length")
local get_len = r.headers["content-length"]
T.is(r.headers["content-type"], "text/plain", "Content-Type defaults to text/plain (default_type)")
r = fetch("/empty")
T.ok(r.status == 200 and r.body == "" and r.headers["content-type"] == "text/plain", "no output: 200, empty, text/plain")
r = fetch("/say", nil, nil, "HEAD")
T.ok(r.status == 200 and r.body == "" and r.headers["content-length"] == get_len, "HEAD: the length of the GET body, no body",
     r.raw)

-- Status
r = fetch("/status?s=201")
T.is(r.status, 201, "ngx.status = 201")
T.is(r.body, "0 201 false\n201 true\n", "ngx.status reads 0 before it is set; headers_sent after the first say")
T.like(log_text(), "%[error%] %d+#%d+: %*%d+ attempt to set ngx%.status after sending out response headers, client: 127%.0%.0%.1, server: , request: \"GET /status%?s=201 HTTP/1%.1\", host: \"t\"",
       "setting ngx.status after the headers logs nginx's line")

-- ngx.exit
local page404 = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
r = fetch("/exit?s=404")
T.ok(r.status == 404 and r.body == page404, "ngx.exit(404): nginx's 404 page")
T.ok(r.headers["content-type"] == "text/html" and r.headers["x-before"] == "kept", "error page: text/html, headers set before kept")
r = fetch("/exit?s=500")
T.like(r.body, "<title>500 Internal Server Error</title>", "ngx.exit(500): the 500 page")
T.is(r.headers.connection, "close", "ngx.exit(500): Connection: close, as nginx")
r = fetch("/exit?s=503")
T.like(r.body, "<h1>503 Service Temporarily Unavailable</h1>", "ngx.exit(503): nginx's title")
r = fetch("/exit?s=494")
T.ok(r.status == 400 and r.body:find("<center><h1>400 Bad Request</h1></center>\r\n<center>Request Header Or Cookie Too Large</center>", 1, true),
     "ngx.exit(494): a 400 with nginx's reason line")
r = fetch("/exit?s=418")
T.ok(r.status == 418 and r.body == "" and r.headers["content-type"] == nil, "ngx.exit(418): no page, no Content-Type")
r = fetch("/exit?s=204")
T.ok(r.status == 204 and r.headers["content-type"] == nil, "ngx.exit(204): no Content-Type")
r = fetch("/exit?s=201")
T.ok(r.status == 201 and r.body == "" and r.headers["content-type"] == "text/plain", "ngx.exit(201): empty, default type")
r = fetch("/exit?s=0")
T.ok(r.status == 200 and r.body == "", "ngx.exit(ngx.OK) with nothing sent: 200")
r = fetch("/exit_ok_status")
T.ok(r.status == 404 and r.body == "", "ngx.status = 404 then ngx.exit(ngx.OK): 404, no page")
r = fetch("/exit_after_say")
T.ok(r.status == 200 and r.body == "body\n", "ngx.exit(404) after output: ends the answer as it is")
T.like(log_text(), "attempt to set status 404 via ngx%.exit after sending out the response status 200", "... and logs it")
do
    local c = T.connect(port, pump)
    c:send(T.req("GET", "/exit?s=444"))
    T.ok(c:wait_closed(3000) and c.buf == "", "ngx.exit(444): connection closed without an answer")
    c:close()
end

-- ngx.redirect
r = fetch("/redirect?to=/a%3Fb")
T.ok(r.status == 302 and r.headers.location == "/a?b", "ngx.redirect(uri): 302 and Location as given")
T.like(r.body, "<title>302 Found</title>", "ngx.redirect: nginx's 302 page")
for _, s in ipairs({ 301, 303, 307, 308 }) do
    r = fetch("/redirect?to=http://e.x/&s=" .. s)
    T.ok(r.status == s and r.headers.location == "http://e.x/", "ngx.redirect(uri, " .. s .. ")")
end

-- Response headers
r = fetch("/headers_out")
T.is(r.body, "{a=1; Path=/,b=2} 1 2 application/json nil nil\n",
     "ngx.header: read back as set, case-insensitive, '_' as '-', nil removes")
T.ok(r.raw:find("\r\nSet%-Cookie: a=1; Path=/\r\nSet%-Cookie: b=2\r\n") ~= nil, "a table gives repeated Set-Cookie lines")
T.ok(r.raw:find("\r\nx%-under%-score: 1\r\n") and r.raw:find("\r\nX%-Mixed%-Case: 2\r\n") and r.raw:find("\r\nx%-num: 42\r\n"),
     "names as given with '_' turned into '-', numbers as text")
T.ok(not r.raw:lower():find("x%-gone"), "a header set to nil is not sent")
T.is(r.headers["content-type"], "application/json", "ngx.header.content_type")
r = fetch("/no_type")
T.ok(r.headers["content-type"] == nil and r.body == "untyped\n", "content_type = nil: no Content-Type")
r = fetch("/content_length")
T.ok(r.body == "12345" and r.headers["content-length"] == "5", "a Content-Length of the handler's")
r = fetch("/header_late")
T.ok(r.body == "first\nnil\n" and r.headers["x-late"] == nil, "a header set after the first output is dropped")
T.like(log_text(), "attempt to set ngx%.header%.HEADER after sending out response headers", "... and logged")

-- flush, eof
r = fetch("/flush")
T.ok(r.chunked and r.body == "one\ntwo\n" and r.headers["x-streamed"] == "yes", "ngx.flush: a chunked stream with the headers set")
r = fetch("/eof")
T.is(r.body, "before\n", "ngx.eof ends the answer")
T.like(log_text(), "%[lua%] api%.lua:%d+: say after eof: nil seen eof", "ngx.say after eof: nil, \"seen eof\" (and ngx.log's format)")

-- ngx.var
r = fetch("/var?a=1&B=2", "X-Test: t1\r\nCookie: c=cv\r\n")
local want_var = table.concat({
    "uri=/var", "document_uri=/var", "request_uri=/var?a=1&B=2", "args=a=1&B=2", "query_string=a=1&B=2",
    "is_args=?", "arg_a=1", "arg_B=2", "arg_none=nil", "host=t", "http_host=t", "http_x_test=t1",
    "cookie_c=cv", "cookie_none=nil", "scheme=http", "https=", "request_method=GET",
    "server_protocol=HTTP/1.1", "request=GET /var?a=1&B=2 HTTP/1.1", "content_type=nil",
    "content_length=nil", "remote_addr=127.0.0.1", "nonexistent=nil", 'set uri: false variable "uri" not changeable',
}, "\n") .. "\n"
T.is(r.body, want_var, "ngx.var: nginx's variables; unknown names nil; built-ins not changeable")
r = fetch("GET //x/./y/../../v%61r HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n")
T.ok(r.body:find("uri=/var\n", 1, true) and r.body:find("host=example.com\n", 1, true),
     "$uri percent-decoded and normalised; $host lower-case without the port")
r = fetch("/../x")
T.ok(r.status == 400 and r.body:find("400 Bad Request", 1, true), "'..' above the root: 400 as nginx")

-- ngx.req
r = fetch("/args?a=1&b&c=&a=2&d=%20+x&=e&f==")
T.is(r.body, "a={1,2}\nb=true\nc=\nd=  x\nf==\nerr=nil\n", "get_uri_args: repeated, bare names true, '+' and %XX decoded")
r = fetch("/args?a=1&b=2&c=3&max=2")
T.is(r.body, "a=1\nb=2\nerr=truncated\n", "get_uri_args(max): \"truncated\"")
r = fetch("/post", "Content-Type: application/x-www-form-urlencoded\r\n", "a=1&b=%20&b=2")
T.is(r.body, "before read: false no request body found; maybe you should turn on lua_need_request_body?\n" ..
             "data before: nil\na=1\nb={ ,2}\ndata: a=1&b=%20&b=2\n", "get_post_args needs read_body; get_body_data")
r = fetch("/req", "X-Test: t1\r\nX-Multi: 1\r\nX-Multi: 2\r\n")
T.is(r.body, "GET 1.1 number\nt1 t1 {1,2} nil\nchanged changed\nnil nil\n2 truncated\n{1,2} nil\n",
     "get_method, http_version, get_headers (case-insensitive, repeated as a table, max, raw), set_header, clear_header")
r = fetch("GET /port HTTP/1.1\r\nHost: 127.0.0.1:" .. port .. "\r\n\r\n")
T.is(r.body, "server_port matches Host\n", "ngx.var.server_port is the listener's port")

-- Strings, digests, time
r = fetch("/strings")
local lines = {}
for l in r.body:gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
T.is(lines[1], ("%00%01%02%03%04%05%06%07%08%09%0A%0B%0C%0D%0E%0F%10%11%12%13%14%15%16%17%18%19%1A%1B%1C%1D%1E%1F" ..
     "%20!%22%23%24%25%26'()*%2B%2C-.%2F0123456789%3A%3B%3C%3D%3E%3F%40ABCDEFGHIJKLMNOPQRSTUVWXYZ%5B%5C%5D%5E_%60" ..
     "abcdefghijklmnopqrstuvwxyz%7B%7C%7D~") .. (function()
        local t = {}
        for i = 127, 255 do t[#t + 1] = string.format("%%%02X", i) end
        return table.concat(t)
     end)(), "escape_uri: nginx's component table")
T.like(lines[2], "^%%00.*%%1F%%20!\"%%23%$%%25&'%(%)%*%+,%-%./0123456789:;<=>%%3F@", "escape_uri(s, 0): nginx's URI table")
T.is(lines[3], "a b c%zz%4A", "unescape_uri: '+', %XX, invalid sequences kept")
T.is(lines[4], "a=x%20y b c=1&c=2 []", "encode_args")
T.is(lines[5], "{1,2} true [ ]", "decode_args")
T.is(lines[6], "YWI= YWI ", "encode_base64 (with and without padding)")
T.is(lines[7], "abc ab nil a nil", "decode_base64: optional padding, nginx's stop at '=', invalid input nil")
T.is(lines[8], [['a\'b\"c\\d\0e\nf\rg\tz\Z']], "quote_sql_str")
T.is(lines[9], "907060870 907060870 0", "crc32_short/long")
T.is(lines[10], "5d41402abc4b2a76b9719d911017c592 16 qvTGHdzF6KLavt4PO0gs2a6pQ00=", "md5, md5_bin, sha1_bin")
T.is(lines[11], "3nybhbi3iqa8ino29wqQcBydtNk=", "hmac_sha1 (RFC 2104 example)")
r = fetch("/time")
T.is(r.body, "Thu, 18 Nov 2010 11:27:35 GMT|Thu, 18-Nov-10 11:27:35 GMT|Sun, 27-Jul-2042 13:14:15 GMT\n" ..
             "1290079655 1290079655 nil\nnumber floor 19 19 10\nmonotone\n",
     "http_time, cookie_time (2- and 4-digit years), parse_http_time, now/time/localtime/utctime/today")

-- ngx.ctx, constants, sleep, threads, timers, cjson
T.ok(body_of("/ctx") == "ctx 1\n" and body_of("/ctx") == "ctx 1\n", "ngx.ctx is per request")
T.is(body_of("/constants"), "0 -1 -2 -4 -5 200 404 500 2 8 0 4 8 http 0 false userdata: NULL\n", "constants")
T.is(body_of("/sleep"), "slept enough\n", "ngx.sleep")
T.is(body_of("/thread"), "{true,42,x}\nfalse thread boom\n", "ngx.thread.spawn/wait: results, and false + error")
T.like(log_text(), "lua user thread aborted: runtime error: [^\n]*thread boom", "a failing thread is logged")
T.is(body_of("/timer"), "1 nil number\n", "ngx.timer.at returns 1")
for _ = 1, 200 do
    if ngxmod.shared_dict("ngx_test", "64k"):get("timer") then break end
    srv:poll(5)
end
T.is(ngxmod.shared_dict("ngx_test", "64k"):get("timer"), "fired", "the timer ran with its argument")
if pcall(require, "cjson") then
    T.is(body_of("/json"), "null is ngx.null {\"v\":null}\n", "cjson in handlers; ngx.null == cjson.null")
else
    T.ok(false, "lua-cjson is installed (Debian lua-cjson)")
end

-- Concurrency: a sleeping handler does not hold back a fast one.
do
    local order = {}
    local slow = T.connect(port, pump)
    slow:send(T.req("GET", "/sleep"))
    local fast = T.connect(port, pump)
    fast:send(T.req("GET", "/ctx"))
    for _ = 1, 2000 do
        if not order[1] and fast:fill(0) and fast.buf:find("ctx 1") then order[#order + 1] = "fast" end
        if slow:fill(0) and slow.buf:find("slept") then order[#order + 1] = "slow"; break end
        srv:poll(2)
    end
    T.is(table.concat(order, ","), "fast,slow", "a request answered while another sleeps in ngx.sleep")
    slow:close(); fast:close()
end

-- Outside a request
T.raises("API disabled in the current context", "ngx.say outside a request raises", ngx.say, "x")
T.ok(ngx.escape_uri("a b") == "a%20b" and ngx.now() > 0, "string and time functions work outside requests")

srv:close()
T.done()
