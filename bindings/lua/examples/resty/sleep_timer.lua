-- ngx.sleep and ngx.timer: GET /sleep?ms=N answers after N milliseconds
-- (other requests are served meanwhile); GET /later schedules a timer that
-- records when it ran; GET /status shows what the timers did.
local state = ngx.shared.timers
local uri = ngx.var.uri
if uri == "/sleep" then
    local ms = tonumber(ngx.var.arg_ms) or 100
    if ms < 0 or ms > 10000 then return ngx.exit(ngx.HTTP_BAD_REQUEST) end
    ngx.sleep(ms / 1000)
    return ngx.say("slept ", ms, " ms")
elseif uri == "/later" then
    local ok, err = ngx.timer.at(0.05, function(premature, who)
        if premature then return end -- the server is shutting down
        state:incr("fired", 1, 0)
        state:set("last", who)
    end, ngx.var.arg_who or "someone")
    if not ok then return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE) end
    return ngx.say("scheduled")
elseif uri == "/status" then
    return ngx.say("fired ", state:get("fired") or 0, " last ", state:get("last") or "-",
                   " pending ", ngx.timer.pending_count())
end
ngx.exit(ngx.HTTP_NOT_FOUND)
