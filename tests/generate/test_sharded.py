"""Data-parallel generation (issue 44): engines in child processes, one per GPU group, prompts sharded round-robin
and put back in input order. On CPU with the ``samples`` backend standing in for vLLM."""

from __future__ import annotations

import functools
import json

import pytest

from rlvr.generate import SamplingParams, make_generator
from rlvr.generate.sharded import ShardedGenerator, device_groups, replicas_for, visible_gpus


def test_replicas_and_device_groups():
    gpus = ["0", "1", "2", "3"]
    assert replicas_for("auto", 1, gpus) == 4 and replicas_for("auto", 2, gpus) == 2
    assert replicas_for("auto", 1, []) == 1 and replicas_for(1, 4, []) == 1
    assert device_groups(gpus, 4, 1) == ["0", "1", "2", "3"] and device_groups(gpus, 2, 2) == ["0,1", "2,3"]
    with pytest.raises(ValueError, match="needs 8 GPUs; 4 visible"):
        replicas_for(4, 2, gpus)
    with pytest.raises(ValueError, match="data_parallel"):
        replicas_for("all", 1, gpus)
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,5"}) == ["2", "5"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


@pytest.mark.slow
def test_the_prompts_are_sharded_over_every_replica_and_come_back_in_order(tmp_path):
    path = tmp_path / "samples.jsonl"
    ids = [f"t/{i}" for i in range(7)]
    path.write_text("".join(json.dumps({"task_id": t, "solution": f"print({t[2:]})"}) + "\n" for t in ids))
    with ShardedGenerator(functools.partial(make_generator, "samples"), 3, gpus=["0", "1", "2"], path=str(path)) as gen:
        assert gen.seen_devices == ["0", "1", "2"]  # each child pinned to its own GPU
        out = gen.generate(["p"] * 7, 1, SamplingParams(), ids=ids)
        assert [c[0].text for c in out] == [f"print({i})" for i in range(7)]
        assert gen.stats.n_prompts == 7 and gen.model_id == "samples:samples.jsonl"
        with pytest.raises(RuntimeError, match=r"replica \d \(CUDA_VISIBLE_DEVICES=\d\) failed to generate"):
            gen.generate(["p"], 2, SamplingParams(), ids=["t/0"])  # only one sample recorded
        assert [c[0].text for c in gen.generate(["p", "p"], 1, SamplingParams(), ids=ids[:2])] == ["print(0)",
                                                                                                  "print(1)"]


def test_make_generator_shards_vllm_over_every_visible_gpu(monkeypatch):
    import rlvr.generate.sharded as sh

    made = []
    monkeypatch.setattr(sh, "ShardedGenerator", lambda factory, replicas, tp, gpus, **kw: made.append(
        (factory.args, replicas, tp, gpus, kw)) or "sharded")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert make_generator("vllm", model="m", tensor_parallel_size=1, data_parallel="auto") == "sharded"
    assert make_generator("vllm", model="m", tensor_parallel_size=2, data_parallel="auto") == "sharded"
    assert [(m[0], m[1], m[2]) for m in made] == [(("vllm",), 4, 1), (("vllm",), 2, 2)]
    assert made[0][4] == {"pass_tp": True, "model": "m"}
