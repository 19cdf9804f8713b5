"""Final eval stage (rlvr.eval.final): resumable evaluation (kill mid-run, re-run: same rows, no duplicates, only the
missing pairs regenerated), EVAL@budget, role check of tuning stages, model hash, phase discovery, run_eval outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr.config import ConfigError
from rlvr.data.schema import Problem, StdioTest, write_problems
from rlvr.eval.final import (
    EvalParams,
    budget_metrics,
    check_tuning_stages,
    dataset_roles,
    discover_phases,
    evaluate_resumable,
    model_hash,
    run_eval,
)
from rlvr.generate import Completion, GenerationStats, SamplingParams
from rlvr.judge.verdict import JudgeResult
from rlvr.layout import read_metrics_folder
from rlvr.report.summary import read_summary

PROBLEMS = [Problem(id=f"syn/{i}", source="syn", split="dev", statement=f"Print {i}.",
                    tests=[StdioTest(stdin="", stdout=str(i))]) for i in range(6)]


class Gen:
    """Answers ``print(i)`` for even i, ``print(-1)`` otherwise; sample j of task i has ``10*i + j`` tokens; can be
    told to crash after ``crash_after`` generated completions."""

    def __init__(self, crash_after: int | None = None):
        self.model_id, self.stats, self.crash_after, self.generated = "fake", GenerationStats(), crash_after, []

    def generate(self, prompts, n, sampling, ids=None):
        out = []
        for tid in ids:
            if self.crash_after is not None and len(self.generated) >= self.crash_after:
                raise RuntimeError("simulated crash")
            i = int(tid.split("/")[1])
            self.generated.append(tid)
            ans = i if i % 2 == 0 else -1
            out.append([Completion(f"```python\nprint({ans})\n```", 10 * i + j, "stop") for j in range(n)])
        return out


class Judge:
    version = "fake-judge/1"

    def __init__(self, judge_s: float = 0.01):
        self.judged, self.judge_s = 0, judge_s

    def judge_many(self, items):
        self.judged += len(items)
        out = []
        for p, code in items:
            ok = code.strip() == f"print({p.tests[0].stdout})"
            out.append(JudgeResult(verdict="accepted" if ok else "wrong_answer", passed=int(ok), total=1,
                                   pass_ratio=float(ok), judge_s=self.judge_s))
        return out


SAMPLING = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=32, seed=0)


def test_resume_after_crash_same_rows_no_duplicates(tmp_path):
    ref = evaluate_resumable(PROBLEMS, Gen(), Judge(), SAMPLING, 2, "m@h", tmp_path / "ref.jsonl", "v1",
                             chunk_tasks=2)
    journal = tmp_path / "j.jsonl"
    with pytest.raises(RuntimeError, match="simulated crash"):
        evaluate_resumable(PROBLEMS, Gen(crash_after=3), Judge(), SAMPLING, 2, "m@h", journal, "v1", chunk_tasks=2)
    partial = [json.loads(x) for x in journal.read_text().splitlines()]
    assert len(partial) == 4  # the first chunk (2 tasks x 2 samples) was journaled before the crash
    gen = Gen()
    rows = evaluate_resumable(PROBLEMS, gen, Judge(), SAMPLING, 2, "m@h", journal, "v1", chunk_tasks=2)
    assert gen.generated == [f"syn/{i}" for i in range(2, 6)]  # finished pairs were skipped
    strip = [{k: v for k, v in r.items() if k != "judge_s"} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k != "judge_s"} for r in ref]
    assert len({r["key"] for r in rows}) == len(rows) == 12
    # a third run generates and judges nothing
    gen3, judge3 = Gen(), Judge()
    again = evaluate_resumable(PROBLEMS, gen3, judge3, SAMPLING, 2, "m@h", journal, "v1", chunk_tasks=2)
    assert gen3.generated == [] and judge3.judged == 0 and again == strip
    # the journal holds no measured time: a resumed row carries none, a row judged in this run keeps it in memory
    assert not [r for r in partial if "judge_s" in r] and all(r["judge_s"] == 0.01 for r in rows[4:])
    # and once complete it is compact: the crashed-and-resumed journal is the uninterrupted one, byte for byte
    assert journal.read_bytes() == (tmp_path / "ref.jsonl").read_bytes()


def test_journal_is_compacted_to_the_current_keys_without_seconds(tmp_path):
    """A journal with a torn line, a duplicate row, another model's rows and an earlier version's judge seconds ends
    as one timing-free row per current key, the bytes a fresh run writes."""
    fresh = tmp_path / "fresh.jsonl"
    evaluate_resumable(PROBLEMS[:2], Gen(), Judge(), SAMPLING, 1, "m@h", fresh, "v1")
    journal = tmp_path / "j.jsonl"
    evaluate_resumable(PROBLEMS[:3], Gen(), Judge(), SAMPLING, 1, "other@h", journal, "v1")  # another model
    old = [json.loads(x) for x in fresh.read_text().splitlines()]
    with journal.open("a") as fh:
        for r in [old[0], old[0], old[1]]:
            fh.write(json.dumps({**r, "judge_s": 0.123}) + "\n")  # written by an earlier version
        fh.write('{"key": "torn')
    gen, judge = Gen(), Judge()
    evaluate_resumable(PROBLEMS[:2], gen, judge, SAMPLING, 1, "m@h", journal, "v1")
    assert gen.generated == [] and judge.judged == 0
    assert journal.read_bytes() == fresh.read_bytes()


def test_torn_journal_line_and_new_judge_version(tmp_path):
    journal = tmp_path / "j.jsonl"
    evaluate_resumable(PROBLEMS[:2], Gen(), Judge(), SAMPLING, 1, "m@h", journal, "v1")
    with journal.open("a") as fh:
        fh.write('{"key": "trunc')  # a crash in the middle of a write
    gen, judge = Gen(), Judge()
    rows = evaluate_resumable(PROBLEMS[:2], gen, judge, SAMPLING, 1, "m@h", journal, "v2")
    assert gen.generated == [] and judge.judged == 2  # completions reused, verdicts redone for the new judge
    assert {r["judge_version"] for r in rows} == {"v2"}


def test_key_depends_on_model_hash(tmp_path):
    a = evaluate_resumable(PROBLEMS[:1], Gen(), Judge(), SAMPLING, 1, "m@h1", tmp_path / "j.jsonl", "v1")
    gen = Gen()
    b = evaluate_resumable(PROBLEMS[:1], gen, Judge(), SAMPLING, 1, "m@h2", tmp_path / "j.jsonl", "v1")
    assert gen.generated == ["syn/0"] and a[0]["key"] != b[0]["key"]


def test_budget_counts_only_samples_within_budget():
    rows = [{"task_id": "a", "sample_index": j, "verdict": "accepted", "n_tokens": t} for j, t in enumerate([5, 50])]
    rows += [{"task_id": "b", "sample_index": 0, "verdict": "accepted", "n_tokens": 50},
             {"task_id": "b", "sample_index": 1, "verdict": "wrong_answer", "n_tokens": 1}]
    greedy = [r for r in rows if r["sample_index"] == 0]
    m = budget_metrics(greedy, rows, budget=10, ks=[1, 2])
    assert m["accepted@1"] == 0.5  # a's greedy (5 tokens) counts, b's (50 tokens) does not
    assert m["pass@1"] == pytest.approx(0.25) and m["pass@2"] == pytest.approx(0.5)
    assert budget_metrics(greedy, None, budget=100, ks=[1]) == {"budget_tokens": 100, "accepted@1": 1.0}


GOV = {"governance": {"datasets": [{"name": "mbpp", "role": "train", "splits": ["train"]},
                                   {"name": "mbpp", "role": "dev", "splits": ["validation"]},
                                   {"name": "humanevalplus:v0.1.10", "role": "test"}]}}


def test_roles_from_governance_params():
    roles = dataset_roles(GOV)
    assert roles("mbpp", ["validation"]) == {"dev"}
    assert roles("mbpp", None) == {"train", "dev"}
    assert roles("humanevalplus-v0.1.10", None) == {"test"}
    assert roles("synthetic", None) == set()


def test_tuning_stage_on_test_set_is_refused():
    ok = {**GOV, "baseline": {"datasets": [{"name": "mbpp", "splits": ["validation"]}]},
          "train": {"eval_sets": ["mbpp/validation"], "train_sets": ["mbpp/train"]}}
    check_tuning_stages(ok, ["baseline", "train"])
    bad = {**ok, "baseline": {"datasets": [{"name": "humanevalplus-v0.1.10"}]}}
    with pytest.raises(ConfigError, match=r"baseline\.datasets\[0\] -> humanevalplus-v0.1.10"):
        check_tuning_stages(bad, ["baseline", "train"])
    check_tuning_stages(bad, ["train"])  # not a tuning stage: allowed
    with pytest.raises(ConfigError, match=r"train\.eval_sets\[0\]"):
        check_tuning_stages({**GOV, "train": {"eval_sets": ["humanevalplus-v0.1.10/test"]}}, ["train"])


def _model(d: Path, weights: bytes = b"w") -> Path:
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(weights)
    return d


def test_model_hash_and_discovery(tmp_path):
    a = model_hash(_model(tmp_path / "models" / "base"))
    assert a["sha256"] == model_hash(tmp_path / "models" / "base")["sha256"]
    b = model_hash(_model(tmp_path / "other", b"x"))
    assert a["sha256"] != b["sha256"]
    _model(tmp_path / "models" / "grpo" / "seed-2")
    _model(tmp_path / "models" / "grpo" / "seed-10")
    hub = tmp_path / "models" / "sft"
    hub.mkdir(parents=True)
    (hub / "model.json").write_text('{"name": "Qwen/X"}')
    assert model_hash(hub)["id"] == "Qwen/X"
    cfg = EvalParams(datasets=[{"name": "syn"}])
    found, missing = discover_phases(cfg.phases, tmp_path)
    assert [n for n, _ in found] == ["baseline", "sft", "grpo_seed2", "grpo_seed10"]
    assert missing == ["dpo", "repair"]
    # the `seeds` param decides: a leftover seed folder is ignored, a missing seed is listed as not run
    found, missing = discover_phases(cfg.phases, tmp_path, seeds=[2, 3])
    assert [n for n, _ in found] == ["baseline", "sft", "grpo_seed2"]
    assert missing == ["dpo", "grpo_seed3", "repair"]
    with pytest.raises(FileNotFoundError):
        model_hash(tmp_path / "nothing")


def test_run_eval_writes_phase_files_and_summary(tmp_path):
    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)
    for d in ("base", "grpo/seed-1", "grpo/seed-2"):
        _model(tmp_path / "models" / d, d.encode())
    cfg = EvalParams(datasets=[{"name": "syn", "k": True}], n=2, ks=[1, 2], budget_tokens=25, bootstrap=50,
                     tuning_stages=["baseline"])
    params = {"governance": {"datasets": [{"name": "syn", "role": "dev"}]}}
    judge = Judge()
    judge.workers = 8  # a machine setting (RLVR_SANDBOX_WORKERS): not part of the protocol
    summary = run_eval(cfg, judge, lambda d: Gen(), tmp_path / "problems", tmp_path / "data" / "eval",
                       tmp_path / "metrics", params=params, root=tmp_path)
    assert summary["not_run"] == ["sft", "dpo", "repair"]
    m = read_metrics_folder(tmp_path / "metrics" / "eval_grpo_seed1")
    assert m["syn"]["accepted@1"] == 0.5 and m["syn"]["pass@2"] == 0.5 and m["syn"]["role"] == "dev"
    assert m["syn"]["eval@budget"]["accepted@1"] == pytest.approx(2 / 6)  # tasks 0 and 2 (tokens 0, 20 <= 25)
    ci = m["syn"]["ci"]["accepted@1"]
    assert ci["lo"] <= ci["value"] <= ci["hi"]
    proto = m["protocol"]
    assert proto["model"]["sha256"] and proto["prompt_template_sha256"] and proto["judge"]["version"] == "fake-judge/1"
    assert "workers" not in proto["judge"]
    assert {"torch", "transformers", "trl", "vllm", "rlvr"} <= set(proto["libraries"])
    pt = json.loads((tmp_path / "data" / "eval" / "grpo_seed1" / "per_task" / "syn.json").read_text())
    assert pt["syn/0"] == {"n": 2, "c": 2, "first": "accepted", "pass@1": 1.0, "pass@2": 1.0}
    assert summary["seeds"]["grpo"]["syn"]["accepted@1"] == {"mean": 0.5, "std": 0.0, "n": 2}
    assert read_summary(tmp_path / "metrics" / "eval.json") == summary


def test_summary_files_are_narrow_tables_whose_headline_keys_dvc_exp_show_keeps_bare(tmp_path, metrics_show_width):
    """The summary (headline, seed mean ± std) as scores files of a few columns each, in the committed run's shape (a
    long-named Test set scored greedily, a Dev set with three pass@k): `dvc metrics show` of any one of them and of
    the seed folders stays under 160 characters; the headline keeps its dataset-qualified keys
    (`headline.<dataset>.accepted@1`), which no other file has, so `dvc exp show` heads those columns with the key
    alone; the summary file itself holds no scores."""
    long = "humanevalplus-v0.1.10"
    write_problems(tmp_path / "problems" / f"{long}.jsonl", [p.model_copy(update={"id": f"{long}/{i}"})
                                                             for i, p in enumerate(PROBLEMS)])
    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)
    for d in ("base", "grpo/seed-1", "grpo/seed-2"):
        _model(tmp_path / "models" / d, d.encode())
    cfg = EvalParams(datasets=[{"name": long}, {"name": "syn", "k": True}], n=4, ks=[1, 2, 4],
                     bootstrap=20, tuning_stages=[])
    params = {"governance": {"datasets": [{"name": long, "role": "test"}, {"name": "syn", "role": "dev"}]}}
    metrics = tmp_path / "metrics" / "final"
    summary = run_eval(cfg, Judge(), lambda d: Gen(), tmp_path / "problems", tmp_path / "data", metrics,
                       params=params, root=tmp_path)
    assert read_summary(metrics / "eval.json") == summary
    assert not (metrics / "eval.json").exists()  # phases, not_run: provenance only
    cost = tmp_path / "metrics" / "cost" / "final"
    assert not (cost / "headline").exists() and not (cost / "seeds").exists()  # no empty parts: nothing for rlvr cost
    files = sorted(metrics.rglob("*.json"))
    assert {f.relative_to(metrics).parts[0] for f in files} == {
        "eval_baseline", "eval_grpo_seed1", "eval_grpo_seed2", "headline", "seeds"}
    for f in files:
        if f.relative_to(metrics).parts[0] in ("headline", "seeds"):
            assert metrics_show_width([f], tmp_path)[0] < 160, f
    for folder in (metrics / "seeds" / "grpo" / "mean", metrics / "seeds" / "grpo" / "std"):
        width, cols = metrics_show_width(sorted(folder.glob("*.json")), tmp_path)
        assert width < 160 and cols <= 8, (folder, width, cols)
    head = {f.name: set(_leaves(json.loads(f.read_text()))) for f in (metrics / "headline").glob("*.json")}
    assert head == {f"{long}.json": {f"headline.{long}.accepted@1", f"headline.{long}.pass@1"},
                    "syn.json": {f"headline.syn.{k}" for k in ("accepted@1", "pass@1", "pass@2", "pass@4")}}
    others = set().union(*(_leaves(json.loads(f.read_text())) for f in files if "headline" not in f.parts))
    assert not others & set().union(*head.values())
    mean = json.loads((metrics / "seeds" / "grpo" / "mean" / "syn.json").read_text())
    assert mean["accepted@1"] == {"mean": summary["seeds"]["grpo"]["syn"]["accepted@1"]["mean"]}  # n: provenance


def _leaves(obj: dict, prefix: str = "") -> set[str]:
    """Flattened leaf keys of a metrics file, as DVC names its columns (``a.b.c``)."""
    out: set[str] = set()
    for k, v in obj.items():
        out |= _leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}"}
    return out


def test_run_eval_writes_the_same_bytes_whatever_the_judge_took(tmp_path):
    """data/eval/final is a DVC-hashed output: two runs whose judge took 0.01 s and 3 s a sample write the same
    journals, samples and per-task arrays, and the same scores and provenance; only the cost file differs."""
    for d in ("base", "grpo/seed-1"):
        _model(tmp_path / "models" / d, d.encode())
    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)
    cfg = EvalParams(datasets=[{"name": "syn", "k": True}], n=2, ks=[1, 2], bootstrap=50)
    for name, secs in (("a", 0.01), ("b", 3.0)):
        run_eval(cfg, Judge(judge_s=secs), lambda d: Gen(), tmp_path / "problems", tmp_path / name / "data",
                 tmp_path / name / "metrics", params=GOV, root=tmp_path)

    def tree(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    a, b = tree(tmp_path / "a" / "data"), tree(tmp_path / "b" / "data")
    assert a == b and any("journal" in k for k in a) and any("samples" in k for k in a)
    ma, mb = tree(tmp_path / "a" / "metrics"), tree(tmp_path / "b" / "metrics")
    assert {k for k in ma if ma[k] != mb[k]} == {"cost/eval_baseline/syn.json", "cost/eval_grpo_seed1/syn.json"}
    assert read_metrics_folder(tmp_path / "b" / "metrics" / "eval_baseline")["syn"]["judge_s_mean"] == 3.0


def test_final_scores_are_one_file_per_dataset_so_a_phase_view_fits_a_terminal(tmp_path):
    """`dvc metrics show metrics/final/eval_<phase>` prints one row per dataset: each scores file holds one dataset's
    accepted@1, pass@k, pass_ratio and their CI bounds under short keys (no dataset name in a column), so the width
    does not grow with the datasets; the protocol is provenance only, and the folder reads back as the whole report."""
    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)
    write_problems(tmp_path / "problems" / "humanevalplus-v0.1.10.jsonl", PROBLEMS)
    _model(tmp_path / "models" / "base", b"base")
    cfg = EvalParams(datasets=[{"name": "syn", "k": True}, {"name": "humanevalplus-v0.1.10"}], n=2, ks=[1, 2],
                     bootstrap=20)
    run_eval(cfg, Judge(), lambda d: Gen(), tmp_path / "problems", tmp_path / "data", tmp_path / "metrics",
             params=GOV, root=tmp_path)
    folder = tmp_path / "metrics" / "eval_baseline"
    assert sorted(p.name for p in folder.iterdir()) == ["humanevalplus-v0.1.10.json", "syn.json"]
    for name in ("syn", "humanevalplus-v0.1.10"):
        keys = _leaves(json.loads((folder / f"{name}.json").read_text()))
        assert keys <= {"accepted@1", "pass@1", "pass@2", "pass_ratio_mean", *(f"ci.{m}.{b}" for m in (
            "accepted@1", "pass@1", "pass@2") for b in ("lo", "hi"))}, keys
        assert max(len(k) for k in keys) <= 16 and len(keys) <= 13
    whole = read_metrics_folder(folder)
    assert set(whole) == {"syn", "humanevalplus-v0.1.10", "protocol"} and whole["protocol"]["n"] == 2
    assert whole["protocol"]["enforce_eager"] is False
    assert whole["syn"]["dataset"]["n_problems"] == 6 and "judge_s_mean" in whole["syn"]
    assert not (tmp_path / "metrics" / "eval_baseline.json").exists()


def test_run_eval_refuses_test_set_in_tuning_stage(tmp_path):
    cfg = EvalParams(datasets=[{"name": "syn"}], tuning_stages=["baseline"])
    params = {**GOV, "baseline": {"datasets": [{"name": "humanevalplus-v0.1.10"}]}}
    with pytest.raises(ConfigError, match="only the eval stage"):
        run_eval(cfg, Judge(), lambda d: Gen(), tmp_path, tmp_path, tmp_path, params=params, root=tmp_path)


def test_greedy_must_be_greedy():
    with pytest.raises(ValueError, match="temperature must be 0"):
        EvalParams(datasets=[], greedy={"temperature": 0.5})


def test_headline_block_same_keys_for_every_phase():
    from rlvr.eval.final import headline_block

    phases = {"dpo": {"syn": {"role": "dev", "accepted@1": 0.25, "pass@1": 0.3, "ci": {}}},
              "grpo_seed1": {"syn": {"role": "dev", "accepted@1": 0.5, "pass@1": 0.5, "ci": {}}},
              "grpo_seed2": {"syn": {"role": "dev", "accepted@1": 0.75, "pass@1": 0.6, "ci": {}}}}
    summary = {"phases": phases}
    dpo = headline_block(summary, "dpo", [1])
    grpo = headline_block(summary, "grpo", [1])
    assert dpo == {"phase": "dpo", "seeds": 1, "syn": {"role": "dev", "accepted@1": 0.25, "pass@1": 0.3}}
    assert grpo == {"phase": "grpo", "seeds": 2, "syn": {"role": "dev", "accepted@1": 0.625, "pass@1": 0.55}}
    assert headline_block(summary, "grpo_seed2", [1])["syn"]["accepted@1"] == 0.75
    assert headline_block(summary, "repair", [1]) == {"phase": "repair", "not_run": True}


def test_headline_must_name_a_configured_phase():
    EvalParams(datasets=[], headline="grpo_seed3")  # a seed of a seeded phase: fine (may not have run)
    EvalParams(datasets=[], headline=None)
    with pytest.raises(ValueError, match=r"eval\.headline='gpro'"):
        EvalParams(datasets=[], headline="gpro")
    with pytest.raises(ValueError, match=r"eval\.headline"):
        EvalParams(datasets=[], headline="sft_seed1")  # sft is not seeded


def test_rerun_with_everything_journaled_loads_no_model_and_writes_headline(tmp_path):
    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)
    for d in ("base", "dpo", "grpo/seed-1"):
        _model(tmp_path / "models" / d, d.encode())
    params = {"governance": {"datasets": [{"name": "syn", "role": "dev"}]}}
    loaded: list[Path] = []

    def make_gen(d):
        loaded.append(d)
        return Gen()

    def run(headline):
        cfg = EvalParams(datasets=[{"name": "syn", "k": True}], n=2, ks=[1, 2], bootstrap=20,
                         tuning_stages=["baseline"], headline=headline)
        return run_eval(cfg, Judge(), make_gen, tmp_path / "problems", tmp_path / "data", tmp_path / "metrics",
                        params=params, root=tmp_path)

    first = run("grpo")
    assert len(loaded) == 3 and first["headline"]["phase"] == "grpo" and first["headline"]["seeds"] == 1
    def phase_files():  # scores and provenance; the cost part holds this run's judge seconds
        return {str(p): p.read_text() for p in (tmp_path / "metrics").rglob("eval_*/*.json") if "cost" not in p.parts}

    before = phase_files()
    assert before
    again = run("dpo")
    assert len(loaded) == 3  # every row resumed from the journals: no model was built
    assert again["headline"] == {"phase": "dpo", "seeds": 1, "syn": {k: first["phases"]["dpo"]["syn"][k]
                                                                      for k in ("role", "accepted@1", "pass@1",
                                                                                "pass@2")}}
    # only the headline differs, so `dvc exp diff` between the two runs lists just the headline keys
    assert phase_files() == before
    assert {k: v for k, v in again.items() if k != "headline"} == {k: v for k, v in first.items() if k != "headline"}


def test_role_of_a_dataset_governance_does_not_list_comes_from_its_split(tmp_path):
    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)  # split "dev", not in governance.datasets
    _model(tmp_path / "models" / "base")
    cfg = EvalParams(datasets=[{"name": "syn"}], n=1, ks=[1], bootstrap=10, tuning_stages=[], headline=None)
    summary = run_eval(cfg, Judge(), lambda d: Gen(), tmp_path / "problems", tmp_path / "data", tmp_path / "metrics",
                       params={}, root=tmp_path)
    assert summary["phases"]["baseline"]["syn"]["role"] == "dev" and "headline" not in summary


class BrokenJudge(Judge):
    """Every verdict ``sandbox_error`` (a judge that cannot reach its sandbox)."""

    def judge_many(self, items):
        self.judged += len(items)
        return [JudgeResult(verdict="sandbox_error", passed=0, total=1, pass_ratio=0.0, judge_s=0.0,
                            message="sandbox failure: down") for _ in items]


def test_run_eval_writes_no_metrics_when_the_judge_failed_and_rejudges_on_resume(tmp_path):
    from rlvr.judge.preflight import GuardedJudge, SandboxErrorShareExceeded

    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)
    _model(tmp_path / "models" / "base", b"base")
    cfg = EvalParams(datasets=[{"name": "syn"}], bootstrap=20, tuning_stages=[])
    params = {"governance": {"datasets": [{"name": "syn", "role": "dev"}]}}
    args = (tmp_path / "problems", tmp_path / "data", tmp_path / "metrics")
    with pytest.raises(SandboxErrorShareExceeded, match=r"eval baseline/syn: 6 of 6 verdicts \(100\.0%\)"):
        run_eval(cfg, GuardedJudge(BrokenJudge(), 0.05), lambda d: Gen(), *args, params=params, root=tmp_path)
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "data" / "baseline" / "per_task").exists()
    # the journal kept the completions: the re-run with a working judge judges them again, generates nothing
    gen, judge = Gen(), Judge()
    run_eval(cfg, GuardedJudge(judge, 0.05), lambda d: gen, *args, params=params, root=tmp_path)
    assert gen.generated == [] and judge.judged == 6
    assert json.loads((tmp_path / "metrics" / "eval_baseline" / "syn.json").read_text())["accepted@1"] == 0.5


def test_rows_of_another_vllm_engine_are_generated_again(tmp_path):
    """enforce_eager is in the recorded protocol, so it is in the journal key too (rlvr.eval.provenance.engine_tag):
    rows generated with CUDA graphs are not reported under an eager protocol, and the hf backend's keys are the bare
    model tag."""
    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)
    _model(tmp_path / "models" / "base", b"base")
    params = {"governance": {"datasets": [{"name": "syn", "role": "dev"}]}}
    args = (tmp_path / "problems", tmp_path / "data", tmp_path / "metrics")

    def run(**kw):
        gen = Gen()
        cfg = EvalParams(datasets=[{"name": "syn"}], bootstrap=20, tuning_stages=[], **kw)
        run_eval(cfg, Judge(), lambda d: gen, *args, params=params, root=tmp_path)
        return len(gen.generated), read_metrics_folder(tmp_path / "metrics" / "eval_baseline")["protocol"]

    assert run(backend="vllm")[0] == 6
    assert run(backend="vllm")[0] == 0  # same engine: every row from the journal
    n, proto = run(backend="vllm", enforce_eager=True)
    assert n == 6 and proto["enforce_eager"] is True and proto["backend"] == "vllm"
    assert run(backend="hf")[0] == 6
    assert run(backend="hf")[0] == 0


def test_engine_tag():
    from rlvr.eval.provenance import engine_tag

    assert engine_tag("base@ab", "hf", False) == "base@ab" == engine_tag("base@ab", "openai")
    assert engine_tag("base@ab", "vllm") == "base@ab#vllm"
    assert engine_tag("base@ab", "vllm", True, 2) == "base@ab#vllm-eager-tp2"


def test_dataset_roles_uses_the_governance_slug():
    """dataset_roles reads slugs with rlvr.data.bundled.canonical_name (rlvr.data.governance, which defines
    dataset_slug, imports datasketch, which the GPU machine lacks): the two must agree."""
    from rlvr.data.bundled import canonical_name
    from rlvr.data.governance import dataset_slug
    from rlvr.eval.final_params import dataset_roles

    for spec in ("humanevalplus", "mbppplus:v0.2.0", "codecontests", "synthetic"):
        assert canonical_name(spec) == dataset_slug(spec)
    roles = dataset_roles({"governance": {"datasets": [{"name": "humanevalplus", "role": "test"}]}})
    assert roles(dataset_slug("humanevalplus")) == {"test"}


def test_cost_reports_what_this_run_generated_and_nothing_when_resumed(tmp_path):
    """The final eval's cost part carries the generation wall time and throughput of the rows generated in this run
    (it was ``null`` even when every row was generated); a re-run that resumes every row reports none."""
    write_problems(tmp_path / "problems" / "syn.jsonl", PROBLEMS)
    _model(tmp_path / "models" / "base", b"base")
    params = {"governance": {"datasets": [{"name": "syn", "role": "dev"}]}}
    cfg = EvalParams(datasets=[{"name": "syn", "k": True}], n=2, ks=[1, 2], bootstrap=20, tuning_stages=["baseline"])

    def run():
        run_eval(cfg, Judge(), lambda d: Gen(), tmp_path / "problems", tmp_path / "data", tmp_path / "metrics",
                 params=params, root=tmp_path)
        return read_metrics_folder(tmp_path / "metrics" / "eval_baseline")["syn"]

    m = run()
    assert m["gen_wall_s"] > 0 and m["throughput_samples_per_s"] == pytest.approx(6 / m["gen_wall_s"])
    k = m["eval@k"]  # 6 tasks x 2 samples; sample j of task i has 10*i + j tokens
    assert k["gen_wall_s"] > 0 and k["throughput_tokens_per_s"] == pytest.approx(306 / k["gen_wall_s"])
    again = run()
    assert again["gen_wall_s"] is None and again["throughput_samples_per_s"] is None
    assert again["eval@k"]["gen_wall_s"] is None


def test_generation_time_leaves_out_loading_the_model(tmp_path):
    """The final eval's generator is built on first use (a vLLM engine: seconds); that start-up is not generation."""
    import time

    from rlvr.eval.final import _LazyGenerator
    from rlvr.eval.resumable import GenStats

    START_S = 1.5  # well above what a loaded CI machine takes for two fake samples

    def slow_factory(d):
        time.sleep(START_S)
        return Gen()

    stats = GenStats()
    evaluate_resumable(PROBLEMS[:2], _LazyGenerator(slow_factory, tmp_path), Judge(), SAMPLING, 1, "m@h",
                       tmp_path / "j.jsonl", "v1", stats=stats)
    # generation by the fake is microseconds; a wall_s that counted the start-up would be >= START_S
    assert stats.samples == 2 and stats.tokens == 10 and 0 < stats.wall_s < START_S
