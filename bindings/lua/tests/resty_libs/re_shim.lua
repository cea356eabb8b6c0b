-- Test-only stand-in for ngx.re.match, installed by websocket.lua only when
-- the ngx API has no ngx.re: it knows just the two regexes that
-- lua-resty-websocket's client.lua uses (URI split and status line), so
-- the client's cosocket path can still be exercised. Any other regex raises.
local URI = [[^(wss?)://([^:/]+)(?::(\d+))?(.*)]]
local STATUS = [[^\s*HTTP/1\.1\s+]]

local function match(subject, regex)
    if regex == URI then
        local scheme, rest = subject:match("^(wss?)://(.*)$")
        if not scheme then return nil end
        local host, tail = rest:match("^([^:/]+)(.*)$")
        if not host then return nil end
        -- Unmatched groups are false, as in ngx.re.match.
        local port, path = tail:match("^:(%d+)(.*)$")
        if not port then port, path = false, tail end
        return { [0] = subject:sub(1, #subject - #path), scheme, host, port, path }
    elseif regex == STATUS then
        local m = subject:match("^%s*HTTP/1%.1%s+")
        return m and { [0] = m } or nil
    end
    error("re_shim: regex not supported: " .. regex, 2)
end

ngx.re = { match = match }
