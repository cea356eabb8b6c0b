-- The binding's view of the ABI against the generated description
-- (bindings/cdef/nanosrv_abi.json): every enum constant, error names, the
-- ABI major, the event record layout; then HANGUP and NSV_EVF_EOF as
-- res.disconnected over a real socket.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local ffi = require("ffi")
local nanosrv = require("nanosrv")

local function read(path)
    local f = assert(io.open(path, "rb"))
    local s = f:read("*a")
    f:close()
    return s
end
local JSON_PATH = T.bindir .. "/../cdef/nanosrv_abi.json"
local json = read(JSON_PATH)

-- Enums -----------------------------------------------------------------------
local enums = {}
local enums_block = assert(json:match('"enums"%s*:%s*(%b{})'), "enums in the JSON")
for group, body in enums_block:sub(2, -2):gmatch('"([%w_]+)"%s*:%s*(%b{})') do
    local t = {}
    for name, v in body:gmatch('"([%w_]+)"%s*:%s*(%-?%d+)') do t[name] = tonumber(v) end
    enums[group] = t
end
local n, bad = 0, {}
for group, t in pairs(enums) do
    for name, v in pairs(t) do
        n = n + 1
        local got = nanosrv.enums[group] and nanosrv.enums[group][name]
        if got ~= v then bad[#bad + 1] = string.format("%s.%s: binding %s, JSON %d", group, name, tostring(got), v) end
    end
end
for group, t in pairs(nanosrv.enums) do
    for name in pairs(t) do
        if not (enums[group] and enums[group][name]) then bad[#bad + 1] = group .. "." .. name .. " not in the JSON" end
    end
end
T.ok(n > 50 and #bad == 0, "every enum constant of the binding equals the JSON's (" .. n .. ")", table.concat(bad, "\n"))

local errs, want = 0, 0
bad = {}
for name, code in pairs(enums.nsv_err) do
    if code < 0 then
        want = want + 1
        if nanosrv.errors[name:sub(5)] == code then errs = errs + 1 else bad[#bad + 1] = name end
        if nanosrv.errname(code) ~= name then bad[#bad + 1] = "errname " .. name end
    end
end
local count = 0
for _ in pairs(nanosrv.errors) do count = count + 1 end
T.ok(errs == want and count == want and #bad == 0, "nanosrv.errors holds exactly the JSON's error codes",
     table.concat(bad, ", "))
T.ok(nanosrv.TEXT == enums.nsv_ws_opcode.NSV_WS_TEXT and nanosrv.BINARY == enums.nsv_ws_opcode.NSV_WS_BINARY
     and nanosrv.PING == enums.nsv_ws_opcode.NSV_WS_PING and nanosrv.PONG == enums.nsv_ws_opcode.NSV_WS_PONG,
     "opcodes from the JSON")
T.ok(enums.nsv_event_type.NSV_EV_HANGUP ~= nil and enums.nsv_event_flag.NSV_EVF_EOF ~= nil,
     "HANGUP and EOF are in the description")

-- ABI major ---------------------------------------------------------------------
local abi_major = tonumber(json:match('"abi_major"%s*:%s*(%d+)'))
T.is(select(3, nanosrv.version()), abi_major, "the library's ABI is the JSON's abi_major")

local function try(env)
    local cmd = env .. " luajit -e 'package.path=" .. string.format("%q", T.bindir .. "/?.lua;")
                .. "..package.path; require(\"nanosrv\")' 2>&1"
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    return out
end
local tmp = os.tmpname()
local f = io.open(tmp, "wb")
f:write((json:gsub('"abi_major"%s*:%s*%d+', '"abi_major": ' .. (abi_major + 1))))
f:close()
local out = try("NANOSRV_ABI_JSON=" .. tmp)
os.remove(tmp)
T.like(out, "ABI mismatch: .* has ABI " .. abi_major .. ", this binding needs ABI " .. (abi_major + 1),
       "the expected ABI comes from nanosrv_abi.json")

-- Event layout ------------------------------------------------------------------
local ev = assert(json:match('"structs"%s*:%s*(%b{})'):match('"nsv_event"%s*:%s*(%b{})'))
local fields = ev:match('"fields"%s*:%s*(%b[])')
bad, n = {}, 0
for obj in fields:gmatch("%b{}") do
    local name, off = obj:match('"name"%s*:%s*"([%w_]+)"'), tonumber(obj:match('"offset"%s*:%s*(%d+)'))
    n = n + 1
    local ok, got = pcall(ffi.offsetof, "nsv_event", name)
    if not ok or got ~= off then bad[#bad + 1] = string.format("%s: %s vs %d", name, tostring(got), off) end
end
T.ok(n >= 26 and #bad == 0, "every nsv_event field at the JSON's offset (" .. n .. ")", table.concat(bad, "\n"))
T.is(ffi.sizeof("nsv_event"), tonumber(ev:match('"size"%s*:%s*(%d+)')), "nsv_event size")

-- HANGUP / EOF ------------------------------------------------------------------
local srv = nanosrv.server { request_timeout_ms = 5000 }
local port = srv:listen("http://127.0.0.1:0")
local pump = function() srv:poll(5) end
local held, calls = {}, 0
srv:route("GET", "/long", function(req, res) held[#held + 1] = { res = res, eof = req.disconnected } end)
srv:route("GET", "/quick", function(req, res) res:send(200, "quick " .. tostring(req.disconnected)) end)

local c = T.connect(port, pump)
c:send(T.req("GET", "/long"))
c:wait(function() return held[1] end, 3000)
local res = held[1] and held[1].res
T.ok(res and res.disconnected == false and held[1].eof == false, "a held request: not disconnected")
res:on_disconnect(function() calls = calls + 1 end)
ffi.C.shutdown(c.fd, 1) -- SHUT_WR: the client ends its side and waits
c:wait(function() if res.disconnected then return true end end, 3000)
T.ok(res.disconnected == true and calls == 1, "HANGUP sets res.disconnected and runs on_disconnect")
res:send(200, "late")
local r = c:response(false, 3000)
T.is(r and r.body, "late", "the half-closed client still gets the answer")
c:close()

-- Pipelined: /quick reaches the handler after the client ended its side.
held = {}
c = T.connect(port, pump)
c:send(T.req("GET", "/long") .. T.req("GET", "/quick"))
ffi.C.shutdown(c.fd, 1)
c:wait(function() if held[1] and held[1].res.disconnected then return true end end, 3000)
T.ok(held[1] and held[1].res.disconnected, "HANGUP for the first request")
held[1].res:send(200, "first")
r = c:response(false, 3000)
T.is(r and r.body, "first", "first answer")
r = c:response(false, 3000)
T.is(r and r.body, "quick true", "the next request carries NSV_EVF_EOF (req.disconnected)")
c:close()
srv:close()
T.done()
