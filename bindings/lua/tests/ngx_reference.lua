-- The ngx API against the real thing: every handler of tests/ngx_cases/
-- runs under examples/resty.lua and under nginx + lua-nginx-module
-- (tools/ngx-lua-ref.sh), and the same requests must get the same status,
-- body and the headers that matter (not Server, Date, the framing or
-- keep-alive). The differences we keep on purpose are listed in DIFFERENT
-- with their reason. Without the reference this prints a SKIP with the
-- reason (ngx_api.lua checks our own outputs either way).
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")

local ROOT = T.bindir .. "/../.."
local REF = ROOT .. "/tools/ngx-lua-ref.sh"
local CASES = T.dir .. "/ngx_cases/"

local function sh(cmd)
    local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
    local out = p:read("*a")
    p:close()
    local rc = tonumber(out:match("rc=(%d+)\n$"))
    return rc, out:gsub("rc=%d+\n$", "")
end

local rc, why = sh(REF .. " fetch")
if rc ~= 0 then
    T.skip("nginx + lua-nginx-module reference", (why:gsub("\n", " ")))
    T.done()
end

-- Requests per handler: a path, or {path, curl arguments}.
local REQUESTS = {
    ["api.lua"] = {
        "/say", "/empty", "/status?s=201", "/exit?s=0", "/exit?s=200", "/exit?s=201", "/exit?s=204",
        "/exit?s=301", "/exit?s=302", "/exit?s=400", "/exit?s=401", "/exit?s=403", "/exit?s=404",
        "/exit?s=405", "/exit?s=413", "/exit?s=418", "/exit?s=429", "/exit?s=494", "/exit?s=497", "/exit?s=500",
        "/exit?s=502", "/exit?s=503", "/exit?s=504", "/exit?s=507", "/exit?s=444", "/exit_after_say", "/exit_ok_status",
        "/redirect?to=/a%3Fb", "/redirect?to=http://e.x/&s=301", "/redirect?to=/t&s=303", "/redirect?to=/t&s=307",
        "/redirect?to=/t&s=308", "/redirect?to=/t&s=200", "/headers_out", "/no_type", "/content_length",
        "/header_late", "/flush", "/eof",
        { "/var?a=1&B=2", "-H 'X-Test: t1' -H 'Cookie: c=cv'" },
        { "//x/./y/../../v%61r", "--path-as-is -H 'Host: Example.COM:8080'" },
        { "/../x", "--path-as-is" }, { "/a/%2e%2e/var", "--path-as-is" }, { "/%00", "--path-as-is" },
        "/args?a=1&b&c=&a=2&d=%20+x&=e&f==", "/args?a=1&b=2&c=3&max=2",
        { "/post", "-d 'a=1&b=%20&b=2'" },
        { "/req", "-H 'X-Test: t1' -H 'X-Multi: 1' -H 'X-Multi: 2'" },
        "/port", "/strings", "/time", "/ctx", "/constants", "/sleep", "/thread", "/timer", "/json", "/nope",
        { "/say", "-I" },
    },
    ["errors.lua"] = {
        "/raise", "/raise_table", "/raise_after_say", "/raise_after_flush", "/exit_error", "/exit_444", "/exit_pcall",
        "/inject_value", "/inject_name", "/inject_list", "/inject_caught", "/redirect_bad", "/redirect_status",
        "/print_bad", "/var_set", "/unknown",
    },
    ["shdict.lua"] = { "/" },
}

-- Kept on purpose: [handler .. " " .. path] = reason.
local DIFFERENT = {
    ["errors.lua /inject_value"] = "OpenResty escapes CR/LF in header values (%0D%0A); we refuse them: 500 and a log line",
    ["errors.lua /inject_name"] = "OpenResty escapes a name that is not a token; we refuse it",
    ["errors.lua /inject_list"] = "the same for one value of a repeated header",
    ["errors.lua /inject_caught"] = "the error OpenResty does not raise is caught and printed here",
    ["errors.lua /redirect_bad"] = "OpenResty escapes the Location; we refuse a control character",
}

-- One request with curl: curl's exit status and {status, headers (lower
-- name -> sorted list), body} normalised for comparison.
local KEEP = { ["content-type"] = true, location = true, ["set-cookie"] = true, ["content-length"] = false }
local function request(port, req)
    local path, args = req, ""
    if type(req) == "table" then path, args = req[1], req[2] end
    local crc, out = sh("curl -s -i --max-time 10 " .. args .. " " .. T.shq("http://127.0.0.1:" .. port .. path))
    out = out:gsub("nginx/[%d.]+", "nginx"):gsub(":" .. port, ":PORT")
    local head, body = out:match("^(.-)\r\n\r\n(.*)$")
    local r = { curl = crc == 0 and 0 or "error " .. crc, headers = {}, body = body or out, status = "-" }
    if head then
        r.status = head:match("^HTTP/1%.%d (%d+)") or "-"
        for name, value in head:gmatch("\r\n([^:\r\n]+):[ \t]*([^\r\n]*)") do
            local k = name:lower()
            if KEEP[k] or k:find("^x%-") or (k == "connection" and value:lower() == "close") then
                local l = r.headers[k] or {}
                l[#l + 1] = value
                r.headers[k] = l
            end
        end
        for _, l in pairs(r.headers) do table.sort(l) end
    end
    -- nginx answers a body-less request without waiting; a chunked stream
    -- cut short is curl's error 18 for both: the same outcome.
    return r
end

local function show(r)
    local hs = {}
    for k, l in pairs(r.headers) do hs[#hs + 1] = k .. "=" .. table.concat(l, "|") end
    table.sort(hs)
    return string.format("curl %s, status %s, headers {%s}, body %q", tostring(r.curl), r.status,
                         table.concat(hs, ", "), r.body)
end

local function start_ours(handler)
    local base = os.tmpname()
    local cmd = "exec timeout -s KILL 120 luajit " .. T.bindir .. "/examples/resty.lua --port 0 --shdict ngx_test=1m " .. handler
    os.execute("( sh -c " .. T.shq(cmd) .. " >" .. base .. ".out 2>" .. base .. ".err </dev/null & echo $! >" ..
               base .. ".pid ) >/dev/null 2>&1")
    for _ = 1, 500 do
        local port = tonumber((T.slurp(base .. ".out") or ""):match("listening on (%d+)\n"))
        local pid = tonumber(T.slurp(base .. ".pid") or "")
        if port and pid then return { port = port, pid = pid, base = base } end
        os.execute("sleep 0.01")
    end
    return { base = base, pid = tonumber(T.slurp(base .. ".pid") or "") }
end
local function stop_ours(s)
    if s.pid then os.execute("kill " .. s.pid .. " 2>/dev/null") end
    for _, ext in ipairs({ "", ".out", ".err", ".pid" }) do os.remove(s.base .. ext) end
end

-- The reference's nginx.conf (tools/ngx-lua-ref.sh conf) plus the shared
-- dictionary the cases use, run daemonized like `start` does; "PORT PID".
local function start_ref(dir, handler)
    local _, port = sh("python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])'")
    port = tonumber(port)
    local crc, out = sh(REF .. " conf " .. dir .. " " .. handler .. " " .. tostring(port))
    if crc ~= 0 then return crc, out end
    local conf = T.slurp(dir .. "/nginx.conf") or ""
    conf = conf:gsub("(lua_code_cache on;)", "%1\n    lua_shared_dict ngx_test 1m;", 1)
    local f = assert(io.open(dir .. "/nginx.conf", "w"))
    f:write(conf)
    f:close()
    local _, env = sh(REF .. " env")
    crc, out = sh("env " .. T.shq((env:gsub("\n", ""))) .. " nginx -p " .. dir .. " -c " .. dir .. "/nginx.conf -e " ..
                  dir .. "/error.log")
    if crc ~= 0 then return crc, out end
    for _ = 1, 100 do
        local pid = T.slurp(dir .. "/nginx.pid")
        if pid and sh("curl -s -o /dev/null --max-time 1 http://127.0.0.1:" .. port .. "/") == 0 then
            return 0, port .. " " .. pid
        end
        os.execute("sleep 0.05")
    end
    return 1, "nginx did not answer on port " .. port
end

local files = {}
for name in pairs(REQUESTS) do files[#files + 1] = name end
table.sort(files)
for _, file in ipairs(files) do
    local handler = CASES .. file
    local dir = os.tmpname()
    os.remove(dir)
    local src, line = start_ref(dir, handler)
    local rport = line:match("^(%d+) %d+")
    local ours = start_ours(handler)
    if src ~= 0 or not rport then
        T.ok(false, file .. ": the reference starts", line)
    elseif not ours.port then
        T.ok(false, file .. ": resty.lua starts", T.slurp(ours.base .. ".err"))
    else
        local shdict_missing = false
        for _, req in ipairs(REQUESTS[file]) do
            local key = file .. " " .. (type(req) == "table" and (req[1] .. (req[2] == "-I" and " -I" or "")) or req)
            local want = request(tonumber(rport), req)
            local got = request(ours.port, req)
            if want.body:find("^no dict ngx_test") then
                shdict_missing = true
                T.skip(key, "the reference's nginx.conf has no lua_shared_dict ngx_test")
            elseif DIFFERENT[key] then
                T.ok(got.status ~= "-" or got.curl ~= 0, key .. ": differs on purpose: " .. DIFFERENT[key])
            else
                T.ok(show(want) == show(got), key .. ": same as nginx",
                     "nginx: " .. show(want) .. "\nours:  " .. show(got))
            end
        end
        local _ = shdict_missing
    end
    stop_ours(ours)
    if rport then sh(REF .. " stop " .. dir) end
    os.execute("rm -rf " .. dir)
end

T.done()
