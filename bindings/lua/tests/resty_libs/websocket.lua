-- Content handler for tests/resty_libs.lua: lua-resty-websocket's client
-- from a handler to the echo at ?port=, as for content_by_lua_file.
-- nanosrv.ngx has no ngx.re (tests/resty_libs.lua reports it); the client
-- indexes ngx.re.match when it loads.
local shimmed = ngx.re == nil
if shimmed then require("re_shim") end
local client = require("resty.websocket.client")
local port = ngx.req.get_uri_args().port

local wb, err = client:new({ timeout = 3000, max_payload_len = 1048576 })
local ok
ok, err = wb:connect("ws://127.0.0.1:" .. tostring(port) .. "/echo")
if not ok then
    ngx.say("connect: ", err)
    return
end

local function roundtrip(send, data, label)
    local bytes, serr = send(wb, data)
    if not bytes then return ngx.say(label, ": send: ", serr) end
    local got, typ, rerr = wb:recv_frame()
    if not got then return ngx.say(label, ": recv: ", rerr) end
    ngx.say(label, ": ", typ, " ", #got, " ", got == data and "same" or "differs")
end
ngx.say("ngx.re shimmed: ", tostring(shimmed))
roundtrip(wb.send_text, "hello from a handler", "text")
local bin = {}
for i = 0, 255 do bin[#bin + 1] = string.char(i) end
roundtrip(wb.send_binary, table.concat(bin), "binary")
roundtrip(wb.send_text, string.rep("0123456789", 7000), "text 70000")

-- The server closes on "close": the client sees the close frame.
wb:send_text("close")
local data, typ, rerr = wb:recv_frame()
ngx.say("server close: ", tostring(typ), " ", tostring(data), " ", tostring(rerr))
wb:close()
ngx.say("done")
