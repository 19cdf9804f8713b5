"""Repair training (unrolled multi-turn GRPO): contexts from the policy's own episodes, the hidden-test firewall on
the training rows, the turn penalty, one real trainer step, and the verl branch to the launcher boundary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from test_repair_env import BAD, GOOD, FakeJudge, Scripted, _problem

from rlvr.data.schema import from_ground_truth
from rlvr.repair import EnvConfig
from rlvr.repair.protocol import initial_messages
from rlvr.train.local.repair import (
    RepairTrainParams,
    collect_repair_contexts,
    first_turn_contexts,
    repair_rows,
    turn_penalty_reward,
    warmup_rows,
)

ROOT = Path(__file__).resolve().parents[2]


def test_contexts_are_the_policys_failures_and_rows_hide_hidden_tests():
    problems = [_problem("t/1"), _problem("t/2", public=True)]
    judge = FakeJudge()
    contexts, stats = collect_repair_contexts(problems, Scripted([BAD]), judge, EnvConfig(turns=3), samples=3,
                                              temperature=1.0)
    # a deterministic policy: the 3 samples of a problem give the same contexts, kept once (turn 2 and turn 3)
    assert sorted((c.problem.id, c.turn) for c in contexts) == [("t/1", 2), ("t/1", 3), ("t/2", 2), ("t/2", 3)]
    assert stats["episodes"] == 6 and stats["first_turn_visible_failures"] == 6 and stats["recovered"] == 0
    rows = repair_rows(contexts)
    for row, c in zip(rows, contexts, strict=True):
        prompt = json.dumps(row["prompt"])
        assert "HID_" not in prompt and f"VIS_IN_0_{c.problem.id}" in prompt  # feedback shows the visible test
        assert [m["role"] for m in row["prompt"]][-2:] == ["assistant", "user"] and len(row["prompt"]) == 2 * c.turn - 1
        gt = from_ground_truth(row["ground_truth"])  # the reward's problem: hidden tests only
        assert gt.tests and all(t.stdin.startswith("HID_") for t in gt.tests) and row["turn"] == c.turn
    # the hidden tests are judged once per episode (its final verdict, recorded only), never shown
    assert sum(p.tests[0].stdin.startswith("HID") for p in judge.judged) == stats["episodes"]
    assert not any("HID_" in json.dumps(c.chat()) for c in contexts)


def test_first_turn_success_gives_no_context_and_cap_per_problem():
    contexts, stats = collect_repair_contexts([_problem()], Scripted([GOOD]), FakeJudge(), EnvConfig(turns=3), 2, 1.0)
    assert contexts == [] and stats["first_turn_visible_failures"] == 0
    contexts, _ = collect_repair_contexts([_problem()], Scripted([BAD, GOOD]), FakeJudge(), EnvConfig(turns=3), 2,
                                          1.0, max_per_problem=1)
    assert [c.turn for c in contexts] == [2]


def test_feedback_can_restate_the_prompt_and_warmup_rows_target_the_reference():
    p = _problem("t/9").model_copy(update={"solutions": ["print('FIXED')"]})
    cfg = EnvConfig(turns=2, feedback_template="expected {expected} got {actual}\n\n{prompt}")
    contexts, _ = collect_repair_contexts([p], Scripted([BAD]), FakeJudge(), cfg, 1, 1.0)
    feedback = contexts[0].chat()[-1]["content"]
    assert feedback.startswith("expected OUT_0_t/9 got wrong") and feedback.endswith(contexts[0].chat()[0]["content"])
    assert "HID_" not in feedback
    rows = warmup_rows(contexts)
    assert rows == [{"prompt": contexts[0].chat(),
                     "completion": [{"role": "assistant", "content": "```python\nprint('FIXED')\n```"}]}]
    assert warmup_rows(collect_repair_contexts([_problem()], Scripted([BAD]), FakeJudge(), cfg, 1, 1.0)[0]) == []


def test_first_turn_contexts_hold_the_prompt_and_hidden_tests_only():
    p = _problem("t/5")
    (c,) = first_turn_contexts([p], EnvConfig(turns=3))
    assert c.turn == 1 and c.chat() == initial_messages(p, EnvConfig(turns=3))
    assert all(t.stdin.startswith("HID_") for t in c.hidden.tests)
    (row,) = repair_rows([c])
    assert row["turn"] == 1 and "HID_" not in json.dumps(row["prompt"])


def test_first_turn_contexts_skip_problems_that_need_feedback():
    # a feedback template's statement does not determine the answer: no first-turn prompt (rlvr.data.synthetic)
    from rlvr.data.synthetic import generate

    ps = generate(templates=["add", "judge_number"], min_constant=3, max_constant=4)
    ctx = first_turn_contexts(ps, EnvConfig(turns=3))
    assert [c.problem.id for c in ctx] == ["synthetic/add-3", "synthetic/add-4"]


def test_turn_penalty_reward():
    f = turn_penalty_reward(0.1)
    assert f(completions=["a", "b"], turn=[2, 3]) == pytest.approx([-0.1, -0.2])
    with pytest.raises(ValueError, match="turn"):
        f(completions=["a"])


def test_train_params_batch_check():
    with pytest.raises(ValueError, match="num_generations"):
        RepairTrainParams(num_generations=3, per_device_train_batch_size=8)
    assert RepairTrainParams(max_steps=0).max_steps == 0


@pytest.mark.slow
def test_one_real_repair_training_step(tmp_path, judge, monkeypatch):
    from rlvr.data.synthetic import completion_for, corpus_texts, generate
    from rlvr.model import build_tiny_model
    from rlvr.train.local.common import TrainCommon
    from rlvr.train.local.repair import run_repair_training

    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    problems = generate(templates=["add"], max_constant=4, n_tests=3)
    model = build_tiny_model(tmp_path / "m", corpus_texts(problems), hidden_size=32, layers=1, heads=2, kv_heads=1,
                             intermediate_size=64)
    policy = Scripted([completion_for("print(0)")])  # always wrong: every problem fails
    cfg = RepairTrainParams(max_steps=1, num_generations=2, per_device_train_batch_size=2, rollout_samples=1,
                            warmup_epochs=1, include_first_turn=False)
    common = TrainCommon(max_completion_length=8, report_to=["none"], logging_steps=1)
    out = tmp_path / "out"
    m = run_repair_training(cfg, EnvConfig(turns=2, turn_penalty=0.1), common, model, problems, judge, out,
                            tmp_path / "curves.tsv", gen=policy)
    assert m["steps"] == 1 and not m["skipped"] and m["rollouts"]["contexts"] == len(problems)
    assert m["warmup"]["rows"] == len(problems) and m["warmup"]["steps"] >= 1
    assert m["warmup"]["resumed_from_step"] == 0 and m["resumed_from_step"] == 0
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    header, *rows = (tmp_path / "curves.tsv").read_text().splitlines()
    assert "reward_mean" in header and "turn_penalty" in header and rows
    # reward = hidden verdict (a random model fails: 0) - 0.1 * (turn 2 - 1)
    assert float(rows[0].split("\t")[header.split("\t").index("reward_mean")]) == pytest.approx(-0.1)
    # a re-run finds the finished warm start and GRPO run in the cache: it reports the figures they recorded, so the
    # provenance file is byte-identical and only the cost file says what was resumed
    again = run_repair_training(cfg, EnvConfig(turns=2, turn_penalty=0.1), common, model, problems, judge,
                                tmp_path / "again", tmp_path / "again.tsv", gen=policy)
    assert again["warmup"]["resumed_from_step"] == m["warmup"]["steps"] and again["resumed_from_step"] == 1
    from rlvr.layout import write_metrics

    _, _, prov1 = write_metrics(tmp_path / "m1" / "metrics" / "repair.json", {"training": m})
    _, cost2, prov2 = write_metrics(tmp_path / "m2" / "metrics" / "repair.json", {"training": again})
    assert prov2.read_bytes() == prov1.read_bytes() and "resumed" not in prov1.read_text()
    assert json.loads(cost2.read_text())["training"]["warmup"]["resumed_from_step"] == m["warmup"]["steps"]
    m0 = run_repair_training(cfg.model_copy(update={"max_steps": 0}), EnvConfig(turns=2), common, model, problems,
                             judge, tmp_path / "copy", tmp_path / "c0.tsv", gen=policy)
    assert m0["skipped"] and (tmp_path / "copy" / "config.json").is_file()


def test_verl_branch_to_the_launcher(tmp_path, monkeypatch):
    pytest.importorskip("verl")
    pytest.importorskip("hydra")
    sys.path.insert(0, str(ROOT / "tests" / "train"))
    from test_repair_verl_tool import _compose
    from test_verl_launch import STEPS, FakeRunner

    from rlvr.data.synthetic import generate
    from rlvr.repair.eval import RepairParams
    from rlvr.repair.verl_run import run_repair_verl

    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    params = tmp_path / "params.yaml"
    params.write_text(f"verl: {{profile: {ROOT / 'profiles' / 'qwen7b_8xh100.yaml'}, train_batch_size: 16, "
                      "ppo_mini_batch_size: 8, judge_pool_workers: 12, judge_pool_shards: 3}\n")
    cfg = RepairParams(datasets=[], turns=3, turn_penalty=0.1,
                       train=RepairTrainParams(num_generations=8, per_device_train_batch_size=2,
                                               gradient_accumulation_steps=4, bf16=True))  # 2 x 4 x 8 = 8 x 8
    problems = generate(templates=["add"], n_tests=3)
    runner = FakeRunner(STEPS)
    seen = []  # the judge preflight runs before verl does
    m = run_repair_verl(cfg, params, "Qwen/X", problems[:4], problems[4:6], tmp_path / "models" / "repair",
                        tmp_path / "curves.tsv", runner=runner, check=lambda env, a: seen.append(len(runner.calls)))
    assert seen == [0]
    assert "run_dir" not in m and m["checkpoint"].startswith("<run>/")  # no path of this machine in the metrics
    run = next((tmp_path / "cache" / "train" / "repair").glob("*/agent_loops.yaml")).parent
    assert not (run / "tool_config.yaml").exists()  # the protocol's feedback is user turns, no verl tool
    (loop,) = yaml.safe_load((run / "agent_loops.yaml").read_text())
    assert loop["judge_pool"] == "node"  # the feedback is judged on the node's shared judge, and on
    # ... the same actors as the reward workers: the same budget and split (their names depend on the split)
    assert (loop["judge_pool_workers"], loop["judge_pool_shards"]) == (12, 3)
    assert loop["env"]["turns"] == 3 and loop["env"]["turn_penalty"] == 0.1
    argv = next(a for a, _ in runner.calls if "verl.trainer.main_ppo" in a)
    overrides = [a for a in argv if "=" in a]
    assert "actor_rollout_ref.rollout.agent.default_agent_loop=rlvr_tool_agent" in overrides
    key = "actor_rollout_ref.rollout.agent.agent_loop_config_path="
    loops = next(o.removeprefix(key) for o in overrides if o.startswith(key))
    assert Path(loops).is_file() and "FinalAnswerAgentLoop" in Path(loops).read_text()
    assert "actor_rollout_ref.model.path=Qwen/X" in overrides
    composed = _compose(overrides)  # the whole override list composes against the installed verl Hydra config
    assert composed.actor_rollout_ref.rollout.multi_turn.max_assistant_turns == 3
    assert composed.algorithm.adv_estimator == "rlvr_grpo"
    import pyarrow.parquet as pq

    rows = pq.read_table(run / "data" / "train.parquet").to_pylist()
    assert len(rows) == 4 and all(r["agent_name"] == "rlvr_tool_agent" for r in rows)
    vis = from_ground_truth(rows[0]["extra_info"]["repair_visible"])
    hid = from_ground_truth(rows[0]["reward_model"]["ground_truth"])
    assert len(vis.tests) == 1 and len(hid.tests) == 2 and vis.tests[0] not in hid.tests
    assert (tmp_path / "models" / "repair" / "verl_overrides.txt").is_file() and (tmp_path / "curves.tsv").is_file()
    # published: the optimizer state is dropped, and the same run again (e.g. the stage's eval failed after the
    # publish and DVC re-runs it) publishes the finished run without starting verl (as GRPO does)
    launched = sum("verl.trainer.main_ppo" in " ".join(a) for a, _ in runner.calls)
    m2 = run_repair_verl(cfg, params, "Qwen/X", problems[:4], problems[4:6], tmp_path / "models" / "repair",
                         tmp_path / "curves.tsv", runner=runner, check=None)
    assert sum("verl.trainer.main_ppo" in " ".join(a) for a, _ in runner.calls) == launched
    assert m2["steps"] == m["steps"] and "sandbox_error_share_max" in m2 and "tool_sandbox_errors" in m2


def test_verl_repair_records_attention_and_passes_the_turn_budget(tmp_path, monkeypatch, capsys):
    """Under verl the repair stage logs the attention backend and records it in its metrics (provenance, as the
    grpo stage does), and ``repair.turn_tokens`` reaches the agent loop's config, not only the episode size."""
    pytest.importorskip("verl")
    pytest.importorskip("hydra")
    sys.path.insert(0, str(ROOT / "tests" / "train"))
    from test_verl_launch import STEPS, FakeRunner

    from rlvr.data.synthetic import generate
    from rlvr.generate import SamplingParams
    from rlvr.layout import split_metrics
    from rlvr.repair.eval import RepairParams
    from rlvr.repair.verl_run import run_repair_verl
    from rlvr.train.verl.mapping import resolve_dynamic_bsz
    from rlvr.train.verl.overrides import load_profile, resolve_attention

    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    profile = ROOT / "profiles" / "qwen7b_8xh100.yaml"
    params = tmp_path / "params.yaml"
    params.write_text(f"verl: {{profile: {profile}, train_batch_size: 16, ppo_mini_batch_size: 8}}\n")
    cfg = RepairParams(datasets=[], turns=3, feedback_chars=500, turn_tokens=256,
                       sampling=SamplingParams(max_new_tokens=256),
                       train=RepairTrainParams(num_generations=8, per_device_train_batch_size=2,
                                               gradient_accumulation_steps=4, bf16=True,  # 2 x 4 x 8 = 8 x 8
                                               rollout_max_new_tokens=256))
    problems = generate(templates=["add"], n_tests=3)
    runner = FakeRunner(STEPS)
    m = run_repair_verl(cfg, params, "Qwen/X", problems[:4], problems[4:6], tmp_path / "models" / "repair",
                        tmp_path / "curves.tsv", runner=runner, check=None)
    hw = load_profile(str(profile))
    attn, rmpad = resolve_attention(hw)
    dyn = resolve_dynamic_bsz(hw, rmpad)
    assert m["attention"] == {"attn_implementation": attn, "use_remove_padding": rmpad, "use_dynamic_bsz": dyn}
    assert f"verl attention: {attn} (use_remove_padding={rmpad}, use_dynamic_bsz={dyn})" in capsys.readouterr().err
    scores, _, prov = split_metrics({"training": {"engine": "verl", **m}})  # the stage's report["training"]
    assert prov["training"]["attention"] == m["attention"] and "training" not in scores
    argv = next(a for a, _ in runner.calls if "verl.trainer.main_ppo" in a)
    key = "actor_rollout_ref.rollout.agent.agent_loop_config_path="
    loops = next(a.removeprefix(key) for a in argv if a.startswith(key))
    assert yaml.safe_load(Path(loops).read_text())[0]["turn_tokens"] == 256
    assert "data.max_response_length=1768" in argv  # 3 x 256 + 2 x 500: the episode
