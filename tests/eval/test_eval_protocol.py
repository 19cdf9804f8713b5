"""evaluate() end to end with a fake generator and a fake judge: rows, keys, no-code handling, resume, QA logs,
per-task arrays; baseline runner with the samples backend; wandb wrapper disabled/offline switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr.data.schema import AssertTest, Problem, StdioTest
from rlvr.eval import evaluate, log_metrics
from rlvr.eval.baseline import BaselineParams, run_baseline
from rlvr.generate import Completion, GenerationStats, SamplingParams
from rlvr.judge.verdict import VERDICTS, JudgeResult, TestResult

P1 = Problem(id="humaneval/HumanEval/0", source="humaneval", split="test", statement="Add.",
             starter_code="def add(a, b):\n", entry_point="add",
             tests=[AssertTest(code="assert candidate(1, 2) == 3"), AssertTest(code="assert candidate(0, 0) == 0")])
P2 = Problem(id="cc/1", source="cc", split="train", statement="Echo.", tests=[StdioTest(stdin="1", stdout="1")])


class FakeGenerator:
    """Answers from a table {problem statement: [texts]}; counts calls."""

    def __init__(self, answers: dict[str, list[str]]):
        self.answers = answers
        self.model_id = "fake-model"
        self.stats = GenerationStats()
        self.calls: list[list[str]] = []

    def generate(self, prompts, n, sampling, ids=None):
        self.calls.append(list(ids))
        out = []
        for pr in prompts:
            key = next(k for k in self.answers if k in pr[0]["content"])
            out.append([Completion(t, n_tokens=len(t), finish_reason="stop") for t in self.answers[key][:n]])
        return out


class FakeJudge:
    """``accepted`` if the code contains 'GOOD', ``wrong_answer`` with a message for 'BAD', else runtime_error."""

    def __init__(self, slowdown: float = 1.0):
        self.seen: list[tuple[str, str]] = []
        self.slowdown = slowdown  # a busier machine: every judge second takes longer

    def judge_many(self, items):
        self.seen.extend((p.id, code) for p, code in items)
        res = []
        s = self.slowdown
        for _, code in items:
            if "GOOD" in code:
                res.append(JudgeResult(verdict="accepted", passed=1, total=1, pass_ratio=1.0, judge_s=0.5 * s))
            elif "BAD" in code:
                tests = [TestResult(index=0, verdict="accepted"),
                         TestResult(index=1, verdict="wrong_answer", message="expected 0, got 1")]
                res.append(JudgeResult(verdict="wrong_answer", passed=1, total=2, pass_ratio=0.5, judge_s=0.25 * s,
                                       tests=tests))
            else:
                res.append(JudgeResult(verdict="runtime_error", passed=0, total=1, pass_ratio=0.0, judge_s=0.1 * s,
                                       message="ZeroDivisionError"))
        return res


ANSWERS = {
    "Add.": ["```python\ndef add(a, b):\n    return a + b  # GOOD\n```", "    return a - b  # BAD\n",
             "no idea"],
    "Echo.": ["```python\nprint(1/0)\n```", "```python\nprint(input())  # GOOD\n```", "```cpp\nint x;\n```"],
}


def test_evaluate_end_to_end(tmp_path):
    gen, judge = FakeGenerator(ANSWERS), FakeJudge()
    sp = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=32, seed=1)
    m = evaluate([P1, P2], gen, judge, sp, tmp_path, n=3, ks=[1, 2])
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["sample_index"]) for r in rows] == [(p, i) for p in (P1.id, P2.id) for i in range(3)]
    assert len({r["key"] for r in rows}) == 6
    v = [r["verdict"] for r in rows]
    assert v == ["accepted", "wrong_answer", "syntax_error", "runtime_error", "accepted", "syntax_error"]
    # body continuation got the starter code; no-code samples never reached the judge
    assert rows[1]["code"].startswith("def add(a, b):\n") and len(judge.seen) == 4
    assert rows[1]["message"] == "expected 0, got 1" and rows[3]["message"] == "ZeroDivisionError"
    assert rows[2]["message"] == "no code found in completion" and rows[2]["total"] == 2
    assert not [r for r in rows if "judge_s" in r]  # measured seconds: in the metrics (cost), not the hashed rows
    assert m["judge_s_mean"] == pytest.approx((0.5 + 0.25 + 0 + 0.1 + 0.5 + 0) / 6)  # no-code samples count 0 s
    assert rows[0]["prompt"][0]["role"] == "user" and rows[0]["model"] == "fake-model"
    assert m["n_tasks"] == 2 and m["n_samples"] == 6 and m["greedy"] is False
    assert m["accepted@1"] == pytest.approx(0.5)
    assert m["pass@1"] == pytest.approx(1 / 3) and m["pass@2"] == pytest.approx(1 - 1 / 3)
    assert m["verdicts"]["syntax_error"]["count"] == 2
    assert m["exec_success_rate"] == pytest.approx(3 / 6)
    assert m["n_solved"] == 2 and m["resumed_tasks"] == 0
    per_task = json.loads((tmp_path / "per_task.json").read_text())
    assert per_task[P1.id] == {"n": 3, "c": 1, "first": "accepted", "pass@1": pytest.approx(1 / 3),
                               "pass@2": pytest.approx(2 / 3)}
    assert sorted(p.stem for p in (tmp_path / "qa").iterdir()) == sorted(VERDICTS)
    qa = json.loads((tmp_path / "qa" / "wrong_answer.jsonl").read_text())
    assert qa["completion"] == "    return a - b  # BAD\n" and qa["message"] == "expected 0, got 1"


def _tree(root):
    """{relative path: bytes} of every file under ``root``."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_inputs_write_the_same_bytes_whatever_the_judge_took(tmp_path):
    """The samples, per-task arrays and QA logs are a DVC-hashed output: a run on a busy machine (every judge call 7x
    slower) writes the same bytes; only the cost metrics (judge seconds) differ."""
    sp = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=32, seed=1)
    fast = evaluate([P1, P2], FakeGenerator(ANSWERS), FakeJudge(), sp, tmp_path / "a", n=3, ks=[1, 2])
    slow = evaluate([P1, P2], FakeGenerator(ANSWERS), FakeJudge(slowdown=7.0), sp, tmp_path / "b", n=3, ks=[1, 2])
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b") and len(_tree(tmp_path / "a")) > 3
    assert slow["judge_s_mean"] == pytest.approx(7 * fast["judge_s_mean"]) and fast["judge_s_mean"] > 0


def test_evaluate_resumes_generation_but_rejudges(tmp_path):
    sp = SamplingParams()
    gen = FakeGenerator(ANSWERS)
    evaluate([P1], gen, FakeJudge(), sp, tmp_path)
    gen2, judge2 = FakeGenerator(ANSWERS), FakeJudge()
    m = evaluate([P1, P2], gen2, judge2, sp, tmp_path)
    assert gen2.calls == [[P2.id]]  # P1 resumed from samples.jsonl
    assert {pid for pid, _ in judge2.seen} == {P1.id, P2.id}  # verdicts recomputed for every row
    assert m["resumed_tasks"] == 1 and m["n_tasks"] == 2
    # a different sampling config changes the keys: nothing resumed
    gen3 = FakeGenerator(ANSWERS)
    evaluate([P1, P2], gen3, FakeJudge(), SamplingParams(max_new_tokens=7), tmp_path)
    assert gen3.calls == [[P1.id, P2.id]]


def test_evaluate_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="k in"):
        evaluate([P1], FakeGenerator(ANSWERS), FakeJudge(), SamplingParams(), tmp_path, n=1, ks=[2])
    with pytest.raises(ValueError, match="duplicate"):
        evaluate([P1, P1], FakeGenerator(ANSWERS), FakeJudge(), SamplingParams(), tmp_path)


def test_run_baseline_with_samples_backend(tmp_path):
    pdir = tmp_path / "problems"
    pdir.mkdir()
    test_p = P1.model_copy(update={"id": "humaneval/HumanEval/1", "split": "test"})
    train_p = P1.model_copy(update={"split": "train"})
    (pdir / "humaneval.jsonl").write_text(train_p.model_dump_json() + "\n" + test_p.model_dump_json() + "\n")
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/1", "completion": "    return a + b  # GOOD\n"}) + "\n")
    cfg = BaselineParams.model_validate({"backend": "samples", "samples": {"humaneval": str(samples)},
                                         "datasets": [{"name": "humaneval", "splits": ["test"]}]})
    rep = run_baseline(cfg, FakeJudge(), pdir, tmp_path / "out")
    assert rep["humaneval"]["accepted@1"] == 1.0 and rep["humaneval"]["n_tasks"] == 1
    assert rep["protocol"]["sampling"]["temperature"] == 0.0 and rep["protocol"]["backend"] == "samples"
    assert rep["protocol"]["enforce_eager"] is False  # part of the protocol: it can change the decoding kernels
    assert (tmp_path / "out" / "samples" / "humaneval.jsonl").is_file()
    assert (tmp_path / "out" / "qa" / "humaneval" / "accepted.jsonl").read_text().count("\n") == 1
    assert (tmp_path / "out" / "per_task" / "humaneval.json").is_file()
    missing = BaselineParams.model_validate({"backend": "samples", "samples": {"mbpp": str(samples)},
                                             "datasets": [{"name": "mbpp"}]})
    with pytest.raises(FileNotFoundError, match=r"mbpp\.jsonl"):
        run_baseline(missing, FakeJudge(), pdir, tmp_path / "out2")


def test_baseline_params_validation():
    with pytest.raises(ValueError, match="base_url"):
        BaselineParams.model_validate({"backend": "openai", "datasets": [{"name": "x"}]})
    with pytest.raises(ValueError, match="samples file"):
        BaselineParams.model_validate({"backend": "samples", "datasets": [{"name": "x"}]})
    with pytest.raises(ValueError, match="ks"):
        BaselineParams.model_validate({"datasets": [{"name": "x"}], "n": 2, "ks": [1, 5]})
    with pytest.raises(ValueError):
        BaselineParams.model_validate({"datasets": [{"name": "x"}], "temperature": 0.2})  # extra key forbidden


def test_log_metrics_disabled_and_offline_default(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert log_metrics({"a": {"pass@1": 0.5}}) is None
    monkeypatch.delenv("WANDB_MODE")
    import rlvr.eval.tracking as tracking

    calls = {}

    class FakeRun:
        dir = str(tmp_path)

        def log(self, d):
            calls["log"] = d

        def finish(self):
            calls["finish"] = True

    class FakeWandb:
        @staticmethod
        def init(**kw):
            calls["init"] = kw
            return FakeRun()

    monkeypatch.setitem(__import__("sys").modules, "wandb", FakeWandb)
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    assert tracking.log_metrics({"a": {"pass@1": 0.5, "x": None}}, run_name="r") == str(tmp_path)
    assert __import__("os").environ["WANDB_MODE"] == "offline"
    assert calls["log"] == {"a/pass@1": 0.5} and calls["finish"] and calls["init"]["name"] == "r"


def test_run_baseline_keys_rows_by_model_content_not_path(tmp_path, monkeypatch):
    """Same model path: unchanged files → every completion reused; new weights at that path → all regenerated."""
    import rlvr.eval.baseline as baseline

    pdir = tmp_path / "problems"
    pdir.mkdir()
    (pdir / "cc.jsonl").write_text(P2.model_dump_json() + "\n")
    model = tmp_path / "models" / "base"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights v1")
    gens: list[FakeGenerator] = []

    def fake_generator(cfg, dataset=None):
        g = FakeGenerator(ANSWERS)
        g.model_id = cfg.model  # what the hf generator records: the path
        gens.append(g)
        return g

    monkeypatch.setattr(baseline, "make_baseline_generator", fake_generator)
    cfg = BaselineParams.model_validate({"backend": "hf", "model": str(model), "datasets": [{"name": "cc"}]})
    out = tmp_path / "out"
    first = run_baseline(cfg, FakeJudge(), pdir, out)
    assert gens[-1].calls == [[P2.id]] and first["cc"]["resumed_tasks"] == 0
    tag1 = first["protocol"]["model_tag"]
    assert tag1.startswith(f"{model}@") and len(tag1.split("@")[1]) == 16

    again = run_baseline(cfg, FakeJudge(), pdir, out)
    assert gens[-1].calls == [] and again["cc"]["resumed_tasks"] == 1  # unchanged model: reused
    assert again["protocol"]["model_tag"] == tag1

    (model / "model.safetensors").write_bytes(b"weights v2")  # re-published at the same path
    changed = run_baseline(cfg, FakeJudge(), pdir, out)
    assert gens[-1].calls == [[P2.id]] and changed["cc"]["resumed_tasks"] == 0  # regenerated
    assert changed["protocol"]["model_tag"] != tag1
    rows = [json.loads(x) for x in (out / "samples" / "cc.jsonl").read_text().splitlines()]
    assert {r["model"] for r in rows} == {changed["protocol"]["model_tag"]}


def test_run_baseline_hashes_the_model_once_for_all_datasets(tmp_path, monkeypatch):
    """One model, one content hash per run, however many datasets: hashing a 7B folder (15-30 GB of weights) cost
    ~30 s of sha256 per dataset when the tag was recomputed for each (the 4 x H100 stage evals). Every dataset's rows
    still carry that one tag."""
    import rlvr.eval.baseline as baseline
    import rlvr.eval.provenance as provenance

    pdir = tmp_path / "problems"
    pdir.mkdir()
    (pdir / "cc.jsonl").write_text(P2.model_dump_json() + "\n")
    (pdir / "humaneval.jsonl").write_text(P1.model_dump_json() + "\n")
    model = tmp_path / "models" / "sft"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    hashed: list[str] = []
    real_sha = provenance.sha256_file

    def counting_sha(path):
        hashed.append(Path(path).name)
        return real_sha(path)

    monkeypatch.setattr(provenance, "sha256_file", counting_sha)
    made: list[str | None] = []

    def fake_generator(cfg, dataset=None):
        made.append(dataset)
        g = FakeGenerator(ANSWERS)
        g.model_id = cfg.model
        return g

    monkeypatch.setattr(baseline, "make_baseline_generator", fake_generator)
    for backend in ("hf", "vllm"):
        hashed.clear()
        made.clear()
        cfg = BaselineParams.model_validate({"backend": backend, "model": str(model),
                                             "datasets": [{"name": "cc"}, {"name": "humaneval"}]})
        rep = run_baseline(cfg, FakeJudge(), pdir, tmp_path / f"out-{backend}")
        assert hashed.count("model.safetensors") == 1, hashed  # not once per dataset
        assert made == [None]  # one generator (engine) for every dataset
        tag = rep["protocol"]["model_tag"]
        assert isinstance(tag, str) and tag.startswith(f"{model}@")
        assert tag.endswith("#vllm") == (backend == "vllm")  # the engine is in the key (provenance.engine_tag)
        for name in ("cc", "humaneval"):
            rows = [json.loads(x) for x in (tmp_path / f"out-{backend}" / "samples" / f"{name}.jsonl").read_text()
                    .splitlines()]
            assert {r["model"] for r in rows} == {tag}


def test_samples_backend_tag_follows_file_content(tmp_path):
    from rlvr.eval.baseline import baseline_model_tag

    samples = tmp_path / "s.jsonl"
    samples.write_text("{}\n")
    cfg = BaselineParams.model_validate({"backend": "samples", "samples": {"x": str(samples)},
                                         "datasets": [{"name": "x"}]})
    gen = FakeGenerator(ANSWERS)
    t1 = baseline_model_tag(cfg, gen, "x")
    samples.write_text('{"task_id": "a"}\n')
    t2 = baseline_model_tag(cfg, gen, "x")
    assert t1.startswith("samples:s.jsonl@") and t1 != t2
    hub = BaselineParams.model_validate({"backend": "hf", "model": "Qwen/Qwen2.5-Coder-7B-Instruct",
                                         "datasets": [{"name": "x"}]})
    assert baseline_model_tag(hub, gen) == "Qwen/Qwen2.5-Coder-7B-Instruct"  # no local folder: the Hub id


def test_evaluate_default_key_is_model_content_not_path(tmp_path):
    """evaluate() called without model_tag (its default: the generator's model_id, a local folder path) must key rows
    by the folder's content: new weights published at the same path are regenerated, unchanged ones reused."""
    model = tmp_path / "models" / "sft"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights v1")
    out = tmp_path / "out"

    def run():
        g = FakeGenerator(ANSWERS)
        g.model_id = str(model)  # the hf generator records the folder path
        m = evaluate([P2], g, FakeJudge(), SamplingParams(), out)
        return g, m

    g, m = run()
    assert g.calls == [[P2.id]] and m["resumed_tasks"] == 0
    g, m = run()
    assert g.calls == [] and m["resumed_tasks"] == 1  # unchanged weights: reused
    (model / "model.safetensors").write_bytes(b"weights v2")  # re-published at the same path
    g, m = run()
    assert g.calls == [[P2.id]] and m["resumed_tasks"] == 0  # regenerated
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert {r["model"] for r in rows} == {f"{model}@" + rows[0]["model"].split("@")[1]}
    assert len(rows[0]["model"].split("@")[1]) == 16


def test_evaluate_default_key_of_a_hub_id_is_the_id(tmp_path):
    g = FakeGenerator(ANSWERS)
    g.model_id = "Qwen/Qwen2.5-Coder-7B-Instruct"  # no local folder: nothing to hash
    evaluate([P2], g, FakeJudge(), SamplingParams(), tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert {r["model"] for r in rows} == {"Qwen/Qwen2.5-Coder-7B-Instruct"}
