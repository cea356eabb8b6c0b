-- Hello world: luajit bindings/lua/examples/resty.lua --port 0 bindings/lua/examples/resty/hello.lua
ngx.say("hello, world")
