"""Multi-turn repair training on the local engine: *unrolled* multi-turn GRPO (TRL ``GRPOTrainer``).

Why unrolled and not TRL's ``environment_factory``: TRL 1.16 runs environments through the policy's *tool calls*
(the chat template's tool-call format, parsed by TRL). The smoke profile's policy is a 2-layer random-init Qwen2 with
its own ChatML template and a tokenizer trained on problem texts: it has never seen a tool call, emits none, so
every rollout would end after turn 1 and the repair turns would get no learning signal (the wiring itself is proved
by ``tests/repair/test_repair_trl_train.py`` with :mod:`rlvr.repair.trl_env`, which stays the choice for a
tool-capable instruct model). The standard fallback (RLEF, Gehring et al. 2024, arXiv:2410.02089, trains on turn
prefixes of the policy's own episodes) is used instead:

1. **Rollouts** (:func:`collect_repair_contexts`): the input policy plays ``rollout_samples`` repair episodes per
   TRAIN problem with :class:`rlvr.repair.env.RepairEnv` (the evaluation environment itself: the repair protocol of
   :mod:`rlvr.repair.protocol`, same prompt, same feedback user turns, same visible/hidden split),
   sampling at ``rollout_temperature`` so that it makes mistakes to learn from. Every point
   where an episode continues (an answer failed the *visible* tests, the judge answered with feedback) gives a
   *repair context*: the conversation so far (problem, the policy's own failed attempt(s), judge feedback), at
   turn ``t`` ≥ 2. Identical contexts are kept once; at most ``max_contexts_per_problem`` per problem (first ones).
2. **Warm start** (optional, ``warmup_epochs`` > 0): a policy that has only seen single-turn prompts may answer a
   multi-turn context with garbage, so that every sampled next attempt scores 0 and GRPO has no signal (measured on
   the smoke profile's SFT model: 0 of 57 repair contexts solved, greedy or sampled). A few supervised epochs on
   (repair context → the problem's reference solution), TRAIN problems only, teach the format of a repair turn
   (expert iteration / the SFT stage of RLEF-style pipelines); the reference is the training data's own, never a
   hidden test, and dev problems are never seen. With ``include_first_turn`` the TRAIN problems' first-turn prompts
   join the repair contexts (in the warm start and in GRPO), so every turn of an episode is trained.
3. **GRPO** (:func:`run_repair_training`): prompt = a repair context, completion = the next attempt, reward =
   1[the attempt passes the *hidden* tests] (the ``sparse`` judge reward of :mod:`rlvr.reward.trl` on a problem
   holding the hidden tests only) minus ``turn_penalty`` × (t − 1) feedback turns used (:func:`turn_penalty_reward`;
   the protocol's per-turn penalty, as verl's agent loop applies it, so a pass after one feedback turn earns a
   first-turn pass's reward less ``turn_penalty``). The completion is scored on its own program; the protocol grades
   an episode whose *last* answer has no code on its previous program, which an unrolled context cannot see: such a
   completion scores as "no code" here. Hidden tests are only in the
   reward column ``ground_truth``, never in a prompt (``tests/repair`` checks the rows).

Optimiser, group size and clipping come from :class:`RepairTrainParams` (``params.yaml`` ``repair.train``, the
``grpo`` section's fields plus the rollout knobs); checkpoints, resume, curves and publishing are the shared
machinery of :mod:`rlvr.train.local.common` (run folder ``$RLVR_CACHE_DIR/train/repair/<key>``).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from rlvr.data.schema import Problem, ground_truth
from rlvr.io import atomic_dir, atomic_write_json
from rlvr.progress import progress
from rlvr.train.local.common import (
    TrainCommon,
    TsvCurves,
    fit,
    lora_config,
    reward_quarters,
    run_dir,
    set_seed,
    setup_tracking,
    trainer_kwargs,
)
from rlvr.train.local.grpo import GRPO_CURVES, GRPOParams, TimedReward, grpo_config

if TYPE_CHECKING:
    from rlvr.generate import Generator
    from rlvr.repair.env import EnvConfig

__all__ = [
    "REPAIR_CURVES",
    "WARMUP_FILE",
    "RepairContext",
    "RepairTrainParams",
    "collect_repair_contexts",
    "first_turn_contexts",
    "repair_rows",
    "run_repair_training",
    "turn_penalty_reward",
    "warmup_rows",
]

REPAIR_CURVES = {**GRPO_CURVES, "turn_penalty": "rewards/turn_penalty/mean"}

#: what a finished warm start recorded beside its model (``rows``, ``steps``, ``loss``), read back when it is reused
WARMUP_FILE = "warmup.json"

log = logging.getLogger(__name__)


class RepairTrainParams(GRPOParams):
    """``params.yaml`` ``repair.train``: the GRPO fields (:class:`rlvr.train.local.grpo.GRPOParams`) plus rollouts.

    Fields beyond GRPO's:
        rollout_samples: episodes sampled per TRAIN problem to collect repair contexts (>= 1).
        rollout_temperature / rollout_top_p: sampling of those episodes (> 0: the policy must make mistakes).
        rollout_max_new_tokens: generated-token cap per answer in the rollouts.
        max_contexts_per_problem: cap on distinct repair contexts kept per problem (0 = no cap).
        include_first_turn: also train on every TRAIN problem's first-turn prompt (turn 1, same reward), so that
            optimising the repair turns does not erode the first answer (measured without it on the smoke profile:
            dev accepted@1 0.79 → 0.36 while recovery rose 0 → 1/9).
        warmup_epochs: epochs of the supervised warm start on the repair contexts (0 = none; module doc, step 2).
        warmup_learning_rate: its learning rate.
        min_hidden_tests: a training problem needs this many hidden tests (after the visible/hidden split,
            :func:`rlvr.repair.env.split_tests`), the tests its reward rests on; fewer: left out and counted
            (:func:`rlvr.data.manifests.min_tests_filter`; 1 = every problem, the default; 5 at the 7B profiles).
        train_sets: ``"<dataset>/<split>"`` problem sets the repair training plays (empty = ``train.train_sets``),
            e.g. ``synthetic/train`` plus the feedback templates' ``synthetic/repair``.
    ``max_steps: 0`` skips training: the input model is published unchanged (``metrics.skipped``)."""

    max_steps: int = Field(-1, ge=-1)
    rollout_samples: int = Field(4, ge=1)
    rollout_temperature: float = Field(1.0, gt=0)
    rollout_top_p: float = Field(1.0, gt=0, le=1)
    rollout_max_new_tokens: int = Field(64, gt=0)
    max_contexts_per_problem: int = Field(4, ge=0)
    include_first_turn: bool = True
    warmup_epochs: float = Field(0.0, ge=0)
    warmup_learning_rate: float = Field(1e-3, gt=0)
    train_sets: list[str] = Field(default_factory=list)
    min_hidden_tests: int = Field(1, ge=1)


@dataclass(frozen=True)
class RepairContext:
    """One training prompt: ``messages`` (chat, ending with the judge's feedback user message) of an episode on
    ``problem`` about to produce answer number ``turn`` (>= 2); ``hidden`` is the hidden-test copy of the problem."""

    problem: Problem
    hidden: Problem
    messages: tuple[tuple[str, str], ...]
    turn: int

    def chat(self) -> list[dict[str, str]]:
        """``messages`` as ``[{"role", "content"}]`` dicts."""
        return [{"role": r, "content": c} for r, c in self.messages]


def collect_repair_contexts(problems: Sequence[Problem], gen: Generator, judge: Any, env_cfg: EnvConfig,
                            samples: int, temperature: float, top_p: float = 1.0, max_new_tokens: int = 64,
                            seed: int = 0, max_per_problem: int = 0) -> tuple[list[RepairContext], dict[str, Any]]:
    """Play ``samples`` sampled repair episodes per problem with :class:`rlvr.repair.env.RepairEnv` and return the
    distinct repair contexts (module doc, step 1) plus rollout statistics ``{episodes, first_turn_failures,
    first_turn_visible_failures, recovered, contexts, problems_with_context, tool_sandbox_errors}`` (hidden verdicts
    of the rollouts, for the record only; ``tool_sandbox_errors``: visible-test feedback judgings and ``python-run``
    tool runs that came back ``sandbox_error``). Generation: one batched ``gen.generate`` call per round, seeded with
    ``seed + round``.
    Hidden verdicts are only judged at the end of an episode (``judge_hidden_each_turn`` is turned off here)."""
    from rlvr.generate import SamplingParams
    from rlvr.repair.env import RepairEnv

    cfg = env_cfg.model_copy(update={"judge_hidden_each_turn": False})
    envs = [RepairEnv(p, judge, cfg) for p in problems for _ in range(samples)]
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    per_problem: dict[str, int] = {}
    contexts: list[RepairContext] = []
    rounds = cfg.turns + (cfg.max_tool_calls if cfg.mode == "interpreter" else 0)
    bar = progress(total=len(envs), desc="repair rollouts", unit="episode")
    for r in range(rounds):
        active = [e for e in envs if not e.done]
        if not active:
            break
        sampling = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed + r)
        outs = gen.generate([e.messages for e in active], 1, sampling, ids=[e.problem.id for e in active])
        for env, out in zip(active, outs, strict=True):
            step = env.step(out[0].text, out[0].n_tokens)
            bar.update(int(env.done))
            if step.done or step.kind != "answer":
                continue
            msgs = tuple((m["role"], m["content"]) for m in env.messages)
            pid = env.problem.id
            if (pid, msgs) in seen or (max_per_problem and per_problem.get(pid, 0) >= max_per_problem):
                continue
            seen.add((pid, msgs))
            per_problem[pid] = per_problem.get(pid, 0) + 1
            contexts.append(RepairContext(env.problem, env.hidden, msgs, len(env.turns) + 1))
    bar.close()
    stats = {
        "episodes": len(envs),
        "first_turn_visible_failures": sum(bool(e.turns) and e.turns[0]["visible_verdict"] != "accepted"
                                           for e in envs),
        "recovered": sum(len(e.turns) > 1 and e.accepted for e in envs),
        "contexts": len(contexts),
        "problems_with_context": len(per_problem),
        # the local engine's tool calls: the visible-test feedback of every answer and, in interpreter mode, the
        # python-run blocks; the ones the judge answered sandbox_error (infrastructure, not the policy: issue 42)
        "tool_sandbox_errors": sum(t.get("visible_verdict") == "sandbox_error" for e in envs for t in e.turns)
        + sum(c.get("verdict") == "sandbox_error" for e in envs for c in e.tool_calls),
    }
    return contexts, stats


def first_turn_contexts(problems: Sequence[Problem], env_cfg: EnvConfig) -> list[RepairContext]:
    """The turn-1 context (the first prompt of :class:`rlvr.repair.env.RepairEnv`) of every problem, ``turn=1``,
    except problems marked ``meta["needs_feedback"]`` (their statement does not determine the answer, so a first-turn
    prompt has nothing to learn but a guess: :mod:`rlvr.data.synthetic`, feedback templates)."""
    from rlvr.repair.env import RepairEnv

    out = []
    for p in problems:
        if p.meta.get("needs_feedback"):
            continue
        env = RepairEnv(p, None, env_cfg)  # the constructor only splits the tests and builds the prompt
        out.append(RepairContext(p, env.hidden, tuple((m["role"], m["content"]) for m in env.messages), 1))
    return out


def repair_rows(contexts: Sequence[RepairContext]) -> list[dict[str, Any]]:
    """Rows for ``trl.GRPOTrainer``: ``prompt`` (the context conversation), the reward columns ``ground_truth``
    (:func:`rlvr.data.schema.ground_truth` of the *hidden*-test problem) and ``data_source``, and ``turn`` (the
    answer number the completion is, read by :func:`turn_penalty_reward`)."""
    return [{"prompt": c.chat(), "ground_truth": ground_truth(c.hidden), "data_source": c.problem.source,
             "turn": c.turn} for c in contexts]


def turn_penalty_reward(turn_penalty: float) -> Callable[..., list[float]]:
    """A TRL reward function ``f(completions, turn, **kw) -> [-turn_penalty * (turn - 1), ...]``: the per-turn
    penalty of the repair reward (``turn`` is the dataset column of :func:`repair_rows`). Raises ``ValueError`` when
    the batch has no ``turn`` column."""

    def turn_penalty_fn(completions: list[Any], turn: list[int] | None = None, **_: Any) -> list[float]:
        if turn is None:
            raise ValueError("turn_penalty reward: the dataset has no 'turn' column (use repair_rows)")
        return [-turn_penalty * (int(t) - 1) for t in turn]

    turn_penalty_fn.__name__ = "turn_penalty"
    return turn_penalty_fn


def publish_unchanged(model_dir: str | Path, out_model_dir: str | Path) -> dict[str, Any]:
    """``repair.train.max_steps: 0`` on any engine: copy the input model's files to ``out_model_dir`` (atomically)
    and return ``{"skipped": True, "steps": 0}``."""
    _copy_model(model_dir, out_model_dir)
    return {"skipped": True, "steps": 0}


def _copy_model(src: str | Path, dst: str | Path) -> None:
    with atomic_dir(Path(dst)) as tmp:
        for f in Path(src).iterdir():
            if f.is_file():
                shutil.copy2(f, tmp / f.name)


def warmup_rows(contexts: Sequence[RepairContext]) -> list[dict[str, Any]]:
    """Conversational prompt/completion rows for ``trl.SFTTrainer``: each repair context → the problem's first
    reference solution (:func:`rlvr.data.synthetic.completion_for` format); contexts of problems without a
    reference are left out."""
    from rlvr.data.synthetic import completion_for

    return [{"prompt": c.chat(),
             "completion": [{"role": "assistant", "content": completion_for(c.problem.solutions[0])}]}
            for c in contexts if c.problem.solutions]


def _warm_start(cfg: RepairTrainParams, common: TrainCommon, model_dir: str | Path,
                contexts: Sequence[RepairContext], out: Path) -> tuple[str, dict[str, Any]]:
    """Supervised warm start (module doc, step 2) into ``out/model``; returns (model folder, metrics: ``rows``,
    ``steps``, ``loss`` and ``resumed_from_step``). A finished warm start in the run folder (its model and
    :data:`WARMUP_FILE`) is reused (logged): it reports the figures it recorded, so the provenance is the same as
    when it trains, and ``resumed_from_step`` = its ``steps`` (0 when it trains), which is cost
    (:data:`rlvr.layout.COST_KEY`: it follows the cache)."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from rlvr.train.local.common import publish_model

    rows = warmup_rows(contexts)
    model_out, done = out / "model", out / WARMUP_FILE
    if (model_out / "config.json").is_file() and done.is_file():
        stats = json.loads(done.read_text(encoding="utf-8"))
        log.info("repair warm start: reusing the finished one in the cache, %s (%s steps)", model_out,
                 stats.get("steps"))
        return str(model_out), {**stats, "resumed_from_step": stats.get("steps", 0)}
    kw = trainer_kwargs(cfg, common, out, ["none"])
    kw.update(num_train_epochs=cfg.warmup_epochs, max_steps=-1, learning_rate=cfg.warmup_learning_rate,
              lr_scheduler_type="cosine", save_strategy="no")
    args = SFTConfig(**kw, max_length=None, completion_only_loss=True, packing=False)
    trainer = SFTTrainer(model=str(model_dir), args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=AutoTokenizer.from_pretrained(str(model_dir)))
    result = trainer.train()  # never resumed (no checkpoint is saved): training_loss covers every step
    publish_model(trainer, model_out)
    stats = {"rows": len(rows), "steps": trainer.state.global_step, "loss": result.training_loss}
    atomic_write_json(done, stats)  # after the model: a model without it is trained again
    return str(model_out), {**stats, "resumed_from_step": 0}


def run_repair_training(cfg: RepairTrainParams, env_cfg: EnvConfig, common: TrainCommon, model_dir: str | Path,
                        train_problems: Sequence[Problem], judge: Any, out_model_dir: str | Path,
                        curves_path: str | Path, gen: Generator | None = None,
                        max_timeouts: int = 3, shaping: Any = None) -> dict[str, Any]:
    """Collect repair contexts from ``model_dir``'s own episodes on ``train_problems``, train unrolled multi-turn
    GRPO on them (module doc) and publish the model to ``out_model_dir``. ``gen`` overrides the rollout generator
    (default: the ``hf`` backend on ``model_dir``). Returns metrics: ``rollouts`` (:func:`collect_repair_contexts`
    stats), ``steps``, ``train_loss``, ``train_runtime_s``, ``rollout_s``, ``resumed_from_step``, ``reward_first`` /
    ``reward_last`` (mean logged reward over the first/last quarter of steps), ``skipped`` (no context or
    ``max_steps == 0``: the input model is published unchanged), ``warmup`` (with ``warmup_epochs`` > 0: the
    warm start's ``rows``, ``steps`` and ``loss``; a finished one in the run folder is reused, logged, with the
    figures it recorded in :data:`WARMUP_FILE`). ``resumed_from_step`` (also ``warmup.resumed_from_step``) and the
    seconds follow the local cache and the load: :func:`rlvr.layout.write_metrics` puts them in the cost file.
    ``max_timeouts`` (``reward_shaping.max_timeouts``): the timeout rule of the judge that plays the rollouts'
    episodes (feedback, hidden verdicts) and scores the training reward (:mod:`rlvr.reward.timeouts`; the stage's
    evaluations keep ``judge``'s own rule); hashed into the run folder's key when not the default 3. ``shaping``: the
    ``reward_shaping`` section (:class:`rlvr.reward.modes.RewardShaping`; the ``sparse`` reward reads its
    ``sandbox_error`` policy), its ``max_timeouts`` replaced by ``max_timeouts``; a ``sandbox_error`` other than the
    default is hashed into the key. Raises :class:`rlvr.config.ConfigError` when ``judge`` cannot apply it."""
    import time

    from datasets import Dataset
    from trl import GRPOTrainer

    from rlvr.reward.modes import RewardShaping
    from rlvr.reward.timeouts import reward_judge, trajectory_key
    from rlvr.reward.trl import make_reward_funcs

    rollout_judge = reward_judge(judge, max_timeouts)
    set_seed(cfg.seed, common.cpu_threads)
    if gen is None:
        from rlvr.generate import make_generator

        gen = make_generator("hf", model=str(model_dir), batch_size=64)
    t0 = time.perf_counter()
    contexts, stats = collect_repair_contexts(
        train_problems, gen, rollout_judge, env_cfg, cfg.rollout_samples, cfg.rollout_temperature, cfg.rollout_top_p,
        cfg.rollout_max_new_tokens, cfg.seed, cfg.max_contexts_per_problem)
    metrics: dict[str, Any] = {"method": "unrolled multi-turn GRPO", "rollouts": stats,
                               "rollout_s": round(time.perf_counter() - t0, 3), "turn_penalty": env_cfg.turn_penalty}
    if contexts and cfg.include_first_turn:
        contexts = first_turn_contexts(train_problems, env_cfg) + contexts
    metrics["contexts_trained"] = len(contexts)
    if not contexts or cfg.max_steps == 0:
        _copy_model(model_dir, out_model_dir)
        TsvCurves(curves_path, REPAIR_CURVES).write()
        return {**metrics, "skipped": True, "steps": 0}
    rows = repair_rows(contexts)
    ds = Dataset.from_list(rows)
    shaping = (shaping or RewardShaping()).model_copy(update={"max_timeouts": max_timeouts})
    funcs: list[Any] = [TimedReward(f) for f in make_reward_funcs("sparse", judge=judge, shaping=shaping)]
    if env_cfg.turn_penalty > 0:
        funcs.append(turn_penalty_reward(env_cfg.turn_penalty))
    out = run_dir("repair", {"train": cfg.model_dump(), "common": common.model_dump(),
                             "env": env_cfg.model_dump(mode="json"), **trajectory_key(max_timeouts),
                             **({"sandbox_error": shaping.sandbox_error}
                                if shaping.sandbox_error != RewardShaping().sandbox_error else {})}, model_dir,
                  problems=train_problems, rows=rows)
    report_to = setup_tracking("repair", common.report_to)
    args = grpo_config(cfg, common, out, report_to)
    policy = str(model_dir)
    if cfg.warmup_epochs > 0:
        policy, metrics["warmup"] = _warm_start(cfg, common, model_dir, contexts, out / "warmup")
    curves = TsvCurves(curves_path, REPAIR_CURVES, mirror=Path(out) / "curves.tsv")
    _, fitted = fit(GRPOTrainer, policy, args, ds, curves, out, out_model_dir, lora_config(cfg), reward_funcs=funcs)
    return {**metrics, "skipped": False, **fitted, **reward_quarters(curves)}
