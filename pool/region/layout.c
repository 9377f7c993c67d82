/*
 * layout.c -- the region's layout, and what an attacher checks before it
 * uses any offset in it.
 *
 * Layer: region (pool/region): the bottom of it, called by region.c
 * (create, attach) and by the inspector (dp_region_view).
 *
 * Rules
 *   [layout] The layout is a pure function of (region size, segment
 *      capacity, process slots, sub-pools, hint lines, nodes): dp_layout.
 *      The creator computes it and stores its inputs and outputs in the
 *      header; an attacher recomputes it from the stored inputs and
 *      requires every output to match, and the region size to equal the
 *      real size of the object (fstat / IPC_STAT). Only then is any offset
 *      used, and only from a process-local copy of the header (the shared
 *      one could be scribbled on later; the copy cannot). A region of
 *      another format is refused (-EPROTO) naming the library version that
 *      made it (the header's first 40 bytes never move: dp_format.h).
 *   [lazy directory] The span directory has a 4 KiB page per 2 MiB granule
 *      of data (dir_off and the table after it on a page boundary). In an
 *      elastic pool a granule's page is made resident with the granule and
 *      given back with it (resident.c [lazy directory]): creation makes
 *      only the other tables and the resident granules' pages resident
 *      (dp_table_ranges), so the directory of a reservation costs what is
 *      used, not what is reserved. A fixed pool's directory is resident
 *      whole, as its data is.
 *   [lazy tree] So are, in an elastic pool, the allocator tree's two
 *      lowest levels where it has more (palloc.c [lazy tree]): creation
 *      makes resident only the resident granules' pages of them
 *      (dp_table_ranges) and marks "no tree" (dp_format.h) each released
 *      granule with a page outside those ranges (region.c); the pages of
 *      the others come with their first use, and a trim gives a page of
 *      leaves back with the 4 granules it tells of (resident.c [tree
 *      give-back]): each sub-pool's leaves start on a page boundary. In
 *      huge pages the ranges are rounded to the huge page, so a small
 *      pool's tree is all resident and none is marked.
 *   [unborn] A region whose magic is not yet DP_MAGIC is not validated
 *      here: dp_rg_validate_header says -ENODATA, and the caller asks the
 *      backing why (backing.c [unborn]).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_numa.h"
#include "dp_region.h"
#include "dp_os.h"

int dp_layout(const dp_layout_in *in, dp_header *h) {
    if (!in->region_size || in->region_size % DP_FRAME_SIZE || !in->seg_cap ||
        in->seg_cap > DP_SEG_MAX || !in->proc_cap || in->proc_cap > DP_PA_OWNER_MAX ||
        !in->nsub || in->nsub > DSMPOOL_MAX_NODES || !in->nhints || in->nhints > 4096 ||
        in->data_align < 2 * DP_MIB || in->data_align > DP_GIB || (in->data_align & (in->data_align - 1)))
        return -EINVAL;
    uint64_t off = dp_align_up(sizeof(dp_header), 64);
    h->region_size = in->region_size;
    h->proc_off = off;
    h->proc_cap = in->proc_cap;
    off = dp_align_up(off + (uint64_t)in->proc_cap * sizeof(dp_proc), 64);
    h->seg_off = off;
    h->seg_cap = in->seg_cap;
    /* [lazy directory]: a page of the directory per 2 MiB of data */
    off = dp_align_up(off + in->seg_cap * sizeof(dp_seg_desc), 4096);
    h->dir_off = off;
    h->dir_count = in->region_size >> DP_DIR_SHIFT; /* >= the data's 4 KiB granules */
    off = dp_align_up(off + h->dir_count * sizeof(uint64_t), 4096);
    h->names_off = off;
    h->names_cap = DSMPOOL_NAMES_MAX;
    off = dp_align_up(off + h->names_cap * sizeof(dp_name), 64);
    h->res_off = off; /* dp_format.h: a word per 2 MiB granule of data */
    h->res_count = 0;
    for (uint32_t s = 0; s < in->nsub; s++) {
        if (!in->units[s] || in->units[s] > DP_PA_MAX_FRAMES / DP_HUGE_FRAMES) return -EINVAL;
        h->res_count += in->units[s];
    }
    off = dp_align_up(off + h->res_count * sizeof(uint64_t), 64);
    h->fill_off = off;
    off = dp_align_up(off + (uint64_t)in->proc_cap * sizeof(uint64_t), 64);
    h->nsub = in->nsub;
    h->nhints = in->nhints;
    uint64_t hf = DP_HUGE_FRAMES * (uint64_t)DP_FRAME_SIZE, data = 0;
    for (uint32_t s = 0; s < in->nsub; s++) {
        if (!in->units[s] || in->units[s] > DP_PA_MAX_FRAMES / DP_HUGE_FRAMES) return -EINVAL;
        h->sub[s].node = in->nodes[s];
        h->sub[s].pad = 0;
        /* [lazy tree]: a sub-pool's leaves start on a page, so that a page
         * of them is 4 aligned granules' (resident.c [tree give-back]) */
        off = dp_align_up(off, 4096);
        if (dp_pa_layout(in->units[s] * DP_HUGE_FRAMES, in->nhints, &off, &h->sub[s].geom) != 0)
            return -EINVAL;
        data += in->units[s] * hf;
    }
    h->meta_end = off;
    h->data_off = dp_align_up(off, in->data_align);
    if (h->data_off > in->region_size || data > in->region_size - h->data_off) return -ENOSPC;
    h->data_size = data;
    uint64_t d = h->data_off;
    for (uint32_t s = 0; s < in->nsub; s++) {
        h->sub[s].data_off = d;
        d += h->sub[s].geom.frames * DP_FRAME_SIZE;
    }
    for (uint32_t s = in->nsub; s < DSMPOOL_MAX_NODES; s++) memset(&h->sub[s], 0, sizeof h->sub[s]);
    return 0;
}

/* [lazy directory] */
void dp_dir_range(const dp_header *h, uint64_t g, uint64_t n, uint64_t page, uint64_t *off, uint64_t *len) {
    uint64_t lo = h->dir_off + g * DP_DIR_PAGE, hi = h->dir_off + (g + n) * DP_DIR_PAGE;
    lo = lo / page * page;
    hi = dp_align_up(hi, page);
    *off = lo;
    *len = n ? hi - lo : 0;
}

static unsigned tr_add(uint64_t out[][2], unsigned n, uint64_t lo, uint64_t hi) {
    if (lo < hi) out[n][0] = lo, out[n++][1] = hi;
    return n;
}

unsigned dp_table_ranges(const dp_header *h, bool lazy, uint64_t page, const uint64_t *resident,
                         uint64_t out[][2]) {
    if (!lazy) {
        out[0][0] = 0, out[0][1] = h->data_off;
        return 1;
    }
    /* the lazy tables, rounded in to pages: the directory (its pages past
     * the data's granules, which tell of the tables, are never read), and
     * each sub-pool's tree levels 0 and 1 where it has more (palloc.c
     * [lazy tree]); the ranges between them are resident, up to the end of
     * the tables (the gap before the data's alignment is no table) */
    uint64_t lo = dp_align_up(h->dir_off, page), hi = (h->dir_off + h->dir_count * sizeof(uint64_t)) / page * page;
    unsigned n = tr_add(out, 0, 0, lo);
    uint64_t cur = hi > lo ? hi : lo;
    for (uint32_t s = 0; s < h->nsub; s++) {
        const dp_pa_geom *geo = &h->sub[s].geom;
        if (geo->nlevels <= 2) continue;
        lo = dp_align_up(geo->level_off[0], page), hi = geo->level_off[2] / page * page;
        if (lo >= hi) continue;
        n = tr_add(out, n, cur, lo);
        cur = hi;
    }
    n = tr_add(out, n, cur, dp_align_up(h->meta_end, page) < h->data_off ? dp_align_up(h->meta_end, page) : h->data_off);
    /* and the pages of each sub-pool's first resident[s] granules */
    for (uint32_t s = 0; resident && s < h->nsub; s++) {
        uint64_t g0 = (h->sub[s].data_off - h->data_off) >> DP_RES_SHIFT, o, l, to[2], tl[2];
        dp_dir_range(h, g0, resident[s], page, &o, &l);
        n = tr_add(out, n, o, o + l);
        dp_pa_tree_range(&h->sub[s].geom, 0, resident[s], page, to, tl);
        for (unsigned L = 0; L < 2; L++) n = tr_add(out, n, to[L], to[L] + tl[L]);
    }
    /* in order, joined where they meet (an insertion sort: a few dozen) */
    for (unsigned i = 1; i < n; i++)
        for (unsigned j = i; j > 0 && out[j - 1][0] > out[j][0]; j--) {
            uint64_t t0 = out[j][0], t1 = out[j][1];
            out[j][0] = out[j - 1][0], out[j][1] = out[j - 1][1];
            out[j - 1][0] = t0, out[j - 1][1] = t1;
        }
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++) {
        if (m && out[i][0] <= out[m - 1][1]) {
            if (out[i][1] > out[m - 1][1]) out[m - 1][1] = out[i][1];
        } else {
            out[m][0] = out[i][0], out[m++][1] = out[i][1];
        }
    }
    return m;
}

/* [layout]: everything an attacher must check before using any offset. */
int dp_rg_validate_header(dsmpool *p, const dp_header *c, size_t real_size) {
    if (c->magic == 0 || c->magic == DP_MAGIC_CREATING) return -ENODATA; /* [unborn]: the caller asks why */
    if (c->magic != DP_MAGIC)
        return dp_fail(-EPROTO, "not a dsmpool region (magic %016llx)",
                       (unsigned long long)c->magic);
    if (c->version != DP_FORMAT_VERSION || c->header_size != sizeof(dp_header)) {
        char by[48] = "a dsmpool library before 0.1.0";
        if (c->version >= 3) /* (the library's version is in every format from 3 on) */
            snprintf(by, sizeof by, "dsmpool %u.%u.%u", c->lib_version / 10000, c->lib_version / 100 % 100,
                     c->lib_version % 100);
        return dp_fail(-EPROTO, "this pool was made by %s in region format %u (header %u bytes); "
                       "this library, dsmpool %s, reads format %u: attach with the library that made "
                       "it, or detach every process of the pool and create it again",
                       by, c->version, c->header_size, DSMPOOL_VERSION_STRING, DP_FORMAT_VERSION);
    }
    if (c->region_size != real_size)
        return dp_fail(-EPROTO, "header says %llu bytes but the object has %zu (truncated?)",
                       (unsigned long long)c->region_size, real_size);
    if (c->map_align < 2 * DP_MIB || c->map_align > DP_GIB || (c->map_align & (c->map_align - 1)) ||
        (c->page_size != 4096 && c->page_size != 2 * DP_MIB && c->page_size != DP_GIB) ||
        c->backing > DSMPOOL_BACKING_SYSV || c->huge_requested > DSMPOOL_HUGE_TRANSPARENT)
        return dp_fail(-EPROTO, "corrupt header: bad alignment, page size or backing");
    if (c->nsub < 1 || c->nsub > DSMPOOL_MAX_NODES)
        return dp_fail(-EPROTO, "corrupt header: %u sub-pools", c->nsub);
    dp_layout_in in = {c->region_size, c->seg_cap, (uint32_t)c->proc_cap, c->nsub, c->nhints,
                       dp_data_gran(c->page_size), {0}, {0}};
    if (c->proc_cap > DP_PA_OWNER_MAX) return dp_fail(-EPROTO, "corrupt header: process slots");
    for (uint32_t s = 0; s < c->nsub; s++) {
        in.nodes[s] = c->sub[s].node;
        in.units[s] = c->sub[s].geom.frames / DP_HUGE_FRAMES;
    }
    dp_header *want = calloc(1, sizeof *want);
    if (!want) return dp_fail(-ENOMEM, "out of memory validating the header");
    int r = dp_layout(&in, want);
    bool same = r == 0 && want->proc_off == c->proc_off && want->seg_off == c->seg_off &&
                want->dir_off == c->dir_off && want->dir_count == c->dir_count &&
                want->names_off == c->names_off && want->names_cap == c->names_cap &&
                want->res_off == c->res_off && want->res_count == c->res_count &&
                want->fill_off == c->fill_off &&
                want->meta_end == c->meta_end && want->data_off == c->data_off &&
                want->data_size == c->data_size &&
                memcmp(want->sub, c->sub, sizeof want->sub) == 0;
    free(want);
    if (!same)
        return dp_fail(-EPROTO, "corrupt header: the layout does not match its sizes");
    return 0;
}

/* Per sub-pool, the node sub-pools nearest first (by the machine's SLIT
 * distances; ties by index), and the map from node id to sub-pool. */
static void placement_init(dsmpool *p) {
    const dp_topo *t = dp_numa_topo();
    p->il_sub = -1;
    memset(p->node_sub, -1, sizeof p->node_sub);
    uint32_t nn = 0, idx[DSMPOOL_MAX_NODES];
    for (uint32_t s = 0; s < p->nsub; s++) {
        uint32_t node = p->geo.sub[s].node;
        if (node == DP_NODE_INTERLEAVE) {
            p->il_sub = (int)s;
            continue;
        }
        if (node < 256) p->node_sub[node] = (int8_t)s;
        idx[nn++] = s;
    }
    for (uint32_t s = 0; s < p->nsub; s++) {
        int from = dp_numa_index(p->geo.sub[s].node);
        uint32_t ord[DSMPOOL_MAX_NODES];
        memcpy(ord, idx, sizeof(uint32_t) * nn);
        for (uint32_t i = 1; i < nn; i++) /* insertion sort by distance from s's node */
            for (uint32_t j = i; j > 0; j--) {
                int a = dp_numa_index(p->geo.sub[ord[j - 1]].node), b = dp_numa_index(p->geo.sub[ord[j]].node);
                int da = from >= 0 && a >= 0 ? t->dist[from][a] : (ord[j - 1] == s ? 0 : 100);
                int db = from >= 0 && b >= 0 ? t->dist[from][b] : (ord[j] == s ? 0 : 100);
                if (ord[j - 1] == s) da = -1; /* yourself first */
                if (ord[j] == s) db = -1;
                if (db >= da) break;
                uint32_t x = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = x;
            }
        for (uint32_t k = 0; k < DSMPOOL_MAX_NODES; k++) p->order[s][k] = k < nn ? (uint8_t)ord[k] : 0xff;
    }
    p->one_sub = p->nsub == 1 && p->il_sub < 0;
}

/* Build the process-local view from a validated copy of the header. */
int dp_rg_build_view(dsmpool *p, const dp_header *c) {
    p->procs = (dp_proc *)(p->base + c->proc_off);
    p->nprocs = (uint32_t)c->proc_cap;
    p->segs = (dp_seg_desc *)(p->base + c->seg_off);
    p->nsegs = c->seg_cap;
    p->nsub = c->nsub;
    p->dir = (dp_a64 *)(p->base + c->dir_off);
    p->names = (dp_name *)(p->base + c->names_off);
    p->res = (dp_a64 *)(p->base + c->res_off);
    p->fill = (dp_a64 *)(p->base + c->fill_off);
    memcpy(&p->geo, c, sizeof p->geo);
    p->geo.magic = DP_MAGIC;
    p->res_span = c->page_size <= (1ull << DP_RES_SHIFT) ? c->res_count << DP_RES_SHIFT : 0;
    for (uint32_t s = 0; s < c->nsub; s++)
        if (dp_pa_view(&p->pa[s], p->base, c->region_size, &c->sub[s].geom) != 0)
            return dp_fail(-EPROTO, "corrupt header: allocator tree of sub-pool %u", s);
    /* the allocator's cold hint (palloc.c [resident first]): each sub-pool's
     * granules' residency words, and its count of released ones */
    for (uint32_t s = 0; s < c->nsub; s++) {
        uint64_t g0 = (c->sub[s].data_off - c->data_off) >> DP_RES_SHIFT;
        dp_pa_set_cold(&p->pa[s], p->res + g0, &((dp_header *)p->base)->released_hint[s]);
    }
    placement_init(p);
    return 0;
}

int dp_region_peek_fd(int fd, dp_header *h) { return dp_os_file_peek(fd, h, sizeof *h); }
int dp_region_peek_sysv(int shmid, dp_header *h) { return dp_os_sysv_peek(shmid, h, sizeof *h); }
