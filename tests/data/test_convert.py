"""``rlvr convert``: verl RL parquet (rows as verl's preprocess scripts write them) → rlvr problems JSONL."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rlvr.cli import main
from rlvr.data.export import write_verl_parquet
from rlvr.data.schema import AssertTest, Problem, StdioTest, read_problems


def _rows() -> list[dict]:
    def row(ds, q, gt, i):
        return {"data_source": ds,
                "prompt": [{"role": "system", "content": "You are a coder."}, {"role": "user", "content": q}],
                "ability": "code", "reward_model": {"style": "rule", "ground_truth": json.dumps(gt)},
                "extra_info": {"split": "train", "index": i}}

    return [
        row("codecontests", "Print a+b.", {"inputs": ["1 2\n"], "outputs": ["3\n"]}, 0),
        row("taco", "Write add.", {"fn_name": "add", "inputs": [[1, 2], [0, 0]], "outputs": [[3], [0]]}, 1),
    ]


def test_convert_verl_rows(tmp_path):
    src = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(_rows()), src)
    out = tmp_path / "problems.jsonl"
    res = CliRunner().invoke(main, ["convert", str(src), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert '"call": 1' in res.output and '"stdio": 1' in res.output
    a, b = read_problems(out)
    assert (a.id, a.source, a.split, a.statement) == ("codecontests/train/0", "codecontests", "train", "Print a+b.")
    assert isinstance(a.tests[0], StdioTest) and a.meta["prompt"][0]["role"] == "system"
    assert b.id == "taco/train/1" and all(isinstance(t, AssertTest) for t in b.tests) and len(b.tests) == 2
    assert b.entry_point.startswith("add if ")


def test_convert_rlvr_own_parquet_roundtrips(tmp_path):
    p = Problem(id="demo/1", source="demo", split="test", statement="Echo.",
                tests=[StdioTest(stdin="x\n", stdout="x\n")])
    src = tmp_path / "rl.parquet"
    write_verl_parquet([p], src)
    out = tmp_path / "p.jsonl"
    assert CliRunner().invoke(main, ["convert", str(src), "--out", str(out)]).exit_code == 0
    (q,) = read_problems(out)
    assert (q.id, q.split, q.tests) == ("demo/1", "test", p.tests)


def test_convert_errors_name_file_row_field(tmp_path):
    rows = _rows()
    rows[1]["reward_model"]["ground_truth"] = json.dumps({"inputs": [[1]], "outputs": []})
    src = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist(rows), src)
    res = CliRunner().invoke(main, ["convert", str(src), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert f"{src}:row 1: field 'reward_model.ground_truth'" in res.output
    assert not (tmp_path / "o.jsonl").exists()
    dup = tmp_path / "dup.parquet"
    pq.write_table(pa.Table.from_pylist(_rows()[:1] * 2), dup)
    res = CliRunner().invoke(main, ["convert", str(dup), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code != 0 and "repeats" in res.output


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_converted_problems_judge(tmp_path, judge):
    src = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(_rows()), src)
    out = tmp_path / "problems.jsonl"
    assert CliRunner().invoke(main, ["convert", str(src), "--out", str(out)]).exit_code == 0
    a, b = read_problems(out)
    res = judge.judge_many([(a, "a, b = map(int, input().split())\nprint(a + b)\n"),
                            (b, "def add(a, b):\n    return a + b\n")])
    assert [r.verdict for r in res] == ["accepted", "accepted"]
