/*
 * dp_area.h -- the area layer: DSA-like heaps of relocatable pointers
 * (area.c), as the layers above call them: recovery, the checker, the
 * inspector and the lifecycle.
 *
 * Layer: areas (pool/area), above segments (an area's control block is a
 * segment) and the ledger.
 */
#ifndef DP_AREA_H
#define DP_AREA_H

#include "dp_segment.h"

void dp_area_layer_init(void);
void dp_area_tag_free(struct dsmpool *pool, uint32_t tag);
void dp_area_sweep_tags(struct dsmpool *pool); /* inside the leak sweep's quiet window */
void dp_area_detach_pool(struct dsmpool *pool); /* this process's areas of the pool */
void dp_area_recover_slot(struct dsmpool *pool, uint32_t slot);
void dp_area_mark_owned(struct dsmpool *pool, dp_mark_fn mark, void *arg);
/* Cache operations in flight, as a snapshot (area.c rule 7). */
typedef struct dp_area_quiet {
    uint64_t *seq;
    size_t n, cap;
} dp_area_quiet;
int dp_area_quiet_open(struct dsmpool *pool, dp_area_quiet *q); /* -EBUSY: an operation runs */
bool dp_area_quiet_holds(struct dsmpool *pool, const dp_area_quiet *q);
void dp_area_quiet_close(dp_area_quiet *q);
/* Free lists, caches, bump ranges and span stacks: no chunk twice, every
 * link inside its area's spans. 0 or -EUCLEAN with why. The scratch (zero
 * at first) is kept between calls of one check and freed after. */
typedef struct dp_area_scratch {
    void *bits, *used;
} dp_area_scratch;
int dp_area_verify(struct dsmpool *pool, dp_area_scratch *sc, char *why, size_t n);
/* area.c rule 11: give back the chunks that deaths inside area operations
 * lost (it opens its own quiet windows: call it outside any); false: left
 * for the next sweep. *got counts what went back. */
bool dp_area_sweep_lost(struct dsmpool *pool, dp_area_scratch *sc, size_t *got);
void dp_area_scratch_free(dp_area_scratch *sc);

/* area.c: the pool's OS segments are about to go with its last process:
 * area entries in them go first (life.c rule 4). */
void dp_area_drop_os(struct dsmpool *pool);

/* ---- a read-only snapshot of one area (for the inspector) ------------------- */

/* Areas: one per descriptor holding an area control block. */
#define DP_INSP_NCLS 87u /* area.c's classes (chunk_size says their sizes) */
typedef struct dp_insp_area {
    uint64_t seg_index, handle;
    unsigned state;      /* 1 live, 2 destroyed, 0 unknown */
    uint64_t flags, limit, held, lost;
    uint32_t tag;
    uint64_t spans[DP_INSP_NCLS];         /* live spans per class */
    uint64_t cached_chunks[DP_INSP_NCLS]; /* free chunks thread caches hold (lists + bump ranges) */
    uint32_t chunk_size[DP_INSP_NCLS];    /* bytes per chunk of each class */
    uint64_t large_blocks, large_bytes, fallback_entries, registry_pages;
    uint32_t caches;                      /* cache records in use */
    uint64_t cached_bytes;
    bool damaged;
    char why[96];
} dp_insp_area;
int dp_area_inspect(struct dsmpool *pool, uint64_t idx, dp_insp_area *out); /* -ENOENT: not an area */

/* ==== inside the area layer, grouped by file ==================================
 *
 * What the area files share: the shared-memory structs, the macros, the
 * functions one file defines and another calls, and what the hot path
 * needs inline (the build has no LTO). Only pool/area's files see it: they
 * define DP_AREA_INSIDE before including this header. */
#ifdef DP_AREA_INSIDE
#include <string.h>

/* area.c's design comment, whole until the next commit divides it by file: */
/*
 * areas: a heap of relocatable allocations on top of the pool.
 *
 * Layer: above segments (an area's control block is a segment) and the
 * ledger; below recovery and the checker, which call its recovery and
 * verification by name. It registers its destructor for area control
 * segments with the segment layer (dp_area_layer_init).
 *
 * Geometry
 *   Classes: 87, from 16 B in 8 B steps to 64 B (c = 0..6; like dsa.c's,
 *   PostgreSQL's MAXALIGN), in 16 B steps to 128 B (c = 7..10), then eight
 *   per doubling to 8 KiB, 2^k {9 .. 16} / 8 for 2^k = 128 B .. 4 KiB
 *   (c = 11..58, 144 B .. 8 KiB), and four above, 2^k {5, 6, 7, 8} / 4 for
 *   2^k = 8 KiB .. 512 KiB (c = 59..86, 10 KiB .. 1 MiB): a size wastes
 *   under 8 B (under 16 B up to 16 B and from 65 to 128 B), under an
 *   eighth of itself (to 8 KiB) or under a quarter, to its class -- below jemalloc's four per doubling on
 *   every size distribution of bench/efficiency, for 24 B of cache record
 *   per class and a partly used span per class in use. Sizes above AR_LARGE_FROM (256 KiB) take exact
 *   blocks instead (rule 13: 3.4% over the sizes asked for 100 KB..2 MB
 *   in bench/efficiency, against 10.6% with classes up to 1 MiB); the
 *   classes above it stay in the table, unused by allocations. Mid sizes
 *   (above 4 KiB, where whole pages waste no more than the class; not the
 *   powers of two) take exact blocks first too, and their
 *   class when the pool has none or the registry's first half is full
 *   (rule 13). A chunk's class follows from its span. Span: a
 *   pool block of one class (dp_ar_cls). A power-of-two class's is the
 *   smallest power of two from 64 KiB that holds 64 chunks, 2 MiB (one
 *   huge page) for chunks of 32 KiB and up -- 64 KiB up to 1 KiB chunks,
 *   ... 1 MiB for 16 KiB -- its chunks filling it. Every other class's
 *   span is exact: len, a multiple of lcm(size, 4 KiB), so that its chunks
 *   fill whole pages with no tail -- the largest within 64 KiB where that
 *   holds 32 chunks (chunks below 2 KiB: 36-64 KiB), else the smallest
 *   that holds 64 KiB and 32 chunks (or the most that 2 MiB holds); it is
 *   taken as the power of two at or above len (its block, cls_span) with
 *   the pages past len given back at once, as for exact large blocks (rule
 *   13; a 112 B span: 56 KiB of a 64 KiB block). So a small area holds at
 *   most 64 KiB per small class it uses, not 2 MiB, and no span loses a
 *   tail: before, a power-of-two span per class lost up to 1/64 of
 *   itself, and its 64 chunks of 4-8 KiB left half of 512 KiB idle per
 *   class on average (bench/efficiency 1000..10000 B: 0.96 points beyond
 *   the classes; 0.6-0.7 now). The smallest spans (36 KiB) bound an area of
 *   them to 2^17 x 36 KiB = 4.5 GiB (the registry; 8 GiB with 64 KiB
 *   ones before). A span sits at a multiple
 *   of its block's size from data_off (the buddy allocator's blocks are
 *   aligned to their size, and data_off to 2 MiB), or at the start of its
 *   OS segment (of len bytes). A chunk's index
 *   in its span is off / size, computed as (off * mul) >> 42 with a
 *   per-class reciprocal (exact for every off < 2 MiB; tests/test_area.c
 *   checks them all): no divide on the hot path. Larger requests get their
 *   own power-of-two block ("large"). When the pool cannot serve, spans
 *   (of the class's size) and large blocks come from pinned OS segments.
 *
 * Shared state (all offsets; the control block lives in a pool segment
 * whose handle is the area's handle, and whose reference count is the
 * area's):
 *   ctl       magic, state (LIVE/DESTROYED), limit, held bytes, a random key
 *             (free tags), a table of registry pages, per-class "spans with
 *             returned chunks" hints, the shared path's flag, counters,
 *             per-class hints and kept span (rule 15), and a table of cache
 *             record pages (16 KiB pool blocks of 7 records, 256 records
 *             in all), each linked by one CAS when every record before it
 *             is held and freed by the final destroy: a new area's control
 *             block is 16 KiB, not 256 records' 544 KiB. Walkers of the
 *             records visit the pages that exist, each link validated first.
 *   registry  4 KiB pages of 32-byte span entries {state, block, segment,
 *             info}; entry e is page e/128, slot e%128.
 *   directory a pool-wide word per 4 KiB of data (a frame: blocks are
 *             exact to the page, so no two share a word; 0.2% of the
 *             region) naming (area, entry, class) of the span or large block
 *             there ([aid:33][entry+1:24][class:7]; a class that is neither
 *             a span's nor AR_LARGE_CLS is damage): a span or block writes
 *             all of its words when acquired and clears them when retired;
 *             free() finds a chunk's span with one load (the span's start:
 *             the pointer rounded down to the class's span size), and a
 *             pointer of another area is refused.
 *   cache     per thread: an operation sequence, and per class a free list
 *             threaded through the free chunks (head + advisory count) and a
 *             bump range in the current span ([entry+1:26][next index:19]
 *             [left:19]); 87 classes x 24 B + one line, padded to a
 *             line: 2176 B a record, 7 to a 16 KiB record page.
 *
 * Fallback pointers (into OS segments; a pool pointer is a region offset,
 * bit 63 clear): [1][tag:14][entry:17][check:32-n][offset:n] for an OS
 * segment of L bytes (at most 4 GiB), n = max(16, ceil(log2 L)) (ar_fb_bits).
 *   - tag: the area's, exact (unique among the pool's live areas, so a
 *     pointer of another live area is always refused); entry: the registry
 *     entry that holds the segment; offset: the byte in it.
 *   - check: the top 32 - n bits of mix(key ^ handle) (fb_check), handle the
 *     OS segment's (sp->seg: index and 32-bit generation, new whenever the
 *     entry takes a new segment: segment.c rule 2), key the area's random
 *     key (rule 9). Not the span word's generation: that counts the stack's
 *     pushes and pops, not what the entry holds. seg is stored before the
 *     entry's publishing CAS (release), and read after an acquire load of
 *     the state (dp_ar_locate, dp_ar_fb_map) or checked against a mapping record
 *     that was (fb_lookup).
 *   - Every pointer built for an entry's segment carries the check (span
 *     and block bases, ptr_of, recovery, the lost sweep, verification);
 *     every one read (addr, free, usable_size, ptr_of, the walks) must
 *     match the entry's current segment, else it is refused as another
 *     area's is: NULL, -EINVAL, 0, nothing changed. The mapping records
 *     (fb) stay keyed by entry and name their segment; they keep its n and
 *     check, so a conversion pays one compare.
 *   - Detection: a pointer kept after its segment went back (freed, or
 *     dropped with the pool's OS segments) and used once the entry holds a
 *     new segment of L bytes passes with probability 2^-(32 - n) over the
 *     key, for any two handles: 2^-16 for L up to 64 KiB (spans of 64 KiB
 *     blocks), 2^-13 up to 512 KiB, 2^-11 up to 2 MiB (the largest spans),
 *     then twice that per doubling of L (1/2 above 1 GiB); a new segment
 *     above 2 GiB (n = 32) leaves no bits, and such a pointer passes. An
 *     entry that holds no segment, or a pool block, refuses it always. The
 *     check names the segment, not the allocation: a freed chunk of a span
 *     still held is told by its free tag, as in the pool.
 *   - Arithmetic: L <= 2^n, so p + k for k below an allocation's usable
 *     size never carries into the check, and ptr_of(addr(p) + k) == p + k.
 *     A span's n is its block's (2^n = cls_span: the power of two from 64
 *     KiB at or above its len; tests/test_area.c checks every class), so
 *     span_rel() reads a chunk's offset out of either kind of pointer.
 *   Why these bits: the tag and entry fields are full (16383 tags, 2^17
 *   entries), and a reuse counter per entry (exact for 2^b - 1 reuses)
 *   would need a word that a 32-byte entry does not have; the offset bits
 *   a segment does not need are free. n from L rather than 21 for every
 *   span gives the small classes' spans 16 bits instead of 11, at no cost.
 *   The pool's pointers, and the hot path, are unchanged.
 *
 * Rules
 *   1. Hot path (alloc): pop the thread's free list, else take the next
 *      chunk of its bump range. Free: push on the thread's free list. Only
 *      the owning thread writes its cache record: relaxed loads and stores,
 *      no read-modify-write, no lock, no system call.
 *   2. Refill (the list and the range are empty): steal the whole returned
 *      stack of a span of this class (one CAS), else take a fresh span: a
 *      block of the class's span size from the pool, trimmed to its len
 *      when the span is exact (or an OS segment of len bytes),
 *      recorded in a registry entry and the directory, and set the bump
 *      range to all its chunks.
 *   3. Drain (the list holds more than two batches): push one batch back on
 *      their spans' stacks (a CAS each, on the span's word:
 *      [gen:24][count:18][head:18][state:4] -- 2^17 chunks of 16 B would fit --,
 *      chunks linked by index through their first 4 bytes). The push that makes a span's count whole
 *      retires it: CAS to RETIRED(owner), clear the directory, free the block.
 *      A bump range goes back in one push, chained and tagged (rule 11); a
 *      range that with the stack is the whole span retires it untouched.
 *   4. A thread that exits, or a process that detaches, drains everything it
 *      caches; recovery does the same for the caches of dead processes
 *      (every offset it reads is validated first); so does a cache asked to
 *      give back (rule 12).
 *   5. Entries. An entry is filled by its owner in INIT(owner) and published
 *      by one CAS to SPAN or LARGE. Whoever gives an entry's parts back owns
 *      it first: it moved the entry to RETIRED(itself) by a CAS on the word it
 *      read (generation included). Nobody takes an INIT or RETIRED entry whose
 *      owner lives: a destroyer that finds one marks it DOOMED and leaves it,
 *      and the owner's publishing CAS then fails and it gives the parts back
 *      itself; an owner never writes into, or frees from, an entry that is
 *      not in the state it left it in.
 *   6. Destroy (explicit): one CAS makes the area DESTROYED; then, if other
 *      threads hold caches, membarrier(GLOBAL) (every running thread passes a
 *      full barrier), then every cache record whose owner lives is waited for
 *      until its sequence is even (bounded: 50 ms in all). After that no
 *      operation can touch the area's spans: one that began before saw
 *      LIVE and has ended, one that begins later sees DESTROYED (rule 7). Then
 *      every entry is taken and released (rule 5). If an operation is still
 *      running when the bound passes (its thread stopped or preempted), the
 *      destroyer releases nothing: the last reference's destroy (from the
 *      segment layer: no process attached, so no operation) releases it all.
 *      The final destroy also frees the registry pages and the area's tag.
 *   7. Operations. Every alloc, free, flush and cache drain runs inside its
 *      cache record's operation: seq made odd (relaxed store, then a fence
 *      that keeps the operation's accesses after it), the area state read,
 *      the work, seq made even (release). With rule 6 this is an
 *      asymmetric Dekker fence (the destroyer's side is membarrier), and is
 *      the seqlock the checker reads (proc.c rule 7): no RMW on the hot path.
 *   8. Recovery of a dead slot (recover.c) visits only the areas the slot
 *      holds a reference on (an ACTIVE record): those references keep the
 *      control blocks alive until the segment layer drops them, after this
 *      step; any other area's block may be given back at any moment by its
 *      last detacher. There, its cache records are taken by CAS (owner word
 *      set to the dead slot with a recovery mark, so a recoverer that dies
 *      leaves them to the next), drained inside an operation, released; its
 *      INIT and RETIRED entries are taken and released (rule 5). The
 *      recoverer holds the dead slot's liveness lock throughout, so a
 *      destroyer -- in another process, or in the recoverer's own
 *      (proc.c: held_by_us) -- sees the marked records as live (rule 6).
 *  10. A process uses an area only while it holds a reference on its
 *      control segment: a fork()ed child whose inherited reference could
 *      not be taken over gets -ESTALE from every call (dp_ar_usable).
 *   9. Free tags: a freed chunk holds key ^ ptr at +8 (the key is random per
 *      area); allocation clears it. A free that finds its tag intact is a
 *      double free: refused (-EINVAL), and looked for in this thread's cache
 *      and the span's stack for the message. A correct program cannot
 *      produce the tag: it would have to know the key. DSMPOOL_AREA_CHECKED
 *      adds the exact bitmap (a bit per chunk: 4 KiB, 8 KiB for classes
 *      under 64 B, 16 KiB for 16 B chunks).
 *  11. Lost chunks. Every free chunk carries its tag before it leaves one
 *      holder (a list, a stack, a bump range) and is written into the next
 *      -- a chunk leaves first (leak-biased: never on two lists), so a death
 *      in between leaves it on none. Recovery that finds a dead cache record
 *      inside an operation (odd sequence) counts ctl->lost and sets
 *      hdr->lost_due. The lost sweep (recover.c, under the sweep lock)
 *      holds a reference on the area and a cache record of its own; inside
 *      the pool's quiet window, with none of the area's caches inside an
 *      operation, it marks every chunk a list, stack or range holds (the
 *      checker's walk); then, inside an operation on its record, it gives
 *      back each unmarked chunk whose tag is intact (nobody can reach it: a
 *      correct program does not hold a chunk whose tag is set), retires
 *      spans that are whole but were not retired, and sets held to what the
 *      entries hold if a death came between the two. A sweep that cannot
 *      get its windows stays due; one that finds damage leaves it to check.
 *  12. Short of memory (segment.c rule 9): a request is one increment of
 *      hdr->trim. A cache answers -- drains itself and this thread's caches
 *      of the pool's other areas -- at its next free or its next allocation
 *      that its own list cannot serve, and at once when its own thread is
 *      the one short of memory. A thread that makes no call keeps its
 *      cache (dsmpool_area_flush() gives it back); nobody waits for it more
 *      than the requester's bound.
 *  13. Accounting (dsmpool_area_stats). held = in_use + cached when quiet:
 *      cached is the chunks of spans' stacks and of every cache record's
 *      list (count) and bump range, and each span's tail that no chunk
 *      fits (none unless an exact span's trim stopped early -- palloc.c
 *      rule 7 -- and it holds more of its block: stats count a span by its
 *      block word's bytes, as held does; an exact span's entry records its
 *      frames as an exact block's does, and everything below that believes
 *      an exact word holds for it); in_use
 *      the spans' other chunks plus the large blocks (their
 *      exact bytes; the reservation of the power of two, judged against
 *      the limit by the exact bytes, is lowered once the tail went back --
 *      exact spans alike; so for a moment a thread near the limit can be
 *      refused for another's reservation, and a trim cut short leaves held
 *      above the limit by what it kept --,
 *      and a death in between leaves held high until the lost sweep sets
 *      it to the entries' sum). An exact block's entry keeps its own record
 *      of the block's frames (seg, unused by pool blocks otherwise), written
 *      before the block word; a free, the owned maps and lookups believe a
 *      word only if it agrees (dp_ar_entry_block_bytes), so a scribbled trim code
 *      can neither free a neighbour's pages nor leave the block's own to the
 *      sweep: it is damage, for check() to report. A grow marks the record
 *      AR_SEG_GROWING ("up to the new frames") while the word changes.
 *      Mid sizes (mid_exact: above AR_MID_FROM up to AR_LARGE_FROM, whole
 *      pages no more than the class size, not a power of two;
 *      not with DSMPOOL_AREA_MID_CHUNKS) try an exact block first: from the
 *      pool only (no trim request, no OS segment) and in the registry's
 *      first half only (65536: at least 512 MiB of them, and room left for
 *      spans);
 *      on any failure but -ESTALE their class serves, which asks for trims
 *      and OS spans as usual. The pool's pages are then shared among all
 *      sizes and areas, so under churn memory follows the live bytes
 *      (bench/efficiency churn: 1.54 -> 1.18-1.20 peak used / peak live),
 *      at 150-330 ns an alloc+free (a registry entry, a pool block, its
 *      trim) against 10-25 ns for a cached chunk. Registry claims start at
 *      the page ctl->claim_pg names (the last entry given back, or the last
 *      claim), so a claim does not walk every live entry first. Bytes asked for: a large block's is in its entry's info
 *      (bits 12 up, class AR_LARGE_CLS, so it is never read as a bitmap)
 *      and exact. A chunk's is nowhere (free() is not told its size and the
 *      chunk is the caller's): each cache record adds what every chunk
 *      allocation asked for (asked) and its class size (given), plain
 *      stores on the record's first line, which the operation writes
 *      anyway; stats estimates the chunks' requested bytes as their in-use
 *      bytes x asked / given, summed over all records (kept for the area's
 *      life), and says it is an estimate.
 *  14. Sizes and addresses. Every pool pointer is an offset from a mapping
 *      aligned to at least 2 MiB in every process, OS segments are mapped
 *      at 2 MiB boundaries, a span starts its block, which is aligned to
 *      its size (64 KiB to 2 MiB, a power of two), and a chunk of class c
 *      sits at a multiple of its size from its span's start, so a chunk is
 *      aligned to the largest power of two dividing its size: at least
 *      8 B (the 24, 40 and 56 B classes: PostgreSQL's MAXALIGN, as dsa.c;
 *      less than malloc's 16, as the header says), 16 B for every other
 *      class, and n for a
 *      power-of-two n (every power of two from 16 B to 256 KiB is a class);
 *      a large block to its power of two (at most 2 MiB used). An aligned
 *      allocation takes the first class at or above max(size, align) whose
 *      size align divides (the power of two at or above is one, at most
 *      seven classes up), or a large block. The live allocation holding a pointer is found from
 *      the directory (or the fallback pointer's entry) and the entry's
 *      state; a chunk is live unless its free tag (rule 9) is intact, or,
 *      checked, its bit is clear -- a chunk never handed out is told apart
 *      only in checked mode, as for free. Local addresses in OS segments go
 *      back to pointers through this process's mapping records (fb), which
 *      only name the entry's current segment (and carry its check). A
 *      large block is exact to the page: the power-of-two block is taken
 *      and its tail given back at
 *      once (proc.c rule 9; an OS segment is made that size), so its usable
 *      size is the size rounded up to 4 KiB. The directory has a word per
 *      page, so the pages given back can hold anyone's blocks (another
 *      area's, a segment's) without sharing a word with ours. Realloc stays in place within the usable size (a class,
 *      or a block's pages); a large pool block
 *      also grows in place up to its power of two when the tail it gave
 *      back is still free (dp_ar_large_grow: reserve held bytes, take the frames
 *      back, set their directory words, publish the longer block word, in
 *      one bracket); otherwise it allocates, copies and frees, the old
 *      allocation untouched until the new one exists. Growing past the
 *      power of two would need the registry to merge two entries.
 *
 *  15. Any number of users (the shared path). A thread that finds every
 *      cache record held takes none: its tc has rec NULL, and it sets
 *      ctl->shared before its first operation (a relaxed store of its own,
 *      then a seq_cst fence: a destroyer that misses the flag is seen
 *      DESTROYED). Each of its operations is a bracket of its process's
 *      slot (proc.c rule 6) instead of a record's sequence: begun (two
 *      acq_rel RMWs), the area state read, the work, ended. A chunk is taken
 *      from a span of its class with returned chunks (the last that served,
 *      then any; a few microseconds of looking again before a fresh span,
 *      since a stack another taker holds looks empty): the whole stack is
 *      stolen by one CAS (as a refill does), its top kept -- it must carry
 *      its free tag and a link that fits the count, or the chain is left
 *      for the lost sweep (ctl->lost) -- and the rest put back: onto the
 *      empty stack by one CAS, or, if others pushed meanwhile, their chain
 *      stolen too and the shorter of the two walked to its tail and linked
 *      to the other, then put back the same way. No CAS depends on a link
 *      read from a chunk the taker does not hold, so a taker stopped for
 *      any time (across generation wraps) installs nothing stale; and the
 *      class is read again after the steal (the entry may have been given
 *      back and reused for another class with the same word: the chain
 *      goes back as that class's) -- a cached refill's steal too. A fresh
 *      span is published with chunks 1.. already linked and tagged on its
 *      stack (written while the entry is INIT: a death gives the block
 *      back), chunk 0 the caller's. Free pushes the chunk onto its span
 *      (tag, then link, then the CAS: rule 11). In an area with shared
 *      users, a push that makes a span whole keeps it instead (one span per
 *      area, ctl->sh_keep: a kept span that is whole stays and the new one
 *      retires; one in use again is replaced, and looked at again after the
 *      replacing CAS in case it became whole meanwhile -- seq_cst fences on
 *      both sides, as with dp_ar_keep_release) so that one chunk allocated and
 *      freed at a time does not take and link a fresh span each time. The
 *      kept span goes back at a flush, when a shared operation sees a trim
 *      request (rule 12), when this thread is short, and with the area; the
 *      lost sweep leaves it alone. Large blocks are
 *      as with a record. A destroyer that sees ctl->shared always uses
 *      membarrier and also waits (same bound) until no live slot but its
 *      own has a bracket open (dp_brackets_quiesce; its own: just its own
 *      bracket); recovery of a slot that died inside a bracket counts
 *      ctl->lost for each area it held that has shared users (a taker
 *      holding a stolen stack, a free between tag and push). Every 4096
 *      shared operations the thread looks for a record again. Stats add
 *      the shared path's asked/given. The lost sweep needs a record of its
 *      own; while all are held it stays due.
 *
 * Crash bound: an allocation that dies after taking its chunk and before
 * returning leaves that chunk allocated (as a death just after the return
 * would); everything a dead process was freeing, draining or moving comes
 * back (rule 11). The held count is exact after the lost sweep.
 *
 * Memory ordering: span-stack CASes are release (pushes publish the link in
 * the chunk) and acquire (steals read the links); registry entries and
 * directory words are published with release stores after their block is
 * written and read with acquire loads; the cache record needs none for its
 * lists (one writer; recovery reads it after the writer's death, through the
 * acquire of the liveness lock and the owner CAS); its sequence: rule 7.
 *
 * Injection points (tests): "area.op.checked" (inside an operation, the
 * state read LIVE), "area.acquire.stored" (an INIT entry holds its block,
 * before the publishing CAS), "area.destroy.marked" (DESTROYED, before the
 * caches are waited for), "area.push.checked" (a chunk about to be linked
 * onto its span's stack), "area.push.whole" (a push made a span whole,
 * before it retires), "area.free.linked" (a freed chunk's link and tag
 * written, the list head not yet), "area.recover.area" (recovery about to
 * walk an area of the dead slot), "area.shared.checked" (a shared-path
 * allocation inside its bracket, the state read LIVE), "area.take.read" (a
 * shared-path taker read a span's word, before its steal CAS),
 * "area.take.stolen" (it holds the stolen stack).
 */
#include <stdio.h>

/* ---- the shared format (every file) ---------------------------------------- */

#define AR_MAGIC 0x31414552415044ull /* "DPAREA1" */
#define AR_VERSION 8u /* 4: 60 classes (cache records, span word); 5: the shared path (rule 15);
                        6: spans per class from 64 KiB, cache records in pages;
                        7: 87 classes (8 B steps to 64 B, eight per doubling to 8 KiB),
                        the directory's class field 7 bits, exact spans;
                        8: fallback pointers carry their segment's check (in cache
                        records' lists, chunk links and free tags) */
#define AR_NCLS 87u
#define AR_CLS_MASK 127u /* the directory's class field: 7 bits */
#define AR_MIN_CHUNK 16u
#define AR_MIN_ALIGN 8u /* every chunk's alignment at least (the 24, 40, 56 B classes) */
#define AR_SMALL_MAX (1u << 20)
#ifndef AR_LARGE_FROM
#define AR_LARGE_FROM (256u << 10) /* larger sizes get exact blocks (rule 13): 270-330 ns
                                      per alloc+free (a registry entry, a pool block, its
                                      trim), against about 23 ns for a cached chunk */
#endif
/* Mid sizes (rule 13): above AR_MID_FROM up to AR_LARGE_FROM, where whole
 * pages waste no more than the class would, take exact blocks too while the
 * pool has one and the registry's first half an entry, else their class;
 * powers of two keep their chunks (the hash join's 32 KiB chunk, 8 KiB
 * pages, 64..256 KiB buffers: the cached path, and no rounding to lose). */
#define AR_MID_FROM (4u << 10)
#define AR_SPAN_SHIFT 21u /* the largest span: 2 MiB */
#define AR_SPAN (1ull << AR_SPAN_SHIFT)
#define AR_DIR_SHIFT DP_DIR_SHIFT /* the directory's granule: a frame */
#define AR_DIR_GRAN (1ull << AR_DIR_SHIFT)
#define AR_SPAN_MIN (64u << 10) /* the smallest span */
#define AR_SPAN_MIN_CHUNKS 64u /* a span is the smallest power of two >= 64 KiB holding this many */
#define AR_NCACHES 256u
#define AR_RECS_PER_PAGE 7u /* cache records per record page */
#define AR_RECPAGE_ORDER 2u  /* a record page: a 16 KiB pool block */
#define AR_RECPAGE_BYTES ((uint64_t)DP_FRAME_SIZE << AR_RECPAGE_ORDER)
#define AR_RECPAGES ((AR_NCACHES + AR_RECS_PER_PAGE - 1) / AR_RECS_PER_PAGE)
#define AR_REGPAGES 1024u
#define AR_PER_PAGE 128u
#define AR_MAX_ENTRIES (AR_REGPAGES * AR_PER_PAGE)
#define AR_LARGE_CLS 127u /* the directory's and the info word's class of a large block */
#define AR_QUIESCE_NS 50000000ull /* rule 6: how long a destroyer waits for operations */

/* span entry state word: [gen:24][count:18][head:18][state:4]; head and
 * count reach 2 MiB / 16 B = 2^17 chunks */
enum { SP_FREE = 0, SP_INIT = 1, SP_SPAN = 2, SP_LARGE = 3, SP_RETIRED = 4 };
#define SPW(gen, count, head, st) \
    (((uint64_t)(gen) << 40) | ((uint64_t)(count) << 22) | ((uint64_t)(head) << 4) | (st))
#define SPW_ST(w) ((unsigned)((w) & 0xf))
#define SPW_HEAD(w) ((uint32_t)(((w) >> 4) & 0x3ffff))
#define SPW_COUNT(w) ((uint32_t)(((w) >> 22) & 0x3ffff))
#define SPW_GEN(w) ((uint32_t)((w) >> 40))
/* INIT and RETIRED name their owner (slot + 1, bits 8-27); INIT also the
 * order of the block it reserved held bytes for (bits 28-33), and DOOMED
 * (bit 34): a destroyer asks the owner to give it back (rule 5). */
#define SPW_OWNED(gen, slot, st) (((uint64_t)(gen) << 40) | ((uint64_t)((slot) + 1) << 8) | (st))
#define SPW_INIT(gen, slot, order) (SPW_OWNED(gen, slot, SP_INIT) | ((uint64_t)(order) << 28))
#define SPW_OWNER(w) ((uint32_t)(((w) >> 8) & 0xfffff) - 1)
#define SPW_INIT_ORDER(w) ((unsigned)(((w) >> 28) & 63))
#define SPW_DOOMED (1ull << 34)

/* directory word: [area id (ctl descriptor + 1):33][entry + 1:24][class:7];
 * a class of neither a span (< AR_NCLS) nor a large block is damage */
#define DIRW(aid, e, cls) (((uint64_t)(aid) << 31) | ((uint64_t)((e) + 1) << 7) | (cls))
#define DIRW_AID(w) ((w) >> 31)
#define DIRW_ENTRY(w) ((uint64_t)(((w) >> 7) & 0xffffff) - 1)
#define DIRW_CLS(w) ((unsigned)((w) & AR_CLS_MASK))

/* fallback pointer: [1][tag:14][entry:17][check:32-n][offset:n] for an OS
 * segment of L <= 4 GiB bytes, n = ar_fb_bits(L) (Fallback pointers); FB_OFF
 * is the check and the offset together, the 32 bits below the entry */
#define FB_BIT DSMPOOL_PTR_OS_BIT
#define FB_PTR(tag, e, off) (FB_BIT | ((uint64_t)(tag) << 49) | ((uint64_t)(e) << 32) | (off))
#define FB_TAG(p) ((uint32_t)(((p) >> 49) & 0x3fff))
#define FB_ENTRY(p) ((uint64_t)(((p) >> 32) & 0x1ffff))
#define FB_OFF(p) ((uint64_t)((p) & 0xffffffffull))
#define FB_MAX_SEG (1ull << 32) /* an area's OS segments are at most 4 GiB (acquire_bracketed) */

/* bump word: [entry + 1:26][next index:19][left:19] */
#define BUMP(e1, idx, left) (((uint64_t)(e1) << 38) | ((uint64_t)(idx) << 19) | (left))
#define BUMP_E1(b) ((uint32_t)((b) >> 38))
#define BUMP_IDX(b) ((uint32_t)(((b) >> 19) & 0x7ffff))
#define BUMP_LEFT(b) ((uint32_t)((b) & 0x7ffff))
#define BUMP_TAKE(b) ((b) + (1ull << 19) - 1) /* idx + 1, left - 1 */

typedef struct ar_span {
    dp_a64 state; /* [atom] SPW */
    dp_a64 block; /* [atom] pool block word, or DP_BLOCK_FALLBACK; 0 while INIT */
    dp_a64 seg;   /* [imm while live] OS segment handle of a fallback span; for an
                     exact pool block its frames (the entry's own record of what
                     the block word says, rule 13; AR_SEG_GROWING while a grow
                     changes both), 0 for any other pool block */
    dp_a64 info;  /* [imm while live] class | bitmap frame offset (checked mode); a large
                     block: AR_LARGE_CLS | bytes asked for << 12 (rule 13; its owner
                     rewrites it on an in-place realloc) */
} ar_span;
_Static_assert(sizeof(ar_span) * AR_PER_PAGE == DP_FRAME_SIZE, "a registry page is one frame");
#define AR_INFO_LARGE(asked) (((uint64_t)(asked) << 12) | AR_LARGE_CLS)
#define AR_SEG_GROWING (1ull << 63)
#define AR_INFO_ASKED(i) ((i) >> 12)
typedef struct ar_cache {
    dp_a64 owner;          /* [atom] 0 free; (slot + 1) | tid << 32 while held;
                              (slot + 1) | AR_RECOVERY while a recoverer drains it */
    dp_a64 seq;            /* [own] operation sequence, odd inside one (rule 7) */
    dp_a64 asked;          /* [own] bytes asked for by this record's chunk allocations (rule 13) */
    dp_a64 given;          /* [own] their usable bytes (class sizes) */
    dp_a64 pad0[4];
    dp_a64 head[AR_NCLS];  /* [own] first free chunk (dsmpool_ptr) */
    dp_a64 bump[AR_NCLS];  /* [own] BUMP word */
    dp_a64 count[AR_NCLS]; /* [own] free-list length (advisory) */
    dp_a64 pad1[3];
} ar_cache;
_Static_assert(sizeof(ar_cache) % 64 == 0, "cache records on their own lines");
#define AR_RECOVERY (0xffffffffull << 32)

typedef struct ar_ctl {
    uint64_t magic;      /* [imm] */
    uint32_t version;    /* [imm] */
    uint32_t ncaches;    /* [imm] */
    uint64_t flags;      /* [imm] DSMPOOL_AREA_* */
    uint32_t tag;        /* [imm] unique among live areas of the pool (0: none, no OS segments) */
    dp_a32 claim_pg;     /* [atom] relaxed hint: a registry page that had a free entry lately */
    uint64_t key;        /* [imm] random: free tags (rule 9) */
    dp_a64 state;        /* [atom] 1 LIVE, 2 DESTROYED */
    dp_a64 limit;        /* [atom] relaxed: bytes, 0 = none */
    dp_a64 held;         /* [atom] bytes of spans and large blocks */
    dp_a64 lost;         /* [atom] deaths inside an operation not yet swept (rule 11) */
    dp_a64 shared;       /* [atom] relaxed: 1 once a thread used the shared path (rule 15) */
    dp_a64 sh_asked;     /* [atom] relaxed: bytes the shared path's chunk allocations asked for */
    dp_a64 sh_given;     /* [atom] relaxed: their class sizes (rule 13) */
    dp_a64 partial[AR_NCLS]; /* [atom] relaxed hint: spans with returned chunks */
    dp_a64 sh_hint[AR_NCLS]; /* [atom] relaxed hint: the entry the shared path last took from */
    dp_a64 sh_keep;      /* [atom] entry + 1 of the whole span kept for the shared path (rule 15) */
    dp_a64 regpage[AR_REGPAGES]; /* [atom] registry page offsets, 0 = none */
    dp_a64 recpage[AR_RECPAGES]; /* [atom] cache record pages (AR_RECS_PER_PAGE records of
                                    the AR_NCACHES each), linked on first need; 0 = none */
} ar_ctl;
_Static_assert(sizeof(ar_cache) * AR_RECS_PER_PAGE <= AR_RECPAGE_BYTES, "a record page holds its records");

enum { AR_LIVE = 1, AR_DESTROYED = 2 };

/* ---- process-local ------------------------------------------------------ */

typedef struct ar_fb { /* this process's mapping of one fallback entry's OS segment */
    char *base;
    uint64_t len;          /* the segment's bytes, at most FB_MAX_SEG */
    dsmpool_handle seg;    /* which segment (entries are reused) */
    unsigned nb;           /* ar_fb_bits(len): the pointers' offset bits */
    uint32_t chk;          /* fb_check(seg, nb): their check */
    struct ar_fb *retired; /* replaced records: unmapped at detach, never under a reader */
} ar_fb;

typedef struct ar_tc { /* one per (thread, area) */
    _Atomic(struct dsmpool_area *) area; /* NULL once the area is detached (relaxed) */
    unsigned epoch;
    ar_cache *rec;
    uint64_t span_ptr[AR_NCLS]; /* base pointer of the bump span, per class */
    uint32_t span_e1[AR_NCLS];  /* its entry + 1: a bump word naming another is damaged */
    uint64_t scan[AR_NCLS];     /* where the partial-span search resumes */
    uint64_t trim_seen;         /* the last trim request this cache answered (rule 12) */
    uint32_t sh_ops;            /* shared-path operations (rec NULL): a record is tried again every 4096 */
    struct ar_tc *tnext;        /* this thread's list */
    struct ar_tc *anext, *aprev; /* the area's list (area->lock) */
} ar_tc;

struct dsmpool_area {
    uint64_t magic;
    dsmpool *pool;
    dsmpool_seg *seg;
    ar_ctl *ctl;
    dsmpool_handle handle;
    uint64_t aid;
    uint32_t tag;
    uint64_t key;            /* ctl->key, read once */
    dp_a64 *trimp;           /* &pool->hdr->trim: requests to give back (rule 12) */
    char *base;
    uint64_t data_off, data_size;
    pthread_mutex_t lock;
    ar_tc *tcs;
    _Atomic(ar_fb *) *fb[AR_MAX_ENTRIES / 512]; /* two-level map: entry -> local mapping */
    ar_fb *fb_retired;
    struct dsmpool_area *reg_next;
};
#define AR_OBJ_MAGIC 0x616572416c636f6cull

/* free tags (area_free.c): a freed chunk holds key ^ p at +8 */
static inline uint64_t ar_free_tag(const struct dsmpool_area *a, dsmpool_ptr p) { return a->key ^ p; }

/* ---- area_class.c: the classes ----------------------------------------------- */

typedef struct ar_class {
    uint32_t size, chunks; /* chunk bytes; chunks per span (they fill its len bytes) */
    uint64_t mul;
    uint32_t span;         /* the class's span block: a power of two, 64 KiB .. 2 MiB */
    uint32_t len;          /* the bytes a span holds: span, or less for an exact span (the
                              block's pages past len given back when it is taken) */
} ar_class;
#define AR_DIV_SHIFT 42u
extern const ar_class dp_ar_cls[AR_CLS_MASK + 1] __attribute__((visibility("hidden")));

static inline unsigned cls_of(size_t size) { /* size <= AR_SMALL_MAX */
    if (size <= 64) return size <= 16 ? 0 : (unsigned)((size - 1) >> 3) - 1u;
    if (size <= 128) return (unsigned)((size - 1) >> 4) + 3u;
    unsigned k = 63u - (unsigned)__builtin_clzll(size - 1); /* 2^k <= size - 1 < 2^(k+1), k >= 7 */
    if (k < 13) return 11u + 8u * (k - 7u) + (unsigned)(((size - 1) >> (k - 3)) & 7);
    return 59u + 4u * (k - 13u) + (unsigned)(((size - 1) >> (k - 2)) & 3);
}
/* (c & AR_CLS_MASK: a damaged class number reads a zero entry, never past the table) */
static inline uint32_t cls_size(unsigned c) { return dp_ar_cls[c & AR_CLS_MASK].size; }
static inline uint32_t cls_chunks(unsigned c) { return dp_ar_cls[c & AR_CLS_MASK].chunks; }
/* a class's span bytes; 0 for the unused entries (no class, no span) */
static inline uint64_t cls_span(unsigned c) { return dp_ar_cls[c & AR_CLS_MASK].span; }
/* the bytes a span of class c holds (a multiple of 4 KiB, at most cls_span) */
static inline uint64_t cls_len(unsigned c) { return dp_ar_cls[c & AR_CLS_MASK].len; }
/* the frames an exact span keeps of its block (0: the whole block) */
static inline uint64_t cls_keep(unsigned c) {
    return cls_len(c) < cls_span(c) ? cls_len(c) / DP_FRAME_SIZE : 0;
}
static inline unsigned cls_span_order(unsigned c) {
    return (unsigned)__builtin_ctzll(cls_span(c) ? cls_span(c) : AR_SPAN_MIN) - DP_FRAME_SHIFT;
}
/* Where byte rel (from a 2 MiB boundary: data_off, or an OS segment's
 * start) lies in its span of class c: spans sit at multiples of their size. */
static inline uint64_t span_rel(unsigned c, uint64_t rel) { return rel & (cls_span(c) - 1); }
static inline uint32_t cls_batch(unsigned c) { uint32_t n = cls_chunks(c); return n < 64 ? n : 64; }
static inline uint64_t chunk_off(unsigned c, uint64_t idx) { return idx * cls_size(c); }
/* The chunk of class c that holds byte off (< its span bytes) of its span. */
static inline uint32_t chunk_idx(unsigned c, uint64_t off) {
    return (uint32_t)((off & (AR_SPAN - 1)) * dp_ar_cls[c & AR_CLS_MASK].mul >> AR_DIV_SHIFT);
}
/* Is off (from its span's start) the start of chunk *idx of class c?
 * (i < chunks keeps it inside the span: chunks * size <= span bytes) */
static inline bool chunk_at(unsigned c, uint64_t off, uint32_t *idx) {
    const ar_class *k = &dp_ar_cls[c & AR_CLS_MASK];
    uint64_t i = chunk_idx(c, off);
    *idx = (uint32_t)i;
    return off < AR_SPAN && i < k->chunks && i * k->size == off;
}
/* The checked-mode bitmap of a span of class c: 4 KiB << order, a bit per chunk. */
static inline unsigned cls_bm_order(unsigned c) {
    uint32_t n = cls_chunks(c);
    return n > 2 * 8 * DP_FRAME_SIZE ? 2 : n > 8 * DP_FRAME_SIZE ? 1 : 0;
}

/* ---- area_registry.c: entries, the directory, record pages, bitmaps ---------- */

/* The checked-mode bitmap frame an info word names (a large block's has none). */
static inline uint64_t ar_info_bitmap(uint64_t info) {
    return (info & 0xff) == AR_LARGE_CLS ? 0 : info & ~0xfffull;
}
/* The first registry entry at or after e whose page exists (AR_MAX_ENTRIES
 * if none): the walks skip a missing page whole. relaxed: a hint only,
 * dp_ar_entry's acquire load of the page link is what the walk relies on. */
static inline uint64_t ar_entry_next(ar_ctl *ctl, uint64_t e) {
    while (e < AR_MAX_ENTRIES && !dp_load_relaxed(&ctl->regpage[e / AR_PER_PAGE]))
        e = (e / AR_PER_PAGE + 1) * AR_PER_PAGE;
    return e;
}
uint64_t dp_ar_entry_block_bytes(const ar_span *sp, uint64_t blk);
ar_span *dp_ar_entry(dsmpool *p, ar_ctl *ctl, uint64_t e);
ar_cache *dp_ar_cache_rec(dsmpool *p, ar_ctl *ctl, uint32_t i);
void dp_ar_dir_set(dsmpool *p, uint64_t off, uint64_t bytes, uint64_t w);
int64_t dp_ar_entry_claim(struct dsmpool_area *a, unsigned order, uint32_t pages);
void dp_ar_entry_release(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, uint64_t prev,
                         uint32_t slot);
bool dp_ar_entry_take_from(ar_span *sp, uint64_t *w, uint32_t slot);
void dp_ar_entry_abandon(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, uint64_t mine);
bool dp_ar_checked_flip(dsmpool *p, ar_span *sp, uint32_t idx, bool set);
bool dp_ar_checked_test(dsmpool *p, ar_span *sp, uint32_t idx);

/* ---- area_pointer.c: fallback pointers, mapping records, locating ------------ */

/* Fallback pointers: the offset bits of an OS segment of len bytes,
 * ceil(log2 len) and at least 16 -- a span's are its block's (cls_span:
 * 2^n is the power of two from 64 KiB at or above its len), so span_rel()
 * takes a chunk's offset out of a fallback pointer as out of a pool one.
 * len <= FB_MAX_SEG gives n <= 32. */
static inline unsigned ar_fb_bits(uint64_t len) {
    return len <= AR_SPAN_MIN ? 16u : 64u - (unsigned)__builtin_clzll(len - 1);
}
/* Where chunk/block pointer p lives: its entry, class and offset in the
 * span. Always-on checks: this area's, in range. */
typedef struct ar_loc {
    uint64_t e;
    ar_span *sp;
    unsigned cls;   /* AR_LARGE_CLS for large blocks */
    uint64_t off;   /* offset of p within its span / block */
    uint64_t span;  /* pointer to the span / block start */
} ar_loc;
dsmpool_ptr dp_ar_fb_base(const struct dsmpool_area *a, uint64_t e, dsmpool_handle h, uint64_t len);
dsmpool_ptr dp_ar_entry_base(struct dsmpool_area *a, uint64_t e, ar_span *sp, uint64_t blk, unsigned c);
ar_fb *dp_ar_fb_remember(struct dsmpool_area *a, uint64_t e, char *base, uint64_t len, dsmpool_handle seg);
ar_fb *dp_ar_fb_map(struct dsmpool_area *a, uint64_t e);
int dp_ar_locate(struct dsmpool_area *a, dsmpool_ptr p, ar_loc *l);
dsmpool_ptr dp_ar_fb_ptr_of(struct dsmpool_area *a, uintptr_t u);
/* The local address of p, with room for need bytes there, or NULL. Pool
 * pointers must lie in the data; fallback ones in their entry's current
 * segment, with its check. */
static inline char *ar_addr_n(struct dsmpool_area *a, dsmpool_ptr p, uint64_t need) {
    if (!(p & FB_BIT))
        return p >= a->data_off && p - a->data_off < a->data_size &&
                       need <= a->data_size - (p - a->data_off)
                   ? a->base + p
                   : NULL;
    if (FB_TAG(p) != a->tag || !a->tag) return NULL; /* another area's */
    ar_fb *r = dp_ar_fb_map(a, FB_ENTRY(p));
    if (!r || FB_OFF(p) >> r->nb != r->chk) return NULL; /* another segment's: stale */
    uint64_t off = FB_OFF(p) & ((1ull << r->nb) - 1);
    return off < r->len && need <= r->len - off ? r->base + off : NULL;
}
/* The registry entry of a located chunk (small pool chunks skip it). */
static inline ar_span *ar_locate_entry(struct dsmpool_area *a, ar_loc *l) {
    if (!l->sp) l->sp = dp_ar_entry(a->pool, a->ctl, l->e);
    return l->sp;
}

/* ---- area_span.c: span stacks -------------------------------------------------- */

void dp_ar_span_pushed(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, unsigned cls,
                       uint32_t was, uint64_t nw, uint32_t retire_slot);
void dp_ar_span_push(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, unsigned cls,
                     uint32_t idx, char *chunk, uint32_t retire_slot);
void dp_ar_chunk_return(struct dsmpool_area *a, dsmpool_ptr c, uint32_t retire_slot);
void dp_ar_chain_lost(struct dsmpool_area *a);
void dp_ar_chain_return(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, dsmpool_ptr base,
                        uint32_t head, uint32_t count);
bool dp_ar_steal_class_holds(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, uint64_t w);
void dp_ar_keep_release(struct dsmpool_area *a);

/* ---- area_cache.c: thread caches, records, operations ------------------------ */

extern pthread_mutex_t dp_ar_reg_lock; /* this process's areas and thread caches */
/* this thread's last cache; local-dynamic, as a file's static would be (the
 * library's own variable: linked into an executable, one load from the
 * thread pointer, no lea; area_cache.c says why not initial-exec) */
extern _Thread_local ar_tc *dp_ar_tc_last __attribute__((visibility("hidden"), tls_model("local-dynamic")));
extern _Thread_local int dp_ar_tc_err __attribute__((visibility("hidden"), tls_model("local-dynamic"))); /* why ar_tc_get gave NULL */
#ifdef DP_INJECTION
extern _Thread_local bool dp_ar_tc_force_shared; /* test-only: this thread's new caches take no record */
#endif
int dp_ar_usable(struct dsmpool_area *a);
uint64_t dp_ar_chunks_bound(const struct dsmpool_area *a, unsigned c);
void dp_ar_cache_answer(struct dsmpool_area *a, ar_tc *tc);
__attribute__((noinline)) void dp_ar_trim_answer(struct dsmpool_area *a, ar_tc *tc);
void dp_ar_cache_release(struct dsmpool_area *a, ar_cache *rec, uint32_t slot);
ar_cache *dp_ar_cache_claim(dsmpool *p, ar_ctl *ctl, uint64_t me);
bool dp_ar_tc_take_record(struct dsmpool_area *a, ar_tc *tc, bool reclaim);
ar_tc *dp_ar_tc_get_slow(struct dsmpool_area *a);
ar_cache *dp_ar_tc_find(struct dsmpool_area *a);
void dp_ar_drain_op(struct dsmpool_area *a, ar_cache *rec, unsigned c);
void dp_ar_trim_thread(dsmpool *p);
static inline uint64_t ar_op_begin(ar_cache *rec) {
    uint64_t s = (dp_load_relaxed(&rec->seq) + 1) | 1; /* relaxed: this thread is its only writer */
    dp_store_relaxed(&rec->seq, s); /* odd, and changed even if a dead owner left it odd */
    /* release fence: the operation's writes stay after the odd value (the
     * checker's seqlock); both fences keep the compiler from moving the
     * state load above the store, and the destroyer's membarrier does the
     * same for the CPU (rule 6) */
    atomic_thread_fence(memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    return s;
}
/* s: what ar_op_begin returned */
static inline void ar_op_end(ar_cache *rec, uint64_t s) {
    /* release: pairs with the acquire loads of caches_quiesce (the destroyer) and quiet_open_ctl (the checker) */
    dp_store_release(&rec->seq, s + 1);
}
static inline bool ar_live(const struct dsmpool_area *a) {
    /* relaxed: ordered by the operation's fences (rule 7) and by
     * membarrier on the destroyer's side (rule 6) */
    return dp_load_relaxed(&a->ctl->state) == AR_LIVE;
}
static inline ar_tc *ar_tc_get(struct dsmpool_area *a) {
    ar_tc *tc = dp_ar_tc_last;
    /* relaxed: only another thread's detach changes it, which is a use-after-free anyway */
    if (__builtin_expect(tc && atomic_load_explicit(&tc->area, memory_order_relaxed) == a &&
                         tc->epoch == dp_epoch(), 1))
        return tc;
    return dp_ar_tc_get_slow(a);
}
/* Rules 1 and 3: freed chunk p of class c (mapped at m) goes on this
 * thread's list: its link and free tag (tag: ar_free_tag of p) first, the
 * head last (rule 11: a death in between leaves it tagged on no list);
 * above two batches, one goes back to the spans. Inside an operation on
 * rec; the one push of both free paths (dsmpool_area_free's inline case
 * and dp_ar_free_op). */
static inline void ar_list_push_op(struct dsmpool_area *a, ar_cache *rec, unsigned c, dsmpool_ptr p, char *m,
                                uint64_t tag) {
    dsmpool_ptr head = dp_load_relaxed(&rec->head[c]); /* relaxed: rule 1 */
    memcpy(m, &head, 8);
    memcpy(m + 8, &tag, 8);
    DP_INJECT("area.free.linked");
    dp_store_relaxed(&rec->head[c], p);
    uint64_t n = dp_load_relaxed(&rec->count[c]) + 1;
    dp_store_relaxed(&rec->count[c], n);
    if (__builtin_expect(n > 2 * cls_batch(c), 0)) dp_ar_drain_op(a, rec, c);
}

/* ---- area_acquire.c: fresh spans and blocks ------------------------------------ */

#ifdef DP_INJECTION
extern _Atomic bool dp_ar_untrimmed; /* test-only: dp_area_test_untrimmed */
#endif
int dp_ar_held_reserve(ar_ctl *ctl, uint64_t bytes);
int dp_ar_acquire(struct dsmpool_area *a, ar_tc *tc, unsigned cls, unsigned order, uint64_t keep,
                  unsigned place, uint64_t asked, bool chain, bool mid, uint64_t *entry, dsmpool_ptr *base);

/* ---- area_free.c: freeing ---------------------------------------------------- */

int dp_ar_free_op(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p);
int dp_ar_free_bracketed(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p);
int dp_ar_free_undo(struct dsmpool_area *a, ar_tc *tc, dsmpool_ptr p);

/* ---- area_small.c: the cached small path ----------------------------------------- */

/* Rule 13: what a chunk allocation asked for, on this thread's record. */
static inline void ar_count_asked(ar_cache *rec, uint64_t asked, unsigned c) {
    /* relaxed: owner-only counters (rule 1); stats reads them approximately */
    dp_store_relaxed(&rec->asked, dp_load_relaxed(&rec->asked) + asked);
    dp_store_relaxed(&rec->given, dp_load_relaxed(&rec->given) + cls_size(c));
}
int dp_ar_chunk_hand_out(struct dsmpool_area *a, ar_tc *tc, unsigned c, dsmpool_ptr h, char *m,
                         size_t size, unsigned flags);
int dp_ar_alloc_small_op(struct dsmpool_area *area, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                         bool held_only, dsmpool_ptr *out);

/* ---- area_shared.c: the shared path ------------------------------------------ */

int dp_ar_alloc_small_bracketed(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked,
                                unsigned flags, bool held_only, dsmpool_ptr *out);
void dp_ar_shared_done(struct dsmpool_area *a, ar_tc *tc);
void dp_ar_shared_trim(struct dsmpool_area *a, ar_tc *tc);

/* ---- area_large.c: large blocks, sizes and addresses -------------------------- */

int dp_ar_alloc_large_op(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                         bool mid, dsmpool_ptr *out);
bool dp_ar_large_grow(struct dsmpool_area *a, ar_loc *l, size_t size);
uint64_t dp_ar_live_alloc(struct dsmpool_area *a, dsmpool_ptr p, dsmpool_ptr *start, ar_loc *l);
int dp_ar_query_ok(struct dsmpool_area *a);

/* ---- area_life.c: lifetime ------------------------------------------------------ */

ar_ctl *dp_ar_ctl_of(dsmpool *p, uint64_t idx);
void dp_ar_fill(struct dsmpool_area *a, dsmpool *pool, ar_ctl *ctl, uint64_t aid);
void dp_ar_free_fb(struct dsmpool_area *a);

/* ---- area_verify.c: verification and inspection -------------------------------- */

typedef struct ar_vctx {
    struct dsmpool_area *a;
    uint64_t **bits;  /* per entry: a bit per chunk, allocated when first needed */
    uint64_t *used;   /* entries with bits, to clear after this area */
    size_t nused;
    char *why;
    size_t n;
    int err;
} ar_vctx;
static inline bool ar_vmarked(const ar_vctx *v, uint64_t e, uint32_t idx) {
    return v->bits[e] && (v->bits[e][idx / 64] >> (idx % 64) & 1);
}
void dp_ar_verify_area(ar_vctx *v);
bool dp_ar_scratch_ready(dp_area_scratch *sc);
void dp_ar_vclear(ar_vctx *v);

/* ---- area_recover.c: recovery and the lost sweep ------------------------------- */

typedef struct ar_lost_ref {
    uint64_t e;
    uint32_t idx; /* UINT32_MAX: the span is whole but was not retired */
    unsigned cls;
} ar_lost_ref;

typedef struct ar_lost_list {
    ar_lost_ref *v;
    size_t n, cap;
} ar_lost_list;
int dp_ar_walk_unheld(ar_vctx *v, ar_lost_list *whole, bool (*fn)(void *, uint64_t, unsigned, dsmpool_ptr,
                      uint32_t, bool), void *arg);

#endif /* DP_AREA_INSIDE */

#endif /* DP_AREA_H */
