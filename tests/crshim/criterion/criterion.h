/*
 * A minimal stand-in for Criterion, used only for the ThreadSanitizer run.
 *
 * Why: Criterion's runner cannot start under TSan ("Could not initialize
 * inheritable arena", Snaipe/Criterion#274, open since 2018). This header
 * implements the subset of Criterion the suites use -- Test, TestSuite with
 * .init/.fini/.timeout, cr_assert*, cr_expect*, cr_skip_test, cr_log_* -- with
 * the same meaning: each test runs in its own fork()ed process, a failed
 * cr_assert ends the test, a failed cr_expect marks it failed and goes on,
 * and the run ends with Criterion's synthesis line (skipped tests are not
 * counted, as in Criterion). Options: -jN and --verbose are accepted (tests
 * run one at a time), --filter suite/name (a prefix) selects.
 */
#ifndef CRSHIM_CRITERION_H
#define CRSHIM_CRITERION_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct crs_test {
    const char *suite, *name;
    void (*fn)(void);
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    int disabled;
    int exit_code, signal;
    struct crs_test *next;
};
struct crs_suite {
    const char *name;
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    int disabled;
    struct crs_suite *next;
};

static struct crs_test *crs_tests;
static struct crs_suite *crs_suites;
static jmp_buf crs_jmp;
static struct crs_test *crs_cur;
static int crs_failed;

#define CRS_CAT2(a, b) a##b
#define CRS_CAT(a, b) CRS_CAT2(a, b)

#define Test(S_, N_, ...)                                                                 \
    static void S_##_##N_##_impl(void);                                                   \
    static struct crs_test S_##_##N_##_desc = {.suite = #S_, .name = #N_,                 \
                                               .fn = S_##_##N_##_impl, __VA_ARGS__};      \
    __attribute__((constructor)) static void S_##_##N_##_reg(void) {                      \
        struct crs_test **pp = &crs_tests;                                                \
        while (*pp) pp = &(*pp)->next;                                                    \
        *pp = &S_##_##N_##_desc;                                                          \
    }                                                                                     \
    static void S_##_##N_##_impl(void)

#define TestSuite(S_, ...)                                                                \
    static struct crs_suite S_##_suite_desc = {.name = #S_, __VA_ARGS__};                 \
    __attribute__((constructor)) static void S_##_suite_reg(void) {                       \
        S_##_suite_desc.next = crs_suites;                                                \
        crs_suites = &S_##_suite_desc;                                                    \
    }

static void crs_report(const char *file, int line, const char *cond, const char *fmt, ...) {
    fprintf(stderr, "[----] %s:%d: Assertion Failed\n[----]   ", file, line);
    if (fmt && *fmt) {
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    } else {
        fputs(cond, stderr);
    }
    fputc('\n', stderr);
}

#define CRS_CHECK(fatal, cond, str, ...)                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            crs_report(__FILE__, __LINE__, str, "" __VA_ARGS__);                          \
            crs_failed = 1;                                                               \
            if (fatal) longjmp(crs_jmp, 1);                                               \
        }                                                                                 \
    } while (0)

#define cr_assert(c, ...) CRS_CHECK(1, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...) CRS_CHECK(0, (c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) CRS_CHECK(1, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) CRS_CHECK(0, !(c), "!(" #c ")", __VA_ARGS__)
#define CRS_CMP(f, a, op, b, ...) CRS_CHECK(f, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) CRS_CMP(1, a, ==, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) CRS_CMP(0, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) CRS_CMP(1, a, !=, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) CRS_CMP(0, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) CRS_CMP(1, a, <, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) CRS_CMP(0, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) CRS_CMP(1, a, <=, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) CRS_CMP(0, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) CRS_CMP(1, a, >, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) CRS_CMP(0, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) CRS_CMP(1, a, >=, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) CRS_CMP(0, a, >=, b, __VA_ARGS__)
#define cr_assert_null(a, ...) CRS_CHECK(1, (a) == NULL, #a " == NULL", __VA_ARGS__)
#define cr_expect_null(a, ...) CRS_CHECK(0, (a) == NULL, #a " == NULL", __VA_ARGS__)
#define cr_assert_not_null(a, ...) CRS_CHECK(1, (a) != NULL, #a " != NULL", __VA_ARGS__)
#define cr_expect_not_null(a, ...) CRS_CHECK(0, (a) != NULL, #a " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) CRS_CHECK(1, !strcmp((a), (b)), #a " == " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) CRS_CHECK(0, !strcmp((a), (b)), #a " == " #b, __VA_ARGS__)

#define CRS_SKIP 77
#define cr_skip_test(...)                                                                 \
    do {                                                                                  \
        fprintf(stderr, "[SKIP] %s::%s: ", crs_cur->suite, crs_cur->name);              \
        fprintf(stderr, "" __VA_ARGS__);                                                  \
        fputc('\n', stderr);                                                              \
        fflush(stderr);                                                                   \
        _exit(CRS_SKIP);                                                                  \
    } while (0)
#define cr_log_info(...) (fprintf(stderr, "[----] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_warn(...) (fprintf(stderr, "[WARN] " __VA_ARGS__), fputc('\n', stderr))

static struct crs_suite *crs_suite_of(const char *name) {
    for (struct crs_suite *s = crs_suites; s; s = s->next)
        if (!strcmp(s->name, name)) return s;
    return NULL;
}

static int crs_run_one(struct crs_test *t) {
    struct crs_suite *s = crs_suite_of(t->suite);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        double to = t->timeout ? t->timeout : s && s->timeout ? s->timeout : 0;
        if (to > 0) alarm((unsigned)to + 1);
        crs_failed = 0;
        crs_cur = t;
        if (s && s->init) s->init();
        if (t->init) t->init();
        if (!setjmp(crs_jmp)) t->fn();
        if (t->fini) t->fini();
        if (s && s->fini) s->fini();
        fflush(NULL);
        _exit(crs_failed ? 1 : 0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {}
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    fprintf(stderr, "[----] %s::%s: CRASH (signal %d)\n", t->suite, t->name, WTERMSIG(st));
    return 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
    const char *filter = NULL;
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strncmp(argv[i], "--verbose", 9)) verbose = 1;
    }
    int tested = 0, passing = 0, failing = 0, crashing = 0;
    for (struct crs_test *t = crs_tests; t; t = t->next) {
        char full[256];
        snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
        if (filter && strncmp(full, filter, strcspn(filter, "*"))) continue;
        if (t->disabled) continue;
        if (verbose) fprintf(stderr, "[RUN ] %s::%s\n", t->suite, t->name);
        int r = crs_run_one(t);
        if (r == CRS_SKIP) continue; /* the test printed "[SKIP] why" */
        tested++;
        if (r == 0) passing++;
        else if (r == 1) failing++;
        else crashing++;
        fprintf(stderr, "[%s] %s::%s\n", r == 0 ? "PASS" : r == 1 ? "FAIL" : "CRASH", t->suite,
                t->name);
    }
    fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: %d \n",
            tested, passing, failing, crashing);
    return failing || crashing ? 1 : 0;
}

#endif
