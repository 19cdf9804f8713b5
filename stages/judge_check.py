"""Stage ``judge_check``: run every reference solution of the governed datasets through the judge.

Reads ``data/governance/problems/*.jsonl`` (the governed sets, EvalPlus oracles filled) and, for the datasets in
``full_datasets``, every record of the bundled file as loaded before governance removes anything (MBPP: all 974,
including training problems dropped as duplicates or contamination; reported as ``<name>-all``). Writes
``metrics/judge_check/<dataset>.json`` (the accepted fraction; in ``metrics/provenance/judge_check/``: accepted /
rejected / verdict counts / each rejection with its reason; the judge version in
``metrics/provenance/judge_check.json``; ``rlvr.layout.read_metrics("metrics/judge_check.json")`` reads it all back).
Fails when a dataset in ``must_pass`` has any rejection, so a judge regression on HumanEval/MBPP/EvalPlus canonical
solutions stops the pipeline. A reference near its limit is settled as in governance, recorded margins included
(``data/recorded_margins.json``, ``--recorded-margins``, :mod:`rlvr.judge.recorded`), so both stages agree on it.

    python stages/judge_check.py [--params params.yaml]
"""

from __future__ import annotations

from pathlib import Path

import click

from rlvr.data.schema import read_problems
from rlvr.judge import JUDGE_VERSION
from rlvr.judge.check import JudgeCheckParams, check_references
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.judge.recorded import DEFAULT_FILE as RECORDED_FILE
from rlvr.judge.recorded import RecordedMargins
from rlvr.progress import progress
from rlvr.stage import Params, Result, option, stage


@stage(option("--problems-dir", default="data/governance/problems", type=click.Path(exists=True)),
       option("--out", default="metrics/judge_check", path=True, help="folder: a scores file per dataset"),
       option("--recorded-margins", "recorded_path", default=RECORDED_FILE, path=True,
              help="committed settle margins of trusted programs near a limit (rlvr.judge.recorded)"))
def main(params: Params, problems_dir: str, out: Path, recorded_path: Path) -> Result:
    """Judge every dataset's reference solutions and write the per-dataset report."""
    from rlvr.data.bundled import canonical_name
    from rlvr.data.loaders import load

    cfg = params.section("judge_check", JudgeCheckParams)
    recorded = RecordedMargins.read(recorded_path)
    must_pass = [canonical_name(n) if not n.endswith("-all") else n for n in cfg.must_pass]  # default versions filled
    report: dict[str, object] = {"judge_version": JUDGE_VERSION}
    sets = [(path.stem, lambda path=path: read_problems(path)) for path in sorted(Path(problems_dir).glob("*.jsonl"))]
    sets += [(f"{name.replace(':', '-')}-all", lambda name=name: load(name)) for name in cfg.full_datasets]
    lines, failures = [], []
    with open_judge(params.path, get_judge) as judge:
        for key, problems in progress(sets, desc="judge_check", unit="dataset"):
            res = check_references(problems(), judge, cfg.max_listed, recorded=recorded)
            report[key] = res
            lines.append(f"{key}: {res['accepted']}/{res['with_reference']} accepted {res['verdicts']}")
            if key in must_pass and res["rejected"]:
                failures.append(f"{key}: {res['rejected']} reference solution(s) rejected")
    failures += [f"{n}: dataset listed in judge_check.must_pass but not in {problems_dir}"
                 for n in must_pass if n not in report]
    return Result(folders={out: report}, echo="\n".join(lines),
                  error=("judge_check failed:\n  " + "\n  ".join(failures)) if failures else None)


if __name__ == "__main__":
    main()
