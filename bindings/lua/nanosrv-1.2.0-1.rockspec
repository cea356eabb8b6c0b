package = "nanosrv"
version = "1.2.0-1"
-- Meant for `luarocks make` from a source checkout (run in bindings/lua),
-- which builds from the working directory and does not fetch `source`.
source = {
   url = "file://.",
}
description = {
   summary = "LuaJIT FFI binding for libnanosrv (HTTP/1.1, WebSocket server)",
   detailed = [[
      Pure-FFI binding: loads libnanosrv.so.1 at run time, pulls events in
      batches with nsv_poll and reads request strings lazily from one arena.
   ]],
   license = "MIT",
}
dependencies = {
   "lua >= 5.1", -- LuaJIT 2.1 (the module needs its ffi library)
}
build = {
   type = "builtin",
   modules = {
      nanosrv = "nanosrv.lua",
      ["nanosrv.multipart"] = "nanosrv/multipart.lua",
   },
   install = {
      -- The shared declarations, installed next to nanosrv.lua where the
      -- module looks first.
      lua = { "../cdef/nanosrv_cdef.h", "../cdef/nanosrv_abi.json" },
   },
}
