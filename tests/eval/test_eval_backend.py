"""``enforce_eager`` (rlvr.eval.backend): reaches ``vllm.LLM`` from every section that builds a vLLM engine (baseline
and the stage evals, repair, the final eval) and is an error with a backend that would ignore it."""

from __future__ import annotations

import sys
import types

import pytest

from rlvr.eval.baseline import BaselineParams, DatasetSelection, make_baseline_generator
from rlvr.eval.final_params import EvalParams, make_phase_generator
from rlvr.repair.eval import RepairParams, make_repair_generator


class _LLM:
    kwargs: dict = {}

    def __init__(self, **kwargs):
        type(self).kwargs = kwargs


@pytest.fixture
def fake_vllm(monkeypatch):
    fake = types.ModuleType("vllm")
    fake.LLM = _LLM
    monkeypatch.setitem(sys.modules, "vllm", fake)
    _LLM.kwargs = {}
    return _LLM


def _sel():
    return [DatasetSelection(name="humaneval")]


@pytest.mark.parametrize("eager", [True, False])
def test_enforce_eager_reaches_the_engine(fake_vllm, eager):
    make_baseline_generator(BaselineParams(datasets=_sel(), backend="vllm", model="m", enforce_eager=eager))
    assert fake_vllm.kwargs.get("enforce_eager", False) is eager
    make_phase_generator(EvalParams(datasets=[{"name": "humaneval"}], backend="vllm", enforce_eager=eager), "m")
    assert fake_vllm.kwargs.get("enforce_eager", False) is eager and fake_vllm.kwargs["model"] == "m"
    make_repair_generator(RepairParams(datasets=_sel(), backend="vllm", model="m", enforce_eager=eager))
    assert fake_vllm.kwargs.get("enforce_eager", False) is eager


def test_enforce_eager_with_another_backend_is_an_error():
    with pytest.raises(ValueError, match="enforce_eager is a vllm setting; backend 'hf'"):
        BaselineParams(datasets=_sel(), backend="hf", enforce_eager=True)
    with pytest.raises(ValueError, match="eval.enforce_eager is a vllm setting; backend 'hf'"):
        EvalParams(datasets=[{"name": "humaneval"}], enforce_eager=True)
    with pytest.raises(ValueError, match="repair.enforce_eager is a vllm setting; backend 'hf'"):
        RepairParams(datasets=_sel(), backend="hf", enforce_eager=True)
