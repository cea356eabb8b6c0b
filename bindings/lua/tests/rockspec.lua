-- The rockspec: it loads, its version is the header's NSV_VERSION_STRING and
-- its file name, it lists every module, `luarocks lint` passes, `luarocks make`
-- into a scratch tree installs a module that loads with luajit, the command
-- it installs runs luajit, and a source rock made as the rockspec documents
-- installs. LuaRocks gets no rocks server and a dead proxy: nothing here may
-- touch the network.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")

local function sh(cmd)
    local p = io.popen("(" .. cmd .. ") 2>&1; echo \"rc=$?\"", "r")
    local out = p:read("*a")
    p:close()
    return tonumber(out:match("rc=(%d+)\n$")), (out:gsub("rc=%d+\n$", ""))
end

-- Absolute paths: luarocks runs in other directories.
local function abs(p) return (select(2, sh("cd " .. T.shq(p) .. " && pwd")):gsub("\n$", "")) end
local BIN = abs(T.bindir)
local ROOT = abs(BIN .. "/../..")

-- The rockspec: exactly one in bindings/lua.
local _, list = sh("ls " .. T.shq(BIN) .. " | grep '\\.rockspec$'")
local names = {}
for n in list:gmatch("[^\n]+") do names[#names + 1] = n end
if not T.is(#names, 1, "one rockspec in bindings/lua") then T.done() end
local FILE = names[1]

local spec = {}
local chunk, err = loadfile(BIN .. "/" .. FILE)
local ok = chunk and pcall(setfenv(chunk, spec))
if not T.ok(ok, FILE .. " loads as a rockspec (empty environment)", err) then T.done() end

local header = T.slurp(ROOT .. "/libnanosrv/include/nanosrv.h") or ""
local hver = header:match('#define%s+NSV_VERSION_STRING%s+"([^"]+)"')
local parts = {}
for _, k in ipairs({ "MAJOR", "MINOR", "PATCH" }) do
    parts[#parts + 1] = header:match("#define%s+NSV_VERSION_" .. k .. "%s+(%d+)")
end
T.ok(hver and hver == table.concat(parts, "."), "nanosrv.h: NSV_VERSION_STRING " .. tostring(hver) ..
     " agrees with MAJOR.MINOR.PATCH", table.concat(parts, "."))
T.is(spec.package, "nanosrv", "package name")
T.like(spec.version, "^%d+%.%d+%.%d+%-%d+$", "version is X.Y.Z-REV")
T.is((spec.version or ""):match("^(.-)%-%d+$"), hver, "rockspec version is the header's NSV_VERSION_STRING")
T.is(FILE, spec.package .. "-" .. tostring(spec.version) .. ".rockspec", "file name is package-version.rockspec")
T.is(spec.description and spec.description.license, "MIT", "licence")

-- Dependencies: LuaJIT (Lua 5.1 API), lua-cjson only if a shipped file needs it.
local deps = spec.dependencies or {}
T.is(deps[1], "lua == 5.1", "depends on lua == 5.1 (LuaJIT)")
local ext = spec.external_dependencies and spec.external_dependencies.NANOSRV or {}
T.ok(ext.library == "nanosrv" and ext.header == "nanosrv.h", "external dependency NANOSRV: libnanosrv, nanosrv.h")

local build = spec.build or {}
local mods = build.modules or {}
local inst = build.install or {}
-- Every module file of the binding is listed, under its module name.
local _, files = sh("cd " .. T.shq(BIN) .. " && ls nanosrv.lua nanosrv/*.lua")
local shipped = {}
for f in files:gmatch("[^\n]+") do
    local name = f:gsub("%.lua$", ""):gsub("/", ".")
    T.is(mods[name], f, "module " .. name .. " is listed as " .. f)
    shipped[#shipped + 1] = f
end
for name, f in pairs(mods) do
    T.ok(io.open(BIN .. "/" .. f, "rb") ~= nil, "listed module " .. name .. ": " .. f .. " exists")
end
for _, f in ipairs(inst.lua or {}) do
    T.ok(io.open(BIN .. "/" .. f, "rb") ~= nil, "installed file " .. f .. " exists")
end
local bin = inst.bin or {}
T.is(bin["nanosrv-resty"], "examples/resty.lua", "command nanosrv-resty is examples/resty.lua")
shipped[#shipped + 1] = bin["nanosrv-resty"]

local needs_cjson = {}
for _, f in ipairs(shipped) do
    local text = T.slurp(BIN .. "/" .. f) or ""
    -- A plain require, not one guarded by pcall (which works without it).
    for line in text:gmatch("[^\n]+") do
        if line:find("require%s*%(?%s*[\"']cjson") and not line:find("pcall") and not line:find("^%s*%-%-") then
            needs_cjson[#needs_cjson + 1] = f
            break
        end
    end
end
local has_cjson = false
for _, d in ipairs(deps) do if d:find("^lua%-cjson") then has_cjson = true end end
T.is(has_cjson, #needs_cjson > 0, "lua-cjson is a dependency exactly when a shipped file requires it (" ..
     (#needs_cjson > 0 and table.concat(needs_cjson, ", ") or "none does") .. ")")

-- LuaRocks, offline: no rocks server, a proxy that refuses, and LuaJIT as
-- the interpreter (the wrapper of a command runs it).
local tmp = os.tmpname()
os.remove(tmp)
local W = tmp .. ".rock"
os.execute("mkdir -p " .. T.shq(W .. "/src/nanosrv/bindings") .. " " .. T.shq(W .. "/pub"))
local cfg = io.open(W .. "/config.lua", "wb")
cfg:write('rocks_servers = {}\nlua_interpreter = "luajit"\n')
cfg:close()
local ENV = "LUAROCKS_CONFIG=" .. T.shq(W .. "/config.lua") ..
            " http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 HOME=" .. T.shq(W) .. " "
local LIB = os.getenv("NANOSRV_LIBRARY") or (ROOT .. "/build/libnanosrv.so.1")
local LIBDIR = abs(LIB:match("^(.*)/[^/]*$") or ".")
LIB = LIBDIR .. "/" .. LIB:match("[^/]*$")
local DEPDIRS = " NANOSRV_LIBDIR=" .. T.shq(LIBDIR) .. " NANOSRV_INCDIR=" .. T.shq(ROOT .. "/libnanosrv/include")
-- `luarocks ARGS` in directory dir (bounded).
local function luarocks(dir, args) return sh("cd " .. T.shq(dir) .. " && " .. ENV .. "timeout 120 luarocks " .. args) end

local rc, out = luarocks(BIN, "lint " .. FILE)
T.ok(rc == 0, "luarocks lint", out)

-- A copy of bindings/lua and bindings/cdef (luarocks make builds in place).
local SRC = W .. "/src/nanosrv/bindings"
os.execute("cp -r " .. T.shq(BIN) .. " " .. T.shq(SRC .. "/lua") .. " && cp -r " .. T.shq(ROOT .. "/bindings/cdef") ..
           " " .. T.shq(SRC .. "/cdef"))
local TREE = W .. "/tree"
rc, out = luarocks(SRC .. "/lua", "make --tree " .. T.shq(TREE) .. " --deps-mode=one " .. FILE .. DEPDIRS)
T.ok(rc == 0, "luarocks make --tree installs", out)

local function lua_paths(tree)
    return "package.path=" .. string.format("%q", tree .. "/share/lua/5.1/?.lua;" .. tree .. "/share/lua/5.1/?/init.lua;")
           .. "..package.path "
end
-- Loaded from the tree alone: no source tree on the path, the cdef installed.
local function load_from(tree)
    local req = {}
    for name in pairs(mods) do req[#req + 1] = name end
    table.sort(req)
    local code = lua_paths(tree) .. "local n = require'nanosrv' " ..
                 "for _, m in ipairs{'" .. table.concat(req, "','") .. "'} do require(m) end " ..
                 "io.write(n.version(), ' ', debug.getinfo(n.version, 'S').source)"
    return sh("cd / && env -u NANOSRV_CDEF -u NANOSRV_ABI_JSON NANOSRV_LIBRARY=" .. T.shq(LIB) ..
              " timeout 30 luajit -e " .. T.shq(code))
end
rc, out = load_from(TREE)
T.ok(rc == 0 and out:find("^" .. (hver or "?"):gsub("%p", "%%%0") .. " "), "require'nanosrv' from the tree prints " ..
     tostring(hver), out)
T.ok(out:find(" @" .. TREE .. "/share/lua/5.1/nanosrv.lua", 1, true) ~= nil, "the module came from the tree", out)

-- The command: a wrapper that runs examples/resty.lua with luajit and the
-- tree's paths.
local wrapper = T.slurp(TREE .. "/bin/nanosrv-resty") or ""
T.like(wrapper, "exec '[^']*/luajit' ", "nanosrv-resty runs luajit")
T.ok(wrapper:find(TREE .. "/share/lua/5.1/?.lua", 1, true) ~= nil, "nanosrv-resty has the tree's package.path")
rc, out = sh("cd / && NANOSRV_LIBRARY=" .. T.shq(LIB) .. " timeout 10 " .. T.shq(TREE .. "/bin/nanosrv-resty") ..
             " --help </dev/null")
-- 124: timeout, 126/127: the wrapper or its interpreter missing.
T.ok(wrapper ~= "" and rc ~= nil and rc ~= 124 and rc < 126 and not out:find("module '[^']+' not found"),
     "nanosrv-resty --help runs and finds its modules", out)

-- The library check is real: a prefix without it fails, naming it.
rc, out = luarocks(SRC .. "/lua", "make --tree " .. T.shq(W .. "/tree-x") .. " --deps-mode=one " .. FILE ..
                   " NANOSRV_DIR=" .. T.shq(W .. "/nowhere"))
T.ok(rc ~= 0 and out:find("NANOSRV", 1, true), "luarocks make without libnanosrv fails and says NANOSRV", out)

-- Publishing as the rockspec documents: the source archive (here of the copy,
-- as git archive of a tag would make it) and the rockspec zipped into a
-- source rock, installed elsewhere without the archive beside it.
local PUB = W .. "/pub"
local SROCK = FILE:gsub("%.rockspec$", ".src.rock")
rc, out = sh("tar -czf " .. T.shq(PUB .. "/nanosrv-src.tar.gz") .. " -C " .. T.shq(W .. "/src") .. " nanosrv && cd " ..
             T.shq(PUB) .. " && cp " .. T.shq(BIN .. "/" .. FILE) .. " . && zip -q " .. SROCK .. " " .. FILE ..
             " nanosrv-src.tar.gz && mkdir -p other && mv " .. SROCK .. " other/")
T.ok(rc == 0, "source rock zipped", out)
rc, out = luarocks(PUB .. "/other", "install --tree " .. T.shq(W .. "/tree2") .. " --deps-mode=one " .. SROCK .. DEPDIRS)
T.ok(rc == 0, "luarocks install of the source rock", out)
rc, out = load_from(W .. "/tree2")
T.ok(rc == 0 and out:find("^" .. (hver or "?"):gsub("%p", "%%%0") .. " "), "and it loads", out)

os.execute("rm -rf " .. T.shq(W))
T.done()
