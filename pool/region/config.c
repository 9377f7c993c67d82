/*
 * config.c -- a caller's dsmpool_config as this library's, and the checks on
 * what it names.
 *
 * Layer: region (pool/region), called by region.c and pool.c.
 *
 * Rules
 *   [sized] A config is as big as the caller's header made it (struct_size):
 *      this library reads the fields it covers, whole, and gives the later
 *      ones their defaults; one it does not know is refused (-EINVAL, "use a
 *      library at least as new as the header").
 *   [names] A POSIX name begins with '/', a System V one does not; names
 *      beginning "/dsmpool." are the library's own (anchors, OS fallback
 *      segments: life.c [anchor]) and refused.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dp_region.h"
#include "dp_os.h"

/* The config's fields in order, by where each ends: a caller's struct_size
 * is honoured up to the last whole field it covers, never half a pointer. */
#define CFG_END(f) (offsetof(dsmpool_config, f) + sizeof(((dsmpool_config *)0)->f))
static const size_t cfg_ends[] = {
    CFG_END(struct_size), CFG_END(size), CFG_END(backing), CFG_END(name), CFG_END(huge_pages),
    CFG_END(huge_page_size), CFG_END(prefault), CFG_END(mode), CFG_END(prefault_threads),
    CFG_END(max_segments), CFG_END(max_procs), CFG_END(map_align), CFG_END(numa), CFG_END(nnodes),
    CFG_END(nodes), CFG_END(node_size), CFG_END(interleave_size), CFG_END(replace_stale),
    CFG_END(resident_min), CFG_END(idle_release_ms), CFG_END(warm_bytes), CFG_END(limits_unknown_ok),
};
_Static_assert(sizeof cfg_ends / sizeof *cfg_ends == 22, "a new config field needs its row here");

static size_t cfg_whole(size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < sizeof cfg_ends / sizeof *cfg_ends; i++)
        if (cfg_ends[i] <= n) w = cfg_ends[i];
    return w;
}

void dsmpool_config_init_sized(dsmpool_config *cfg, size_t struct_size) {
    if (!cfg || struct_size < sizeof(size_t)) return;
    dsmpool_config d;
    memset(&d, 0, sizeof d);
    d.struct_size = struct_size; /* the caller's: create reads no more than that */
    d.size = 256 * DP_MIB;
    d.backing = DSMPOOL_BACKING_ANON;
    d.huge_pages = DSMPOOL_HUGE_OFF;
    d.prefault = true;
    d.mode = 0600;
    memset(cfg, 0, struct_size);    /* a newer caller's fields past ours: zero */
    memcpy(cfg, &d, cfg_whole(struct_size < sizeof d ? struct_size : sizeof d)); /* an older caller's */
    cfg->struct_size = struct_size;
}

int dp_config_take(const dsmpool_config *cfg, dsmpool_config *full) {
    dsmpool_config_init_sized(full, sizeof *full);
    if (!cfg) return dp_fail(-EINVAL, "cfg must not be NULL");
    if (cfg->struct_size < offsetof(dsmpool_config, size) + sizeof cfg->size)
        return dp_fail(-EINVAL, "cfg->struct_size is %zu: call dsmpool_config_init() on the config first",
                       cfg->struct_size);
    if (cfg->struct_size > (1u << 16))
        return dp_fail(-EINVAL, "cfg->struct_size is %zu: call dsmpool_config_init() on the config first",
                       cfg->struct_size);
    /* a newer header's config: fine while the options this library does not
     * know are left as dsmpool_config_init() made them (zero) */
    for (size_t i = sizeof *full; i < cfg->struct_size; i++)
        if (((const unsigned char *)cfg)[i])
            return dp_fail(-EINVAL, "the config sets options of a newer dsmpool header (%zu bytes; byte %zu "
                           "is set) than this library, dsmpool %s, knows (%zu bytes): use a library at "
                           "least as new as the header", cfg->struct_size, i, DSMPOOL_VERSION_STRING,
                           sizeof *full);
    memcpy(full, cfg, cfg_whole(cfg->struct_size < sizeof *full ? cfg->struct_size : sizeof *full));
    full->struct_size = sizeof *full;
    return 0;
}

int dp_rg_check_name(dsmpool_backing b, const char *name) {
    if (b == DSMPOOL_BACKING_ANON || b == DSMPOOL_BACKING_MEMFD) {
        if (name) return dp_fail(-EINVAL, "name must be NULL for %s backing", dsmpool_backing_name(b));
        return 0;
    }
    if (!name || !*name) return dp_fail(-EINVAL, "%s backing needs a name", dsmpool_backing_name(b));
    size_t n = strlen(name);
    if (n > DP_NAME_MAX) return dp_fail(-EINVAL, "name longer than %d bytes", DP_NAME_MAX);
    if (b == DSMPOOL_BACKING_POSIX && (name[0] != '/' || n < 2 || strchr(name + 1, '/') ||
                                       !strcmp(name, "/.") || !strcmp(name, "/..")))
        return dp_fail(-EINVAL, "POSIX name must be \"/something\" with no other '/': \"%s\"", name);
    if (b == DSMPOOL_BACKING_SYSV && name[0] == '/')
        return dp_fail(-EINVAL, "a System V name must not begin with '/' (attach takes such a name for a "
                       "POSIX one): \"%s\"", name);
    if (b == DSMPOOL_BACKING_POSIX && !strncmp(name, "/dsmpool.", 9))
        return dp_fail(-EINVAL, "names beginning \"/dsmpool.\" are the library's own (anchors and OS "
                       "segments): choose another name than \"%s\"", name);
    return 0;
}

size_t dp_rg_huge_size(const dsmpool_config *cfg) {
    return cfg->huge_page_size ? cfg->huge_page_size : dp_os_caps()->huge_default;
}
