/* The end of a submission, in C (inside the sandbox; built into the same library as forkloop.c, bound by wipe.py).
 *
 * fl_wipe_all does what wipe.py's wipe_all does: kill every other process of the pid namespace until none is left
 * alive, then empty every writable place (links are removed, never followed; a directory gets owner rwx before it is
 * listed, so a 000 directory cannot keep its contents) and remove every SysV IPC object. The runner calls it as it
 * ends, the warden's wiper child when the runner was killed first. In Python the same work allocated ~100 objects in
 * the fresh runner's copy-on-write heap, one page copy each (docs/judge/suite.md); here no Python page is written.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WIPE_MAX_DEPTH 5000 /* directory levels, as wipe.py's chmod_tree */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* live processes of the pid namespace other than PID 1 and me (zombies and dead ones aside); -1 when /proc fails */
static int others_alive(pid_t me) {
    DIR *d = opendir("/proc");
    if (d == NULL) return -1;
    int alive = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end != '\0' || pid == 1 || pid == me) continue;
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = '\0';
        char *paren = strrchr(buf, ')'); /* the command name may hold anything but ends before the last ')' */
        if (paren == NULL || paren[1] != ' ') continue;
        if (paren[2] != 'Z' && paren[2] != 'X') alive++;
    }
    closedir(d);
    return alive;
}

/* For a child subreaper (the runner: proc.become_subreaper), whose descendants are every process the submission
 * started: reap every zombie child; 1 when a live child is left, 0 when none is (nothing of the submission is left,
 * and kill(-1), which would also kill the warden's zygote, is not needed). 1 for a process that is no subreaper. As
 * proc.py's kill_all/children_left. */
int fl_children_left(void) {
    int sub = 0;
    if (prctl(PR_GET_CHILD_SUBREAPER, &sub, 0, 0, 0) != 0 || !sub) return 1;
    for (;;) {
        siginfo_t si;
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG) != 0) {
            if (errno == EINTR) continue;
            return errno == ECHILD ? 0 : 1;
        }
        if (si.si_pid == 0) return 1;
    }
}

/* SIGKILL every process but PID 1 and me until none is alive; 0, or -1 after timeout_s seconds. A subreaper with no
 * child left (fl_children_left) kills nothing: 0. */
static int kill_others(double timeout_s) {
    if (!fl_children_left()) return 0;
    pid_t me = getpid();
    double deadline = now() + timeout_s;
    for (;;) {
        kill(-1, SIGKILL);
        int alive = others_alive(me);
        if (alive == 0) return 0;
        if (alive < 0 || now() > deadline) return -1;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* whether name (relative to dirfd) is a directory, not a link, with no entry */
static int is_empty_dir(int dirfd, const char *name) {
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 0;
    }
    int empty = 1;
    struct dirent *e;
    while (empty && (e = readdir(d)) != NULL)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

static int remove_at(int dirfd, const char *name, int depth);

/* remove every entry of the directory open on fd (closed here), at depth + 1, except the entry named keep when it is an
 * empty directory (keep NULL: none); 0 or -1 */
static int empty_dir(int fd, int depth, const char *keep) {
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (e == NULL) {
            if (errno != 0) rc = -1;
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (keep != NULL && strcmp(e->d_name, keep) == 0 && is_empty_dir(dirfd(d), e->d_name)) continue;
        if (remove_at(dirfd(d), e->d_name, depth + 1) != 0) {
            rc = -1;
            break;
        }
    }
    closedir(d);
    return rc;
}

/* remove name (relative to dirfd): a file, a link (never followed) or a whole tree, whose directories first get
 * owner rwx (a 000 directory cannot keep its contents); 0 or -1 */
static int remove_at(int dirfd, const char *name, int depth) {
    struct stat st;
    if (depth > WIPE_MAX_DEPTH || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) return unlinkat(dirfd, name, 0);
    if ((st.st_mode & 0700) != 0700 && fchmodat(dirfd, name, 0700, 0) != 0) return -1;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || empty_dir(fd, depth, NULL) != 0) return -1;
    return unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* remove every SysV shared memory segment, message queue and semaphore set listed in /proc/sysvipc; 0 or -1 */
static int wipe_sysv(void) {
    static const char *const lists[] = {"/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem"};
    for (int k = 0; k < 3; k++) {
        FILE *f = fopen(lists[k], "re");
        if (f == NULL) continue;
        char *line = NULL;
        size_t cap = 0;
        int rc = 0;
        for (int row = 0; rc == 0 && getline(&line, &cap, f) >= 0; row++) {
            long long key;
            int id;
            if (row == 0) continue; /* the header */
            if (sscanf(line, "%lld %d", &key, &id) != 2) rc = -1;
            else if (k == 0) rc = shmctl(id, IPC_RMID, NULL);
            else if (k == 1) rc = msgctl(id, IPC_RMID, NULL);
            else rc = semctl(id, 0, IPC_RMID);
        }
        free(line);
        fclose(f);
        if (rc != 0) return -1;
    }
    return 0;
}

/* Kill every other process (waiting up to kill_timeout_s seconds until none is alive), empty the directories tops[0..n)
 * (those missing are skipped) except an empty work dir (workdir = top + "/" + workname), remove every SysV IPC
 * object and make the work dir. 0 when all of it worked, else -1 (wipe.py then reports an unclean end). */
int fl_wipe_all(const char *const *tops, int n, const char *workdir, double kill_timeout_s) {
    if (kill_others(kill_timeout_s) != 0) return -1;
    size_t wlen = strlen(workdir);
    for (int i = 0; i < n; i++) {
        int fd = open(tops[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOENT || errno == ENOTDIR) continue;
            return -1;
        }
        size_t tlen = strlen(tops[i]);
        const char *work = strncmp(workdir, tops[i], tlen) == 0 && wlen > tlen + 1 && workdir[tlen] == '/'
                               ? workdir + tlen + 1 : NULL;
        if (empty_dir(fd, -1, work) != 0) return -1;
    }
    if (wipe_sysv() != 0) return -1;
    if (mkdir(workdir, 0777) != 0 && errno != EEXIST) return -1;
    return 0;
}
