/*
 * error.c -- errors are values: a negative errno from every call, and a
 * thread-local message for humans that says what failed and what to do.
 *
 * dp_fail(err, fmt, ...) records the message and returns err, so a failing
 * path reads `return dp_fail(-ENOSPC, "...")`. The message buffer is per
 * thread; it is overwritten by the next failure in the same thread and never
 * cleared by a success (like errno).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dp_base.h"

static _Thread_local char dp_msg[2048]; /* room for a message that lists several problems */

int dp_fail(int err, const char *fmt, ...) {
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dp_msg, sizeof dp_msg, fmt, ap);
    va_end(ap);
    errno = saved;
    return err;
}

void dp_clear_error(void) { dp_msg[0] = 0; }

const char *dsmpool_last_error(void) { return dp_msg[0] ? dp_msg : "no error"; }

const char *dsmpool_strerror(int err) {
    switch (err) {
    case 0: return "success";
    case -EINVAL: return "invalid argument";
    case -ENOMEM: return "out of memory: neither the pool nor the OS fallback can serve it (or huge pages "
                         "are unavailable)";
    case -ENOENT: return "no such pool, segment or name";
    case -EEXIST: return "a pool of that name already exists";
    case -ESTALE: return "stale: the segment (or the area, or the OS segment a pointer names) was destroyed";
    case -EAGAIN: return "try again: the pool is being created, cleaned up or removed";
    case -EOWNERDEAD: return "the pool was left half-built by a creator that died (remove it)";
    case -EPROTO: return "not a compatible dsmpool region (bad header, layout or size)";
    case -ENOLCK: return "this process cannot hold the pool's liveness locks of its own";
    case -EXDEV: return "the OS segment lives in a /dev/shm this process does not see";
    case -ENOSPC: return "no space: a fixed table is full, or no room for a pool's files";
    case -EBUSY: return "busy: an operation was in progress, or a live process holds the pool";
    case -EUCLEAN: return "inconsistent structure found";
    case -EALREADY: return "already done";
    case -EDEADLK: return "a named object's init opened its own name";
    case -ENAMETOOLONG: return "the pool's file name would be too long";
    case -EOPNOTSUPP: return "not supported by this kernel (an elastic pool needs MADV_POPULATE_WRITE)";
    case -EPERM: return "permission denied";
    case -EACCES: return "access denied";
    default: break;
    }
    if (err < 0 && err > -4096) {
        /* strerror() may return a shared buffer; the errno names are static. */
        static _Thread_local char buf[96];
        snprintf(buf, sizeof buf, "system error %d (%s)", -err, strerrorname_np(-err) ? strerrorname_np(-err) : "?");
        return buf;
    }
    return "unknown error";
}

const char *dsmpool_version(void) { return DSMPOOL_VERSION_STRING; }
int dsmpool_version_number(void) { return DSMPOOL_VERSION_NUMBER; }

const char *dsmpool_backing_name(dsmpool_backing b) {
    switch (b) {
    case DSMPOOL_BACKING_ANON: return "anon";
    case DSMPOOL_BACKING_MEMFD: return "memfd";
    case DSMPOOL_BACKING_POSIX: return "posix";
    case DSMPOOL_BACKING_SYSV: return "sysv";
    }
    return "?";
}
