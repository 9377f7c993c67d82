/* DSMPOOL_NODISCARD (tests/header/run.sh): where the compiler has a
 * nodiscard that a cast to void silences (C23, C++17, clang), a call whose
 * 0 or -errno is dropped is a warning (built with -DDROP, it must fail
 * under -Werror), and one dropped on purpose, cast to void, is not. */
#include <dsmpool.h>

#ifdef __cplusplus
#define MEANT(x) static_cast<void>(x)
#else
#define MEANT(x) (void)(x)
#endif

int main(void) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    dsmpool *p = NULL;
#ifdef DROP
    dsmpool_create(&cfg, &p);
#else
    MEANT(dsmpool_create(&cfg, &p));
    if (p && dsmpool_detach(p) != 0) return 1;
#endif
    return 0;
}
