"""What every stage script (``stages/<name>.py``) shares, so a stage file declares only what is specific to it.

A stage is a function decorated with :func:`stage`; it receives :class:`Params` (the ``--params`` file) and its own
options (declared with :func:`option`), does its work and returns a :class:`Result`: the files to write and the line to
print. The decorator adds the common ``--params`` option, configures logging, then writes every result file
atomically (:mod:`rlvr.io`: temp file + rename, so a failed stage leaves nothing half-written for DVC to cache) and
echoes the line. An error ends the stage with exit status 1 and one line on stderr (``file: key: problem``), with no
traceback unless ``RLVR_DEBUG`` is set (:func:`one_line_error`). Example (``stages/report.py``)::

    @stage(option("--out-dir", default="reports", path=True))
    def main(params: Params, out_dir: Path) -> Result:
        \"\"\"Build reports/index.html from the metrics files.\"\"\"
        summary = build_report(params.section("report", ReportParams), "metrics", "data", out_dir)
        return Result(echo=f"report: {summary['path']}")

    if __name__ == "__main__":
        main()
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["Params", "Result", "closed_after", "debug_enabled", "one_line_error", "option", "record_effective_params",
           "stage"]

S = TypeVar("S")
T = TypeVar("T")


@dataclass(frozen=True)
class Params:
    """The stage's ``params.yaml`` (path from ``--params``). Sections are validated by their pydantic model."""

    path: Path
    #: the sections read through :meth:`section` (names), for the provenance of the effective values
    read: set[str] = field(default_factory=set, compare=False)

    def section(self, name: str, model: type[S]) -> S:
        """Section ``name`` as ``model`` (:func:`rlvr.config.load_section`; unknown keys are errors). Raises
        :class:`rlvr.config.ConfigError` naming the file and section when it is missing or invalid."""
        from rlvr.config import load_section

        self.read.add(name)
        return load_section(name, model, self.path)  # type: ignore[arg-type]

    def raw(self) -> dict[str, Any]:
        """The whole file as a dict (:func:`rlvr.config.load_params`)."""
        from rlvr.config import load_params

        return load_params(self.path)


@dataclass
class Result:
    """What a stage run produced.

    ``json``: path → JSON-serialisable object, each written with :func:`rlvr.io.atomic_write_json` (parent folders
    created); ``metrics``: metrics file → the stage's whole report dict, each split by :func:`rlvr.layout.write_metrics`
    into the scores file itself (what dvc.yaml declares as ``metrics``), ``metrics/cost/…`` and
    ``metrics/provenance/…``; ``folders``: metrics folder → the stage's whole report dict, written in folder form by
    :func:`rlvr.layout.write_metrics_folder` (one scores file per dataset, so ``dvc metrics show <folder>`` prints a
    row per dataset; :func:`rlvr.layout.read_metrics` of ``<folder>.json`` reads it back whole); ``resolved``: folder
    → params section, each written with :func:`rlvr.config.dump_resolved` (the resolved params beside an output);
    ``echo``: the summary printed at the end (nothing when empty); ``error``: when set, the stage fails after writing
    its files (the message goes to stderr, exit status 1), e.g. a check whose report must be kept for inspection."""

    json: Mapping[str | Path, Any] = field(default_factory=dict)
    metrics: Mapping[str | Path, dict[str, Any]] = field(default_factory=dict)
    folders: Mapping[str | Path, dict[str, Any]] = field(default_factory=dict)
    resolved: Mapping[str | Path, Any] = field(default_factory=dict)
    echo: str = ""
    error: str | None = None

    def write(self) -> None:
        """Write every file atomically: the resolved params first, then the JSON files, then the metrics files and
        folders (each in the given order)."""
        from rlvr.config import dump_resolved
        from rlvr.io import atomic_write_json
        from rlvr.layout import write_metrics, write_metrics_folder

        for folder, section in self.resolved.items():
            dump_resolved(section, folder)
        for path, obj in self.json.items():
            atomic_write_json(path, obj)
        for path, report in self.metrics.items():
            write_metrics(path, report)
        for folder, report in self.folders.items():
            write_metrics_folder(folder, report)


def record_effective_params(result: Result, params: Params) -> None:
    """Add ``protocol.effective_params`` (:func:`rlvr.config.profiles.effective_params`: the selected profile and the
    effective value of every key it set, the values DVC does not record) to every report of ``result`` (its
    ``metrics`` files and ``folders``; a folder's ``protocol`` entry is a provenance file,
    ``metrics/provenance/<folder>/protocol.json``). Only for a stage that read a section a profile may set (through
    :meth:`Params.section`): the data stages (governance, judge_check) do not track the profile in dvc.yaml, so their
    outputs must not follow it. Raises :class:`rlvr.config.ConfigError` when params.yaml or the profile cannot be
    read."""
    from rlvr.config import load_params
    from rlvr.config.profiles import DATA_SECTIONS, effective_params

    reports = [*result.metrics.values(), *result.folders.values()]
    if not reports or not (params.read - set(DATA_SECTIONS)):
        return
    eff = effective_params(load_params(params.path, raw=True), params.path)
    for report in reports:
        proto = report.setdefault("protocol", {})
        if isinstance(proto, dict):
            proto["effective_params"] = eff


def option(*decls: str, default: Any = None, path: bool = False, **kwargs: Any) -> Callable[[Any], Any]:
    """A ``click.option`` with ``show_default=True``; ``path=True`` makes it a :class:`pathlib.Path`
    (``click.Path(path_type=Path)``)."""
    if path:
        kwargs.setdefault("type", click.Path(path_type=Path))
    if default is not None:
        kwargs["default"] = default
    return click.option(*decls, show_default=default is not None, **kwargs)


def debug_enabled() -> bool:
    """Whether ``RLVR_DEBUG`` asks for tracebacks (set and not ``0``/``false``/``no``/empty)."""
    return os.environ.get("RLVR_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def one_line_error(exc: BaseException) -> str:
    """``exc`` as one line for a user: rlvr's own errors (``ConfigError``, ``DataError``, ``JudgeUnavailable``…,
    whose messages already name the file/key/judge) by their message; anything else as ``Type: message`` with a hint
    that ``RLVR_DEBUG=1`` shows the traceback. Multi-line messages are joined with ``; ``."""
    msg = "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip()) or "no message"
    if type(exc).__module__.startswith("rlvr."):
        return msg
    return f"{type(exc).__name__}: {msg} (set RLVR_DEBUG=1 for the traceback)"


def _check_sections(path: Path) -> None:
    """The stage's preflight on the params file: a top-level key close to a known section name is a typo
    (``basline:``, from ``dvc exp run -S basline.n=2``): :class:`rlvr.config.ConfigError`; any other unknown key is
    logged as a warning (``rlvr check`` reports both as errors)."""
    from rlvr.config import ConfigError, unknown_sections

    problems = unknown_sections(path)
    typos = [p for p in problems if "did you mean" in p]
    if typos:
        raise ConfigError("; ".join(typos))
    for p in problems:
        logging.getLogger("rlvr.stage").warning(p)


def stage(*options: Callable[[Any], Any]) -> Callable[[Callable[..., Result]], click.Command]:
    """Turn ``fn(params: Params, **options) -> Result`` into the stage's click command.

    Adds ``--params`` (default ``params.yaml``, must exist), configures INFO logging, checks the file's top-level
    keys (a misspelt section name is an error, :func:`_check_sections`), calls ``fn``, writes its
    :class:`Result` atomically, echoes ``Result.echo`` and exits with status 1 when ``Result.error`` is set. An
    exception from ``fn`` exits with status 1 after printing :func:`one_line_error` on stderr (re-raised with its
    traceback when :func:`debug_enabled`); nothing of the :class:`Result` is written. The command's help is
    ``fn``'s docstring. A ``fn`` that returns something other than a :class:`Result` is such an error
    (``TypeError``)."""

    def wrap(fn: Callable[..., Result]) -> click.Command:
        @functools.wraps(fn)
        def run(params_path: Path, **kwargs: Any) -> None:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
            try:
                _check_sections(Path(params_path))
                params = Params(Path(params_path))
                result = fn(params, **kwargs)
                if not isinstance(result, Result):
                    raise TypeError(f"stage {fn.__name__} returned {type(result).__name__}, expected rlvr.stage.Result")
                record_effective_params(result, params)
            except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit, KeyboardInterrupt):
                raise
            except Exception as exc:
                if debug_enabled():
                    raise
                click.echo(one_line_error(exc), err=True)
                raise SystemExit(1) from None
            result.write()
            if result.echo:
                click.echo(result.echo)
            if result.error:
                click.echo(result.error, err=True)
                raise SystemExit(1)

        cmd: Any = run
        for opt in reversed(options):
            cmd = opt(cmd)
        cmd = click.option("--params", "params_path", default="params.yaml", show_default=True,
                           type=click.Path(exists=True, path_type=Path), help="the params file")(cmd)
        return click.command(help=fn.__doc__)(cmd)

    return wrap


@contextlib.contextmanager
def closed_after(resource: T) -> Iterator[T]:
    """Yield ``resource`` and call its ``close()`` on exit, if it has one (a judge: embedded sandboxes or a remote
    client); an error while closing is ignored so that the stage's own error, if any, is the one reported."""
    try:
        yield resource
    finally:
        close = getattr(resource, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
