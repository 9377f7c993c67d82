/*
 * os_room.c -- what this process may still make resident, for dp_os.h's
 * dp_os_mem_room and dp_os_huge_room: the tightest room of the memory
 * cgroup's levels (v1 and v2, found from /proc/self/cgroup and
 * mountinfo, through cgroup namespaces and bind mounts) and of the
 * system's MemAvailable, and the hugetlb cgroup's room.
 *
 * Layer: os (pool/os), beside os_linux.c. It reads /proc and cgroup files
 * only, never changes anything, and leaves errno as it found it
 * (os_errno.h). The resolved cgroup directories are cached per thread and
 * resolved again when /proc/self/cgroup reads otherwise or the pid changed
 * (a process moved, a fork); the levels found without a limit are skipped
 * for a second, so that a room check reads only the files that can say no
 * (docs/design.md, "Residency").
 */
#include "dp_os.h"
#include "os_errno.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static bool read_limit(const char *path, uint64_t *v) { /* "max" -> UINT64_MAX; false: errno says why */
    FILE *f = fopen(path, "re");
    if (!f) return false;
    char buf[64] = "";
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    int e = ok ? 0 : ferror(f) ? errno : EINVAL;
    fclose(f);
    if (!ok) {
        errno = e;
        return false;
    }
    if (!strncmp(buf, "max", 3)) {
        *v = UINT64_MAX;
        return true;
    }
    char *end;
    unsigned long long x = strtoull(buf, &end, 10);
    if (end == buf) {
        errno = EINVAL;
        return false;
    }
    *v = x;
    return true;
}

/* Page cache the kernel can drop to make room: file pages that are not
 * shmem (which cannot be dropped, only swapped), from a memory.stat file. */
static uint64_t reclaimable(const char *stat, const char *file_key, const char *shmem_key) {
    FILE *f = fopen(stat, "re");
    if (!f) return 0;
    char line[128];
    uint64_t file = 0, shmem = 0;
    while (fgets(line, sizeof line, f)) {
        char k[64];
        unsigned long long v;
        if (sscanf(line, "%63s %llu", k, &v) != 2) continue;
        if (!strcmp(k, file_key)) file = v;
        else if (!strcmp(k, shmem_key)) shmem = v;
    }
    fclose(f);
    return file > shmem ? file - shmem : 0;
}

/* A cgroup hierarchy as this process sees it: the directory of its own
 * cgroup, and the mount point above which no level is visible. */
typedef struct cg_where {
    char mnt[512];
    char dir[1536]; /* mnt + the cgroup's path below the mount's root */
} cg_where;

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void mi_unescape(char *s) {
    char *o = s;
    for (char *i = s; *i; i++) {
        if (i[0] == '\\' && i[1] >= '0' && i[1] <= '3' && i[2] >= '0' && i[2] <= '7' && i[3] >= '0' && i[3] <= '7') {
            *o++ = (char)((i[1] - '0') * 64 + (i[2] - '0') * 8 + (i[3] - '0'));
            i += 3;
        } else {
            *o++ = *i;
        }
    }
    *o = 0;
}

static bool has_word(const char *list, const char *w) { /* w among the comma-separated words */
    size_t n = strlen(w);
    for (const char *c = list; *c;) {
        size_t l = strcspn(c, ",");
        if (l == n && !strncmp(c, w, n)) return true;
        c += l + (c[l] == ',');
    }
    return false;
}

/* Does dir/cgroup.procs list this process? (The pids are as this process's
 * pid namespace sees them, so getpid() is the one to look for.) */
static bool cg_lists_me(const char *dir) {
    char f[1800];
    snprintf(f, sizeof f, "%s/cgroup.procs", dir);
    FILE *fp = fopen(f, "re");
    if (!fp) return false;
    long me = (long)getpid(), v;
    bool found = false;
    while (!found && fscanf(fp, "%ld", &v) == 1) found = v == me;
    fclose(fp);
    return found;
}

/* A cgroup namespace whose mount shows an ancestor's tree ("/.." roots):
 * this process's namespace root is `up` levels below the mount's root.
 * Look at the directories that deep for the one whose rel/cgroup.procs
 * lists us (at most 4096 looked at). */
static bool cg_locate(cg_where *w, unsigned up, const char *rel) {
    char base[1536];
    snprintf(base, sizeof base, "%s", w->mnt);
    unsigned looked = 0;
    char found[1700] = "";
    int nfound = 0;
    /* depth-first over `up` levels: a stack of open directories */
    DIR *st[16];
    char path[16][1536];
    if (up == 0 || up > 16) return false;
    snprintf(path[0], sizeof path[0], "%s", base);
    if (!(st[0] = opendir(path[0]))) return false;
    int d = 0;
    while (d >= 0 && nfound < 2 && looked < 4096) {
        struct dirent *e = readdir(st[d]);
        if (!e) {
            closedir(st[d--]);
            continue;
        }
        if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
        char sub[1536];
        if (snprintf(sub, sizeof sub, "%s/%s", path[d], e->d_name) >= (int)sizeof sub) continue;
        if ((unsigned)d + 1 < up) {
            DIR *n = opendir(sub);
            if (!n) continue;
            st[++d] = n;
            snprintf(path[d], sizeof path[d], "%s", sub);
            continue;
        }
        looked++;
        char cand[1700];
        snprintf(cand, sizeof cand, "%s%s", sub, strcmp(rel, "/") ? rel : "");
        if (cg_lists_me(cand)) {
            nfound++;
            snprintf(found, sizeof found, "%s", cand);
        }
    }
    while (d >= 0) closedir(st[d--]);
    if (nfound != 1) return false;
    if (snprintf(w->dir, sizeof w->dir, "%s", found) >= (int)sizeof w->dir) return false;
    return true;
}

/* Where hierarchy `ctl` (a v1 controller, or NULL: the v2 one) shows this
 * process's cgroup `path` (as /proc/self/cgroup gives it, relative to the
 * process's cgroup namespace): from /proc/self/mountinfo, the mount whose
 * root holds the path. 0, or -errno with why. */
static int cg_find(const char *ctl, const char *path, cg_where *w, char *why, size_t n) {
    for (const char *c = path; (c = strstr(c, "/..")) != NULL; c += 3)
        if (c[3] == '/' || c[3] == 0) { /* moved outside its cgroup namespace's root */
            snprintf(why, n, "this process's %s cgroup %.512s lies outside its cgroup namespace's root, where its "
                     "limits cannot be seen", ctl ? ctl : "cgroup2", path);
            return -ENOENT;
        }
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) {
        int e = errno;
        snprintf(why, n, "/proc/self/mountinfo cannot be read (%s)", strerror(e));
        return -e;
    }
    char line[4096];
    int r = -ENOENT;
    unsigned want_up = 0;
    bool seen = false;
    while (r != 0 && fgets(line, sizeof line, f)) {
        char *fld[12] = {0}, *save = NULL;
        int nf = 0;
        for (char *s = strtok_r(line, " \n", &save); s && nf < 12; s = strtok_r(NULL, " \n", &save)) {
            fld[nf++] = s;
            if (!strcmp(s, "-")) break;
        }
        char *fs = strtok_r(NULL, " \n", &save), *src = strtok_r(NULL, " \n", &save);
        char *opts = strtok_r(NULL, " \n", &save);
        (void)src;
        if (nf < 6 || !fs || !opts) continue;
        if (ctl ? (strcmp(fs, "cgroup") || !has_word(opts, ctl)) : strcmp(fs, "cgroup2")) continue;
        seen = true;
        char *root = fld[3], *mnt = fld[4];
        mi_unescape(root);
        mi_unescape(mnt);
        snprintf(w->mnt, sizeof w->mnt, "%s", mnt);
        size_t rl = strlen(root);
        if (!strcmp(root, "/")) {
            snprintf(w->dir, sizeof w->dir, "%s%s", mnt, strcmp(path, "/") ? path : "");
            r = 0;
        } else if (!strncmp(path, root, rl) && (path[rl] == '/' || path[rl] == 0)) {
            snprintf(w->dir, sizeof w->dir, "%s%s", mnt, path + rl);
            r = 0;
        } else if (!strncmp(root, "/..", 3)) { /* an ancestor's tree: only ".." parts? */
            unsigned up = 0;
            const char *c = root;
            while (!strncmp(c, "/..", 3) && (c[3] == '/' || c[3] == 0)) {
                up++;
                c += 3;
            }
            if (!*c) want_up = up;
            if (!*c && cg_locate(w, up, path)) r = 0;
        }
    }
    fclose(f);
    if (r == 0) return 0;
    if (!seen)
        snprintf(why, n, "no %s%s hierarchy is mounted in this process's view (/proc/self/mountinfo)",
                 ctl ? ctl : "cgroup2", ctl ? " cgroup" : "");
    else if (want_up)
        snprintf(why, n, "this process is in a cgroup namespace and the %s hierarchy mounted here shows "
                 "its ancestors' tree, in which its cgroup could not be found", ctl ? ctl : "cgroup2");
    else
        snprintf(why, n, "the %s hierarchy mounted here does not show this process's cgroup %s",
                 ctl ? ctl : "cgroup2", path);
    return r;
}

/* Is the memory controller on a v1 hierarchy (1), on none or v2 (0), or
 * disabled (-1)? From /proc/cgroups; 0 when it cannot be read. */
static int memcg_v1(void) {
    FILE *f = fopen("/proc/cgroups", "re");
    if (!f) return 0;
    char line[256], name[64];
    unsigned hier, num, en;
    int r = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %u %u %u", name, &hier, &num, &en) == 4 && !strcmp(name, "memory"))
            r = !en ? -1 : hier ? 1 : 0;
    fclose(f);
    return r;
}

/* The levels of one hierarchy, from the process's cgroup up to the mount:
 * the tightest room of files lim and cur (with stat's droppable page cache
 * counted as room when stat names its keys). A level whose limit reads as
 * none is skipped for a second (the cache's `free` bits). */
/* The tightest room on the levels from w->dir up to its mount's root, into
 * out; 0, or -errno with why in out->where when a level's limit cannot be
 * read (its cgroup gone from this view, a file that cannot be read): a
 * limit this process cannot see is not taken for none. A level without the
 * file (v2: the controller not enabled there) has no limit. */
static int room_walk(const cg_where *w, const char *lim, const char *cur, const char *const stat[3],
                     uint64_t *free_bits, uint64_t until, dp_os_room *out) {
    char p[1536];
    snprintf(p, sizeof p, "%s", w->dir);
    size_t ml = strlen(w->mnt);
    struct stat sd;
    errno = 0;
    int sr = lstat(p, &sd);
    if (sr != 0 || !S_ISDIR(sd.st_mode)) {
        int e = errno ? errno : ENOTDIR;
        snprintf(out->where, sizeof out->where, "this process's cgroup directory %s cannot be found (%s): it "
                 "moved, or the hierarchy mounted here shows another tree", p, strerror(e));
        return -e;
    }
    for (unsigned lvl = 0;; lvl++) {
        bool skip = lvl < 64 && (*free_bits >> lvl & 1) && until;
        char fl[1700], fc[1700];
        snprintf(fl, sizeof fl, "%s/%s", p, lim);
        snprintf(fc, sizeof fc, "%s/%s", p, cur);
        uint64_t l, c;
        bool got = !skip && read_limit(fl, &l);
        if (!skip && !got && errno != ENOENT) {
            int e = errno;
            snprintf(out->where, sizeof out->where, "%s cannot be read (%s)", fl, strerror(e));
            return -e;
        }
        if (got) {
            if (l >= (1ull << 62)) {
                if (lvl < 64) *free_bits |= 1ull << lvl;
            } else if (read_limit(fc, &c)) {
                if (stat) {
                    char fs[1700];
                    snprintf(fs, sizeof fs, "%s/%s", p, stat[0]);
                    uint64_t back = reclaimable(fs, stat[1], stat[2]);
                    c = c > back ? c - back : 0;
                }
                uint64_t r = c < l ? l - c : 0;
                if (r < out->room) {
                    out->room = r;
                    out->limit = l;
                    snprintf(out->where, sizeof out->where, "%s", fl);
                }
            }
        }
        if (strlen(p) <= ml) break; /* the mount's root: nothing above it is visible */
        char *slash = strrchr(p, '/');
        if (!slash || (size_t)(slash - p) < ml) break;
        *slash = 0;
    }
    return 0;
}

/* Per thread (no lock, and fork()-safe): where this process's hierarchies
 * are, for the pid and /proc/self/cgroup they were found for; and which
 * levels had no limit, believed until `until`. */
typedef struct room_cache {
    pid_t pid;
    char cgroup[2048];
    int unknown;
    char why[700];
    bool has[3];      /* memory v1, memory v2, hugetlb (v1 or v2) */
    bool huge_v2;
    cg_where w[3];
    uint64_t free_bits[3], until;
} room_cache;
static _Thread_local room_cache rc;

/* /proc/self/cgroup's path for hierarchy ctl (v1), or the v2 one (NULL). */
static bool cg_path(const char *text, const char *ctl, char *out, size_t n) {
    const char *l = text;
    while (*l) {
        size_t len = strcspn(l, "\n");
        const char *a = memchr(l, ':', len), *b = a ? memchr(a + 1, ':', len - (size_t)(a + 1 - l)) : NULL;
        if (b) {
            char ctls[256];
            snprintf(ctls, sizeof ctls, "%.*s", (int)(b - a - 1), a + 1);
            if (ctl ? has_word(ctls, ctl) : ctls[0] == 0) {
                snprintf(out, n, "%.*s", (int)(len - (size_t)(b + 1 - l)), b + 1);
                return true;
            }
        }
        l += len + (l[len] == '\n');
    }
    return false;
}

/* Fill rc for this pid and cgroup text (its resolution, not its limits). */
static void room_resolve(const char *text) {
    memset(&rc, 0, sizeof rc);
    rc.pid = getpid();
    snprintf(rc.cgroup, sizeof rc.cgroup, "%s", text);
    char path[1024];
    int v1 = memcg_v1();
    if (v1 > 0 || cg_path(text, "memory", path, sizeof path)) {
        if (!cg_path(text, "memory", path, sizeof path)) {
            rc.unknown = -ENOENT;
            snprintf(rc.why, sizeof rc.why, "/proc/self/cgroup names no memory cgroup, though /proc/cgroups "
                     "puts the memory controller on a v1 hierarchy");
        } else if ((rc.unknown = cg_find("memory", path, &rc.w[0], rc.why, sizeof rc.why)) == 0) {
            rc.has[0] = true;
        }
    } else if (v1 == 0 && cg_path(text, NULL, path, sizeof path)) {
        cg_where w;
        char why[700];
        int r = cg_find(NULL, path, &w, why, sizeof why);
        if (r == 0) {
            char f[600], ctls[256] = "";
            snprintf(f, sizeof f, "%s/cgroup.controllers", w.mnt);
            FILE *fp = fopen(f, "re");
            if (fp) {
                if (!fgets(ctls, sizeof ctls, fp)) ctls[0] = 0;
                fclose(fp);
            }
            ctls[strcspn(ctls, "\n")] = 0;
            for (char *c = ctls; *c; c++)
                if (*c == ' ') *c = ',';
            /* the controller is the v2 hierarchy's if its root offers it; a
             * mount whose root is a namespace's shows that cgroup's
             * controllers, which include it wherever a limit can apply */
            rc.has[1] = has_word(ctls, "memory") || !fp;
            rc.w[1] = w;
        } else {
            rc.unknown = r;
            snprintf(rc.why, sizeof rc.why, "%s", why);
        }
    }
    /* hugetlb: v1 if /proc/self/cgroup names it, else v2 (best effort: a
     * huge page that cannot be had is the populate's error, not a kill) */
    if (cg_path(text, "hugetlb", path, sizeof path)) {
        char why[700];
        rc.has[2] = cg_find("hugetlb", path, &rc.w[2], why, sizeof why) == 0;
    } else if (cg_path(text, NULL, path, sizeof path)) {
        char why[700];
        rc.has[2] = cg_find(NULL, path, &rc.w[2], why, sizeof why) == 0;
        rc.huge_v2 = true;
    }
}

/* rc up to date for this process (0), or -errno: /proc/self/cgroup unreadable. */
static int room_cache_fresh(char *why, size_t n) {
    char text[2048];
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    ssize_t got = -1;
    if (fd >= 0) {
        do
            got = read(fd, text, sizeof text - 1);
        while (got < 0 && errno == EINTR);
        close(fd);
    }
    if (got < 0) {
        int e = fd < 0 ? errno : EIO;
        snprintf(why, n, "/proc/self/cgroup cannot be read (%s): /proc is not mounted, or is hidden, in "
                 "this process's view", strerror(e));
        return -e;
    }
    text[got] = 0;
    uint64_t now = dp_os_now_ns();
    if (rc.pid != getpid() || strcmp(rc.cgroup, text) != 0) room_resolve(text);
    if (now >= rc.until) { /* the limits found absent are read again */
        memset(rc.free_bits, 0, sizeof rc.free_bits);
        rc.until = now + 1000000000ull;
    }
    return 0;
}

void dp_os_mem_room(dp_os_room *out) {
    OS_SAVE;
    memset(out, 0, sizeof *out);
    out->room = out->limit = UINT64_MAX;
    char why[sizeof out->where] = "";
    int r = room_cache_fresh(why, sizeof why);
    if (r == 0 && rc.unknown) {
        r = rc.unknown;
        snprintf(why, sizeof why, "%s", rc.why);
    }
    static const char *const v2[3] = {"memory.stat", "file", "shmem"};
    static const char *const v1[3] = {"memory.stat", "total_cache", "total_shmem"};
    if (r == 0 && rc.has[0])
        r = room_walk(&rc.w[0], "memory.limit_in_bytes", "memory.usage_in_bytes", v1, &rc.free_bits[0], rc.until, out);
    if (r == 0 && rc.has[1])
        r = room_walk(&rc.w[1], "memory.max", "memory.current", v2, &rc.free_bits[1], rc.until, out);
    if (r && !why[0]) snprintf(why, sizeof why, "%s", out->where); /* room_walk's why */
    /* the system's: what it can still give without the global OOM killer */
    FILE *f = fopen("/proc/meminfo", "re");
    if (f) {
        char line[256];
        unsigned long long kb, avail = 0, swap = 0, total = 0;
        bool have = false;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail = kb, have = true;
            else if (sscanf(line, "SwapFree: %llu kB", &kb) == 1) swap = kb;
            else if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) total = kb;
        }
        fclose(f);
        uint64_t sys = (avail + swap) * 1024;
        if (have && sys < out->room) {
            out->room = sys;
            out->limit = total * 1024;
            snprintf(out->where, sizeof out->where, "/proc/meminfo (MemAvailable + SwapFree of MemTotal)");
        }
    }
    out->unknown = r;
    if (r) snprintf(out->where, sizeof out->where, "%s", why);
    errno = saved_errno_;
}

void dp_os_huge_room(size_t page, dp_os_room *out) {
    OS_SAVE;
    memset(out, 0, sizeof *out);
    out->room = out->limit = UINT64_MAX;
    char why[700] = "", lim[64], cur[64];
    const char *sz = page >= (1u << 30) ? "1GB" : "2MB";
    out->unknown = room_cache_fresh(why, sizeof why);
    if (out->unknown) snprintf(out->where, sizeof out->where, "%s", why);
    if (!out->unknown && rc.has[2]) {
        snprintf(lim, sizeof lim, rc.huge_v2 ? "hugetlb.%s.max" : "hugetlb.%s.limit_in_bytes", sz);
        snprintf(cur, sizeof cur, rc.huge_v2 ? "hugetlb.%s.current" : "hugetlb.%s.usage_in_bytes", sz);
        uint64_t none = 0; /* (a level's hugetlb limit is read every time) */
        out->unknown = room_walk(&rc.w[2], lim, cur, NULL, &none, 0, out);
    }
    errno = saved_errno_;
}
