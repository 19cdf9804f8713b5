"""Scale profiles: one file per scale (``profiles/*.yaml``), selected by the top-level ``profile`` param.

``params.yaml`` holds the tiny CPU defaults (the embedded default that ``make repro`` runs). A scale profile sets every
stage's hyperparameters for its scale, and the hardware recipe of the verl engine, so nothing tuned for the tiny model
reaches a 7B run:

.. code-block:: yaml

    base: qwen7b_4xh100.yaml        # optional: another profile (path relative to this file), merged first
    complete: true                  # default: every key of SCALE_KEYS must be set by the profile (or its base)
    hardware: {n_gpus_per_node: 4, rollout_tp: 2, ...}     # rlvr.train.verl.params.VerlProfile
    params:                         # deep-merged over params.yaml, section by section (lists replace)
      sft: {learning_rate: 1.0e-5, max_steps: 5, ...}

:func:`apply_profile` is what :func:`rlvr.config.load_params` calls: with ``profile: <path>`` in ``params.yaml`` every
stage reads ``params.yaml`` with the profile's ``params`` merged over it, and ``verl.profile`` pointing at the
profile (whose ``hardware`` block :func:`rlvr.train.verl.params.load_profile` reads). ``profile: null`` (the default)
changes nothing. Precedence, lowest first: params.yaml, the profile's base chain, the profile.

No silent params (issue 42): DVC records only params.yaml's values, so a ``dvc exp run -S grpo.learning_rate=2e-6``
(or an edit of params.yaml) on a key that the selected profile sets would be recorded under the new value and run with
the profile's. :func:`apply_profile` therefore refuses it: for every key the profile sets, params.yaml must hold either
the profile's value or its own embedded default for that key (:data:`EMBEDDED_DEFAULTS_FILE`, the tiny CPU model's
value that the profile is there to replace); any other value stops the stage at start with one line naming the key,
both values and both files (:func:`profile_conflicts`). Such a key is changed in the profile file instead
(``dvc exp run -S profiles/qwen7b_4xh100.yaml:params.grpo.learning_rate=2e-6``: the ``profile`` stage depends on the
``profiles`` folder and resolves the selected chain into ``data/profile/resolved.json``, a dep of every stage that
reads a profile, so the change re-runs exactly those); :func:`profile_keys` lists the keys. Why an error and not
"params.yaml wins": params.yaml holds the tiny model's value of every such key, so a value that differs from the
profile's cannot tell "chosen for this run" from "the tiny default" without that record, and a stale record would then
silently train a 7B with a tiny-model value; an error costs one re-run. The effective values (after the merge) are in
each stage's provenance (:func:`effective_params`).

The training stages (sft, dpo, grpo, repair) call :func:`require_scale_profile` first: with ``engine: verl`` or a
``model.name`` other than ``tiny`` and no profile selected they stop, since params.yaml's values are the tiny model's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from rlvr.config.errors import ConfigError

__all__ = ["DATA_SECTIONS", "DATA_SELECTION_KEYS", "EMBEDDED_DEFAULTS_FILE", "SCALE_KEYS", "TINY_MODEL",
           "ProfileError", "apply_profile", "check_tensor_parallel", "effective_params", "embedded_defaults",
           "load_scale_profile", "missing_scale_keys", "profile_conflicts", "profile_keys", "require_scale_profile"]

# Hyperparameters whose tiny-model value is wrong at any other scale: a complete profile sets each of them (a dotted
# path into params.yaml). Lengths, learning rates, step counts and epochs, group size, batch sizes, the repair budget,
# the overlong-shaping lengths, and the data each training and scoring stage selects (params.yaml selects the
# synthetic family and 8-16 problem limits for the tiny CPU model: at 7B SFT, DPO and repair would train on the 42
# print-a-constant problems and the final eval would score 16 HumanEval problems).
SCALE_KEYS: tuple[str, ...] = (
    "engine", "model.name",
    "train.train_sets", "train.eval_sets",
    "train.max_prompt_length", "train.max_completion_length", "train.eval_max_new_tokens",
    "sft.learning_rate", "sft.epochs", "sft.max_steps", "sft.per_device_train_batch_size",
    "dpo.learning_rate", "dpo.max_steps", "dpo.beta", "dpo.per_device_train_batch_size", "dpo.launch",
    "dpo.mining.backend",
    "grpo.learning_rate", "grpo.max_steps", "grpo.num_generations", "grpo.beta",
    "verl.train_batch_size", "verl.ppo_mini_batch_size", "verl.max_prompt_length", "verl.max_response_length",
    "verl.sft_train_batch_size", "verl.sft_max_length",
    "repair.turn_tokens", "repair.feedback_chars", "repair.sampling.max_new_tokens",
    "repair.train.learning_rate", "repair.train.max_steps", "repair.train.num_generations", "repair.train.beta",
    "repair.train.warmup_epochs", "repair.train.train_sets", "repair.datasets",
    "reward_shaping.max_length_tokens", "reward_shaping.length_buffer_tokens",
    "baseline.backend", "baseline.sampling.max_new_tokens", "baseline.datasets",
    "eval.backend", "eval.greedy.max_new_tokens", "eval.sampling.max_new_tokens", "eval.datasets",
)

# The data selections among SCALE_KEYS: params.yaml's values are the tiny model's (synthetic sets, small limits).
DATA_SELECTION_KEYS: tuple[str, ...] = (
    "train.train_sets", "train.eval_sets", "repair.train.train_sets", "repair.datasets", "baseline.datasets",
    "eval.datasets",
)


# What the data stages (governance, manifests, judge_check) read, plus the pipeline's own grain: a profile may not set
# them, so those stages do not track the profile (dvc.yaml) and `dvc exp run -S profile=...` re-runs only from the model
# on: the audited problems, the manifests and the judge's semantics are the same at every scale.
DATA_SECTIONS: tuple[str, ...] = ("governance", "manifests", "judge_check", "judge", "synthetic", "seeds", "profile")


class ProfileError(ValueError):
    """A profile file is missing, not YAML, not a mapping, cyclic, or incomplete; the message names the file."""


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge of mappings (``over`` wins; lists and scalars replace)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ProfileError(f"{path}: profile not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: top level must be a mapping")
    unknown = set(data) - {"base", "complete", "hardware", "params", "description"}
    if unknown:
        raise ProfileError(f"{path}: unknown top-level keys {sorted(unknown)} (base, complete, hardware, params)")
    return data


def load_scale_profile(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a scale profile with its ``base`` chain merged in (base first, this file last).

    Returns ``{"hardware": {...}, "params": {...}, "complete": bool, "files": [base…, this], "origin": {dotted
    params key: the file (of the chain) whose value it has}}``.
    Raises :class:`ProfileError` naming the file for a missing/invalid file or a cyclic ``base``."""
    p = Path(path).resolve()
    if p in _seen:
        raise ProfileError(f"{p}: cyclic 'base' chain ({' -> '.join(map(str, (*_seen, p)))})")
    data = _read(p)
    merged: dict[str, Any] = {"hardware": {}, "params": {}, "complete": True, "files": [], "origin": {}}
    if data.get("base"):
        merged = load_scale_profile(p.parent / str(data["base"]), (*_seen, p))
    for key in ("hardware", "params"):
        block = data.get(key) or {}
        if not isinstance(block, dict):
            raise ProfileError(f"{p}: '{key}' must be a mapping")
        merged[key] = _merge(merged[key], block)
    merged["origin"] = {**merged["origin"], **dict.fromkeys(_leaves(data.get("params") or {}), str(p))}
    merged["complete"] = bool(data.get("complete", True))
    merged["files"] = [*merged["files"], str(p)]
    return merged


def _has(d: dict[str, Any], dotted: str) -> bool:
    return _get(d, dotted) is not _ABSENT


def missing_scale_keys(profile_params: dict[str, Any]) -> list[str]:
    """The :data:`SCALE_KEYS` that ``profile_params`` (a profile's merged ``params`` block) leaves unset."""
    return [k for k in SCALE_KEYS if not _has(profile_params, k)]


def profile_keys(path: str | Path) -> list[str]:
    """Dotted params keys that the profile at ``path`` (with its base chain) sets, sorted."""
    return sorted(_leaves(load_scale_profile(path)["params"]))


def _leaves(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_leaves(v, key + "."))
        else:
            out[key] = v
    return out


def check_tensor_parallel(params: dict[str, Any], hardware: dict[str, Any], where: str | Path) -> None:
    """Raise :class:`ProfileError` when a ``*.tensor_parallel_size`` in ``params`` (vLLM engines: baseline, eval,
    repair eval, DPO mining) exceeds ``hardware["n_gpus_per_node"]``; nothing to check when ``hardware`` does not set
    it. The message names ``where`` (the profile file) and the dotted key."""
    n = hardware.get("n_gpus_per_node")
    if n is None:
        return
    over = sorted((k, v) for k, v in _leaves(params).items()
                  if k.rsplit(".", 1)[-1] == "tensor_parallel_size" and isinstance(v, int) and v > int(n))
    if over:
        raise ProfileError(f"{where}: {', '.join(f'{k}={v}' for k, v in over)} exceeds the profile's "
                           f"hardware.n_gpus_per_node={n} (set it in the profile's params)")


#: params.yaml's own value of every key a shipped profile sets (the tiny CPU model's values the profiles replace): a
#: mapping ``dotted key: value``, kept equal to params.yaml by tests/config/test_profile_conflicts.py (regenerate with
#: ``python -m rlvr.config.profiles``). :func:`profile_conflicts` accepts these values beside the profile's own.
EMBEDDED_DEFAULTS_FILE = Path(__file__).with_name("embedded_defaults.yaml")

_ABSENT = object()


def embedded_defaults(path: str | Path = EMBEDDED_DEFAULTS_FILE) -> dict[str, Any]:
    """The record of params.yaml's embedded defaults (:data:`EMBEDDED_DEFAULTS_FILE`): ``{dotted key: value}``.
    Raises :class:`ProfileError` naming the file when it is missing or not a mapping."""
    p = Path(path)
    if not p.is_file():
        raise ProfileError(f"{p}: the record of params.yaml's embedded defaults is missing")
    data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ProfileError(f"{p}: must be a mapping of dotted params keys to values")
    return data


def _get(d: dict[str, Any], dotted: str) -> Any:
    cur: Any = d
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _ABSENT
        cur = cur[part]
    return cur


def _same(a: Any, b: Any) -> bool:
    """``a == b``, a number written as a string equal to a number counting as equal: ``dvc exp run -S x=2e-6`` writes
    ``2e-06``, which YAML 1.1 (PyYAML) reads as a string and pydantic then as the float."""
    if a == b:
        return True
    try:
        return isinstance(a, str) != isinstance(b, str) and float(a) == float(b)
    except (TypeError, ValueError):
        return False


def profile_conflicts(params: dict[str, Any], prof: dict[str, Any],
                      defaults: dict[str, Any] | None = None) -> list[str]:
    """One clause per key that the profile ``prof`` (:func:`load_scale_profile`) sets and ``params`` (params.yaml as
    written) holds with a value that is neither the profile's nor params.yaml's
    embedded default for it (``defaults``, default :func:`embedded_defaults`): such a value, from ``dvc exp run -S``
    or an edit, would be recorded by DVC and ignored by the run. Each clause names the key, both values and both
    files, e.g. ``grpo.learning_rate=2e-06 but profiles/q.yaml sets grpo.learning_rate=1e-06`` (the caller names
    params.yaml). A key
    params.yaml does not hold is never a conflict."""
    defaults = embedded_defaults() if defaults is None else defaults
    out = []
    for key, value in sorted(_leaves(prof["params"]).items()):
        mine = _get(params, key)
        if mine is _ABSENT or _same(mine, value) or (key in defaults and _same(mine, defaults[key])):
            continue
        where = prof.get("origin", {}).get(key, "the profile")
        out.append(f"{key}={mine!r} but {where} sets {key}={value!r}")
    return out


def effective_params(params: dict[str, Any], params_path: str | Path = "params.yaml",
                     sections: Iterable[str] | None = None) -> dict[str, Any]:
    """What a stage records in its provenance (``protocol.effective_params``): ``{"profile": the selected profile
    path or None, "from_profile": {dotted key: effective value}}`` for every key the profile set (the values that DVC
    does not record: it records params.yaml's), restricted to the top-level ``sections`` given (all when ``None``).
    ``params``: ``params_path`` as written (:func:`rlvr.config.load_params` with ``raw=True``); the profile path is
    relative to its folder. Raises :class:`ProfileError` when the profile cannot be read."""
    sel = params.get("profile")
    if not sel:
        return {"profile": None, "from_profile": {}}
    leaves = _leaves(load_scale_profile(Path(params_path).parent / str(sel))["params"])
    keep = None if sections is None else set(sections)
    return {"profile": str(sel), "from_profile": {k: v for k, v in sorted(leaves.items())
                                                  if keep is None or k.split(".", 1)[0] in keep}}


def apply_profile(params: dict[str, Any], params_path: str | Path = "params.yaml") -> dict[str, Any]:
    """``params`` with the selected profile's ``params`` merged over it (unchanged when ``profile`` is unset).

    ``profile`` is a path relative to the params file's folder. The result's ``verl.profile`` is set to the profile
    (so the verl engine reads its ``hardware`` block).

    Raises :class:`ProfileError`: the profile is missing/invalid, sets one of :data:`DATA_SECTIONS`, a key it sets
    has a params.yaml value other than the profile's or params.yaml's embedded default (:func:`profile_conflicts`:
    the value would be recorded by DVC and not used), is
    ``complete`` and a :data:`SCALE_KEYS` entry is unset (the message lists them), or a vLLM engine's
    ``tensor_parallel_size`` (any params key of that name, after the merge) exceeds the profile's
    ``hardware.n_gpus_per_node`` (a vLLM engine's tensor parallelism stays within one node; without this check a
    "1-GPU" profile inheriting TP 2 from its base would score on two GPUs, and fail on a one-GPU machine)."""
    sel = params.get("profile")
    if not sel:
        return params
    path = Path(params_path).parent / str(sel)
    prof = load_scale_profile(path)
    data = sorted(set(prof["params"]) & set(DATA_SECTIONS))
    if data:
        raise ProfileError(f"{path}: a scale profile may not set {', '.join(data)} (data sections: the same at every "
                           "scale; set them in params.yaml)")
    if prof["complete"]:
        missing = missing_scale_keys(prof["params"])
        if missing:
            raise ProfileError(f"{path}: a complete scale profile must set {', '.join(missing)} "
                               "(or declare 'complete: false')")
    conflicts = profile_conflicts(params, prof)
    if conflicts:
        raise ProfileError(f"{'; '.join(conflicts)}: a params.yaml (or dvc exp run -S) value for a key the selected "
                           f"profile sets would be ignored; set it in the profile (dvc exp run -S "
                           f"{sel}:params.<key>=<value>) or put back params.yaml's value")
    out = _merge(params, prof["params"])
    check_tensor_parallel(out, prof["hardware"], path)
    if prof["hardware"]:
        out.setdefault("verl", {})
        out["verl"] = {**out["verl"], "profile": str(path)}
    return out


#: ``model.name`` of the model built from the ``model`` section (:func:`rlvr.model.build_tiny_model`), the one model
#: params.yaml's own hyperparameters are tuned for.
TINY_MODEL = "tiny"


def require_scale_profile(params: dict[str, Any], where: str | Path = "params.yaml") -> None:
    """Refuse to train at a scale params.yaml is not tuned for: raise :class:`rlvr.config.ConfigError` (one line,
    naming ``where`` and the keys) when ``params`` (the loaded params, profile merged: :func:`rlvr.config.load_params`)
    selects no ``profile`` and either ``engine`` is ``verl`` or ``model.name`` is not :data:`TINY_MODEL`.

    The training stages (sft, dpo, grpo, repair) call it first. Without it ``dvc exp run -S engine=verl`` trains with
    the tiny CPU model's hyperparameters on the 8-GPU hardware recipe of ``verl.profile``, and ``-S model.name=<hub
    id>`` trains a 7B with them (lr 1e-3, 80 SFT epochs, 32-token completions, the synthetic problems). A profile
    that sets only some keys (``complete: false``) is an explicit choice and passes."""
    if params.get("profile"):
        return
    engine = params.get("engine", "local")
    name = (params.get("model") or {}).get("name", TINY_MODEL)
    if engine != "verl" and name == TINY_MODEL:
        return
    why = "engine=verl" if engine == "verl" else f"model.name={name!r}"
    raise ConfigError(f"{where}: {why} with no scale profile (profile is empty): the training stages would use "
                      "params.yaml's tiny-CPU-model values (sft.learning_rate, sft.epochs, grpo.learning_rate, "
                      "train.max_completion_length, train.train_sets, ...); select one, e.g. "
                      "`dvc exp run -S profile=profiles/qwen7b_4xh100.yaml` (a partial one: complete: false)")


if __name__ == "__main__":  # regenerate EMBEDDED_DEFAULTS_FILE from params.yaml and the shipped profiles
    import sys

    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    tiny = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    keys = {k for f in sorted((root / "profiles").rglob("*.yaml")) for k in _leaves(load_scale_profile(f)["params"])}
    record = {k: v for k in sorted(keys) if (v := _get(tiny, k)) is not _ABSENT}
    head = ("# params.yaml's value of every key a shipped profile (profiles/**.yaml) sets: the embedded (tiny CPU\n"
            "# model) defaults the profiles replace. Generated by `python -m rlvr.config.profiles`;\n"
            "# rlvr.config.profiles.profile_conflicts accepts these values beside the profile's own.\n"
            "# Regenerate after changing one of them.\n")
    EMBEDDED_DEFAULTS_FILE.write_text(head + yaml.safe_dump(record, sort_keys=True, allow_unicode=True, width=120),
                                      encoding="utf-8")
