"""DVC's grain follows the ``seeds`` param: no seed is listed by hand in dvc.yaml, so changing ``seeds`` marks the
final ``eval`` and the ``report`` stale (issue 29). The pipeline is committed in a temp copy (``dvc init --no-scm``,
every dep and out a placeholder, ``dvc commit``, so nothing runs), ``seeds`` is changed through DVC's own
``exp run -S`` code path, and ``dvc status`` is asked which stages changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("dvc.repo", reason="dvc is not installed")

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _placeholder(path: Path) -> None:
    """A file for paths with a suffix (``stages/eval.py``, ``metrics/sft.json``), else a folder holding one file."""
    if path.exists():
        return
    if path.suffix:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{path.name}\n")
    else:
        path.mkdir(parents=True)
        (path / "placeholder").write_text(f"{path.name}\n")


def _committed_copy(tmp_path: Path):
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    shutil.copyfile(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    shutil.copyfile(ROOT / "params.yaml", tmp_path / "params.yaml")
    repo = Repo.init(str(tmp_path), no_scm=True)
    for stage in repo.index.stages:  # outs first, so that a folder dep (models/grpo, metrics) holds them
        for out in stage.outs:
            _placeholder(tmp_path / out.def_path)
    for stage in repo.index.stages:
        for dep in stage.deps:
            if not isinstance(dep, ParamsDependency):
                _placeholder(tmp_path / dep.def_path)
    repo.commit(None, force=True)
    return repo


def _stale(tmp_path: Path) -> set[str]:
    from dvc.repo import Repo

    with Repo(str(tmp_path)) as repo:
        return set(repo.status())


@pytest.mark.parametrize(("seeds", "new_grpo"), [("[1]", set()), ("[1,2,3]", {"grpo@3"})])
def test_changing_seeds_marks_eval_and_report_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seeds: str,
                                                    new_grpo: set[str]) -> None:
    from dvc.utils.hydra import apply_overrides

    monkeypatch.chdir(tmp_path)  # DVC resolves stage paths against the working directory
    repo = _committed_copy(tmp_path)
    repo.close()
    assert _stale(tmp_path) == set()
    apply_overrides(tmp_path / "params.yaml", [f"seeds={seeds}"])
    assert _stale(tmp_path) == {"eval", "report"} | new_grpo
