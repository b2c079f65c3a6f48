/* The kernel's byte search (binlog/_kernel.pyx ``find``: the cluster check reads every DN file once).
   glibc's memmem is its generic two-way loop here, about 4 GB/s, a few percent of a build. With
   AVX2, 32 positions are tested at once for the needle's first and last bytes, and only the
   positions where both match are compared in full (W. Muła, "SIMD-friendly algorithms for
   substring searching", 2016); the tail and machines without AVX2 use memmem. Same result as
   memmem for any input (tests/test_kernel.py). */
#ifndef GB_FIND_H
#define GB_FIND_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static int gb_avx2 = -1;

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2")))
static const unsigned char *gb_find_avx2(const unsigned char *s, size_t n, const unsigned char *needle, size_t k)
{
    const __m256i first = _mm256_set1_epi8((char)needle[0]);
    const __m256i last = _mm256_set1_epi8((char)needle[k - 1]);
    size_t i = 0;
    for (; i + k - 1 + 32 <= n; i += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + k - 1));
        uint32_t mask = (uint32_t)_mm256_movemask_epi8(
            _mm256_and_si256(_mm256_cmpeq_epi8(first, a), _mm256_cmpeq_epi8(last, b)));
        while (mask) {
            unsigned bit = (unsigned)__builtin_ctz(mask);
            if (memcmp(s + i + bit + 1, needle + 1, k - 2) == 0)
                return s + i + bit;
            mask &= mask - 1;
        }
    }
    return memmem(s + i, n - i, needle, k);
}

static const unsigned char *gb_find(const unsigned char *s, size_t n, const unsigned char *needle, size_t k)
{
    if (gb_avx2 < 0) {
        __builtin_cpu_init();
        gb_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    if (gb_avx2 && k >= 2 && n >= k)
        return gb_find_avx2(s, n, needle, k);
    return memmem(s, n, needle, k);
}
#else
static const unsigned char *gb_find(const unsigned char *s, size_t n, const unsigned char *needle, size_t k)
{
    return memmem(s, n, needle, k);
}
#endif
#endif
