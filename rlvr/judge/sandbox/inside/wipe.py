"""Wipe every writable place of a sandbox between submissions (inside the sandbox; standard library only).

Run by the runner as it ends, after killing every other process, or by a child of the warden when the runner was
killed first; never by the warden itself (the names and IPC keys a submission created must not enter the heap the
next runner inherits). Places: ``/tmp`` (the work and build dirs included; ``chmod`` before unlink so a ``000``
directory cannot keep its contents), ``/dev/shm``, ``/dev/mqueue`` (POSIX message queues), and every SysV IPC object
listed in ``/proc/sysvipc/{shm,msg,sem}`` (``IPC_RMID``).

When the sandbox loaded the compiled library (:mod:`forkloop`), :func:`wipe_all` runs its C version (``wipe.c``, the
same steps): in a fresh runner every object Python allocates lands on a copy-on-write page, and this module's
listing and path strings cost ~100 page copies per submission. The Python functions below are the fallback.
"""

import ctypes
import os
import signal
import stat
import time

import forkloop
import proc

WIPE = ("/tmp", "/dev/shm", "/dev/mqueue")
WORKDIR = "/tmp/work"
CLEAN_EXIT = 0
KILL_TIMEOUT_S = 5.0
LIBC = ctypes.CDLL(None, use_errno=True)
_C_ARGS = ((ctypes.c_char_p * len(WIPE))(*(p.encode() for p in WIPE)), len(WIPE), WORKDIR.encode(), KILL_TIMEOUT_S)


def chmod_tree(path, depth=0):
    """Give every directory under ``path`` (included) owner rwx, so its entries can be listed and removed."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        if st.st_mode & 0o700 != 0o700:
            os.chmod(path, 0o700)
        if depth > 5000:
            raise RuntimeError("directory tree too deep to wipe")
        for name in os.listdir(path):
            chmod_tree(os.path.join(path, name), depth + 1)


def remove_tree(path):
    """Remove ``path``: a file, a link (never followed) or a whole directory tree. Raises ``OSError`` on failure.
    (``shutil.rmtree`` without importing ``shutil``: its bz2/lzma imports would add ~80 pages and 20 mappings to
    the warden's image, which every test's ``fork()`` copies.)"""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        for name in os.listdir(path):
            remove_tree(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


def kill_others(timeout_s=KILL_TIMEOUT_S):
    """SIGKILL every process but PID 1 and the caller until ``/proc`` shows no other live one (zombies aside)."""
    if proc.SUBREAPER and not proc.children_left():  # a runner with no descendant: nothing of the submission is left
        return
    me = os.getpid()
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        alive = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in (1, me):
                try:
                    with open(f"/proc/{name}/stat") as fh:
                        state = fh.read().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if state not in ("Z", "X"):
                    alive.append(name)
        if not alive:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes survive SIGKILL: {alive[:5]}")
        time.sleep(0.001)


def wipe():
    """Remove everything under the writable places and every SysV IPC object; raises when something stays."""
    for top in WIPE:
        if not os.path.isdir(top):
            continue
        for name in os.listdir(top):
            path = os.path.join(top, name)
            if path == WORKDIR and not os.path.islink(path) and os.path.isdir(path) and not os.listdir(path):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                chmod_tree(path)
            remove_tree(path)
    for kind, rm in (("shm", lambda i: LIBC.shmctl(i, 0, None)), ("msg", lambda i: LIBC.msgctl(i, 0, None)),
                     ("sem", lambda i: LIBC.semctl(i, 0, 0))):
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            if rm(int(row.split()[1])) != 0:
                raise RuntimeError(f"cannot remove SysV {kind} {row.split()[1]}")
    os.makedirs(WORKDIR, exist_ok=True)


def wipe_all():
    """Kill the others, then wipe (in C when :data:`forkloop.WIPE` is loaded); the exit code to end with:
    :data:`CLEAN_EXIT` on success, 3 otherwise."""
    if forkloop.WIPE is not None:
        return CLEAN_EXIT if forkloop.WIPE(*_C_ARGS) == 0 else 3
    try:
        kill_others()
        wipe()
    except Exception:
        return 3
    return CLEAN_EXIT
