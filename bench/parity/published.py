"""Re-derive a model's published EvalPlus verdicts (MBPP+ v0.1.0, HumanEval+ v0.1.9) with ``rlvr judge``.

    python bench/parity/published.py --qwen-repo /path/to/QwenLM/Qwen2.5-Coder --work /tmp/published \
        [--models 7b-base 1.5b-base] [--datasets mbpp humaneval] [--out bench/parity/published_qwen2.5-coder.json]
    python bench/parity/published.py --table     # the committed results as docs/judge/parity.md's table

Qwen2.5-Coder's repository publishes, per base model, the completions its report was scored on
(``qwencoder-eval/base/outptus/qwen2.5-coder/<model>/evalplus/<mbpp|humaneval>/generated.jsonl``) and EvalPlus's
per-task verdicts of them (``generated_eval_results.json``: ``base_status`` / ``plus_status`` per task; September
2024). The dataset hashes name the releases: ``ebe95df0…`` = MBPP+ v0.1.0 (judged with ``--evalplus-release
pre-set-eq``: that evaluator predates the set-equality oracle), ``84f4b93a…`` = HumanEval+ v0.1.9 (the current
rules).
``--qwen-repo`` is a git directory (read with ``git show HEAD:<path>``, e.g. the bare mirror ``fetch`` makes) or a
checkout. Their files are read, not copied into rlvr (the repository states no licence); the output holds task ids and
statuses only.

Each model's completions are judged by the ``rlvr`` on ``PATH`` (``RLVR`` to override) in ``--work``, whose
``generated_eval_results.json`` is then compared task by task with the published one. Output: per model, the
published and rlvr pass@1 (base, base + extra), the tasks agreeing, and every disagreeing task with both statuses and
rlvr's verdict line (verdict, passed/total, message), for ``docs/judge/parity.md``. Cost on the 2-core CPU box: about
MBPP+ about 4.5 min per model (most of it computing the expected outputs of 396 problems), HUMANEVAL_COST.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

PREFIX = "qwencoder-eval/base/outptus/qwen2.5-coder/{model}/evalplus/{dataset}/"
#: published folder → (rlvr dataset, EvalPlus's dataset hash of that release, extra ``rlvr judge`` options)
DATASETS: dict[str, tuple[str, str, list[str]]] = {
    "mbpp": ("mbppplus:v0.1.0", "ebe95df0d5220f00cedd6f4bddea35e4", ["--evalplus-release", "pre-set-eq"]),
    "humaneval": ("humanevalplus:v0.1.9", "84f4b93a1270b492e4c54d5212da7a5b", []),
}


def read_published(repo: Path, model: str, dataset: str, name: str) -> bytes:
    """Bytes of ``name`` of ``model``'s published ``dataset`` files in ``repo`` (git directory or checkout).
    Raises ``FileNotFoundError`` naming the path when it is in neither."""
    rel = PREFIX.format(model=model, dataset=dataset) + name
    if (repo / rel).is_file():
        return (repo / rel).read_bytes()
    run = subprocess.run(["git", f"--git-dir={repo / '.git' if (repo / '.git').exists() else repo}", "show",
                          f"HEAD:{rel}"], capture_output=True)
    if run.returncode:
        raise FileNotFoundError(f"{repo}: {rel}: {run.stderr.decode(errors='replace').strip()}")
    return run.stdout


def statuses(doc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """task id → (base_status, plus_status) of an EvalPlus ``_eval_results.json`` (one sample per task)."""
    return {t: (rows[0]["base_status"], rows[0]["plus_status"]) for t, rows in doc["eval"].items()}


def pass_at_1(st: dict[str, tuple[str, str]]) -> dict[str, float]:
    """EvalPlus's two columns over one sample per task: base, and base + extra (both statuses ``pass``)."""
    n = len(st)
    return {"base": round(sum(b == "pass" for b, _ in st.values()) / n, 4),
            "plus": round(sum(b == "pass" and p == "pass" for b, p in st.values()) / n, 4)}


def compare(model: str, dataset: str, repo: Path, work: Path, rlvr: str) -> dict[str, Any]:
    """Judge ``model``'s published ``dataset`` completions in ``work/model/dataset`` and compare with its published
    verdicts. Raises ``SystemExit`` when the published file is for another release or another task set."""
    spec, digest, options = DATASETS[dataset]
    d = work / model / dataset
    d.mkdir(parents=True, exist_ok=True)
    samples = d / "generated.jsonl"
    samples.write_bytes(read_published(repo, model, dataset, "generated.jsonl"))
    published = json.loads(read_published(repo, model, dataset, "generated_eval_results.json"))
    if published.get("hash") != digest:
        raise SystemExit(f"{model}/{dataset}: published results are for dataset hash {published.get('hash')}, "
                         f"not {spec}'s {digest}")
    out = d / "verdicts.jsonl"
    cmd = [rlvr, "judge", "--dataset", spec, *options, "--samples", str(samples), "--out", str(out)]
    subprocess.run(cmd, check=True)
    ours = json.loads((d / "generated_eval_results.json").read_text())
    pub_st, our_st = statuses(published), statuses(ours)
    if set(pub_st) != set(our_st):
        raise SystemExit(f"{model}: task sets differ: {sorted(set(pub_st) ^ set(our_st))[:5]}")
    lines = {r["task_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    differ = [{"task_id": t, "published": list(pub_st[t]), "rlvr": list(our_st[t]),
               "rlvr_verdict": {k: lines[t][k] for k in ("verdict", "passed", "total", "message")}}
              for t in sorted(pub_st, key=lambda t: int(t.split("/")[1])) if pub_st[t] != our_st[t]]
    return {"model": f"Qwen2.5-Coder-{model}", "dataset": spec, "options": options,
            "published_date": published.get("date"), "tasks": len(pub_st),
            "agreeing": len(pub_st) - len(differ), "pass@1_published": pass_at_1(pub_st),
            "pass@1_rlvr": pass_at_1(our_st), "disagreeing": differ}


def table(doc: dict[str, Any]) -> str:
    """The results file ``doc`` as the Markdown table of ``docs/judge/parity.md``: one row per model and dataset."""
    rows = ["| published run | tasks | agreeing | pass@1 base / plus, published | rlvr | disagreeing tasks: published "
            "→ rlvr (base, plus) |", "|---|---:|---:|---|---|---|"]
    for r in doc["runs"]:
        pub, ours = r["pass@1_published"], r["pass@1_rlvr"]
        differ = "; ".join(f"{x['task_id']}: {'/'.join(x['published'])} → {'/'.join(x['rlvr'])} "
                           f"({x['rlvr_verdict']['verdict']}, {x['rlvr_verdict']['passed']}/"
                           f"{x['rlvr_verdict']['total']})" for x in r["disagreeing"]) or "none"
        opts = " " + " ".join(r["options"]) if r["options"] else ""
        rows.append(f"| {r['model']}, `{r['dataset']}`{opts} ({r['published_date']}) | {r['tasks']} | {r['agreeing']} "
                    f"| {pub['base']:.3f} / {pub['plus']:.3f} | {ours['base']:.3f} / {ours['plus']:.3f} | {differ} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """CLI entry (see the module docstring). Returns 0; raises ``SystemExit`` on a file that does not fit."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qwen-repo", type=Path)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--models", nargs="+", default=["7b-base", "1.5b-base"])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("published_qwen2.5-coder.json"))
    ap.add_argument("--table", action="store_true", help="print --out's Markdown table and stop (no judging)")
    a = ap.parse_args(argv)
    if a.table:
        print(table(json.loads(a.out.read_text())), end="")
        return 0
    if a.qwen_repo is None or a.work is None:
        ap.error("--qwen-repo and --work are required to judge")
    rlvr = os.environ.get("RLVR") or shutil.which("rlvr") or str(Path(sys.executable).with_name("rlvr"))
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    results = [compare(m, ds, a.qwen_repo, a.work, rlvr) for ds in a.datasets for m in a.models]
    doc = {"command": "bench/parity/published.py", "rlvr_commit": head, "runs": results}
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(a.out)
    for r in results:
        differ = [x["task_id"] for x in r["disagreeing"]]
        print(f"{r['model']} {r['dataset']}: {r['agreeing']}/{r['tasks']} tasks agree; "
              f"pass@1 published {r['pass@1_published']}, rlvr {r['pass@1_rlvr']}; differ: {differ}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
