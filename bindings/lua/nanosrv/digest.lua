-- nanosrv/digest.lua - CRC-32, MD5, SHA-1 and HMAC-SHA1 in pure Lua with
-- LuaJIT's bit library (ngx.crc32_*, ngx.md5, ngx.md5_bin, ngx.sha1_bin,
-- ngx.hmac_sha1). Strings in, strings out; the binary forms are raw bytes.

local bit = require("bit")
local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local lshift, rshift, rol, tobit = bit.lshift, bit.rshift, bit.rol, bit.tobit
local byte, char, fmt, concat = string.byte, string.char, string.format, table.concat

local M = {}

local function arg(s, fname)
    if type(s) == "number" then return tostring(s) end
    if s == nil then return "" end
    if type(s) ~= "string" then error("bad argument #1 to '" .. fname .. "' (string expected, got " .. type(s) .. ")", 3) end
    return s
end

-- CRC-32 (IEEE 802.3, reflected 0xEDB88320), as nginx's ngx_crc32_long.
local CRC = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0xEDB88320) else c = rshift(c, 1) end
    end
    CRC[i] = c
end
function M.crc32(s)
    s = arg(s, "crc32")
    local c = bnot(0)
    for i = 1, #s do c = bxor(CRC[band(bxor(c, byte(s, i)), 0xff)], rshift(c, 8)) end
    c = bnot(c)
    if c < 0 then c = c + 4294967296 end
    return c
end

local function be32(x) -- big-endian bytes of a 32-bit word
    return char(band(rshift(x, 24), 255), band(rshift(x, 16), 255), band(rshift(x, 8), 255), band(x, 255))
end
local function le32(x)
    return char(band(x, 255), band(rshift(x, 8), 255), band(rshift(x, 16), 255), band(rshift(x, 24), 255))
end

-- Message padding: 0x80, zeros, then the bit length in 8 bytes.
local function pad(s, little)
    local n = #s
    local bits_lo = tobit((n % 0x20000000) * 8)
    local bits_hi = math.floor(n / 0x20000000)
    local z = (55 - n) % 64
    local len = little and (le32(bits_lo) .. le32(bits_hi)) or (be32(bits_hi) .. be32(bits_lo))
    return s .. "\128" .. ("\0"):rep(z) .. len
end

---------------------------------------------------------------------------
-- MD5 (RFC 1321)
---------------------------------------------------------------------------

local K, SH = {}, { 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                    5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
                    4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                    6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21 }
for i = 0, 63 do K[i] = tobit(math.floor(math.abs(math.sin(i + 1)) * 4294967296)) end

function M.md5_bin(s)
    s = pad(arg(s, "md5_bin"), true)
    local a0, b0, c0, d0 = tobit(0x67452301), tobit(0xefcdab89), tobit(0x98badcfe), tobit(0x10325476)
    local X = {}
    for blk = 1, #s, 64 do
        for j = 0, 15 do
            local p = blk + j * 4
            local w1, w2, w3, w4 = byte(s, p, p + 3)
            X[j] = bor(w1, lshift(w2, 8), lshift(w3, 16), lshift(w4, 24))
        end
        local a, b, c, d = a0, b0, c0, d0
        for i = 0, 63 do
            local f, g
            if i < 16 then f, g = bor(band(b, c), band(bnot(b), d)), i
            elseif i < 32 then f, g = bor(band(d, b), band(bnot(d), c)), (5 * i + 1) % 16
            elseif i < 48 then f, g = bxor(b, c, d), (3 * i + 5) % 16
            else f, g = bxor(c, bor(b, bnot(d))), (7 * i) % 16 end
            f = tobit(f + a + K[i] + X[g])
            a, d, c = d, c, b
            b = tobit(b + rol(f, SH[i + 1]))
        end
        a0, b0, c0, d0 = tobit(a0 + a), tobit(b0 + b), tobit(c0 + c), tobit(d0 + d)
    end
    return le32(a0) .. le32(b0) .. le32(c0) .. le32(d0)
end

local function tohex(s)
    return (s:gsub(".", function(c) return fmt("%02x", byte(c)) end))
end
function M.md5(s) return tohex(M.md5_bin(arg(s, "md5"))) end

---------------------------------------------------------------------------
-- SHA-1 (RFC 3174)
---------------------------------------------------------------------------

function M.sha1_bin(s)
    s = pad(arg(s, "sha1_bin"), false)
    local h0, h1, h2, h3, h4 = tobit(0x67452301), tobit(0xEFCDAB89), tobit(0x98BADCFE), tobit(0x10325476),
                               tobit(0xC3D2E1F0)
    local w = {}
    for blk = 1, #s, 64 do
        for j = 0, 15 do
            local p = blk + j * 4
            local b1, b2, b3, b4 = byte(s, p, p + 3)
            w[j] = bor(lshift(b1, 24), lshift(b2, 16), lshift(b3, 8), b4)
        end
        for j = 16, 79 do w[j] = rol(bxor(w[j - 3], w[j - 8], w[j - 14], w[j - 16]), 1) end
        local a, b, c, d, e = h0, h1, h2, h3, h4
        for j = 0, 79 do
            local f, k
            if j < 20 then f, k = bor(band(b, c), band(bnot(b), d)), 0x5A827999
            elseif j < 40 then f, k = bxor(b, c, d), 0x6ED9EBA1
            elseif j < 60 then f, k = bor(band(b, c), band(b, d), band(c, d)), 0x8F1BBCDC
            else f, k = bxor(b, c, d), 0xCA62C1D6 end
            local t = tobit(rol(a, 5) + f + e + k + w[j])
            e, d, c, b, a = d, c, rol(b, 30), a, t
        end
        h0, h1, h2, h3, h4 = tobit(h0 + a), tobit(h1 + b), tobit(h2 + c), tobit(h3 + d), tobit(h4 + e)
    end
    return be32(h0) .. be32(h1) .. be32(h2) .. be32(h3) .. be32(h4)
end

function M.sha1(s) return tohex(M.sha1_bin(arg(s, "sha1"))) end

-- HMAC (RFC 2104) with SHA-1: raw 20-byte digest, as ngx.hmac_sha1.
function M.hmac_sha1(key, msg)
    key, msg = arg(key, "hmac_sha1"), arg(msg, "hmac_sha1")
    if #key > 64 then key = M.sha1_bin(key) end
    key = key .. ("\0"):rep(64 - #key)
    local ipad, opad = {}, {}
    for i = 1, 64 do
        local k = byte(key, i)
        ipad[i], opad[i] = char(bxor(k, 0x36)), char(bxor(k, 0x5c))
    end
    return M.sha1_bin(concat(opad) .. M.sha1_bin(concat(ipad) .. msg))
end

M.tohex = tohex
return M
