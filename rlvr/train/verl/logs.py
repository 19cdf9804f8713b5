"""verl's logged steps → DVC plot TSVs with rlvr's column names.

Sources (verl 0.9.1):

* the ``file`` logger (``verl.utils.tracking.FileLogger``): one JSON line per ``Tracking.log`` call,
  ``{"step": <int>, "data": {<metric>: <number>, …}}``, written to ``$VERL_FILE_LOGGER_PATH`` or else
  ``$VERL_FILE_LOGGER_ROOT/<project_name>/<experiment_name>.jsonl``. The file is opened with mode ``wb`` (a resumed
  run truncates it), so the launcher gives every attempt its own file and :func:`read_file_logs` merges them (later
  files win on a repeated step). One step may have several lines (validation metrics are logged separately).
* the rollout dump (``trainer.rollout_data_dir``): ``<dir>/<step>.jsonl``, one line per sample with ``score`` and
  ``uid`` = ``"{prompt uid}_{session}_{output index}"`` (``AgentLoopWorkerTQ``), so a GRPO group is the prompt uid.
  verl 0.9.1 logs no per-step reward std, zero-std group fraction or ``reward_extra_info`` means for training
  batches; those columns come from here.

GRPO columns (:data:`GRPO_COLUMNS`) and where each comes from:

=================  ========================================================================================
reward_mean        ``critic/score/mean`` (sequence score = the reward function's ``score``); in a step with an
                   excluded sandbox error (NaN score, so verl logs NaN) the dump's mean over the scored samples
reward_std         std of the dumped scores of the step (population std)
accepted_rate      dump: fraction of samples with score ≥ 1 (``sparse``/``dense`` only: there score 1 ⇔ all
                   tests passed; empty for ``shaped``, whose length term can lower an accepted score)
pass_ratio         dump: mean score in ``dense`` mode (score = pass_ratio), ``critic/score/mean`` likewise; else
                   empty
zero_std_frac      fraction of the step's generated GRPO groups whose scores are all equal (zero advantage, no
                   gradient): the dump's zero-std groups plus the groups DAPO's dynamic sampling evicted
                   (``filtered_groups``), over the dump's groups plus those evicted. Without ``verl.filter_groups``
                   it is the dump's share; with it the trained batch has none, and this is the share that was
                   generated and dropped
all_pass_frac      dump: fraction of the trained groups whose rollouts all scored ≥ 1 (all accepted)
all_fail_frac      dump: fraction of the trained groups whose rollouts all scored ≤ 0 (all failed). ``zero_std_frac``
                   also holds groups with one equal score between (``dense``: every rollout the same pass_ratio)
filtered_groups    ``training/filter_groups/evicted_samples``: groups evicted by ``algorithm.filter_groups`` while
                   the step's batch was filled (verl counts group uids under that name); 0 when it is off
kl                 ``actor/kl_loss`` (KL to the reference in the loss; only logged with ``use_kl_loss``)
entropy            ``actor/entropy``
response_length    ``response_length/mean`` (tokens)
clip_ratio         ``actor/pg_clipfrac``
judge_s            judge seconds per step: ``timing_s/reward`` when verl logs it (reward computed after the
                   rollout); with the agent-loop reward (verl 0.9's default) the sum of the step's training samples'
                   ``judge_s`` from the judge log (:mod:`rlvr.reward.judge_log`; CPU-seconds of judging, summed
                   over concurrently judged samples, so it can exceed the step's wall time). Written to the
                   TSV's cost mirror, not the plot (:func:`write_tsv`)
judge_wall_s       wall seconds during which at least one of the step's samples was being judged: the judge log's
                   union of judging intervals, else ``timing_s/reward`` (a reward phase after the rollout is all
                   judging); ``judge_wall_s / step_s`` is the judge's wall-time share (cost mirror)
step_s, gen_s,     ``timing_s/step``, ``timing_s/gen`` (rollout; verl 0.9's agent loop scores each rollout as
ref_s,             it finishes, so the reward is inside it), ``timing_s/ref``, ``timing_s/old_log_prob``,
old_log_prob_s,    ``timing_s/update_actor``, ``timing_s/update_weights``, ``timing_s/save_checkpoint`` (seconds;
update_actor_s,    cost mirror). verl 0.9.1 saves inside the step's timer, so a saving step's ``step_s`` includes
update_weights_s,  ``save_checkpoint_s`` (the last step always saves: ``save_freq`` -1 maps to "at the end")
save_checkpoint_s
tokens_per_gpu_per_s  ``perf/throughput``: the step's tokens / step seconds / GPUs (cost mirror)
mfu_actor          ``perf/mfu/actor``: the actor update's model FLOPs utilisation, 0–1 (cost mirror)
max_memory_allocated_gb, max_memory_reserved_gb  ``actor/perf/max_memory_*``: the torch allocator's peak on the
                   training ranks since the worker started (verl never resets it: a running maximum, not the step's
                   own peak), GB (verl's figure, not nvidia-smi's whole device; cost mirror)
judged             samples in the judge log for the step (empty without a judge log)
num_turns          ``num_turns/mean``: messages per episode (prompt + responses + user/tool turns; 2 = one answer;
                   above 2 in repair when the protocol gave feedback, :mod:`rlvr.repair.protocol`, or a
                   ```python-run call ran)
tool_parse_failures  tool calls of the step's episodes that verl's parser could not read (judge log's
                   ``tool_parse_failures``, :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`; always 0 for
                   repair-protocol rows, which have no verl tool; empty without a judge log)
sandbox_error_share  judge log: the share of the step's training samples sent to the judge (``has_code``) whose
                   verdict was ``sandbox_error`` (0 on a healthy judge; empty without a judge log). The run stops
                   when it stays above ``judge.max_sandbox_error_share`` for ``judge.sandbox_error_window_steps``
                   steps (:mod:`rlvr.reward.share_window`)
tool_sandbox_errors  judge log: tool calls of the step's episodes (repair's ``run_tests``) that failed for the
                   infrastructure's reasons: the judge answered ``sandbox_error`` or the tool raised
                   (``tool_sandbox_errors``, :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`)
=================  ========================================================================================

SFT columns (:data:`SFT_COLUMNS`): ``loss`` ← ``train/loss``, ``grad_norm`` ← ``train/grad_norm``,
``learning_rate`` ← ``train/lr``, ``tokens`` ← ``train/global_tokens``, ``val_loss`` ← ``val/loss``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.io import read_appended_jsonl
from rlvr.layout import write_curves
from rlvr.reward import judge_log

__all__ = [
    "GRPO_COLUMNS",
    "GRPO_KEYS",
    "SFT_COLUMNS",
    "SFT_KEYS",
    "grpo_rows",
    "judge_failures",
    "parquet_splits",
    "read_file_logs",
    "read_rollout_dumps",
    "sft_rows",
    "step_rows",
    "summarise",
    "write_tsv",
]

# TSV column -> verl file-logger key (columns computed from rollout dumps are absent here).
GRPO_KEYS: dict[str, str] = {
    "reward_mean": "critic/score/mean",
    "kl": "actor/kl_loss",
    "entropy": "actor/entropy",
    "response_length": "response_length/mean",
    "clip_ratio": "actor/pg_clipfrac",
    "judge_s": "timing_s/reward",
    "num_turns": "num_turns/mean",
    "filtered_groups": "training/filter_groups/evicted_samples",
    "step_s": "timing_s/step",
    "gen_s": "timing_s/gen",
    "ref_s": "timing_s/ref",
    "old_log_prob_s": "timing_s/old_log_prob",
    "update_actor_s": "timing_s/update_actor",
    "update_weights_s": "timing_s/update_weights",
    "save_checkpoint_s": "timing_s/save_checkpoint",
    "tokens_per_gpu_per_s": "perf/throughput",
    "mfu_actor": "perf/mfu/actor",
    "max_memory_allocated_gb": "actor/perf/max_memory_allocated_gb",
    "max_memory_reserved_gb": "actor/perf/max_memory_reserved_gb",
}
GRPO_COLUMNS: tuple[str, ...] = (
    "reward_mean",
    "reward_std",
    "accepted_rate",
    "pass_ratio",
    "zero_std_frac",
    "all_pass_frac",
    "all_fail_frac",
    "filtered_groups",
    "kl",
    "entropy",
    "response_length",
    "clip_ratio",
    "judge_s",
    "judge_wall_s",
    "judged",
    "num_turns",
    "tool_parse_failures",
    "sandbox_error_share",
    "tool_sandbox_errors",
    "step_s",
    "gen_s",
    "ref_s",
    "old_log_prob_s",
    "update_actor_s",
    "update_weights_s",
    "save_checkpoint_s",
    "tokens_per_gpu_per_s",
    "mfu_actor",
    "max_memory_allocated_gb",
    "max_memory_reserved_gb",
)
SFT_KEYS: dict[str, str] = {
    "loss": "train/loss",
    "grad_norm": "train/grad_norm",
    "learning_rate": "train/lr",
    "tokens": "train/global_tokens",
    "val_loss": "val/loss",
}
SFT_COLUMNS: tuple[str, ...] = tuple(SFT_KEYS)


def read_file_logs(paths: Iterable[str | Path]) -> dict[int, dict[str, Any]]:
    """Merge verl ``file`` logger JSONL files (in the given order) into ``{step: {metric: value}}``.

    Missing files are skipped (an attempt that died before logging). Raises ``ValueError`` naming the file and line
    for a line that is not ``{"step": int, "data": {...}}`` (a torn last line of a killed run is skipped)."""
    steps: dict[int, dict[str, Any]] = defaultdict(dict)
    for path in paths:
        p = Path(path)
        if not p.is_file():
            continue
        for lineno, rec in read_appended_jsonl(p):
            if not isinstance(rec, dict) or not isinstance(rec.get("step"), int) or not isinstance(
                rec.get("data"), dict
            ):
                raise ValueError(f"{p}:{lineno}: expected {{'step': int, 'data': {{...}}}} (verl file logger)")
            steps[rec["step"]].update(rec["data"])
    return dict(sorted(steps.items()))


def read_rollout_dumps(rollout_dir: str | Path | None) -> dict[int, list[dict[str, Any]]]:
    """``{step: [sample records]}`` from verl's rollout dump folder (``<step>.jsonl`` files); ``{}`` if absent.

    Lines are read by :func:`rlvr.io.read_appended_jsonl` (newline-separated only: a sample's text may hold U+2029
    and the like raw). Raises ``ValueError`` naming file and line for a malformed record (needs ``score``)."""
    out: dict[int, list[dict[str, Any]]] = {}
    if rollout_dir is None or not Path(rollout_dir).is_dir():
        return out
    for f in sorted(Path(rollout_dir).glob("*.jsonl")):
        if not f.stem.isdigit():
            continue
        recs = []
        for lineno, rec in read_appended_jsonl(f):
            if not isinstance(rec, dict) or not isinstance(rec.get("score"), int | float):
                raise ValueError(f"{f}:{lineno}: rollout record without a numeric 'score'")
            recs.append(rec)
        out[int(f.stem)] = recs
    return out


def _std(xs: Sequence[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def _dump_stats(recs: Sequence[Mapping[str, Any]], reward_mode: str) -> dict[str, float]:
    """Per-step statistics of the dumped scores; NaN scores (excluded sandbox errors, :mod:`rlvr.train.verl.advantage`)
    are left out of every statistic, and ``_scored_mean`` is the mean of the others."""
    recs = [r for r in recs if math.isfinite(float(r["score"]))]
    scores = [float(r["score"]) for r in recs]
    if not scores:
        return {}
    out = {"reward_std": _std(scores), "_scored_mean": sum(scores) / len(scores)}
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for r, s in zip(recs, scores, strict=True):
        uid = str(r.get("uid", ""))
        parts = uid.rsplit("_", 2)
        prompt, session = (parts[0], parts[1]) if len(parts) == 3 else (uid, str(len(groups[uid])))
        groups[prompt][session] = s  # several outputs of one session share its score
    sized = [list(g.values()) for g in groups.values() if len(g) > 1]
    if sized:
        flat = [g for g in sized if max(g) - min(g) == 0]
        out["_groups"], out["_zero_std_groups"] = len(sized), len(flat)
        out["zero_std_frac"] = len(flat) / len(sized)
        out["all_pass_frac"] = sum(1 for g in flat if g[0] >= 1.0 - 1e-9) / len(sized)
        out["all_fail_frac"] = sum(1 for g in flat if g[0] <= 0.0) / len(sized)
    if reward_mode in ("sparse", "dense"):
        out["accepted_rate"] = sum(1 for s in scores if s >= 1.0 - 1e-9) / len(scores)
    if reward_mode == "dense":
        out["pass_ratio"] = sum(scores) / len(scores)
    return out


def grpo_rows(
    steps: Mapping[int, Mapping[str, Any]],
    dumps: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
    reward_mode: str = "dense",
    judge: Mapping[int, Mapping[str, float]] | None = None,
) -> list[dict[str, Any]]:
    """One row per training step (steps whose log has ``critic/score/mean``; validation-only lines are skipped):
    ``{"step", *GRPO_COLUMNS}``, a missing value as ``None``. See the module docstring for each column's source;
    ``judge`` is :func:`rlvr.reward.judge_log.judge_seconds_per_step`'s output."""
    rows = []
    for step, data in sorted(steps.items()):
        if GRPO_KEYS["reward_mean"] not in data:
            continue
        row: dict[str, Any] = {"step": step, **dict.fromkeys(GRPO_COLUMNS)}
        for col, key in GRPO_KEYS.items():
            row[col] = data.get(key)
        if reward_mode == "dense":
            row["pass_ratio"] = data.get(GRPO_KEYS["reward_mean"])
        stats = _dump_stats((dumps or {}).get(step, []), reward_mode)
        scored_mean = stats.pop("_scored_mean", None)
        n_groups, n_flat = stats.pop("_groups", 0), stats.pop("_zero_std_groups", 0)
        filtered = row["filtered_groups"]
        if n_groups and isinstance(filtered, int | float) and filtered > 0:
            # DAPO's dynamic sampling dropped these before the batch was dumped: they count as generated, no signal
            stats["zero_std_frac"] = (n_flat + filtered) / (n_groups + filtered)
        elif filtered is None and n_groups:
            row["filtered_groups"] = 0
        if isinstance(row["reward_mean"], float) and math.isnan(row["reward_mean"]):
            # verl's critic/score/mean is NaN when an excluded sample (NaN score) is in the step: the scored mean
            row["reward_mean"] = scored_mean
            if reward_mode == "dense":
                row["pass_ratio"] = scored_mean
        row.update(stats)
        row["judge_wall_s"] = data.get(GRPO_KEYS["judge_s"])  # timing_s/reward: a wall-clock phase; the log's wins
        logged = (judge or {}).get(step)
        if logged:
            row["judged"] = int(logged["judged"])
            row["tool_parse_failures"] = int(logged.get("tool_parse_failures", 0))
            row["tool_sandbox_errors"] = int(logged.get("tool_sandbox_errors", 0))
            if logged.get("sent"):
                row["sandbox_error_share"] = round(int(logged.get("sandbox_errors", 0)) / int(logged["sent"]), 6)
            if row["judge_s"] is None:
                row["judge_s"] = round(float(logged["judge_s"]), 4)
            if logged.get("judge_wall_s") is not None:
                row["judge_wall_s"] = round(float(logged["judge_wall_s"]), 4)
        rows.append(row)
    return rows


def sft_rows(steps: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per logged SFT step with any of :data:`SFT_KEYS`: ``{"step", *SFT_COLUMNS}`` (``None`` = missing)."""
    rows = []
    for step, data in sorted(steps.items()):
        if not any(k in data for k in SFT_KEYS.values()):
            continue
        rows.append({"step": step, **{col: data.get(key) for col, key in SFT_KEYS.items()}})
    return rows


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def write_tsv(path: str | Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> Path:
    """Write ``rows`` as a DVC plots TSV (header ``step`` + ``columns``; empty cell = missing) atomically; columns
    that measure time (``judge_s`` seconds) go to the TSV's cost mirror ``metrics/cost/<same path>``
    (:func:`rlvr.layout.write_curves`), so the plot holds nothing load-dependent. Returns the plot's path."""
    cells = [{h: _cell(r.get(h)) for h in ("step", *columns)} for r in rows]
    return write_curves(path, list(columns), cells)[0]


def summarise(rows: Sequence[Mapping[str, Any]], column: str) -> dict[str, float | None]:
    """``{"<column>_first", "<column>_last"}``: mean of ``column`` over the first / last quarter of the rows that
    have it (the local engine's ``reward_first``/``reward_last`` convention); ``None`` when no row has it."""
    xs = [float(r[column]) for r in rows if r.get(column) is not None]
    if not xs:
        return {f"{column}_first": None, f"{column}_last": None}
    q = max(1, len(xs) // 4)
    return {f"{column}_first": sum(xs[:q]) / q, f"{column}_last": sum(xs[-q:]) / q}


def judge_failures(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """The stage metrics of partial judge failure over a run's :func:`grpo_rows`: ``sandbox_error_share_max`` (the
    largest per-step ``sandbox_error_share``), ``sandbox_error_share_mean`` (mean over the steps that have it) and
    ``tool_sandbox_errors`` (summed); ``None`` when no row has the column (no judge log)."""
    shares = [float(r["sandbox_error_share"]) for r in rows if r.get("sandbox_error_share") is not None]
    tools = [int(r["tool_sandbox_errors"]) for r in rows if r.get("tool_sandbox_errors") is not None]
    return {"sandbox_error_share_max": max(shares) if shares else None,
            "sandbox_error_share_mean": sum(shares) / len(shares) if shares else None,
            "tool_sandbox_errors": sum(tools) if tools else None}


def parquet_splits(path: str | Path) -> set[str]:
    """The ``extra_info.split`` values of a verl RL parquet file (``set()`` when the file or column is absent)."""
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        return set()
    table = pq.read_table(p, columns=["extra_info"])
    return {r["split"] for r in table.column("extra_info").to_pylist() if isinstance(r, dict) and r.get("split")}


def step_rows(
    log_paths: Sequence[str | Path],
    run_dir: str | Path,
    reward_mode: str,
    train_files: str | Path | None = None,
    val_files: str | Path | None = None,
) -> list[dict[str, Any]]:
    """:func:`grpo_rows` of a verl run folder: its file-logger attempts ``log_paths``, its rollout dumps
    (``<run_dir>/rollouts``) and its judge log (``<run_dir>/judge``, see :mod:`rlvr.reward.judge_log`), leaving out
    of ``judge_s`` the samples whose split occurs in ``val_files`` but not in ``train_files`` (validation). Raises
    ``RuntimeError`` when every judged sample was ``sandbox_error`` (:func:`rlvr.reward.judge_log.require_judged`)."""
    run = Path(run_dir)
    val_only = parquet_splits(val_files) - parquet_splits(train_files) if val_files and train_files else set()
    records = judge_log.read_judge_log(run / "judge")
    judge_log.require_judged(records, run / "judge")
    judge = judge_log.judge_seconds_per_step(records, judge_log.dump_times(run / "rollouts"), val_only)
    return grpo_rows(read_file_logs(log_paths), read_rollout_dumps(run / "rollouts"), reward_mode, judge)
