-- Module-level lua-resty-lrucache instances for lrucache.lua (a module is
-- loaded once per process, like one nginx worker's).
local lrucache = require("resty.lrucache")
local pureffi = require("resty.lrucache.pureffi")
local M = { plain = assert(lrucache.new(100)) }
function M.fresh(kind, n)
    return assert((kind == "plain" and lrucache or pureffi).new(n))
end
return M
