"""rlvr.stage: the shared stage command (``--params``, write the Result atomically, echo, fail on error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import Field

from rlvr.config import Section
from rlvr.stage import Params, Result, closed_after, option, stage


class ToyParams(Section):
    n: int = Field(1, ge=1)


@stage(option("--out", default="out/metrics.json", path=True), option("--fail", is_flag=True))
def toy(params: Params, out: Path, fail: bool) -> Result:
    """A toy stage."""
    cfg = params.section("toy", ToyParams)
    return Result(json={out: {"n": cfg.n}}, resolved={out.parent: cfg}, echo=f"toy: n={cfg.n}",
                  error="toy failed" if fail else None)


def test_stage_reads_params_writes_and_echoes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("toy: {n: 3}\n")
    res = CliRunner().invoke(toy, [])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == "toy: n=3"
    assert json.loads(Path("out/metrics.json").read_text()) == {"n": 3}
    # the resolved params beside the output, and no temp file of the atomic writes left behind
    assert sorted(p.name for p in Path("out").iterdir()) == ["metrics.json", "params.resolved.json"]


def test_error_result_writes_then_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("toy: {n: 2}\n")
    res = CliRunner().invoke(toy, ["--fail"])
    assert res.exit_code == 1
    assert "toy failed" in res.output
    assert json.loads(Path("out/metrics.json").read_text()) == {"n": 2}


def test_bad_section_is_a_config_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("toy: {n: 0, extra: 1}\n")
    res = CliRunner().invoke(toy, [])
    assert res.exit_code != 0
    assert "toy" in str(res.exception)
    assert not Path("out/metrics.json").exists()


def test_help_and_missing_params_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(toy, ["--help"])
    assert res.exit_code == 0 and "A toy stage." in res.output and "--params" in res.output
    assert "out/metrics.json" in res.output  # defaults are shown
    res = CliRunner().invoke(toy, [])
    assert res.exit_code == 2 and "params.yaml" in res.output


def test_non_result_return_is_a_type_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("{}\n")

    @stage()
    def bad(params: Params) -> Result:
        return {"not": "a result"}  # type: ignore[return-value]

    res = CliRunner().invoke(bad, [])
    assert isinstance(res.exception, TypeError)


def test_closed_after_closes_and_ignores_close_errors() -> None:
    class R:
        closed = 0

        def close(self) -> None:
            self.closed += 1
            raise RuntimeError("close failed")

    r = R()
    with pytest.raises(ValueError, match="work"):
        with closed_after(r):
            raise ValueError("work")  # the stage's own error wins
    assert r.closed == 1
    with closed_after(object()) as o:  # nothing to close
        assert o is not None
