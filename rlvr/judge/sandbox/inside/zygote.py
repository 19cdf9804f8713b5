"""The warden's zygote (:func:`zygote_main`, :class:`Zygote`) and the child reaping both use (standard library only).

A second warm image of the sandbox, forked by the warden (:mod:`warden`) after its setup: it imports
:data:`runner.PRELOAD` and clones the runners of the submissions the host marks ``heavy`` with
``clone(CLONE_PARENT)``, so that they are the warden's children (reaped by the warden, their CPU in its ``cpu_s`` as a
forked runner's). It never receives submission data (only the host's id and two pipe ends) and runs no submission
code. See the warden's docstring for when it is replaced, and docs/judge/threat-model.md for who can signal it.
"""

import _socket
import array
import ctypes
import gc
import os
import signal

import proc
import runner


def recv_fds(sock, bufsize, maxfds):
    """``socket.recv_fds`` over a ``_socket.socket`` (the ``socket`` module's enum tables would add ~80 pages to the
    image every test's ``fork()`` copies): (data, [fds])."""
    fds = array.array("i")
    msg, ancdata, _flags, _addr = sock.recvmsg(bufsize, _socket.CMSG_LEN(maxfds * fds.itemsize))
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def reap_all():
    """Kill every other process of the namespace and reap them all (their CPU joins RUSAGE_CHILDREN)."""
    proc.kill_all()
    while True:
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def reap_zombies(zygote):
    """Reap every child that has ended, without waiting (their CPU joins RUSAGE_CHILDREN); the zygote's end or stop
    among them makes ``zygote`` forget it (:meth:`Zygote.lost`)."""
    while True:
        try:
            done, status, _ru = os.wait4(-1, os.WNOHANG | os.WUNTRACED)
        except InterruptedError:
            continue
        except ChildProcessError:
            return
        if done == 0:
            return
        if done == zygote.pid:
            zygote.lost(reaped=not os.WIFSTOPPED(status))


# clone(2) with CLONE_PARENT | SIGCHLD: the runner a zygote makes is the warden's child (reaped by the warden's wait
# loop, its CPU in the warden's RUSAGE_CHILDREN as a forked runner's); syscall numbers from
# arch/x86/entry/syscalls/syscall_64.tbl and asm-generic/unistd.h
SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
CLONE_PARENT = 0x00008000
ZYGOTE_REPLY_S = 10.0  # seconds the warden waits for a zygote's answer (its first one includes its imports)


def clone_parent():
    """``fork()`` that makes the child a sibling of the caller (``clone(CLONE_PARENT | SIGCHLD)``, the raw syscall:
    glibc has no wrapper without a new stack), between ``PyOS_BeforeFork`` and ``PyOS_AfterFork_*`` as ``os.fork``
    does; the syscall is called through ``ctypes.PyDLL`` so the GIL stays held across it, as in ``os.fork``. Returns 0
    in the child, its pid in the caller; raises ``OSError`` when the kernel refuses (or on another architecture)."""
    if SYS_CLONE is None:
        raise OSError(38, "clone(CLONE_PARENT) not wired for this architecture")
    api = ctypes.pythonapi
    syscall = ctypes.PyDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    api.PyOS_BeforeFork()
    pid = syscall(ctypes.c_long(SYS_CLONE), ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD), ctypes.c_long(0),
                  ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, os.strerror(err))
    return pid


def vm_base():
    """This process's address space (``/proc/self/statm``) plus 64 MB, bytes: the base of a test child's
    ``RLIMIT_AS`` (``proc.set_limits``) for a runner forked from this image."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + (64 << 20)


def zygote_main(sock):
    """The zygote: import :data:`runner.PRELOAD` into a copy of the warden's image, ``gc.freeze()``, then, for each
    message on ``sock`` (the request id, with the runner's two fds by SCM_RIGHTS), clone a runner as the warden's
    child (:func:`clone_parent`) and answer its pid (``-1`` when the clone failed). Never receives submission data
    (only the host's id and two pipe ends) and runs no submission code; its runners start from its image, untouched
    by any earlier submission (no process can write another's memory: seccomp, non-dumpable). Exits when the warden's
    end closes or sends anything else. Never returns."""
    for name in runner.PRELOAD:
        try:
            __import__(name)
        except ImportError:  # pragma: no cover - a stripped-down interpreter
            pass
    gc.collect()
    gc.freeze()
    base = vm_base()
    while True:
        try:
            data, fds = recv_fds(sock, 256, 4)
        except OSError:
            os._exit(0)
        if not data or len(fds) != 2:
            os._exit(0)
        try:
            pid = clone_parent()
        except OSError:
            pid = -1
        if pid == 0:
            try:
                sock.close()
                runner.main(data.decode(), fds[0], fds[1], base)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        try:
            sock.send(str(pid).encode())
        except OSError:
            os._exit(0)


class Zygote:
    """The warden's handle on its zygote (:func:`zygote_main`): pid (0: none) and the warden's end of their
    ``SOCK_SEQPACKET`` socketpair. Any process of a submission can signal it (same uid): one that stops or kills it
    only makes the warden kill it and start another before the next heavy submission (:meth:`runner_for`)."""

    def __init__(self, enabled):
        self.enabled, self.pid, self.sock = enabled, 0, None

    def spawn(self, ctl):
        """Fork a fresh zygote (``ctl``, the host's control socket, is closed in it)."""
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                ctl.close()
                ours.close()
                zygote_main(theirs)
            finally:
                os._exit(1)
        theirs.close()
        ours.settimeout(ZYGOTE_REPLY_S)
        self.pid, self.sock = pid, ours

    def lost(self, reaped=False):
        """Forget the zygote (stopped, dead, or not answering): SIGKILL it unless ``reaped`` (a later wait reaps it)."""
        if self.pid and not reaped:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.sock is not None:
            self.sock.close()
        self.pid, self.sock = 0, None

    def check(self):
        """Notice a zygote that stopped or ended since the last wait (a submission may signal it)."""
        if not self.pid:
            return
        try:
            done, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            done, status = self.pid, 0
        if done == self.pid:
            self.lost(reaped=not os.WIFSTOPPED(status))

    def runner_for(self, ctl, rid, fds):
        """A runner cloned by the zygote (started first when there is none) on ``fds``: its pid, or 0 when the
        zygote failed (then it is gone, and every process but the warden was killed and reaped)."""
        self.check()
        if not self.pid:
            self.spawn(ctl)
        try:
            self.sock.sendmsg([rid.encode()], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])
            pid = int(self.sock.recv(64) or b"-1")
        except (OSError, ValueError):
            pid = -1
        if pid > 0:
            return pid
        self.lost()
        reap_all()  # a runner it may have cloned before it failed is killed with it
        return 0
