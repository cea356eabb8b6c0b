-- A hit counter on ngx.shared: every request counts, per path and in
-- total; GET /reset clears it. (resty.lua --shdict hits=1m sets its size.)
local hits = ngx.shared.hits
local uri = ngx.var.uri
if uri == "/reset" then
    hits:flush_all()
    return ngx.say("reset")
end
local total = hits:incr("total", 1, 0)
local here = hits:incr("path:" .. uri, 1, 0)
ngx.say("total ", total, ", ", uri, " ", here)
