"""Stage ``judge_check``: run every reference solution of the governed datasets through the judge.

Reads ``data/governance/problems/*.jsonl`` (the governed sets, EvalPlus oracles filled) and, for the datasets in
``full_datasets``, every record of the bundled file as loaded before governance removes anything (MBPP: all 974,
including training problems dropped as duplicates or contamination; reported as ``<name>-all``). Writes
``metrics/judge_check.json`` (per dataset: accepted / rejected / verdict counts / each rejection with its reason).
Fails when a dataset in ``must_pass`` has any rejection, so a judge regression on HumanEval/MBPP/EvalPlus canonical
solutions stops the pipeline.

    python stages/judge_check.py [--params params.yaml]
"""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import Field, field_validator

from rlvr.config import Section
from rlvr.data.schema import read_problems
from rlvr.judge import JUDGE_VERSION
from rlvr.judge.check import check_references
from rlvr.judge.client import get_judge
from rlvr.progress import progress
from rlvr.stage import Params, Result, closed_after, option, stage


class JudgeCheckParams(Section):
    """``judge_check`` section: datasets whose references must all be accepted; how many rejections to list."""

    must_pass: list[str] = Field(default_factory=list)
    full_datasets: list[str] = Field(default_factory=list)
    max_listed: int = 200

    @field_validator("must_pass")
    @classmethod
    def _one_spelling(cls, v: list[str]) -> list[str]:  # "humanevalplus:v0.1.10" = "humanevalplus-v0.1.10"
        from rlvr.data.bundled import canonical_name

        return [canonical_name(n) for n in v]


@stage(option("--problems-dir", default="data/governance/problems", type=click.Path(exists=True)),
       option("--out", default="metrics/judge_check.json", path=True))
def main(params: Params, problems_dir: str, out: Path) -> Result:
    """Judge every dataset's reference solutions and write the per-dataset report."""
    from rlvr.data.loaders import load

    cfg = params.section("judge_check", JudgeCheckParams)
    report: dict[str, object] = {"judge_version": JUDGE_VERSION}
    sets = [(path.stem, lambda path=path: read_problems(path)) for path in sorted(Path(problems_dir).glob("*.jsonl"))]
    sets += [(f"{name.replace(':', '-')}-all", lambda name=name: load(name)) for name in cfg.full_datasets]
    lines, failures = [], []
    with closed_after(get_judge()) as judge:
        for key, problems in progress(sets, desc="judge_check", unit="dataset"):
            res = check_references(problems(), judge, cfg.max_listed)
            report[key] = res
            lines.append(f"{key}: {res['accepted']}/{res['with_reference']} accepted {res['verdicts']}")
            if key in cfg.must_pass and res["rejected"]:
                failures.append(f"{key}: {res['rejected']} reference solution(s) rejected")
    failures += [f"{n}: dataset listed in judge_check.must_pass but not in {problems_dir}"
                 for n in cfg.must_pass if n not in report]
    return Result(json={out: report}, echo="\n".join(lines),
                  error=("judge_check failed:\n  " + "\n  ".join(failures)) if failures else None)


if __name__ == "__main__":
    main()
