-- The version below (and this file's name) is the only thing a release
-- changes; bindings/lua/tests/rockspec.lua checks both against NSV_VERSION
-- in libnanosrv/include/nanosrv.h.
--
-- Install from a source checkout (run in bindings/lua; `make` does not fetch
-- `source`, it builds from this directory):
--     luarocks make                          -- system tree
--     luarocks make --tree DIR --deps-mode=none
-- Publish: a source rock is this file and the source archive, zipped; it is
-- what luarocks installs from the rocks server, and installing it never
-- fetches source.url. Make it from a release tag in a scratch directory
-- (`luarocks pack` cannot: it fetches the relative file:// URL below from a
-- temporary directory), then upload both:
--     git -C "$REPO" archive --format=tar.gz --prefix=nanosrv/ -o "$PWD/nanosrv-src.tar.gz" \
--         vX.Y.Z bindings/lua bindings/cdef
--     cp "$REPO"/bindings/lua/nanosrv-X.Y.Z-1.rockspec .
--     zip nanosrv-X.Y.Z-1.src.rock nanosrv-X.Y.Z-1.rockspec nanosrv-src.tar.gz
--     luarocks upload nanosrv-X.Y.Z-1.rockspec nanosrv-X.Y.Z-1.src.rock --api-key=KEY
-- (With the archive hosted at an https:// URL, that URL goes into
-- source.url instead and `luarocks upload` packs the rock itself.)
package = "nanosrv"
version = "1.5.0-1"
source = {
   -- The archive inside the source rock (see Publish above).
   url = "file://nanosrv-src.tar.gz",
   dir = "nanosrv/bindings/lua",
}
description = {
   summary = "LuaJIT FFI binding for libnanosrv (HTTP/1.1, WebSocket, TLS, raw TCP server)",
   detailed = [[
      Pure-FFI binding: loads libnanosrv.so.1 at run time, pulls events in
      batches with nsv_poll and reads request strings lazily from one arena.
      Coroutine handlers, timers, cosockets, and an OpenResty-flavoured API
      (nanosrv.ngx) with the nanosrv-resty command to run content handler
      files without nginx.
   ]],
   license = "MIT",
}
dependencies = {
   -- LuaJIT only: every module uses LuaJIT's `ffi` (there is no C glue), so
   -- PUC Lua 5.1 cannot load them. LuaRocks has no way to say "LuaJIT"; a
   -- LuaRocks configured for LuaJIT reports Lua 5.1, hence == 5.1. Use it
   -- with `lua_interpreter = "luajit"` in its config (OpenResty's luarocks
   -- is), or the nanosrv-resty command runs the wrong interpreter.
   "lua == 5.1",
}
external_dependencies = {
   -- libnanosrv.so and nanosrv.h, as `make install` puts them; elsewhere,
   -- say where: luarocks make NANOSRV_DIR=/opt/nanosrv (or NANOSRV_LIBDIR=
   -- and NANOSRV_INCDIR=). Only checked: the module loads libnanosrv.so.1 at
   -- run time from $NANOSRV_LIBRARY, else from the system search path, so a
   -- library outside it needs NANOSRV_LIBRARY (or ldconfig) at run time too.
   NANOSRV = {
      library = "nanosrv",
      header = "nanosrv.h",
   },
}
build = {
   type = "builtin",
   modules = {
      nanosrv = "nanosrv.lua",
      ["nanosrv.multipart"] = "nanosrv/multipart.lua",
      ["nanosrv.socket"] = "nanosrv/socket.lua",
      ["nanosrv.http"] = "nanosrv/http.lua",
      ["nanosrv.websocket"] = "nanosrv/websocket.lua",
      ["nanosrv.ops"] = "nanosrv/ops.lua",
      ["nanosrv.ngx"] = "nanosrv/ngx.lua",
      ["nanosrv.shdict"] = "nanosrv/shdict.lua",
      ["nanosrv.digest"] = "nanosrv/digest.lua",
      ["nanosrv.regex"] = "nanosrv/regex.lua",
   },
   install = {
      -- The shared declarations, installed next to nanosrv.lua where the
      -- module looks first.
      lua = { "../cdef/nanosrv_cdef.h", "../cdef/nanosrv_abi.json" },
      -- A Lua script: LuaRocks installs a wrapper that runs it with the
      -- configured interpreter and this tree's package paths.
      bin = { ["nanosrv-resty"] = "examples/resty.lua" },
   },
}
