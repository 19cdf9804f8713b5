"""The ``rlvr`` console script (``rlvr = "rlvr.cli:main"`` in ``pyproject.toml``).

Commands::

    rlvr sandbox serve --host 127.0.0.1 --port 8080 [--workers N]    # the judge as an HTTP server
    rlvr judge --dataset humanevalplus --samples samples.jsonl --out verdicts.jsonl
    rlvr judge --evalplus --dataset humaneval --samples samples.jsonl --k 1,10   # as evalplus.evaluate
    rlvr convert train.parquet --out problems.jsonl                # verl (PRIME/TACO/APPS) parquet → rlvr problems
    rlvr summary                                                   # the run's result per phase and dataset
    rlvr cost [MATCH...]                                           # seconds, throughput, tokens spent per stage
    rlvr --version                                                 # rlvr's version (rlvr.__version__)
    rlvr check                                                     # params, datasets, model id, judge, GPUs
    rlvr time-limits [--dataset humanevalplus:v0.1.10]             # re-measure the committed EvalPlus limits

Subcommand modules are imported only when that subcommand runs, so ``rlvr --help`` stays fast. To add a command
that lives in another module, add ``"name": "package.module:command_object"`` to :data:`LAZY_SUBCOMMANDS` (the
"lazily loading subcommands" pattern of the click documentation, *Advanced Patterns*); small commands may also be
defined here with ``@main.command()`` as long as their heavy imports stay inside the function body.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import click

from rlvr import __version__

__all__ = ["LAZY_SUBCOMMANDS", "LazyGroup", "main"]

#: Subcommands defined in other modules: name → ``"module:attribute"`` (a click command or group).
LAZY_SUBCOMMANDS: dict[str, str] = {
    "cost": "rlvr.report.cost:main",
    "check": "rlvr.check:main",
    "convert": "rlvr.data.convert:main",
    "summary": "rlvr.report.summary:main",
    "wandb-sync": "rlvr.report.wandb_sync:main",
}


class LazyGroup(click.Group):
    """A click group that imports the commands of :data:`LAZY_SUBCOMMANDS` only when they are invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Eager and lazy command names, sorted."""
        return sorted({*super().list_commands(ctx), *LAZY_SUBCOMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, importing it first when it is lazy. Raises ``TypeError`` if the target is not a
        click command."""
        if cmd_name in LAZY_SUBCOMMANDS and cmd_name not in self.commands:
            module, _, attr = LAZY_SUBCOMMANDS[cmd_name].partition(":")
            cmd = getattr(importlib.import_module(module), attr)
            if not isinstance(cmd, click.Command):
                raise TypeError(f"{LAZY_SUBCOMMANDS[cmd_name]} is not a click command")
            return cmd
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="rlvr", message="%(prog)s %(version)s")
def main() -> None:
    """rlvr: reinforcement learning from verifiable rewards for coding LLMs (judge, data, training, eval)."""


# --------------------------------------------------------------------------------------------------------- sandbox
@main.group()
def sandbox() -> None:
    """The sandboxed judge as a service (SandboxFusion/ScaleBox-compatible HTTP API)."""


@sandbox.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="interface to listen on")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="TCP port")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="server processes; each runs RLVR_SANDBOX_WORKERS sandboxes")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def sandbox_serve(host: str, port: int, workers: int, log_level: str) -> None:
    """Serve the judge: GET /v1/ping, POST /run_code, POST /common_evaluate_batch, POST /rlvr/judge."""
    from rlvr.judge.api.app import serve

    serve(host=host, port=port, workers=workers, log_level=log_level)


# ----------------------------------------------------------------------------------------------------------- judge
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
    kept, _ = fill_expected(pending, judge, workers=max(1, int(getattr(judge, "workers", 1) or 1)))
    filled = {p.id: p for p in kept}
    return [filled.get(p.id, p) for p in problems]


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


def _write_evalplus_results(samples: list[dict[str, Any]], items: list[Any], results: list[Any], ks: tuple[int, ...],
                            samples_path: Path) -> None:
    """Write ``<samples>_eval_results.json`` (EvalPlus's layout, :mod:`rlvr.eval.evalplus_compat`) and print EvalPlus's
    pass@k lines (base, then base + extra tests)."""
    from rlvr.eval.evalplus_compat import eval_results, eval_results_path
    from rlvr.io import atomic_write_json

    doc = eval_results([{"task_id": s["task_id"], "solution": code} for s, (_, code) in zip(samples, items,
                                                                                         strict=True)],
                       [p for p, _ in items], results, ks)
    path = Path(eval_results_path(str(samples_path)))
    atomic_write_json(path, doc)
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


@main.command("judge")
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
    results = _judge_with_progress(judge, items)
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
            _write_evalplus_results(samples, items, results, ks, samples_path)


# ----------------------------------------------------------------------------------------------------- time-limits
@main.command("time-limits")
@click.option("--dataset", "specs", multiple=True,
              help="EvalPlus dataset 'name:version' to (re-)measure; repeatable (default: every EvalPlus dataset of "
                   "params.yaml governance.datasets)")
@click.option("--params", "params_path", default="params.yaml", show_default=True, type=click.Path(path_type=Path))
@click.option("--out", default="data/evalplus_time_limits.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(min=1),
              help="timed runs of each reference; the fastest is kept")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=1))
def time_limits(specs: tuple[str, ...], params_path: Path, out: Path, repeats: int, workers: int) -> None:
    """Re-measure the committed EvalPlus per-test time limits (rlvr.data.evalplus_limits), then commit the file:
    governance and what follows re-run. Minutes of CPU: run it on an idle machine."""
    from rlvr.config import load_params
    from rlvr.data.evalplus_limits import DEFAULT_MIN_TIME_LIMIT, measure_table, read_table, write_table
    from rlvr.data.governance import GovernanceParams, dataset_slug, fill_expected
    from rlvr.data.loaders import load
    from rlvr.judge.client import get_judge

    cfg = GovernanceParams.model_validate(load_params(params_path).get("governance", {}))
    from rlvr.data.bundled import parse_spec

    if not specs:  # either spelling of a version ("name:v1" or "name-v1"; params are stored as the latter)
        specs = tuple(d.name for d in cfg.datasets if parse_spec(d.name)[0] in ("humanevalplus", "mbppplus"))
    if not specs:
        raise click.ClickException(f"{params_path}: governance.datasets has no EvalPlus dataset; "
                                   "name one with --dataset")
    base = read_table(out) if out.is_file() else None
    opts = {"evalplus_release": cfg.evalplus_release} if cfg.evalplus_release else {}
    judge = get_judge()
    try:
        filled = {spec: fill_expected(load(spec, "bundled", options=opts), judge, workers=workers,
                                      measure_limits=False)[0] for spec in specs}
        table = measure_table(filled, judge, workers=workers, repeats=repeats, base=base)
    finally:
        judge.close()
    write_table(out, table)
    for spec in specs:
        e = table["datasets"][dataset_slug(spec)]
        above = sum(len(v.get("above_floor", {})) for v in e["problems"].values())
        click.echo(f"{spec}: {len(e['problems'])} problems timed, {above} tests above the {DEFAULT_MIN_TIME_LIMIT} s "
                   f"floor, {len(e['not_timed'])} not timed -> {out}")


if __name__ == "__main__":
    main()
