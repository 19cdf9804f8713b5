"""params.yaml survives ``dvc exp run -S``: DVC rewrites the file through ruamel (``dvc.utils.hydra.apply_overrides``,
the code path of ``exp run --set-param``) and replaces whole lists, so only a block-style file without comments in or
right after lists keeps its comments. These tests apply DVC's own function to a temp copy."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest

hydra = pytest.importorskip("dvc.utils.hydra", reason="dvc (with hydra) is not installed")

ROOT = Path(__file__).resolve().parents[1]


def _set(tmp_path: Path, *overrides: str) -> tuple[str, str]:
    path = tmp_path / "params.yaml"
    shutil.copyfile(ROOT / "params.yaml", path)
    before = path.read_text(encoding="utf-8")
    hydra.apply_overrides(path, list(overrides))
    return before, path.read_text(encoding="utf-8")


def _changed(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_noop_override_rewrites_params_byte_identical(tmp_path: Path) -> None:
    before, after = _set(tmp_path, "report.seed=0")
    assert after == before, "\n".join(_changed(before, after))


@pytest.mark.parametrize(("override", "expected"), [
    ("reward=sparse", ["-reward: dense", "+reward: sparse"]),
    ("seeds=[1,2,3]", ["+- 3"]),
    ("sft.epochs=3", ["-  epochs: 80", "+  epochs: 3"]),
    ("repair.train.max_steps=5", ["-    max_steps: 20", "+    max_steps: 5"]),
])
def test_override_changes_only_its_line_and_keeps_every_comment(tmp_path: Path, override: str,
                                                                 expected: list[str]) -> None:
    before, after = _set(tmp_path, override)
    assert _changed(before, after) == expected
    comments = [line.partition("#")[2] for line in before.splitlines() if "#" in line]
    assert [line.partition("#")[2] for line in after.splitlines() if "#" in line] == comments
