"""verl adapter: compute_score contract, and a run through verl 0.9.1's own reward managers (naive, rate_limited)
loaded from a Hydra-style config exactly as verl's trainer does (``load_reward_manager``)."""

from __future__ import annotations

import asyncio
import inspect
import math
import shutil
import time

import pytest
from reward_fixtures import HUMANEVAL_0, MBPP_2, STDIO_SUM, FakeJudge, fenced

from rlvr.data.schema import ground_truth
from rlvr.reward import verl as rverl
from rlvr.reward.scorer import set_default_judge

KEYS = {"score", "acc", "pass_ratio", "status", "n_tests", "judge_s", "has_code", "timed_out", "valid", "tool_reward",
        "tool_parse_failures", "tool_sandbox_errors"}
GT = ground_truth(STDIO_SUM)


@pytest.fixture
def fake_judge():
    j = FakeJudge()
    prev = set_default_judge(j)
    yield j
    set_default_judge(prev)


def test_compute_score_contract(fake_judge):
    r = rverl.compute_score("stdio200", fenced("print(6)"), GT, extra_info={"index": 0}, reward_mode="sparse")
    assert set(r) == KEYS
    assert (r["score"], r["acc"], r["status"], r["n_tests"]) == (1.0, True, "accepted", 3)
    r = rverl.compute_score("stdio200", fenced("#HALF"), GT, reward_mode="dense")
    assert r["score"] == pytest.approx(1 / 3) and r["acc"] is False and r["status"] == "wrong_answer"
    r = rverl.compute_score(
        "stdio200", "I cannot solve this.", GT, reward_mode="shaped", reward_shaping={"no_code_penalty": 0.25}
    )
    assert r["score"] == -0.25 and r["has_code"] is False and set(r) == KEYS
    r = rverl.compute_score("stdio200", fenced("#SANDBOX"), GT)
    assert r["score"] == 0.0 and r["valid"] is False and r["status"] == "sandbox_error"


def test_compute_score_scores_an_excluded_sandbox_error_nan_only_when_asked(fake_judge):
    """``mask_excluded`` (set with the rlvr_grpo estimator, tests/train/test_verl_advantage.py): NaN = no reward."""
    gt = GT
    r = rverl.compute_score("s", fenced("#SANDBOX"), gt, reward_mode="sparse", mask_excluded=True,
                            reward_shaping={"sandbox_error": "exclude"})
    assert math.isnan(r["score"]) and r["valid"] is False and r["status"] == "sandbox_error"
    r = rverl.compute_score("s", fenced("#SANDBOX"), gt, reward_mode="sparse",
                            reward_shaping={"sandbox_error": "exclude"})
    assert r["score"] == 0.0  # without the estimator's flag: the old float
    r = rverl.compute_score("s", fenced("#SANDBOX"), gt, reward_mode="sparse", mask_excluded=True,
                            reward_shaping={"sandbox_error": "zero"})
    assert r["score"] == 0.0  # `zero` policy: trained on as 0, never NaN
    r = rverl.compute_score("s", fenced("print(6)"), gt, reward_mode="sparse", mask_excluded=True)
    assert r["score"] == 1.0


def test_compute_score_async_matches_sync(fake_judge):
    assert inspect.iscoroutinefunction(rverl.compute_score_async)

    async def main():
        return await asyncio.gather(
            *(rverl.compute_score_async("s", fenced(c), GT, reward_mode="dense") for c in ("print(6)", "#WA", "#HALF"))
        )

    out = asyncio.run(main())
    assert [o["score"] for o in out] == pytest.approx([1.0, 0.0, 1 / 3])
    assert out[0] == {
        **rverl.compute_score("s", fenced("print(6)"), GT, reward_mode="dense"),
        "judge_s": out[0]["judge_s"],
    }


def test_bad_inputs(fake_judge):
    with pytest.raises(ValueError, match="ground_truth"):
        rverl.compute_score("apps", "x", '{"input": ["1"], "output": ["1"]}')  # neither rlvr's nor verl's layout
    with pytest.raises(ValueError):
        rverl.compute_score("s", "x", GT, reward_mode="partial")


def test_import_starts_nothing():
    import subprocess
    import sys

    code = (
        "import rlvr.reward.verl, rlvr.reward.trl, rlvr.reward.scorer as s, sys; "
        "import os; pid = os.getpid(); "
        "kids = open(f'/proc/{pid}/task/{pid}/children').read().split(); "
        "assert s._default_judge is None and not kids, kids; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_compute_score_real_judge(judge):
    prev = set_default_judge(judge)
    try:
        for p in (STDIO_SUM, HUMANEVAL_0, MBPP_2):
            ok = rverl.compute_score(p.source, fenced(p.solutions[0]), ground_truth(p), reward_mode="sparse")
            assert ok["score"] == 1.0 and ok["acc"] and ok["n_tests"] == len(p.tests), (p.id, ok)
        bad = rverl.compute_score("stdio200", fenced("print(6)"), GT, reward_mode="dense")
        assert bad["status"] == "wrong_answer" and bad["score"] == pytest.approx(1 / 3)
        syn = rverl.compute_score("stdio200", fenced("print(6"), GT, reward_mode="shaped")
        assert syn["status"] == "syntax_error" and syn["score"] == -0.5 and syn["has_code"]
    finally:
        set_default_judge(prev)


# ----------------------------------------------------------------------------- through verl's reward managers
def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        ["```python\nprint(6)\n```", "Sum the numbers"] * 10,
        trainers.BpeTrainer(
            vocab_size=280, special_tokens=["<pad>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")


def _batch(tok, responses: list[str], gt: str, prompt_len: int = 8, resp_len: int = 48):
    """A DataProto shaped like verl's rollout output: left-padded prompts, right-padded responses."""
    import numpy as np
    import torch
    from verl import DataProto

    n = len(responses)
    prompts = torch.full((n, prompt_len), tok.pad_token_id)
    resps = torch.full((n, resp_len), tok.pad_token_id)
    mask = torch.zeros((n, prompt_len + resp_len), dtype=torch.long)
    for i, r in enumerate(responses):
        p_ids = tok.encode("Sum the numbers")[-prompt_len:]
        r_ids = [*tok.encode(r), tok.eos_token_id][:resp_len]
        prompts[i, prompt_len - len(p_ids) :] = torch.tensor(p_ids)
        resps[i, : len(r_ids)] = torch.tensor(r_ids)
        mask[i, prompt_len - len(p_ids) : prompt_len + len(r_ids)] = 1
    return DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": resps,
            "attention_mask": mask,
            "input_ids": torch.cat([prompts, resps], dim=1),
        },
        non_tensors={
            "data_source": np.array(["stdio200"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": gt, "style": "rule"}] * n, dtype=object),
            "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
        },
    ), [len(tok.encode(r)) + 1 for r in responses]


def _config(manager: str, fn_name: str, legacy: bool):
    from omegaconf import OmegaConf

    fn = {"path": "pkg://rlvr.reward.verl", "name": fn_name, "reward_kwargs": {"reward_mode": "sparse"}}
    cfg = {
        "reward": {
            "reward_manager": {"source": "register", "name": manager, "module": {"path": None}},
            "max_concurrent": 8,
            "timeout": 120.0,
        }
    }
    if legacy:  # pre-0.7.1 top-level key, moved by verl's own migration
        cfg["custom_reward_function"] = fn
        cfg["reward"]["custom_reward_function"] = {"path": None, "name": "compute_score"}
    else:
        cfg["reward"]["custom_reward_function"] = fn
    cfg = OmegaConf.create(cfg)
    if legacy:
        cfg.reward.custom_reward_function = cfg.custom_reward_function
    return cfg


@pytest.mark.parametrize(
    ("manager", "fn_name", "legacy"),
    [
        ("naive", "compute_score", False),
        ("naive", "compute_score_async", False),
        ("rate_limited", "compute_score_async", False),
        ("rate_limited", "compute_score", True),
    ],
)
def test_through_verl_reward_manager(fake_judge, manager, fn_name, legacy):
    pytest.importorskip("verl")
    from verl.trainer.ppo.reward import load_reward_manager

    tok = _tokenizer()
    cfg = _config(manager, fn_name, legacy)
    rm = load_reward_manager(cfg, tok)
    assert inspect.iscoroutinefunction(rm.compute_score) == fn_name.endswith("_async")
    responses = [fenced("print(6)"), fenced("print(6) #WA"), "no code at all", fenced("#SANDBOX")]
    data, lens = _batch(tok, responses, GT)

    async def run_all():  # what verl's RewardLoopWorker.compute_score_batch does
        return await asyncio.gather(*(rm.run_single(data[i : i + 1]) for i in range(len(data))))

    outs = rm.loop.run_until_complete(run_all())
    scores = [o["reward_score"] for o in outs]
    assert scores == [1.0, 0.0, 0.0, 0.0]  # sparse via reward_kwargs; sandbox error -> 0.0 and flagged
    infos = [o["reward_extra_info"] for o in outs]
    assert all(set(i) == KEYS for i in infos)
    assert [i["status"] for i in infos] == ["accepted", "wrong_answer", "syntax_error", "sandbox_error"]
    assert [i["valid"] for i in infos] == [True, True, True, False]
    rm_scores = type(rm).assemble_rm_scores(data, scores)
    assert rm_scores.shape == data.batch["responses"].shape
    assert rm_scores[0, lens[0] - 1] == 1.0 and rm_scores.sum() == 1.0
    assert fake_judge.items == 2 + 3  # code-less response never judged; the sandbox error retried twice


def test_rate_limited_call_interface(fake_judge):
    pytest.importorskip("verl")
    from verl.trainer.ppo.reward import load_reward_manager

    tok = _tokenizer()
    rm = load_reward_manager(_config("rate_limited", "compute_score_async", False), tok)
    data, lens = _batch(tok, [fenced("print(6)"), fenced("#HALF")], GT)
    out = rm(data, return_dict=True)
    assert out["reward_tensor"][0, lens[0] - 1] == 1.0 and out["reward_tensor"][1].sum() == 0.0
    assert list(out["reward_extra_info"]["status"]) == ["accepted", "wrong_answer"]


@pytest.mark.parametrize("manager", ["naive", "rate_limited"])
def test_rlvr_managers_give_the_reward_the_response_length(fake_judge, manager):
    """verl's managers decode ``attention_mask``-many response tokens but pass only the text; rlvr's subclasses
    (``source: importlib``) add that count as ``extra_info.response_length``, so the shaped overlong term applies."""
    pytest.importorskip("verl")
    from verl.trainer.ppo.reward import load_reward_manager

    from rlvr.reward.verl import REWARD_MANAGER_MODULE, REWARD_MANAGERS

    tok = _tokenizer()
    long = fenced("print(6)" + " " * 40)
    data, lens = _batch(tok, [fenced("print(6)"), long], GT, resp_len=96)
    shaping = {"length_penalty": 1.0, "max_length_tokens": lens[0] + 2, "length_buffer_tokens": 2}

    def scores(cfg):
        cfg.reward.custom_reward_function.reward_kwargs = {"reward_mode": "shaped", "reward_shaping": shaping}
        rm = load_reward_manager(cfg, tok)

        async def run_all():
            return await asyncio.gather(*(rm.run_single(data[i : i + 1]) for i in range(len(data))))

        return [o["reward_score"] for o in rm.loop.run_until_complete(run_all())]

    assert scores(_config(manager, "compute_score_async", False)) == [1.0, 1.0]  # verl's own: no length, no term
    cfg = _config(manager, "compute_score_async", False)
    cfg.reward.reward_manager.source = "importlib"
    cfg.reward.reward_manager.module.path = REWARD_MANAGER_MODULE
    cfg.reward.reward_manager.name = REWARD_MANAGERS[manager]
    assert lens[1] > shaping["max_length_tokens"]
    assert scores(cfg) == [1.0, 0.0]  # the long answer pays the whole overlong term
    assert "response_length" not in data.non_tensor_batch["extra_info"][1]  # a copy: the shared row is untouched


def test_rate_limited_timeout_becomes_an_excluded_sandbox_error():
    """verl's rate_limited manager scores a timed-out reward call 0.0 with other keys than the rest of the batch
    (verl then fails building the key arrays); rlvr's subclass makes it a sandbox_error with the same keys, NaN under
    mask_excluded (left out by rlvr_grpo)."""
    pytest.importorskip("verl")
    from verl.trainer.ppo.reward import load_reward_manager

    from rlvr.reward.verl import REWARD_MANAGER_MODULE, REWARD_MANAGERS

    prev = set_default_judge(FakeJudge(sleep_s=1.5))
    try:
        tok = _tokenizer()
        cfg = _config("rate_limited", "compute_score_async", False)
        cfg.reward.timeout = 0.3
        cfg.reward.reward_manager.source = "importlib"
        cfg.reward.reward_manager.module.path = REWARD_MANAGER_MODULE
        cfg.reward.reward_manager.name = REWARD_MANAGERS["rate_limited"]
        cfg.reward.custom_reward_function.reward_kwargs = {"reward_mode": "sparse", "mask_excluded": True}
        rm = load_reward_manager(cfg, tok)
        data, _ = _batch(tok, [fenced("print(6)")], GT)
        out = rm.loop.run_until_complete(rm.run_single(data[0:1]))
        assert math.isnan(out["reward_score"]) and set(out["reward_extra_info"]) == KEYS
        assert out["reward_extra_info"]["status"] == "sandbox_error" and out["reward_extra_info"]["valid"] is False
    finally:
        set_default_judge(prev)


@pytest.mark.parametrize("fn_name", ["compute_score", "compute_score_async"])
def test_a_timed_out_sample_counts_once_for_the_step_guard(monkeypatch, tmp_path, fn_name):
    """rlvr's rate_limited manager counts a timed-out call as a judged sandbox_error; with the sync compute_score the
    call goes on in verl's thread pool and, when it finishes, must not count the sample again."""
    pytest.importorskip("verl")
    from reward_fixtures import fake_ray_counts
    from verl.trainer.ppo.reward import load_reward_manager

    from rlvr.reward import step_guard
    from rlvr.reward.judge_log import read_judge_log
    from rlvr.reward.verl import REWARD_MANAGER_MODULE, REWARD_MANAGERS

    _, counts = fake_ray_counts(monkeypatch)
    judge = FakeJudge(sleep_s=1.0)
    prev = set_default_judge(judge)
    try:
        tok = _tokenizer()
        cfg = _config("rate_limited", fn_name, False)
        cfg.reward.timeout = 0.2
        cfg.reward.reward_manager.source = "importlib"
        cfg.reward.reward_manager.module.path = REWARD_MANAGER_MODULE
        cfg.reward.reward_manager.name = REWARD_MANAGERS["rate_limited"]
        cfg.reward.custom_reward_function.reward_kwargs = {"reward_mode": "sparse", "judge_log": str(tmp_path)}
        rm = load_reward_manager(cfg, tok)
        data, _ = _batch(tok, [fenced("print(6)")], GT)
        out = rm.loop.run_until_complete(rm.run_single(data[0:1]))
        assert out["reward_extra_info"]["status"] == "sandbox_error"
        assert (counts.judged, counts.sandbox_error) == (1, 1)  # the manager's count, at once
        deadline = time.monotonic() + 30
        if fn_name == "compute_score":  # the abandoned call finishes (its judge-log line comes after its record)
            while not read_judge_log(tmp_path) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert [r["status"] for r in read_judge_log(tmp_path)] == ["accepted"]
        else:  # the coroutine was cancelled; its judge thread still ends
            while (judge.calls < 1 or judge._active) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)
        assert (counts.judged, counts.sandbox_error) == (1, 1)  # not counted again
        step_guard.flush()
        assert step_guard.job_totals() == (1, 1)
        assert step_guard.ONCE_KEY not in data.non_tensor_batch["extra_info"][0]
    finally:
        set_default_judge(prev)
        counts.close()
