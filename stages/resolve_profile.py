"""Stage ``profile``: the values of the selected scale profile, resolved, as the one file later stages depend on.

Reads ``params.yaml``'s ``profile`` (a scale profile under ``profiles/``, :mod:`rlvr.config.profiles`; may be unset)
and ``verl.profile`` (the verl hardware recipe), follows the ``base`` chain and writes ``data/profile/resolved.json``:
``{"profile", "files" (the chain, base first, relative to the params file), "complete", "hardware", "params" (the
merged blocks), "verl_hardware" (the recipe verl reads, validated, defaults filled in)}``.

Why: the stages from ``model`` on read the selected profile's values at run time, so DVC must know when they change.
Depending on the whole ``profiles/`` folder re-ran every 7B stage after a comment edit, or after an edit of a profile
nobody selected; depending on this file re-runs them only when a value of the selected chain changes (this stage
re-runs on any edit of the folder, in well under a second, and DVC sees the same output).

Run: ``python stages/resolve_profile.py`` from the repository root. The script is not ``stages/profile.py``:
Python puts a script's folder first on ``sys.path``, so a ``profile.py`` there shadowed the standard library's
``profile`` module (``cProfile`` imports it) in every other stage script, and ``transformers`` failed to import
``Qwen2ForCausalLM`` (``tests/test_stage_runner.py`` checks that no stage script has a standard module's name).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlvr.config import load_params
from rlvr.config.profiles import load_scale_profile
from rlvr.stage import Params, Result, option, stage
from rlvr.train.verl.params import load_profile


def resolve(params_path: str | Path) -> dict[str, Any]:
    """The resolved profile record (module doc) of the params file at ``params_path``. Raises
    :class:`rlvr.config.ConfigError` / :class:`rlvr.config.profiles.ProfileError` naming the file for a missing or
    invalid profile."""
    base = Path(params_path).resolve().parent
    raw = load_params(params_path, raw=True)
    merged = load_params(params_path)
    selected = raw.get("profile") or None
    out: dict[str, Any] = {"profile": selected, "files": [], "complete": None, "hardware": None, "params": None}
    if selected:
        prof = load_scale_profile(base / str(selected))
        out.update(files=[os.path.relpath(f, base) for f in prof["files"]], complete=prof["complete"],
                   hardware=prof["hardware"], params=prof["params"])
    recipe = (merged.get("verl") or {}).get("profile")
    out["verl_hardware"] = None
    if recipe and (base / str(recipe)).is_file():
        out["verl_hardware"] = load_profile(base / str(recipe)).model_dump(mode="json")
    return out


@stage(option("--out", default="data/profile/resolved.json", path=True))
def main(params: Params, out: Path) -> Result:
    """Resolve the selected scale profile's chain into one file of values."""
    rec = resolve(params.path)
    return Result(json={out: rec}, echo=f"profile: {rec['profile'] or 'none'} ({len(rec['files'])} file(s))")


if __name__ == "__main__":
    main()
