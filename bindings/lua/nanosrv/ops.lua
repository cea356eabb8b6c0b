-- nanosrv/ops.lua - running behind a load balancer: listener options (the
-- PROXY protocol, address lists), metrics and their Prometheus text, the
-- access log, and sockets inherited from systemd. Loaded by nanosrv.lua on
-- first use (M.ops()), which passes itself; the Server methods there
-- (listen options, srv:metrics(), srv:access_log(), srv:listen_inherited()
-- ...) are the way in.
--
-- The layouts come from the cdef (nsv_access_record, the tls block of
-- nanosrv.h) and the metric names from the library (nsv_metric_name):
-- nothing about them is written down here.

local M = ...
if type(M) ~= "table" then M = require("nanosrv") end
local ffi = require("ffi")
local bit = require("bit")
local I = M._internal
local C, check = I.C, I.check

local O = {}

-- level: how far up the caller is (default: the caller of the Server
-- method that called the function raising).
local function argerr(n, fname, msg, level)
    error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), level or 4)
end
-- Listener options are checked three calls below the method (listen,
-- listen_fd, listen_inherited) and their helpers one more.
local LO_LEVEL = 6

---------------------------------------------------------------------------
-- Listener options
---------------------------------------------------------------------------

local PROXY = { [true] = C.NSV_PROXY_ANY, [false] = C.NSV_PROXY_OFF, any = C.NSV_PROXY_ANY,
                v1 = C.NSV_PROXY_V1, v2 = C.NSV_PROXY_V2, off = C.NSV_PROXY_OFF }
local LISTS = { { "proxy_from", C.NSV_LOPT_PROXY_FROM }, { "allow", C.NSV_LOPT_ALLOW }, { "deny", C.NSV_LOPT_DENY } }
O.LISTEN_OPTS = { proxy_protocol = true, proxy_timeout_ms = true, proxy_from = true, allow = true, deny = true,
                  reuseport = true }

local function proxy_version(v, n, fname)
    if type(v) == "string" then v = v:lower() end
    local p = PROXY[v]
    if p then return p end
    if type(v) == "number" then
        for _, x in pairs(PROXY) do
            if x == v then return v end
        end
    end
    argerr(n, fname, 'proxy_protocol must be true, false, "v1", "v2", "any" or "off", got ' .. tostring(v), LO_LEVEL)
end

-- A CIDR list as the library takes it: "10.0.0.0/8, ::1" or {"10.0.0.0/8", "::1"}.
local function address_list(v, name, n, fname)
    if v == false then return "" end
    if type(v) == "string" then return v end
    if type(v) ~= "table" then argerr(n, fname, name .. " must be a string or a list of CIDR strings", LO_LEVEL) end
    for i, x in ipairs(v) do
        if type(x) ~= "string" then argerr(n, fname, name .. "[" .. i .. "] must be a string", LO_LEVEL) end
    end
    return table.concat(v, ",")
end

-- Check the options before the listener exists, so that a wrong type or
-- name never leaves a half-configured listener behind. Returns them in
-- the library's terms.
function O.listen_opts(opts, n, fname)
    if opts == nil then return nil end
    if type(opts) ~= "table" then argerr(n, fname, "options table expected", LO_LEVEL - 1) end
    for k in pairs(opts) do
        if not O.LISTEN_OPTS[k] then
            argerr(n, fname, "unknown listener option '" .. tostring(k) ..
                   "' (proxy_protocol, proxy_timeout_ms, proxy_from, allow, deny, reuseport)", LO_LEVEL - 1)
        end
    end
    local out = {}
    if opts.proxy_protocol ~= nil then out.proxy = proxy_version(opts.proxy_protocol, n, fname) end
    local t = opts.proxy_timeout_ms
    if t ~= nil then
        if type(t) ~= "number" or t ~= math.floor(t) then
            argerr(n, fname, "proxy_timeout_ms must be a whole number", LO_LEVEL - 1)
        end
        out.timeout = t
    end
    for _, l in ipairs(LISTS) do
        local v = opts[l[1]]
        if v ~= nil then out[#out + 1] = { l[1], l[2], address_list(v, l[1], n, fname) } end
    end
    if opts.reuseport ~= nil then out.reuseport = opts.reuseport and 1 or 0 end
    return out
end

-- The deny-everything lists a listener gets when its options fail: the
-- library cannot close one listener, and one serving without the address
-- list its caller asked for must not serve at all.
local REFUSE_ALL = { { C.NSV_LOPT_DENY, "0.0.0.0/0, ::/0" }, { C.NSV_LOPT_ALLOW, "0.0.0.0/32" },
                     { C.NSV_LOPT_PROXY_FROM, "0.0.0.0/32" } }

-- Apply checked options to listener lid; on a refusal raise with the
-- library's detail (which entry of which list), the listener refusing
-- every connection. level: error()'s level, seen from here, that names
-- the caller of the Server method.
function O.apply(srv, lid, o, what, level)
    if not o then return end
    local h = srv._h
    local function set(r, name)
        if r < 0 then
            local msg = I.errmsg(r, what .. ": " .. name, srv)
            for _, q in ipairs(REFUSE_ALL) do C.nsv_listener_set_str(h, lid, q[1], q[2], #q[2]) end
            error(msg, level + 1) -- one more: set itself
        end
    end
    if o.proxy then set(C.nsv_listener_set_int(h, lid, C.NSV_LOPT_PROXY_PROTOCOL, o.proxy), "proxy_protocol") end
    if o.timeout then set(C.nsv_listener_set_int(h, lid, C.NSV_LOPT_PROXY_TIMEOUT_MS, o.timeout), "proxy_timeout_ms") end
    for _, l in ipairs(o) do
        set(C.nsv_listener_set_str(h, lid, l[2], l[3], #l[3]), l[1])
    end
end

-- An integer option of a listener: "proxy_protocol", "proxy_timeout_ms".
local INT_OPTS = { proxy_protocol = C.NSV_LOPT_PROXY_PROTOCOL, proxy_timeout_ms = C.NSV_LOPT_PROXY_TIMEOUT_MS }
function O.listener_get(srv, lid, name)
    local opt = INT_OPTS[name]
    if not opt then argerr(2, "listener_option", "\"proxy_protocol\" or \"proxy_timeout_ms\" expected") end
    local v = C.nsv_listener_get_int(I.srv_handle(srv), lid, opt)
    if v < 0 then check(tonumber(v), "listener_option " .. name, srv) end
    return tonumber(v)
end

-- The front's fields of a proxied connection (NSV_EVF_PROXY), from the
-- event's tls block: "sni\0peer_subject\0front\0front_port\0dst\0
-- dst_port\0ssl\0authority\0alpn\0".
function O.proxy_info(a, off, len)
    local parts, n = {}, 0
    local s = ffi.string(a + off, len)
    for p in s:gmatch("([^%z]*)%z") do
        n = n + 1
        parts[n] = p
    end
    return { front = parts[3] or "", front_port = tonumber(parts[4]) or 0, dst = parts[5] or "",
             dst_port = tonumber(parts[6]) or 0, ssl = parts[7] or "", authority = parts[8] or "",
             alpn = parts[9] or "" }
end

---------------------------------------------------------------------------
-- Metrics
---------------------------------------------------------------------------

local names, layout, buckets_s

-- Every metric's name in index order, as the loaded library has them.
function O.metric_names()
    if names then return names end
    local out = {}
    for i = 0, 4095 do
        local p = C.nsv_metric_name(i)
        if p == nil then break end
        out[#out + 1] = ffi.string(p)
    end
    names = out
    return out
end

-- { {key, index} } for single values and { {key, sum_i, count_i,
-- first_bucket_i, nbuckets} } for histograms: a run of "<base>_bucket"
-- names next to "<base>_sum_us" and "<base>_count". Indexes are 0-based.
local function metric_layout()
    if layout then return layout end
    local nm = O.metric_names()
    local index = {}
    for i = #nm, 1, -1 do index[nm[i]] = i - 1 end
    local out, i, nb = {}, 1, 0
    while i <= #nm do
        local n = nm[i]
        local base = n:match("^(.*)_bucket$")
        if base then
            local j = i
            while nm[j] == n do j = j + 1 end
            out[#out + 1] = { base, index[base .. "_sum_us"], index[base .. "_count"], i - 1, j - i }
            if j - i > nb then nb = j - i end
            i = j
        else
            local hist_sum = n:match("^(.*)_sum_us$")
            local hist_count = n:match("^(.*)_count$")
            if not ((hist_sum and index[hist_sum .. "_bucket"]) or (hist_count and index[hist_count .. "_bucket"])) then
                out[#out + 1] = { n, i - 1 }
            end
            i = i + 1
        end
    end
    buckets_s = {}
    for k = 0, nb - 1 do
        local us = tonumber(C.nsv_metric_bucket_us(k))
        buckets_s[k + 1] = us < 0 and math.huge or us / 1e6
    end
    layout = out
    return out
end

-- Every value by name, read in one call (nsv_metrics, or
-- nsv_metrics_worker for one worker): counters and gauges as numbers,
-- histograms as {buckets = {{le_seconds, cumulative_count}, ...},
-- sum_seconds =, count =} (the last le is math.huge).
function O.metrics(srv, worker)
    local lay = metric_layout()
    local n = #O.metric_names()
    local buf = srv._mbuf
    if not buf then
        buf = ffi.new("uint64_t[?]", n > 0 and n or 1)
        srv._mbuf = buf
    end
    local h = I.srv_handle(srv)
    local got
    if worker == nil then
        got = check(C.nsv_metrics(h, buf, n), "metrics", srv)
    else
        if type(worker) ~= "number" then argerr(1, "metrics", "worker number expected") end
        got = check(C.nsv_metrics_worker(h, worker, buf, n), "metrics worker " .. worker, srv)
    end
    if got > n then got = n end
    local out = {}
    for _, e in ipairs(lay) do
        if #e == 2 then
            if e[2] < got then out[e[1]] = tonumber(buf[e[2]]) end
        elseif e[4] + e[5] <= got then
            local b = {}
            for k = 0, e[5] - 1 do b[k + 1] = { buckets_s[k + 1], tonumber(buf[e[4] + k]) } end
            out[e[1]] = { buckets = b, sum_seconds = e[2] and tonumber(buf[e[2]]) / 1e6 or 0,
                          count = e[3] and tonumber(buf[e[3]]) or 0 }
        end
    end
    return out
end

O.PROMETHEUS_TYPE = "text/plain; version=0.0.4"

-- The Prometheus text exposition (nsv_metrics_prometheus); prefix nil
-- or "" is the library's "nanosrv_".
function O.metrics_text(srv, prefix, per_worker)
    if prefix ~= nil and type(prefix) ~= "string" then argerr(1, "metrics_text", "prefix string expected") end
    prefix = prefix or ""
    local h = I.srv_handle(srv)
    local cap = srv._ptext_cap or 32768
    for _ = 1, 8 do
        local buf = srv._ptext
        if not buf or srv._ptext_cap < cap then
            buf = ffi.new("char[?]", cap)
            srv._ptext, srv._ptext_cap = buf, cap
        end
        local n = C.nsv_metrics_prometheus(h, prefix, #prefix, per_worker and 1 or 0, buf, cap)
        if n >= 0 then return ffi.string(buf, n) end
        if n ~= C.NSV_ENOBUFS then check(tonumber(n), "metrics_text", srv) end
        srv._detail = ffi.string(C.nsv_last_error_detail(h)) -- handled: grow
        cap = cap * 4
    end
    error("nanosrv: metrics_text: the exposition did not fit " .. cap .. " bytes", 3)
end

---------------------------------------------------------------------------
-- Access log: records (nsv_access_take), formats, the drain after a poll.
---------------------------------------------------------------------------

local REC = ffi.typeof("const nsv_access_record *")
local REC_SIZE = ffi.sizeof("nsv_access_record")
local EVF_HTTP10, EVF_TLS, EVF_PROXY, EVF_HEAD = C.NSV_EVF_HTTP10, C.NSV_EVF_TLS, C.NSV_EVF_PROXY, C.NSV_EVF_HEAD

-- "2026-12-02T03:33:00.123Z" for ms since the epoch. The records of a
-- batch mostly share their second: its text is kept.
local iso_sec, iso_text = -1, ""
function O.iso_time(ms)
    local s = math.floor(ms / 1000)
    if s ~= iso_sec then iso_sec, iso_text = s, os.date("!%Y-%m-%dT%H:%M:%S", s) end
    return iso_text .. string.format(".%03dZ", ms - s * 1000)
end

-- Milliseconds with three decimals ("0.123", "2.000").
function O.duration_ms(us)
    return string.format("%d.%03d", math.floor(us / 1000), us % 1000)
end

-- The records in buf[0 .. n) as tables: the JSON format's fields (time,
-- peer, port, method, target, status, bytes_out, bytes_in, duration_ms,
-- user_agent, referer), then time_ms, duration_us, conn, listener and the
-- flags http10, tls, proxy, head.
function O.parse_records(buf, n, out)
    out = out or {}
    local at = 0
    while at + REC_SIZE <= n do
        local r = ffi.cast(REC, buf + at)
        local size = r.size
        if size < REC_SIZE or at + size > n then break end
        local p = buf + at + REC_SIZE
        local method = ffi.string(p, r.method_len); p = p + r.method_len
        local target = ffi.string(p, r.target_len); p = p + r.target_len
        local peer = ffi.string(p, r.peer_len); p = p + r.peer_len
        local ua = ffi.string(p, r.ua_len); p = p + r.ua_len
        local ref = ffi.string(p, r.referer_len)
        local f, ms, us = r.flags, tonumber(r.time_ms), tonumber(r.duration_us)
        out[#out + 1] = {
            time = O.iso_time(ms), peer = peer, port = tonumber(r.peer_port), method = method, target = target,
            status = tonumber(r.status), bytes_out = tonumber(r.bytes_out), bytes_in = tonumber(r.bytes_in),
            duration_ms = tonumber(O.duration_ms(us)), user_agent = ua, referer = ref,
            time_ms = ms, duration_us = us, conn = r.conn, listener = tonumber(r.listener),
            http10 = bit.band(f, EVF_HTTP10) ~= 0, tls = bit.band(f, EVF_TLS) ~= 0,
            proxy = bit.band(f, EVF_PROXY) ~= 0, head = bit.band(f, EVF_HEAD) ~= 0,
        }
        at = at + size
    end
    return out
end

-- The formats are those of examples/lib/access_format.h, byte for byte:
-- nginx's common and combined ($time_local, bytes_out for the byte count,
-- "-" for an empty field, escape=default) and one JSON object per line.

-- Local time, English month names whatever the locale.
local MONTHS = { "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" }
local clf_sec, clf_text = -1, ""
local function clf_time(ms)
    local s = math.floor(ms / 1000)
    if s ~= clf_sec then
        local t = os.date("*t", s)
        clf_sec, clf_text = s, string.format("%02d/%s/%04d:%02d:%02d:%02d %s", t.day, MONTHS[t.month], t.year, t.hour,
                                             t.min, t.sec, os.date("%z", s))
    end
    return clf_text
end

-- nginx's escape=default: '"', '\', and bytes outside 0x20..0x7e as \xHH;
-- an empty field is "-".
local NGX_BAD = '[%z\1-\31"\\\127-\255]'
local function esc(s)
    if s == "" then return "-" end
    if not s:find(NGX_BAD) then return s end
    return (s:gsub(NGX_BAD, function(c) return string.format("\\x%02X", c:byte()) end))
end

local function request_line(r)
    if r.method == "" and r.target == "" then return "-" end
    return esc(r.method) .. " " .. esc(r.target) .. (r.http10 and " HTTP/1.0" or " HTTP/1.1")
end

-- nginx "common": peer - - [time] "METHOD target HTTP/1.x" status bytes
-- (bytes: the answer as framed on the wire, head included: bytes_out).
function O.format_common(r)
    return string.format('%s - - [%s] "%s" %d %d', esc(r.peer), clf_time(r.time_ms), request_line(r),
                         r.status < 0 and 0 or r.status, r.bytes_out)
end

-- nginx "combined": common, then "referer" "user agent".
function O.format_combined(r)
    return string.format('%s "%s" "%s"', O.format_common(r), esc(r.referer), esc(r.user_agent))
end

-- Length of the valid UTF-8 sequence at byte i of s (1..4), 0 when none
-- starts there (overlong forms, surrogates and past U+10FFFF are not).
local function utf8_seq(s, i)
    local c = s:byte(i)
    local len, cp
    if c < 0x80 then return 1
    elseif c >= 0xC2 and c <= 0xDF then len, cp = 2, c - 0xC0
    elseif c >= 0xE0 and c <= 0xEF then len, cp = 3, c - 0xE0
    elseif c >= 0xF0 and c <= 0xF4 then len, cp = 4, c - 0xF0
    else return 0 end
    for k = 1, len - 1 do
        local d = s:byte(i + k)
        if not d or d < 0x80 or d > 0xBF then return 0 end
        cp = cp * 64 + (d - 0x80)
    end
    if (len == 3 and (cp < 0x800 or (cp >= 0xD800 and cp <= 0xDFFF))) or (len == 4 and (cp < 0x10000 or cp > 0x10FFFF)) then
        return 0
    end
    return len
end

-- JSON: '"' and '\' escaped, \b \f \n \r \t short, other bytes below 0x20
-- \u00hh, valid UTF-8 as it is, and a byte outside valid UTF-8 \u00hh, so
-- the line is valid JSON whatever the client sent.
local JESC = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r",
               ["\t"] = "\\t" }
for b = 0, 0x1f do
    local ch = string.char(b)
    JESC[ch] = JESC[ch] or string.format("\\u%04x", b)
end
local function jstr(s)
    if s:find("[\128-\255]") then
        local out, i, n = {}, 1, #s
        while i <= n do
            local k = utf8_seq(s, i)
            if k == 0 then
                out[#out + 1] = string.format("\\u%04x", s:byte(i))
                i = i + 1
            else
                out[#out + 1] = (s:sub(i, i + k - 1):gsub('[%z\1-\31"\\]', JESC))
                i = i + k
            end
        end
        return '"' .. table.concat(out) .. '"'
    end
    if s:find('[%z\1-\31"\\]') then s = s:gsub('[%z\1-\31"\\]', JESC) end
    return '"' .. s .. '"'
end
O.json_string = jstr

-- One JSON object per line, the keys in this order.
function O.format_json(r)
    return '{"time":"' .. O.iso_time(r.time_ms) .. '","peer":' .. jstr(r.peer) .. ',"port":' .. r.port ..
           ',"method":' .. jstr(r.method) .. ',"target":' .. jstr(r.target) ..
           ',"status":' .. (r.status < 0 and 0 or r.status) ..
           ',"bytes_out":' .. string.format("%d", r.bytes_out) .. ',"bytes_in":' .. string.format("%d", r.bytes_in) ..
           ',"duration_ms":' .. O.duration_ms(r.duration_us) .. ',"user_agent":' .. jstr(r.user_agent) ..
           ',"referer":' .. jstr(r.referer) .. "}"
end

O.FORMATS = { common = O.format_common, combined = O.format_combined, json = O.format_json }

-- Take every waiting record (bounded: records that keep coming wait for
-- the next poll); returns a list of tables.
local TAKE_CAP = 65536
function O.take(srv, out)
    local h = srv._h
    if h == nil then return out or {} end
    local buf = srv._abuf
    if not buf then
        buf = ffi.new("char[?]", TAKE_CAP)
        srv._abuf = buf
    end
    out = out or {}
    for _ = 1, 256 do
        local n = C.nsv_access_take(h, buf, TAKE_CAP)
        if n <= 0 then
            if n < 0 then check(tonumber(n), "access_take", srv) end
            break
        end
        O.parse_records(buf, tonumber(n), out)
    end
    return out
end

local function log_error(what, err)
    io.stderr:write("nanosrv: access_log ", what, ": ", tostring(err), "\n")
    io.stderr:flush()
end

-- After a poll batch: hand each record to the callable, or format it and
-- write the lines to the sink (a file, flushed once per batch, or a
-- function(line)).
function O.drain(srv)
    local log = srv._alog
    local ok, recs = pcall(O.take, srv)
    if not ok then return log_error("take", recs) end
    if #recs == 0 then return end
    if log.fn then
        for i = 1, #recs do
            local fine, err = pcall(log.fn, recs[i])
            if not fine then log_error("function", err) end
        end
        return
    end
    local fmt, sink = log.format, log.sink
    if type(sink) == "function" then
        for i = 1, #recs do
            local fine, err = pcall(sink, fmt(recs[i]))
            if not fine then log_error("sink", err) end
        end
        return
    end
    local lines = {}
    for i = 1, #recs do lines[i] = fmt(recs[i]) end
    lines[#lines + 1] = ""
    local fine, err = pcall(function()
        sink:write(table.concat(lines, "\n"))
        sink:flush()
    end)
    if not fine then log_error("sink", err) end
end

-- access_log = "common" | "combined" | "json" | function(record) | false;
-- sink: a file (default io.stdout) or a function(line); queue: records
-- kept per worker between drains (NSV_OPT_ACCESS_LOG, default 4096).
-- Answers the library makes alone (404s, static files, 400s) come with no
-- event to wake the loop (nor do the replies of a sharded server, recorded
-- by its workers after the batch), so a timer drains every 250 ms as well.
local OPT_ACCESS_LOG = C.NSV_OPT_ACCESS_LOG
function O.set_access_log(srv, what, sink, queue)
    if what == nil or what == false then
        if srv._alog_timer then srv._alog_timer:cancel() end
        srv._alog, srv._alog_timer = nil, nil
        check(C.nsv_set_int(I.srv_handle(srv), OPT_ACCESS_LOG, 0), "access_log", srv)
        return
    end
    local log = {}
    if type(what) == "function" then
        log.fn = what
    elseif type(what) == "string" and O.FORMATS[what] then
        log.format = O.FORMATS[what]
        log.sink = sink or io.stdout
        local st = type(log.sink)
        if st ~= "function" and not ((st == "userdata" or st == "table") and log.sink.write) then
            argerr(2, "access_log", "sink must be a file or a function(line)")
        end
    else
        argerr(1, "access_log", 'access_log must be "common", "combined", "json", a function(record) or false')
    end
    queue = queue or 4096
    if type(queue) ~= "number" or queue < 1 then argerr(3, "access_log", "queue must be a number >= 1") end
    check(C.nsv_set_int(I.srv_handle(srv), OPT_ACCESS_LOG, queue), "access_log", srv)
    srv._alog = log
    if not srv._alog_timer then srv._alog_timer = srv:every(250, function() end) end
end

---------------------------------------------------------------------------
-- Sockets from systemd socket activation (or a supervisor speaking its
-- protocol): LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES.
---------------------------------------------------------------------------

-- The descriptors passed to this process ({3, 4, ...}, {} when none) and
-- their names (LISTEN_FDNAMES, "" when not given). unset_env (default
-- true) removes the variables so child processes do not take them.
function O.inherited_fds(unset_env)
    local names_env = os.getenv("LISTEN_FDNAMES") or ""
    local n = C.nsv_inherited_fds(unset_env == false and 0 or 1)
    if n < 0 then error(I.errmsg_nosrv(n, "inherited_fds"), 3) end
    local fds, fdnames, k = {}, {}, 0
    for name in (names_env .. ":"):gmatch("([^:]*):") do
        k = k + 1
        fdnames[k] = name
    end
    for i = 1, n do
        fds[i] = 2 + i
        fdnames[i] = fdnames[i] or ""
    end
    for i = n + 1, k do fdnames[i] = nil end
    return fds, fdnames
end

return O
