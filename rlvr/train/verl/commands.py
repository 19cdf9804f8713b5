"""The verl trainer's command: its argv (GRPO: ``python -m verl.trainer.main_ppo``; SFT: ``torchrun`` over
``verl.trainer.sft_trainer``), the files that record it in the run folder, and running it.

:func:`launch` runs ``[*command, *overrides]`` (the overrides: :mod:`rlvr.train.verl.overrides`) through an injectable
runner (tests pass a fake; nothing here needs a GPU until it runs). The default, :func:`run_teed`, copies verl's
stderr through and turns a run the judge step guard stopped into :class:`rlvr.reward.step_guard.JudgeDied` with the
guard's own message, instead of a bare exit status.
"""

from __future__ import annotations

import codecs
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.config import ConfigError
from rlvr.io import atomic_write_text
from rlvr.train.verl.params import VerlProfile

__all__ = ["Runner", "grpo_command", "launch", "run_teed", "sft_command", "write_overrides"]

Runner = Callable[..., Any]


_JUDGE_DIED = re.compile(r"rlvr\.reward\.step_guard\.JudgeDied: (.+)")


def run_teed(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """``subprocess.run(argv, env=env, cwd=cwd, check=check)`` whose child's stderr is copied to this process's
    stderr as it comes (a progress bar's carriage-return redraws included; stdout is inherited untouched) and scanned
    for the traceback line ``rlvr.reward.step_guard.JudgeDied: <message>``, which Ray prints when the step guard
    stopped verl's trainer (:mod:`rlvr.reward.step_guard`; the estimator raises it in verl's driver actor).

    Returns the ``CompletedProcess`` (``stdout``/``stderr`` ``None``). With ``check`` and a non-zero exit status it
    raises :class:`rlvr.reward.step_guard.JudgeDied` with the last such message when one was seen (the cause is the
    ``CalledProcessError``), so a stage stopped by a dead judge ends on the guard's one-line reason rather than on
    the trainer's exit status; otherwise ``subprocess.CalledProcessError``. It returns when the child's stderr closes;
    an exception while copying (``KeyboardInterrupt`` included) kills the child first."""
    died: str | None = None

    def scan(line: bytes) -> None:
        nonlocal died
        if b"JudgeDied" in line and (m := _JUDGE_DIED.search(line.decode("utf-8", "replace"))):
            died = m.group(1).strip()

    with subprocess.Popen(list(argv), env=None if env is None else dict(env), cwd=None if cwd is None else str(cwd),
                          stderr=subprocess.PIPE) as proc:
        assert proc.stderr is not None
        err_out = sys.stderr
        out = getattr(err_out, "buffer", None)
        text = codecs.getincrementaldecoder("utf-8")("replace")  # for a stderr without bytes (a test's capture)
        pending = b""
        try:
            # copied as it comes, not per line: progress bars redraw with \r and end their line only when done
            while chunk := proc.stderr.read1(1 << 16):  # type: ignore[attr-defined]
                if out is not None:
                    out.write(chunk)
                    out.flush()
                elif err_out is not None:
                    err_out.write(text.decode(chunk))
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    scan(line)
                pending = pending[-(1 << 16):]  # a line is scanned by its last 64 kB at most
            scan(pending)
        except BaseException:  # Ctrl-C or an error here: stop the trainer, as subprocess.run does
            proc.kill()
            raise
    if check and proc.returncode != 0:
        err = subprocess.CalledProcessError(proc.returncode, list(argv))
        if died is not None:
            from rlvr.reward.step_guard import JudgeDied

            raise JudgeDied(died) from err
        raise err
    return subprocess.CompletedProcess(list(argv), proc.returncode)



def launch(
    cmd: Sequence[str],
    overrides: Sequence[str],
    env: Mapping[str, str] | None = None,
    runner: Runner = run_teed,
    cwd: str | Path | None = None,
    unset: Sequence[str] = (),
) -> Any:
    """Run ``[*cmd, *overrides]`` with ``env`` laid over ``os.environ`` minus the names in ``unset``; returns what
    ``runner`` returns.

    ``runner`` is called as ``runner(argv, env=…, cwd=…, check=True)`` (``subprocess.run``'s signature), so a
    failing trainer raises ``subprocess.CalledProcessError`` with its exit status (:func:`run_teed`, the default:
    :class:`rlvr.reward.step_guard.JudgeDied` when the judge step guard stopped it)."""
    full_env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    return runner([*cmd, *overrides], env=full_env, cwd=None if cwd is None else str(cwd), check=True)


def grpo_command(python: str = "python") -> list[str]:
    """argv prefix of the GRPO trainer (overrides follow): ``python -m verl.trainer.main_ppo``."""
    return [python, "-m", "verl.trainer.main_ppo"]


def sft_command(profile: VerlProfile, python: str = "python", rdzv_endpoint: str | None = None) -> list[str]:
    """argv prefix of the SFT trainer: ``torchrun --standalone --nnodes=1 --nproc_per_node=<n> -m
    rlvr.train.verl.compat verl.trainer.sft_trainer`` on one node (each rank runs verl's SFT trainer after
    :func:`rlvr.train.verl.compat.patch_verl`); with ``nnodes > 1`` a c10d rendezvous at ``rdzv_endpoint``
    (``host:port``, required then; run the same command on every node).

    Raises ``ConfigError`` when ``nnodes > 1`` and no ``rdzv_endpoint`` is given."""
    cmd = [python, "-m", "torch.distributed.run"]
    if profile.nnodes == 1:
        cmd += ["--standalone", "--nnodes=1"]
    else:
        if not rdzv_endpoint:
            raise ConfigError("verl SFT on several nodes needs a rendezvous endpoint (host:port)")
        cmd += [f"--nnodes={profile.nnodes}", "--rdzv_backend=c10d", f"--rdzv_endpoint={rdzv_endpoint}"]
    return [*cmd, f"--nproc_per_node={profile.n_gpus_per_node}", "-m", "rlvr.train.verl.compat",
            "verl.trainer.sft_trainer"]


def write_overrides(out_dir: str | Path, cmd: list[str], overrides: list[str]) -> tuple[Path, Path]:
    """Write ``<out_dir>/verl_overrides.txt`` (one override per line) and ``<out_dir>/verl_command.sh`` (the exact
    shell command line, each argument quoted with :func:`shlex.quote`), atomically. Returns both paths."""
    out = Path(out_dir)
    ov = out / "verl_overrides.txt"
    sh = out / "verl_command.sh"
    atomic_write_text(ov, "\n".join(overrides) + "\n")
    line = " \\\n    ".join(shlex.quote(x) for x in [*cmd, *overrides])
    head = "#!/usr/bin/env bash\n# generated by rlvr.train.verl; verl 0.9.1\nset -euo pipefail\n"
    atomic_write_text(sh, head + line + "\n")
    return ov, sh
