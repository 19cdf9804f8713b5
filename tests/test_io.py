"""rlvr.io: reading JSONL logs that other processes append to; curves TSVs split into plot and cost mirror."""

from __future__ import annotations

import pytest

from rlvr.io import atomic_write_jsonl, read_appended_jsonl
from rlvr.layout import read_curves, write_curves


def test_blank_lines_skipped_and_line_numbers_kept(tmp_path):
    f = tmp_path / "log.jsonl"
    f.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert list(read_appended_jsonl(f)) == [(1, {"a": 1}), (3, {"a": 2})]


def test_torn_last_line_is_skipped(tmp_path):
    f = tmp_path / "log.jsonl"
    atomic_write_jsonl(f, [{"a": 1}])
    with f.open("a") as fh:
        fh.write('{"a": ')
    assert list(read_appended_jsonl(f)) == [(1, {"a": 1})]


def test_bad_line_before_the_end_is_named(tmp_path):
    f = tmp_path / "log.jsonl"
    f.write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    with pytest.raises(ValueError, match=r"log.jsonl:2: not JSON"):
        list(read_appended_jsonl(f))


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_records_holding_unicode_line_separators_stay_whole(tmp_path, sep):
    """JSON Lines end at "\\n" only; ``ensure_ascii=False`` writes these characters raw, and ``str.splitlines``
    used to cut such a record in two (a random-init policy's rollout dump on the H100 had U+2029)."""
    f = tmp_path / "log.jsonl"
    rows = [{"output": f"a{sep}b"}, {"output": "c"}]
    atomic_write_jsonl(f, rows)
    assert sep in f.read_text(encoding="utf-8")
    assert [r for _, r in read_appended_jsonl(f)] == rows


def test_write_curves_puts_timing_columns_in_the_cost_mirror_and_read_curves_joins_them(tmp_path):
    rows = [{"step": 2, "reward_mean": "0.5", "judge_s": "1.25", "judged": "8"}, {"step": 1, "reward_mean": "0.25"}]
    plot, cost = write_curves(tmp_path / "metrics" / "grpo" / "seed-1.tsv", ["reward_mean", "judge_s", "judged"], rows)
    assert plot.read_text() == "step\treward_mean\tjudged\n2\t0.5\t8\n1\t0.25\t\n"
    assert cost == tmp_path / "metrics" / "cost" / "grpo" / "seed-1.tsv"
    assert cost.read_text() == "step\tjudge_s\n2\t1.25\n1\t\n"
    header, back = read_curves(plot)
    assert header == ["step", "reward_mean", "judged", "judge_s"]
    assert back == [{"step": "2", "reward_mean": "0.5", "judged": "8", "judge_s": "1.25"},
                    {"step": "1", "reward_mean": "0.25", "judged": "", "judge_s": ""}]
    # no timing column: no mirror, and a stale one is removed
    assert write_curves(plot, ["reward_mean"], rows) == (plot, None) and not cost.exists()
    assert read_curves(plot) == (["step", "reward_mean"], [{"step": "2", "reward_mean": "0.5"},
                                                           {"step": "1", "reward_mean": "0.25"}])
    with pytest.raises(ValueError, match="step"):
        write_curves(plot, ["step", "loss"], rows)
