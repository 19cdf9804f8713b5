"""A scripted (replayed) policy for verl: rehearse GRPO and repair with rollouts that contain programs that run.

A random-init model writes no program, so a run at a real model's shape proves the shapes but not what depends on
what the policy writes: rewards, advantages, group filtering, loss masks, the repair loop's turns and the judge's load.
This module replaces what verl's rollout server *returns* with texts from a script — the problems' references, their
near-miss mutants and broken programs, in proportions known in advance — while everything else runs as in training:
verl's agent loops (``single_turn_agent`` for GRPO, :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop` for repair,
with real ``run_tests`` tool calls), our reward manager and the judge, the advantage estimator, the actor's log-prob
and update passes over the scripted tokens. The practice is verl's own CI's (real rewards on GSM8K-sized tasks) and
DESIGN.md's "rehearse behaviour, not just shape".

How it hooks in (verl 0.9.1, ``verl/experimental/agent_loop/agent_loop.py``): every sample runs in
``AgentLoopWorker._run_agent_loop(sampling_params, trajectory, agent_name=..., **row)`` as its own asyncio task,
where ``trajectory`` holds ``step``, ``rollout_n`` (the sample's place in its group; the V1 trainer's worker,
``verl/trainer/ppo/v1/agent_loop_tq.py``, passes it as ``session_id`` instead) and ``validate``, and the row's
``extra_info`` holds the problem ``id`` (:func:`rlvr.data.export.verl_rows`). :func:`install` wraps that method: it
puts ``(problem id, rollout_n, turn counter)`` in a context variable for the task and, once per worker, wraps the
worker's ``llm_client`` in :class:`ScriptedClient`, whose ``generate`` answers each assistant turn with the script's
text for that sample and turn (tokenised with the policy's tokenizer, cut at the request's ``max_tokens``) instead of
asking vLLM. The vLLM servers still start and receive weight updates; they are not asked for tokens.

:func:`install` runs in every Ray worker through :func:`rlvr.train.verl.compat.worker_setup` when
``RLVR_SCRIPTED_POLICY`` names a script file (a bench setting, like ``RLVR_SANDBOX_URL``: it says how a run is
driven, not a hyperparameter; ``bench/gpu/rehearse.py`` sets it). Each emitted turn is appended to
``<script>.emitted.<pid>.jsonl`` (step, validate, id, rollout_n, turn, label), so a run's per-step reward can be
checked against the proportions the script set (``bench/gpu/rehearse_collect.py``).

Script format (JSON, :class:`Script`)::

    {"version": 1,
     "fallback": {"label": "unscripted", "turns": ["no program"]},
     "problems": {"<problem id>": {"kind": "mixed",
                                   "rollouts": [{"label": "reference", "turns": ["```python\\n...```"]}, ...]}}}

Sample ``rollout_n`` of a problem takes ``rollouts[rollout_n % len(rollouts)]``; turn ``t`` (0-based, one per
``generate`` call of the sample) takes ``turns[min(t, len(turns) - 1)]`` (:func:`pick_turn`, which the repair
protocol's scripted policies, :mod:`rlvr.repair.scripted`, share with this one, as they share :func:`turn_ids`).
"""

from __future__ import annotations

import contextvars
import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SCRIPT_ENV", "Script", "ScriptedClient", "install", "pick_turn", "scripted_turn", "turn_ids"]

SCRIPT_ENV = "RLVR_SCRIPTED_POLICY"
"""Environment variable naming the script file; unset = the real policy (nothing is patched)."""

_PATCHED = "_rlvr_scripted"
_CURRENT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("rlvr_scripted", default=None)


def pick_turn(turns: Sequence[str], turn: int) -> str:
    """The reply of turn ``turn`` (0-based) of a scripted sample whose replies are ``turns``: ``turns[turn]``, and the
    last reply once the list is exhausted. Raises ``ValueError`` for an empty list."""
    if not turns:
        raise ValueError("scripted policy: empty reply list")
    return turns[min(turn, len(turns) - 1)]


def turn_ids(tokenizer: Any, text: str, max_tokens: int | None) -> tuple[list[int], bool]:
    """``(token ids, cut)`` of a scripted turn ``text`` as a model would emit it: tokenised without special tokens,
    the tokenizer's ``eos_token_id`` appended (when it has one), then cut at ``max_tokens`` (the request's cap in
    tokens; ``None`` or 0: uncut); ``cut`` says whether the cap shortened it."""
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    if max_tokens is not None and 0 < max_tokens < len(ids):
        return ids[:max_tokens], True
    return ids, False


@dataclass(frozen=True)
class Script:
    """The turns each sample emits. ``problems``: problem id -> ``{"kind": str, "rollouts": [{"label": str,
    "turns": [str, ...]}, ...]}``; ``fallback``: ``{"label", "turns"}`` for a problem the script lacks.

    Raises ``ValueError`` (naming the problem and field) for a problem without rollouts or a rollout without turns."""

    problems: Mapping[str, Mapping[str, Any]]
    fallback: Mapping[str, Any] = field(default_factory=lambda: {"label": "unscripted", "turns": ["no program"]})

    def __post_init__(self) -> None:
        for pid, entry in self.problems.items():
            rollouts = entry.get("rollouts") or []
            if not rollouts:
                raise ValueError(f"script: problem {pid!r}: field 'rollouts' is empty")
            for i, r in enumerate(rollouts):
                if not r.get("turns"):
                    raise ValueError(f"script: problem {pid!r}: rollouts[{i}].turns is empty")
        if not self.fallback.get("turns"):
            raise ValueError("script: field 'fallback.turns' is empty")

    @classmethod
    def load(cls, path: str | Path) -> Script:
        """Read a script file (module doc). Raises ``ValueError`` naming the file for bad JSON or a bad field."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a JSON script: {exc}") from None
        if data.get("version") != 1:
            raise ValueError(f"{path}: field 'version' must be 1, got {data.get('version')!r}")
        try:
            return cls(problems=data.get("problems") or {},
                       **({"fallback": data["fallback"]} if "fallback" in data else {}))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def turn(self, problem_id: str, rollout_n: int, turn: int) -> tuple[str, str]:
        """``(text, label)`` of turn ``turn`` (0-based) of sample ``rollout_n`` of ``problem_id`` (module doc)."""
        entry = self.problems.get(problem_id)
        rollout = entry["rollouts"][rollout_n % len(entry["rollouts"])] if entry else self.fallback
        return pick_turn(rollout["turns"], turn), str(rollout.get("label", "unlabelled"))


def scripted_turn(script: Script, tokenizer: Any, ctx: dict[str, Any], max_tokens: int | None) -> tuple[list[int], str]:
    """Token ids and label of the next turn of the sample ``ctx`` (``id``, ``rollout_n``, ``turn``: advanced by one).

    The text is tokenised as :func:`turn_ids` does (a turn that ends as a model's would), cut at ``max_tokens`` (the
    request's cap; ``None``: uncut)."""
    text, label = script.turn(ctx["id"], ctx["rollout_n"], ctx["turn"])
    ctx["turn"] += 1
    return turn_ids(tokenizer, text, max_tokens)[0], label


def weight_version(step: Any) -> int:
    """The weight version verl's vLLM server would stamp on a turn of training step ``step`` (1-based; ``None`` or
    below 1, e.g. a validation pass before training: 0): ``step - 1``, the updates made before an on-policy rollout
    of that step (verl ``trainer/ppo/v1/trainer_base.py``: staleness ``(global_steps - 1) - min_global_steps``)."""
    try:
        return max(int(step) - 1, 0)
    except (TypeError, ValueError):
        return 0


class ScriptedClient:
    """Stands in for verl's ``LLMServerClient`` in one agent-loop worker: ``generate`` answers from the script for a
    sample that :func:`install`'s wrapper marked, and passes anything else to the real client; other attributes are
    the real client's. ``log_path``: JSONL of emitted turns (module doc); ``None`` = no log."""

    def __init__(self, inner: Any, script: Script, tokenizer: Any, log_path: str | Path | None = None) -> None:
        self.inner, self.script, self.tokenizer = inner, script, tokenizer
        self.log_path = None if log_path is None else Path(log_path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def generate(self, request_id: Any, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        """verl's ``generate`` contract: returns a ``TokenOutput`` (``token_ids``, log-probs 0.0, ``completed``)."""
        ctx = _CURRENT.get()
        if ctx is None:
            return await self.inner.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params,
                                             **kwargs)
        from verl.workers.rollout.replica import TokenOutput

        turn = ctx["turn"]
        ids, label = scripted_turn(self.script, self.tokenizer, ctx, sampling_params.get("max_tokens"))
        if self.log_path is not None:
            row = {"step": ctx["step"], "validate": ctx["validate"], "id": ctx["id"], "rollout_n": ctx["rollout_n"],
                   "turn": turn, "label": label, "tokens": len(ids)}
            with self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
        # verl's V1 trainer reads the rollout's log-probs whenever rollout.calculate_log_probs is on (only for its
        # rollout-vs-actor metrics outside bypass mode): a script has none, so 0.0 each (those metrics are
        # meaningless under a scripted policy; old_log_probs are recomputed by the actor)
        # verl's V1 trainer reads each turn's weight version (``extra_fields`` ``min/max_global_steps``, which its
        # vLLM server stamps; ``trainer_base._compute_metrics``: int() of None fails after the first update): an
        # on-policy rollout of step k is generated by the weights after k - 1 updates
        version = weight_version(ctx.get("step"))
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed",
                           extra_fields={"global_steps": version, "min_global_steps": version,
                                         "max_global_steps": version})


def _problem_id(row: Mapping[str, Any]) -> str:
    info = row.get("extra_info")
    if isinstance(info, Mapping) and info.get("id") is not None:
        return str(info["id"])
    return str(row.get("index", ""))


def install(script_path: str | Path | None = None) -> bool:
    """Wrap verl's ``AgentLoopWorker._run_agent_loop`` so every sample's generation comes from the script at
    ``script_path`` (default: ``$RLVR_SCRIPTED_POLICY``; unset or empty: nothing is patched). Returns whether it
    patched now (False: already patched, or no script). Idempotent. Raises ``ValueError`` for a bad script and
    ``ImportError`` when verl is not installed."""
    path = script_path if script_path is not None else os.environ.get(SCRIPT_ENV, "")
    if not str(path):
        return False
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    original = AgentLoopWorker._run_agent_loop
    if getattr(original, _PATCHED, False):
        return False
    script = Script.load(path)
    log_path = f"{path}.emitted.{os.getpid()}.jsonl"

    @functools.wraps(original)
    async def _run_agent_loop(self: Any, sampling_params: dict[str, Any], trajectory: dict[str, Any], **kwargs: Any):
        if not isinstance(self.llm_client, ScriptedClient):
            self.llm_client = ScriptedClient(self.llm_client, script, self.tokenizer, log_path)
        # the sample's place in its group: verl's V1 (TransferQueue) worker runs a prompt's n samples with one
        # trajectory dict and ``session_id`` = 0..n-1 (``AgentLoopWorkerTQ._run_prompt``); the legacy worker one
        # trajectory per sample with ``rollout_n``
        n = kwargs.get("session_id", trajectory.get("rollout_n", 0))
        token = _CURRENT.set({"id": _problem_id(kwargs), "rollout_n": int(n or 0),
                              "turn": 0, "step": trajectory.get("step"),
                              "validate": bool(trajectory.get("validate", False))})
        try:
            return await original(self, sampling_params, trajectory, **kwargs)
        finally:
            _CURRENT.reset(token)

    setattr(_run_agent_loop, _PATCHED, True)
    AgentLoopWorker._run_agent_loop = _run_agent_loop
    return True
