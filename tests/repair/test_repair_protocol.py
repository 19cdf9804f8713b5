"""One repair protocol for training and evaluation (issue 42, item 1): the same scripted policy outputs give the same
transcript through verl's agent loop (training) and the repair environment (evaluation); the program graded is the
episode's last program in both; a pass after feedback earns a first-turn pass's reward less the turn penalty."""

from __future__ import annotations

import asyncio

import pytest
from test_repair_env import BAD, GOOD, FakeJudge, Scripted, _problem

from rlvr.data.schema import Problem
from rlvr.generate import SamplingParams
from rlvr.judge.verdict import TestResult, summarise
from rlvr.repair import EnvConfig, run_episodes
from rlvr.repair import protocol as proto

#: fails the visible test but passes the hidden ones (see HiddenOnlyJudge)
PARTIAL = "```python\nprint('PARTIAL')\n```"


class HiddenOnlyJudge(FakeJudge):
    """:class:`FakeJudge`, plus: a program containing PARTIAL passes exactly the hidden tests (stdin ``HID_…``)."""

    def judge(self, problem: Problem, solution: str):
        if "PARTIAL" not in solution:
            return super().judge(problem, solution)
        self.judged.append(problem)
        res = [TestResult(index=i, verdict="accepted" if t.stdin.startswith("HID") else "wrong_answer",
                          stdout="partial\n", message="")
               for i, t in enumerate(problem.tests)]
        return summarise(res, self.secs)

    def judge_many(self, items):
        """The reward scorer's entry point (:mod:`rlvr.reward.scorer`)."""
        return [self.judge(p, code) for p, code in items]


def _evaluate(replies: list[str], cfg: EnvConfig, problem: Problem):
    return run_episodes([problem], Scripted(replies), HiddenOnlyJudge(), cfg, SamplingParams(max_new_tokens=8))[0]


def _tokenizer(cfg: EnvConfig, problem: Problem, replies: list[str]):
    from rlvr.model import build_tokenizer

    texts = [*replies, proto.initial_messages(problem, cfg)[0]["content"], proto.NO_CODE_FEEDBACK,
             cfg.feedback_template]
    return build_tokenizer(texts * 20, vocab_size=600)


def _train(tmp_path, monkeypatch, replies: list[str], cfg: EnvConfig, problem: Problem, tok=None, server=None):
    """One training episode through verl 0.9.1's own agent-loop machinery: the loop class from our agent-loop config,
    instantiated the way verl's ``AgentLoopWorker`` does (hydra ``_target_``), on the repair row, with a scripted LLM
    server (``replies[i]`` is the i-th turn) and no verl tool (the launch configures none)."""
    pytest.importorskip("verl")
    import hydra
    from omegaconf import OmegaConf
    from test_repair_verl_tool import _ScriptedServer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from rlvr.repair import verl_tool

    monkeypatch.setattr(verl_tool, "_JUDGE", HiddenOnlyJudge())
    tok = tok or _tokenizer(cfg, problem, replies)
    (loop_cfg,) = OmegaConf.load(verl_tool.write_agent_loop_config(tmp_path / "loops.yaml", env=cfg))
    turns = cfg.turns + (cfg.max_tool_calls if cfg.mode == "interpreter" else 0)
    conf = OmegaConf.create({"actor_rollout_ref": {"rollout": {
        "prompt_length": 4096, "response_length": 8192, "full_determinism": False,
        "multi_turn": {"max_user_turns": turns, "max_assistant_turns": turns, "max_parallel_calls": 1,
                       "max_tool_response_length": cfg.feedback_chars, "tool_response_truncate_side": "middle",
                       "format": cfg.tool_format}}}})
    row = verl_tool.repair_verl_rows([problem], cfg)[0]

    async def go():
        loop = hydra.utils.instantiate(loop_cfg, trainer_config=DictConfigWrap(conf),
                                       server_manager=server or _ScriptedServer(tok, replies), tokenizer=tok,
                                       processor=None,
                                       hf_model_type="qwen2", dataset_cls=RLHFDataset,
                                       data_config=DictConfigWrap(OmegaConf.create({})), tools=ToolListWrap([]))
        loop.loop = asyncio.get_running_loop()
        return await loop.run({"temperature": 1.0}, raw_prompt=list(row["prompt"]),
                              tools_kwargs=row["extra_info"].get("tools_kwargs", {}), extra_info=row["extra_info"])

    return asyncio.run(go()), row, tok


def _reward(out, row) -> dict:
    """What verl's reward manager computes for the episode: ``compute_score`` on the whole decoded response, with the
    sample's ``extra_fields`` merged into ``extra_info``, ``sparse`` mode (the repair launch's)."""
    from rlvr.reward.scorer import set_default_judge
    from rlvr.reward.verl import compute_score

    set_default_judge(HiddenOnlyJudge())
    try:
        return compute_score("t", "(the whole response)", row["reward_model"]["ground_truth"],
                             {**row["extra_info"], **out.extra_fields}, reward_mode="sparse")
    finally:
        set_default_judge(None)


CASES = {
    "fix_after_feedback": [BAD, GOOD],
    "no_code_then_fix": [BAD, "Let me think about it.", GOOD],
    "never_fixed": [BAD, BAD, BAD],
    "first_turn_pass": [GOOD],
}


RUN = "```python-run\nprint(6 * 7)\n```"


#: params.yaml's repair.feedback_template: restates the episode's first message ({prompt})
RESTATING = ("Wrong answer on the visible test. Input:\n```\n{input}\n```\nYour output:\n```\n{actual}\n```\n"
             "Expected output:\n```\n{expected}\n```\n\n{prompt}")


@pytest.mark.parametrize("name", [*sorted(CASES), "interpreter", "restated_prompt"])
def test_training_and_evaluation_produce_the_same_transcript(name, tmp_path, monkeypatch):
    """The evaluation's messages, rendered by the policy's chat template, are token for token what verl's agent loop
    built (prompt + response) for the same policy outputs: same prompt, same feedback text, same role (user); in
    interpreter mode the python-run output too."""
    if name == "interpreter":
        replies, cfg = [RUN, BAD, GOOD], EnvConfig(turns=3, mode="interpreter", max_tool_calls=1)
    elif name == "restated_prompt":
        replies, cfg = [BAD, GOOD], EnvConfig(turns=3, feedback_template=RESTATING)
    else:
        replies, cfg = CASES[name], EnvConfig(turns=3)
    problem = _problem()
    env = _evaluate(replies, cfg, problem)
    out, _, tok = _train(tmp_path, monkeypatch, replies, cfg, problem)
    assert [m["role"] for m in env.messages] == ["user"] + ["assistant", "user"] * (len(replies) - 1) + ["assistant"]
    assert len(env.tool_calls) == (name == "interpreter")
    if name == "restated_prompt":  # the statement is restated although verl's visible problem has none
        assert env.messages[2]["content"].endswith(env.messages[0]["content"]) and "Echo." in env.messages[2]["content"]
    expected = tok.apply_chat_template(env.messages, tokenize=False)
    got = tok.decode(out.prompt_ids + out.response_ids, skip_special_tokens=False)
    assert got.rstrip("\n") == expected.rstrip("\n")
    assert out.num_turns == len(env.messages)  # prompt + every assistant and user turn
    assert sum(out.response_mask) < len(out.response_mask) or len(env.messages) == 2  # feedback is masked out


def test_the_episode_says_how_to_get_feedback_and_how_to_finish(tmp_path, monkeypatch):
    """Training rows and the evaluation open with the same prompt, the single-turn one (the task's own answer format,
    no test), and the feedback states the protocol: answers left of the most allowed, when the episode ends and which
    program is graded (``tests/repair/test_repair_first_turn.py``: why not the first message)."""
    cfg, problem = EnvConfig(turns=3), _problem()
    env = _evaluate([BAD, GOOD], cfg, problem)
    from rlvr.repair.verl_tool import repair_verl_rows

    row = repair_verl_rows([problem], cfg)[0]
    assert list(row["prompt"]) == env.messages[:1] == proto.initial_messages(problem, cfg)
    text = env.messages[0]["content"]
    assert "Return only the code" in text and "answers" not in text  # the task's own answer format, unchanged
    assert all(t.stdin.strip() not in text for t in problem.tests)  # no test in the prompt
    feedback = env.messages[2]["content"]
    assert "(2 of 3 answers left)" in feedback and "last program you wrote is the one graded" in feedback
    assert "run on the example tests" in feedback and "a failing one gets the results back" in feedback
    assert "python-run" in proto.instructions(EnvConfig(mode="interpreter", max_tool_calls=2))


def test_the_program_graded_is_the_last_one_submitted_in_both_paths(tmp_path, monkeypatch):
    """An episode that ends on text without code ("The solution passes.") is graded on the program it submitted
    before, by the evaluation and by the training reward alike (today: the evaluation scores it 'no code' and the
    reward scores the closing text, 0)."""
    replies, cfg, problem = [PARTIAL, "The solution passes."], EnvConfig(turns=2, turn_penalty=0.1), _problem()
    env = _evaluate(replies, cfg, problem)
    assert env.accepted and env.record()["final_verdict"] == "accepted"
    assert [t["hidden_verdict"] for t in env.turns] == ["accepted", "accepted"]
    out, row, _ = _train(tmp_path, monkeypatch, replies, cfg, problem)
    r = _reward(out, row)
    assert (r["status"], r["acc"]) == ("accepted", True) and r["score"] == pytest.approx(1.0 - 0.1)


def test_a_pass_after_feedback_earns_a_first_turn_pass_less_the_turn_penalty(tmp_path, monkeypatch):
    """repair.turn_penalty p: a first-turn pass scores 1, a pass after k feedback turns 1 - k p, a failure -k p; on
    verl (the agent loop's tool_rewards added by compute_score) and on the local engine (the rows of the
    environment's own contexts, sparse reward + turn_penalty_reward)."""
    from rlvr.reward.trl import make_reward_funcs
    from rlvr.train.local.repair import RepairContext, repair_rows, turn_penalty_reward

    p, problem = 0.25, _problem()
    cfg = EnvConfig(turns=3, turn_penalty=p)
    want = {"first_turn_pass": 1.0, "fix_after_feedback": 1.0 - p, "no_code_then_fix": 1.0 - 2 * p,
            "never_fixed": -2 * p}
    tok = _tokenizer(cfg, problem, [r for v in CASES.values() for r in v])
    for name, replies in CASES.items():
        out, row, _ = _train(tmp_path, monkeypatch, replies, cfg, problem, tok)
        r = _reward(out, row)
        assert r["score"] == pytest.approx(want[name]), (name, r)
        assert r["tool_reward"] == pytest.approx(want[name] - (1.0 if want[name] > 0 else 0.0)), name
        env = _evaluate(replies, cfg, problem)
        assert env.accepted == (want[name] > 0)
        # local engine: the context before the episode's last answer, rewarded on that answer
        ctx = RepairContext(problem, env.hidden, tuple((m["role"], m["content"]) for m in env.messages[:-1]),
                            len(env.turns))
        rows = repair_rows([ctx])
        completions = [[{"role": "assistant", "content": replies[-1]}]]
        sparse = make_reward_funcs("sparse", judge=HiddenOnlyJudge())[0]
        kw = {k: [v] for k, v in rows[0].items() if k != "prompt"}
        total = sparse(prompts=[rows[0]["prompt"]], completions=completions, **kw)[0] + \
            turn_penalty_reward(p)(completions=completions, **kw)[0]
        assert total == pytest.approx(want[name]), (name, total)


def test_a_scripted_rollout_builds_valid_turns_from_the_public_functions():
    """The hook for scripted rollouts: the protocol's public functions alone build the episode a policy sees, and
    the Episode state machine agrees with them (feedback text, end of episode, program graded)."""
    cfg, problem = EnvConfig(turns=3), _problem()
    from rlvr.repair import split_tests

    visible, _ = split_tests(problem, cfg.visible_tests)
    judge = FakeJudge()
    ep = proto.Episode(visible, judge, cfg)
    first = ep.step(BAD)
    assert first.message == proto.format_feedback(visible, judge.judge(visible, "print('bad')\n"), cfg, answers=1)
    assert ep.step("no code").message == proto.NO_CODE_FEEDBACK
    last = ep.step(GOOD)
    assert last.done and last.message is None and ep.final == "print('FIXED')\n" and ep.feedback_turns == 2
    assert proto.fenced(ep.final) == GOOD
    with pytest.raises(RuntimeError, match="t/1"):
        ep.step(GOOD)


def test_one_scripted_policy_drives_both_paths_for_several_problems(tmp_path, monkeypatch):
    """The hook for rehearsals: one policy (fixed replies per problem and turn, :mod:`rlvr.repair.scripted`) drives
    the evaluation (:class:`ScriptedGenerator`) and verl's agent loop (:class:`ScriptedServer`, one server for all
    episodes), and both give the same transcripts."""
    from rlvr.repair.scripted import ScriptedGenerator, ScriptedServer, replies_policy

    cfg = EnvConfig(turns=3)
    probs = [_problem("t/1"), _problem("t/2").model_copy(update={"statement": "Echo twice."})]
    ids = {proto.initial_messages(p, cfg)[0]["content"]: p.id for p in probs}
    policy = replies_policy({"t/1": [BAD, GOOD], "t/2": [GOOD]}, key=ids.__getitem__)
    envs = run_episodes(probs, ScriptedGenerator(policy), HiddenOnlyJudge(), cfg, SamplingParams(max_new_tokens=8))
    assert [len(e.turns) for e in envs] == [2, 1] and all(e.accepted for e in envs)
    tok = _tokenizer(cfg, probs[1], [BAD, GOOD])
    server = ScriptedServer(tok, policy, list(ids))
    for p, env in zip(probs, envs, strict=True):
        out, _, _ = _train(tmp_path, monkeypatch, [], cfg, p, tok, server=server)
        got = tok.decode(out.prompt_ids + out.response_ids, skip_special_tokens=False)
        assert got.rstrip("\n") == tok.apply_chat_template(env.messages, tokenize=False).rstrip("\n")
    with pytest.raises(KeyError, match="no replies"):
        replies_policy({}, key=str)("x", 0)
