-- nanosrv/http.lua - the HTTP/1.1 client (nsv_http_request) on the
-- server's own loop, in two forms:
--   srv:http_request(opts, callbacks) -> request   callbacks run in the poll loop
--   srv:fetch(url, opts) -> res | nil, err          waits in the calling coroutine
-- The library frames and validates the request, pools connections per
-- origin and applies the server's http_* timeouts and limits; this module
-- maps its events (HTTP_RESPONSE, HTTP_BODY, ERROR and TCP_WRITABLE whose
-- conn is a request id) onto the callbacks, and builds fetch on them as
-- nanosrv/socket.lua builds cosockets on srv:connect. Loaded by
-- nanosrv.lua (M.http()), which passes itself.

local M = ...
if type(M) ~= "table" then M = require("nanosrv") end
local ffi = require("ffi")
local bit = require("bit")
local I = M._internal
local C, suspend, wake, in_coroutine, conn_key = I.C, I.suspend, I.wake, I.in_coroutine, I.conn_key

local EV_HTTP_RESPONSE, EV_HTTP_BODY = C.NSV_EV_HTTP_RESPONSE, C.NSV_EV_HTTP_BODY
local EV_ERROR, EV_WRITABLE = C.NSV_EV_ERROR, C.NSV_EV_TCP_WRITABLE
local EVF_EOF, EVF_KEEPALIVE, EVF_TLS, EVF_HTTP10 = C.NSV_EVF_EOF, C.NSV_EVF_KEEPALIVE, C.NSV_EVF_TLS, C.NSV_EVF_HTTP10
local EAGAIN, ESTALE, EINVAL, ETIMEDOUT = C.NSV_EAGAIN, C.NSV_ESTALE, C.NSV_EINVAL, C.NSV_ETIMEDOUT
local STREAM_BODY = C.NSV_HTTP_STREAM_BODY

local FETCH_MAX_BODY = 64 * 1048576 -- fetch's whole-body cap unless opts.max_body
local STREAM_BUFFER = 1048576       -- unread streamed bytes past which reading pauses

local H = {}

local function argerr(n, fname, msg) error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 3) end
-- The same without a position: raised inside start() and re-raised by
-- the public function at its caller's line.
local function argerr0(n, fname, msg) error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 0) end

local function log(what, err)
    io.stderr:write("nanosrv: http client ", what, ": ", tostring(err), "\n")
    io.stderr:flush()
end

local describe, last_detail = I.describe, I.last_detail

---------------------------------------------------------------------------
-- Request headers: a "Name: value\r\n" block as given, or a table with
-- values as strings (numbers), arrays of them for a repeated name, or a
-- list of {name, value} pairs to keep an order. Checked here so that the
-- error names the header; the library checks the block again and refuses
-- the ones it frames itself (Host, Content-Length, Transfer-Encoding,
-- Connection, TE, Upgrade).
---------------------------------------------------------------------------

-- The binding's own check (nanosrv.lua), reporting without a position.
local function header_block(h, n, fname) return I.header_block(h, n, fname, argerr0) end

---------------------------------------------------------------------------
-- Responses: status, reason, headers (lower-case names; a repeated one
-- maps to the array of its values; any case finds it), raw (every line
-- as {name, value}, names as sent, in order), keepalive, tls, http10.
---------------------------------------------------------------------------

local Resp = {}
Resp.__index = Resp
local HDRS = { __index = function(t, k)
    if type(k) == "string" then
        local l = k:lower()
        if l ~= k then return rawget(t, l) end
    end
end }

local nh_off, nh_len, hv_off, hv_len =
    ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]")

local function make_resp(srv, ev)
    local a = srv._arena
    local headers, raw, i = setmetatable({}, HDRS), {}, 0
    while C.nsv_ev_header_at(ev, a, i, nh_off, nh_len, hv_off, hv_len) == 0 do
        local name = ffi.string(a + nh_off[0], nh_len[0])
        local v = ffi.string(a + hv_off[0], hv_len[0])
        i = i + 1
        raw[i] = { name, v }
        local k = name:lower()
        local old = rawget(headers, k)
        if old == nil then headers[k] = v
        elseif type(old) == "table" then old[#old + 1] = v
        else headers[k] = { old, v } end
    end
    local f = ev.flags
    return setmetatable({
        status = ev.code, reason = ffi.string(a + ev.path_off, ev.path_len), headers = headers, raw = raw,
        keepalive = bit.band(f, EVF_KEEPALIVE) ~= 0, tls = bit.band(f, EVF_TLS) ~= 0,
        http10 = bit.band(f, EVF_HTTP10) ~= 0,
    }, Resp)
end

-- One header's value: repeated ones joined by ", " (as a request's).
function Resp:header(name)
    if type(name) ~= "string" then argerr(1, "header", "header name expected") end
    local v = self.headers[name]
    if type(v) == "table" then return table.concat(v, ", ") end
    return v
end

---------------------------------------------------------------------------
-- The request object and the events of its id.
---------------------------------------------------------------------------

local Req = {}
Req.__index = Req
Req.__tostring = function(q) return "nanosrv.http_request(" .. q.method .. " " .. q.url .. ")" end

local CALLBACKS = { on_response = true, on_body = true, on_end = true, on_error = true, on_writable = true }

-- After its final event (or a cancel or a timeout) nothing carries the id.
local function finish(q)
    q.done = true
    local srv = q._s
    local t = srv._httpreqs
    if t and t[q._k] == q then t[q._k] = nil end
    local tm = q._timer
    if tm then q._timer = nil; tm:cancel() end
    local co = q._wwaiter -- a body writer waiting for room learns it ended
    if co then q._wwaiter = nil; wake(srv, co, q) end
end

-- A callback that raises is logged and its request cancelled: what it was
-- doing with the response is in an unknown state.
local function call(q, name, a, b)
    local f = q._cb[name]
    if not f then return end
    local ok, err = xpcall(f, debug.traceback, a, b)
    if not ok then
        log(name .. " callback failed (" .. q.method .. " " .. q.url .. ")", err)
        if not q.done then q:cancel() end
    end
end

local function failed(q, msg, code)
    finish(q)
    if q._cb.on_error then return call(q, "on_error", msg, code) end
    log(q.method .. " " .. q.url, msg)
end

-- srv._http_ev: called by the dispatch of nanosrv.lua for HTTP_RESPONSE
-- and HTTP_BODY events, and for ERROR and TCP_WRITABLE ones (true when
-- the event was a request's).
local function on_event(srv, i)
    local ev = srv._evs[i]
    local t = srv._httpreqs
    local q = t and t[conn_key(ev.conn)]
    if not q or q.id ~= ev.conn then return false end
    local ty = ev.type
    if ty == EV_HTTP_BODY then
        local n = ev.body_len
        if n > 0 then
            q.received = q.received + n
            call(q, "on_body", ffi.string(srv._arena + ev.body_off, n))
        end
        if bit.band(ev.flags, EVF_EOF) ~= 0 and not q.done then
            finish(q)
            call(q, "on_end")
        end
    elseif ty == EV_HTTP_RESPONSE then
        local resp = make_resp(srv, ev)
        q.response = resp
        call(q, "on_response", resp)
    elseif ty == EV_ERROR then
        failed(q, describe(ev.code, ffi.string(srv._arena + ev.body_off, ev.body_len)), ev.code)
    elseif ty == EV_WRITABLE then
        if ev.code ~= 0 then
            q.blocked = false
            local co = q._wwaiter
            if co then q._wwaiter = nil; wake(srv, co, q) end
            call(q, "on_writable")
        end
    end
    return true
end

local function handle(q)
    local h = q._s._h
    if h == nil then error("nanosrv: server is closed", 3) end
    return h
end

-- A piece of a streamed body (body_stream = true). Returns true when
-- queued. When more than the server's max_output waits to be sent: in a
-- coroutine it waits for room; elsewhere it returns false, "busy" (nothing
-- was queued: write it again from on_writable). nil, "closed" once the
-- request ended. Writing past content_length raises.
function Req:write(chunk)
    if type(chunk) == "number" then chunk = tostring(chunk) end
    if type(chunk) ~= "string" then argerr(1, "write", "string expected, got " .. type(chunk)) end
    for _ = 1, math.huge do
        if self.done then return nil, "closed" end
        local r = C.nsv_http_request_body(handle(self), self.id, chunk, #chunk)
        if r >= 0 then return true end
        if r == ESTALE then return nil, "closed" end
        if r ~= EAGAIN then error("nanosrv: write: " .. describe(r, last_detail(self._s)), 2) end
        last_detail(self._s)
        self.blocked = true
        local co = in_coroutine()
        if not co then return false, "busy" end
        self._wwaiter = co
        self.write_waits = self.write_waits + 1
        suspend(self._s, "http request body", nil, self)
        if self._wwaiter == co then self._wwaiter = nil end
    end
end

-- End a streamed body. Ending short of content_length raises (the
-- request stays open: write the rest or cancel it).
function Req:finish()
    if self.done then return nil, "closed" end
    local r = C.nsv_http_request_end(handle(self), self.id)
    if r >= 0 then return true end
    if r == ESTALE then return nil, "closed" end
    error("nanosrv: finish: " .. describe(r, last_detail(self._s)), 2)
end

-- Stop / resume reading the response (TCP then slows the server).
local function set_paused(self, p, fname)
    if self.done then return false end
    local r = C.nsv_http_pause(handle(self), self.id, p and 1 or 0)
    if r == ESTALE then return false end
    if r < 0 then error("nanosrv: " .. fname .. ": " .. describe(r, last_detail(self._s)), 3) end
    self.paused = p
    return true
end
function Req:pause() return set_paused(self, true, "pause") end
function Req:resume() return set_paused(self, false, "resume") end

-- Drop the request: no callback runs for it afterwards. False when it had
-- ended already.
function Req:cancel()
    if self.done then return false end
    local h = self._s._h
    if h ~= nil then C.nsv_http_cancel(h, self.id) end
    finish(self)
    return true
end

---------------------------------------------------------------------------
-- Starting a request
---------------------------------------------------------------------------

local REQ_OPTS = { method = true, url = true, headers = true, body = true, body_stream = true,
                   content_length = true, timeout = true }

local function timeout_arg(v, n, fname)
    if v == nil then return nil end
    if type(v) ~= "number" or v ~= v or v <= 0 or v > 2 ^ 31 then
        argerr0(n, fname, "timeout must be a number of milliseconds > 0")
    end
    return math.ceil(v)
end

-- Returns the request, or nil, err for what the library refuses at the
-- start (URL, a stopped server, https without TLS); bad arguments
-- (types, method, headers, body framing) raise, naming the argument.
local function start(srv, o, cb, fname, n)
    local url, method = o.url, o.method
    if type(url) ~= "string" then argerr0(n, fname, "url must be a string") end
    local body = o.body
    if type(body) == "number" then body = tostring(body) end
    if body ~= nil and type(body) ~= "string" then argerr0(n, fname, "body must be a string") end
    if method == nil then method = body and "POST" or "GET" end
    if type(method) ~= "string" then argerr0(n, fname, "method must be a string") end
    local hb = header_block(o.headers, n, fname)
    local flags, clen = 0, -1
    if o.body_stream then
        if body then argerr0(n, fname, "body and body_stream exclude each other") end
        flags = STREAM_BODY
        clen = o.content_length or -1
        if type(clen) ~= "number" or clen ~= math.floor(clen) or clen < -1 then
            argerr0(n, fname, "content_length must be a byte count >= 0 (or -1: chunked)")
        end
    elseif o.content_length ~= nil then
        argerr0(n, fname, "content_length is for body_stream = true (a body string has its own length)")
    end
    local timeout = timeout_arg(o.timeout, n, fname)
    local h = srv._h
    if h == nil then error("nanosrv: server is closed", 0) end
    body = body or ""
    local id = C.nsv_http_request(h, method, #method, url, #url, hb, #hb, body, #body, clen, flags)
    if id < 0 then
        local code = tonumber(id)
        local msg = describe(code, last_detail(srv))
        if code == EINVAL then argerr0(n, fname, msg) end
        return nil, msg, code
    end
    id = ffi.cast("uint64_t", id)
    local q = setmetatable({ id = id, _k = conn_key(id), _s = srv, _cb = cb, method = method, url = url,
                             done = false, paused = false, blocked = false, received = 0,
                             write_waits = 0 }, Req)
    local t = srv._httpreqs
    if not t then
        t = {}
        srv._httpreqs, srv._http_ev = t, on_event
    end
    t[q._k] = q
    if timeout then
        q._timer = srv:timer(timeout, function()
            q._timer = nil
            if q.done then return end
            C.nsv_http_cancel(srv._h, q.id)
            failed(q, describe(ETIMEDOUT, "no complete response within " .. timeout .. " ms (the timeout option)"),
                   ETIMEDOUT)
        end)
    end
    return q
end

-- srv:http_request{url =, method =, headers =, body = | body_stream = true,
-- content_length =, timeout =} with callbacks {on_response(resp),
-- on_body(chunk), on_end(), on_error(message, code), on_writable()}.
function H.request(srv, opts, callbacks)
    if type(opts) ~= "table" then argerr(1, "http_request", "options table expected") end
    for k in pairs(opts) do
        if not REQ_OPTS[k] then argerr(1, "http_request", "unknown option '" .. tostring(k) .. "'") end
    end
    if callbacks == nil then callbacks = {} end
    if type(callbacks) ~= "table" then argerr(2, "http_request", "callbacks table expected") end
    for k, v in pairs(callbacks) do
        if not CALLBACKS[k] then argerr(2, "http_request", "unknown callback '" .. tostring(k) .. "'") end
        if type(v) ~= "function" then argerr(2, "http_request", k .. " must be a function") end
    end
    local ok, q, err, code = pcall(start, srv, opts, callbacks, "http_request", 1)
    if not ok then error(q, 2) end
    return q, err, code
end

---------------------------------------------------------------------------
-- fetch: the coroutine form, on the callbacks above.
---------------------------------------------------------------------------

local FETCH_OPTS = { method = true, headers = true, body = true, content_length = true, timeout = true,
                     max_body = true, stream = true, buffer = true }

local function notify(w)
    local co = w.waiter
    if co then
        w.waiter = nil
        wake(w.s, co, w)
    end
end

local function wait(w, co)
    w.waiter = co
    suspend(w.s, "fetch", nil, w)
    if w.waiter == co then w.waiter = nil end
end

-- A streamed response's next piece (waiting for it): the chunk; nil at
-- the end; nil, err when it failed (a response cut short is never taken
-- for a complete one).
function Resp:read_chunk()
    local w = self._w
    if not w then
        local b = self.body
        self.body = nil
        if b and b ~= "" then return b end
        return nil
    end
    for _ = 1, math.huge do
        local hd = w.qh
        if hd <= w.qt then
            local chunk = w.q[hd]
            w.q[hd] = nil
            w.qh = hd + 1
            w.qbytes = w.qbytes - #chunk
            if w.req.paused and w.qbytes <= w.buffer / 2 then w.req:resume() end
            return chunk
        end
        if w.err then return nil, w.err, w.code end
        if w.ended then return nil end
        local co = in_coroutine()
        if not co then error("nanosrv: read_chunk needs a coroutine (where fetch ran)", 2) end
        if w.req.paused then w.req:resume() end
        wait(w, co)
    end
end

-- for chunk in res:body_chunks() do ... end; a failure raises.
function Resp:body_chunks()
    return function()
        local chunk, err = self:read_chunk()
        if err then error("nanosrv: fetch " .. self.url .. ": " .. err, 2) end
        return chunk
    end
end

-- Drop the rest of a streamed response.
function Resp:close()
    local w = self._w
    if w and not w.ended and not w.err then
        w.req:cancel()
        w.err = "closed"
    end
end

-- res, err = srv:fetch(url, opts): from a coroutine (any handler, a timer,
-- srv:spawn). opts: method (GET, or POST with a body), headers, body (a
-- string, or a function returning the pieces of a streamed body and then
-- nil; content_length declares its size, else it is sent chunked), timeout
-- (ms, whole request), max_body (default 64 MiB), stream = true (the body
-- is read with res:body_chunks(); reading pauses past buffer bytes).
function H.fetch(srv, url, opts)
    if type(url) ~= "string" then argerr(1, "fetch", "url string expected, got " .. type(url)) end
    if opts == nil then opts = {} end
    if type(opts) ~= "table" then argerr(2, "fetch", "options table expected") end
    for k in pairs(opts) do
        if not FETCH_OPTS[k] then argerr(2, "fetch", "unknown option '" .. tostring(k) .. "'") end
    end
    local max_body = opts.max_body or FETCH_MAX_BODY
    if type(max_body) ~= "number" or max_body < 0 then argerr(2, "fetch", "max_body must be a byte count >= 0") end
    local buffer = opts.buffer or STREAM_BUFFER
    if type(buffer) ~= "number" or buffer < 1 then argerr(2, "fetch", "buffer must be a byte count >= 1") end
    local co = in_coroutine()
    if not co then
        error("nanosrv: fetch needs a coroutine (a handler, a timer or srv:spawn); "
              .. "outside one use srv:http_request", 2)
    end
    local stream = opts.stream and true or false
    local w = { s = srv, parts = {}, n = 0, ended = false, q = {}, qh = 1, qt = 0, qbytes = 0,
                buffer = buffer }
    local cb = {
        on_response = function(resp) w.res = resp; notify(w) end,
        on_body = function(chunk)
            if stream then
                local tl = w.qt + 1
                w.q[tl], w.qt, w.qbytes = chunk, tl, w.qbytes + #chunk
                if w.qbytes > buffer and not w.req.paused and w.req:pause() then
                    w.res.pauses = (w.res.pauses or 0) + 1 -- backpressure, for the curious and the tests
                end
            else
                w.n = w.n + #chunk
                if w.n > max_body then
                    w.req:cancel()
                    w.err, w.code = describe(C.NSV_ETOOBIG, "the body is larger than max_body ("
                                             .. max_body .. " bytes)"), C.NSV_ETOOBIG
                else
                    w.parts[#w.parts + 1] = chunk
                end
            end
            notify(w)
        end,
        on_end = function() w.ended = true; notify(w) end,
        on_error = function(msg, code) w.err, w.code = msg, code; notify(w) end,
    }
    local body, body_fn = opts.body, nil
    if type(body) == "function" then body_fn, body = body, nil end
    local o = { url = url, method = opts.method or (body_fn and "POST"), headers = opts.headers, body = body, timeout = opts.timeout,
                body_stream = body_fn and true or nil, content_length = body_fn and opts.content_length or nil }
    if opts.content_length ~= nil and not body_fn then
        argerr(2, "fetch", "content_length is for a body function (a body string has its own length)")
    end
    local ok, q, err, code = pcall(start, srv, o, cb, "fetch", 2)
    if not ok then error(q, 2) end
    if not q then return nil, err, code end
    w.req = q
    if body_fn then
        -- A body function or a write that raises (past content_length)
        -- leaves no request behind.
        for _ = 1, math.huge do
            if w.err then break end
            local fine, piece = pcall(body_fn)
            if not fine then q:cancel(); error(piece, 0) end
            if piece == nil then break end
            if type(piece) ~= "string" then
                q:cancel()
                argerr(2, "fetch", "the body function returned a " .. type(piece) .. " (strings, then nil)")
            end
            if piece ~= "" then
                local wrote, werr = pcall(q.write, q, piece)
                if not wrote then q:cancel(); error(werr, 0) end
                if not werr then break end -- closed: the outcome is in w
            end
        end
        if not w.err and not q.done then
            local ok, ferr = pcall(q.finish, q)
            if not ok then q:cancel(); error(ferr, 2) end
        end
    end
    while not w.res and not w.err do wait(w, co) end
    if not w.res then return nil, w.err, w.code end
    local res = w.res
    res.url, res.request = url, q
    if stream then
        res.pauses = res.pauses or 0
        res._w = w
        return res
    end
    while not w.ended and not w.err do wait(w, co) end
    if w.err then return nil, w.err, w.code end
    res.body = table.concat(w.parts)
    return res
end

return H
