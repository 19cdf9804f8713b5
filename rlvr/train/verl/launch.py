"""Launch verl (GRPO or SFT) from the grpo/sft stages: overrides → command → run → curves → merged HF model.

Ray (GRPO): ``verl.trainer.main_ppo`` calls ``ray.init()`` itself when Ray is not initialised; ``ray.init`` joins the
cluster named by ``RAY_ADDRESS`` (Ray's own variable) and otherwise starts a local one on this node. So:

* single node: nothing to do (or ``start_head=True`` runs ``ray start --head`` first and ``ray stop`` after, for a
  dashboard that outlives the driver);
* existing cluster: ``ray_address="<host>:6379"`` (or ``RAY_ADDRESS`` in the environment); every node needs the same
  venv with rlvr installed, since the reward function is imported as ``pkg://rlvr.reward.verl`` in Ray workers.

Either way the driver's where/how settings (:func:`propagated_env`) reach every worker through the job's Ray
``runtime_env`` (a cluster started elsewhere has its own environment), and :mod:`rlvr.train.verl.preflight` checks
the judge before verl starts.

Every attempt logs to its own file (``<run_dir>/logs/attempt-<k>.jsonl`` through ``VERL_FILE_LOGGER_PATH``; verl's
file logger truncates on open) and :mod:`rlvr.train.verl.logs` merges them, so a resumed run keeps earlier curves.
Checkpoints live in ``<run_dir>/checkpoints`` (outside DVC outputs); verl resumes from them (``resume_mode=auto``).
Before each launch :func:`pre_launch` prunes checkpoints below the newest ``verl.max_ckpt_to_keep`` and checks the
free space the run needs (:mod:`rlvr.train.verl.checkpoints`); after the publish the optimizer state is dropped and
the run marked finished, so a re-run of a finished run merges its kept checkpoint without starting verl
(:mod:`rlvr.train.verl.resume`).
The subprocess runner is injectable (tests pass a fake; nothing here needs a GPU until it runs). The default,
:func:`run_teed`, copies verl's stderr through and turns a run the judge step guard stopped into
:class:`rlvr.reward.step_guard.JudgeDied` with the guard's own message, instead of a bare exit status.
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.io import atomic_dir, atomic_write_json, atomic_write_text
from rlvr.train.verl import logs as vlogs
from rlvr.train.verl.checkpoints import drop_optimizer
from rlvr.train.verl.mapping import check_grpo_batch, check_sft_batch, save_freq_for, steps_for
from rlvr.train.verl.merge import merge
from rlvr.train.verl.overrides import (
    VerlParams,
    VerlProfile,
    grpo_command,
    grpo_overrides,
    load_profile,
    resolve_attention,
    sft_command,
    sft_overrides,
    write_overrides,
)
from rlvr.train.verl.preflight import cluster_preflight, judge_preflight, preflight
from rlvr.train.verl.record import portable_overrides, portable_path
from rlvr.train.verl.resume import GRPO_LOAD_CONTENTS, SFT_LOAD_CONTENTS, mark_finished, pre_launch, sft_steps
from rlvr.train.verl.validation import final_dev

__all__ = [
    "PROPAGATED_PREFIXES",
    "Runner",
    "cluster_preflight",
    "judge_preflight",
    "launch",
    "log_attention",
    "next_attempt_log",
    "pre_launch",
    "preflight",
    "propagated_env",
    "ray_env",
    "run_grpo_verl",
    "run_sft_verl",
    "run_teed",
    "worker_env",
]

Runner = Callable[..., Any]


_JUDGE_DIED = re.compile(r"rlvr\.reward\.step_guard\.JudgeDied: (.+)")


def run_teed(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """``subprocess.run(argv, env=env, cwd=cwd, check=check)`` whose child's stderr is copied to this process's
    stderr as it comes (a progress bar's carriage-return redraws included; stdout is inherited untouched) and scanned
    for the traceback line ``rlvr.reward.step_guard.JudgeDied: <message>``, which Ray prints when the step guard
    stopped verl's trainer (:mod:`rlvr.reward.step_guard`; the estimator raises it in verl's driver actor).

    Returns the ``CompletedProcess`` (``stdout``/``stderr`` ``None``). With ``check`` and a non-zero exit status it
    raises :class:`rlvr.reward.step_guard.JudgeDied` with the last such message when one was seen (the cause is the
    ``CalledProcessError``), so a stage stopped by a dead judge ends on the guard's one-line reason rather than on
    the trainer's exit status; otherwise ``subprocess.CalledProcessError``. It returns when the child's stderr closes;
    an exception while copying (``KeyboardInterrupt`` included) kills the child first."""
    died: str | None = None

    def scan(line: bytes) -> None:
        nonlocal died
        if b"JudgeDied" in line and (m := _JUDGE_DIED.search(line.decode("utf-8", "replace"))):
            died = m.group(1).strip()

    with subprocess.Popen(list(argv), env=None if env is None else dict(env), cwd=None if cwd is None else str(cwd),
                          stderr=subprocess.PIPE) as proc:
        assert proc.stderr is not None
        err_out = sys.stderr
        out = getattr(err_out, "buffer", None)
        text = codecs.getincrementaldecoder("utf-8")("replace")  # for a stderr without bytes (a test's capture)
        pending = b""
        try:
            # copied as it comes, not per line: progress bars redraw with \r and end their line only when done
            while chunk := proc.stderr.read1(1 << 16):  # type: ignore[attr-defined]
                if out is not None:
                    out.write(chunk)
                    out.flush()
                elif err_out is not None:
                    err_out.write(text.decode(chunk))
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    scan(line)
                pending = pending[-(1 << 16):]  # a line is scanned by its last 64 kB at most
            scan(pending)
        except BaseException:  # Ctrl-C or an error here: stop the trainer, as subprocess.run does
            proc.kill()
            raise
    if check and proc.returncode != 0:
        err = subprocess.CalledProcessError(proc.returncode, list(argv))
        if died is not None:
            from rlvr.reward.step_guard import JudgeDied

            raise JudgeDied(died) from err
        raise err
    return subprocess.CompletedProcess(list(argv), proc.returncode)


def log_attention(profile: VerlProfile) -> None:
    """Print the attention backend a verl launch will use (``resolve_attention``) to stderr, for the stage's log."""
    attn, rmpad = resolve_attention(profile)
    print(f"verl attention: {attn} (use_remove_padding={rmpad})", file=sys.stderr)


def launch(
    cmd: Sequence[str],
    overrides: Sequence[str],
    env: Mapping[str, str] | None = None,
    runner: Runner = run_teed,
    cwd: str | Path | None = None,
    unset: Sequence[str] = (),
) -> Any:
    """Run ``[*cmd, *overrides]`` with ``env`` laid over ``os.environ`` minus the names in ``unset``; returns what
    ``runner`` returns.

    ``runner`` is called as ``runner(argv, env=…, cwd=…, check=True)`` (``subprocess.run``'s signature), so a
    failing trainer raises ``subprocess.CalledProcessError`` with its exit status (:func:`run_teed`, the default:
    :class:`rlvr.reward.step_guard.JudgeDied` when the judge step guard stopped it)."""
    full_env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    return runner([*cmd, *overrides], env=full_env, cwd=None if cwd is None else str(cwd), check=True)


# Ray leaves CUDA_VISIBLE_DEVICES alone and verl's workers pick their GPU from Ray's accelerator ids: on a 2-GPU
# H100 host verl GRPO otherwise failed at FSDP init (NCCL "Duplicate GPU detected"). Under torchrun (verl SFT) the
# same variable makes verl's worker ask Ray for accelerator ids it has none of (IndexError at engine build, seen on
# the lent 2 x H100), so the SFT launch removes it.
NOSET_CUDA_VISIBLE_DEVICES = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"


def ray_env(ray_address: str | None = None, n_gpus: int = 1) -> dict[str, str]:
    """Environment for a GRPO launch: ``RAY_ADDRESS`` = ``ray_address`` when given (an existing cluster),
    ``WANDB_MODE=offline`` unless set, ``TOKENIZERS_PARALLELISM=true`` (verl's own default), and
    :data:`NOSET_CUDA_VISIBLE_DEVICES` ``=1`` when the run uses more than one GPU."""
    env = {"WANDB_MODE": os.environ.get("WANDB_MODE", "offline"), "TOKENIZERS_PARALLELISM": "true"}
    if n_gpus > 1:
        env[NOSET_CUDA_VISIBLE_DEVICES] = "1"
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    return env


def worker_env(log_path: str | Path, profile: VerlProfile, judge: Any = None) -> dict[str, str]:
    """What every Ray worker of a GRPO/repair run gets through ``runtime_env``: :func:`propagated_env`, verl's file
    logger path (``VERL_FILE_LOGGER_PATH``, absolute: the logger lives in a Ray actor), the step guard's
    partial-failure bound (:data:`rlvr.reward.share_window.SHARE_ENV`: ``judge.max_sandbox_error_share`` and
    ``judge.sandbox_error_window_steps`` of ``judge``, a :class:`rlvr.judge.preflight.JudgeParams`; ``None`` = the
    ``judge`` section of ``params.yaml`` in the working directory, the stages' default params file) and, on several
    GPUs, :data:`NOSET_CUDA_VISIBLE_DEVICES`. On a local cluster the workers would inherit these from the driver; on
    an existing one (``RAY_ADDRESS``) only ``runtime_env`` reaches them. Raises :class:`rlvr.config.ConfigError` for
    an invalid ``judge`` section."""
    from rlvr.judge.preflight import JudgeParams, load_judge_params
    from rlvr.reward.share_window import share_env

    if judge is None:
        judge = load_judge_params("params.yaml") if Path("params.yaml").is_file() else JudgeParams()
    env = {**propagated_env(), "VERL_FILE_LOGGER_PATH": str(Path(log_path).resolve()),
           **share_env(judge.max_sandbox_error_share, judge.sandbox_error_window_steps)}
    if profile.n_gpus_per_node * profile.nnodes > 1:
        env[NOSET_CUDA_VISIBLE_DEVICES] = "1"
    return env


PROPAGATED_PREFIXES: tuple[str, ...] = ("RLVR_", "WANDB_", "HF_")
"""Environment variables (by prefix) that :func:`propagated_env` hands to every Ray worker: rlvr's where/how settings
(``RLVR_SANDBOX_URL``, ``RLVR_CACHE_DIR``…), W&B's (``WANDB_MODE``, ``WANDB_PROJECT``…) and the Hub's
(``HF_HOME``, ``HF_HUB_OFFLINE``…)."""
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def propagated_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The driver's settings every Ray worker must see: the variables of ``environ`` (default ``os.environ``) with a
    :data:`PROPAGATED_PREFIXES` prefix, plus ``WANDB_MODE`` as :func:`ray_env` sets it.

    Secrets (a name containing ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD`` or ``CREDENTIAL``, e.g.
    ``WANDB_API_KEY``, ``HF_TOKEN``) are left out: the overrides are written to a file in the run folder
    (``<run>/verl_overrides.txt``, ``verl_command.sh``); give them to the cluster's nodes yourself (``wandb login``,
    the environment of ``ray start``). A relative ``RLVR_CACHE_DIR`` is made absolute (Ray workers do not run in the
    driver's working directory). A value holding ``${`` is left out (verl's config would interpolate it)."""
    src = os.environ if environ is None else environ
    env = {k: v for k, v in src.items()
           if k.startswith(PROPAGATED_PREFIXES) and not any(m in k.upper() for m in _SECRET_MARKERS)
           and "${" not in v}  # OmegaConf would take it for an interpolation (ray_env_override refuses it)
    env.setdefault("WANDB_MODE", "offline")
    if env.get("RLVR_CACHE_DIR"):
        env["RLVR_CACHE_DIR"] = str(Path(env["RLVR_CACHE_DIR"]).absolute())
    return env


def next_attempt_log(run_dir: str | Path) -> tuple[Path, list[Path]]:
    """``(new log path, earlier attempts' logs in order)`` under ``<run_dir>/logs/attempt-<k>.jsonl``."""
    d = Path(run_dir) / "logs"
    d.mkdir(parents=True, exist_ok=True)
    old = sorted(d.glob("attempt-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
    k = int(old[-1].stem.split("-")[1]) + 1 if old else 1
    return d / f"attempt-{k}.jsonl", old


def run_grpo_verl(
    grpo: Any,
    verl: VerlParams,
    *,
    model_path: str | Path,
    train_files: str | Path,
    val_files: str | Path,
    reward_mode: str,
    out_model_dir: str | Path,
    curves_path: str | Path,
    run_dir: str | Path,
    experiment_name: str,
    reward_shaping: Mapping[str, Any] | None = None,
    profile: VerlProfile | None = None,
    ray_address: str | None = None,
    start_head: bool = False,
    python: str = sys.executable,
    runner: Runner = run_teed,
    check: Callable[..., Any] | None = preflight,
    judge: Any = None,
) -> dict[str, Any]:
    """GRPO on verl end to end; returns the metrics dict for ``metrics/grpo*.json``. ``judge``: the stage's
    :class:`rlvr.judge.preflight.JudgeParams` (the step guard's partial-failure bound, :func:`worker_env`).

    First ``check(env, ray_address)`` (default :func:`rlvr.train.verl.preflight.preflight`: the judge accepts a
    correct program here and, on an existing cluster, on every node; ``None`` skips it), so a stage whose workers
    cannot reach the judge fails before training. The driver's settings (:func:`propagated_env`: ``RLVR_*``,
    ``WANDB_*``, ``HF_*``) reach every Ray worker through the job's ``runtime_env`` (the ``ray_env`` of
    :func:`rlvr.train.verl.overrides.grpo_overrides`). Writes ``<run_dir>/verl_overrides.txt`` and
    ``verl_command.sh`` before launching, runs
    ``python -m verl.trainer.main_ppo <overrides>``, converts the logs to ``curves_path`` (:data:`logs.GRPO_COLUMNS`),
    merges the last checkpoint's actor into ``out_model_dir`` (atomically, with a record of the overrides beside
    the weights: :func:`portable_overrides`). ``model_path`` is the policy to start from (the sft/dpo output, or
    ``verl.model``).

    Metrics: ``engine``, ``reward_mode``, ``steps`` (last logged step), ``reward_first``/``reward_last`` (mean
    ``reward_mean`` over the first/last quarter of steps), ``accepted_rate_first``/``_last``, the partial judge
    failure (:func:`rlvr.train.verl.logs.judge_failures`: ``sandbox_error_share_max``/``_mean``,
    ``tool_sandbox_errors``), ``checkpoint``, and
    ``dev``: verl's validation of the trained policy on ``val_files``
    (:func:`rlvr.train.verl.validation.validation_scores`: ``accepted@1``, ``pass_ratio``, ``n``, ``step``,
    ``by_source``), the local engine's ``dev`` keys. verl validates every ``verl.test_freq`` steps and after the
    last step; ``dev`` is left out when its last validation is not at the
    last training step (``test_freq`` -1: verl only validated the input policy, before training).
    Raises ``ValueError`` when the validation logged is not what the reward returns
    (:func:`~rlvr.train.verl.validation.validation_scores`).
    Raises ``subprocess.CalledProcessError`` when a command fails (:class:`rlvr.reward.step_guard.JudgeDied` when the
    judge step guard stopped verl, :func:`run_teed`), ``FileNotFoundError`` when no checkpoint appears.
    Raises :class:`rlvr.config.ConfigError` before anything runs when ``grpo``'s batch or precision params disagree
    with verl's (:func:`rlvr.train.verl.mapping.check_grpo_batch`) or verl cannot express a value
    (:func:`rlvr.train.verl.overrides.grpo_overrides`).
    """
    run = Path(run_dir)
    profile = profile or load_profile(verl.profile)
    check_grpo_batch(grpo, verl, profile)
    ckpt_dir = run / "checkpoints"
    steps = steps_for(verl.total_training_steps, getattr(grpo, "max_steps", None), "grpo")
    done, extra = pre_launch(run, ckpt_dir, out_model_dir, model_path, verl, steps,
                             save_freq_for(verl.save_freq, steps), GRPO_LOAD_CONTENTS, profile.extra_overrides)
    log_path, old_logs = next_attempt_log(run)
    rollouts = run / "rollouts"
    overrides = grpo_overrides(
        grpo, verl, profile, train_files=Path(train_files).resolve(), val_files=Path(val_files).resolve(),
        model_path=model_path, reward_mode=reward_mode, ckpt_dir=ckpt_dir.resolve(),
        experiment_name=experiment_name, rollout_data_dir=rollouts.resolve(), reward_shaping=reward_shaping,
        judge_log_dir=(run / "judge").resolve(), ray_env=worker_env(log_path, profile, judge),
    )
    overrides += extra
    cmd = grpo_command(python)
    logs = old_logs
    if not done:
        write_overrides(run, cmd, overrides)
        log_attention(profile)
        env = {**ray_env(ray_address, profile.n_gpus_per_node * profile.nnodes),
               "VERL_FILE_LOGGER_PATH": str(log_path.resolve())}
        if check is not None:
            check(propagated_env(), ray_address)
        if start_head and not ray_address:
            runner(["ray", "start", "--head", "--disable-usage-stats"], env={**os.environ, **env}, check=True)
            env["RAY_ADDRESS"] = "auto"
        try:
            launch(cmd, overrides, env, runner=runner)
        finally:
            if start_head and not ray_address:
                runner(["ray", "stop"], env={**os.environ, **env}, check=False)
        logs = [*old_logs, log_path]
    rows = vlogs.step_rows(logs, run, reward_mode, train_files, val_files)
    vlogs.write_tsv(curves_path, rows, vlogs.GRPO_COLUMNS)
    dev = final_dev(vlogs.read_file_logs(logs), val_files, rows[-1]["step"] if rows else None)
    ckpt = _publish(ckpt_dir, out_model_dir, "actor", run, python, runner, target_steps=steps)
    attn, rmpad = resolve_attention(profile)
    return {
        "engine": "verl",
        "attention": {"attn_implementation": attn, "use_remove_padding": rmpad},
        "reward_mode": reward_mode,
        "steps": rows[-1]["step"] if rows else 0,
        "checkpoint": portable_path(ckpt, run),
        **{k.replace("reward_mean", "reward"): v for k, v in vlogs.summarise(rows, "reward_mean").items()},
        **vlogs.summarise(rows, "accepted_rate"),
        **vlogs.judge_failures(rows),
        **({"dev": dev} if dev is not None else {}),
    }


def run_sft_verl(
    sft: Any,
    verl: VerlParams,
    *,
    model_path: str | Path,
    train_files: str | Path,
    val_files: str | Path | None,
    out_model_dir: str | Path,
    curves_path: str | Path,
    run_dir: str | Path,
    experiment_name: str = "sft",
    profile: VerlProfile | None = None,
    rdzv_endpoint: str | None = None,
    python: str = sys.executable,
    runner: Runner = run_teed,
) -> dict[str, Any]:
    """SFT on verl end to end (``torchrun -m verl.trainer.sft_trainer``); returns the metrics dict.

    ``train_files``/``val_files``: the ``messages`` parquet (:func:`rlvr.train.verl.data.write_sft_parquet`).
    Curves: :data:`logs.SFT_COLUMNS`. Metrics: ``engine``, ``steps``, ``loss_first``/``loss_last``, ``val_loss``
    (last logged), ``checkpoint``. Raises like :func:`run_grpo_verl`; the batch and precision check is
    :func:`rlvr.train.verl.mapping.check_sft_batch`."""
    run = Path(run_dir)
    profile = profile or load_profile(verl.profile)
    check_sft_batch(sft, verl, profile)
    ckpt_dir = run / "checkpoints"
    steps = sft.max_steps if sft.max_steps and sft.max_steps > 0 else None
    hint = steps or sft_steps(train_files, verl.sft_train_batch_size, sft.epochs)
    done, extra = pre_launch(run, ckpt_dir, out_model_dir, model_path, verl, steps,
                             save_freq_for(verl.save_freq, hint), SFT_LOAD_CONTENTS, profile.extra_overrides)
    log_path, old_logs = next_attempt_log(run)
    overrides = sft_overrides(
        sft, verl, profile, train_files=Path(train_files).resolve(),
        val_files=None if val_files is None else Path(val_files).resolve(), model_path=model_path,
        ckpt_dir=ckpt_dir.resolve(), experiment_name=experiment_name, steps_hint=hint,
    ) + extra
    cmd = sft_command(profile, python=python, rdzv_endpoint=rdzv_endpoint)
    logs = old_logs
    if not done:
        write_overrides(run, cmd, overrides)
        log_attention(profile)
        env = {"WANDB_MODE": os.environ.get("WANDB_MODE", "offline"),
               "VERL_FILE_LOGGER_PATH": str(log_path.resolve())}
        launch(cmd, overrides, env, runner=runner, unset=(NOSET_CUDA_VISIBLE_DEVICES,))
        logs = [*old_logs, log_path]
    rows = vlogs.sft_rows(vlogs.read_file_logs(logs))
    vlogs.write_tsv(curves_path, rows, vlogs.SFT_COLUMNS)
    ckpt = _publish(ckpt_dir, out_model_dir, None, run, python, runner, target_steps=steps)
    val = [r["val_loss"] for r in rows if r.get("val_loss") is not None]
    attn, rmpad = resolve_attention(profile)
    return {
        "engine": "verl",
        "attention": {"attn_implementation": attn, "use_remove_padding": rmpad},
        "steps": rows[-1]["step"] if rows else 0,
        "val_loss": val[-1] if val else None,
        "checkpoint": portable_path(ckpt, run),
        **vlogs.summarise(rows, "loss"),
    }


def _publish(
    ckpt_dir: Path, out_model_dir: str | Path, role: str | None, run: Path, python: str, runner: Runner,
    target_steps: int | None = None,
) -> str:
    """Merge the last checkpoint into ``out_model_dir`` atomically, with a record of the run beside the weights:
    ``verl_overrides.txt`` (:func:`portable_overrides` of the run's) and ``verl_merge.json`` (the checkpoint merged,
    as ``<run>/…``). The exact, machine-specific ``verl_command.sh`` and ``verl_overrides.txt`` stay in the run folder.
    Once published, the run keeps only its newest checkpoint's model (the optimizer state and older checkpoints are
    deleted: :func:`rlvr.train.verl.checkpoints.drop_optimizer`) and is marked finished for ``target_steps``
    (:func:`rlvr.train.verl.resume.mark_finished`). Returns the checkpoint's absolute path."""
    with atomic_dir(out_model_dir) as tmp:
        cmd = merge(ckpt_dir, tmp, role=role, python=python, runner=runner)
        overrides = (run / "verl_overrides.txt").read_text(encoding="utf-8").splitlines()
        atomic_write_text(tmp / "verl_overrides.txt", "\n".join(portable_overrides(overrides, run)) + "\n")
        local_dir = cmd[cmd.index("--local_dir") + 1]
        atomic_write_json(tmp / "verl_merge.json", {"checkpoint": portable_path(local_dir, run),
                                                    "merger": "verl.model_merger fsdp"})
    freed = drop_optimizer(ckpt_dir)
    if freed:
        print(f"verl: published; dropped {freed / 1e9:.1f} GB of optimizer state and older checkpoints from {ckpt_dir}",
              file=sys.stderr)
    mark_finished(run, ckpt_dir, target_steps)
    return local_dir

