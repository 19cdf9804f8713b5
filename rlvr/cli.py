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
    rlvr recorded-margin --id ID --decision accept [--args A]      # record a reference near its settle cap

``rlvr judge`` lives in :mod:`rlvr.cli_judge`. Subcommand modules are imported only when that subcommand runs, so
``rlvr --help`` stays fast. To add a command that lives in another module, add ``"name":
"package.module:command_object"`` to :data:`LAZY_SUBCOMMANDS` (the "lazily loading subcommands" pattern of the click
documentation, *Advanced Patterns*); small commands may also be defined here with ``@main.command()`` as long as their
heavy imports stay inside the function body.
"""

from __future__ import annotations

import importlib
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
    "judge": "rlvr.cli_judge:judge_cmd",
}


#: Names that moved from this module to the one named, still importable from here (``from rlvr.cli import
#: judge_cmd``): resolved on first access by the module ``__getattr__``.
MOVED: dict[str, str] = {"judge_cmd": "rlvr.cli_judge"}


def __getattr__(name: str) -> Any:
    # lazy, like the subcommands themselves: importing rlvr.cli must not import what `rlvr --version` does not need
    if name in MOVED:
        return getattr(importlib.import_module(MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


# ------------------------------------------------------------------------------------------------- recorded-margin
@main.command("recorded-margin")
@click.option("--id", "problem_id", required=True, help="problem id, e.g. codecontests/1503_e_2coloring_8359")
@click.option("--problems-dir", default="data/governance/problems", show_default=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--args", "args", default=None, help="one call test's args text (an oracle input); default: every test")
@click.option("--solution", default=0, show_default=True, type=click.IntRange(min=0), help="reference index")
@click.option("--base-limit-s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="the limit the margin multiplies, seconds (default: the test's own limit, else the problem's; an "
                   "amplified input's oracle: governance.amplify.oracle_time_limit_s)")
@click.option("--decision", required=True, type=click.Choice(["accept", "reject"]))
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(min=1))
@click.option("--file", "path", default="data/recorded_margins.json", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path))
@click.option("--note", default="", help="where and under what load it was measured")
def recorded_margin(problem_id: str, problems_dir: Path, args: str | None, solution: int, base_limit_s: float | None,
                    decision: str, repeats: int, path: Path, note: str) -> None:
    """Measure a trusted program near its settle limit and record its margin (rlvr.judge.recorded), then commit the
    file: governance and judge_check re-run. Repeat it under the loads the project supports (the range widens)."""
    import json

    from rlvr.data.schema import read_problems
    from rlvr.io import atomic_write_text
    from rlvr.judge.core import Judge
    from rlvr.judge.recorded import RecordedMargins, program_sha256, propose
    from rlvr.judge.settle import measure_cpu

    problem = next((p for f in sorted(problems_dir.glob("*.jsonl")) for p in read_problems(f) if p.id == problem_id),
                   None)
    if problem is None:
        raise click.ClickException(f"{problems_dir}: no problem {problem_id}")
    if solution >= len(problem.solutions):
        raise click.ClickException(f"{problem_id}: --solution {solution}: it has {len(problem.solutions)} reference(s)")
    program = problem.solutions[solution]
    own = [t.time_limit_s for t in problem.tests if args is not None and getattr(t, "args", None) == args]
    base = base_limit_s or (own[0] if own and own[0] else problem.time_limit_s)
    table = RecordedMargins.read(path)
    with Judge(workers=1) as judge:
        try:
            measured = measure_cpu(judge, problem, program, args=args, repeats=repeats)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    key = (problem_id, program_sha256(program), args)
    earlier = [e for e in table.entries if (e.problem, e.program_sha256, e.args) == key]
    measured += [x for e in earlier for x in e.measured_cpu_s]  # a re-measurement widens the recorded range
    try:
        entry = propose(problem_id, program, base, measured, decision, args, note)  # type: ignore[arg-type]
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    rows = [e for e in table.entries if e not in earlier] + [entry]
    data = {"rule": RULE_TEXT, "entries": [e.model_dump(mode="json") for e in rows]}
    atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    click.echo(f"{problem_id}: CPU {min(measured):g}-{max(measured):g} s, {decision} at margin {entry.margin:g} x "
               f"{base:g} s -> {path}")


RULE_TEXT = ("the settle run of a listed trusted program uses the listed margin x base_limit_s of CPU instead of "
             "the default (rlvr.judge.recorded); margin kept >= 1.5x away from every measured CPU time")


if __name__ == "__main__":
    main()
