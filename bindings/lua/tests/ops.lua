-- Operating behind load balancers, against the real library: listener
-- options (PROXY protocol v1 from curl --haproxy-protocol and raw, v2 with
-- TLVs and LOCAL from raw sockets, headers missing; allow, deny and
-- proxy_from with clients from 127.0.0.1 and 127.0.0.2), metrics after
-- known requests and their Prometheus text, the access log in each format
-- against curl's own byte counts, readiness during a drain, reuseport,
-- listen_fd, shedding, and the OpenResty layer's proxy_protocol variables.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local ffi = require("ffi")
local bit = require("bit")
local nanosrv = require("nanosrv")

ffi.cdef "int listen(int fd, int backlog);"

-- A server whose every answer describes the connection:
-- "peer port|front front_port dst dst_port ssl authority alpn" ("-" when
-- not proxied).
local function describe(req, res)
    local p = req.proxy
    local front = p and table.concat({ p.front, p.front_port, p.dst, p.dst_port, p.ssl, p.authority, p.alpn }, " ")
        or "-"
    res:send(200, req.peer .. " " .. req.port .. "|" .. front, "Content-Type: text/plain\r\n")
end
local function server(opts)
    local srv = nanosrv.server(opts or {})
    srv:fallback(describe)
    local stopped = false
    srv.pump = function()
        if not stopped and srv:poll(2) == nil then stopped = true end
    end
    srv.stopped = function() return stopped end
    return srv
end

local function ask(srv, port, raw, from)
    local c = T.connect(port, srv.pump, from)
    local r = c:request(raw, false, 3000)
    c:close()
    return r
end

-- A connection the server closes without answering: nil when it did,
-- else what came back.
local function refused(srv, port, raw, from)
    local c = T.connect(port, srv.pump, from)
    if raw then c:send(raw) end
    local closed = c:wait_closed(3000)
    local got = c.buf
    c:close()
    return closed and got == "", got
end

local function curl(srv, args)
    local rc, out, err = T.run("curl -sS --max-time 5 " .. args, srv.pump, 10000)
    return rc, out, err
end

-- Listener options: checked before the listener exists ------------------------
do
    local srv = server()
    T.raises("proxy_protocol must be true", "proxy_protocol 'v3' raises",
             srv.listen, srv, "http://127.0.0.1:0", { proxy_protocol = "v3" })
    T.raises("unknown listener option 'alow'", "a misspelt option raises",
             srv.listen, srv, "http://127.0.0.1:0", { alow = "10.0.0.0/8" })
    T.raises("deny%[2%] must be a string", "a list entry that is not a string raises",
             srv.listen, srv, "http://127.0.0.1:0", { deny = { "10.0.0.0/8", 7 } })
    T.is(#srv.listeners, 0, "nothing was listening after those")
    -- The library's detail names the entry; the listener then refuses everyone.
    local ok, err = pcall(srv.listen, srv, "http://127.0.0.1:0", { allow = "127.0.0.1, 10.0.0.1/8" })
    T.ok(not ok and err:find("NSV_EINVAL", 1, true) and err:find("10.0.0.1/8", 1, true),
         "a bad CIDR entry raises with the library's detail naming it", err)
    local bad = srv.listeners[1]
    local port
    if bad then
        port = nanosrv._internal.C.nsv_listener_port(srv._h, bad.id)
        T.ok(refused(srv, port, T.req("GET", "/")), "the listener whose list failed refuses every connection")
    else
        T.ok(false, "the failed listener is known")
    end
    local p1, l1 = srv:listen("http://127.0.0.1:0", { proxy_protocol = "v1", proxy_timeout_ms = 1500 })
    local _, l2 = srv:listen("http://127.0.0.1:0", { proxy_protocol = true })
    T.ok(p1 > 0, "a listener with options returns its port")
    T.is(srv:listener_option(l1, "proxy_protocol"), nanosrv.enums.nsv_proxy_version.NSV_PROXY_V1,
         "listener_option proxy_protocol: v1")
    T.is(srv:listener_option(l1, "proxy_timeout_ms"), 1500, "listener_option proxy_timeout_ms")
    T.is(srv:listener_option(l2, "proxy_protocol"), nanosrv.enums.nsv_proxy_version.NSV_PROXY_ANY,
         "proxy_protocol = true is 'any'")
    srv:close()
end

-- PROXY protocol ----------------------------------------------------------------
local function v2_header(cmd, fam, addr, tlvs)
    local body = addr .. (tlvs or "")
    return "\r\n\r\n\0\r\nQUIT\n" .. string.char(cmd, fam, bit.rshift(#body, 8), bit.band(#body, 255)) .. body
end
local function be16(n) return string.char(bit.rshift(n, 8), bit.band(n, 255)) end
local function tlv(t, v) return string.char(t) .. be16(#v) .. v end

do
    local srv = server()
    local port = srv:listen("http://127.0.0.1:0", { proxy_protocol = true })
    local plain = srv:listen("http://127.0.0.1:0")

    local rc, out = curl(srv, "--haproxy-protocol --interface 127.0.0.2 http://127.0.0.1:" .. port .. "/")
    T.is(rc, 0, "curl --haproxy-protocol is answered")
    T.like(out, "^127%.0%.0%.2 %d+|127%.0%.0%.2 %d+ 127%.0%.0%.1 " .. port .. "   $",
           "v1 from curl: req.peer is the header's client, req.proxy the front and the address it was asked for")

    local r = ask(srv, port, "PROXY TCP4 203.0.113.7 198.51.100.1 4242 443\r\n" .. T.req("GET", "/"))
    T.like(r and r.body, "^203%.0%.113%.7 4242|127%.0%.0%.1 %d+ 198%.51%.100%.1 443   $",
           "v1 raw: peer and port from the header, not the socket")

    local tlvs = tlv(0x01, "h2") .. tlv(0x02, "example.com") ..
                 tlv(0x20, "\1\0\0\0\0" .. tlv(0x21, "TLSv1.3"))
    r = ask(srv, port, v2_header(0x21, 0x11, "\192\0\2\9" .. "\198\51\100\2" .. be16(5555) .. be16(8443), tlvs) ..
            T.req("GET", "/"))
    T.is(r and r.body, "192.0.2.9 5555|127.0.0.1 " .. (r and r.body:match("|127%.0%.0%.1 (%d+)") or "?") ..
         " 198.51.100.2 8443 TLSv1.3 example.com h2", "v2 with ALPN, AUTHORITY and SSL TLVs: every field")

    local v6src = "\32\1\13\184" .. string.rep("\0", 11) .. "\1" -- 2001:db8::1
    r = ask(srv, port, v2_header(0x21, 0x21, v6src .. string.rep("\0", 15) .. "\1" .. be16(1234) .. be16(80)) ..
            T.req("GET", "/"))
    T.like(r and r.body, "^2001:db8::1 1234|127%.0%.0%.1 %d+ ::1 80   $", "v2 over IPv6: the client's IPv6 address")

    r = ask(srv, port, v2_header(0x20, 0x00, "") .. T.req("GET", "/"))
    T.like(r and r.body, "^127%.0%.0%.1 %d+|%-$", "v2 LOCAL (a front's health check): the socket's own peer, no req.proxy")

    -- Split into one-byte segments.
    local c = T.connect(port, srv.pump)
    local hdr = "PROXY TCP4 203.0.113.8 127.0.0.1 4000 80\r\n"
    for i = 1, #hdr do
        c:send(hdr:sub(i, i))
        srv.pump()
    end
    r = c:request(T.req("GET", "/"), false, 3000)
    c:close()
    T.like(r and r.body, "^203%.0%.113%.8 4000|", "a v1 header sent a byte at a time")

    local before = srv:metrics().proxy_errors
    T.ok(refused(srv, port, T.req("GET", "/")), "no PROXY header: closed, nothing answered")
    T.ok(refused(srv, port, "PROXY TCP4 1.2.3.4\r\n" .. T.req("GET", "/")), "a malformed header: closed, nothing answered")
    T.is(srv:metrics().proxy_errors - before, 2, "both counted in proxy_errors")

    r = ask(srv, plain, T.req("GET", "/"))
    T.like(r and r.body, "^127%.0%.0%.1 %d+|%-$", "a listener without the option: the socket's peer, no req.proxy")

    local quick = srv:listen("http://127.0.0.1:0", { proxy_protocol = true, proxy_timeout_ms = 200 })
    -- refused() waits 3 s: the default deadline (5 s) would miss it.
    T.ok(refused(srv, quick), "a client that sends no header is closed at proxy_timeout_ms")
    srv:close()
end

-- Address lists -----------------------------------------------------------------
do
    local srv = server()
    local allow = srv:listen("http://127.0.0.1:0", { allow = "127.0.0.1" })
    local deny = srv:listen("http://127.0.0.1:0", { deny = { "127.0.0.2/32", "10.0.0.0/8" } })
    local pallow = srv:listen("http://127.0.0.1:0", { proxy_protocol = "v1", allow = "10.0.0.0/8" })
    local from = srv:listen("http://127.0.0.1:0", { proxy_protocol = true, proxy_from = "127.0.0.2" })
    local denied0 = srv:metrics().conns_denied

    local rc = curl(srv, "http://127.0.0.1:" .. allow .. "/")
    T.is(rc, 0, "allow 127.0.0.1: a client from 127.0.0.1 is served")
    rc = curl(srv, "--interface 127.0.0.2 http://127.0.0.1:" .. allow .. "/")
    T.ok(rc ~= 0, "allow 127.0.0.1: curl from 127.0.0.2 gets no answer (exit " .. tostring(rc) .. ")")
    T.ok(refused(srv, deny, T.req("GET", "/"), "127.0.0.2"), "deny 127.0.0.2/32: closed without a byte")
    local r = ask(srv, deny, T.req("GET", "/"))
    T.like(r and r.body, "^127%.0%.0%.1 ", "deny: a client not in the list is served")
    T.ok(refused(srv, pallow, "PROXY TCP4 203.0.113.7 127.0.0.1 1 80\r\n" .. T.req("GET", "/")),
         "with the PROXY protocol, allow applies to the header's client: 203.0.113.7 refused")
    r = ask(srv, pallow, "PROXY TCP4 10.1.2.3 127.0.0.1 1 80\r\n" .. T.req("GET", "/"))
    T.like(r and r.body, "^10%.1%.2%.3 1|", "and 10.1.2.3 served")
    T.ok(refused(srv, from, "PROXY TCP4 10.1.2.3 127.0.0.1 1 80\r\n" .. T.req("GET", "/")),
         "proxy_from 127.0.0.2: a front at 127.0.0.1 is refused")
    r = ask(srv, from, "PROXY TCP4 10.1.2.3 127.0.0.1 1 80\r\n" .. T.req("GET", "/"), "127.0.0.2")
    T.like(r and r.body, "^10%.1%.2%.3 1|127%.0%.0%.2 ", "a front at 127.0.0.2 is served")
    T.is(srv:metrics().conns_denied - denied0, 4, "the four refusals counted in conns_denied")
    local later, lid = srv:listen("http://127.0.0.1:0")
    srv:set_listener(lid, { deny = "127.0.0.1" })
    T.ok(refused(srv, later, T.req("GET", "/")), "set_listener: a deny list set after listen holds for new connections")
    T.raises("reuseport is for listen", "set_listener refuses reuseport", srv.set_listener, srv, lid, { reuseport = true })
    srv:close()
end

-- Metrics -------------------------------------------------------------------------
do
    local srv = server()
    srv:route("GET", "/metrics", srv:metrics_handler())
    srv:route("GET", "/ok", function(_, res) res:send(200, "ok") end)
    srv:route("GET", "/missing", function(_, res) res:send(404, "no") end)
    local port = srv:listen("http://127.0.0.1:0")
    local c = T.connect(port, srv.pump)
    for _ = 1, 3 do c:request(T.req("GET", "/ok"), false, 3000) end
    c:request(T.req("GET", "/missing"), false, 3000)
    c:close()
    for _ = 1, 5 do srv.pump() end
    local m = srv:metrics()
    T.is(m.requests, 4, "metrics: requests 4")
    T.ok(m.resp_2xx == 3 and m.resp_4xx == 1 and m.resp_5xx == 0, "resp_2xx 3, resp_4xx 1, resp_5xx 0")
    T.is(m.conns_accepted, 1, "conns_accepted 1 (one keep-alive connection)")
    T.ok(m.bytes_in > 0 and m.bytes_out > 0, "bytes_in and bytes_out counted")
    local h = m.lat_queued
    T.ok(type(h) == "table" and h.count == 4, "lat_queued: a histogram with count 4")
    local b = h and h.buckets or {}
    local mono = #b == nanosrv.enums.nsv_metric.NSV_M_LAT_BUCKETS
    for i = 2, #b do mono = mono and b[i][2] >= b[i - 1][2] and b[i][1] > b[i - 1][1] end
    T.ok(mono, "16 cumulative buckets, bounds and counts rising")
    T.ok(b[1] and b[1][1] == 0.0001 and b[#b][1] == math.huge and b[#b][2] == 4,
         "bounds in seconds from 0.0001 to math.huge, the last holding every request")
    T.ok(h and h.sum_seconds >= 0 and h.sum_seconds < 10, "sum_seconds")
    T.is(m.lat_flushed and m.lat_flushed.count, 4, "lat_flushed count 4")
    T.ok(m.lat_queued_sum_us == nil and m.lat_queued_bucket == nil, "histogram parts appear only in their table")
    T.is(srv:metrics(0).requests, 4, "metrics(0): a single loop is worker 0")
    T.raises("NSV_ERANGE", "metrics(1) on a single loop raises", srv.metrics, srv, 1)

    local rc, out = curl(srv, "-i http://127.0.0.1:" .. port .. "/metrics")
    T.is(rc, 0, "GET /metrics through metrics_handler")
    T.like(out, "\r\nContent%-Type: text/plain; version=0%.0%.4\r\n", "its Content-Type is Prometheus's")
    T.like(out, "\n# TYPE nanosrv_requests_total counter\nnanosrv_requests_total 4\n", "requests_total 4, typed counter")
    T.like(out, '\nnanosrv_responses_total{class="2xx"} 3\n', "responses by class")
    T.like(out, '_bucket{le="%+Inf"} 4\n', "a histogram's +Inf bucket")
    local text = srv:metrics_text("app_")
    T.ok(text:find("\napp_requests_total ", 1, true) and not text:find("nanosrv_", 1, true), "metrics_text('app_') prefixes every name")
    T.raises("NSV_EINVAL", "a prefix with '-' raises", srv.metrics_text, srv, "a-b")
    srv:close()

    local sh = nanosrv.server { threads = 2 }
    local per = sh:metrics_text(nil, true)
    T.like(per, 'worker="1"', "per_worker text of a sharded server has worker labels")
    T.is(type(sh:metrics(1).conns_active), "number", "metrics(1) of a two-worker server")
    sh:close()
end

-- Access log ----------------------------------------------------------------------
do
    local lines = {}
    local srv = server()
    srv:access_log("combined", function(line) lines[#lines + 1] = line end)
    srv:route("GET", "/a", function(_, res) res:send(200, "hello") end)
    local port = srv:listen("http://127.0.0.1:0")
    local W = " -w '%{size_header} %{size_download} %{size_request}'"
    local _, out = curl(srv, "-o /dev/null -A 'agent \"x\"' -e http://ref.example/ 'http://127.0.0.1:" .. port .. "/a?b=1'" .. W)
    for _ = 1, 5 do srv.pump() end
    local hs, ds = out:match("^(%d+) (%d+)")
    local line = lines[1] or ""
    T.like(line, '^127%.0%.0%.1 %- %- %[%d%d/%a%a%a/%d%d%d%d:%d%d:%d%d:%d%d [+-]%d%d%d%d%] "GET /a%?b=1 HTTP/1%.1" 200 %d+ ' ..
           '"http://ref%.example/" "agent \\x22x\\x22"$', "combined: nginx's fields, quotes escaped \\x22")
    T.is(tonumber(line:match('" 200 (%d+) ')), tonumber(hs) + tonumber(ds), "the byte count is the answer as curl received it")

    lines = {}
    srv:access_log("common", function(l) lines[#lines + 1] = l end)
    curl(srv, "-o /dev/null -X POST -d xyz http://127.0.0.1:" .. port .. "/nothing")
    for _ = 1, 5 do srv.pump() end
    T.like(lines[1], '^127%.0%.0%.1 %- %- %[[^]]+%] "POST /nothing HTTP/1%.1" 200 %d+$', "common: no referer, no agent")

    lines = {}
    srv:access_log("json", function(l) lines[#lines + 1] = l end)
    _, out = curl(srv, "-o /dev/null -A ua http://127.0.0.1:" .. port .. "/a" .. W)
    for _ = 1, 5 do srv.pump() end
    local _, _, rq = out:match("^(%d+) (%d+) (%d+)")
    T.like(lines[1], '^{"time":"%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ","peer":"127%.0%.0%.1","port":%d+,' ..
           '"method":"GET","target":"/a","status":200,"bytes_out":%d+,"bytes_in":' .. rq ..
           ',"duration_ms":%d+%.%d%d%d,"user_agent":"ua","referer":""}$', "json: every field, in order; bytes_in is curl's request")

    local recs = {}
    srv:access_log(function(rec) recs[#recs + 1] = rec end)
    local c = T.connect(port, srv.pump)
    c:request("GET /a HTTP/1.0\r\nUser-Agent: caf\195\169\255\r\n\r\n", false, 3000)
    c:close()
    for _ = 1, 5 do srv.pump() end
    local rec = recs[1] or {}
    T.ok(rec.method == "GET" and rec.target == "/a" and rec.status == 200 and rec.http10 == true and
         rec.peer == "127.0.0.1" and rec.proxy == false and type(rec.duration_ms) == "number",
         "a function gets the record table")
    T.like(nanosrv.access_format(rec, "json"), '"user_agent":"caf\195\169\\u00ff"',
           "json: valid UTF-8 kept, a stray byte \\u00ff")
    T.like(nanosrv.access_format(rec, "combined"), '"GET /a HTTP/1%.0" 200 %d+ "%-" "caf\\xC3\\xA9\\xFF"$',
           "combined: HTTP/1.0, bytes past ASCII \\xHH")

    -- An answer the library makes alone (auto_404) comes with no event:
    -- the log's timer takes its record.
    recs = {}
    local quiet = nanosrv.server { auto_404 = true, access_log = function(r2) recs[#recs + 1] = r2 end }
    local qport = quiet:listen("http://127.0.0.1:0")
    local got = T.run("curl -s -o /dev/null http://127.0.0.1:" .. qport .. "/none", function() quiet:poll(5) end, 10000)
    for _ = 1, 300 do
        if #recs > 0 then break end
        quiet:poll(5)
    end
    T.ok(got == 0 and recs[1] and recs[1].status == 404, "a 404 answered in C is logged without another request")
    quiet:close()
    srv:access_log(false)
    T.is(srv:get("access_log"), 0, "access_log(false) turns the records off")

    -- The library option alone: the host takes the records.
    local own = server { access_log = 16 }
    local oport = own:listen("http://127.0.0.1:0")
    ask(own, oport, T.req("GET", "/own"))
    local taken = own:access_records()
    T.ok(#taken == 1 and taken[1].target == "/own" and #own:access_records() == 0,
         "access_log = N: srv:access_records() takes them, once")
    own:close()
    T.raises("access_log must be", "an unknown format raises", srv.access_log, srv, "fancy")
    srv:close()
end

-- Readiness and the records of a drain --------------------------------------------
do
    local recs = {}
    local srv = server { access_log = function(r) recs[#recs + 1] = r end }
    srv:route("GET", "/readyz", srv:readyz_handler())
    srv:route("GET", "/slow", function(_, res) srv:sleep(200); res:send(200, "slow done") end)
    srv:route("GET", "/drain", function(_, res) res:send(200, "draining now"); srv:drain(3000) end)
    local port = srv:listen("http://127.0.0.1:0")
    local keep = T.connect(port, srv.pump)
    local r = keep:request(T.req("GET", "/readyz"), false, 3000)
    T.ok(r and r.status == 200 and r.body == "ready\n" and not srv:draining(), "readyz: 200 ready before the drain")
    -- The drain closes idle connections; a check already on its way (its
    -- head half sent) is answered.
    local req = T.req("GET", "/readyz")
    keep:send(req:sub(1, 10))
    local slow = T.connect(port, srv.pump)
    slow:send(T.req("GET", "/slow"))
    srv.pump()
    r = ask(srv, port, T.req("GET", "/drain"))
    T.is(r and r.body, "draining now", "a handler starts the drain")
    T.ok(srv:draining(), "srv:draining() is true from the drain's start")
    r = keep:request(req:sub(11), false, 3000)
    T.ok(r and r.status == 503 and r.body == "draining\n", "readyz on a kept-alive connection: 503 draining")
    r = slow:response(false, 3000)
    T.is(r and r.body, "slow done", "the request in flight is answered")
    keep:close(); slow:close()
    for _ = 1, 1000 do
        if srv.stopped() then break end
        srv.pump()
    end
    T.ok(srv.stopped(), "the drain ended")
    local seen = {}
    for _, x in ipairs(recs) do seen[#seen + 1] = x.target .. " " .. x.status end
    table.sort(seen)
    T.is(table.concat(seen, ","), "/drain 200,/readyz 200,/readyz 503,/slow 200", "every answer of the drain was logged")
    srv:close()
end

-- reuseport, listen_fd, inherited sockets --------------------------------------------
do
    local a, b = nanosrv.server {}, nanosrv.server {}
    local port = a:listen("http://127.0.0.1:0", { reuseport = true })
    local ok = pcall(b.listen, b, "http://127.0.0.1:" .. port, { reuseport = true })
    T.ok(ok, "reuseport: a second server binds the same port")
    T.is(a:get("reuseport"), 0, "the listen option leaves the server option as it was")
    local c = nanosrv.server {}
    T.raises("NSV_EADDRINUSE", "without reuseport the port is in use", c.listen, c, "http://127.0.0.1:" .. port)
    a:close(); b:close(); c:close()

    local fd = ffi.C.socket(2, 1, 0)
    local sa = ffi.new("struct nsvt_sockaddr_in")
    sa.family = 2
    ffi.C.inet_pton(2, "127.0.0.1", ffi.cast("char *", sa) + 4)
    local len = ffi.new("uint32_t[1]", ffi.sizeof(sa))
    local bound = ffi.C.bind(fd, sa, ffi.sizeof(sa)) == 0 and ffi.C.listen(fd, 16) == 0 and
                  ffi.C.getsockname(fd, sa, len) == 0
    local fport = ffi.C.ntohs(sa.port)
    local srv = server()
    T.raises("NSV_EINVAL", "listen_fd with another port in its URL raises", srv.listen_fd, srv, fd,
             "http://0.0.0.0:" .. (fport == 1 and 2 or 1))
    local p = bound and srv:listen_fd(fd, nil, { allow = "127.0.0.1" })
    T.is(p, fport, "listen_fd adopts a bound socket and returns its port")
    local r = ask(srv, fport, T.req("GET", "/"))
    T.like(r and r.body, "^127%.0%.0%.1 ", "it serves, with listener options")
    T.ok(refused(srv, fport, T.req("GET", "/"), "127.0.0.2"), "and its allow list holds")
    srv:close()
    local fds = nanosrv.inherited_fds(false)
    T.is(#fds, 0, "inherited_fds: none without LISTEN_FDS")
end

-- Shedding at max_conns: an idle keep-alive connection makes room -------------------
do
    local srv = server { max_conns = 2 }
    local port = srv:listen("http://127.0.0.1:0")
    local idle = {}
    for i = 1, 2 do
        idle[i] = T.connect(port, srv.pump)
        idle[i]:request(T.req("GET", "/"), false, 3000)
    end
    local r = ask(srv, port, T.req("GET", "/"))
    T.ok(r and r.status == 200, "a third client is served at max_conns 2")
    T.ok(srv:metrics().conns_evicted >= 1, "an idle connection was closed for it (conns_evicted)")
    for i = 1, 2 do idle[i]:close() end
    srv:close()
end

-- Raw TCP listeners: conn.proxied, the peer from the header -----------------------------
do
    local srv = server()
    local seen
    local port = srv:listen("tcp://127.0.0.1:0", {
        on_open = function(conn) seen = conn.peer .. " " .. conn.port .. " " .. tostring(conn.proxied); conn:send("hi") end,
    }, { proxy_protocol = "v1" })
    local c = T.connect(port, srv.pump)
    c:send("PROXY TCP4 203.0.113.9 127.0.0.1 999 80\r\n")
    c:wait(function(b) return b == "hi" or nil end, 3000)
    c:close()
    T.is(seen, "203.0.113.9 999 true", "tcp:// with proxy_protocol: conn.peer from the header, conn.proxied")
    srv:close()
end

-- The OpenResty layer: nginx's variables -----------------------------------------------
do
    local ngxmod = require("nanosrv.ngx")
    local srv = server()
    local port = srv:listen("http://127.0.0.1:0", { proxy_protocol = true })
    local plain = srv:listen("http://127.0.0.1:0")
    local V = { "remote_addr", "remote_port", "proxy_protocol_addr", "proxy_protocol_port",
                "proxy_protocol_server_addr", "proxy_protocol_server_port", "realip_remote_addr",
                "proxy_protocol_tlv_alpn" }
    ngxmod.serve(srv, function()
        local out = {}
        for i, k in ipairs(V) do out[i] = tostring(ngx.var[k]) end
        ngx.print(table.concat(out, " "))
    end)
    local r = ask(srv, port, "PROXY TCP4 203.0.113.7 198.51.100.1 4242 443\r\n" .. T.req("GET", "/"))
    T.like(r and r.body, "^203%.0%.113%.7 4242 203%.0%.113%.7 4242 198%.51%.100%.1 443 127%.0%.0%.1 nil$",
           "ngx.var behind a front: remote_addr the client, proxy_protocol_* the header, realip_remote_addr the front")
    r = ask(srv, plain, T.req("GET", "/"))
    T.like(r and r.body, "^127%.0%.0%.1 %d+ nil nil nil nil 127%.0%.0%.1 nil$",
           "without a front: proxy_protocol_* nil, realip_remote_addr the peer")
    srv:close()
end

T.done()
