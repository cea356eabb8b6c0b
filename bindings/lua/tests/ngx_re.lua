-- ngx.re (nanosrv/regex.lua, PCRE2 through the FFI): every function and
-- option against the outputs lua-nginx-module documents, errors, the "o"
-- cache, memory; then one handler under examples/resty.lua and, when
-- tools/ngx-lua-ref.sh can run it, the same handler under nginx +
-- lua-nginx-module with the same output.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
package.path = T.bindir .. "/?.lua;" .. package.path
local regex = require("nanosrv.regex")

local ngx = {}
T.ok(regex.install(ngx) == ngx.re and type(ngx.re.match) == "function", "install(ngx) sets ngx.re and returns it")
local re = ngx.re

-- A table as sorted "k=v" pairs, nested lists as {a,b}.
local function show(t)
    if type(t) ~= "table" then return tostring(t) end
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local p = {}
    for _, k in ipairs(keys) do
        local v = t[k]
        if type(v) == "table" then v = "{" .. table.concat(v, ",") .. "}" end
        p[#p + 1] = tostring(k) .. "=" .. tostring(v)
    end
    return "{" .. table.concat(p, " ") .. "}"
end
local function is(got, want, name) return T.is(show(got), want, name) end

-- ngx.re.match, the documentation's examples
is(re.match("hello, 1234", "[0-9]+"), "{0=1234}", "match: the whole match in [0]")
is(re.match("hello, 1234", "([0-9])[0-9]+"), "{0=1234 1=1}", "match: a group in [1]")
is(re.match("hello, 1234", "(?<remaining>[0-9]+)"), "{0=1234 1=1234 remaining=1234}", "match: a named group by number and name")
is(re.match("hello, world", "HEL LO", "ix"), "{0=hello}", "match: i (caseless) and x (extended)")
is(re.match("hello, 美好生活", "HELLO, (.{2})", "iu"), "{0=hello, 美好 1=美好}", "match: u, . is one UTF-8 character")
is(re.match("hello, 美好生活", "HELLO, (.{2})", "i"), "{0=hello, \xe7\xbe 1=\xe7\xbe}", "match: without u, . is one byte")
is(re.match("hello, world", "(world)|(hello)|(?<named>howdy)"), "{0=hello 1=false 2=hello 3=false named=false}",
   "match: unmatched groups are false, by number and name")
is(re.match("hello, world", "(?<named>\\w+), (?<named>\\w+)", "D"), "{0=hello, world 1=hello 2=world named={hello,world}}",
   "match: D gives a list per duplicate name")
is(re.match("ab", "(?<n>a)|(?<n>b)", "D"), "{0=a 1=a 2=false n={a}}", "match: D lists only the matched ones")
T.is(re.match("hello", "x"), nil, "match: no match is nil")
T.is(select("#", re.match("hello", "x")), 1, "match: no match is one nil, no error")
local ctx = {}
is(re.match("1234, hello", "[0-9]+", "", ctx), "{0=1234}", "match with ctx")
T.is(ctx.pos, 5, "ctx.pos after the match")
ctx = { pos = 2 }
is(re.match("1234, hello", "[0-9]+", "", ctx), "{0=234}", "match from ctx.pos = 2")
T.is(ctx.pos, 5, "ctx.pos moves past the match")
local res = { stale = "kept" }
T.ok(re.match("ab", "(a)(b)", nil, nil, res) == res and res[1] == "a" and res[2] == "b" and res.stale == "kept",
     "match: res_table is filled and returned")
is(re.match("A\nb", "^b$", "m"), "{0=b}", "match: m (multiline)")
T.is(re.match("a\nb", "a.b"), nil, "match: . does not match a newline by default")
is(re.match("a\nb", "a.b", "s"), "{0=a\nb}", "match: s (dotall)")
T.is(re.match("xab", "ab", "a"), nil, "match: a (anchored) fails off the start")
is(re.match("abx", "ab", "a"), "{0=ab}", "match: a (anchored) at the start")
is(re.match("hello", "l+", "jo"), "{0=ll}", "match: j (JIT) and o")
is(re.match("\\u0041", "\\\\u0041"), "{0=\\u0041}", "match: without J, \\u is no escape")
is(re.match("A", "\\u0041", "J"), "{0=A}", "match: J, \\u0041 as in JavaScript")
is(re.match("a", "(?:(x)|a)\\1", "J"), "{0=a 1=false}", "match: J, a backreference to an unset group matches empty")
is(re.match("ä", "^.$", "U"), "{0=ä}", "match: U (UTF-8)")
is(re.match(1234, "2(3)"), "{0=23 1=3}", "match: a number subject is a string")

-- errors
local m, err = re.match("(abc", "(abc")
T.ok(m == nil and err:find("^pcre2_compile%(%) failed: missing closing parenthesis in \"%(abc\"") ~= nil,
     "match: a bad pattern gives nil and the compiler's message", err)
local from, to
from, to, err = re.find("x", "a{2,1}")
T.ok(from == nil and to == nil and err:find("^pcre2_compile%(%) failed: numbers out of order") ~= nil, "find: bad pattern: nil, nil, err", err)
local s, n
s, n, err = re.sub("x", "[", "y")
T.ok(s == nil and n == nil and err:find("missing terminating %] for character class") ~= nil, "sub: bad pattern: nil, nil, err", err)
local it
it, err = re.gmatch("x", "(")
T.ok(it == nil and err:find("^pcre2_compile") ~= nil, "gmatch: bad pattern: nil, err", err)
m, err = re.match("hello", "h", "d")
T.ok(m == nil and err == 'the "d" option (DFA matching) is not supported', "d (DFA) is refused with an error string", err)
T.raises('^[^:]+:%d+: unknown flag "Q" %(flags "iQ"%)$', "an unknown option raises, naming the caller's line",
         function() local r = re.match("a", "a", "iQ"); return r end)
T.raises("unknown flag \"z\"", "sub: unknown option raises", function() return re.sub("a", "a", "b", "z") end)
T.raises("bad argument 'regex' to 'ngx.re.find' %(string expected, got table%)", "a regex that is not a string raises",
         function() return re.find("a", {}) end)
T.raises("bad argument 'options' to 'ngx.re.gsub' %(string expected, got number%)", "options that are not a string raise",
         function() return re.gsub("a", "a", "b", 7) end)
m, err = re.match("\255", "^.$", "u")
T.ok(m == nil and err:find("^pcre2_match%(%) failed: UTF%-8 error") ~= nil, "u: invalid UTF-8 in the subject is an error", err)
m, err = re.match("\255", "^.$", "U")
T.ok(m == nil and err:find("UTF%-8 error") ~= nil, "U: the subject is still checked (no undefined behaviour)", err)
m, err = re.match("abc", "a", nil, { pos = 10 })
T.ok(m == nil and err == "pcre2_match() failed: bad offset value", "ctx.pos past the end is an error", err)
m, err = re.match(string.rep("a", 30), "(a+)+$" .. "b")
T.ok(m == nil and (err == nil or err:find("limit")), "a catastrophic pattern ends (no match or a limit error)", err)

-- ngx.re.find
from, to, err = re.find("hello, 1234", "([0-9]+)", "jo")
T.ok(from == 8 and to == 11 and err == nil, "find: from, to of the match")
from, to = re.find("hello, 1234", "([0-9])([0-9]+)", "jo", nil, 2)
T.ok(from == 9 and to == 11, "find: nth = 2, the second group")
from, to, err = re.find("hello", "(l)(l)", nil, nil, 3)
T.ok(from == nil and to == nil and err == "nth out of bound", "find: nth past the groups", err)
T.is(select("#", re.find("hello", "(l)(x)?", nil, nil, 2)), 2, "find: an unset group is nil, nil")
ctx = { pos = 5 }
from, to = re.find("1234, 1234", "[0-9]+", "", ctx)
T.ok(from == 7 and to == 10 and ctx.pos == 11, "find with ctx.pos")
T.is(re.find("hello", "x"), nil, "find: no match")

-- ngx.re.gmatch
it = re.gmatch("hello, world!", "([a-z]+)", "i")
is(it(), "{0=hello 1=hello}", "gmatch: first")
is(it(), "{0=world 1=world}", "gmatch: second")
T.is(it(), nil, "gmatch: then nil")
T.is(it(), nil, "gmatch: and nil again")
local all = {}
for mm in re.gmatch("a1b22c333", "[0-9]+") do all[#all + 1] = mm[0] end
T.is(table.concat(all, ","), "1,22,333", "gmatch in a for loop")
all = {}
for mm in re.gmatch("ab", "") do all[#all + 1] = "<" .. mm[0] .. ">" end
T.is(#all, 3, "gmatch: an empty pattern matches at each of the 3 positions")
all = {}
for mm in re.gmatch("äö", "", "u") do all[#all + 1] = mm[0] end
T.is(#all, 3, "gmatch u: empty matches step by one UTF-8 character")

-- ngx.re.sub / gsub, the documentation's examples
s, n = re.sub("hello, 1234", "([0-9])[0-9]", "[$0][$1]")
T.ok(s == "hello, [12][1]34" and n == 1, "sub: $0 and $1", s)
s, n = re.sub("hello, 1234", "[0-9]", "${0}00")
T.ok(s == "hello, 100234" and n == 1, "sub: ${0}", s)
s = re.sub("hello, 1234", "[0-9]", "$$")
T.is(s, "hello, $234", "sub: $$ is a dollar")
s = re.sub("abcdefghijk", "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", "<$10>")
T.is(s, "<j>k", "sub: $10 is group 10")
T.is(re.sub("abc", "b", "[$5]"), "a[]c", "sub: a group the pattern lacks is empty")
T.is(re.sub("abc", "(?<x>b)", "[${x}]"), "a[b]c", "sub: ${name}")
for _, bad in ipairs({ "[$x]", "[$", "[${1]", "${nope}" }) do
    s, n, err = re.sub("abc", "(?<x>b)", bad)
    T.ok(s == nil and n == nil and err == "failed to compile the replacement template", "sub: template " .. bad .. " is refused")
end
local func = function(mm) return "[" .. mm[0] .. "][" .. mm[1] .. "]" end
s, n = re.sub("hello, 1234", "( [0-9] ) [0-9]", func, "x")
T.ok(s == "hello, [12][1]34" and n == 1, "sub: a function replacement", s)
s, n = re.gsub("hello, world", "([a-z])[a-z]+", "[$0,$1]", "i")
T.ok(s == "[hello,h], [world,w]" and n == 2, "gsub: template", s)
func = function(mm) return "[" .. mm[0] .. "," .. mm[1] .. "]" end
s, n = re.gsub("hello, world", "([a-z])[a-z]+", func, "i")
T.ok(s == "[hello,h], [world,w]" and n == 2, "gsub: function", s)
s, n = re.gsub("hello world", "[a-z]+", function() return nil end)
T.ok(s == "nil nil" and n == 2, "gsub: the function's result goes through tostring", s)
s, n = re.gsub("hello", "x", "y")
T.ok(s == "hello" and n == 0, "gsub: no match, the subject and 0")
s, n = re.gsub("abc", "", "-")
T.ok(s == "-a-b-c-" and n == 4, "gsub: empty matches", s)
s, n = re.gsub("aä", "", "-", "u")
T.ok(s == "-a-ä-" and n == 3, "gsub u: empty matches step over a whole character", s)
s, n = re.gsub("aaa b", "a*", "-")
T.ok(s == "-- -b-" and n == 4, "gsub: a* next to empty matches", s)
s = re.gsub("hello, 美好", "\\p{Han}", "x", "u")
T.is(s, "hello, xx", "gsub u: \\p{Han}")
s = re.gsub("a.b.c", ".", "$0$0", "")
T.is(s, "aa..bb..cc", "gsub: . and $0")
T.is(re.sub("abc", "b", 5), "a5c", "sub: a number replacement")
-- A function that uses ngx.re itself, on the same cached pattern.
s = re.gsub("a1 b2", "[a-z][0-9]", function(mm)
    return (re.gsub(mm[0], "[a-z][0-9]", "<$0>", "o"))
end, "o")
T.is(s, "<a1> <b2>", "gsub: a replacement function calling ngx.re on the same cached pattern")

-- "o": compiled once, an LRU of bounded size
local c0 = regex.compiles
for _ = 1, 100 do re.find("xyz123", "[0-9]+", "o") end
T.is(regex.compiles - c0, 1, "o: 100 calls compile once")
c0 = regex.compiles
for _ = 1, 10 do re.find("xyz123", "[0-9]+") end
T.is(regex.compiles - c0, 10, "without o: a compile per call")
local outs = {}
for i = 1, 12 do outs[#outs + 1] = (re.gsub("ab", "(a)", "${1}" .. i, "o")) end
T.is(table.concat(outs, ","), "a1b,a2b,a3b,a4b,a5b,a6b,a7b,a8b,a9b,a10b,a11b,a12b",
     "o: many templates on one cached pattern each give their own result")
T.is(re.gsub("ab", "(a)", "$1x", "o"), "axb", "o: a template used again after the others")
regex.set_cache_max_entries(2)
T.is(regex.cache_entries(), 2, "set_cache_max_entries(2) evicts down to 2")
re.match("a", "p1", "o"); re.match("a", "p2", "o"); re.match("a", "p1", "o"); re.match("a", "p3", "o")
c0 = regex.compiles
re.match("a", "p1", "o")
T.is(regex.compiles - c0, 0, "LRU: the recently used p1 stayed")
re.match("a", "p2", "o")
T.is(regex.compiles - c0, 1, "LRU: the least recently used p2 was evicted")
T.is(regex.cache_entries(), 2, "the cache holds at most 2")
regex.set_cache_max_entries(1024)
T.raises("whole number >= 0", "set_cache_max_entries refuses a bad size", regex.set_cache_max_entries, -1)

-- Memory: patterns compiled per call are freed (explicitly, or by ffi.gc
-- for an abandoned iterator), so RSS stays flat.
local function rss_kb()
    local f = io.open("/proc/self/statm")
    local pages = f:read("*n") and f:read("*n")
    f:close()
    return pages * 4
end
for _ = 1, 2000 do re.gsub("abcabc", "(b)(?<c>c)", "$1") end
collectgarbage()
local before = rss_kb()
for i = 1, 20000 do
    re.match("abc" .. i, "(b)(?<c>c)([0-9]+)")
    re.gmatch("abcabc", "b")() -- left unfinished
    re.gsub("abcabc", "(b)(?<c>c)", "$1")
end
collectgarbage()
collectgarbage()
local grown = rss_kb() - before
T.ok(grown < 8192, "60000 calls without o: RSS grew " .. grown .. " KiB (< 8 MiB)")

-- One handler under examples/resty.lua (and under nginx when it can run).
local HANDLER = [==[
if not ngx.re then require("nanosrv.regex").install(ngx) end
local function show(...)
    local out = {}
    for i = 1, select("#", ...) do
        local v = select(i, ...)
        if type(v) == "table" then
            local keys = {}
            for k in pairs(v) do keys[#keys + 1] = k end
            table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
            local p = {}
            for _, k in ipairs(keys) do
                local x = v[k]
                if type(x) == "table" then x = "{" .. table.concat(x, ",") .. "}" end
                p[#p + 1] = tostring(k) .. "=" .. tostring(x)
            end
            v = "{" .. table.concat(p, " ") .. "}"
        elseif type(v) == "string" and i > 1 and v:find("failed") then
            v = "ERR" -- the compiler's wording differs between PCRE and PCRE2
        end
        out[#out + 1] = tostring(v)
    end
    ngx.say(table.concat(out, ", "))
end
local re = ngx.re
local path = ngx.var.uri
if path == "/user" then
    local m = re.match(ngx.var.arg_u or "", [[^(?<name>[a-z]+)(?:@(?<host>[a-z.]+))?$]], "jo")
    if not m then ngx.status = 400; ngx.say("bad user"); return end
    ngx.say(m.name, " at ", m.host or "-")
    return
end
show(re.match("hello, 1234", "([0-9])[0-9]+"))
show(re.match("hello, 1234", "(?<remaining>[0-9]+)"))
show(re.match("hello, world", "HEL LO", "ix"))
show(re.match("hello, 美好生活", "HELLO, (.{2})", "iu"))
show(re.match("hello, world", "(world)|(hello)|(?<named>howdy)"))
show(re.match("hello, world", "(?<named>\\w+), (?<named>\\w+)", "D"))
show(re.match("A\nb", "^b$", "m"), re.match("a\nb", "a.b", "s"), re.match("xab", "ab", "a"))
local ctx = { pos = 2 }
show(re.match("1234, hello", "[0-9]+", "", ctx), ctx.pos)
show(re.match("(abc", "(abc"))
show(re.find("hello, 1234", "([0-9]+)", "jo"))
show(re.find("hello, 1234", "([0-9])([0-9]+)", "jo", nil, 2))
show(re.find("hello", "(l)(l)", nil, nil, 3))
show(re.find("hello", "(l)(x)?", nil, nil, 2))
local it = re.gmatch("hello, world!", "([a-z]+)", "i")
show(it(), it(), it())
show(re.sub("hello, 1234", "([0-9])[0-9]", "[$0][$1]"))
show(re.sub("hello, 1234", "[0-9]", "${0}00"))
show(re.sub("hello, 1234", "[0-9]", "$$"))
show(re.sub("abcdefghijk", "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", "<$10>"))
show(re.sub("abc", "b", "[$5]"), re.sub("abc", "b", "[$x]"))
show(re.sub("hello, 1234", "( [0-9] ) [0-9]", function(m) return "[" .. m[0] .. "][" .. m[1] .. "]" end, "x"))
show(re.gsub("hello, world", "([a-z])[a-z]+", "[$0,$1]", "i"))
show(re.gsub("hello world", "[a-z]+", function() return nil end))
show(re.gsub("abc", "", "-"), re.gsub("aaa b", "a*", "-"), re.gsub("hello", "x", "y"))
local ok, e = pcall(re.match, "a", "a", "Q")
show(ok, (tostring(e):gsub("^.-unknown", "unknown")))
]==]

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir) == 0)
local hfile = dir .. "/re.lua"
local f = assert(io.open(hfile, "w"))
f:write(HANDLER)
f:close()

local function sh(cmd)
    local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
    local out = p:read("*a")
    p:close()
    return tonumber(out:match("rc=(%d+)\n$")), (out:gsub("rc=%d+\n$", ""))
end
local function get(port, path)
    local rc, out = sh("curl -s -w '|%{http_code}' --max-time 10 " .. T.shq("http://127.0.0.1:" .. port .. path))
    if rc ~= 0 then return "curl error " .. tostring(rc) end
    return out
end

local WANT = table.concat({
    "{0=1234 1=1}", "{0=1234 1=1234 remaining=1234}", "{0=hello}", "{0=hello, 美好 1=美好}",
    "{0=hello 1=false 2=hello 3=false named=false}", "{0=hello, world 1=hello 2=world named={hello,world}}",
    "{0=b}, {0=a\nb}, nil", "{0=234}, 5", "nil, ERR", "8, 11", "9, 11", "nil, nil, nth out of bound", "nil, nil",
    "{0=hello 1=hello}, {0=world 1=world}, nil", "hello, [12][1]34, 1", "hello, 100234, 1", "hello, $234, 1",
    "<j>k, 1", "a[]c, nil, nil, ERR", "hello, [12][1]34, 1", "[hello,h], [world,w], 2", "nil nil, 2",
    "-a-b-c-, -- -b-, hello, 0", 'false, unknown flag "Q" (flags "Q")', "|200",
}, "\n")

local base = os.tmpname()
local lib = os.getenv("NANOSRV_LIBRARY") or (T.bindir .. "/../../build/libnanosrv.so.1")
local cmd = "NANOSRV_LIBRARY=" .. T.shq(lib) .. " exec timeout -s KILL 60 luajit " .. T.bindir .. "/examples/resty.lua --port 0 " .. hfile
os.execute("( sh -c " .. T.shq(cmd) .. " >" .. base .. ".out 2>" .. base .. ".err </dev/null & echo $! >" .. base ..
           ".pid ) >/dev/null 2>&1")
local port, pid
for _ = 1, 500 do
    port = tonumber((T.slurp(base .. ".out") or ""):match("listening on (%d+)\n"))
    pid = tonumber(T.slurp(base .. ".pid") or "")
    if port and pid then break end
    os.execute("sleep 0.01")
end
local ours = {}
if T.ok(port ~= nil, "resty.lua serves the ngx.re handler", T.slurp(base .. ".err")) then
    ours.all = get(port, "/")
    T.is(ours.all, WANT, "resty.lua: the handler's output")
    ours.user = get(port, "/user?u=ann@ex.org")
    T.is(ours.user, "ann at ex.org\n|200", "resty.lua: named groups in a request handler")
    ours.bad = get(port, "/user?u=Ann!")
    T.is(ours.bad, "bad user\n|400", "resty.lua: no match")
end
if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
for _, ext in ipairs({ "", ".out", ".err", ".pid" }) do os.remove(base .. ext) end

local REF = T.bindir .. "/../../tools/ngx-lua-ref.sh"
local rc, why = sh(REF .. " fetch")
if rc ~= 0 then
    T.skip("the same handler under nginx + lua-nginx-module", (why:gsub("\n", " ")))
else
    local rdir = dir .. "/ref"
    local src, line = sh(REF .. " start " .. rdir .. " " .. hfile)
    local rport = tonumber(line:match("(%d+) %d+%s*$"))
    if T.ok(src == 0 and rport, "the reference nginx starts", line) then
        T.is(get(rport, "/"), ours.all, "nginx + lua-nginx-module: the same output")
        T.is(get(rport, "/user?u=ann@ex.org"), ours.user, "nginx: the same named groups")
        T.is(get(rport, "/user?u=Ann!"), ours.bad, "nginx: the same no match")
    end
    sh(REF .. " stop " .. rdir)
end
os.execute("rm -rf " .. dir)

T.done()
