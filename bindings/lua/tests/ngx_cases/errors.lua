-- Error paths: a handler that raises, ngx.exit forms, bad header input.
local u = ngx.var.uri
if u == "/raise" then
    error("boom")
elseif u == "/raise_table" then
    error({ code = 1 })
elseif u == "/raise_after_say" then
    ngx.say("partial")
    error("late boom")
elseif u == "/raise_after_flush" then
    ngx.say("partial")
    ngx.flush(true)
    error("stream boom")
elseif u == "/exit_error" then
    return ngx.exit(ngx.ERROR)
elseif u == "/exit_444" then
    return ngx.exit(444)
elseif u == "/exit_pcall" then
    pcall(ngx.exit, 403) -- the answer is sent: nothing after it reaches the client
    ngx.say("not sent")
elseif u == "/inject_value" then
    ngx.header["X-A"] = "a\r\nX-Evil: 1"
    ngx.say("not reached")
elseif u == "/inject_name" then
    ngx.header["X-A\r\nX-Evil"] = "1"
    ngx.say("not reached")
elseif u == "/inject_list" then
    ngx.header["Set-Cookie"] = { "ok=1", "bad=1\nX-Evil: 1" }
    ngx.say("not reached")
elseif u == "/inject_caught" then
    local ok, err = pcall(function() ngx.header["X-A"] = "v\0" end)
    ngx.say(tostring(ok), " ", err:match("ngx%.header: .*") or err)
elseif u == "/redirect_bad" then
    return ngx.redirect("/x\r\nSet-Cookie: evil=1")
elseif u == "/redirect_status" then
    return ngx.redirect("/x", 200)
elseif u == "/print_bad" then
    ngx.say(function() end)
elseif u == "/var_set" then
    ngx.var.remote_addr = "1.2.3.4"
end
ngx.say("no case ", u)
