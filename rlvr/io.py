"""Atomic, crash-safe file writing: outputs appear complete or not at all (temp file + ``os.replace``); the
reading counterparts for logs that other processes append to (:func:`read_appended_jsonl`) and for one-object JSON
files (:func:`read_json_object`). Which file a stage's figures go to is :mod:`rlvr.layout`.

DVC caches whatever a stage leaves behind; writing through these helpers guarantees it never caches a half-written
file. Directories are published by building them beside the target and renaming.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_dir",
    "atomic_open",
    "atomic_write_json",
    "atomic_write_jsonl",
    "atomic_write_text",
    "read_appended_jsonl",
    "read_json_object",
]


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temp file next to ``path``; on clean exit fsync and rename it onto ``path``, on error delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; published files get normal permissions
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path) as fh:
        fh.write(text)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON to ``path`` atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def atomic_write_jsonl(path: str | Path, rows: Iterable[Any]) -> int:
    """Write one JSON object per line to ``path`` atomically; returns the number of rows."""
    n = 0
    with atomic_open(path) as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_appended_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` of each non-blank line of a JSONL log that a process appends to (verl's file
    logger and rollout dumps, the judge log). The last line of a killed writer may be torn: a last line that is not
    JSON is skipped. Lines end at a newline (U+000A) only (JSON Lines, https://jsonlines.org): a record written with
    ``ensure_ascii=False`` keeps U+2028, U+2029 and U+0085 raw inside its strings, where
    ``str.splitlines`` would cut it (seen: a random-init policy's rollout on the H100).

    Raises ``ValueError`` naming the file and line for any other line that is not JSON."""
    p = Path(path)
    lines = p.read_text(encoding="utf-8").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines):
                return
            raise ValueError(f"{p}:{lineno}: not JSON: {exc}") from exc


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a fresh temp directory beside ``path``; on success replace ``path`` with it, on error remove it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    tmp.chmod(0o755)  # mkdtemp makes 0700; published folders get normal permissions
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

def read_json_object(path: str | Path) -> dict[str, Any]:
    """A JSON file holding one object. Raises ``ValueError`` naming the file (line, column) when it is not valid JSON
    or not an object."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected a JSON object, got {type(data).__name__}")
    return data
