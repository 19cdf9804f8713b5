"""Resumable generate → judge → journal loop of the final ``eval`` stage (protocol: :mod:`rlvr.eval.final`).

Every (problem, sample) row is keyed by :func:`rlvr.eval.protocol.sample_key` (problem content hash, prompt, model id
**and model hash**, sampling params, sample index) and appended to a JSONL journal, flushed and fsynced per chunk of
tasks; a re-run generates and judges only the missing pairs, and judges again (without generating again) the pairs
whose verdict was ``sandbox_error`` (the judge failed, the program was never scored).

The journal holds no measured time (:func:`rlvr.eval.protocol.stored_row`): a row judged in this run carries its
``judge_s`` (seconds) in memory only, for the cost metrics; a row resumed from the journal carries none. Once every
pair is done the journal is rewritten compact (atomically): one row per key of this call, in task then sample order,
so its bytes follow the inputs, not the run's history (a crash and resume, re-judged rows, rows of another model or
sampling config, lines an earlier version wrote with judge seconds).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.data.schema import Problem
from rlvr.eval.protocol import load_keyed_rows, record_verdict, sample_key, stored_row
from rlvr.generate.base import Generator, Prompt, SamplingParams
from rlvr.generate.extract import extract_code
from rlvr.io import atomic_write_jsonl
from rlvr.progress import progress

__all__ = ["GenStats", "evaluate_resumable"]

log = logging.getLogger(__name__)


@dataclass
class GenStats:
    """What :func:`evaluate_resumable` generated in this run, accumulated over its calls: ``wall_s`` (wall seconds
    spent in ``generator.generate``; a generator's ``prepare()``, e.g. loading its model, is called before the clock
    starts), ``samples`` and ``tokens`` (completions and their generated tokens). Zero when
    every row was resumed. For the cost metrics only (:func:`rlvr.eval.metrics.compute_metrics`'s ``gen_wall_s``,
    ``gen_samples``, ``gen_tokens``): it follows the machine's load, so it never goes into a journal or sample
    file."""

    wall_s: float = 0.0
    samples: int = 0
    tokens: int = 0

    def metrics_kwargs(self) -> dict[str, float | int | None]:
        """``compute_metrics`` keyword arguments: ``gen_wall_s`` is ``None`` when nothing was generated."""
        return {"gen_wall_s": self.wall_s if self.samples else None, "gen_samples": self.samples,
                "gen_tokens": self.tokens}


def evaluate_resumable(
    problems: Sequence[Problem],
    generator: Generator,
    judge: Any,
    sampling: SamplingParams,
    n: int,
    model_tag: str,
    journal: str | Path,
    judge_version: str,
    prompt_fn: Callable[[Problem], Prompt] | None = None,
    chunk_tasks: int = 32,
    stats: GenStats | None = None,
) -> list[dict[str, Any]]:
    """Judged rows (one per (task, sample), task order then sample index) for ``problems``, resumable (module doc);
    rows judged in this call carry ``judge_s`` (seconds), resumed ones do not.

    ``model_tag``: model id + hash (part of every key). ``journal``: append-only JSONL cache. ``judge`` has
    ``judge_many``. ``stats``: when given, the generation of this call is added to it (:class:`GenStats`).
    Raises ``ValueError`` on duplicate problem ids or a generator returning the wrong count."""
    from rlvr.data.prompts import build_messages

    prompt_fn = prompt_fn or build_messages
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError("evaluate_resumable: duplicate problem ids")
    journal = Path(journal)
    journal.parent.mkdir(parents=True, exist_ok=True)
    done = {k: stored_row(r) for k, r in load_keyed_rows(journal).items()}  # a journal of an earlier layout: no time
    prompts = [prompt_fn(p) for p in problems]
    keys = [[sample_key(p, pr, model_tag, sampling, i) for i in range(n)] for p, pr in zip(problems, prompts,
                                                                                          strict=True)]
    # a sandbox_error row is the judge's failure, not a verdict: it is judged again (its completion is reused)
    todo = [t for t in range(len(problems))
            if not all(k in done and done[k].get("judge_version") == judge_version
                       and done[k].get("verdict") != "sandbox_error" for k in keys[t])]
    log.info("%d/%d tasks to do (%d resumed)", len(todo), len(problems), len(problems) - len(todo))
    bar = progress(total=len(todo), desc=f"eval {journal.stem}", unit="task")
    with journal.open("a", encoding="utf-8") as fh, bar:
        for s in range(0, len(todo), chunk_tasks):
            chunk = todo[s : s + chunk_tasks]
            need_gen = [t for t in chunk if not all(k in done for k in keys[t])]
            comps = {}
            if need_gen:
                prepare = getattr(generator, "prepare", None)  # a lazy generator loads its model here, untimed
                if callable(prepare):
                    prepare()
                t0 = time.perf_counter()
                out = generator.generate([prompts[t] for t in need_gen], n, sampling, ids=[ids[t] for t in need_gen])
                if stats is not None:
                    stats.wall_s += time.perf_counter() - t0
                    stats.samples += sum(len(cs) for cs in out)
                    stats.tokens += sum(c.n_tokens for cs in out for c in cs)
                for t, cs in zip(need_gen, out, strict=True):
                    if len(cs) != n:
                        raise ValueError(f"generator returned {len(cs)} completions for {ids[t]}, expected {n}")
                    comps[t] = [(c.text, c.n_tokens, c.finish_reason) for c in cs]
            new: list[dict[str, Any]] = []
            for t in chunk:
                p = problems[t]
                for i, key in enumerate(keys[t]):
                    if t in comps:
                        text, n_tok, reason = comps[t][i]
                    else:
                        o = done[key]
                        text, n_tok, reason = o["completion"], o["n_tokens"], o["finish_reason"]
                    new.append({"key": key, "task_id": p.id, "source": p.source, "sample_index": i,
                                "model": model_tag, "completion": text, "finish_reason": reason, "n_tokens": n_tok,
                                "code": extract_code(text, p), "judge_version": judge_version})
            by_id = {problems[t].id: problems[t] for t in chunk}
            to_judge = [r for r in new if r["code"] is not None]
            results = judge.judge_many([(by_id[r["task_id"]], r["code"]) for r in to_judge]) if to_judge else []
            for r, res in zip(to_judge, results, strict=True):
                record_verdict(r, by_id[r["task_id"]], res)
            for r in new:
                if r["code"] is None:
                    record_verdict(r, by_id[r["task_id"]], None)
                fh.write(json.dumps(stored_row(r), ensure_ascii=False) + "\n")
                done[r["key"]] = r
            fh.flush()
            os.fsync(fh.fileno())
            bar.update(len(chunk))
    rows = [done[k] for ks_ in keys for k in ks_]
    atomic_write_jsonl(journal, (stored_row(r) for r in rows))  # compact: a function of the inputs (module doc)
    return rows
