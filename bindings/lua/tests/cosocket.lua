-- Cosockets (srv:tcp(), OpenResty's ngx.socket.tcp): against tcp://
-- listeners of the same server and a separate python3 process; every
-- receive pattern, receiveuntil (inclusive, size), send of tables, read
-- and connect timeouts, refused, closed with partial data, the keepalive
-- pool, TLS through sslhandshake (verified, wrong name, unverified) and
-- backpressure on a 16 MiB answer read slowly.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

-- The separate peer process: an echo port, a port that never accepts, a
-- port nothing listens on.
local peer = io.popen("echo $$; exec timeout -s KILL 120 /usr/bin/python3 " .. T.dir .. "/support/cosocket_peer.py", "r")
local peer_pid = tonumber(peer:read("*l"))
local peer_line = peer:read("*l") or ""
local PY_ECHO, BLACKHOLE, REFUSED = peer_line:match("^listening on (%d+) (%d+) (%d+)$")
PY_ECHO, BLACKHOLE, REFUSED = tonumber(PY_ECHO), tonumber(BLACKHOLE), tonumber(REFUSED)
T.ok(PY_ECHO ~= nil, "the python3 peer started", peer_line)

local srv = nanosrv.server { idle_timeout_ms = 30000 }

-- Peers in process ----------------------------------------------------------
local echo_port = srv:listen("tcp://127.0.0.1:0", {
    on_data = function(c, d) c:send(d) end,
    on_eof = function(c) c:close() end,
})
-- First line = a command: "lines", "silent", "boundary", "big N".
local BIG_CHUNK = string.rep("0123456789abcdef", 4096) -- 64 KiB
local function big_pump(c)
    -- conn.writable changes only between polls: pace on the queued bytes too.
    while c.data.left and c.data.left > 0 and c.writable and not c.closed and c:queued() < 1048576 do
        local n = math.min(#BIG_CHUNK, c.data.left)
        c:send(n == #BIG_CHUNK and BIG_CHUNK or BIG_CHUNK:sub(1, n))
        c.data.left = c.data.left - n
    end
    if c.data.left == 0 then c.data.left = nil; c:close() end
end
local script_port = srv:listen("tcp://127.0.0.1:0", {
    on_data = function(c, d)
        c.data.got = (c.data.got or "") .. d
        local cmd = c.data.got:match("^([^\n]*)\n")
        if not cmd or c.data.cmd then return end
        c.data.cmd = cmd
        if cmd == "lines" then c:send("one\r\ntwo\nth\rree\nfour"); c:close()
        elseif cmd == "boundary" then c:send("hello, world! -agentzh\r\n--abcedhb blah blah\r\n--abcedhb")
        elseif cmd == "all" then c:send("everything\nto the end"); c:close()
        elseif cmd:match("^big ") then c.data.left = tonumber(cmd:match("%d+")); big_pump(c)
        end -- "silent": nothing
    end,
    on_writable = function(c, ok) if ok then big_pump(c) end end,
    on_eof = function() end,
})

-- Run f in a coroutine of the server and pump until it ends (bounded).
local function co_run(f, rounds)
    local th = srv:spawn(f)
    for _ = 1, rounds or 6000 do
        if th.status == "dead" then break end
        srv:poll(5)
    end
    T.ok(th.status == "dead", "the test coroutine finished")
    return th:wait()
end

-- receive patterns --------------------------------------------------------------
co_run(function()
    local s = srv:tcp()
    T.is(s:connect("127.0.0.1", echo_port), 1, "connect returns 1")
    T.is(s:getreusedtimes(), 0, "a new connection was reused 0 times")
    T.is(s:send({ "ab", { "c", 42 }, "\r\nline2\n" }), 13, "send flattens nested tables and numbers; returns the bytes")
    T.is(s:receive(3), "abc", "receive(size)")
    T.is(s:receive("*l"), "42", "receive('*l') strips CR and LF")
    T.is(s:receive(), "line2", "receive() is '*l'")
    T.is(s:send(12345), 5, "send(number)")
    T.is(s:receiveany(2), "12", "receiveany(max) gives at most max bytes")
    T.is(s:receiveany(100), "345", "receiveany gives what arrived")
    T.is(s:receive(0), "", "receive(0) is the empty string")
    s:close()
end)

co_run(function()
    local s = srv:tcp()
    s:connect("127.0.0.1", echo_port)
    s:send("xyz")
    T.is(s:receive("3"), "xyz", "receive('3'): a numeric string is a size")
    s:settimeout(50)
    local d, err, partial = s:receive(10)
    T.ok(d == nil and err == "timeout" and partial == "", "read timeout: nil, 'timeout', partial")
    s:send("again\n")
    T.is(s:receive(), "again", "the socket is still usable after a read timeout")
    s:send("half")
    d, err, partial = s:receive()
    T.ok(d == nil and err == "timeout" and partial == "half", "a line timeout returns the partial line", partial)
    T.is(s:close(), 1, "close returns 1")
    local ok, cerr = s:close()
    T.ok(ok == nil and cerr == "closed", "a second close: nil, 'closed'")
    d, err = s:receive()
    T.ok(d == nil and err == "closed", "receive on a closed socket: nil, 'closed'")
    d, err = s:send("x")
    T.ok(d == nil and err == "closed", "send on a closed socket: nil, 'closed'")
end)

-- closed with partial data, '*a' ------------------------------------------------------
co_run(function()
    local s = srv:tcp()
    s:connect("127.0.0.1", script_port)
    s:send("lines\n")
    T.is(s:receive(), "one", "first line")
    T.is(s:receive(), "two", "second line")
    T.is(s:receive(), "three", "every CR in a line is ignored")
    local d, err, partial = s:receive()
    T.ok(d == nil and err == "closed" and partial == "four", "peer closed mid-line: nil, 'closed', partial", partial)
    d, err = s:receive()
    T.ok(d == nil and err == "closed", "the socket is closed after that")

    s = srv:tcp()
    s:connect("127.0.0.1", script_port)
    s:send("all\n")
    T.is(s:receive("*a"), "everything\nto the end", "receive('*a') reads until the peer closes")

    s = srv:tcp()
    s:connect("127.0.0.1", script_port)
    s:send("lines\n")
    d, err, partial = s:receive(1000)
    T.ok(d == nil and err == "closed" and partial == "one\r\ntwo\nth\rree\nfour", "receive(size) short: partial is the rest")
end)

-- receiveuntil ---------------------------------------------------------------------------------
co_run(function()
    local s = srv:tcp()
    s:connect("127.0.0.1", script_port)
    s:send("boundary\n")
    local it = s:receiveuntil("\r\n--abcedhb")
    T.is(it(), "hello, world! -agentzh", "receiveuntil: the data before the pattern")
    T.is(s:receive(5), " blah", "the pattern itself is consumed")
    local incl = s:receiveuntil("\r\n--abcedhb", { inclusive = true })
    T.is(incl(), " blah\r\n--abcedhb", "inclusive: the pattern is returned too")

    s = srv:tcp()
    s:connect("127.0.0.1", script_port)
    s:send("boundary\n")
    it = s:receiveuntil("\r\n--abcedhb")
    local chunks = {}
    for _ = 1, 20 do
        local d, err = it(4)
        if not d then
            if err then chunks[#chunks + 1] = "ERR " .. err end
            break
        end
        chunks[#chunks + 1] = "[" .. d .. "]"
    end
    T.is(table.concat(chunks), "[hell][o, w][orld][! -a][gent][zh]", "with size: pieces of 4 bytes, then nil (OpenResty's example)")
    local d = it()
    T.is(d, " blah blah", "the iterator starts over for the next boundary")
    s:settimeout(50)
    local err, partial
    d, err, partial = it()
    T.ok(d == nil and err == "timeout" and partial == "", "receiveuntil timeout: nil, 'timeout', partial")
    s:close()
end)

-- bad arguments -----------------------------------------------------------------------------
do
    local s = srv:tcp()
    T.raises("bad pattern argument", "receive with an unknown pattern raises", function()
        local x = srv:tcp()
        x._cs = { nb = 0 }
        return x:receive("*x")
    end)
    T.raises("bad data type boolean", "send(true) raises", s.send, s, { "a", true })
    T.raises("port number 1%.%.65535", "connect with a bad port raises", s.connect, s, "127.0.0.1", 70000)
    T.raises("pattern must be a non%-empty string", "receiveuntil('') raises", s.receiveuntil, s, "")
    T.raises("needs a coroutine", "connect outside a coroutine is a clear error", s.connect, s, "127.0.0.1", echo_port)
end

-- refused, connect timeout, unknown host ----------------------------------------------------------
co_run(function()
    local s = srv:tcp()
    local ok, err = s:connect("127.0.0.1", REFUSED)
    T.ok(ok == nil and err == "connection refused", "refused: nil, 'connection refused'", err)
    s:settimeouts(150, 1000, 1000)
    ok, err = s:connect("127.0.0.1", BLACKHOLE)
    T.ok(ok == nil and err == "timeout", "connect to a listener that never accepts: nil, 'timeout'", err)
    ok, err = s:connect("no-such-host.invalid", 80)
    T.ok(ok == nil and err == "no-such-host.invalid could not be resolved", "unknown host: could not be resolved", err)
    ok, err = s:connect("unix:/tmp/none.sock")
    T.ok(ok == nil and tostring(err):find("not supported"), "unix: sockets: nil, err (not supported)", err)
end)

-- the separate process, from an HTTP handler ------------------------------------------------------
srv:route("GET", "/via/:word", function(req, res)
    local s = srv:tcp()
    s:settimeout(2000)
    local ok, err = s:connect("127.0.0.1", PY_ECHO)
    if not ok then return res:send(502, err) end
    s:send(req.params.word .. "\n")
    local line, rerr = s:receive()
    s:setkeepalive()
    res:send(200, (line or rerr) .. " " .. req.path) -- req stays readable across the waits
end)
local http_port = srv:listen("http://127.0.0.1:0")
do
    local c = T.connect(http_port, function() srv:poll(5) end)
    local good = 0
    for i = 1, 3 do
        local r = c:request(T.req("GET", "/via/w" .. i), false, 5000)
        if r and r.body == "w" .. i .. " /via/w" .. i then good = good + 1 end
    end
    T.is(good, 3, "a handler talks to a python3 echo process through a cosocket")
    c:close()
end

-- keepalive pool -------------------------------------------------------------------------------------
local sockmod = nanosrv.socket()
co_run(function()
    local key = "127.0.0.1:" .. echo_port
    local s = srv:tcp()
    s:connect("127.0.0.1", echo_port)
    T.is(s:setkeepalive(10000, 4), 1, "setkeepalive returns 1")
    T.is(sockmod.pooled(srv, key), 1, "the connection waits in the pool")
    local ok, err = s:send("x")
    T.ok(ok == nil and err == "closed", "the pooled socket object is closed")
    for round = 1, 2 do
        local s2 = srv:tcp()
        T.is(s2:connect("127.0.0.1", echo_port), 1, "connect again (" .. round .. ")")
        T.is(s2:getreusedtimes(), round, "getreusedtimes counts reuses from the pool (" .. round .. ")")
        s2:send("ping\n")
        T.is(s2:receive(), "ping", "the reused connection works (" .. round .. ")")
        s2:setkeepalive()
    end
    local s3 = srv:tcp()
    s3:connect("127.0.0.1", echo_port)
    s3:send("unread")
    srv:sleep(20)
    ok, err = s3:setkeepalive()
    T.ok(ok == nil and err == "unread data in buffer", "setkeepalive with unread data: nil, 'unread data in buffer'", err)
    s3:close()
    local pooled = srv:tcp()
    pooled:connect("127.0.0.1", PY_ECHO)
    pooled:send("quit\n") -- the peer closes the idle connection
    pooled:setkeepalive()
    srv:sleep(100)
    T.is(sockmod.pooled(srv, "127.0.0.1:" .. PY_ECHO), 0, "an idle connection the peer closed leaves the pool")
    local idle = srv:tcp()
    idle:connect("127.0.0.1", echo_port)
    idle:setkeepalive(30)
    local before = sockmod.pooled(srv, key)
    srv:sleep(120)
    T.is(sockmod.pooled(srv, key), before - 1, "an idle connection past max_idle_timeout leaves the pool")
end)

-- TLS: sslhandshake ----------------------------------------------------------------------------------------
if nanosrv.features.tls and pcall(function() return nanosrv._internal.C.nsv_tls_upgrade end) then
    local DIR = os.tmpname()
    os.remove(DIR)
    local function sh(cmd) return os.execute(cmd .. " >/dev/null 2>&1") == 0 end
    local EC = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
    local made = sh("mkdir -p " .. DIR)
        and sh(("openssl req -x509 %s -keyout %s/ca.key -out %s/ca.crt -subj /CN=Test-CA -days 2"):format(EC, DIR, DIR))
        and sh(("openssl req %s -keyout %s/srv.key -out %s/srv.csr -subj /CN=localhost"):format(EC, DIR, DIR))
        and sh(("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > %s/ext && openssl x509 -req -in %s/srv.csr "
                .. "-CA %s/ca.crt -CAkey %s/ca.key -CAcreateserial -out %s/srv.crt -days 2 -extfile %s/ext"):format(
                DIR, DIR, DIR, DIR, DIR, DIR))
    T.ok(made, "certificates for the TLS peer")
    local tsrv = srv
    tsrv:set("tls_cert_file", DIR .. "/srv.crt")
    tsrv:set("tls_key_file", DIR .. "/srv.key")
    tsrv:set("tls_client_ca_file", DIR .. "/ca.crt")
    local tls_port = tsrv:listen("tls://127.0.0.1:0", {
        on_data = function(c, d) c:send("tls:" .. d) end,
        on_eof = function(c) c:close() end,
    })
    co_run(function()
        local s = srv:tcp()
        s:connect("127.0.0.1", tls_port)
        local sess, err = s:sslhandshake(false, "localhost", true)
        T.is(sess, true, "sslhandshake(false, name, verify = true) with the right CA: true", err)
        s:send("hello\n")
        T.is(s:receive(), "tls:hello", "data goes over TLS")
        s:close()

        s = srv:tcp()
        s:connect("127.0.0.1", tls_port)
        sess, err = s:sslhandshake(nil, "wrong.example", true)
        T.ok(sess == nil and tostring(err):find("^handshake failed"), "verify on, wrong name: nil, 'handshake failed: ...'", err)
        T.ok(tostring(err):find("CN") or tostring(err):find("name"), "the reason names the check", err)

        s = srv:tcp()
        s:connect("127.0.0.1", tls_port)
        sess, err = s:sslhandshake(nil, "wrong.example", false)
        T.ok(type(sess) == "table", "verify off (OpenResty's default): the handshake succeeds, a session comes back", err)
        s:send("x\n")
        T.is(s:receive(), "tls:x", "and works")
        s:close()
    end)
else
    T.ok(false, "nsv_tls_upgrade or TLS is missing from this libnanosrv")
end

-- backpressure: 16 MiB read slowly -------------------------------------------------------------------
co_run(function()
    local s = srv:tcp()
    s:settimeout(5000)
    s:connect("127.0.0.1", script_port)
    local total = 16 * 1048576
    s:send("big " .. total .. "\n")
    local got, max_buffered, reads, paused_seen = 0, 0, 0, false
    local max_mem = collectgarbage("count")
    for _ = 1, 100000 do
        local d, err = s:receive(math.min(65536, total - got))
        if not d then T.ok(false, "16 MiB read", err); break end
        got = got + #d
        reads = reads + 1
        local nb, paused = s:buffered()
        if nb > max_buffered then max_buffered = nb end
        if paused then paused_seen = true end
        if reads % 16 == 0 then
            srv:sleep(2) -- a slow reader: the data waits meanwhile
            max_mem = math.max(max_mem, collectgarbage("count"))
        end
        if got >= total then break end
    end
    T.is(got, total, "16 MiB read in full")
    local _, _, pauses = s:buffered()
    T.ok(paused_seen and pauses > 0, "reading was paused while the reader was slow", pauses)
    T.ok(max_buffered <= 2 * sockmod.BUFFER_LIMIT, "unread data stayed bounded (" .. max_buffered .. " bytes at most)")
    T.ok(max_mem < 64 * 1024, "Lua memory stayed bounded (" .. math.floor(max_mem) .. " KiB at most)")
    s:close()
end, 20000)

srv:close()
os.execute("kill " .. peer_pid .. " 2>/dev/null")
peer:close()
T.done()
