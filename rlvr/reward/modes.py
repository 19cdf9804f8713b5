"""Reward modes: how a judge verdict becomes a scalar training reward.

Three modes, chosen by the top-level ``params.yaml`` key ``reward`` (so ``dvc exp run -S reward=sparse`` works); the
shaping coefficients live in the ``reward_shaping`` section (:class:`RewardShaping`).

``sparse`` — ``r = 1[accepted]``
    The binary outcome reward of rule-based RLVR (DeepSeek-R1, Guo et al. 2025; DeepCoder, Luo et al. 2025, who report
    that partial credit invites the policy to special-case the easy tests). It is the quantity evaluated (accepted@1).

``dense`` — ``r = pass_ratio = passed / total``
    Fraction of hidden tests passed: verl's own code reward (``verl.utils.reward_score.prime_code.compute_score(...,
    continuous=True)``, used by ``default_compute_score`` for codecontests/apps/taco) and the PRIME/Eurus code reward.
    Gives signal on hard problems where a GRPO group would otherwise be all-zero (zero advantage, no gradient).

``shaped`` — ``r = pass_ratio − p_fmt·1[no code] − p_syn·1[syntax_error] − p_to·1[a test timed out] − p_len·L(|y|)``
    Dense plus penalties in the spirit of CodeRL's verdict-graded return (Le et al. 2022: −1 compile error, −0.6
    runtime error, −0.3 failed test, +1 pass), so that an unparsable answer scores below a wrong but running one.
    ``L`` is DAPO's soft overlong punishment (Yu et al. 2025, eq. 13) with ``L_max = max_length_tokens`` and
    ``L_buf = length_buffer_tokens``::

        L(|y|) = 0                                    if |y| <= L_max - L_buf
               = (|y| - (L_max - L_buf)) / L_buf      if L_max - L_buf < |y| <= L_max
               = 1                                    if |y| > L_max

    ``L`` applies only when the completion's token count is known (TRL passes ``completion_ids``; under verl the
    launcher's reward managers, :mod:`rlvr.reward.verl_manager`, pass the response's token count in
    ``extra_info.response_length``; verl's own managers pass none).

``sandbox_error`` (the judge's infrastructure failed) is never the policy's fault: with ``sandbox_error: exclude`` the
score is ``None`` — TRL turns ``None`` into NaN and leaves that completion out of the group baseline with advantage 0
(``GRPOTrainer._generate_and_score_completions``, TRL 1.16). verl needs a float: :func:`verl_dict` writes ``0.0``
and flags the sample with ``status="sandbox_error"`` / ``valid=False`` in ``reward_extra_info``; the launcher's runs
pass ``mask_excluded`` to :func:`rlvr.reward.verl.compute_score`, which then scores it NaN, and train with the
``rlvr_grpo`` estimator (:mod:`rlvr.train.verl.advantage`), which does what TRL does. With ``sandbox_error: zero``
it scores 0 in both engines (still flagged).

Why a submission cannot reach that treatment (an escape from a negative reward if it could): ``sandbox_error`` comes
only from infrastructure —

* the judge: any death of the sandbox or harness while a submission runs (killed harness, exhausted memory, a broken
  protocol) is the program's ``runtime_error`` (the judge's own accounting, :mod:`rlvr.judge.core`); ``sandbox_error``
  is left for a sandbox that fails to start, a checker that fails, a test without an expected value;
* the judge server: a judge exception while scoring a submission's output is ``wrong_answer``; only ``SandboxError`` /
  ``RuntimeError`` / ``OSError`` of the judge itself give ``500 sandbox_error`` (:mod:`rlvr.judge.api.admission`);
* the remote client: unreachable server, 502/503/504 after retries, an answer that is not JSON or belongs to another
  request (:mod:`rlvr.judge.transport`);
* the reward layer: infrastructure exceptions after retries, and a request past ``max(request_timeout_s, tests ×
  (time limit + 2 s) + 60 s)`` — a bound a program within its time limits never reaches; any other exception on one
  submission scores it ``wrong_answer``, a completion the extractor crashes on scores as no code, and completion text
  is made valid Unicode before it is judged (:mod:`rlvr.reward.scoring`, :mod:`rlvr.reward.extract`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field

from rlvr.config import ConfigError, Section, load_params
from rlvr.judge.verdict import JudgeResult, Verdict

__all__ = [
    "REWARD_MODES",
    "RewardConfig",
    "RewardMode",
    "RewardOutcome",
    "RewardShaping",
    "load_reward_config",
    "outcome_from",
    "overlong_fraction",
    "score",
]

RewardMode = Literal["sparse", "dense", "shaped"]
REWARD_MODES: tuple[str, ...] = get_args(RewardMode)


class RewardShaping(Section):
    """``params.yaml`` section ``reward_shaping``: coefficients of the ``shaped`` mode (all penalties ≥ 0 and
    subtracted) and the sandbox-error policy of every mode.

    Fields:
        no_code_penalty: subtracted when the completion holds no extractable program (``p_fmt``).
        syntax_error_penalty: subtracted when the program does not compile (``p_syn``).
        timeout_penalty: subtracted when at least one test hit the time limit (``p_to``).
        length_penalty: weight of DAPO's overlong term (``p_len``); 0 disables it.
        max_length_tokens / length_buffer_tokens: DAPO's ``L_max`` / ``L_buf`` (tokens).
        sandbox_error: ``exclude`` (score ``None``, not trained on) or ``zero`` (score 0), both flagged.
        max_timeouts: the training judge's timeout rule, every mode: after this many timed-out tests of one
            submission the rest are not run and count as timeouts (0 = run every test;
            :func:`rlvr.reward.timeouts.reward_judge`). Default 3, the judge's own (:class:`rlvr.judge.Judge`).
            ``accepted`` (``sparse``) never changes with it; ``pass_ratio`` (``dense``, ``shaped``) of a submission
            that times out counts the tests after the N-th timeout as failed. Evaluation keeps the judge's default.
    """

    no_code_penalty: float = Field(0.5, ge=0)
    syntax_error_penalty: float = Field(0.5, ge=0)
    timeout_penalty: float = Field(0.2, ge=0)
    length_penalty: float = Field(0.0, ge=0)
    max_length_tokens: int = Field(1024, gt=0)
    length_buffer_tokens: int = Field(256, gt=0)
    sandbox_error: Literal["exclude", "zero"] = "exclude"
    max_timeouts: int = Field(3, ge=0, strict=True)


class RewardConfig(Section):
    """Resolved reward configuration: ``mode`` (``params.yaml`` top-level ``reward``) and ``shaping``
    (``params.yaml`` section ``reward_shaping``)."""

    mode: RewardMode = "dense"
    shaping: RewardShaping = Field(default_factory=RewardShaping)


def load_reward_config(path: str | Path = "params.yaml") -> RewardConfig:
    """Read ``reward`` (a scalar mode name) and the optional ``reward_shaping`` section of ``params.yaml``.

    Raises :class:`rlvr.config.ConfigError` naming the file and key when ``reward`` is missing or not one of
    :data:`REWARD_MODES`, or a ``reward_shaping`` field is invalid/unknown."""
    params = load_params(path)
    if "reward" not in params:
        raise ConfigError(f"{path}: key 'reward' missing (one of {', '.join(REWARD_MODES)})")
    mode = params["reward"]
    if mode not in REWARD_MODES:
        raise ConfigError(f"{path}: reward: {mode!r} is not one of {', '.join(REWARD_MODES)}")
    raw = params.get("reward_shaping") or {}
    try:
        return RewardConfig(mode=mode, shaping=RewardShaping.model_validate(raw))
    except Exception as exc:  # pydantic ValidationError → ConfigError naming the section
        raise ConfigError(f"{path}: reward_shaping: {exc}") from exc


def overlong_fraction(n_tokens: int, max_length_tokens: int, length_buffer_tokens: int) -> float:
    """DAPO's soft overlong term ``L(|y|)`` in [0, 1] (Yu et al. 2025, eq. 13; sign flipped, the caller subtracts).

    >>> overlong_fraction(700, 1024, 256), overlong_fraction(896, 1024, 256), overlong_fraction(2000, 1024, 256)
    (0.0, 0.5, 1.0)
    """
    start = max_length_tokens - length_buffer_tokens
    if n_tokens <= start:
        return 0.0
    if n_tokens > max_length_tokens:
        return 1.0
    return (n_tokens - start) / length_buffer_tokens


@dataclass(frozen=True)
class RewardOutcome:
    """One scored completion.

    ``score``: the reward (``None`` = not scorable, sandbox error under ``exclude``); ``acc``: accepted by the judge;
    ``pass_ratio`` in [0, 1]; ``status``: the judge verdict (``syntax_error`` when no code could be extracted, with
    ``has_code=False``); ``n_tests``: hidden tests of the problem; ``judge_s``: judge wall seconds (0 when not run);
    ``timed_out``: some test hit its time limit; ``valid``: False for sandbox errors (never the policy's fault)."""

    score: float | None
    acc: bool
    pass_ratio: float
    status: Verdict
    n_tests: int
    judge_s: float
    has_code: bool = True
    timed_out: bool = False
    valid: bool = True

    def verl_dict(self) -> dict[str, Any]:
        """verl's ``compute_score`` return value: ``score`` (float, 0.0 for an excluded sandbox error) plus the extra
        keys, which verl's reward managers collect into ``reward_extra_info`` (one list per key)."""
        d = asdict(self)
        d["score"] = 0.0 if self.score is None else float(self.score)
        return d


def score(
    mode: RewardMode,
    shaping: RewardShaping,
    *,
    accepted: bool,
    pass_ratio: float,
    status: Verdict,
    has_code: bool = True,
    timed_out: bool = False,
    n_tokens: int | None = None,
) -> float | None:
    """Apply the formula of ``mode`` (see the module docstring) to one judged completion.

    Returns ``None`` for ``status == "sandbox_error"`` under ``shaping.sandbox_error == "exclude"``, else a float.
    ``n_tokens`` (completion length in tokens) enables the shaped length term; ``None`` skips it.

    >>> s = RewardShaping()
    >>> score("sparse", s, accepted=False, pass_ratio=0.9, status="wrong_answer")
    0.0
    >>> score("dense", s, accepted=False, pass_ratio=0.9, status="wrong_answer")
    0.9
    >>> score("shaped", s, accepted=False, pass_ratio=0.0, status="syntax_error")
    -0.5
    """
    if status == "sandbox_error":
        return None if shaping.sandbox_error == "exclude" else 0.0
    if mode == "sparse":
        return 1.0 if accepted else 0.0
    if mode == "dense":
        return float(pass_ratio)
    if mode != "shaped":
        raise ValueError(f"reward mode {mode!r} is not one of {', '.join(REWARD_MODES)}")
    r = float(pass_ratio)
    if not has_code:
        r -= shaping.no_code_penalty
    elif status == "syntax_error":
        r -= shaping.syntax_error_penalty
    if timed_out:
        r -= shaping.timeout_penalty
    if shaping.length_penalty and n_tokens is not None:
        r -= shaping.length_penalty * overlong_fraction(
            n_tokens, shaping.max_length_tokens, shaping.length_buffer_tokens
        )
    return r


def outcome_from(
    config: RewardConfig,
    result: JudgeResult | None,
    *,
    n_tests: int,
    n_tokens: int | None = None,
) -> RewardOutcome:
    """Build the :class:`RewardOutcome` of one completion from its judge result.

    ``result=None`` means no program could be extracted (nothing was run): status ``syntax_error``, ``has_code=False``.
    ``n_tests`` is the problem's test count (reported even when nothing ran)."""
    if result is None:
        s = score(
            config.mode,
            config.shaping,
            accepted=False,
            pass_ratio=0.0,
            status="syntax_error",
            has_code=False,
            n_tokens=n_tokens,
        )
        return RewardOutcome(
            score=s, acc=False, pass_ratio=0.0, status="syntax_error", n_tests=n_tests, judge_s=0.0, has_code=False
        )
    timed_out = result.verdict == "timeout" or any(t.verdict == "timeout" for t in result.tests)
    s = score(
        config.mode,
        config.shaping,
        accepted=result.accepted,
        pass_ratio=result.pass_ratio,
        status=result.verdict,
        timed_out=timed_out,
        n_tokens=n_tokens,
    )
    return RewardOutcome(
        score=s,
        acc=result.accepted,
        pass_ratio=float(result.pass_ratio),
        status=result.verdict,
        n_tests=result.total or n_tests,
        judge_s=float(result.judge_s),
        timed_out=timed_out,
        valid=result.verdict != "sandbox_error",
    )
