"""verl agent-loop boundary: our tool config loads through verl's own registry, the overrides compose against the
installed verl config, and the tools answer from visible tests only."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from test_repair_env import FakeJudge, _problem

pytest.importorskip("verl")
pytest.importorskip("hydra")

from rlvr.data.schema import from_ground_truth
from rlvr.repair import EnvConfig, verl_tool, verl_tool_variant


def _compose(overrides):
    import verl
    from hydra import compose, initialize_config_dir

    d = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=d, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def test_overrides_compose(tmp_path):
    cfg = EnvConfig(turns=3, mode="interpreter", max_tool_calls=2)
    path = verl_tool_variant.write_tool_config(tmp_path / "tools.yaml", cfg)
    mt = _compose(verl_tool.repair_overrides(path, cfg)).actor_rollout_ref.rollout
    assert mt.multi_turn.enable is True and mt.multi_turn.tool_config_path == str(path)
    assert mt.multi_turn.max_assistant_turns == 5 and mt.multi_turn.format == "hermes"
    assert mt.agent.default_agent_loop == "tool_agent"
    loops = verl_tool.write_agent_loop_config(tmp_path / "loops.yaml")
    mt = _compose(verl_tool.repair_overrides(path, cfg, agent_loop_config_path=loops)).actor_rollout_ref.rollout
    assert mt.agent.default_agent_loop == verl_tool.AGENT_NAME and mt.agent.agent_loop_config_path == str(loops)


def test_tools_load_and_answer_from_visible_tests(tmp_path, monkeypatch):
    from verl.tools.tool_registry import initialize_tools_from_config

    judge = FakeJudge()
    monkeypatch.setattr(verl_tool, "_JUDGE", judge)
    cfg = EnvConfig(turns=3, mode="interpreter")
    path = verl_tool_variant.write_tool_config(tmp_path / "t.yaml", cfg, 0.1)
    tools = {t.name: t for t in initialize_tools_from_config(str(path))}
    assert set(tools) == {"run_tests", "run_python"}
    p = _problem()
    row = verl_tool.repair_row_fields(p, cfg)
    hidden = from_ground_truth(row["reward_model"]["ground_truth"])
    kwargs = row["extra_info"]["tools_kwargs"]["run_tests"]

    async def go():
        t = tools["run_tests"]
        iid, _ = await t.create(create_kwargs=kwargs["create_kwargs"])
        resp, reward, m = await t.execute(iid, {"code": "print('bad')"})
        await t.release(iid)
        out, _, _ = await tools["run_python"].execute("x", {"code": "print(42)"})
        return resp.text, reward, m, out.text

    text, reward, m, out = asyncio.run(go())
    assert "VIS_IN_0" in text and m["verdict"] == "wrong_answer" and reward == pytest.approx(-0.1)
    assert all(t.stdin.strip() not in text for t in hidden.tests) and len(hidden.tests) == 3
    assert [len(j.tests) for j in judge.judged] == [1] and "42" in out
    assert json.loads(json.dumps(row))["agent_name"] == verl_tool.AGENT_NAME


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder"])
def test_tool_call_text_is_read_back_by_verls_parser_as_the_same_call(fmt):
    from transformers import PreTrainedTokenizerFast
    from verl.experimental.agent_loop.tool_parser import ToolParser

    from rlvr.model import build_tokenizer

    code = 'a = input()\nprint("x\\\\y", a, \'q\')\n\tif a: print({"k": 1})'
    text = "I will test it.\n" + verl_tool_variant.tool_call_text("run_tests", {"code": code}, fmt)
    tok = build_tokenizer(["print(a)\n" * 50, text], vocab_size=300)
    assert isinstance(tok, PreTrainedTokenizerFast)
    parser = ToolParser.get_tool_parser(fmt, tok)
    ids = tok.encode(text, add_special_tokens=False)
    content, calls = asyncio.run(parser.extract_tool_calls(ids, None))
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("run_tests", {"code": code})]
    assert content.strip() == "I will test it."


def test_tool_format_reaches_the_overrides_and_unknown_ones_are_refused(tmp_path):
    cfg = EnvConfig(tool_format="qwen3_coder")
    mt = _compose(verl_tool.repair_overrides(tmp_path / "t.yaml", cfg)).actor_rollout_ref.rollout
    assert mt.multi_turn.format == "qwen3_coder"
    with pytest.raises(ValueError, match="tool_format"):
        EnvConfig(tool_format="xml")
    with pytest.raises(ValueError, match="unknown tool-call format 'xml'"):
        verl_tool_variant.tool_call_text("run_tests", {"code": ""}, "xml")


class _ScriptedServer:
    """verl's LLM server client, scripted: the i-th generate call returns ``replies[i]`` encoded."""

    def __init__(self, tok, replies: list[str]) -> None:
        self.tok, self.replies, self.calls = tok, replies, 0

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        text = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return TokenOutput(token_ids=[*self.tok.encode(text, add_special_tokens=False), self.tok.eos_token_id])


class _BudgetServer:
    """verl's LLM server client over a policy that never stops by itself: every turn is ``reply`` (a tool call)
    followed by endless filler, cut at the turn's token limit as verl 0.9.1's vLLM server computes it
    (``vLLMHttpServer.generate``, workers/rollout/vllm_rollout/vllm_async_server.py: an explicit ``max_tokens``, else
    ``max_new_tokens``, else ``min(response_length, prompt_length + response_length - len(prompt_ids))``; then
    clamped to ``[1, max_model_len - len(prompt_ids)]``). Records each turn's limit and token count."""

    def __init__(self, tok, reply: str, prompt_length: int, response_length: int) -> None:
        self.tok, self.prompt_length, self.response_length = tok, prompt_length, response_length
        self.tokens = tok.encode(reply, add_special_tokens=False)
        self.filler = tok.encode(" filler", add_special_tokens=False)
        self.limits: list[int] = []
        self.lengths: list[int] = []

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        sp = dict(sampling_params)
        if "max_tokens" in sp:
            limit = sp.pop("max_tokens")
        elif "max_new_tokens" in sp:
            limit = sp.pop("max_new_tokens")
        else:
            limit = min(self.response_length, self.prompt_length + self.response_length - len(prompt_ids))
        limit = max(1, min(limit, self.prompt_length + self.response_length - len(prompt_ids)))
        out = list(self.tokens)
        while len(out) < limit:
            out += self.filler
        self.limits.append(limit)
        self.lengths.append(len(out[:limit]))
        return TokenOutput(token_ids=out[:limit], stop_reason="length")


def _run_agent_loop(tmp_path, tok, replies, cfg, problem, response_length=4096, server=None, turn_tokens=None,
                    prompt_length=1024, protocol=True):
    """One episode through verl's own agent-loop machinery: the loop class comes from our agent-loop config the way
    verl's AgentLoopWorker instantiates it (hydra ``_target_``). ``protocol``: the repair row as the launch writes it
    (the loop plays the repair protocol, no verl tool); ``False``: the row without its visible tests and our tools
    from the tool config (verl's plain tool loop). ``server``: the LLM server client (default:
    :class:`_ScriptedServer` over ``replies``); ``turn_tokens``: written into the agent-loop config as the repair
    launch writes it."""
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tools = [] if protocol else initialize_tools_from_config(
        str(verl_tool_variant.write_tool_config(tmp_path / "tools.yaml", cfg)))
    (loop_cfg,) = OmegaConf.load(verl_tool.write_agent_loop_config(tmp_path / "loops.yaml", turn_tokens,
                                                                   env=cfg if protocol else None))
    assert loop_cfg.name == verl_tool.AGENT_NAME
    conf = OmegaConf.create({"actor_rollout_ref": {"rollout": {
        "prompt_length": prompt_length, "response_length": response_length, "full_determinism": False,
        "multi_turn": {"max_user_turns": cfg.turns, "max_assistant_turns": cfg.turns, "max_parallel_calls": 1,
                       "max_tool_response_length": cfg.feedback_chars, "tool_response_truncate_side": "middle",
                       "format": cfg.tool_format}}}})
    row = verl_tool.repair_verl_rows([problem], cfg)[0]
    if not protocol:
        row["extra_info"].pop(verl_tool.VISIBLE_KEY)

    async def go():
        loop = hydra.utils.instantiate(loop_cfg, trainer_config=DictConfigWrap(conf),
                                       server_manager=server or _ScriptedServer(tok, replies), tokenizer=tok,
                                       processor=None,
                                       hf_model_type="qwen2", dataset_cls=RLHFDataset,
                                       data_config=DictConfigWrap(OmegaConf.create({})), tools=ToolListWrap(tools))
        loop.loop = asyncio.get_running_loop()
        return await loop.run({"temperature": 1.0}, raw_prompt=list(row["prompt"]),
                              tools_kwargs=row["extra_info"]["tools_kwargs"], extra_info=row["extra_info"])

    return asyncio.run(go()), row


def test_agent_loop_scores_the_last_program_not_a_fenced_block_the_feedback_shows(tmp_path, monkeypatch):
    """The feedback quotes a fenced program that the reward judge would accept, and the final turn has no code.
    verl decodes the whole episode (answers and feedback) for the reward: scored as a whole, the quoted program was
    accepted; scored on the recorded final answer (the episode's last program, the failing one), it is not."""
    from rlvr.judge.verdict import JudgeResult
    from rlvr.model import build_tokenizer
    from rlvr.repair.protocol import fenced
    from rlvr.reward.scorer import set_default_judge
    from rlvr.reward.verl import compute_score

    monkeypatch.setattr(verl_tool, "_JUDGE", FakeJudge())  # the feedback judge: wrong_answer, prints "wrong"
    printed = "```python\nprint('SOLVED')\n```"
    replies = ["```python\nprint('bad')\n```", "I cannot fix it."]
    cfg = EnvConfig(turns=3, field_chars=500, feedback_template="{verdict}. Try:\n" + printed + "\nFix it.")
    tok = build_tokenizer([*replies, printed, "Echo. wrong Fix it. Your output"] * 20, vocab_size=400)
    out, row = _run_agent_loop(tmp_path, tok, replies, cfg, _problem())
    assert out.num_turns == 6  # prompt, answer, feedback, answer, feedback, answer
    whole = tok.decode(out.response_ids, skip_special_tokens=True)
    assert printed in whole and whole.rstrip().endswith("I cannot fix it.")
    assert out.extra_fields[verl_tool.FINAL_ANSWER_KEY] == fenced("print('bad')")

    class AcceptsSolved:
        def judge_many(self, items):
            return [JudgeResult(verdict="accepted" if "SOLVED" in code else "wrong_answer", passed=0, total=1,
                                pass_ratio=1.0 if "SOLVED" in code else 0.0, judge_s=0.0) for _, code in items]

    set_default_judge(AcceptsSolved())
    try:
        gt = row["reward_model"]["ground_truth"]
        assert compute_score("t", whole, gt, {}, reward_mode="sparse")["score"] == 1.0  # the whole-response reading
        extra = {**row["extra_info"], **out.extra_fields}  # what verl's reward manager passes
        r = compute_score("t", whole, gt, extra, reward_mode="sparse")
        assert (r["score"], r["has_code"], r["status"]) == (0.0, True, "wrong_answer")
    finally:
        set_default_judge(None)


def test_agent_loop_final_answer_is_cut_with_the_response(tmp_path, monkeypatch):
    """The recorded final answer never holds tokens past ``rollout.response_length`` (verl cuts the response there,
    and the policy is trained on that cut): it is the program of the cut text."""
    from rlvr.generate import extract_code
    from rlvr.model import build_tokenizer
    from rlvr.repair.protocol import fenced

    monkeypatch.setattr(verl_tool, "_JUDGE", FakeJudge())
    answer = "```python\n" + "print('FIXED')\n" * 30 + "```"
    tok = build_tokenizer([answer] * 20, vocab_size=300)
    out, _ = _run_agent_loop(tmp_path, tok, [answer], EnvConfig(turns=3), _problem(), response_length=12)
    final = out.extra_fields[verl_tool.FINAL_ANSWER_KEY]
    cut = tok.decode(out.response_ids, skip_special_tokens=True)
    assert len(out.response_ids) == 12 and final == fenced(extract_code(cut))
    assert final and len(final) < len(answer)


def test_agent_loop_caps_every_turn_at_turn_tokens(tmp_path, monkeypatch):
    """``repair.turn_tokens`` is a per-turn budget under verl too: with the episode sized as the repair launch sizes
    it (``turns x turn_tokens`` plus the tool answers), a policy that never stops gets ``turn_tokens`` per assistant
    turn and keeps all its turns. verl's own default lets the first turn take the whole episode (one turn of
    ``response_length`` tokens, no retry)."""
    from rlvr.model import build_tokenizer

    monkeypatch.setattr(verl_tool, "_JUDGE", FakeJudge())  # run_tests answers wrong_answer: the policy retries
    turn_tokens, cfg = 48, EnvConfig(turns=3, feedback_chars=300)
    call = verl_tool_variant.tool_call_text("run_tests", {"code": "print(1)"}, cfg.tool_format)
    tok = build_tokenizer([call, " filler" * 50, "Echo. wrong Fix it. Your output"] * 20, vocab_size=400)
    assert len(tok.encode(call, add_special_tokens=False)) < turn_tokens  # the call fits a turn
    response_length = cfg.turns * turn_tokens + (cfg.turns - 1) * cfg.feedback_chars  # rlvr.repair.verl_run
    server = _BudgetServer(tok, call, 1024, response_length)
    out, _ = _run_agent_loop(tmp_path, tok, [], cfg, _problem(), response_length=response_length, server=server,
                             turn_tokens=turn_tokens)
    assert len(server.lengths) == cfg.turns, server.lengths  # every turn ran: none ate the episode
    assert all(n <= turn_tokens for n in server.limits + server.lengths), (server.limits, server.lengths)
    assert out.num_turns == 2 * cfg.turns  # prompt, 3 assistant turns, 2 tool answers
    assert sum(out.response_mask) <= cfg.turns * turn_tokens and len(out.response_ids) <= response_length


def test_turn_budget_never_passes_the_episode_budget(tmp_path, monkeypatch):
    """A turn asks for at most what is left of ``rollout.response_length``: with a budget smaller than
    ``turns x turn_tokens``, the last turn gets the rest and the response is not cut by verl afterwards."""
    from rlvr.model import build_tokenizer

    monkeypatch.setattr(verl_tool, "_JUDGE", FakeJudge())
    turn_tokens, cfg = 48, EnvConfig(turns=3, feedback_chars=300)
    call = verl_tool_variant.tool_call_text("run_tests", {"code": "print(1)"}, cfg.tool_format)
    tok = build_tokenizer([call, " filler" * 50, "Echo. wrong Fix it. Your output"] * 20, vocab_size=400)
    server = _BudgetServer(tok, call, 1024, 10_000)
    first, _ = _run_agent_loop(tmp_path, tok, [], cfg, _problem(), response_length=10_000, server=server,
                               turn_tokens=turn_tokens)
    used = len(first.response_ids) - server.lengths[-1]  # everything before the last turn
    response_length = used + 10  # the last turn has 10 tokens left
    server = _BudgetServer(tok, call, 1024, response_length)
    out, _ = _run_agent_loop(tmp_path, tok, [], cfg, _problem(), response_length=response_length, server=server,
                             turn_tokens=turn_tokens)
    assert server.limits == [turn_tokens, turn_tokens, 10]
    assert len(out.response_ids) == response_length


def test_agent_loop_config_carries_the_turn_budget(tmp_path):
    """``turn_tokens`` is written into the agent-loop config only when set, and a bad one is refused by the loop."""
    assert "turn_tokens" not in verl_tool.agent_loop_config()[0]
    assert verl_tool.agent_loop_config(768)[0]["turn_tokens"] == 768
    with pytest.raises(ValueError, match="turn_tokens"):
        verl_tool.FinalAnswerAgentLoop.__init__(object.__new__(verl_tool.FinalAnswerAgentLoop), turn_tokens=0)


def test_episode_budget_counts_the_interpreters_extra_turns():
    """Interpreter mode allows turns + max_tool_calls assistant turns (repair_overrides' max_assistant_turns): the
    episode budget holds all of them and a tool answer after each but the last, not only the answer turns."""
    from rlvr.repair.env import EnvConfig
    from rlvr.repair.verl_tool import episode_budget, repair_overrides

    repair = EnvConfig(turns=3, feedback_chars=500)
    assert episode_budget(repair, 256) == 3 * 256 + 2 * 500
    interp = EnvConfig(turns=3, mode="interpreter", max_tool_calls=2, feedback_chars=500, tool_output_chars=400)
    assert "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=5" in repair_overrides("t.yaml", interp)
    assert episode_budget(interp, 256) == 5 * 256 + 4 * 500
    # a python-run output may be longer than feedback: its own cap then bounds the user turns
    assert episode_budget(interp.model_copy(update={"tool_output_chars": 1500}), 256) == 5 * 256 + 4 * 1500
    with pytest.raises(ValueError, match="turn_tokens=0"):
        episode_budget(repair, 0)
