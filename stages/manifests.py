"""Stage ``manifests``: content-hashed per-split manifests, the training sets (SFT, DPO seed pairs, GRPO prompts) in
the engines' formats, and the verl RL parquet files.

Reads ``params.yaml`` section ``manifests`` (:class:`rlvr.data.manifests.ManifestsParams`) and the governance outputs
``data/governance/problems/*.jsonl``, ``references.jsonl`` (judge verdicts) and ``contamination.jsonl``. Writes,
atomically, under ``data/manifests/``: ``<dataset>.<split>.manifest.jsonl`` + ``index.json``; ``sft/train.jsonl``
(TRL prompt/completion) + ``sft/train.parquet`` (verl SFT messages); ``dpo/train.jsonl`` (TRL prompt/chosen/rejected);
``grpo/train.jsonl`` (TRL prompt + ground_truth + data_source); ``verl/{train,val}.parquet`` (verl RL; train = the
GRPO prompts); ``training_sets.json`` (rows, drop counts, sha256 per file); ``params.resolved.json``.

Run: ``python stages/manifests.py`` from the repository root.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.config import dump_resolved
from rlvr.data import export
from rlvr.data import manifests as man
from rlvr.data.bundled import sha256_file
from rlvr.io import atomic_dir, atomic_write_json, atomic_write_jsonl
from rlvr.stage import Params, Result, option, stage


@stage(option("--in-dir", default="data/governance/problems", path=True),
       option("--gov-dir", path=True, help="governance folder (default: in-dir/..)"),
       option("--out-dir", default="data/manifests", path=True))
def main(params: Params, in_dir: Path, gov_dir: Path | None, out_dir: Path) -> Result:
    """Write manifests, training sets and engine files for the governed problems."""
    cfg = params.section("manifests", man.ManifestsParams)
    gov_dir = gov_dir or in_dir.parent
    governed = man.load_governed(in_dir)
    refs = man.read_jsonl(gov_dir / "references.jsonl")
    flagged = man.flagged_ids(gov_dir)
    grpo, grpo_n = man.build_grpo(man.select(governed, cfg.verl_train), cfg.grpo_min_tests, flagged)
    sft, sft_n = man.build_sft(man.select(governed, cfg.sft_sets), refs, cfg.sft_max_per_problem)
    dpo, dpo_n = man.build_dpo(man.select(governed, cfg.dpo_sets), refs, cfg.dpo_max_pairs_per_problem)
    val = man.select(governed, cfg.verl_val)
    with atomic_dir(out_dir) as tmp:  # replaced whole (so written here, not by Result): no stale manifests
        index = man.write_manifests(governed, tmp)
        atomic_write_jsonl(tmp / "sft" / "train.jsonl", (export.trl_sft_row(p, a) for p, a in sft))
        export.write_verl_sft_parquet(sft, tmp / "sft" / "train.parquet")
        atomic_write_jsonl(tmp / "dpo" / "train.jsonl", (export.trl_dpo_row(p, c, r) for p, c, r in dpo))
        atomic_write_jsonl(tmp / "grpo" / "train.jsonl", (export.trl_grpo_row(p) for p in grpo))
        export.write_verl_parquet(grpo, tmp / "verl" / "train.parquet")
        if val:
            export.write_verl_parquet(val, tmp / "verl" / "val.parquet")
        rows = {"sft/train.jsonl": len(sft), "sft/train.parquet": len(sft), "dpo/train.jsonl": len(dpo),
                "grpo/train.jsonl": len(grpo), "verl/train.parquet": len(grpo), "verl/val.parquet": len(val)}
        files = {f: {"rows": n, "sha256": sha256_file(tmp / f)} for f, n in rows.items() if (tmp / f).is_file()}
        atomic_write_json(tmp / "training_sets.json", {"files": files, "sft": sft_n, "dpo": dpo_n, "grpo": grpo_n})
        dump_resolved(cfg, tmp)
    return Result(echo=f"manifests: {len(index)} manifests; SFT {len(sft)} pairs, DPO {len(dpo)} pairs, GRPO/verl "
                       f"train {len(grpo)} prompts, verl val {len(val)} rows")


if __name__ == "__main__":
    main()
