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
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    from rlvr.train.verl import compat

    monkeypatch.setattr(compat, "patch_verl", lambda: False)  # leave verl unpatched for the other tests
    monkeypatch.setattr(AgentLoopWorker, "_compute_score", AgentLoopWorker._compute_score)
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


# --- unscored samples out of the loss: verl's agent loop -> TransferQueue fields -> rlvr_grpo -> verl's ppo_loss ----

_PROMPT = [11, 12, 13]


def _outputs(scores: list[float]):
    """One single-output trajectory per score, as verl's agent loop builds them, scored through verl's own
    ``AgentLoopWorker._compute_score`` (the reward already set, as after the reward loop) with rlvr's patch applied,
    then turned into the TransferQueue fields exactly as ``AgentLoopWorkerTQ._agent_loop_postprocess`` does
    (``output.as_dict()``, then ``field["loss_mask"] = field["response_mask"]``)."""
    import asyncio
    import types

    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput, AgentLoopWorker

    worker = types.SimpleNamespace(reward_loop_worker_handles=None)  # score already computed: verl adds nothing
    fields = []
    for i, s in enumerate(scores):
        k = 3 + i % 3
        out = AgentLoopOutput(prompt_ids=_PROMPT, response_ids=list(range(100, 100 + k)), response_mask=[1] * k,
                              reward_score=s, num_turns=2, metrics=AgentLoopMetrics())
        asyncio.run(AgentLoopWorker._compute_score(worker, [out], kwargs={}))
        field = out.as_dict()
        field["loss_mask"] = field["response_mask"]  # agent_loop_tq.py: "TODO: uniform response_mask and loss_mask"
        fields.append(field)
    return fields


def _ppo_loss(fields: list[dict], groups: list[str], agg: str) -> tuple[float, dict]:
    """The actor's loss for these samples as verl 0.9.1's v1 trainer computes it: advantages through
    ``compute_advantage_for_multi_trajectories`` on the padded fields (``TrainerBase._compute_advantage``), then
    ``verl.workers.utils.losses.ppo_loss`` (policy gradient + entropy + KL to the reference) with
    ``batch_num_tokens = loss_mask.sum()`` (``FSDPEngine.forward_backward_batch``) and ``global_batch_size`` = the
    rows (``TrainerBase._update_actor``: the mini-batch size), fixed per-token log-probs standing in for the model."""
    from tensordict import TensorDict
    from verl import DataProto
    from verl.trainer.config.algorithm import AlgoConfig
    from verl.utils import tensordict_utils as tu
    from verl.workers.config import FSDPActorConfig
    from verl.workers.utils.losses import ppo_loss
    from verl.workers.utils.padding import response_to_nested

    import rlvr.train.verl.advantage  # noqa: F401

    def nested(key, dtype=None):
        return torch.nested.as_nested_tensor([f[key].to(dtype or f[key].dtype) for f in fields], layout=torch.jagged)

    n = len(fields)
    g = torch.Generator().manual_seed(0)
    per_sample = [torch.randn(len(f["responses"]), generator=g) * 0.1 - 1.0 for f in fields]  # fixed per token,
    # the same for a sample whatever else is in the batch
    td = TensorDict({"prompts": nested("prompts"), "responses": nested("responses"),
                     "response_mask": nested("response_mask"), "loss_mask": nested("loss_mask")}, batch_size=n)
    padded = td.select("response_mask").to_padded_tensor()
    width = padded["response_mask"].shape[1]
    rm = torch.nested.as_nested_tensor([f["rm_scores"] for f in fields], layout=torch.jagged)
    rm = rm.to_padded_tensor(0.0, output_size=(n, width))
    data = DataProto.from_dict(tensors={"rm_scores": rm, "token_level_scores": rm, "token_level_rewards": rm,
                                        "response_mask": padded["response_mask"]},
                               non_tensors={"uid": np.array(groups, dtype=object)})
    keys = [f"{gr}_{i}_0" for i, gr in enumerate(groups)]
    data = _v1_utils().compute_advantage_for_multi_trajectories(
        data, batch_keys=keys, adv_estimator="rlvr_grpo", num_repeat=4, norm_adv_by_std_in_grpo=True,
        config=AlgoConfig(adv_estimator="rlvr_grpo"))
    td["advantages"] = response_to_nested(data.batch["advantages"], td["response_mask"])
    td["old_log_probs"] = torch.nested.as_nested_tensor([p + 0.05 for p in per_sample], layout=torch.jagged)
    td["ref_log_prob"] = torch.nested.as_nested_tensor([p - 0.2 for p in per_sample], layout=torch.jagged)
    # model output over prompt + response, left-shifted by one token as verl's engines return it
    log_probs = torch.nested.as_nested_tensor(
        [torch.cat([torch.zeros(len(_PROMPT) - 1), p, torch.zeros(1)]) for p in per_sample], layout=torch.jagged)
    entropy = torch.nested.as_nested_tensor([torch.full((len(_PROMPT) + len(p),), 0.7) for p in per_sample],
                                            layout=torch.jagged)
    tu.assign_non_tensor(td, dp_size=1, batch_num_tokens=int(td["loss_mask"].values().sum()), global_batch_size=n)
    cfg = FSDPActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, ppo_mini_batch_size=1, rollout_n=n,
                          use_kl_loss=True, kl_loss_coef=0.001, kl_loss_type="low_var_kl", entropy_coeff=0.01,
                          loss_agg_mode=agg)
    loss, metrics = ppo_loss(cfg, {"log_probs": log_probs, "entropy": entropy}, td)
    return float(loss), {k: float(metrics[k].values[0]) for k in ("kl_loss", "actor/entropy_loss")}


@pytest.fixture
def masking(monkeypatch):
    """rlvr's agent-loop patch as :func:`rlvr.train.verl.compat.worker_setup` applies it, undone afterwards."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from rlvr.train.verl import mask

    unpatched = AgentLoopWorker._compute_score
    monkeypatch.setattr(AgentLoopWorker, "_compute_score", getattr(unpatched, "__wrapped__", unpatched))
    assert mask.patch_agent_loop() is True
    assert mask.patch_agent_loop() is False  # idempotent


def test_an_unscored_sample_is_out_of_the_loss_and_its_normaliser(masking):
    """The excluded sandbox error (NaN) contributes nothing to verl's token-mean loss: policy gradient, entropy and KL
    terms and the token normaliser are those of the batch without it."""
    nan = math.nan
    scores, groups = [1.0, 0.0, nan, 0.0, 1.0, 0.5, 0.0, 1.0], ["a"] * 4 + ["b"] * 4
    fields = _outputs(scores)
    assert fields[2]["response_mask"].sum() == 0 and fields[2]["loss_mask"].sum() == 0
    assert math.isnan(float(fields[2]["rm_scores"][-1]))  # still unscored for the estimator
    assert all(bool(f["response_mask"].all()) for i, f in enumerate(fields) if i != 2)  # the scored ones untouched
    kept = [i for i in range(len(scores)) if i != 2]
    with_it, m_with = _ppo_loss(fields, groups, "token-mean")
    without, m_without = _ppo_loss([fields[i] for i in kept], [groups[i] for i in kept], "token-mean")
    assert with_it == pytest.approx(without, rel=1e-6, abs=1e-9)
    assert m_with["kl_loss"] == pytest.approx(m_without["kl_loss"], rel=1e-6)
    assert m_with["actor/entropy_loss"] == pytest.approx(m_without["actor/entropy_loss"], rel=1e-6)
    assert m_with["kl_loss"] > 0


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_under_seq_mean_an_unscored_sample_adds_zero_over_the_fixed_row_count(masking, agg):
    """Under verl's seq-mean modes the denominator is the mini-batch's row count (``global_batch_size``), as for
    verl's padding rows: the masked sample adds 0 to the numerator of every term and still counts as a row."""
    nan = math.nan
    scores, groups = [1.0, 0.0, nan, 0.0, 1.0, 0.5, 0.0, 1.0], ["a"] * 4 + ["b"] * 4
    fields = _outputs(scores)
    with_it, _ = _ppo_loss(fields, groups, agg)
    kept = [i for i in range(len(scores)) if i != 2]
    without, _ = _ppo_loss([fields[i] for i in kept], [groups[i] for i in kept], agg)
    assert with_it == pytest.approx(without * 7 / 8, rel=1e-6)


def test_scored_samples_and_a_wholly_unscored_group_keep_or_lose_their_masks(masking):
    """Without NaN the patch changes nothing; a group all excluded is all masked (no tokens, no loss)."""
    nan = math.nan
    assert all(bool(f["loss_mask"].all()) for f in _outputs([1.0, 0.0, 0.5]))
    fields = _outputs([nan, nan, nan, nan, 1.0, 0.0, 0.0, 1.0])
    assert [int(f["loss_mask"].sum()) for f in fields[:4]] == [0, 0, 0, 0]
    loss, _ = _ppo_loss(fields, ["a"] * 4 + ["b"] * 4, "token-mean")
    assert loss == pytest.approx(_ppo_loss(fields[4:], ["b"] * 4, "token-mean")[0], rel=1e-6)


def test_worker_setup_patches_the_agent_loop(monkeypatch):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from rlvr.train.verl import compat

    monkeypatch.setattr(AgentLoopWorker, "_compute_score", AgentLoopWorker._compute_score)
    monkeypatch.setattr(compat, "patch_verl", lambda: False)
    compat.worker_setup()
    assert getattr(AgentLoopWorker._compute_score, "_rlvr_masks_unscored", False)
