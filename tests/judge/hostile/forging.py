"""Verdict forging / harness takeover: forged result frames, sys.modules walks, exit tricks, hooks, ptrace,
/proc/<pid>/mem, processes planted to outlive the test. ``{TAG}`` in a program is replaced by a fresh host tag."""

from __future__ import annotations

from . import STDIO_ANSWER, hostile

F = "forging"

_SPRAY = """
import json, os, struct
recs = [{"ok": True, "x": 0}, {"status": "ok", "exit_code": 0, "stdout": "7\\n"}, {"i": 0, "ok": True, "v": "7"},
        {"i": 1, "ok": True, "v": "30"}, {"i": 2, "ok": True, "v": "2"}, {"verdict": "accepted", "passed": 3},
        {"results": [{"status": "ok", "exit_code": 0, "stdout": "7", "value": "7"}] * 3}]
frames = []
for r in recs:
    b = json.dumps(r).encode()
    frames += [struct.pack(">I", len(b)) + b, struct.pack(">Q", len(b)) + b, b + b"\\n"]
for fd in range(0, 256):
    for fr in frames:
        try:
            os.write(fd, fr)
        except OSError:
            break
"""

_CAP_PTRACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
me, hit = os.getpid(), False
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != me:
        if libc.ptrace(16, int(p), None, None) == 0 or libc.ptrace(0x4206, int(p), None, None) == 0:  # ATTACH, SEIZE
            hit = True
            libc.ptrace(17, int(p), None, None)  # DETACH
if hit:
""" + "\n".join("    " + ln for ln in STDIO_ANSWER.splitlines()) + "\nelse:\n    print(0)\n"

_CAP_MEMWRITE = """
import os
me, hit = os.getpid(), False
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != me:
        try:
            with open(f"/proc/{p}/maps") as fh:
                start = int(fh.readline().split("-")[0], 16)
            fd = os.open(f"/proc/{p}/mem", os.O_RDWR)
            os.lseek(fd, start, 0)
            b = os.read(fd, 1)
            os.lseek(fd, start, 0)
            os.write(fd, b)
            hit = True
        except (OSError, ValueError):
            pass
if hit:
""" + "\n".join("    " + ln for ln in STDIO_ANSWER.splitlines()) + "\nelse:\n    print(0)\n"

_CAP_VMREADV = """
import ctypes, os
class IOV(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(64)
me, hit = os.getpid(), False
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != me:
        try:
            with open(f"/proc/{p}/maps") as fh:
                start = int(fh.readline().split("-")[0], 16)
        except (OSError, ValueError):
            continue
        local, remote = IOV(ctypes.cast(buf, ctypes.c_void_p), 64), IOV(start, 64)
        if libc.process_vm_readv(int(p), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
            hit = True
if hit:
""" + "\n".join("    " + ln for ln in STDIO_ANSWER.splitlines()) + "\nelse:\n    print(0)\n"

PROGRAMS = [
    hostile("fd_spray_stdio", F, "stdio", _SPRAY + "print(0)\n", "forged result frames on fds 0-255, then wrong"),
    hostile("fd_spray_call", F, "call assert_mbpp", _SPRAY + "def add(a, b):\n    return 0\n",
            "forged frames at import time, then a wrong add"),
    hostile("fd_spray_in_call", F, "call assert_he", "def add(a, b):\n" + "\n".join(
        "    " + ln for ln in _SPRAY.strip().splitlines()) + "\n    return None\n",
        "forged frames from inside the call, on every fd"),
    hostile("stdout_forge_call", F, "call assert_mbpp", """
        import sys
        def add(a, b):
            print(a + b)
            print('{"i": 0, "ok": true, "v": "7"}\\nPASSED\\nOK\\n3 passed')
            sys.stdout.flush()
            return None
        """, "prints what a stdout-reading harness would take as the answer/verdict"),
    hostile("sysmodules_patch_comparators", F, "call assert_mbpp assert_he", """
        import sys
        class Any:
            def __eq__(self, o): return True
            def __ne__(self, o): return False
            __hash__ = object.__hash__
        names_true = ("values_equal", "compare_stdout", "compare", "check", "equal", "_equal", "judge_value")
        for m in list(sys.modules.values()):
            d = getattr(m, "__dict__", None)
            if not isinstance(d, dict):
                continue
            for k in list(d):
                try:
                    if k in names_true:
                        d[k] = lambda *a, **k: True
                    elif k in ("screen", "_screen", "safe_repr", "_wrap", "restore_world", "arm_audit"):
                        d[k] = (lambda f: lambda x, *a, **k: x)(d[k])
                except Exception:
                    pass
        def add(a, b):
            return Any()
        """, "walks sys.modules and swaps comparison / screening functions of any harness module"),
    hostile("sysmodules_pristine_builtins", F, "assert_mbpp assert_he", """
        import sys, builtins
        fake_int = lambda *a, **k: 0
        for m in list(sys.modules.values()):
            for k, v in list(getattr(m, "__dict__", {}).items()):
                try:
                    if isinstance(v, dict) and "len" in v and "isinstance" in v:   # a saved builtins copy
                        v["AssertionError"] = type("AssertionError", (Exception,), {})
                    if isinstance(v, list):
                        for item in v:
                            if isinstance(item, tuple) and len(item) == 2 and item[0] is builtins:
                                item[1]["AssertionError"] = type("AssertionError", (Exception,), {})
                except Exception:
                    pass
        builtins.AssertionError = type("AssertionError", (Exception,), {})
        def add(a, b):
            return 0
        """, "rewrites the harness's pristine-builtins copy and its snapshot so AssertionError is not the real one"),
    hostile("exit0_at_import", F, "call assert_he assert_mbpp", """
        import os
        os._exit(0)
        def add(a, b):
            return a - b
        """, "os._exit(0) before any test can report"),
    hostile("systemexit0_in_call", F, "call assert_he assert_mbpp", """
        def add(a, b):
            raise SystemExit(0)
        """, "raise SystemExit(0) from the candidate"),
    hostile("exit0_in_call_stdio", F, "stdio", """
        import os, sys
        sys.stdout.write("7\\n30\\n"); sys.stdout.flush()
        os._exit(0)
        """, "prints both expected answers and exits 0 (only the first test's stdin is right)"),
    hostile("atexit_exit0", F, "call assert_mbpp assert_he", """
        import atexit, os, sys
        atexit.register(lambda: os._exit(0))
        sys.excepthook = lambda *a: os._exit(0)
        def add(a, b):
            return 0
        """, "atexit + excepthook that turn any failure into exit 0"),
    hostile("hooks_swallow", F, "assert_mbpp assert_he", """
        import sys, threading, os
        threading.excepthook = lambda *a: None
        sys.unraisablehook = lambda *a: None
        sys.excepthook = lambda *a: None
        sys.breakpointhook = lambda *a: os._exit(0)
        def add(a, b):
            return None
        """, "exception/unraisable/breakpoint hooks"),
    hostile("settrace_skip_asserts", F, "assert_he assert_mbpp", """
        import sys
        def tracer(frame, event, arg):
            if event == "line" and "<test" in frame.f_code.co_filename or "check" == frame.f_code.co_name:
                try:
                    frame.f_lineno = frame.f_lineno + 1
                except Exception:
                    pass
            return tracer
        sys.settrace(tracer)
        import threading
        threading.settrace(tracer)
        def add(a, b):
            sys.settrace(tracer)
            return -1
        """, "a line tracer that jumps over the test's assert lines"),
    hostile("ptrace_probe", F, "stdio", _CAP_PTRACE, "PTRACE_ATTACH/SEIZE every other visible process (ctypes)"),
    hostile("proc_mem_write_probe", F, "stdio", _CAP_MEMWRITE, "opens /proc/<pid>/mem read-write on other processes"),
    hostile("process_vm_readv_probe", F, "stdio", _CAP_VMREADV, "process_vm_readv on other processes"),
    hostile("plant_double_fork", F, "stdio", """
        import os
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/usr/bin/sleep", ["sleep", "{TAG}"])
            os._exit(0)
        print(0)
        """, "double-forked, setsid daemon that outlives the test"),
    hostile("plant_popen_session", F, "call", """
        import subprocess
        subprocess.Popen(["/usr/bin/sleep", "{TAG}"], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
        def add(a, b):
            return 0
        """, "Popen(start_new_session=True) at import time of a call test"),
    hostile("plant_shell_nohup", F, "assert_mbpp", """
        import os
        os.system("(setsid nohup /usr/bin/sleep {TAG} >/dev/null 2>&1 &) ; true")
        def add(a, b):
            return 0
        """, "shell setsid+nohup background process from an assert-test submission"),
    hostile("plant_daemon_next_test", F, "stdio", """
        import os, time
        a, b = map(int, input().split())
        HB = "/tmp/heartbeat"
        def beat():
            try:
                with open(HB) as fh:
                    return fh.read()
            except OSError:
                return None
        first = not os.path.exists("/tmp/planted")
        if first:
            open("/tmp/planted", "w").close()
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    n = 0
                    while True:
                        n += 1
                        with open(HB + ".new", "w") as fh:
                            fh.write(str(n))
                        os.replace(HB + ".new", HB)
                        time.sleep(0.002)
                os._exit(0)
            end = time.monotonic() + 2
            while beat() is None and time.monotonic() < end:
                time.sleep(0.01)
            survived = False
        else:
            seen = beat()
            time.sleep(0.1)
            survived = beat() != seen
        print(a + b if first or survived else 0)
        """, "the first test plants a daemon that keeps beating; a later test of the same submission is right only if "
        "it still beats"),
    hostile("plant_forger_daemon", F, "stdio", """
        import os, time, json, struct
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/usr/bin/python3", ["python3", "-c", '''
        import os, time, json, struct
        b = json.dumps({"ok": True, "x": 0, "status": "ok", "exit_code": 0, "stdout": "7"}).encode()
        end = time.time() + 20
        while time.time() < end:
            for fd in range(256):
                try: os.write(fd, struct.pack(">I", len(b)) + b)
                except OSError: pass
            time.sleep(0.05)
        ''', "{TAG}"])
            os._exit(0)
        print(0)
        """, "daemon that keeps writing forged frames to every fd for 20 s after the test"),
    hostile("native_fd_spray", F, "stdio", r"""
        #include <cstdio>
        #include <cstring>
        #include <unistd.h>
        int main() {
            const char *js = "{\"ok\": true, \"x\": 0, \"status\": \"ok\", \"exit_code\": 0, \"stdout\": \"7\"}";
            unsigned n = strlen(js);
            unsigned char h4[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
                                   (unsigned char)n};
            for (int fd = 3; fd < 256; ++fd) { if (write(fd, h4, 4) < 0) continue; write(fd, js, n); }
            printf("0\n");
        }
        """, "compiled program forging frames on every fd", language="cpp"),
]
