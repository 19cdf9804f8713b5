"""Multi-turn repair evaluation: run :class:`~rlvr.repair.env.RepairEnv` episodes with any generation backend.

The episodes follow the repair protocol (:mod:`rlvr.repair.protocol`) that training runs too: same prompt, feedback
as user turns, the episode's last program graded.

Every turn, all unfinished episodes are generated in one batched ``generate`` call (one completion each, greedy by
default). The ``samples`` backend is a scripted policy: reply number t of a task (answers and tool calls counted
together) is its t-th sample in the file (the last one when there are
fewer), which makes replayed repair traces possible.

Metrics (:func:`repair_metrics`), over the problems of one dataset:

* ``accepted_at_turn``: list, k = 1..K: fraction of problems whose program after turn k (the episode's last program
  so far, :func:`rlvr.repair.protocol.final_program`; the final one when the episode stopped earlier) passes the
  hidden tests. ``accepted_at_turn[0]`` is single-turn accepted@1.
* ``recovery_rate``: among first-turn failures (turn-1 answer not accepted on the hidden tests), the fraction whose
  final program is accepted (``None`` when there is no first-turn failure). ``recovered`` / ``first_turn_failures``
  are the counts.
* ``mean_turns``: answers per episode (tool calls excluded); ``mean_tool_calls``.
* ``tokens_per_solved``: generated tokens of all episodes / accepted episodes (``None`` when none is accepted).
* ``judge_s``: judge wall seconds summed over all judge calls; ``sandbox_errors``: episodes whose final verdict is
  ``sandbox_error`` (infrastructure; they still count as not accepted, so check this is 0).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from rlvr.data.schema import Problem
from rlvr.data.synthetic import SyntheticParams
from rlvr.eval.backend import BackendParams, check_vllm_only
from rlvr.eval.baseline import DatasetSelection
from rlvr.generate import Generator, SamplingParams
from rlvr.io import atomic_write_jsonl
from rlvr.progress import progress
from rlvr.repair.env import EnvConfig, RepairEnv
from rlvr.train.local.repair import RepairTrainParams

__all__ = ["MODEL_CANDIDATES", "RepairParams", "default_model", "repair_metrics", "run_episodes", "run_repair",
           "run_repair_stage", "select_repair_problems", "stored_trace"]

log = logging.getLogger(__name__)


class RepairParams(EnvConfig, BackendParams):
    """``repair`` params section: the environment fields of :class:`EnvConfig` plus the evaluation protocol.

    ``datasets``: problems to evaluate (``data/governance/problems/<name>.jsonl`` with split filter and limit).
    ``backend``: hf | openai | vllm | samples; ``model``: model folder or Hub id, ``None`` = the last trained model
    (:func:`default_model`). ``sampling``: explicit, greedy by default. hf: ``batch_size``; the other backend
    settings: :class:`rlvr.eval.backend.BackendParams`. ``train``: the repair training (:class:`rlvr.train.local.repair.
    RepairTrainParams`; GRPO fields plus the rollout knobs; ``max_steps: 0`` = no training). ``turn_tokens``: tokens
    per assistant turn under the verl engine (``None``: ``verl.max_response_length`` covers the whole episode); the
    episode budget (verl ``data.max_response_length``) is then :func:`rlvr.repair.verl_tool.episode_budget`: every
    assistant turn (``turns``, plus ``max_tool_calls`` in interpreter mode) x ``turn_tokens``, plus a user turn
    (feedback, at most ``feedback_chars`` characters, or a python-run output) after each but the last, and each
    assistant turn is
    capped at ``min(turn_tokens, tokens left in the episode)`` by the agent loop
    (:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`)."""

    datasets: list[DatasetSelection]
    backend: Literal["hf", "openai", "vllm", "samples"] = "hf"
    model: str | None = None
    sampling: SamplingParams = SamplingParams(max_new_tokens=512)
    batch_size: int = Field(default=8, ge=1)
    train: RepairTrainParams = Field(default_factory=RepairTrainParams)
    turn_tokens: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_turn_budget(self) -> RepairParams:
        """``turn_tokens`` is the per-turn budget everywhere: the evaluation's ``sampling.max_new_tokens`` and the
        local engine's ``train.rollout_max_new_tokens`` are per turn too, so they must agree with it."""
        if self.turn_tokens is not None:
            for key, val in (("sampling.max_new_tokens", self.sampling.max_new_tokens),
                             ("train.rollout_max_new_tokens", self.train.rollout_max_new_tokens)):
                if val != self.turn_tokens:
                    raise ValueError(f"repair.turn_tokens={self.turn_tokens} and repair.{key}={val} disagree (both "
                                     "are the per-turn token budget)")
        check_vllm_only("repair.enforce_eager", self.backend, self.enforce_eager)
        return self

    def env(self) -> EnvConfig:
        """The :class:`EnvConfig` part of this section."""
        return EnvConfig(**{k: getattr(self, k) for k in EnvConfig.model_fields})


MODEL_CANDIDATES: tuple[str, ...] = ("models/grpo/seed-1", "models/dpo", "models/sft", "models/base")


def default_model(root: str | Path = ".") -> str:
    """The last trained model folder under ``root``: the first existing of :data:`MODEL_CANDIDATES` (returned
    relative, as written there); ``models/base`` when none exists."""
    for cand in MODEL_CANDIDATES:
        if (Path(root) / cand).is_dir():
            return cand
    return MODEL_CANDIDATES[-1]


def _generate(gen: Generator, envs: Sequence[RepairEnv], sampling: SamplingParams) -> list[tuple[str, int]]:
    lookup = getattr(gen, "lookup", None)
    if callable(lookup):  # samples backend: answer t = sample t
        out = []
        for e in envs:
            answers = lookup(e.problem.id)
            if not answers:
                raise ValueError(f"samples backend: no sample for problem {e.problem.id!r}")
            out.append((answers[min(len(e.turns) + len(e.tool_calls), len(answers) - 1)], 0))
        return out
    res = gen.generate([e.messages for e in envs], 1, sampling, ids=[e.problem.id for e in envs])
    return [(c[0].text, c[0].n_tokens) for c in res]


def run_episodes(problems: Sequence[Problem], gen: Generator, judge: Any, cfg: EnvConfig,
                 sampling: SamplingParams) -> list[RepairEnv]:
    """Run one episode per problem to the end; returns the finished environments (input order). Each round generates
    for all unfinished episodes at once; at most ``turns + max_tool_calls`` rounds."""
    envs = [RepairEnv(p, judge, cfg) for p in problems]
    with progress(total=len(envs), desc="repair episodes", unit="episode") as bar:
        for _ in range(cfg.turns + (cfg.max_tool_calls if cfg.mode == "interpreter" else 0)):
            active = [e for e in envs if not e.done]
            if not active:
                break
            for env, (text, n_tok) in zip(active, _generate(gen, active, sampling), strict=True):
                env.step(text, n_tok)
                bar.update(int(env.done))
    return envs


def repair_metrics(records: Sequence[dict[str, Any]], turns: int) -> dict[str, Any]:
    """Metrics of finished episode ``records`` (:meth:`RepairEnv.record` dicts) for K = ``turns`` (module doc)."""
    n = len(records)
    curve = [0] * turns
    first_fail = recovered = solved = tokens = tool_calls = sandbox = 0
    judge_s = 0.0
    used = 0
    for r in records:
        hv = [t.get("hidden_verdict") for t in r["turns"]]
        for k in range(turns):
            v = hv[min(k, len(hv) - 1)] if hv else None
            curve[k] += v == "accepted"
        if not hv or hv[0] != "accepted":
            first_fail += 1
            recovered += bool(r["accepted"])
        solved += bool(r["accepted"])
        tokens += r["tokens"]
        tool_calls += len(r["tool_calls"])
        judge_s += r["judge_s"]
        used += len(r["turns"])
        sandbox += r["final_verdict"] == "sandbox_error"
    return {
        "n": n,
        "turns": turns,
        "accepted_at_turn": [c / n if n else None for c in curve],
        "accepted@1": curve[0] / n if n else None,
        "final_accepted": solved / n if n else None,
        "first_turn_failures": first_fail,
        "recovered": recovered,
        "recovery_rate": recovered / first_fail if first_fail else None,
        "mean_turns": used / n if n else None,
        "mean_tool_calls": tool_calls / n if n else None,
        "tokens_per_solved": tokens / solved if solved else None,
        "judge_s": judge_s,
        "sandbox_errors": sandbox,
    }


def stored_trace(record: dict[str, Any]) -> dict[str, Any]:
    """An episode ``record`` (:meth:`RepairEnv.record`) as it is written to a traces file: without its measured times
    (the episode's ``judge_s`` and each tool call's ``time_s``, wall seconds that follow the machine's load), so the
    same inputs write the same bytes (the traces are a DVC-hashed output; the seconds reach the cost file through
    :func:`repair_metrics`). Returns a copy; ``record`` is unchanged."""
    out = {k: v for k, v in record.items() if k != "judge_s"}
    if "tool_calls" in out:
        out["tool_calls"] = [{k: v for k, v in c.items() if k != "time_s"} for c in out["tool_calls"]]
    return out


def run_repair(problems: Sequence[Problem], gen: Generator, judge: Any, cfg: EnvConfig, sampling: SamplingParams,
               traces_path: str | Path | None = None) -> dict[str, Any]:
    """Run the episodes, write the full traces (one JSONL row per problem: messages, per-turn completions, code,
    visible and hidden verdicts, tool calls; no measured seconds, :func:`stored_trace`) to ``traces_path``
    atomically, and return :func:`repair_metrics` (its ``judge_s`` is cost)."""
    envs = run_episodes(problems, gen, judge, cfg, sampling)
    records = [e.record() for e in envs]
    if traces_path is not None:
        atomic_write_jsonl(traces_path, (stored_trace(r) for r in records))
    m = repair_metrics(records, cfg.turns)
    log.info("repair: n=%d accepted@turn=%s recovery_rate=%s", m["n"], m["accepted_at_turn"], m["recovery_rate"])
    return m


def select_repair_problems(problems_dir: str | Path, sel: DatasetSelection,
                           synthetic: SyntheticParams | None = None) -> list[Problem]:
    """Problems of dataset ``sel``: ``<problems_dir>/<name>.jsonl`` (:func:`rlvr.eval.baseline.select_problems`);
    for ``name == "synthetic"`` without such a file, the procedurally generated family
    (:func:`rlvr.data.synthetic.generate_from_params` with ``synthetic``, defaults when ``None``), then the split
    filter and limit. Raises ``FileNotFoundError`` naming the file for any other absent dataset."""
    from rlvr.eval.baseline import select_problems

    if sel.name == "synthetic" and not (Path(problems_dir) / "synthetic.jsonl").is_file():
        from rlvr.data.synthetic import generate_from_params

        problems = generate_from_params(synthetic or SyntheticParams())
        if sel.splits is not None:
            problems = [p for p in problems if p.split in sel.splits]
        return problems[: sel.limit] if sel.limit else problems
    return select_problems(problems_dir, sel)


def make_repair_generator(cfg: RepairParams, dataset: str | None = None) -> Generator:
    """The generator ``cfg`` asks for, built exactly as the baseline stage builds it
    (:func:`rlvr.eval.baseline.make_baseline_generator`); ``cfg.model=None`` means :func:`default_model`."""
    from rlvr.eval.baseline import BaselineParams, make_baseline_generator

    fields = ("backend", "sampling", "batch_size", "device", "cpu_threads", "base_url", "served_model_name",
              "concurrency", "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "enforce_eager",
              "samples")
    base = BaselineParams(datasets=cfg.datasets, model=cfg.model or default_model(),
                          **{k: getattr(cfg, k) for k in fields})
    return make_baseline_generator(base, dataset)


def run_repair_stage(cfg: RepairParams, judge: Any, problems_dir: str | Path, out_dir: str | Path,
                     synthetic: SyntheticParams | None = None, gen: Generator | None = None) -> dict[str, Any]:
    """Evaluate every ``cfg.datasets`` entry; traces to ``<out_dir>/traces/<dataset>.jsonl``. Returns
    ``{dataset: repair_metrics, "protocol": {backend, model, mode, turns, visible_tests, sampling}}``. ``gen``
    overrides the configured generator (tests)."""
    out_dir = Path(out_dir)
    report: dict[str, Any] = {}
    env = cfg.env()
    # every dataset first: a misspelt name fails before any model is loaded or any dataset is run
    selected = [(sel, select_repair_problems(problems_dir, sel, synthetic)) for sel in cfg.datasets]
    shared = gen or (None if cfg.backend == "samples" else make_repair_generator(cfg))
    for sel, problems in selected:
        g = shared or make_repair_generator(cfg, sel.name)
        log.info("repair %s: %d problems, K=%d, mode=%s", sel.name, len(problems), cfg.turns, cfg.mode)
        report[sel.name] = run_repair(problems, g, judge, env, cfg.sampling, out_dir / "traces" / f"{sel.name}.jsonl")
    report["protocol"] = {
        "backend": cfg.backend,
        "enforce_eager": cfg.enforce_eager,
        "model": None if cfg.backend == "samples" else (cfg.model or default_model()),
        "mode": cfg.mode,
        "turns": cfg.turns,
        "visible_tests": cfg.visible_tests,
        "max_tool_calls": cfg.max_tool_calls if cfg.mode == "interpreter" else 0,
        "sampling": cfg.sampling.model_dump(mode="json"),
    }
    return report
