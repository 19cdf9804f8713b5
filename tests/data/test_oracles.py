"""Slow: call-test oracles (``rlvr/data/oracles.py``) of the bundled HumanEval+ tasks whose reference outputs are the
largest (HumanEval+/15: 147 MB of returned strings over 137 inputs, /130: 124 MB over 125) come out complete through
the real judge, as EvalPlus computes them: every input's output, equal to what the reference returns here."""

from __future__ import annotations

import gzip
import json

import pytest

from rlvr.data.bundled import default_raw_dir, resolve
from rlvr.data.loaders import load_bundled
from rlvr.data.oracles import fill_expected
from rlvr.data.schema import CallTest

SPEC = "humanevalplus:v0.1.10"
TASKS = ("HumanEval/15", "HumanEval/130")


@pytest.mark.slow
def test_oracles_of_the_largest_humanevalplus_outputs_are_complete(judge):
    problems = [p for p in load_bundled(SPEC) if p.meta["task_id"] in TASKS]
    assert len(problems) == len(TASKS)
    kept, report = fill_expected(problems, judge)
    assert report["dropped"] == [] and report["tests_failed"] == 0, report
    with gzip.open(default_raw_dir() / resolve(SPEC).files[0].path, "rt", encoding="utf-8") as fh:
        records = {r["task_id"]: r for r in map(json.loads, fh) if r["task_id"] in TASKS}
    for p in kept:
        rec = records[p.meta["task_id"]]
        ns: dict = {}
        exec(rec["prompt"] + rec["canonical_solution"], ns)  # the dataset's own reference (trusted, pure)
        fn = ns[rec["entry_point"]]
        want = [repr(fn(*args)) for args in rec["base_input"] + rec["plus_input"]]
        got = [t.expected for t in p.tests if isinstance(t, CallTest)]
        assert len(got) == len(want) and got == want, p.id
