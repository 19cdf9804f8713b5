"""How rlvr's params become verl 0.9.1 values (the pieces :mod:`rlvr.train.verl.overrides` assembles): step counts and
epochs, the learning-rate schedule, checkpoint frequency, the attention backend, model paths, and the Ray
``runtime_env`` override that carries environment variables to every worker. Each function maps a value or raises
:class:`rlvr.config.ConfigError` naming the param verl could not honour; :func:`check_sft_batch` and
:func:`check_grpo_batch` check the local engine's batch and precision params against the verl settings that govern
them (verl reads neither)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvr.config import ConfigError
from rlvr.train.verl.params import VerlParams, VerlProfile

__all__ = ["SAVE_LOSS_FRACTION", "check_grpo_batch", "check_sft_batch", "epochs_for", "fit_micro_batch",
           "local_or_id", "packed_sdpa_supported", "ray_env_override", "resolve_attention", "resolve_dynamic_bsz",
           "save_freq_for", "scheduler_for", "steps_for"]


def epochs_for(total_epochs: int, total_training_steps: int | None) -> int:
    """``trainer.total_epochs`` for verl: ``total_epochs``, raised to ``total_training_steps`` when that is set.

    verl 0.9.1's trainers loop over epochs and stop at ``total_training_steps``, but also when the epochs run out,
    and save the final checkpoint only at ``total_training_steps``: with fewer batches than steps (a small set, one
    epoch) the run ended after the last batch with no checkpoint (seen on the H100: 2 of 5 GRPO steps). Every epoch
    has at least one step, so ``total_training_steps`` epochs always reach the step count."""
    return max(total_epochs, total_training_steps or 0)


def packed_sdpa_supported() -> bool:
    """True when the installed transformers turns restarting ``position_ids`` into a block-diagonal causal mask for
    SDPA (``transformers.masking_utils.find_packed_sequence_indices``, transformers >= 4.56), so a packed row of
    several sequences (verl's padding removal: ``attention_mask=None``, ``use_cache=False``) needs no flash-attn:
    no sequence attends to another. ``tests/train/test_verl_packed_sdpa.py`` checks the property on a tiny Qwen2."""
    try:
        from transformers import masking_utils
    except ImportError:
        return False
    return hasattr(masking_utils, "find_packed_sequence_indices")


def resolve_attention(profile: VerlProfile, has_flash_attn: bool | None = None,
                      packed_sdpa: bool | None = None) -> tuple[str, bool]:
    """``(attn_implementation, use_remove_padding)`` for a profile on this machine.

    ``auto`` picks ``flash_attention_2`` when the ``flash_attn`` package is importable (``has_flash_attn``, default:
    probed with ``importlib.util.find_spec``), else ``sdpa`` (PyTorch's fused attention; no flash-attn wheel exists
    for torch 2.11 + CUDA 13). Padding removal (``use_remove_padding: null``) is on with flash-attn's varlen kernels,
    and with SDPA where transformers masks packed sequences (``packed_sdpa``, default :func:`packed_sdpa_supported`;
    verl 0.9.1 then unpads with its own pure-torch helpers, ``verl/utils/attention_utils.py``). Measured on one
    H200 at the 7B's width (``bench/gpu/packed_attention.json``): packed SDPA ran 1.58 x the real tokens per second
    of token-packed padded micro batches, at 54 % of their peak memory, with per-token log-probs equal to the
    padded run's within bf16 rounding. Raises :class:`ConfigError` for ``flash_attention_2`` without flash-attn, and
    for ``use_remove_padding: true`` with an attention that cannot take packed rows."""
    import importlib.util

    if has_flash_attn is None:
        has_flash_attn = importlib.util.find_spec("flash_attn") is not None
    if packed_sdpa is None:
        packed_sdpa = packed_sdpa_supported()
    attn = profile.attn_implementation
    if attn == "auto":
        attn = "flash_attention_2" if has_flash_attn else "sdpa"
    if attn == "flash_attention_2" and not has_flash_attn:
        raise ConfigError("profile attn_implementation: flash_attention_2 but the flash_attn package is not installed "
                          "(use auto or sdpa)")
    packs = attn == "flash_attention_2" or (attn == "sdpa" and packed_sdpa)
    rmpad = profile.use_remove_padding if profile.use_remove_padding is not None else packs
    if rmpad and not packs:
        raise ConfigError(f"profile use_remove_padding: true needs flash_attention_2, or sdpa with a transformers that "
                          f"masks packed sequences (>= 4.56) (attention is {attn})")
    return attn, rmpad


def resolve_dynamic_bsz(profile: VerlProfile, use_remove_padding: bool) -> bool:
    """verl's ``use_dynamic_bsz`` for a profile whose padding removal resolved to ``use_remove_padding``
    (:func:`resolve_attention`): the profile's value when it is a bool, else (``auto``) ``use_remove_padding``: with
    padding removal a packed micro batch is its real tokens, at most the budget.

    Why ``auto`` follows padding removal: verl 0.9.1 packs a dynamic micro batch to ``max_token_len`` tokens of the
    rows' *unpadded* lengths (``verl/utils/seqlen_balancing.py`` ``rearrange_micro_batches``: the count of micro
    batches is the batch's unpadded tokens over the budget, the rows spread by Karmarkar-Karp over workload, not
    grouped by length); without padding removal the engine pads each micro batch to its longest row
    (``verl/workers/engine/fsdp/transformer_impl.py`` ``prepare_model_inputs``), so its logits (padded tokens x
    152,064 for Qwen2.5) grow with longest / mean row length. The 7B sittings' random weights wrote every row to the
    cap (mean 1,200–1,600 of at most 2,048 response tokens), which hides it; a policy whose programs are 100–1,000
    tokens fills the same budget with several times the rows, each padded to the longest. Fixed micro batches
    (:func:`fit_micro_batch`) bound it, and pad only the few rows of a micro batch to their own longest."""
    if isinstance(profile.use_dynamic_bsz, bool):
        return profile.use_dynamic_bsz
    return use_remove_padding


def fit_micro_batch(rows: int, token_budget: int, seq_tokens: int, rows_per_gpu: int, name: str) -> int:
    """Rows per fixed (not token-packed) verl micro batch: the largest divisor of ``rows_per_gpu`` that is at most
    ``rows`` (the profile's micro batch) and at most ``token_budget // seq_tokens`` (the budget, tokens, padded to
    the length caps ``seq_tokens`` = prompt + response caps), so a micro batch never holds more than
    ``token_budget`` tokens, padded, whatever the policy writes. A divisor because verl 0.9.1 splits a batch of
    ``rows_per_gpu`` into equal chunks and asserts that they divide it (``verl/workers/engine/utils.py``
    ``prepare_micro_batches``). Raises :class:`ConfigError` naming ``name`` (the profile key of ``token_budget``)
    when one row at the caps is over the budget."""
    cap = min(rows, token_budget // seq_tokens)
    if cap < 1:
        raise ConfigError(f"profile {name}={token_budget} tokens < one row at the length caps ({seq_tokens} tokens): "
                          "one sequence would not fit a micro batch")
    return max(d for d in range(1, cap + 1) if rows_per_gpu % d == 0)


def steps_for(verl_steps: int | None, stage_steps: int | None, where: str) -> int | None:
    """verl's ``trainer.total_training_steps``: ``verl.total_training_steps``, else the stage's ``max_steps`` (``<= 0``
    = none, then epochs decide). Raises :class:`ConfigError` when both are set and differ: verl would silently
    ignore the stage's value."""
    stage = stage_steps if stage_steps is not None and stage_steps > 0 else None
    if verl_steps is not None and stage is not None and verl_steps != stage:
        raise ConfigError(f"{where}.max_steps={stage} and verl.total_training_steps={verl_steps} disagree; set one "
                          "(verl trains verl.total_training_steps, or the stage's max_steps when that is null)")
    return verl_steps if verl_steps is not None else stage


def scheduler_for(kind: str, where: str) -> str:
    """The stage's ``lr_scheduler_type`` as verl's ``optim.lr_scheduler_type``: ``constant`` or ``cosine`` (verl
    0.9.1 has no other). Raises :class:`ConfigError` naming ``<where>.lr_scheduler_type`` otherwise."""
    if kind not in ("constant", "cosine"):
        raise ConfigError(f"{where}.lr_scheduler_type: {kind!r} is not available in verl (constant or cosine)")
    return kind


def _check_bf16(opt: Any, where: str) -> None:
    """Raise :class:`ConfigError` when ``<where>.bf16`` is false: verl 0.9.1 trains in bf16 mixed precision (FSDP
    ``param_dtype`` bfloat16, fp32 master weights; vLLM rollouts in bf16), which rlvr does not map to anything else."""
    if not opt.bf16:
        raise ConfigError(f"{where}.bf16=false but verl trains in bf16 mixed precision (FSDP param_dtype bfloat16); "
                          f"set {where}.bf16: true under engine verl")


def _batch_agreement(opt: Any, where: str, micro_key: str, micro: int, global_key: str, global_size: int,
                     n_gpus: int, profile_path: str) -> None:
    """The shared body of :func:`check_sft_batch` / :func:`check_grpo_batch` (sizes in sequences)."""
    if opt.per_device_train_batch_size != micro:
        raise ConfigError(f"{where}.per_device_train_batch_size={opt.per_device_train_batch_size} and the profile's "
                          f"hardware.{micro_key}={micro} ({profile_path}) disagree; under verl the profile's value "
                          "is the micro batch: set both equal")
    per_step = opt.per_device_train_batch_size * opt.gradient_accumulation_steps * n_gpus
    if per_step != global_size:
        raise ConfigError(f"{where}.per_device_train_batch_size*gradient_accumulation_steps*hardware GPUs = "
                          f"{opt.per_device_train_batch_size}*{opt.gradient_accumulation_steps}*{n_gpus} = {per_step} "
                          f"and {global_key} = {global_size} (sequences per optimizer step; {profile_path}) disagree")


def check_sft_batch(sft: Any, verl: VerlParams, profile: VerlProfile) -> None:
    """Check the ``sft`` section's batch and precision params, which verl's SFT trainer does not read, against the
    verl settings that govern them; returns ``None``.

    verl 0.9.1's ``verl.trainer.sft_trainer`` takes ``data.train_batch_size`` (= ``verl.sft_train_batch_size``) as
    the global batch of one optimizer step, ``train_batch_size // dp`` sequences per data-parallel rank (dp = every
    GPU, ``n_gpus_per_node * nnodes``; no profile sets sequence parallelism), split into micro batches of
    ``data.micro_batch_size_per_gpu`` (= the profile's ``sft_micro_batch_size_per_gpu``) sequences, one gradient
    accumulation step each (``verl/workers/engine/utils.py`` ``prepare_micro_batches``). With ``use_dynamic_bsz``
    micro batches are packed to ``sft_max_token_len_per_gpu`` tokens instead, and neither per-GPU count sizes them;
    the two must still agree, so that switching it off changes nothing silently. Hence, as TRL reads them:

    * ``sft.per_device_train_batch_size`` == the profile's ``sft_micro_batch_size_per_gpu``;
    * ``per_device_train_batch_size * gradient_accumulation_steps * n_gpus_per_node * nnodes`` ==
      ``verl.sft_train_batch_size``;
    * ``sft.bf16`` is true (verl trains in bf16 mixed precision).

    Raises :class:`ConfigError` (one line, naming the keys, both values and ``verl.profile``) on any disagreement."""
    _check_bf16(sft, "sft")
    _batch_agreement(sft, "sft", "sft_micro_batch_size_per_gpu", profile.sft_micro_batch_size_per_gpu,
                     "verl.sft_train_batch_size", verl.sft_train_batch_size,
                     profile.n_gpus_per_node * profile.nnodes, verl.profile)


def check_grpo_batch(grpo: Any, verl: VerlParams, profile: VerlProfile, where: str = "grpo") -> None:
    """Check a GRPO section's (``grpo`` or ``repair.train``, named by ``where``) batch and precision params, which
    verl's PPO trainer does not read, against the verl settings that govern them; returns ``None``.

    verl 0.9.1's actor updates on ``ppo_mini_batch_size * rollout.n`` responses per optimizer step
    (``verl/trainer/ppo/v1/trainer_base.py`` ``_update_actor``; here ``verl.ppo_mini_batch_size *
    <where>.num_generations``), spread over every GPU (``n_gpus_per_node * nnodes``) in micro batches of the
    profile's ``ppo_micro_batch_size_per_gpu`` responses (token-packed to ``ppo_max_token_len_per_gpu`` with
    ``use_dynamic_bsz``, as for SFT: :func:`check_sft_batch`). TRL's GRPO steps on ``per_device_train_batch_size *
    gradient_accumulation_steps * processes`` completions. Hence:

    * ``<where>.per_device_train_batch_size`` == the profile's ``ppo_micro_batch_size_per_gpu``;
    * ``per_device_train_batch_size * gradient_accumulation_steps * n_gpus_per_node * nnodes`` ==
      ``verl.ppo_mini_batch_size * <where>.num_generations``;
    * ``<where>.bf16`` is true.

    Raises :class:`ConfigError` (one line, naming the keys, both values and ``verl.profile``) on any disagreement."""
    _check_bf16(grpo, where)
    _batch_agreement(grpo, where, "ppo_micro_batch_size_per_gpu", profile.ppo_micro_batch_size_per_gpu,
                     f"verl.ppo_mini_batch_size*{where}.num_generations",
                     verl.ppo_mini_batch_size * grpo.num_generations, profile.n_gpus_per_node * profile.nnodes,
                     verl.profile)


SAVE_LOSS_FRACTION = 0.05
"""``save_freq: auto`` saves often enough that a crash loses at most this fraction of the run's steps."""


def save_freq_for(save_freq: int | str, steps: int | None = None, last_only: int = 10**9) -> int:
    """``trainer.save_freq`` for verl: ``save_freq`` when it is a positive number; ``last_only`` (default 10**9, a
    period longer than any run: only the last step is saved) when it is <= 0; for ``auto``,
    ``max(1, floor(steps x SAVE_LOSS_FRACTION))`` so that a crash loses at most ~5 % of the run (100 steps: every 5;
    20: every step), or 10 when ``steps`` is unknown (an epoch-bounded run the caller could not count).

    verl 0.9.1's v1 PPO trainer (``verl/trainer/ppo/v1/trainer_base.py``) saves only when ``save_freq > 0`` (then at
    every multiple and at the last step), so ``-1`` left no checkpoint to merge (seen on the H100): hence the long
    period for "last step only". Raises :class:`ConfigError` for any other string."""
    if isinstance(save_freq, str):
        if save_freq != "auto":
            raise ConfigError(f"verl.save_freq: {save_freq!r} is neither a number of steps nor 'auto'")
        return max(1, int(steps * SAVE_LOSS_FRACTION)) if steps else 10
    return save_freq if save_freq > 0 else last_only


def local_or_id(model: str | Path) -> str:
    """An existing local folder as an absolute path (verl's Ray workers and torchrun ranks do not run in the stage's
    working directory), anything else (a Hub id) unchanged."""
    p = Path(model)
    return str(p.resolve()) if p.exists() else str(model)


def _hydra_quoted(v: str) -> str:
    """``v`` escaped for the inside of a single-quoted Hydra override value (Hydra docs, "Override grammar: quoted
    values"): a backslash is literal except before a quote or at the end, where it is doubled; a quote is
    ``\\'``."""
    v = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", v)
    return re.sub(r"(\\+)$", lambda m: m.group(1) * 2, v)


def ray_env_override(env: Mapping[str, str]) -> str:
    """One Hydra override putting ``env`` into Ray's job ``runtime_env.env_vars``:
    ``+ray_kwargs.ray_init.runtime_env.env_vars={K:'v',…}``.

    verl 0.9.1's ``main_ppo.run_ppo`` merges ``ray_kwargs.ray_init.runtime_env`` over its own defaults
    (``constants_ppo.get_ppo_ray_runtime_env``) and passes the result to ``ray.init``; a ``runtime_env`` given to
    ``ray.init`` is the job's, applied to every worker and actor of the job on every node (Ray docs, "Runtime
    environments"), also when ``ray.init`` joins an existing cluster (``RAY_ADDRESS``), whose raylets were started
    with another environment. Every value is quoted, so Hydra keeps it a string (Ray requires ``str`` values; an
    unquoted ``8`` or ``true`` would become an int or a bool). Raises ``ValueError`` for a name that is not an
    environment variable name, or a value holding ``${`` (an interpolation to OmegaConf)."""
    items = []
    for k, v in sorted(env.items()):
        if not k or not (k[0].isalpha() or k[0] == "_") or not all(c.isalnum() or c == "_" for c in k):
            raise ValueError(f"ray_env: {k!r} is not an environment variable name")
        if "${" in str(v):  # OmegaConf would resolve it as an interpolation (verl resolves its config)
            raise ValueError(f"ray_env: the value of {k} holds '${{', which verl's config would interpolate")
        items.append(f"{k}:'{_hydra_quoted(str(v))}'")
    return "+ray_kwargs.ray_init.runtime_env.env_vars={" + ",".join(items) + "}"
