"""``rlvr check``: everything a run needs, checked in seconds before it starts (``make repro`` runs it first).

1. **params**: every top-level key of ``params.yaml`` is a known section (:data:`rlvr.config.SECTION_NAMES`) and
   validates against its schema (:data:`SECTIONS`; the pydantic models the stages read, ``extra="forbid"``);
2. **datasets**: every ``governance.datasets`` entry is a bundled dataset (or loadable from the Hub with
   ``governance.source: hub``), and every dataset named by another section (``baseline``, ``eval``, ``repair``:
   ``<dataset>``; ``train``, ``manifests``, ``repair.train``: ``<dataset>/<split>``) is one governance writes;
3. **model**: ``model.name`` is ``tiny``, a local model folder, or a Hub id the Hub knows (looked up when it is
   reachable; :func:`rlvr.model.params.check_model_name`); under ``engine: verl`` ``verl.model`` likewise;
4. **judge**: the judge works (:func:`rlvr.judge.preflight.preflight`: bubblewrap present and a trivial program
   accepted in the embedded sandbox, or the server at ``RLVR_SANDBOX_URL`` reachable and judging; its sandbox imports
   :data:`rlvr.judge.preflight.SANDBOX_MODULES`, e.g. ``sortedcontainers``);
5. **GPUs**: present (``nvidia-smi -L``) when ``engine: verl`` or a ``vllm`` backend or a ``cuda`` device needs them.

Every problem is one line, ``file: key: problem`` with the nearest valid key or name as a suggestion
(:func:`difflib.get_close_matches`); what could not be checked (the Hub unreachable) is a ``note:`` line. Exit status
1 when there is a problem. No traceback unless ``RLVR_DEBUG`` is set.

    rlvr check [--params params.yaml] [--no-judge]
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

__all__ = ["SECTIONS", "CheckReport", "check_datasets", "check_gpus", "check_judge", "check_model", "check_params",
           "main", "run_checks"]

#: Schema of each ``params.yaml`` section: ``"module:Model"`` (imported only when checked). The scalar keys
#: ``engine``, ``reward`` and ``seeds`` are checked by :func:`check_params` itself.
SECTIONS: dict[str, str] = {
    "governance": "rlvr.data.governance:GovernanceParams",
    "manifests": "rlvr.data.manifests:ManifestsParams",
    "synthetic": "rlvr.data.synthetic:SyntheticParams",
    "judge_check": "rlvr.judge.check:JudgeCheckParams",
    "judge": "rlvr.judge.preflight:JudgeParams",
    "reward_shaping": "rlvr.reward.modes:RewardShaping",
    "model": "rlvr.model.params:ModelParams",
    "baseline": "rlvr.eval.baseline:BaselineParams",
    "report": "rlvr.report.params:ReportParams",
    "train": "rlvr.train.local.common:TrainCommon",
    "sft": "rlvr.train.local.sft:SFTParams",
    "dpo": "rlvr.train.local.dpo:DPOParams",
    "grpo": "rlvr.train.local.grpo:GRPOParams",
    "verl": "rlvr.train.verl.params:VerlParams",
    "repair": "rlvr.repair.eval:RepairParams",
    "eval": "rlvr.eval.final_params:EvalParams",
}
SCALARS = ("engine", "reward", "seeds", "profile")  # profile: validated by load_params (rlvr.config.profiles)


@dataclass
class CheckReport:
    """What :func:`run_checks` found: ``errors`` (one line each, ``file: key: problem``), ``notes`` (what could not be
    checked), ``passed`` (one short line per check that passed)."""

    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there is no error."""
        return not self.errors


def _model(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _one_line(exc: BaseException) -> str:
    return "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip()) or type(exc).__name__


def check_params(path: str | Path) -> tuple[list[str], dict[str, Any]]:
    """``(errors, sections)``: every top-level key known and valid (module doc, 1). ``sections``: the validated
    section models by name (``engine``/``reward``/``seeds`` as plain values), for the other checks."""
    from pydantic import ValidationError

    from rlvr.config import SECTION_NAMES, ConfigError, load_params, unknown_sections, validation_messages

    try:
        raw = load_params(path)
    except ConfigError as exc:
        return [str(exc)], {}
    errors = unknown_sections(path)
    ok: dict[str, Any] = {}
    for name in SECTION_NAMES:
        if name in SCALARS:
            continue
        if name not in raw:
            if name not in ("reward_shaping", "judge", "synthetic"):  # the three have defaults everywhere
                errors.append(f"{path}: {name}: section missing")
            continue
        try:
            ok[name] = _model(SECTIONS[name]).model_validate(raw[name] if raw[name] is not None else {})
        except ValidationError as exc:
            errors += [f"{path}: {m}" for m in validation_messages(name, _model(SECTIONS[name]), exc)]
        except (ValueError, OSError) as exc:  # a validator reading a file (verl.profile)
            errors.append(f"{path}: {name}: {_one_line(exc)}")
    from rlvr.reward.modes import REWARD_MODES
    from rlvr.train.engine import ENGINES

    engine = raw.get("engine", "local")
    if engine not in ENGINES:
        errors.append(f"{path}: engine: {engine!r} is not one of {', '.join(ENGINES)}")
    ok["engine"] = engine
    reward = raw.get("reward")
    if reward not in REWARD_MODES:
        errors.append(f"{path}: reward: {reward!r} is not one of {', '.join(REWARD_MODES)}")
    seeds = raw.get("seeds", [1])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool)
                                                            for s in seeds):
        errors.append(f"{path}: seeds: expected a non-empty list of integers, got {seeds!r}")
    return errors, ok


def governed_slugs(sections: dict[str, Any]) -> set[str] | None:
    """The dataset files governance writes (``<slug>.jsonl``), ``None`` without a valid ``governance`` section."""
    from rlvr.data.governance import dataset_slug

    gov = sections.get("governance")
    if gov is None:
        return None
    slugs = {dataset_slug(d.name) for d in gov.datasets}
    return slugs | {"synthetic"} if gov.include_synthetic else slugs


def _refs(sections: dict[str, Any]) -> Iterable[tuple[str, str, bool]]:
    """``(key, dataset name, is a "<dataset>/<split>" reference)`` of every dataset named outside governance."""
    for name in ("baseline", "eval", "repair"):
        cfg = sections.get(name)
        for i, d in enumerate(getattr(cfg, "datasets", None) or []):
            yield f"{name}.datasets[{i}].name", d.name, False
    for key in ("train_sets", "eval_sets"):
        for i, ref in enumerate(getattr(sections.get("train"), key, None) or []):
            yield f"train.{key}[{i}]", ref, True
    for key in ("verl_train", "verl_val", "sft_sets", "dpo_sets"):
        for i, ref in enumerate(getattr(sections.get("manifests"), key, None) or []):
            yield f"manifests.{key}[{i}]", ref, True
    repair = sections.get("repair")
    for i, ref in enumerate(getattr(getattr(repair, "train", None), "train_sets", None) or []):
        yield f"repair.train.train_sets[{i}]", ref, True


def check_datasets(path: str | Path, sections: dict[str, Any]) -> list[str]:
    """Errors about dataset names (module doc, 2); nothing is loaded (bundled names are looked up in
    :data:`rlvr.data.bundled.BUNDLED`)."""
    from rlvr.config import did_you_mean
    from rlvr.data.bundled import BUNDLED, resolve
    from rlvr.data.errors import DataError

    errors: list[str] = []
    gov = sections.get("governance")
    if gov is not None and gov.source == "bundled":
        names = sorted({k.split(":")[0] for k in BUNDLED} | set(BUNDLED))
        for i, d in enumerate(gov.datasets):
            try:
                resolve(d.name)
            except DataError:
                errors.append(f"{path}: governance.datasets[{i}].name: unknown bundled dataset {d.name!r}"
                              f"{did_you_mean(d.name, names)}")
    slugs = governed_slugs(sections)
    if slugs is None:
        return errors
    for key, ref, is_split in _refs(sections):
        dataset = ref.partition("/")[0] if is_split else ref
        if dataset == "synthetic" and key.startswith("repair"):
            continue  # the repair stage generates the synthetic family itself when governance did not write it
        if dataset not in slugs:
            errors.append(f"{path}: {key}: dataset {dataset!r} is not written by governance (governance.datasets"
                          f"{', include_synthetic' if dataset == 'synthetic' else ''}){did_you_mean(dataset, slugs)}")
        elif is_split and not ref.partition("/")[2]:
            errors.append(f"{path}: {key}: {ref!r} names no split (expected '<dataset>/<split>')")
    train, manifests = sections.get("train"), sections.get("manifests")
    if train is not None and manifests is not None:
        from rlvr.config import ConfigError
        from rlvr.train.engine import check_rl_sets

        try:  # under verl, GRPO reads manifests.verl_train only
            check_rl_sets(sections.get("engine", "local"), train.train_sets, manifests.verl_train, path)
        except ConfigError as exc:
            errors.append(str(exc))
    return errors


def check_model(path: str | Path, sections: dict[str, Any],
                lookup: Callable[[str], bool | None] | None = None) -> tuple[list[str], list[str]]:
    """``(errors, notes)`` about ``model.name`` and, under ``engine: verl``, ``verl.model`` (module doc, 3)."""
    from rlvr.model.params import check_model_name

    errors: list[str] = []
    notes: list[str] = []
    targets = []
    if sections.get("model") is not None:
        targets.append(("model.name", sections["model"].name))
    verl = sections.get("verl")
    if sections.get("engine") == "verl" and verl is not None and getattr(verl, "model", None):
        targets.append(("verl.model", verl.model))
    for key, name in targets:
        error, note = check_model_name(name, lookup)
        if error:
            errors.append(f"{path}: {key}: {error}")
        if note:
            notes.append(note)
    return errors, notes


def check_judge(factory: Callable[[], Any] | None = None) -> list[str]:
    """Errors of the judge (module doc, 4): ``RLVR_BWRAP``/``bwrap`` missing for the embedded judge, else
    :func:`rlvr.judge.preflight.preflight`'s sentence. The judge is closed afterwards."""
    from rlvr.config import RuntimeSettings
    from rlvr.judge.preflight import JudgeUnavailable, judge_location, preflight

    settings = RuntimeSettings()
    if not settings.sandbox_url.strip() and factory is None:
        bwrap = settings.bwrap or "bwrap"
        if shutil.which(bwrap) is None:
            return [f"the judge (embedded) does not work: bubblewrap ({bwrap}) not found: install it (apt-get install "
                    "bubblewrap, or make system) or set RLVR_SANDBOX_URL to a judge server"]
    if factory is None:
        from rlvr.judge.client import get_judge as factory
    try:
        judge = factory()
    except Exception as exc:
        return [f"the judge ({judge_location()}) does not work: {type(exc).__name__}: {_one_line(exc)}"]
    try:
        preflight(judge)
    except JudgeUnavailable as exc:
        return [str(exc)]
    finally:
        close = getattr(judge, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # closing is best effort: the check's answer is what matters
                pass
    return []


def gpus_needed(sections: dict[str, Any]) -> list[str]:
    """Why the configuration needs GPUs (``engine: verl``, a ``vllm`` backend, a ``cuda`` device); empty if not."""
    why = ["engine: verl"] if sections.get("engine") == "verl" else []
    for name in ("baseline", "eval", "repair"):
        cfg = sections.get(name)
        if getattr(cfg, "backend", None) == "vllm":
            why.append(f"{name}.backend: vllm")
        if str(getattr(cfg, "device", "")).startswith("cuda"):
            why.append(f"{name}.device: {cfg.device}")
    return why


def count_gpus() -> int:
    """NVIDIA GPUs listed by ``nvidia-smi -L`` (0 when it is missing or fails; 10 s at most)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU ")) if out.returncode == 0 else 0


def check_gpus(path: str | Path, sections: dict[str, Any], counter: Callable[[], int] = count_gpus) -> list[str]:
    """Errors when GPUs are needed (:func:`gpus_needed`) and ``counter()`` finds none (module doc, 5)."""
    why = gpus_needed(sections)
    if why and counter() == 0:
        return [f"{path}: {why[0].split(':')[0]}: needs GPUs ({', '.join(why)}) but nvidia-smi lists none"]
    return []


def run_checks(path: str | Path = "params.yaml", judge: bool = True,
               lookup: Callable[[str], bool | None] | None = None,
               judge_factory: Callable[[], Any] | None = None,
               gpu_counter: Callable[[], int] = count_gpus) -> CheckReport:
    """Run every check of the module doc on ``path``; ``judge=False`` skips the judge; ``lookup`` (Hub),
    ``judge_factory`` and ``gpu_counter`` replace the real ones (tests)."""
    report = CheckReport()
    errors, sections = check_params(path)
    report.errors += errors
    if not errors:
        report.passed.append("params: every section valid")
    errors = check_datasets(path, sections)
    report.errors += errors
    if not errors:
        report.passed.append("datasets: every name known")
    errors, notes = check_model(path, sections, lookup)
    report.errors += errors
    report.notes += notes
    if not errors and "model" in sections:
        report.passed.append(f"model: {sections['model'].name}")
    if judge:
        from rlvr.judge.preflight import judge_location

        errors = check_judge(judge_factory)
        report.errors += errors
        if not errors:
            report.passed.append(f"judge: {judge_location()} works")
    errors = check_gpus(path, sections, gpu_counter)
    report.errors += errors
    if not errors:
        why = gpus_needed(sections)
        report.passed.append(f"GPUs: {gpu_counter()} present" if why else "GPUs: not needed")
    return report


@click.command("check")
@click.option("--params", "params_path", default="params.yaml", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="the params file")
@click.option("--judge/--no-judge", default=True, show_default=True, help="run the judge's preflight")
def main(params_path: Path, judge: bool) -> None:
    """Check params, dataset names, the model id, the judge and GPUs before a run; one line per problem."""
    try:
        report = run_checks(params_path, judge=judge)
    except Exception as exc:
        if os.environ.get("RLVR_DEBUG", "").strip().lower() not in ("", "0", "false", "no"):
            raise
        raise click.ClickException(
            f"{type(exc).__name__}: {_one_line(exc)} (set RLVR_DEBUG=1 for the traceback)") from None
    for line in report.errors:
        click.echo(line, err=True)
    for line in report.notes:
        click.echo(f"note: {line}", err=True)
    if not report.ok:
        click.echo(f"rlvr check: {len(report.errors)} problem(s)", err=True)
        raise SystemExit(1)
    click.echo("rlvr check: ok (" + "; ".join(report.passed) + ")")
