-- nanosrv/digest.lua: CRC-32, MD5, SHA-1 and HMAC-SHA1 against published
-- vectors and against `openssl dgst` on lengths around the 64-byte block
-- edges and on binary data.
local T = dofile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".") .. "/support/tap.lua")
local digest = require("nanosrv.digest")
local hex = digest.tohex

-- RFC 1321, FIPS 180-1 / RFC 3174, RFC 2202, and the CRC-32 check value.
T.is(digest.md5(""), "d41d8cd98f00b204e9800998ecf8427e", "md5('')")
T.is(digest.md5("abc"), "900150983cd24fb0d6963f7d28e17f72", "md5('abc')")
T.is(digest.md5("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
     "57edf4a22be3c955ac49da2e2107b67a", "md5 of 80 digits (RFC 1321)")
T.is(hex(digest.sha1_bin("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d", "sha1('abc')")
T.is(hex(digest.sha1_bin("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
     "84983e441c3bd26ebaae4aa1f95129e5e54670f1", "sha1 of the 448-bit FIPS message")
T.is(hex(digest.hmac_sha1(("\11"):rep(20), "Hi There")), "b617318655057264e28bc0b6fb378c8ef146be00", "HMAC-SHA1 RFC 2202 #1")
T.is(hex(digest.hmac_sha1("Jefe", "what do ya want for nothing?")), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79",
     "HMAC-SHA1 RFC 2202 #2")
T.is(hex(digest.hmac_sha1(("\170"):rep(80), "Test Using Larger Than Block-Size Key - Hash Key First")),
     "aa4ae5e15272d00e95705637ce8a3b55ed402112", "HMAC-SHA1 RFC 2202 #6 (key longer than a block)")
T.is(digest.crc32("123456789"), 0xCBF43926, "crc32 check value")
T.is(digest.crc32(""), 0, "crc32('')")
T.is(#digest.md5_bin("x"), 16, "md5_bin is 16 raw bytes")
T.is(digest.md5(12), digest.md5("12"), "numbers are taken as their text, as ngx.md5")
T.raises("string expected", "a table raises", digest.md5, {})

-- Against openssl, on a temporary file.
local has_openssl = os.execute("command -v openssl >/dev/null 2>&1") == 0
local function openssl(args, data)
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write(data)
    f:close()
    local p = io.popen("openssl dgst " .. args .. " < " .. path .. " 2>/dev/null")
    local out = p:read("*a")
    p:close()
    os.remove(path)
    return out:match("([0-9a-f]+)%s*$")
end
if not has_openssl then
    T.ok(false, "openssl is installed")
else
    local bytes = {}
    for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
    bytes = table.concat(bytes)
    local cases = {}
    for _, n in ipairs({ 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000 }) do cases[#cases + 1] = ("a"):rep(n) end
    cases[#cases + 1] = bytes
    cases[#cases + 1] = bytes:rep(9) .. "tail"
    local md5_ok, sha_ok, hmac_ok = true, true, true
    for _, s in ipairs(cases) do
        md5_ok = md5_ok and openssl("-md5", s) == digest.md5(s)
        sha_ok = sha_ok and openssl("-sha1", s) == hex(digest.sha1_bin(s))
        hmac_ok = hmac_ok and openssl("-sha1 -hmac secret-key", s) == hex(digest.hmac_sha1("secret-key", s))
    end
    T.ok(md5_ok, "md5 equals openssl's on " .. #cases .. " inputs (block edges, binary)")
    T.ok(sha_ok, "sha1 equals openssl's on the same inputs")
    T.ok(hmac_ok, "hmac_sha1 equals openssl's on the same inputs")
end

T.done()
