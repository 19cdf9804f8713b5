"""``rlvr_grpo`` through verl 0.9.1's own advantage code (the v1 trainer's
``compute_advantage_for_multi_trajectories``): an excluded sandbox error (NaN score from
``compute_score(mask_excluded=True)``) is left out of its group's baseline and gets advantage 0; without NaN the
result is verl's GRPO exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("verl")

import torch


def _batch(scores: list[float], groups: list[str], resp_len: int = 5):
    """A batch as the v1 trainer's ``_compute_advantage`` builds it: ``rm_scores`` with the score on each response's
    last token, ``response_mask``, ``uid``; keys ``{uid}_{session}_{output index}`` (``AgentLoopWorkerTQ``)."""
    from verl import DataProto

    n = len(scores)
    lens = [3 + i % 3 for i in range(n)]
    mask = torch.zeros(n, resp_len, dtype=torch.long)
    rm = torch.zeros(n, resp_len)
    for i, (s, k) in enumerate(zip(scores, lens, strict=True)):
        mask[i, :k] = 1
        rm[i, k - 1] = s
    data = DataProto.from_dict(tensors={"rm_scores": rm, "token_level_scores": rm, "token_level_rewards": rm,
                                        "response_mask": mask},
                               non_tensors={"uid": np.array(groups, dtype=object)})
    keys = [f"{g}_{i}_0" for i, g in enumerate(groups)]  # one session per sample, one output each
    return data, keys


def _v1_utils():
    """``verl/trainer/ppo/v1/utils.py`` loaded from its file: the ``verl.trainer.ppo.v1`` package imports
    TransferQueue (GPU-side, not installed here) in its ``__init__``; ``utils`` needs only a constant of
    ``replay_buffer`` (stubbed with verl's value) besides verl's core code."""
    import importlib.util
    import sys
    import types
    from pathlib import Path

    import verl

    name = "verl.trainer.ppo.v1.replay_buffer"
    stub = sys.modules.setdefault(name, types.ModuleType(name))
    if not hasattr(stub, "DAPO_FILTERED_REWARD_COUNTS_KEY"):
        stub.DAPO_FILTERED_REWARD_COUNTS_KEY = "_dapo_filtered_reward_counts"
    path = Path(verl.__file__).parent / "trainer" / "ppo" / "v1" / "utils.py"
    spec = importlib.util.spec_from_file_location("_verl_v1_utils", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _advantages(estimator: str, scores, groups, norm=True):
    from verl.trainer.config.algorithm import AlgoConfig

    import rlvr.train.verl.advantage  # noqa: F401  (registers rlvr_grpo, as the Ray setup hook does)

    compute_advantage_for_multi_trajectories = _v1_utils().compute_advantage_for_multi_trajectories

    data, keys = _batch(scores, groups)
    out = compute_advantage_for_multi_trajectories(
        data, batch_keys=keys, adv_estimator=estimator, num_repeat=4, norm_adv_by_std_in_grpo=norm,
        config=AlgoConfig(adv_estimator=estimator, norm_adv_by_std_in_grpo=norm))
    adv = out.batch["advantages"]
    mask = out.batch["response_mask"].bool()
    assert estimator == "grpo" or torch.all(adv[~mask] == 0)
    return [float(adv[i][mask[i]][0]) for i in range(len(scores))], out


def test_without_nan_it_is_verls_grpo():
    scores, groups = [1.0, 0.0, 0.5, 0.0, 1.0, 1.0, 0.0, 0.25], ["a"] * 4 + ["b"] * 4
    for norm in (True, False):
        ours, _ = _advantages("rlvr_grpo", scores, groups, norm)
        theirs, _ = _advantages("grpo", scores, groups, norm)
        assert ours == pytest.approx(theirs)


def test_unscored_samples_are_left_out_of_the_group():
    nan = math.nan
    scores = [1.0, 0.0, 0.0, nan, nan, nan, 1.0, nan, 0.5, 0.5, 0.0, 1.0]
    groups = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    ours, _ = _advantages("rlvr_grpo", scores, groups)
    assert all(math.isfinite(a) for a in ours)
    assert ours[3] == 0.0  # the sandbox error: no gradient
    valid = torch.tensor([1.0, 0.0, 0.0])
    want = ((valid - valid.mean()) / (valid.std() + 1e-6)).tolist()
    assert ours[:3] == pytest.approx(want)  # baseline over the three scored samples only
    assert ours[4:8] == [0.0] * 4  # one scored sample of four: no baseline, no signal
    assert ours[8:] == pytest.approx(_advantages("grpo", scores[8:], groups[8:])[0])  # untouched group
    # verl's own GRPO on the same batch: NaN spreads to the whole group (what the estimator exists to prevent)
    theirs, _ = _advantages("grpo", scores, groups)
    assert all(math.isnan(a) for a in theirs[:8])


def test_worker_setup_registers_the_estimator(monkeypatch):
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    from rlvr.train.verl import compat

    monkeypatch.setattr(compat, "patch_verl", lambda: False)  # leave verl unpatched for the other tests
    compat.worker_setup()
    assert get_adv_estimator_fn("rlvr_grpo").__module__ == "rlvr.train.verl.advantage"


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["exclude", "zero"])
def test_a_judge_that_dies_mid_run_stops_verl_at_that_step(policy, monkeypatch):
    """Reward workers (Ray actors) score through ``compute_score_async`` with the launcher's reward kwargs; the judge
    dies after step 1; step 2 is the first dead step (it trains on nothing but goes on), and at step 3 the estimator,
    called through the v1 trainer's advantage function, raises naming verl's steps — under ``zero`` too, where the
    rewards alone (0.0) cannot show a sandbox error, and although a completion without code still gets a finite
    score."""
    import os
    import sys
    from pathlib import Path

    ray = pytest.importorskip("ray")
    from verl.utils.skip import SkipManager

    from rlvr.reward.step_guard import JudgeDied, StepGuard
    from rlvr.train.verl import advantage

    monkeypatch.setattr(advantage, "STEP_GUARD", StepGuard("verl GRPO"))  # a fresh trainer process
    fixtures = str(Path(__file__).resolve().parents[1] / "reward")
    monkeypatch.syspath_prepend(fixtures)
    path = os.pathsep.join([fixtures, *(p for p in sys.path if p)])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        @ray.remote(num_cpus=0)
        class RewardWorker:
            """What verl's reward worker does per sample: await the reward function, a chunk at once."""

            def __init__(self) -> None:
                from reward_fixtures import FakeJudge

                from rlvr.reward.scorer import set_default_judge

                set_default_judge(FakeJudge())

            def kill_judge(self) -> None:
                from rlvr.judge.sandbox import SandboxError
                from rlvr.reward.scorer import set_default_judge

                class Lost:
                    def judge_many(self, items):
                        raise SandboxError("Ray judge actor failed: ActorDiedError: the actor died")

                set_default_judge(Lost())

            async def score(self, completions: list[str]) -> list[float]:
                import asyncio

                from reward_fixtures import STDIO_SUM

                from rlvr.data.schema import ground_truth
                from rlvr.reward.verl import compute_score_async

                kw = {"reward_mode": "sparse", "mask_excluded": True, "reward_shaping": {"sandbox_error": policy}}
                gt = ground_truth(STDIO_SUM)
                outs = await asyncio.gather(*(compute_score_async("stdio200", c, gt, {"split": "train"}, **kw)
                                              for c in completions))
                return [o["score"] for o in outs]

            def flush(self) -> None:
                """What the counts' background publisher does within a second (step_guard.PUBLISH_INTERVAL_S)."""
                from rlvr.reward import step_guard

                step_guard.flush()

        from reward_fixtures import fenced

        workers = [RewardWorker.remote() for _ in range(2)]
        group = [fenced("print(6)"), fenced("print(6) #WA"), fenced("print(6)"), "I cannot write this."]
        groups = ["a"] * 4 + ["b"] * 4

        def step(n: int) -> list[float]:
            scores = [s for chunk in ray.get([w.score.remote(group) for w in workers], timeout=120) for s in chunk]
            ray.get([w.flush.remote() for w in workers], timeout=60)
            monkeypatch.setattr(SkipManager, "step", n)  # what verl's fit sets before the step
            return _advantages("rlvr_grpo", scores, groups)[0]

        assert step(1)[0] > 0  # a healthy step trains: the accepted samples get a positive advantage
        ray.get([w.kill_judge.remote() for w in workers])
        assert all(a == 0.0 for a in step(2))  # one dead step: no signal, but it goes on
        with pytest.raises(JudgeDied, match=r"^verl GRPO step 3: all 6 samples sent to the judge .* sandbox_error, as "
                                            r"did all 6 of step 2: no answer from the judge for 2 consecutive steps"):
            step(3)
    finally:
        ray.shutdown()


def test_all_nan_batches_stop_the_run_without_counts(monkeypatch):
    """Outside Ray (no counts) the estimator still refuses batches whose every reward is NaN (all excluded), at the
    second dead step in a row. A batch with finite rewards says nothing about the judge without counts (a completion
    without code scores without it): that step neither counts nor resets."""
    from verl.utils.skip import SkipManager

    from rlvr.reward.step_guard import JudgeDied, StepGuard
    from rlvr.train.verl import advantage

    monkeypatch.setattr(advantage, "STEP_GUARD", StepGuard("verl GRPO"))
    nan = [math.nan] * 4
    for n, scores in [(1, nan), (2, [math.nan, -0.5, 0.0, math.nan])]:
        monkeypatch.setattr(SkipManager, "step", n)
        _advantages("rlvr_grpo", scores, ["a"] * 4)
    monkeypatch.setattr(SkipManager, "step", 3)
    with pytest.raises(JudgeDied, match=r"^verl GRPO step 3: all 4 samples .* as did all 4 of step 1"):
        _advantages("rlvr_grpo", nan, ["a"] * 4)


def test_mini_batches_of_one_global_step_are_one_step(monkeypatch):
    """verl's v1 trainer calls the estimator once per mini-batch when ``parameter_sync_step`` > 1, all under one
    global step (``SkipManager.step``): the counts window is taken once per step, and two all-NaN mini-batches of one
    step are one dead step, not two."""
    from verl.utils.skip import SkipManager

    from rlvr.reward.step_guard import JudgeDied, StepGuard
    from rlvr.train.verl import advantage

    reads: list[int] = []
    totals = iter([(4, 4), (8, 8)])

    def job_totals():
        reads.append(SkipManager.step)
        return next(totals)

    monkeypatch.setattr(advantage, "STEP_GUARD", StepGuard("verl GRPO", totals=job_totals))
    monkeypatch.setattr(SkipManager, "step", 7)
    for _ in range(3):  # parameter_sync_step = 3
        _advantages("rlvr_grpo", [math.nan] * 4, ["a"] * 4)
    assert reads == [7] and advantage.STEP_GUARD.step == 7
    monkeypatch.setattr(SkipManager, "step", 8)
    with pytest.raises(JudgeDied, match=r"^verl GRPO step 8: all 4 samples .* as did all 4 of step 7"):
        _advantages("rlvr_grpo", [math.nan] * 4, ["a"] * 4)
    assert reads == [7, 8]
