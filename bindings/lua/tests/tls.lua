-- TLS from Lua: certificates made with the openssl command in a temporary
-- directory; https with curl (files and PEM bytes, SNI, mutual TLS
-- required and optional), examples/echo.lua --cert/--key/--ca serving
-- https and wss, examples/tcp_echo.lua on tls:// under openssl s_client and
-- an 8 MiB payload, outbound TLS with a CA, verification and its opt-out,
-- and errors that name their cause.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local nanosrv = require("nanosrv")

if not nanosrv.features.tls then
    T.ok(false, "this library has no TLS (nsv_tls_available() is 0)")
    T.done()
end

local DIR = os.tmpname()
os.remove(DIR)
assert(os.execute("mkdir -p " .. DIR) == 0)
local function p(name) return DIR .. "/" .. name end
local function sh(cmd) assert(os.execute(cmd .. " >/dev/null 2>&1") == 0, cmd) end
local EC = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
local function make_ca(name, cn)
    sh(("openssl req -x509 %s -keyout %s -out %s -subj /CN=%s -days 30"):format(EC, p(name .. ".key"), p(name .. ".crt"), cn))
end
local function make_cert(name, ca, subj, san)
    sh(("openssl req %s -keyout %s -out %s -subj %s"):format(EC, p(name .. ".key"), p(name .. ".csr"), T.shq(subj)))
    local ext = ""
    if san then
        local f = io.open(p(name .. ".ext"), "w")
        f:write("subjectAltName=" .. san .. "\n")
        f:close()
        ext = " -extfile " .. p(name .. ".ext")
    end
    sh(("openssl x509 -req -in %s -CA %s -CAkey %s -CAcreateserial -out %s -days 30%s"):format(
        p(name .. ".csr"), p(ca .. ".crt"), p(ca .. ".key"), p(name .. ".crt"), ext))
end
make_ca("ca", "Test-CA")
make_ca("other", "Other-CA")
make_cert("srv", "ca", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
make_cert("alice", "ca", "/CN=alice/O=Example")
make_cert("mallory", "other", "/CN=mallory")
sh(("openssl ec -in %s -aes256 -passout pass:s3cret -out %s"):format(p("srv.key"), p("enc.key")))
local CURL = "curl -sS --max-time 10 --cacert " .. p("ca.crt") .. " "
local function url(port, path) return "--resolve localhost:" .. port .. ":127.0.0.1 https://localhost:" .. port .. path end

-- Errors name their cause ---------------------------------------------------
local function listen_err(opts)
    local ok, err = pcall(function()
        local s = nanosrv.server(opts)
        s:listen("https://127.0.0.1:0")
        s:close()
    end)
    return ok and "no error" or tostring(err)
end
T.like(listen_err { tls_cert_file = p("missing.crt") }, "cannot open .*missing%.crt: No such file",
       "missing certificate file: named, with the reason")
T.like(listen_err { tls_cert_pem = "not a pem", tls_key_file = p("srv.key") }, "NSV_ETLS.*certificate.*format is invalid",
       "bad certificate PEM: named")
T.like(listen_err { tls_cert_file = p("srv.crt"), tls_key_file = p("enc.key"), tls_key_password = "wrong" },
       "private key.*password", "wrong key password: named")
T.like(listen_err { tls_cert_file = p("srv.crt"), tls_key_file = p("enc.key") },
       "private key.*password", "encrypted key without a password: named")
T.like(listen_err { tls_verify_client = "sometimes" }, "\"none\", \"optional\" or \"required\"",
       "tls_verify_client by a wrong name")
T.like(listen_err { tls_cert_file = 42 }, "needs a string", "a string option given a number")

-- https from PEM bytes, an encrypted key, SNI, request TLS details --------
local srv = nanosrv.server { tls_cert_pem = T.slurp(p("srv.crt")), tls_key_pem = T.slurp(p("enc.key")),
                             tls_key_password = "s3cret", tls_ca_file = p("ca.crt"),
                             tls_verify_client = "optional", tls_client_ca_file = p("ca.crt") }
local pump = function() srv:poll(2) end
local port = srv:listen("https://127.0.0.1:0")
srv:route("GET", "/who", function(req, res)
    local t = req.tls
    res:send(200, t and (t.sni .. "|" .. t.subject .. "|" .. req.sni .. "|" .. req.peer_subject) or "plain",
             { ["Content-Type"] = "text/plain" })
end)
local plain = srv:listen("http://127.0.0.1:0")
local rc, out, err = T.run(CURL .. url(port, "/who"), pump)
T.is(rc == 0 and out, "localhost||localhost|", "https from PEM bytes with an encrypted key; req.tls.sni", err)
rc, out, err = T.run(CURL .. "--cert " .. p("alice.crt") .. " --key " .. p("alice.key") .. " " .. url(port, "/who"), pump)
T.is(rc == 0 and out, "localhost|CN=alice, O=Example|localhost|CN=alice, O=Example",
     "optional client certificate: verified subject in req.tls.subject", err)
rc, out, err = T.run(CURL .. "--cert " .. p("mallory.crt") .. " --key " .. p("mallory.key") .. " " .. url(port, "/who"), pump)
T.is(rc == 0 and out, "localhost||localhost|", "optional: a certificate from another CA gives no subject", err)
rc, out, err = T.run("curl -sS --max-time 10 http://127.0.0.1:" .. plain .. "/who", pump)
T.is(rc == 0 and out, "plain", "req.tls is false on a plain connection", err)
rc, out, err = T.run("curl -sS --max-time 10 " .. url(port, "/who"), pump)
T.ok(rc ~= 0, "curl without our CA refuses the certificate", out .. err)

-- Outbound TLS: a tls:// listener of this server, reached with srv:connect.
do
    local tport = srv:listen("tls://127.0.0.1:0", { on_data = function(c, d) c:send(d) end })
    local function dial(host, opts_srv)
        local s = opts_srv or srv
        local ev, got = {}, {}
        local blob = string.rep("tls bytes ", 100000)
        s:connect("tls://" .. host .. ":" .. tport, {
            on_connect = function(c) ev[#ev + 1] = "connect"; c:send(blob) end,
            on_data = function(c, d)
                got[#got + 1] = d
                if #table.concat(got) >= #blob then c:close() end
            end,
            on_error = function(_, msg) ev[#ev + 1] = "error " .. msg end,
            on_close = function() ev[#ev + 1] = "close" end,
        })
        for _ = 1, 3000 do
            if ev[#ev] == "close" then break end
            srv:poll(1)
            if s ~= srv then s:poll(1) end
        end
        return table.concat(ev, " | "), table.concat(got) == blob
    end
    local evs, same = dial("localhost")
    T.ok(evs == "connect | close" and same, "outbound TLS verified against tls_client_ca_file: 1 MB echoed", evs)
    -- Another server whose outbound connections use the system bundle.
    local sys = nanosrv.server {}
    evs = dial("localhost", sys)
    T.like(evs, "^error .*verif.*| close$", "outbound TLS: an unknown CA is refused, the error says why")
    local insecure = nanosrv.server { tls_verify_server = false }
    evs, same = dial("localhost", insecure)
    T.ok(evs == "connect | close" and same, "outbound TLS with tls_verify_server = false connects", evs)
    sys:close(); insecure:close()
end
srv:close()

-- examples/echo.lua with --cert/--key (https, wss) and --ca (required) ----
local ECHO = "luajit " .. T.bindir .. "/examples/echo.lua --port 0 --cert " .. p("srv.crt") .. " --key " .. p("srv.key")
local e = assert(T.start(ECHO), "echo.lua --cert did not start")
rc, out, err = T.run(CURL .. url(e.port, "/hello?x=1"))
T.is(rc == 0 and out:gsub('"peer_port":%d+}$', '"peer_port":PORT}'),
     '{"method":"GET","path":"/hello","query":"x=1","body_len":0,"sni":"localhost","subject":"",' ..
     '"peer":"127.0.0.1","peer_port":PORT}', "echo.lua --cert: https request described with sni and subject", err)
local f = io.open(p("body.bin"), "wb")
local body = {}
for i = 1, 65536 do body[i] = string.char((i * 7919) % 256) end
body = table.concat(body):rep(16) -- 1 MiB
f:write(body)
f:close()
rc, out, err = T.run(CURL .. "--data-binary @" .. p("body.bin") .. " " .. url(e.port, "/echo"))
T.ok(rc == 0 and out == body, "echo.lua --cert: 1 MiB POST echoed over https", err)
rc, out = T.run("/usr/bin/python3 " .. T.dir .. "/support/stream_client.py wss " .. e.port .. " " .. p("ca.crt"))
T.is(rc == 0 and out:gsub("%s+$", ""), "ok", "echo.lua --cert: wss text and 300 KB binary echoed")
T.stop(e)

e = assert(T.start(ECHO .. " --ca " .. p("ca.crt")), "echo.lua --ca did not start")
rc, out, err = T.run(CURL .. "--cert " .. p("alice.crt") .. " --key " .. p("alice.key") .. " " .. url(e.port, "/m"))
T.like(rc == 0 and out, '"subject":"CN=alice, O=Example"', "mTLS required: the verified subject reaches the host")
rc, out, err = T.run(CURL .. url(e.port, "/m"))
T.ok(rc ~= 0, "mTLS required: no certificate, no answer", out)
rc, out, err = T.run(CURL .. "--cert " .. p("mallory.crt") .. " --key " .. p("mallory.key") .. " " .. url(e.port, "/m"))
T.ok(rc ~= 0, "mTLS required: a certificate from another CA is refused", out)
T.stop(e)

-- examples/tcp_echo.lua on tls:// ----------------------------------------
local te = assert(T.start("luajit " .. T.bindir .. "/examples/tcp_echo.lua --port 0 --cert " .. p("srv.crt") ..
                          " --key " .. p("srv.key")), "tcp_echo.lua --cert did not start")
rc, out = T.run("openssl s_client -connect 127.0.0.1:" .. te.port .. " -servername localhost -CAfile " .. p("ca.crt") ..
                " -verify_return_error </dev/null 2>&1")
T.ok(out:find("Verify return code: 0 %(ok%)"), "openssl s_client verifies tcp_echo.lua's tls:// certificate", out:sub(-600))
for _, size in ipairs({ 1, 70000, 8 * 1048576 }) do
    rc, out = T.run("/usr/bin/python3 " .. T.dir .. "/support/stream_client.py echo " .. te.port .. " " .. size ..
                    " " .. p("ca.crt"), nil, 120000)
    T.is(rc == 0 and out:gsub("%s+$", ""), "ok " .. size, "tcp_echo.lua over tls://: " .. size .. " random bytes")
end
T.stop(te)

os.execute("rm -rf " .. DIR)
T.done()
