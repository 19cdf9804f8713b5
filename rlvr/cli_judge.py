"""The ``rlvr judge`` subcommand: judge an EvalPlus-style samples file against a dataset, one verdict line per sample.

Registered lazily in :data:`rlvr.cli.LAZY_SUBCOMMANDS` (imported when ``rlvr judge`` runs or ``rlvr --help`` lists it),
so this module imports only click and the standard library at import time; the data, eval and judge code it uses is
imported inside the functions.

    rlvr judge --dataset humanevalplus --samples samples.jsonl --out verdicts.jsonl
    rlvr judge --evalplus --dataset humaneval --samples samples.jsonl --k 1,10   # as evalplus.evaluate
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

__all__ = ["judge_cmd"]


def _read_samples(path: Path) -> list[dict[str, Any]]:
    """Parse an EvalPlus-style samples file: one ``{"task_id", "solution" | "completion"}`` object per line.

    Raises ``click.ClickException`` naming the file, line and field of the first bad line."""
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise click.ClickException(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
            if not isinstance(rec, dict):
                raise click.ClickException(f"{where}: expected a JSON object, got {type(rec).__name__}")
            tid = rec.get("task_id")
            if tid is None:
                raise click.ClickException(f"{where}: field 'task_id': missing")
            if not isinstance(tid, str | int) or isinstance(tid, bool):
                raise click.ClickException(f"{where}: field 'task_id': expected a string")
            if isinstance(rec.get("solution"), str):
                kind = "solution"
            elif isinstance(rec.get("completion"), str):
                kind = "completion"
            else:
                raise click.ClickException(f"{where}: field 'solution' (or 'completion'): missing or not a string")
            rows.append({"task_id": str(tid), "kind": kind, "code": rec[kind], "where": where})
    return rows


def _load_problems(spec: str, problems_dir: Path, release: str | None = None) -> tuple[list[Any], str]:
    """Problems of ``spec`` (either version spelling): the governance stage's ``<problems_dir>/<slug>.jsonl`` when
    present, else the bundled loader; with an EvalPlus ``release`` always the bundled loader with that release's
    oracles (the governance files hold ``governance.evalplus_release``'s). Returns ``(problems, origin)``."""
    from rlvr.data.bundled import canonical_name
    from rlvr.data.errors import DataError
    from rlvr.data.schema import read_problems

    try:
        slug = canonical_name(spec)
    except DataError as exc:
        raise click.ClickException(str(exc)) from exc
    path = problems_dir / f"{slug}.jsonl"
    if release is not None:
        from rlvr.data.loaders import load

        try:
            return load(slug, options={"evalplus_release": release}), f"bundled {slug}, evalplus_release={release}"
        except DataError as exc:
            raise click.ClickException(f"bundled loading of {slug} failed: {exc}") from exc
    if path.is_file():
        try:
            return read_problems(path), str(path)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
    from rlvr.data.loaders import load

    try:
        return load(slug), f"bundled {slug} ({path} not found)"
    except DataError as exc:
        raise click.ClickException(f"{path} not found and bundled loading failed: {exc}") from exc


def _index(problems: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Look-ups by full id and by native id (``"humaneval/HumanEval/0"`` → ``"HumanEval/0"``); ambiguous native ids
    are left out."""
    full = {p.id: p for p in problems}
    native: dict[str, Any] = {}
    ambiguous: set[str] = set()
    for p in problems:
        nid = p.id.split("/", 1)[1] if "/" in p.id else p.id
        if nid in native:
            ambiguous.add(nid)
        native[nid] = p
    for nid in ambiguous:
        native.pop(nid)
    return full, native


def _fill_missing_expected(problems: list[Any], judge: Any) -> list[Any]:
    """Fill ``CallTest.expected is None`` (bundled EvalPlus sets before governance) by running each problem's
    reference solution, as the governance stage does; problems it cannot fill are returned unchanged (their tests
    then judge as ``sandbox_error``)."""
    from rlvr.data.governance import fill_expected
    from rlvr.data.schema import CallTest

    pending = [p for p in problems if any(isinstance(t, CallTest) and t.expected is None for t in p.tests)]
    if not pending:
        return problems
    click.echo(f"computing expected outputs of {len(pending)} problem(s) from their reference solutions", err=True)
    kept, report = fill_expected(pending, judge, workers=max(1, int(getattr(judge, "workers", 1) or 1)))
    if report["dropped"]:
        first = report["dropped"][0]
        click.echo(f"{len(report['dropped'])} problem(s) without expected outputs, their samples not judged "
                   f"(sandbox_error); first: {first['id']}: {first['reason']}", err=True)
    filled = {p.id: p for p in kept}
    return [filled.get(p.id, p) for p in problems]


def _judge_unless_unfilled(judge: Any, items: list[Any]) -> list[Any]:
    """Judge ``items`` (:func:`_judge_with_progress`), except the samples of a problem whose expected outputs could
    not be computed (a call test still without ``expected``: the reference run failed, e.g. its request to a remote
    judge failed after its retries): those get verdict ``sandbox_error`` here, without a request, so one failed
    reference run counts once in the failure share (:class:`~rlvr.judge.preflight.GuardedJudge`), not once per
    sample."""
    from rlvr.data.schema import CallTest
    from rlvr.judge.verdict import TestResult, summarise

    def unfilled(p: Any) -> bool:
        return any(isinstance(t, CallTest) and t.expected is None for t in p.tests)

    todo = [i for i, (p, _) in enumerate(items) if not unfilled(p)]
    out: list[Any] = [None] * len(items)
    for i, r in zip(todo, _judge_with_progress(judge, [items[i] for i in todo]), strict=True):
        out[i] = r
    msg = "expected outputs unavailable: the reference solution could not be run (see above); not judged"
    for i, (p, _) in enumerate(items):
        if out[i] is None:
            out[i] = summarise([TestResult(index=j, verdict="sandbox_error", message=msg)
                                for j in range(len(p.tests))], 0.0, msg)
    return out


def _checked_judge(factory: Any) -> Any:
    """``factory()`` (the process-wide judge) after :func:`rlvr.judge.preflight.preflight`, wrapped to count its
    verdicts (:class:`~rlvr.judge.preflight.GuardedJudge`, ceiling ``judge.max_sandbox_error_share`` of
    ``./params.yaml`` when that file has a ``judge`` section, else 0.05). Raises ``click.ClickException`` with the
    preflight's one sentence (where the judge is, what failed) when the judge does not work."""
    from rlvr.config import ConfigError
    from rlvr.judge.preflight import GuardedJudge, JudgeParams, JudgeUnavailable, load_judge_params, preflight

    try:
        cfg = load_judge_params("params.yaml") if Path("params.yaml").is_file() else JudgeParams()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    judge = factory()
    if cfg.preflight:
        try:
            preflight(judge)
        except JudgeUnavailable as exc:
            raise click.ClickException(str(exc)) from exc
    return GuardedJudge(judge, cfg.max_sandbox_error_share)


def _check_sandbox_errors(judge: Any) -> None:
    """``click.ClickException`` (one line, nothing written) when ``judge``'s ``sandbox_error`` share is too high."""
    from rlvr.judge.preflight import SandboxErrorShareExceeded

    try:
        judge.check_sandbox_errors()
    except SandboxErrorShareExceeded as exc:
        raise click.ClickException(str(exc)) from exc


def _parse_ks(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    """``--k "1,10,100"`` → ``(1, 10, 100)``; a click ``BadParameter`` for anything but positive integers."""
    try:
        ks = tuple(int(x) for x in value.replace(" ", "").split(",") if x)
    except ValueError:
        ks = ()
    if not ks or min(ks) < 1:
        raise click.BadParameter(f"expected positive integers separated by commas, got {value!r}")
    return ks


def _judge_with_progress(judge: Any, items: list[Any]) -> list[Any]:
    """``judge.judge_many(items)`` in chunks of ``max(8, 4 × workers)`` with a progress bar (:mod:`rlvr.progress`)."""
    from rlvr.progress import progress

    chunk = max(8, 4 * int(getattr(judge, "workers", 1) or 1))
    out: list[Any] = []
    with progress(total=len(items), desc="judge", unit="sample") as bar:
        for s in range(0, len(items), chunk):
            out.extend(judge.judge_many(items[s : s + chunk]))
            bar.update(len(items[s : s + chunk]))
    return out


#: Marker the load probe prints once the program's entry point exists (:func:`_load_statuses`).
_LOADED = "@@rlvr-evalplus-loaded@@"
#: Verdicts of a test that can come from the program failing before the call (EvalPlus: ``exec`` of the solution).
_EARLY = frozenset({"runtime_error", "timeout", "memory_limit"})


def _load_statuses(judge: Any, items: list[Any], results: list[Any]) -> list[str | None]:
    """Per sample: ``None`` when its program reached its tests, else the EvalPlus status of a program whose execution
    fails before its entry point exists: ``"fail"`` (raised or exited) or ``"timeout"`` (did not end).

    Only samples where no test was accepted and every test failed in a way the program's execution itself could
    cause (runtime error, timeout, memory) are probed, with one ``judge.run_code`` each: the solution executed as
    EvalPlus does (``exec`` into a fresh dict, so ``__name__`` is not ``"__main__"``), then its entry point looked up;
    time limit EvalPlus's outer one for the base group, ``min(60, sum of the per-test limits) + 1`` seconds."""
    out: list[str | None] = []
    for (p, code), r in zip(items, results, strict=True):
        tests = getattr(r, "tests", None) or []
        if not p.entry_point or not tests or any(t.verdict not in _EARLY for t in tests):
            out.append(None)
            continue
        limits = [t.time_limit_s or p.time_limit_s for t in p.tests if getattr(t, "group", None) == "base"]
        probe = (f"_g = {{}}\nexec(compile({code!r}, 'solution.py', 'exec'), _g)\n_g[{p.entry_point!r}]\n"
                 f"print({_LOADED!r})\n")
        run = judge.run_code(probe, timeout_s=min(60.0, sum(limits) or p.time_limit_s) + 1.0,
                             memory_limit_mb=p.memory_limit_mb)
        if _LOADED in (run.stdout or ""):
            out.append(None)
        elif run.verdict == "sandbox_error":
            out.append(None)  # unknown: keep the per-test statuses
        else:
            out.append("timeout" if run.verdict == "timeout" else "fail")
    return out


def _write_evalplus_results(samples: list[dict[str, Any]], items: list[Any], results: list[Any], ks: tuple[int, ...],
                            samples_path: Path, judge: Any) -> None:
    """Write ``<samples>_eval_results.json`` (EvalPlus's layout and encoding: ``json.dump``'s defaults,
    :mod:`rlvr.eval.evalplus_compat`) and print EvalPlus's pass@k lines (base, then base + extra tests)."""
    from rlvr.eval.evalplus_compat import eval_results, eval_results_path
    from rlvr.io import atomic_write_text

    doc = eval_results([{"task_id": s["task_id"], "solution": code} for s, (_, code) in zip(samples, items,
                                                                                         strict=True)],
                       [p for p, _ in items], results, ks, loaded=_load_statuses(judge, items, results))
    path = Path(eval_results_path(str(samples_path)))
    atomic_write_text(path, json.dumps(doc))
    n_min = min(len(v) for v in doc["eval"].values()) if doc["eval"] else 0
    click.echo(f"EvalPlus results → {path} ({len(doc['eval'])} task(s), >= {n_min} sample(s) each)")
    for col, title in (("base", "base tests"), ("plus", "base + extra tests")):
        if col in doc["pass_at_k"]:
            vals = doc["pass_at_k"][col]
            shown = "  ".join(f"{k}: {v:.3f}" for k, v in vals.items()) or f"(no k <= {n_min} samples per task)"
            click.echo(f"  {title:<19} {shown}")


def _print_pass_at_k(rows: list[dict[str, Any]], ks: tuple[int, ...]) -> None:
    """pass@k of ``accepted`` over the rows' tasks (unbiased estimator), for the k every task has samples for."""
    from rlvr.eval.evalplus_compat import pass_at_k_columns

    cols = pass_at_k_columns([{"task_id": r["problem_id"], "base_status": "pass" if r["verdict"] == "accepted"
                               else "fail"} for r in rows], ks)
    if cols["base"]:
        click.echo("pass@k: " + "  ".join(f"{k}: {v:.3f}" for k, v in cols["base"].items()))


@click.command("judge")
@click.option("--dataset", "dataset", required=True, metavar="NAME[:VERSION]",
              help="dataset: humanevalplus, humanevalplus:v0.1.10 (= humanevalplus-v0.1.10), humaneval+, mbpp+, …; "
                   "with --evalplus EvalPlus's names: humaneval = HumanEval+ v0.1.10, mbpp = MBPP+ v0.2.0")
@click.option("--samples", "samples_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSONL of {task_id, solution} or {task_id, completion} (EvalPlus samples format)")
@click.option("--out", "out_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="JSONL of verdicts, one line per sample (written atomically)  [default: <samples>_verdicts.jsonl]")
@click.option("--problems-dir", default="data/governance/problems", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="problems written by the governance stage")
@click.option("--evalplus", "evalplus_mode", is_flag=True,
              help="EvalPlus's dataset names (humaneval = HumanEval+, mbpp = MBPP+), as evalplus.evaluate reads them")
@click.option("--k", "ks", default="1,10,100", show_default=True, callback=_parse_ks,
              help="pass@k values (comma-separated) for n samples per task; a k is reported when every task has >= k")
@click.option("--evalplus-release", "release", default=None, metavar="RELEASE",
              help="reproduce an EvalPlus evaluator release's verdicts: 0.3.1 (its find_zero bug) or pre-set-eq "
                   "(the published MBPP+ v0.1.0 tables, before the set-equality rule); loads the bundled dataset")
@click.option("--eval-results/--no-eval-results", default=True, show_default=True,
              help="write <samples>_eval_results.json in EvalPlus's layout (EvalPlus datasets)")
def judge_cmd(dataset: str, samples_path: Path, out_path: Path | None, problems_dir: Path, evalplus_mode: bool,
              ks: tuple[int, ...], release: str | None, eval_results: bool) -> None:
    """Judge a samples file against a dataset and write one verdict line per sample.

    A task_id matches a problem's full id or its native id (HumanEval/0 = humaneval/HumanEval/0); completion samples
    are judged as starter code + completion. The judge is the embedded one, or the server at RLVR_SANDBOX_URL.
    Output fields: task_id, problem_id, verdict, passed, total, pass_ratio, judge_s (seconds), message; for EvalPlus
    datasets also base_status / plus_status, <samples>_eval_results.json in EvalPlus's layout and pass@k for base
    and base + extra tests (docs/judge/index.md).

    \f
    ``task_id`` matches a problem's full id or its native id (``HumanEval/0`` → ``humaneval/HumanEval/0``).
    ``completion`` samples are judged as ``starter_code + completion`` (the HumanEval/EvalPlus convention). Uses the
    judge of ``rlvr.judge.client.get_judge`` (remote when ``RLVR_SANDBOX_URL`` is set). Output fields: ``task_id``,
    ``problem_id``, ``verdict``, ``passed``, ``total``, ``pass_ratio``, ``judge_s`` (seconds), ``message``; for
    EvalPlus datasets also ``base_status`` / ``plus_status`` (``pass``/``fail``, EvalPlus's fields: the base inputs and
    the plus inputs, :mod:`rlvr.eval.evalplus_columns`), ``<samples>_eval_results.json`` in EvalPlus's layout and
    pass@k for base and base + extra tests (:mod:`rlvr.eval.evalplus_compat`)."""
    from collections import Counter

    from rlvr.data.errors import DataError
    from rlvr.data.evalplus_oracles import COMPAT
    from rlvr.eval.evalplus_columns import group_statuses
    from rlvr.eval.evalplus_compat import resolve_dataset
    from rlvr.io import atomic_write_jsonl
    from rlvr.judge import client
    from rlvr.judge.verdict import VERDICTS

    if release is not None and release not in COMPAT:
        raise click.BadParameter(f"unknown release {release!r}; known: {', '.join(sorted(COMPAT))}",
                                 param_hint="'--evalplus-release'")
    try:
        name = resolve_dataset(dataset, evalplus=evalplus_mode)
    except DataError as exc:
        raise click.ClickException(str(exc)) from exc
    if name != dataset:
        click.echo(f"dataset {dataset!r} = {name}" + (" (EvalPlus names)" if evalplus_mode else ""), err=True)
    elif not evalplus_mode and dataset in ("humaneval", "mbpp"):
        click.echo(f"dataset {dataset!r} is the original benchmark; EvalPlus's {dataset!r} (the '+' version) is "
                   "--evalplus or humanevalplus/mbppplus", err=True)
    if out_path is None:
        stem = str(samples_path)[: -len(".jsonl")] if str(samples_path).endswith(".jsonl") else str(samples_path)
        out_path = Path(stem + "_verdicts.jsonl")
    samples = _read_samples(samples_path)
    if not samples:
        raise click.ClickException(f"{samples_path}: no samples (the file holds no JSON line)")
    problems, origin = _load_problems(name, problems_dir, release)
    full, native = _index(problems)
    chosen: list[Any] = []
    for s in samples:
        p = full.get(s["task_id"]) or native.get(s["task_id"])
        if p is None:
            raise click.ClickException(
                f"{s['where']}: field 'task_id': unknown task id {s['task_id']!r} in dataset {name!r} ({origin})"
            )
        chosen.append(p)
    click.echo(f"judging {len(samples)} sample(s) of {len({p.id for p in chosen})} problem(s) from {origin}", err=True)
    judge = _checked_judge(client.get_judge)
    needed = _fill_missing_expected(list({p.id: p for p in chosen}.values()), judge)
    by_id = {p.id: p for p in needed}
    items = []
    for s, p in zip(samples, chosen, strict=True):
        p = by_id[p.id]
        code = s["code"] if s["kind"] == "solution" else p.starter_code + s["code"]
        items.append((p, code))
    results = _judge_unless_unfilled(judge, items)
    _check_sandbox_errors(judge)
    rows = [
        {"task_id": s["task_id"], "problem_id": p.id, "verdict": r.verdict, "passed": r.passed, "total": r.total,
         "pass_ratio": r.pass_ratio, "judge_s": round(r.judge_s, 4), "message": r.message, **group_statuses(p, r)}
        for s, (p, _), r in zip(samples, items, results, strict=True)
    ]
    atomic_write_jsonl(out_path, rows)
    counts = Counter(r["verdict"] for r in rows)
    n = len(rows)
    click.echo(f"{n} sample(s) → {out_path}")
    for v in VERDICTS:
        if counts[v]:
            click.echo(f"  {v:<14} {counts[v]:>6}  ({counts[v] / n:.1%})")
    acc = counts["accepted"] / n if n else 0.0
    click.echo(f"accepted fraction: {acc:.4f} ({counts['accepted']}/{n})")
    if n and not any("base_status" in r for r in rows):
        _print_pass_at_k(rows, ks)
    if n and any("base_status" in r for r in rows):
        nb = sum(r.get("base_status") == "pass" for r in rows)
        npl = sum(r.get("base_status") == r.get("plus_status") == "pass" for r in rows)
        click.echo(f"EvalPlus columns: base {nb / n:.4f} ({nb}/{n}), base+plus {npl / n:.4f} ({npl}/{n})")
        if eval_results:
            _write_evalplus_results(samples, items, results, ks, samples_path, judge)
