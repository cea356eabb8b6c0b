-- Content handler exercising the ngx API; each path is one case. Run by
-- tests/ngx_api.lua (expected outputs) and tests/ngx_reference.lua (the
-- same requests against nginx + lua-nginx-module). Output is deterministic.
local u = ngx.var.uri
local arg = ngx.req.get_uri_args()

local function show(v)
    if type(v) == "table" then
        local o = {}
        for i, x in ipairs(v) do o[i] = tostring(x) end
        return "{" .. table.concat(o, ",") .. "}"
    end
    return tostring(v)
end
local function sorted(t)
    local ks = {}
    for k in pairs(t) do ks[#ks + 1] = k end
    table.sort(ks)
    return ks
end

if u == "/say" then
    ngx.say("a", 1, 2.5, -0.0, true, false, nil, ngx.null, { "x", { "y", 3 } })
    ngx.print("p", "q")
    ngx.say()
    ngx.say(1 / 3, " ", 1e20, " ", 2 ^ 53, " ", 100)
elseif u == "/empty" then
    return
elseif u == "/status" then
    local before = ngx.status
    ngx.status = tonumber(arg.s)
    ngx.say(before, " ", ngx.status, " ", tostring(ngx.headers_sent))
    ngx.status = 299 -- after the headers: logged and ignored
    ngx.say(ngx.status, " ", tostring(ngx.headers_sent))
elseif u == "/exit" then
    ngx.header.x_before = "kept"
    return ngx.exit(tonumber(arg.s))
elseif u == "/exit_after_say" then
    ngx.say("body")
    return ngx.exit(404)
elseif u == "/exit_ok_status" then
    ngx.status = 404
    return ngx.exit(ngx.OK)
elseif u == "/redirect" then
    if arg.s then return ngx.redirect(arg.to, tonumber(arg.s)) end
    return ngx.redirect(arg.to)
elseif u == "/headers_out" then
    ngx.header.x_under_score = "1"
    ngx.header["X-Mixed-Case"] = "2"
    ngx.header["Set-Cookie"] = { "a=1; Path=/", "b=2" }
    ngx.header.content_type = "application/json"
    ngx.header.x_num = 42
    ngx.header.x_gone = "x"
    ngx.header.x_gone = nil
    ngx.say(show(ngx.header.set_cookie), " ", ngx.header["x-under-score"], " ", ngx.header.X_MIXED_CASE, " ",
            ngx.header.content_type, " ", tostring(ngx.header.x_gone), " ", tostring(ngx.header.x_never))
elseif u == "/no_type" then
    ngx.header.content_type = nil
    ngx.say("untyped")
elseif u == "/content_length" then
    ngx.header.content_length = 5
    ngx.print("12345")
elseif u == "/header_late" then
    ngx.say("first")
    ngx.header.x_late = "no"
    ngx.say(tostring(ngx.header.x_late))
elseif u == "/flush" then
    ngx.header.x_streamed = "yes"
    ngx.say("one")
    ngx.flush(true)
    ngx.sleep(0.01)
    ngx.say("two")
elseif u == "/eof" then
    ngx.say("before")
    ngx.eof()
    local ok, err = ngx.say("after")
    ngx.log(ngx.ERR, "say after eof: ", tostring(ok), " ", tostring(err))
elseif u == "/var" then
    for _, n in ipairs { "uri", "document_uri", "request_uri", "args", "query_string", "is_args", "arg_a", "arg_B",
                         "arg_none", "host", "http_host", "http_x_test", "cookie_c", "cookie_none", "scheme",
                         "https", "request_method", "server_protocol", "request", "content_type",
                         "content_length", "remote_addr", "nonexistent" } do
        ngx.say(n, "=", tostring(ngx.var[n]))
    end
    local ok, err = pcall(function() ngx.var.uri = "/x" end)
    ngx.say("set uri: ", tostring(ok), " ", tostring(err):match('variable "uri" not changeable') or tostring(err))
elseif u == "/args" then
    local a, err = ngx.req.get_uri_args(tonumber(ngx.var.arg_max))
    for _, k in ipairs(sorted(a)) do ngx.say(k, "=", show(a[k])) end
    ngx.say("err=", tostring(err))
elseif u == "/post" then
    local ok, err = pcall(ngx.req.get_post_args)
    ngx.say("before read: ", tostring(ok), " ", tostring(err))
    ngx.say("data before: ", tostring(ngx.req.get_body_data()))
    ngx.req.read_body()
    local a = ngx.req.get_post_args()
    for _, k in ipairs(sorted(a)) do ngx.say(k, "=", show(a[k])) end
    ngx.say("data: ", tostring(ngx.req.get_body_data()))
elseif u == "/req" then
    ngx.say(ngx.req.get_method(), " ", ngx.req.http_version(), " ", type(ngx.req.start_time()))
    local h, err = ngx.req.get_headers()
    ngx.say(h["X-Test"], " ", h.x_test, " ", show(h["x-multi"]), " ", tostring(err))
    ngx.req.set_header("X-Test", "changed")
    ngx.say(ngx.var.http_x_test, " ", ngx.req.get_headers()["x-test"])
    ngx.req.clear_header("X-Test")
    ngx.say(tostring(ngx.var.http_x_test), " ", tostring(ngx.req.get_headers()["x-test"]))
    local few, ferr = ngx.req.get_headers(2)
    local n = 0
    for _ in pairs(few) do n = n + 1 end
    ngx.say(n, " ", tostring(ferr))
    local raw = ngx.req.get_headers(0, true)
    ngx.say(show(raw["X-Multi"]), " ", tostring(raw["x-multi"]))
elseif u == "/port" then
    local h = ngx.var.http_host or ""
    ngx.say(ngx.var.server_port == h:match(":(%d+)$") and "server_port matches Host" or
            ("server_port " .. tostring(ngx.var.server_port) .. " vs " .. h))
elseif u == "/strings" then
    local all = {}
    for i = 0, 255 do all[#all + 1] = string.char(i) end
    all = table.concat(all)
    ngx.say(ngx.escape_uri(all))
    ngx.say(ngx.escape_uri(all, 0))
    ngx.say(ngx.unescape_uri("a+b%20c%zz%4%41"))
    ngx.say(ngx.encode_args({ a = "x y" }), " ", ngx.encode_args({ b = true }), " ", ngx.encode_args({ c = { "1", "2" } }),
            " [", ngx.encode_args({ d = false }), "]")
    local d = ngx.decode_args("a=1&b&c=%20&a=2")
    ngx.say(show(d.a), " ", tostring(d.b), " [", d.c, "]")
    ngx.say(ngx.encode_base64("ab"), " ", ngx.encode_base64("ab", true), " ", ngx.encode_base64(""))
    ngx.say(ngx.decode_base64("YWJj"), " ", ngx.decode_base64("YWI"), " ", tostring(ngx.decode_base64("Y")), " ",
            ngx.decode_base64("YW=j"), " ", tostring(ngx.decode_base64("Y*==")))
    ngx.say(ngx.quote_sql_str("a'b\"c\\d\0e\nf\rg\tz\26"))
    ngx.say(ngx.crc32_short("hello"), " ", ngx.crc32_long("hello"), " ", ngx.crc32_long(""))
    ngx.say(ngx.md5("hello"), " ", #ngx.md5_bin("x"), " ", ngx.encode_base64(ngx.sha1_bin("hello")))
    ngx.say(ngx.encode_base64(ngx.hmac_sha1("key", "The quick brown fox jumps over the lazy dog")))
elseif u == "/time" then
    ngx.say(ngx.http_time(1290079655), "|", ngx.cookie_time(1290079655), "|", ngx.cookie_time(2290079655))
    ngx.say(ngx.parse_http_time("Thu, 18 Nov 2010 11:27:35 GMT"), " ",
            tostring(ngx.parse_http_time("Thursday, 18-Nov-10 11:27:35 GMT")), " ",
            tostring(ngx.parse_http_time("nonsense")))
    local t = ngx.now()
    ngx.say(type(t), " ", ngx.time() == math.floor(t) and "floor" or "not floor", " ", #ngx.localtime(), " ",
            #ngx.utctime(), " ", #ngx.today())
    ngx.update_time()
    ngx.say(ngx.now() >= t and "monotone" or "backwards")
elseif u == "/ctx" then
    ngx.ctx.n = (ngx.ctx.n or 0) + 1
    ngx.say("ctx ", ngx.ctx.n)
elseif u == "/constants" then
    ngx.say(ngx.OK, " ", ngx.ERROR, " ", ngx.AGAIN, " ", ngx.DONE, " ", ngx.DECLINED, " ", ngx.HTTP_OK, " ",
            ngx.HTTP_NOT_FOUND, " ", ngx.HTTP_INTERNAL_SERVER_ERROR, " ", ngx.HTTP_GET, " ", ngx.HTTP_POST, " ",
            ngx.STDERR, " ", ngx.ERR, " ", ngx.DEBUG, " ", ngx.config.subsystem, " ", ngx.worker.id(), " ",
            tostring(ngx.worker.exiting()), " ", tostring(ngx.null))
elseif u == "/sleep" then
    local t0 = ngx.now()
    ngx.sleep(0.02)
    ngx.update_time()
    ngx.say("slept ", ngx.now() - t0 >= 0.015 and "enough" or "too little")
elseif u == "/thread" then
    local t1 = ngx.thread.spawn(function(a) ngx.sleep(0.01); return a * 2, "x" end, 21)
    local t2 = ngx.thread.spawn(function() error("thread boom") end)
    ngx.say(show({ ngx.thread.wait(t1) }))
    local ok, err = ngx.thread.wait(t2)
    ngx.say(tostring(ok), " ", tostring(err):match("thread boom") or tostring(err))
elseif u == "/timer" then
    local done = ngx.shared.ngx_test
    local ok, err = ngx.timer.at(0, function(premature, x) if done then done:set("timer", x) end end, "fired")
    ngx.say(tostring(ok), " ", tostring(err), " ", type(ngx.timer.pending_count()))
elseif u == "/json" then
    local cjson = require("cjson")
    local body = cjson.decode('{"a":[1,2],"n":null}')
    ngx.say(body.n == ngx.null and "null is ngx.null" or "null differs", " ", cjson.encode({ v = ngx.null }))
else
    ngx.status = 404
    ngx.say("no case ", u)
end
