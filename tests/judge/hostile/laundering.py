"""Verdict laundering: a wrong program that breaks the harness/warden/parent so the failure would read as
``sandbox_error`` (left out of the reward group) instead of a failure. Must be a program failure, never accepted."""

from __future__ import annotations

import textwrap

from . import hostile

L = "laundering"
T = "stdio call assert_mbpp assert_he"

_WRONG_TAIL = "\ndef add(a, b):\n    return a - b\nprint(0)\n"


def w(block: str) -> str:
    """``block`` dedented, followed by the wrong answer (prints 0 / ``add`` returns a - b)."""
    return textwrap.dedent(block) + _WRONG_TAIL


PROGRAMS = [
    hostile("kill_parent", L, T, w("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"),
            "SIGKILL to the parent process"),
    hostile("interrupt_parent", L, "stdio call", w("""
        import os, signal, time
        os.kill(os.getppid(), signal.SIGINT)
        time.sleep(0.5)
        """), "SIGINT to the parent: Python's KeyboardInterrupt, which a harness would end on as its own failure"),
    hostile("signal_parent_each", L, "stdio call", w("""
        import os, signal
        for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGALRM, signal.SIGPIPE, signal.SIGQUIT):
            try:
                os.kill(os.getppid(), s)
            except OSError:
                pass
        """), "every terminating signal to the parent"),
    hostile("kill_minus_one", L, T, w("import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n"
            "    pass\n"), "kill(-1, SIGKILL): every process it may signal"),
    hostile("kill_every_pid", L, T, w("""
        import os, signal
        me = os.getpid()
        for p in sorted((int(p) for p in os.listdir("/proc") if p.isdigit()), reverse=True):
            if p != me:
                for s in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.kill(p, s)
                    except OSError:
                        pass
        """), "SIGTERM+SIGKILL every visible pid, the namespace init included"),
    hostile("stop_parent", L, T, w("""
        import os, signal
        for p in {os.getppid(), 1}:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        """), "SIGSTOP the parent and pid 1 (the warden, which waits WUNTRACED, kills a stopped runner)"),
    hostile("kill_in_call", L, "call assert_mbpp assert_he", """
        import os, signal
        def add(a, b):
            try:
                os.kill(-1, signal.SIGKILL)
                os.kill(os.getppid(), signal.SIGKILL)
            except OSError:
                pass
            return a - b
        """, "kills everything from inside the candidate call"),
    hostile("pid_exhaustion", L, T, w("""
        import os, time
        kids = 0
        try:
            while kids < 5000:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                kids += 1
        except OSError:
            pass
        """), "forks until EAGAIN and keeps the children so the harness cannot fork/exec"),
    hostile("fd_and_tmp_exhaustion", L, T, w("""
        import os
        fds = []
        try:
            while True:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        try:
            with open("/tmp/fill", "wb") as fh:
                while True:
                    fh.write(b"x" * (1 << 20))
        except OSError:
            pass
        """), "fills the fd table and /tmp so the harness's own writes fail"),
    hostile("close_std_fds_then_crash", L, T, w("""
        import os
        os.closerange(0, 1024)
        os.abort()
        """), "closes every fd (result pipe included) and aborts"),
    hostile("ptrace_traceme_parent", L, "stdio call", w("""
        import ctypes, os, signal
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            libc.ptrace(16, os.getppid(), None, None)   # PTRACE_ATTACH: stop the parent and keep it
        except Exception:
            pass
        """), "ptrace-attach (stop) the parent and keep it stopped"),
]
