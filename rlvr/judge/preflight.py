"""Fail loudly when the judge cannot judge: a check at start, and a ceiling on ``sandbox_error`` verdicts.

A judge that cannot be reached (``RLVR_SANDBOX_URL`` with nothing behind it, bubblewrap missing) does not raise: it
answers ``sandbox_error`` for every program (infrastructure, never the program's fault; :mod:`rlvr.judge.verdict`).
Without these guards a run would score 0 everywhere and exit 0, and DVC would cache that as the model's score.

* :func:`preflight` judges one trivial program (``print(int(input()) + 1)`` on ``41``) and requires ``accepted``;
  otherwise it raises :class:`JudgeUnavailable` with one sentence naming where the judge is (the URL, or
  ``embedded``) and the error.
* :func:`check_sandbox_modules` (run by :func:`preflight`) runs one program through the sandbox (``run_code``) that
  imports :data:`SANDBOX_MODULES`, the non-standard libraries the bundled benchmarks' programs and tests import; a
  module the sandbox's interpreter lacks would make every correct program that imports it ``runtime_error`` (a silent
  0 reward), so it raises :class:`JudgeUnavailable` naming the module, the interpreter and the fix.
* :class:`GuardedJudge` wraps a judge, counts the verdicts it hands out, and :meth:`GuardedJudge.check_sandbox_errors`
  raises :class:`SandboxErrorShareExceeded` when the share of failed judge *requests* passes
  ``judge.max_sandbox_error_share`` (params section ``judge``, :class:`JudgeParams`). Infrastructure failures are
  counted per request, never per verdict: a remote judge's own count of logical HTTP requests and of those that still
  failed after their retries (:meth:`rlvr.judge.transport.RetryingHTTP.request_counts`; one failed ``/run_code``
  request of a many-test submission, or one failed expected-output run shared by many samples, is one failure); the
  embedded judge's requests are its judged submissions (``sandbox_error`` verdicts) and ``call_outputs`` runs (a
  :class:`~rlvr.judge.sandbox.SandboxError`).
* :func:`open_judge` is how a stage gets its judge: preflight at start, the ceiling checked when the stage's judging
  is done and before it writes metrics, so such a run fails non-zero and writes none.

Judging through the verl engine happens in verl's reward workers (``compute_score``), outside this process: only
the judging done in the stage process itself is counted.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from rlvr.config import Section

__all__ = [
    "PROBE_SOLUTION",
    "SANDBOX_MODULES",
    "GuardedJudge",
    "JudgeParams",
    "JudgeUnavailable",
    "SandboxErrorShareExceeded",
    "check_sandbox_modules",
    "judge_location",
    "load_judge_params",
    "open_judge",
    "preflight",
    "probe_problem",
]

#: The preflight's program: reads one integer, prints the next one.
PROBE_SOLUTION = "print(int(input()) + 1)\n"

#: Libraries outside the standard library that the benchmarks' programs and tests import, so the sandbox's interpreter
#: must have them: ``sortedcontainers`` (LeetCodeDataset's prompt preamble and reference solutions,
#: ``data/raw/leetcodedataset``: ``SortedList``/``SortedDict``) and ``numpy`` (the EvalPlus tests from the Hub,
#: :mod:`rlvr.data.hub`: ``np.allclose``; one LeetCodeDataset reference). tests/judge/test_sandbox_modules.py scans the
#: bundled ``data/raw`` benchmarks' code for non-standard imports and fails on one missing here. The CPU machines get
#: both from Debian (``make system``: ``python3-sortedcontainers``, ``python3-numpy``); an offline GPU node from
#: ``bench/gpu/run_gpu.sh`` (``RLVR_SANDBOX_SITE``, docs/training/gpu.md).
SANDBOX_MODULES: tuple[str, ...] = ("sortedcontainers", "numpy")

#: What to do when a module is missing (the end of :func:`check_sandbox_modules`'s message).
_MODULE_FIX = ("install it for that interpreter (Debian/Ubuntu: apt-get install python3-{mod}, or `make system`), or, "
               "on an offline node, unpack its .deb or wheel into a folder and name that folder in RLVR_SANDBOX_SITE "
               "(bench/gpu/run_gpu.sh does; docs/training/gpu.md)")


class JudgeParams(Section):
    """``judge`` section of ``params.yaml``: what every judging stage tolerates from the judge.

    ``max_sandbox_error_share``: largest fraction (0–1) of a stage's verdicts that may be ``sandbox_error`` before
    the stage fails without writing metrics (a sandbox error is the infrastructure's failure; scoring it as a wrong
    answer would report a broken judge as a bad model). ``preflight``: judge one trivial program at start and stop
    when it is not accepted. ``sandbox_error_window_steps``: a training stage (GRPO, repair; both engines) stops with
    one line when the ``sandbox_error`` share of the samples sent to the judge is above ``max_sandbox_error_share`` in
    each of this many training steps in a row (a judge failing part of the time: :mod:`rlvr.reward.share_window`);
    0 = only the dead-judge guard (:mod:`rlvr.reward.step_guard`) and the stage's own ceiling."""

    max_sandbox_error_share: float = Field(default=0.05, ge=0.0, le=1.0)
    sandbox_error_window_steps: int = Field(default=5, ge=0)
    preflight: bool = True


class JudgeUnavailable(RuntimeError):
    """The judge failed the preflight; the message is one sentence naming the judge's location and the error."""


class SandboxErrorShareExceeded(RuntimeError):
    """More than ``max_sandbox_error_share`` of a run's verdicts were ``sandbox_error``; the message says how many."""


def judge_location() -> str:
    """Where the process-wide judge is: ``RLVR_SANDBOX_URL`` when set, else ``"embedded"``."""
    from rlvr.config import RuntimeSettings

    return RuntimeSettings().sandbox_url.strip() or "embedded"


def probe_problem() -> Any:
    """The preflight's problem: one stdin/stdout test, ``41`` → ``42``, 10 s; its reference solution is
    :data:`PROBE_SOLUTION`."""
    from rlvr.data.schema import Problem, StdioTest

    return Problem(id="rlvr/preflight", source="rlvr", split="test", statement="Print the input integer plus one.",
                   tests=[StdioTest(stdin="41\n", stdout="42\n")], time_limit_s=10.0,
                   solutions=[PROBE_SOLUTION])


def _first_line(text: str, limit: int = 300) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line[:limit].rstrip(".")


def preflight(judge: Any, where: str | None = None) -> None:
    """Judge :data:`PROBE_SOLUTION` once with ``judge.judge_many`` and require the verdict ``accepted``, then
    :func:`check_sandbox_modules` (one ``run_code``: the sandbox imports :data:`SANDBOX_MODULES`).

    ``where``: the judge's location for the message (default :func:`judge_location`). Takes one judge call and one
    run (a few hundred ms embedded; a remote judge that cannot be reached takes its retries, seconds). Raises
    :class:`JudgeUnavailable` — ``"the judge (<where>) does not work: <error>"`` — when the call raises or the verdict
    is anything but ``accepted``, and :func:`check_sandbox_modules`'s one line when the sandbox lacks a module."""
    where = where or judge_location()
    try:
        result = judge.judge_many([(probe_problem(), PROBE_SOLUTION)])[0]
    except Exception as exc:  # any failure here is the judge's: report it in one line
        raise JudgeUnavailable(
            f"the judge ({where}) does not work: {type(exc).__name__}: {_first_line(str(exc)) or 'no message'}"
        ) from exc
    if result.verdict != "accepted":
        detail = _first_line(result.message) or next(
            (_first_line(t.message) for t in result.tests if t.message), "no message")
        raise JudgeUnavailable(
            f"the judge ({where}) does not work: a trivial program was judged {result.verdict} ({detail})")
    check_sandbox_modules(judge, where)


def _module_probe(modules: Sequence[str]) -> str:
    """Source of the program :func:`check_sandbox_modules` runs: imports each of ``modules``, prints one JSON line
    ``{"python": sys.executable, "missing": {module: "ExcType: message"}}``."""
    return ("import json, sys\nmissing = {}\n"
            f"for name in {list(modules)!r}:\n"
            "    try:\n        __import__(name)\n"
            "    except BaseException as exc:\n        missing[name] = f'{type(exc).__name__}: {exc}'\n"
            "print(json.dumps({'python': sys.executable, 'missing': missing}))\n")


def check_sandbox_modules(judge: Any, where: str | None = None,
                          modules: Sequence[str] = SANDBOX_MODULES) -> None:
    """Import ``modules`` (default :data:`SANDBOX_MODULES`) in one program run through ``judge.run_code`` — the
    sandbox and interpreter submissions get — and raise :class:`JudgeUnavailable` when one is missing: one line naming
    the first missing module, the judge (``where``, default :func:`judge_location`), the sandbox's interpreter
    (``sys.executable`` inside) and what to do. One run (30 s limit; ~0.2 s embedded, numpy's import most of it).

    A judge without ``run_code`` (not the SandboxFusion API, e.g. a test double) is not checked. Raises
    :class:`JudgeUnavailable` too when the run itself fails (the call raises, or the program is not ``accepted``)."""
    import json

    run_code = getattr(judge, "run_code", None)
    if not callable(run_code) or not modules:
        return
    where = where or judge_location()
    try:
        res = run_code(_module_probe(modules), timeout_s=30.0, memory_limit_mb=1024)
    except Exception as exc:  # the judge's failure: one line
        raise JudgeUnavailable(f"the judge ({where}) does not work: checking its sandbox's libraries raised "
                               f"{type(exc).__name__}: {_first_line(str(exc)) or 'no message'}") from exc
    lines = [ln for ln in str(getattr(res, "stdout", "")).splitlines() if ln.strip()]
    try:
        report = json.loads(lines[-1])
        python, missing = str(report["python"]), dict(report["missing"])
    except (IndexError, ValueError, KeyError, TypeError):
        err = str(getattr(res, "stderr", "")).strip().splitlines()
        detail = _first_line(err[-1]) if err else "no output"
        raise JudgeUnavailable(f"the judge ({where}) does not work: a program importing {', '.join(modules)} was "
                               f"judged {getattr(res, 'verdict', '?')} ({detail})") from None
    if missing:
        mod = next(iter(missing))
        also = f" (also missing: {', '.join(list(missing)[1:])})" if len(missing) > 1 else ""
        raise JudgeUnavailable(
            f"the judge's sandbox ({where}, interpreter {python}) cannot import {mod}{also}: "
            f"{_first_line(missing[mod])}; every correct program importing it would be judged runtime_error — "
            + _MODULE_FIX.format(mod=mod))


class GuardedJudge:
    """``judge`` with its verdicts counted; every other attribute is the wrapped judge's.

    Counts the results of :meth:`judge`, :meth:`judge_many` and :meth:`run_code` (thread-safe). ``max_share``: the
    ceiling that :meth:`check_sandbox_errors` enforces (fraction 0–1); ``where``: the judge's location for
    messages; ``window_steps``: ``judge.sandbox_error_window_steps``, read by the training reward that judges through
    this judge (:class:`rlvr.reward.trl.CodeReward`: the same ceiling per training step over that many steps)."""

    def __init__(self, judge: Any, max_share: float = 0.05, where: str | None = None,
                 window_steps: int = 0) -> None:
        self._inner = judge
        self.max_share = max_share
        self.window_steps = window_steps
        self.where = where or judge_location()
        self.counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self._examples: list[str] = []
        self._calls = [0, 0]  # call_outputs runs, of which failed (SandboxError): the embedded judge's requests

    def __getattr__(self, name: str) -> Any:
        if name == "_inner" or name.startswith("__"):  # unpickling / copying: no wrapped judge yet
            raise AttributeError(name)
        return getattr(self._inner, name)

    @property
    def inner(self) -> Any:
        """The wrapped judge."""
        return self._inner

    def _record(self, results: Sequence[Any]) -> None:
        with self._count_lock:
            for r in results:
                verdict = getattr(r, "verdict", None)
                if verdict is None:
                    continue
                self.counts[verdict] += 1
                if verdict == "sandbox_error" and len(self._examples) < 1:
                    self._examples.append(_first_line(getattr(r, "message", "")))

    def judge(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped judge's ``judge``, counted."""
        result = self._inner.judge(*args, **kwargs)
        self._record([result])
        return result

    def judge_many(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped judge's ``judge_many``, counted."""
        results = self._inner.judge_many(*args, **kwargs)
        self._record(results)
        return results

    def run_code(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped judge's ``run_code``, counted (its ``RunResult`` carries a verdict)."""
        result = self._inner.run_code(*args, **kwargs)
        self._record([result])
        return result

    def call_outputs(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped judge's ``call_outputs``, counted as one request (failed when it raises
        :class:`~rlvr.judge.sandbox.SandboxError`, the infrastructure's failure)."""
        from rlvr.judge.sandbox import SandboxError

        try:
            out = self._inner.call_outputs(*args, **kwargs)
        except SandboxError as exc:
            with self._count_lock:
                self._calls[0] += 1
                self._calls[1] += 1
                if not self._examples:
                    self._examples.append(_first_line(str(exc)))
            raise
        with self._count_lock:
            self._calls[0] += 1
        return out

    def request_counts(self) -> tuple[int, int]:
        """``(requests, failed)`` that decide the share (module docstring): the wrapped judge's own per-request count
        when it keeps one (a remote judge), else judged submissions plus ``call_outputs`` runs, and of those the
        ``sandbox_error`` verdicts plus the runs that raised ``SandboxError``."""
        own = getattr(self._inner, "request_counts", None)
        if callable(own):
            sent, failed = own()
            return int(sent), int(failed)
        with self._count_lock:
            return sum(self.counts.values()) + self._calls[0], self.counts["sandbox_error"] + self._calls[1]

    def close(self) -> None:
        """Close the wrapped judge, if it can be closed."""
        close = getattr(self._inner, "close", None)
        if callable(close):
            close()

    def sandbox_error_share(self) -> float:
        """Fraction of the judge requests that failed (:meth:`request_counts`; 0.0 when none were made)."""
        sent, failed = self.request_counts()
        return failed / sent if sent else 0.0

    def check_verdicts(self, verdicts: Iterable[str], what: str) -> None:
        """Raise :class:`SandboxErrorShareExceeded` when too much of ``what`` (e.g. the rows of one dataset, resumed
        ones included) failed for the infrastructure: with a judge that counts its requests (remote), the share of
        failed requests so far (:meth:`check_sandbox_errors`; a row's ``sandbox_error`` verdict may stand for one
        failed request among many, or for none of this run); otherwise the ``sandbox_error`` share of ``verdicts``
        (the embedded judge: one verdict, one request). ``what`` names them in the message."""
        if callable(getattr(self._inner, "request_counts", None)):
            try:
                self.check_sandbox_errors()
            except SandboxErrorShareExceeded as exc:
                raise SandboxErrorShareExceeded(f"{what}: {exc}") from None
            return
        counts = Counter(verdicts)
        n = sum(counts.values())
        share = counts["sandbox_error"] / n if n else 0.0
        if share > self.max_share:
            raise SandboxErrorShareExceeded(
                f"{what}: {counts['sandbox_error']} of {n} verdicts ({share:.1%}) were sandbox_error, above "
                f"judge.max_sandbox_error_share={self.max_share:g}: the judge ({self.where}) failed, not the "
                f"programs; no metrics written")

    def check_sandbox_errors(self) -> None:
        """Raise :class:`SandboxErrorShareExceeded` when the share of failed judge requests so far
        (:meth:`request_counts`) is above ``max_share``; the message is one line naming the count, the share, the
        judge and one error."""
        sent, failed = self.request_counts()
        share = failed / sent if sent else 0.0
        if share > self.max_share:
            example = f"; first error: {self._examples[0]}" if self._examples and self._examples[0] else ""
            raise SandboxErrorShareExceeded(
                f"{failed} of {sent} judge requests ({share:.1%}) failed for the infrastructure (sandbox_error, "
                f"after per-request retries), above judge.max_sandbox_error_share={self.max_share:g}: the judge "
                f"({self.where}) failed, not the programs; no metrics written{example}")


def load_judge_params(params_path: str | Path = "params.yaml") -> JudgeParams:
    """Section ``judge`` of ``params_path``, or the defaults when the file has no such section. Raises
    :class:`rlvr.config.ConfigError` when the section is invalid."""
    from rlvr.config import load_params, load_section

    if "judge" not in load_params(params_path):
        return JudgeParams()
    return load_section("judge", JudgeParams, params_path)


@contextlib.contextmanager
def open_judge(params_path: str | Path = "params.yaml",
               factory: Callable[[], Any] | None = None) -> Iterator[GuardedJudge]:
    """A stage's judge: ``factory()`` (default :func:`rlvr.judge.client.get_judge`) checked by :func:`preflight`
    (unless ``judge.preflight`` is false), yielded as a :class:`GuardedJudge`; when the ``with`` body ends without an
    error, :meth:`GuardedJudge.check_sandbox_errors` runs, so a stage that writes its metrics after the block writes
    none when the share is exceeded. The judge is closed on exit (errors while closing are ignored).

    Raises :class:`JudgeUnavailable`, :class:`SandboxErrorShareExceeded`, :class:`rlvr.config.ConfigError`."""
    cfg = load_judge_params(params_path)
    if factory is None:
        from rlvr.judge.client import get_judge as factory
    judge = factory()
    guarded = GuardedJudge(judge, cfg.max_sandbox_error_share, window_steps=cfg.sandbox_error_window_steps)
    try:
        if cfg.preflight:
            preflight(judge, guarded.where)
        yield guarded
        guarded.check_sandbox_errors()
    finally:
        with contextlib.suppress(Exception):
            guarded.close()
