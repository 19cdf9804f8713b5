"""Cross-submission state: ``PAIRS`` of (planter, reader) submitted back to back to a one-worker judge. The planter
stores ``{TOKEN}`` (a fresh random hex string) somewhere; the reader, whose code never contains it, prints whatever
it finds under ``RLVRTOK_`` + 32 hex chars. The host asserts the token is not in the reader's output."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

FIND = r"""
import os, re, sys
PAT = re.compile(rb"RLVRTOK_[0-9a-f]{32}")
def show(blob):
    for m in PAT.finditer(blob or b""):
        print(m.group().decode(), flush=True)
"""


@dataclass(frozen=True)
class Pair:
    """``planter`` then ``reader`` (Python unless ``language``), judged with ``Judge.run_code`` on one worker."""

    name: str
    planter: str
    reader: str
    attempt: str
    language: str = "python"


def pair(name: str, planter: str, reader: str, attempt: str, language: str = "python") -> Pair:
    """Dedent both programs; the reader gets :data:`FIND` prepended when it is Python."""
    r = textwrap.dedent(reader)
    return Pair(name, textwrap.dedent(planter), (FIND + r) if language == "python" else r, attempt, language)


_WALK = """
roots = ["/tmp", "/dev/shm", "/var/tmp", os.getcwd(), os.path.expanduser("~"), "/run"]
roots += [os.path.join("/", d) for d in os.listdir("/") if d not in ("proc", "sys", "usr", "dev", "lib", "lib64", "bin",
                                                                    "sbin", "etc", "lib32")]
for root in roots:
    for dp, dns, fns in os.walk(root):
        if dp.startswith(("/proc", "/sys", "/usr", "/dev/pts")) or dp.count("/") > 6:
            dns[:] = []
            continue
        for fn in fns:
            try:
                with open(os.path.join(dp, fn), "rb") as fh:
                    show(fh.read(1 << 20))
            except OSError:
                pass
"""

PAIRS = [
    pair("tmp_file", "open('/tmp/planted', 'w').write('{TOKEN}')\n", _WALK, "a file in /tmp"),
    pair("dev_shm_file", "open('/dev/shm/planted', 'w').write('{TOKEN}')\n", _WALK, "a file in /dev/shm"),
    pair("cwd_and_home_files", """
        import os
        for d in (os.getcwd(), os.path.expanduser("~"), "/var/tmp", "/tmp/work", "/tmp/build"):
            try:
                os.makedirs(d, exist_ok=True)
                open(os.path.join(d, "planted.txt"), "w").write("{TOKEN}")
            except OSError:
                pass
        """, _WALK, "files in the work dir, HOME, /var/tmp and the build dirs"),
    pair("posix_shm", """
        import _posixshmem, os
        fd = _posixshmem.shm_open("/rlvr_planted", os.O_CREAT | os.O_RDWR, 0o666)
        os.ftruncate(fd, 4096)
        os.pwrite(fd, b"{TOKEN}", 0)
        """, """
        try:
            import _posixshmem
            fd = _posixshmem.shm_open("/rlvr_planted", os.O_RDONLY, 0)
            show(os.pread(fd, 4096, 0))
        except OSError:
            pass
        """, "POSIX shared memory segment (shm_open)"),
    pair("sysv_shm", """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        sid = libc.shmget(0x52564C52, 4096, 0o1000 | 0o666)
        addr = libc.shmat(sid, None, 0)
        t = b"{TOKEN}"
        ctypes.memmove(addr, t, len(t))
        """, """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        sid = libc.shmget(0x52564C52, 4096, 0o666)
        if sid >= 0:
            addr = libc.shmat(sid, None, 0)
            if addr not in (None, ctypes.c_void_p(-1).value):
                show(ctypes.string_at(addr, 4096))
        """, "System V shared memory segment (key 0x52564C52)"),
    pair("daemon_socket", """
        import os, socket, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                s = socket.socket(socket.AF_UNIX)
                s.bind("\\0rlvr_planted")
                s.listen(8)
                end = time.time() + 30
                s.settimeout(1)
                while time.time() < end:
                    try:
                        c, _ = s.accept()
                        c.sendall(b"{TOKEN}")
                        c.close()
                    except OSError:
                        pass
                os._exit(0)
            os._exit(0)
        time.sleep(0.2)
        """, """
        import socket, time
        for _ in range(5):
            try:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(1)
                s.connect("\\0rlvr_planted")
                show(s.recv(100))
                break
            except OSError:
                time.sleep(0.1)
        """, "a daemonised process serving the token on an abstract unix socket"),
    pair("shadowing_module", """
        import os, sys
        src = "TOKEN = '{TOKEN}'\\nprint(TOKEN)\\n"
        for d in ["/tmp", "/tmp/work", os.getcwd(), os.path.expanduser("~")] + [p for p in sys.path if p]:
            try:
                open(os.path.join(d, "heapq.py"), "w").write(src)
                open(os.path.join(d, "rlvr_planted.py"), "w").write(src)
            except OSError:
                pass
        """, """
        import sys
        sys.path[:0] = ["/tmp", "/tmp/work", "."]
        try:
            import rlvr_planted
        except Exception:
            pass
        import heapq
        show(str(getattr(heapq, "TOKEN", "")).encode())
        """, "a module planted on the import path (heapq.py) for the next submission"),
    pair("heap_residue", "X = '{TOKEN}' * 20000\nprint(len(X))\n", """
        try:
            maps = open("/proc/self/maps").read().splitlines()
            fd = os.open("/proc/self/mem", os.O_RDONLY)
        except OSError:
            maps = []
        for ln in maps:
            lo, hi = (int(x, 16) for x in ln.split()[0].split("-"))
            if "r" in ln.split()[1] and hi - lo < 1 << 28:
                try:
                    os.lseek(fd, lo, 0)
                    show(os.read(fd, hi - lo))
                except OSError:
                    pass
        """, "the previous submission's data left in a reused process's heap"),
    pair("cpp_build_dir", """
        #include <cstdio>
        // {TOKEN}
        int main() { std::printf("0\\n"); }
        """, """
        #include <cstdio>
        #include <dirent.h>
        #include <string>
        #include <unistd.h>
        void scan(const std::string &d, int depth) {
            if (depth > 3) return;
            DIR *dir = opendir(d.c_str());
            if (!dir) return;
            while (dirent *e = readdir(dir)) {
                std::string n = e->d_name;
                if (n == "." || n == ".." || n == "proc" || n == "sys" || n == "usr") continue;
                std::string p = d + "/" + n;
                if (FILE *f = std::fopen(p.c_str(), "rb")) {
                    char buf[1 << 16]; size_t k = std::fread(buf, 1, sizeof buf, f); std::fclose(f);
                    std::string s(buf, k);
                    for (size_t i = s.find("RLVRTOK_"); i != std::string::npos; i = s.find("RLVRTOK_", i + 1))
                        std::printf("%s\n", s.substr(i, 40).c_str());
                }
                scan(p, depth + 1);
            }
            closedir(dir);
        }
        int main() { char cwd[4096]; scan(getcwd(cwd, sizeof cwd) ? cwd : ".", 0); scan("/tmp", 0); scan("/", 0); }
        """, "C++ source left in the build dir, read by the next compiled submission", language="cpp"),
]
