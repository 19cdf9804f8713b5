"""Build the sandbox's compiled runner code next to the code bwrap binds at ``/judge``: the per-test loop
(``inside/forkloop.c``) and the end-of-submission wipe (``inside/wipe.c``), one library.

The runner runs stdin/stdout tests through this loop when the sandbox loads it (``inside/forkloop.py``;
docs/judge/suite.md says what it saves: the runner's Python bookkeeping between two ``fork()``\\s, paid in
copy-on-write faults), and ends each submission with the compiled wipe (``inside/wipe.py``); without the library the
same tests run through the Python loop (``proc.spawn`` + ``proc.collect``) and the Python wipe, with the same
semantics. It is built on first use by the host with the system C compiler (``$CC``, else ``cc``, ``gcc``) into
``inside/_forkloop.so`` — atomically (temp file + rename), rebuilt when a source changes (the library carries the
SHA-256 of the sources it was built from). ``RLVR_FORKLOOP=0`` turns it off. The file is ignored by git and DVC: the
pipeline's stages depend on the sources, not on a build of them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from rlvr.config import RuntimeSettings

__all__ = ["LIBRARY", "SOURCES", "ensure_built", "forkloop_enabled"]

log = logging.getLogger(__name__)
INSIDE = Path(__file__).with_name("inside")
SOURCES = (INSIDE / "forkloop.c", INSIDE / "wipe.c")
LIBRARY = INSIDE / "_forkloop.so"
COMPILE_TIMEOUT_S = 120.0
_lock = threading.Lock()
_built: dict[str, bool] = {}


def forkloop_enabled() -> bool:
    """Whether sandboxes should load the compiled loop (``RLVR_FORKLOOP``, default on)."""
    return RuntimeSettings().forkloop


def _compiler() -> str | None:
    for name in (os.environ.get("CC", ""), "cc", "gcc"):
        if name and (path := shutil.which(name)):
            return path
    return None


def _source_sha() -> str:
    h = hashlib.sha256()
    for src in SOURCES:
        data = src.read_bytes()
        h.update(b"%s %d\n" % (src.name.encode(), len(data)) + data)
    return h.hexdigest()


def ensure_built() -> bool:
    """Make sure ``inside/_forkloop.so`` is built from the current :data:`SOURCES`; returns whether it is.

    Never raises: with no C compiler, a read-only package dir or a failed compile it logs one warning naming the
    cause and returns False (sandboxes then run the Python loop). Compiles at most once per process and source."""
    sha = _source_sha()
    with _lock:
        if sha in _built:
            return _built[sha]
        ok = _build(sha)
        _built[sha] = ok
        return ok


def _build(sha: str) -> bool:
    try:
        if LIBRARY.is_file() and sha.encode() in LIBRARY.read_bytes():
            return True
    except OSError:
        pass
    cc = _compiler()
    if cc is None:
        log.warning("no C compiler (cc/gcc, or $CC): the judge runs stdio tests through its Python loop, which costs "
                    "more CPU per test (docs/judge/suite.md); install gcc to build %s", LIBRARY.name)
        return False
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix="._forkloop-", suffix=".so", dir=LIBRARY.parent)
        os.close(fd)
        done = subprocess.run(
            [cc, "-O2", "-Wall", "-shared", "-fPIC", f'-DFL_SOURCE_SHA="{sha}"', "-o", tmp, *map(str, SOURCES)],
            capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False,
        )
        if done.returncode != 0:
            log.warning("building %s failed (%s exit %d): %s; the judge runs its Python loop", LIBRARY.name, cc,
                        done.returncode, (done.stderr or done.stdout).strip()[-2000:])
            return False
        os.chmod(tmp, 0o644)  # read by the sandbox's own uid
        os.replace(tmp, LIBRARY)
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("building %s failed: %s; the judge runs its Python loop", LIBRARY.name, exc)
        return False
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
