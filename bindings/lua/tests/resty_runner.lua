-- examples/resty.lua as a child process: usage errors (exit 2), the example
-- handlers under curl, https with --cert/--key, --shdict, --log-level and
-- print(), and SIGTERM draining a request in flight before exit 0.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")

local RESTY = T.bindir .. "/examples/resty.lua"
local EX = T.bindir .. "/examples/resty/"
local DIR = os.tmpname()
os.remove(DIR)
assert(os.execute("mkdir -p " .. DIR) == 0)
local function p(name) return DIR .. "/" .. name end
local CURL = "curl -sS --max-time 10 "

-- Run resty.lua to its end (usage errors): exit status, stdout, stderr.
local function run(args)
    return T.run("luajit " .. RESTY .. " " .. args, nil, 10000)
end

-- Start resty.lua in the background: {pid =, port =, errfile =, rcfile =}.
-- The shell reports the exit status into rcfile; `timeout` bounds its life.
local function start(args, env)
    local base = os.tmpname()
    local rc, out = base .. ".rc", base .. ".out"
    local cmd = (env or "") .. " exec timeout -s KILL 60 luajit " .. RESTY .. " " .. args
    os.execute("( sh -c " .. T.shq(cmd) .. " >" .. out .. " 2>" .. base .. ".err </dev/null & echo $! >" ..
               base .. ".pid; wait $!; echo $? >" .. rc .. " ) >/dev/null 2>&1 &")
    local s = { base = base, rcfile = rc, errfile = base .. ".err" }
    for _ = 1, 500 do
        local text = T.slurp(out) or ""
        s.port = tonumber(text:match("listening on (%d+)\n"))
        s.pid = tonumber(T.slurp(base .. ".pid") or "")
        if s.port and s.pid then return s end
        if T.slurp(rc) then break end
        os.execute("sleep 0.01")
    end
    return s
end
local function wait_exit(s, ms)
    for _ = 1, math.ceil((ms or 10000) / 10) do
        local rc = T.slurp(s.rcfile)
        if rc and rc:find("\n") then return tonumber(rc) end
        os.execute("sleep 0.01")
    end
end
local function stop(s)
    if s.pid and not T.slurp(s.rcfile) then os.execute("kill " .. s.pid .. " 2>/dev/null") end
    wait_exit(s, 5000)
    for _, ext in ipairs({ "", ".rc", ".out", ".err", ".pid" }) do os.remove(s.base .. ext) end
end
local function curl(s, args)
    local _, out = T.run(CURL .. args:gsub("PORT", tostring(s.port)), nil, 15000)
    return out
end

-- Usage errors
local rc, _, err = run("")
T.ok(rc == 2 and err:find("no handler file given", 1, true) and err:find("usage: resty.lua", 1, true),
     "no handler: usage on stderr, exit 2")
rc, _, err = run("--port 80x " .. EX .. "hello.lua")
T.ok(rc == 2 and err:find("--port needs a whole number >= 0, got '80x'", 1, true), "bad --port: says why, exit 2")
rc, _, err = run("--bogus " .. EX .. "hello.lua")
T.ok(rc == 2 and err:find("unknown option --bogus", 1, true), "unknown option: exit 2")
rc, _, err = run("--shdict cache " .. EX .. "hello.lua")
T.ok(rc == 2 and err:find("--shdict needs NAME=SIZE", 1, true), "bad --shdict: exit 2")
rc, _, err = run("--shdict cache=1k " .. EX .. "hello.lua")
T.ok(rc == 2 and err:find("at least 8k", 1, true), "--shdict below 8k: exit 2")
rc, _, err = run("--cert x.crt " .. EX .. "hello.lua")
T.ok(rc == 2 and err:find("--cert and --key go together", 1, true), "--cert without --key: exit 2")
rc, _, err = run("--log-level loud " .. EX .. "hello.lua")
T.ok(rc == 2 and err:find("--log-level must be one of", 1, true), "bad --log-level: exit 2")
rc, _, err = run(p("missing.lua"))
T.ok(rc == 2 and err:find("cannot load handler", 1, true), "missing handler file: exit 2")
local f = assert(io.open(p("broken.lua"), "w")); f:write("ngx.say(("); f:close()
rc, _, err = run(p("broken.lua"))
T.ok(rc == 2 and err:find("broken.lua:1:", 1, true), "handler with a syntax error: exit 2 with the compiler's message")
rc, _, err = run(EX .. "hello.lua " .. EX .. "counter.lua")
T.ok(rc == 2 and err:find("one handler file expected", 1, true), "two handler files: exit 2")

-- hello, counter (--shdict), json_api (cjson)
local s = start("--port 0 " .. EX .. "hello.lua")
T.ok(s.port ~= nil, "prints listening on PORT")
T.is(curl(s, "http://127.0.0.1:PORT/any/path"), "hello, world\n", "hello.lua runs for every path")
stop(s)

s = start("--port 0 --shdict hits=64k " .. EX .. "counter.lua")
curl(s, "http://127.0.0.1:PORT/a")
curl(s, "http://127.0.0.1:PORT/a")
T.is(curl(s, "http://127.0.0.1:PORT/b"), "total 3, /b 1\n", "counter.lua: ngx.shared across requests")
stop(s)

s = start("--port 0 " .. EX .. "json_api.lua")
T.is(curl(s, "http://127.0.0.1:PORT/items"), '{"count":0,"items":[]}\n', "json_api: empty list")
local posted = curl(s, "-w ' %{http_code}' -d '{\"name\":\"pen\"}' http://127.0.0.1:PORT/items")
T.like(posted, '^{.*"name":"pen".*}\n 201$', "json_api: POST stores with 201")
T.like(curl(s, "http://127.0.0.1:PORT/items/1"), '"id":1', "json_api: GET /items/1")
T.like(curl(s, "-w ' %{http_code}' -d 'junk' http://127.0.0.1:PORT/items"), "expected a JSON object.* 400$",
       "json_api: bad JSON is a 400")
stop(s)

-- sleep_timer (ngx.sleep, ngx.timer.at) and cosocket (against tcp_echo.lua)
s = start("--port 0 --shdict timers=64k " .. EX .. "sleep_timer.lua")
T.is(curl(s, "'http://127.0.0.1:PORT/sleep?ms=20'"), "slept 20 ms\n", "sleep_timer: ngx.sleep")
T.is(curl(s, "'http://127.0.0.1:PORT/later?who=test'"), "scheduled\n", "sleep_timer: ngx.timer.at")
local st
for _ = 1, 100 do
    st = curl(s, "http://127.0.0.1:PORT/status")
    if st:find("fired 1", 1, true) then break end
    os.execute("sleep 0.02")
end
T.is(st, "fired 1 last test pending 0\n", "sleep_timer: the timer ran with its argument")
stop(s)

local echo_base = os.tmpname()
os.execute("( exec timeout -s KILL 60 luajit " .. T.bindir .. "/examples/tcp_echo.lua --port 0 >" .. echo_base ..
           ".out 2>&1 </dev/null & echo $! >" .. echo_base .. ".pid ) >/dev/null 2>&1")
local echo_port
for _ = 1, 500 do
    echo_port = tonumber((T.slurp(echo_base .. ".out") or ""):match("(%d+)"))
    if echo_port then break end
    os.execute("sleep 0.01")
end
T.ok(echo_port ~= nil, "tcp_echo.lua runs")
s = start("--port 0 " .. EX .. "cosocket.lua", "UPSTREAM=127.0.0.1:" .. tostring(echo_port))
T.is(curl(s, "'http://127.0.0.1:PORT/ask?q=hello%20there'"), "upstream said: hello there (connection reused 0 times)\n",
     "cosocket: a line to the TCP service and back")
T.is(curl(s, "'http://127.0.0.1:PORT/ask?q=again'"), "upstream said: again (connection reused 1 times)\n",
     "cosocket: the keepalive pool gives the connection back")
os.execute("kill " .. (T.slurp(echo_base .. ".pid") or "0"):gsub("%s", "") .. " 2>/dev/null")
local code
for _ = 1, 100 do -- until the service is gone
    code = curl(s, "-o /dev/null -w '%{http_code}' 'http://127.0.0.1:PORT/ask?q=x'")
    if code == "502" then break end
    os.execute("sleep 0.02")
end
T.is(code, "502", "cosocket: the service gone, 502")
T.like(T.slurp(s.errfile) or "", "%[lua%] cosocket%.lua:%d+: connect to 127%.0%.0%.1:%d+ failed: connection refused",
       "... with the connect error in the log")
stop(s)
for _, ext in ipairs({ "", ".out", ".pid" }) do os.remove(echo_base .. ext) end

-- --log-level and print()
f = assert(io.open(p("log.lua"), "w"))
f:write('print("from print ", 42)\nngx.log(ngx.INFO, "info line")\nngx.log(ngx.WARN, "warn line")\nngx.say("ok")\n')
f:close()
s = start("--port 0 --log-level notice " .. p("log.lua"))
curl(s, "http://127.0.0.1:PORT/")
local log = T.slurp(s.errfile) or ""
stop(s)
T.like(log, "%[notice%] %d+#%d+: %*1 %[lua%] log%.lua:1: from print 42, client: 127%.0%.0%.1", "print() logs at notice")
T.ok(log:find("warn line", 1, true) and not log:find("info line", 1, true), "--log-level notice: warn shown, info filtered")

-- https
local EC = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
local made = os.execute(("openssl req -x509 %s -keyout %s -out %s -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 -days 2 >/dev/null 2>&1")
                        :format(EC, p("srv.key"), p("srv.crt"))) == 0
if made then
    s = start(("--port 0 --cert %s --key %s %s"):format(p("srv.crt"), p("srv.key"), EX .. "hello.lua"))
    T.is(curl(s, "--cacert " .. p("srv.crt") .. " https://127.0.0.1:PORT/"), "hello, world\n", "https with --cert/--key")
    stop(s)
    rc, _, err = run(("--port 0 --cert %s --key %s %s"):format(p("none.crt"), p("srv.key"), EX .. "hello.lua"))
    T.ok(rc == 1 and err:find("none.crt", 1, true), "a missing certificate: an error naming the file, exit 1")
else
    T.ok(false, "openssl made a test certificate")
end

-- SIGTERM: the request in flight finishes, then exit 0.
f = assert(io.open(p("slow.lua"), "w"))
f:write('ngx.log(ngx.NOTICE, "sleeping")\nngx.sleep(0.4)\nngx.say("slept")\n')
f:close()
s = start("--port 0 --log-level notice " .. p("slow.lua"))
local h = T.spawn(CURL .. "http://127.0.0.1:" .. s.port .. "/", 20)
for _ = 1, 500 do -- until the request is with the handler
    if (T.slurp(s.errfile) or ""):find("sleeping", 1, true) then break end
    os.execute("sleep 0.01")
end
os.execute("kill -TERM " .. s.pid)
local crc, out = T.wait_spawned(h, nil, 15000)
T.ok(crc == 0 and out == "slept\n", "SIGTERM: the sleeping request is answered", tostring(crc) .. " " .. tostring(out))
T.is(wait_exit(s, 15000), 0, "SIGTERM: resty.lua drains and exits 0")
local _, _, cerr = T.run(CURL .. "http://127.0.0.1:" .. s.port .. "/", nil, 10000)
T.like(cerr, "Failed to connect", "after the drain, connections are refused")
stop(s)

os.execute("rm -rf " .. DIR)
T.done()
