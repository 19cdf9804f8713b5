/* The runner's per-test loop for stdin/stdout tests, in C (inside the sandbox; loaded with ctypes.PyDLL by forkloop.py).
 *
 * Same semantics as proc.spawn + proc.collect + runner._clean_workdir, test after test, without running Python
 * code in the runner between two forks: every page the runner writes after a fork() is a copy-on-write fault, and
 * the Python loop wrote ~200 pages per test (docs/judge/suite.md). Per test: a stdin memfd holding the input, stdout
 * and stderr memfds, a result pipe; fork() between PyOS_BeforeFork and PyOS_AfterFork_* (as os.fork does); in the
 * child, fds 0/1/2 become the test's files, every other fd of the batch and the runner's channel is closed, the
 * work dir is entered and the rlimits are set, and fl_run returns 1 into Python, which runs the program. The parent
 * sleeps on the child's pidfd until it exits or the wall deadline passes (then SIGKILL), reaps it with its rusage,
 * SIGKILLs every other process of the pid namespace (kill(-1): all but the runner and PID 1) unless the runner, a
 * child subreaper, has no child left (fl_children_left in wipe.c: no process of the submission), and renews the work
 * dir (rmdir + mkdir). The result pipe, stdout and stderr stay open for Python to read after the batch.
 *
 * Returns: 1 in a child (b->child, b->child_wfd set); 0 in the runner when every test ran, when max_timeouts was
 * reached, or when the work dir could not be renewed (b->dirty; Python cleans it and calls again); -1 on a failed
 * syscall (b->err = errno; the test in progress did not run); -2 when a signal handler raised in the runner (the
 * exception is set, ctypes raises it; the running test's child and every other process were killed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* the interpreter's own C API (resolved against the running python3 when the library is loaded) */
extern void PyOS_BeforeFork(void);
extern void PyOS_AfterFork_Parent(void);
extern void PyOS_AfterFork_Child(void);
extern int PyErr_CheckSignals(void);

struct fl_test {
    const char *stdin_buf; /* in: the test's input bytes */
    long long stdin_len;
    double time_limit;     /* in: wall seconds */
    long long cpu_limit;   /* in: RLIMIT_CPU soft limit, seconds (hard: one more) */
    int rfd, out_fd, err_fd; /* out: result pipe read end, stdout and stderr memfds (Python closes them) */
    int status;            /* out: wait status */
    int timed_out;         /* out: killed at the deadline */
    double cpu_s, wall_s;  /* out: the child's CPU (rusage) and wall seconds */
};

struct fl_batch {
    struct fl_test *tests;
    int n, next;           /* tests[next:n] are still to run; fl_run advances next */
    const char *workdir;
    int max_timeouts, timeouts; /* stop once timeouts reaches max_timeouts (> 0); timeouts counts up */
    const int *private_fds; /* the runner's channel: closed in every child */
    int n_private;
    long long as_limit;    /* RLIMIT_AS bytes, 0: not set */
    long long fsize, nproc; /* RLIMIT_FSIZE bytes, RLIMIT_NPROC processes */
    int child, child_wfd;  /* in a child: its test index and the write end of its result pipe */
    int dirty, err;
};

#ifndef FL_SOURCE_SHA
#define FL_SOURCE_SHA "unknown"
#endif
/* the SHA-256 of the source this library was built from (rlvr/judge/sandbox/forkloop.py checks it) */
const char fl_source_sha[] = "fl-source-sha256:" FL_SOURCE_SHA;

/* sizeof of both structs, which proc.py compares with its ctypes layout before using the library */
long long fl_sizes(void) { return (long long)sizeof(struct fl_batch) * 10000 + (long long)sizeof(struct fl_test); }

int fl_children_left(void); /* wipe.c */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int limit(int resource, long long soft, long long hard) {
    struct rlimit r = {(rlim_t)soft, (rlim_t)hard};
    return setrlimit(resource, &r);
}

static void close_quietly(int fd) {
    if (fd >= 0) close(fd);
}

/* reap pid, retrying on EINTR; fills status and ru */
static void reap(pid_t pid, int *status, struct rusage *ru) {
    while (wait4(pid, status, 0, ru) < 0 && errno == EINTR) {
    }
}

static int new_files(struct fl_test *t, int *in, int *out, int *err, int pipefd[2]) {
    *in = *out = *err = pipefd[0] = pipefd[1] = -1;
    *in = memfd_create("stdin", 0);
    if (*in < 0) return -1;
    long long done = 0;
    while (done < t->stdin_len) {
        ssize_t w = pwrite(*in, t->stdin_buf + done, (size_t)(t->stdin_len - done), (off_t)done);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        done += w;
    }
    *out = memfd_create("stdout", 0);
    if (*out < 0) return -1;
    *err = memfd_create("stderr", 0);
    if (*err < 0) return -1;
    return pipe(pipefd);
}

static void child_setup(struct fl_batch *b, struct fl_test *t, int in, int out, int err, int pipefd[2]) {
    for (int i = 0; i < b->next; i++) {
        close_quietly(b->tests[i].rfd);
        close_quietly(b->tests[i].out_fd);
        close_quietly(b->tests[i].err_fd);
    }
    for (int i = 0; i < b->n_private; i++) close_quietly(b->private_fds[i]);
    close(pipefd[0]);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(1);
    close(in);
    close(out);
    close(err);
    if (chdir(b->workdir) != 0) _exit(1);
    if ((b->as_limit > 0 && limit(RLIMIT_AS, b->as_limit, b->as_limit) != 0) ||
        limit(RLIMIT_CPU, t->cpu_limit, t->cpu_limit + 1) != 0 || limit(RLIMIT_FSIZE, b->fsize, b->fsize) != 0 ||
        limit(RLIMIT_CORE, 0, 0) != 0 || limit(RLIMIT_NPROC, b->nproc, b->nproc) != 0)
        _exit(1);
}

int fl_run(struct fl_batch *b) {
    b->dirty = 0;
    b->err = 0;
    while (b->next < b->n) {
        if (b->max_timeouts > 0 && b->timeouts >= b->max_timeouts) return 0;
        struct fl_test *t = &b->tests[b->next];
        int in, out, err, pipefd[2];
        if (new_files(t, &in, &out, &err, pipefd) != 0) {
            b->err = errno;
            close_quietly(in);
            close_quietly(out);
            close_quietly(err);
            close_quietly(pipefd[0]);
            close_quietly(pipefd[1]);
            return -1;
        }
        double t0 = now();
        PyOS_BeforeFork();
        pid_t pid = fork();
        if (pid == 0) {
            PyOS_AfterFork_Child();
            child_setup(b, t, in, out, err, pipefd);
            b->child = b->next;
            b->child_wfd = pipefd[1];
            return 1;
        }
        int fork_errno = errno;
        PyOS_AfterFork_Parent();
        close(pipefd[1]);
        close(in);
        if (pid < 0) {
            close(pipefd[0]);
            close(out);
            close(err);
            b->err = fork_errno;
            return -1;
        }
        t->rfd = pipefd[0];
        t->out_fd = out;
        t->err_fd = err;
        t->timed_out = 0;
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) { /* as os.pidfd_open in the Python loop: no way to wait with a deadline */
            b->err = errno;
            kill(pid, SIGKILL);
            int st;
            struct rusage r0;
            reap(pid, &st, &r0);
            if (fl_children_left()) kill(-1, SIGKILL);
            return -1;
        }
        double deadline = t0 + t->time_limit;
        int raised = 0;
        for (;;) {
            double rem = deadline - now();
            if (rem <= 0) {
                t->timed_out = 1;
                kill(pid, SIGKILL);
                break;
            }
            struct pollfd p = {pidfd, POLLIN, 0};
            double ms = rem * 1000.0 + 1.0;
            int r = poll(&p, 1, ms > 2147483647.0 ? 2147483647 : (int)ms);
            if (r > 0) break;
            if (r < 0 && errno == EINTR && PyErr_CheckSignals() < 0) {
                kill(pid, SIGKILL);
                raised = 1;
                break;
            }
        }
        int status = 0;
        struct rusage ru = {0};
        reap(pid, &status, &ru);
        /* after the child's exit nothing but the runner can fork: kill(-1) reaches every other process; a runner with
         * no child left (fl_children_left: a subreaper) has no other process of the submission, and spares the zygote */
        if (fl_children_left()) kill(-1, SIGKILL);
        close_quietly(pidfd);
        if (raised) return -2;
        t->status = status;
        t->cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                   (double)ru.ru_stime.tv_usec * 1e-6;
        t->wall_s = now() - t0;
        b->next++;
        if (t->timed_out || (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU)) b->timeouts++;
        if (rmdir(b->workdir) != 0 || mkdir(b->workdir, 0777) != 0) {
            b->dirty = 1;
            return 0;
        }
    }
    return 0;
}
