"""The evaluation protocol: generate → extract code → judge → per-sample rows → metrics + QA logs.

One row per (task, sample), keyed by a content hash of what determines the completion: the problem's content hash,
the prompt, the model's identity, the sampling parameters and the sample index (EvalPlus-style). The model identity is
``model_tag`` (callers pass :func:`rlvr.eval.provenance.model_tag`: folder path **and content sha256**, so new weights
published at the same path never reuse old completions), else :func:`rlvr.eval.provenance.model_tag` of the
generator's ``model_id`` (the same content tag when that is a local folder; a Hub id or served name unchanged). A re-run
with the same ``samples_path`` reuses the stored completions of every task whose ``n`` keys are all present and
generates only the rest; code extraction and judging are always redone, so verdicts follow the current judge.

Samples without extractable code (:func:`rlvr.generate.extract_code` returns ``None``) are not sent to the judge:
their verdict is ``syntax_error`` with message ``"no code found in completion"`` and ``judge_s = 0``.

Row fields: ``key, task_id, source, sample_index, model, prompt, completion, finish_reason, n_tokens, code, verdict,
passed, total, pass_ratio, judge_s, message``. The files hold every field but the measured ones
(:data:`TIMING_FIELDS`: ``judge_s``, wall seconds that follow the machine's load): they are DVC-hashed outputs, and the
same inputs must give the same bytes (:func:`stored_row`); the judge seconds reach the cost file through the metrics.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from rlvr.data.schema import Problem
from rlvr.eval.evalplus_columns import group_statuses
from rlvr.eval.metrics import compute_metrics, per_task_counts
from rlvr.eval.provenance import model_tag as provenance_tag
from rlvr.eval.qa import write_qa_logs
from rlvr.generate.base import Completion, Generator, Prompt, SamplingParams
from rlvr.generate.extract import extract_code
from rlvr.io import atomic_write_json, atomic_write_jsonl
from rlvr.judge.verdict import JudgeResult
from rlvr.progress import progress

__all__ = ["NO_CODE_MESSAGE", "TIMING_FIELDS", "evaluate", "first_failure_message", "load_keyed_rows", "sample_key",
           "stored_row"]

log = logging.getLogger(__name__)
NO_CODE_MESSAGE = "no code found in completion"
#: fields of a judged row that are measured, not computed (wall seconds): kept in memory for the cost metrics, never
#: written to a sample file or journal.
TIMING_FIELDS: frozenset[str] = frozenset({"judge_s"})


class _Judge(Protocol):
    def judge_many(self, items: Sequence[tuple[Problem, str]]) -> list[JudgeResult]: ...


def sample_key(problem: Problem, prompt: Prompt, model_id: str, sampling: SamplingParams, index: int) -> str:
    """sha256 hex of (problem content hash, prompt, model identity, sampling params, sample index). ``model_id``
    should carry the model's content hash (:func:`rlvr.eval.provenance.model_tag`) wherever a local folder exists."""
    blob = json.dumps(
        [problem.content_sha256(), prompt, model_id, sampling.model_dump(mode="json"), index],
        sort_keys=True, ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def first_failure_message(result: JudgeResult) -> str:
    """Message of the first failing test, else the judge's own message, else ``""``."""
    for t in result.tests:
        if t.verdict != "accepted":
            return t.message or result.message
    return result.message

def record_verdict(row: dict[str, Any], problem: Problem, result: Any | None) -> None:
    """Write a judged sample's verdict fields into ``row`` (in place): ``verdict``, ``passed``, ``total``,
    ``pass_ratio``, ``judge_s`` (seconds), ``message`` and, for EvalPlus problems, ``base_status``/``plus_status``.
    ``result``: the judge's ``JudgeResult``, or ``None`` when no code could be extracted (``syntax_error``, every test
    failed, :data:`NO_CODE_MESSAGE`)."""
    if result is None:
        row.update(verdict="syntax_error", passed=0, total=len(problem.tests), pass_ratio=0.0, judge_s=0.0,
                   message=NO_CODE_MESSAGE)
    else:
        row.update(verdict=result.verdict, passed=result.passed, total=result.total, pass_ratio=result.pass_ratio,
                   judge_s=result.judge_s, message=first_failure_message(result))
    row.update(group_statuses(problem, result))  # EvalPlus base/plus columns



def stored_row(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` as it is written to a sample file or journal: a copy without :data:`TIMING_FIELDS` (``judge_s``
    seconds), so two runs of the same inputs write the same bytes whatever the machine's load."""
    return {k: v for k, v in row.items() if k not in TIMING_FIELDS}


def load_keyed_rows(path: Path) -> dict[str, dict[str, Any]]:
    """``{key: row}`` of a JSONL file of sample rows (the samples file here, the journal of
    :mod:`rlvr.eval.resumable`); the last row of a key wins; an unreadable line (a torn last line after a crash, a row
    without ``key``) is skipped with a warning naming the file and line, so that row is generated again. Empty when
    the file does not exist."""
    if not path.is_file():
        return {}
    rows: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    r = json.loads(line)
                    rows[r["key"]] = r
                except (json.JSONDecodeError, KeyError, TypeError):
                    log.warning("%s:%d: unreadable sample row ignored (will regenerate)", path, lineno)
    return rows


def evaluate(
    problems: Sequence[Problem],
    generator: Generator,
    judge: _Judge,
    sampling: SamplingParams,
    out_dir: str | Path,
    n: int = 1,
    ks: Sequence[int] = (1,),
    prompt_fn: Callable[[Problem], Prompt] | None = None,
    qa_per_verdict: int = 20,
    samples_path: str | Path | None = None,
    qa_dir: str | Path | None = None,
    per_task_path: str | Path | None = None,
    judge_chunk: int = 256,
    model_tag: str | None = None,
) -> dict[str, Any]:
    """Evaluate ``generator`` on ``problems`` and return the metrics dict (:func:`rlvr.eval.metrics.compute_metrics`).

    Args:
        problems: tasks (unique ids). generator: any :class:`rlvr.generate.Generator`. judge: has ``judge_many``.
        sampling: explicit sampling parameters. n: samples per task. ks: pass@k values (each <= n).
        prompt_fn: problem → prompt (default :func:`rlvr.data.prompts.build_messages`, chat messages).
        out_dir: default home of ``samples.jsonl``, ``per_task.json`` and ``qa/<verdict>.jsonl``;
        samples_path / per_task_path / qa_dir override those three paths. judge_chunk: samples per ``judge_many`` call.
        model_tag: the model identity in sample keys and rows; default :func:`rlvr.eval.provenance.model_tag` of
            ``generator.model_id`` (path + content hash for a local folder, so a changed model is regenerated).
    Writes (atomically) the sample rows (:func:`stored_row`: no judge seconds), the per-task ``{task_id: {n, c,
    first, pass@k...}}`` arrays and the QA logs; the judge seconds are in the returned metrics only (cost), and so
    is ``resumed_tasks`` (tasks whose samples came from ``samples.jsonl``: it follows what an earlier run left, so
    :func:`rlvr.layout.write_metrics` puts it in the cost file, :data:`rlvr.layout.COST_KEY`).
    Raises ``ValueError`` on duplicate problem ids, ``n < 1`` or a ``k`` outside ``[1, n]``.
    """
    if n < 1 or any(k < 1 or k > n for k in ks):
        raise ValueError(f"need n >= 1 and every k in [1, n]; got n={n}, ks={list(ks)}")
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError("evaluate: duplicate problem ids")
    if prompt_fn is None:
        from rlvr.data.prompts import build_messages

        prompt_fn = build_messages
    out_dir = Path(out_dir)
    samples_path = Path(samples_path) if samples_path else out_dir / "samples.jsonl"
    qa_dir = Path(qa_dir) if qa_dir else out_dir / "qa"
    per_task_path = Path(per_task_path) if per_task_path else out_dir / "per_task.json"

    prompts = [prompt_fn(p) for p in problems]
    tag = model_tag or provenance_tag(generator.model_id)
    keys = [[sample_key(p, pr, tag, sampling, i) for i in range(n)] for p, pr in zip(problems, prompts, strict=True)]
    cached = load_keyed_rows(samples_path)
    todo = [t for t, ks_ in enumerate(keys) if not all(k in cached for k in ks_)]
    completions: list[list[Completion] | None] = [None] * len(problems)
    gen_wall = None
    if todo:
        t0 = time.perf_counter()
        new = generator.generate([prompts[t] for t in todo], n, sampling, ids=[ids[t] for t in todo])
        gen_wall = time.perf_counter() - t0
        for t, comps in zip(todo, new, strict=True):
            if len(comps) != n:
                raise ValueError(f"generator returned {len(comps)} completions for {ids[t]}, expected {n}")
            completions[t] = comps
    log.info("generated %d/%d tasks (%s s); %d resumed", len(todo), len(problems), gen_wall,
             len(problems) - len(todo))

    rows: list[dict[str, Any]] = []
    for t, p in enumerate(problems):
        for i in range(n):
            key = keys[t][i]
            if completions[t] is not None:
                c = completions[t][i]  # type: ignore[index]
                text, n_tok, reason = c.text, c.n_tokens, c.finish_reason
            else:
                old = cached[key]
                text, n_tok, reason = old["completion"], old["n_tokens"], old["finish_reason"]
            rows.append({
                "key": key, "task_id": p.id, "source": p.source, "sample_index": i, "model": tag,
                "prompt": prompts[t], "completion": text, "finish_reason": reason, "n_tokens": n_tok,
                "code": extract_code(text, p),
            })

    by_id = {p.id: p for p in problems}
    to_judge = [r for r in rows if r["code"] is not None]
    t0 = time.perf_counter()
    results: list[JudgeResult] = []
    with progress(total=len(to_judge), desc="judge", unit="sample") as bar:
        for s in range(0, len(to_judge), max(1, judge_chunk)):
            chunk = to_judge[s : s + judge_chunk]
            results.extend(judge.judge_many([(by_id[r["task_id"]], r["code"]) for r in chunk]))
            bar.update(len(chunk))
            log.info("judged %d/%d", len(results), len(to_judge))
    judge_wall = time.perf_counter() - t0
    for r, res in zip(to_judge, results, strict=True):
        record_verdict(r, by_id[r["task_id"]], res)
    for r in rows:
        if r["code"] is None:
            record_verdict(r, by_id[r["task_id"]], None)

    gen_rows = [r for t in todo for r in rows[t * n : (t + 1) * n]]
    metrics = compute_metrics(rows, ks=ks, greedy=sampling.greedy, gen_wall_s=gen_wall,
                              gen_samples=len(gen_rows), gen_tokens=sum(r["n_tokens"] for r in gen_rows))
    metrics["judge_wall_s"] = judge_wall
    metrics["resumed_tasks"] = len(problems) - len(todo)
    atomic_write_jsonl(samples_path, (stored_row(r) for r in rows))
    atomic_write_json(per_task_path, _per_task(rows, ks))
    write_qa_logs(rows, qa_dir, qa_per_verdict)
    return metrics


def _per_task(rows: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, dict[str, Any]]:
    from rlvr.eval.metrics import pass_at_k

    tasks = per_task_counts(rows)
    for t in tasks.values():
        for k in ks:
            t[f"pass@{k}"] = float(pass_at_k(t["n"], t["c"], k)[0])
    return tasks
