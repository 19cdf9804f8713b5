"""The scripted policy (rlvr.train.verl.scripted): verl's own agent-loop worker method, wrapped, answers every turn
from the script by sample and turn, and the reward then judges exactly the scripted programs."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from rlvr.train.verl import scripted


def _script(tmp_path, problems, fallback=None):
    data = {"version": 1, "problems": problems}
    if fallback is not None:
        data["fallback"] = fallback
    path = tmp_path / "script.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_script_picks_rollout_by_group_position_and_turn_by_call(tmp_path):
    s = scripted.Script.load(_script(tmp_path, {"p/1": {"kind": "mixed", "rollouts": [
        {"label": "reference", "turns": ["A"]}, {"label": "mutant", "turns": ["B1", "B2"]}]}}))
    assert s.turn("p/1", 0, 0) == ("A", "reference")
    assert s.turn("p/1", 1, 0) == ("B1", "mutant")
    assert s.turn("p/1", 1, 5) == ("B2", "mutant")  # past the last turn: the last turn again
    assert s.turn("p/1", 2, 0) == ("A", "reference")  # rollout_n wraps around the listed rollouts
    assert s.turn("other/1", 3, 0) == ("no program", "unscripted")


@pytest.mark.parametrize("bad, field", [
    ({"version": 2, "problems": {}}, "version"),
    ({"version": 1, "problems": {"p/1": {"rollouts": []}}}, "rollouts"),
    ({"version": 1, "problems": {"p/1": {"rollouts": [{"label": "x", "turns": []}]}}}, "rollouts[0].turns"),
])
def test_bad_script_is_refused_naming_file_and_field(tmp_path, bad, field):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"s\.json.*{field.replace('[', '.').replace(']', '.')}"):
        scripted.Script.load(path)


def test_install_without_a_script_patches_nothing(monkeypatch):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    monkeypatch.delenv(scripted.SCRIPT_ENV, raising=False)
    before = AgentLoopWorker._run_agent_loop
    assert scripted.install() is False
    assert AgentLoopWorker._run_agent_loop is before


class _Unasked:
    """The real LLM client: the scripted samples must never reach it."""

    calls = 0

    async def generate(self, *a, **k):
        type(self).calls += 1
        raise AssertionError("the vLLM server was asked for tokens")


def _worker(tok, response_length=256):
    """An ``AgentLoopWorker`` with only what ``_run_agent_loop`` reads (its ``__init__`` needs a whole cluster)."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.dataset.rl_dataset import RLHFDataset

    w = object.__new__(AgentLoopWorker)
    w.config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": response_length,
                                          "full_determinism": False,
                                          "multi_turn": {"max_user_turns": 3, "max_assistant_turns": 3,
                                                         "max_parallel_calls": 1, "max_tool_response_length": 500,
                                                         "tool_response_truncate_side": "middle",
                                                         "format": "hermes"}}},
        "data": {}})
    w.llm_client, w.tokenizer, w.processor, w.hf_model_type = _Unasked(), tok, None, "qwen2"
    w.dataset_cls, w.tools = RLHFDataset, []
    return w


def test_patched_worker_answers_each_sample_from_the_script(tmp_path, monkeypatch):
    """Two samples of one group through verl's single-turn agent loop: each response is its own scripted text, the
    emission log names the sample and label, and the real server is never asked."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from rlvr.model import build_tokenizer

    ref, mut = "```python\nprint(1)\n```", "```python\nprint(2)\n```"
    path = _script(tmp_path, {"p/1": {"kind": "mixed", "rollouts": [{"label": "reference", "turns": [ref]},
                                                                     {"label": "mutant", "turns": [mut]}]}})
    tok = build_tokenizer([ref, mut, "write a program"] * 20, vocab_size=300)
    monkeypatch.setattr(AgentLoopWorker, "_run_agent_loop", AgentLoopWorker._run_agent_loop)  # undone after

    async def passthrough(self, output, validate, **kwargs):
        return output

    monkeypatch.setattr(AgentLoopWorker, "_agent_loop_postprocess", passthrough)
    assert scripted.install(path) is True
    assert scripted.install(path) is False  # idempotent
    w = _worker(tok)
    row = {"raw_prompt": [{"role": "user", "content": "write a program"}], "extra_info": {"id": "p/1", "index": 0}}

    async def go():
        return await asyncio.gather(*[
            w._run_agent_loop({"temperature": 1.0}, {"step": 3, "sample_index": 0, "rollout_n": n,
                                                     "validate": False}, agent_name="single_turn_agent", **row)
            for n in (0, 1)])

    async def go_v1():  # verl's V1 worker: one trajectory for the group, the sample's place as session_id
        traj = {"step": 4, "sample_index": 0, "rollout_n": 0, "validate": False}
        return await asyncio.gather(*[
            w._run_agent_loop({"temperature": 1.0}, trajectory=traj, agent_name="single_turn_agent", session_id=n,
                              **row) for n in (1, 0)])

    outs = asyncio.run(go())
    texts = [tok.decode(o.response_ids, skip_special_tokens=True) for o in outs]
    assert texts == [ref, mut]
    # the weight version verl's V1 trainer reads per turn (int() of a missing one failed the first GPU rehearsal
    # after step 1's update): step 3's rollouts come from the weights after 2 updates
    assert [(o.extra_fields.get("min_global_steps"), o.extra_fields.get("max_global_steps")) for o in outs] == [
        (2, 2), (2, 2)]
    v1 = [tok.decode(o.response_ids, skip_special_tokens=True) for o in asyncio.run(go_v1())]
    assert v1 == [mut, ref]
    assert scripted.weight_version(None) == 0 and scripted.weight_version(1) == 0
    assert _Unasked.calls == 0
    (log,) = list(tmp_path.glob("script.json.emitted.*.jsonl"))
    rows = sorted((json.loads(x) for x in log.read_text().splitlines()), key=lambda r: r["rollout_n"])
    rows = [r for r in rows if r["step"] == 3]
    assert [(r["id"], r["rollout_n"], r["turn"], r["label"], r["step"]) for r in rows] == [
        ("p/1", 0, 0, "reference", 3), ("p/1", 1, 0, "mutant", 3)]


def test_scripted_turn_counts_turns_and_honours_max_tokens():
    from rlvr.model import build_tokenizer

    tok = build_tokenizer(["first turn", "second turn"] * 20, vocab_size=300)
    s = scripted.Script(problems={"p": {"rollouts": [{"label": "fix", "turns": ["first turn", "second turn"]}]}})
    ctx = {"id": "p", "rollout_n": 0, "turn": 0}
    ids1, label = scripted.scripted_turn(s, tok, ctx, None)
    ids2, _ = scripted.scripted_turn(s, tok, ctx, 2)
    assert label == "fix" and ctx["turn"] == 2
    assert tok.decode(ids1, skip_special_tokens=True) == "first turn" and ids1[-1] == tok.eos_token_id
    assert len(ids2) == 2


def test_the_repair_and_grpo_scripted_policies_pick_and_encode_turns_alike():
    """rlvr.repair.scripted (the repair rehearsal's policies) and this module's Script share one turn rule
    (pick_turn: the last reply once the list is exhausted) and one encoding (turn_ids: + EOS, cut at the cap)."""
    from rlvr.model import build_tokenizer
    from rlvr.repair.scripted import ScriptedServer, replies_policy

    turns = ["first turn", "second turn"]
    s = scripted.Script(problems={"p": {"rollouts": [{"label": "fix", "turns": turns}]}})
    policy = replies_policy(turns)
    for t in range(4):
        assert policy("first message", t) == s.turn("p", 0, t)[0] == scripted.pick_turn(turns, t)
    with pytest.raises(ValueError, match="empty reply list"):
        scripted.pick_turn([], 0)
    tok = build_tokenizer(["first message", *turns] * 20, vocab_size=300)
    server = ScriptedServer(tok, policy, ["first message"])
    prompt = tok.encode("first message", add_special_tokens=False)
    for cap, stop in ((None, "completed"), (2, None)):
        out = asyncio.run(server.generate(f"r{cap}", prompt, {"max_tokens": cap}))
        ids, cut = scripted.turn_ids(tok, "first turn", cap)
        ctx = {"id": "p", "rollout_n": 0, "turn": 0}
        assert out.token_ids == ids == scripted.scripted_turn(s, tok, ctx, cap)[0]
        assert out.stop_reason == stop and cut == (stop is None)
