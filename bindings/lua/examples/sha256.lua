-- sha256.lua - SHA-256 (FIPS 180-4) in LuaJIT, for echo.lua's POST /upload,
-- which hashes each part while it streams in. Incremental:
--   local h = sha256.new(); h:update(s); ...; h:hex()
local ffi = require("ffi")
local bit = require("bit")
local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local lshift, rshift, ror, tobit = bit.lshift, bit.rshift, bit.ror, bit.tobit

local K = ffi.new("const int32_t[64]", {
    0x428a2f98, 0x71374491, -0x4a3f0431, -0x164a245b, 0x3956c25b, 0x59f111f1, -0x6dc07d5c, -0x54e3a12b,
    -0x27f85568, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, -0x7f214e02, -0x6423f959, -0x3e640e8c,
    -0x1b64963f, -0x1041b87a, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    -0x67c1aeae, -0x57ce3993, -0x4ffcd838, -0x40a68039, -0x391ff40d, -0x2a586eb9, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, -0x7e3d36d2, -0x6d8dd37b,
    -0x5d40175f, -0x57e599b5, -0x3db47490, -0x3893ae5d, -0x2e6d17e7, -0x2966f9dc, -0xbf1ca7b, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, -0x7b3787ec, -0x7338fdf8, -0x6f410006, -0x5baf9315, -0x41065c09, -0x398e870e,
})
local W = ffi.new("int32_t[64]")

local function block(h, p)
    for i = 0, 15 do
        local j = 4 * i
        W[i] = bor(lshift(p[j], 24), lshift(p[j + 1], 16), lshift(p[j + 2], 8), p[j + 3])
    end
    for i = 16, 63 do
        local w15, w2 = W[i - 15], W[i - 2]
        local s0 = bxor(ror(w15, 7), ror(w15, 18), rshift(w15, 3))
        local s1 = bxor(ror(w2, 17), ror(w2, 19), rshift(w2, 10))
        W[i] = tobit(W[i - 16] + s0 + W[i - 7] + s1)
    end
    local a, b, c, d, e, f, g, hh = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    for i = 0, 63 do
        local t1 = tobit(hh + bxor(ror(e, 6), ror(e, 11), ror(e, 25)) + bxor(band(e, f), band(bnot(e), g))
                         + K[i] + W[i])
        local t2 = tobit(bxor(ror(a, 2), ror(a, 13), ror(a, 22)) + bxor(band(a, b), band(a, c), band(b, c)))
        hh, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + t2)
    end
    h[0], h[1], h[2], h[3] = tobit(h[0] + a), tobit(h[1] + b), tobit(h[2] + c), tobit(h[3] + d)
    h[4], h[5], h[6], h[7] = tobit(h[4] + e), tobit(h[5] + f), tobit(h[6] + g), tobit(h[7] + hh)
end

local Sha = {}
Sha.__index = Sha

local M = {}
function M.new()
    return setmetatable({
        h = ffi.new("int32_t[8]", { 0x6a09e667, -0x4498517b, 0x3c6ef372, -0x5ab00ac6,
                                     0x510e527f, -0x64fa9774, 0x1f83d9ab, 0x5be0cd19 }),
        buf = ffi.new("uint8_t[64]"), nbuf = 0, len = 0,
    }, Sha)
end

function Sha:update(s)
    local n = #s
    self.len = self.len + n
    local p = ffi.cast("const uint8_t *", s)
    local pos = 0
    if self.nbuf > 0 then
        local take = math.min(64 - self.nbuf, n)
        ffi.copy(self.buf + self.nbuf, p, take)
        self.nbuf, pos = self.nbuf + take, take
        if self.nbuf < 64 then return self end
        block(self.h, self.buf)
        self.nbuf = 0
    end
    while n - pos >= 64 do
        block(self.h, p + pos)
        pos = pos + 64
    end
    if pos < n then
        ffi.copy(self.buf, p + pos, n - pos)
        self.nbuf = n - pos
    end
    return self
end

function Sha:hex()
    local bits = self.len * 8
    local pad = 64 - (self.len + 9) % 64
    if pad == 64 then pad = 0 end
    local hi, lo = math.floor(bits / 4294967296), bits % 4294967296
    local tail = "\128" .. string.rep("\0", pad) .. string.char(
        band(rshift(hi, 24), 255), band(rshift(hi, 16), 255), band(rshift(hi, 8), 255), band(hi, 255),
        band(rshift(tobit(lo), 24), 255), band(rshift(tobit(lo), 16), 255), band(rshift(tobit(lo), 8), 255),
        band(tobit(lo), 255))
    self:update(tail)
    local out = {}
    for i = 0, 7 do out[i + 1] = bit.tohex(self.h[i]) end
    return table.concat(out)
end

return M
