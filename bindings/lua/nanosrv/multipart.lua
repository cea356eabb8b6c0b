-- nanosrv/multipart.lua - multipart/form-data for the LuaJIT binding, over
-- the library's streaming parser (nsv_multipart_*): the body is fed in
-- pieces of any size and comes out as part records, so a file part of any
-- size costs one piece of memory at a time.
--
--   for part in req:multipart() do          -- in a stream_body route
--       -- part.name, part.filename (nil if none), part.content_type (nil
--       -- if none: read it as text/plain), part.headers
--       for piece in part:pieces() do ... end   -- or part:read(max), part:save(path, max)
--   end
--
-- A malformed body raises an HTTP 400 error naming the byte and the rule
-- (answered as such if the handler lets it escape), another media type 415.

local ffi = require("ffi")
local bit = require("bit")

local core = ...
if type(core) ~= "table" then core = require("nanosrv") end
local I = core._internal
local C, http_error, errmsg_nosrv = I.C, I.http_error, I.errmsg_nosrv

local M = {}

local MP_PART, MP_DATA, MP_PART_END, MP_END = C.NSV_MP_PART, C.NSV_MP_DATA, C.NSV_MP_PART_END, C.NSV_MP_END
local MPF_FILENAME, MPF_CONTENT_TYPE = C.NSV_MPF_FILENAME, C.NSV_MPF_CONTENT_TYPE
local ENOBUFS, ENOTFOUND = C.NSV_ENOBUFS, C.NSV_ENOTFOUND

if tonumber(C.nsv_multipart_event_size()) ~= ffi.sizeof("nsv_multipart_event") then
    error("nanosrv: nsv_multipart_event size mismatch between the library and nanosrv_cdef.h", 2)
end

-- One record batch and arena for every parser: records are turned into
-- Lua values before the next feed.
local MAXREC = 64
local recs = ffi.new("nsv_multipart_event[?]", MAXREC)
local arena_cap = 256 * 1024
local arena = ffi.new("char[?]", arena_cap)
local consumed = ffi.new("size_t[1]")
local b_off, b_len = ffi.new("uint32_t[1]"), ffi.new("uint32_t[1]")

local function library_detail(fallback)
    local d = ffi.string(C.nsv_last_error_detail(nil))
    return d ~= "" and d or fallback
end

-- The boundary of a Content-Type value; nil, message, status (415: not
-- multipart/form-data, 400: malformed parameters).
function M.boundary(content_type)
    if type(content_type) ~= "string" then return nil, "not multipart/form-data", 415 end
    local r = C.nsv_multipart_boundary(content_type, #content_type, b_off, b_len)
    if r == ENOTFOUND then return nil, "not multipart/form-data", 415 end
    if r < 0 then return nil, library_detail(errmsg_nosrv(r, "multipart boundary")), 400 end
    return content_type:sub(b_off[0] + 1, b_off[0] + b_len[0])
end

local Parser = {}
Parser.__index = Parser

-- A parser for one body: content_type is the request's Content-Type value.
-- opts: max_header_bytes (one part's header block, default 16384),
-- max_parts (default 1000). Returns nil, message, status on a bad type.
function M.new(content_type, opts)
    opts = opts or {}
    local boundary, msg, status = M.boundary(content_type)
    if not boundary then return nil, msg, status end
    local h = C.nsv_multipart_new(boundary, #boundary, opts.max_header_bytes or 0, opts.max_parts or 1000)
    if h == nil then return nil, library_detail("cannot create a multipart parser"), 400 end
    return setmetatable({ _h = ffi.gc(h, C.nsv_multipart_free), failed = false }, Parser)
end

local function record(e)
    local t = e.type
    if t == MP_DATA then
        return { type = "data", data = ffi.string(arena + e.data_off, e.data_len) }
    elseif t == MP_PART then
        local f = e.flags
        return {
            type = "part", index = e.part,
            name = ffi.string(arena + e.name_off, e.name_len),
            filename = bit.band(f, MPF_FILENAME) ~= 0 and ffi.string(arena + e.filename_off, e.filename_len) or nil,
            content_type = bit.band(f, MPF_CONTENT_TYPE) ~= 0
                and ffi.string(arena + e.content_type_off, e.content_type_len) or nil,
            headers = ffi.string(arena + e.headers_off, e.headers_len),
        }
    elseif t == MP_PART_END then
        return { type = "part_end", index = e.part }
    elseif t == MP_END then
        return { type = "end" }
    end
end

-- Feed the next piece of the body; returns the list of records it
-- completed ({type = "part" | "data" | "part_end" | "end", ...}). A
-- malformed body raises an HTTP 400 error.
function Parser:feed(data)
    if type(data) ~= "string" then error("bad argument #1 to 'feed' (string expected)", 2) end
    if self.failed then error(http_error(400, self.failed), 2) end
    local out, pos, left = {}, 0, #data
    local p = ffi.cast("const char *", data)
    while left > 0 do
        local n = C.nsv_multipart_feed(self._h, p + pos, left, recs, MAXREC, arena, arena_cap, consumed)
        if n == ENOBUFS then
            arena_cap = tonumber(C.nsv_multipart_need(self._h)) + 4096
            arena = ffi.new("char[?]", arena_cap)
        elseif n < 0 then
            self.failed = library_detail(errmsg_nosrv(n, "multipart"))
            error(http_error(400, self.failed), 2)
        else
            for k = 0, n - 1 do out[#out + 1] = record(recs[k]) end
            local used = tonumber(consumed[0])
            if used == 0 and n == 0 then -- cannot happen per the library's contract; never spin
                self.failed = "multipart: the parser made no progress"
                error(http_error(400, self.failed), 2)
            end
            pos, left = pos + used, left - used
        end
    end
    return out
end

-- End of the body: raises an HTTP 400 error unless the final boundary came.
function Parser:finish()
    if self.failed then error(http_error(400, self.failed), 2) end
    local r = C.nsv_multipart_finish(self._h)
    if r < 0 then
        self.failed = library_detail("multipart: missing final boundary")
        error(http_error(400, self.failed), 2)
    end
end

---------------------------------------------------------------------------
-- Pull interface: parts from a source of body pieces.
---------------------------------------------------------------------------

local Part = {}
Part.__index = Part

-- Iterator over this part's data pieces (ends at the part's end).
function Part:pieces()
    return function()
        if self.ended then return nil end
        local rec = self._next()
        while rec do
            if rec.type == "data" then
                self.size = self.size + #rec.data
                if self._max and self.size > self._max then
                    error(http_error(413, "multipart: part '" .. self.name .. "' larger than "
                                          .. self._max .. " bytes"), 2)
                end
                return rec.data
            end
            if rec.type == "part_end" then self.ended = true; return nil end
            rec = self._next()
        end
        self.ended = true
        return nil
    end
end

-- The part's data as one string (max: bytes at most, else HTTP 413).
function Part:read(max)
    local t = {}
    local saved = self._max
    self._max = max or saved
    for piece in self:pieces() do t[#t + 1] = piece end
    self._max = saved
    return table.concat(t)
end

-- Write the part's data to a file (max: bytes at most, else HTTP 413 and
-- the file is removed). Returns the size.
function Part:save(path, max)
    local f, err = io.open(path, "wb")
    if not f then error("nanosrv: multipart: cannot write " .. tostring(path) .. ": " .. tostring(err), 2) end
    local saved = self._max
    self._max = max or saved
    local ok, e = pcall(function()
        for piece in self:pieces() do assert(f:write(piece)) end
    end)
    self._max = saved
    f:close()
    if not ok then
        os.remove(path)
        error(e, 0)
    end
    return self.size
end

-- Keep the part in memory up to threshold bytes (default 1 MiB), else
-- spool it to a temporary file. Returns {size =, data = string} or
-- {size =, path = file}; the caller removes the file. max bounds the
-- part's size (HTTP 413 past it).
function Part:spool(threshold, max)
    threshold = threshold or 1048576
    local t, n = {}, 0
    local f, path
    local saved = self._max
    self._max = max or saved
    local ok, e = pcall(function()
        for piece in self:pieces() do
            n = n + #piece
            if f then
                assert(f:write(piece))
            elseif n > threshold then
                path = os.tmpname()
                f = assert(io.open(path, "wb"))
                for k = 1, #t do assert(f:write(t[k])) end
                assert(f:write(piece))
                t = nil
            else
                t[#t + 1] = piece
            end
        end
    end)
    self._max = saved
    if f then f:close() end
    if not ok then
        if path then os.remove(path) end
        error(e, 0)
    end
    if path then return { size = n, path = path } end
    return { size = n, data = table.concat(t) }
end

-- Parts of a body. source is a request (read with req:body_chunks(); the
-- Content-Type from its header) or an iterator function returning body
-- pieces, then nil (give opts.content_type then). Returns an iterator of
-- parts; moving to the next part skips what is left of the current one.
-- opts: content_type, max_header_bytes, max_parts, max_part_size (HTTP 413).
function M.parts(source, opts)
    opts = opts or {}
    local next_chunk, ct
    if type(source) == "function" then
        next_chunk, ct = source, opts.content_type
    elseif type(source) == "table" and source.body_chunks then
        next_chunk, ct = source:body_chunks(), opts.content_type or source:header("content-type")
    else
        error("bad argument #1 to 'parts' (request or iterator function expected)", 2)
    end
    local p, msg, status = M.new(ct, opts)
    if not p then error(http_error(status, msg), 2) end
    local queue, qh, qn, input_done = {}, 1, 0, false
    local function next_record()
        while qh > qn do
            if input_done then return nil end
            local chunk = next_chunk()
            if chunk == nil then
                input_done = true
                p:finish()
                return nil
            end
            queue, qh = p:feed(chunk), 1
            qn = #queue -- counted before records are taken out (# of a table with holes is any border)
        end
        local rec = queue[qh]
        queue[qh] = nil
        qh = qh + 1
        return rec
    end
    local current
    return function()
        if current and not current.ended then
            for _ in current:pieces() do end
        end
        while true do
            local rec = next_record()
            if rec == nil then return nil end
            if rec.type == "part" then
                rec.type = nil
                rec.size, rec.ended, rec._next, rec._max = 0, false, next_record, opts.max_part_size
                current = setmetatable(rec, Part)
                return current
            end
        end
    end
end

M.Parser, M.Part = Parser, Part
return M
