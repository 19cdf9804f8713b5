"""The file formats the report reads (rlvr.report.formats): DVC-plots TSVs, their alignment by step, flattened keys."""

from __future__ import annotations

import math

import pytest

from rlvr.report import collect, formats
from rlvr.report.formats import align_columns, flatten, read_tsv


def test_read_tsv_sorts_and_parses(tmp_path):
    p = tmp_path / "c.tsv"
    p.write_text("step\treward_mean\tkl\n2\t0.5\t\n1\t0.25\tx\n")
    cols = read_tsv(p)
    assert cols["step"] == [1.0, 2.0] and cols["reward_mean"] == [0.25, 0.5]
    assert all(math.isnan(v) for v in cols["kl"])


@pytest.mark.parametrize("content, match", [("", "empty TSV"), ("loss\n1\n", "line 1: no 'step'"),
                                            ("step\tx\n1\t2\t3\n", "line 2: 3 cells")])
def test_read_tsv_errors_name_file_and_line(tmp_path, content, match):
    p = tmp_path / "bad.tsv"
    p.write_text(content)
    with pytest.raises(ValueError, match=match) as ei:
        read_tsv(p)
    assert "bad.tsv" in str(ei.value)


def test_flatten():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": None}) == {"a.b": 1, "a.c.d": [1, 2], "e": None}


def test_align_columns_follows_the_steps_and_fills_nan():
    cost = {"step": [3.0, 1.0], "judge_step_s": [0.3, 0.1], "gen_s": [3.0, 1.0]}
    out = align_columns(cost, [1.0, 2.0, 3.0])
    assert set(out) == {"judge_step_s", "gen_s"} and out["gen_s"][::2] == [1.0, 3.0]
    assert out["judge_step_s"][0] == 0.1 and math.isnan(out["judge_step_s"][1])


def test_the_readers_stay_importable_from_collect():
    assert (collect.read_tsv, collect.read_json, collect.flatten) == (formats.read_tsv, formats.read_json,
                                                                      formats.flatten)
