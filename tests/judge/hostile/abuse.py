"""Memory and CPU abuse. Each fill program prints the right answer of the ``stdio`` probe (memory limit 512 MB) only
when it got *more* than that limit past the sandbox (several processes, tmpfs, /dev/shm, memfd), so ``accepted`` means
the per-sandbox limit did not hold. Sizes stay near 1 GB so a failing judge cannot take the shared host down."""

from __future__ import annotations

import textwrap

from . import STDIO_ANSWER, hostile

d = textwrap.dedent

A = "abuse"
_ANSWER_IF = "if ok:\n" + "\n".join("    " + ln for ln in STDIO_ANSWER.splitlines()) + "\nelse:\n    print(0)\n"

_FILL = """
import os
MB = 1 << 20
def fill(path, total_mb=900):
    done = 0
    try:
        with open(path, "wb", buffering=0) as fh:
            chunk = b"\\xab" * MB
            while done < total_mb:
                fh.write(chunk)
                done += 1
    except OSError:
        pass
    return done
"""

#: Programs whose fill must not pin host memory after the submission ended (checked with MemAvailable).
FILLERS = ("tmpfs_fill", "dev_shm_fill", "memfd_fill")
# several processes together: only a sandbox's cgroup bounds them; the documented fallback without cgroups (per-process
# RLIMIT_AS, docs/judge/threat-model.md) lets them exceed the limit together, so these need a cgroup mode to be judged
NEED_CGROUP = ("multi_process_rlimit", "multi_process_over_sandbox_cap")

PROGRAMS = [
    hostile("multi_process_rlimit", A, "stdio", d("""
        import os, time
        r, w = os.pipe()
        kids = []
        for _ in range(5):
            pid = os.fork()
            if pid == 0:
                try:
                    blob = b"\\x01" * (180 << 20)   # 180 MB touched, under a per-process 512 MB RLIMIT_AS
                    os.write(w, b"+")
                except MemoryError:
                    os.write(w, b"-")
                import time
                time.sleep(10)
                os._exit(0)
            kids.append(pid)
        import select
        got, end = b"", time.monotonic() + 2.5
        while len(got) < 5 and select.select([r], [], [], max(0.0, end - time.monotonic()))[0]:
            got += os.read(r, 5)
        time.sleep(0.5)  # an OOM kill of an earlier child shows now
        ok = got.count(b"+") == 5 and all(os.waitpid(k, os.WNOHANG)[0] == 0 for k in kids)
        """) + _ANSWER_IF + "\nfor k in kids:\n    os.kill(k, 9)\n", "5 processes x 180 MB each, alive together"),
    hostile("multi_process_over_sandbox_cap", A, "stdio", d("""
        import os, time
        r, w = os.pipe()
        kids = []
        for _ in range(14):
            pid = os.fork()
            if pid == 0:
                try:
                    blob = b"\\x01" * (160 << 20)   # 160 MB touched, under a per-process 512 MB RLIMIT_AS
                    os.write(w, b"+")
                except MemoryError:
                    os.write(w, b"-")
                import time
                time.sleep(10)
                os._exit(0)
            kids.append(pid)
        import select
        got, end = b"", time.monotonic() + 2.5
        while len(got) < 14 and select.select([r], [], [], max(0.0, end - time.monotonic()))[0]:
            got += os.read(r, 14)
        time.sleep(0.5)  # an OOM kill of an earlier child shows now
        ok = got.count(b"+") == 14 and all(os.waitpid(k, os.WNOHANG)[0] == 0 for k in kids)
        """) + _ANSWER_IF + "\nfor k in kids:\n    os.kill(k, 9)\n",
            "14 processes x 160 MB each (2.2 GB, over a 2 GB per-sandbox cap too), alive together"),
    hostile("tmpfs_fill", A, "stdio", _FILL + "ok = fill('/tmp/fill.bin') >= 700\n" + _ANSWER_IF,
            "writes 900 MB into /tmp"),
    hostile("dev_shm_fill", A, "stdio", _FILL + "ok = fill('/dev/shm/fill.bin') >= 700\n" + _ANSWER_IF,
            "writes 900 MB into /dev/shm and leaves it there"),
    hostile("memfd_fill", A, "stdio", _FILL + """
fd = os.memfd_create("fill")
done = 0
try:
    while done < 900:
        os.write(fd, b"\\xcd" * MB)
        done += 1
except OSError:
    pass
ok = done >= 700
""" + _ANSWER_IF, "900 MB into an unmapped memfd (not counted by RLIMIT_AS)"),
    hostile("fork_bomb", A, "stdio call", d("""
        import os, time
        n = 0
        try:
            while n < 3000:
                if os.fork() == 0:
                    time.sleep(20)
                    os._exit(0)
                n += 1
        except OSError:
            pass
        ok = n >= 1000
        """) + _ANSWER_IF + "\ndef add(a, b):\n    return a - b\n", "forks up to 3000 sleeping children"),
    hostile("non_utf8_flood", A, "stdio call", """
        import os, sys
        junk = bytes(range(128, 256)) * 8192
        for _ in range(200):
            try:
                os.write(1, junk)
            except OSError:
                break
        def add(a, b):
            return a - b
        """, "200 MB of invalid UTF-8 on stdout"),
    hostile("stderr_flood_and_surrogates", A, "stdio call", """
        import os, sys
        sys.stdout.buffer.write(b"\\xed\\xa0\\x80\\xff\\xfe\\x00" * 100000)
        sys.stdout.flush()
        for _ in range(100):
            os.write(2, b"\\xff" * (1 << 20))
        def add(a, b):
            return "\\ud800" * 1000
        """, "lone surrogates, NULs and 100 MB of junk on stderr"),
    hostile("huge_return_value", A, "call float_call", """
        def add(a, b):
            return [[0] * 1000] * 30000
        half = add
        """, "a 30-million-element (repr ~90 MB) return value"),
    hostile("thread_cpu_burn", A, "stdio", """
        import threading, time
        def spin():
            while True:
                pass
        for _ in range(64):
            threading.Thread(target=spin, daemon=True).start()
        time.sleep(30)
        """, "64 spinning threads for 30 s (must end as a timeout)"),
]
