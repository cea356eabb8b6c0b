-- nanosrv/socket.lua - cosockets: srv:tcp() returns a socket with the
-- methods and return values of OpenResty's ngx.socket.tcp, on the
-- server's own loop (srv:connect with handlers the binding calls at once).
-- A method that has to wait (connect, receive, a send past the high water
-- mark, sslhandshake) suspends the calling coroutine; the loop serves
-- others meanwhile. Loaded by nanosrv.lua (M.socket()), which passes itself.

local M = ...
if type(M) ~= "table" then M = require("nanosrv") end
local I = M._internal
local C, suspend, wake, TIMEDOUT, has = I.C, I.suspend, I.wake, I.TIMEDOUT, I.has

local DEFAULT_TIMEOUT = 60000     -- ms, as lua_socket_{connect,send,read}_timeout
local KEEPALIVE_TIMEOUT = 60000   -- ms, as lua_socket_keepalive_timeout
local POOL_SIZE = 30              -- as lua_socket_pool_size
local BUFFER_LIMIT = 1048576      -- unread bytes past which reading pauses

local ECONNREFUSED, ETIMEDOUT, ENOTFOUND, EAGAIN = C.NSV_ECONNREFUSED, C.NSV_ETIMEDOUT, C.NSV_ENOTFOUND, C.NSV_EAGAIN

local function argerr(n, fname, msg) error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 3) end

---------------------------------------------------------------------------
-- Connection state: one per outbound connection, moved between socket
-- objects through the keepalive pool. Its handlers run in the poll loop.
---------------------------------------------------------------------------

-- Wake the reader and the writer waiting on the connection (one each, as
-- in OpenResty: a second reader gets "socket busy reading").
local function notify(cs)
    local co = cs.waiter
    if co then
        cs.waiter = nil
        wake(cs.s, co, cs)
    end
    co = cs.wwaiter
    if co then
        cs.wwaiter = nil
        wake(cs.s, co, cs)
    end
end

local pool_drop -- below

local function cs_handlers(cs)
    return {
        on_connect = function(_, tls)
            if tls then cs.tls_done = true else cs.connected = true end
            notify(cs)
        end,
        on_data = function(conn, data)
            local np = cs.np + 1
            cs.parts[np], cs.np, cs.nb = data, np, cs.nb + #data
            if cs.idle then return pool_drop(cs) end -- a pooled connection must stay silent
            -- Nobody is waiting for more: past the limit, let TCP slow the peer.
            if not cs.paused and cs.nb > BUFFER_LIMIT and not cs.waiter then
                if conn:pause() then
                    cs.paused = true
                    cs.pauses = cs.pauses + 1
                end
            end
            notify(cs)
        end,
        on_eof = function()
            cs.eof = true
            if cs.idle then return pool_drop(cs) end
            notify(cs)
        end,
        on_writable = function(_, ok)
            cs.blocked = not ok
            notify(cs)
        end,
        on_error = function(_, msg, code)
            cs.err_code, cs.err_msg = code, msg
            notify(cs)
        end,
        on_close = function()
            cs.closed = true
            if cs.idle then pool_drop(cs) end
            notify(cs)
        end,
    }
end

local function new_cs(srv)
    return { s = srv, parts = {}, np = 0, nb = 0, buf = "", eof = false, closed = false, connected = false,
             blocked = false, paused = false, pauses = 0, reused = 0, idle = false }
end

-- Wait (in the calling coroutine) for the next event of the connection;
-- false on timeout. slot: "waiter" (readers, connect) or "wwaiter" (send).
local function wait(cs, what, ms, slot)
    slot = slot or "waiter"
    if cs.paused and slot == "waiter" then -- a reader wants more: read again
        if cs.conn:resume() then cs.paused = false end
    end
    cs[slot] = coroutine.running()
    local r = suspend(cs.s, what, ms, cs)
    cs[slot] = nil
    return r ~= TIMEDOUT
end

local function merge(cs)
    if cs.np > 0 then
        cs.buf = cs.buf .. table.concat(cs.parts, "", 1, cs.np)
        for k = 1, cs.np do cs.parts[k] = nil end
        cs.np = 0
    end
    return cs.buf
end

local function consumed(cs, n)
    cs.nb = cs.nb - n
    if cs.paused and cs.nb <= BUFFER_LIMIT / 2 and not cs.closed then
        if cs.conn:resume() then cs.paused = false end
    end
end

-- Take n bytes, or everything (n nil), off the front of the buffer.
local function take(cs, n)
    local buf = merge(cs)
    if n == nil or n >= #buf then
        cs.buf = ""
        consumed(cs, #buf)
        return buf
    end
    cs.buf = buf:sub(n + 1)
    consumed(cs, n)
    return buf:sub(1, n)
end

-- Drop `skip` bytes after taking n.
local function take_skip(cs, n, skip)
    local d = take(cs, n)
    if skip > 0 then take(cs, skip) end
    return d
end

local function ended(cs) return cs.eof or cs.closed or cs.err_code ~= nil end

local function release(cs, abort)
    if not cs.closed and cs.conn then
        if abort then cs.conn:abort() else cs.conn:close() end
    end
    cs.closed = true
end

---------------------------------------------------------------------------
-- The keepalive pool: per server, per "host:port" (or opts.pool), idle
-- connections waiting to be taken by a later connect.
---------------------------------------------------------------------------

local function pools(srv)
    local p = srv._cosocket_pools
    if not p then
        p = {}
        srv._cosocket_pools = p
    end
    return p
end

pool_drop = function(cs)
    local list = pools(cs.s)[cs.key]
    if list then
        for k = #list, 1, -1 do
            if list[k] == cs then table.remove(list, k) end
        end
    end
    cs.idle = false
    if cs.idle_timer then cs.idle_timer:cancel(); cs.idle_timer = nil end
    release(cs, true)
end

local function pool_take(srv, key)
    local list = pools(srv)[key]
    if not list then return nil end
    for _ = 1, #list do
        local cs = table.remove(list) -- the most recently used first
        if not cs then return nil end
        cs.idle = false
        if cs.idle_timer then cs.idle_timer:cancel(); cs.idle_timer = nil end
        if not ended(cs) and cs.nb == 0 then return cs end
        release(cs, true)
    end
    return nil
end

---------------------------------------------------------------------------
-- The socket object
---------------------------------------------------------------------------

local Sock = {}
Sock.__index = Sock
Sock.__tostring = function(s) return "nanosrv.cosocket(" .. (s._cs and s._cs.key or "closed") .. ")" end

local function new(srv)
    return setmetatable({ _s = srv, _ct = DEFAULT_TIMEOUT, _st = DEFAULT_TIMEOUT, _rt = DEFAULT_TIMEOUT }, Sock)
end

local function ms_arg(v, n, fname)
    if v == nil then return nil end
    if type(v) ~= "number" or v ~= v or v < 0 or v > 2 ^ 31 then argerr(n, fname, "timeout in ms >= 0 expected") end
    return v
end
local function timeout_of(v) return (v and v > 0) and math.ceil(v) or DEFAULT_TIMEOUT end

-- settimeout(ms): connect, send and read timeouts at once (0: the default, 60 s).
function Sock:settimeout(ms)
    ms = ms_arg(ms, 1, "settimeout")
    self._ct, self._st, self._rt = timeout_of(ms), timeout_of(ms), timeout_of(ms)
end

function Sock:settimeouts(connect_ms, send_ms, read_ms)
    connect_ms, send_ms, read_ms = ms_arg(connect_ms, 1, "settimeouts"), ms_arg(send_ms, 2, "settimeouts"),
                                   ms_arg(read_ms, 3, "settimeouts")
    self._ct, self._st, self._rt = timeout_of(connect_ms), timeout_of(send_ms), timeout_of(read_ms)
end

local function connect_error(cs, host)
    local code = cs.err_code
    if code == ECONNREFUSED then return "connection refused" end
    if code == ETIMEDOUT then return "timeout" end
    if code == ENOTFOUND then return host .. " could not be resolved" end
    if code then return "failed to connect: " .. tostring(cs.err_msg) end
    return "closed"
end

-- connect(host, port [, {pool =, pool_size =}]) -> 1, or nil, err.
function Sock:connect(host, port, opts)
    if type(host) ~= "string" or host == "" then argerr(1, "connect", "host name or address expected") end
    if host:sub(1, 5) == "unix:" then
        return nil, "failed to connect: unix domain sockets are not supported by this libnanosrv"
    end
    if type(port) == "string" then port = tonumber(port) end
    if type(port) ~= "number" or port ~= math.floor(port) or port < 1 or port > 65535 then
        argerr(2, "connect", "port number 1..65535 expected")
    end
    if opts ~= nil and type(opts) ~= "table" then argerr(3, "connect", "options table expected") end
    opts = opts or {}
    if opts.pool ~= nil and type(opts.pool) ~= "string" then argerr(3, "connect", "pool must be a string") end
    if opts.pool_size ~= nil and (type(opts.pool_size) ~= "number" or opts.pool_size < 1) then
        argerr(3, "connect", "pool_size must be a number >= 1")
    end
    if host:find("[%s/@?#]") then argerr(1, "connect", "host must not contain spaces, '/', '@', '?' or '#'") end
    if self._cs then self:close() end -- as OpenResty: a connected socket is closed first
    local srv = self._s
    local key = opts.pool or (host .. ":" .. port)
    local cs = pool_take(srv, key)
    if cs then
        cs.reused = cs.reused + 1
        self._cs = cs
        return 1
    end
    if not I.in_coroutine() then
        error("nanosrv: connect needs a coroutine (every handler runs in one unless the server "
              .. "option coroutines = false)", 2)
    end
    cs = new_cs(srv)
    cs.key, cs.pool_size = key, opts.pool_size
    local hostpart = host:find(":", 1, true) and ("[" .. host .. "]") or host
    local conn, code = srv:_connect_direct("tcp://" .. hostpart .. ":" .. port, cs_handlers(cs))
    if not conn then
        if code == ENOTFOUND then return nil, host .. " could not be resolved" end
        return nil, "failed to connect: " .. M.strerror(code)
    end
    cs.conn = conn
    for _ = 1, math.huge do
        if cs.connected then break end
        if ended(cs) then
            release(cs, true)
            return nil, connect_error(cs, host)
        end
        if not wait(cs, "connect", self._ct) then
            release(cs, true)
            return nil, "timeout"
        end
    end
    self._cs = cs
    return 1
end

-- sslhandshake(reused_session, server_name, ssl_verify) -> session (true
-- when reused_session is false), or nil, err. Sessions are not resumed:
-- the session returned is a token for the next call.
local Session = {}
function Sock:sslhandshake(reused_session, server_name, ssl_verify, send_status_req)
    local cs = self._cs
    if not cs or cs.closed then return nil, "closed" end
    if not has("nsv_tls_upgrade") then return nil, "TLS upgrade is not available in this libnanosrv" end
    if server_name ~= nil and type(server_name) ~= "string" then
        argerr(2, "sslhandshake", "server name string expected")
    end
    if send_status_req then return nil, "OCSP status requests are not supported" end
    server_name = server_name or ""
    local flags = ssl_verify and C.NSV_TLS_UPGRADE_VERIFY or 0
    local srv = self._s
    local deadline = M.millis() + self._ct
    for _ = 1, math.huge do
        local h = srv._h
        if h == nil then return nil, "closed" end
        local r = C.nsv_tls_upgrade(h, cs.conn.id, server_name, #server_name, flags)
        if r == 0 then break end
        if r ~= EAGAIN then return nil, "handshake failed: " .. I.errmsg(r, "sslhandshake", srv) end
        -- Output queued before the call is still going out: retry soon.
        if M.millis() >= deadline then return nil, "timeout" end
        srv:sleep(1)
        if ended(cs) then break end
    end
    for _ = 1, math.huge do
        if cs.tls_done then break end
        if ended(cs) then
            local msg = cs.err_code == ETIMEDOUT and "timeout"
                or ("handshake failed: " .. tostring(cs.err_msg or "connection closed"))
            release(cs, true)
            self._cs = nil
            return nil, msg
        end
        if not wait(cs, "sslhandshake", self._ct) then
            release(cs, true)
            self._cs = nil
            return nil, "timeout"
        end
    end
    if reused_session == false then return true end
    return setmetatable({}, Session)
end

-- Strings, numbers and (nested) arrays of them, as OpenResty's send.
local function flatten(v, out, depth)
    local t = type(v)
    if t == "string" then out[#out + 1] = v
    elseif t == "number" then out[#out + 1] = tostring(v)
    elseif t == "table" then
        if depth > 100 then error("bad argument #1 to 'send' (table nested too deeply)", 4) end
        for k = 1, #v do flatten(v[k], out, depth + 1) end
    else
        error("bad argument #1 to 'send' (bad data type " .. t .. " found)", 4)
    end
end

-- send(data) -> bytes queued, or nil, err. Waits while the connection is
-- past its high water mark; a send timeout closes it (as OpenResty).
function Sock:send(data)
    local t = type(data)
    if t == "number" then data = tostring(data)
    elseif t == "table" then
        local out = {}
        flatten(data, out, 0)
        data = table.concat(out)
    elseif t ~= "string" then
        argerr(1, "send", "string, number or array table expected, got " .. t)
    end
    local cs = self._cs
    if not cs or cs.closed or cs.err_code then return nil, "closed" end
    if cs.wwaiter then return nil, "socket busy writing" end
    local ok, r = pcall(cs.conn.send, cs.conn, data)
    if not ok then -- past max_output
        release(cs, true)
        self._cs = nil
        return nil, tostring(r)
    end
    if not r then self._cs = nil; return nil, "closed" end
    if cs.blocked and I.in_coroutine() then
        for _ = 1, math.huge do
            if not cs.blocked then break end
            if cs.closed or cs.err_code then self._cs = nil; return nil, "closed" end
            if not wait(cs, "send", self._st, "wwaiter") then
                release(cs, true)
                self._cs = nil
                return nil, "timeout"
            end
        end
    end
    return #data
end

-- A read failed: the socket is closed, except on a timeout.
local function read_error(self, cs, err, partial)
    if err ~= "timeout" then
        release(cs, cs.err_code ~= nil)
        self._cs = nil
    end
    return nil, err, partial
end

-- receive(size) / receive("*l") (the default) / receive("*a") -> data, or
-- nil, err, partial.
function Sock:receive(pat)
    local cs = self._cs
    if not cs then return nil, "closed" end
    if cs.waiter then return nil, "socket busy reading" end
    if pat == nil then pat = "*l" end
    local size = type(pat) == "number" and pat or (type(pat) == "string" and tonumber(pat))
    if size then
        if size < 0 then argerr(1, "receive", "bad pattern argument: size must be >= 0") end
        size = math.floor(size)
        if size == 0 then return "" end
        for _ = 1, math.huge do
            if cs.nb >= size then return take(cs, size) end
            if ended(cs) then return read_error(self, cs, "closed", take(cs)) end
            if not wait(cs, "receive", self._rt) then return read_error(self, cs, "timeout", take(cs)) end
        end
    elseif pat == "*l" or pat == "*L" then
        local from = 1
        for _ = 1, math.huge do
            local buf = merge(cs)
            local e = buf:find("\n", from, true)
            if e then
                local line = take_skip(cs, e - 1, 1)
                if pat == "*L" then return line .. "\n" end
                return (line:gsub("\r", "")) -- every CR is ignored, as OpenResty
            end
            from = #buf + 1
            if ended(cs) then return read_error(self, cs, "closed", take(cs)) end
            if not wait(cs, "receive", self._rt) then return read_error(self, cs, "timeout", take(cs)) end
        end
    elseif pat == "*a" then
        for _ = 1, math.huge do
            if ended(cs) then
                if cs.err_code and cs.err_code ~= ETIMEDOUT and cs.nb == 0 then
                    return read_error(self, cs, "closed", "")
                end
                return take(cs)
            end
            if not wait(cs, "receive", self._rt) then return read_error(self, cs, "timeout", take(cs)) end
        end
    else
        argerr(1, "receive", "bad pattern argument: " .. tostring(pat))
    end
end

-- receiveany(max) -> what arrived (at most max bytes), or nil, err.
function Sock:receiveany(max)
    if type(max) == "string" then max = tonumber(max) end
    if type(max) ~= "number" or max < 1 then argerr(1, "receiveany", "bad max argument: a number >= 1 expected") end
    local cs = self._cs
    if not cs then return nil, "closed" end
    if cs.waiter then return nil, "socket busy reading" end
    for _ = 1, math.huge do
        if cs.nb > 0 then return take(cs, math.floor(max)) end
        if ended(cs) then return read_error(self, cs, "closed") end
        if not wait(cs, "receiveany", self._rt) then return nil, "timeout" end
    end
end

-- receiveuntil(pattern [, {inclusive = true}]) -> iterator it(size?):
-- without size, the data before the pattern (with it when inclusive);
-- with size, that data in pieces of at most size bytes, then nil (and
-- the iterator starts over). Errors: nil, err, partial.
function Sock:receiveuntil(pattern, opts)
    if type(pattern) ~= "string" or pattern == "" then argerr(1, "receiveuntil", "pattern must be a non-empty string") end
    if opts ~= nil and type(opts) ~= "table" then argerr(2, "receiveuntil", "options table expected") end
    local inclusive = opts and opts.inclusive and true or false
    local plen = #pattern
    local done = false -- size mode: the pattern was reached, the next call returns nil
    return function(size)
        local cs = self._cs
        if not cs then return nil, "closed" end
        if cs.waiter then return nil, "socket busy reading" end
        if size ~= nil then
            if type(size) ~= "number" or size < 1 then argerr(1, "receiveuntil iterator", "size must be a number >= 1") end
            size = math.floor(size)
            if done then
                done = false
                return nil
            end
        end
        for _ = 1, math.huge do
            local buf = merge(cs)
            local s = buf:find(pattern, 1, true)
            if s then
                if size and s - 1 > size then return take(cs, size) end
                local data = take_skip(cs, s - 1, plen)
                if inclusive then data = data .. pattern end
                if size then
                    if data == "" then return nil end
                    done = true
                end
                return data
            end
            -- No pattern yet: bytes that cannot begin one may go out in size mode.
            if size and #buf - (plen - 1) >= size then return take(cs, size) end
            if ended(cs) then return read_error(self, cs, "closed", take(cs)) end
            if not wait(cs, "receiveuntil", self._rt) then return read_error(self, cs, "timeout", take(cs)) end
        end
    end
end

-- close() -> 1, or nil, "closed". Queued output is sent first.
function Sock:close()
    local cs = self._cs
    if not cs then return nil, "closed" end
    self._cs = nil
    release(cs, false)
    return 1
end

-- setkeepalive(max_idle_ms, pool_size) -> 1, or nil, err: the connection
-- goes to the server's idle pool for its host:port (or opts.pool of
-- connect) and this object is closed. 0 ms: idle without a limit.
function Sock:setkeepalive(max_idle_ms, pool_size)
    max_idle_ms = ms_arg(max_idle_ms, 1, "setkeepalive")
    if pool_size ~= nil and (type(pool_size) ~= "number" or pool_size < 1) then
        argerr(2, "setkeepalive", "pool size must be a number >= 1")
    end
    local cs = self._cs
    if not cs then return nil, "closed" end
    if cs.waiter or cs.wwaiter then return nil, "socket busy" end
    if cs.nb > 0 then return nil, "unread data in buffer" end
    self._cs = nil
    if ended(cs) or cs.blocked then -- nothing worth keeping
        release(cs, cs.err_code ~= nil)
        return 1
    end
    local srv = self._s
    local list = pools(srv)[cs.key]
    if not list then
        list = {}
        pools(srv)[cs.key] = list
    end
    local limit = math.floor(pool_size or cs.pool_size or POOL_SIZE)
    while #list >= limit do pool_drop(list[1]) end -- the least recently used goes
    cs.idle = true
    if max_idle_ms == nil then max_idle_ms = KEEPALIVE_TIMEOUT end
    if max_idle_ms > 0 and srv._h ~= nil then
        cs.idle_timer = srv:timer(math.ceil(max_idle_ms), function()
            cs.idle_timer = nil
            if cs.idle then pool_drop(cs) end
        end)
    end
    list[#list + 1] = cs
    return 1
end

-- How many times this connection came out of the pool (0: new).
function Sock:getreusedtimes()
    local cs = self._cs
    if not cs then return nil, "closed" end
    return cs.reused
end

-- Not in OpenResty: unread bytes, whether reading is paused, and how
-- often it was (for tests and monitoring).
function Sock:buffered()
    local cs = self._cs
    if not cs then return 0, false, 0 end
    return cs.nb, cs.paused, cs.pauses
end

-- Idle connections in the pool of key ("host:port"), for tests and monitoring.
local function pooled(srv, key)
    local list = pools(srv)[key]
    return list and #list or 0
end

return { new = new, Socket = Sock, pooled = pooled, BUFFER_LIMIT = BUFFER_LIMIT }
