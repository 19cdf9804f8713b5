"""``reward_shaping.max_timeouts``: the training judge's timeout rule reaches every judge that scores rollouts
(issue 44: the judge took 59-82 % of a GRPO step; a looping rollout costs max_timeouts x the time limit).

On main there was no such param (``reward_shaping`` refused the key) and every training judge stopped after 3
timed-out tests; these tests fail there."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from rlvr.config import ConfigError, load_params
from rlvr.config.profiles import load_scale_profile
from rlvr.data.schema import Problem, StdioTest, ground_truth
from rlvr.judge.core import Judge
from rlvr.judge.preflight import GuardedJudge
from rlvr.judge.verdict import JudgeResult
from rlvr.reward import scorer
from rlvr.reward.modes import RewardConfig, RewardShaping, load_reward_config
from rlvr.reward.scorer import RewardScorer, ScoreItem
from rlvr.reward.trl import make_reward_funcs

try:  # absent on main: each test then fails on its own (not one collection error)
    from rlvr.reward import timeouts
except ImportError:  # pragma: no cover
    timeouts = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[2]
LOOP = "```python\nwhile True:\n    pass\n```"


def _problem(n_tests: int = 5, time_limit_s: float = 0.5) -> Problem:
    return Problem(id="t/loop", source="t", split="train", statement="echo", time_limit_s=time_limit_s,
                   tests=[StdioTest(stdin=str(i), stdout=str(i)) for i in range(n_tests)])


class RecordingJudge(Judge):
    """A :class:`rlvr.judge.Judge` without sandboxes: records the ``max_timeouts`` each call judged under."""

    def __init__(self) -> None:  # no pool: only the attributes a view copies
        self.max_timeouts = 3
        self.seen: list[int] = []

    def judge_many(self, items: Any, language: str = "python") -> list[JudgeResult]:
        self.seen.append(self.max_timeouts)
        return [JudgeResult(verdict="timeout", passed=0, total=len(p.tests), pass_ratio=0.0, judge_s=0.0)
                for p, _ in items]


class _Seen(list):
    """Shared by a recording judge and its views (a view is a shallow copy)."""


def _recording() -> RecordingJudge:
    j = RecordingJudge()
    j.seen = _Seen()
    return j


def test_params_default_is_the_judges_rule_and_the_7b_profiles_set_1():
    """params.yaml keeps today's rule (3); every shipped 7B profile, and the lent ones built on them, set 1."""
    assert load_reward_config(ROOT / "params.yaml").shaping.max_timeouts == 3
    assert timeouts.load_max_timeouts(ROOT / "params.yaml") == 3
    assert RewardShaping().max_timeouts == timeouts.DEFAULT_MAX_TIMEOUTS == Judge.__init__.__defaults__[1]
    files = [*ROOT.glob("profiles/*7b*.yaml"), *ROOT.glob("profiles/lent/*7b*.yaml"),
             ROOT / "profiles/lent/qwen0p5b_scripted_1xh200.yaml"]
    assert len(files) >= 9
    for f in files:
        assert load_scale_profile(f)["params"]["reward_shaping"]["max_timeouts"] == 1, f


@pytest.mark.parametrize("bad", [-1, "1", 1.5, True])
def test_a_bad_value_is_a_one_line_error(tmp_path, bad):
    """A negative, string, float or boolean value stops with one line naming the key (``rlvr check`` and the
    stages' loader); on main the key itself was refused as unknown, whatever its value."""
    from rlvr.check import check_params

    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["reward_shaping"]["max_timeouts"] = bad
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    errors, _ = check_params(path)
    mine = [e for e in errors if "max_timeouts" in e]
    assert len(mine) == 1 and "\n" not in mine[0] and "extra" not in mine[0].lower(), errors
    with pytest.raises(ConfigError, match="max_timeouts"):
        load_reward_config(path)
    with pytest.raises(ConfigError, match="reward_shaping"):
        timeouts.load_max_timeouts(path)  # the repair stage's reader (no reward mode needed)
    with pytest.raises(ConfigError, match=r"reward_shaping\.max_timeouts: expected an integer >= 0"):
        timeouts.reward_judge(_recording(), bad)


def test_the_value_reaches_the_local_reward_judge_and_eval_keeps_the_default():
    """The TRL reward judges under the value through a view of the stage's judge (same pool, same guard); the
    stage's judge itself, which the evaluations use, keeps its own rule; the default 3 uses the judge as it is."""
    inner = _recording()
    stage_judge = GuardedJudge(inner, max_share=0.5, window_steps=2)
    gt = ground_truth(_problem())
    [reward] = make_reward_funcs("dense", judge=stage_judge, shaping=RewardShaping(max_timeouts=1))
    assert reward(prompts=["p"], completions=[LOOP], ground_truth=[gt]) == [0.0]
    assert inner.seen == [1]
    assert stage_judge.counts["timeout"] == 1  # counted by the stage's own guard
    assert inner.max_timeouts == 3 and stage_judge.max_timeouts == 3  # the evaluation's judge is unchanged
    stage_judge.judge_many([(_problem(), "x")])
    assert inner.seen == [1, 3]
    [default] = make_reward_funcs("dense", judge=stage_judge)
    default(prompts=["p"], completions=[LOOP], ground_truth=[gt])
    assert inner.seen == [1, 3, 3]
    assert timeouts.reward_judge(stage_judge, 3) is stage_judge


def test_a_judge_that_cannot_apply_the_value_is_an_error_not_a_no_op():
    """A judge of unknown kind asked for another value than its own: one line naming the key; at the default it is
    used as it is. A remote judge in SandboxFusion fallback mode applies the value on this side."""
    from rlvr.judge.client import RemoteJudge

    class Fake:
        def judge_many(self, items):
            return []

    with pytest.raises(ConfigError, match=r"max_timeouts=1: the training judge .*Fake.* cannot apply it"):
        timeouts.reward_judge(Fake(), 1)
    fake = Fake()
    assert timeouts.reward_judge(fake, 3) is fake
    fallback = RemoteJudge("http://judge.invalid:8080", native=False)  # SandboxFusion /run_code: applied here
    assert timeouts.reward_judge(fallback, 1).max_timeouts == 1 and fallback.max_timeouts == 3
    fallback.close()


def _judge_server(info: dict[str, Any], bodies: list[dict[str, Any]]) -> Any:
    """A RemoteJudge of a scripted rlvr judge server whose ``/rlvr/info`` says ``info``; ``/rlvr/judge`` bodies are
    appended to ``bodies`` and answered with a timeout on every test."""
    import json

    import httpx

    from rlvr.judge.client import RemoteJudge

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rlvr/info":
            return httpx.Response(200, json=info)
        body = json.loads(request.content)
        bodies.append(body)
        n = len(body["problem"]["tests"])
        jr = JudgeResult(verdict="timeout", passed=0, total=n, pass_ratio=0.0, judge_s=0.0).model_dump(mode="json")
        rid = request.headers["x-request-id"]
        return httpx.Response(200, json={**jr, "request_id": rid}, headers={"X-Request-ID": rid})

    return RemoteJudge("http://judge.test:8080", transport=httpx.MockTransport(handler), backoff_s=0.01)


def test_an_rlvr_judge_server_is_sent_the_value_per_request():
    """``RLVR_SANDBOX_URL`` naming an rlvr judge server whose ``/rlvr/info`` says its rule (3): the reward's judge is a
    view sending ``max_timeouts`` with each ``/rlvr/judge`` request, the stage's judge sends nothing (on main:
    ConfigError for any value but 3, so a 7B profile could not train against a judge server)."""
    bodies: list[dict[str, Any]] = []
    with _judge_server({"judge_version": "x", "max_timeouts": 3}, bodies) as server:
        view = timeouts.reward_judge(server, 1)
        assert view is not server and view.max_timeouts == 1 and server.max_timeouts == 3
        assert timeouts.reward_judge(server, 1) is view and timeouts.reward_judge(server, 3) is server
        guard = GuardedJudge(server)
        guarded = timeouts.reward_judge(guard, 2)
        assert guarded.inner.max_timeouts == 2
        gt = ground_truth(_problem())
        [out] = RewardScorer(RewardConfig(mode="dense", shaping=RewardShaping(max_timeouts=1)), server).score(
            [ScoreItem(gt, "t", LOOP)])
        assert out.status == "timeout"
        server.judge(_problem(), "pass")
        guarded.judge(_problem(), "pass")
    assert [b.get("max_timeouts") for b in bodies] == [1, None, 2]


@pytest.mark.parametrize(("info", "value", "why"), [
    ({"judge_version": "x"}, 1, r"does not take a per-request max_timeouts"),  # a server older than the field
    ({"judge_version": "x", "max_timeouts": 3}, 4, r"has max_timeouts=3 and a request may only lower it \(1 to 3\)"),
    ({"judge_version": "x", "max_timeouts": 3}, 0, r"has max_timeouts=3"),
    ({"judge_version": "x", "max_timeouts": 1}, 2, r"has max_timeouts=1"),
])
def test_a_judge_server_that_cannot_apply_the_value_stops_the_stage_with_one_line(info, value, why):
    bodies: list[dict[str, Any]] = []
    with _judge_server(info, bodies) as server:
        with pytest.raises(ConfigError) as err:
            timeouts.reward_judge(server, value)
    msg = str(err.value)
    assert msg.startswith("reward_shaping.max_timeouts=") and "http://judge.test:8080" in msg and "\n" not in msg
    import re

    assert re.search(why, msg), msg
    assert bodies == []  # refused before any rollout was judged


def test_the_value_reaches_verls_reward_and_the_node_judge(tmp_path, monkeypatch):
    """verl's reward kwargs carry ``reward_shaping`` (max_timeouts included) from the params; ``compute_score``
    judges under it, and the node's shared judge is built with a factory whose judges stop after that many
    timeouts (the PEP 562 factory resolves to ``Judge(max_timeouts=n)``)."""
    from rlvr.reward import verl as rverl
    from rlvr.train.local.grpo import GRPOParams
    from rlvr.train.verl.overrides import VerlParams, grpo_overrides, load_profile

    profile = ROOT / "profiles/qwen7b_4xh100.yaml"
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({**raw, "profile": str(profile)}), encoding="utf-8")
    shaping = load_params(params)["reward_shaping"]  # what the stages pass as the reward kwargs (params.raw())
    assert shaping["max_timeouts"] == 1
    ov = grpo_overrides(GRPOParams(), VerlParams(), load_profile(profile), train_files=tmp_path / "t.parquet",
                        val_files=tmp_path / "v.parquet", model_path="m", reward_mode="dense",
                        ckpt_dir=tmp_path / "c", experiment_name="grpo-seed1", rollout_data_dir=tmp_path / "r",
                        reward_shaping=shaping)
    kw = next(o for o in ov if o.startswith("+reward.custom_reward_function.reward_kwargs.reward_shaping="))
    assert "max_timeouts:1" in kw.replace(" ", "").replace("'", "").replace('"', ""), kw

    inner = _recording()
    prev = scorer.set_default_judge(inner)
    try:
        gt = ground_truth(_problem())
        out = rverl.compute_score("t", LOOP, gt, reward_shaping={"max_timeouts": 1})
        assert out["status"] == "timeout" and inner.seen == [1]
        rverl.compute_score("t", LOOP, gt, reward_shaping={})
        assert inner.seen == [1, 3]
    finally:
        scorer.set_default_judge(prev)

    built: dict[str, Any] = {}

    class FakeNodeJudge:
        def __init__(self, workers=None, factory="rlvr.judge.core:Judge", shards=None, max_timeouts=3):
            built.update(workers=workers, shards=shards, factory=factory, max_timeouts=max_timeouts)
            self.max_timeouts = max_timeouts

    import ray

    import rlvr.judge.ray_pool as ray_pool

    monkeypatch.setattr(ray_pool, "NodeJudge", FakeNodeJudge)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(rverl, "_node_pool_checked", False)
    monkeypatch.delenv("RLVR_SANDBOX_URL", raising=False)
    prev = scorer.set_default_judge(None)
    try:
        assert rverl.use_node_pool({"judge_pool": "node", "judge_pool_workers": 8,
                                    "reward_shaping": {"max_timeouts": 1}})
        node = scorer._default_judge
        assert built == {"workers": 8, "shards": None, "factory": "rlvr.reward.timeouts:judge_max_timeouts_1",
                         "max_timeouts": 1}  # the value names the node's actors (another value: other actors)
        assert node.max_timeouts == 1 and timeouts.reward_judge(node, 1) is node
        with pytest.raises(ConfigError, match="cannot apply"):
            timeouts.reward_judge(node, 2)
    finally:
        scorer.set_default_judge(prev)
    module, _, name = built["factory"].partition(":")
    factory = getattr(importlib.import_module(module), name)
    assert factory.func is Judge and factory.keywords == {"max_timeouts": 1}
    assert timeouts.node_factory(3) == "rlvr.judge.core:Judge"  # the default: today's actors


def test_repair_feedback_judge_gets_the_value_under_verl():
    """verl repair: the agent loop's config carries the value to the feedback judge (written only when not the
    default, so a default run's config is as before)."""
    from rlvr.repair.protocol import EnvConfig
    from rlvr.repair.verl_config import agent_loop_config

    [entry] = agent_loop_config(env=EnvConfig(), judge_pool="node", judge_max_timeouts=1)
    assert entry["judge_max_timeouts"] == 1
    [entry] = agent_loop_config(env=EnvConfig(), judge_pool="node")
    assert "judge_max_timeouts" not in entry


def test_stages_pass_the_value_to_local_grpo_and_repair(tmp_path, monkeypatch):
    """The grpo stage (engine local) hands ``reward_shaping.max_timeouts`` to ``run_grpo``; the repair stage to
    ``run_repair_training``."""
    def stage(name: str):
        spec = importlib.util.spec_from_file_location(f"stage_{name}", ROOT / "stages" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    from rlvr.data.schema import write_problems

    monkeypatch.chdir(tmp_path)
    problems = [Problem(id=f"lc/{i}", source="lc", split="train", statement="s", solutions=["print(1)"],
                        tests=[StdioTest(stdin=str(j), stdout="1") for j in range(5)], meta={"role": "train"})
                for i in range(2)]
    write_problems(tmp_path / "gov" / "problems" / "lc.jsonl", problems)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "engine": "local", "reward": "dense", "seeds": [1],
        "reward_shaping": {"max_timeouts": 1, "timeout_penalty": 0.7, "sandbox_error": "zero"},
        "judge": {"preflight": False},
        "manifests": {"verl_train": ["lc/train"], "grpo_min_tests": 5},
        "train": {"train_sets": ["lc/train"], "eval_sets": []}, "grpo": {}, "baseline": {}}))
    mod = stage("grpo")
    seen: dict[str, Any] = {}
    monkeypatch.setattr(mod, "get_judge", _recording)
    monkeypatch.setattr(mod, "stage_eval", lambda *a: {"lc": {}})
    monkeypatch.setattr(mod, "run_grpo", lambda *a, **k: seen.update(k) or {})
    res = CliRunner().invoke(mod.main, ["--seed", "1", "--problems-dir", "gov/problems", "--model", "m"])
    assert res.exit_code == 0, res.output
    assert seen["max_timeouts"] == 1
    assert seen["shaping"].timeout_penalty == 0.7 and seen["shaping"].sandbox_error == "zero"  # not the defaults

    import rlvr.train.local.repair as local_repair

    rmod = stage("repair")
    monkeypatch.setattr(local_repair, "run_repair_training", lambda *a, **k: seen.update(repair=k) or {})
    rmod._train(rmod.Params(tmp_path / "params.yaml"), rmod.RepairParams.model_validate(
        {"datasets": [{"name": "lc"}], "train": {"train_sets": ["lc/train"], "min_hidden_tests": 1}}),
        tmp_path / "gov" / "problems", "m",
        _recording(), tmp_path / "out", tmp_path / "curves.tsv")
    assert seen["repair"]["max_timeouts"] == 1 and seen["repair"]["shaping"].sandbox_error == "zero"


def test_local_grpo_scores_with_the_params_shaping_and_keys_it(tmp_path, monkeypatch):
    """The local engine's reward used to be built from the mode name alone: reward_shaping's coefficients and
    sandbox-error policy never reached it (a param the engine ignored). Now they do, and a non-default value changes
    the run folder's key (a default run keeps its key)."""
    import rlvr.train.local.grpo as grpo
    from rlvr.reward.modes import RewardShaping
    from rlvr.train.local.common import TrainCommon

    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    seen: list[Any] = []

    class Stop(Exception):
        pass

    def fake_fit(*a, **k):
        seen.append((a[2].output_dir, k["reward_funcs"]))
        raise Stop

    monkeypatch.setattr(grpo, "fit", fake_fit)
    problems = [Problem(id="lc/1", source="lc", split="train", statement="s", solutions=["print(1)"],
                        tests=[StdioTest(stdin="1", stdout="1")])]
    common = TrainCommon(report_to=["none"])
    for shaping in (None, RewardShaping(timeout_penalty=0.7, sandbox_error="zero")):
        with pytest.raises(Stop):
            grpo.run_grpo(grpo.GRPOParams(), common, "m", problems, [], _recording(), tmp_path / "out",
                          tmp_path / "c.tsv", reward_mode="shaped", max_timeouts=1, shaping=shaping)
    (key0, funcs0), (key1, funcs1) = seen
    config = funcs1[0].fn.scorer.config
    assert config.shaping.timeout_penalty == 0.7 and config.shaping.sandbox_error == "zero"
    assert config.shaping.max_timeouts == 1 and funcs0[0].fn.scorer.config.shaping.timeout_penalty == 0.2
    assert key0 != key1


def test_resume_key_lists_the_rule_only_when_not_the_default():
    assert timeouts.trajectory_key(3) == {} and timeouts.trajectory_key(1) == {"max_timeouts": 1}


def test_a_looping_rollout_runs_one_test_under_max_timeouts_1():
    """The real embedded judge, through the reward's scorer: a program that loops on a 5-test problem (0.5 s per
    test) under max_timeouts=1 runs its first test only and the other four count as timeouts; at the default 3,
    three tests run. Not accepted and dense reward 0 either way; the judge itself keeps its rule (evaluation's)."""
    problem = _problem(5, 0.5)
    with Judge(workers=1) as judge:
        scorers = {n: RewardScorer(RewardConfig(mode="dense", shaping=RewardShaping(max_timeouts=n)), judge)
                   for n in (1, 3)}
        [out] = scorers[1].score([ScoreItem(ground_truth(problem), "t", LOOP)])
        assert out.status == "timeout" and not out.acc and out.score == 0.0 and out.n_tests == 5
        runs = {}
        for n, s in scorers.items():
            res = s.judge.judge(problem, "while True:\n    pass\n")
            assert [t.verdict for t in res.tests] == ["timeout"] * 5 and res.pass_ratio == 0.0
            runs[n] = sum("not run after repeated timeouts" not in t.message for t in res.tests)
        assert runs == {1: 1, 3: 3}, runs
        assert judge.max_timeouts == 3
