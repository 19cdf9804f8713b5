"""The docs site: ``mkdocs build --strict`` (offline) succeeds, every nav page exists, the results tables are generated
from the committed metrics, and the README stays a short page (≤ 10 KB)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from rlvr.io import read_metrics

ROOT = Path(__file__).resolve().parents[1]


def _nav_pages(nav: list) -> list[str]:
    out: list[str] = []
    for item in nav:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for v in item.values():
                out.extend(_nav_pages(v) if isinstance(v, list) else [v])
    return out


def _config() -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # mkdocs' !ENV / !!python tags
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)


def test_readme_is_short() -> None:
    assert (ROOT / "README.md").stat().st_size <= 10_000


def test_every_nav_page_exists() -> None:
    missing = [p for p in _nav_pages(_config()["nav"]) if not (ROOT / "docs" / p).is_file()]
    assert not missing, f"mkdocs.yml nav names pages that do not exist under docs/: {missing}"


def _hook():
    spec = importlib.util.spec_from_file_location("docs_results_hook", ROOT / "docs_hooks" / "results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_results_hook_renders_the_committed_metrics() -> None:
    hook = _hook()
    page = SimpleNamespace(file=SimpleNamespace(src_path="results/x.md"))
    cfg = {"config_file_path": str(ROOT / "mkdocs.yml")}
    out = hook.on_page_markdown("a\n<!-- rlvr:table final-eval -->\nb", page, cfg, None)
    data = read_metrics(ROOT / "metrics/final/eval.json")
    sft = data["phases"]["sft"]["synthetic"]["accepted@1"]
    assert "<!-- rlvr:table" not in out and out.startswith("a\n") and out.endswith("\nb")
    assert f"| sft | {sft:.3f} |" in out


def test_results_hook_refuses_unknown_table_and_missing_file(tmp_path: Path) -> None:
    from mkdocs.exceptions import PluginError

    hook = _hook()
    page = SimpleNamespace(file=SimpleNamespace(src_path="results/x.md"))
    with pytest.raises(PluginError, match="unknown results table 'nope'"):
        hook.on_page_markdown("<!-- rlvr:table nope -->", page, {"config_file_path": str(ROOT / "mkdocs.yml")}, None)
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    with pytest.raises(PluginError, match=r"metrics/final/eval\.json"):
        hook.on_page_markdown("<!-- rlvr:table headline -->", page, {"config_file_path": str(tmp_path / "mkdocs.yml")},
                              None)


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("mkdocs")
    if not exe.exists():
        pytest.fail(f"{exe} not found: install the dev extra (mkdocs, mkdocs-material, mkdocstrings-python)")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "NO_MKDOCS_2_WARNING": "1"}
    site = tmp_path / "site"
    run = subprocess.run([str(exe), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    results = (site / "results" / "index.html").read_text(encoding="utf-8")
    assert "rlvr:table" not in results and "grpo_seed1" in results
    api = (site / "reference" / "eval" / "index.html").read_text(encoding="utf-8")
    assert "run_eval" in api and "evaluate_resumable" in api  # generated from the docstrings
