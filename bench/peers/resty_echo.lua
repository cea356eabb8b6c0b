-- The echo contract (bench/METHOD.md) as an OpenResty content handler. The
-- same file runs in nginx + lua-nginx-module (content_by_lua_file, through
-- tools/ngx-lua-ref.sh) and in bindings/lua/examples/resty.lua, so the two
-- measure the same Lua code. POST|PUT /echo answers the body byte for byte;
-- everything else gets a JSON description of the request.
--
-- Differences from examples/echo.lua, which nginx imposes: the path is
-- ngx.var.uri (nginx decodes and normalises it), and HEAD answers carry no
-- body on either server.

-- A content handler file runs as a whole for every request, so what does
-- not change between requests is made once and kept in package.loaded
-- (shared by every request of the Lua VM, in both servers).
local json_str = package.loaded["bench.resty_echo.json_str"]
if not json_str then
    local ffi = require "ffi"
    ffi.cdef "size_t strcspn(const char *s, const char *reject);"
    local strcspn, sub, gsub, format, byte = ffi.C.strcspn, string.sub, string.gsub, string.format, string.byte
    -- JSON string escaping as the C echo-server does. The scan for bytes to
    -- escape is strcspn, as there: a Lua pattern scan of the ~4 KiB query
    -- of the json case would cost more than the rest of the request.
    local SPECIAL = '"\\'
    for b = 1, 0x1f do SPECIAL = SPECIAL .. string.char(b) end
    local function esc(c)
        if c == '"' or c == "\\" then return "\\" .. c end
        return format("\\u%04x", byte(c))
    end
    json_str = function(s)
        -- The C server caps path and query at 8192 bytes in its description.
        if #s > 8192 then s = sub(s, 1, 8192) end
        -- strcspn stops at a NUL too, which then takes the escaping path.
        if strcspn(s, SPECIAL) == #s then return '"' .. s .. '"' end
        return '"' .. gsub(s, '[%z\1-\31"\\]', esc) .. '"'
    end
    package.loaded["bench.resty_echo.json_str"] = json_str
end
local ngx = ngx

local method, uri = ngx.req.get_method(), ngx.var.uri
ngx.req.read_body()
local body = ngx.req.get_body_data() or ""
if (method == "POST" or method == "PUT") and uri == "/echo" then
    ngx.header["Content-Type"] = "application/octet-stream"
    ngx.print(body)
    return
end
ngx.header["Content-Type"] = "application/json"
ngx.print('{"method":', json_str(method), ',"path":', json_str(uri), ',"query":',
          json_str(ngx.var.args or ""), ',"body_len":', #body, '}')
