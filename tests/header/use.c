/* Every macro and inline function of the public header, used the way an
 * embedder would, with no casts of its own: compiled as C11 and C17 with
 * -Wall -Wextra -pedantic -Werror, and as C++11 and C++17 with
 * -Wold-style-cast -Wzero-as-null-pointer-constant too (tests/header/run.sh).
 * The macros that stand for values are used as what they are; a format
 * macro takes its value with no cast. */
#include <dsmpool.h>
#include <stdio.h>

int main(void) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.interleave_size = DSMPOOL_INTERLEAVE_NONE;
    dsmpool_handle h = DSMPOOL_HANDLE_INVALID;
    dsmpool_ptr p = DSMPOOL_PTR_NULL;
    unsigned flags = DSMPOOL_SEG_ON_NODE(1);
    uint64_t os = DSMPOOL_PTR_OS_BIT;
    int node = 2;
    unsigned more = DSMPOOL_SEG_ON_NODE(node);
    printf("%" DSMPOOL_PRIhandle " %" DSMPOOL_PRIptr " %s %d %d\n", h, p, DSMPOOL_VERSION_STRING,
           DSMPOOL_VERSION_NUMBER,
           DSMPOOL_VERSION_MAJOR * 100 + DSMPOOL_VERSION_MINOR + DSMPOOL_VERSION_PATCH);
    dsmpool_area *area = NULL;
    char *base = NULL;
    void *q = dsmpool_area_addr_inline(area, base, p);
    return q != NULL || flags != 264u || more != 520u || os == 0;
}
