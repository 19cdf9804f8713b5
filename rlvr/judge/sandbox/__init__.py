"""Bubblewrap sandboxes: a warm sandbox per worker whose PID 1 (the warden) never sees submission data, a fresh runner
and fresh pipes per submission, a cgroup over the whole sandbox, a seccomp filter, and a separate driver sandbox for
assert tests. Host side: :mod:`.host` (lifecycle), :mod:`.session` (channels), :mod:`.bwrap` (command line),
:mod:`.cgroups`, :mod:`.procs`; inside the sandbox (standard library only, bound read-only at ``/judge``):
``inside/warden.py``, ``zygote.py``, ``runner.py``, ``proc.py``, ``calls.py``, ``callserver.py``, ``driver.py``,
``wire.py``, ``wipe.py``, ``seccomp.py``. Design and limits: ``docs/judge/threat-model.md``.
"""

from rlvr.judge.sandbox.bwrap import SandboxError, bwrap_path, sandbox_python
from rlvr.judge.sandbox.host import Sandbox
from rlvr.judge.sandbox.procs import enable_child_subreaper
from rlvr.judge.sandbox.session import Session, SessionTimeout

__all__ = [
    "Sandbox",
    "SandboxError",
    "Session",
    "SessionTimeout",
    "bwrap_path",
    "enable_child_subreaper",
    "sandbox_python",
]
