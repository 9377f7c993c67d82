/*
 * area.c -- areas: a heap of relocatable allocations on top of the pool.
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
 *   pool block of one class (ar_cls). A power-of-two class's is the
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
 * segment of L bytes (at most 4 GiB), n = max(16, ceil(log2 L)) (fb_bits).
 *   - tag: the area's, exact (unique among the pool's live areas, so a
 *     pointer of another live area is always refused); entry: the registry
 *     entry that holds the segment; offset: the byte in it.
 *   - check: the top 32 - n bits of mix(key ^ handle) (fb_check), handle the
 *     OS segment's (sp->seg: index and 32-bit generation, new whenever the
 *     entry takes a new segment: segment.c rule 2), key the area's random
 *     key (rule 9). Not the span word's generation: that counts the stack's
 *     pushes and pops, not what the entry holds. seg is stored before the
 *     entry's publishing CAS (release), and read after an acquire load of
 *     the state (ar_locate, fb_map) or checked against a mapping record
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
 *      not be taken over gets -ESTALE from every call (area_usable).
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
 *      word only if it agrees (entry_block_bytes), so a scribbled trim code
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
 *      back is still free (large_grow: reserve held bytes, take the frames
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
 *      both sides, as with keep_release) so that one chunk allocated and
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
#include <stdlib.h>
#include <string.h>

#include "dp_numa.h"
#include "dp_area.h"
#include "dp_os.h"

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
 * segment of L <= 4 GiB bytes, n = fb_bits(L) (Fallback pointers); FB_OFF
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

/* The bytes the pool block word blk of entry sp holds, if the entry's own
 * record agrees (rule 13): an exact word's frames equal sp->seg (at most
 * the new size while a grow runs, or ran and died: the frames it took and
 * had not published are the sweep's), any other word has seg 0. 0: a
 * damaged word, never freed or marked as the entry's. */
static uint64_t entry_block_bytes(const ar_span *sp, uint64_t blk) {
    uint64_t n = dp_block_frames(blk), rec = dp_load_relaxed(&sp->seg); /* [imm while live] */
    if (!n) return 0;
    if (!(blk & DP_BLOCK_EXACT)) return rec ? 0 : n * DP_FRAME_SIZE;
    if (rec & AR_SEG_GROWING) return n <= (rec & ~AR_SEG_GROWING) ? n * DP_FRAME_SIZE : 0;
    return rec == n ? n * DP_FRAME_SIZE : 0;
}
#define AR_INFO_ASKED(i) ((i) >> 12)
/* The checked-mode bitmap frame an info word names (a large block's has none). */
static inline uint64_t info_bitmap(uint64_t info) {
    return (info & 0xff) == AR_LARGE_CLS ? 0 : info & ~0xfffull;
}

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
    unsigned nb;           /* fb_bits(len): the pointers' offset bits */
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

static pthread_mutex_t ar_reg_lock = PTHREAD_MUTEX_INITIALIZER; /* areas of this process, tcs */
static struct dsmpool_area *ar_reg;
/* Thread-local variables are global-dynamic (meson.build), not
 * initial-exec: linked into an executable, one load from the thread
 * pointer; in libdsmpool.so a __tls_get_addr call, about 2 ns an
 * alloc+free pair; and a dlopen()ed libdsmpool.so loads (tests/dlopen),
 * which initial-exec prevented. */
static _Thread_local ar_tc *tc_last;
static _Thread_local ar_tc *tc_head;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;


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
typedef struct ar_class {
    uint32_t size, chunks; /* chunk bytes; chunks per span (they fill its len bytes) */
    uint64_t mul;
    uint32_t span;         /* the class's span block: a power of two, 64 KiB .. 2 MiB */
    uint32_t len;          /* the bytes a span holds: span, or less for an exact span (the
                              block's pages past len given back when it is taken) */
} ar_class;
#define AR_DIV_SHIFT 42u
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
static const ar_class ar_cls[AR_CLS_MASK + 1] = {AR_C20(0u), AR_C20(20u), AR_C20(40u), AR_C20(60u),
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

static inline unsigned cls_of(size_t size) { /* size <= AR_SMALL_MAX */
    if (size <= 64) return size <= 16 ? 0 : (unsigned)((size - 1) >> 3) - 1u;
    if (size <= 128) return (unsigned)((size - 1) >> 4) + 3u;
    unsigned k = 63u - (unsigned)__builtin_clzll(size - 1); /* 2^k <= size - 1 < 2^(k+1), k >= 7 */
    if (k < 13) return 11u + 8u * (k - 7u) + (unsigned)(((size - 1) >> (k - 3)) & 7);
    return 59u + 4u * (k - 13u) + (unsigned)(((size - 1) >> (k - 2)) & 3);
}
/* (c & AR_CLS_MASK: a damaged class number reads a zero entry, never past the table) */
static inline uint32_t cls_size(unsigned c) { return ar_cls[c & AR_CLS_MASK].size; }
static inline uint32_t cls_chunks(unsigned c) { return ar_cls[c & AR_CLS_MASK].chunks; }
/* a class's span bytes; 0 for the unused entries (no class, no span) */
static inline uint64_t cls_span(unsigned c) { return ar_cls[c & AR_CLS_MASK].span; }
/* the bytes a span of class c holds (a multiple of 4 KiB, at most cls_span) */
static inline uint64_t cls_len(unsigned c) { return ar_cls[c & AR_CLS_MASK].len; }
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
/* Rule 13: a size that takes an exact block first (then its class) */
static inline bool mid_exact(size_t size) {
    return size > AR_MID_FROM && size <= AR_LARGE_FROM &&
           (size & (size - 1)) && /* powers of two keep their chunks */
           ((size + DP_FRAME_SIZE - 1) & ~(size_t)(DP_FRAME_SIZE - 1)) <= cls_size(cls_of(size));
}
static inline uint32_t cls_batch(unsigned c) { uint32_t n = cls_chunks(c); return n < 64 ? n : 64; }
static inline uint64_t chunk_off(unsigned c, uint64_t idx) { return idx * cls_size(c); }
/* The chunk of class c that holds byte off (< its span bytes) of its span. */
static inline uint32_t chunk_idx(unsigned c, uint64_t off) {
    return (uint32_t)((off & (AR_SPAN - 1)) * ar_cls[c & AR_CLS_MASK].mul >> AR_DIV_SHIFT);
}
/* Is off (from its span's start) the start of chunk *idx of class c?
 * (i < chunks keeps it inside the span: chunks * size <= span bytes) */
static inline bool chunk_at(unsigned c, uint64_t off, uint32_t *idx) {
    const ar_class *k = &ar_cls[c & AR_CLS_MASK];
    uint64_t i = chunk_idx(c, off);
    *idx = (uint32_t)i;
    return off < AR_SPAN && i < k->chunks && i * k->size == off;
}
/* The checked-mode bitmap of a span of class c: 4 KiB << order, a bit per chunk. */
static inline unsigned cls_bm_order(unsigned c) {
    uint32_t n = cls_chunks(c);
    return n > 2 * 8 * DP_FRAME_SIZE ? 2 : n > 8 * DP_FRAME_SIZE ? 1 : 0;
}

/* ---- registry and directory --------------------------------------------- */

static ar_span *ar_entry(dsmpool *p, ar_ctl *ctl, uint64_t e) {
    if (e >= AR_MAX_ENTRIES) return NULL;
    uint64_t off = dp_load_acquire(&ctl->regpage[e / AR_PER_PAGE]); /* acquire: page link */
    if (!off || !dp_block_ok(p, off, DP_FRAME_SIZE)) return NULL;
    return (ar_span *)dp_at(p, off) + e % AR_PER_PAGE;
}

/* The first registry entry at or after e whose page exists (AR_MAX_ENTRIES
 * if none): the walks skip a missing page whole. relaxed: a hint only,
 * ar_entry's acquire load of the page link is what the walk relies on. */
static uint64_t entry_next(ar_ctl *ctl, uint64_t e) {
    while (e < AR_MAX_ENTRIES && !dp_load_relaxed(&ctl->regpage[e / AR_PER_PAGE]))
        e = (e / AR_PER_PAGE + 1) * AR_PER_PAGE;
    return e;
}

/* Cache record i, if its page exists (NULL: none yet, or a damaged link:
 * the walks skip it; a missing page's records are all free). */
static ar_cache *cache_rec(dsmpool *p, ar_ctl *ctl, uint32_t i) {
    if (i >= AR_NCACHES) return NULL;
    uint64_t off = dp_load_acquire(&ctl->recpage[i / AR_RECS_PER_PAGE]); /* acquire: dp_block_link's CAS */
    if (!off || !dp_block_ok(p, off, AR_RECPAGE_BYTES)) return NULL;
    return (ar_cache *)dp_at(p, off) + i % AR_RECS_PER_PAGE;
}

/* The directory words of the granules [off, off + bytes) touches (a range
 * may start and end inside a granule: a grown block, an exact one). */
static void dir_set(dsmpool *p, uint64_t off, uint64_t bytes, uint64_t w) {
    if (!bytes) return;
    uint64_t k0 = (off - p->geo.data_off) >> AR_DIR_SHIFT, k1 = (off + bytes - 1 - p->geo.data_off) >> AR_DIR_SHIFT;
    for (uint64_t k = k0; k <= k1 && k < p->geo.dir_count; k++)
        dp_store_release(&p->dir[k], w); /* release: entry is set up */
}

/* Claim a FREE registry entry of page pg as INIT(owner, order); -1: none. */
static int64_t entry_claim_in(dsmpool *p, ar_span *pg, uint32_t k, unsigned order) {
    for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
        uint64_t w = dp_load_relaxed(&pg[i].state); /* relaxed: the CAS validates */
        if (SPW_ST(w) != SP_FREE) continue;
        /* acq_rel: acquire pairs with entry_release's FREE store (or dp_area_drop_os's) */
        if (dp_cas_acq_rel(&pg[i].state, &w, SPW_INIT(SPW_GEN(w) + 1, p->slot, order)))
            return (int64_t)k * AR_PER_PAGE + i;
    }
    return -1;
}

/* Claim a FREE registry entry among the first `pages` registry pages as
 * INIT(owner, order): the pages that exist first, from the one the hint
 * names (ctl->claim_pg: the page of the last entry given back, or of the
 * last claim) round to it, so that a claim does not walk every live entry
 * before the free one; then from the first page, adding one if all are
 * taken. Returns the entry index or -errno. */
static int64_t entry_claim(struct dsmpool_area *a, unsigned order, uint32_t pages) {
    dsmpool *p = a->pool;
    ar_ctl *ctl = a->ctl;
    uint32_t from = atomic_load_explicit(&ctl->claim_pg, memory_order_relaxed); /* relaxed: a hint */
    if (from >= pages) from = 0;
    for (uint32_t n = 0; n < pages; n++) {
        uint32_t k = (from + n) % pages;
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: the link CAS */
        if (!off) continue;
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) return -EUCLEAN;
        int64_t e = entry_claim_in(p, dp_at(p, off), k, order);
        if (e >= 0) {
            if (k != from) atomic_store_explicit(&ctl->claim_pg, k, memory_order_relaxed); /* relaxed: a hint */
            return e;
        }
    }
    for (uint32_t k = 0; k < pages; k++) {
        uint64_t off = dp_frame_link(p, &ctl->regpage[k]);
        if (!off) return -ENOMEM;
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) return -EUCLEAN;
        int64_t e = entry_claim_in(p, dp_at(p, off), k, order);
        if (e >= 0) {
            atomic_store_explicit(&ctl->claim_pg, k, memory_order_relaxed); /* relaxed: a hint */
            return e;
        }
    }
    return -ENOSPC;
}

/* Clear the directory words of [off, off+bytes) that name (aid, e).
 * Returns whether every granule of the range named it. */
static bool dir_clear(dsmpool *p, uint64_t aid, uint64_t e, uint64_t off, uint64_t bytes) {
    bool all = true;
    if (!bytes) return true;
    uint64_t k0 = (off - p->geo.data_off) >> AR_DIR_SHIFT, k1 = (off + bytes - 1 - p->geo.data_off) >> AR_DIR_SHIFT;
    for (uint64_t k = k0; k <= k1; k++) {
        if (k >= p->geo.dir_count) return false;
        uint64_t dw = dp_load_relaxed(&p->dir[k]);
        if (DIRW_AID(dw) == aid && DIRW_ENTRY(dw) == e)
            dp_store_release(&p->dir[k], 0); /* release: before the block goes */
        else
            all = false;
    }
    return all;
}

/* Take and give back the parts an entry holds: its block (a pool block, or
 * the pin of a fallback OS segment) and its checked-mode bitmap. Only the
 * entry's owner calls this (rule 5); each part is taken by exchange all the
 * same, so a recoverer that repeats a dead owner's release frees nothing
 * twice. Returns the bytes of the block this call took (0: none). */
static uint64_t entry_free_parts(dsmpool *p, uint64_t aid, uint64_t e, ar_span *sp, uint32_t slot) {
    dp_inflight_begin(p);
    /* acq_rel: the exchange is the unrecording; acquire sees the filler's writes */
    uint64_t blk = atomic_exchange_explicit(&sp->block, 0, memory_order_acq_rel), took = 0;
    if (blk == DP_BLOCK_FALLBACK) {
        dsmpool_handle h = dp_load_relaxed(&sp->seg);
        took = dp_seg_os_size(p, h);
        dp_seg_unpin_quiet(p, h, slot);
    } else if (blk && DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER) {
        took = entry_block_bytes(sp, blk);
        /* A damaged word is never freed: one past the data, one whose
         * frames disagree with the entry's record, or whose frames the
         * directory does not say are the entry's (a scribbled trim code
         * naming a tail given back, rule 13). A filler that died before its
         * directory words were set leaves its block to the leak sweep the
         * same way. */
        if (dp_block_ok(p, DP_BLOCK_OFF(blk), took) && dir_clear(p, aid, e, DP_BLOCK_OFF(blk), took))
            dp_pool_free(p, blk);
        else
            took = 0;
    }
    uint64_t info = atomic_exchange_explicit(&sp->info, 0, memory_order_acq_rel);
    uint64_t bm = info_bitmap(info);
    unsigned bo = cls_bm_order((unsigned)(info & 0xff));
    if (bm && dp_block_ok(p, bm, (uint64_t)DP_FRAME_SIZE << bo)) dp_pool_free(p, DP_BLOCK_MK(bm, bo));
    dp_inflight_end(p);
    return took;
}

/* Give back what an entry holds, then FREE it. The caller owns the entry:
 * it moved it to RETIRED(itself) by CAS from prev (rule 5). */
static void entry_release(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp,
                          uint64_t prev, uint32_t slot) {
    uint64_t bytes = entry_free_parts(p, aid, e, sp, slot);
    /* the held bytes go with the block that was taken, or with the INIT
     * reservation when nobody had put a block in yet (or its filler took it) */
    if (!bytes && SPW_ST(prev) == SP_INIT) bytes = (uint64_t)DP_FRAME_SIZE << SPW_INIT_ORDER(prev);
    if (bytes) dp_fetch_add_relaxed(&ctl->held, (uint64_t)-bytes);
    dp_store_relaxed(&sp->seg, 0);
    dp_store_release(&sp->state, SPW(SPW_GEN(prev) + 1, 0, 0, SP_FREE)); /* release: entry_claim */
    /* relaxed: a hint; the next claim looks here first */
    atomic_store_explicit(&ctl->claim_pg, (uint32_t)(e / AR_PER_PAGE), memory_order_relaxed);
}

/* Rule 5: own the entry whose word is *w by one CAS to RETIRED(slot). */
static bool entry_take_from(ar_span *sp, uint64_t *w, uint32_t slot) {
    uint64_t prev = *w;
    /* acq_rel: exclusive; acquire sees the previous owner's writes */
    if (!dp_cas_acq_rel(&sp->state, w, SPW_OWNED(SPW_GEN(prev) + 1, slot, SP_RETIRED))) return false;
    *w = prev;
    return true;
}

/* The owner of INIT(mine) gives it back itself (a failed fill, or DOOMED). */
static void entry_abandon(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp,
                          uint64_t mine) {
    uint64_t w = dp_load_acquire(&sp->state); /* acquire: a destroyer's DOOMED */
    if ((w & ~SPW_DOOMED) != mine) return; /* not ours any more: a damaged word; never touch it */
    if (entry_take_from(sp, &w, p->slot)) entry_release(p, ctl, aid, e, sp, w, p->slot);
}

/* ---- pointers ----------------------------------------------------------- */

/* Fallback pointers: the offset bits of an OS segment of len bytes,
 * ceil(log2 len) and at least 16 -- a span's are its block's (cls_span:
 * 2^n is the power of two from 64 KiB at or above its len), so span_rel()
 * takes a chunk's offset out of a fallback pointer as out of a pool one.
 * len <= FB_MAX_SEG gives n <= 32. */
static inline unsigned fb_bits(uint64_t len) {
    return len <= AR_SPAN_MIN ? 16u : 64u - (unsigned)__builtin_clzll(len - 1);
}

/* The check of pointers into OS segment h (n offset bits): the top 32 - n
 * bits of a mix (splitmix64's finalizer) of h keyed by the area's random
 * key; none when n is 32. */
static inline uint32_t fb_check(const struct dsmpool_area *a, dsmpool_handle h, unsigned n) {
    uint64_t x = a->key ^ h;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return n >= 32 ? 0 : (uint32_t)(x >> (32 + n));
}

/* The base pointer of entry e's OS segment h of len bytes: offset 0, the
 * segment's check above it. */
static inline dsmpool_ptr fb_base(const struct dsmpool_area *a, uint64_t e, dsmpool_handle h, uint64_t len) {
    unsigned n = fb_bits(len);
    return FB_PTR(a->tag, e, (uint64_t)fb_check(a, h, n) << n);
}

/* The base pointer of entry e (block word blk, read by the caller): a pool
 * offset, or the fallback pointer of its OS segment -- a span's of class c
 * is cls_len(c) bytes (acquire_bracketed), a large block's (c ==
 * AR_LARGE_CLS) is what its descriptor says. */
static dsmpool_ptr entry_base(struct dsmpool_area *a, uint64_t e, ar_span *sp, uint64_t blk, unsigned c) {
    if (blk != DP_BLOCK_FALLBACK) return DP_BLOCK_OFF(blk);
    dsmpool_handle h = dp_load_relaxed(&sp->seg); /* [imm while live] */
    return fb_base(a, e, h, c == AR_LARGE_CLS ? dp_seg_os_size(a->pool, h) : cls_len(c));
}

/* This process's mapping of fallback entry e, if it maps the entry's
 * current OS segment (an entry can be reused for another segment). Records
 * are published whole by pointer and never freed under a reader. */
static ar_fb *fb_lookup(struct dsmpool_area *a, uint64_t e) {
    _Atomic(ar_fb *) *page = __atomic_load_n(&a->fb[e / 512], __ATOMIC_ACQUIRE); /* pairs with fb_remember */
    if (!page) return NULL;
    ar_fb *r = atomic_load_explicit(&page[e % 512], memory_order_acquire); /* pairs with fb_remember */
    if (!r) return NULL;
    ar_span *sp = ar_entry(a->pool, a->ctl, e);
    return sp && dp_load_relaxed(&sp->seg) == r->seg ? r : NULL;
}

/* Install our mapping of segment seg for entry e, or, if another thread got
 * there first with the same segment, keep theirs and drop ours. Returns the
 * record in use; NULL (and ours unmapped) when out of memory. */
static ar_fb *fb_remember(struct dsmpool_area *a, uint64_t e, char *base, uint64_t len,
                          dsmpool_handle seg) {
    pthread_mutex_lock(&a->lock);
    _Atomic(ar_fb *) *page = a->fb[e / 512];
    ar_fb *r = NULL, *cur;
    if (!page && (page = calloc(512, sizeof *page)) != NULL)
        __atomic_store_n(&a->fb[e / 512], page, __ATOMIC_RELEASE);
    if (!page) goto out;
    cur = atomic_load_explicit(&page[e % 512], memory_order_relaxed);
    if (cur && cur->seg == seg) { /* someone mapped it meanwhile */
        r = cur;
        goto out;
    }
    if (!(r = malloc(sizeof *r))) goto out;
    *r = (ar_fb){base, len, seg, fb_bits(len), fb_check(a, seg, fb_bits(len)), NULL};
    if (cur) { /* an earlier segment of this entry: unmapped at detach */
        cur->retired = a->fb_retired;
        a->fb_retired = cur;
    }
    atomic_store_explicit(&page[e % 512], r, memory_order_release); /* release: the record's fields */
    pthread_mutex_unlock(&a->lock);
    return r;
out:
    pthread_mutex_unlock(&a->lock);
    dp_os_unmap(base, len);
    return r;
}

/* Map a fallback entry in this process the first time a pointer needs it. */
static ar_fb *fb_map(struct dsmpool_area *a, uint64_t e) {
    ar_fb *r = fb_lookup(a, e);
    if (r) return r;
    ar_span *sp = ar_entry(a->pool, a->ctl, e);
    if (!sp) return NULL;
    uint64_t w = dp_load_acquire(&sp->state); /* acquire: pairs with acquire_bracketed's publishing CAS */
    if (SPW_ST(w) != SP_SPAN && SPW_ST(w) != SP_LARGE) return NULL;
    if (dp_load_relaxed(&sp->block) != DP_BLOCK_FALLBACK) return NULL;
    void *m;
    size_t l;
    dsmpool_handle h = dp_load_relaxed(&sp->seg);
    if (dp_seg_os_map(a->pool, h, &m, &l) != 0) return NULL;
    if (l > FB_MAX_SEG) { /* no area makes one: a damaged handle or descriptor */
        dp_os_unmap(m, l);
        return NULL;
    }
    return fb_remember(a, e, m, l, h);
}

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
    ar_fb *r = fb_map(a, FB_ENTRY(p));
    if (!r || FB_OFF(p) >> r->nb != r->chk) return NULL; /* another segment's: stale */
    uint64_t off = FB_OFF(p) & ((1ull << r->nb) - 1);
    return off < r->len && need <= r->len - off ? r->base + off : NULL;
}

static inline char *ar_addr(struct dsmpool_area *a, dsmpool_ptr p) { return ar_addr_n(a, p, 1); }

char *dsmpool_area_base(const dsmpool_area *area) {
    return area && area->magic == AR_OBJ_MAGIC ? area->base : NULL;
}

void *dsmpool_area_addr(dsmpool_area *area, dsmpool_ptr p) {
    if (!area || !p || area->magic != AR_OBJ_MAGIC) return NULL;
    return ar_addr(area, p);
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

static int ar_locate(struct dsmpool_area *a, dsmpool_ptr p, ar_loc *l) {
    dsmpool *pool = a->pool;
    if (!(p & FB_BIT)) {
        if (p < a->data_off || p - a->data_off >= a->data_size) return -EINVAL;
        uint64_t rel = p - a->data_off, k = rel >> AR_DIR_SHIFT;
        uint64_t dw = dp_load_acquire(&pool->dir[k]); /* acquire: pairs with dir_set */
        if (DIRW_AID(dw) != a->aid) return -EINVAL;
        l->e = DIRW_ENTRY(dw);
        l->cls = DIRW_CLS(dw);
        l->sp = NULL; /* small chunks need only the directory; see locate_entry */
        if (l->cls >= AR_NCLS && l->cls != AR_LARGE_CLS) return -EINVAL; /* a damaged word */
        if (l->cls == AR_LARGE_CLS) {
            if (!(l->sp = ar_entry(pool, a->ctl, l->e))) return -EINVAL;
            l->span = DP_BLOCK_OFF(dp_load_relaxed(&l->sp->block));
        } else {
            l->span = p - span_rel(l->cls, rel); /* data_off is a 2 MiB multiple */
        }
        l->off = p - l->span;
        return 0;
    }
    if (FB_TAG(p) != a->tag || !a->tag) return -EINVAL;
    l->e = FB_ENTRY(p);
    l->sp = ar_entry(pool, a->ctl, l->e);
    if (!l->sp) return -EINVAL;
    uint64_t w = dp_load_acquire(&l->sp->state); /* acquire: the entry's publication */
    if (dp_load_relaxed(&l->sp->block) != DP_BLOCK_FALLBACK) return -EINVAL;
    if (SPW_ST(w) == SP_LARGE) l->cls = AR_LARGE_CLS;
    else if (SPW_ST(w) == SP_SPAN) l->cls = (unsigned)(dp_load_relaxed(&l->sp->info) & 0xff);
    else return -EINVAL;
    if (l->cls >= AR_NCLS && l->cls != AR_LARGE_CLS) return -EINVAL; /* a corrupt entry */
    /* the segment the entry holds now (seg was stored before the
     * publication our acquire saw); a pointer into an earlier one is stale */
    dsmpool_handle h = dp_load_relaxed(&l->sp->seg); /* [imm while live] */
    uint64_t len = l->cls == AR_LARGE_CLS ? dp_seg_os_size(pool, h) : cls_len(l->cls);
    unsigned n = fb_bits(len);
    if (!len || len > FB_MAX_SEG || FB_OFF(p) >> n != fb_check(a, h, n)) return -EINVAL;
    l->span = p & ~((1ull << n) - 1);
    l->off = p & ((1ull << n) - 1);
    return 0;
}

/* The registry entry of a located chunk (small pool chunks skip it). */
static ar_span *locate_entry(struct dsmpool_area *a, ar_loc *l) {
    if (!l->sp) l->sp = ar_entry(a->pool, a->ctl, l->e);
    return l->sp;
}

/* ---- span stacks (rules 2 and 3) ---------------------------------------- */

/* Rule 15: give back entry e if it is a whole span (a kept one let go). */
static void retire_if_whole(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, uint32_t slot) {
    ar_span *sp = ar_entry(p, ctl, e);
    uint64_t w = sp ? dp_load_acquire(&sp->state) : 0; /* acquire: every push's link */
    unsigned c = sp ? (unsigned)(dp_load_relaxed(&sp->info) & 0xff) : 0;
    if (!sp || SPW_ST(w) != SP_SPAN || c >= AR_NCLS || SPW_COUNT(w) != cls_chunks(c)) return;
    if (entry_take_from(sp, &w, slot)) { /* rule 5: ours by one CAS */
        dp_fetch_add_relaxed(&ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
        entry_release(p, ctl, aid, e, sp, w, slot);
    }
}

/* Rule 15: a push made span e whole in an area with shared users: keep it
 * (one span per area, ctl->sh_keep) instead of retiring it, so that a
 * thread that allocates and frees one chunk at a time does not take and
 * link a fresh span each time. A kept span that is no longer whole (in use
 * again, or given back) is replaced; one that is whole stays, and e
 * retires. false: retire e. */
static bool span_keep(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, uint32_t slot) {
    /* seq_cst fence: our whole-making push before our look at the slot,
     * against the fences of a replacer and of keep_release (store
     * buffering: one of us sees the other's write) */
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t k = dp_load_relaxed(&ctl->sh_keep); /* relaxed: ordered by the fences */
    for (;;) {
        if (k == e + 1) return true;
        if (k) {
            ar_span *o = ar_entry(p, ctl, k - 1);
            uint64_t ow = o ? dp_load_relaxed(&o->state) : 0; /* relaxed: a look; the CAS decides */
            unsigned oc = o ? (unsigned)(dp_load_relaxed(&o->info) & 0xff) : 0;
            if (o && SPW_ST(ow) == SP_SPAN && oc < AR_NCLS && SPW_COUNT(ow) == cls_chunks(oc)) return false;
        }
        /* relaxed, then the fence: the old span is looked at again below */
        if (atomic_compare_exchange_strong_explicit(&ctl->sh_keep, &k, e + 1, memory_order_relaxed,
                                                    memory_order_relaxed))
            break;
    }
    atomic_thread_fence(memory_order_seq_cst); /* as above */
    if (k) retire_if_whole(p, ctl, aid, k - 1, slot); /* whole since we looked: nobody else will */
    return true;
}

/* A push made the span's stack nw (it held was before): keep the hint, and
 * retire a span that is whole again. retire_slot owns the retirement. */
static void span_pushed(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, unsigned cls,
                        uint32_t was, uint64_t nw, uint32_t retire_slot) {
    if (was == 0) dp_fetch_add_relaxed(&ctl->partial[cls], 1); /* relaxed: a hint */
    if (SPW_COUNT(nw) == cls_chunks(cls)) {
        if (dp_load_relaxed(&ctl->shared) && span_keep(p, ctl, aid, e, retire_slot)) return; /* relaxed: rule 15 */
        DP_INJECT("area.push.whole");
        uint64_t rw = SPW_OWNED(SPW_GEN(nw) + 1, retire_slot, SP_RETIRED);
        /* acq_rel: acquire sees every chunk's link; release claims the entry */
        uint64_t prev = nw;
        if (dp_cas_acq_rel(&sp->state, &nw, rw)) {
            dp_fetch_add_relaxed(&ctl->partial[cls], (uint64_t)-1);
            entry_release(p, ctl, aid, e, sp, prev, retire_slot);
        }
    }
}

/* Return one chunk (by index) to its span's stack (rule 3). */
static void span_push(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp,
                      unsigned cls, uint32_t idx, char *chunk, uint32_t retire_slot) {
    uint32_t n = cls_chunks(cls);
    uint64_t w = dp_load_relaxed(&sp->state), nw;
    for (;;) {
        if (SPW_ST(w) != SP_SPAN || SPW_COUNT(w) >= n) return; /* corrupt: drop, never double */
        DP_INJECT("area.push.checked");
        memcpy(chunk, &(uint32_t){SPW_HEAD(w)}, 4);
        nw = SPW(SPW_GEN(w) + 1, SPW_COUNT(w) + 1, idx + 1, SP_SPAN);
        /* release: publishes the link written into the chunk (pairs with refill's and span_take's steal) */
        if (dp_cas_release(&sp->state, &w, nw)) break;
    }
    span_pushed(p, ctl, aid, e, sp, cls, SPW_COUNT(w), nw, retire_slot);
}

/* Return a chunk pointer to its span (drain, release, recovery). */
static void chunk_return(struct dsmpool_area *a, dsmpool_ptr c, uint32_t retire_slot) {
    ar_loc l;
    if (ar_locate(a, c, &l) != 0 || l.cls == AR_LARGE_CLS) return;
    uint32_t idx;
    if (!chunk_at(l.cls, l.off, &idx)) return;
    char *m = ar_addr_n(a, c, 4);
    if (m && locate_entry(a, &l)) span_push(a->pool, a->ctl, a->aid, l.e, l.sp, l.cls, idx, m, retire_slot);
}


/* ---- operations (rule 7) -------------------------------------------------- */

static inline uint64_t op_begin(ar_cache *rec) {
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

/* s: what op_begin returned */
static inline void op_end(ar_cache *rec, uint64_t s) {
    /* release: pairs with the acquire loads of caches_quiesce (the destroyer) and quiet_open_ctl (the checker) */
    dp_store_release(&rec->seq, s + 1);
}

static inline uint64_t free_tag(const struct dsmpool_area *a, dsmpool_ptr p) { return a->key ^ p; }

static inline bool area_live(const struct dsmpool_area *a) {
    /* relaxed: ordered by the operation's fences (rule 7) and by
     * membarrier on the destroyer's side (rule 6) */
    return dp_load_relaxed(&a->ctl->state) == AR_LIVE;
}

/* ---- thread caches ------------------------------------------------------ */

static void tc_destructor(void *arg);
static void tc_key_init(void) { pthread_key_create(&tc_key, tc_destructor); }

/* This process may use the area's control block: it holds a reference on its
 * segment. A fork()ed child whose inherited reference could not be taken
 * over (the parent had let the area go: its block may be someone else's
 * now) must never touch it. */
static int area_usable(struct dsmpool_area *a) {
    int r = dp_self(a->pool); /* adoption happens here, and may mark the segment stale */
    if (r) return r;
    if (a->seg && a->seg->stale)
        return dp_fail(-ESTALE, "the area was let go before this process (a fork()ed child) "
                       "took it over");
    return 0;
}

/* Rule 4: everything a cache record holds goes back to the spans. Inside an
 * operation on rec. */
/* The most chunks of class c the area can hold: a bound for list walks
 * that must stop on a damaged (cyclic) list. */
static uint64_t chunks_bound(const struct dsmpool_area *a, unsigned c) {
    uint64_t held = dp_load_relaxed(&a->ctl->held); /* relaxed: a bound, not a count */
    if (held > (1ull << 46)) held = 1ull << 46;
    return (a->data_size + held) / cls_size(c) + 1;
}

/* Rules 3 and 11: the bump range [idx, idx + left) of class c goes back to
 * span e in one push. Each chunk gets its free tag and a link to the next
 * while the range still holds it; then the range is cleared (leak-biased: a
 * death now leaves tagged chunks on no list, which the lost sweep finds);
 * then one CAS puts the chain on the span's stack. */
static void range_push(struct dsmpool_area *a, ar_cache *rec, unsigned c, uint64_t e, ar_span *sp,
                       dsmpool_ptr base, uint32_t idx, uint32_t left, uint32_t retire_slot) {
    uint32_t n = cls_chunks(c);
    /* acquire: the pushes' links (as a steal reads them) */
    for (uint64_t w = dp_load_acquire(&sp->state); SPW_ST(w) == SP_SPAN && SPW_COUNT(w) + left == n;) {
        /* the stack and the range are the whole span: it retires untouched
         * (rule 5: ours by one CAS; the range is cleared before the entry is
         * released, so no bump word ever names a released entry) */
        if (entry_take_from(sp, &w, retire_slot)) {
            dp_store_relaxed(&rec->bump[c], 0);
            if (SPW_COUNT(w)) dp_fetch_add_relaxed(&a->ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
            entry_release(a->pool, a->ctl, a->aid, e, sp, w, retire_slot);
            return;
        }
    }
    char *last = NULL;
    uint32_t k = 0;
    for (; k < left; k++) {
        dsmpool_ptr cp = base + chunk_off(c, idx + k);
        char *m = ar_addr_n(a, cp, 16);
        if (!m) break; /* (an OS segment this process cannot map: all of the span) */
        uint32_t next = idx + k + 2; /* the next chunk's index + 1; the last one's is set below */
        uint64_t tag = free_tag(a, cp);
        memcpy(m, &next, 4);
        memcpy(m + 8, &tag, 8);
        last = m;
    }
    dp_store_relaxed(&rec->bump[c], 0);
    if (!last) return;
    uint64_t w = dp_load_relaxed(&sp->state), nw;
    for (;;) {
        if (SPW_ST(w) != SP_SPAN || SPW_COUNT(w) + k > n) return; /* corrupt: drop, never double */
        memcpy(last, &(uint32_t){SPW_HEAD(w)}, 4);
        nw = SPW(SPW_GEN(w) + 1, SPW_COUNT(w) + k, idx + 1, SP_SPAN);
        /* release: publishes the links written into the chunks (pairs with refill's and span_take's steal) */
        if (dp_cas_release(&sp->state, &w, nw)) break;
    }
    span_pushed(a->pool, a->ctl, a->aid, e, sp, c, SPW_COUNT(w), nw, retire_slot);
}

static void cache_drain_all(struct dsmpool_area *a, ar_cache *rec, uint32_t retire_slot) {
    for (unsigned c = 0; c < AR_NCLS; c++) {
        dsmpool_ptr h = dp_load_relaxed(&rec->head[c]);
        for (uint64_t guard = chunks_bound(a, c); h && guard; guard--) {
            char *m = ar_addr_n(a, h, 8); /* validated: it may be a dead process's garbage */
            if (!m) break;
            dsmpool_ptr next;
            memcpy(&next, m, 8);
            dp_store_relaxed(&rec->head[c], next); /* first unlink (leak-biased), then return */
            chunk_return(a, h, retire_slot);
            h = next;
        }
        dp_store_relaxed(&rec->head[c], 0);
        dp_store_relaxed(&rec->count[c], 0);
        uint64_t b = dp_load_relaxed(&rec->bump[c]);
        uint32_t e1 = BUMP_E1(b), left = BUMP_LEFT(b), idx = BUMP_IDX(b);
        ar_span *sp = e1 ? ar_entry(a->pool, a->ctl, e1 - 1) : NULL;
        uint64_t w = sp ? dp_load_acquire(&sp->state) : 0; /* acquire: the entry's publication */
        if (!sp || left > cls_chunks(c) || idx + left > cls_chunks(c) || SPW_ST(w) != SP_SPAN ||
            (dp_load_relaxed(&sp->info) & 0xff) != c) {
            dp_store_relaxed(&rec->bump[c], 0);
            continue;
        }
        uint64_t blk = dp_load_relaxed(&sp->block);
        range_push(a, rec, c, e1 - 1, sp, entry_base(a, e1 - 1, sp, blk, c), idx, left, retire_slot);
    }
}

static void keep_release(struct dsmpool_area *a);

/* Rule 12: this cache gives back everything. Inside an operation on it. */
static void cache_answer(struct dsmpool_area *a, ar_tc *tc) {
    tc->trim_seen = dp_load_relaxed(a->trimp); /* relaxed: rule 12 */
    cache_drain_all(a, tc->rec, a->pool->slot);
    keep_release(a);
}

static void area_trim_thread(dsmpool *p);

/* Rule 12: a request to give back was made since this cache last answered
 * (or the pool is short for this very thread): this thread's caches of
 * every area of the pool give back. Inside an operation on tc's record. */
static __attribute__((noinline)) void trim_answer(struct dsmpool_area *a, ar_tc *tc) {
    cache_answer(a, tc);
    area_trim_thread(a->pool);
}

/* Give a cache record up: drained if the area lives, then free. */
static void cache_release(struct dsmpool_area *a, ar_cache *rec, uint32_t slot) {
    uint64_t s = op_begin(rec);
    if (area_live(a)) cache_drain_all(a, rec, slot);
    op_end(rec, s);
    dp_store_release(&rec->owner, 0); /* release: pairs with cache_claim's CAS */
}

static void tc_unlink_area(ar_tc *tc) { /* ar_reg_lock and area->lock held */
    struct dsmpool_area *a = atomic_load_explicit(&tc->area, memory_order_relaxed);
    if (tc->aprev) tc->aprev->anext = tc->anext;
    else a->tcs = tc->anext;
    if (tc->anext) tc->anext->aprev = tc->aprev;
    tc->anext = tc->aprev = NULL;
}

/* Thread exit: release this thread's caches of every area still attached. */
static void tc_destructor(void *arg) {
    (void)arg;
    unsigned e = dp_epoch();
    pthread_mutex_lock(&ar_reg_lock);
    for (ar_tc *tc = tc_head, *next; tc; tc = next) {
        next = tc->tnext;
        struct dsmpool_area *a = atomic_load_explicit(&tc->area, memory_order_relaxed);
        if (a && tc->epoch == e) {
            pthread_mutex_lock(&a->lock);
            tc_unlink_area(tc);
            pthread_mutex_unlock(&a->lock);
            if (tc->rec) cache_release(a, tc->rec, a->pool->slot);
        }
        free(tc);
    }
    tc_head = tc_last = NULL;
    pthread_mutex_unlock(&ar_reg_lock);
}

static _Thread_local int tc_err; /* why tc_get gave NULL */

/* A free cache record, claimed for me; a record page is linked when every
 * record of the pages before it is held. NULL: none free, or no pool block
 * for a new page (the shared path, rule 15). */
static ar_cache *cache_claim(dsmpool *p, ar_ctl *ctl, uint64_t me) {
    for (uint32_t i = 0; i < AR_NCACHES; i++) {
        if (i % AR_RECS_PER_PAGE == 0 && !dp_block_link(p, &ctl->recpage[i / AR_RECS_PER_PAGE], AR_RECPAGE_ORDER))
            return NULL;
        ar_cache *rec = cache_rec(p, ctl, i);
        if (!rec) return NULL; /* a damaged page link */
        uint64_t z = 0;
        if (dp_load_relaxed(&rec->owner) != 0) continue;
        /* acq_rel: acquire pairs with cache_release; release: the claim */
        if (dp_cas_acq_rel(&rec->owner, &z, me)) return rec;
    }
    return NULL;
}

#ifdef DP_INJECTION
static _Thread_local bool tc_force_shared; /* test-only: this thread's new caches take no record */
#endif

/* Give tc a cache record of its own, if one is free (reclaim: recover dead
 * processes first when none is). The record is emptied inside an operation.
 * false: none is free; tc->rec stays NULL (rule 15). */
static bool tc_take_record(struct dsmpool_area *a, ar_tc *tc, bool reclaim) {
#ifdef DP_INJECTION
    if (tc_force_shared) return false;
#endif
    ar_ctl *ctl = a->ctl;
    uint64_t me = (uint64_t)(a->pool->slot + 1) | ((uint64_t)(uint32_t)dp_os_gettid() << 32);
    ar_cache *rec = cache_claim(a->pool, ctl, me);
    if (!rec && reclaim && dp_reclaim(a->pool) > 0) /* dead processes' caches may hold them all */
        rec = cache_claim(a->pool, ctl, me);
    if (!rec) return false;
    /* seq_cst fence: our claim before our first read of the area state,
     * against the destroyer's fence (destroy_explicit) */
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t s = op_begin(rec);
    for (unsigned c = 0; c < AR_NCLS; c++) { /* a released record is empty; say so anyway */
        dp_store_relaxed(&rec->head[c], 0);
        dp_store_relaxed(&rec->bump[c], 0);
        dp_store_relaxed(&rec->count[c], 0);
        tc->span_e1[c] = 0;
    }
    op_end(rec, s);
    tc->trim_seen = dp_load_relaxed(a->trimp); /* relaxed: rule 12 */
    tc->rec = rec;
    return true;
}

static ar_tc *tc_get_slow(struct dsmpool_area *a) {
    if ((tc_err = area_usable(a)) != 0) return NULL;
    unsigned e = dp_epoch();
    /* this thread's objects of areas detached since: free them now */
    pthread_mutex_lock(&ar_reg_lock);
    for (ar_tc **pp = &tc_head; *pp;) {
        ar_tc *tc = *pp;
        if (!atomic_load_explicit(&tc->area, memory_order_relaxed) || tc->epoch != e) {
            *pp = tc->tnext;
            if (tc_last == tc) tc_last = NULL;
            if (tc->epoch == e) free(tc); /* (a fork child's copies: the parent's) */
            continue;
        }
        if (atomic_load_explicit(&tc->area, memory_order_relaxed) == a) {
            pthread_mutex_unlock(&ar_reg_lock);
            return tc_last = tc;
        }
        pp = &tc->tnext;
    }
    pthread_mutex_unlock(&ar_reg_lock);
    pthread_once(&tc_once, tc_key_init);
    ar_tc *tc = calloc(1, sizeof *tc);
    if (!tc) {
        tc_err = dp_fail(-ENOMEM, "out of memory");
        return NULL;
    }
    if (!tc_take_record(a, tc, true)) {
        /* rule 15: more threads than records use the area: this one takes
         * the shared path. relaxed store, then a seq_cst fence before our
         * first read of the area state, against the destroyer's fence: it
         * sees the flag (and uses membarrier), or we see DESTROYED */
        dp_store_relaxed(&a->ctl->shared, 1); /* every time: our own store before our fence */
        atomic_thread_fence(memory_order_seq_cst);
    }
    atomic_store_explicit(&tc->area, a, memory_order_relaxed);
    tc->epoch = e;
    pthread_mutex_lock(&ar_reg_lock);
    pthread_mutex_lock(&a->lock);
    tc->anext = a->tcs;
    if (a->tcs) a->tcs->aprev = tc;
    a->tcs = tc;
    pthread_mutex_unlock(&a->lock);
    tc->tnext = tc_head;
    tc_head = tc;
    pthread_mutex_unlock(&ar_reg_lock);
    pthread_setspecific(tc_key, (void *)1); /* any non-NULL value: run the destructor */
    return tc_last = tc;
}

static inline ar_tc *tc_get(struct dsmpool_area *a) {
    ar_tc *tc = tc_last;
    /* relaxed: only another thread's detach changes it, which is a use-after-free anyway */
    if (__builtin_expect(tc && atomic_load_explicit(&tc->area, memory_order_relaxed) == a &&
                         tc->epoch == dp_epoch(), 1))
        return tc;
    return tc_get_slow(a);
}

/* This thread's cache record of a, if it has one (no new one is made). */
static ar_cache *tc_find(struct dsmpool_area *a) {
    unsigned e = dp_epoch();
    for (ar_tc *tc = tc_head; tc; tc = tc->tnext)
        if (atomic_load_explicit(&tc->area, memory_order_relaxed) == a && tc->epoch == e) return tc->rec;
    return NULL;
}

/* ---- acquiring spans and blocks (rule 2) -------------------------------- */

#ifdef DP_INJECTION
/* test-only: keep a new exact span's or block's whole power of two, as a
 * trim that stops at its first piece does (palloc.c rule 7): an exact word
 * that gave nothing back */
static _Atomic bool ar_test_untrimmed;
#define AR_TEST_UNTRIMMED atomic_load_explicit(&ar_test_untrimmed, memory_order_relaxed)
#else
#define AR_TEST_UNTRIMMED false
#endif

/* Add bytes to held if held + need stays within the limit. need < bytes
 * for an exact span or large block: its power of two is reserved (what an INIT
 * entry gives back, rule 13) and lowered to the exact bytes once the tail
 * went back, but the limit is judged on what it will hold. */
static int held_reserve_for(ar_ctl *ctl, uint64_t bytes, uint64_t need) {
    uint64_t lim = dp_load_relaxed(&ctl->limit); /* relaxed: a setting */
    uint64_t h = dp_load_relaxed(&ctl->held);
    for (;;) {
        if (lim && (h + need > lim || h + bytes < h))
            return dp_fail(-ENOMEM, "the area's limit of %llu bytes would be passed (it holds %llu)",
                           (unsigned long long)lim, (unsigned long long)h);
        /* relaxed: a counter; the limit is enforced by this CAS alone */
        if (atomic_compare_exchange_weak_explicit(&ctl->held, &h, h + bytes, memory_order_relaxed,
                                                  memory_order_relaxed))
            return 0;
    }
}

static int held_reserve(ar_ctl *ctl, uint64_t bytes) { return held_reserve_for(ctl, bytes, bytes); }

/* Rule 15: link chunks 1.. of a fresh span of class c at base into one
 * stack, each with its free tag (rule 11), before the span is published.
 * Returns how many were linked (0: the span could not be mapped here). */
static uint32_t span_chain(struct dsmpool_area *a, unsigned c, dsmpool_ptr base) {
    uint32_t n = cls_chunks(c);
    if (n < 2 || !ar_addr_n(a, base, cls_len(c))) return 0;
    for (uint32_t i = 1; i < n; i++) {
        dsmpool_ptr cp = base + chunk_off(c, i);
        char *m = ar_addr_n(a, cp, 16);
        uint32_t next = i + 1 < n ? i + 2 : 0; /* the next chunk's index + 1; 0 ends the stack */
        uint64_t tag = free_tag(a, cp);
        memcpy(m, &next, 4);
        memcpy(m + 8, &tag, 8);
    }
    return n - 1;
}

/* A fresh span of class cls, or a large block of 2^order frames: inside an
 * operation and one bracket (proc.c rule 6), from the claim of the entry to
 * its publication (rule 5). */
static int acquire_bracketed(struct dsmpool_area *a, ar_tc *tc, unsigned cls, unsigned order,
                             uint64_t keep, unsigned place, uint64_t asked, bool chain, bool mid,
                             uint64_t *entry, dsmpool_ptr *base) {
    dsmpool *p = a->pool;
    ar_ctl *ctl = a->ctl;
    uint64_t bytes = (uint64_t)DP_FRAME_SIZE << order;
    int r = held_reserve_for(ctl, bytes, keep ? keep * DP_FRAME_SIZE : bytes);
    if (r) return r;
    /* a mid-size block only in the registry's first half: the rest stays
     * for spans and large blocks (rule 13) */
    int64_t e = entry_claim(a, order, mid ? AR_REGPAGES / 2 : AR_REGPAGES);
    if (e < 0) {
        dp_fetch_add_relaxed(&ctl->held, (uint64_t)-bytes);
        if (mid) return -ENOSPC; /* the caller takes a chunk of the class instead */
        return dp_fail(e == -ENOSPC ? -ENOMEM : (int)e, "the area's registry is full (%u entries)",
                       AR_MAX_ENTRIES);
    }
    /* From here the entry is INIT(us): every part we put in is put where the
     * release's exchange finds it, and a failure gives the entry back
     * (entry_abandon returns the held reservation). */
    ar_span *sp = ar_entry(p, ctl, (uint64_t)e);
    if (!sp) return dp_fail(-EUCLEAN, "the area's registry page vanished (damaged control block)");
    uint64_t mine = dp_load_relaxed(&sp->state);
    if ((ctl->flags & DSMPOOL_AREA_CHECKED) && cls != AR_LARGE_CLS) {
        uint64_t bm;
        r = dp_pool_alloc(p, cls_bm_order(cls), &bm);
        if (r == 0) {
            memset(dp_at(p, DP_BLOCK_OFF(bm)), 0, (size_t)DP_FRAME_SIZE << cls_bm_order(cls));
            dp_store_release(&sp->info, DP_BLOCK_OFF(bm) | cls); /* release: owned before the bracket ends */
        } else {
            entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine);
            return dp_fail(-ENOMEM, "no pool memory for the checked-mode bitmap");
        }
    } else {
        /* release: owned before the bracket ends */
        dp_store_release(&sp->info, cls == AR_LARGE_CLS ? AR_INFO_LARGE(asked) : cls);
    }
    uint64_t blk = 0;
    r = dp_pool_alloc_placed(p, order, place, &blk); /* spans: the thread's own node first */
    if (r && mid) { /* no trim request and no OS segment for a mid-size block: its class serves */
        entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine);
        return -ENOMEM;
    }
    if (r && r != -EUCLEAN) { /* rule 12: short: this thread's caches give back, then everyone's */
        if (tc && tc->rec) {
            trim_answer(a, tc);
        } else { /* rule 15: no cache of ours here to give back */
            keep_release(a);
            area_trim_thread(p);
        }
        r = dp_seg_block_short(p, order, place, &blk);
    }
    if (r == 0) {
        if (keep) /* rule 13: exact blocks and spans */
            blk = AR_TEST_UNTRIMMED ? dp_block_mk_trimmed(DP_BLOCK_OFF(blk), order, 0)
                                    : dp_pool_trim(p, blk, keep);
        /* the entry's record first: a death before the block word leaves a
         * block owned by nothing (the sweep's), never a word it disagrees with */
        if (blk & DP_BLOCK_EXACT) dp_store_relaxed(&sp->seg, dp_block_frames(blk));
        dp_store_release(&sp->block, blk); /* release: owned before the bracket ends */
        dir_set(p, DP_BLOCK_OFF(blk), DP_BLOCK_BYTES(blk), DIRW(a->aid, (uint64_t)e, cls));
        /* the reservation was the power of two; a death before this leaves
         * held too high, which the lost sweep sets right (held_sum) */
        if (DP_BLOCK_BYTES(blk) != bytes)
            dp_fetch_add_relaxed(&ctl->held, DP_BLOCK_BYTES(blk) - bytes); /* relaxed: a counter */
        *base = DP_BLOCK_OFF(blk);
    } else {
        void *m = NULL;
        dsmpool_handle h = 0;
        uint64_t fbytes = keep ? keep * DP_FRAME_SIZE : bytes; /* an OS segment is exact too */
        if (r != -EUCLEAN && !(ctl->flags & DSMPOOL_AREA_NO_FALLBACK) && a->tag && fbytes <= (1ull << 32))
            r = dp_seg_os_create(p, fbytes, &h, &m);
        if (r || !h) {
            entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine);
            if (r == -EUCLEAN) return dp_fail(r, "the pool's allocator is damaged; dsmpool_check() says where");
            return dp_fail(-ENOMEM, "no free block of %llu bytes in the pool%s",
                           (unsigned long long)bytes,
                           (ctl->flags & DSMPOOL_AREA_NO_FALLBACK) ? " (DSMPOOL_AREA_NO_FALLBACK)"
                           : !a->tag ? " (and the area has no tag for OS segments)"
                                     : " and the OS fallback failed");
        }
        dp_store_relaxed(&sp->seg, h);
        dp_store_release(&sp->block, DP_BLOCK_FALLBACK);
        if (fbytes != bytes) /* as above */
            dp_fetch_add_relaxed(&ctl->held, fbytes - bytes); /* relaxed: a counter */
        fb_remember(a, (uint64_t)e, m, fbytes, h); /* without memory: mapped again on first use */
        *base = fb_base(a, (uint64_t)e, h, fbytes);
    }
    /* rule 15: a shared-path span is published with every chunk but the
     * first on its stack, tagged and linked while the entry is still ours
     * (a death before the publication gives the whole block back) */
    uint32_t stacked = chain && cls != AR_LARGE_CLS ? span_chain(a, cls, *base) : 0;
    if (chain && cls != AR_LARGE_CLS && !stacked) { /* its chunks could be reached by nobody */
        entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine);
        return dp_fail(-ENOMEM, "cannot map the new span's OS segment in this process");
    }
    DP_INJECT("area.acquire.stored");
    /* release: block, info, directory and the chunks' links are set before
     * the entry is live */
    uint64_t live = SPW(SPW_GEN(mine), stacked, stacked ? 2 : 0, cls == AR_LARGE_CLS ? SP_LARGE : SP_SPAN);
    if (!dp_cas_release(&sp->state, &mine, live)) {
        /* DOOMED by a destroyer (rule 5): the entry is still ours; give it back */
        entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine & ~SPW_DOOMED);
        return dp_fail(-ESTALE, "the area was destroyed");
    }
    if (stacked) dp_fetch_add_relaxed(&ctl->partial[cls], 1); /* relaxed: a hint */
    *entry = (uint64_t)e;
    return 0;
}

static int acquire(struct dsmpool_area *a, ar_tc *tc, unsigned cls, unsigned order, uint64_t keep,
                   unsigned place, uint64_t asked, bool chain, bool mid, uint64_t *entry, dsmpool_ptr *base) {
    dp_inflight_begin(a->pool);
    int r = acquire_bracketed(a, tc, cls, order, keep, place, asked, chain, mid, entry, base);
    dp_inflight_end(a->pool);
    return r;
}

static void chain_return(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, dsmpool_ptr base,
                         uint32_t head, uint32_t count);
static void chain_lost(struct dsmpool_area *a);

/* A stack stolen (word w) after its class was read: the entry may have been
 * given back and reused for another class in between, with the same word
 * (the generation carries over). Read the class again now that we hold the
 * span's free chunks (it cannot retire); another class's chain goes back.
 * acquire by the steal's CAS: the entry's current info is seen. */
static bool steal_class_holds(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, uint64_t w) {
    unsigned now = (unsigned)(dp_load_relaxed(&sp->info) & 0xff); /* [imm while live] */
    if (now == c) return true;
    uint64_t blk = dp_load_relaxed(&sp->block);
    dp_fetch_add_relaxed(&a->ctl->partial[c], 1); /* relaxed: the hints, set right */
    if (now < AR_NCLS) dp_fetch_add_relaxed(&a->ctl->partial[now], (uint64_t)-1);
    if (now < AR_NCLS)
        chain_return(a, now, e, sp, entry_base(a, e, sp, blk, now), SPW_HEAD(w), SPW_COUNT(w));
    else
        chain_lost(a);
    return false;
}

/* Rule 2: refill class c of this thread's cache; held_only: from spans the
 * area holds, or -ENOSPC rather than a fresh span (rule 13's mid sizes). */
static int refill(struct dsmpool_area *a, ar_tc *tc, unsigned c, bool held_only) {
    ar_ctl *ctl = a->ctl;
    ar_cache *rec = tc->rec;
    dsmpool *p = a->pool;
    if (dp_load_relaxed(&ctl->partial[c])) { /* relaxed: a hint */
        for (uint32_t k = 0; k < AR_REGPAGES; k++) {
            uint32_t pg = (uint32_t)((tc->scan[c] / AR_PER_PAGE + k) % AR_REGPAGES);
            if (!dp_load_relaxed(&ctl->regpage[pg])) continue;
            for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
                uint64_t e = (uint64_t)pg * AR_PER_PAGE + i;
                ar_span *sp = ar_entry(p, ctl, e);
                if (!sp) break;
                uint64_t w = dp_load_relaxed(&sp->state);
                if (SPW_ST(w) != SP_SPAN || !SPW_COUNT(w) || (dp_load_relaxed(&sp->info) & 0xff) != c)
                    continue;
                if (SPW_COUNT(w) > cls_chunks(c) || SPW_HEAD(w) > cls_chunks(c))
                    continue; /* damaged: left as it is, for dsmpool_check() to report */
                /* steal the whole stack; acquire pairs with span_push's release */
                if (!dp_cas_acquire(&sp->state, &w, SPW(SPW_GEN(w) + 1, 0, 0, SP_SPAN))) continue;
                dp_fetch_add_relaxed(&ctl->partial[c], (uint64_t)-1);
                if (!steal_class_holds(a, c, e, sp, w)) continue;
                dsmpool_ptr base = entry_base(a, e, sp, dp_load_relaxed(&sp->block), c);
                uint32_t idx = SPW_HEAD(w), n = SPW_COUNT(w), got = 0;
                dsmpool_ptr head = dp_load_relaxed(&rec->head[c]);
                while (idx && got < n && idx <= cls_chunks(c)) {
                    dsmpool_ptr cp = base + chunk_off(c, idx - 1);
                    char *m = ar_addr_n(a, cp, 8);
                    if (!m) break;
                    uint32_t next;
                    memcpy(&next, m, 4);
                    memcpy(m, &head, 8);
                    head = cp;
                    got++;
                    idx = next;
                }
                dp_store_relaxed(&rec->head[c], head);
                dp_store_relaxed(&rec->count[c], dp_load_relaxed(&rec->count[c]) + got);
                tc->scan[c] = e + 1;
                if (got) return 0;
            }
        }
    }
    if (held_only) return -ENOSPC;
    uint64_t e;
    dsmpool_ptr base;
    int r = acquire(a, tc, c, cls_span_order(c), cls_keep(c), 0, 0, false, false, &e, &base);
    if (r) return r;
    tc->span_ptr[c] = base;
    tc->span_e1[c] = (uint32_t)(e + 1);
    dp_store_relaxed(&rec->bump[c], BUMP(e + 1, 0, cls_chunks(c)));
    return 0;
}

/* Rule 3: push one batch of class c back to the spans. Inside an operation
 * on rec. */
static void drain_op(struct dsmpool_area *a, ar_cache *rec, unsigned c) {
    uint32_t n = cls_batch(c);
    dsmpool_ptr h = dp_load_relaxed(&rec->head[c]);
    for (uint32_t k = 0; k < n && h; k++) {
        char *m = ar_addr_n(a, h, 8);
        if (!m) break;
        dsmpool_ptr next;
        memcpy(&next, m, 8);
        dp_store_relaxed(&rec->head[c], next);
        dp_store_relaxed(&rec->count[c], dp_load_relaxed(&rec->count[c]) - 1);
        chunk_return(a, h, a->pool->slot);
        h = next;
    }
}

/* Rules 1 and 3: freed chunk p of class c (mapped at m) goes on this
 * thread's list: its link and free tag (tag: free_tag of p) first, the
 * head last (rule 11: a death in between leaves it tagged on no list);
 * above two batches, one goes back to the spans. Inside an operation on
 * rec; the one push of both free paths (dsmpool_area_free's inline case
 * and free_op). */
static inline void list_push_op(struct dsmpool_area *a, ar_cache *rec, unsigned c, dsmpool_ptr p, char *m,
                                uint64_t tag) {
    dsmpool_ptr head = dp_load_relaxed(&rec->head[c]); /* relaxed: rule 1 */
    memcpy(m, &head, 8);
    memcpy(m + 8, &tag, 8);
    DP_INJECT("area.free.linked");
    dp_store_relaxed(&rec->head[c], p);
    uint64_t n = dp_load_relaxed(&rec->count[c]) + 1;
    dp_store_relaxed(&rec->count[c], n);
    if (__builtin_expect(n > 2 * cls_batch(c), 0)) drain_op(a, rec, c);
}

/* ---- checked mode ------------------------------------------------------- */

/* Flip chunk idx's bit in the span's bitmap: set on alloc, clear on free.
 * Returns false when it already had the new value. */
static bool checked_flip(dsmpool *p, ar_span *sp, uint32_t idx, bool set) {
    uint64_t info = dp_load_relaxed(&sp->info), bm = info_bitmap(info);
    unsigned c = (unsigned)(info & 0xff);
    if (!bm || !dp_block_ok(p, bm, (uint64_t)DP_FRAME_SIZE << cls_bm_order(c)) || idx >= cls_chunks(c)) return true;
    dp_a64 *word = (dp_a64 *)dp_at(p, bm) + idx / 64;
    uint64_t bit = 1ull << (idx % 64);
    /* relaxed: the bitmap orders nothing, it only remembers */
    uint64_t old = set ? atomic_fetch_or_explicit(word, bit, memory_order_relaxed)
                       : atomic_fetch_and_explicit(word, ~bit, memory_order_relaxed);
    return set ? !(old & bit) : (old & bit) != 0;
}

/* ---- alloc / free ---------------------------------------------------------- */

static int free_bracketed(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p);
static int free_undo(struct dsmpool_area *a, ar_tc *tc, dsmpool_ptr p);

static int alloc_large_op(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                          bool mid, dsmpool_ptr *out) {
    if (size > (1ull << 46)) return dp_fail(-ENOMEM, "%zu bytes is more than any pool holds", size);
    unsigned order = 64u - (unsigned)__builtin_clzll(size - 1) - DP_FRAME_SHIFT;
    /* rule 13: exact to the page, to the size asked for (an aligned request
     * takes the block of its alignment and keeps only what it asked for) */
    uint64_t keep = ((asked ? asked : size) + DP_FRAME_SIZE - 1) / DP_FRAME_SIZE;
    uint64_t e;
    dsmpool_ptr base;
    unsigned place = (flags & DSMPOOL_ALLOC_INTERLEAVE) ? DSMPOOL_SEG_INTERLEAVE : 0;
    int r = acquire(a, tc, AR_LARGE_CLS, order, keep, place, asked, false, mid, &e, &base);
    if (r) return r;
    if (flags & DSMPOOL_ALLOC_ZERO) { /* the pages kept, no more: the rest is the pool's again */
        char *m = ar_addr_n(a, base, keep * DP_FRAME_SIZE);
        if (!m) {
            free_undo(a, tc, base);
            return dp_fail(-ENOMEM, "cannot map the new block's OS segment in this process");
        }
        memset(m, 0, keep * DP_FRAME_SIZE);
    }
    *out = base;
    return 0;
}

/* Rule 13: what a chunk allocation asked for, on this thread's record. */
static inline void count_asked(ar_cache *rec, uint64_t asked, unsigned c) {
    /* relaxed: owner-only counters (rule 1); stats reads them approximately */
    dp_store_relaxed(&rec->asked, dp_load_relaxed(&rec->asked) + asked);
    dp_store_relaxed(&rec->given, dp_load_relaxed(&rec->given) + cls_size(c));
}

/* A chunk of class c at h (mapped at m) leaves the allocator for the
 * caller (both paths, rules 1 and 15): its free tag cleared (rule 9), its
 * checked-mode bit set, zeroed if asked. */
static int chunk_hand_out(struct dsmpool_area *a, ar_tc *tc, unsigned c, dsmpool_ptr h, char *m, size_t size,
                          unsigned flags) {
    memset(m + 8, 0, 8); /* rule 9: an allocated chunk carries no free tag */
    if (a->ctl->flags & DSMPOOL_AREA_CHECKED) {
        ar_loc l;
        if (ar_locate(a, h, &l) == 0 && locate_entry(a, &l))
            checked_flip(a->pool, l.sp, chunk_idx(c, l.off), true);
    }
    if (flags & DSMPOOL_ALLOC_ZERO) {
        if (!(m = ar_addr_n(a, h, size))) {
            free_undo(a, tc, h);
            return dp_fail(-ENOMEM, "cannot map the OS segment of the new chunk in this process");
        }
        memset(m, 0, size);
    }
    return 0;
}

static int alloc_small_op(struct dsmpool_area *area, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                          bool held_only, dsmpool_ptr *out) {
    unsigned c = cls_of(size);
    ar_cache *rec = tc->rec;
    dsmpool_ptr h;
    char *m = NULL;
    for (;;) {
        h = dp_load_relaxed(&rec->head[c]); /* relaxed: only this thread writes it (rule 1) */
        if (h) {
            /* a whole chunk, at a chunk start, or the list is damaged (pool
             * spans start at multiples of their size: data_off is a 2 MiB one;
             * a fallback pointer's offset bits are its span's block's) */
            uint32_t ix;
            m = chunk_at(c, span_rel(c, h), &ix) ? ar_addr_n(area, h, cls_size(c)) : NULL;
            dsmpool_ptr next = 0;
            if (m) memcpy(&next, m, 8);
            /* a link a use-after-free overwrote must not become an address
             * we hand out: the list is dropped (its chunks leak) instead */
            if (!m || (next && !(next & FB_BIT) && !chunk_at(c, span_rel(c, next), &ix))) {
                dp_store_relaxed(&rec->head[c], 0);
                dp_store_relaxed(&rec->count[c], 0);
                if (!m) continue;
                next = 0;
            }
            dp_store_relaxed(&rec->head[c], next);
            dp_store_relaxed(&rec->count[c], dp_load_relaxed(&rec->count[c]) - 1);
            break;
        }
        uint64_t b = dp_load_relaxed(&rec->bump[c]);
        if (BUMP_LEFT(b)) {
            /* the base is ours (process-local); a word that names another span
             * or runs past this one is damaged: drop the range */
            if (__builtin_expect(BUMP_IDX(b) >= cls_chunks(c) || BUMP_E1(b) != tc->span_e1[c], 0)) {
                dp_store_relaxed(&rec->bump[c], 0);
                continue;
            }
            h = tc->span_ptr[c] + chunk_off(c, BUMP_IDX(b));
            dp_store_relaxed(&rec->bump[c], BUMP_TAKE(b));
            m = !(h & FB_BIT) ? area->base + h : ar_addr_n(area, h, 16);
            if (!m) continue;
            break;
        }
        int r = refill(area, tc, c, held_only);
        if (r) return r;
    }
    int r = chunk_hand_out(area, tc, c, h, m, size, flags);
    if (r) return r;
    count_asked(rec, asked, c);
    *out = h;
    return 0;
}

/* ---- the shared path (rule 15) -------------------------------------------- */

/* Rule 15: a chain of free chunks that only we hold could not be put back
 * (a damaged span word or link): its tagged chunks are left for the lost
 * sweep. */
static void chain_lost(struct dsmpool_area *a) { /* (declared above) */
    dp_fetch_add_relaxed(&a->ctl->lost, 1); /* relaxed: ordered by the release below */
    /* release: pairs with sweep_lost's acquire (recover.c) */
    atomic_fetch_add_explicit(&a->pool->hdr->lost_due, 1, memory_order_release);
}

/* Rule 15: put a chain we hold (head index + 1, count chunks, links
 * written) back on span e's stack. Onto an empty stack: one CAS. If others
 * pushed meanwhile, their chain is taken too (one CAS, as a steal), the
 * shorter of the two walked to its tail -- both are ours, nobody writes
 * them -- and linked to the other, and the whole goes back the same way. */
static void chain_return(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, dsmpool_ptr base,
                         uint32_t head, uint32_t count) {
    uint32_t n = cls_chunks(c);
    uint64_t w = dp_load_relaxed(&sp->state); /* relaxed: the CAS validates */
    for (;;) {
        uint32_t theirs = SPW_COUNT(w), th = SPW_HEAD(w);
        if (SPW_ST(w) != SP_SPAN || theirs + count > n || (theirs && (!th || th > n))) {
            chain_lost(a); /* damaged */
            return;
        }
        if (!theirs) {
            uint64_t nw = SPW(SPW_GEN(w) + 1, count, head, SP_SPAN);
            /* release: our chain's links (pairs with the next steal's acquire: refill's, span_take's) */
            if (dp_cas_release(&sp->state, &w, nw)) {
                /* the hint; and a whole span (another class's, given back
                 * whole) is kept or retires as after any push */
                span_pushed(a->pool, a->ctl, a->aid, e, sp, c, 0, nw, a->pool->slot);
                return;
            }
            continue;
        }
        /* acquire: their links */
        if (!dp_cas_acquire(&sp->state, &w, SPW(SPW_GEN(w) + 1, 0, 0, SP_SPAN))) continue;
        dp_fetch_add_relaxed(&a->ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
        uint32_t sh_head = theirs < count ? th : head, sh_n = theirs < count ? theirs : count;
        uint32_t lg_head = theirs < count ? head : th, idx = sh_head;
        char *m = NULL;
        for (uint32_t k = 0; k < sh_n; k++) { /* to the shorter chain's tail */
            if (!idx || idx > n || !(m = ar_addr_n(a, base + chunk_off(c, idx - 1), 4))) {
                chain_lost(a);
                return;
            }
            if (k + 1 < sh_n) memcpy(&idx, m, 4);
        }
        memcpy(m, &lg_head, 4);
        head = sh_head;
        count += theirs;
        w = dp_load_relaxed(&sp->state); /* relaxed: the CAS validates */
    }
}

/* Rule 15: take one chunk of class c off span e's stack: steal the whole
 * stack (one CAS, as a refill does), keep its top, put the rest back. No
 * CAS depends on a link read from a chunk we do not hold, so a stopped
 * thread cannot install a stale link (no ABA). false: the stack is empty,
 * not a span of c, or damaged. */
static bool span_take(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, dsmpool_ptr *cpp,
                      char **mp) {
    uint32_t n = cls_chunks(c);
    uint64_t w = dp_load_relaxed(&sp->state); /* relaxed: the CAS validates */
    for (;;) {
        if (SPW_ST(w) != SP_SPAN || !SPW_COUNT(w) || (dp_load_relaxed(&sp->info) & 0xff) != c) return false;
        if (SPW_COUNT(w) > n || !SPW_HEAD(w) || SPW_HEAD(w) > n) return false; /* damaged: for check() */
        DP_INJECT("area.take.read");
        /* acquire: the pushes' links and tags (span_push's release) */
        if (dp_cas_acquire(&sp->state, &w, SPW(SPW_GEN(w) + 1, 0, 0, SP_SPAN))) break;
    }
    dp_fetch_add_relaxed(&a->ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
    if (!steal_class_holds(a, c, e, sp, w)) return false;
    DP_INJECT("area.take.stolen");
    uint32_t count = SPW_COUNT(w), next = 0;
    dsmpool_ptr base = entry_base(a, e, sp, dp_load_relaxed(&sp->block), c); /* [imm while live] */
    dsmpool_ptr cp = base + chunk_off(c, SPW_HEAD(w) - 1);
    char *m = ar_addr_n(a, cp, 16);
    uint64_t tag = 0;
    if (m) {
        memcpy(&next, m, 4);
        memcpy(&tag, m + 8, 8);
    }
    /* every chunk on a stack carries its tag (rule 11) and the links fit the count */
    if (!m || tag != free_tag(a, cp) || next > n || (count > 1) != (next != 0)) {
        chain_lost(a);
        return false;
    }
    if (count > 1) chain_return(a, c, e, sp, base, next, count - 1);
    *cpp = cp;
    *mp = m;
    return true;
}

/* Rule 15 and rule 12: the kept span goes back (short of memory, flush). */
static void keep_release(struct dsmpool_area *a) {
    ar_ctl *ctl = a->ctl;
    if (!dp_load_relaxed(&ctl->sh_keep)) return; /* relaxed: a first look */
    uint64_t k = atomic_exchange_explicit(&ctl->sh_keep, 0, memory_order_relaxed); /* then the fence */
    atomic_thread_fence(memory_order_seq_cst); /* against span_keep's fence (store buffering) */
    if (k) retire_if_whole(a->pool, ctl, a->aid, k - 1, a->pool->slot);
}

/* Rule 15: a chunk of class c for a thread without a cache record: popped
 * off a span with returned chunks (the last one that served, then the
 * others), else the first chunk of a fresh span whose others go on its
 * stack. Inside a bracket. */
static int shared_alloc_small(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                              bool held_only, dsmpool_ptr *out) {
    unsigned c = cls_of(size);
    ar_ctl *ctl = a->ctl;
    dsmpool_ptr h = 0;
    char *m = NULL;
    uint64_t got = AR_MAX_ENTRIES;
    /* a stack another taker holds for a moment looks empty: look again a
     * few times (a few microseconds) before taking a fresh span (held_only:
     * once, there is no fresh span to avoid) */
    for (int round = 0; round < (held_only ? 1 : 4) && got == AR_MAX_ENTRIES; round++) {
        for (int i = round ? 32 << round : 0; i > 0; i--) dp_cpu_relax();
        if (!dp_load_relaxed(&ctl->partial[c])) continue; /* relaxed: a hint */
        uint64_t start = dp_load_relaxed(&ctl->sh_hint[c]); /* relaxed: a hint */
        if (start >= AR_MAX_ENTRIES) start = 0;
        for (int pass = 0; pass < 2 && got == AR_MAX_ENTRIES; pass++) {
            uint64_t lo = pass ? 0 : start, hi = pass ? start : AR_MAX_ENTRIES;
            for (uint64_t e = entry_next(ctl, lo); e < hi; e = entry_next(ctl, e + 1)) {
                ar_span *sp = ar_entry(a->pool, ctl, e);
                if (sp && span_take(a, c, e, sp, &h, &m)) {
                    got = e;
                    break;
                }
            }
        }
    }
    if (got == AR_MAX_ENTRIES) {
        if (held_only) return -ENOSPC;
        int r = acquire(a, tc, c, cls_span_order(c), cls_keep(c), 0, 0, true, false, &got, &h);
        if (r) return r;
        if (!(m = ar_addr_n(a, h, 16))) return dp_fail(-ENOMEM, "cannot map the new span in this process");
    }
    if (got != dp_load_relaxed(&ctl->sh_hint[c])) dp_store_relaxed(&ctl->sh_hint[c], got); /* relaxed: a hint */
    int r = chunk_hand_out(a, tc, c, h, m, size, flags);
    if (r) return r;
    dp_fetch_add_relaxed(&ctl->sh_asked, asked); /* relaxed: counters (rule 13) */
    dp_fetch_add_relaxed(&ctl->sh_given, cls_size(c));
    *out = h;
    return 0;
}

/* Rule 15: after a shared-path operation, now and then, look for a cache
 * record that has come free. */
static void shared_done(struct dsmpool_area *a, ar_tc *tc) {
    if (++tc->sh_ops % 4096 == 0) tc_take_record(a, tc, false);
}

/* Rule 12 on the shared path: the kept span goes back when asked. Inside a
 * bracket. */
static inline void shared_trim(struct dsmpool_area *a, ar_tc *tc) {
    uint64_t t = dp_load_relaxed(a->trimp); /* relaxed: rule 12 */
    if (__builtin_expect(t != tc->trim_seen, 0)) {
        tc->trim_seen = t;
        keep_release(a);
    }
}

/* Rule 13: what serves an allocation off the hot path: a large block above
 * AR_LARGE_FROM; a mid-size one a chunk of its class that the area already
 * holds (cached, or returned to a span: never a fresh span), else an exact
 * block if the pool has one now and the registry's first half an entry,
 * else its class as every smaller size (shared: rule 15's path, else the
 * thread's cache). */
static int alloc_route(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                       bool shared, dsmpool_ptr *out) {
    if (size > AR_LARGE_FROM) return alloc_large_op(a, tc, size, asked, flags, false, out);
    if (mid_exact(size) && !(a->ctl->flags & DSMPOOL_AREA_MID_CHUNKS)) {
        int r = shared ? shared_alloc_small(a, tc, size, asked, flags, true, out)
                       : alloc_small_op(a, tc, size, asked, flags, true, out);
        if (r == 0) return 0;
        r = alloc_large_op(a, tc, size, asked, flags, true, out);
        if (r == 0 || r == -ESTALE) return r;
    }
    return shared ? shared_alloc_small(a, tc, size, asked, flags, false, out)
                  : alloc_small_op(a, tc, size, asked, flags, false, out);
}

static __attribute__((noinline)) int shared_alloc(struct dsmpool_area *a, ar_tc *tc, size_t size,
                                                  size_t asked, unsigned flags, dsmpool_ptr *out) {
    dp_inflight_begin(a->pool);
    int r;
    if (!area_live(a)) { /* relaxed load after the bracket's acquire RMWs (rule 15) */
        r = dp_fail(-ESTALE, "the area was destroyed");
    } else {
        DP_INJECT("area.shared.checked");
        shared_trim(a, tc);
        r = alloc_route(a, tc, size, asked, flags, true, out);
    }
    dp_inflight_end(a->pool);
    dp_fallback_fire(r); /* segment.c rule 10: after the operation */
    shared_done(a, tc);
    return r;
}

static __attribute__((noinline)) int shared_free(struct dsmpool_area *a, ar_tc *tc, dsmpool_ptr p) {
    dp_inflight_begin(a->pool);
    int r;
    if (area_live(a)) {
        shared_trim(a, tc);
        r = free_bracketed(a, tc, p);
    } else {
        r = dp_fail(-ESTALE, "the area was destroyed");
    }
    dp_inflight_end(a->pool);
    shared_done(a, tc);
    return r;
}

/* dsmpool_area_alloc, telling what the caller asked for (asked <= size:
 * an aligned request asks for less than it takes). */
static inline __attribute__((always_inline)) int area_alloc(dsmpool_area *area, size_t size, size_t asked,
                                                            unsigned flags, dsmpool_ptr *out) {
    if (__builtin_expect(!out, 0)) return dp_fail(-EINVAL, "out must not be NULL");
    *out = 0;
    if (__builtin_expect(!area || area->magic != AR_OBJ_MAGIC, 0)) return dp_fail(-EINVAL, "not an attached area");
    if (__builtin_expect(size == 0, 0)) return dp_fail(-EINVAL, "size 0");
    if (__builtin_expect(flags & ~(DSMPOOL_ALLOC_ZERO | DSMPOOL_ALLOC_INTERLEAVE), 0))
        return dp_fail(-EINVAL, "unknown flags 0x%x", flags);
    ar_tc *tc = tc_get(area);
    if (__builtin_expect(!tc, 0)) return tc_err;
    ar_cache *rec = tc->rec;
    if (__builtin_expect(!rec, 0)) return shared_alloc(area, tc, size, asked, flags, out);
    uint64_t s = op_begin(rec);
    int r;
    if (__builtin_expect(!area_live(area), 0)) {
        r = dp_fail(-ESTALE, "the area was destroyed");
    } else {
        DP_INJECT("area.op.checked");
        /* rule 1, the common case inline: a pool chunk on this thread's list
         * (a trim request is answered on the slow path, or at a free) */
        unsigned c = size <= AR_LARGE_FROM ? cls_of(size) : 0;
        dsmpool_ptr h = size <= AR_LARGE_FROM ? dp_load_relaxed(&rec->head[c]) : 0; /* relaxed: rule 1 */
        uint32_t ix;
        /* h: a pool chunk start of class c (data_off is a 2 MiB multiple) */
        if (__builtin_expect(h && !(h & FB_BIT) && chunk_at(c, span_rel(c, h), &ix) && !flags &&
                                 !(area->ctl->flags & DSMPOOL_AREA_CHECKED) &&
                                 h - area->data_off <= area->data_size - cls_size(c), 1)) {
            char *m = area->base + h;
            dsmpool_ptr next;
            memcpy(&next, m, 8);
            /* the link is tested in full when it is popped in turn (above,
             * or alloc_small_op, which drops a damaged list): here only
             * what costs no multiply */
            if (__builtin_expect(!(next & (AR_MIN_ALIGN - 1)), 1)) {
                dp_store_relaxed(&rec->head[c], next);
                dp_store_relaxed(&rec->count[c], dp_load_relaxed(&rec->count[c]) - 1);
                memset(m + 8, 0, 8); /* rule 9: an allocated chunk carries no free tag */
                count_asked(rec, asked, c);
                *out = h;
                op_end(rec, s);
                return 0;
            }
        }
        if (dp_load_relaxed(area->trimp) != tc->trim_seen) trim_answer(area, tc); /* relaxed: rule 12 */
        r = alloc_route(area, tc, size, asked, flags, false, out);
    }
    op_end(rec, s);
    dp_fallback_fire(r); /* segment.c rule 10: after the operation */
    return r;
}

int dsmpool_area_alloc(dsmpool_area *area, size_t size, unsigned flags, dsmpool_ptr *out) {
    return area_alloc(area, size, size, flags, out);
}

/* Rule 9: why the tag of p is intact -- for the message only. */
static const char *double_free_where(struct dsmpool_area *area, ar_tc *tc, ar_loc *l, dsmpool_ptr p) {
    ar_cache *rec = tc ? tc->rec : NULL;
    dsmpool_ptr h = rec ? dp_load_relaxed(&rec->head[l->cls]) : 0;
    for (uint64_t k = rec ? dp_load_relaxed(&rec->count[l->cls]) + 1 : 0; h && k; k--) {
        if (h == p) return "it is in this thread's cache";
        char *m = ar_addr_n(area, h, 8);
        if (!m) break;
        memcpy(&h, m, 8);
    }
    ar_span *sp = locate_entry(area, l);
    if (sp) {
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: span_push's release */
        uint32_t idx = SPW_HEAD(w), want = chunk_idx(l->cls, l->off) + 1;
        for (uint32_t k = SPW_COUNT(w); idx && k && idx <= cls_chunks(l->cls); k--) {
            if (idx == want) return "it is back on its span";
            char *m = ar_addr_n(area, l->span + chunk_off(l->cls, idx - 1), 4);
            if (!m) break;
            memcpy(&idx, m, 4);
        }
    }
    return "its free tag is intact (freed by another thread or process)";
}

/* The first half of every free, on either path: p must be this area's and
 * the start of a live allocation. A large block is given back here (1). A
 * chunk (0) passed the double-free tests (rule 9; checked mode: its bit is
 * cleared now) and is left to the caller's push: where it is in *l and
 * *idx, its address in *m, the free tag it is to carry in *tag. < 0:
 * refused, with the message. */
static int free_check(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p, ar_loc *l, uint32_t *idx, char **mp,
                      uint64_t *tagp) {
    if (ar_locate(area, p, l) != 0)
        return dp_fail(-EINVAL, "%016llx does not point into this area (another area's, or "
                       "never allocated)", (unsigned long long)p);
    if (l->cls == AR_LARGE_CLS) {
        uint64_t w = dp_load_acquire(&l->sp->state); /* acquire: the entry's publication */
        if (SPW_ST(w) != SP_LARGE || l->off != 0)
            return dp_fail(-EINVAL, "%016llx is not the start of a live block (double free?)",
                           (unsigned long long)p);
        if (!entry_take_from(l->sp, &w, area->pool->slot))
            return dp_fail(-EINVAL, "%016llx was freed by someone else at the same time",
                           (unsigned long long)p);
        entry_release(area->pool, area->ctl, area->aid, l->e, l->sp, w, area->pool->slot);
        return 1;
    }
    if (!chunk_at(l->cls, l->off, idx))
        return dp_fail(-EINVAL, "%016llx is not the start of a chunk", (unsigned long long)p);
    char *m = ar_addr_n(area, p, 16);
    if (!m) /* an OS segment this process cannot map (its name is gone: the pool was destroyed) */
        return dp_fail(-ESTALE, "%016llx is in an OS segment that cannot be mapped here",
                       (unsigned long long)p);
    if ((area->ctl->flags & DSMPOOL_AREA_CHECKED) &&
        (!locate_entry(area, l) || !checked_flip(area->pool, l->sp, *idx, false)))
        return dp_fail(-EINVAL, "%016llx is not allocated (double free)", (unsigned long long)p);
    uint64_t tag = free_tag(area, p), have;
    memcpy(&have, m + 8, 8);
    if (__builtin_expect(have == tag, 0))
        return dp_fail(-EINVAL, "double free of %016llx: %s", (unsigned long long)p,
                       double_free_where(area, tc, l, p));
    *mp = m;
    *tagp = tag;
    return 0;
}

/* Free, inside an operation on tc->rec: a chunk goes on this thread's list
 * (list_push_op); everything but the inlined common case of
 * dsmpool_area_free, and every error message. */
static int free_op(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p) {
    ar_loc l;
    uint32_t idx;
    char *m;
    uint64_t tag;
    int r = free_check(area, tc, p, &l, &idx, &m, &tag);
    if (r) return r < 0 ? r : 0;
    list_push_op(area, tc->rec, l.cls, p, m, tag);
    return 0;
}

/* Free, inside a shared-path bracket (tc has no record, rule 15): a chunk
 * goes straight back to its span, tagged before it leaves us (rule 11). */
static int free_bracketed(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p) {
    ar_loc l;
    uint32_t idx;
    char *m;
    uint64_t tag;
    int r = free_check(area, tc, p, &l, &idx, &m, &tag);
    if (r) return r < 0 ? r : 0;
    if (!locate_entry(area, &l))
        return dp_fail(-EINVAL, "%016llx: its span's entry is gone (damaged area)", (unsigned long long)p);
    memcpy(m + 8, &tag, 8);
    DP_INJECT("area.free.linked");
    span_push(area->pool, area->ctl, area->aid, l.e, l.sp, l.cls, idx, m, area->pool->slot);
    return 0;
}

/* An allocation this call made and cannot hand out (its OS segment cannot
 * be mapped here) goes back: inside the operation on tc->rec, or without a
 * record inside the shared-path bracket, that made it. */
static int free_undo(struct dsmpool_area *a, ar_tc *tc, dsmpool_ptr p) {
    return tc->rec ? free_op(a, tc, p) : free_bracketed(a, tc, p);
}

int dsmpool_area_free(dsmpool_area *area, dsmpool_ptr p) {
    if (__builtin_expect(!area || area->magic != AR_OBJ_MAGIC, 0)) return dp_fail(-EINVAL, "not an attached area");
    if (__builtin_expect(!p, 0)) return dp_fail(-EINVAL, "free of the null pointer");
    ar_tc *tc = tc_get(area);
    if (__builtin_expect(!tc, 0)) return tc_err;
    ar_cache *rec = tc->rec;
    if (__builtin_expect(!rec, 0)) return shared_free(area, tc, p);
    uint64_t s = op_begin(rec);
    int r;
    if (__builtin_expect(!area_live(area), 0)) {
        r = dp_fail(-ESTALE, "the area was destroyed");
    } else {
        DP_INJECT("area.op.checked");
        if (__builtin_expect(dp_load_relaxed(area->trimp) != tc->trim_seen, 0)) /* relaxed: rule 12 */
            trim_answer(area, tc);
        /* rule 1, the common case inline: a pool chunk of this area, at a
         * chunk start, in an unchecked area, its tag not set (rule 9) */
        uint64_t rel = p - area->data_off;
        if (__builtin_expect(!(p & FB_BIT) && rel < area->data_size && !(area->ctl->flags & DSMPOOL_AREA_CHECKED), 1)) {
            /* acquire: pairs with dir_set */
            uint64_t dw = dp_load_acquire(&area->pool->dir[rel >> AR_DIR_SHIFT]);
            unsigned c = DIRW_CLS(dw);
            uint32_t ix;
            /* a large block's class, or a damaged one, has no chunks: chunk_at fails */
            if (__builtin_expect(DIRW_AID(dw) == area->aid && chunk_at(c, span_rel(c, rel), &ix) &&
                                     rel <= area->data_size - cls_size(c), 1)) {
                char *m = area->base + p;
                uint64_t tag = free_tag(area, p), have;
                memcpy(&have, m + 8, 8);
                if (__builtin_expect(have != tag, 1)) {
                    list_push_op(area, rec, c, p, m, tag);
                    op_end(rec, s);
                    return 0;
                }
            }
        }
        r = free_op(area, tc, p); /* everything else, and every error message */
    }
    op_end(rec, s);
    return r;
}

int dsmpool_area_flush(dsmpool_area *area) {
    if (!area || area->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    ar_tc *tc = tc_get(area);
    if (!tc) return tc_err;
    if (!tc->rec) { /* rule 15: the shared path caches only the kept span */
        dp_inflight_begin(area->pool);
        int r = area_live(area) ? 0 : dp_fail(-ESTALE, "the area was destroyed");
        if (!r) keep_release(area);
        dp_inflight_end(area->pool);
        return r;
    }
    uint64_t s = op_begin(tc->rec);
    int r = area_live(area) ? 0 : dp_fail(-ESTALE, "the area was destroyed");
    if (r == 0) cache_answer(area, tc);
    op_end(tc->rec, s);
    return r;
}


/* ---- sizes, addresses, alignment, resizing (rule 14) ------------------------- */

/* Checked mode: is chunk idx's bit set (allocated)? Reads only. */
static bool checked_test(dsmpool *p, ar_span *sp, uint32_t idx) {
    uint64_t info = dp_load_relaxed(&sp->info), bm = info_bitmap(info);
    unsigned c = (unsigned)(info & 0xff);
    if (!bm || !dp_block_ok(p, bm, (uint64_t)DP_FRAME_SIZE << cls_bm_order(c)) || idx >= cls_chunks(c)) return true;
    /* relaxed: the bitmap orders nothing, it only remembers */
    return (dp_load_relaxed((dp_a64 *)dp_at(p, bm) + idx / 64) >> (idx % 64)) & 1;
}

/* The live allocation that holds pointer p (any byte of it): its usable
 * bytes, and its start in *start; 0 when none. Reads only, every word
 * validated; outside any operation, so an allocation freed meanwhile may be
 * answered either way (as for free(), a caller's race). */
static uint64_t live_alloc(struct dsmpool_area *a, dsmpool_ptr p, dsmpool_ptr *start, ar_loc *l) {
    if (!p || ar_locate(a, p, l) != 0 || !locate_entry(a, l)) return 0;
    uint64_t w = dp_load_acquire(&l->sp->state); /* acquire: the entry's publication */
    uint64_t blk = dp_load_relaxed(&l->sp->block);
    bool fb = (p & FB_BIT) != 0;
    if (fb != (blk == DP_BLOCK_FALLBACK)) return 0;
    if (!fb && (!blk || DP_BLOCK_ORDER(blk) > DP_PA_MAX_ORDER)) return 0;
    if (l->cls == AR_LARGE_CLS) {
        if (SPW_ST(w) != SP_LARGE) return 0;
        uint64_t bytes = fb ? dp_seg_os_size(a->pool, dp_load_relaxed(&l->sp->seg))
                            : entry_block_bytes(l->sp, blk);
        if ((!fb && DP_BLOCK_OFF(blk) != l->span) || l->off >= bytes) return 0;
        *start = l->span;
        return bytes;
    }
    if (SPW_ST(w) != SP_SPAN || (dp_load_relaxed(&l->sp->info) & 0xff) != l->cls) return 0;
    if (!fb && DP_BLOCK_OFF(blk) != l->span) return 0; /* a directory word racing a retirement */
    uint64_t idx = l->off < cls_span(l->cls) ? chunk_idx(l->cls, l->off) : UINT64_MAX; /* any byte of the chunk */
    if (idx >= cls_chunks(l->cls)) return 0;
    dsmpool_ptr c = l->span + chunk_off(l->cls, idx);
    char *m = ar_addr_n(a, c, 16);
    if (!m) return 0;
    uint64_t have;
    memcpy(&have, m + 8, 8);
    if (have == free_tag(a, c)) return 0; /* freed (rule 9) */
    if ((a->ctl->flags & DSMPOOL_AREA_CHECKED) && !checked_test(a->pool, l->sp, (uint32_t)idx)) return 0;
    *start = c;
    return cls_size(l->cls);
}

/* The relocatable pointer of local address u in this process's mapping of
 * one of the area's OS segments (current ones only); 0 if none. */
static dsmpool_ptr fb_ptr_of(struct dsmpool_area *a, uintptr_t u) {
    if (!a->tag) return 0;
    for (unsigned i = 0; i < AR_MAX_ENTRIES / 512; i++) {
        _Atomic(ar_fb *) *page = __atomic_load_n(&a->fb[i], __ATOMIC_ACQUIRE); /* pairs with fb_remember */
        if (!page) continue;
        for (unsigned k = 0; k < 512; k++) {
            ar_fb *r = atomic_load_explicit(&page[k], memory_order_acquire); /* pairs with fb_remember */
            if (!r || u < (uintptr_t)r->base || u - (uintptr_t)r->base >= r->len) continue;
            uint64_t e = (uint64_t)i * 512 + k;
            /* a record of a segment the entry no longer holds names nothing */
            return fb_lookup(a, e) == r && r->len <= FB_MAX_SEG
                       ? FB_PTR(a->tag, e, ((uint64_t)r->chk << r->nb) | (u - (uintptr_t)r->base))
                       : 0;
        }
    }
    return 0;
}

/* The checks every call below starts with. */
static int area_query_ok(struct dsmpool_area *a) {
    if (!a || a->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    int r = area_usable(a);
    if (r) return r;
    if (dp_load_acquire(&a->ctl->state) != AR_LIVE) /* acquire: pairs with destroy_explicit's mark */
        return dp_fail(-ESTALE, "the area was destroyed");
    return 0;
}

size_t dsmpool_area_usable_size(dsmpool_area *area, dsmpool_ptr p) {
    if (area_query_ok(area)) return 0;
    ar_loc l;
    dsmpool_ptr start = 0;
    uint64_t n = live_alloc(area, p, &start, &l);
    if (!n || start != p) {
        dp_fail(-EINVAL, "%016llx is not the start of a live allocation of this area", (unsigned long long)p);
        return 0;
    }
    return (size_t)n;
}

dsmpool_ptr dsmpool_area_ptr_of(dsmpool_area *area, const void *addr) {
    if (area_query_ok(area)) return 0;
    uintptr_t u = (uintptr_t)addr, b = (uintptr_t)area->base;
    dsmpool_ptr p = u >= b + area->data_off && u - b - area->data_off < area->data_size ? u - b
                                                                                         : fb_ptr_of(area, u);
    ar_loc l;
    dsmpool_ptr start;
    if (!p || !live_alloc(area, p, &start, &l)) {
        dp_fail(-EINVAL, "%p is not inside a live allocation of this area", addr);
        return 0;
    }
    return p;
}

int dsmpool_area_alloc_aligned(dsmpool_area *area, size_t size, size_t align, unsigned flags,
                               dsmpool_ptr *out) {
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = 0;
    if (!align || (align & (align - 1)))
        return dp_fail(-EINVAL, "alignment %zu is not a power of two", align);
    if (align > DSMPOOL_AREA_MAX_ALIGN)
        return dp_fail(-EINVAL, "alignment %zu is more than the %zu bytes an area promises in every "
                       "process (DSMPOOL_AREA_MAX_ALIGN)", align, (size_t)DSMPOOL_AREA_MAX_ALIGN);
    /* rule 14: a chunk of class c is aligned to the largest power of two
     * dividing its size; take the first class at or above max(size, align)
     * whose size align divides (the power of two at or above it always
     * does, within seven classes); a block is aligned to its power of two */
    size_t want = size && size < align ? align : size;
    if (want && want <= AR_LARGE_FROM) {
        unsigned c = cls_of(want);
        while (cls_size(c) & (align - 1)) c++;
        want = cls_size(c); /* cls_of(want) == c */
    }
    return area_alloc(area, want, size, flags, out);
}

/* Rule 13: a large pool block grows in place when the tail it gave back is
 * still free: reserve the bytes, take the frames back (palloc.c rule 7),
 * name them in the directory, then publish the longer block word. Inside
 * an area operation (so a destroyer waits for it, and a death inside makes
 * the lost sweep due, which sets held right) and one bracket (frames taken
 * and not yet published go to the leak sweep). */
static bool large_grow_op(struct dsmpool_area *a, ar_loc *l, size_t size) {
    dsmpool *p = a->pool;
    /* acquire: the entry's publication; a block freed meanwhile (by another
     * thread: a caller's race, as for free()) is not grown */
    uint64_t w = dp_load_acquire(&l->sp->state);
    uint64_t blk = dp_load_relaxed(&l->sp->block);
    /* an exact pool block (not an OS segment's) that agrees with its record */
    uint64_t have = entry_block_bytes(l->sp, blk), want = (size + DP_FRAME_SIZE - 1) / DP_FRAME_SIZE * DP_FRAME_SIZE;
    if (SPW_ST(w) != SP_LARGE || !(blk & DP_BLOCK_EXACT) || !have ||
        DP_BLOCK_OFF(blk) != l->span || want > (uint64_t)DP_FRAME_SIZE << DP_BLOCK_ORDER(blk) ||
        held_reserve(a->ctl, want - have) != 0)
        return false;
    dp_inflight_begin(p);
    uint64_t nb = dp_pool_grow(p, blk, want / DP_FRAME_SIZE);
    DP_INJECT("area.grow.taken");
    if (nb) {
        dir_set(p, DP_BLOCK_OFF(nb) + have, DP_BLOCK_BYTES(nb) - have, DIRW(a->aid, l->e, AR_LARGE_CLS));
        /* the record says "up to the new frames" while the word changes: a
         * death in between leaves the old word, still agreed with, and the
         * frames taken owned by nothing (the sweep's) */
        dp_store_relaxed(&l->sp->seg, dp_block_frames(nb) | AR_SEG_GROWING);
        dp_store_release(&l->sp->block, nb); /* release: the frames are ours before it says so */
        dp_store_release(&l->sp->seg, dp_block_frames(nb)); /* release: after the word */
    }
    if (!nb || DP_BLOCK_BYTES(nb) != want) /* relaxed: a counter */
        dp_fetch_add_relaxed(&a->ctl->held, (nb ? DP_BLOCK_BYTES(nb) : have) - want);
    dp_inflight_end(p);
    return nb != 0;
}

static bool large_grow(struct dsmpool_area *a, ar_loc *l, size_t size) {
    ar_tc *tc = tc_get(a);
    if (!tc) return false;
    bool grown = false;
    if (tc->rec) {
        uint64_t s = op_begin(tc->rec);
        if (area_live(a)) grown = large_grow_op(a, l, size);
        op_end(tc->rec, s);
    } else { /* rule 15: the operation is a bracket */
        dp_inflight_begin(a->pool);
        if (area_live(a)) grown = large_grow_op(a, l, size);
        dp_inflight_end(a->pool);
        shared_done(a, tc);
    }
    return grown;
}

int dsmpool_area_realloc(dsmpool_area *area, dsmpool_ptr *p, size_t size, unsigned flags) {
    if (!p) return dp_fail(-EINVAL, "p must not be NULL");
    if (flags & ~(DSMPOOL_ALLOC_ZERO | DSMPOOL_ALLOC_INTERLEAVE)) return dp_fail(-EINVAL, "unknown flags 0x%x", flags);
    if (!*p) return dsmpool_area_alloc(area, size, flags, p);
    if (size == 0) return dp_fail(-EINVAL, "size 0 (free the allocation with dsmpool_area_free)");
    int r = area_query_ok(area);
    if (r) return r;
    ar_loc l;
    dsmpool_ptr start = 0, old = *p, np;
    uint64_t have = live_alloc(area, old, &start, &l);
    if (!have || start != old)
        return dp_fail(-EINVAL, "%016llx is not the start of a live allocation of this area", (unsigned long long)old);
    bool grown = size > have && l.cls == AR_LARGE_CLS && large_grow(area, &l, size);
    if (size <= have || grown) { /* rule 14: in place */
        /* relaxed: the block's owner is the only writer; stats read it approximately */
        if (l.cls == AR_LARGE_CLS) dp_store_relaxed(&l.sp->info, AR_INFO_LARGE(size));
        char *m = grown && (flags & DSMPOOL_ALLOC_ZERO) ? ar_addr_n(area, old, size) : NULL;
        if (m) memset(m + have, 0, size - have); /* pool memory: always mapped */
        return 0;
    }
    if ((r = dsmpool_area_alloc(area, size, flags & ~DSMPOOL_ALLOC_ZERO, &np)) != 0) return r;
    char *src = ar_addr_n(area, old, have), *dst = ar_addr_n(area, np, size);
    if (!src || !dst) {
        dsmpool_area_free(area, np);
        return dp_fail(-ESTALE, "an OS segment of %016llx cannot be mapped in this process",
                       (unsigned long long)(src ? np : old));
    }
    memcpy(dst, src, have);
    if (flags & DSMPOOL_ALLOC_ZERO) memset(dst + have, 0, size - have);
    if ((r = dsmpool_area_free(area, old)) != 0) { /* freed by someone else meanwhile */
        char why[256];
        snprintf(why, sizeof why, "%s", dsmpool_last_error());
        dsmpool_area_free(area, np);
        return dp_fail(r, "%s", why);
    }
    *p = np;
    return 0;
}

/* ---- lifetime --------------------------------------------------------------- */

/* Rules 5 and 6: give back every entry that can be given back now. final:
 * the last reference went (nobody is attached, no operation can run): take
 * everything. Otherwise an INIT or RETIRED entry whose owner lives is left
 * to its owner (INIT ones marked DOOMED). */
static void release_entries(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint32_t me, bool final) {
    for (uint32_t k = 0; k < AR_REGPAGES; k++) {
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: the link CAS */
        if (!off || !dp_block_ok(p, off, DP_FRAME_SIZE)) continue;
        ar_span *pg = dp_at(p, off);
        for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
            ar_span *sp = &pg[i];
            uint64_t e = (uint64_t)k * AR_PER_PAGE + i;
            uint64_t w = dp_load_acquire(&sp->state); /* acquire: the entry's publication */
            for (int tries = 0; tries < 64; tries++) { /* until it is given back or not ours to take */
                unsigned st = SPW_ST(w);
                if (st == SP_FREE || st > SP_RETIRED) break;
                bool owned = st == SP_INIT || st == SP_RETIRED;
                if (owned && !final && dp_slot_alive(p, SPW_OWNER(w))) {
                    if (st == SP_INIT && !(w & SPW_DOOMED) && !dp_cas_acq_rel(&sp->state, &w, w | SPW_DOOMED))
                        continue; /* acq_rel: the owner's publishing CAS fails from here on */
                    break;
                }
                if (entry_take_from(sp, &w, me)) {
                    entry_release(p, ctl, aid, e, sp, w, me);
                    break;
                }
            }
        }
    }
    for (unsigned c = 0; c < AR_NCLS; c++) dp_store_relaxed(&ctl->partial[c], 0);
}

/* Rule 6: wait until no operation on this area runs, other than ones of
 * dead threads. false: one still ran when the bound passed. */
static bool caches_quiesce(dsmpool *p, ar_ctl *ctl, ar_cache *mine) {
    uint64_t deadline = dp_os_now_ns() + AR_QUIESCE_NS;
    for (uint32_t i = 0; i < AR_NCACHES; i++) {
        ar_cache *rec = cache_rec(p, ctl, i);
        if (!rec || rec == mine) continue; /* (a page linked after the mark: its claims see DESTROYED) */
        for (unsigned spin = 0;; spin++) {
            uint64_t o = dp_load_acquire(&rec->owner);  /* acquire: pairs with cache_claim's CAS */
            uint64_t s = dp_load_acquire(&rec->seq);    /* acquire: pairs with op_end's release */
            if (!o || !(s & 1) || !dp_slot_alive(p, (uint32_t)o - 1)) break;
            if (dp_os_now_ns() > deadline) return false;
            if (spin > 64) dp_os_yield();
            else dp_cpu_relax();
        }
    }
    return true;
}

static void destroy_explicit(struct dsmpool_area *a) {
    dsmpool *p = a->pool;
    ar_ctl *ctl = a->ctl;
    dp_inflight_begin(p);
    uint64_t live = AR_LIVE;
    /* acq_rel: one destroyer; its writes below come after the mark */
    if (dp_cas_acq_rel(&ctl->state, &live, AR_DESTROYED)) {
        /* seq_cst fence: the mark before our reads of the owners, against a
         * claimer's seq_cst fence between its claim and its first state read
         * (when nobody else holds a record we skip membarrier, rule 6) */
        atomic_thread_fence(memory_order_seq_cst);
        DP_INJECT("area.destroy.marked");
        ar_cache *mine = tc_find(a);
        bool shared = dp_load_relaxed(&ctl->shared) != 0; /* relaxed: after the fence (rule 15) */
        bool others = shared;
        for (uint32_t i = 0; i < AR_NCACHES && !others; i++) {
            ar_cache *rec = cache_rec(p, ctl, i);
            others = rec && rec != mine && dp_load_relaxed(&rec->owner) != 0;
        }
        /* rule 6: without the barrier we cannot know that a late operation
         * sees DESTROYED, so we release nothing (the last reference will) */
        bool safe = !others || dp_os_membarrier_global() == 0;
        /* rule 15: shared-path operations are brackets: wait for those too */
        if (safe && caches_quiesce(p, ctl, mine) &&
            (!shared || dp_brackets_quiesce(p, dp_os_now_ns() + AR_QUIESCE_NS)))
            release_entries(p, ctl, a->aid, p->slot, false);
    }
    dp_inflight_end(p);
}

/* The segment layer's hook: the control segment's last reference is gone
 * (rule 6, final). Works from the pool and the control block alone, in any
 * process (a recoverer's included). Idempotent. */
static void area_final(dsmpool *p, void *ctlp, uint64_t bytes, uint64_t aid, uint32_t owner) {
    ar_ctl *ctl = ctlp;
    if (bytes < sizeof(ar_ctl) || ctl->magic != AR_MAGIC) return;
    dp_store_release(&ctl->state, AR_DESTROYED); /* release: pairs with dp_area_live's acquire */
    release_entries(p, ctl, aid, owner, true);
    for (uint32_t k = 0; k < AR_REGPAGES; k++) {
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: the link CAS */
        if (!off) continue;
        dp_inflight_begin(p);
        dp_store_release(&ctl->regpage[k], 0); /* unrecord, then free */
        if (dp_block_ok(p, off, DP_FRAME_SIZE)) dp_pool_free(p, DP_BLOCK_MK(off, 0));
        dp_inflight_end(p);
    }
    for (uint32_t k = 0; k < AR_RECPAGES; k++) { /* the cache records: nobody holds one now */
        uint64_t off = dp_load_acquire(&ctl->recpage[k]); /* acquire: the link CAS */
        if (!off) continue;
        dp_inflight_begin(p);
        dp_store_release(&ctl->recpage[k], 0); /* unrecord, then free */
        if (dp_block_ok(p, off, AR_RECPAGE_BYTES)) dp_pool_free(p, DP_BLOCK_MK(off, AR_RECPAGE_ORDER));
        dp_inflight_end(p);
    }
    dp_area_tag_free(p, ctl->tag);
}

/* Fallback pointers carry a 14-bit tag naming their area; tags come from a
 * pool-wide bitmap so that no two live areas share one (a pointer of one
 * area is then always refused by another). 0: none left; the area then
 * uses no OS segments. */
static uint32_t tag_alloc(dsmpool *p) {
    for (unsigned w = 0; w < 256; w++) {
        uint64_t v = dp_load_relaxed(&p->hdr->area_tags[w]); /* relaxed: the CAS validates */
        while (~v) {
            unsigned b = (unsigned)__builtin_ctzll(~v);
            uint32_t tag = w * 64 + b + 1;
            if (tag > 0x3fff) return 0;
            /* acq_rel: pairs with dp_area_tag_free */
            if (dp_cas_acq_rel(&p->hdr->area_tags[w], &v, v | (1ull << b))) return tag;
        }
    }
    return 0;
}

static ar_ctl *ctl_of(dsmpool *p, uint64_t idx) {
    ar_ctl *ctl = dp_seg_area_ctl(p, idx, sizeof(ar_ctl));
    return ctl && ctl->magic == AR_MAGIC && ctl->ncaches == AR_NCACHES ? ctl : NULL;
}

/* The leak sweep (recover.c rule 3), inside its quiet window: a tag that
 * no area's control block names was taken by a creator that died before
 * writing it down. */
void dp_area_sweep_tags(dsmpool *p) {
    uint64_t used[256] = {0};
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = ctl_of(p, idx);
        if (ctl && ctl->tag >= 1 && ctl->tag <= 0x3fff) used[(ctl->tag - 1) / 64] |= 1ull << ((ctl->tag - 1) % 64);
    }
    for (unsigned w = 0; w < 256; w++) {
        uint64_t stray = dp_load_relaxed(&p->hdr->area_tags[w]) & ~used[w]; /* relaxed: quiet */
        if (stray) atomic_fetch_and_explicit(&p->hdr->area_tags[w], ~stray, memory_order_acq_rel); /* acq_rel: tag_alloc */
    }
}

void dp_area_tag_free(dsmpool *p, uint32_t tag) {
    if (!tag || tag > 0x3fff) return;
    atomic_fetch_and_explicit(&p->hdr->area_tags[(tag - 1) / 64], ~(1ull << ((tag - 1) % 64)),
                              memory_order_acq_rel); /* acq_rel: pairs with tag_alloc */
}

/* fork() while another thread holds one of these locks must not leave the
 * child with it held: take them all around fork (registry, then areas;
 * rank DP_RANK_AREAS of the ledger's table). */
static void ar_prepare(void) {
    pthread_mutex_lock(&ar_reg_lock);
    for (struct dsmpool_area *a = ar_reg; a; a = a->reg_next) pthread_mutex_lock(&a->lock);
}

static void ar_after(void) {
    for (struct dsmpool_area *a = ar_reg; a; a = a->reg_next) pthread_mutex_unlock(&a->lock);
    pthread_mutex_unlock(&ar_reg_lock);
}

/* After a fork that skipped the atfork handlers (proc.c rule 4). */
static void ar_reset(void) {
    pthread_mutex_init(&ar_reg_lock, NULL);
    for (struct dsmpool_area *a = ar_reg; a; a = a->reg_next) pthread_mutex_init(&a->lock, NULL);
}

static const dp_fork_ops ar_fork = {DP_RANK_AREAS, ar_prepare, ar_after, ar_after, ar_reset};

/* Rule 12 for the segment layer (its trim hook): this thread's caches of
 * every area of pool p give back now -- but one that an operation of this
 * thread has open (its caller drained it; a nested operation would end it). */
static void area_trim_thread(dsmpool *p) {
    if (pthread_mutex_trylock(&ar_reg_lock) != 0) return; /* (held by this thread: not now) */
    unsigned e = dp_epoch();
    for (ar_tc *tc = tc_head; tc; tc = tc->tnext) {
        struct dsmpool_area *a = atomic_load_explicit(&tc->area, memory_order_relaxed);
        /* relaxed: this thread is the record's only writer */
        if (!a || a->pool != p || tc->epoch != e) continue;
        if (!tc->rec) { /* rule 15: the kept span, inside a bracket */
            dp_inflight_begin(p);
            if (area_live(a)) keep_release(a);
            dp_inflight_end(p);
            continue;
        }
        if (dp_load_relaxed(&tc->rec->seq) & 1) continue; /* relaxed: this thread is its only writer */
        uint64_t s = op_begin(tc->rec);
        if (area_live(a)) cache_answer(a, tc);
        op_end(tc->rec, s);
    }
    pthread_mutex_unlock(&ar_reg_lock);
}

void dp_area_layer_init(void) {
    dp_seg_set_area_hook(area_final);
    dp_seg_set_trim_hook(area_trim_thread);
    dp_ledger_on_fork(&ar_fork);
}

static void area_register(struct dsmpool_area *a) {
    pthread_mutex_lock(&ar_reg_lock);
    a->reg_next = ar_reg;
    ar_reg = a;
    pthread_mutex_unlock(&ar_reg_lock);
}

static bool area_unregister(struct dsmpool_area *a) {
    bool found = false;
    unsigned e = dp_epoch();
    pthread_mutex_lock(&ar_reg_lock);
    for (struct dsmpool_area **pp = &ar_reg; *pp; pp = &(*pp)->reg_next)
        if (*pp == a) {
            *pp = a->reg_next;
            found = true;
            break;
        }
    if (found) { /* this process's thread caches on it go back */
        /* ar_reg_lock alone keeps the list still (adding and freeing a tc
         * take it); a->lock is not held, since a release may map an OS
         * segment (fb_remember takes a->lock) */
        ar_tc *tcs = a->tcs;
        for (ar_tc *tc = tcs, *next; tc; tc = next) {
            next = tc->anext;
            if (tc->epoch == e && tc->rec) cache_release(a, tc->rec, a->pool->slot);
            atomic_store_explicit(&tc->area, NULL, memory_order_relaxed); /* its thread frees tc */
            tc->anext = tc->aprev = NULL;
        }
        pthread_mutex_lock(&a->lock);
        a->tcs = NULL;
        pthread_mutex_unlock(&a->lock);
    }
    pthread_mutex_unlock(&ar_reg_lock);
    return found;
}

static void area_free_local(struct dsmpool_area *a);

/* dsmpool_detach: this process's areas of the pool go first (their thread
 * caches are released; their control segments go with the pool's). */
void dp_area_detach_pool(dsmpool *pool) {
    for (;;) {
        pthread_mutex_lock(&ar_reg_lock);
        struct dsmpool_area *a = ar_reg;
        while (a && a->pool != pool) a = a->reg_next;
        pthread_mutex_unlock(&ar_reg_lock);
        if (!a) return;
        if (area_unregister(a)) area_free_local(a);
    }
}

/* The process-local fields of an area object for control block ctl. */
static void area_fill(struct dsmpool_area *a, dsmpool *pool, ar_ctl *ctl, uint64_t aid) {
    a->magic = AR_OBJ_MAGIC;
    a->pool = pool;
    a->ctl = ctl;
    a->aid = aid;
    a->tag = ctl->tag & 0x3fff;
    a->key = ctl->key;
    a->trimp = &pool->hdr->trim;
    a->base = pool->base;
    a->data_off = pool->geo.data_off;
    a->data_size = pool->geo.data_size;
    pthread_mutex_init(&a->lock, NULL);
}

static struct dsmpool_area *area_new(dsmpool *pool, dsmpool_seg *seg) {
    struct dsmpool_area *a = dp_obj_new(DP_OBJ_AREA, sizeof *a);
    if (!a) return NULL;
    a->seg = seg;
    a->handle = dsmpool_seg_handle(seg);
    area_fill(a, pool, dsmpool_seg_address(seg), DP_HANDLE_IDX(a->handle) + 1);
    return a;
}

/* Unmap this process's mappings of fallback entries. */
static void area_free_fb(struct dsmpool_area *a) {
    for (unsigned i = 0; i < AR_MAX_ENTRIES / 512; i++) {
        _Atomic(ar_fb *) *page = a->fb[i];
        if (!page) continue;
        for (unsigned k = 0; k < 512; k++) {
            ar_fb *r = atomic_load_explicit(&page[k], memory_order_relaxed);
            if (r) {
                dp_os_unmap(r->base, r->len);
                free(r);
            }
        }
        free(page);
        a->fb[i] = NULL;
    }
    for (ar_fb *r = a->fb_retired, *next; r; r = next) {
        next = r->retired;
        dp_os_unmap(r->base, r->len);
        free(r);
    }
    a->fb_retired = NULL;
    pthread_mutex_destroy(&a->lock);
}

static void area_free_local(struct dsmpool_area *a) {
    area_free_fb(a);
    dp_obj_end(DP_OBJ_AREA, a); /* (writes 0 over the magic) */
}

/* The process-local object for an attached control segment. */
static int area_open(dsmpool *pool, dsmpool_seg *seg, dsmpool_area **out) {
    struct dsmpool_area *a = area_new(pool, seg);
    if (!a) {
        dsmpool_seg_detach(seg);
        return dp_fail(-ENOMEM, "out of memory");
    }
    area_register(a);
    *out = a;
    return 0;
}

int dsmpool_area_create(dsmpool *pool, unsigned flags, dsmpool_area **out) {
    dp_clear_error();
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    if (flags & ~(DSMPOOL_AREA_CHECKED | DSMPOOL_AREA_NO_FALLBACK | DSMPOOL_AREA_MID_CHUNKS))
        return dp_fail(-EINVAL, "unknown flags 0x%x", flags);
    int r = dp_self(pool);
    if (r) return r;
    dsmpool_seg *seg;
    /* one bracket: a creator that dies after taking a tag and before the
     * magic leaves it to the leak sweep (dp_area_sweep_tags) */
    dp_inflight_begin(pool);
    r = dp_seg_create_internal(pool, sizeof(ar_ctl), DP_SEG_AREA | DSMPOOL_SEG_NO_FALLBACK, &seg);
    if (r) {
        dp_inflight_end(pool);
        return r == -ENOMEM ? dp_fail(-ENOMEM, "no room in the pool for the area's control "
                                      "block (%zu bytes)", sizeof(ar_ctl)) : r;
    }
    ar_ctl *ctl = dsmpool_seg_address(seg);
    memset(ctl, 0, sizeof *ctl);
    ctl->version = AR_VERSION;
    ctl->ncaches = AR_NCACHES;
    ctl->flags = flags;
    ctl->tag = (flags & DSMPOOL_AREA_NO_FALLBACK) ? 0 : tag_alloc(pool);
    ctl->key = dp_os_random64() | 1;
    ctl->magic = AR_MAGIC;
    dp_store_release(&ctl->state, AR_LIVE); /* release: publishes the control block */
    dp_inflight_end(pool);
    return area_open(pool, seg, out);
}

bool dp_area_live(dsmpool *pool, dsmpool_handle h) {
    uint64_t blk;
    if (!(dp_seg_flags(pool, h) & DP_SEG_AREA) || !dp_seg_live(pool, h, &blk, NULL) || !blk) return false;
    uint64_t bytes = DP_BLOCK_BYTES(blk);
    if (bytes < sizeof(ar_ctl) || !dp_block_ok(pool, DP_BLOCK_OFF(blk), bytes)) return false;
    ar_ctl *ctl = dp_at(pool, DP_BLOCK_OFF(blk));
    return ctl->magic == AR_MAGIC && dp_load_acquire(&ctl->state) == AR_LIVE; /* acquire: destroy's release */
}

int dsmpool_area_attach(dsmpool *pool, dsmpool_handle h, dsmpool_area **out) {
    dp_clear_error();
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    dsmpool_seg *seg;
    int r = dsmpool_seg_attach(pool, h, &seg);
    if (r) return r;
    ar_ctl *ctl = dsmpool_seg_address(seg);
    if (!(dp_seg_flags(pool, h) & DP_SEG_AREA) || dsmpool_seg_size(seg) < sizeof(ar_ctl) ||
        ctl->magic != AR_MAGIC || ctl->version != AR_VERSION || ctl->ncaches != AR_NCACHES) {
        dsmpool_seg_detach(seg);
        return dp_fail(-EINVAL, "handle %016llx names a segment that is not an area",
                       (unsigned long long)h);
    }
    if (dp_load_acquire(&ctl->state) != AR_LIVE) { /* acquire: pairs with destroy_explicit's mark */
        dsmpool_seg_detach(seg);
        return dp_fail(-ESTALE, "the area %016llx was destroyed", (unsigned long long)h);
    }
    return area_open(pool, seg, out);
}

dsmpool_handle dsmpool_area_handle(const dsmpool_area *area) {
    return area && area->magic == AR_OBJ_MAGIC ? area->handle : 0;
}

int dsmpool_area_detach(dsmpool_area *area) {
    dp_clear_error();
    if (!area || !area_unregister(area)) return dp_fail(-EINVAL, "not an attached area (detached twice?)");
    int r = dsmpool_seg_detach(area->seg); /* the last reference destroys the contents */
    area_free_local(area);
    return r;
}

int dsmpool_area_destroy(dsmpool_area *area) {
    dp_clear_error();
    if (!area || area->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    int r = area_usable(area);
    if (r == 0) destroy_explicit(area);
    int d = dsmpool_area_detach(area);
    return r ? r : d;
}

int dsmpool_area_set_limit(dsmpool_area *area, size_t bytes) {
    dp_clear_error();
    if (!area || area->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    int r = area_usable(area);
    if (r) return r;
    if (dp_load_acquire(&area->ctl->state) != AR_LIVE) return dp_fail(-ESTALE, "the area was destroyed");
    dp_store_relaxed(&area->ctl->limit, bytes); /* relaxed: read by held_reserve's CAS loop */
    return 0;
}

static int area_get_stats(dsmpool_area *area, dsmpool_area_stats *out);

int dsmpool_area_get_stats_sized(dsmpool_area *area, dsmpool_area_stats *out, size_t struct_size) {
    dp_clear_error();
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    dsmpool_area_stats full;
    int r = area_get_stats(area, &full);
    return r ? r : dp_copy_sized(out, struct_size, &full, sizeof full);
}

static int area_get_stats(dsmpool_area *area, dsmpool_area_stats *out) {
    if (!area || area->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    int r = area_usable(area);
    if (r) return r;
    if (dp_load_acquire(&area->ctl->state) != AR_LIVE) return dp_fail(-ESTALE, "the area was destroyed");
    memset(out, 0, sizeof *out);
    ar_ctl *ctl = area->ctl;
    uint64_t span_chunks = 0; /* bytes of all spans (chunks and tails) */
    out->held = dp_load_relaxed(&ctl->held);
    out->limit = dp_load_relaxed(&ctl->limit);
    for (uint64_t e = entry_next(ctl, 0); e < AR_MAX_ENTRIES; e = entry_next(ctl, e + 1)) {
        if (e % AR_PER_PAGE == 0) out->registry_bytes += DP_FRAME_SIZE;
        ar_span *sp = ar_entry(area->pool, ctl, e);
        if (!sp) continue;
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: the entry's publication */
        unsigned st = SPW_ST(w);
        uint64_t info = dp_load_relaxed(&sp->info), blk = dp_load_relaxed(&sp->block), bytes;
        if (blk == DP_BLOCK_FALLBACK) bytes = dp_seg_os_size(area->pool, dp_load_relaxed(&sp->seg));
        else bytes = blk && DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER ? DP_BLOCK_BYTES(blk) : 0;
        if (st == SP_SPAN) {
            out->spans++;
            unsigned c = (unsigned)(info & 0xff);
            if (c < AR_NCLS && SPW_COUNT(w) <= cls_chunks(c)) { /* rule 13: its free chunks */
                /* what the span holds is its block's bytes, as held counts
                 * them: cls_len, or more when its trim stopped early
                 * (palloc.c rule 7); the part no chunk fits counts as
                 * cached, held but given to no allocation */
                uint64_t fill = (uint64_t)cls_chunks(c) * cls_size(c);
                uint64_t sb = bytes >= fill && bytes <= cls_span(c) ? bytes : cls_len(c); /* else damaged */
                span_chunks += sb;
                out->bytes_cached += (uint64_t)SPW_COUNT(w) * cls_size(c) + sb - fill;
            }
        } else if (st == SP_LARGE) {
            out->large_blocks++;
            out->bytes_in_use += bytes;
            out->bytes_requested += AR_INFO_ASKED(info) <= bytes ? AR_INFO_ASKED(info) : bytes;
        } else {
            continue;
        }
        if (blk == DP_BLOCK_FALLBACK) {
            out->fallback_segments++;
            out->bytes_os += bytes;
        }
    }
    /* rule 13: what the caches hold (lists and bump ranges), and what chunk
     * allocations asked for; relaxed reads of owner-only words: approximate
     * while others run */
    uint64_t asked = dp_load_relaxed(&ctl->sh_asked), given = dp_load_relaxed(&ctl->sh_given);
    out->control_bytes = area->seg ? dsmpool_seg_size(area->seg) : sizeof(ar_ctl);
    for (uint32_t k = 0; k < AR_RECPAGES; k++)
        if (dp_load_relaxed(&ctl->recpage[k])) out->control_bytes += AR_RECPAGE_BYTES; /* relaxed: a count */
    for (uint32_t i = 0; i < AR_NCACHES; i++) {
        ar_cache *rec = cache_rec(area->pool, ctl, i);
        if (!rec) continue;
        asked += dp_load_relaxed(&rec->asked);
        given += dp_load_relaxed(&rec->given);
        if (!dp_load_relaxed(&rec->owner)) continue; /* released records are empty (rule 4) */
        out->caches++;
        for (unsigned c = 0; c < AR_NCLS; c++) {
            uint64_t n = dp_load_relaxed(&rec->count[c]), left = BUMP_LEFT(dp_load_relaxed(&rec->bump[c]));
            if (n > cls_chunks(c) * 1024ull) n = 0; /* a damaged count */
            if (left > cls_chunks(c)) left = 0;
            out->bytes_cached += (n + left) * cls_size(c);
        }
    }
    uint64_t chunks_in_use = span_chunks > out->bytes_cached ? span_chunks - out->bytes_cached : 0;
    out->bytes_in_use += chunks_in_use;
    if (given) out->bytes_requested += (size_t)((double)chunks_in_use * ((double)asked / (double)given));
    return 0;
}

/* ---- the last process out (life.c) ----------------------------------------- */

/* Nobody is attached to the pool any more (life.c rule 4: the caller holds
 * LIFE exclusive, nobody is present, dead processes were recovered), and its
 * OS segments are about to go: every area entry that lives in one goes
 * first, so an area of a pool that persists names no segment that is gone
 * (its chunks there are lost with the segment: pointers into them get
 * -EINVAL). No operation can run: plain stores. */
void dp_area_drop_os(dsmpool *p) {
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = ctl_of(p, idx);
        if (!ctl) continue;
        for (uint32_t k = 0; k < AR_REGPAGES; k++) {
            uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: the link CAS */
            if (!off || !dp_block_ok(p, off, DP_FRAME_SIZE)) continue;
            ar_span *pg = dp_at(p, off);
            for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
                uint64_t w = dp_load_acquire(&pg[i].state); /* acquire: the filler's writes */
                unsigned st = SPW_ST(w);
                if ((st != SP_SPAN && st != SP_LARGE) || dp_load_relaxed(&pg[i].block) != DP_BLOCK_FALLBACK) continue;
                uint64_t bytes = dp_seg_os_size(p, dp_load_relaxed(&pg[i].seg));
                unsigned c = (unsigned)(dp_load_relaxed(&pg[i].info) & 0xff);
                if (st == SP_SPAN && SPW_COUNT(w) && c < AR_NCLS)
                    dp_fetch_add_relaxed(&ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
                if (bytes) dp_fetch_add_relaxed(&ctl->held, (uint64_t)-bytes); /* relaxed: a counter */
                dp_store_relaxed(&pg[i].block, 0);
                dp_store_relaxed(&pg[i].seg, 0);
                dp_store_release(&pg[i].state, SPW(SPW_GEN(w) + 1, 0, 0, SP_FREE)); /* release: entry_claim */
            }
        }
    }
}

/* ---- recovery, ownership and verification (recover.c, stats.c) ---------- */


typedef struct held_areas {
    uint64_t *idx;
    size_t n, cap;
} held_areas;

static void note_area(dsmpool *p, dp_a64 *r, void *arg) {
    held_areas *h = arg;
    uint64_t v = dp_load_acquire(r); /* acquire: pairs with seg_ref_bracketed's and seg_create_bracketed's ACTIVE stores */
    if (!v || DP_REC_ST(v) != DP_REC_ACTIVE) return;
    uint64_t idx = DP_REC_IDX(v);
    if (idx >= p->nsegs || DP_SEG_GEN(dp_load_acquire(&p->segs[idx].state)) != DP_REC_GEN(v)) return;
    for (size_t i = 0; i < h->n; i++)
        if (h->idx[i] == idx) return;
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 16;
        uint64_t *ni = realloc(h->idx, nc * sizeof *ni);
        if (!ni) return; /* recovery of that area waits for the next call */
        h->idx = ni;
        h->cap = nc;
    }
    h->idx[h->n++] = idx;
}

/* Rule 8 for a dead slot, whose liveness lock the caller holds. Only the
 * areas it holds a reference on (an ACTIVE record): those references keep
 * their control blocks alive until the segment layer drops them, after
 * this; a process has caches and entries only in areas it is attached to.
 * (Any other area's control block may be given back meanwhile by its last
 * detacher: never walk it.) A temporary area object lets the drain code
 * run unchanged. */
void dp_area_recover_slot(dsmpool *p, uint32_t slot) {
    held_areas h = {NULL, 0, 0};
    /* rule 15: it died inside a bracket, maybe a shared-path free between
     * its chunk's tag and its push. acquire: dp_inflight_end's release */
    bool in_bracket = slot < p->nprocs && dp_load_acquire(&p->procs[slot].inflight) != 0;
    dp_slot_records(p, slot, note_area, &h);
    for (size_t k = 0; k < h.n; k++) {
        uint64_t idx = h.idx[k];
        ar_ctl *ctl = ctl_of(p, idx);
        if (!ctl) continue;
        DP_INJECT("area.recover.area");
        static _Thread_local struct dsmpool_area tmp; /* 2 KiB of map pointers: not on the stack */
        memset(&tmp, 0, sizeof tmp);
        area_fill(&tmp, p, ctl, idx + 1);
        for (uint32_t i = 0; i < AR_NCACHES; i++) {
            ar_cache *rec = cache_rec(p, ctl, i);
            if (!rec) continue;
            uint64_t o = dp_load_acquire(&rec->owner); /* acquire: the owner's claim */
            /* acq_rel: the record is ours from here; a recoverer that dies
             * leaves it in the dead slot's name for the next one */
            if (o && (uint32_t)o == slot + 1 &&
                dp_cas_acq_rel(&rec->owner, &o, (uint64_t)(slot + 1) | AR_RECOVERY)) {
                /* relaxed: ordered by the owner CAS; odd: it died inside an
                 * operation (or a recoverer did), which may have lost chunks */
                if (dp_load_relaxed(&rec->seq) & 1) {
                    dp_fetch_add_relaxed(&ctl->lost, 1); /* relaxed: ordered by the release below */
                    /* release: pairs with sweep_lost's acquire (recover.c) */
                    atomic_fetch_add_explicit(&p->hdr->lost_due, 1, memory_order_release);
                }
                cache_release(&tmp, rec, slot);
            }
        }
        if (in_bracket && dp_load_relaxed(&ctl->shared)) { /* relaxed: set before any shared operation */
            dp_fetch_add_relaxed(&ctl->lost, 1); /* relaxed: ordered by the release below */
            /* release: pairs with sweep_lost's acquire (recover.c) */
            atomic_fetch_add_explicit(&p->hdr->lost_due, 1, memory_order_release);
        }
        for (uint32_t pg = 0; pg < AR_REGPAGES; pg++) {
            if (!dp_load_relaxed(&ctl->regpage[pg])) continue;
            for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
                uint64_t e = (uint64_t)pg * AR_PER_PAGE + i;
                ar_span *sp = ar_entry(p, ctl, e);
                if (!sp) break;
                uint64_t w = dp_load_acquire(&sp->state); /* acquire: the dead owner's writes */
                unsigned st = SPW_ST(w);
                if ((st == SP_INIT || st == SP_RETIRED) && SPW_OWNER(w) == slot && entry_take_from(sp, &w, slot))
                    entry_release(p, ctl, tmp.aid, e, sp, w, slot);
            }
        }
        area_free_fb(&tmp);
    }
    free(h.idx);
}

/* Mark the frames every area owns: cache record pages, registry pages,
 * spans and large blocks in the pool, checked-mode bitmaps. */
void dp_area_mark_owned(dsmpool *p, dp_mark_fn mark, void *arg) {
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = ctl_of(p, idx);
        if (!ctl) continue;
        for (uint32_t k = 0; k < AR_RECPAGES; k++) {
            uint64_t off = dp_load_acquire(&ctl->recpage[k]); /* acquire: the link CAS */
            if (off) mark(arg, off, AR_RECPAGE_BYTES, "an area cache record page");
        }
        for (uint32_t k = 0; k < AR_REGPAGES; k++) {
            uint64_t off = dp_load_acquire(&ctl->regpage[k]);
            if (!off) continue;
            mark(arg, off, DP_FRAME_SIZE, "an area registry page");
            if (!dp_block_ok(p, off, DP_FRAME_SIZE)) continue;
            ar_span *pg = dp_at(p, off);
            for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
                if (SPW_ST(dp_load_acquire(&pg[i].state)) == SP_FREE) continue;
                uint64_t blk = dp_load_acquire(&pg[i].block), info = dp_load_relaxed(&pg[i].info);
                uint64_t bm = info_bitmap(info);
                if (blk && blk != DP_BLOCK_FALLBACK) {
                    uint64_t bytes = entry_block_bytes(&pg[i], blk);
                    if (bytes) mark(arg, DP_BLOCK_OFF(blk), bytes, "an area span");
                    else mark(arg, 0, 0, "an area entry whose block word disagrees with its record");
                }
                if (bm)
                    mark(arg, bm, (uint64_t)DP_FRAME_SIZE << cls_bm_order((unsigned)(info & 0xff)),
                         "a checked-mode bitmap");
            }
        }
    }
}

/* Rule 7 seen from outside: every cache record's (owner, sequence) of one
 * area, appended to q; -EBUSY if a live owner is inside an operation. */
static int quiet_open_ctl(dsmpool *p, ar_ctl *ctl, dp_area_quiet *q) {
    for (uint32_t i = 0; i < AR_NCACHES; i++) { /* every record: a claim during the pass shows too */
        ar_cache *rec = cache_rec(p, ctl, i);
        uint64_t o = 0, s = 0;
        if (rec) {
            o = dp_load_acquire(&rec->owner); /* acquire: pairs with cache_claim's CAS */
            s = dp_load_acquire(&rec->seq); /* acquire: pairs with op_end's release */
            if (o && (s & 1) && dp_slot_alive(p, (uint32_t)o - 1)) return -EBUSY;
        }
        if (q->n + 3 > q->cap) {
            size_t nc = q->cap ? q->cap * 2 : 768;
            uint64_t *ns = realloc(q->seq, nc * sizeof *ns);
            if (!ns) return -ENOMEM;
            q->seq = ns;
            q->cap = nc;
        }
        if (!rec) { /* a page not linked yet: one linked during the window (a claim) shows */
            dp_a64 *link = &ctl->recpage[i / AR_RECS_PER_PAGE];
            q->seq[q->n++] = (uintptr_t)link | 1;
            q->seq[q->n++] = dp_load_relaxed(link); /* relaxed: compared only; 0, or damaged */
            q->seq[q->n++] = 0;
            i = (i / AR_RECS_PER_PAGE + 1) * AR_RECS_PER_PAGE - 1; /* the next page */
            continue;
        }
        q->seq[q->n++] = (uintptr_t)&rec->seq;
        q->seq[q->n++] = s;
        q->seq[q->n++] = o;
    }
    return 0;
}

/* The same over every area of the pool. */
int dp_area_quiet_open(dsmpool *p, dp_area_quiet *q) {
    q->n = 0;
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = ctl_of(p, idx);
        int r = ctl ? quiet_open_ctl(p, ctl, q) : 0;
        if (r) return r;
    }
    return 0;
}

bool dp_area_quiet_holds(dsmpool *p, const dp_area_quiet *q) {
    atomic_thread_fence(memory_order_acquire); /* pairs with op_begin's release fence */
    for (size_t i = 0; i < q->n; i += 3) {
        if (q->seq[i] & 1) { /* a record page's link word, as it was at the open */
            if (dp_load_relaxed((dp_a64 *)(uintptr_t)(q->seq[i] & ~(uint64_t)1)) != q->seq[i + 1]) return false;
            continue;
        }
        dp_a64 *seq = (dp_a64 *)(uintptr_t)q->seq[i];
        ar_cache *rec = (ar_cache *)((char *)seq - offsetof(ar_cache, seq));
        if (dp_load_relaxed(seq) != q->seq[i + 1] || dp_load_relaxed(&rec->owner) != q->seq[i + 2])
            return false;
    }
    (void)p;
    return true;
}

void dp_area_quiet_close(dp_area_quiet *q) {
    free(q->seq);
    q->seq = NULL;
    q->n = q->cap = 0;
}

/* ---- verification: no chunk on two free lists ------------------------------ */

typedef struct vctx {
    struct dsmpool_area *a;
    uint64_t **bits;  /* per entry: a bit per chunk, allocated when first needed */
    uint64_t *used;   /* entries with bits, to clear after this area */
    size_t nused;
    char *why;
    size_t n;
    int err;
} vctx;

static void vfail(vctx *v, const char *fmt, unsigned long long x) {
    if (v->err) return;
    v->err = -EUCLEAN;
    snprintf(v->why, v->n, fmt, x, (unsigned long long)v->a->handle);
}

/* Mark chunk idx of entry e as free; a second mark is a chunk on two lists. */
static void vmark(vctx *v, uint64_t e, uint32_t idx, uint32_t nchunks, dsmpool_ptr p) {
    if (v->err || e >= AR_MAX_ENTRIES || idx >= nchunks) return;
    if (!v->bits[e]) {
        if (!(v->bits[e] = calloc((nchunks + 63) / 64, 8))) {
            v->err = -ENOMEM;
            snprintf(v->why, v->n, "out of memory");
            return;
        }
        v->used[v->nused++] = e;
    }
    uint64_t bit = 1ull << (idx % 64);
    if (v->bits[e][idx / 64] & bit)
        vfail(v, "chunk %016llx of area %016llx is on two free lists (a double free)", p);
    v->bits[e][idx / 64] |= bit;
}

/* A free chunk pointer of class c: it must lie at a chunk start in one of
 * this area's spans of that class. */
static void vchunk(vctx *v, dsmpool_ptr p, unsigned c) {
    ar_loc l;
    if (ar_locate(v->a, p, &l) != 0 || l.cls != c || !locate_entry(v->a, &l)) {
        vfail(v, "a free list links %016llx, which is not a chunk of area %016llx", p);
        return;
    }
    uint32_t idx;
    if (!chunk_at(c, l.off, &idx) || SPW_ST(dp_load_relaxed(&l.sp->state)) != SP_SPAN) {
        vfail(v, "a free list links %016llx, which is not a chunk of a live span of area %016llx", p);
        return;
    }
    vmark(v, l.e, idx, cls_chunks(c), p);
}

static void verify_area(vctx *v) {
    struct dsmpool_area *a = v->a;
    ar_ctl *ctl = a->ctl;
    for (uint32_t i = 0; i < AR_NCACHES && !v->err; i++) {
        ar_cache *rec = cache_rec(a->pool, ctl, i);
        if (!rec || !dp_load_acquire(&rec->owner)) continue; /* acquire: the claim */
        for (unsigned c = 0; c < AR_NCLS && !v->err; c++) {
            dsmpool_ptr h = dp_load_relaxed(&rec->head[c]);
            for (uint64_t guard = chunks_bound(a, c); h && !v->err; guard--) {
                if (!guard) {
                    vfail(v, "a free list of class %llu of area %016llx has a cycle", c);
                    break;
                }
                vchunk(v, h, c);
                char *m = ar_addr_n(a, h, 8);
                if (!m) break;
                memcpy(&h, m, 8);
            }
            uint64_t b = dp_load_relaxed(&rec->bump[c]);
            uint32_t e1 = BUMP_E1(b), left = BUMP_LEFT(b), idx = BUMP_IDX(b);
            if (!left) continue;
            if (!e1 || idx + left > cls_chunks(c) || !ar_entry(a->pool, ctl, e1 - 1)) {
                vfail(v, "a bump range of class %llu of area %016llx is damaged", c);
                break;
            }
            for (uint32_t k = 0; k < left; k++) vmark(v, e1 - 1, idx + k, cls_chunks(c), 0);
        }
    }
    for (uint64_t e = entry_next(ctl, 0); e < AR_MAX_ENTRIES && !v->err; e = entry_next(ctl, e + 1)) {
        ar_span *sp = ar_entry(a->pool, ctl, e);
        if (!sp) continue;
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: span_push's release */
        if (SPW_ST(w) != SP_SPAN) continue;
        unsigned c = (unsigned)(dp_load_relaxed(&sp->info) & 0xff);
        if (c >= AR_NCLS) {
            vfail(v, "span entry %llu of area %016llx names no class", e);
            break;
        }
        dsmpool_ptr base = entry_base(a, e, sp, dp_load_relaxed(&sp->block), c);
        uint32_t idx = SPW_HEAD(w), k = SPW_COUNT(w);
        for (; idx && k && !v->err; k--) {
            if (idx > cls_chunks(c)) {
                vfail(v, "the returned stack of span entry %llu of area %016llx is damaged", e);
                break;
            }
            dsmpool_ptr cp = base + chunk_off(c, idx - 1);
            vmark(v, e, idx - 1, cls_chunks(c), cp);
            char *m = ar_addr_n(a, cp, 4);
            if (!m) break;
            memcpy(&idx, m, 4);
        }
    }
}

static bool scratch_ready(dp_area_scratch *sc) {
    if (!sc->bits) sc->bits = calloc(AR_MAX_ENTRIES, sizeof(uint64_t *));
    if (!sc->used) sc->used = calloc(AR_MAX_ENTRIES, sizeof(uint64_t));
    return sc->bits && sc->used;
}

static void vclear(vctx *v) { /* the scratch goes back as it came: all NULL */
    for (size_t i = 0; i < v->nused; i++) {
        free(v->bits[v->used[i]]);
        v->bits[v->used[i]] = NULL;
    }
    v->nused = 0;
}

static bool vmarked(const vctx *v, uint64_t e, uint32_t idx) {
    return v->bits[e] && (v->bits[e][idx / 64] >> (idx % 64) & 1);
}

int dp_area_verify(dsmpool *p, dp_area_scratch *sc, char *why, size_t n) {
    vctx v = {NULL, sc->bits, sc->used, 0, why, n, 0};
    static _Thread_local struct dsmpool_area tmp;
    if (!scratch_ready(sc)) {
        snprintf(why, n, "out of memory");
        return -ENOMEM;
    }
    v.bits = sc->bits;
    v.used = sc->used;
    for (uint64_t idx = 0; idx < p->nsegs && !v.err; idx++) {
        ar_ctl *ctl = ctl_of(p, idx);
        if (!ctl || dp_load_acquire(&ctl->state) != AR_LIVE) continue; /* acquire: destroy's mark */
        memset(&tmp, 0, sizeof tmp);
        area_fill(&tmp, p, ctl, idx + 1);
        tmp.handle = DP_HANDLE(DP_SEG_GEN(dp_load_relaxed(&p->segs[idx].state)), idx);
        v.a = &tmp;
        verify_area(&v);
        vclear(&v);
        area_free_fb(&tmp);
    }
    return v.err;
}

/* ---- rule 11: what deaths inside operations lost ------------------------------ */

typedef struct lost_ref {
    uint64_t e;
    uint32_t idx; /* UINT32_MAX: the span is whole but was not retired */
    unsigned cls;
} lost_ref;

typedef struct lost_list {
    lost_ref *v;
    size_t n, cap;
} lost_list;

static bool lost_add(lost_list *l, uint64_t e, uint32_t idx, unsigned c) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        lost_ref *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return false;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = (lost_ref){e, idx, c};
    return true;
}

/* Walk the live spans of v's area after verify_area marked every chunk a
 * list, stack or range holds. fn(e, sp, c, base, idx, m, tagged) for every
 * chunk none holds; whole spans (count full, not retired) go to whole. */
static int span_walk_unheld(vctx *v, lost_list *whole,
                            bool (*fn)(void *, uint64_t, unsigned, dsmpool_ptr, uint32_t, bool), void *arg) {
    struct dsmpool_area *a = v->a;
    for (uint64_t e = entry_next(a->ctl, 0); e < AR_MAX_ENTRIES; e = entry_next(a->ctl, e + 1)) {
        ar_span *sp = ar_entry(a->pool, a->ctl, e);
        if (!sp) continue;
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: the entry's publication */
        unsigned st = SPW_ST(w), c = (unsigned)(dp_load_relaxed(&sp->info) & 0xff);
        uint64_t blk = dp_load_relaxed(&sp->block);
        if (st == SP_LARGE && blk) {
            if (!fn(arg, e, AR_LARGE_CLS, entry_base(a, e, sp, blk, AR_LARGE_CLS), 0, false)) return -ENOMEM;
            continue;
        }
        if (st != SP_SPAN || c >= AR_NCLS || !blk) continue;
        dsmpool_ptr base = entry_base(a, e, sp, blk, c);
        uint32_t n = cls_chunks(c);
        if (SPW_COUNT(w) == n) {
            if (whole && !lost_add(whole, e, UINT32_MAX, c)) return -ENOMEM;
            continue;
        }
        for (uint32_t idx = 0; idx < n; idx++) {
            if (vmarked(v, e, idx)) continue;
            dsmpool_ptr cp = base + chunk_off(c, idx);
            char *m = ar_addr_n(a, cp, 16);
            if (!m) continue;
            uint64_t have;
            memcpy(&have, m + 8, 8);
            if (!fn(arg, e, c, cp, idx, have == free_tag(a, cp))) return -ENOMEM;
        }
    }
    return 0;
}

/* What the area's entries hold, as held should say (rule 11); false if an
 * entry is between owners (INIT, RETIRED), when no sum is exact. */
static bool held_sum(struct dsmpool_area *a, uint64_t *sum) {
    *sum = 0;
    for (uint64_t e = entry_next(a->ctl, 0); e < AR_MAX_ENTRIES; e = entry_next(a->ctl, e + 1)) {
        ar_span *sp = ar_entry(a->pool, a->ctl, e);
        if (!sp) continue;
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: the entry's publication */
        unsigned st = SPW_ST(w);
        if (st == SP_FREE) continue;
        if (st != SP_SPAN && st != SP_LARGE) return false;
        uint64_t blk = dp_load_relaxed(&sp->block);
        if (blk == DP_BLOCK_FALLBACK) *sum += dp_seg_os_size(a->pool, dp_load_relaxed(&sp->seg));
        else if (blk && DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER) *sum += DP_BLOCK_BYTES(blk);
    }
    return true;
}

static bool note_lost(void *arg, uint64_t e, unsigned c, dsmpool_ptr cp, uint32_t idx, bool tagged) {
    (void)cp;
    return !tagged || c == AR_LARGE_CLS || lost_add(arg, e, idx, c);
}

/* One area whose control block we hold a reference on (so no last detach
 * frees it), with a cache record of our own (mine). Find the lost chunks
 * inside the pool's quiet window (no recovery runs, no bracket is open) and
 * with none of the area's caches inside an operation; then, inside an
 * operation on mine (so an explicit destroy waits for us: rule 6), give
 * them back. A chunk that is held by no list, stack or range and still
 * carries its free tag was being freed, drained or moved by an operation
 * that died: nobody can reach it any more, so giving it back after the
 * windows close races with nobody. */
static int lost_sweep_area(struct dsmpool_area *a, ar_cache *mine, dp_area_scratch *sc, size_t *got) {
    dsmpool *p = a->pool;
    char why[200];
    for (int tries = 0; tries < 50; tries++) {
        if (tries) dp_os_sleep_ns(100000);
        dp_quiet pq = {0};
        dp_area_quiet q = {0};
        int r = dp_quiet_open(p, &pq, true);
        if (r == 0) r = quiet_open_ctl(p, a->ctl, &q);
        if (r) {
            dp_area_quiet_close(&q);
            dp_quiet_close(&pq);
            if (r == -ENOMEM || r == -EAGAIN) return r; /* (-EAGAIN: a new death, recovery first) */
            continue;
        }
        vctx v = {a, sc->bits, sc->used, 0, why, sizeof why, 0};
        lost_list lost = {0}, whole = {0};
        uint64_t held = dp_load_relaxed(&a->ctl->held), sum = 0; /* relaxed: the windows order it */
        bool exact = held_sum(a, &sum);
        verify_area(&v);
        if (!v.err) r = span_walk_unheld(&v, &whole, note_lost, &lost);
        bool holds = dp_area_quiet_holds(p, &q) && dp_quiet_holds(p, &pq);
        vclear(&v);
        dp_area_quiet_close(&q);
        dp_quiet_close(&pq);
        if (v.err || r || !holds) {
            free(lost.v);
            free(whole.v);
            if (v.err || r) return v.err ? v.err : r; /* damage: the checker's to report */
            continue;
        }
        uint64_t s = op_begin(mine);
        if (!area_live(a)) { /* destroyed meanwhile: its destroyer takes everything */
            op_end(mine, s);
            free(lost.v);
            free(whole.v);
            return 0;
        }
        /* a death between the reservation of held bytes and the entry that
         * records them left the count wrong; nothing changed it during the
         * windows: set it right, unless something did since (then again), and
         * before our pushes retire anything. relaxed: a counter; the CAS
         * alone decides */
        if (exact && held != sum &&
            !atomic_compare_exchange_strong_explicit(&a->ctl->held, &held, sum, memory_order_relaxed,
                                                     memory_order_relaxed)) {
            op_end(mine, s);
            free(lost.v);
            free(whole.v);
            continue;
        }
        for (size_t i = 0; i < lost.n; i++) {
            lost_ref *l = &lost.v[i];
            ar_span *sp = ar_entry(p, a->ctl, l->e);
            uint64_t blk = sp ? dp_load_relaxed(&sp->block) : 0;
            dsmpool_ptr cp = (sp ? entry_base(a, l->e, sp, blk, l->cls) : 0) + chunk_off(l->cls, l->idx);
            char *m = sp ? ar_addr_n(a, cp, 4) : NULL;
            if (m) span_push(p, a->ctl, a->aid, l->e, sp, l->cls, l->idx, m, p->slot);
        }
        size_t kept = 0;
        for (size_t i = 0; i < whole.n; i++) { /* a death between the whole count and its retirement */
            if (dp_load_relaxed(&a->ctl->sh_keep) == whole.v[i].e + 1) { /* relaxed: rule 15's kept span */
                kept++;
                continue;
            }
            ar_span *sp = ar_entry(p, a->ctl, whole.v[i].e);
            uint64_t w = sp ? dp_load_acquire(&sp->state) : 0; /* acquire: every push's link */
            if (!sp || SPW_ST(w) != SP_SPAN || SPW_COUNT(w) != cls_chunks(whole.v[i].cls)) continue;
            if (entry_take_from(sp, &w, p->slot)) {
                dp_fetch_add_relaxed(&a->ctl->partial[whole.v[i].cls], (uint64_t)-1); /* relaxed: a hint */
                entry_release(p, a->ctl, a->aid, whole.v[i].e, sp, w, p->slot);
            }
        }
        op_end(mine, s);
        *got += lost.n + whole.n - kept;
        free(lost.v);
        free(whole.v);
        return 0;
    }
    return -EBUSY;
}

bool dp_area_sweep_lost(dsmpool *p, dp_area_scratch *sc, size_t *got) {
    if (!p->has_slot) return false; /* a retirement needs a live owner: the next recovery with a slot */
    if (!scratch_ready(sc)) return false;
    static _Thread_local struct dsmpool_area tmp;
    uint64_t me = (uint64_t)(p->slot + 1) | ((uint64_t)(uint32_t)dp_os_gettid() << 32);
    bool done = true;
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = ctl_of(p, idx);
        /* relaxed: a first look; what we act on is read again under a reference */
        if (!ctl || !dp_load_relaxed(&ctl->lost)) continue;
        dsmpool_seg *ref; /* rule 8's reason, here: no last detach frees the block under us */
        dsmpool_handle h = DP_HANDLE(DP_SEG_GEN(dp_load_acquire(&p->segs[idx].state)), idx);
        int r = dsmpool_seg_attach(p, h, &ref);
        if (r) { /* gone: nothing of it is lost any more; anything else: next time */
            if (r != -ESTALE && r != -ENOENT) done = false;
            continue;
        }
        uint64_t lost = dp_load_acquire(&ctl->lost); /* acquire: pairs with the CAS below (dp_area_sweep_lost's) */
        ar_cache *mine = ctl_of(p, idx) == ctl && dp_load_acquire(&ctl->state) == AR_LIVE && lost
                             ? cache_claim(p, ctl, me) : NULL;
        if (mine) {
            memset(&tmp, 0, sizeof tmp);
            area_fill(&tmp, p, ctl, idx + 1);
            tmp.handle = h;
            /* acq_rel: a death counted since stays due (the CAS fails) */
            if (lost_sweep_area(&tmp, mine, sc, got) != 0 || !dp_cas_acq_rel(&ctl->lost, &lost, 0)) done = false;
            cache_release(&tmp, mine, p->slot); /* it holds nothing: just given up */
            area_free_fb(&tmp);
        } else if (lost && dp_load_acquire(&ctl->state) == AR_LIVE) {
            done = false; /* every cache record is held: next time */
        }
        dsmpool_seg_detach(ref);
    }
    return done;
}

void dp_area_scratch_free(dp_area_scratch *sc) {
    free(sc->bits);
    free(sc->used);
    sc->bits = NULL;
    sc->used = NULL;
}

#ifdef DP_INJECTION
/* Test-only (tests/test_scribble.c damages areas on purpose): a word of the
 * area's shared state. "head"/"bump": this thread's cache record, class cls;
 * "regpage": registry page cls; "span": the state word of the span or block
 * that holds pointer p (cls unused). NULL when there is none. */
dp_a64 *dp_area_test_word(dsmpool_area *a, const char *what, unsigned cls, dsmpool_ptr p);
dp_a64 *dp_area_test_word(dsmpool_area *a, const char *what, unsigned cls, dsmpool_ptr p) {
    if (!strcmp(what, "regpage")) return cls < AR_REGPAGES ? &a->ctl->regpage[cls] : NULL;
    if (!strcmp(what, "span")) {
        ar_loc l;
        return ar_locate(a, p, &l) == 0 && locate_entry(a, &l) ? &l.sp->state : NULL;
    }
    ar_tc *tc = tc_get(a);
    if (!tc || !tc->rec || cls >= AR_NCLS) return NULL;
    if (!strcmp(what, "head")) return &tc->rec->head[cls];
    if (!strcmp(what, "bump")) return &tc->rec->bump[cls];
    return NULL;
}

void dp_area_test_untrimmed(bool on);
void dp_area_test_untrimmed(bool on) { atomic_store_explicit(&ar_test_untrimmed, on, memory_order_relaxed); }

void dp_area_test_force_shared(bool on);
void dp_area_test_force_shared(bool on) { tc_force_shared = on; }

unsigned dp_area_test_class(size_t size);
unsigned dp_area_test_class(size_t size) { return cls_of(size); }

/* Test-only: class c's span bytes (0: no such class). */
uint64_t dp_area_test_span(unsigned c);
uint64_t dp_area_test_span(unsigned c) { return c <= AR_CLS_MASK ? cls_span(c) : 0; }
uint64_t dp_area_test_span_len(unsigned c);
uint64_t dp_area_test_span_len(unsigned c) { return c <= AR_CLS_MASK ? cls_len(c) : 0; }
/* Test-only: the offset bits of a fallback pointer into an OS segment of len bytes. */
unsigned dp_area_test_fb_bits(uint64_t len);
unsigned dp_area_test_fb_bits(uint64_t len) { return fb_bits(len); }

/* Test-only: class c's chunk size (0: no such class), and the chunk index
 * the reciprocal gives for span offset off, with whether off starts it. */
uint32_t dp_area_test_chunk(unsigned c, uint64_t off, uint32_t *idx, bool *start);
uint32_t dp_area_test_chunk(unsigned c, uint64_t off, uint32_t *idx, bool *start) {
    if (c > AR_CLS_MASK) return 0;
    uint32_t i;
    *start = chunk_at(c, off, &i);
    *idx = chunk_idx(c, off);
    return cls_size(c);
}

/* Test-only: every allocation of the area -- chunks no list, stack or range
 * holds, and large blocks -- into out (at most max; returns how many there
 * are); *tagged counts those of them that still carry a free tag (lost, if
 * the area is quiet). The caller keeps the area quiet. */
typedef struct live_out {
    dsmpool_ptr *out;
    size_t max, n, tagged;
} live_out;

static bool note_live(void *arg, uint64_t e, unsigned c, dsmpool_ptr cp, uint32_t idx, bool tagged) {
    (void)e, (void)c, (void)idx;
    live_out *o = arg;
    if (o->n < o->max) o->out[o->n] = cp;
    o->n++;
    o->tagged += tagged;
    return true;
}

long dp_area_test_live(dsmpool_area *a, dsmpool_ptr *out, size_t max, size_t *tagged);
long dp_area_test_live(dsmpool_area *a, dsmpool_ptr *out, size_t max, size_t *tagged) {
    dp_area_scratch sc = {0};
    char why[200];
    if (!scratch_ready(&sc)) return -ENOMEM;
    vctx v = {a, sc.bits, sc.used, 0, why, sizeof why, 0};
    live_out o = {out, max, 0, 0};
    verify_area(&v);
    int r = v.err ? v.err : span_walk_unheld(&v, NULL, note_live, &o);
    vclear(&v);
    dp_area_scratch_free(&sc);
    if (tagged) *tagged = o.tagged;
    return r ? r : (long)o.n;
}
#endif

/* ---- inspection (inspect.c): a read-only snapshot of one area ------------- */

_Static_assert(AR_NCLS == DP_INSP_NCLS, "inspect.c's classes are the area's");

/* Loads only (the view may be mapped read-only, and another process may be
 * changing the area): every offset is checked before it is followed, and a
 * value out of range marks the snapshot damaged instead of being used. */
int dp_area_inspect(dsmpool *p, uint64_t idx, dp_insp_area *out) {
    memset(out, 0, sizeof *out);
    for (unsigned c = 0; c < AR_NCLS; c++) out->chunk_size[c] = cls_size(c);
    ar_ctl *ctl = ctl_of(p, idx);
    if (!ctl) return -ENOENT;
    uint64_t w = dp_load_acquire(&p->segs[idx].state); /* acquire: create's LIVE CAS */
    out->seg_index = idx;
    out->handle = DP_HANDLE(DP_SEG_GEN(w), idx);
    uint64_t st = dp_load_acquire(&ctl->state); /* acquire: destroy's CAS */
    out->state = st == AR_LIVE || st == AR_DESTROYED ? (unsigned)st : 0;
    out->flags = ctl->flags;
    out->tag = ctl->tag;
    out->limit = dp_load_relaxed(&ctl->limit); /* relaxed: counters, a snapshot */
    out->held = dp_load_relaxed(&ctl->held);
    out->lost = dp_load_relaxed(&ctl->lost);
    for (uint32_t k = 0; k < AR_RECPAGES; k++) {
        uint64_t off = dp_load_relaxed(&ctl->recpage[k]); /* relaxed: a snapshot, checked below */
        if (off && !dp_block_ok(p, off, AR_RECPAGE_BYTES)) {
            out->damaged = true;
            snprintf(out->why, sizeof out->why, "cache record page %u at offset %llu is outside the data", k,
                     (unsigned long long)off);
        }
    }
    for (uint32_t k = 0; k < AR_REGPAGES; k++) {
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: the link CAS */
        if (!off) continue;
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) {
            out->damaged = true;
            snprintf(out->why, sizeof out->why, "registry page %u at offset %llu is outside the data", k,
                     (unsigned long long)off);
            continue;
        }
        out->registry_pages++;
        const ar_span *pg = dp_at(p, off);
        for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
            uint64_t sw = dp_load_acquire(&pg[i].state); /* acquire: the filler's writes */
            unsigned s = SPW_ST(sw);
            if (s != SP_SPAN && s != SP_LARGE) continue;
            uint64_t blk = dp_load_relaxed(&pg[i].block);
            if (blk == DP_BLOCK_FALLBACK) out->fallback_entries++;
            if (s == SP_SPAN) {
                unsigned c = (unsigned)(dp_load_relaxed(&pg[i].info) & 0xff);
                if (c < AR_NCLS) out->spans[c]++;
                else out->damaged = true;
                continue;
            }
            out->large_blocks++;
            uint64_t bytes = blk == DP_BLOCK_FALLBACK ? dp_seg_os_size(p, dp_load_relaxed(&pg[i].seg))
                             : DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER && dp_block_ok(p, DP_BLOCK_OFF(blk),
                                   DP_BLOCK_BYTES(blk))
                                 ? DP_BLOCK_BYTES(blk)
                                 : 0;
            if (!bytes && blk != DP_BLOCK_FALLBACK) out->damaged = true;
            out->large_bytes += bytes;
        }
    }
    uint64_t most = p->geo.region_size / AR_MIN_CHUNK; /* no cache holds more chunks than that */
    for (uint32_t i = 0; i < AR_NCACHES; i++) {
        const ar_cache *cr = cache_rec(p, ctl, i);
        if (!cr || !dp_load_relaxed(&cr->owner)) continue; /* relaxed: a snapshot */
        out->caches++;
        for (unsigned c = 0; c < AR_NCLS; c++) {
            uint64_t cnt = dp_load_relaxed(&cr->count[c]), b = dp_load_relaxed(&cr->bump[c]);
            uint64_t left = BUMP_E1(b) ? BUMP_LEFT(b) : 0;
            if (cnt > most || left > cls_chunks(c)) {
                out->damaged = true;
                if (!out->why[0])
                    snprintf(out->why, sizeof out->why, "cache record %u class %u: count %llu, bump %llu", i, c,
                             (unsigned long long)cnt, (unsigned long long)left);
                continue;
            }
            out->cached_chunks[c] += cnt + left;
            out->cached_bytes += (cnt + left) * cls_size(c);
        }
    }
    return 0;
}
