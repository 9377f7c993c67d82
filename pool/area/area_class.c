/*
 * area_class.c -- the size classes and their spans: the table
 *
 * (Split out of area.c; its design comment, in dp_area.h until the next
 * commit, is divided by concern there.)
 */

#define DP_AREA_INSIDE
#include "dp_area.h"

/* Classes (Geometry): c < 7: 8 (c + 2) B (16 .. 64 in 8 B steps); c < 11:
 * 16 (c - 2) B (80 .. 128); then eight per doubling, 2^k {9 .. 16} / 8 for
 * 2^k = 128 B .. 4 KiB (c < 59: 144 B .. 8 KiB), then four, 2^k {5, 6, 7, 8}
 * / 4 for 2^k = 8 KiB .. 512 KiB (c < 87: 10 KiB .. 1 MiB). mul: the reciprocal that
 * makes a chunk's index a multiply and a shift, (off * mul) >> AR_DIV_SHIFT
 * = off / size for every off < 2 MiB (mul = 2^42 / size + e, 0 < e <= 1:
 * the error off * e / 2^42 < 2^-21 stays below the 1 / size >= 2^-20 that
 * off / size lacks to the next integer; tests/test_area.c checks every
 * offset of every class). Entries AR_NCLS..127 are zero: no chunks, so a
 * damaged class number fails every chunk test. */
#define AR_CSIZE(c)                                                                                \
    ((c) < 7 ? 8u * ((c) + 2u) : (c) < 11 ? 16u * ((c) - 2u)                                       \
     : (c) < 59 ? (16u << (((c) - 11u) / 8u)) * (9u + ((c) - 11u) % 8u)                           \
                : (2048u << (((c) - 59u) / 4u)) * (5u + ((c) - 59u) % 4u))
/* The smallest power of two from 64 KiB up to 2 MiB that holds n bytes
 * (2 MiB if none). */
#define AR_P2B(n, k) ((uint64_t)(n) <= (1ull << (k)))
#define AR_P2(n)                                                                                   \
    (AR_P2B(n, 16) ? 1u << 16 : AR_P2B(n, 17) ? 1u << 17 : AR_P2B(n, 18) ? 1u << 18               \
     : AR_P2B(n, 19) ? 1u << 19 : AR_P2B(n, 20) ? 1u << 20 : 1u << 21)
/* Span bytes of a power-of-two class of chunk size s: the smallest such
 * power of two that holds AR_SPAN_MIN_CHUNKS chunks. */
#define AR_SPANB(s) AR_P2((uint64_t)(s) * AR_SPAN_MIN_CHUNKS)
/* Exact spans (every class but the powers of two, whose chunks fill a
 * power of two): a multiple of lcm(s, 4 KiB) -- its chunks fill whole
 * pages -- the largest within AR_SPAN_MIN (64 KiB) if that holds
 * AR_SPAN_EXACT_CHUNKS chunks, else the smallest that holds AR_SPAN_MIN
 * bytes and AR_SPAN_EXACT_CHUNKS chunks, or the largest within 2 MiB;
 * taken from the power of two at or above it with the rest given back at
 * once (rule 13's trim). */
#ifndef AR_SPAN_EXACT_CHUNKS
#define AR_SPAN_EXACT_CHUNKS 32u
#endif
#define AR_LOWBIT(s) ((uint64_t)(s) & (~(uint64_t)(s) + 1u))
#define AR_LCM(s) ((uint64_t)(s) * DP_FRAME_SIZE / (AR_LOWBIT(s) < DP_FRAME_SIZE ? AR_LOWBIT(s) : DP_FRAME_SIZE))
#define AR_MAX(x, y) ((x) > (y) ? (x) : (y))
#define AR_XLEN1(s)                                                                                \
    ((AR_MAX((uint64_t)AR_SPAN_MIN, (uint64_t)(s) * AR_SPAN_EXACT_CHUNKS) + AR_LCM(s) - 1) / AR_LCM(s) * AR_LCM(s))
/* at most 64 KiB where that holds AR_SPAN_EXACT_CHUNKS chunks (chunks below 2 KiB) */
#define AR_XLEN0(s) ((uint64_t)AR_SPAN_MIN / AR_LCM(s) * AR_LCM(s))
#define AR_XLEN(s)                                                                                 \
    (AR_XLEN0(s) >= (uint64_t)(s) * AR_SPAN_EXACT_CHUNKS ? AR_XLEN0(s)                             \
     : AR_XLEN1(s) <= AR_SPAN                            ? AR_XLEN1(s)                             \
                                                         : AR_SPAN / AR_LCM(s) * AR_LCM(s))
#define AR_EXACT(s) (AR_LOWBIT(s) != (uint64_t)(s) && AR_LCM(s) <= AR_SPAN)
/* the span's chunk bytes rounded to the page: what a span holds */
#define AR_LEN(s) (AR_EXACT(s) ? AR_XLEN(s) : AR_SPANB(s))
/* its block (cls_span): the power of two at or above AR_LEN, AR_P2 */
#define AR_C1(c)                                                                                   \
    {AR_CSIZE(c), (uint32_t)(AR_LEN(AR_CSIZE(c)) / AR_CSIZE(c)), (1ull << AR_DIV_SHIFT) / AR_CSIZE(c) + 1, \
     AR_P2(AR_LEN(AR_CSIZE(c))), (uint32_t)AR_LEN(AR_CSIZE(c))}
#define AR_C4(c) AR_C1(c), AR_C1((c) + 1u), AR_C1((c) + 2u), AR_C1((c) + 3u)
#define AR_C20(c) AR_C4(c), AR_C4((c) + 4u), AR_C4((c) + 8u), AR_C4((c) + 12u), AR_C4((c) + 16u)
const ar_class dp_ar_cls[AR_CLS_MASK + 1] = {AR_C20(0u), AR_C20(20u), AR_C20(40u), AR_C20(60u),
                                                AR_C4(80u), AR_C1(84u), AR_C1(85u), AR_C1(86u)};
_Static_assert(AR_NCLS == 87 && AR_CSIZE(AR_NCLS - 1) == AR_SMALL_MAX, "the last class is 1 MiB");
_Static_assert(AR_CSIZE(6) == 64 && AR_CSIZE(10) == 128 && AR_CSIZE(58) == 8192 && AR_CSIZE(59) == 10240,
               "the class table's bands meet");
_Static_assert(AR_LARGE_CLS >= AR_NCLS && AR_LARGE_CLS <= AR_CLS_MASK, "the directory's 7-bit class field");
_Static_assert(AR_SPANB(AR_MIN_CHUNK) == AR_SPAN_MIN && AR_SPANB(AR_SMALL_MAX) == AR_SPAN,
               "spans from 64 KiB to 2 MiB");
_Static_assert(AR_DIR_GRAN == DP_FRAME_SIZE, "a directory word per frame: blocks exact to the page share no word");
_Static_assert((AR_SPAN / AR_MIN_CHUNK) < (1u << 18), "span word: 18-bit head (index + 1) and count");
_Static_assert((AR_SPAN / AR_MIN_CHUNK) < (1u << 19), "bump word: 19-bit index and count");
_Static_assert(AR_REGPAGES * AR_PER_PAGE < (1u << 24), "directory word: 24-bit entry + 1");
