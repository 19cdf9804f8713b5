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
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("params.yaml: toy.n: "), res.output
    assert "; toy.extra: Extra inputs are not permitted" in lines[0]
    assert "Traceback" not in res.output
    assert not Path("out/metrics.json").exists()


def test_rlvr_debug_shows_the_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlvr.config import ConfigError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLVR_DEBUG", "1")
    Path("params.yaml").write_text("toy: {n: 0, extra: 1}\n")
    res = CliRunner().invoke(toy, [])
    assert isinstance(res.exception, ConfigError) and "toy.extra" in str(res.exception)


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
    assert res.exit_code == 1
    assert "TypeError: stage bad returned dict" in res.output and "RLVR_DEBUG=1" in res.output


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


def test_unknown_key_suggests_the_nearest_valid_one(tmp_path: Path) -> None:
    from pydantic import BaseModel

    from rlvr.config import ConfigError, load_section

    class Inner(Section):
        temperature: float = 1.0

    class Outer(Section):
        batch_size: int = 1
        sampling: Inner = Field(default_factory=Inner)
        free: dict = Field(default_factory=dict)

    assert issubclass(Inner, BaseModel)
    p = tmp_path / "params.yaml"
    p.write_text("s: {batch_sise: 2, sampling: {temprature: 0.5}, zzzz: 1}\n")
    with pytest.raises(ConfigError) as exc:
        load_section("s", Outer, p)
    msg = str(exc.value)
    assert "s.batch_sise: Extra inputs are not permitted (did you mean 'batch_size'?)" in msg
    assert "s.sampling.temprature: Extra inputs are not permitted (did you mean 'temperature'?)" in msg
    assert "s.zzzz: Extra inputs are not permitted;" not in msg and msg.count("did you mean") == 2


def test_misspelt_section_stops_the_stage_before_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("toy: {n: 2}\nbaselin: {n: 1}\n")
    res = CliRunner().invoke(toy, [])
    assert res.exit_code == 1
    assert res.output.strip() == "params.yaml: baselin: unknown params section (did you mean 'baseline'?)"
    assert not Path("out/metrics.json").exists()
