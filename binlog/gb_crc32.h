/* The kernels' CRC-32 (binlog/_kernel.pyx, gbinlog/spark_engine/_xkernel.pyx): static, so each
   module has its own copy and calls gb_crc_init() once. */
#ifndef GB_CRC32_H
#define GB_CRC32_H
/* CRC-32 (zlib's: reflected polynomial 0xEDB88320) of the scan's checks and the frames' trailers.
   zlib 1.2 goes a byte (or a braid) at a time, a third of a 1x extraction's CPU on events of
   30-200 bytes; on x86 with PCLMULQDQ the 16-byte blocks are folded by carry-less
   multiplication instead (Gopal, Ozturk et al., "Fast CRC Computation for Generic Polynomials
   Using PCLMULQDQ Instruction", Intel 2009; the constants are the paper's bit-reflected k1..k5,
   P' and mu). A length that is not a multiple of 16 is taken as the same bytes after 16 - r zero
   bytes, from a register that those zeros turn into the starting one (``gb_pre``, found once by
   running the zero-byte step backwards), so no byte goes alone. Same value as zlib's crc32 for
   any input (tests/test_kernel.py); without PCLMULQDQ (or off x86) zlib's crc32 itself. */
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

static int gb_clmul = 0;
static const z_crc_t *gb_table = NULL;
static uint32_t gb_pre[16];  /* gb_pre[r]: the register that 16 - r zero bytes turn into ~0 */
static unsigned char gb_shift[16][16];  /* pshufb masks: bytes 0..r-1 to 16-r..15, zeros below */

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define GB_LOAD(q) _mm_loadu_si128((const __m128i *)(q))
/* x * x^n folded into the next block: hi(x)*k.hi ^ lo(x)*k.lo ^ next */
#define GB_FOLD(x, k, next) _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128((x), (k), 0x00), \
                                          _mm_clmulepi64_si128((x), (k), 0x11)), (next))

/* The CRC register after the ``len`` bytes at ``p`` (len >= 16), from register ``c``; with
   ``r`` = len % 16 > 0, after 16 - r zero bytes then those (the first block is p's first r bytes
   shifted up behind zeros). */
__attribute__((target("pclmul,sse4.1")))
static uint32_t gb_fold(uint32_t c, const unsigned char *p, size_t len)
{
    const __m128i by128 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);   /* k4, k3 */
    const __m128i by512 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);   /* k2, k1 */
    const __m128i by64 = _mm_set_epi64x(0, 0x0163cd6124LL);                 /* k5 */
    const __m128i barrett = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL); /* mu, P' */
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    size_t r = len & 15;
    __m128i a = GB_LOAD(p), b, d, e, t;
    if (r) {
        a = _mm_shuffle_epi8(a, GB_LOAD(gb_shift[r]));
        p += r;
        len -= r;
    } else {
        p += 16;
        len -= 16;
    }
    a = _mm_xor_si128(a, _mm_cvtsi32_si128((int)c));
    if (len >= 48) {  /* four lanes 64 bytes apart, joined at the end */
        b = GB_LOAD(p);
        d = GB_LOAD(p + 16);
        e = GB_LOAD(p + 32);
        p += 48;
        len -= 48;
        for (; len >= 64; p += 64, len -= 64) {
            a = GB_FOLD(a, by512, GB_LOAD(p));
            b = GB_FOLD(b, by512, GB_LOAD(p + 16));
            d = GB_FOLD(d, by512, GB_LOAD(p + 32));
            e = GB_FOLD(e, by512, GB_LOAD(p + 48));
        }
        a = GB_FOLD(a, by128, b);
        a = GB_FOLD(a, by128, d);
        a = GB_FOLD(a, by128, e);
    }
    for (; len >= 16; p += 16, len -= 16)
        a = GB_FOLD(a, by128, GB_LOAD(p));
    /* 128 -> 64 bits, 64 -> 32 bits, then Barrett's reduction modulo P */
    t = _mm_clmulepi64_si128(a, by128, 0x10);
    a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
    t = _mm_srli_si128(a, 4);
    a = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), by64, 0x00), t);
    t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), barrett, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(a, t), 1);
}

static void gb_crc_init(void)
{
    unsigned char top[256];
    int seen[256] = {0}, i, r;
    uint32_t c = 0xFFFFFFFFu;
    gb_table = get_crc_table();
    /* the zero-byte step c -> T[c & 0xff] ^ (c >> 8) undone: T's top bytes are all different */
    for (i = 0; i < 256; i++) {
        top[gb_table[i] >> 24] = (unsigned char)i;
        seen[gb_table[i] >> 24] = 1;
    }
    for (i = 0; i < 256; i++)
        if (!seen[i])
            return;
    for (r = 0; r < 16; r++)
        for (i = 0; i < 16; i++)
            gb_shift[r][i] = i < 16 - r ? 0x80 : (unsigned char)(i - (16 - r));
    gb_pre[0] = c;
    for (r = 15; r >= 1; r--) {
        i = top[c >> 24];
        c = ((c ^ (uint32_t)gb_table[i]) << 8) | (uint32_t)i;
        gb_pre[r] = c;
    }
    __builtin_cpu_init();
    gb_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
#else
static uint32_t gb_fold(uint32_t c, const unsigned char *p, size_t len) { return c; }
static void gb_crc_init(void) { gb_table = get_crc_table(); }
#endif

static unsigned long gb_crc32(unsigned long crc, const unsigned char *p, unsigned int len)
{
    uint32_t c;
    if (!gb_clmul || len < 16)
        return crc32(crc, p, len);
    if (crc == 0)  /* the scan's and the frames' case: r = len % 16 bytes after 16 - r zeros */
        return ~gb_fold(gb_pre[len & 15], p, len);
    for (c = ~(uint32_t)crc; len & 15; len--)  /* a running CRC: the first r bytes one by one */
        c = (uint32_t)gb_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~gb_fold(c, p, len);
}
#endif
