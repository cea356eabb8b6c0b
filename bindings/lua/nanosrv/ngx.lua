-- nanosrv/ngx.lua - OpenResty's ngx.* API for content handlers on nanosrv.
--
--   local ngxmod = require("nanosrv.ngx")
--   local ngx = ngxmod.new(srv)              -- also sets _G.ngx
--   ngxmod.serve(srv, function() ngx.say("hello") end)
--
-- One ngx table serves every request: its functions find the request of
-- the running coroutine (handlers run in coroutines, which may be pooled
-- and run several requests one after another, so the binding is made when
-- a handler starts and dropped when it ends). Output is buffered until the
-- handler ends, so a handler that never flushes answers in one reply with
-- a Content-Length; ngx.flush() turns it into a chunked stream.

local ffi = require("ffi")
local nanosrv = require("nanosrv")
local digest = require("nanosrv.digest")
local shdict = require("nanosrv.shdict")

local M = { _VERSION = "0.1.0" }

local concat, tostring, type, select, pairs, ipairs = table.concat, tostring, type, select, pairs, ipairs
local running, floor, fmt = coroutine.running, math.floor, string.format
local new_tab = (pcall(require, "table.new")) and require("table.new") or function() return {} end

pcall(ffi.cdef, "int getpid(void);")
pcall(ffi.cdef, "struct timeval { long tv_sec; long tv_usec; };")
pcall(ffi.cdef, "int gettimeofday(struct timeval *tv, void *tz);")
local tv = ffi.new("struct timeval")
local PID = ffi.C.getpid()

-- The request (state table) of each running handler coroutine.
local states = setmetatable({}, { __mode = "k" })
M._states = states

-- The task coroutine the core resumed (nanosrv.lua keeps it as it resumes
-- and suspends them): looking the request up by it costs a table read,
-- where coroutine.running() is a call the JIT does not compile. Inside a
-- coroutine a handler made itself, that is the handler's request, as in
-- OpenResty; anywhere else it is coroutine.running()'s, as before.
local RUN = nanosrv._internal.running or {}
local function current()
    return states[RUN.co or 0] or states[running() or 0]
end

---------------------------------------------------------------------------
-- Constants
---------------------------------------------------------------------------

local NULL = ffi.cast("void *", 0) -- same value as cjson.null (a NULL lightuserdata)
do
    local ok, cjson = pcall(require, "cjson")
    if ok and cjson.null then NULL = cjson.null end
end
M.null = NULL

local LEVELS = { [0] = "stderr", "emerg", "alert", "crit", "error", "warn", "notice", "info", "debug" }
local LEVEL_BY_NAME = {}
for i = 0, 8 do LEVEL_BY_NAME[LEVELS[i]] = i end
LEVEL_BY_NAME.err = 4

local CONSTANTS = {
    OK = 0, ERROR = -1, AGAIN = -2, DONE = -4, DECLINED = -5,
    STDERR = 0, EMERG = 1, ALERT = 2, CRIT = 3, ERR = 4, WARN = 5, NOTICE = 6, INFO = 7, DEBUG = 8,
    -- method constants are nginx's bit flags (NGX_HTTP_GET ...)
    HTTP_GET = 2, HTTP_HEAD = 4, HTTP_POST = 8, HTTP_PUT = 16, HTTP_DELETE = 32, HTTP_MKCOL = 64,
    HTTP_COPY = 128, HTTP_MOVE = 256, HTTP_OPTIONS = 512, HTTP_PROPFIND = 1024, HTTP_PROPPATCH = 2048,
    HTTP_LOCK = 4096, HTTP_UNLOCK = 8192, HTTP_PATCH = 16384, HTTP_TRACE = 32768,
    HTTP_CONTINUE = 100, HTTP_SWITCHING_PROTOCOLS = 101, HTTP_OK = 200, HTTP_CREATED = 201,
    HTTP_ACCEPTED = 202, HTTP_NO_CONTENT = 204, HTTP_PARTIAL_CONTENT = 206, HTTP_SPECIAL_RESPONSE = 300,
    HTTP_MOVED_PERMANENTLY = 301, HTTP_MOVED_TEMPORARILY = 302, HTTP_SEE_OTHER = 303,
    HTTP_NOT_MODIFIED = 304, HTTP_TEMPORARY_REDIRECT = 307, HTTP_PERMANENT_REDIRECT = 308,
    HTTP_BAD_REQUEST = 400, HTTP_UNAUTHORIZED = 401, HTTP_PAYMENT_REQUIRED = 402, HTTP_FORBIDDEN = 403,
    HTTP_NOT_FOUND = 404, HTTP_NOT_ALLOWED = 405, HTTP_NOT_ACCEPTABLE = 406, HTTP_REQUEST_TIMEOUT = 408,
    HTTP_CONFLICT = 409, HTTP_GONE = 410, HTTP_UPGRADE_REQUIRED = 426, HTTP_TOO_MANY_REQUESTS = 429,
    HTTP_CLOSE = 444, HTTP_ILLEGAL = 451, HTTP_INTERNAL_SERVER_ERROR = 500, HTTP_METHOD_NOT_IMPLEMENTED = 501,
    HTTP_BAD_GATEWAY = 502, HTTP_SERVICE_UNAVAILABLE = 503, HTTP_GATEWAY_TIMEOUT = 504,
    HTTP_VERSION_NOT_SUPPORTED = 505, HTTP_INSUFFICIENT_STORAGE = 507,
}
M.constants = CONSTANTS

-- nginx's special response pages (ngx_http_special_response.c): title per
-- status; 494..497 are nginx's own codes for a 400, 498 for a 404.
local TITLES = {
    [301] = "301 Moved Permanently", [302] = "302 Found", [303] = "303 See Other",
    [307] = "307 Temporary Redirect", [308] = "308 Permanent Redirect",
    [400] = "400 Bad Request", [401] = "401 Authorization Required", [402] = "402 Payment Required",
    [403] = "403 Forbidden", [404] = "404 Not Found", [405] = "405 Not Allowed", [406] = "406 Not Acceptable",
    [409] = "409 Conflict", [410] = "410 Gone", [411] = "411 Length Required", [412] = "412 Precondition Failed",
    [413] = "413 Request Entity Too Large", [414] = "414 Request-URI Too Large",
    [415] = "415 Unsupported Media Type", [416] = "416 Requested Range Not Satisfiable",
    [421] = "421 Misdirected Request", [429] = "429 Too Many Requests",
    [494] = "400 Request Header Or Cookie Too Large", [495] = "400 The SSL certificate error",
    [496] = "400 No required SSL certificate was sent",
    [497] = "400 The plain HTTP request was sent to HTTPS port", [498] = "404 Not Found",
    [500] = "500 Internal Server Error", [501] = "501 Not Implemented", [502] = "502 Bad Gateway",
    [503] = "503 Service Temporarily Unavailable", [504] = "504 Gateway Time-out",
    [505] = "505 HTTP Version Not Supported", [507] = "507 Insufficient Storage",
}
-- nginx answers these with "Connection: close" (keepalive is off after them).
local CLOSES = { [400] = true, [413] = true, [414] = true, [495] = true, [496] = true, [497] = true,
                 [500] = true, [501] = true }
local FOOTER = "<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
local PAGES = {}
for status, title in pairs(TITLES) do
    local h1 = title
    if status >= 494 and status <= 497 then -- "400 Bad Request" and the reason below it
        h1 = "400 Bad Request</h1></center>\r\n<center>" .. title:sub(5)
    end
    PAGES[status] = "<html>\r\n<head><title>" .. title .. "</title></head>\r\n<body>\r\n<center><h1>" ..
                    h1 .. (h1 == title and "</h1></center>\r\n" or "</center>\r\n") .. FOOTER
end
M.error_page = function(status) return PAGES[status] end

-- Sentinel raised by ngx.exit (and ngx.redirect) to end the handler.
local EXIT = setmetatable({}, { __tostring = function() return "ngx.exit" end })

---------------------------------------------------------------------------
-- Strings (module functions, also on every ngx table)
---------------------------------------------------------------------------

local S = {}

local function hex(c) return fmt("%%%02X", c:byte()) end
-- ngx_escape_uri's tables: type 2 (URI component, default) keeps only
-- alphanumerics and -._~!'()*; type 0 (URI) escapes controls, space, #, %,
-- ? and bytes >= 0x7F.
local ESC2 = "[^%w%-%._~!'%(%)%*]"
local ESC0 = "[%z\1-\32#%%%?\127-\255]"
function S.escape_uri(s, kind)
    if type(s) == "number" then s = tostring(s) end
    if s == nil then return "" end
    if type(s) ~= "string" then error("bad argument #1 to 'escape_uri' (string expected, got " .. type(s) .. ")", 2) end
    if kind == nil or kind == 2 then return (s:gsub(ESC2, hex)) end
    if kind == 0 then return (s:gsub(ESC0, hex)) end
    error("bad argument #2 to 'escape_uri' (type must be 0 or 2)", 2)
end

local function unhex(h) return string.char(tonumber(h, 16)) end
function S.unescape_uri(s)
    if type(s) == "number" then s = tostring(s) end
    if s == nil then return "" end
    if type(s) ~= "string" then error("bad argument #1 to 'unescape_uri' (string expected, got " .. type(s) .. ")", 2) end
    if not s:find("[%%+]") then return s end
    return (s:gsub("+", " "):gsub("%%(%x%x)", unhex))
end
local unescape = S.unescape_uri

function S.encode_args(t)
    if type(t) ~= "table" then error("bad argument #1 to 'encode_args' (table expected, got " .. type(t) .. ")", 2) end
    local out = {}
    local esc = S.escape_uri
    for k, v in pairs(t) do
        if type(k) ~= "string" then error("bad argument #1 to 'encode_args' (keys must be strings)", 2) end
        local ek = esc(k)
        local tv = type(v)
        if tv == "table" then
            for _, x in ipairs(v) do
                if x == true then out[#out + 1] = ek
                elseif x ~= false then out[#out + 1] = ek .. "=" .. esc(tostring(x)) end
            end
        elseif v == true then out[#out + 1] = ek
        elseif v ~= false then out[#out + 1] = ek .. "=" .. esc(tostring(v)) end
    end
    return concat(out, "&")
end

-- ngx_http_lua_parse_args: "a=1&b&c=" -> {a = "1", b = true, c = ""};
-- a repeated name gives the array of its values; "=x" is skipped. max
-- (default 100, 0 = unlimited) caps the pairs: the second result is then
-- "truncated".
local function parse_args(s, max)
    local t = {}
    if s == nil or s == "" then return t end
    max = max or 100
    local n, pos, len = 0, 1, #s
    while pos <= len do
        local amp = s:find("&", pos, true) or len + 1
        if amp > pos then
            if max > 0 and n >= max then return t, "truncated" end
            local eq = s:find("=", pos, true)
            local k, v
            if eq and eq < amp then
                if eq > pos then k, v = unescape(s:sub(pos, eq - 1)), unescape(s:sub(eq + 1, amp - 1)) end
            else
                k, v = unescape(s:sub(pos, amp - 1)), true
            end
            if k then
                n = n + 1
                local old = t[k]
                if old == nil then t[k] = v
                elseif type(old) == "table" then old[#old + 1] = v
                else t[k] = { old, v } end
            end
        end
        pos = amp + 1
    end
    return t
end
S.decode_args = function(s, max)
    if type(s) ~= "string" then error("bad argument #1 to 'decode_args' (string expected)", 2) end
    return parse_args(s, max)
end

function S.encode_base64(s, no_padding)
    if type(s) == "number" then s = tostring(s) end
    if s == nil then s = "" end
    if type(s) ~= "string" then error("bad argument #1 to 'encode_base64' (string expected)", 2) end
    local e = nanosrv.base64_encode(s)
    if no_padding then e = e:gsub("=+$", "") end
    return e
end

-- ngx_decode_base64: the text up to the first '=' must be alphabet only
-- and not 1 mod 4 long; padding is optional, leftover bits are ignored;
-- invalid input gives nil. (The library's decoder is strict about the
-- leftover bits, so only whole groups go through it.)
local B64 = {}
do
    local a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    for i = 1, 64 do B64[a:byte(i)] = i - 1 end
end
function S.decode_base64(s)
    if type(s) ~= "string" then error("bad argument #1 to 'decode_base64' (string expected)", 2) end
    local body = s:match("^[^=]*")
    if body:find("[^%w+/]") or #body % 4 == 1 then return nil end
    local whole = #body - #body % 4
    local out = whole > 0 and nanosrv.base64_decode(body:sub(1, whole)) or ""
    if whole == #body then return out end
    local c1, c2, c3 = body:byte(whole + 1, whole + 3)
    local v = B64[c1] * 262144 + B64[c2] * 4096 + (c3 and B64[c3] * 64 or 0)
    local tail = string.char(floor(v / 65536))
    if c3 then tail = tail .. string.char(floor(v / 256) % 256) end
    return out .. tail
end

local SQL_ESC = { ["\0"] = "\\0", ["\b"] = "\\b", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
                  ["\26"] = "\\Z", ["\\"] = "\\\\", ["'"] = "\\'", ['"'] = '\\"' }
function S.quote_sql_str(s)
    if type(s) ~= "string" then error("bad argument #1 to 'quote_sql_str' (string expected)", 2) end
    return "'" .. s:gsub("[%z\b\n\r\t\26\\'\"]", SQL_ESC) .. "'"
end

S.crc32_short, S.crc32_long = digest.crc32, digest.crc32
S.md5, S.md5_bin, S.sha1_bin, S.hmac_sha1 = digest.md5, digest.md5_bin, digest.sha1_bin, digest.hmac_sha1

---------------------------------------------------------------------------
-- Time: ngx.now() is cached per poll batch, as nginx caches it per event
-- loop iteration; ngx.update_time() refreshes it.
---------------------------------------------------------------------------

local function wall()
    ffi.C.gettimeofday(tv, nil)
    return tonumber(tv.tv_sec) + floor(tonumber(tv.tv_usec) / 1000) / 1000
end

local WDAY = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" }
local MON = { "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" }
local MON_NUM = {}
for i, m in ipairs(MON) do MON_NUM[m:lower()] = i end

function S.http_time(t)
    if type(t) ~= "number" then error("bad argument #1 to 'http_time' (number expected)", 2) end
    return os.date("!%a, %d %b %Y %H:%M:%S GMT", floor(t))
end

-- Two-digit years up to 2037 (Netscape cookies), as ngx_http_cookie_time.
function S.cookie_time(t)
    if type(t) ~= "number" then error("bad argument #1 to 'cookie_time' (number expected)", 2) end
    local d = os.date("!*t", floor(t))
    local y = d.year > 2037 and tostring(d.year) or fmt("%02d", d.year % 100)
    return fmt("%s, %02d-%s-%s %02d:%02d:%02d GMT", WDAY[d.wday], d.day, MON[d.month], y, d.hour, d.min, d.sec)
end

local function days_from_civil(y, m, d)
    if m <= 2 then y = y - 1 end
    local era = floor(y / 400)
    local yoe = y - era * 400
    local mp = (m + 9) % 12
    local doy = floor((153 * mp + 2) / 5) + d - 1
    local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
    return era * 146097 + doe - 719468
end

-- RFC 1123, RFC 850 and asctime dates; nil when s is none of them.
function S.parse_http_time(s)
    if type(s) ~= "string" then error("bad argument #1 to 'parse_http_time' (string expected)", 2) end
    local d, mon, y, hh, mm, ss = s:match("^%a+, (%d%d) (%a%a%a) (%d%d%d%d) (%d%d):(%d%d):(%d%d) GMT$")
    if not d then
        d, mon, y, hh, mm, ss = s:match("^%a+, (%d%d)%-(%a%a%a)%-(%d%d) (%d%d):(%d%d):(%d%d) GMT$")
        if y then y = tonumber(y); y = y < 70 and 2000 + y or 1900 + y end
    end
    if not d then
        mon, d, hh, mm, ss, y = s:match("^%a+ (%a%a%a) +(%d%d?) (%d%d):(%d%d):(%d%d) (%d%d%d%d)$")
    end
    if not d then return nil end
    local m = MON_NUM[mon:lower()]
    d, y, hh, mm, ss = tonumber(d), tonumber(y), tonumber(hh), tonumber(mm), tonumber(ss)
    if not m or d < 1 or d > 31 or hh > 23 or mm > 59 or ss > 59 then return nil end
    return days_from_civil(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss
end

---------------------------------------------------------------------------
-- Request URI: nginx's $uri is the path percent-decoded, with "." and ".."
-- segments resolved and runs of slashes merged; ".." above the root is a
-- 400 (nil here).
---------------------------------------------------------------------------

local function normalize_uri(p)
    if not p:find("%", 1, true) and not p:find("//", 1, true) and not p:find("/.", 1, true) then return p end
    if p:sub(1, 1) ~= "/" then return p end
    local d = p:gsub("%%(%x%x)", unhex)
    if d:find("%z") then return nil end
    local segs, n, trail = {}, 0, false
    for seg in (d:sub(2) .. "/"):gmatch("([^/]*)/") do
        if seg == "" or seg == "." then
            trail = true
        elseif seg == ".." then
            if n == 0 then return nil end
            segs[n] = nil
            n = n - 1
            trail = true
        else
            n = n + 1
            segs[n] = seg
            trail = false
        end
    end
    -- The loop sees one "" past the last segment: only a real trailing
    -- "/", "." or ".." leaves trail set then.
    local last = d:match("[^/]*$")
    trail = last == "" or last == "." or last == ".."
    if n == 0 then return "/" end
    return "/" .. concat(segs, "/", 1, n) .. (trail and "/" or "")
end
M.normalize_uri = normalize_uri

---------------------------------------------------------------------------
-- Header names and values given to ngx.header: checked when set, so a CR
-- or LF never reaches the wire (OpenResty escapes them; we refuse them).
---------------------------------------------------------------------------

-- Names already checked: as given -> as sent, and -> lower case (the few
-- names an application uses; bounded so that names made from input do
-- not grow it without end).
local NAMES, LOWER, cached = {}, {}, 0

local function show_byte(c) return fmt("\\%d", c:byte()) end

-- lvl: the stack level of the caller to blame. No closure in here: one
-- would keep the JIT from compiling the function (every ngx.header set).
local function header_name(k, what, lvl)
    local name = NAMES[k]
    if name then return name, LOWER[k] end
    if type(k) ~= "string" then error(what .. ": header name must be a string, got " .. type(k), lvl) end
    name = k:gsub("_", "-")
    if name == "" or name:find("[^%w!#$%%&'*+%-.^`|~]") then
        local shown = name:gsub("[%c\127\\]", show_byte)
        error(what .. ": header name '" .. shown .. "' is not an HTTP token", lvl)
    end
    local lk = name:lower()
    if cached < 1000 then
        cached = cached + 1
        NAMES[k], LOWER[k] = name, lk
    end
    return name, lk
end

-- Values already checked (a handler sends the same few Content-Types and
-- such again and again; the pattern scan costs more than the lookup).
local VALUES, nvalues = {}, 0

local function header_value(name, v, what, lvl)
    if VALUES[v] then return v end
    local tv = type(v)
    if tv == "number" or tv == "boolean" then v = tostring(v)
    elseif tv ~= "string" then error(what .. ": header '" .. name .. "' value must be a string, got " .. tv, lvl) end
    if v:find("[%z\1-\8\10-\31\127]") then
        error(what .. ": header '" .. name .. "' value contains CR, LF, NUL or another control character", lvl)
    end
    if nvalues < 1000 and #v <= 256 then
        nvalues = nvalues + 1
        VALUES[v] = true
    end
    return v
end

---------------------------------------------------------------------------
-- The ngx table
---------------------------------------------------------------------------

local current_ngx -- the table ngxmod.new made last (used by ngxmod.handler)
local log_level = 4 -- error, nginx's default error_log level
local log_out = io.stderr

function M.set_log_level(level)
    local v = type(level) == "string" and LEVEL_BY_NAME[level:lower()] or level
    if type(v) ~= "number" or v < 0 or v > 8 then
        error("bad argument #1 to 'set_log_level' (stderr, emerg, alert, crit, error, warn, notice, info or debug expected)", 2)
    end
    log_level = v
end
function M.set_log_output(f) log_out = f end

-- opts: default_type ("text/plain"), max_body (read_body limit),
-- buffer (bytes buffered before output turns into a stream, 1 MiB),
-- global (false: do not set _G.ngx).
function M.new(srv, opts)
    opts = opts or {}
    local default_type = opts.default_type
    if default_type == nil then default_type = "text/plain" end
    local buffer_limit = opts.buffer or 1048576
    local max_body = opts.max_body
    local ngx = {}
    for k, v in pairs(CONSTANTS) do ngx[k] = v end
    for k, v in pairs(S) do ngx[k] = v end
    ngx.null = NULL
    ngx.config = { subsystem = "http", ngx_lua_version = 10023, nginx_version = 1022001, debug = false,
                   prefix = function() return "" end, nginx_configure = function() return "" end }
    ngx.is_subrequest = false

    local function cur(fname)
        local r = states[RUN.co or 0] or states[running() or 0]
        if not r then error("API disabled in the current context (" .. fname .. " needs a request handler)", 3) end
        return r
    end

    -- Time, cached per poll batch.
    local cached, cached_gen = wall(), -1
    local function now()
        local g = srv._gen
        if g == nil or g ~= cached_gen then cached, cached_gen = wall(), g or -1 end
        return cached
    end
    ngx.now = now
    ngx.time = function() return floor(now()) end
    ngx.update_time = function() cached, cached_gen = wall(), srv._gen or -1 end
    ngx.today = function() return os.date("%Y-%m-%d", floor(now())) end
    ngx.localtime = function() return os.date("%Y-%m-%d %H:%M:%S", floor(now())) end
    ngx.utctime = function() return os.date("!%Y-%m-%d %H:%M:%S", floor(now())) end

    -- Logging in the shape of nginx's error log.
    local function request_line(r)
        local q = r.req.query
        return r.req.method .. " " .. r.req.path .. (q ~= "" and "?" .. q or "") ..
               (r.req.http2 and " HTTP/2.0" or r.req.http10 and " HTTP/1.0" or " HTTP/1.1")
    end
    local function log_line(level, r, msg)
        local tail = ""
        if r then
            tail = fmt(', client: %s, server: , request: "%s", host: "%s"', r.req.peer, request_line(r),
                       r.req:header("host") or "")
        end
        log_out:write(os.date("%Y/%m/%d %H:%M:%S", floor(now())), " [", LEVELS[level], "] ", PID, "#", PID,
                      ": ", r and ("*" .. r.id .. " ") or "", msg, tail, "\n")
        log_out:flush()
    end
    ngx._log_line = log_line

    local function log_arg(v, i)
        local t = type(v)
        if t == "string" then return v end
        if t == "number" or t == "boolean" or v == nil then return tostring(v) end
        if v == NULL then return "null" end
        local mt = getmetatable(v)
        if mt and mt.__tostring then return tostring(v) end
        error("bad argument #" .. i .. " to 'log' (expected table to have __tostring metamethod)", 3)
    end
    function ngx.log(level, ...)
        if type(level) ~= "number" or level < 0 or level > 8 then
            error("bad argument #1 to 'log' (level ngx.STDERR .. ngx.DEBUG expected)", 2)
        end
        if level > log_level then return end
        local n = select("#", ...)
        local parts = {}
        for i = 1, n do parts[i] = log_arg((select(i, ...)), i + 1) end
        local info = debug.getinfo(2, "Sl")
        local src = info and (info.short_src:match("[^/]*$") .. ":" .. (info.currentline or 0) .. ": ") or ""
        log_line(level, current(), "[lua] " .. src .. concat(parts))
    end
    -- print() in handlers, as OpenResty: ngx.log(ngx.NOTICE, ...).
    function ngx._print(...)
        if log_level < 6 then return end
        local n = select("#", ...)
        local parts = {}
        for i = 1, n do parts[i] = log_arg((select(i, ...)), i) end
        local info = debug.getinfo(2, "Sl")
        local src = info and (info.short_src:match("[^/]*$") .. ":" .. (info.currentline or 0) .. ": ") or ""
        log_line(6, current(), "[lua] " .. src .. concat(parts))
    end

    -- Response headers -----------------------------------------------------

    -- Content-Type lives in r.ct (true: default_type, false: none, or the
    -- value), every other header in r.h, a flat list of (lower-case name,
    -- name as given, value) triples in the order first set: a handler sets
    -- a few headers, so a scan beats three tables per request.
    local function block(r, for_stream)
        local h, s = r.h, ""
        if h then
            for i = 1, #h, 3 do
                local lk, v = h[i], h[i + 2]
                if v == nil or lk == "transfer-encoding" or (lk == "content-length" and not for_stream) then
                    -- unset; framing and a complete reply's length are the library's
                elseif type(v) == "table" then
                    for j = 1, #v do s = s .. h[i + 1] .. ": " .. v[j] .. "\r\n" end
                else
                    s = s .. h[i + 1] .. ": " .. v .. "\r\n"
                end
            end
        end
        if r.status == 204 then return s end -- nginx sends no Content-Type with a 204
        local ct = r.ct
        if ct == true then ct = default_type end
        if ct then return "Content-Type: " .. ct .. "\r\n" .. s end
        return s
    end

    local function set_header(r, k, v, lvl)
        local name, lk = header_name(k, "ngx.header", lvl)
        if r.sent then
            log_line(4, r, "attempt to set ngx.header.HEADER after sending out response headers")
            return
        end
        if type(v) == "table" then
            local list = {}
            for i = 1, #v do list[i] = header_value(name, v[i], "ngx.header", lvl) end
            v = #list > 0 and list or nil
        elseif v ~= nil then
            v = header_value(name, v, "ngx.header", lvl)
        end
        if lk == "content-type" then
            if type(v) == "table" then v = v[#v] end -- one Content-Type: the last
            r.ct = v or false
            return
        end
        local h = r.h
        if not h then
            r.h = { lk, name, v }
            return
        end
        for i = 1, #h, 3 do
            if h[i] == lk then
                h[i + 1], h[i + 2] = name, v
                return
            end
        end
        local n = #h
        h[n + 1], h[n + 2], h[n + 3] = lk, name, v
    end

    local function get_header(r, lk)
        if lk == "content-type" then
            local ct = r.ct
            return ct ~= true and ct or nil
        end
        local h = r.h
        if not h then return nil end
        for i = 1, #h, 3 do
            if h[i] == lk then return h[i + 2] end
        end
    end

    ngx.header = setmetatable({}, {
        __index = function(_, k)
            local r = cur("ngx.header")
            if type(k) ~= "string" then return nil end
            local v = get_header(r, LOWER[k] or k:gsub("_", "-"):lower())
            if type(v) == "table" then
                local copy = {}
                for i = 1, #v do copy[i] = v[i] end
                return copy
            end
            return v
        end,
        __newindex = function(_, k, v) set_header(cur("ngx.header"), k, v, 4) end,
    })

    -- Output ---------------------------------------------------------------

    local function freeze(r)
        r.sent = true
        if r.status == 0 then r.status = 200 end
    end

    local function start_stream(r)
        r.started = true
        freeze(r)
        return r.res:start(r.status, block(r, true))
    end

    local function flush_out(r)
        if not r.started then start_stream(r) end
        local n = r.nout
        if n > 0 then
            local s = concat(r.out, "", 1, n)
            r.out, r.nout, r.bytes = {}, 0, 0
            return r.res:write(s)
        end
        return true
    end

    local function add(r, v, depth)
        local t = type(v)
        if t == "string" then
        elseif t == "number" then v = v == 0 and "0" or tostring(v) -- nginx prints -0 as 0
        elseif t == "boolean" or v == nil then v = tostring(v)
        elseif v == NULL then v = "null"
        elseif t == "table" and depth < 100 then
            for i = 1, #v do add(r, v[i], depth + 1) end
            return
        else
            error("bad argument to 'print' (string, number, boolean, nil, ngx.null or array table expected, got " ..
                  t .. ")", depth + 3)
        end
        local n = r.nout + 1
        r.out[n] = v
        r.nout = n
        r.bytes = r.bytes + #v
    end

    local function output(r, newline, ...)
        if r.eof then return nil, "seen eof" end
        local n = select("#", ...)
        if n == 1 and type((...)) == "string" then -- the common ngx.print(s)
            local v = ...
            n = r.nout + 1
            r.out[n], r.nout, r.bytes = v, n, r.bytes + #v
        else
            for i = 1, n do add(r, (select(i, ...)), 0) end
        end
        if newline then add(r, "\n", 0) end
        if not r.sent then freeze(r) end -- after the arguments passed their checks
        if r.bytes > buffer_limit then flush_out(r) end
        return 1
    end
    function ngx.print(...) return output(cur("ngx.print"), false, ...) end
    function ngx.say(...) return output(cur("ngx.say"), true, ...) end

    function ngx.flush()
        local r = cur("ngx.flush")
        if r.eof then return nil, "seen eof" end
        if not r.sent then return 1 end -- nothing to send yet: the headers go with the first output
        flush_out(r)
        return 1
    end

    local function finish_ok(r)
        if r.eof then return end
        r.eof = true
        local res = r.res
        if r.started then
            flush_out(r)
            res:finish()
        else
            if r.status == 0 then r.status = 200 end
            local n = r.nout
            -- One piece (ngx.print(body)) goes as it is: concat would copy it.
            res:send(r.status, n == 1 and r.out[1] or concat(r.out, "", 1, n), block(r, false))
        end
    end

    function ngx.eof()
        local r = cur("ngx.eof")
        if r.eof then return nil, "seen eof" end
        freeze(r)
        finish_ok(r)
        return 1
    end

    -- An nginx page for status (text/html), or an empty body.
    local function send_page(r, status)
        r.eof = true
        r.sent = true
        r.status = status
        local page = PAGES[status]
        local hb
        if page then
            r.ct = "text/html"
        elseif status < 200 or status >= 300 then
            r.ct = false
        end
        hb = block(r, false)
        if CLOSES[status] then hb = hb .. "Connection: close\r\n" end
        if status >= 494 and status <= 497 then status = 400 elseif status == 498 then status = 404 end
        r.res:send(status, page or "", hb)
    end

    function ngx.exit(status)
        local r = current()
        if type(status) ~= "number" then error("bad argument #1 to 'exit' (number expected, got " .. type(status) .. ")", 2) end
        if r and not r.eof then
            if r.sent then
                if status >= 200 and status ~= r.status then
                    log_line(4, r, fmt("attempt to set status %d via ngx.exit after sending out the response status %d",
                                       status, r.status))
                end
                finish_ok(r)
            elseif status == 0 then
                finish_ok(r)
            elseif status == 444 or status == -1 or status == -5 then
                r.eof = true
                r.res:close()
            elseif status >= 200 then
                send_page(r, status)
            else
                send_page(r, 500)
            end
        end
        if r then r.exited = true end
        error(EXIT, 0)
    end

    local REDIRECTS = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }
    function ngx.redirect(uri, ...)
        local r = cur("ngx.redirect")
        if type(uri) ~= "string" then error("bad argument #1 to 'redirect' (string expected, got " .. type(uri) .. ")", 2) end
        local status = ...
        if select("#", ...) > 0 and type(status) ~= "number" then -- an explicit nil too, as OpenResty
            error("bad argument #2 to 'redirect' (number expected, got " .. type(status) .. ")", 2)
        end
        status = status or 302
        if not REDIRECTS[status] then
            error("only ngx.HTTP_MOVED_TEMPORARILY, ngx.HTTP_MOVED_PERMANENTLY, ngx.HTTP_PERMANENT_REDIRECT, " ..
                  "ngx.HTTP_SEE_OTHER, and ngx.HTTP_TEMPORARY_REDIRECT are allowed", 2)
        end
        if r.sent then error("attempt to call ngx.redirect after sending out the headers", 2) end
        if uri:find("[%z\1-\31\127]") then
            error("bad argument #1 to 'redirect' (uri contains CR, LF, NUL or another control character)", 2)
        end
        set_header(r, "Location", uri, 4)
        send_page(r, status)
        r.exited = true
        error(EXIT, 0)
    end

    -- ngx.status, ngx.ctx, ngx.headers_sent ----------------------------------

    local dynamic = {
        status = function(r) return r.status end,
        headers_sent = function(r) return r.sent end,
        ctx = function(r)
            local c = r.ctx
            if not c then c = {}; r.ctx = c end
            return c
        end,
    }
    setmetatable(ngx, {
        __index = function(_, k)
            local f = dynamic[k]
            if f then return f(cur("ngx." .. k)) end
            -- ngx.re (PCRE2) is loaded on its first use only.
            if k == "re" then return require("nanosrv.regex").install(ngx) end
        end,
        __newindex = function(t, k, v)
            if k == "status" then
                local r = cur("ngx.status")
                if type(v) ~= "number" then v = tonumber(v) end
                if not v or v < 100 or v > 999 then error("bad argument to 'ngx.status' (status 100..999 expected)", 2) end
                if r.sent then
                    log_line(4, r, "attempt to set ngx.status after sending out response headers")
                    return
                end
                r.status = floor(v)
            elseif k == "ctx" then
                if type(v) ~= "table" then error("ctx should be a table while getting a " .. type(v), 2) end
                cur("ngx.ctx").ctx = v
            elseif k == "headers_sent" then
                error("ngx.headers_sent is read-only", 2)
            else
                rawset(t, k, v)
            end
        end,
    })

    -- ngx.var --------------------------------------------------------------

    local function req_header(r, lk)
        local o = r.hin
        if o then
            local v = o[lk]
            if v == false then return nil end
            if v ~= nil then return type(v) == "table" and v[1] or v end
        end
        return r.req:header(lk)
    end

    local function listener_port(r)
        local lid = r.req.listener
        for _, l in ipairs(srv.listeners or {}) do
            if l.id == lid then return tostring(l.port) end
        end
        return opts.port and tostring(opts.port) or nil
    end

    local function uri(r)
        return r.uri -- normalised when the request started
    end

    local VARS = {
        uri = uri, document_uri = uri,
        request_uri = function(r)
            local q = r.req.query
            return q ~= "" and r.req.path .. "?" .. q or r.req.path
        end,
        args = function(r) local q = r.req.query; return q ~= "" and q or nil end,
        query_string = function(r) local q = r.req.query; return q ~= "" and q or nil end,
        is_args = function(r) return r.req.query ~= "" and "?" or "" end,
        remote_addr = function(r) return r.req.peer end,
        remote_port = function(r) return tostring(r.req.port) end,
        -- Behind a front speaking the PROXY protocol (listen option
        -- proxy_protocol): remote_addr is the client from its header, as
        -- with nginx's "real_ip_header proxy_protocol"; these are nginx's
        -- names for the header's fields and for the front itself.
        proxy_protocol_addr = function(r) return r.req.proxy and r.req.peer or nil end,
        proxy_protocol_port = function(r) return r.req.proxy and tostring(r.req.port) or nil end,
        proxy_protocol_server_addr = function(r) local p = r.req.proxy; return p and p.dst or nil end,
        proxy_protocol_server_port = function(r) local p = r.req.proxy; return p and tostring(p.dst_port) or nil end,
        proxy_protocol_tlv_alpn = function(r) local p = r.req.proxy; return p and p.alpn ~= "" and p.alpn or nil end,
        proxy_protocol_tlv_authority = function(r)
            local p = r.req.proxy
            return p and p.authority ~= "" and p.authority or nil
        end,
        proxy_protocol_tlv_ssl_version = function(r) local p = r.req.proxy; return p and p.ssl ~= "" and p.ssl or nil end,
        realip_remote_addr = function(r) local p = r.req.proxy; return p and p.front or r.req.peer end,
        realip_remote_port = function(r) local p = r.req.proxy; return tostring(p and p.front_port or r.req.port) end,
        request_method = function(r) return r.req.method end,
        host = function(r)
            local h = req_header(r, "host")
            if not h or h == "" then return "" end
            return (h:lower():gsub(":%d*$", ""))
        end,
        scheme = function(r) return r.req.tls and "https" or "http" end,
        https = function(r) return r.req.tls and "on" or "" end,
        server_port = listener_port,
        server_protocol = function(r)
            return r.req.http2 and "HTTP/2.0" or r.req.http10 and "HTTP/1.0" or "HTTP/1.1"
        end,
        request = function(r) return request_line(r) end,
        content_type = function(r) return req_header(r, "content-type") end,
        content_length = function(r) return req_header(r, "content-length") end,
        request_time = function(r) return fmt("%.3f", now() - r.t0) end,
        msec = function() return fmt("%.3f", now()) end,
        request_body = function(r) return r.body_read and r.req.body ~= "" and r.req.body or nil end,
        status = function(r) return tostring(r.status) end,
        server_name = function() return "" end,
    }
    ngx.var = setmetatable({}, {
        __index = function(_, k)
            local r = cur("ngx.var")
            if type(k) ~= "string" then return nil end
            local own = r.vars
            if own and own[k] ~= nil then return own[k] end
            local f = VARS[k]
            if f then return f(r) end
            local p = k:sub(1, 4)
            if p == "arg_" then
                local q = r.req.query
                if q == "" then return nil end
                local name = k:sub(5):lower()
                -- nginx: the raw value of the first argument of that name (case-insensitive)
                for a in q:gmatch("[^&]+") do
                    local n, v = a:match("^([^=]*)=?(.*)$")
                    if n:lower() == name then return v end
                end
                return nil
            elseif p == "http" and k:sub(5, 5) == "_" then
                return req_header(r, k:sub(6):gsub("_", "-"):lower())
            elseif k:sub(1, 7) == "cookie_" then
                return r.req:cookie(k:sub(8))
            end
            return nil
        end,
        __newindex = function(_, k, v)
            local r = cur("ngx.var")
            if type(k) ~= "string" then error("bad variable name", 2) end
            if VARS[k] or k:find("^arg_") or k:find("^http_") or k:find("^cookie_") then
                error('variable "' .. k .. '" not changeable', 2)
            end
            if v ~= nil and type(v) ~= "string" and type(v) ~= "number" then
                error('bad variable value type for "' .. k .. '"', 2)
            end
            r.vars = r.vars or {}
            r.vars[k] = v ~= nil and tostring(v) or nil
        end,
    })

    -- ngx.req --------------------------------------------------------------

    local req_api = {}
    ngx.req = req_api
    function req_api.get_method() return cur("ngx.req.get_method").req.method end
    function req_api.http_version()
        local q = cur("ngx.req.http_version").req
        return q.http2 and 2.0 or q.http10 and 1.0 or 1.1
    end
    function req_api.is_internal() return false end
    function req_api.start_time() return cur("ngx.req.start_time").t0 end
    function req_api.get_uri_args(max) return parse_args(cur("ngx.req.get_uri_args").req.query, max) end
    function req_api.read_body()
        local r = cur("ngx.req.read_body")
        if not r.body_read then
            r.body = r.req:read_body(max_body)
            r.body_read = true
        end
    end
    function req_api.discard_body() cur("ngx.req.discard_body").body_discarded = true end
    function req_api.get_body_data()
        local r = cur("ngx.req.get_body_data")
        if not r.body_read or r.body_discarded or r.body == "" then return nil end
        return r.body
    end
    function req_api.get_body_file() return nil end
    function req_api.get_post_args(max)
        local r = cur("ngx.req.get_post_args")
        if not r.body_read then
            error("no request body found; maybe you should turn on lua_need_request_body?", 2)
        end
        return parse_args(r.body, max)
    end

    -- Request headers: names lower-case, looked up case-insensitively (with
    -- "_" as "-"), a repeated header as the array of its values.
    local HMeta = { __index = function(t, k)
        if type(k) ~= "string" then return nil end
        local lk = k:gsub("_", "-"):lower()
        if lk == k then return nil end
        return rawget(t, lk)
    end }
    function req_api.get_headers(max, raw)
        local r = cur("ngx.req.get_headers")
        max = max or 100
        local t, n, truncated = {}, 0, nil
        local o = r.hin
        for name, value in r.req.raw_headers:gmatch("([^:\r\n]+):[ \t]*([^\r\n]-)[ \t]*\r\n") do
            local lk = name:lower()
            if not (o and o[lk] ~= nil) then
                if max > 0 and n >= max then truncated = "truncated"; break end
                n = n + 1
                local key = raw and name or lk
                local old = t[key]
                if old == nil then t[key] = value
                elseif type(old) == "table" then old[#old + 1] = value
                else t[key] = { old, value } end
            end
        end
        if o then
            for lk, v in pairs(o) do
                if v ~= false then
                    if max > 0 and n >= max then truncated = "truncated"; break end
                    n = n + 1
                    t[raw and r.hin_names[lk] or lk] = v
                end
            end
        end
        if raw then return t, truncated end
        return setmetatable(t, HMeta), truncated
    end
    function req_api.set_header(k, v)
        local r = cur("ngx.req.set_header")
        local name, lk = header_name(k, "ngx.req.set_header", 3)
        if type(v) == "table" then
            local list = {}
            for i = 1, #v do list[i] = header_value(name, v[i], "ngx.req.set_header", 3) end
            v = #list > 0 and list or false
        elseif v == nil then
            v = false
        else
            v = header_value(name, v, "ngx.req.set_header", 3)
        end
        r.hin = r.hin or {}
        r.hin_names = r.hin_names or {}
        r.hin[lk], r.hin_names[lk] = v, name
    end
    function req_api.clear_header(k) req_api.set_header(k, nil) end
    function req_api.raw_header(no_request_line)
        local r = cur("ngx.req.raw_header")
        local h = r.req.raw_headers .. "\r\n"
        if no_request_line then return h end
        return request_line(r) .. "\r\n" .. h
    end
    function req_api.socket() error("ngx.req.socket is not supported by nanosrv", 2) end

    -- Shared dictionaries, timers, threads, sockets, workers ---------------

    ngx.shared = shdict.registry()

    function ngx.sleep(s)
        if type(s) ~= "number" or s < 0 then error("bad argument #1 to 'sleep' (seconds >= 0 expected)", 2) end
        return srv:sleep(s * 1000)
    end

    -- A timer or thread body: bound to no request (timers) or to the
    -- request of the thread that spawned it; ngx.exit ends it.
    local function log_abort(r, what, err)
        log_line(4, r, what .. " aborted: runtime error: " .. tostring(err))
    end
    -- The traceback of a handler error, down to the handler's own frames
    -- (the frames of the dispatch below it say nothing about the bug).
    local function tb(e)
        if e == EXIT or getmetatable(e) == nanosrv.HttpError then return e end
        local t = debug.traceback(tostring(e), 2)
        local cut = t:find("\n\t%[C%]: in function 'xpcall'")
        return cut and t:sub(1, cut - 1) or t
    end

    -- Timers and light threads are the core's (srv:timer_at, srv:spawn),
    -- each in a coroutine of its own; these add ngx's error logging and
    -- ngx.exit, and bind a thread to the request of its parent.
    local function need(name)
        if type(srv[name]) ~= "function" then error("nanosrv.lua has no srv:" .. name .. "() (needed by ngx)", 3) end
    end
    local timer = {}
    ngx.timer = timer
    local function timer_fn(fn, args)
        return function(premature)
            local ok, err = xpcall(fn, tb, premature, unpack(args, 1, args.n))
            if not ok and err ~= EXIT then log_abort(nil, "lua user thread", err) end
        end
    end
    function timer.at(delay, fn, ...)
        need("timer_at")
        if type(delay) ~= "number" or delay < 0 then error("bad argument #1 to 'at' (seconds >= 0 expected)", 2) end
        if type(fn) ~= "function" then error("bad argument #2 to 'at' (function expected)", 2) end
        local ok, err = srv:timer_at(delay, timer_fn(fn, { n = select("#", ...), ... }))
        if ok then return 1 end
        return nil, err
    end
    function timer.every(delay, fn, ...)
        need("timer_every")
        if type(delay) ~= "number" or delay <= 0 then error("bad argument #1 to 'every' (seconds > 0 expected)", 2) end
        if type(fn) ~= "function" then error("bad argument #2 to 'every' (function expected)", 2) end
        local ok, err = srv:timer_every(delay, timer_fn(fn, { n = select("#", ...), ... }))
        if ok then return 1 end
        return nil, err
    end
    function timer.running_count() need("timers_running"); return srv:timers_running() end
    function timer.pending_count() need("timers_pending"); return srv:timers_pending() end

    local thread = {}
    ngx.thread = thread
    -- The thread's body never raises: it returns ngx.thread.wait's
    -- results (true, ... or false, err) and logs its own failure.
    function thread.spawn(fn, ...)
        need("spawn")
        if type(fn) ~= "function" then error("bad argument #1 to 'spawn' (function expected)", 2) end
        local r = current()
        if r then r.shared = true end -- the thread may outlive the request
        return srv:spawn(function(...)
            local co = running()
            states[co] = r
            local res = { n = 0, xpcall(fn, tb, ...) }
            states[co] = nil
            if not res[1] then
                if res[2] == EXIT then return true end
                log_abort(r, "lua user thread", res[2])
                return false, tostring(res[2]):match("^[^\n]*")
            end
            return unpack(res, 1, table.maxn(res))
        end, ...)
    end
    -- One thread: its results. Several: the first to end (checked every
    -- millisecond, as the core waits on one thread at a time).
    function thread.wait(...)
        local n = select("#", ...)
        if n == 0 then error("bad argument #1 to 'wait' (thread expected)", 2) end
        for i = 1, n do
            local t = select(i, ...)
            if type(t) ~= "table" or type(t.wait) ~= "function" then
                error("bad argument #" .. i .. " to 'wait' (thread expected)", 2)
            end
        end
        if n == 1 then return (...):wait() end
        for _ = 1, math.huge do
            for i = 1, n do
                local t = select(i, ...)
                if t.status == "dead" then return t:wait() end
            end
            srv:sleep(1)
        end
    end
    function thread.kill(t)
        if type(t) == "table" and type(t.kill) == "function" then return t:kill() end
        return nil, "ngx.thread.kill is not supported by nanosrv"
    end

    ngx.socket = {
        tcp = function()
            if type(srv.tcp) ~= "function" then error("ngx.socket.tcp needs cosockets (srv:tcp) in nanosrv.lua", 2) end
            return srv:tcp()
        end,
    }
    function ngx.socket.connect(host, port, o)
        local sock = ngx.socket.tcp()
        local ok, err = sock:connect(host, port, o)
        if not ok then return nil, err end
        return sock
    end

    ngx.worker = {
        id = function() return opts.worker_id or 0 end,
        count = function() return opts.worker_count or 1 end,
        pid = function() return PID end,
        exiting = function() return srv._exiting == true end,
    }
    ngx.location = {
        capture = function() error("ngx.location.capture is not supported by nanosrv", 2) end,
        capture_multi = function() error("ngx.location.capture_multi is not supported by nanosrv", 2) end,
    }

    -- The handler ------------------------------------------------------------

    local seq = 0
    -- Request records of ended handlers, reused: a record is the largest
    -- table a request makes, and the collector's work grows with each one.
    -- A record a light thread holds (r.shared) may outlive its request and
    -- is left to the collector.
    local free, nfree = {}, 0
    local function release(r)
        if r.shared or nfree >= 256 then return end
        -- Output pieces past r.nout are never read; a few KiB of them may
        -- stay until overwritten (a loop clearing them would split the
        -- JIT's trace here on every length).
        if r.nout > 64 or r.bytes > 4096 then r.out = new_tab(8, 0) end
        r.req, r.res, r.status, r.nout, r.bytes, r.sent, r.started, r.eof = false, false, 0, 0, 0, false, false, false
        r.uri, r.ct, r.h, r.body, r.body_read, r.body_discarded = false, true, false, false, false, false
        r.vars, r.hin, r.hin_names, r.ctx, r.exited = false, false, false, false, false
        nfree = nfree + 1
        free[nfree] = r
    end

    -- The handler's end: answer what it left unanswered.
    local function ended(r, ok, err)
        if ok or err == EXIT or r.exited then
            if not r.eof then finish_ok(r) end
            return
        end
        local res = r.res
        if getmetatable(err) == nanosrv.HttpError then
            -- read_body past max_body (413), or the client is gone (no status)
            if err.status and not r.sent then return send_page(r, err.status) end
            if not r.eof then r.eof = true; res:close() end
            return
        end
        log_line(4, r, "lua entry thread aborted: runtime error: " .. tostring(err))
        if r.eof then return end
        if r.sent then
            -- nginx had let nothing of a buffered answer out, or cuts a
            -- stream short: the client must not take it as complete.
            r.eof = true
            res:close()
        else
            send_page(r, 500)
        end
    end

    -- Run fn() for the request (req, res) in the running coroutine.
    function ngx._run(fn, req, res)
        -- The task the core runs (no call the JIT cannot compile), unless
        -- that already serves a request: then this is some coroutine of
        -- that handler's own.
        local co = RUN.co
        if co == nil or states[co] ~= nil then co = running() end
        seq = seq + 1
        local r
        if nfree > 0 then
            r = free[nfree]
            free[nfree] = nil
            nfree = nfree - 1
            r.req, r.res, r.id, r.t0 = req, res, seq, now()
        else
            -- Every field a request may get is made here, so that the table
            -- never grows (a rehash per request otherwise).
            r = { req = req, res = res, status = 0, out = new_tab(8, 0), nout = 0, bytes = 0, sent = false,
                  started = false, eof = false, id = seq, t0 = now(), uri = false, ct = true, h = false,
                  body = false, body_read = false, body_discarded = false, vars = false, hin = false,
                  hin_names = false, ctx = false, exited = false, shared = false }
        end
        local u = normalize_uri(req.path)
        if not u then
            send_page(r, 400) -- ".." above the root, or a NUL
        else
            r.uri = u
            states[co] = r
            local ok, err = xpcall(fn, tb)
            states[co] = nil
            ended(r, ok, err)
        end
        release(r)
    end

    current_ngx = ngx
    if opts.global ~= false then _G.ngx = ngx end
    return ngx
end

-- A (req, res) handler running fn() with ngx bound to the request. opts.ngx:
-- the ngx table to use (default: the one ngxmod.new made last).
function M.handler(fn, opts)
    if type(fn) ~= "function" then error("bad argument #1 to 'handler' (function expected)", 2) end
    local ngx = opts and opts.ngx or current_ngx
    if not ngx then error("nanosrv.ngx: call ngxmod.new(srv) before ngxmod.handler", 2) end
    local run = ngx._run
    return function(req, res) return run(fn, req, res) end
end

-- Serve every method and path with fn (opts as for ngxmod.new, plus
-- stream_body). Returns the ngx table.
function M.serve(srv, fn, opts)
    opts = opts or {}
    local ngx = opts.ngx or M.new(srv, opts)
    local h = M.handler(fn, { ngx = ngx })
    local ro = { coroutine = true, stream_body = opts.stream_body or nil }
    srv:route("ALL", "/*", h, ro)
    -- Targets that are not paths ("*" of OPTIONS, absolute forms) reach the
    -- fallback, which has no coroutine: answer them the way nginx's
    -- location "/" would not match them either.
    srv:fallback(function(_, res)
        res:send(404, PAGES[404], "Content-Type: text/html\r\n")
    end)
    return ngx
end

-- Configure a dictionary's byte budget before its first use.
function M.shared_dict(name, bytes) return shdict.define(name, bytes) end

M.EXIT = EXIT
return M
