"""Sparse-vs-dense reward ablation of the embedded default (CPU) over seeds → ``bench/ablation/results.json``.

Runs the GRPO phase of the default pipeline (``params.yaml``, no scale profile, ``engine: local``) for seeds
``1..N`` under ``reward=dense`` and ``reward=sparse``, every run from the same ``models/dpo`` (build it first with
``dvc repro dpo``), then the evaluation each seed gets in the pipeline: the ``grpo`` stage's own post-stage eval
(``metrics/eval_grpo_seed<n>/``, the baseline's Dev sets) and the final ``eval`` stage (``metrics/final/
eval_grpo_seed<n>/``: Dev and Test under the one EVAL@1/EVAL@k protocol). It writes one results file with, per mode
and per seed, those scores, the GRPO stage's own ``dev`` block and reward summary, and the per-step curve
(``metrics/grpo/seed-<n>.tsv``: reward_mean, accepted, pass_ratio, zero-std share…); plus the commit, the params,
the command, the machine and the input model's hash. No wall time is written (the stages keep theirs in
``metrics/cost/``, which is not read), so two runs of the same commit compare equal on a quiet or a loaded machine.

How it runs (and why not ``dvc exp run``): each (seed, mode) runs the ``grpo`` stage's own command from
``dvc.yaml`` (``sh stages/run.sh stages/grpo.py --seed <n>``) with ``--params`` pointing at a copy of
``params.yaml`` that sets ``reward`` and ``seeds``, and the stage's ``--out-root/--metrics-root/--eval-root/
--eval-dir`` options (appended to the command: click keeps an option's last value) pointing into
``<work>/<mode>/`` (default ``.cache/ablation/``, git-ignored), so the two modes never overwrite each other or the
workspace's ``metrics/``; then the ``eval`` stage's command with ``eval.phases`` set to that mode's GRPO models.
Nothing upstream re-runs: sft/dpo are read from the workspace, whose hash (dvc.lock's ``models/dpo`` md5) is
recorded. ``dvc exp run --temp -S reward=… -S seeds=[…]`` would run the same commands, but it keeps an
experiment's plain outs (the curves TSVs) only in its git ref and loses every seed of a mode when it is stopped
before the end; here the runs start interleaved (seed 1 dense, seed 1 sparse, seed 2 …; ``--jobs J``: J at once)
and the results file is rewritten after each seed, so a run cut short still leaves
paired seeds (``seeds_done``). A (mode, seed) whose metrics exist is not
re-run (``--force`` re-runs it); the GRPO checkpoints resume from ``$RLVR_CACHE_DIR/train/grpo`` as in the
pipeline (their key hashes the reward mode).

    nice -n 10 .venv/bin/python bench/ablation/run.py --seeds 5           # → bench/ablation/results.json
    .venv/bin/python bench/ablation/render.py                             # → docs/results/ablations.md

Raises ``click.ClickException`` (one line) when ``models/dpo`` or the governed problems are missing, or a stage fails.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import platform
import shlex
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click
import yaml

ROOT = Path(__file__).resolve().parents[2]
MODES = ("dense", "sparse")
CURVE_COLUMNS = ("reward_mean", "reward_std", "accepted", "pass_ratio", "frac_reward_zero_std", "all_pass_frac",
                 "all_fail_frac", "completion_length")
SCORE_KEYS = ("accepted@1", "pass_ratio_mean", "pass@1", "pass@2", "pass@4")


def stage_cmd(dvc_yaml: Path, stage: str, item: int | None = None) -> list[str]:
    """The command of ``stage`` in ``dvc_yaml`` as an argv list; a ``foreach`` stage's ``do.cmd`` with ``${item}``
    replaced by ``item``. Raises ``KeyError`` naming the stage when it is absent."""
    stages = yaml.safe_load(dvc_yaml.read_text())["stages"]
    if stage not in stages:
        raise KeyError(f"{dvc_yaml}: no stage {stage!r}")
    spec = stages[stage]
    cmd = spec["do"]["cmd"] if "do" in spec else spec["cmd"]
    return shlex.split(cmd.replace("${item}", str(item)))


def mode_params(base: Mapping[str, Any], mode: str, seeds: Sequence[int], work: str) -> dict[str, Any]:
    """``params.yaml`` (``base``, loaded) with ``reward=mode``, ``seeds`` and the final eval restricted to this
    mode's GRPO models (``eval.phases``: ``grpo`` at ``<work>/models/grpo``, seeded; ``eval.headline: grpo``)."""
    p = copy.deepcopy(dict(base))
    p["reward"] = mode
    p["seeds"] = [int(s) for s in seeds]
    p.setdefault("eval", {})
    p["eval"]["phases"] = [{"name": "grpo", "model": f"{work}/models/grpo", "seeded": True}]
    p["eval"]["headline"] = "grpo"
    return p


def _scores(d: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: d[k] for k in SCORE_KEYS if d and d.get(k) is not None}


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` when the file is absent. Raises ``ValueError`` naming the file."""
    if not path.is_file():
        return None
    try:
        obj = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: not a JSON object")
    return obj


def read_curve(tsv: Path, columns: Sequence[str] = CURVE_COLUMNS) -> list[dict[str, float | int | None]]:
    """Rows of a GRPO curves TSV (``metrics/grpo/seed-<n>.tsv``: ``step`` + the plot columns; no time column is in the
    plot) as ``[{"step": int, column: float | None}]`` for the ``columns`` present; empty cells → ``None``; ``[]``
    when the file is absent. Raises ``ValueError`` naming the file and line when ``step`` is missing or not a number."""
    if not tsv.is_file():
        return []
    rows: list[dict[str, float | int | None]] = []
    with tsv.open(newline="") as fh:
        for i, r in enumerate(csv.DictReader(fh, delimiter="\t"), start=2):
            try:
                row: dict[str, float | int | None] = {"step": int(r["step"])}
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{tsv}:{i}: field 'step' missing or not an integer") from None
            for c in columns:
                if c in r:
                    v = (r[c] or "").strip()
                    row[c] = float(v) if v not in ("", "nan") else None
            rows.append(row)
    return rows


def read_eval_folder(folder: Path, roles: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The scores of an eval folder (``metrics/final/eval_grpo_seed<n>/<dataset>.json``, one file per dataset, or the
    stage's ``metrics/eval_grpo_seed<n>/``): ``{dataset: {"role", "accepted@1", "pass_ratio_mean", "pass@k"…}}``.
    Only the scores file is read (its cost mirror holds the seconds). ``{}`` when the folder is absent."""
    out: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return out
    for f in sorted(folder.glob("*.json")):
        ds = f.stem
        out[ds] = {"role": roles.get(ds.split("-v")[0]), **_scores(read_json(f))}
    return out


def dataset_roles(params: Mapping[str, Any]) -> dict[str, str]:
    """``{dataset name: role}`` from ``governance.datasets`` (``humanevalplus:v0.1.10`` → ``humanevalplus``)."""
    roles: dict[str, str] = {}
    for d in (params.get("governance") or {}).get("datasets") or []:
        roles.setdefault(str(d["name"]).split(":")[0], str(d["role"]))
    roles.setdefault("synthetic", "dev")
    return roles


def collect_seed(work: Path, seed: int, roles: Mapping[str, str]) -> dict[str, Any] | None:
    """One (mode, seed)'s files under ``work`` (a mode's folder) as the results entry: ``grpo`` (the stage's
    ``metrics/grpo/seed-<n>.json`` scores + provenance: ``dev``, ``reward_first``/``reward_last``, ``steps``,
    ``reward_mode``), ``stage_eval`` (``metrics/eval_grpo_seed<n>/``), ``final_eval`` (``metrics/final/
    eval_grpo_seed<n>/``) and ``curve`` (:func:`read_curve`). ``None`` when the GRPO metrics file is absent."""
    m = work / "metrics"
    scores = read_json(m / "grpo" / f"seed-{seed}.json")
    if scores is None:
        return None
    prov = read_json(m / "provenance" / "grpo" / f"seed-{seed}.json") or {}
    dev = {**(prov.get("dev") or {}), **(scores.get("dev") or {})}  # n is provenance, the scores are scores
    grpo = {"dev": {k: v for k, v in dev.items() if isinstance(v, (int, float))},
            **{k: prov.get(k) for k in ("reward_mode", "reward_first", "reward_last", "steps", "train_loss",
                                         "sandbox_error_share_max") if k in prov}}
    return {"grpo": grpo,
            "stage_eval": read_eval_folder(m / f"eval_grpo_seed{seed}", roles),
            "final_eval": read_eval_folder(m / "final" / f"eval_grpo_seed{seed}", roles),
            "curve": read_curve(m / "grpo" / f"seed-{seed}.tsv")}


def collect(work: Path, modes: Sequence[str], seeds: Sequence[int], roles: Mapping[str, str]) -> dict[str, Any]:
    """``{mode: {seed (str): entry}}`` (:func:`collect_seed`) of every (mode, seed) whose files exist under
    ``work/<mode>``."""
    out: dict[str, Any] = {}
    for mode in modes:
        got = {str(s): e for s in seeds if (e := collect_seed(work / mode, s, roles)) is not None}
        out[mode] = got
    return out


def _git(*args: str) -> str:
    r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return r.stdout.strip()


def dpo_hash(lock: Path) -> str | None:
    """``models/dpo``'s md5 in ``dvc.lock`` (the input every run starts from); ``None`` when not locked."""
    if not lock.is_file():
        return None
    for out in (yaml.safe_load(lock.read_text()).get("stages", {}).get("dpo", {}) or {}).get("outs", []):
        if out.get("path") == "models/dpo":
            return out.get("md5")
    return None


def machine() -> dict[str, Any]:
    """Where it ran (no timing): OS, CPU count, the CUDA GPUs' names (empty on CPU), Python, torch/transformers/trl
    versions."""
    vers: dict[str, str | None] = {}
    for lib in ("torch", "transformers", "trl"):
        try:
            vers[lib] = __import__(lib).__version__
        except ImportError:
            vers[lib] = None
    gpus: list[str] = []
    try:
        import torch

        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except (ImportError, RuntimeError):
        pass
    return {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "gpus": gpus, **vers}


def where(m: Mapping[str, Any]) -> str:
    """``"CPU"`` or ``"<n> × <GPU name>"`` from :func:`machine`'s record (the device the stages picked: ``auto``)."""
    g = m.get("gpus") or []
    return f"{len(g)} × {g[0]}" if g else "CPU"


def _run(argv: list[str], log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    # the stages import this tree's rlvr, not an installed copy; the rest of PYTHONPATH stays (the GPU machines carry
    # their dependencies on it: bench/gpu/run_gpu.sh)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    env.setdefault("WANDB_MODE", "disabled")
    click.echo(f"$ {shlex.join(argv)}  (log {log})", err=True)
    with log.open("w") as fh:
        r = subprocess.run(argv, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env, check=False)
    if r.returncode:
        tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
        raise click.ClickException(f"{argv[2] if len(argv) > 2 else argv}: exit {r.returncode}: {tail[0]} ({log})")


def grpo_done(w: str, seed: int) -> bool:
    """Whether the mode folder ``w`` holds seed ``seed``'s GRPO metrics (the stage writes them last, atomically)."""
    return (Path(w) / "metrics" / "grpo" / f"seed-{seed}.json").is_file()


def run_grpo(base: Mapping[str, Any], mode: str, seed: int, w: str, force: bool) -> None:
    """The ``grpo`` stage's command for one (mode, seed) into the mode's folder ``w`` (params copy
    ``<w>/params-seed<n>.yaml``, :func:`mode_params`), unless its metrics exist (or ``force``). Log: ``<w>/logs/``."""
    if grpo_done(w, seed) and not force:
        return
    pfile = Path(w) / f"params-seed{seed}.yaml"
    pfile.parent.mkdir(parents=True, exist_ok=True)
    pfile.write_text(yaml.safe_dump(mode_params(base, mode, [seed], w), sort_keys=False))
    _run([*stage_cmd(ROOT / "dvc.yaml", "grpo", seed), "--params", str(pfile), "--out-root", f"{w}/models/grpo",
          "--metrics-root", f"{w}/metrics/grpo", "--eval-root", f"{w}/metrics", "--eval-dir", f"{w}/data/eval"],
         Path(w) / "logs" / f"grpo{seed}.log")


def run_final_eval(base: Mapping[str, Any], mode: str, seeds: Sequence[int], w: str, tag: str) -> None:
    """The ``eval`` stage's command over the mode's GRPO models of ``seeds`` (params copy ``<w>/params.yaml``);
    seeds scored before resume from their journals, so only new ones are generated. Log: ``<w>/logs/eval<tag>.log``.
    Not safe to run twice at once on one ``w`` (the summary files): callers hold a per-mode lock."""
    pfile = Path(w) / "params.yaml"
    pfile.write_text(yaml.safe_dump(mode_params(base, mode, seeds, w), sort_keys=False))
    _run([*stage_cmd(ROOT / "dvc.yaml", "eval"), "--params", str(pfile), "--out-dir", f"{w}/data/eval/final",
          "--metrics-dir", f"{w}/metrics/final"], Path(w) / "logs" / f"eval{tag}.log")


@click.command()
@click.option("--seeds", "n_seeds", default=5, show_default=True, type=click.IntRange(1), help="seeds 1..N")
@click.option("--modes", default=",".join(MODES), show_default=True, help="reward modes, comma-separated")
@click.option("--work", default=".cache/ablation", show_default=True, help="folder of the runs' outputs")
@click.option("--out", default="bench/ablation/results.json", show_default=True, type=click.Path(path_type=Path))
@click.option("--params", "params_path", default="params.yaml", show_default=True, type=click.Path(path_type=Path))
@click.option("--final-eval/--no-final-eval", default=True, show_default=True, help="run the eval stage per seed")
@click.option("--force", is_flag=True, help="re-run (mode, seed)s whose metrics exist")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1),
              help="(mode, seed) runs at once, started in the interleaved order")
@click.option("--collect-only", is_flag=True, help="only collect what exists under --work")
@click.option("--note", default="", help="recorded with the inputs (e.g. how models/dpo was built)")
@click.option("--commit", default="", help="the commit to record where the tree is not a git clone (the GPU machine's "
              "copy); default: `git rev-parse HEAD`")
def main(n_seeds: int, modes: str, work: str, out: Path, params_path: Path, final_eval: bool, force: bool,
         jobs: int, collect_only: bool, note: str, commit: str) -> None:
    """Run GRPO + its evals for seeds 1..N under each reward mode and write the results file."""
    os.chdir(ROOT)
    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    seeds = list(range(1, n_seeds + 1))
    base = yaml.safe_load(params_path.read_text())
    if base.get("profile"):
        raise click.ClickException(f"{params_path}: profile={base['profile']!r}: this ablation is the embedded "
                                   "default (no scale profile)")
    roles = dataset_roles(base)
    if not collect_only:
        for need in ("models/dpo", "data/governance/problems", "data/profile"):
            if not Path(need).exists():
                raise click.ClickException(f"{need} missing: build the inputs first (`dvc repro dpo`)")
    lock = threading.Lock()
    mode_lock = {m: threading.Lock() for m in mode_list}

    def step(seed: int, mode: str) -> None:
        w = f"{work}/{mode}"
        run_grpo(base, mode, seed, w, force)
        if final_eval:
            with mode_lock[mode]:
                run_final_eval(base, mode, [s for s in seeds if grpo_done(w, s)], w, str(seed))
        with lock:
            write_results(out, Path(work), mode_list, seeds, base, roles, note, commit)

    pairs = [] if collect_only else [(s, m) for s in seeds for m in mode_list]  # seed 1 dense, seed 1 sparse, …
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(step, s, m) for s, m in pairs]:
            f.result()
    write_results(out, Path(work), mode_list, seeds, base, roles, note, commit)
    click.echo(f"wrote {out}")


def write_results(out: Path, work: Path, modes: Sequence[str], seeds: Sequence[int], base: Mapping[str, Any],
                  roles: Mapping[str, str], note: str = "", commit: str = "") -> dict[str, Any]:
    """Collect (:func:`collect`) and write the results file ``out`` (JSON, keys sorted); returns it. ``params`` holds
    the sections the GRPO phase and its evals read; ``seeds_done`` the seeds every mode finished (paired)."""
    runs = collect(work, modes, seeds, roles)
    mach = machine()
    paired = [s for s in seeds if all(str(s) in runs.get(m, {}) for m in modes)]
    res = {
        "schema": 1,
        "what": f"sparse vs dense GRPO reward, embedded default ({where(mach)}), same models/dpo, seeds 1..N",
        "commit": commit or _git("rev-parse", "HEAD"),
        "dirty_code": bool(_git("status", "--porcelain", "--", "rlvr", "stages", "dvc.yaml", "params.yaml")),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "runner": "stage scripts (dvc.yaml's grpo and eval commands), not dvc exp: see bench/ablation/run.py",
        "machine": mach,
        "inputs": {"models/dpo": dpo_hash(ROOT / "dvc.lock"), "note": note},
        "params": {k: base.get(k) for k in ("engine", "reward_shaping", "train", "grpo", "baseline", "judge")}
                  | {"eval": {k: (base.get("eval") or {}).get(k) for k in ("datasets", "greedy", "sampling", "n",
                                                                           "ks")}},
        "modes": list(modes),
        "seeds_requested": list(seeds),
        "seeds_done": paired,
        "roles": dict(roles),
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)
    return res


if __name__ == "__main__":
    main()
