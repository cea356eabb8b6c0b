-- Drain on signals: a child luajit server (srv:drain_on_signal) with a
-- handler that sleeps 500 ms and a request in flight gets SIGTERM (then,
-- in a second child, SIGINT): the request gets its full answer, new
-- connections are refused, pending timers run premature, run() returns
-- normally and the process exits 0.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local ffi = require("ffi")
ffi.cdef "int usleep(unsigned int usec);"

local script = os.tmpname()
local pidfile = os.tmpname()
do
    local f = assert(io.open(script, "w"))
    f:write(([[
package.path = %q .. "/?.lua;" .. package.path
local ffi = require("ffi")
ffi.cdef "int getpid(void);"
local nanosrv = require("nanosrv")
local srv = nanosrv.server {}
srv:route("GET", "/slow", function(req, res)
    io.stdout:write("in flight\n"); io.stdout:flush()
    srv:sleep(500)
    res:send(200, "slept " .. req.path)
end)
srv:timer_at(60, function(premature) io.stdout:write("premature ", tostring(premature), "\n") end)
srv:drain_on_signal(nil, 5000)
local port = srv:listen("http://127.0.0.1:0")
local pf = assert(io.open(%q, "w")); pf:write(ffi.C.getpid()); pf:close()
io.stdout:write("listening on ", port, "\n"); io.stdout:flush()
srv:run()
io.stdout:write("run returned\n"); io.stdout:flush()
srv:close()
os.exit(0)
]]):format(T.bindir, pidfile))
    f:close()
end

local function try_connect(port)
    local ok, c = pcall(T.connect, port)
    if ok then return c end
    return nil
end

for _, sig in ipairs({ "TERM", "INT" }) do
    os.remove(pidfile)
    local p = io.popen("exec timeout -s KILL 60 sh -c " .. T.shq("luajit " .. script .. "; echo exit=$?") .. " 2>&1", "r")
    local line = p:read("*l") or ""
    local port = tonumber(line:match("^listening on (%d+)$"))
    T.ok(port, "SIG" .. sig .. ": the child server started", line)
    if not port then p:close(); break end
    local pid = tonumber(T.slurp(pidfile) or "")
    T.ok(pid, "SIG" .. sig .. ": the child wrote its PID")
    local c = T.connect(port)
    c:send(T.req("GET", "/slow"))
    T.is(p:read("*l"), "in flight", "SIG" .. sig .. ": the request is in its handler")
    os.execute("kill -" .. sig .. " " .. pid)
    local refused = false
    for _ = 1, 100 do -- the signal is handled asynchronously
        local extra = try_connect(port)
        if not extra then refused = true; break end
        extra:close()
        ffi.C.usleep(10000)
    end
    T.ok(refused, "SIG" .. sig .. ": a new connection is refused once the drain started")
    local r = c:response(false, 5000)
    T.is(r and r.status, 200, "SIG" .. sig .. ": the request in flight gets its answer")
    T.is(r and r.body, "slept /slow", "SIG" .. sig .. ": in full")
    c:close()
    local rest = p:read("*a") or ""
    p:close()
    T.like(rest, "premature true", "SIG" .. sig .. ": the pending timer ran premature")
    T.like(rest, "run returned", "SIG" .. sig .. ": run() returned normally (no 'interrupted!')")
    T.ok(not rest:find("interrupted"), "SIG" .. sig .. ": nothing was interrupted", rest)
    T.like(rest, "exit=0\n?$", "SIG" .. sig .. ": the process exited 0")
end

os.remove(script)
os.remove(pidfile)
T.done()
