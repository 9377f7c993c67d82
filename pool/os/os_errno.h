/*
 * os_errno.h -- the OS layer's own: a function of dp_os.h leaves errno as
 * it found it (OS_SAVE at its start, OS_RET to return). Included by
 * os_linux.c and os_room.c only.
 */
#ifndef DP_OS_ERRNO_H
#define DP_OS_ERRNO_H

#include <errno.h>

#define OS_SAVE int saved_errno_ = errno
#define OS_RET(v) \
    do {                          \
        int r_ = (v);             \
        errno = saved_errno_;     \
        return r_;                \
    } while (0)

#endif /* DP_OS_ERRNO_H */
