"""``enforce_eager`` (rlvr.eval.backend): reaches ``vllm.LLM`` from every section that builds a vLLM engine (baseline
and the stage evals, repair, the final eval, DPO mining) and is an error with a backend that would ignore it."""

from __future__ import annotations

import re
import sys
import types
from typing import ClassVar

import pytest

from rlvr.eval.baseline import BaselineParams, DatasetSelection, make_baseline_generator
from rlvr.eval.final_params import EvalParams, make_phase_generator
from rlvr.generate import SamplingParams
from rlvr.repair.eval import RepairParams, make_repair_generator
from rlvr.train.local.dpo_mine import DPOMining, generate_texts


class _LLM:
    kwargs: ClassVar[dict] = {}

    def __init__(self, **kwargs):
        type(self).kwargs = kwargs


@pytest.fixture
def fake_vllm(monkeypatch):
    fake = types.ModuleType("vllm")
    fake.LLM = _LLM
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    # the backend sets VLLM_WORKER_MULTIPROC_METHOD; registered here so the test's teardown removes it again
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "x")
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD")
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
    fake_vllm.kwargs = {}
    mining = DPOMining(backend="vllm", process="child", tensor_parallel_size=2, enforce_eager=eager)
    assert generate_texts("m", [], 2, SamplingParams(), mining) == []
    assert fake_vllm.kwargs.get("enforce_eager", False) is eager and fake_vllm.kwargs["tensor_parallel_size"] == 2


def test_enforce_eager_with_another_backend_is_an_error():
    with pytest.raises(ValueError, match=re.escape("enforce_eager is a vllm setting; backend 'hf'")):
        BaselineParams(datasets=_sel(), backend="hf", enforce_eager=True)
    with pytest.raises(ValueError, match=re.escape("eval.enforce_eager is a vllm setting; backend 'hf'")):
        EvalParams(datasets=[{"name": "humaneval"}], enforce_eager=True)
    with pytest.raises(ValueError, match=re.escape("repair.enforce_eager is a vllm setting; backend 'hf'")):
        RepairParams(datasets=_sel(), backend="hf", enforce_eager=True)
    with pytest.raises(ValueError, match=re.escape("dpo.mining.enforce_eager is a vllm setting; backend 'hf'")):
        DPOMining(enforce_eager=True)
