-- Debian ships lua-resty-cookie as nginx.cookie; OpenResty code requires resty.cookie.
return require("nginx.cookie")
