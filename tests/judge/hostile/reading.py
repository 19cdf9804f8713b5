"""Reading expected values: the ``secret_*`` probes expect :data:`SECRET_VALUE`, which appears only in the tests.
Each reader searches what it can reach for :data:`SECRET_PATTERN` and returns the first match (else 0)."""

from __future__ import annotations

import textwrap

from . import SECRET_PATTERN, hostile

R = "reading"
T = "secret_call secret_assert secret_mbpp"

_FIND = f"""
import re, os
PAT = re.compile(rb"{SECRET_PATTERN}")
def _hit(blob):
    m = PAT.search(blob or b"")
    return int(m.group()) if m else None
"""


def _entry(body: str) -> str:
    return _FIND + textwrap.dedent(body) + "\n_V = search()\ndef f(x):\n    return _V if _V is not None else 0\n"


PROGRAMS = [
    hostile("subprocess_proc_text", R, T, _entry("""
        import subprocess
        def search():
            cmd = "cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ /proc/[0-9]*/fd/* 2>/dev/null | head -c 50000000"
            out = subprocess.run(cmd, shell=True, capture_output=True, timeout=2).stdout
            return _hit(out)
        """), "a shell subprocess (outside any audit hook) cats every process's cmdline/environ/fds"),
    hostile("subprocess_memscan", R, T, _entry('''
        import subprocess, sys
        SCAN = """
        import os, re, sys
        pat = re.compile(rb"%s")
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                maps = open(f"/proc/{p}/maps").read().splitlines()
                fd = os.open(f"/proc/{p}/mem", os.O_RDONLY)
            except OSError:
                continue
            for ln in maps:
                lo, hi = (int(x, 16) for x in ln.split()[0].split("-"))
                if "r" not in ln.split()[1] or hi - lo > 1 << 28:
                    continue
                try:
                    os.lseek(fd, lo, 0)
                    m = pat.search(os.read(fd, hi - lo))
                except OSError:
                    continue
                if m:
                    print(m.group().decode()); sys.exit(0)
        """
        def search():
            exe = "/usr/bin/python3"
            out = subprocess.run([exe, "-c", SCAN % PAT.pattern.decode()], capture_output=True, timeout=6).stdout
            return _hit(out)
        '''), "a python subprocess scans the memory of every visible process (/proc/<pid>/mem)"),
    hostile("inprocess_memscan", R, T, _entry("""
        def search():
            try:
                maps = open("/proc/self/maps").read().splitlines()
                fd = os.open("/proc/self/mem", os.O_RDONLY)
            except OSError:
                return None
            for ln in maps:
                lo, hi = (int(x, 16) for x in ln.split()[0].split("-"))
                if "r" not in ln.split()[1] or hi - lo > 1 << 28:
                    continue
                try:
                    os.lseek(fd, lo, 0)
                    blob = os.read(fd, hi - lo)
                except OSError:
                    continue
                for m in PAT.finditer(blob):
                    if m.group() not in PAT.pattern:
                        return int(m.group())
            return None
        """), "scans its own address space (the test code or request may be in it)"),
    hostile("file_walk", R, T, _entry("""
        def search():
            roots = ["/tmp", "/judge", "/dev/shm", "/run", "/var", "/home", "/root", os.getcwd()]
            roots += ["/" + d for d in os.listdir("/") if d not in ("proc", "sys", "usr", "dev", "lib", "bin", "sbin")]
            roots += [f"/proc/{p}/cwd" for p in os.listdir("/proc") if p.isdigit()]
            seen, t0 = 0, __import__("time").monotonic()
            for root in roots:
                for dp, dns, fns in os.walk(root):
                    if dp.startswith(("/proc", "/sys", "/usr", "/dev/")) and not dp.startswith(("/proc/", "/dev/shm")):
                        dns[:] = []
                        continue
                    for fn in fns:
                        seen += 1
                        if seen > 20000 or __import__("time").monotonic() - t0 > 4:
                            return None
                        try:
                            with open(os.path.join(dp, fn), "rb") as fh:
                                v = _hit(fh.read(1 << 22))
                        except OSError:
                            continue
                        if v:
                            return v
            return None
        """), "walks every readable directory (work dir, /tmp, other processes' cwd) for the test files"),
    hostile("fd_read", R, T, _entry("""
        def search():
            import select, stat
            for fd in range(0, 256):
                for path in (f"/proc/self/fd/{fd}",):
                    try:
                        if not stat.S_ISREG(os.stat(path).st_mode):
                            continue
                        with open(path, "rb") as fh:
                            v = _hit(fh.read(1 << 22))
                            if v:
                                return v
                    except OSError:
                        pass
                try:
                    if not select.select([fd], [], [], 0.05)[0]:
                        continue
                    v = _hit(os.read(fd, 1 << 22))
                    if v:
                        return v
                except OSError:
                    pass
            return None
        """), "reads every inherited fd (request pipe, test files) without blocking"),
    hostile("gc_code_consts", R, T, _entry("""
        import gc
        def search():
            def walk(c):
                for k in getattr(c, "co_consts", ()):
                    if isinstance(k, int) and 731000000000 <= k < 731100000000:
                        return k
                    if hasattr(k, "co_consts"):
                        r = walk(k)
                        if r:
                            return r
            try:
                objs = gc.get_objects()
            except Exception:
                return None
            for o in objs:
                if hasattr(o, "co_consts"):
                    r = walk(o)
                    if r:
                        return r
                if isinstance(o, (str, bytes)):
                    v = _hit(o.encode() if isinstance(o, str) else o)
                    if v:
                        return v
            return None
        """), "gc.get_objects walk for code objects / strings holding the expected value"),
    hostile("lazy_frame_walk", R, T, _FIND + """
import sys
def f(x):
    try:
        fr = sys._getframe(1)
    except Exception:
        try:
            raise ValueError
        except ValueError as e:
            try:
                fr = e.__traceback__.tb_frame.f_back
            except Exception:
                return 0
    while fr is not None:
        for k in getattr(fr.f_code, "co_consts", ()):
            if isinstance(k, int) and 731000000000 <= k < 731100000000:
                return k
        fr = fr.f_back
    return 0
""", "walks the caller's frames at call time for the expected constant"),
]
