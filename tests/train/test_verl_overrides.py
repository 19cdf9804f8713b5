"""Boundary tests of the verl engine's Hydra overrides: they compose against the installed verl 0.9.1's own config
(ppo_trainer / sft_trainer_engine), pass verl's validate_config, and verl's own loader finds our reward function."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from rlvr.config import ConfigError
from rlvr.train.local.grpo import GRPOParams
from rlvr.train.local.sft import SFTParams
from rlvr.train.verl.commands import grpo_command, sft_command, write_overrides
from rlvr.train.verl.overrides import VerlParams, VerlProfile, grpo_overrides, load_profile, sft_overrides

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "qwen7b_8xh100.yaml"


def compose(config_name: str, overrides: list[str]):
    """Compose verl's own config (installed package's trainer/config) with ``overrides``, as its hydra.main does."""
    import verl
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    d = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=d, version_base=None):
        return hcompose(config_name=config_name, overrides=overrides)


def _grpo(tmp_path: Path, grpo: GRPOParams | None = None, verl: VerlParams | None = None,
          profile: VerlProfile | None = None, **kw) -> list[str]:
    return grpo_overrides(
        grpo or GRPOParams(seed=7, beta=0.02, entropy_coef=0.001, epsilon=0.2, epsilon_high=0.28, loss_type="dapo",
                           learning_rate=1e-6, num_generations=8, temperature=0.9, top_p=0.95),
        verl or VerlParams(),
        profile or load_profile(PROFILE),
        train_files=tmp_path / "train.parquet", val_files=tmp_path / "val.parquet",
        model_path="Qwen/Qwen2.5-Coder-7B-Instruct", reward_mode="sparse", ckpt_dir=tmp_path / "ckpt",
        experiment_name="grpo-seed7", rollout_data_dir=tmp_path / "rollouts", **kw,
    )


def test_grpo_overrides_compose_and_validate(tmp_path):
    ov = _grpo(tmp_path, reward_shaping={"no_code_penalty": 0.5, "sandbox_error": "exclude"},
               judge_log_dir=tmp_path / "judge")
    cfg = compose("ppo_trainer", ov)
    a = cfg.actor_rollout_ref
    assert cfg.algorithm.adv_estimator == "rlvr_grpo"  # verl's GRPO with unscored samples left out
    assert cfg.algorithm.norm_adv_by_std_in_grpo is True and cfg.algorithm.use_kl_in_reward is False
    assert cfg.data.train_files == str(tmp_path / "train.parquet")
    assert cfg.data.train_batch_size == 128 and cfg.data.max_response_length == 2048
    assert a.model.path == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert a.actor.optim.lr == 1e-6 and a.actor.ppo_mini_batch_size == 32
    assert a.actor.use_kl_loss is True and a.actor.kl_loss_coef == 0.02 and a.actor.kl_loss_type == "low_var_kl"
    assert a.actor.entropy_coeff == 0.001
    assert (a.actor.clip_ratio_low, a.actor.clip_ratio_high) == (0.2, 0.28)
    assert a.actor.loss_agg_mode == "token-mean"
    assert a.rollout.name == "vllm" and a.rollout.n == 8
    assert (a.rollout.temperature, a.rollout.top_p) == (0.9, 0.95)
    # the 8-GPU profile is the 4-GPU one with GPUs and batch scaled: the same rollout memory share
    assert a.rollout.tensor_model_parallel_size == 1 and a.rollout.gpu_memory_utilization == 0.5
    rf = cfg.reward.custom_reward_function
    assert rf.path == "pkg://rlvr.reward.verl" and rf.name == "compute_score_async"
    assert rf.reward_kwargs.reward_mode == "sparse"
    assert rf.reward_kwargs.reward_shaping.sandbox_error == "exclude"
    assert rf.reward_kwargs.judge_log == str(tmp_path / "judge")
    assert rf.reward_kwargs.mask_excluded is True
    rm = cfg.reward.reward_manager  # verl's naive manager + the response length (rlvr.reward.verl_manager)
    assert (rm.source, rm.module.path, rm.name) == ("importlib", "pkg://rlvr.reward.verl_manager",
                                                   "RLVRNaiveRewardManager")
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    assert issubclass(resolve_reward_manager_cls(cfg), NaiveRewardManager)
    assert cfg.custom_reward_function.path is None  # the legacy top-level key stays unused
    assert list(cfg.trainer.logger) == ["console", "file"]
    assert cfg.trainer.n_gpus_per_node == 8 and cfg.trainer.nnodes == 1
    assert cfg.trainer.default_local_dir == str(tmp_path / "ckpt")
    assert cfg.trainer.rollout_data_dir == str(tmp_path / "rollouts")
    assert cfg.trainer.total_training_steps is None

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    assert need_reference_policy(cfg) is True and need_critic(cfg) is False
    validate_config(cfg, use_reference_policy=True, use_critic=False)  # raises on an inconsistent config


def test_verl_loads_our_reward_function_from_composed_config(tmp_path):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from rlvr.reward.verl import compute_score, compute_score_async

    cfg = compose("ppo_trainer", _grpo(tmp_path))
    fn = get_custom_reward_fn(cfg)
    assert fn.func.__name__ == "_call_with_kwargs_async"
    assert fn.args == (compute_score_async, {"reward_mode": "sparse", "mask_excluded": True, "judge_pool": "node",
                                             "judge_pool_workers": 0, "judge_pool_shards": 0})
    cfg = compose("ppo_trainer", _grpo(tmp_path, verl=VerlParams(reward_function="compute_score")))
    assert get_custom_reward_fn(cfg).args[0] is compute_score


def test_grpo_dr_grpo_static_batches_and_rate_limited(tmp_path):
    prof = load_profile(PROFILE).model_copy(
        update={"use_dynamic_bsz": False, "extra_overrides": ["trainer.val_before_train=False"]}
    )
    g = GRPOParams(loss_type="dr_grpo", scale_rewards="none", beta=0.0, epsilon_high=None, num_generations=4,
                   per_device_train_batch_size=4)
    v = VerlParams(reward_manager="rate_limited", reward_max_concurrent=32, total_training_steps=5, loggers=["wandb"])
    cfg = compose("ppo_trainer", _grpo(tmp_path, grpo=g, verl=v, profile=prof))
    a = cfg.actor_rollout_ref
    assert a.actor.loss_agg_mode == "seq-mean-token-sum-norm" and cfg.algorithm.norm_adv_by_std_in_grpo is False
    assert a.actor.use_kl_loss is False and a.actor.clip_ratio_high == a.actor.clip_ratio_low == 0.2
    assert cfg.reward.reward_manager.name == "RLVRRateLimitedRewardManager" and cfg.reward.max_concurrent == 32
    assert cfg.trainer.total_training_steps == 5 and list(cfg.trainer.logger) == ["console", "file", "wandb"]
    assert cfg.trainer.val_before_train is False  # profile extras come last and win
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    assert need_reference_policy(cfg) is False
    validate_config(cfg, use_reference_policy=False, use_critic=need_critic(cfg))


@pytest.mark.parametrize(
    ("grpo", "verl", "msg"),
    [
        (GRPOParams(scale_rewards="batch"), VerlParams(), "scale_rewards"),
        (GRPOParams(mask_truncated_completions=True), VerlParams(), "mask_truncated"),
        (GRPOParams(), VerlParams(train_batch_size=100, ppo_mini_batch_size=32), "ppo_mini_batch_size"),
        (GRPOParams(num_generations=2, per_device_train_batch_size=2), VerlParams(train_batch_size=3,
                                                                                  ppo_mini_batch_size=1), "GPUs"),
    ],
)
def test_grpo_overrides_reject_what_verl_cannot_do(tmp_path, grpo, verl, msg):
    with pytest.raises(ConfigError, match=msg):
        _grpo(tmp_path, grpo=grpo, verl=verl)


def test_sft_overrides_compose(tmp_path):
    prof = load_profile(PROFILE)
    s = SFTParams(learning_rate=1e-5, epochs=2, seed=3, warmup_ratio=0.1)
    ov = sft_overrides(s, VerlParams(), prof, train_files=tmp_path / "sft.parquet", val_files=None,
                       model_path="Qwen/Qwen2.5-Coder-7B-Instruct", ckpt_dir=tmp_path / "ck", experiment_name="sft")
    cfg = compose("sft_trainer_engine", ov)
    assert cfg.model.path == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert cfg.data.train_files == str(tmp_path / "sft.parquet") and cfg.data.val_files is None
    assert cfg.data.messages_key == "messages" and cfg.data.max_length == 3072
    assert cfg.optim.lr == 1e-5 and cfg.optim.lr_warmup_steps_ratio == 0.1
    assert cfg.trainer.total_epochs == 2 and cfg.trainer.seed == 3 and cfg.trainer.test_freq == -1
    assert cfg.trainer.n_gpus_per_node == 8 and list(cfg.trainer.logger) == ["console", "file"]
    with pytest.raises(ConfigError, match="whole epochs"):
        sft_overrides(SFTParams(epochs=1.5), VerlParams(), prof, train_files="a", val_files=None, model_path="m",
                      ckpt_dir="c", experiment_name="sft")


def test_commands_and_written_files(tmp_path):
    prof = load_profile(PROFILE)
    assert grpo_command("py") == ["py", "-m", "verl.trainer.main_ppo"]
    assert sft_command(prof, "py") == ["py", "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                                       "--nproc_per_node=8", "-m", "rlvr.train.verl.compat",
                                       "verl.trainer.sft_trainer"]
    two = prof.model_copy(update={"nnodes": 2})
    with pytest.raises(ConfigError, match="rendezvous"):
        sft_command(two)
    assert "--rdzv_endpoint=h:29500" in sft_command(two, rdzv_endpoint="h:29500")
    ov = _grpo(tmp_path / "with space")
    ovf, sh = write_overrides(tmp_path / "out", grpo_command("python"), ov)
    assert ovf.read_text().splitlines() == ov
    argv = shlex.split(sh.read_text().split("set -euo pipefail\n", 1)[1].replace("\\\n", " "))
    assert argv == ["python", "-m", "verl.trainer.main_ppo", *ov]
    cfg = compose("ppo_trainer", ov)  # the quoted path with a space survives Hydra's parser
    assert cfg.data.train_files == str(tmp_path / "with space" / "train.parquet")
    # verl merges ray_init.runtime_env into ray.init(): every Ray worker runs the TRL-compat hook first
    assert cfg.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook == "rlvr.train.verl.compat.worker_setup"


def test_profile_errors_name_file_and_field(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("model: m\nrollout_tp: 0\n")
    with pytest.raises(ConfigError, match=r"p\.yaml: rollout_tp"):
        load_profile(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_profile(tmp_path / "missing.yaml")


def test_filter_groups_compose_into_verl_v1_config(tmp_path):
    """DAPO dynamic sampling reaches verl 0.9.1's ``algorithm.filter_groups`` (read by its V1 trainer's replay
    buffer, ``trainer.use_v1`` on by default)."""
    v = VerlParams.model_validate({"filter_groups": {"enable": True, "metric": "acc", "max_inflight_gen_batches": 2}})
    cfg = compose("ppo_trainer", _grpo(tmp_path, verl=v))
    fg = cfg.algorithm.filter_groups
    assert fg.enable is True and fg.metric == "acc" and fg.max_inflight_gen_batches == 2 and cfg.trainer.use_v1
