-- Safety of what the binding lets through: response header tables refuse
-- CR, LF, NUL and other control characters and names that are not tokens
-- (read back by curl: no injected header reaches the client); a request
-- object kept past its poll never reads another client's data; a late
-- reply to a client that left is a no-op returning false.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

local srv = nanosrv.server { request_timeout_ms = 10000 }
local port = srv:listen("http://127.0.0.1:0")
local pump = function() srv:poll(2) end

local INJ = "a\r\nSet-Cookie: pwned=1"
local BAD = {
    value_crlf = { ["X-Echo"] = INJ },
    value_lf = { ["X-Echo"] = "a\nSet-Cookie: pwned=1" },
    value_nul = { ["X-Echo"] = "a\0b" },
    value_ctl = { ["X-Echo"] = "a\27b" },
    list_value = { ["X-Echo"] = { "ok", INJ } },
    name_crlf = { ["X-A: b\r\nSet-Cookie"] = "pwned=1" },
    name_space = { ["X Echo"] = "v" },
    name_colon = { ["X-Echo:"] = "v" },
    name_empty = { [""] = "v" },
    name_number = { [1] = "v" },
}
local TEXT = { ["Content-Type"] = "text/plain" }

-- Each header path: the call must raise before anything is sent; the
-- handler then answers 500 with the message so curl shows both.
local paths = {
    send = function(res, h) res:send(200, "sent", h) end,
    start = function(res, h) res:start(200, h); res:write("sent"); res:finish() end,
    sse = function(res, h) local s = res:sse(h); s:send("sent"); s:close() end,
    send_file = function(res, h) res:send_file(arg[0], { headers = h }) end,
}
srv:route("GET", "/h/:path/:case", function(req, res)
    local f, h = paths[req.params.path], BAD[req.params.case]
    if req.params.case == "good" then h = { ["X-Echo"] = "fine\tvalue", ["X-List"] = { "1", "2" } } end
    local ok, err = pcall(f, res, h)
    if ok then return end
    res:send(500, tostring(err), TEXT)
end)

for _, path in ipairs({ "send", "start", "sse", "send_file" }) do
    local rc, out, err = T.run("curl -sS -i --max-time 10 http://127.0.0.1:" .. port .. "/h/" .. path .. "/good", pump)
    T.ok(rc == 0 and out:find("\r\nX%-Echo: fine\tvalue\r\n") and out:find("\r\nX%-List: 1\r\n")
         and out:find("\r\nX%-List: 2\r\n"), path .. ": good table headers (HTAB allowed, repeated)", out .. err)
    for case in pairs(BAD) do
        rc, out, err = T.run("curl -sS -i --max-time 10 http://127.0.0.1:" .. port .. "/h/" .. path .. "/" .. case, pump)
        T.ok(rc == 0 and out:find("^HTTP/1.1 500") and not out:lower():find("\nset%-cookie")
             and not out:find("\r\nX%-Echo") and out:find("header"),
             path .. ": " .. case .. " refused before anything is sent", (out .. err):sub(1, 300))
    end
end

-- A request kept past its handler and read later (after later polls, or
-- from the handler of another client's request): it raises (its data is
-- gone) or still reads its own data, never another client's.
local kept, seen = nil, {}
srv:route("GET", "/keep/:id", function(req, res)
    local prev = kept
    kept = req
    if prev then
        local ok, id = pcall(function() return prev.params.id end)
        local ok2, q = pcall(function() return prev.query end)
        seen[#seen + 1] = { ok and id or false, ok2 and q or false }
    end
    res:send(200, "ok")
end)
local wrong, raised, same = 0, 0, 0
for i = 1, 200 do
    local a = T.connect(port, pump)
    local ra = a:request(T.req("GET", "/keep/a" .. i), false, 3000)
    local saved = kept
    local b = T.connect(port, pump)
    local rb = b:request(T.req("GET", "/keep/b" .. i .. "?q=b"), false, 3000)
    a:close(); b:close()
    if not (ra and rb) then wrong = wrong + 1; break end
    -- read by b's handler, and now
    local s = seen[#seen]
    local ok, id = pcall(function() return saved.params.id end)
    local ok2, q = pcall(function() return saved.query end)
    for _, v in ipairs({ { s[1], s[2] }, { ok and id, ok2 and q } }) do
        if v[1] == false and v[2] == false then raised = raised + 1
        elseif v[1] == "a" .. i and v[2] == "" then same = same + 1
        else wrong = wrong + 1 end
    end
end
T.ok(wrong == 0 and raised + same == 400, "a kept request never reads another client's data",
     string.format("wrong %d, raised %d, own data %d", wrong, raised, same))
T.raises("after the next poll", "reading a kept request raises", function() return kept.path end)

-- A coroutine handler keeps its request valid while it waits.
srv:route("GET", "/co/:id", function(req, res)
    srv:sleep(20)
    res:send(200, req.params.id .. " " .. req.path .. " " .. req.query)
end, { coroutine = true })
do
    local a, b = T.connect(port, pump), T.connect(port, pump)
    a:send(T.req("GET", "/co/first?x=1"))
    b:send(T.req("GET", "/co/second?y=2"))
    local ra, rb = a:response(false, 3000), b:response(false, 3000)
    T.ok(ra and ra.body == "first /co/first x=1" and rb and rb.body == "second /co/second y=2",
         "coroutine handlers read their own requests after other polls", (ra and ra.body) or "no answer")
    a:close(); b:close()
end

-- Late reply: the client left before the answer; send returns false, the
-- response says closed, no error.
local held
srv:route("GET", "/late", function(_, res) held = res end)
do
    local c = T.connect(port, pump)
    c:send(T.req("GET", "/late"))
    for _ = 1, 400 do if held then break end pump() end
    c:reset()
    for _ = 1, 400 do if held.closed then break end pump() end
    T.is(held.closed, true, "late reply: the response knows the client left")
    T.is(held.disconnected, true, "late reply: disconnected too")
    local ok, r = pcall(held.send, held, 200, "too late")
    T.ok(ok and r == false, "late reply: send returns false, no error", tostring(r))
    ok, r = pcall(held.start, held, 200)
    T.ok(ok and r == false, "late reply: start returns false, no error", tostring(r))
    ok, r = pcall(held.write, held, "x")
    T.ok(ok and r == false, "late reply: write returns false, no error", tostring(r))
end
-- Misuse still raises: a second reply on a live connection.
srv:route("GET", "/twice", function(_, res)
    res:send(200, "one")
    local ok, err = pcall(res.send, res, 200, "two")
    held = { ok = ok, err = err }
end)
do
    local c = T.connect(port, pump)
    local r = c:request(T.req("GET", "/twice"), false, 3000)
    T.ok(r and r.body == "one" and held.ok == false and tostring(held.err):find("NSV_ESTATE"),
         "replying twice still raises", tostring(held.err))
    c:close()
end

srv:close()
T.done()
