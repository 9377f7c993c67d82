/*
 * place.c -- planning a new region: which sub-pools, how big, bound to which
 * nodes, prefaulted by whom, and whether the machine and the cgroup can hold
 * it at all.
 *
 * Layer: region (pool/region), above layout.c and NUMA; called by region.c
 * (create) and by dsmpool_min_size().
 *
 * Rules
 *   [sub-pools] One sub-pool per node with memory, plus an interleaved one on
 *      a machine with several (a quarter of the data by default); each is a
 *      whole number of data granules (2 MiB, or the huge page).
 *   [bound before touched] Each node's sub-pool is bound (MPOL_BIND) before
 *      anything touches it, and prefaulted by threads pinned to that node's
 *      CPUs; the interleaved one is one MPOL_INTERLEAVE range (one VMA).
 *   [bound in every mapping] Pages are placed by the policy of the mapping
 *      that faults them in, and a hugetlb page is faulted in by whichever
 *      process populates it: a refill (resident.c), dsmpool_prefault(), or
 *      a first touch of a pool not prefaulted. A shmem object (4 KiB and
 *      THP pages, every backing) keeps the creator's mbind as the object's
 *      own shared policy, which every mapping's faults follow; a hugetlb
 *      file has none, only the policy of each mapping (which a fork()ed
 *      child inherits). So a process that attaches a hugetlb pool binds its
 *      own mapping's sub-pools as the creator did (dp_region_bind), or its
 *      refills would land on its own CPU's node (tests/numa-vm). An
 *      attacher that may not bind (a cpuset without one of the pool's
 *      nodes, a seccomp profile without mbind) attaches all the same: the
 *      policy places pages, it does not make them correct, and refusing
 *      the attach would lose more than the placement of its own refills.
 *   [fits first] Before anything is reserved, the pool's size is held
 *      against what the memory (or hugetlb) cgroup still lets this process
 *      charge, and against each node's free huge pages: a pool that cannot
 *      be had fails with -ENOMEM naming the limit, never the OOM killer or
 *      a SIGBUS later; and against what the system has (MemAvailable +
 *      SwapFree: without a cgroup the global OOM killer's to lose). A
 *      process that cannot learn its cgroup's limits is refused unless the
 *      config says limits_unknown_ok. For an elastic pool (region.c
 *      [elastic]) the size held is what is made resident at creation
 *      (tables and resident_min), not the reservation; the rest is held
 *      against the room granule by granule when it is made resident
 *      (resident.c [room first]).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_numa.h"
#include "dp_region.h"
#include "dp_os.h"




int dp_plan_nodes(const dsmpool_config *cfg, dp_plan *pl) {
    const dp_topo *t = dp_numa_topo();
    memset(pl, 0, sizeof *pl);
    if ((unsigned)cfg->numa > DSMPOOL_NUMA_OFF) return dp_fail(-EINVAL, "unknown numa mode %d", (int)cfg->numa);
    if (cfg->nnodes >= DSMPOOL_MAX_NODES)
        return dp_fail(-EINVAL, "nnodes %u: at most %d nodes", cfg->nnodes, DSMPOOL_MAX_NODES - 1);
    bool numa = cfg->numa == DSMPOOL_NUMA_AUTO && t->real;
    uint32_t n = 0;
    if (cfg->nnodes) {
        for (unsigned i = 0; i < cfg->nnodes; i++) {
            uint32_t id = cfg->nodes[i];
            if (id > 255) return dp_fail(-EINVAL, "node %u: node ids above 255 are not supported", id);
            if (dp_numa_index(id) < 0) {
                char have[256] = "";
                for (unsigned k = 0; k < t->nnodes && strlen(have) < 200; k++)
                    snprintf(have + strlen(have), sizeof have - strlen(have), " %u", t->node[k]);
                return dp_fail(-EINVAL, "node %u has no memory here (nodes with memory:%s)", id, have);
            }
            for (unsigned k = 0; k < n; k++)
                if (pl->nodes[k] == id) return dp_fail(-EINVAL, "node %u listed twice", id);
            pl->nodes[n++] = id;
        }
        if (n > 1 && !numa)
            return dp_fail(-EINVAL, "%u nodes listed, but NUMA is %s", n,
                           cfg->numa == DSMPOOL_NUMA_OFF ? "off in the config" : "not available");
    } else if (numa) {
        for (unsigned k = 0; k < t->nnodes && n < DSMPOOL_MAX_NODES - 1; k++)
            if (t->node[k] <= 255) pl->nodes[n++] = t->node[k];
    } else {
        pl->nodes[n++] = t->node[0];
    }
    bool any = false, all = true;
    for (unsigned i = 0; i < DSMPOOL_MAX_NODES; i++) {
        size_t sz = cfg->node_size[i];
        if (i >= n && sz) return dp_fail(-EINVAL, "node_size[%u] set for a node not in the pool", i);
        if (i >= n) continue;
        if (sz % (2 * DP_MIB)) return dp_fail(-EINVAL, "node_size[%u] = %zu is not a multiple of 2 MiB", i, sz);
        any |= sz != 0;
        all &= sz != 0;
        pl->want[i] = sz / (2 * DP_MIB);
    }
    if (any && !all) return dp_fail(-EINVAL, "node_size: give every node's size, or none");
    pl->nnode = n;
    pl->bind = numa && n > 1;
    if (n > 1 && cfg->interleave_size != DSMPOOL_INTERLEAVE_NONE) {
        if (cfg->interleave_size % (2 * DP_MIB))
            return dp_fail(-EINVAL, "interleave_size is not a multiple of 2 MiB");
        pl->nodes[n] = DP_NODE_INTERLEAVE;
        pl->want[n] = cfg->interleave_size / (2 * DP_MIB);
        n++;
    }
    pl->nsub = n;
    return 0;
}

/* Split total 2 MiB units (in steps of g) among the sub-pools. */
static int plan_units(const dp_plan *pl, uint64_t total, uint64_t g, uint64_t *units) {
    uint64_t used = 0, il = 0;
    bool has_il = pl->nsub > pl->nnode;
    if (has_il) {
        il = pl->want[pl->nnode];
        if (!il) il = total / 4 / (g * pl->nnode) * (g * pl->nnode);
        if (il < g * pl->nnode) il = g * pl->nnode;
        if (il % g) return -EINVAL;
        units[pl->nnode] = il;
    }
    if (pl->want[0]) {
        for (uint32_t i = 0; i < pl->nnode; i++) {
            if (pl->want[i] % g) return -EINVAL;
            units[i] = pl->want[i];
            used += units[i];
        }
        return used + il <= total ? 0 : -ENOSPC;
    }
    if (total < il + g * pl->nnode) return -ENOSPC;
    uint64_t steps = (total - il) / g, per = steps / pl->nnode, extra = steps % pl->nnode;
    for (uint32_t i = 0; i < pl->nnode; i++) units[i] = (per + (i < extra)) * g;
    return 0;
}

/* The default segment table stops at 262144 descriptors (8 MiB, a 4 GiB
 * pool's): every scan of the table (stats, recovery, the checker) reads all
 * of it, and a reservation's table is resident from creation. */
#define DP_SEG_DEFAULT_MAX (1u << 18)

/* The layout of a region of len bytes in pages of `page`: the most data
 * that fits beside the tables, split as the dp_plan says. 0, -ENOSPC (too
 * small) or -EINVAL (explicit node sizes that are not multiples of the data
 * granule). Pure computation: no system call. */
int dp_plan_layout(const dsmpool_config *cfg, const dp_plan *pl, size_t len, size_t page,
                      dp_layout_in *in, dp_header *h) {
    const dp_caps *caps = dp_os_caps();
    *in = (dp_layout_in){len, 0, cfg->max_procs ? cfg->max_procs : 1024, pl->nsub, 0,
                         dp_data_gran(page), {0}, {0}};
    memcpy(in->nodes, pl->nodes, sizeof in->nodes);
    in->nhints = caps->ncpus_conf < 1 ? 1 : caps->ncpus_conf > 4096 ? 4096 : caps->ncpus_conf;
    /* the default: a descriptor per 16 KiB, from 1024 up to DP_SEG_DEFAULT_MAX
     * (a reservation's table follows the size only that far) */
    uint64_t est = len / (16 * 1024);
    est = est < 1024 ? 1024 : est > DP_SEG_DEFAULT_MAX ? DP_SEG_DEFAULT_MAX : est;
    in->seg_cap = cfg->max_segments ? cfg->max_segments : est;
    if (in->seg_cap > DP_SEG_MAX) in->seg_cap = DP_SEG_MAX;
    uint64_t g = in->data_align / (2 * DP_MIB), total = len / (2 * DP_MIB) / g * g;
    int lr = -ENOSPC;
    for (; total >= g; total -= g) {
        int pr = plan_units(pl, total, g, in->units);
        if (pr == -EINVAL) return pl->want[0] ? -EINVAL : -ENOSPC;
        if (pr == 0 && (lr = dp_layout(in, h)) == 0) break;
        if (pl->want[0]) break; /* explicit sizes: no smaller split to try */
    }
    return lr;
}

/* The least size (a multiple of page) whose layout fits, or 0 if none up to
 * 64 TiB. The tables grow with the size (segment descriptors: one per 16
 * KiB up to DP_SEG_DEFAULT_MAX unless max_segments is set), so it searches upwards: doubling to a
 * size that fits, then halving the step down to the least one. */
size_t dp_plan_min_size(const dsmpool_config *cfg, const dp_plan *pl, size_t page) {
    dp_header *h = malloc(sizeof *h);
    if (!h) return 0;
    dp_layout_in in;
    size_t lo = 0, hi = page; /* lo does not fit (or is 0); hi is the candidate */
    while (hi <= (1ull << 46) && dp_plan_layout(cfg, pl, hi, page, &in, h) != 0) {
        lo = hi;
        hi *= 2;
    }
    size_t best = 0;
    if (hi <= (1ull << 46)) {
        best = hi;
        /* the least fitting multiple of page in (lo, hi]: a linear walk down
         * from hi would be long; fit is monotone in practice, but check every
         * answer, so that a non-monotone corner costs only a larger minimum */
        while (hi - lo > page) {
            size_t mid = lo + (hi - lo) / 2 / page * page;
            if (mid <= lo) mid = lo + page;
            if (dp_plan_layout(cfg, pl, mid, page, &in, h) == 0) hi = best = mid;
            else lo = mid;
        }
    }
    free(h);
    return best;
}

size_t dp_region_min_size(const dsmpool_config *cfg) {
    if (!cfg) return 0;
    dp_plan pl;
    if (dp_plan_nodes(cfg, &pl) != 0) return 0;
    bool want_huge = cfg->huge_pages == DSMPOOL_HUGE_ON || cfg->huge_pages == DSMPOOL_HUGE_TRY;
    size_t page = want_huge ? dp_rg_huge_size(cfg) : 4096;
    if (page != 4096 && page != 2 * DP_MIB && page != DP_GIB) {
        dp_fail(-EINVAL, "huge_page_size must be 0, 2 MiB or 1 GiB (got %zu)", page);
        return 0;
    }
    size_t min = dp_plan_min_size(cfg, &pl, page);
    if (!min) dp_fail(-EINVAL, "no size up to 64 TiB fits this configuration (node sizes?)");
    return min;
}

/* hugetlb pools are per node: with bound sub-pools, each node must have its
 * share free, or the prefault (or a later fault) would fail there. The
 * interleaved sub-pool's huge pages go round-robin from a start the kernel
 * picks (the page's offset), so each node may get the rounded-up share; one
 * it cannot serve would come from another node and take a page that node's
 * bound sub-pool needs. */
static int plan_huge_check(const dp_plan *pl, const uint64_t *units, size_t hs) {
    if (!pl->bind || !hs) return 0;
    uint64_t need[DSMPOOL_MAX_NODES] = {0};
    for (uint32_t i = 0; i < pl->nnode; i++) need[i] = units[i] * (2 * DP_MIB) / hs;
    if (pl->nsub > pl->nnode) {
        uint64_t pages = units[pl->nnode] * (2 * DP_MIB) / hs;
        for (uint32_t i = 0; i < pl->nnode; i++) need[i] += (pages + pl->nnode - 1) / pl->nnode;
    }
    for (uint32_t i = 0; i < pl->nnode; i++) {
        long fr = dp_numa_huge_free(pl->nodes[i], hs);
        if (fr >= 0 && (uint64_t)fr < need[i])
            return dp_fail(-ENOMEM, "huge pages unavailable on node %u: need %llu pages of %zu kB, "
                           "%ld free; reserve them with: echo %llu > /sys/devices/system/node/node%u/"
                           "hugepages/hugepages-%zukB/nr_hugepages", pl->nodes[i],
                           (unsigned long long)need[i], hs >> 10, fr, (unsigned long long)need[i],
                           pl->nodes[i], hs >> 10);
    }
    return 0;
}

/* Everything that stops hugetlb pages of size hs for this pool, in one
 * message (-ENOMEM), or 0: no hugetlbfs mount for a POSIX pool, too few
 * pages reserved (overall; per node for bound sub-pools), a hugetlb cgroup
 * limit. A caller that fixes one problem is not sent back for the next. */
int dp_plan_huge_problems(const dsmpool_config *cfg, const dp_plan *pl, const uint64_t *units, size_t hs,
                         size_t len) {
    char msg[1800] = "", one[1400], dir[512];
    int n = 0;
#define HUGE_ADD(...)                                                                              \
    do {                                                                                           \
        if (snprintf(one, sizeof one, __VA_ARGS__) < 0) one[0] = 0;                               \
        size_t l_ = strlen(msg);                                                                  \
        if (snprintf(msg + l_, sizeof msg - l_, "%s(%d) %s", n ? "; " : "", n + 1, one) < 0)     \
            msg[l_] = 0;                                                                           \
        n++;                                                                                       \
    } while (0)
    if (cfg->backing == DSMPOOL_BACKING_POSIX && dp_os_hugetlbfs_dir(hs, dir, sizeof dir) != 0)
        HUGE_ADD("no hugetlbfs is mounted with pagesize=%zuM, which a POSIX pool needs: mount -t hugetlbfs -o "
                 "pagesize=%zuM none /dev/hugepages", hs >> 20, hs >> 20);
    uint64_t need = (len + hs - 1) / hs, avail = 0, fr = 0, tot = 0;
    dp_os_huge_counts(hs, &fr, &tot);
    if (dp_os_huge_avail(hs, &avail) == 0 && avail < need)
        HUGE_ADD("%llu pages of %zu kB are needed, %llu can be had (%llu free of %llu): echo %llu > "
                 "/sys/kernel/mm/hugepages/hugepages-%zukB/nr_hugepages", (unsigned long long)need, hs >> 10,
                 (unsigned long long)avail, (unsigned long long)fr, (unsigned long long)tot,
                 (unsigned long long)(tot + need - avail), hs >> 10);
    else if (plan_huge_check(pl, units, hs) != 0)
        HUGE_ADD("%s", dsmpool_last_error());
    dp_os_room rm;
    dp_os_huge_room(hs, &rm);
    if (!rm.unknown && rm.room < len)
        HUGE_ADD("the hugetlb cgroup lets this process take %llu more bytes of %zu kB pages (%s is %llu): raise "
                 "it", (unsigned long long)rm.room, hs >> 10, rm.where, (unsigned long long)rm.limit);
#undef HUGE_ADD
    if (!n) return 0;
    return dp_fail(-ENOMEM, "huge pages of %zu kB cannot be had for %zu bytes: %s%s", hs >> 10, len, msg,
                   cfg->huge_pages == DSMPOOL_HUGE_ON ? " (or use DSMPOOL_HUGE_TRY)" : "");
}

/* Bind every node sub-pool to its node and the interleaved one over all the
 * pool's nodes, before anything touches them: one mbind per sub-pool, so the
 * mapping is at most nsub + 2 VMAs (the tables before, any tail after) in
 * this process and every child, whatever the pool's size. (One mbind per
 * 2 MiB granule made a VMA each: 32k for a 256 GiB pool, against
 * vm.max_map_count = 65530, in every forked process, and a slow fork.) The
 * interleaved sub-pool is therefore interleaved page by page -- 4 KiB pages,
 * or whole huge pages -- in the kernel's order (numa.c [bind before touch]). */
int dp_plan_bind(dsmpool *p, const dp_header *h, const dp_plan *pl) {
    return pl->bind ? dp_region_bind(p, h) : 0;
}

/* The policies of dp_plan_bind from the header alone: the node sub-pools
 * come first, in the plan's order of nodes, and the plan binds exactly
 * when there are several (dp_plan_nodes: bind = NUMA && n > 1). */
int dp_region_bind(dsmpool *p, const dp_header *h) {
    uint32_t nodes[DSMPOOL_MAX_NODES], n = 0;
    for (uint32_t s = 0; s < h->nsub && s < DSMPOOL_MAX_NODES; s++)
        if (h->sub[s].node != DP_NODE_INTERLEAVE) nodes[n++] = h->sub[s].node;
    if (n < 2) return 0;
    for (uint32_t s = 0; s < h->nsub; s++) {
        char *a = p->base + h->sub[s].data_off;
        size_t len = h->sub[s].geom.frames * DP_FRAME_SIZE;
        int r = h->sub[s].node != DP_NODE_INTERLEAVE ? dp_numa_bind(a, len, h->sub[s].node)
                                                      : dp_numa_interleave(a, len, nodes, n);
        if (r) return dp_fail(r, "mbind of sub-pool %u failed: %s", s, strerror(-r));
    }
    return 0;
}

typedef struct pf_job {
    char *addr;
    size_t len;
    int64_t node; /* pin to this node first, or -1 */
    int err;
    pthread_t tid;
} pf_job;

static void *pf_thread(void *arg) {
    pf_job *j = arg;
    if (j->node >= 0) dp_numa_run_on_node((uint32_t)j->node);
    j->err = dp_os_populate(j->addr, j->len, 1);
    return NULL;
}

/* Prefault: the tables (an elastic pool's: but the directory of its
 * released granules, layout.c [lazy directory]), then each sub-pool in
 * slices by threads pinned to its node, at most `threads` at a time. Slices
 * are whole pages (gran). */
int dp_plan_prefault(dsmpool *p, const dp_header *h, const dp_plan *pl, unsigned threads,
                         size_t gran, const uint64_t *resident, size_t *done) {
    enum { MAXJ = 66 + DP_TABLE_RANGES }; /* tables, 64 data slices, the tail */
    pf_job jobs[MAXJ];
    unsigned nj = 0;
    if (!threads) threads = 1;
    uint64_t tr[DP_TABLE_RANGES][2];
    unsigned nt = dp_table_ranges(h, resident != NULL, h->page_size, resident, tr);
    for (unsigned i = 0; i < nt; i++) jobs[nj++] = (pf_job){p->base + tr[i][0], tr[i][1] - tr[i][0], -1, 0, 0};
    unsigned per = threads / h->nsub;
    if (per < 1) per = 1;
    if (per > 64 / h->nsub) per = 64 / h->nsub; /* every slice gets a job (nsub <= 64) */
    for (uint32_t s = 0; s < h->nsub; s++) {
        char *a = p->base + h->sub[s].data_off;
        size_t len = h->sub[s].geom.frames * DP_FRAME_SIZE;
        if (resident && resident[s] * 2 * DP_MIB < len) len = resident[s] * 2 * DP_MIB;
        if (!len) continue;
        size_t slice = (len / per + gran - 1) / gran * gran;
        int64_t node = pl->bind && h->sub[s].node != DP_NODE_INTERLEAVE ? (int64_t)h->sub[s].node : -1;
        for (size_t o = 0; o < len; o += slice)
            jobs[nj++] = (pf_job){a + o, o + slice > len ? len - o : slice, node, 0, 0};
    }
    if (p->size > h->data_off + h->data_size) /* the tail past the data */
        jobs[nj++] = (pf_job){p->base + h->data_off + h->data_size, p->size - h->data_off - h->data_size,
                              -1, 0, 0};
    int err = 0;
    *done = 0;
    for (unsigned i = 0; i < nj; i += threads) {
        unsigned end = i + threads < nj ? i + threads : nj;
        for (unsigned k = i; k < end; k++)
            if (pthread_create(&jobs[k].tid, NULL, pf_thread, &jobs[k]) != 0) {
                jobs[k].tid = 0;
                pf_thread(&jobs[k]);
            }
        for (unsigned k = i; k < end; k++) {
            if (jobs[k].tid) pthread_join(jobs[k].tid, NULL);
            if (jobs[k].err && !err) err = jobs[k].err;
            if (!jobs[k].err) *done += jobs[k].len;
        }
    }
    return err;
}
/* [fits first]: a pool the cgroup (or the system) cannot hold would be
 * OOM-killed while it is prefaulted (or while a memfd or /dev/shm object is
 * reserved): say so before. A process that cannot learn its limits is
 * refused unless the config accepts the risk (limits_unknown_ok). */
int dp_plan_cgroup_check(const dsmpool_config *cfg, size_t len, size_t huge_sz, bool elastic) {
    dp_os_room rm;
    if (huge_sz) {
        dp_os_huge_room(huge_sz, &rm);
        if (!rm.unknown && rm.room < len)
            return dp_fail(-ENOMEM, "the hugetlb cgroup lets this process take %llu more bytes of %zu kB "
                           "pages (%s is %llu); the pool needs %zu: raise the limit or make the pool smaller",
                           (unsigned long long)rm.room, huge_sz >> 10, rm.where, (unsigned long long)rm.limit, len);
        return 0;
    }
    bool charged = elastic || cfg->prefault || cfg->backing == DSMPOOL_BACKING_MEMFD ||
                   (cfg->backing == DSMPOOL_BACKING_POSIX && cfg->huge_pages != DSMPOOL_HUGE_TRANSPARENT);
    if (!charged) return 0;
    dp_os_mem_room(&rm);
    if (rm.unknown && !cfg->limits_unknown_ok)
        return dp_fail(-ENOMEM, "a pool that makes %zu bytes resident at creation cannot be made here: the memory "
                       "limits of this process cannot be learned (%s), and one it cannot see would be the OOM "
                       "killer's; make them visible, or set limits_unknown_ok to accept the risk", len, rm.where);
    if (rm.room < len)
        return dp_fail(-ENOMEM, "%s leaves room for %llu more bytes (of %llu); a pool that makes %zu bytes "
                       "resident at creation%s would wake the OOM killer: raise the limit, make the pool "
                       "smaller%s", rm.where, (unsigned long long)rm.room, (unsigned long long)rm.limit, len,
                       elastic ? " (its tables and resident_min)" : cfg->prefault ? " (prefaulted)" : " (reserved)",
                       elastic ? "" : cfg->prefault && cfg->backing != DSMPOOL_BACKING_MEMFD
                                      ? ", create it with prefault = false, or make it elastic (resident_min)"
                                      : ", or make it elastic (resident_min)");
    return 0;
}

int dp_plan_huge_message(int r, size_t huge_sz, size_t len) {
    uint64_t fr = 0, tot = 0;
    dp_os_huge_counts(huge_sz, &fr, &tot);
    uint64_t need = (len + huge_sz - 1) / huge_sz;
    return dp_fail(r == -EINVAL || r == -ENOSPC || r == -ENOMEM ? -ENOMEM : r,
                   "huge pages unavailable: need %llu pages of %zu kB, %llu free of %llu; "
                   "reserve them with: echo %llu > /sys/kernel/mm/hugepages/hugepages-%zukB/"
                   "nr_hugepages (or use DSMPOOL_HUGE_TRY)",
                   (unsigned long long)need, huge_sz >> 10, (unsigned long long)fr,
                   (unsigned long long)tot, (unsigned long long)(tot + need - (fr < need ? fr : need)),
                   huge_sz >> 10);
}

