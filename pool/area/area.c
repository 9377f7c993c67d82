/*
 * area.c -- the size classes of areas and the spans they live in:
 * the table that every area file reads through area.h's cls_* and
 * chunk_* (the hot path computes a class and a chunk index inline, with no
 * call and no divide).
 *
 * Layer: areas, the bottom file: one table (dp_ar_cls), no function.
 *
 * Rules
 *   [classes] 87 classes: from 16 B in 8 B steps to 64 B (c = 0..6; as
 *      dsa.c's, PostgreSQL's MAXALIGN), in 16 B steps to 128 B (c =
 *      7..10), then eight per doubling to 8 KiB, 2^k {9 .. 16} / 8 for 2^k =
 *      128 B .. 4 KiB (c = 11..58, 144 B .. 8 KiB), and four above, 2^k {5,
 *      6, 7, 8} / 4 for 2^k = 8 KiB .. 512 KiB (c = 59..86, 10 KiB .. 1
 *      MiB). A size loses to its class under 8 B (under 16 B up to 16 B and
 *      from 65 to 128 B), under an eighth of itself (to 8 KiB) or under a
 *      quarter. Every power of two from 16 B to 1 MiB is a class. Sizes
 *      above AR_LARGE_FROM (256 KiB) take exact blocks instead
 *      (area_large.c [large blocks]), and mid sizes first too (area_alloc.c
 *      [mid sizes]): the classes above it stay in the table, unused by
 *      allocations. cls_of gives a size's class.
 *   [spans] A chunk's class follows from its span: a pool block of one
 *      class (its entry's info word). A power-of-two class's span is the
 *      smallest power of two from 64 KiB that holds 64 chunks
 *      (AR_SPAN_MIN_CHUNKS), 2 MiB (one huge page) for chunks of 32 KiB and
 *      up -- 64 KiB up to 1 KiB chunks, ... 1 MiB for 16 KiB -- its chunks
 *      filling it.
 *   [exact spans] Every other class's span is exact: len, a multiple of
 *      lcm(size, 4 KiB), so that its chunks fill whole pages with no tail --
 *      the largest within 64 KiB where that holds 32 chunks
 *      (AR_SPAN_EXACT_CHUNKS; chunks below 2 KiB: 36-64 KiB), else the
 *      smallest that holds 64 KiB and 32 chunks (or the most that 2 MiB
 *      holds). Its block (cls_span) is the power of two at or above len,
 *      with the pages past len given back when it is taken (area_acquire.c
 *      [exact blocks]; a 112 B span: 56 KiB of a 64 KiB block). So no span
 *      loses a tail, and a small area holds at most 64 KiB per small class
 *      it uses. The smallest spans (36 KiB) bound an area of them to 2^17 x
 *      36 KiB = 4.5 GiB (the registry's entries). What earlier spans cost:
 *      docs/design.md, Areas.
 *   [placement] A span sits at a multiple of its block's size from
 *      data_off (the buddy allocator's blocks are aligned to their size, and
 *      data_off to 2 MiB), or at the start of its OS segment (of len
 *      bytes): a chunk's span starts at its pointer rounded down to
 *      cls_span (span_rel), for pool and fallback pointers alike
 *      (area_pointer.c [offset arithmetic]).
 *   [reciprocal] A chunk's index in its span is off / size, computed as
 *      (off * mul) >> 42 (chunk_idx): mul = 2^42 / size + e, 0 < e <= 1, so
 *      the error off * e / 2^42 < 2^-21 stays below the 1 / size >= 2^-20
 *      that off / size lacks to the next integer, for every off < 2 MiB
 *      (tests/test_area.c checks every offset of every class).
 *   [damaged class] Entries AR_NCLS..127 are zero: no chunks, no span. A
 *      class number read from shared memory indexes the table masked
 *      (AR_CLS_MASK: the directory's 7 bits), so a damaged one never reads
 *      past it and fails every chunk test (chunk_at).
 *
 * Invariant, every class c < AR_NCLS:
 *   [fill] chunks x size = len <= span, len a multiple of 4 KiB, span a
 *      power of two from 64 KiB to 2 MiB; len = span unless the span is
 *      exact. (The asserts below check the bands; tests/test_area.c every
 *      class.)
 */

#include "area.h"

/* The table ([classes], [spans], [exact spans]); mul: [reciprocal]. */
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
 * once (area_acquire.c [exact blocks]). */
#ifndef AR_SPAN_EXACT_CHUNKS
#define AR_SPAN_EXACT_CHUNKS 32u
#endif
#define AR_LOWBIT(s) ((uint64_t)(s) & (~(uint64_t)(s) + 1u))
#define AR_LCM(s) ((uint64_t)(s) * DP_FRAME_SIZE / (AR_LOWBIT(s) < DP_FRAME_SIZE ? AR_LOWBIT(s) : DP_FRAME_SIZE))
#define AR_MAX(x, y) ((x) > (y) ? (x) : (y))
#define AR_XLEN1(s)                                                                                \
    ((AR_MAX((uint64_t)AR_SPAN_MIN, (uint64_t)(s) * AR_SPAN_EXACT_CHUNKS) + AR_LCM(s) - 1) / AR_LCM(s) * AR_LCM(s))
/* at most 64 KiB where that holds AR_SPAN_EXACT_CHUNKS chunks (chunks below 2
 * KiB) */
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
