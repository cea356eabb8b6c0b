-- Debian ships lua-resty-websocket as nginx.websocket.*; OpenResty code requires resty.websocket.*.
return require("nginx.websocket.client")
