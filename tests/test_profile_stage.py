"""The training stages depend on the selected profile's values, not on the profiles/ folder (issue 44): the
``profile`` stage resolves the selected chain into data/profile/resolved.json, which changes only when a value of
that chain does."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())


def _resolve():
    spec = importlib.util.spec_from_file_location("profile_stage", ROOT / "stages" / "resolve_profile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.resolve


def test_stages_depend_on_the_resolved_profile_not_the_folder():
    for name, st in DVC["stages"].items():
        st = st.get("do", st)
        deps = [str(d) for d in st.get("deps", [])]
        if name == "profile":
            assert "profiles" in deps and st["outs"] == ["data/profile"]
        else:
            assert "profiles" not in deps, f"{name} depends on the whole profiles/ folder"
    downstream = {n for n, st in DVC["stages"].items() if "data/profile" in st.get("do", st).get("deps", [])}
    assert downstream == {"model", "baseline", "sft", "dpo", "grpo", "repair", "eval", "report"}


def test_only_a_value_of_the_selected_chain_changes_the_resolved_profile(tmp_path):
    resolve = _resolve()
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    params = (ROOT / "params.yaml").read_text()
    assert "\nprofile:\n" in params
    (tmp_path / "params.yaml").write_text(params.replace("\nprofile:\n", "\nprofile: profiles/qwen7b_8xh100.yaml\n", 1))
    first = resolve(tmp_path / "params.yaml")
    assert first["files"] == ["profiles/qwen7b_4xh100.yaml", "profiles/qwen7b_8xh100.yaml"]
    assert first["hardware"]["n_gpus_per_node"] == 8 and first["verl_hardware"]["rollout_tp"] == 1
    base = tmp_path / "profiles" / "qwen7b_4xh100.yaml"
    base.write_text("# a comment edit\n" + base.read_text())
    other = tmp_path / "profiles" / "qwen7b_2xh100.yaml"  # not in the chain
    other.write_text(other.read_text().replace("n_gpus_per_node: 2", "n_gpus_per_node: 1"))
    assert resolve(tmp_path / "params.yaml") == first
    base.write_text(base.read_text().replace("rollout_tp: 1", "rollout_tp: 2"))
    assert resolve(tmp_path / "params.yaml")["verl_hardware"]["rollout_tp"] == 2


@pytest.mark.slow
def test_dvc_reruns_only_the_profile_stage_after_a_comment_edit(tmp_path, monkeypatch):
    """Through DVC itself: a committed pipeline copy (tests/test_dvc_grain.py), its profile stage run for real; a
    comment edit in the selected chain marks only ``profile`` stale, and once it re-ran nothing is."""
    pytest.importorskip("dvc.repo", reason="dvc is not installed")
    import os
    import sys

    from test_dvc_grain import _committed_copy, _stale

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    (tmp_path / "stages").mkdir()
    for f in ("resolve_profile.py", "run.sh"):
        if (ROOT / "stages" / f).is_file():
            shutil.copyfile(ROOT / "stages" / f, tmp_path / "stages" / f)
    repo = _committed_copy(tmp_path)
    repo.reproduce("profile", force=True)
    repo.commit(None, force=True)
    repo.close()
    assert _stale(tmp_path) == set()
    base = tmp_path / "profiles" / "qwen7b_4xh100.yaml"
    base.write_text("# a comment edit\n" + base.read_text())
    assert _stale(tmp_path) == {"profile"}
    from dvc.repo import Repo

    with Repo(str(tmp_path)) as repo:
        repo.reproduce("profile")
    assert _stale(tmp_path) == set()
