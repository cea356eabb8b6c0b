-- nanosrv.lua - LuaJIT binding for libnanosrv (pure FFI, no compiled glue).
--
-- The library is pull-based: srv:poll() makes one nsv_poll call that fills
-- an array of fixed-layout event records and one byte arena, then dispatches
-- every event of the batch to Lua handlers. No C-to-Lua callbacks exist on
-- any path, so the dispatch loop stays compilable by the JIT, and request
-- strings are made from the arena only when a handler reads them.

local ffi = require("ffi")
local bit = require("bit")

local M = { _VERSION = "1.5.0" }

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
-- NSV_OPT_HTTP2 bits for the server's http2 option (from the cdef).
M.H2_TLS, M.H2_PRIOR, M.H2_UPGRADE, M.H2_ALL = C.NSV_H2_TLS, C.NSV_H2_PRIOR, C.NSV_H2_UPGRADE, C.NSV_H2_ALL

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
               tls = C.nsv_tls_available() == 1,
               http2 = has("nsv_http2_available") and C.nsv_http2_available() == 1 }

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
local EVF_EOF, EVF_STREAM_BODY, EV_BODY = C.NSV_EVF_EOF, C.NSV_EVF_STREAM_BODY, C.NSV_EV_BODY
local ECLOSED, ESTALE, EAGAIN, EINVAL = C.NSV_ECLOSED, C.NSV_ESTALE, C.NSV_EAGAIN, C.NSV_EINVAL
local EV_TCP_OPEN, EV_TCP_DATA, EV_TCP_CONNECTED = C.NSV_EV_TCP_OPEN, C.NSV_EV_TCP_DATA, C.NSV_EV_TCP_CONNECTED
local EV_TIMER, EV_WAKEUP, ENOTSUP = C.NSV_EV_TIMER, C.NSV_EV_WAKEUP, C.NSV_ENOTSUP

M.TEXT, M.BINARY, M.PING, M.PONG = C.NSV_WS_TEXT, C.NSV_WS_BINARY, C.NSV_WS_PING, C.NSV_WS_PONG
-- Error codes by name without the prefix: M.errors.ESTALE == C.NSV_ESTALE.
M.errors = {}
for name, code in pairs(M.enums.nsv_err) do
    if code < 0 then M.errors[name:sub(5)] = code end
end

local function argerr(n, fname, msg) error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 3) end

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
-- The same for calls without a server (parsers, builders): their detail is
-- per thread and written by the failing call itself.
local function errmsg_nosrv(code, what)
    local msg = string.format("nanosrv: %s: %s (%s)", what, ffi.string(C.nsv_strerror(code)),
                              ffi.string(C.nsv_errname(code)))
    local d = ffi.string(C.nsv_last_error_detail(nil))
    if d ~= "" then msg = msg .. ": " .. d end
    return msg
end

-- An error that says how to answer rather than a bug of the handler: a
-- malformed upload (400), a body past a limit (413), or a client that is
-- gone (no status: nothing can be sent). A handler that lets one escape
-- answers with its status and text instead of a logged 500.
local HttpError = {}
HttpError.__index = HttpError
HttpError.__tostring = function(e) return e.message end
local function http_error(status, message, code)
    return setmetatable({ status = status, message = message, code = code }, HttpError)
end
M.HttpError = HttpError
-- error(nanosrv.http_error(415, "expected multipart/form-data")) in a handler.
function M.http_error(status, message)
    if type(status) ~= "number" then argerr(1, "http_error", "status number expected") end
    return http_error(status, message and tostring(message) or ("HTTP " .. status))
end
function M.is_http_error(e) return getmetatable(e) == HttpError end

M.strerror = function(code) return ffi.string(C.nsv_strerror(code)) end
M.errname = function(code) return ffi.string(C.nsv_errname(code)) end

-- Raise with the library's message, blamed on the caller of the API method.
local function check(r, what, srv)
    if r < 0 then error(errmsg(r, what, srv), 3) end
    return r
end


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

-- Query strings, urlencoded forms and Cookie headers: the C parsers fill
-- (name, value) offset pairs into one decoded buffer. As a table, a name
-- given once maps to its value and a repeated name to the array of its
-- values in order ({a = {"1", "2"}, b = "x"}); as a list, every pair in
-- order ({{"a", "1"}, {"b", "x"}, {"a", "2"}}).
local npairs_out = ffi.new("uint32_t[1]")
local pairs_buf, pairs_cap = nil, 0
local function parse_pairs(fname, f, s, as_list)
    str_arg(s, 1, fname)
    local t = {}
    if s == "" then return t end
    local need = f(s, #s, nil, 0, nil, 0, npairs_out)
    if need < 0 then return nil, errmsg_nosrv(tonumber(need), fname) end
    local np = npairs_out[0]
    if np == 0 then return t end
    if np * 4 > pairs_cap then
        pairs_cap = np * 4
        pairs_buf = ffi.new("uint32_t[?]", pairs_cap)
    end
    local dst = scratch_buf(tonumber(need) + 1)
    need = f(s, #s, pairs_buf, np, dst, scratch_cap, npairs_out)
    if need < 0 then return nil, errmsg_nosrv(tonumber(need), fname) end
    local pb = pairs_buf
    for i = 0, np - 1 do
        local k = ffi.string(dst + pb[4 * i], pb[4 * i + 1])
        local v = ffi.string(dst + pb[4 * i + 2], pb[4 * i + 3])
        if as_list then
            t[i + 1] = { k, v }
        else
            local old = t[k]
            if old == nil then t[k] = v
            elseif type(old) == "table" then old[#old + 1] = v
            else t[k] = { old, v } end
        end
    end
    return t
end
function M.parse_query(s) return parse_pairs("parse_query", C.nsv_form_parse, s) end
M.parse_form = M.parse_query -- the same syntax: application/x-www-form-urlencoded
function M.query_pairs(s) return parse_pairs("query_pairs", C.nsv_form_parse, s, true) end
function M.parse_cookies(s) return parse_pairs("parse_cookies", C.nsv_cookie_parse, s) end

-- Set-Cookie value builder (nsv_set_cookie). opts: path, domain, max_age
-- (seconds), expires (Unix seconds), secure, http_only, same_site ("Lax",
-- "Strict", "None"), partitioned. Raises with the library's detail.
local SAMESITE = { lax = C.NSV_COOKIE_SAMESITE_LAX, strict = C.NSV_COOKIE_SAMESITE_STRICT,
                   none = C.NSV_COOKIE_SAMESITE_NONE }
local COOKIE_BOOL = { secure = C.NSV_COOKIE_SECURE, http_only = C.NSV_COOKIE_HTTPONLY,
                      httponly = C.NSV_COOKIE_HTTPONLY, partitioned = C.NSV_COOKIE_PARTITIONED }
local function cookie_value(fname, name, value, opts)
    str_arg(name, 1, fname)
    if value == nil then value = "" end
    if type(value) == "number" then value = tostring(value) end
    str_arg(value, 2, fname)
    if opts == nil then opts = {} end
    if type(opts) ~= "table" then argerr(3, fname, "options table expected") end
    local path, domain = opts.path or "", opts.domain or ""
    if type(path) ~= "string" then argerr(3, fname, "path must be a string") end
    if type(domain) ~= "string" then argerr(3, fname, "domain must be a string") end
    local max_age, expires = opts.max_age or -1, opts.expires or -1
    if type(max_age) ~= "number" then argerr(3, fname, "max_age must be a number") end
    if type(expires) ~= "number" then argerr(3, fname, "expires must be a number (Unix seconds)") end
    local flags = 0
    for k, f in pairs(COOKIE_BOOL) do
        if opts[k] then flags = bit.bor(flags, f) end
    end
    local ss = opts.same_site or opts.samesite
    if ss ~= nil then
        local f = type(ss) == "string" and SAMESITE[ss:lower()]
        if not f then argerr(3, fname, "same_site must be \"Lax\", \"Strict\" or \"None\"") end
        flags = bit.bor(flags, f)
    end
    local n = C.nsv_set_cookie(name, #name, value, #value, path, #path, domain, #domain,
                               max_age, expires, flags, nil, 0)
    if n < 0 then error(errmsg_nosrv(tonumber(n), fname), 3) end
    local buf = scratch_buf(tonumber(n) + 1)
    n = C.nsv_set_cookie(name, #name, value, #value, path, #path, domain, #domain,
                         max_age, expires, flags, buf, scratch_cap)
    return ffi.string(buf, n)
end
function M.cookie(name, value, opts) return cookie_value("cookie", name, value, opts) end

-- The media type the static server sends for a file name.
function M.mime_type(name)
    str_arg(name, 1, "mime_type")
    return ffi.string(C.nsv_mime_type(name, #name))
end

-- Static-file flags by name: list, symlinks, precompressed, fallthrough,
-- dotfiles (from enum nsv_static_flag), given as booleans in an options table.
M.static_flags = {}
for name, v in pairs(M.enums.nsv_static_flag or {}) do M.static_flags[name:sub(12):lower()] = v end
local function static_flags(opts, n, fname)
    local flags = 0
    for k, v in pairs(opts) do
        local f = M.static_flags[k]
        if f then
            if v then flags = bit.bor(flags, f) end
        elseif k ~= "cache_control" and k ~= "root" and k ~= "status" and k ~= "headers" then
            argerr(n, fname, "unknown option '" .. tostring(k) .. "'")
        end
    end
    return flags
end

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

-- Names must be HTTP tokens (RFC 9110) and values free of control
-- characters other than HTAB: a CR or LF in a table entry would otherwise
-- start a header (or a response) of the caller's data's choosing.
-- raise: how to report a bad argument (default argerr; nanosrv/http.lua
-- passes one without a position, re-raised at its caller's line).
local function header_line(name, v, n, fname, raise)
    raise = raise or argerr
    if type(name) ~= "string" or name == "" or name:find("[^%w!#$%%&'*+%-.^_`|~]") then
        local shown = tostring(name):gsub("[%c\127\\]", function(c) return string.format("\\%d", c:byte()) end)
        raise(n, fname, "header name must be an HTTP token, got '" .. shown .. "'")
    end
    local tv = type(v)
    if tv == "number" or tv == "boolean" then v = tostring(v)
    elseif tv ~= "string" then raise(n, fname, "header '" .. name .. "' value must be a string") end
    if v:find("[%z\1-\8\10-\31\127]") then
        raise(n, fname, "header '" .. name .. "' value contains CR, LF, NUL or another control character")
    end
    return name .. ": " .. v .. "\r\n"
end

local function header_block(h, n, fname)
    local t = type(h)
    if t == "string" then return h end
    if h == nil then return "" end
    if t ~= "table" then argerr(n, fname, "headers must be a string or a table") end
    local out = {}
    for k, v in pairs(h) do
        if type(v) == "table" then -- repeated header, e.g. Set-Cookie
            for _, x in ipairs(v) do out[#out + 1] = header_line(k, x, n, fname) end
        else
            out[#out + 1] = header_line(k, v, n, fname)
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
-- valid until the next poll (the arena is reused then). Each request is its
-- own small table, stamped with the poll generation that delivered it: a
-- request kept past that poll raises instead of reading whatever event
-- fills its slot of a later batch (another client's data).
---------------------------------------------------------------------------

local Req, Params = {}, {}
local req_fields = {}
local vlen = ffi.new("uint32_t[1]")
local nh_off, nh_len, hv_off, hv_len =
    ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]")

local function req_ev(r)
    local own = r._ev -- a request whose handler waited has its own copy
    if own then
        local e = r._end -- the poll generation in which its handler ended
        if e and e ~= r._s._gen then
            error("nanosrv: request used after the next poll (its data is gone; copy what you need)", 3)
        end
        return own, r._a
    end
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
local whole_body = field("body_off", "body_len")
local read_body
-- A streamed body (NSV_EVF_STREAM_BODY) is read whole on first access,
-- which waits for it inside the handler's coroutine.
req_fields.body = function(r)
    if r._body then return read_body(r) end
    return whole_body(r)
end
req_fields.peer = field("peer_off", "peer_len")
req_fields.raw_headers = field("headers_off", "headers_len")
req_fields.body_len = function(r)
    local b = r._body
    if b then return b.got end -- streamed: bytes received so far
    return (req_ev(r)).body_len
end
req_fields.streamed = function(r) return r._body ~= false end
-- Streamed body: bytes received and not read yet, and whether reading the
-- socket is paused because of them.
req_fields.body_queued = function(r) local b = r._body; return b and b.qbytes or 0 end
req_fields.body_paused = function(r) local b = r._body; return b and b.paused or false end
req_fields.port = function(r) return (req_ev(r)).peer_port end
req_fields.route = function(r) return (req_ev(r)).route end
req_fields.conn = function(r) return (req_ev(r)).conn end
req_fields.listener = function(r) return (req_ev(r)).listener end
local function flag(f) return function(r) return bit.band((req_ev(r)).flags, f) ~= 0 end end
req_fields.keepalive = flag(EVF_KEEPALIVE)
req_fields.head = flag(EVF_HEAD)
req_fields.http10 = flag(EVF_HTTP10)
req_fields.http2 = flag(C.NSV_EVF_HTTP2) -- an HTTP/2 stream (answered like any request)
req_fields.chunked = flag(EVF_CHUNKED)
req_fields.upgrade = flag(EVF_UPGRADE)
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
-- TLS details: {sni =, subject =} on a TLS connection, false otherwise.
req_fields.tls = function(r)
    local ev = req_ev(r)
    if bit.band(ev.flags, EVF_TLS) == 0 then return false end
    return { sni = tls_part(1)(r), subject = tls_part(2)(r) }
end
-- A connection through a front that sent a PROXY protocol header
-- (NSV_EVF_PROXY): req.peer and req.port are the client's from the header;
-- req.proxy has the front's side: {front, front_port, dst, dst_port, ssl,
-- authority, alpn}. nil otherwise.
local EVF_PROXY = M.enums.nsv_event_flag.NSV_EVF_PROXY or 0
req_fields.proxy = function(r)
    local ev, a = req_ev(r)
    if bit.band(ev.flags, EVF_PROXY) == 0 then return nil end
    return M.ops().proxy_info(a, ev.tls_off, ev.tls_len)
end
req_fields.params = function(r)
    local p = rawget(r, "_p")
    if not p then
        p = setmetatable({ _r = r }, Params)
        rawset(r, "_p", p)
    end
    return p
end

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

-- A request whose handler suspends (any wait of a coroutine handler) gets
-- its own copy of the event record and of the arena bytes its strings
-- use, with the offsets rebased. The copy is made in the same table, so
-- every reference the handler holds stays good.
local STR_FIELDS = { "method", "path", "query", "headers", "params", "body", "peer", "tls" }
local function own_req(r)
    if r._ev or r._g ~= r._s._gen then return end -- copied already, or its batch is gone
    local srv = r._s
    local src = srv._evs + r._i
    local ev = ffi.new("nsv_event")
    ffi.copy(ev, src, ffi.sizeof("nsv_event"))
    local lo, hi = math.huge, 0
    for _, f in ipairs(STR_FIELDS) do
        local len = ev[f .. "_len"]
        if len > 0 then
            local off = ev[f .. "_off"]
            if off < lo then lo = off end
            if off + len > hi then hi = off + len end
        end
    end
    if hi == 0 then lo = 0 end
    local a = ffi.new("char[?]", hi - lo + 1)
    ffi.copy(a, srv._arena + lo, hi - lo)
    for _, f in ipairs(STR_FIELDS) do
        if ev[f .. "_len"] > 0 then ev[f .. "_off"] = ev[f .. "_off"] - lo else ev[f .. "_off"] = 0 end
    end
    rawset(r, "_a", a)
    r._ev = ev
end

Req.__index = function(r, k)
    local f = req_fields[k]
    if f then return f(r) end
    return Req[k]
end
Req.__newindex = function() error("nanosrv: request fields are read-only", 2) end

Params.__index = function(p, name) return Req.param(p._r, name) end

local function new_req(srv, i)
    -- _ev and _body are false (not nil) so that their lookups on the hot
    -- path hit the table and never reach the __index function.
    return setmetatable({ _s = srv, _i = i, _g = srv._gen, _ev = false, _body = false }, Req)
end

---------------------------------------------------------------------------
-- Streamed request bodies. The pieces of BODY events queue on the request's
-- body object; a handler reading it suspends its coroutine while the queue
-- is empty and the poll loop resumes it with the next piece. While more
-- than `body_buffer` bytes wait unread (the handler is busy elsewhere, e.g.
-- waiting for a slow client to take its output), reading the socket is
-- paused in C, so TCP slows the sender; it resumes below half of it.
---------------------------------------------------------------------------

local function in_coroutine()
    local co, main = coroutine.running()
    if co == nil or main then return nil end
    return co
end

-- The scheduler (see "Coroutines" below): suspend(srv, what, timeout_ms,
-- token) waits in the running coroutine until wake(srv, co, token, ...).
local suspend, wake, fire_ntimer

local function body_next(b)
    while true do
        local h = b.qh
        if h <= b.qt then
            local chunk = b.q[h]
            b.q[h] = nil
            b.qh = h + 1
            b.qbytes = b.qbytes - #chunk
            if b.paused and b.qbytes <= b.limit / 2 then
                b.paused = false
                local sh = b.s._h
                if sh ~= nil then C.nsv_pause_read(sh, b.c, 0) end
            end
            return chunk
        end
        if b.err then error(b.err, 0) end
        if b.eof then return nil end
        if b.cut then
            error(http_error(nil, "nanosrv: request body: the response was sent before the body ended "
                                  .. "(the rest is dropped)"), 0)
        end
        local co = in_coroutine()
        if not co then
            error("nanosrv: request body: waiting for it needs the handler's coroutine "
                  .. "(read it in the handler of a stream_body route)", 3)
        end
        b.waiter = co
        suspend(b.s, "request body", nil, b)
        if b.waiter == co then b.waiter = nil end
    end
end

-- Iterator over the body pieces: for chunk in req:body_chunks() do ... end.
-- A complete (not streamed) body comes as one piece.
function Req.body_chunks(r)
    local b = r._body
    if b then return function() return body_next(b) end end
    local body = whole_body(r)
    return function()
        local v = body
        body = nil
        if v == "" then return nil end
        return v
    end
end

-- The whole body as one string; max (optional) bytes at most, else an
-- HTTP 413 error (answered if the handler does not catch it).
-- The streamed case is a function of its own, without closures: one in
-- read_body would keep the JIT from compiling the common (whole body) path.
local function read_streamed(b, max)
    local parts, n = {}, 0
    for _ = 1, math.huge do
        local chunk = body_next(b)
        if chunk == nil then break end
        n = n + #chunk
        if max and n > max then error(http_error(413, "request body too large"), 2) end
        parts[#parts + 1] = chunk
    end
    b.whole = table.concat(parts)
    return b.whole
end

read_body = function(r, max)
    local b = r._body
    if not b then
        local body = whole_body(r)
        if max and #body > max then error(http_error(413, "request body too large"), 2) end
        return body
    end
    if b.whole then return b.whole end
    return read_streamed(b, max)
end
Req.read_body = read_body

-- Query string, urlencoded form body and cookies as tables (see
-- nanosrv.parse_query): a repeated name maps to the array of its values.
function Req.query_args(r) return (M.parse_query(r.query)) end
function Req.form(r, max)
    local ct = r:header("content-type") or ""
    if not ct:lower():find("^%s*application/x%-www%-form%-urlencoded%s*[;]?") then
        return nil, "not application/x-www-form-urlencoded"
    end
    return (M.parse_form(read_body(r, max)))
end
function Req.cookies(r)
    local h = r:header("cookie")
    if not h then return {} end
    return (M.parse_cookies(h))
end
-- One cookie's value (the first, most specific one when sent twice).
function Req.cookie(r, name)
    local v = Req.cookies(r)[name]
    if type(v) == "table" then return v[1] end
    return v
end

local multipart_mod
-- multipart/form-data, part by part (see nanosrv/multipart.lua).
function Req.multipart(r, opts)
    multipart_mod = multipart_mod or M.multipart()
    return multipart_mod.parts(r, opts)
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

-- A complete reply before a streamed body ended ends it (the library
-- drops the rest): a reader waiting for it is told so.
local function body_cut(res, b)
    res._body = nil
    if b.eof or b.err then return end
    b.cut = true
    local s = res._s
    local k = conn_key(b.c)
    if s._bodies[k] == b then s._bodies[k] = nil end
    b.q, b.qh, b.qt, b.qbytes = {}, 1, 0, 0
    local co = b.waiter
    if co then b.waiter = nil; wake(s, co, b) end
end

-- A late reply (the client already left: the connection id is stale) is
-- a no-op: the call returns false and res.closed is true. Misuse (a second
-- reply, a bad status or header) still raises.
local function gone(self, r)
    if r ~= ESTALE and r ~= ECLOSED then return false end
    self._closed, self.closed = true, true
    self._st = DONE
    if self._held then unhold(self) end
    self._s._streams[conn_key(self._c)] = nil
    return true
end

function Res:send(status, body, headers)
    status = status_arg(status, "send")
    body = body_arg(body, 2, "send")
    local hb = header_block(headers, 3, "send")
    local x = self._cookies
    if x then hb = hb .. x end
    local h = srv_handle(self._s)
    local r = C.nsv_reply(h, self._c, status, hb, #hb, body, #body)
    if r < 0 then
        if gone(self, r) then return false end
        check(r, "reply", self._s)
    end
    self._st = DONE
    if self._held then unhold(self) end
    local b = self._body
    if b then body_cut(self, b) end
    return true
end

local function started(self)
    self._st = STREAMING
    if self._held then unhold(self) end
    self._s._streams[conn_key(self._c)] = self -- for its TCP_WRITABLE events
end

function Res:start(status, headers)
    status = status_arg(status, "start")
    local hb = header_block(headers, 2, "start")
    local x = self._cookies
    if x then hb = hb .. x end
    local h = srv_handle(self._s)
    local r = C.nsv_reply_start(h, self._c, status, hb, #hb)
    if r < 0 then
        if self._closed or gone(self, r) then return false end
        check(r, "reply_start", self._s)
    end
    started(self)
    return true
end

-- Inside a coroutine handler, wait while the stream is past its high water
-- mark (the client reads slower than we write). Returns false once the
-- connection is closed.
local function wait_writable(self)
    if self._closed then return false end
    if not self._blocked then return true end
    local co = in_coroutine()
    if not co then return true end -- a plain handler paces itself with on_drain
    local s = self._s
    local function go() wake(s, co, self) end
    for _ = 1, math.huge do
        if self._closed then return false end
        if not self._blocked then return true end
        self:on_drain(go)
        suspend(s, "write", nil, self)
    end
end

-- Queue output with f(h, conn, ...); in a coroutine handler wait first
-- while the client is behind, and wait again on NSV_EAGAIN (output at its
-- cap before the high-water event could be seen: the handler has not
-- yielded since). The low-water event follows, as the queue is past high.
local function paced(self, f, ...)
    if self._blocked then wait_writable(self) end
    local h = srv_handle(self._s)
    local r = f(h, self._c, ...)
    for _ = 1, math.huge do
        if r ~= EAGAIN or not in_coroutine() or self._closed then return r end
        self._blocked = true
        if not wait_writable(self) then return ESTALE end
        r = f(srv_handle(self._s), self._c, ...)
    end
end

-- In a coroutine handler, write waits while the client is behind.
function Res:write(chunk)
    chunk = body_arg(chunk, 1, "write")
    local r = paced(self, C.nsv_send_chunk, chunk, #chunk)
    if r < 0 then
        if self._closed or gone(self, r) then return false end
        check(r, "send_chunk", self._s)
    end
    return true
end

-- Add a Set-Cookie line to the answer (see nanosrv.cookie for opts).
function Res:set_cookie(name, value, opts)
    if self._st ~= PENDING then error("nanosrv: set_cookie after the response started", 2) end
    local line = "Set-Cookie: " .. cookie_value("set_cookie", name, value, opts) .. "\r\n"
    self._cookies = (self._cookies or "") .. line
    return self
end

-- Answer with a file: path is a file system path, or with opts.root a URL
-- path resolved under root by the rules of srv:static. opts: status (0 or
-- absent: 200/206/304/416 as the request asks), headers, and the static
-- flags by name. Conditional and range requests are honoured while the
-- request is still readable (its handler's batch, or a coroutine route).
-- Returns true, or nil, "not found" when there is no such file (nothing
-- was sent).
function Res:send_file(path, opts)
    str_arg(path, 1, "send_file")
    if opts == nil then opts = {} end
    if type(opts) ~= "table" then argerr(2, "send_file", "options table expected") end
    local root, status = opts.root or "", opts.status or 0
    if type(root) ~= "string" then argerr(2, "send_file", "root must be a string") end
    if type(status) ~= "number" then argerr(2, "send_file", "status must be a number") end
    local hb = header_block(opts.headers, 2, "send_file") .. (self._cookies or "")
    local flags = static_flags(opts, 2, "send_file")
    local rh, req = "", self._req
    if req then
        local gen = req._s._gen
        if req._g == gen or (req._ev and (req._end == nil or req._end == gen)) then rh = req.raw_headers end
    end
    local h = srv_handle(self._s)
    local r = C.nsv_reply_file(h, self._c, status, root, #root, path, #path, rh, #rh, hb, #hb, flags)
    if r == ENOTFOUND then return nil, "not found" end
    if r < 0 then
        if gone(self, r) then return false end
        check(r, "reply_file", self._s)
    end
    self._st = DONE
    if self._held then unhold(self) end
    local b = self._body
    if b then body_cut(self, b) end
    return true
end

---------------------------------------------------------------------------
-- Server-sent events on a response: sse = res:sse(headers), then
-- sse:send{data =, event =, id =, retry =}, sse:comment(text), sse:close().
---------------------------------------------------------------------------

local SSE = {}
SSE.__index = SSE

function Res:sse(headers)
    local hb = header_block(headers, 1, "sse")
    local x = self._cookies
    if x then hb = hb .. x end
    local h = srv_handle(self._s)
    local r = C.nsv_sse_start(h, self._c, hb, #hb)
    if r < 0 and not gone(self, r) then check(r, "sse_start", self._s) end
    if r >= 0 then started(self) end
    return setmetatable({ res = self }, SSE)
end

local function opt_str(v, n, fname, what)
    if v == nil then return nil end
    local t = type(v)
    if t == "number" then return tostring(v) end
    if t ~= "string" then argerr(n, fname, what .. " must be a string") end
    return v
end

-- Send one event: a table {data, event, id, retry} or a data string. Data
-- with line breaks arrives as sent (each break an LF). Returns true; false
-- when the event was queued but the client is behind (a plain handler waits
-- for sse:on_drain; in a coroutine handler send waits by itself); nil,
-- "closed" once the stream ended or the client left. Bad fields (CR or LF
-- in event or id) raise with the library's detail.
function SSE:send(ev)
    local res = self.res
    if type(ev) ~= "table" then ev = { data = opt_str(ev, 1, "send", "data") } end
    local data = opt_str(ev.data, 1, "send", "data")
    local event = opt_str(ev.event, 1, "send", "event")
    local id = opt_str(ev.id, 1, "send", "id")
    local retry = ev.retry
    if retry ~= nil and type(retry) ~= "number" then argerr(1, "send", "retry must be a number (ms)") end
    if res._st ~= STREAMING or not wait_writable(res) or res._st ~= STREAMING then return nil, "closed" end
    local s = res._s
    local r = paced(res, C.nsv_sse_send, event, event and #event or 0, id, id and #id or 0,
                    data, data and #data or 0, retry or -1)
    if r == ESTALE or res._closed then return nil, "closed" end
    if r < 0 then
        local msg = errmsg(r, "sse_send", s)
        if r == EINVAL then -- the formatter's detail is kept per thread
            local d = ffi.string(C.nsv_last_error_detail(nil))
            if d ~= "" and not msg:find(d, 1, true) then msg = msg .. ": " .. d end
        end
        error(msg, 2)
    end
    return not res._blocked
end

-- A comment line (clients ignore it): a keepalive for proxies.
function SSE:comment(text)
    text = opt_str(text, 1, "comment", "text") or ""
    local res = self.res
    if res._st ~= STREAMING or not wait_writable(res) or res._st ~= STREAMING then return nil, "closed" end
    local n = C.nsv_sse_comment(text, #text, nil, 0)
    if n < 0 then error(errmsg_nosrv(tonumber(n), "sse_comment"), 2) end
    local buf = scratch_buf(tonumber(n) + 1)
    n = C.nsv_sse_comment(text, #text, buf, scratch_cap)
    local line = ffi.string(buf, n) -- the scratch buffer may be reused while paced waits
    local r = paced(res, C.nsv_send_chunk, line, #line)
    if r == ESTALE or res._closed then return nil, "closed" end
    check(r, "sse_comment", res._s)
    return not res._blocked
end

-- End the stream (the client's EventSource reconnects unless told not to).
function SSE:close()
    local res = self.res
    if res._st ~= STREAMING then return end
    local h = res._s._h
    if h ~= nil then C.nsv_reply_end(h, res._c) end
    res._st = DONE
    res._s._streams[conn_key(res._c)] = nil
end

function SSE:closed() return self.res._st ~= STREAMING or self.res._closed == true end
function SSE:on_drain(fn) return self.res:on_drain(fn) end
function SSE:on_close(fn) return self.res:on_disconnect(fn) end

function Res:finish()
    local h = srv_handle(self._s)
    local r = C.nsv_reply_end(h, self._c)
    if r < 0 then
        if self._closed or gone(self, r) then return false end
        check(r, "reply_end", self._s)
    end
    self._st = DONE
    self._s._streams[conn_key(self._c)] = nil
    return true
end

function Res:close()
    local h = srv_handle(self._s)
    local r = C.nsv_close(h, self._c)
    if r < 0 then
        if gone(self, r) then return false end
        check(r, "close", self._s)
    end
    self._st = DONE
    self._s._streams[conn_key(self._c)] = nil
    if self._held then unhold(self) end
    local b = self._body
    if b then body_cut(self, b) end
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

-- Opcodes by name (the client's receive speaks the same names).
local WS_OPCODES = { text = C.NSV_WS_TEXT, binary = C.NSV_WS_BINARY, ping = C.NSV_WS_PING, pong = C.NSV_WS_PONG }
local WS_SEND_BACKOFF_MAX = 32 -- ms between tries while the output is full

-- Returns true; false, "closed" once the socket is closed or closing (a
-- late send); false, "busy" outside a coroutine when the connection's
-- output is full (nothing was queued). In a coroutine a full output makes
-- it wait and try again (the library has no writable event for
-- WebSockets, so it looks again after 1, 2, 4 ... 32 ms).
function WS:send(data, opcode)
    need_ws()
    data = body_arg(data, 1, "send")
    local op = opcode or 1
    if type(op) == "string" then
        op = WS_OPCODES[op] or argerr(2, "send", "'text', 'binary', 'ping', 'pong' or an opcode number expected")
    elseif type(op) ~= "number" then
        argerr(2, "send", "'text', 'binary', 'ping', 'pong' or an opcode number expected")
    end
    local backoff = 1
    for _ = 1, math.huge do
        if self.closed then return false, "closed" end
        local h = srv_handle(self._s)
        local r = C.nsv_ws_send(h, self._c, op, data, #data)
        if r >= 0 then return true end
        if r == ESTALE or r == ECLOSED then self.closed = true; return false, "closed" end
        -- On a WebSocket, NSV_ESTATE means its close handshake began.
        if r == C.NSV_ESTATE then self._s._detail = ffi.string(C.nsv_last_error_detail(h)); return false, "closed" end
        if r ~= EAGAIN then check(r, "ws_send", self._s) end
        self._s._detail = ffi.string(C.nsv_last_error_detail(h)) -- expected: not news for the next message
        if not in_coroutine() then return false, "busy" end
        self.send_waits = (self.send_waits or 0) + 1
        self._s:sleep(backoff)
        backoff = math.min(backoff * 2, WS_SEND_BACKOFF_MAX)
    end
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

-- Reading of a socket stops while any of these holds: the host paused it
-- (ws:pause()), its handlers are behind (events queued behind one that
-- waits, see ws_call), or a client's reader is behind
-- (nanosrv/websocket.lua); TCP then slows the peer.
local function ws_reading(ws)
    local stop = ws.paused or ws._qpaused or ws._rpaused or false
    if stop == (ws._stopped or false) or ws.closed then return true end
    local h = ws._s._h
    if h == nil then return false end
    if C.nsv_pause_read(h, ws._c, stop and 1 or 0) ~= 0 then -- closing: nothing more to read
        ws._s._detail = ffi.string(C.nsv_last_error_detail(h))
        return false
    end
    ws._stopped = stop
    return true
end

-- Stop / resume reading this socket; false once it is closed or closing.
function WS:pause()
    self.paused = true
    return ws_reading(self)
end
function WS:resume()
    self.paused = false
    return ws_reading(self)
end

-- Bytes waiting to be sent on this socket (single-loop servers).
function WS:queued()
    if self.closed then return 0 end
    local r = C.nsv_conn_queued(srv_handle(self._s), self._c)
    if r == ESTALE then return 0 end
    return tonumber(check(r, "conn_queued", self._s))
end

-- An HttpError passes through as it is (it is an answer, not a bug).
local function traceback(e)
    if getmetatable(e) == HttpError then return e end
    return debug.traceback(tostring(e), 2)
end

local function log_handler_error(what, err)
    io.stderr:write("nanosrv: ", what, " handler failed: ", tostring(err), "\n")
    io.stderr:flush()
end


---------------------------------------------------------------------------
-- Coroutines. Every handler runs in a coroutine from a pool of idle ones
-- per server, so it may wait (srv:sleep, a streamed body, a slow client, a
-- cosocket) while the loop serves others, and no coroutine is created per
-- request: a handler that returns, at once or after waiting, leaves its
-- coroutine to the next one. Our waits yield WAIT and a finished task
-- yields PARK. Any other yield (a bare coroutine.yield() in a handler) is
-- not ours: the coroutine is resumed by the next poll, as srv:sleep(0).
---------------------------------------------------------------------------

local PARK, WAIT, TIMEDOUT = setmetatable({}, { __tostring = function() return "nanosrv.PARK" end }),
                             setmetatable({}, { __tostring = function() return "nanosrv.WAIT" end }),
                             setmetatable({}, { __tostring = function() return "nanosrv.TIMEDOUT" end })
local POOL_MAX = 256 -- idle coroutines kept per server
local co_yield, co_resume, co_status, co_create = coroutine.yield, coroutine.resume, coroutine.status, coroutine.create

-- A pooled coroutine runs one task after another; ctx = {co =, s =, req =}
-- is its record in the pool (req: the request its task serves). Tasks catch
-- their own errors (one that escapes ends the coroutine, which resume logs).
local function pool_main(ctx, f, a, b, c, d, e)
    while true do
        f(a, b, c, d, e)
        local req = ctx.req
        if req then
            ctx.req = nil
            if req._ev then rawset(req, "_end", ctx.s._gen) end -- readable until the next poll, as any request
        end
        f, a, b, c, d, e = nil, nil, nil, nil, nil, nil -- a parked coroutine holds nothing
        f, a, b, c, d, e = co_yield(PARK, ctx)
    end
end

local function new_seq(self)
    local seq = self._seq + 1
    self._seq = seq
    return seq
end

-- A timer that wakes co with TIMEDOUT unless its wait (token) ended first.
local function wake_timer(self, co, token, ms)
    local h = self._h
    if h == nil then return nil end
    local id = C.nsv_timer_add(h, ms, 0, 0)
    if id < 0 then return nil end
    id = tonumber(id)
    self._sleep_co[id], self._sleep_tok[id] = co, token
    return id
end

local function foreign_yield(self, co)
    local ctx = self._ctx[co]
    local req = ctx and ctx.req
    if req then own_req(req) end
    local token = -new_seq(self) -- negative: resumed with no values, not TIMEDOUT
    self._wait[co] = token
    wake_timer(self, co, token, 0)
end

-- The task coroutine running now (nil: none), kept as each resume starts
-- and ends (so nested resumes restore the outer one): modules find their
-- per-task state by it without coroutine.running(), which the JIT does
-- not compile (nanosrv.ngx: the request of the running handler).
local running_task = { co = nil }

local function resume(self, co, ...)
    local prev = running_task.co
    running_task.co = co
    local ok, v, ctx = co_resume(co, ...)
    running_task.co = prev
    if v == PARK then
        local pool = self._pool
        local n = #pool
        if n < POOL_MAX then pool[n + 1] = ctx end
        return
    end
    if not ok then -- a coroutine outside the pool (one a handler made) failed
        log_handler_error("coroutine", debug.traceback(co, tostring(v)))
    elseif v ~= WAIT and co_status(co) == "suspended" then
        foreign_yield(self, co)
    end
end

-- Run f(a, b, c, d, e) in a pooled coroutine now, until it returns or
-- waits. req: the request the task serves (copied if the task waits).
local function start_task(self, req, f, a, b, c, d, e)
    local pool = self._pool
    local n = #pool
    local ctx
    if n > 0 then
        ctx = pool[n]
        pool[n] = nil
    else
        ctx = { s = self, req = false }
        local co = co_create(pool_main)
        ctx.co = co
        self._ctx[co] = ctx
        ctx.req = req or false
        return resume(self, co, ctx, f, a, b, c, d, e)
    end
    ctx.req = req or false
    resume(self, ctx.co, f, a, b, c, d, e)
end

-- Wait in the running coroutine until wake(self, co, token, ...) (token
-- nil there wakes any wait) or, with timeout_ms, until it passes: then it
-- returns TIMEDOUT. A request the coroutine serves is copied first.
suspend = function(self, what, timeout_ms, token)
    local co = in_coroutine()
    if not co then
        error("nanosrv: " .. what .. " needs a coroutine (every handler runs in one unless the server "
              .. "option coroutines = false)", 3)
    end
    local ctx = self._ctx[co]
    local req = ctx and ctx.req
    if req and not req._ev then own_req(req) end
    if token == nil then token = new_seq(self) end
    self._wait[co] = token
    local tid = timeout_ms and wake_timer(self, co, token, timeout_ms)
    local a, b, c = co_yield(WAIT)
    if tid and self._sleep_co[tid] then
        self._sleep_co[tid], self._sleep_tok[tid] = nil, nil
        if self._h ~= nil then C.nsv_timer_cancel(self._h, tid) end
    end
    return a, b, c
end

wake = function(self, co, token, ...)
    local w = self._wait[co]
    if w == nil or (token ~= nil and w ~= token) then return false end
    self._wait[co] = nil
    resume(self, co, ...)
    return true
end

-- Calls for one connection (WebSocket, raw TCP) run one at a time in
-- order: while one waits, later ones queue on the object.
-- A WebSocket whose handlers are this far behind stops being read (see
-- ws_call), and is read again below half of it.
local WS_QUEUE_EVENTS, WS_QUEUE_BYTES = 64, 1048576

local function serial_task(obj, f, name, a, b)
    f(obj, name, a, b)
    local q = obj._q
    if q then
        for _ = 1, math.huge do
            local hd = obj._qh
            if hd > obj._qt then break end
            local it = q[hd]
            q[hd] = nil
            obj._qh = hd + 1
            local qb = obj._qbytes
            if qb and it[2] == "message" then
                qb = qb - #it[3]
                obj._qbytes = qb
                if obj._qpaused and qb <= WS_QUEUE_BYTES / 2 and obj._qt - obj._qh < WS_QUEUE_EVENTS / 2 then
                    obj._qpaused = false
                    ws_reading(obj)
                end
            end
            it[1](obj, it[2], it[3], it[4])
        end
    end
    obj._busy = false
end

local function serial(self, obj, f, name, a, b, req)
    if obj._busy then
        local q = obj._q
        if not q then
            q = {}
            obj._q, obj._qh, obj._qt = q, 1, 0
        end
        local tl = obj._qt + 1
        q[tl] = { f, name, a, b }
        obj._qt = tl
        return
    end
    if not self._coro then return f(obj, name, a, b) end
    obj._busy = true
    start_task(self, req, serial_task, obj, f, name, a, b)
end

local function hook_invoke(f, what, a, b, c)
    local ok, err = xpcall(f, traceback, a, b, c)
    if not ok then log_handler_error(what, err) end
end
-- srv:on(...) hooks and srv:timer callbacks.
local function hook_call(self, f, what, a, b, c)
    if self._coro then return start_task(self, nil, hook_invoke, f, what, a, b, c) end
    hook_invoke(f, what, a, b, c)
end

---------------------------------------------------------------------------
-- Raw TCP connections (tcp:// and tls:// listeners, srv:connect). One
-- object per connection, handed to the handlers:
--   on_open(conn)            accepted (listeners)
--   on_connect(conn)         outbound connection is up (srv:connect)
--   on_data(conn, bytes)     bytes received, in order
--   on_eof(conn)             the peer ended its side (half-close); without
--                            this handler the connection shuts its side
--                            too once its output is sent
--   on_writable(conn, ok)    false: queued output crossed the high water
--                            mark (slow down); true: it fell to the low one
--   on_close(conn)           gone; conn.closed is true from then on
--   on_error(conn, msg, code) failure (connect refused, TLS, output limit);
--                            on_close follows
--   on_wakeup(conn, data)    srv:wakeup(conn, data)
---------------------------------------------------------------------------

local TCP = {}
TCP.__index = TCP
local TCP_HANDLERS = { on_open = true, on_connect = true, on_data = true, on_eof = true, on_writable = true,
                       on_close = true, on_error = true, on_wakeup = true }

local function tcp_handlers(handlers, n, fname, missing)
    if type(handlers) ~= "table" then argerr(n, fname, missing) end
    for k, v in pairs(handlers) do
        if not TCP_HANDLERS[k] then argerr(n, fname, "unknown handler '" .. tostring(k) .. "'") end
        if type(v) ~= "function" then argerr(n, fname, k .. " must be a function") end
    end
end

local function new_tcp(srv, id, handlers)
    local conn = setmetatable({ id = id, _s = srv, _h = handlers, closed = false, writable = true,
                                paused = false, eof = false, data = {} }, TCP)
    srv._tcp[conn_key(id)] = conn
    return conn
end

-- A handler that raises is logged and its connection reset: the stream
-- it was handling is in an unknown state.
local function tcp_invoke(conn, name, a, b)
    local ok, err = xpcall(conn._h[name], traceback, conn, a, b)
    if not ok then
        log_handler_error("tcp " .. name, err)
        local h = conn._s._h
        if h ~= nil and not conn.closed and name ~= "on_close" then C.nsv_abort(h, conn.id) end
    end
end
-- Handlers of a connection run in order, in coroutines; the binding's own
-- (cosockets, _direct) are called at once. False when there is no handler.
local function tcp_call(conn, name, a, b)
    if not conn._h[name] then return false end
    if conn._direct then tcp_invoke(conn, name, a, b) else serial(conn._s, conn, tcp_invoke, name, a, b) end
    return true
end
-- Without on_eof, a connection ends its side once its output is sent
-- (after the handlers before it).
local function tcp_eof_default(conn)
    if not conn.closed then conn:shutdown() end
end

-- r from a call on the connection: true; false when it is closed (a late
-- call is a no-op); other failures raise with the library's detail.
local function tcp_result(conn, r, what)
    if r >= 0 then return true end
    if r == ESTALE or r == ECLOSED then conn.closed = true; return false end
    check(r, what, conn._s)
end

local function tcp_h(conn)
    if conn.closed then return nil end
    return conn._s._h
end

-- Queue bytes. Returns true (queued; conn.writable turns false past the
-- high water mark and on_writable says when to go on), or false once the
-- connection is closed. Past the server's max_output nothing is queued and
-- it raises (a sender that ignores on_writable).
function TCP:send(data)
    data = body_arg(data, 1, "send")
    local h = tcp_h(self)
    if h == nil then return false end
    return tcp_result(self, C.nsv_send(h, self.id, data, #data), "send")
end

-- Close once the queued output is sent.
function TCP:close()
    local h = tcp_h(self)
    if h == nil then return false end
    return tcp_result(self, C.nsv_close(h, self.id), "close")
end

-- Close now, dropping queued output (the peer sees a reset).
function TCP:abort()
    local h = tcp_h(self)
    if h == nil then return false end
    return tcp_result(self, C.nsv_abort(h, self.id), "abort")
end

-- Half-close: end our side once the queued output is sent; reading goes
-- on until the peer ends its side too.
function TCP:shutdown()
    local h = tcp_h(self)
    if h == nil then return false end
    return tcp_result(self, C.nsv_shutdown(h, self.id), "shutdown")
end

-- Stop / resume reading (TCP then slows the peer).
function TCP:pause()
    local h = tcp_h(self)
    if h == nil then return false end
    local ok = tcp_result(self, C.nsv_pause_read(h, self.id, 1), "pause")
    if ok then self.paused = true end
    return ok
end
function TCP:resume()
    local h = tcp_h(self)
    if h == nil then return false end
    local ok = tcp_result(self, C.nsv_pause_read(h, self.id, 0), "resume")
    if ok then self.paused = false end
    return ok
end

-- This connection's water marks for on_writable (0 <= low <= high).
function TCP:set_water_marks(high, low)
    if type(high) ~= "number" or type(low) ~= "number" then
        argerr(1, "set_water_marks", "high and low byte counts expected")
    end
    local h = tcp_h(self)
    if h == nil then return false end
    return tcp_result(self, C.nsv_set_water_marks(h, self.id, high, low), "set_water_marks")
end

-- Bytes queued for output (0 once closed).
function TCP:queued()
    local h = tcp_h(self)
    if h == nil then return 0 end
    local r = C.nsv_conn_queued(h, self.id)
    if r == ESTALE then self.closed = true; return 0 end
    return tonumber(check(r, "conn_queued", self._s))
end

function TCP:wakeup(data) return self._s:wakeup(self, data) end

TCP.__tostring = function(c) return "nanosrv.tcp(" .. tostring(c.id) .. ")" end

---------------------------------------------------------------------------
-- Server
---------------------------------------------------------------------------

local Server = {}
Server.__index = Server


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
-- body_buffer: unread bytes of a streamed request body past which reading
-- is paused (default 1 MiB). coroutines = false: handlers are called
-- directly (stream_body and coroutine = true routes still get one).
-- access_log ("common", "combined", "json" or a function(record); a number
-- is the library option itself), access_log_sink and access_log_queue: see
-- Server:access_log.
local LOCAL_OPTS = { threads = true, batch = true, arena = true, body_buffer = true, coroutines = true,
                     access_log_sink = true, access_log_queue = true }

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
        _held = {}, listeners = {},
        _coroute = {}, _bodies = {}, _tcp = {}, _tcpl = {}, _ctimers = {},
        _body_buffer = opts.body_buffer or 1048576,
        -- the scheduler: idle coroutines, the request each task serves, the
        -- wait each suspended one is in, timers that wake them
        _coro = opts.coroutines ~= false, _pool = {}, _seq = 0,
        _ctx = setmetatable({}, { __mode = "k" }), _wait = setmetatable({}, { __mode = "k" }),
        _sleep_co = {}, _sleep_tok = {},
        _ntimers = {}, _ntimers_n = 0, _ntimers_running = 0, _exiting = false,
    }, Server)
    if type(self._body_buffer) ~= "number" or self._body_buffer < 1 then
        argerr(1, "server", "body_buffer must be a number >= 1")
    end
    -- Unmatched requests: 404 unless srv:fallback() says otherwise.
    self._fallback = function(_, res)
        res:send(404, '{"error":"not found"}', "Content-Type: application/json\r\n")
    end
    for k, v in pairs(opts) do
        if not LOCAL_OPTS[k] and not (k == "access_log" and type(v) ~= "number") then self:set(k, v) end
    end
    if opts.access_log ~= nil and type(opts.access_log) ~= "number" then
        self:access_log(opts.access_log, opts.access_log_sink, opts.access_log_queue)
    end
    return self
end

local function opt_id(name)
    if type(name) ~= "string" then argerr(1, "set", "option name expected") end
    local id = C.nsv_opt_by_name(name, #name)
    if id < 0 then error("nanosrv: unknown option '" .. name .. "'", 3) end
    return id
end

-- String options (enum nsv_str_option: TLS certificate, key, CA, password,
-- gzip types) go through nsv_set_str; every other option is an integer.
local STR_OPT = {}
for _, v in pairs(M.enums.nsv_str_option or {}) do STR_OPT[v] = true end
local VERIFY = { none = 0, optional = 1, required = 2 }

function Server:set(name, value)
    local id = opt_id(name)
    if STR_OPT[id] then
        if value == nil or value == false then value = "" end
        if type(value) ~= "string" then argerr(2, "set", "option '" .. name .. "' needs a string") end
        local h = srv_handle(self)
        check(C.nsv_set_str(h, id, value, #value), "set " .. name, self)
        return self
    end
    if type(value) == "string" and id == C.NSV_OPT_TLS_VERIFY_CLIENT then
        value = VERIFY[value:lower()] or argerr(2, "set", "tls_verify_client is \"none\", \"optional\" or \"required\"")
    end
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
-- http://, ws://, https://, wss:// serve the routes; tcp:// and tls://
-- need a table of raw TCP handlers (see TCP connections below), then the
-- options. Listener options (nanosrv/ops.lua): proxy_protocol (true, "v1",
-- "v2", "any"), proxy_timeout_ms, proxy_from, allow, deny (CIDR strings
-- or lists of them), reuseport.
-- Raised at the caller of the method (listen_args is one call below it).
local function listen_argerr(n, fname, msg)
    error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 4)
end
local function listen_args(url, a, b, n, fname)
    local raw = url:lower():match("^(%a+)://")
    raw = raw == "tcp" or raw == "tls"
    local handlers, opts = nil, a
    if raw then
        local ok, err = pcall(tcp_handlers, a, n, fname, "a tcp:// or tls:// listener needs a table of handlers")
        if not ok then error((tostring(err):gsub("^[^\n]-:%d+: ", "")), 3) end
        handlers, opts = a, b
        n = n + 1
    elseif b ~= nil then
        listen_argerr(n + 1, fname, "handlers are for tcp:// and tls:// listeners")
    elseif type(a) == "table" then
        for k in pairs(a) do
            if TCP_HANDLERS[k] then listen_argerr(n, fname, "handlers are for tcp:// and tls:// listeners") end
        end
    end
    -- nanosrv/ops.lua only when there are options: a plain listen loads nothing.
    return handlers, opts ~= nil and M.ops().listen_opts(opts, n, fname) or nil
end

local OPT_REUSEPORT = M.enums.nsv_option.NSV_OPT_REUSEPORT or -1
local function add_listener(self, url, handlers, lo, fname, open)
    local h = srv_handle(self)
    local old_rp
    if lo and lo.reuseport then -- a listener option here, a server option in C (later listens)
        old_rp = C.nsv_get_int(h, OPT_REUSEPORT)
        check(C.nsv_set_int(h, OPT_REUSEPORT, lo.reuseport), "set reuseport", self)
    end
    local lid = open(h)
    if old_rp then C.nsv_set_int(h, OPT_REUSEPORT, old_rp) end
    -- Errors are blamed on the caller of the method.
    if lid < 0 then error(errmsg(lid, fname .. " " .. url, self), 3) end
    local port = C.nsv_listener_port(h, lid)
    if port < 0 then error(errmsg(port, "listener_port", self), 3) end
    self.listeners[#self.listeners + 1] = { id = lid, url = url, port = port }
    if handlers then self._tcpl[lid] = handlers end
    if lo then M.ops().apply(self, lid, lo, fname .. " " .. url, 4) end
    return port, lid
end

function Server:listen(url, a, b)
    str_arg(url, 1, "listen")
    local handlers, lo = listen_args(url, a, b, 2, "listen")
    -- Not a tail call: error levels count this frame.
    local port, lid = add_listener(self, url, handlers, lo, "listen", function(h) return C.nsv_listen(h, url, #url) end)
    return port, lid
end

-- Adopt a listening socket (an inherited one, from a supervisor or
-- systemd): url gives the scheme (default "http://0.0.0.0:0"; a port
-- other than 0 must be the socket's). Same handlers and options as
-- listen; returns the bound port (0 for AF_UNIX) and the listener id.
-- The library owns fd once this returns.
function Server:listen_fd(fd, url, a, b)
    if type(fd) ~= "number" or fd < 0 or fd ~= math.floor(fd) then argerr(1, "listen_fd", "file descriptor expected") end
    if url == nil then url = "http://0.0.0.0:0" end
    str_arg(url, 2, "listen_fd")
    local handlers, lo = listen_args(url, a, b, 3, "listen_fd")
    local port, lid = add_listener(self, url, handlers, lo, "listen_fd",
                                   function(h) return C.nsv_listen_fd(h, url, #url, fd) end)
    return port, lid
end

-- systemd socket activation: adopt every socket passed to this process
-- (LISTEN_FDS for our LISTEN_PID) with url's scheme (default
-- "http://0.0.0.0:0") and the listener options. Returns a list of
-- {fd =, name = (LISTEN_FDNAMES), port =, id =}, empty when none.
function Server:listen_inherited(url, a, b)
    if url == nil then url = "http://0.0.0.0:0" end
    str_arg(url, 1, "listen_inherited")
    local handlers, lo = listen_args(url, a, b, 2, "listen_inherited")
    local fds, names = M.ops().inherited_fds(true)
    local out = {}
    for i, fd in ipairs(fds) do
        local port, lid = add_listener(self, url, handlers, lo, "listen_inherited",
                                       function(h) return C.nsv_listen_fd(h, url, #url, fd) end)
        out[i] = { fd = fd, name = names[i], port = port, id = lid }
    end
    return out
end

-- Set listener options (as listen's) on listener lid, for connections
-- accepted afterwards. A refusal raises with the library's detail and
-- leaves the listener refusing every connection.
function Server:set_listener(lid, opts)
    if type(lid) ~= "number" then argerr(1, "set_listener", "listener id expected") end
    -- listen_opts blames the frame two above it, as when listen_args calls it.
    local _, lo = listen_args("http://", opts, nil, 2, "set_listener")
    if lo and lo.reuseport then argerr(2, "set_listener", "reuseport is for listen: the socket is bound already") end
    srv_handle(self)
    M.ops().apply(self, lid, lo, "set_listener " .. lid, 3)
    return self
end

-- An integer option of a listener ("proxy_protocol", "proxy_timeout_ms").
function Server:listener_option(lid, name) return M.ops().listener_get(self, lid, name) end

-- Outbound connection to "tcp://host:port" or "tls://host:port"; returns
-- its connection object at once; handlers.on_connect(conn) once it is up,
-- or on_error(conn, message, code) then on_close(conn). Data sent before
-- is queued. TLS verifies the server's certificate and host name against
-- tls_client_ca_file / tls_client_ca_pem (default: the system bundle)
-- unless the server option tls_verify_server is false.
function Server:connect(url, handlers)
    str_arg(url, 1, "connect")
    tcp_handlers(handlers, 2, "connect", "handlers table expected")
    local h = srv_handle(self)
    local id = C.nsv_connect(h, url, #url)
    if id < 0 then check(tonumber(id), "connect " .. url, self) end
    local conn = new_tcp(self, ffi.cast("uint64_t", id), handlers)
    conn.url = url
    return conn
end

local function add_route(self, method, pattern, flags, fname)
    str_arg(method, 1, fname); str_arg(pattern, 2, fname)
    local h = srv_handle(self)
    local id = self._next_route
    check(C.nsv_route(h, method, #method, pattern, #pattern, id, flags), fname .. " " .. method .. " " .. pattern, self)
    self._next_route = id + 1
    return id
end

-- Handlers are function(req, res). Returns the route id. opts:
--   stream_body = true: the body arrives in pieces while the handler runs
--     (req:body_chunks(), req:read_body(), req:multipart()); implies
--   coroutine = true: the handler runs in a coroutine, so it may wait (for
--     the body, for a slow client in res:write and sse:send, srv:sleep)
--     while the poll loop serves other requests.
function Server:route(method, pattern, handler, opts)
    if type(handler) ~= "function" and not (type(handler) == "table" and getmetatable(handler)
                                            and getmetatable(handler).__call) then
        argerr(3, "route", "handler function expected")
    end
    if opts ~= nil and type(opts) ~= "table" then argerr(4, "route", "options table expected") end
    opts = opts or {}
    for k in pairs(opts) do
        if k ~= "stream_body" and k ~= "coroutine" then argerr(4, "route", "unknown option '" .. tostring(k) .. "'") end
    end
    local flags = opts.stream_body and C.NSV_ROUTE_STREAM_BODY or 0
    local id = add_route(self, method, pattern, flags, "route")
    self._handlers[id] = handler
    if opts.stream_body or opts.coroutine then self._coroute[id] = true end -- a coroutine even if coroutines = false
    return id
end

-- Serve the files under dir at the URL prefix ("/static/"), in C. opts:
-- cache_control (a Cache-Control value) and the static flags by name
-- (list, symlinks, precompressed, fallthrough, dotfiles). Returns the mount id.
function Server:static(prefix, dir, opts)
    str_arg(prefix, 1, "static"); str_arg(dir, 2, "static")
    if opts ~= nil and type(opts) ~= "table" then argerr(3, "static", "options table expected") end
    opts = opts or {}
    local cc = opts.cache_control or ""
    if type(cc) ~= "string" then argerr(3, "static", "cache_control must be a string") end
    local flags = static_flags(opts, 3, "static")
    local h = srv_handle(self)
    return check(C.nsv_serve_dir(h, prefix, #prefix, dir, #dir, cc, #cc, flags), "static " .. prefix, self)
end

-- Suspend the calling coroutine (any handler) for ms milliseconds, on a
-- library timer; the poll loop keeps serving meanwhile. 0 yields to the
-- loop once.
function Server:sleep(ms)
    if type(ms) ~= "number" or ms ~= ms or ms < 0 or ms > 2 ^ 40 then
        argerr(1, "sleep", "milliseconds >= 0 expected")
    end
    srv_handle(self)
    ms = math.ceil(ms)
    local at = M.millis() + ms
    for _ = 1, math.huge do
        if suspend(self, "sleep", ms) == TIMEDOUT then return end
        ms = math.max(0, at - M.millis()) -- woken early by a stale wakeup: wait the rest
    end
end

-- Handler for requests no route matched (default: 404 JSON).
function Server:fallback(handler)
    if type(handler) ~= "function" then argerr(1, "fallback", "handler function expected") end
    self._fallback = handler
end

-- handlers: { open = f(ws, req), message = f(ws, data, opcode), close = f(ws, code, reason) }
-- With a ws:// or wss:// URL instead of a pattern: the client's coroutine
-- form (nanosrv/websocket.lua), ws, err, code = srv:websocket(url, opts).
function Server:websocket(pattern, handlers)
    need_ws()
    if type(pattern) == "string" and pattern:find("^[Ww][Ss][Ss]?://") then
        local ws, err, code = M.ws_client().connect(self, pattern, handlers)
        return ws, err, code
    end
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

-- Server-level hooks: "close" f(conn), "error" f(code, message, conn),
-- "wakeup" f(conn, data) for wakeups of connections without on_wakeup.
function Server:on(event, fn)
    if event ~= "close" and event ~= "error" and event ~= "wakeup" then
        argerr(1, "on", "'close', 'error' or 'wakeup' expected")
    end
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
    local h = self._h
    if getmetatable(err) == HttpError then
        -- An answer, not a bug: its status when nothing was sent yet.
        if h == nil then return end
        if res._st == PENDING and err.status then
            local msg = err.message .. "\n"
            C.nsv_reply(h, res._c, err.status, "Content-Type: text/plain\r\n", 26, msg, #msg)
            res._st = DONE
            if res._held then unhold(res) end
            local b = res._body
            if b then body_cut(res, b) end
        elseif res._st == STREAMING then
            C.nsv_close(h, res._c)
            res._st = DONE
        end
        return
    end
    -- Once the client is gone, a failing call is the expected outcome.
    if not res._closed then log_handler_error("request", err) end
    if h == nil then return end
    if res._st == PENDING then
        local msg = "Internal Server Error"
        C.nsv_reply(h, res._c, 500, "Content-Type: text/plain\r\n", 26, msg, #msg)
        res._st = DONE
        if res._held then unhold(res) end
        local b = res._body
        if b then body_cut(res, b) end
    elseif res._st == STREAMING then
        C.nsv_close(h, res._c)
        res._st = DONE
    end
end

Server._wake = wake

-- A request handler in its task: a handler that fails, at once or after a
-- wait, answers 500 (or its HttpError) and is logged.
local function run_request(self, hnd, req, res)
    local ok, err = xpcall(hnd, traceback, req, res)
    if not ok then request_failed(self, res, err) end
end

-- Queue a piece of a streamed body (or its end, or its failure) and wake
-- the reader; pause reading while the queue is over the limit.
local function body_event(self, b)
    local co = b.waiter
    if co then
        b.waiter = nil
        wake(self, co, b)
    end
    if not b.paused and b.qbytes > b.limit and not b.eof and not b.cut and not b.err and self._h ~= nil then
        if C.nsv_pause_read(self._h, b.c, 1) == 0 then
            b.paused = true
            b.pauses = b.pauses + 1
            self.body_pauses = (self.body_pauses or 0) + 1
        end
    end
end

local function body_failed(self, key, code, msg)
    local b = self._bodies[key]
    if not b then return false end
    self._bodies[key] = nil
    b.err = http_error(nil, string.format("nanosrv: request body: %s (%s)", msg,
                                          ffi.string(C.nsv_errname(code))), code)
    body_event(self, b)
    return true
end

local function ws_invoke(ws, name, a, b)
    local ok, err = xpcall(ws._h[name], traceback, ws, a, b)
    if not ok then
        log_handler_error("websocket " .. name, err)
        local h = ws._s._h
        if name ~= "close" and h ~= nil and not ws.closed then
            C.nsv_ws_close(h, ws._c, 1011, "", 0)
            ws._close_code, ws._close_reason = ws._close_code or 1011, ws._close_reason or ""
        end
    end
end
-- The handlers of one WebSocket run in order (see serial).
local function ws_call(self, ws, name, a, b, req)
    local f = ws._h[name]
    if not f then return end
    -- The client's coroutine form (nanosrv/websocket.lua) queues what comes
    -- for its reader: its handlers neither wait nor raise.
    if ws._direct then return f(ws, a, b) end
    local tl = ws._qt
    serial(self, ws, ws_invoke, name, a, b, req)
    -- Queued behind a handler that waits (a send to a slow peer, a fetch):
    -- past a limit, stop reading until the handlers catch up, so a peer
    -- that sends faster than they work is slowed by TCP, not buffered here.
    if name == "message" and ws._qt ~= tl then
        local qb = (ws._qbytes or 0) + #a
        ws._qbytes = qb
        if not ws._qpaused and (qb > WS_QUEUE_BYTES or ws._qt - ws._qh + 1 >= WS_QUEUE_EVENTS) then
            ws._qpaused = true
            ws.queue_pauses = (ws.queue_pauses or 0) + 1
            ws_reading(ws)
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
    local f = ws._on_closed -- the client's own bookkeeping, before any handler
    if f then f(ws, code, reason) end
    ws_call(self, ws, "close", code, reason)
end

---------------------------------------------------------------------------
-- OpenResty-style timers and light threads. srv:timer_at(delay_s, fn, ...)
-- and srv:timer_every(interval_s, fn, ...) run fn(premature, ...) in its
-- own coroutine; at drain (or stop) the pending ones run at once with
-- premature = true and no new one is accepted ("process exiting"), as
-- OpenResty does at worker exit.
---------------------------------------------------------------------------

local pack = function(...) return { n = select("#", ...), ... } end

local function run_ntimer(self, nt, premature)
    local ok, err = xpcall(nt.fn, traceback, premature, unpack(nt.args, 1, nt.args.n))
    if not ok then log_handler_error("timer", err) end
    self._ntimers_running = self._ntimers_running - 1
end

fire_ntimer = function(self, id, nt, premature)
    if not nt.every or premature then
        self._ntimers[id] = nil
        self._ntimers_n = self._ntimers_n - 1
    end
    self._ntimers_running = self._ntimers_running + 1
    start_task(self, nil, run_ntimer, self, nt, premature)
end

-- NSV_OPT_DRAINING (1.3); -1 (an unknown option: nsv_get_int gives
-- NSV_EINVAL, never 1) with declarations that lack it.
local OPT_DRAINING = M.enums.nsv_option.NSV_OPT_DRAINING or -1
-- Run every pending timer with premature = true (once).
local function expire_ntimers(self)
    if self._exiting then return end
    self._exiting = true
    local ids = {}
    for id in pairs(self._ntimers) do ids[#ids + 1] = id end
    table.sort(ids) -- in the order they were made
    for _, id in ipairs(ids) do
        local nt = self._ntimers[id]
        if nt then
            if self._h ~= nil then C.nsv_timer_cancel(self._h, id) end
            fire_ntimer(self, id, nt, true)
        end
    end
end

local function add_ntimer(self, fname, delay, every, fn, ...)
    if type(fn) ~= "function" then argerr(2, fname, "function expected") end
    if self._exiting or self._h == nil then return nil, "process exiting" end
    local ms = math.floor(delay * 1000 + 0.5)
    local id = C.nsv_timer_add(self._h, ms, every and math.max(ms, 1) or 0, 0)
    if id < 0 then return nil, errmsg(tonumber(id), fname, self) end
    self._ntimers[tonumber(id)] = { fn = fn, args = pack(...), every = every }
    self._ntimers_n = self._ntimers_n + 1
    return true
end

function Server:timer_at(delay, fn, ...)
    if type(delay) ~= "number" or delay ~= delay or delay < 0 or delay > 2 ^ 30 then
        argerr(1, "timer_at", "delay in seconds >= 0 expected")
    end
    return add_ntimer(self, "timer_at", delay, false, fn, ...)
end

function Server:timer_every(interval, fn, ...)
    if type(interval) ~= "number" or interval ~= interval or interval <= 0 or interval > 2 ^ 30 then
        argerr(1, "timer_every", "interval in seconds > 0 expected")
    end
    return add_ntimer(self, "timer_every", interval, true, fn, ...)
end

-- Timers made by timer_at/timer_every waiting to fire; callbacks running.
function Server:timers_pending() return self._ntimers_n end
function Server:timers_running() return self._ntimers_running end

-- srv:spawn(fn, ...): fn(...) in a new coroutine at once (until it first
-- waits). The thread: th.status ("running", then "dead"), th:wait().
local Thread = {}
Thread.__index = Thread

local function run_thread(self, th, fn, args)
    local function tb(e)
        th._tb = debug.traceback(tostring(e), 2)
        return e
    end
    local res = pack(xpcall(fn, tb, unpack(args, 1, args.n)))
    th.status = "dead"
    if res[1] then
        th._res = res
    else
        th._err = res[2] == nil and "nil" or res[2]
        log_handler_error("thread", th._tb)
    end
    local w = th._waiters
    if w then
        th._waiters = nil
        for k = 1, #w do wake(self, w[k], th) end
    end
end

function Server:spawn(fn, ...)
    if type(fn) ~= "function" then argerr(1, "spawn", "function expected") end
    local parent = in_coroutine()
    local pctx = parent and self._ctx[parent]
    if pctx and pctx.req then own_req(pctx.req) end -- the thread may outlive the batch of its parent's request
    local th = setmetatable({ status = "running", _s = self }, Thread)
    start_task(self, nil, run_thread, self, th, fn, pack(...))
    return th
end

-- The thread's results once it ended (waiting for it in a coroutine), or
-- nil, err when it raised.
function Thread:wait()
    if self.status ~= "dead" then
        local co = in_coroutine()
        if not co then error("nanosrv: wait needs a coroutine (a handler, a timer or a thread)", 2) end
        local w = self._waiters or {}
        w[#w + 1] = co
        self._waiters = w
        repeat suspend(self._s, "wait", nil, self) until self.status == "dead"
    end
    if self._res == nil then return nil, self._err end
    return unpack(self._res, 2, self._res.n)
end

Thread.__tostring = function(th) return "nanosrv.thread(" .. th.status .. ")" end

-- Signal numbers for drain_on_signal: the cdef declares none, and these
-- six are the same on every Linux architecture the library builds for
-- (x86, ARM, RISC-V; not MIPS, SPARC or Alpha).
local SIGNALS = { SIGHUP = 1, SIGINT = 2, SIGQUIT = 3, SIGUSR1 = 10, SIGUSR2 = 12, SIGTERM = 15 }

-- signals: a name ("SIGTERM") or a list of names (default SIGINT and
-- SIGTERM). The first signal starts a drain of timeout_ms (default 5000),
-- a SIGINT during it stops the server (^C twice; a repeated SIGTERM keeps
-- draining); run() then returns normally. timeout_ms
-- < 0 removes the handlers.
function Server:drain_on_signal(signals, timeout_ms)
    if not has("nsv_drain_on_signal") then
        error("nanosrv: drain_on_signal is not available in " .. LIBPATH, 2)
    end
    if signals == nil then signals = { "SIGINT", "SIGTERM" } end
    if type(signals) == "string" or type(signals) == "number" then signals = { signals } end
    if type(signals) ~= "table" then argerr(1, "drain_on_signal", "signal name or list of names expected") end
    if timeout_ms == nil then timeout_ms = 5000 end
    if type(timeout_ms) ~= "number" then argerr(2, "drain_on_signal", "timeout in ms expected") end
    local nums = {}
    for k, name in ipairs(signals) do
        local n = type(name) == "number" and name or SIGNALS[tostring(name):upper()]
            or SIGNALS["SIG" .. tostring(name):upper()]
        if not n then
            argerr(1, "drain_on_signal", "signal #" .. k .. " '" .. tostring(name)
                   .. "' is not one of SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2")
        end
        nums[k] = n
    end
    local h = srv_handle(self)
    for k, n in ipairs(nums) do
        check(C.nsv_drain_on_signal(h, n, timeout_ms), "drain_on_signal " .. tostring(signals[k]), self)
    end
    self._sigdrain = timeout_ms >= 0
    return self
end

-- The HTTP client (nanosrv/http.lua): srv:http_request(opts, callbacks)
-- and, in a coroutine, res, err = srv:fetch(url, opts).
local http_mod
function Server:http_request(opts, callbacks)
    http_mod = http_mod or M.http()
    return http_mod.request(self, opts, callbacks)
end
function Server:fetch(url, opts)
    http_mod = http_mod or M.http()
    return http_mod.fetch(self, url, opts)
end

-- The WebSocket client's callback form (nanosrv/websocket.lua).
function Server:ws_connect(url, opts, handlers)
    local ws, err, code = M.ws_client().connect_cb(self, url, opts, handlers)
    return ws, err, code
end

-- A cosocket (nanosrv/socket.lua): OpenResty's ngx.socket.tcp.
local socket_mod
function Server:tcp()
    socket_mod = socket_mod or M.socket()
    return socket_mod.new(self)
end

-- An outbound connection whose handlers the binding calls at once (no
-- coroutine, no queue): the cosockets' own.
function Server:_connect_direct(url, handlers)
    local h = srv_handle(self)
    local id = C.nsv_connect(h, url, #url)
    if id < 0 then return nil, tonumber(id) end
    local conn = new_tcp(self, ffi.cast("uint64_t", id), handlers)
    conn._direct, conn.url = true, url
    return conn
end

-- Outbound HTTP requests (nanosrv/http.lua): their events go to
-- srv._http_ev, set by the first request; -1 with declarations that lack them.
local EV_HTTP_RESPONSE = M.enums.nsv_event_type.NSV_EV_HTTP_RESPONSE or -1
local EV_HTTP_BODY = M.enums.nsv_event_type.NSV_EV_HTTP_BODY or -1

local function dispatch(self, i)
    local ev = self._evs[i]
    local t = ev.type
    if t == EV_REQUEST then
        local route = ev.route
        local req = new_req(self, i)
        local res = setmetatable({ _c = ev.conn, _s = self, _st = PENDING, _req = req,
                                   disconnected = bit.band(ev.flags, EVF_EOF) ~= 0 }, Res)
        -- Route ids are 1..n, so the lookup stays in the array part (the JIT
        -- cannot compile a key that may fall into the hash part: -1).
        local hnd = route > 0 and self._handlers[route] or self._fallback
        if bit.band(ev.flags, EVF_STREAM_BODY) ~= 0 then
            local b = { s = self, c = ev.conn, q = {}, qh = 1, qt = 0, qbytes = 0, got = 0, limit = self._body_buffer,
                        eof = false, paused = false, pauses = 0 }
            self._bodies[conn_key(ev.conn)] = b
            req._body, res._body = b, b
            start_task(self, req, run_request, self, hnd, req, res)
        elseif self._coro or (route > 0 and self._coroute[route]) then
            start_task(self, req, run_request, self, hnd, req, res)
        else
            local ok, err = xpcall(hnd, traceback, req, res)
            if not ok then request_failed(self, res, err) end
        end
        if res._st == PENDING and not res._held then -- answered later: a HANGUP must find it
            res._held = true
            self._held[conn_key(ev.conn)] = res
        end
    elseif t == EV_TCP_DATA then
        local conn = self._tcp[conn_key(ev.conn)]
        if conn and conn.id == ev.conn then
            local n = ev.body_len
            if n > 0 then tcp_call(conn, "on_data", ffi.string(self._arena + ev.body_off, n)) end
            if bit.band(ev.flags, EVF_EOF) ~= 0 and not conn.eof then
                conn.eof = true
                -- Without on_eof, end our side too once the output is sent.
                if not conn.closed and not tcp_call(conn, "on_eof") then
                    serial(self, conn, tcp_eof_default)
                end
            end
        end
    elseif t == EV_TCP_OPEN then
        local handlers = self._tcpl[ev.listener]
        if handlers then
            local conn = new_tcp(self, ev.conn, handlers)
            conn.peer = ffi.string(self._arena + ev.peer_off, ev.peer_len)
            conn.port = ev.peer_port
            conn.listener = ev.listener
            conn.tls = bit.band(ev.flags, EVF_TLS) ~= 0
            conn.proxied = bit.band(ev.flags, EVF_PROXY) ~= 0
            tcp_call(conn, "on_open")
        elseif self._h ~= nil then
            C.nsv_abort(self._h, ev.conn) -- a listener this state did not open
        end
    elseif t == EV_TCP_CONNECTED then
        local conn = self._tcp[conn_key(ev.conn)]
        if conn and conn.id == ev.conn then
            conn.connected = true
            local tls = bit.band(ev.flags, EVF_TLS) ~= 0 -- a second CONNECTED: the TLS upgrade is done
            if tls then conn.tls = true end
            tcp_call(conn, "on_connect", tls)
        end
    elseif t == EV_TIMER then
        local id = tonumber(ev.conn)
        local co = self._sleep_co[id]
        if co then -- a wait with a timeout (srv:sleep, cosockets)
            local token = self._sleep_tok[id]
            self._sleep_co[id], self._sleep_tok[id] = nil, nil
            if type(token) == "number" and token < 0 then wake(self, co, token) else wake(self, co, token, TIMEDOUT) end
        elseif self._ntimers[id] then
            fire_ntimer(self, id, self._ntimers[id], false)
        else
            local tm = self._ctimers[id]
            if tm then
                if not tm.repeating then
                    tm.active = false
                    self._ctimers[tm.id] = nil
                end
                hook_call(self, tm._fn, "timer", tm)
            end
        end
    elseif t == EV_WAKEUP then
        local data = ffi.string(self._arena + ev.body_off, ev.body_len)
        local conn = self._tcp[conn_key(ev.conn)]
        if not (conn and conn.id == ev.conn and tcp_call(conn, "on_wakeup", data)) then
            local f = self._on.wakeup
            if f then hook_call(self, f, "wakeup", ev.conn, data) end
        end
    elseif t == EV_BODY then
        local key = conn_key(ev.conn)
        local b = self._bodies[key]
        if b and b.c == ev.conn then
            local n = ev.body_len
            if n > 0 then
                local tl = b.qt + 1
                b.q[tl] = ffi.string(self._arena + ev.body_off, n)
                b.qt = tl
                b.qbytes = b.qbytes + n
                b.got = b.got + n
            end
            if bit.band(ev.flags, EVF_EOF) ~= 0 then
                b.eof = true
                self._bodies[key] = nil
            end
            body_event(self, b)
        end
    elseif t == EV_WS_MESSAGE then
        local ws = self._ws[conn_key(ev.conn)]
        if ws and ws._c == ev.conn then
            ws_call(self, ws, "message", ffi.string(self._arena + ev.body_off, ev.body_len), ev.code)
        end
    elseif t == EV_WS_OPEN then
        local handlers = self._wsroutes[ev.route]
        local wsc = self._wsc_ev and self._ws[conn_key(ev.conn)]
        if wsc and wsc._client and wsc._c == ev.conn then
            self._wsc_ev(self, i, wsc) -- an outbound WebSocket is open
        elseif handlers then
            local ws = setmetatable({ _c = ev.conn, _s = self, _h = handlers, route = ev.route,
                                      closed = false, data = {} }, WS)
            self._ws[conn_key(ev.conn)] = ws
            local req = new_req(self, i)
            ws_call(self, ws, "open", req, nil, req)
        end
    elseif t == EV_WS_CLOSE then
        ws_closed(self, conn_key(ev.conn), ev.code, ffi.string(self._arena + ev.body_off, ev.body_len))
    elseif t == EV_WRITABLE then
        local key = conn_key(ev.conn)
        local conn = self._tcp[key]
        if conn and conn.id == ev.conn then
            conn.writable = ev.code ~= 0
            tcp_call(conn, "on_writable", conn.writable)
        else
            local res = self._streams[key]
            if res and res._c == ev.conn then
                res_writable(res, ev.code ~= 0)
            elseif self._http_ev then
                self._http_ev(self, i) -- room for a streamed request body
            end
        end
    elseif t == EV_HANGUP then
        -- The client ended its side while its request is with us.
        local key = conn_key(ev.conn)
        local res = self._held[key] or self._streams[key]
        if res and res._c == ev.conn then res_disconnected(res) end
    elseif t == EV_CLOSE then
        -- Gone without a WS_CLOSE event: 1006 (no close frame, RFC 6455).
        local key = conn_key(ev.conn)
        local conn = self._tcp[key]
        if conn and conn.id == ev.conn then
            self._tcp[key] = nil
            conn.closed = true
            tcp_call(conn, "on_close")
        end
        ws_closed(self, key, 1006, "")
        local b = self._bodies[key]
        if b and b.c == ev.conn then body_failed(self, key, ECLOSED, "the connection closed") end
        local res = self._streams[key]
        if res and res._c == ev.conn then
            self._streams[key] = nil
            res._closed, res.closed = true, true
            res_writable(res, true)
            res_disconnected(res)
        end
        res = self._held[key]
        if res and res._c == ev.conn then
            self._held[key] = nil
            res._held = nil
            res._closed, res.closed = true, true
            res_disconnected(res)
        end
        local f = self._on.close
        if f then hook_call(self, f, "close", ev.conn) end
    elseif t == EV_ERROR and self._http_ev and self._http_ev(self, i) then
        -- an outbound request's failure: its callbacks have it
    elseif t == EV_ERROR and self._wsc_ev and self._wsc_ev(self, i) then
        -- an outbound WebSocket's failure: its handlers have it
    elseif t == EV_ERROR then
        local msg = ffi.string(self._arena + ev.body_off, ev.body_len)
        local f = self._on.error
        -- A failing streamed body (too big, too slow, malformed, client
        -- gone) is reported to its reader, which raises it in the handler.
        local key = conn_key(ev.conn)
        local b = self._bodies[key]
        local taken = b and b.c == ev.conn and body_failed(self, key, ev.code, msg)
        local conn = self._tcp[key]
        if conn and conn.id == ev.conn then
            conn.error = msg
            taken = tcp_call(conn, "on_error", msg, ev.code) or taken
        end
        if f then
            hook_call(self, f, "error", ev.code, msg, ev.conn)
        elseif not taken then
            io.stderr:write("nanosrv: ", ffi.string(C.nsv_errname(ev.code)), ": ", msg, "\n")
        end
    elseif (t == EV_HTTP_BODY or t == EV_HTTP_RESPONSE) and self._http_ev then
        self._http_ev(self, i)
    end
end

-- One batch: wait up to timeout_ms (default 0, -1 = forever), dispatch every
-- event. Returns the number of events, or nil once the server has stopped.
function Server:poll(timeout_ms)
    if self._polling then error("nanosrv: poll/run called from inside a handler", 2) end
    if timeout_ms ~= nil and type(timeout_ms) ~= "number" then argerr(1, "poll", "timeout in ms expected") end
    local h = srv_handle(self)
    timeout_ms = timeout_ms or 0
    local n = C.nsv_poll(h, self._evs, self._maxev, self._arena, self._cap, timeout_ms)
    -- A drain started by a signal (drain_on_signal) wakes the poll; pending
    -- timers then run with premature = true at its start, as OpenResty runs
    -- them when a worker begins to exit.
    if self._sigdrain and not self._exiting and C.nsv_get_int(h, OPT_DRAINING) == 1 then
        self._polling = true
        expire_ntimers(self)
        self._polling = false
    end
    while n == ENOBUFS do
        -- The next event is larger than the arena: grow it and take the batch.
        local need = tonumber(C.nsv_poll_need(h))
        self._cap = math.max(need + 4096, self._cap * 2)
        self._arena = ffi.new("char[?]", self._cap)
        n = C.nsv_poll(h, self._evs, self._maxev, self._arena, self._cap, 0)
        self._detail = ffi.string(C.nsv_last_error_detail(h)) -- handled here
    end
    if n < 0 then
        if n == ESTOPPED then
            -- Timers still pending when the server stopped (a drain on a
            -- signal ends here) run now, premature.
            if not self._exiting then
                self._polling = true
                expire_ntimers(self)
                if self._alog then M.ops().drain(self) end -- the last answers' records
                self._polling = false
            end
            return nil
        end
        check(n, "poll", self)
    end
    self._gen = self._gen + 1
    self._polling = true
    for i = 0, n - 1 do dispatch(self, i) end
    if self._alog then M.ops().drain(self) end
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
    self._draining = true
    expire_ntimers(self)
    if not self._polling then self:run() end
end

-- Wake a blocked poll (e.g. from a coroutine scheduler). With a
-- connection (object or id): deliver a WAKEUP event for it carrying data
-- (at most 64 KiB) to its on_wakeup handler, or to srv:on("wakeup", ...).
-- Returns true, or false when the connection is not open.
function Server:wakeup(conn, data)
    if conn == nil then
        if self._h ~= nil then C.nsv_wakeup(self._h) end
        return true
    end
    local id = type(conn) == "table" and (conn.id or conn._c) or conn
    if type(id) ~= "cdata" and type(id) ~= "number" then argerr(1, "wakeup", "connection expected") end
    data = body_arg(data, 2, "wakeup")
    local r = C.nsv_wakeup_conn(srv_handle(self), id, data, #data)
    if r == ESTALE then return false end
    check(r, "wakeup_conn", self)
    return true
end

-- Host timers (nsv_timer_add): fn(timer) runs from the poll loop after ms
-- milliseconds (srv:timer), or every ms milliseconds (srv:every) until
-- timer:cancel(). The returned object has id and cancel().
local Timer = {}
Timer.__index = Timer
local function add_timer(self, fname, ms, fn, repeat_ms)
    if type(ms) ~= "number" or ms < 0 then argerr(1, fname, "milliseconds >= 0 expected") end
    if type(fn) ~= "function" then argerr(2, fname, "function expected") end
    local h = srv_handle(self)
    local id = C.nsv_timer_add(h, ms, repeat_ms, 0)
    if id < 0 then check(tonumber(id), fname, self) end
    local t = setmetatable({ id = tonumber(id), _s = self, _fn = fn, repeating = repeat_ms > 0, active = true }, Timer)
    self._ctimers[t.id] = t
    return t
end
function Server:timer(ms, fn) return add_timer(self, "timer", ms, fn, 0) end
function Server:every(ms, fn)
    if type(ms) == "number" and ms <= 0 then argerr(1, "every", "milliseconds > 0 expected") end
    return add_timer(self, "every", ms, fn, ms)
end
-- Returns true, or false when the timer had already fired (one-shot) or
-- was cancelled.
function Timer:cancel()
    if not self.active then return false end
    self.active = false
    local s = self._s
    s._ctimers[self.id] = nil
    if s._h == nil then return false end
    return C.nsv_timer_cancel(s._h, self.id) == 0
end

-- File descriptor readable when poll() has work (for external loops).
function Server:fd() local h = srv_handle(self); return check(C.nsv_fd(h), "fd", self) end

function Server:workers() return self:get("workers") end

-- Operations (nanosrv/ops.lua): metrics, the access log, readiness.

-- Every metric by name in one read: counters and gauges as numbers, the
-- latency histograms as {buckets = {{le_seconds, count}, ...}, sum_seconds,
-- count}. worker: one worker's share (sharded servers; 0 for a single loop).
function Server:metrics(worker) return M.ops().metrics(self, worker) end
-- The Prometheus text (prefix default "nanosrv_"; per_worker: worker="N" labels).
function Server:metrics_text(prefix, per_worker) return M.ops().metrics_text(self, prefix, per_worker) end
-- A handler for srv:route("GET", "/metrics", ...).
function Server:metrics_handler(prefix, per_worker)
    local hdr = "Content-Type: " .. M.ops().PROMETHEUS_TYPE .. "\r\n"
    return function(_, res) res:send(200, self:metrics_text(prefix, per_worker), hdr) end
end
-- true once a drain started (NSV_OPT_DRAINING): readiness checks fail
-- while the connections in flight finish.
function Server:draining() return C.nsv_get_int(srv_handle(self), OPT_DRAINING) == 1 end
-- A readiness handler: 200 "ready", 503 "draining" once a drain started.
function Server:readyz_handler()
    return function(_, res)
        if self:draining() then
            res:send(503, "draining\n", "Content-Type: text/plain\r\nConnection: close\r\n")
        else
            res:send(200, "ready\n", "Content-Type: text/plain\r\n")
        end
    end
end
-- Access log: "common", "combined", "json" (lines to sink: a file, default
-- io.stdout, or a function(line)), a function(record), or false (off).
function Server:access_log(what, sink, queue)
    M.ops().set_access_log(self, what, sink, queue)
    return self
end
-- The waiting access records as tables (for a host that drains them itself).
function Server:access_records() return M.ops().take(self) end

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

M.Server, M.Request, M.Response, M.WebSocket, M.EventStream = Server, Req, Res, WS, SSE

-- Shared by the outbound clients (nanosrv/http.lua, nanosrv/websocket.lua).
-- A header block from a "Name: value\r\n" string (as given) or a table:
-- values as strings (numbers), arrays of them for a repeated name, or a
-- list of {name, value} pairs to keep an order; raise(n, fname, msg)
-- reports a bad one.
local function header_block(h, n, fname, raise)
    if h == nil then return "" end
    local t = type(h)
    if t == "string" then return h end
    if t ~= "table" then raise(n, fname, "headers must be a string or a table") end
    local out = {}
    for k, v in pairs(h) do
        if type(k) == "number" then -- {name, value} pair of a list
            if type(v) ~= "table" then raise(n, fname, "headers[" .. k .. "] must be a {name, value} pair") end
            out[#out + 1] = header_line(v[1], v[2], n, fname, raise)
        elseif type(v) == "table" then
            for _, x in ipairs(v) do out[#out + 1] = header_line(k, x, n, fname, raise) end
        else
            out[#out + 1] = header_line(k, v, n, fname, raise)
        end
    end
    return table.concat(out)
end

-- "connection refused (NSV_ECONNREFUSED): <the library's detail>"
local function describe(code, detail)
    local msg = ffi.string(C.nsv_strerror(code)) .. " (" .. ffi.string(C.nsv_errname(code)) .. ")"
    if detail and detail ~= "" then msg = msg .. ": " .. detail end
    return msg
end

-- The detail of the failure a client call on srv just returned; the
-- server's copy is updated so that its next message does not repeat it.
local function last_detail(srv)
    local d = ffi.string(C.nsv_last_error_detail(srv._h))
    srv._detail = d
    return d
end

-- For the modules next to this one (nanosrv/*.lua).
M._internal = { C = C, http_error = http_error, errmsg_nosrv = errmsg_nosrv, errmsg = errmsg,
                suspend = suspend, wake = wake, TIMEDOUT = TIMEDOUT, in_coroutine = in_coroutine,
                conn_key = conn_key, has = has, running = running_task, header_line = header_line,
                ws_call = ws_call, ws_reading = ws_reading, body_arg = body_arg, check = check,
                srv_handle = srv_handle, header_block = header_block, describe = describe,
                last_detail = last_detail }

-- The modules of nanosrv/ (multipart/form-data, cosockets), loaded on
-- first use from next to this file (where the rockspec installs them),
-- else through require.
local function sibling(name)
    local path = DIR .. "/nanosrv/" .. name .. ".lua"
    local f = io.open(path, "rb")
    local mod
    if f then
        f:close()
        mod = assert(loadfile(path))(M)
        package.loaded["nanosrv." .. name] = mod
    else
        mod = require("nanosrv." .. name)
    end
    return mod
end
local mp_loaded, sock_loaded
function M.multipart()
    mp_loaded = mp_loaded or sibling("multipart")
    return mp_loaded
end
function M.socket()
    sock_loaded = sock_loaded or sibling("socket")
    return sock_loaded
end
local http_loaded
function M.http()
    http_loaded = http_loaded or sibling("http")
    return http_loaded
end
local ops_loaded
function M.ops()
    ops_loaded = ops_loaded or sibling("ops")
    return ops_loaded
end
-- Module-level operations helpers.
function M.inherited_fds(unset_env) return M.ops().inherited_fds(unset_env) end
function M.metric_names() return M.ops().metric_names() end
function M.access_format(record, format)
    local f = M.ops().FORMATS[format or "combined"]
    if not f then error("bad argument #2 to 'access_format' (\"common\", \"combined\" or \"json\" expected)", 2) end
    return f(record)
end
local ws_loaded
function M.ws_client()
    ws_loaded = ws_loaded or sibling("websocket")
    return ws_loaded
end

return M
