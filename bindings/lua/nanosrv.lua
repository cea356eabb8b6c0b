-- nanosrv.lua - LuaJIT binding for libnanosrv (pure FFI, no compiled glue).
--
-- The library is pull-based: srv:poll() makes one nsv_poll call that fills
-- an array of fixed-layout event records and one byte arena, then dispatches
-- every event of the batch to Lua handlers. No C-to-Lua callbacks exist on
-- any path, so the dispatch loop stays compilable by the JIT, and request
-- strings are made from the arena only when a handler reads them.

local ffi = require("ffi")
local bit = require("bit")

local M = { _VERSION = "1.0.0" }

---------------------------------------------------------------------------
-- Loading: declarations from the shared cdef file, then the shared object.
---------------------------------------------------------------------------

local function module_dir()
    local src = debug.getinfo(1, "S").source
    if src:sub(1, 1) ~= "@" then return "." end
    return src:sub(2):match("^(.*)[/\\]") or "."
end
local DIR = module_dir()

local function read_file(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local s = f:read("*a")
    f:close()
    return s
end

-- One source of declarations for every binding: bindings/cdef/nanosrv_cdef.h
-- (and nanosrv_abi.json) in the source tree, or the copies the rockspec
-- installs next to this file. $NANOSRV_CDEF / $NANOSRV_ABI_JSON name a file
-- explicitly (no fallback then).
local function load_generated(name, envname)
    local env = os.getenv(envname)
    if env and env ~= "" then
        return read_file(env) or error("nanosrv: cannot find " .. name .. " at " .. envname .. "=" .. env, 3), env
    end
    local paths = { DIR .. "/" .. name, DIR .. "/../cdef/" .. name }
    for _, p in ipairs(paths) do
        local text = read_file(p)
        if text then return text, p end
    end
    error("nanosrv: cannot find " .. name .. " (tried " .. table.concat(paths, ", ") .. ")", 3)
end

local CDEF = load_generated("nanosrv_cdef.h", "NANOSRV_CDEF")
-- A second load of the module (e.g. under another name) must not redeclare.
if not pcall(ffi.typeof, "nsv_event") then ffi.cdef(CDEF) end

-- The ABI this binding's declarations describe: abi_major of the JSON
-- generated with the cdef (the only fact the cdef itself does not carry).
local ABI_JSON, ABI_JSON_PATH = load_generated("nanosrv_abi.json", "NANOSRV_ABI_JSON")
local ABI_EXPECTED = tonumber(ABI_JSON:match('"abi_major"%s*:%s*(%d+)'))
    or error("nanosrv: no abi_major in " .. ABI_JSON_PATH, 2)

local function load_library()
    local env = os.getenv("NANOSRV_LIBRARY")
    if env and env ~= "" then
        -- An explicit path that fails is an error, never a silent fallback.
        local ok, lib = pcall(ffi.load, env)
        if not ok then error("nanosrv: cannot load NANOSRV_LIBRARY=" .. env .. ": " .. tostring(lib), 3) end
        return lib, env
    end
    local errs = {}
    for _, p in ipairs({ DIR .. "/libnanosrv.so.1", "libnanosrv.so.1" }) do
        local ok, lib = pcall(ffi.load, p)
        if ok then return lib, p end
        errs[#errs + 1] = tostring(lib)
    end
    error("nanosrv: cannot load libnanosrv.so.1 (set NANOSRV_LIBRARY): " .. table.concat(errs, "; "), 3)
end

local C, LIBPATH = load_library()
M.library_path = LIBPATH

do
    local abi = C.nsv_abi_version()
    if abi ~= ABI_EXPECTED then
        error(string.format("nanosrv: ABI mismatch: %s has ABI %d, this binding needs ABI %d (%s)",
                            LIBPATH, abi, ABI_EXPECTED, ABI_JSON_PATH), 2)
    end
    local lib_size, decl_size = tonumber(C.nsv_event_size()), ffi.sizeof("nsv_event")
    if lib_size ~= decl_size then
        error(string.format("nanosrv: nsv_event size mismatch: %s says %d bytes, nanosrv_cdef.h declares %d",
                            LIBPATH, lib_size, decl_size), 2)
    end
end

-- Functions added after 1.0 may be missing from an older library or cdef.
local function has(name)
    return (pcall(function() return C[name] end))
end
M.features = { websocket = has("nsv_ws_send") and has("nsv_ws_close"),
               broadcast = has("nsv_ws_broadcast"), send_many = has("nsv_ws_send_many"),
               tls = C.nsv_tls_available() == 1 }

---------------------------------------------------------------------------
-- Constants and errors
---------------------------------------------------------------------------

-- Every enum of the cdef, names taken from its text and values read
-- through the FFI: M.enums.nsv_err.NSV_ESTALE == -3, ... No number about
-- the ABI is written in this file.
M.enums = {}
for tag, body in CDEF:gmatch("enum%s+([%w_]+)%s*(%b{})") do
    local t = {}
    for name in body:gmatch("([%a_][%w_]*)%s*=") do t[name] = tonumber(C[name]) end
    M.enums[tag] = t
end

local EV_REQUEST, EV_CLOSE, EV_ERROR = C.NSV_EV_REQUEST, C.NSV_EV_CLOSE, C.NSV_EV_ERROR
local EV_WS_OPEN, EV_WS_MESSAGE, EV_WS_CLOSE = C.NSV_EV_WS_OPEN, C.NSV_EV_WS_MESSAGE, C.NSV_EV_WS_CLOSE
local EV_WRITABLE, EV_HANGUP = C.NSV_EV_TCP_WRITABLE, C.NSV_EV_HANGUP
local ENOBUFS, ESTOPPED, ENOTFOUND = C.NSV_ENOBUFS, C.NSV_ESTOPPED, C.NSV_ENOTFOUND
local EVF_KEEPALIVE, EVF_HEAD, EVF_HTTP10 = C.NSV_EVF_KEEPALIVE, C.NSV_EVF_HEAD, C.NSV_EVF_HTTP10
local EVF_CHUNKED, EVF_UPGRADE, EVF_TLS = C.NSV_EVF_CHUNKED, C.NSV_EVF_UPGRADE, C.NSV_EVF_TLS
local EVF_EOF = C.NSV_EVF_EOF

M.TEXT, M.BINARY, M.PING, M.PONG = C.NSV_WS_TEXT, C.NSV_WS_BINARY, C.NSV_WS_PING, C.NSV_WS_PONG
-- Error codes by name without the prefix: M.errors.ESTALE == C.NSV_ESTALE.
M.errors = {}
for name, code in pairs(M.enums.nsv_err) do
    if code < 0 then M.errors[name:sub(5)] = code end
end

-- The detail text is per server and only rewritten by failures that have
-- something to say, so it can be left over from an earlier failure. Each
-- server remembers the last detail it has seen and attaches only new text.
local function errmsg(code, what, srv)
    local msg = string.format("nanosrv: %s: %s (%s)", what, ffi.string(C.nsv_strerror(code)),
                              ffi.string(C.nsv_errname(code)))
    local h = srv and srv._h
    if h ~= nil then
        local d = ffi.string(C.nsv_last_error_detail(h))
        if d ~= "" and d ~= srv._detail then msg = msg .. ": " .. d end
        srv._detail = d
    end
    return msg
end
M.strerror = function(code) return ffi.string(C.nsv_strerror(code)) end
M.errname = function(code) return ffi.string(C.nsv_errname(code)) end

-- Raise with the library's message, blamed on the caller of the API method.
local function check(r, what, srv)
    if r < 0 then error(errmsg(r, what, srv), 3) end
    return r
end

local function argerr(n, fname, msg) error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 3) end

---------------------------------------------------------------------------
-- Utilities (module functions). Bad input returns nil, message; wrong
-- argument types raise.
---------------------------------------------------------------------------

-- One scratch buffer, grown on demand, so utilities do not allocate cdata.
local scratch, scratch_cap = nil, 0
local function scratch_buf(n)
    if n > scratch_cap then
        scratch_cap = math.max(n, 256)
        scratch = ffi.new("char[?]", scratch_cap)
    end
    return scratch
end

local function str_arg(v, n, fname)
    if type(v) ~= "string" then argerr(n, fname, "string expected, got " .. type(v)) end
    return v
end

-- Encoders return the full length and write only when it fits.
local function two_pass(fname, f, s, ...)
    str_arg(s, 1, fname)
    local n = f(s, #s, nil, 0, ...)
    if n < 0 then return nil, errmsg(tonumber(n), fname) end
    n = tonumber(n)
    local buf = scratch_buf(n + 1)
    n = tonumber(f(s, #s, buf, scratch_cap, ...))
    return ffi.string(buf, n)
end

function M.base64_encode(s) return two_pass("base64_encode", C.nsv_base64_encode, s) end
function M.base64_decode(s) return two_pass("base64_decode", C.nsv_base64_decode, s) end
function M.url_encode(s) return two_pass("url_encode", C.nsv_url_encode, s) end
function M.url_decode(s, form) return two_pass("url_decode", C.nsv_url_decode, s, form and 1 or 0) end

local url_out = ffi.new("nsv_url")
function M.url_parse(s)
    str_arg(s, 1, "url_parse")
    local r = C.nsv_url_parse(s, #s, url_out)
    if r < 0 then return nil, errmsg(r, "url_parse") end
    local u = url_out
    return {
        scheme = s:sub(u.scheme_off + 1, u.scheme_off + u.scheme_len),
        host = s:sub(u.host_off + 1, u.host_off + u.host_len),
        path = u.path_len > 0 and s:sub(u.path_off + 1, u.path_off + u.path_len) or "/",
        query = s:sub(u.query_off + 1, u.query_off + u.query_len),
        port = u.port,
        tls = u.is_tls ~= 0,
    }
end

function M.json_string(json, path)
    str_arg(json, 1, "json_string"); str_arg(path, 2, "json_string")
    local buf = scratch_buf(#json + 1) -- unescaping never grows a string
    local n = C.nsv_json_string(json, #json, path, #path, buf, scratch_cap)
    if n < 0 then return nil, errmsg(tonumber(n), "json_string") end
    return ffi.string(buf, n)
end

local num_out, int_out, bool_out = ffi.new("double[1]"), ffi.new("int64_t[1]"), ffi.new("int[1]")
local function json_scalar(fname, f, out, conv)
    return function(json, path)
        str_arg(json, 1, fname); str_arg(path, 2, fname)
        local r = f(json, #json, path, #path, out)
        if r < 0 then return nil, errmsg(r, fname) end
        return conv(out[0])
    end
end
M.json_number = json_scalar("json_number", C.nsv_json_number, num_out, tonumber)
-- Integers beyond 2^53 lose precision as Lua numbers; json_integer64 keeps them.
M.json_integer = json_scalar("json_integer", C.nsv_json_integer, int_out, tonumber)
M.json_integer64 = json_scalar("json_integer64", C.nsv_json_integer, int_out, function(v) return v end)
M.json_boolean = json_scalar("json_boolean", C.nsv_json_boolean, bool_out, function(v) return v ~= 0 end)

local LEVELS = {} -- "none" .. "verbose" from enum nsv_log_level
for name, v in pairs(M.enums.nsv_log_level) do LEVELS[name:sub(9):lower()] = v end
function M.log_level() return C.nsv_log_level() end
function M.set_log_level(level)
    local v = type(level) == "string" and LEVELS[level:lower()] or level
    if type(v) ~= "number" then argerr(1, "set_log_level", "level number or name expected") end
    check(C.nsv_set_log_level(v), "set_log_level")
end
function M.millis() return tonumber(C.nsv_millis()) end
function M.version() return ffi.string(C.nsv_version_string()), C.nsv_version(), C.nsv_abi_version() end

---------------------------------------------------------------------------
-- Headers given as a Lua table become one "Name: value\r\n" block.
---------------------------------------------------------------------------

local function header_block(h, n, fname)
    local t = type(h)
    if t == "string" then return h end
    if h == nil then return "" end
    if t ~= "table" then argerr(n, fname, "headers must be a string or a table") end
    local out = {}
    for k, v in pairs(h) do
        if type(v) == "table" then -- repeated header, e.g. Set-Cookie
            for _, x in ipairs(v) do out[#out + 1] = k .. ": " .. tostring(x) .. "\r\n" end
        else
            out[#out + 1] = k .. ": " .. tostring(v) .. "\r\n"
        end
    end
    return table.concat(out)
end

local function body_arg(b, n, fname)
    if b == nil then return "" end
    local t = type(b)
    if t == "string" then return b end
    if t == "number" then return tostring(b) end
    argerr(n, fname, "body must be a string")
end

local function status_arg(s, fname)
    if type(s) ~= "number" then argerr(1, fname, "status number expected, got " .. type(s)) end
    return s
end

---------------------------------------------------------------------------
-- Request: a view of one event record. It reads the arena lazily and is
-- valid until the next poll (the arena is reused then); one object per
-- batch slot is preallocated, so a request costs no allocation.
---------------------------------------------------------------------------

local Req, Params = {}, {}
local req_fields = {}
local vlen = ffi.new("uint32_t[1]")
local nh_off, nh_len, hv_off, hv_len =
    ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]")

local function req_ev(r)
    local s = r._s
    if r._g ~= s._gen then
        error("nanosrv: request used after the next poll (its data is gone; copy what you need)", 3)
    end
    return s._evs + r._i, s._arena
end

local function field(off, len)
    return function(r)
        local ev, a = req_ev(r)
        return ffi.string(a + ev[off], ev[len])
    end
end
req_fields.method = field("method_off", "method_len")
req_fields.path = field("path_off", "path_len")
req_fields.query = field("query_off", "query_len")
req_fields.body = field("body_off", "body_len")
req_fields.peer = field("peer_off", "peer_len")
req_fields.raw_headers = field("headers_off", "headers_len")
req_fields.body_len = function(r) return (req_ev(r)).body_len end
req_fields.port = function(r) return (req_ev(r)).peer_port end
req_fields.route = function(r) return (req_ev(r)).route end
req_fields.conn = function(r) return (req_ev(r)).conn end
req_fields.listener = function(r) return (req_ev(r)).listener end
local function flag(f) return function(r) return bit.band((req_ev(r)).flags, f) ~= 0 end end
req_fields.keepalive = flag(EVF_KEEPALIVE)
req_fields.head = flag(EVF_HEAD)
req_fields.http10 = flag(EVF_HTTP10)
req_fields.chunked = flag(EVF_CHUNKED)
req_fields.upgrade = flag(EVF_UPGRADE)
req_fields.tls = flag(EVF_TLS)
-- The client had ended its side before this request was delivered.
req_fields.disconnected = flag(EVF_EOF)
-- TLS block "sni\0peer_subject\0" (nil on a plain connection).
local function tls_part(n)
    return function(r)
        local ev, a = req_ev(r)
        if bit.band(ev.flags, EVF_TLS) == 0 then return nil end
        local block = ffi.string(a + ev.tls_off, ev.tls_len)
        local parts = {}
        for p in (block .. "\0"):gmatch("([^%z]*)%z") do parts[#parts + 1] = p end
        return parts[n] or ""
    end
end
req_fields.sni = tls_part(1)
req_fields.peer_subject = tls_part(2)
req_fields.params = function(r) return r._p end

function Req.header(r, name)
    if type(name) ~= "string" then argerr(1, "header", "string expected") end
    local ev, a = req_ev(r)
    local off = C.nsv_ev_header(ev, a, name, #name, vlen)
    if off < 0 then return nil end
    return ffi.string(a + off, vlen[0])
end

-- All headers as a table keyed by lower-case name; repeats joined by ", ".
function Req.headers(r)
    local ev, a = req_ev(r)
    local t, i = {}, 0
    while C.nsv_ev_header_at(ev, a, i, nh_off, nh_len, hv_off, hv_len) == 0 do
        local k = ffi.string(a + nh_off[0], nh_len[0]):lower()
        local v = ffi.string(a + hv_off[0], hv_len[0])
        t[k] = t[k] and (t[k] .. ", " .. v) or v
        i = i + 1
    end
    return t
end

-- Route parameter by name, or by position (1-based).
function Req.param(r, name)
    local ev, a = req_ev(r)
    local off
    if type(name) == "string" then
        off = C.nsv_ev_param_by_name(ev, a, name, #name, vlen)
    elseif type(name) == "number" then
        off = C.nsv_ev_param(ev, a, name - 1, vlen)
    else
        argerr(1, "param", "name or index expected")
    end
    if off < 0 then return nil end
    return ffi.string(a + off, vlen[0])
end

Req.__index = function(r, k)
    local f = req_fields[k]
    if f then return f(r) end
    return Req[k]
end
Req.__newindex = function() error("nanosrv: request fields are read-only", 2) end

Params.__index = function(p, name) return Req.param(p._r, name) end

local function new_req(srv, i)
    local r = { _s = srv, _i = i, _g = -1 }
    r._p = setmetatable({ _r = r }, Params)
    return setmetatable(r, Req)
end

---------------------------------------------------------------------------
-- Response: a connection id plus the state of its answer. It may outlive
-- the handler (answer later, stream over several polls), so it is a small
-- fresh table per request.
---------------------------------------------------------------------------

-- Live connection ids are unique in their low 53 bits (slot, worker and the
-- low generation bits), which makes an exact Lua number key without
-- allocating a string per message.
local TWO53 = 9007199254740992ULL
local function conn_key(c) return tonumber(c % TWO53) end

local Res = {}
Res.__index = Res
local PENDING, STREAMING, DONE = 0, 1, 2

local function srv_handle(s)
    local h = s._h
    if h == nil then error("nanosrv: server is closed", 3) end
    return h
end

-- A response its handler did not answer at once waits in srv._held, where
-- a HANGUP finds it; answering takes it out.
local function unhold(res)
    if res._held then
        res._held = nil
        local held, k = res._s._held, conn_key(res._c)
        if held[k] == res then held[k] = nil end
    end
end

function Res:send(status, body, headers)
    status = status_arg(status, "send")
    body = body_arg(body, 2, "send")
    local hb = header_block(headers, 3, "send")
    local h = srv_handle(self._s)
    check(C.nsv_reply(h, self._c, status, hb, #hb, body, #body), "reply", self._s)
    self._st = DONE
    if self._held then unhold(self) end
end

function Res:start(status, headers)
    status = status_arg(status, "start")
    local hb = header_block(headers, 2, "start")
    local h = srv_handle(self._s)
    check(C.nsv_reply_start(h, self._c, status, hb, #hb), "reply_start", self._s)
    self._st = STREAMING
    if self._held then unhold(self) end
    self._s._streams[conn_key(self._c)] = self -- for its TCP_WRITABLE events
end

function Res:write(chunk)
    chunk = body_arg(chunk, 1, "write")
    local h = srv_handle(self._s)
    check(C.nsv_send_chunk(h, self._c, chunk, #chunk), "send_chunk", self._s)
end

function Res:finish()
    local h = srv_handle(self._s)
    check(C.nsv_reply_end(h, self._c), "reply_end", self._s)
    self._st = DONE
    self._s._streams[conn_key(self._c)] = nil
end

function Res:close()
    local h = srv_handle(self._s)
    check(C.nsv_close(h, self._c), "close", self._s)
    self._st = DONE
    self._s._streams[conn_key(self._c)] = nil
    if self._held then unhold(self) end
end

-- Flow control for streams: false while the queued output is past the high
-- water mark (TCP_WRITABLE code 0); on_drain(fn) runs fn once it drained
-- (at once when writable). A closed connection runs the waiting functions too.
function Res:writable() return not self._blocked end

function Res:on_drain(fn)
    if not self._blocked then return fn() end
    local w = self._drain or {}
    w[#w + 1] = fn
    self._drain = w
end

-- Bytes still queued for output (for flow control while streaming).
function Res:queued()
    local h = srv_handle(self._s)
    return tonumber(check(C.nsv_conn_queued(h, self._c), "conn_queued", self._s))
end

function Res:replied() return self._st == DONE end

-- res.disconnected is true once the client has ended its side while this
-- request was with the host (NSV_EV_HANGUP), or before it was delivered
-- (NSV_EVF_EOF), or the connection closed. The reply may still be sent (a
-- half-closed client gets it); a long poll or a stream may stop instead.
-- on_disconnect(fn) runs fn then (at once if it is so already).
function Res:on_disconnect(fn)
    if self.disconnected then return fn() end
    local w = self._gone or {}
    w[#w + 1] = fn
    self._gone = w
end

---------------------------------------------------------------------------
-- WebSocket connection object, one per open socket.
---------------------------------------------------------------------------

local WS = {}
WS.__index = WS

local function need_ws()
    if not M.features.websocket then
        error("nanosrv: WebSocket functions are not available in " .. LIBPATH, 3)
    end
end

function WS:send(data, opcode)
    need_ws()
    data = body_arg(data, 1, "send")
    local h = srv_handle(self._s)
    check(C.nsv_ws_send(h, self._c, opcode or 1, data, #data), "ws_send", self._s)
end

function WS:close(code, reason)
    need_ws()
    reason = reason or ""
    local h = srv_handle(self._s)
    code = code or 1000
    check(C.nsv_ws_close(h, self._c, code, reason, #reason), "ws_close", self._s)
    -- The library reports no WS_CLOSE for a close we start; remember our
    -- code for the close handler.
    if not self._close_code then self._close_code, self._close_reason = code, reason end
end


---------------------------------------------------------------------------
-- Server
---------------------------------------------------------------------------

local Server = {}
Server.__index = Server

local function traceback(e) return debug.traceback(tostring(e), 2) end

local function log_handler_error(what, err)
    io.stderr:write("nanosrv: ", what, " handler failed: ", tostring(err), "\n")
    io.stderr:flush()
end

local function res_disconnected(res)
    if res.disconnected then return end
    res.disconnected = true
    local w = res._gone
    if w then
        res._gone = nil
        for i = 1, #w do
            local fine, err = xpcall(w[i], traceback)
            if not fine then log_handler_error("disconnect", err) end
        end
    end
end

local function res_writable(res, ok)
    res._blocked = not ok
    local w = res._drain
    if ok and w then
        res._drain = nil
        for i = 1, #w do -- each alone: one that raises does not stop the others
            local fine, err = xpcall(w[i], traceback)
            if not fine then log_handler_error("drain", err) end
        end
    end
end

-- Lua-side keys of server{...}; every other key is a library option.
local LOCAL_OPTS = { threads = true, batch = true, arena = true }

function M.server(opts)
    if opts ~= nil and type(opts) ~= "table" then argerr(1, "server", "options table expected") end
    opts = opts or {}
    local threads = opts.threads
    local h
    if threads ~= nil then
        if type(threads) ~= "number" or threads < 0 then argerr(1, "server", "threads must be a number >= 0") end
        h = C.nsv_server_new_sharded(threads)
        if h == nil then error("nanosrv: cannot create a sharded server (" .. LIBPATH .. ")", 2) end
    else
        h = C.nsv_server_new()
        if h == nil then error("nanosrv: cannot create a server (out of memory)", 2) end
    end
    h = ffi.gc(h, C.nsv_server_free)
    local batch = opts.batch or 256
    local cap = opts.arena or 1048576
    local self = setmetatable({
        _h = h, _maxev = batch, _evs = ffi.new("nsv_event[?]", batch),
        _cap = cap, _arena = ffi.new("char[?]", cap),
        _gen = 0, _polling = false, _next_route = 1,
        _handlers = {}, _wsroutes = {}, _ws = {}, _on = {}, _streams = {},
        _reqs = {}, _held = {}, listeners = {},
    }, Server)
    for i = 0, batch - 1 do self._reqs[i] = new_req(self, i) end
    -- Unmatched requests: 404 unless srv:fallback() says otherwise.
    self._fallback = function(_, res)
        res:send(404, '{"error":"not found"}', "Content-Type: application/json\r\n")
    end
    for k, v in pairs(opts) do
        if not LOCAL_OPTS[k] then self:set(k, v) end
    end
    return self
end

local function opt_id(name)
    if type(name) ~= "string" then argerr(1, "set", "option name expected") end
    local id = C.nsv_opt_by_name(name, #name)
    if id < 0 then error("nanosrv: unknown option '" .. name .. "'", 3) end
    return id
end

function Server:set(name, value)
    local id = opt_id(name)
    if type(value) == "boolean" then value = value and 1 or 0 end
    if type(value) ~= "number" then argerr(2, "set", "option '" .. name .. "' needs a number") end
    local h = srv_handle(self)
    check(C.nsv_set_int(h, id, value), "set " .. name, self)
    return self
end

function Server:get(name)
    local h = srv_handle(self)
    return tonumber(check(C.nsv_get_int(h, opt_id(name)), "get " .. name, self))
end

-- Returns the bound port (useful with port 0) and the listener id.
function Server:listen(url)
    str_arg(url, 1, "listen")
    local h = srv_handle(self)
    local lid = check(C.nsv_listen(h, url, #url), "listen " .. url, self)
    local port = check(C.nsv_listener_port(h, lid), "listener_port", self)
    self.listeners[#self.listeners + 1] = { id = lid, port = port, url = url }
    return port, lid
end

local function add_route(self, method, pattern, flags, fname)
    str_arg(method, 1, fname); str_arg(pattern, 2, fname)
    local h = srv_handle(self)
    local id = self._next_route
    check(C.nsv_route(h, method, #method, pattern, #pattern, id, flags), fname .. " " .. method .. " " .. pattern, self)
    self._next_route = id + 1
    return id
end

-- Handlers are function(req, res). Returns the route id.
function Server:route(method, pattern, handler)
    if type(handler) ~= "function" and not (type(handler) == "table" and getmetatable(handler)
                                            and getmetatable(handler).__call) then
        argerr(3, "route", "handler function expected")
    end
    local id = add_route(self, method, pattern, 0, "route")
    self._handlers[id] = handler
    return id
end

-- Handler for requests no route matched (default: 404 JSON).
function Server:fallback(handler)
    if type(handler) ~= "function" then argerr(1, "fallback", "handler function expected") end
    self._fallback = handler
end

-- handlers: { open = f(ws, req), message = f(ws, data, opcode), close = f(ws, code, reason) }
function Server:websocket(pattern, handlers)
    need_ws()
    if type(handlers) ~= "table" then argerr(2, "websocket", "table of handlers expected") end
    for _, k in ipairs({ "open", "message", "close" }) do
        if handlers[k] ~= nil and type(handlers[k]) ~= "function" then
            argerr(2, "websocket", k .. " must be a function")
        end
    end
    local id = add_route(self, "GET", pattern, C.NSV_ROUTE_WEBSOCKET, "websocket")
    self._wsroutes[id] = handlers
    return id
end

-- Server-level hooks: "close" f(conn), "error" f(code, message, conn).
function Server:on(event, fn)
    if event ~= "close" and event ~= "error" then argerr(1, "on", "'close' or 'error' expected") end
    if fn ~= nil and type(fn) ~= "function" then argerr(2, "on", "function expected") end
    self._on[event] = fn
end

function Server:broadcast(route, data, opcode)
    if not M.features.broadcast then need_ws(); error("nanosrv: nsv_ws_broadcast is not available", 2) end
    if type(route) ~= "number" then argerr(1, "broadcast", "route id expected") end
    data = body_arg(data, 2, "broadcast")
    local h = srv_handle(self)
    return check(C.nsv_ws_broadcast(h, route, opcode or 1, data, #data), "ws_broadcast", self)
end

function Server:send_many(list, data, opcode)
    if not M.features.send_many then need_ws(); error("nanosrv: nsv_ws_send_many is not available", 2) end
    if type(list) ~= "table" then argerr(1, "send_many", "list of websockets expected") end
    data = body_arg(data, 2, "send_many")
    local n = #list
    local ids = ffi.new("uint64_t[?]", n)
    for i = 1, n do
        local w = list[i]
        ids[i - 1] = type(w) == "table" and w._c or w
    end
    local h = srv_handle(self)
    return check(C.nsv_ws_send_many(h, ids, n, opcode or 1, data, #data), "ws_send_many", self)
end

-- A handler raised: log it; answer 500 if nothing was sent, or cut a
-- stream short (the client must not take a truncated body as complete).
local function request_failed(self, res, err)
    log_handler_error("request", err)
    local h = self._h
    if h == nil then return end
    if res._st == PENDING then
        local msg = "Internal Server Error"
        C.nsv_reply(h, res._c, 500, "Content-Type: text/plain\r\n", 26, msg, #msg)
        res._st = DONE
    elseif res._st == STREAMING then
        C.nsv_close(h, res._c)
        res._st = DONE
    end
end

local function ws_call(self, ws, name, a, b)
    local f = ws._h[name]
    if not f then return end
    local ok, err = xpcall(f, traceback, ws, a, b)
    if not ok then
        log_handler_error("websocket " .. name, err)
        if name ~= "close" and self._h ~= nil and not ws.closed then
            C.nsv_ws_close(self._h, ws._c, 1011, "", 0)
            ws._close_code, ws._close_reason = ws._close_code or 1011, ws._close_reason or ""
        end
    end
end

local function ws_closed(self, key, code, reason)
    local ws = self._ws[key]
    if not ws then return end
    self._ws[key] = nil
    ws.closed = true
    -- A close we started reports our code, whatever the peer did after it.
    if ws._close_code then code, reason = ws._close_code, ws._close_reason end
    ws_call(self, ws, "close", code, reason)
end

local function dispatch(self, i)
    local ev = self._evs[i]
    local t = ev.type
    if t == EV_REQUEST then
        local req = self._reqs[i]
        req._g = self._gen
        local res = setmetatable({ _c = ev.conn, _s = self, _st = PENDING,
                                   disconnected = bit.band(ev.flags, EVF_EOF) ~= 0 }, Res)
        -- Route ids are 1..n, so the lookup stays in the array part (the JIT
        -- cannot compile a key that may fall into the hash part: -1).
        local route = ev.route
        local hnd = route > 0 and self._handlers[route] or self._fallback
        local ok, err = xpcall(hnd, traceback, req, res)
        if not ok then request_failed(self, res, err) end
        if res._st == PENDING then -- answered later: a HANGUP must find it
            res._held = true
            self._held[conn_key(ev.conn)] = res
        end
    elseif t == EV_WS_MESSAGE then
        local ws = self._ws[conn_key(ev.conn)]
        if ws and ws._c == ev.conn then
            ws_call(self, ws, "message", ffi.string(self._arena + ev.body_off, ev.body_len), ev.code)
        end
    elseif t == EV_WS_OPEN then
        local handlers = self._wsroutes[ev.route]
        if handlers then
            local req = self._reqs[i]
            req._g = self._gen
            local ws = setmetatable({ _c = ev.conn, _s = self, _h = handlers, route = ev.route,
                                      closed = false, data = {} }, WS)
            self._ws[conn_key(ev.conn)] = ws
            ws_call(self, ws, "open", req)
        end
    elseif t == EV_WS_CLOSE then
        ws_closed(self, conn_key(ev.conn), ev.code, ffi.string(self._arena + ev.body_off, ev.body_len))
    elseif t == EV_WRITABLE then
        local res = self._streams[conn_key(ev.conn)]
        if res and res._c == ev.conn then
            res_writable(res, ev.code ~= 0)
        end
    elseif t == EV_HANGUP then
        -- The client ended its side while its request is with us.
        local key = conn_key(ev.conn)
        local res = self._held[key] or self._streams[key]
        if res and res._c == ev.conn then res_disconnected(res) end
    elseif t == EV_CLOSE then
        -- Gone without a WS_CLOSE event: 1006 (no close frame, RFC 6455).
        local key = conn_key(ev.conn)
        ws_closed(self, key, 1006, "")
        local res = self._streams[key]
        if res and res._c == ev.conn then
            self._streams[key] = nil
            res_writable(res, true)
            res_disconnected(res)
        end
        res = self._held[key]
        if res and res._c == ev.conn then
            self._held[key] = nil
            res._held = nil
            res_disconnected(res)
        end
        local f = self._on.close
        if f then
            local ok, err = xpcall(f, traceback, ev.conn)
            if not ok then log_handler_error("close", err) end
        end
    elseif t == EV_ERROR then
        local msg = ffi.string(self._arena + ev.body_off, ev.body_len)
        local f = self._on.error
        if f then
            local ok, err = xpcall(f, traceback, ev.code, msg, ev.conn)
            if not ok then log_handler_error("error", err) end
        else
            io.stderr:write("nanosrv: ", ffi.string(C.nsv_errname(ev.code)), ": ", msg, "\n")
        end
    end
end

-- One batch: wait up to timeout_ms (default 0, -1 = forever), dispatch every
-- event. Returns the number of events, or nil once the server has stopped.
function Server:poll(timeout_ms)
    if self._polling then error("nanosrv: poll/run called from inside a handler", 2) end
    if timeout_ms ~= nil and type(timeout_ms) ~= "number" then argerr(1, "poll", "timeout in ms expected") end
    local h = srv_handle(self)
    local n = C.nsv_poll(h, self._evs, self._maxev, self._arena, self._cap, timeout_ms or 0)
    while n == ENOBUFS do
        -- The next event is larger than the arena: grow it and take the batch.
        local need = tonumber(C.nsv_poll_need(h))
        self._cap = math.max(need + 4096, self._cap * 2)
        self._arena = ffi.new("char[?]", self._cap)
        n = C.nsv_poll(h, self._evs, self._maxev, self._arena, self._cap, 0)
        self._detail = ffi.string(C.nsv_last_error_detail(h)) -- handled here
    end
    if n < 0 then
        if n == ESTOPPED then return nil end
        check(n, "poll", self)
    end
    self._gen = self._gen + 1
    self._polling = true
    for i = 0, n - 1 do dispatch(self, i) end
    self._polling = false
    return n
end

-- Dispatch until srv:stop() (or the end of a drain).
function Server:run()
    while self._h ~= nil and self:poll(-1) do end
end

-- Stop the loop: run() returns and poll() returns nil once queued events
-- are handled. Final: a stopped server does not restart.
function Server:stop()
    if self._h ~= nil then C.nsv_stop(self._h) end
end

-- Graceful stop: close listeners, let in-flight requests finish (handlers
-- keep running), return when every connection is gone or after timeout_ms.
function Server:drain(timeout_ms)
    local h = srv_handle(self)
    check(C.nsv_drain_start(h, timeout_ms or 5000), "drain_start", self)
    if not self._polling then self:run() end
end

-- Wake a blocked poll (e.g. from a coroutine scheduler).
function Server:wakeup() if self._h ~= nil then C.nsv_wakeup(self._h) end end

-- File descriptor readable when poll() has work (for external loops).
function Server:fd() local h = srv_handle(self); return check(C.nsv_fd(h), "fd", self) end

function Server:workers() return self:get("workers") end

-- Free the server now (it is also freed by the garbage collector).
function Server:close()
    if self._polling then error("nanosrv: close called from inside a handler; call stop()", 2) end
    local h = self._h
    if h ~= nil then
        self._h = nil
        ffi.gc(h, nil)
        C.nsv_server_free(h)
    end
end

M.Server, M.Request, M.Response, M.WebSocket = Server, Req, Res, WS
return M
