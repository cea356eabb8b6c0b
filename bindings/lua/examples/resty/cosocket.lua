-- A cosocket client: GET /ask?q=TEXT sends TEXT as one line to the TCP
-- service at $UPSTREAM (host:port, default 127.0.0.1:7000), reads one line
-- back and answers with it; the connection goes back to the keepalive pool.
local upstream = os.getenv("UPSTREAM") or "127.0.0.1:7000"
local host, port = upstream:match("^(.+):(%d+)$")
local q = ngx.var.arg_q
if not q or q:find("[\r\n]") then return ngx.exit(ngx.HTTP_BAD_REQUEST) end

local sock = ngx.socket.tcp()
sock:settimeouts(1000, 1000, 2000)
local ok, err = sock:connect(host, tonumber(port))
if not ok then
    ngx.log(ngx.ERR, "connect to ", upstream, " failed: ", err)
    return ngx.exit(ngx.HTTP_BAD_GATEWAY)
end
local bytes
bytes, err = sock:send(ngx.unescape_uri(q) .. "\n")
if not bytes then return ngx.exit(ngx.HTTP_BAD_GATEWAY) end
local line
line, err = sock:receive("*l")
if not line then
    ngx.log(ngx.ERR, "receive from ", upstream, " failed: ", err)
    return ngx.exit(ngx.HTTP_GATEWAY_TIMEOUT)
end
local reused = sock:getreusedtimes()
sock:setkeepalive(10000, 16)
ngx.say("upstream said: ", line, " (connection reused ", reused, " times)")
