"""The per-sample judge log of verl reward workers and its split into GRPO steps (rlvr.reward.judge_log)."""

from __future__ import annotations

import json
import math
import os

import pytest

from rlvr.judge.verdict import JudgeResult
from rlvr.reward import judge_log
from rlvr.reward import verl as rverl
from rlvr.reward.scorer import set_default_judge
from rlvr.train.verl import logs as vlogs

GT = '{"tests": [{"kind": "stdio", "stdin": "1 2", "stdout": "3"}]}'
CODE = "```python\nprint(sum(map(int, input().split())))\n```"


class _Judge:
    def judge_many(self, items):
        return [JudgeResult(verdict="accepted", passed=1, total=1, pass_ratio=1.0, judge_s=0.25) for _ in items]


@pytest.fixture
def fake_judge():
    set_default_judge(_Judge())
    yield
    set_default_judge(None)


def test_compute_score_appends_one_record_per_sample(tmp_path, fake_judge):
    info = {"split": "train", "index": 3, "id": "p3"}
    r = rverl.compute_score("demo", CODE, GT, info, reward_mode="sparse", judge_log=str(tmp_path / "judge"))
    rverl.compute_score("demo", CODE, GT, info, reward_mode="sparse", judge_log=str(tmp_path / "judge"))
    recs = judge_log.read_judge_log(tmp_path / "judge")
    assert r["score"] == 1.0
    assert [(x["judge_s"], x["split"], x["id"], x["status"]) for x in recs] == [(0.25, "train", "p3", "accepted")] * 2
    assert [(x["pass_ratio"], x["has_code"]) for x in recs] == [(1.0, True)] * 2
    rverl.compute_score("demo", "no program here", GT, info, reward_mode="sparse", judge_log=str(tmp_path / "judge"))
    last = judge_log.read_judge_log(tmp_path / "judge")[-1]
    assert (last["pass_ratio"], last["has_code"]) == (0.0, False)


def test_no_log_without_the_kwarg(tmp_path, fake_judge, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rverl.compute_score("demo", CODE, GT, {"split": "train"}, reward_mode="sparse")
    assert list(tmp_path.iterdir()) == []


def test_async_path_logs_too(tmp_path, fake_judge):
    import asyncio

    asyncio.run(rverl.compute_score_async("demo", CODE, GT, {"split": "train"}, reward_mode="sparse",
                                          judge_log=str(tmp_path)))
    assert len(judge_log.read_judge_log(tmp_path)) == 1


def test_unwritable_log_never_fails_the_reward(tmp_path, fake_judge):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = rverl.compute_score("demo", CODE, GT, None, reward_mode="sparse", judge_log=str(blocker / "sub"))
    assert r["score"] == 1.0


def test_records_are_assigned_to_the_step_whose_dump_follows_them():
    recs = [{"t": t, "judge_s": s, "split": sp} for t, s, sp in
            [(5.0, 9.0, "test"),            # validation before training: left out
             (10.0, 1.0, "train"), (19.0, 2.0, "train"),     # step 1 (dump at 20)
             (20.0, 0.5, "train"),                            # written at the dump's own second: still step 1
             (25.0, 4.0, "train"),                            # step 2 (dump at 30)
             (31.0, 8.0, "train")]]                           # after the last dump: unfinished step, dropped
    got = judge_log.judge_seconds_per_step(recs, {1: 20.0, 2: 30.0}, exclude_splits={"test"})
    zero = {"tool_parse_failures": 0, "sent": 0, "sandbox_errors": 0, "tool_sandbox_errors": 0}
    assert got == {1: {"judge_s": 3.5, "judge_wall_s": 3.5, "judged": 3, **zero, "sent": 3},
                   2: {"judge_s": 4.0, "judge_wall_s": 4.0, "judged": 1, **zero, "sent": 1}}


def test_each_step_counts_its_sandbox_errors_and_tool_failures():
    """Issue 42 item 5: per step, the samples sent to the judge (has_code), the sandbox_error ones among them and the
    episodes' tool calls that failed for the infrastructure's reasons; a sample without code is not sent."""
    recs = [{"t": 1.0, "judge_s": 0.1, "status": "sandbox_error", "has_code": True, "tool_sandbox_errors": 2},
            {"t": 2.0, "judge_s": 0.1, "status": "accepted", "has_code": True, "tool_sandbox_errors": 0},
            {"t": 3.0, "judge_s": 0.0, "status": "no_code", "has_code": False},
            {"t": 4.0, "judge_s": 0.1, "status": "sandbox_error", "has_code": True, "tool_sandbox_errors": 1}]
    got = judge_log.judge_seconds_per_step(recs, {7: 10.0})[7]
    assert (got["judged"], got["sent"], got["sandbox_errors"], got["tool_sandbox_errors"]) == (4, 3, 2, 3)


def test_judge_wall_seconds_count_concurrent_calls_once():
    """Eight samples judged at once for 2 s each: 16 summed judge seconds, 2 wall seconds (the wall-time share's
    numerator); a later lone call adds its own 1 s."""
    recs = [{"t": 12.0, "judge_s": 2.0, "split": "train"} for _ in range(8)] + [{"t": 15.0, "judge_s": 1.0}]
    got = judge_log.judge_seconds_per_step(recs, {1: 20.0})[1]
    assert got["judge_s"] == 17.0 and got["judge_wall_s"] == 3.0
    assert judge_log.union_seconds([(0, 2), (1, 3), (5, 6)]) == 4 and judge_log.union_seconds([]) == 0


def test_torn_last_line_is_skipped_and_bad_line_named(tmp_path):
    f = tmp_path / "h-1.jsonl"
    f.write_text(json.dumps({"t": 1.0, "judge_s": 0.1}) + "\n" + '{"t": 2')
    assert len(judge_log.read_judge_log(tmp_path)) == 1
    f.write_text('{"t": 1}\n' + json.dumps({"t": 1.0, "judge_s": 0.1}) + "\n")
    with pytest.raises(ValueError, match=r"h-1.jsonl:1"):
        judge_log.read_judge_log(tmp_path)


def test_step_rows_fill_judge_seconds_from_the_log(tmp_path):
    run = tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)
    (run / "judge").mkdir()
    for step, mtime in ((1, 100.0), (2, 200.0)):
        d = run / "rollouts" / f"{step}.jsonl"
        d.write_text(json.dumps({"score": 1.0, "uid": f"a_0_{step}"}) + "\n")
        os.utime(d, (mtime, mtime))
    times = ((50.0, 0.5), (150.0, 1.5), (160.0, 1.0))
    (run / "judge" / "h-1.jsonl").write_text(
        "".join(json.dumps({"t": t, "judge_s": s, "split": "train"}) + "\n" for t, s in times))
    log = tmp_path / "attempt-1.jsonl"
    log.write_text("".join(json.dumps({"step": s, "data": {"critic/score/mean": 0.5, "timing_s/gen": 1.0}}) + "\n"
                           for s in (1, 2)))
    rows = vlogs.step_rows([log], run, "dense")
    assert [(r["step"], r["judge_s"], r["judged"]) for r in rows] == [(1, 0.5, 1), (2, 2.5, 2)]
    assert "judged" in vlogs.GRPO_COLUMNS


def test_excluded_samples_and_tool_parse_failures_in_the_step_rows(tmp_path):
    """A step with an excluded sandbox error: verl logs critic/score/mean NaN and dumps the sample's score NaN; the
    curves take the scored samples' statistics. Tool-call parse failures from the judge log are summed per step."""
    run = tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)
    (run / "judge").mkdir()
    d = run / "rollouts" / "1.jsonl"
    d.write_text("".join(json.dumps({"score": s, "uid": f"a_{i}_0"}) + "\n"
                         for i, s in enumerate([1.0, 0.0, float("nan"), 0.5])))
    os.utime(d, (100.0, 100.0))
    (run / "judge" / "h-1.jsonl").write_text("".join(
        json.dumps({"t": 50.0, "judge_s": 0.1, "split": "train", "tool_parse_failures": k}) + "\n"
        for k in (0, 2, 0, 1)))
    log = tmp_path / "attempt-1.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": float("nan")}}) + "\n")
    row = vlogs.step_rows([log], run, "dense")[0]
    assert row["reward_mean"] == pytest.approx(0.5) and row["pass_ratio"] == pytest.approx(0.5)
    assert row["reward_std"] == pytest.approx(math.sqrt(1 / 6)) and row["accepted_rate"] == pytest.approx(1 / 3)
    assert row["zero_std_frac"] == 0.0 and row["tool_parse_failures"] == 3 and row["judged"] == 4


def test_validation_only_splits_are_left_out_of_the_step(tmp_path):
    from reward_fixtures import STDIO_SUM

    from rlvr.data.export import write_verl_parquet

    write_verl_parquet([STDIO_SUM.model_copy(update={"split": "train"})], tmp_path / "train.parquet")
    write_verl_parquet([STDIO_SUM.model_copy(update={"split": "dev"})], tmp_path / "val.parquet")
    assert vlogs.parquet_splits(tmp_path / "val.parquet") == {"dev"}
    run = tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)
    (run / "judge").mkdir()
    d = run / "rollouts" / "1.jsonl"
    d.write_text(json.dumps({"score": 0.0, "uid": "a_0_0"}) + "\n")
    os.utime(d, (100.0, 100.0))
    recs = ((10.0, 5.0, "dev"), (50.0, 0.5, "train"))
    (run / "judge" / "h-1.jsonl").write_text(
        "".join(json.dumps({"t": t, "judge_s": s, "split": sp}) + "\n" for t, s, sp in recs))
    log = tmp_path / "attempt-1.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 0.0}}) + "\n")
    row = vlogs.step_rows([log], run, "sparse", tmp_path / "train.parquet", tmp_path / "val.parquet")[0]
    assert (row["judge_s"], row["judged"]) == (0.5, 1)
    both = vlogs.step_rows([log], run, "sparse")[0]  # without the files nothing is known to be validation
    assert (both["judge_s"], both["judged"]) == (5.5, 2)


def test_a_run_whose_every_sample_was_sandbox_error_is_refused(tmp_path):
    run = tmp_path / "run"
    (run / "judge").mkdir(parents=True)
    log = tmp_path / "attempt-1.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 0.0}}) + "\n")
    recs = [{"t": 1.0, "judge_s": 0.01, "split": "train", "status": "sandbox_error"}] * 3
    (run / "judge" / "h-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(RuntimeError, match=r"judge: all 3 judged samples were sandbox_error"):
        vlogs.step_rows([log], run, "sparse")
    # a completion without code is scored without the judge: it does not hide a judge that never worked
    no_code = {**recs[0], "status": "syntax_error", "has_code": False}
    (run / "judge" / "h-3.jsonl").write_text(json.dumps(no_code) + "\n")
    with pytest.raises(RuntimeError, match=r"judge: all 3 judged samples were sandbox_error"):
        vlogs.step_rows([log], run, "sparse")
    # one sample the judge did run is enough: a run with some infrastructure errors is scored as usual
    (run / "judge" / "h-2.jsonl").write_text(json.dumps({**recs[0], "status": "wrong_answer"}) + "\n")
    assert [r["step"] for r in vlogs.step_rows([log], run, "sparse")] == [1]
