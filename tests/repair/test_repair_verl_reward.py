"""Repair under verl: an episode's reward goes through verl's own agent-loop reward path (``AgentLoopWorker.
_compute_score`` building the reward batch, verl's reward manager loaded from a config as the reward worker loads it,
our ``compute_score``) and keeps what the local engine's repair reward has: the turn penalty, and the tool calls that
failed to parse (verl's plain tool loop), counted."""

from __future__ import annotations

import asyncio
import types

import pytest
from test_repair_env import FakeJudge, _problem
from test_repair_verl_tool import _run_agent_loop

pytest.importorskip("verl")

from rlvr.judge.verdict import JudgeResult
from rlvr.model import build_tokenizer
from rlvr.repair import EnvConfig, verl_tool, verl_tool_variant
from rlvr.reward.scorer import set_default_judge

FIXED = "```python\nprint('FIXED')\n```"


class AcceptsFixed:
    """The reward's judge: accepted iff the program holds FIXED."""

    def judge_many(self, items):
        return [JudgeResult(verdict="accepted" if "FIXED" in code else "wrong_answer", passed=int("FIXED" in code),
                            total=1, pass_ratio=float("FIXED" in code), judge_s=0.0) for _, code in items]


def _manager(tok, reward_kwargs):
    """verl's reward manager as the reward worker builds it (``load_reward_manager``) from the launcher's keys."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import load_reward_manager

    cfg = OmegaConf.create({"reward": {
        "reward_manager": {"source": "importlib", "name": "RLVRNaiveRewardManager",
                           "module": {"path": "pkg://rlvr.reward.verl_manager"}},
        "custom_reward_function": {"path": "pkg://rlvr.reward.verl", "name": "compute_score_async",
                                   "reward_kwargs": reward_kwargs}}})
    return load_reward_manager(cfg, tok)


def _agent_loop_reward(out, row, rm):
    """verl 0.9.1's ``AgentLoopWorker._compute_score`` (agent_loop.py) run on one episode, its reward-worker handle
    answering as ``RewardLoopWorker.compute_score`` does with a custom reward function
    (``reward_manager.run_single``)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    handle = types.SimpleNamespace(compute_score=types.SimpleNamespace(remote=rm.run_single))
    worker = types.SimpleNamespace(reward_loop_worker_handles=[handle], processor=None)
    worker._compute_multi_modal_inputs = lambda output, input_ids: {}
    worker._get_mm_processor_kwargs = lambda audio=None: {}
    worker._compute_position_ids = types.MethodType(AgentLoopWorker._compute_position_ids, worker)
    kwargs = {"data_source": row["data_source"], "reward_model": row["reward_model"], "extra_info": row["extra_info"]}

    async def go():
        rm.loop = asyncio.get_running_loop()
        await AgentLoopWorker._compute_score(worker, [out], kwargs=kwargs)

    asyncio.run(go())
    return out.reward_score, out.extra_fields["reward_extra_info"]


def _episode(tmp_path, monkeypatch, replies, cfg, protocol=True):
    monkeypatch.setattr(verl_tool, "_JUDGE", FakeJudge())  # the feedback judge: accepted iff FIXED
    tok = build_tokenizer([*replies, FIXED, "example tests passed wrong Fix"] * 20, vocab_size=400)
    out, row = _run_agent_loop(tmp_path, tok, replies, cfg, _problem(), protocol=protocol)
    return tok, out, row


@pytest.fixture
def reward_judge():
    prev = set_default_judge(AcceptsFixed())
    yield
    set_default_judge(prev)


def test_turn_penalty_reaches_the_final_score(tmp_path, monkeypatch, reward_judge):
    """Two failing answers (two feedback turns), then the fixed program: sparse reward 1 minus 2 × turn_penalty, as
    the local engine's repair reward (turn_penalty × feedback turns); verl itself only keeps the tool rewards
    aside."""
    bad = "```python\nprint('x')\n```"
    cfg = EnvConfig(turns=4, turn_penalty=0.25)
    tok, out, row = _episode(tmp_path, monkeypatch, [bad, bad, FIXED], cfg)
    assert out.extra_fields["tool_rewards"] == [-0.25, -0.25]
    score, info = _agent_loop_reward(out, row, _manager(tok, {"reward_mode": "sparse"}))
    assert score == pytest.approx(0.5) and info["acc"] and info["tool_reward"] == pytest.approx(-0.5)
    assert info["tool_parse_failures"] == 0


def test_tool_calls_that_fail_to_parse_are_counted(tmp_path, monkeypatch, reward_judge):
    """verl's plain tool loop (a row without the protocol's visible tests): a hermes call with broken JSON is dropped
    by verl's parser (the episode ends as if it were an answer); the loop counts it and the reward reports it."""
    bad = '<tool_call>\n{"name": "run_tests", "arguments": {"code": "print(1)"\n</tool_call>'
    good = verl_tool_variant.tool_call_text("run_tests", {"code": "print('x')"}, "hermes")
    cfg = EnvConfig(turns=4, tool_format="hermes")
    tok, out, row = _episode(tmp_path, monkeypatch, [good, bad], cfg, protocol=False)
    assert out.extra_fields["tool_parse_failures"] == 1 and out.num_turns == 4  # call, tool answer, broken call
    score, info = _agent_loop_reward(out, row, _manager(tok, {"reward_mode": "sparse"}))
    assert info["tool_parse_failures"] == 1 and score == 0.0
    tok, out, row = _episode(tmp_path, monkeypatch, [good, FIXED], cfg, protocol=False)  # well-formed: no failure
    assert out.extra_fields["tool_parse_failures"] == 0


def test_length_reaches_the_reward_through_the_agent_loop_path(tmp_path, monkeypatch, reward_judge):
    """The shaped overlong term sees the episode's response tokens (verl's reward batch of the agent loop)."""
    cfg = EnvConfig(turns=2, tool_format="qwen3_coder")
    tok, out, row = _episode(tmp_path, monkeypatch, [FIXED], cfg)
    n = len(out.response_ids)
    shaping = {"length_penalty": 1.0, "max_length_tokens": 2 * n, "length_buffer_tokens": 2 * n}  # L = 1/2
    score, info = _agent_loop_reward(out, row, _manager(tok, {"reward_mode": "shaped", "reward_shaping": shaping}))
    assert info["acc"] and score == pytest.approx(1.0 - 0.5)
