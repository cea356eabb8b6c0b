-- Web-application features: streamed request bodies in coroutine handlers
-- (backpressure, early answers, a client leaving), query/form/cookie
-- tables, Set-Cookie, multipart, server-sent events and static files. An
-- in-process server driven from the test's thread, real loopback sockets;
-- every wait is bounded in rounds and time.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local LIMIT = 64 * 1024
local srv = nanosrv.server { max_body = 64 * 1048576, request_timeout_ms = 20000, body_buffer = LIMIT }
local port = srv:listen("http://127.0.0.1:0")
local pump = function() srv:poll(2) end
local seen = {}

-- Streamed body: count and checksum the pieces as they come.
srv:route("POST", "/sum", function(req, res)
    local n, sum, pieces = 0, 0, 0
    for chunk in req:body_chunks() do
        n, pieces = n + #chunk, pieces + 1
        sum = (sum + chunk:byte(1) + chunk:byte(-1)) % 65536
    end
    seen.sum_streamed = req.streamed
    res:send(200, n .. " " .. pieces)
end, { stream_body = true })

-- A slow consumer: takes one piece, then waits until the test releases it.
srv:route("POST", "/slow", function(req, res)
    local it = req:body_chunks()
    local n = #(it() or "")
    seen.slow_req = req
    for _ = 1, 4000 do
        if seen.release then break end
        srv:sleep(5)
    end
    for chunk in it do n = n + #chunk end
    res:send(200, tostring(n))
end, { stream_body = true })

-- Early answer: refuse large uploads before reading them.
srv:route("PUT", "/limited", function(req, res)
    if tonumber(req:header("content-length") or 0) > 1000 then
        return res:send(413, "too large\n")
    end
    res:send(200, req:read_body())
end, { stream_body = true })

-- A handler that sees the client leave mid-body.
srv:route("POST", "/gone", function(req, res)
    local ok, err = pcall(function() for _ in req:body_chunks() do end end)
    seen.gone_ok, seen.gone_err = ok, err
    seen.gone_done = true
    if ok then res:send(200, "complete") end
end, { stream_body = true })

-- read_body with a limit of its own: an HttpError 413 escaping the handler.
srv:route("POST", "/whole", function(req, res)
    res:send(200, "got " .. #req:read_body(100000))
end, { stream_body = true })

-- Query strings, forms, cookies, Set-Cookie.
local function dump(t)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    local out = {}
    for _, k in ipairs(keys) do
        local v = t[k]
        out[#out + 1] = k .. "=" .. (type(v) == "table" and "[" .. table.concat(v, ",") .. "]" or v)
    end
    return table.concat(out, ";")
end
srv:route("GET", "/query", function(req, res) res:send(200, dump(req:query_args())) end)
srv:route("POST", "/form", function(req, res)
    local f, err = req:form()
    res:send(f and 200 or 415, f and dump(f) or err)
end, { stream_body = true })
srv:route("GET", "/cookies", function(req, res)
    res:set_cookie("sid", "abc123", { path = "/", http_only = true, same_site = "Lax", max_age = 60 })
    res:set_cookie("theme", "dark")
    res:send(200, dump(req:cookies()) .. "|" .. tostring(req:cookie("a")))
end)
srv:route("GET", "/badcookie", function(_, res)
    seen.badcookie = { pcall(res.set_cookie, res, "sid", "a b") }
    seen.badsamesite = { pcall(res.set_cookie, res, "sid", "x", { same_site = "None" }) }
    res:send(200, "ok")
end)

-- Multipart, part by part.
srv:route("POST", "/parts", function(req, res)
    local out = {}
    for part in req:multipart() do
        local n = 0
        for piece in part:pieces() do n = n + #piece end
        out[#out + 1] = table.concat({ part.name, part.filename or "-", part.content_type or "-", n }, ":")
    end
    res:send(200, table.concat(out, "\n"))
end, { stream_body = true })
srv:route("POST", "/spool", function(req, res)
    local out = {}
    for part in req:multipart() do
        local s = part:spool(10)
        if s.path then
            local f = io.open(s.path, "rb")
            local data = f:read("*a")
            f:close()
            os.remove(s.path)
            out[#out + 1] = part.name .. " file " .. #data .. " " .. data:sub(1, 3)
        else
            out[#out + 1] = part.name .. " mem " .. s.data
        end
    end
    res:send(200, table.concat(out, "\n"))
end, { stream_body = true })

-- Server-sent events.
srv:route("GET", "/events", function(_, res)
    local sse = res:sse()
    sse:send { data = "one\ntwo", event = "greet", id = "7", retry = 1500 }
    sse:comment("keepalive")
    sse:send("plain")
    seen.badsse = { pcall(sse.send, sse, { data = "x", event = "a\nb" }) }
    sse:close()
    seen.after_close = { sse:send("late") }
end)
srv:route("GET", "/forever", function(_, res)
    local sse = res:sse()
    seen.forever_sse = sse
    local chunk = string.rep("x", 8192)
    for i = 1, 100000 do
        local ok = sse:send { data = chunk, id = tostring(i) }
        if not ok then
            seen.forever_stopped, seen.forever_sent = (ok == nil), i
            return
        end
    end
end, { coroutine = true })

-- Static files: a mount served in C and send_file from a handler.
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir .. "/sub") == 0 or true)
local function put(name, data) local f = assert(io.open(dir .. "/" .. name, "wb")); f:write(data); f:close() end
put("a.txt", "hello static\n")
put("sub/page.html", "<p>hi</p>")
put(".secret", "no")
srv:static("/static/", dir, { cache_control = "max-age=60" })
srv:route("GET", "/file/*", function(req, res)
    local ok, why = res:send_file(req.params["*"], { root = dir, headers = { ["X-From"] = "handler" } })
    if not ok then res:send(404, "custom miss: " .. why) end
end)
srv:route("GET", "/abs", function(_, res) res:send_file(dir .. "/a.txt", { status = 203 }) end)
local bad_static = { pcall(srv.static, srv, "/x/", dir, { sparkle = true }) }

local c = T.connect(port, pump)

-- Streamed bodies ----------------------------------------------------------
do
    local body = string.rep("abcdefgh", 262144) -- 2 MiB
    c:send_pumped(T.req("POST", "/sum", body))
    local r = c:response(nil, 10000)
    T.is(r and r.body:match("^(%d+)"), tostring(#body), "streamed body: every byte reaches the handler")
    T.ok(r and tonumber(r.body:match(" (%d+)$")) > 1, "streamed body: it came in several pieces", r and r.body)
    T.is(seen.sum_streamed, true, "req.streamed is true")
    r = c:request("POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    T.like(r and r.body, "^5 %d$", "chunked body streamed (de-chunked)")
    r = c:request(T.req("POST", "/sum", ""))
    T.is(r and r.body, "0 0", "empty body: no pieces")
end

-- Backpressure: a slow consumer pauses reading; the socket stays full.
do
    local total = 24 * 1048576
    local bc = T.connect(port, pump)
    local payload = T.req("POST", "/slow", string.rep("z", total))
    local off, max_queued, full_rounds, paused = 0, 0, 0, false
    for _ = 1, 3000 do
        local n = bc:try_send(payload, off)
        if not n then break end
        off = off + n
        if n == 0 then full_rounds = full_rounds + 1 end
        pump()
        local req = seen.slow_req
        if req then
            if req.body_queued > max_queued then max_queued = req.body_queued end
            paused = paused or req.body_paused
        end
        if full_rounds > 200 then break end
    end
    T.ok(paused, "slow consumer: reading paused")
    T.ok(full_rounds > 200 and off < #payload, "slow consumer: the client's socket stays full (" .. off ..
         " of " .. #payload .. " bytes taken)")
    T.ok(max_queued <= LIMIT + 1048576, "slow consumer: unread body bounded (max " .. max_queued .. " bytes)")
    T.ok((srv.body_pauses or 0) >= 1, "server counts the pauses")
    seen.release = true
    local ok = bc:send_pumped(payload:sub(off + 1), 200000)
    T.ok(ok, "released: the rest of the body goes through")
    local r = bc:response(nil, 20000)
    T.is(r and r.body, tostring(total), "released: the handler read every byte")
    bc:close()
end

-- Early answer before the body (Expect: 100-continue gets no 100).
do
    local ec = T.connect(port, pump)
    ec:send("PUT /limited HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\nExpect: 100-continue\r\n\r\n")
    local r = ec:response(nil, 5000)
    T.is(r and r.status, 413, "early 413 before the body")
    T.is(r and r.headers.connection, "close", "early answer closes the connection (the body is dropped)")
    ec:close()
    ec = T.connect(port, pump)
    r = ec:request("PUT /limited HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    T.is(r and r.status, 100, "small body: 100 Continue from the library")
    ec:send("small")
    r = ec:response(nil, 5000)
    T.is(r and r.body, "small", "then the answer with the body")
    ec:close()
end

-- The client leaves mid-body: the reader raises, nothing is logged as a bug.
do
    local gc = T.connect(port, pump)
    gc:send("POST /gone HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n" .. string.rep("g", 5000))
    for _ = 1, 50 do pump() end
    gc:close()
    for _ = 1, 500 do
        if seen.gone_done then break end
        pump()
    end
    T.is(seen.gone_ok, false, "client gone mid-body: reading raises")
    T.ok(nanosrv.is_http_error(seen.gone_err) and seen.gone_err.code == nanosrv.errors.ECLOSED,
         "the error is an HttpError with code ECLOSED", tostring(seen.gone_err))
end

-- read_body(max) past its limit answers 413 through the escaping HttpError.
do
    local wc = T.connect(port, pump)
    wc:send_pumped(T.req("POST", "/whole", string.rep("w", 200000)))
    local r = wc:response(nil, 5000)
    T.is(r and r.status, 413, "read_body(max): HttpError 413 escaping the handler is the answer")
    wc:close()
    wc = T.connect(port, pump)
    r = wc:request(T.req("POST", "/whole", "12345"))
    T.is(r and r.body, "got 5", "read_body: whole body")
    wc:close()
end

-- Query, form, cookies ------------------------------------------------------
local r = c:request(T.req("GET", "/query?a=1&b=x&a=2&c=%20d+e&a=3&empty"))
T.is(r and r.body, "a=[1,2,3];b=x;c= d e;empty=", "query: decoded, repeated keys as arrays in order")
T.is(dump(nanosrv.parse_query("x=1&y=2&x=")), "x=[1,];y=2", "parse_query")
local pairs_list = nanosrv.query_pairs("b=1&a=2&b=3")
T.is(#pairs_list == 3 and pairs_list[3][1] .. pairs_list[3][2], "b3", "query_pairs keeps every pair in order")
r = c:request(T.req("POST", "/form", "name=J%C3%B6rg&tag=a&tag=b",
                    "Content-Type: application/x-www-form-urlencoded\r\n"))
T.is(r and r.body, "name=J\195\182rg;tag=[a,b]", "urlencoded form body")
r = c:request(T.req("POST", "/form", "{}", "Content-Type: application/json\r\n"))
T.is(r and r.status, 415, "form(): another type gives nil, message")
r = c:request(T.req("GET", "/cookies", nil, "Cookie: a=1; b=\"two\"; a=3\r\n"))
T.is(r and r.body, "a=[1,3];b=two|1", "cookies parsed, repeats in header order, cookie(name) the first")
do
    local raw = c:request(T.req("GET", "/cookies"))
    T.ok(raw ~= nil, "Set-Cookie answer")
end
-- The parser keeps only the last header of a name; read the raw lines.
c:send(T.req("GET", "/cookies"))
local head = c:wait(function(b) local e = b:find("\r\n\r\n", 1, true); if e then return b:sub(1, e) end end, 3000)
c:response(nil, 3000)
T.like(head, "\r\nSet%-Cookie: sid=abc123; Path=/; Max%-Age=60; HttpOnly; SameSite=Lax\r\n", "Set-Cookie with attributes")
T.like(head, "\r\nSet%-Cookie: theme=dark\r\n", "second Set-Cookie line")
c:request(T.req("GET", "/badcookie"))
T.ok(seen.badcookie[1] == false and tostring(seen.badcookie[2]):find("NSV_EINVAL") and
     tostring(seen.badcookie[2]):find("value"), "bad cookie value raises with the library's detail",
     tostring(seen.badcookie[2]))
T.ok(seen.badsamesite[1] == false and tostring(seen.badsamesite[2]):find("SECURE"),
     "SameSite=None without Secure raises", tostring(seen.badsamesite[2]))
T.raises("same_site must be", "unknown SameSite name", nanosrv.cookie, "a", "b", { same_site = "sometimes" })
T.is(nanosrv.cookie("a", "b", { secure = true, same_site = "None", domain = "example.com" }),
     "a=b; Domain=example.com; Secure; SameSite=None", "nanosrv.cookie builds the value")

-- Multipart -----------------------------------------------------------------
local function mp_body(b, parts)
    local out = {}
    for _, p in ipairs(parts) do
        out[#out + 1] = "--" .. b .. "\r\nContent-Disposition: form-data; name=\"" .. p[1] .. "\"" ..
                        (p[2] and ("; filename=\"" .. p[2] .. "\"") or "") .. "\r\n" ..
                        (p[3] and ("Content-Type: " .. p[3] .. "\r\n") or "") .. "\r\n" .. p[4] .. "\r\n"
    end
    return table.concat(out) .. "--" .. b .. "--\r\n"
end
do
    local big = string.rep("0123456789", 50000)
    local body = mp_body("XyZ", { { "note", nil, nil, "hello" }, { "file", "a.bin", "application/x-thing", big },
                                  { "skip", nil, nil, "" } })
    c:send_pumped(T.req("POST", "/parts", body, "Content-Type: multipart/form-data; boundary=XyZ\r\n"))
    r = c:response(nil, 5000)
    T.is(r and r.body, "note:-:-:5\nfile:a.bin:application/x-thing:500000\nskip:-:-:0",
         "multipart: name, filename, content type and data size of each part")
    r = c:request(T.req("POST", "/parts", "--XyZ\r\nbroken\r\n\r\nx\r\n--XyZ--\r\n",
                        "Content-Type: multipart/form-data; boundary=XyZ\r\n"))
    T.is(r and r.status, 400, "malformed multipart: 400")
    T.like(r and r.body, "^multipart: byte %d+:", "the 400 names the byte")
    r = c:request(T.req("POST", "/parts", "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx",
                        "Content-Type: multipart/form-data; boundary=XyZ\r\n"))
    T.is(r and r.status, 400, "multipart without its final boundary: 400")
    r = c:request(T.req("POST", "/parts", "x=1", "Content-Type: application/x-www-form-urlencoded\r\n"))
    T.is(r and r.status, 415, "not multipart: 415")
    r = c:request(T.req("POST", "/spool", mp_body("b", { { "small", nil, nil, "tiny" }, { "large", "l", nil, "abcdefghijklmnop" } }),
                        "Content-Type: multipart/form-data; boundary=b\r\n"))
    T.is(r and r.body, "small mem tiny\nlarge file 16 abc", "spool: small parts in memory, large ones in a file")
    -- The parser object alone, fed byte by byte.
    local mp = nanosrv.multipart()
    local p = mp.new("multipart/form-data; boundary=q")
    local recs = {}
    for ch in mp_body("q", { { "k", "f.txt", "text/plain", "v1" } }):gmatch(".") do
        for _, rec in ipairs(p:feed(ch)) do recs[#recs + 1] = rec.type .. (rec.data or rec.name or "") end
    end
    p:finish()
    T.is(table.concat(recs, ","), "partk,datav,data1,part_end,end", "parser fed byte by byte")
    local bad, msg, status = mp.new("text/plain")
    T.ok(bad == nil and status == 415, "parser for another type: nil, message, 415", msg)
end

-- Server-sent events --------------------------------------------------------
do
    local function sse_events(text)
        local events = {}
        for block in text:gmatch("(.-)\n\n") do
            local ev, data = {}, {}
            for line in (block .. "\n"):gmatch("(.-)\n") do
                local k, v = line:match("^([^:]*): ?(.*)$")
                if k == "data" then data[#data + 1] = v elseif k ~= "" and k then ev[k] = v end
            end
            if #data > 0 then ev.data = table.concat(data, "\n"); events[#events + 1] = ev end
        end
        return events
    end
    local sc = T.connect(port, pump)
    r = sc:request(T.req("GET", "/events"), nil, 5000)
    T.is(r and r.headers["content-type"], "text/event-stream", "SSE content type")
    local evs = sse_events(r and r.body or "")
    T.is(#evs, 2, "two events (the comment is not one)")
    T.ok(evs[1] and evs[1].data == "one\ntwo" and evs[1].event == "greet" and evs[1].id == "7" and
         evs[1].retry == "1500", "event with multi-line data, name, id and retry")
    T.is(evs[2] and evs[2].data, "plain", "data-only event")
    T.like(r and r.body, "\n: keepalive\n", "comment line")
    T.ok(seen.badsse[1] == false and tostring(seen.badsse[2]):find("NSV_EINVAL"),
         "CR/LF in an event name raises", tostring(seen.badsse[2]))
    T.ok(seen.after_close[1] == nil and seen.after_close[2] == "closed", "send after close: nil, 'closed'")
    sc:close()

    -- Paced by the client; the client leaving stops the stream.
    local fc = T.connect(port, pump)
    fc:send(T.req("GET", "/forever"))
    for _ = 1, 100 do pump() end
    T.ok(seen.forever_sse and not seen.forever_stopped, "a stream to a client that does not read waits")
    fc:close()
    for _ = 1, 500 do
        if seen.forever_stopped then break end
        pump()
    end
    T.ok(seen.forever_stopped, "the client leaving ends the stream (send gives nil)")
    T.ok(seen.forever_sent and seen.forever_sent < 100000, "only what the client could take was sent (" ..
         tostring(seen.forever_sent) .. " events)")
end

-- Static files --------------------------------------------------------------
do
    r = c:request(T.req("GET", "/static/a.txt"))
    T.is(r and r.body, "hello static\n", "static mount serves a file")
    T.like(r and r.headers["content-type"], "^text/plain", "static: content type from the name")
    T.is(r and r.headers["cache-control"], "max-age=60", "static: cache_control option")
    local etag = r and r.headers.etag
    r = c:request(T.req("GET", "/static/a.txt", nil, "If-None-Match: " .. tostring(etag) .. "\r\n"))
    T.is(r and r.status, 304, "static: If-None-Match gives 304")
    r = c:request(T.req("GET", "/static/a.txt", nil, "Range: bytes=0-4\r\n"))
    T.ok(r and r.status == 206 and r.body == "hello", "static: a range gives 206")
    r = c:request(T.req("GET", "/static/.secret"))
    T.is(r and r.status, 404, "static: dot files are 404 by default")
    r = c:request(T.req("GET", "/static/../web.lua"))
    T.is(r and r.status, 404, "static: no way out of the directory")
    r = c:request(T.req("GET", "/file/sub/page.html"))
    T.is(r and r.body, "<p>hi</p>", "send_file under a root")
    T.ok(r and r.headers["x-from"] == "handler" and r.headers["content-type"]:find("^text/html"),
         "send_file: the handler's headers and the guessed type")
    r = c:request(T.req("GET", "/file/sub/page.html", nil, "Range: bytes=3-\r\n"))
    T.ok(r and r.status == 206 and r.body == "hi</p>", "send_file honours Range from the request")
    r = c:request(T.req("GET", "/file/nope.txt"))
    T.ok(r and r.status == 404 and r.body == "custom miss: not found", "send_file of a missing file: nil, 'not found'")
    r = c:request(T.req("GET", "/abs"))
    T.ok(r and r.status == 203 and r.body == "hello static\n", "send_file of a file system path with a status")
    T.ok(bad_static[1] == false and tostring(bad_static[2]):find("unknown option 'sparkle'"),
         "static: unknown option raises", tostring(bad_static[2]))
    T.like(nanosrv.mime_type("index.html"), "^text/html", "mime_type")
    T.ok(nanosrv.static_flags.list and nanosrv.static_flags.dotfiles, "static flags by name")
end
os.execute("rm -rf " .. dir)

c:close()
srv:close()
T.done()
