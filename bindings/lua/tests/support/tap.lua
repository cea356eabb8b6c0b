-- Minimal TAP producer plus a libc socket client for the Lua tests.
-- LuaJIT ships no socket library, so the client is a few libc calls
-- through the FFI; every wait is bounded in count and time.

local ffi = require("ffi")

local T = { n = 0, failed = 0 }

function T.ok(cond, name, diag)
    T.n = T.n + 1
    if cond then
        io.write("ok ", T.n, " - ", name, "\n")
    else
        T.failed = T.failed + 1
        io.write("not ok ", T.n, " - ", name, "\n")
        if diag then io.write("# ", (tostring(diag):gsub("\n", "\n# ")), "\n") end
    end
    io.flush()
    return cond
end

function T.is(got, want, name)
    return T.ok(got == want, name, string.format("got %q, want %q", tostring(got), tostring(want)))
end

function T.like(got, pat, name)
    return T.ok(type(got) == "string" and got:find(pat) ~= nil, name,
                string.format("%q does not match %q", tostring(got), pat))
end

-- Expect f(...) to raise an error matching pat.
function T.raises(pat, name, f, ...)
    local ok, err = pcall(f, ...)
    return T.ok(not ok and tostring(err):find(pat) ~= nil, name,
                ok and "no error raised" or ("error was: " .. tostring(err)))
end

function T.skip(name, why)
    T.n = T.n + 1
    io.write("ok ", T.n, " - ", name, " # SKIP ", why, "\n")
end

function T.done()
    io.write("1..", T.n, "\n")
    os.exit(T.failed == 0 and 0 or 1)
end

---------------------------------------------------------------------------

ffi.cdef [[
    struct nsvt_sockaddr_in { uint16_t family; uint16_t port; uint32_t addr; char zero[8]; };
    struct nsvt_pollfd { int fd; short events; short revents; };
    int socket(int domain, int type, int protocol);
    int connect(int fd, const struct nsvt_sockaddr_in *addr, uint32_t len);
    long send(int fd, const char *buf, size_t len, int flags);
    long recv(int fd, char *buf, size_t len, int flags);
    int poll(struct nsvt_pollfd *fds, unsigned long n, int timeout);
    int close(int fd);
    int shutdown(int fd, int how);
    uint16_t htons(uint16_t v);
    int setsockopt(int fd, int level, int name, const void *val, uint32_t len);
    int bind(int fd, const struct nsvt_sockaddr_in *addr, uint32_t len);
    int inet_pton(int af, const char *src, void *dst);
    int getsockname(int fd, struct nsvt_sockaddr_in *addr, uint32_t *len);
    uint16_t ntohs(uint16_t v);
]]
local C = ffi.C
local AF_INET, SOCK_STREAM, POLLIN, MSG_NOSIGNAL = 2, 1, 1, 0x4000

local Client = {}
Client.__index = Client

-- Connect to 127.0.0.1:port. pump (optional) is called while waiting, so a
-- test can drive an in-process server from the same thread. from: a local
-- IPv4 address to connect from (e.g. "127.0.0.2", for address lists).
function T.connect(port, pump, from)
    local fd = C.socket(AF_INET, SOCK_STREAM, 0)
    assert(fd >= 0, "socket failed")
    if from then
        local src = ffi.new("struct nsvt_sockaddr_in")
        src.family = AF_INET
        assert(C.inet_pton(AF_INET, from, ffi.cast("char *", src) + 4) == 1, "bad address " .. from)
        assert(C.bind(fd, src, ffi.sizeof(src)) == 0, "bind to " .. from .. " failed")
    end
    local sa = ffi.new("struct nsvt_sockaddr_in")
    sa.family = AF_INET
    sa.port = C.htons(port)
    sa.addr = 0x0100007f -- 127.0.0.1 in network order on little-endian
    if ffi.abi("be") then sa.addr = 0x7f000001 end
    -- The kernel completes the handshake from the listen backlog, so a
    -- blocking connect works even before the server thread accepts.
    assert(C.connect(fd, sa, ffi.sizeof(sa)) == 0, "connect failed")
    return setmetatable({ fd = fd, pump = pump, buf = "", closed = false }, Client)
end

-- The client's own port (what the server sees as the peer's).
function Client:local_port()
    local sa, len = ffi.new("struct nsvt_sockaddr_in"), ffi.new("uint32_t[1]", ffi.sizeof("struct nsvt_sockaddr_in"))
    if C.getsockname(self.fd, sa, len) ~= 0 then return nil end
    return C.ntohs(sa.port)
end

function Client:send(s)
    local off = 0
    while off < #s do
        local n = tonumber(C.send(self.fd, ffi.cast("const char *", s) + off, #s - off, MSG_NOSIGNAL))
        if n <= 0 then return false end
        off = off + n
    end
    return true
end

local rbuf = ffi.new("char[65536]")
local pfd = ffi.new("struct nsvt_pollfd[1]")

-- Send without blocking: the bytes the kernel took now (0 when the socket
-- is full), or nil once the connection failed.
local MSG_DONTWAIT, EAGAIN_ERRNO = 0x40, 11
function Client:try_send(s, off)
    off = off or 0
    if off >= #s then return 0 end
    local n = tonumber(C.send(self.fd, ffi.cast("const char *", s) + off, #s - off, MSG_NOSIGNAL + MSG_DONTWAIT))
    if n < 0 then return ffi.errno() == EAGAIN_ERRNO and 0 or nil end
    return n
end

-- Send all of s while pumping the in-process server (bounded in rounds).
function Client:send_pumped(s, rounds)
    local off = 0
    for _ = 1, rounds or 100000 do
        if off >= #s then return true end
        local n = self:try_send(s, off)
        if not n then return false end
        off = off + n
        if self.pump then self.pump() end
    end
    return off >= #s
end

-- Read what is available, waiting at most ms; false once the peer closed.
function Client:fill(ms)
    if self.closed then return false end
    pfd[0].fd, pfd[0].events, pfd[0].revents = self.fd, POLLIN, 0
    if C.poll(pfd, 1, ms) <= 0 then return true end
    local n = tonumber(C.recv(self.fd, rbuf, 65536, 0))
    if n <= 0 then self.closed = true; return false end
    self.buf = self.buf .. ffi.string(rbuf, n)
    return true
end

-- Wait until have(buf) returns a value: at most timeout_ms / 5 rounds of
-- (pump the in-process server for <= 5 ms, read what arrived).
function Client:wait(have, timeout_ms)
    for _ = 1, math.ceil((timeout_ms or 5000) / 5) do
        local v = have(self.buf)
        if v ~= nil then return v end
        if self.pump then self.pump() end
        if not self:fill(self.pump and 0 or 5) then break end
    end
    return have(self.buf)
end

local function dechunk(s)
    local out, pos = {}, 1
    while true do
        local a, b, size = s:find("^(%x+)[^\r]*\r\n", pos)
        if not a then return nil end
        size = tonumber(size, 16)
        if size == 0 then
            local e = s:find("\r\n\r\n", b - 1, true)
            if not e then return nil end
            return table.concat(out), e + 3
        end
        if #s < b + size + 2 then return nil end
        out[#out + 1] = s:sub(b + 1, b + size)
        pos = b + size + 3
    end
end

-- Parse one HTTP response off the front of buf: returns {status, headers
-- (lower-case names), body, raw} and the rest, or nil if incomplete.
-- head = true for an answer to HEAD (no body whatever Content-Length says).
function T.parse_response(buf, head, eof)
    local e = buf:find("\r\n\r\n", 1, true)
    if not e then return nil end
    local head_text = buf:sub(1, e + 1)
    local status = tonumber(head_text:match("^HTTP/1%.%d (%d%d%d)"))
    local h = {}
    for k, v in head_text:gmatch("\n([^:\r\n]+):[ \t]*([^\r\n]*)") do h[k:lower()] = v end
    local rest = buf:sub(e + 4)
    local body
    if head or status == 204 or status == 304 or (status and status < 200) then
        body = ""
    elseif h["transfer-encoding"] == "chunked" then
        local used
        body, used = dechunk(rest)
        if not body then return nil end
        rest = rest:sub(used + 1)
        return { status = status, headers = h, body = body, chunked = true }, rest
    elseif h["content-length"] then
        local n = tonumber(h["content-length"])
        if #rest < n then return nil end
        body, rest = rest:sub(1, n), rest:sub(n + 1)
    elseif eof then
        body, rest = rest, ""
    else
        return nil
    end
    return { status = status, headers = h, body = body }, rest
end

-- Read one response (bounded wait); nil on timeout or early close.
function Client:response(head, timeout_ms)
    local r = self:wait(function(b)
        local res, rest = T.parse_response(b, head, self.closed)
        if res then self.buf = rest end
        return res
    end, timeout_ms)
    return r
end

function Client:request(raw, head, timeout_ms)
    self:send(raw)
    return self:response(head, timeout_ms)
end

-- Wait for the peer to close (bounded).
function Client:wait_closed(timeout_ms)
    self:wait(function() if self.closed then return true end end, timeout_ms)
    return self.closed
end

-- Close with a reset (SO_LINGER 0): the server sees the client vanish.
function Client:reset()
    local lg = ffi.new("int[2]", 1, 0)
    C.setsockopt(self.fd, 1, 13, lg, 8) -- SOL_SOCKET, SO_LINGER
    self:close()
end

function Client:close()
    if self.fd >= 0 then C.close(self.fd); self.fd = -1 end
end

-- Build a request; body optional; extra is a raw header block.
function T.req(method, target, body, extra)
    local s = method .. " " .. target .. " HTTP/1.1\r\nHost: t\r\n" .. (extra or "")
    if body then s = s .. "Content-Length: " .. #body .. "\r\n" end
    return s .. "\r\n" .. (body or "")
end

-- WebSocket client side (RFC 6455): handshake, masked frames out, frames in.
function T.ws_connect(port, path, pump)
    local c = T.connect(port, pump)
    c:send("GET " .. path .. " HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" ..
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    local head = c:wait(function(b)
        local e = b:find("\r\n\r\n", 1, true)
        if e then c.buf = b:sub(e + 4); return b:sub(1, e + 3) end
    end, 3000)
    return c, head
end

function Client:ws_send(opcode, payload)
    local n = #payload
    local hdr = string.char(0x80 + opcode)
    if n < 126 then hdr = hdr .. string.char(0x80 + n)
    else hdr = hdr .. string.char(0x80 + 126, bit.rshift(n, 8), bit.band(n, 255)) end
    local mask = { 0x11, 0x22, 0x33, 0x44 }
    local out = {}
    for i = 1, n do out[i] = string.char(bit.bxor(payload:byte(i), mask[(i - 1) % 4 + 1])) end
    return self:send(hdr .. string.char(unpack(mask)) .. table.concat(out))
end

-- Next server frame: opcode, payload (nil on timeout).
function Client:ws_read(timeout_ms)
    return self:wait(function(b)
        if #b < 2 then return nil end
        local op, n, pos = bit.band(b:byte(1), 15), bit.band(b:byte(2), 127), 3
        if n == 126 then
            if #b < 4 then return nil end
            n, pos = b:byte(3) * 256 + b:byte(4), 5
        end
        if #b < pos + n - 1 then return nil end
        self.buf = b:sub(pos + n)
        return { op, b:sub(pos, pos + n - 1) }
    end, timeout_ms)
end

-- Run a shell command in the background (stdout, stderr and exit status to
-- temporary files) so that a test can pump an in-process server while a
-- real client (curl, openssl) talks to it. `timeout` bounds the command.
function T.spawn(cmd, limit_s)
    local base = os.tmpname()
    os.execute("( timeout -s KILL " .. (limit_s or 60) .. " sh -c " .. T.shq(cmd) .. " >" .. base ..
               ".out 2>" .. base .. ".err </dev/null; echo $? >" .. base .. ".rc ) >/dev/null 2>&1 &")
    return { base = base }
end

-- Shell quoting of one word.
function T.shq(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local s = f:read("*a")
    f:close()
    return s
end
T.slurp = slurp

-- Wait for a spawned command, calling pump meanwhile (bounded): returns
-- exit status, stdout, stderr (status nil on timeout).
function T.wait_spawned(h, pump, timeout_ms)
    local rc
    for _ = 1, math.ceil((timeout_ms or 30000) / 5) do
        rc = slurp(h.base .. ".rc")
        if rc and rc:find("\n") then break end
        rc = nil
        if pump then pump() else os.execute("sleep 0.005") end
    end
    local out, err = slurp(h.base .. ".out") or "", slurp(h.base .. ".err") or ""
    if rc then
        for _, ext in ipairs({ "", ".out", ".err", ".rc" }) do os.remove(h.base .. ext) end
    end
    return rc and tonumber(rc), out, err
end

-- spawn + wait_spawned.
function T.run(cmd, pump, timeout_ms)
    return T.wait_spawned(T.spawn(cmd, math.ceil((timeout_ms or 30000) / 1000) + 5), pump, timeout_ms)
end

-- Start a server process that prints "listening on PORT"; returns {pid,
-- port, pipe} or nil, first line. `timeout` guarantees the process can
-- never outlive the test.
function T.start(cmd)
    local p = io.popen("echo $$; exec timeout -s KILL 300 " .. cmd .. " 2>&1", "r")
    local pid = tonumber(p:read("*l"))
    local line = p:read("*l") or ""
    local port = tonumber(line:match("^listening on (%d+)$"))
    if not port then
        if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
        p:close()
        return nil, line
    end
    return { pid = pid, port = port, pipe = p }
end

function T.stop(s)
    os.execute("kill " .. s.pid .. " 2>/dev/null")
    s.pipe:close()
end

-- Directory of the tests, and the binding directory above it.
T.dir = (debug.getinfo(1, "S").source:match("^@(.*)/support/[^/]*$")) or "bindings/lua/tests"
T.bindir = T.dir .. "/.."
package.path = T.bindir .. "/?.lua;" .. package.path

return T
