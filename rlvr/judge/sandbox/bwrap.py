"""The bubblewrap command line of a sandbox (bubblewrap 0.8 flags; see ``bwrap --help``).

* ``--unshare-all`` (+ ``--unshare-user``, ``--disable-userns``): own network (loopback only), pid, ipc, uts and user
  namespaces; no nesting.
* ``--as-pid-1``: the warden is PID 1 of the pid namespace, so no process of the sandbox can signal it.
* read-only everything but three places: only ``/usr`` (+ the interpreter's prefix, the toolchains' extra paths) is
  bound, read-only; the root and bwrap's minimal ``/dev`` are remounted read-only (``--remount-ro``); ``/tmp`` and
  ``/dev/shm`` are private size-capped tmpfs and ``/dev/mqueue`` its own mqueue mount, all wiped by the warden after
  every submission; the judge's in-sandbox code is bound read-only at ``/judge``.
* ``RLVR_SANDBOX_SITE`` (:func:`sandbox_site`): extra folders of Python packages (e.g. ``sortedcontainers`` unpacked
  from its .deb on an offline GPU node whose interpreter lacks it), each bound read-only at its own path and put on
  the sandbox's ``PYTHONPATH``.
* uid/gid 65534 inside; ``--die-with-parent``, ``--new-session``, ``--cap-drop ALL``; ``--clearenv`` plus a fixed
  small environment — and bwrap itself is started with an empty environment (:mod:`rlvr.judge.sandbox.host`), so no
  process of the sandbox, PID 1 included, carries a host variable.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from rlvr.config import RuntimeSettings
from rlvr.judge.languages import LANGUAGES

__all__ = ["INSIDE", "LITERAL", "LITERAL_SCAN", "SandboxError", "argv", "bwrap_path", "sandbox_python",
           "sandbox_site"]

INSIDE = Path(__file__).with_name("inside")
LITERAL = Path(__file__).parent.parent / "literal.py"
LITERAL_SCAN = LITERAL.with_name("literal_scan.py")  # literal.py's scanner, imported there as a top-level module
SANDBOX_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONHASHSEED": "0"}


class SandboxError(RuntimeError):
    """The sandbox itself failed (bubblewrap missing, cannot start, no answer from a fresh warden): infrastructure,
    never the program's fault; the judge reports it as verdict ``sandbox_error``."""


def bwrap_path() -> str:
    """Path of the bubblewrap binary (``RLVR_BWRAP`` or ``bwrap`` on PATH).

    Raises :class:`SandboxError` with install instructions when it is missing."""
    configured = RuntimeSettings().bwrap
    path = configured or shutil.which("bwrap")
    if not path or not os.access(path, os.X_OK):
        raise SandboxError(
            "bubblewrap (bwrap) not found: install it (Debian/Ubuntu: `apt-get install bubblewrap`; `make` does this "
            "when run as root) or set RLVR_BWRAP to its path"
        )
    return path


def sandbox_python() -> str:
    """Interpreter run inside the sandbox: ``RLVR_SANDBOX_PYTHON``, else ``/usr/bin/python3`` when running as root
    (the dropped uid cannot read root's home), else the real path of the current interpreter."""
    env = os.environ.get("RLVR_SANDBOX_PYTHON")
    if env:
        return env
    if os.geteuid() == 0 and os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3"
    return os.path.realpath(sys.executable)


def sandbox_site() -> list[str]:
    """The absolute folders named in ``RLVR_SANDBOX_SITE`` (``os.pathsep``-separated; empty entries skipped), in order:
    the sandbox binds each read-only and puts them on its ``PYTHONPATH`` (before the interpreter's own site-packages,
    after the script's folder). Raises :class:`SandboxError` naming the entry when one is not an existing absolute
    folder, or lies under ``/tmp``, ``/dev`` or ``/proc`` (the sandbox's own mounts would hide it); a typo there
    would otherwise surface as ``runtime_error`` verdicts. The uid 65534 of the sandbox must be able to read it (not
    under a mode-700 ``/root``)."""
    out = []
    for entry in RuntimeSettings().sandbox_site.split(os.pathsep):
        if not entry.strip():
            continue
        if not os.path.isabs(entry) or not os.path.isdir(entry):
            raise SandboxError(f"RLVR_SANDBOX_SITE: {entry!r} is not an existing absolute folder")
        path = os.path.normpath(entry)
        if any(path == top or path.startswith(top + "/") for top in ("/tmp", "/dev", "/proc")):
            raise SandboxError(f"RLVR_SANDBOX_SITE: {entry!r} is under /tmp, /dev or /proc, which the sandbox "
                               "replaces with its own mounts: use another folder (e.g. /opt/rlvr-sandbox-site)")
        out.append(path)
    return out


def argv(ctl_fd: int, tmp_mb: int, forkloop: bool = False, preload: bool = False) -> list[str]:
    """bwrap argv running the warden with its control socket at ``ctl_fd``; ``tmp_mb``: /tmp tmpfs cap, MB;
    ``forkloop``: the warden loads the compiled per-test loop (:mod:`rlvr.judge.sandbox.forkloop`, built first);
    ``preload``: the warden imports the modules programs commonly import (``inside/runner.py``'s ``PRELOAD``) at its
    start and starts no zygote, for a sandbox whose runner forks no test child (the driver's); otherwise they are in
    the image of the warden's zygote only, from which the runners of heavy submissions are cloned."""
    python = sandbox_python()
    out = [bwrap_path(), "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
           "--as-pid-1", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(top):
            out += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            out += ["--ro-bind", top, top]
    prefix = str(Path(os.path.realpath(python)).parent.parent)
    if not prefix.startswith("/usr"):
        out += ["--ro-bind", prefix, prefix]
    site = sandbox_site()
    out += [a for d in site if not d.startswith("/usr/") for a in ("--ro-bind", d, d)]
    out += ["--ro-bind", str(INSIDE), "/judge/inside", "--ro-bind", str(LITERAL), "/judge/literal.py",
            "--ro-bind", str(LITERAL_SCAN), "/judge/literal_scan.py"]
    # Debian resolves shared libraries (BLAS for numpy) and toolchains through /etc/alternatives symlinks
    binds = {"/etc/alternatives", "/etc/ld.so.cache"} | {b for lang in LANGUAGES.values() for b in lang.extra_binds}
    for extra in sorted(binds):
        if os.path.exists(extra):
            out += ["--ro-bind", extra, extra]
    out += ["--proc", "/proc", "--dev", "/dev", "--mqueue", "/dev/mqueue", "--size", str(tmp_mb << 20), "--tmpfs",
            "/tmp", "--size", str(tmp_mb << 20), "--tmpfs", "/dev/shm"]
    # bwrap builds the root and /dev as tmpfs owned by the sandbox's uid: read-only once every mount point exists, so
    # the only writable places are /tmp, /dev/shm and /dev/mqueue (which the warden wipes) and nothing can be
    # planted next to the judge's own code or on its import path
    out += ["--remount-ro", "/dev", "--remount-ro", "/"]
    out += ["--uid", "65534", "--gid", "65534", "--hostname", "sandbox", "--chdir", "/tmp", "--clearenv"]
    for k, v in {**SANDBOX_ENV, **({"PYTHONPATH": os.pathsep.join(site)} if site else {})}.items():
        out += ["--setenv", k, v]
    # not -I: it implies -E, which would drop PYTHONHASHSEED=0 and make set/dict-of-str orders differ between
    # sandboxes (an expected value computed on one worker, compared on another); the environment is the fixed one
    # above, so -E protects nothing here. -s: no user site; the script's own dir (/judge/inside) is read-only.
    out += [python, "-s", "-B", "/judge/inside/warden.py", str(ctl_fd)]
    return out + ["--forkloop"] * forkloop + ["--preload"] * preload
