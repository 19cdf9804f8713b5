"""The GPU wheel set is a lock (bench/gpu/wheels.txt, dvc_wheels.txt): pinned versions and hashes, read exactly by
bench/gpu/fetch.py, and no row that is a wheel built locally (an sdist-only package is locked as its sdist)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _fetch():
    spec = importlib.util.spec_from_file_location("fetch", ROOT / "bench/gpu/fetch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("lock", ["wheels.txt", "dvc_wheels.txt"])
def test_locks_are_exact(lock):
    rows = _fetch().read_lock(ROOT / "bench/gpu" / lock)
    assert rows
    names = [n for n, *_ in rows]
    assert len(names) == len(set(names))  # one version per package: two stop the offline install
    for name, version, sha, file in rows:
        assert len(sha) == 64 and all(c in "0123456789abcdef" for c in sha), name
        assert version in file and (file.endswith(".whl") or file.endswith(".tar.gz")), name
    assert ("antlr4-python3-runtime", "4.9.3") in {(n, v) for n, v, *_ in rows} or lock != "wheels.txt"
    antlr = [f for n, _, _, f in rows if n == "antlr4-python3-runtime"]
    assert all(f.endswith(".tar.gz") for f in antlr)  # published only as an sdist: never a locally built wheel


def test_a_malformed_lock_row_names_the_line(tmp_path):
    bad = tmp_path / "w.txt"
    bad.write_text("# header\nname 1.0 abc\n")
    with pytest.raises(SystemExit, match=r"w\.txt:2: expected 'name version sha256 filename'"):
        _fetch().read_lock(bad)
