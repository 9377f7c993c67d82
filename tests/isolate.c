/* isolate: run one test program in a world of its own, and end every process
 * it started when it ends or when the run around it is killed.
 *
 *   isolate PROGRAM [ARGS...]
 *
 * The program runs in new mount, IPC and PID namespaces:
 *   - /dev/shm is a fresh tmpfs (as large as the host's), so that what a
 *     test counts, lists or sweeps there is its own: another test run, or a
 *     production pool on the same host, can neither fail it nor be touched
 *     by it (System V pools likewise, in the private IPC namespace);
 *   - /tmp is a fresh tmpfs too (Criterion's socket is /tmp/criterion_<pid>,
 *     and pids repeat from one PID namespace to the next), with what the
 *     program names of the host's /tmp bound back in;
 *   - /proc is the new PID namespace's, so that the pids the library records
 *     and checks are the ones this test's processes see;
 *   - the program's parent inside is a small init (pid 1) that dies with
 *     this process (PR_SET_PDEATHSIG): when isolate is killed -- a timeout
 *     around `meson test`, a ^C -- or when the program exits, the kernel
 *     kills everything left in the namespace (Criterion's workers, helpers,
 *     children a test forgot), so nothing spins on after the run.
 * Exits with the program's status (128 + signal when killed by one). Needs
 * root (CAP_SYS_ADMIN); without it, says so and exits 77, which meson counts
 * as a skip: the tests would otherwise share the host's /dev/shm. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

static int status_of(int st) {
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int cannot(const char *step) {
    fprintf(stderr, "[SKIP] isolate: cannot %s (%s): the tests need root (CAP_SYS_ADMIN) to run "
            "in a private /dev/shm and PID namespace; run them as root\n", step, strerror(errno));
    return 77;
}

/* pid 1 of the new PID namespace: start the program, reap every orphan that
 * comes to us, and leave with the program's status (taking the namespace,
 * and so whatever the program left running, with us). */
static int init_main(char **argv, int alive) {
    /* Die with isolate; if it is already gone, go now (its end of the pipe
     * closed: getppid() says 0 from inside a new PID namespace, whoever the
     * parent is). */
    struct pollfd pf = {.fd = alive, .events = POLLIN};
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || poll(&pf, 1, 0) != 0) return 1;
    close(alive);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
        fprintf(stderr, "isolate: mounting /proc for the new PID namespace: %s\n", strerror(errno));
        return 1;
    }
    pid_t prog = fork();
    if (prog < 0) {
        fprintf(stderr, "isolate: fork: %s\n", strerror(errno));
        return 1;
    }
    if (prog == 0) {
        /* pid 1 ignores the signals it has no handler for; the program
         * must not inherit that, nor a blocked mask. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(argv[0], argv);
        fprintf(stderr, "isolate: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, 0);
        if (w == prog) return status_of(st);
        if (w < 0 && errno != EINTR) return 1;
    }
}

/* The top-level entries of /tmp that the strings name ("/tmp/NAME/..." at
 * the start, or after '=', ':' or ' '), each once, into names. */
static int tmp_names(char **strs, char names[][256], int have, int max) {
    for (; strs && *strs; strs++)
        for (const char *q = *strs; (q = strstr(q, "/tmp/")) != NULL; q += 5) {
            if (q != *strs && !strchr("=: ", q[-1])) continue;
            const char *b = q + 5, *e = b;
            while (*e && *e != '/' && *e != ':' && *e != ' ') e++;
            if (e == b || e - b >= 256) continue;
            int i = 0;
            while (i < have && (strncmp(names[i], b, (size_t)(e - b)) || names[i][e - b])) i++;
            if (i == have && have < max) {
                memcpy(names[have], b, (size_t)(e - b));
                names[have++][e - b] = 0;
            }
        }
    return have;
}

/* A fresh tmpfs on /tmp -- Criterion names its socket /tmp/criterion_<pid>,
 * and pids repeat from one PID namespace to the next -- with what the
 * program needs of the host's /tmp (its own path, the working directory,
 * paths in its environment: a build directory under /tmp) bound back in. */
static int private_tmp(char **argv, unsigned long long size) {
    extern char **environ;
    static char names[64][256];
    char cwd[4096], *cwdv[2] = {cwd, NULL};
    int n = tmp_names(argv, names, 0, 64);
    n = tmp_names(environ, names, n, 64);
    if (getcwd(cwd, sizeof cwd)) n = tmp_names(cwdv, names, n, 64);
    if (!strcmp(cwd, "/tmp")) return 0; /* run from /tmp itself: keep the host's */
    int old = open("/tmp", O_PATH | O_DIRECTORY);
    if (old < 0) return 0; /* no /tmp: nothing to share */
    char opts[64];
    snprintf(opts, sizeof opts, "size=%llu,mode=1777", size);
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) return -1;
    for (int i = 0; i < n; i++) {
        char from[300], to[300];
        snprintf(from, sizeof from, "/proc/self/fd/%d/%.255s", old, names[i]);
        snprintf(to, sizeof to, "/tmp/%.255s", names[i]);
        struct stat st;
        if (stat(from, &st) != 0) continue; /* named, but not there: nothing to share */
        int made = S_ISDIR(st.st_mode) ? mkdir(to, 0755) : close(open(to, O_CREAT | O_WRONLY, 0644));
        if (made != 0 || mount(from, to, NULL, MS_BIND | MS_REC, NULL) != 0) return -1;
    }
    close(old);
    return 0;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: isolate PROGRAM [ARGS...]\n");
        return 2;
    }
    struct statvfs sv;
    unsigned long long size = 1ull << 30;
    if (statvfs("/dev/shm", &sv) == 0 && sv.f_blocks > 0)
        size = (unsigned long long)sv.f_blocks * sv.f_frsize;
    pid_t outer = getpid();
    /* Inside, pids repeat from run to run: the tests name what the host
     * shares (cgroups, hugetlbfs and /tmp files) with this one too
     * (test_uid() in testutil.h). */
    char run[24];
    snprintf(run, sizeof run, "%d", (int)outer);
    setenv("DSMPOOL_ISOLATE_RUN", run, 1);
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID) != 0) return cannot("unshare mount, IPC and PID namespaces");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return cannot("make / private");
    char opts[64];
    snprintf(opts, sizeof opts, "size=%llu,mode=1777", size);
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
        return cannot("mount a tmpfs on /dev/shm");
    if (private_tmp(argv + 1, size) != 0) return cannot("make a private /tmp");
    int pp[2];
    if (pipe(pp) != 0) return cannot("make a pipe");
    pid_t init = fork();
    if (init < 0) return cannot("fork into the new PID namespace");
    if (init == 0) {
        close(pp[1]);
        _exit(init_main(argv + 1, pp[0]));
    }
    close(pp[0]); /* pp[1] stays open until we end */
    /* A signal that kills this process kills init (its death signal), and
     * init's death ends the namespace: nothing to pass on by hand. */
    int st;
    while (waitpid(init, &st, 0) < 0)
        if (errno != EINTR) return 1;
    return status_of(st);
}

int main(int argc, char **argv) {
    /* _exit: a sanitizer's exit-time work (LeakSanitizer clones a tracer)
     * would fork into the PID namespace, whose init is gone by now. */
    int r = run(argc, argv);
    fflush(NULL);
    _exit(r);
}
