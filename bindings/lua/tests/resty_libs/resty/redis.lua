-- Debian ships lua-resty-redis as nginx.redis; OpenResty code requires resty.redis.
return require("nginx.redis")
