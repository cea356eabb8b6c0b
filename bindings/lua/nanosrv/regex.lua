-- nanosrv.regex - ngx.re (match, find, gmatch, sub, gsub) on PCRE2 through
-- the FFI, with lua-nginx-module's semantics:
--
--   require("nanosrv.regex").install(ngx)   -- sets ngx.re, returns it
--   local m, err = ngx.re.match("hello, 1234", "([0-9])[0-9]+", "jo")
--
-- Options: i m s x u U j o a D J, and d (DFA) answered with an error. "o"
-- keeps the compiled pattern in an LRU cache (1024 entries by default, as
-- lua_regex_cache_max_entries) so a call compiles nothing; without "o"
-- the pattern is compiled for the call and freed before it returns.
local ffi = require("ffi")
local bit = require("bit")

local band, bor = bit.band, bit.bor
local byte, sub, find, fmt = string.byte, string.sub, string.find, string.format
local concat = table.concat
local tostring, type, error, setmetatable, rawset = tostring, type, error, setmetatable, rawset
local ffi_gc, ffi_string, cast = ffi.gc, ffi.string, ffi.cast

-- PCRE2's own functions, declared by hand: this is PCRE2's ABI, not ours
-- (it is not in bindings/cdef/). Handles are kept as void * so these
-- declarations cannot clash with another module's typedefs.
ffi.cdef [[
void *pcre2_compile_8(const char *pattern, size_t length, uint32_t options, int *errorcode,
                      size_t *erroroffset, void *ccontext);
void pcre2_code_free_8(void *code);
int pcre2_jit_compile_8(void *code, uint32_t options);
int pcre2_pattern_info_8(const void *code, uint32_t what, void *where);
void *pcre2_match_data_create_from_pattern_8(const void *code, void *gcontext);
void pcre2_match_data_free_8(void *match_data);
int pcre2_match_8(const void *code, const char *subject, size_t length, size_t startoffset,
                  uint32_t options, void *match_data, void *mcontext);
size_t *pcre2_get_ovector_pointer_8(void *match_data);
int pcre2_get_error_message_8(int errorcode, unsigned char *buffer, size_t bufflen);
]]

local ok, P = pcall(ffi.load, "libpcre2-8.so.0")
if not ok then ok, P = pcall(ffi.load, "pcre2-8") end
if not ok then
    error("nanosrv.regex: ngx.re needs PCRE2 (libpcre2-8.so.0, Debian package libpcre2-8-0): " .. tostring(P), 2)
end

-- Values from pcre2.h (10.42; stable across PCRE2 releases).
local PCRE2_ALLOW_EMPTY_CLASS = 0x00000001   -- "J": [] is an empty class
local PCRE2_ALT_BSUX = 0x00000002            -- "J": \u \U \x as in JavaScript
local PCRE2_CASELESS = 0x00000008            -- "i"
local PCRE2_DOTALL = 0x00000020              -- "s"
local PCRE2_DUPNAMES = 0x00000040            -- "D"
local PCRE2_EXTENDED = 0x00000080            -- "x"
local PCRE2_MATCH_UNSET_BACKREF = 0x00000200 -- "J": a backreference to an unset group matches ""
local PCRE2_MULTILINE = 0x00000400           -- "m"
local PCRE2_UTF = 0x00080000                 -- "u", "U"
local PCRE2_ANCHORED = 0x80000000            -- "a"
local PCRE2_JIT_COMPLETE = 0x00000001        -- "j": JIT for complete matches
local PCRE2_INFO_CAPTURECOUNT = 4
local PCRE2_INFO_NAMECOUNT = 17
local PCRE2_INFO_NAMEENTRYSIZE = 18
local PCRE2_INFO_NAMETABLE = 19
local PCRE2_ERROR_NOMATCH = -1
-- PCRE2's JAVASCRIPT_COMPAT of PCRE1 is these three options in PCRE2.
local JS_COMPAT = bor(PCRE2_ALT_BSUX, PCRE2_ALLOW_EMPTY_CLASS, PCRE2_MATCH_UNSET_BACKREF)

local F_ONCE, F_JIT, F_DFA, F_UTF = 1, 2, 4, 8

local M = { _VERSION = "0.1.0" }

local errbuf = ffi.new("unsigned char[256]")
local function pcre_message(code)
    local n = P.pcre2_get_error_message_8(code, errbuf, 256)
    if n < 0 then return "error " .. code end
    return ffi_string(errbuf, n)
end

-- Options string -> compile options, flags; cached per string (option
-- strings are literals in practice; the cache is bounded all the same).
local opt_cache, opt_cached = {}, 0
local function parse_opts(opts, fname)
    if opts == nil then return 0, 0 end
    local t = opt_cache[opts]
    if t then return t[1], t[2] end
    if type(opts) ~= "string" then
        return nil, fmt("bad argument 'options' to '%s' (string expected, got %s)", fname, type(opts))
    end
    local copts, flags = 0, 0
    for i = 1, #opts do
        local c = sub(opts, i, i)
        if c == "i" then copts = bor(copts, PCRE2_CASELESS)
        elseif c == "m" then copts = bor(copts, PCRE2_MULTILINE)
        elseif c == "s" then copts = bor(copts, PCRE2_DOTALL)
        elseif c == "x" then copts = bor(copts, PCRE2_EXTENDED)
        -- "U" promises valid UTF-8 and skips PCRE2's check in OpenResty;
        -- an invalid subject without the check is undefined behaviour in
        -- PCRE2, so the check stays (it reads only what matching reads).
        elseif c == "u" or c == "U" then copts = bor(copts, PCRE2_UTF); flags = bor(flags, F_UTF)
        elseif c == "a" then copts = bor(copts, PCRE2_ANCHORED)
        elseif c == "D" then copts = bor(copts, PCRE2_DUPNAMES)
        elseif c == "J" then copts = bor(copts, JS_COMPAT)
        elseif c == "j" then flags = bor(flags, F_JIT)
        elseif c == "o" then flags = bor(flags, F_ONCE)
        elseif c == "d" then flags = bor(flags, F_DFA)
        else
            return nil, fmt('unknown flag "%s" (flags "%s")', c, opts)
        end
    end
    if opt_cached < 256 then
        opt_cache[opts] = { copts, flags }
        opt_cached = opt_cached + 1
    end
    return copts, flags
end

-- A compiled pattern: { code, md, ov (int32_t * over the ovector), ncap,
-- names = {group, name, ...}, dup, utf }.
local size1 = ffi.new("size_t[1]")
local int1 = ffi.new("int[1]")
local u32 = ffi.new("uint32_t[1]")
local ptr1 = ffi.new("unsigned char *[1]")
-- Offsets are read as the low 32 bits of each size_t (a Lua string is
-- under 2 GiB), which gives plain numbers and -1 for PCRE2_UNSET.
local LO = ffi.abi("le") and 0 or 1

local function destroy(re)
    P.pcre2_match_data_free_8(ffi_gc(re.md, nil))
    P.pcre2_code_free_8(ffi_gc(re.code, nil))
end

-- M.compiles counts pcre2_compile calls (tests check that "o" avoids them).
M.compiles = 0
local function compile(regex, copts, flags)
    M.compiles = M.compiles + 1
    local code = P.pcre2_compile_8(regex, #regex, copts, int1, size1, nil)
    if code == nil then
        local off = tonumber(size1[0])
        return nil, fmt('pcre2_compile() failed: %s in "%s" at "%s"', pcre_message(int1[0]), regex, sub(regex, off + 1))
    end
    code = ffi_gc(code, P.pcre2_code_free_8)
    if band(flags, F_JIT) ~= 0 then
        -- Without JIT support PCRE2 says so here; matching then simply
        -- runs the interpreter, as nginx does.
        P.pcre2_jit_compile_8(code, PCRE2_JIT_COMPLETE)
    end
    local md = P.pcre2_match_data_create_from_pattern_8(code, nil)
    if md == nil then return nil, "pcre2_match_data_create_from_pattern() failed: out of memory" end
    md = ffi_gc(md, P.pcre2_match_data_free_8)
    P.pcre2_pattern_info_8(code, PCRE2_INFO_CAPTURECOUNT, u32)
    local re = { code = code, md = md, ov = cast("int32_t *", P.pcre2_get_ovector_pointer_8(md)),
                 ncap = u32[0], names = {}, dup = band(copts, PCRE2_DUPNAMES) ~= 0, utf = band(flags, F_UTF) ~= 0 }
    P.pcre2_pattern_info_8(code, PCRE2_INFO_NAMECOUNT, u32)
    local count = u32[0]
    if count > 0 then
        P.pcre2_pattern_info_8(code, PCRE2_INFO_NAMEENTRYSIZE, u32)
        local size = u32[0]
        P.pcre2_pattern_info_8(code, PCRE2_INFO_NAMETABLE, ptr1)
        local t = ptr1[0]
        for i = 0, count - 1 do
            local e = t + i * size
            re.names[#re.names + 1] = e[0] * 256 + e[1]
            re.names[#re.names + 1] = ffi_string(e + 2)
        end
    end
    return re
end

-- LRU of compiled patterns for "o": cache[options][regex] -> node, nodes in
-- a doubly linked list, most recent first.
local max_entries, entries = 1024, 0
local cache = {}
local head = {}
head.next, head.prev = head, head

local function unlink(n) n.prev.next, n.next.prev = n.next, n.prev end
local function push(n) n.next, n.prev = head.next, head; head.next.prev = n; head.next = n end

function M.set_cache_max_entries(n)
    if type(n) ~= "number" or n < 0 or n ~= math.floor(n) then
        error("bad argument #1 to 'set_cache_max_entries' (whole number >= 0 expected)", 2)
    end
    max_entries = n
    while entries > max_entries do
        local old = head.prev
        unlink(old)
        cache[old.opts][old.regex] = nil
        entries = entries - 1
    end
end
function M.cache_entries() return entries end

-- -> compiled pattern, whether it is cached (else the caller destroys it),
-- or nil, err, or nil, message, BAD for a bad argument (the caller raises
-- it, as OpenResty does).
local BAD = {}
local function get(regex, opts, fname)
    if type(regex) ~= "string" then
        if type(regex) ~= "number" then
            return nil, fmt("bad argument 'regex' to '%s' (string expected, got %s)", fname, type(regex)), BAD
        end
        regex = tostring(regex)
    end
    local copts, flags = parse_opts(opts, fname)
    if not copts then return nil, flags, BAD end
    if band(flags, F_DFA) ~= 0 then
        return nil, 'the "d" option (DFA matching) is not supported'
    end
    if band(flags, F_ONCE) == 0 or max_entries == 0 then
        local re, err = compile(regex, copts, flags)
        return re, err, false
    end
    local sub_cache = cache[opts]
    if not sub_cache then sub_cache = {}; cache[opts] = sub_cache end
    local n = sub_cache[regex]
    if n then
        if head.next ~= n then unlink(n); push(n) end
        return n.re, nil, true
    end
    local re, err = compile(regex, copts, flags)
    if not re then return nil, err end
    if entries >= max_entries then
        local old = head.prev
        unlink(old)
        cache[old.opts][old.regex] = nil
        entries = entries - 1
    end
    n = { re = re, opts = opts, regex = regex }
    push(n)
    sub_cache[regex] = n
    entries = entries + 1
    return re, nil, true
end

-- Runs re on subj from 0-based pos: rc > 0, or nil at no match, or
-- false, err.
local function exec(re, subj, pos)
    local rc = P.pcre2_match_8(re.code, subj, #subj, pos, 0, re.md, nil)
    if rc > 0 then return rc end
    if rc == PCRE2_ERROR_NOMATCH then return nil end
    if rc == 0 then return false, "capture size too small" end
    return false, "pcre2_match() failed: " .. pcre_message(rc)
end

-- The captures table of the last exec: [0] the match, [1..ncap] groups
-- (false when unset), names as well (a list of the matched ones with "D").
local function captures(re, subj, rc, res)
    res = res or {}
    local ov = re.ov
    for i = 0, re.ncap do
        local s = i < rc and ov[4 * i + LO] or -1
        if s >= 0 then res[i] = sub(subj, s + 1, ov[4 * i + 2 + LO]) else res[i] = false end
    end
    local names = re.names
    for j = 1, #names, 2 do
        local v, name = res[names[j]], names[j + 1]
        if re.dup then
            if v then
                local l = res[name]
                if type(l) == "table" then l[#l + 1] = v else res[name] = { v } end
            end
        else
            res[name] = v
        end
    end
    return res
end

local function start_of(ctx)
    local pos = ctx and ctx.pos
    if type(pos) ~= "number" or pos <= 0 then return 0 end
    return pos - 1
end

local function match(subj, regex, opts, ctx, res)
    subj = tostring(subj)
    local re, err, cached = get(regex, opts, "ngx.re.match")
    if not re then
        if cached == BAD then error(err, 2) end
        return nil, err
    end
    local rc
    rc, err = exec(re, subj, start_of(ctx))
    if rc then
        if ctx then ctx.pos = re.ov[2 + LO] + 1 end
        res = captures(re, subj, rc, res)
    end
    if not cached then destroy(re) end
    if rc then return res end
    if rc == nil then return nil end
    return nil, err
end

local function re_find(subj, regex, opts, ctx, nth)
    subj = tostring(subj)
    local re, err, cached = get(regex, opts, "ngx.re.find")
    if not re then
        if cached == BAD then error(err, 2) end
        return nil, nil, err
    end
    local rc
    rc, err = exec(re, subj, start_of(ctx))
    local from, to
    if rc then
        local ov = re.ov
        if ctx then ctx.pos = ov[2 + LO] + 1 end
        if type(nth) ~= "number" or nth < 0 then nth = 0 else nth = math.floor(nth) end
        if nth > re.ncap then
            err = "nth out of bound"
        elseif nth < rc and ov[4 * nth + LO] >= 0 then
            from, to = ov[4 * nth + LO] + 1, ov[4 * nth + 2 + LO]
        end
    end
    if not cached then destroy(re) end
    if from then return from, to end
    if err then return nil, nil, err end
    return nil, nil
end

-- After a match [s, e): where the next search starts; an empty match
-- moves on by one character (one byte, or one UTF-8 sequence with "u"),
-- or nil past the end.
local function next_pos(re, subj, s, e)
    if e ~= s then return e end
    e = e + 1
    if re.utf then
        local b = byte(subj, e + 1)
        while b and b >= 0x80 and b < 0xC0 do
            e = e + 1
            b = byte(subj, e + 1)
        end
    end
    if e > #subj then return nil end
    return e
end

local Gmatch = {}
Gmatch.__index = Gmatch
local function iterate(it)
    local re, subj, pos = it.re, it.subj, it.pos
    if not pos then return nil end
    local rc, err = exec(re, subj, pos)
    if not rc then
        it.pos = nil
        if not it.cached then destroy(re) end
        it.re = nil
        if rc == nil then return nil end
        return nil, err
    end
    local s, e = re.ov[LO], re.ov[2 + LO]
    local res = captures(re, subj, rc)
    it.pos = next_pos(re, subj, s, e)
    if not it.pos then
        if not it.cached then destroy(re) end
        it.re = nil
    end
    return res
end
Gmatch.__call = iterate

local function gmatch(subj, regex, opts)
    subj = tostring(subj)
    local re, err, cached = get(regex, opts, "ngx.re.gmatch")
    if not re then
        if cached == BAD then error(err, 2) end
        return nil, err
    end
    -- An iterator left unfinished frees its pattern through ffi.gc.
    return setmetatable({ re = re, subj = subj, pos = 0, cached = cached }, Gmatch)
end

-- A replacement template -> list of literal strings and capture refs
-- (number, or {name}): $0..$N, ${N}, ${name}, $$. nil if malformed.
local function parse_template(tpl, re)
    if not find(tpl, "$", 1, true) then return { tpl } end
    local parts, i, lit, n = {}, 1, {}, #tpl
    while i <= n do
        local d = find(tpl, "$", i, true)
        if not d then lit[#lit + 1] = sub(tpl, i); break end
        lit[#lit + 1] = sub(tpl, i, d - 1)
        local c = sub(tpl, d + 1, d + 1)
        if c == "$" then
            lit[#lit + 1] = "$"
            i = d + 2
        else
            local ref, stop
            local digits = tpl:match("^%d+", d + 1)
            if digits then
                ref, stop = tonumber(digits), d + #digits
            elseif c == "{" then
                local inner = tpl:match("^{([%w_]+)}", d + 1)
                if not inner then return nil end
                stop = d + #inner + 2
                ref = tonumber(inner)
                if not ref then
                    -- A name must be one of the pattern's.
                    for j = 2, #re.names, 2 do if re.names[j] == inner then ref = re.names[j - 1] end end
                    if not ref then return nil end
                end
            else
                return nil
            end
            parts[#parts + 1] = concat(lit)
            lit = {}
            parts[#parts + 1] = ref
            i = stop + 1
        end
    end
    parts[#parts + 1] = concat(lit)
    return parts
end

local function expand(parts, re, subj, rc, out, k)
    local ov = re.ov
    for j = 1, #parts do
        local p = parts[j]
        if type(p) == "number" then
            local s = p < rc and ov[4 * p + LO] or -1
            if s >= 0 then k = k + 1; out[k] = sub(subj, s + 1, ov[4 * p + 2 + LO]) end
        elseif p ~= "" then
            k = k + 1
            out[k] = p
        end
    end
    return k
end

local function substitute(subj, regex, replace, opts, global, fname)
    subj = tostring(subj)
    local fn = type(replace) == "function"
    if not fn and type(replace) ~= "string" then replace = tostring(replace) end
    local re, err, cached = get(regex, opts, fname)
    if not re then
        if cached == BAD then error(err, 3) end
        return nil, nil, err
    end
    local parts
    if not fn then
        -- A cached pattern keeps its last few parsed templates ("o" means
        -- no per-call preparation); a template that keeps changing just
        -- misses.
        local tc = cached and re.tpl
        parts = tc and tc[replace]
        if not parts then
            parts = parse_template(replace, re)
            if parts and cached then
                if not tc or re.ntpl >= 8 then tc = {}; re.tpl = tc; re.ntpl = 0 end
                tc[replace] = parts
                re.ntpl = re.ntpl + 1
            end
        end
        if not parts then
            if not cached then destroy(re) end
            return nil, nil, "failed to compile the replacement template"
        end
    end
    local out, k, count, pos, last = {}, 0, 0, 0, 0
    local failed
    while true do
        local rc
        rc, err = exec(re, subj, pos)
        if not rc then
            if rc == false then failed = err end
            break
        end
        count = count + 1
        local s, e = re.ov[LO], re.ov[2 + LO]
        if s > last then k = k + 1; out[k] = sub(subj, last + 1, s) end
        if fn then
            -- The function may use ngx.re itself (even this cached
            -- pattern): s and e are read before it runs.
            local piece = tostring(replace(captures(re, subj, rc)))
            k = k + 1
            out[k] = piece
        else
            k = expand(parts, re, subj, rc, out, k)
        end
        last = e
        pos = next_pos(re, subj, s, e)
        if not pos or not global then break end
    end
    if not cached then destroy(re) end
    if failed then return nil, nil, failed end
    if count == 0 then return subj, 0 end
    if last < #subj then k = k + 1; out[k] = sub(subj, last + 1) end
    return concat(out, "", 1, k), count
end

M.re = {
    match = match,
    find = re_find,
    gmatch = gmatch,
    -- Not tail calls, so that an argument error names the caller's line.
    sub = function(subj, regex, replace, opts)
        local s, n, err = substitute(subj, regex, replace, opts, false, "ngx.re.sub")
        if err then return s, n, err end
        return s, n
    end,
    gsub = function(subj, regex, replace, opts)
        local s, n, err = substitute(subj, regex, replace, opts, true, "ngx.re.gsub")
        if err then return s, n, err end
        return s, n
    end,
}

-- Sets ngx.re (rawset: the ngx table's __newindex is not involved) and
-- returns it.
function M.install(ngx)
    rawset(ngx, "re", M.re)
    return M.re
end

return M
