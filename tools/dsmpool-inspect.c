/*
 * dsmpool-inspect -- look at pools from outside, for operators.
 *
 *   dsmpool-inspect [--json] NAME            every view of one pool
 *   dsmpool-inspect [--json] --pid PID       every pool process PID maps (ANON, MEMFD too)
 *   dsmpool-inspect [--json] --list          the pools on this machine and their state
 *   dsmpool-inspect [--json] NAME --check    the views, then the consistency proof
 *   dsmpool-inspect [--json] NAME --recover  release what dead processes held first
 *   dsmpool-inspect [--json] --sweep         remove what pools no live process holds left
 *   dsmpool-inspect [--json] --destroy NAME [--force]
 *   --view V[,V...]  only these views of a pool: pool, subpools, processes, segments, areas, names
 *
 * NAME is a POSIX name ("/x") or a System V key text. Looking is read-only
 * (pool/inspect.c): the region is mapped PROT_READ, its header validated as
 * attach validates it, and no slot is taken. --check and --recover attach
 * like any process (a slot, while they run); --sweep and --destroy attach
 * to nothing. Exit status: 0; 1 with the library's message; 2 for usage.
 *
 * Views are a table (views[] below): a new one is a function and a row. The
 * "names" view lists named segments and areas (dp_inspect_names()).
 */
#include <dsmpool.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_internal.h"

/* ---- output: text, or JSON through a small writer --------------------------- */

typedef struct out {
    bool json;
    int depth;
    bool first[32]; /* per nesting level: nothing written there yet */
} out;

static void j_sep(out *o, const char *key) {
    if (o->depth > 0 && !o->first[o->depth]) fputc(',', stdout);
    if (o->depth > 0) o->first[o->depth] = false;
    if (key) {
        fputc('"', stdout);
        fputs(key, stdout); /* keys are ours: plain ASCII */
        fputs("\":", stdout);
    }
}

static void j_str_raw(const char *s) {
    fputc('"', stdout);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) printf("\\u%04x", *p); /* bytes, not UTF-8: a name is bytes */
        else fputc(*p, stdout);
    }
    fputc('"', stdout);
}

static void j_open(out *o, const char *key, char c) {
    j_sep(o, key);
    fputc(c, stdout);
    o->first[++o->depth] = true;
}
static void j_close(out *o, char c) {
    o->depth--;
    fputc(c, stdout);
}
static void j_u(out *o, const char *key, unsigned long long v) {
    j_sep(o, key);
    printf("%llu", v);
}
static void j_i(out *o, const char *key, long long v) {
    j_sep(o, key);
    printf("%lld", v);
}
static void j_b(out *o, const char *key, bool v) {
    j_sep(o, key);
    fputs(v ? "true" : "false", stdout);
}
static void j_s(out *o, const char *key, const char *v) {
    j_sep(o, key);
    if (v) j_str_raw(v);
    else fputs("null", stdout);
}
static void j_hex(out *o, const char *key, unsigned long long v) { /* 64-bit ids: strings, exact in any reader */
    char b[24];
    snprintf(b, sizeof b, "0x%016llx", v);
    j_s(o, key, b);
}
static void j_tri(out *o, const char *key, int v) { /* 1 true, 0 false, else null (cannot tell) */
    j_sep(o, key);
    fputs(v == 1 ? "true" : v == 0 ? "false" : "null", stdout);
}

/* ---- names of things ---------------------------------------------------------- */

static const char *huge_name(unsigned h) {
    switch (h) {
    case DSMPOOL_HUGE_OFF: return "off";
    case DSMPOOL_HUGE_TRY: return "try";
    case DSMPOOL_HUGE_ON: return "on";
    case DSMPOOL_HUGE_TRANSPARENT: return "transparent";
    }
    return "?";
}
static const char *slot_state(unsigned s) {
    static const char *n[] = {"free", "live", "recovering", "leaving"};
    return s < 4 ? n[s] : "invalid";
}
static const char *seg_state(unsigned s) {
    static const char *n[] = {"free", "creating", "live", "dying"};
    return s < 4 ? n[s] : "?";
}
static const char *list_state(int s) {
    switch (s) {
    case DP_LIST_LIVE: return "live";
    case DP_LIST_DEAD: return "dead";
    case DP_LIST_CLOSED: return "closed";
    case DP_LIST_CREATING: return "creating";
    case DP_LIST_HALF: return "half-created";
    case DP_LIST_OTHER_FORMAT: return "other-format";
    }
    return "?";
}
static const char *list_kind(const dp_list_entry *e) {
    if (e->kind == DP_LIST_SYSV) return "sysv";
    if (e->kind == DP_LIST_NO_REGION) return "anonymous-or-memfd";
    return strncmp(e->path, "/dev/shm/", 9) == 0 ? "posix" : "hugetlbfs";
}

/* ---- the views of one pool ------------------------------------------------------ */

static void show_pool(out *o, dp_insp *in) {
    const dp_header *h = dp_inspect_header(in);
    dp_insp_flags fl;
    dsmpool_stats st;
    dp_inspect_flags(in, &fl);
    dp_inspect_stats(in, &st);
    char made[32];
    snprintf(made, sizeof made, "%u.%u.%u", h->lib_version / 10000, h->lib_version / 100 % 100, h->lib_version % 100);
    char name[DP_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", h->name); /* the validated copy's; bounded here */
    if (o->json) {
        j_open(o, "pool", '{');
        j_s(o, "name", name[0] ? name : NULL);
        j_s(o, "reached", dp_inspect_how(in));
        j_hex(o, "pool_id", h->pool_id);
        j_s(o, "backing", dsmpool_backing_name((dsmpool_backing)h->backing));
        j_u(o, "format", h->version);
        j_s(o, "made_by", made);
        j_u(o, "region_size", h->region_size);
        j_u(o, "data_size", h->data_size);
        j_u(o, "page_size", h->page_size);
        j_s(o, "huge_requested", huge_name(h->huge_requested));
        j_b(o, "huge_pages", h->huge_pages);
        j_b(o, "huge_fallback", h->huge_fallback);
        j_b(o, "thp_advised", h->thp_advised);
        j_u(o, "prefaulted_bytes", h->prefaulted_bytes);
        j_u(o, "map_align", h->map_align);
        j_u(o, "mode", h->mode);
        j_b(o, "closed", fl.closed);
        j_b(o, "destroyed", fl.destroyed);
        j_b(o, "anchored", !h->no_anchor);
        j_open(o, "counters", '{');
        j_u(o, "fallback_segments_created", st.fallback_segments_created);
        j_u(o, "procs_recovered", st.procs_recovered);
        j_u(o, "procs_recovering", st.procs_recovering);
        j_u(o, "recoveries_deferred", st.recoveries_deferred);
        j_u(o, "lost_chunks_reclaimed", st.lost_chunks_reclaimed);
        j_u(o, "cache_trims", st.cache_trims);
        j_b(o, "sweep_due", st.sweep_due);
        j_close(o, '}');
        j_open(o, "residency", '{');
        j_b(o, "elastic", st.elastic);
        j_u(o, "resident_bytes", st.resident_bytes);
        j_u(o, "released_bytes", st.released_bytes);
        j_u(o, "warm_free_bytes", st.warm_free_bytes);
        j_u(o, "resident_min", st.resident_min);
        j_u(o, "warm_bytes", st.warm_bytes);
        j_u(o, "idle_release_ms", st.idle_release_ms);
        j_u(o, "releases", st.releases);
        j_u(o, "released_total", st.released_total);
        j_u(o, "release_ns", st.release_ns);
        j_u(o, "refills_ahead", st.refills_ahead);
        j_u(o, "refilled_ahead", st.refilled_ahead);
        j_u(o, "refill_ahead_ns", st.refill_ahead_ns);
        j_u(o, "refills_on_demand", st.refills_on_demand);
        j_u(o, "refilled_on_demand", st.refilled_on_demand);
        j_u(o, "refill_on_demand_ns", st.refill_on_demand_ns);
        j_u(o, "refill_failures", st.refill_failures);
        j_u(o, "refills_while_warm_fit", st.refills_while_warm_fit);
        j_u(o, "maintain_steps", st.maintain_steps);
        if (h->huge_pages)
            j_s(o, "huge_released_to", st.huge_release_to_system ? "system" : "hugetlb_pool");
        j_close(o, '}');
        j_close(o, '}');
        return;
    }
    printf("pool        %s  id %016llx, %s backing, format %u, made by dsmpool %s%s%s\n",
           name[0] ? name : "(unnamed)", (unsigned long long)h->pool_id,
           dsmpool_backing_name((dsmpool_backing)h->backing), h->version, made, fl.closed ? ", closed" : "",
           fl.destroyed ? ", destroyed" : "");
    printf("reached     %s (read-only)\n", dp_inspect_how(in));
    printf("region      %llu bytes, data %llu bytes\n", (unsigned long long)h->region_size,
           (unsigned long long)h->data_size);
    printf("pages       %llu KiB (huge pages asked: %s; hugetlb: %s%s; THP advised: %s)\n",
           (unsigned long long)h->page_size >> 10, huge_name(h->huge_requested), h->huge_pages ? "yes" : "no",
           h->huge_fallback ? ", fell back" : "", h->thp_advised ? "yes" : "no");
    printf("prefaulted  %llu bytes at creation\n", (unsigned long long)h->prefaulted_bytes);
    printf("recovery    %u waiting for a live process, %llu recovered so far, %llu times deferred, leak sweep "
           "%s; %llu lost area chunks given back\n", st.procs_recovering, (unsigned long long)st.procs_recovered,
           (unsigned long long)st.recoveries_deferred, st.sweep_due ? "due" : "not due",
           (unsigned long long)st.lost_chunks_reclaimed);
    printf("pressure    %llu times the pool ran short and asked caches to give back\n",
           (unsigned long long)st.cache_trims);
    printf("residency   %s: %zu bytes resident, %zu released, %zu free and resident (warm)",
           st.elastic ? "elastic" : "fixed", st.resident_bytes, st.released_bytes, st.warm_free_bytes);
    if (st.elastic)
        printf("; resident_min %zu, warm_bytes %zu, idle_release_ms %u", st.resident_min, st.warm_bytes,
               st.idle_release_ms);
    printf("\n");
    printf("releases    %llu (%llu bytes, %.3f ms); refills ahead %llu (%llu bytes, %.3f ms), on demand %llu "
           "(%llu bytes, %.3f ms, %llu while resident memory fit), %llu failed; %llu maintenance steps\n",
           (unsigned long long)st.releases, (unsigned long long)st.released_total, st.release_ns / 1e6,
           (unsigned long long)st.refills_ahead, (unsigned long long)st.refilled_ahead, st.refill_ahead_ns / 1e6,
           (unsigned long long)st.refills_on_demand, (unsigned long long)st.refilled_on_demand,
           st.refill_on_demand_ns / 1e6, (unsigned long long)st.refills_while_warm_fit,
           (unsigned long long)st.refill_failures,
           (unsigned long long)st.maintain_steps);
    if (h->huge_pages)
        printf("huge pages  released ones go back %s\n",
               st.huge_release_to_system ? "to the system (the kernel's pool has surplus pages)"
                                         : "to the kernel's hugetlb pool only (persistent pages: nr_hugepages)");
}

static void show_subpools(out *o, dp_insp *in) {
    dsmpool_stats st;
    dp_inspect_stats(in, &st);
    if (o->json) j_open(o, "subpools", '[');
    for (unsigned i = 0; i < st.nsubpools && i < DSMPOOL_MAX_NODES; i++) {
        const dsmpool_subpool_stats *s = &st.subpool[i];
        if (!o->json) {
            printf("sub-pool %u  node %d: %zu bytes, %zu free, largest free block %zu; %llu placements fell "
                   "back from here\n", i, s->node, s->size, s->free, s->largest_free,
                   (unsigned long long)s->fallbacks);
            continue;
        }
        j_open(o, NULL, '{');
        j_u(o, "index", i);
        j_i(o, "node", s->node);
        j_u(o, "size", s->size);
        j_u(o, "free", s->free);
        j_u(o, "largest_free", s->largest_free);
        j_u(o, "fallbacks", s->fallbacks);
        j_close(o, '}');
    }
    if (o->json) j_close(o, ']');
}

static void show_procs(out *o, dp_insp *in) {
    dp_insp_proc *v = NULL;
    size_t n = 0;
    dsmpool_stats st;
    dp_insp_flags fl;
    dp_inspect_stats(in, &st);
    dp_inspect_flags(in, &fl);
    if (dp_inspect_procs(in, &v, &n) != 0) n = 0;
    if (o->json) {
        j_open(o, "processes", '{');
        j_u(o, "attached", st.procs_attached);
        j_u(o, "capacity", st.procs_capacity);
        j_u(o, "unguarded", st.procs_unguarded);
        j_b(o, "liveness_known", fl.liveness);
        j_open(o, "slots", '[');
    } else {
        printf("processes   %u attached of %u%s\n", st.procs_attached, st.procs_capacity,
               fl.liveness ? "" : " (liveness cannot be told from here: an anonymous pool's lock file is its own)");
    }
    for (size_t i = 0; i < n; i++) {
        const dp_insp_proc *p = &v[i];
        if (!o->json) {
            printf("  slot %-4u pid %-8d %-10s %-8s records %u%s%s\n", p->slot, p->pid, slot_state(p->state),
                   p->alive == 1 ? "alive" : p->alive == 0 ? "DEAD" : "?", p->records,
                   p->pending ? " (+ in progress)" : "", p->unguarded ? " unguarded" : "");
            continue;
        }
        j_open(o, NULL, '{');
        j_u(o, "slot", p->slot);
        j_i(o, "pid", p->pid);
        j_s(o, "state", slot_state(p->state));
        j_tri(o, "alive", p->alive);
        j_b(o, "unguarded", p->unguarded);
        j_u(o, "records", p->records);
        j_u(o, "records_in_progress", p->pending);
        j_u(o, "brackets_open", p->inflight);
        j_close(o, '}');
    }
    if (o->json) {
        j_close(o, ']');
        j_close(o, '}');
    }
    free(v);
}

static void show_segs(out *o, dp_insp *in) {
    dp_insp_seg *v = NULL;
    size_t n = 0;
    dsmpool_stats st;
    dp_inspect_stats(in, &st);
    if (dp_inspect_segs(in, &v, &n) != 0) n = 0;
    if (o->json) {
        j_open(o, "segments", '{');
        j_u(o, "live", st.segments_live);
        j_u(o, "capacity", st.segments_capacity);
        j_u(o, "fallback_live", st.fallback_segments_live);
        j_open(o, "list", '[');
    } else {
        printf("segments    %zu live of %zu (%zu from the OS; %llu OS segments created so far)\n", st.segments_live,
               st.segments_capacity, st.fallback_segments_live, (unsigned long long)st.fallback_segments_created);
    }
    for (size_t i = 0; i < n; i++) {
        const dp_insp_seg *s = &v[i];
        if (!o->json) {
            printf("  %016llx %-8s %12llu bytes  refs %-4u%s%s%s%s", (unsigned long long)s->handle,
                   seg_state(s->state), (unsigned long long)s->size, s->refs, s->pinned ? " pinned" : "",
                   s->fallback ? " fallback(OS)" : "", s->area ? " area-control" : "", s->damaged ? " DAMAGED" : "");
            if (s->sub >= 0) printf("  sub-pool %d offset %llu", s->sub, (unsigned long long)s->offset);
            if (s->owner_slot >= 0) printf("  by slot %lld", (long long)s->owner_slot);
            printf("\n");
            continue;
        }
        j_open(o, NULL, '{');
        j_hex(o, "handle", s->handle);
        j_u(o, "index", s->index);
        j_s(o, "state", seg_state(s->state));
        j_u(o, "size", s->size);
        j_u(o, "refs", s->refs);
        j_b(o, "pinned", s->pinned);
        j_b(o, "fallback", s->fallback);
        j_b(o, "area", s->area);
        j_b(o, "damaged", s->damaged);
        j_i(o, "subpool", s->sub);
        j_u(o, "offset", s->offset);
        j_u(o, "flags", s->flags & ~(uint32_t)DP_SEG_AREA);
        j_i(o, "owner_slot", s->owner_slot);
        j_close(o, '}');
    }
    if (o->json) {
        j_close(o, ']');
        j_close(o, '}');
    }
    free(v);
}

static void show_areas(out *o, dp_insp *in) {
    dp_insp_area *v = NULL;
    size_t n = 0;
    if (dp_inspect_areas(in, &v, &n) != 0) n = 0;
    if (o->json) j_open(o, "areas", '[');
    else printf("areas       %zu\n", n);
    for (size_t i = 0; i < n; i++) {
        const dp_insp_area *a = &v[i];
        const char *state = a->state == 1 ? "live" : a->state == 2 ? "destroyed" : "?";
        if (!o->json) {
            printf("  %016llx %-9s held %llu bytes, cached %llu bytes in %u thread caches, limit %llu, large %llu "
                   "(%llu bytes)%s%s%s\n", (unsigned long long)a->handle, state, (unsigned long long)a->held,
                   (unsigned long long)a->cached_bytes, a->caches, (unsigned long long)a->limit,
                   (unsigned long long)a->large_blocks, (unsigned long long)a->large_bytes,
                   a->damaged ? " DAMAGED" : "", a->why[0] ? ": " : "", a->why);
            for (unsigned c = 0; c < DP_INSP_NCLS; c++)
                if (a->spans[c] || a->cached_chunks[c])
                    printf("    class %-2u %7llu B  spans %llu, cached chunks %llu\n", c, (unsigned long long)a->chunk_size[c],
                           (unsigned long long)a->spans[c], (unsigned long long)a->cached_chunks[c]);
            continue;
        }
        j_open(o, NULL, '{');
        j_hex(o, "handle", a->handle);
        j_s(o, "state", state);
        j_u(o, "held", a->held);
        j_u(o, "limit", a->limit);
        j_u(o, "cached_bytes", a->cached_bytes);
        j_u(o, "caches", a->caches);
        j_u(o, "flags", a->flags);
        j_u(o, "lost", a->lost);
        j_u(o, "fallback_entries", a->fallback_entries);
        j_u(o, "registry_pages", a->registry_pages);
        j_open(o, "large", '{');
        j_u(o, "blocks", a->large_blocks);
        j_u(o, "bytes", a->large_bytes);
        j_close(o, '}');
        j_open(o, "classes", '[');
        for (unsigned c = 0; c < DP_INSP_NCLS; c++) {
            if (!a->spans[c] && !a->cached_chunks[c]) continue;
            j_open(o, NULL, '{');
            j_u(o, "class", c);
            j_u(o, "chunk_size", a->chunk_size[c]);
            j_u(o, "spans", a->spans[c]);
            j_u(o, "cached_chunks", a->cached_chunks[c]);
            j_close(o, '}');
        }
        j_close(o, ']');
        j_b(o, "damaged", a->damaged);
        j_s(o, "why", a->why[0] ? a->why : NULL);
        j_close(o, '}');
    }
    if (o->json) j_close(o, ']');
    free(v);
}

static void show_names(out *o, dp_insp *in) {
    dp_insp_name *v = NULL;
    size_t n = 0;
    if (dp_inspect_names(in, &v, &n) != 0) n = 0;
    if (o->json) j_open(o, "names", '[');
    else printf("names       %zu in use of %d\n", n, DSMPOOL_NAMES_MAX);
    for (size_t i = 0; i < n; i++) {
        const dp_insp_name *x = &v[i];
        const char *kind = x->kind == DP_NAME_AREA ? "area" : x->kind == DP_NAME_SEG ? "segment" : "?";
        const char *state = x->damaged ? "damaged"
                            : x->state == DP_NAME_INIT ? "initialising"
                            : x->object_live ? "ready" : "gone (freed at the next search)";
        if (!o->json) {
            printf("  %-40s %-7s %-12s", x->name, kind, state);
            if (x->state == DP_NAME_READY) printf("  handle %016llx", (unsigned long long)x->handle);
            if (x->kind == DP_NAME_SEG && x->size) printf("  %llu bytes", (unsigned long long)x->size);
            printf("  made by pid %llu", (unsigned long long)x->pid);
            if (x->owner_slot >= 0) printf(" (slot %lld)", (long long)x->owner_slot);
            printf("\n");
            continue;
        }
        j_open(o, NULL, '{');
        j_s(o, "name", x->name);
        j_s(o, "kind", kind);
        j_s(o, "state", x->damaged ? "damaged" : x->state == DP_NAME_INIT ? "initialising" : "ready");
        j_b(o, "object_live", x->object_live);
        j_hex(o, "handle", x->handle);
        j_u(o, "size", x->size);
        j_u(o, "pid", x->pid);
        j_close(o, '}');
    }
    if (o->json) j_close(o, ']');
    free(v);
}

typedef struct view {
    const char *name;
    void (*show)(out *o, dp_insp *in);
} view;

static const view views[] = {
    {"pool", show_pool},
    {"subpools", show_subpools},
    {"processes", show_procs},
    {"segments", show_segs},
    {"areas", show_areas},
    {"names", show_names},
};
#define NVIEWS (sizeof views / sizeof *views)

static bool view_wanted(const char *sel, const char *name) {
    if (!sel) return true;
    size_t l = strlen(name);
    for (const char *p = sel; *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == l && !strncmp(p, name, l)) return true;
        p += k + (e ? 1 : 0);
    }
    return false;
}

static void show_all(out *o, dp_insp *in, const char *sel) {
    if (o->json) j_open(o, NULL, '{');
    for (size_t i = 0; i < NVIEWS; i++)
        if (view_wanted(sel, views[i].name)) views[i].show(o, in);
    if (o->json) j_close(o, '}');
}

/* ---- the commands ---------------------------------------------------------------- */

static int fail(const char *what, int r) {
    fprintf(stderr, "%s: %s: %s\n", what, dsmpool_strerror(r), dsmpool_last_error());
    return 1;
}

static int cmd_list(out *o) {
    dp_list_entry *v = NULL;
    size_t n = 0;
    int r = dp_life_list(&v, &n);
    if (r) return fail("list", r);
    if (o->json) {
        j_open(o, NULL, '{');
        j_open(o, "pools", '[');
    } else {
        printf("%-12s %-18s %-16s %-18s %s\n", "STATE", "KIND", "POOL ID", "NAME", "WHERE / NOTES");
    }
    for (size_t i = 0; i < n; i++) {
        const dp_list_entry *e = &v[i];
        char key[16] = "";
        if (e->kind == DP_LIST_SYSV) snprintf(key, sizeof key, "0x%08x", (unsigned)e->key);
        if (!o->json) {
            char where[4400];
            if (e->kind == DP_LIST_SYSV) snprintf(where, sizeof where, "key %s, id %d", key, e->shmid);
            else if (e->kind == DP_LIST_NO_REGION)
                snprintf(where, sizeof where, "%s", e->state == DP_LIST_LIVE ? "(see it with --pid PID of a process of it)"
                                                    : "(what it left: --sweep removes it)");
            else snprintf(where, sizeof where, "%s", e->path);
            if (e->state == DP_LIST_OTHER_FORMAT) {
                char by[64] = "a library that recorded no version";
                if (e->lib_version == DSMPOOL_VERSION_NUMBER)
                    snprintf(by, sizeof by, "another build of dsmpool %s", DSMPOOL_VERSION_STRING);
                else if (e->lib_version)
                    snprintf(by, sizeof by, "dsmpool %u.%u.%u", e->lib_version / 10000,
                             e->lib_version / 100 % 100, e->lib_version % 100);
                size_t l = strlen(where);
                snprintf(where + l, sizeof where - l,
                         " (region format %u, header %u bytes, made by %s: its own tool judges it; "
                         "--destroy NAME --force removes it)", e->format, e->header_size, by);
            }
            char id[24] = "-"; /* another format's pool whose claim on an id does not hold: none */
            bool unclaimed = e->state == DP_LIST_OTHER_FORMAT && !e->id;
            if (!unclaimed) snprintf(id, sizeof id, "%016llx", (unsigned long long)e->id);
            printf("%-12s %-18s %-16s %-18s %s%s", list_state(e->state), list_kind(e), id,
                   e->name[0] ? e->name : "-", where, e->anchor || unclaimed ? "" : ", no anchor");
            if (e->fallback_objects) printf(", %llu OS segment objects", (unsigned long long)e->fallback_objects);
            printf("\n");
            continue;
        }
        j_open(o, NULL, '{');
        j_hex(o, "id", e->id);
        j_s(o, "kind", list_kind(e));
        j_s(o, "state", list_state(e->state));
        j_s(o, "name", e->name[0] ? e->name : NULL);
        j_s(o, "path", e->path[0] ? e->path : NULL);
        j_s(o, "key", key[0] ? key : NULL);
        j_i(o, "shmid", e->shmid);
        j_b(o, "anchor", e->anchor);
        if (e->state == DP_LIST_OTHER_FORMAT) { /* its locks are not read: unknown */
            j_s(o, "present", NULL);
            j_s(o, "slots_held", NULL);
        } else {
            j_b(o, "present", e->present);
            j_b(o, "slots_held", e->slots_held);
        }
        j_u(o, "fallback_objects", e->fallback_objects);
        if (e->state == DP_LIST_OTHER_FORMAT) {
            j_u(o, "format", e->format);
            j_u(o, "lib_version", e->lib_version);
            j_u(o, "header_size", e->header_size);
        }
        j_close(o, '}');
    }
    if (o->json) {
        j_close(o, ']');
        j_close(o, '}');
        printf("\n");
    }
    free(v);
    return 0;
}

static int cmd_pid(out *o, long pid, const char *sel) {
    dp_insp **v = NULL;
    size_t n = 0, denied = 0;
    int r = dp_inspect_open_pid((pid_t)pid, &v, &n, &denied);
    char note[400] = "";
    if (r == 0 && dsmpool_last_error()[0]) snprintf(note, sizeof note, "%s", dsmpool_last_error());
    if (r) {
        char what[48];
        snprintf(what, sizeof what, "pid %ld", pid);
        return fail(what, r);
    }
    if (o->json) {
        j_open(o, NULL, '{');
        j_i(o, "pid", pid);
        j_u(o, "denied", denied);
        j_s(o, "note", note[0] ? note : NULL);
        j_open(o, "pools", '[');
    }
    for (size_t i = 0; i < n; i++) {
        if (!o->json && i) printf("\n");
        show_all(o, v[i], sel);
        dp_inspect_close(v[i]);
    }
    if (o->json) {
        j_close(o, ']');
        j_close(o, '}');
        printf("\n");
    } else if (note[0]) {
        printf("note        %s\n", note);
    }
    free(v);
    return 0;
}

static int cmd_pool(out *o, const char *name, bool check, bool recover, const char *sel) {
    int rc = 0, cr = 0, rr = 0;
    char cmsg[512] = "", rmsg[512] = "";
    if (check || recover) { /* these attach: they need a slot (and take it only while they run) */
        dsmpool *p;
        int r = dsmpool_attach(name, &p);
        if (r) return fail(name, r);
        if (recover && (rr = dsmpool_recover(p)) != 0) snprintf(rmsg, sizeof rmsg, "%s", dsmpool_last_error());
        if (check && (cr = dsmpool_check(p)) != 0) snprintf(cmsg, sizeof cmsg, "%s", dsmpool_last_error());
        dsmpool_detach(p);
        rc = rr || cr ? 1 : 0;
    }
    dp_insp *in;
    int r = dp_inspect_open_name(name, &in);
    if (r) return fail(name, r);
    if (o->json) {
        j_open(o, NULL, '{');
        for (size_t i = 0; i < NVIEWS; i++)
            if (view_wanted(sel, views[i].name)) views[i].show(o, in);
        if (recover) {
            j_open(o, "recover", '{');
            j_s(o, "result", rr ? dsmpool_strerror(rr) : "ok");
            j_s(o, "message", rmsg[0] ? rmsg : NULL);
            j_close(o, '}');
        }
        if (check) {
            j_open(o, "check", '{');
            j_s(o, "result", cr ? dsmpool_strerror(cr) : "ok");
            j_s(o, "message", cmsg[0] ? cmsg : NULL);
            j_close(o, '}');
        }
        j_close(o, '}');
        printf("\n");
    } else {
        show_all(o, in, sel);
        if (recover) printf("recover     %s%s%s\n", rr ? dsmpool_strerror(rr) : "ok", rr ? ": " : "", rmsg);
        if (check) printf("check       %s%s%s\n", cr ? dsmpool_strerror(cr) : "ok", cr ? ": " : "", cmsg);
    }
    dp_inspect_close(in);
    return rc;
}

static int usage(const char *me, FILE *f, int rc) {
    fprintf(f,
            "usage: %s [--json] [--view V,...] NAME [--check | --recover]\n"
            "       %s [--json] [--view V,...] --pid PID\n"
            "       %s [--json] --list\n"
            "       %s [--json] --sweep\n"
            "       %s [--json] --destroy NAME [--force]\n"
            "\n"
            "  NAME          a POSIX pool name (\"/x\") or a System V key text\n"
            "  --json        one JSON document on stdout instead of text\n"
            "  --view V,...  only these views of a pool: pool, subpools, processes, segments, areas, names\n"
            "  --pid PID     every pool that process maps (the way to an anonymous or memfd pool;\n"
            "                an anonymous one needs root: /proc/PID/map_files)\n"
            "  --list        the pools on this machine (/dev/shm, hugetlbfs, System V) and their\n"
            "                state: live, dead, closed, creating, half-created, other-format\n"
            "  --check       attach, prove the pool consistent (dsmpool_check), then show it\n"
            "  --recover     attach, release what dead processes held (dsmpool_recover) first\n"
            "  --sweep       remove what pools no live process holds left behind (dsmpool_sweep)\n"
            "  --destroy     remove a pool no live process holds (--force: even one a process holds)\n"
            "  --help        this text\n"
            "\n"
            "Looking is read-only: the tool maps the region PROT_READ and takes no slot; only\n"
            "--check and --recover attach. Exit status: 0; 1 with the library's message; 2 usage.\n",
            me, me, me, me, me);
    return rc;
}

int main(int argc, char **argv) {
    enum { O_JSON = 256, O_LIST, O_PID, O_CHECK, O_RECOVER, O_SWEEP, O_DESTROY, O_FORCE, O_VIEW };
    static const struct option longs[] = {
        {"help", no_argument, NULL, 'h'},        {"json", no_argument, NULL, O_JSON},
        {"list", no_argument, NULL, O_LIST},     {"pid", required_argument, NULL, O_PID},
        {"check", no_argument, NULL, O_CHECK},   {"recover", no_argument, NULL, O_RECOVER},
        {"sweep", no_argument, NULL, O_SWEEP},   {"destroy", no_argument, NULL, O_DESTROY},
        {"force", no_argument, NULL, O_FORCE},   {"view", required_argument, NULL, O_VIEW},
        {NULL, 0, NULL, 0}};
    out o = {0};
    bool list = false, check = false, recover = false, sweep = false, destroy = false, force = false;
    long pid = 0;
    const char *sel = NULL;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        switch (c) {
        case 'h': return usage(argv[0], stdout, 0);
        case O_JSON: o.json = true; break;
        case O_LIST: list = true; break;
        case O_PID: {
            char *end;
            pid = strtol(optarg, &end, 10);
            if (*end || pid <= 0 || pid > 0x7fffffff) return usage(argv[0], stderr, 2);
            break;
        }
        case O_CHECK: check = true; break;
        case O_RECOVER: recover = true; break;
        case O_SWEEP: sweep = true; break;
        case O_DESTROY: destroy = true; break;
        case O_FORCE: force = true; break;
        case O_VIEW:
            sel = optarg;
            for (const char *p = sel; *p;) { /* every name must be a view */
                const char *e = strchr(p, ',');
                size_t k = e ? (size_t)(e - p) : strlen(p);
                bool ok = false;
                for (size_t i = 0; i < NVIEWS; i++) ok |= strlen(views[i].name) == k && !strncmp(p, views[i].name, k);
                if (!ok) return usage(argv[0], stderr, 2);
                p += k + (e ? 1 : 0);
            }
            break;
        default: return usage(argv[0], stderr, 2);
        }
    }
    const char *name = optind < argc ? argv[optind] : NULL;
    if (optind + 1 < argc) return usage(argv[0], stderr, 2);
    int modes = list + sweep + destroy + (pid > 0) + (name && !destroy);
    if (modes != 1 || (force && !destroy) || ((check || recover) && (!name || destroy)) || (destroy && !name) ||
        (sel && !(pid > 0 || (name && !destroy))))
        return usage(argv[0], stderr, 2);

    if (list) return cmd_list(&o);
    if (pid > 0) return cmd_pid(&o, pid, sel);
    if (sweep) {
        size_t n = 0;
        int r = dsmpool_sweep(&n);
        if (r) return fail("sweep", r);
        if (o.json) printf("{\"removed\":%zu}\n", n);
        else printf("removed     %zu objects of pools that no live process holds\n", n);
        return 0;
    }
    if (destroy) {
        int r = dsmpool_remove(name, force);
        if (r) return fail(name, r);
        if (o.json) {
            j_open(&o, NULL, '{');
            j_s(&o, "removed", name);
            j_b(&o, "forced", force);
            j_close(&o, '}');
            printf("\n");
        } else {
            printf("removed     %s%s\n", name, force ? " (forced)" : "");
        }
        return 0;
    }
    int rc = cmd_pool(&o, name, check, recover, sel);
    if (!o.json && rc == 0) fflush(stdout);
    return rc;
}
