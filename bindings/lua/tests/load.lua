-- Load-time checks: a bad library path and a cdef whose event layout does
-- not match the library fail with messages naming both sides.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")

local function try(env)
    local cmd = env .. " luajit -e 'package.path=" .. string.format("%q", T.bindir .. "/?.lua;")
                .. "..package.path; require(\"nanosrv\")' 2>&1"
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    return out
end

local lib = os.getenv("NANOSRV_LIBRARY") or ""
T.is(try(""), "", "loads with the environment of the test")
T.like(try("NANOSRV_LIBRARY=/nonexistent/libnanosrv.so.1"),
       "cannot load NANOSRV_LIBRARY=/nonexistent/libnanosrv.so.1", "bad NANOSRV_LIBRARY is named in the error")

-- A cdef whose nsv_event has an extra field.
local f = io.open(T.bindir .. "/../cdef/nanosrv_cdef.h", "rb")
local text = f:read("*a")
f:close()
local tmp = os.tmpname()
f = io.open(tmp, "wb")
f:write((text:gsub("uint32_t tls_off, tls_len;", "uint32_t tls_off, tls_len, pad_a, pad_b;")))
f:close()
local out = try("NANOSRV_CDEF=" .. tmp)
os.remove(tmp)
T.like(out, "nsv_event size mismatch: .* says 112 bytes, nanosrv_cdef.h declares 120", "event size mismatch")
T.like(out, lib:gsub("%p", "%%%0"), "the message names the library path")
T.like(try("NANOSRV_CDEF=/nonexistent.h"), "cannot find nanosrv_cdef.h", "missing cdef is reported")
T.done()
