-- nanosrv/websocket.lua - the WebSocket client (nsv_ws_connect) on the
-- server's own loop, in two forms:
--   srv:ws_connect(url, opts, handlers) -> ws | nil, err, code
--       handlers {open, message, close, error} run in pooled coroutines,
--       one at a time per connection, as the server's WebSocket handlers
--   srv:websocket(url, opts) -> ws | nil, err, code
--       waits in the calling coroutine until the socket is open; then
--       ws:receive() waits for the next message (lua-resty-websocket's
--       client in spirit: recv_frame, send_text, ... are there too)
-- The library does the handshake, the masking and the protocol rules. The
-- object is a WebSocket of nanosrv.lua (send, close, queued) registered in
-- srv._ws, so WS_MESSAGE, WS_CLOSE and CLOSE reach it through the
-- binding's dispatch as the server's sockets do; WS_OPEN and ERROR of its
-- id come here (srv._wsc_ev). Loaded by nanosrv.lua (M.ws_client()),
-- which passes itself.

local M = ...
if type(M) ~= "table" then M = require("nanosrv") end
local ffi = require("ffi")
local bit = require("bit")
local I = M._internal
local C, suspend, wake, in_coroutine, conn_key = I.C, I.suspend, I.wake, I.in_coroutine, I.conn_key
local TIMEDOUT, ws_call, ws_reading, check, srv_handle = I.TIMEDOUT, I.ws_call, I.ws_reading, I.check, I.srv_handle
local WS = M.WebSocket

local EV_WS_OPEN, EVF_TLS = C.NSV_EV_WS_OPEN, C.NSV_EVF_TLS
local EINVAL, ETIMEDOUT, ESTALE, ESTATE, ECLOSED = C.NSV_EINVAL, C.NSV_ETIMEDOUT, C.NSV_ESTALE, C.NSV_ESTATE,
                                                   C.NSV_ECLOSED

local RECV_BUFFER = 1048576 -- unread bytes (coroutine form) past which reading pauses
local TYPES = { [C.NSV_WS_TEXT] = "text", [C.NSV_WS_BINARY] = "binary", [C.NSV_WS_PING] = "ping",
                [C.NSV_WS_PONG] = "pong" }

local W = {}

-- Raised from connect/connect_cb, which nanosrv.lua's methods call: level 4
-- is the caller of srv:websocket / srv:ws_connect.
local function argerr(n, fname, msg) error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 4) end
-- Without a position: raised inside start(), re-raised by the entry point.
local function argerr0(n, fname, msg) error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 0) end

local function log(what, err)
    io.stderr:write("nanosrv: websocket client ", what, ": ", tostring(err), "\n")
    io.stderr:flush()
end

local describe, last_detail = I.describe, I.last_detail

---------------------------------------------------------------------------
-- Arguments: headers as the HTTP client takes them (a table, a list of
-- {name, value} pairs or a "Name: value\r\n" block), protocols as a list
-- of tokens or the comma-separated text.
---------------------------------------------------------------------------

local function header_block(h, n, fname) return I.header_block(h, n, fname, argerr0) end

local function protocols_arg(p, n, fname)
    if p == nil then return "" end
    if type(p) == "string" then return p end
    if type(p) ~= "table" then argerr0(n, fname, "protocols must be a string or a list of strings") end
    for k, v in ipairs(p) do
        if type(v) ~= "string" then argerr0(n, fname, "protocols[" .. k .. "] must be a string") end
    end
    return table.concat(p, ", ")
end

local function ms_arg(v, n, fname, what)
    if v == nil then return nil end
    if type(v) ~= "number" or v ~= v or v <= 0 or v > 2 ^ 31 then
        argerr0(n, fname, what .. " must be a number of milliseconds > 0")
    end
    return math.ceil(v)
end

---------------------------------------------------------------------------
-- The client object: a WebSocket (send, queued from nanosrv.lua) plus
-- url, opened, protocol, headers, path, tls, error.
---------------------------------------------------------------------------

local Client = setmetatable({}, { __index = WS })
Client.__index = Client
Client.__tostring = function(ws) return "nanosrv.websocket_client(" .. ws.url .. ")" end
M.WebSocketClient = Client

local function stop_timer(ws)
    local tm = ws._timer
    if tm then ws._timer = nil; tm:cancel() end
end

-- Coroutine form: wake the reader (connect's or receive's wait).
local function notify(ws)
    local co = ws._waiter
    if co then
        ws._waiter = nil
        wake(ws._s, co, ws)
    end
end

local function wait(ws, co, timeout_ms)
    ws._waiter = co
    local r = suspend(ws._s, "websocket", timeout_ms, ws)
    if ws._waiter == co then ws._waiter = nil end
    return r
end

-- Coroutine form: one record for receive (data, type, code), in order.
local function push(ws, data, typ, code)
    local tl = ws._rt + 1
    ws._rd[tl], ws._rtyp[tl], ws._rcode[tl] = data or false, typ, code or false
    ws._rt = tl
    if data then
        local q = ws._rbytes + #data
        ws._rbytes = q
        -- The reader is behind: stop reading, so TCP slows the server.
        if q > ws._buffer and not ws._rpaused and not ws.closed then
            ws._rpaused = true
            ws.pauses = ws.pauses + 1
            ws_reading(ws)
        end
    end
    notify(ws)
end

local function failed(ws, msg, code)
    if ws.error or ws.closed then return end
    ws.error, ws.error_code = msg, code
    stop_timer(ws)
    if ws._direct then
        if ws.opened then push(ws, nil, msg, code) else notify(ws) end
    elseif ws._h.error then
        ws_call(ws._s, ws, "error", msg, code)
    else
        log(ws.url, msg)
    end
end

-- Called by nanosrv.lua's ws_closed (CLOSE, or WS_CLOSE from the server),
-- before the close handler.
local function on_closed(ws, code, reason)
    stop_timer(ws)
    if ws._direct then
        if ws.opened then push(ws, reason or "", "close", code) else notify(ws) end
    end
end

local function opened(srv, ws, ev)
    if ws.closed or ws.error then return end -- aborted (timeout, close) in the same batch
    stop_timer(ws)
    local a = srv._arena
    local headers, i = {}, 0
    local no, nl, vo, vl = ws._s._hdr[1], ws._s._hdr[2], ws._s._hdr[3], ws._s._hdr[4]
    while C.nsv_ev_header_at(ev, a, i, no, nl, vo, vl) == 0 do
        local k = ffi.string(a + no[0], nl[0]):lower()
        local v = ffi.string(a + vo[0], vl[0])
        local old = headers[k]
        if old == nil then headers[k] = v
        elseif type(old) == "table" then old[#old + 1] = v
        else headers[k] = { old, v } end
        i = i + 1
    end
    ws.headers, ws.status = headers, ev.code
    local p = headers["sec-websocket-protocol"]
    ws.protocol = type(p) == "string" and p or nil
    ws.path = ffi.string(a + ev.path_off, ev.path_len)
    ws.tls = bit.band(ev.flags, EVF_TLS) ~= 0
    ws.opened = true
    if ws._direct then notify(ws) else ws_call(srv, ws, "open") end
end

-- srv._wsc_ev: WS_OPEN of a client socket (ws given), or an ERROR event
-- (true when it was a client socket's).
local function on_event(srv, i, ws)
    local ev = srv._evs[i]
    if not ws then
        ws = srv._ws[conn_key(ev.conn)]
        if not (ws and ws._client and ws._c == ev.conn) then return false end
    end
    if ev.type == EV_WS_OPEN then
        opened(srv, ws, ev)
    else
        failed(ws, describe(ev.code, ffi.string(srv._arena + ev.body_off, ev.body_len)), ev.code)
    end
    return true
end

local function open_timeout(ws, ms)
    ws._timer = nil
    if ws.opened or ws.closed or ws.error then return end
    local h = ws._s._h
    if h ~= nil then C.nsv_abort(h, ws._c) end -- CLOSE follows
    failed(ws, describe(ETIMEDOUT, "not open within " .. ms .. " ms (the timeout option)"), ETIMEDOUT)
end

local OPTS = { headers = true, protocols = true, timeout = true, buffer = true }

-- Returns the socket, or nil, err, code for what the library refuses at
-- the start (URL, wss:// without TLS, a stopping server); bad arguments
-- raise, naming the argument.
local function start(srv, url, o, fname, n, direct)
    if type(url) ~= "string" then argerr0(1, fname, "url must be a string") end
    for k in pairs(o) do
        if not OPTS[k] then
            argerr0(n, fname, "unknown option '" .. tostring(k) .. "'"
                    .. (direct and " (handlers go to srv:ws_connect)" or ""))
        end
    end
    local hb = header_block(o.headers, n, fname)
    local protos = protocols_arg(o.protocols, n, fname)
    local timeout = ms_arg(o.timeout, n, fname, "timeout")
    local buffer = o.buffer or RECV_BUFFER
    if type(buffer) ~= "number" or buffer < 1 then argerr0(n, fname, "buffer must be a byte count >= 1") end
    local h = srv._h
    if h == nil then error("nanosrv: server is closed", 0) end
    local id = C.nsv_ws_connect(h, url, #url, hb, #hb, protos, #protos, 0)
    if id < 0 then
        local code = tonumber(id)
        local msg = describe(code, last_detail(srv))
        if code == EINVAL then argerr0(n, fname, msg) end
        return nil, msg, code
    end
    id = ffi.cast("uint64_t", id)
    local ws = setmetatable({ _c = id, id = id, _s = srv, _client = true, _on_closed = on_closed, url = url,
                              data = {}, closed = false, opened = false }, Client)
    if not srv._hdr then
        srv._hdr = { ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]") }
    end
    if direct then
        ws._direct, ws._h = true, {
            message = function(w, data, op) push(w, data, TYPES[op] or op) end,
        }
        ws._rd, ws._rtyp, ws._rcode, ws._rh, ws._rt, ws._rbytes = {}, {}, {}, 1, 0, 0
        ws._buffer, ws._rtimeout, ws.pauses = buffer, timeout, 0
    end
    srv._ws[conn_key(id)] = ws
    srv._wsc_ev = on_event
    if timeout then ws._timer = srv:timer(timeout, function() open_timeout(ws, timeout) end) end
    return ws
end

-- ws, err, code = srv:websocket(url, {headers =, protocols =, timeout =,
-- buffer =}) in a coroutine: waits until the socket is open.
function W.connect(srv, url, opts)
    if opts == nil then opts = {} end
    if type(opts) ~= "table" then argerr(2, "websocket", "options table expected") end
    local co = in_coroutine()
    if not co then
        error("nanosrv: websocket(url) needs a coroutine (a handler, a timer or srv:spawn); "
              .. "outside one use srv:ws_connect", 3)
    end
    local ok, ws, err, code = pcall(start, srv, url, opts, "websocket", 2, true)
    if not ok then error(ws, 3) end
    if not ws then return nil, err, code end
    for _ = 1, math.huge do
        if ws.opened then return ws end
        if ws.error then return nil, ws.error, ws.error_code end
        if ws.closed then return nil, "closed before it opened", C.NSV_ECLOSED end
        wait(ws, co)
    end
end

local HANDLERS = { open = true, message = true, close = true, error = true }

-- srv:ws_connect(url, opts, {open = f(ws), message = f(ws, data, typ),
-- close = f(ws, code, reason), error = f(ws, message, code)}).
function W.connect_cb(srv, url, opts, handlers)
    if opts == nil then opts = {} end
    if type(opts) ~= "table" then argerr(2, "ws_connect", "options table expected") end
    if type(handlers) ~= "table" then argerr(3, "ws_connect", "table of handlers expected") end
    for k, v in pairs(handlers) do
        if not HANDLERS[k] then argerr(3, "ws_connect", "unknown handler '" .. tostring(k) .. "'") end
        if type(v) ~= "function" then argerr(3, "ws_connect", k .. " must be a function") end
    end
    if opts.buffer ~= nil then argerr(2, "ws_connect", "buffer is for srv:websocket(url) (receive)") end
    local ok, ws, err, code = pcall(start, srv, url, opts, "ws_connect", 2, false)
    if not ok then error(ws, 3) end
    if not ws then return nil, err, code end
    local m = handlers.message
    ws._h = { open = handlers.open, close = handlers.close, error = handlers.error,
              message = m and function(w, data, op) return m(w, data, TYPES[op] or op) end }
    return ws
end

---------------------------------------------------------------------------
-- Methods
---------------------------------------------------------------------------

-- data, typ = ws:receive(): the next message ("text", "binary"), or the
-- close (reason, "close", code), or nil, "timeout" (the socket stays
-- usable), nil, err (a failure; the close follows), nil, "closed" after
-- the close was received.
function Client:receive()
    if not self._direct then
        error("nanosrv: receive is for srv:websocket(url); srv:ws_connect gives messages to its handlers", 2)
    end
    for _ = 1, math.huge do
        local hd = self._rh
        if hd <= self._rt then
            local data, typ, code = self._rd[hd], self._rtyp[hd], self._rcode[hd]
            self._rd[hd], self._rtyp[hd], self._rcode[hd] = nil, nil, nil
            self._rh = hd + 1
            if data then
                local q = self._rbytes - #data
                self._rbytes = q
                if self._rpaused and q <= self._buffer / 2 then
                    self._rpaused = false
                    ws_reading(self)
                end
            end
            if typ == "close" then self._ended = true; return data, typ, code end
            if not data then return nil, typ, code end -- a failure: typ is its message
            return data, typ
        end
        if self._ended or (self.closed and not self.opened) then return nil, "closed" end
        local co = in_coroutine()
        if not co then error("nanosrv: receive needs a coroutine (where srv:websocket ran)", 2) end
        if wait(self, co, self._rtimeout) == TIMEDOUT then return nil, "timeout" end
    end
end

-- The wait of each receive (ms; nil or 0: no limit). Default: the
-- timeout option.
function Client:settimeout(ms)
    if ms ~= nil and (type(ms) ~= "number" or ms < 0) then
        error("bad argument #1 to 'settimeout' (milliseconds >= 0 expected)", 2)
    end
    self._rtimeout = (ms and ms > 0) and math.ceil(ms) or nil
end

-- Start the close handshake (code default 1000). true, or false,
-- "closed" when it is closed or closing already. Before the open it drops
-- the connection attempt.
function Client:close(code, reason)
    if self.closed or self._closing then return false, "closed" end
    code, reason = code or 1000, reason or ""
    if type(code) ~= "number" then error("bad argument #1 to 'close' (close code number expected)", 2) end
    if type(reason) ~= "string" then error("bad argument #2 to 'close' (reason string expected)", 2) end
    local h = srv_handle(self._s)
    if not self.opened then
        stop_timer(self)
        C.nsv_abort(h, self._c)
    else
        local r = C.nsv_ws_close(h, self._c, code, reason, #reason)
        if r == ESTALE or r == ECLOSED or r == ESTATE then
            last_detail(self._s)
            return false, "closed"
        end
        check(r, "ws_close", self._s)
    end
    self._closing = true
    -- No WS_CLOSE comes for a close we start: the close handler (and
    -- receive) report our code.
    if not self._close_code then self._close_code, self._close_reason = code, reason end
    return true
end

-- lua-resty-websocket's names: bytes sent or nil, err; recv_frame returns
-- data, typ, err (for a close: reason, "close", code).
function Client:recv_frame()
    local data, typ, code = self:receive()
    if data == nil then return nil, nil, typ end
    return data, typ, code
end
local function sender(typ)
    return function(self, data)
        local ok, err = self:send(data or "", typ)
        if ok then return #(data or "") end
        return nil, err
    end
end
Client.send_text, Client.send_binary = sender("text"), sender("binary")
Client.send_ping, Client.send_pong = sender("ping"), sender("pong")
function Client:send_close(code, reason)
    local ok, err = self:close(code, reason)
    if ok then return 1 end
    return nil, err
end

return W
