"""bench/repair/turn_tokens.py: the percentile summary and cut counts, the recommended cap, the texts counted (the
answer as a fenced block, the prompt in Qwen2.5's chat framing, the protocol's feedback), and the row selection the
stages apply; the real Qwen vocabulary (fetched from PyPI) only in the slow test."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from rlvr.data.prompts import build_prompt
from rlvr.data.schema import CallTest, Problem, StdioTest, write_problems
from rlvr.repair.protocol import EnvConfig
from rlvr.train.overlap import in_rl_share

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("turn_tokens", ROOT / "bench/repair/turn_tokens.py")
tt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tt)

TEMPLATE = ("Wrong answer on the visible test. Input:\n```\n{input}\n```\nYour output:\n```\n{actual}\n```\n"
            "Expected output:\n```\n{expected}\n```\n\n{protocol}")


def _stdio(pid: str, n_tests: int, split: str = "train", solution: str = "print(input())\n") -> Problem:
    return Problem(id=pid, source=pid.split("/")[0], split=split, statement=f"Echo the line ({pid}).",
                   tests=[StdioTest(stdin=f"in{i}\n", stdout=f"out{i}\n") for i in range(n_tests)],
                   solutions=[solution] if solution else [])


def test_nearest_rank_is_the_ceil_rank_value():
    xs = list(range(100, 0, -1))  # 1..100, unsorted
    assert [tt.nearest_rank(xs, q) for q in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert tt.nearest_rank([7, 3, 5], 50) == 5
    assert tt.nearest_rank([4], 1) == 4
    with pytest.raises(ValueError, match="no values"):
        tt.nearest_rank([], 50)
    with pytest.raises(ValueError, match="outside"):
        tt.nearest_rank([1], 0)


def test_summarize_counts_a_turn_over_the_cap_with_its_end_token():
    s = tt.summarize([767, 768, 100, 2048], [2000, 2000, 300, 6000], {"turn": 768, "grpo": 2048}, extra=1)
    # 767 + <|im_end|> = 768 fits; 768 + 1 does not; 2048 + 1 exceeds GRPO's 2,048 too
    assert s["over_turn"] == {"cap": 768, "count": 2, "share": 0.5}
    assert s["over_grpo"] == {"cap": 2048, "count": 1, "share": 0.25}
    assert (s["count"], s["p50"], s["max"]) == (4, 767, 2048)
    assert s["chars_per_token"] == round(10300 / 3683, 3)
    assert tt.summarize([], [], {"turn": 768}) == {"count": 0}
    with pytest.raises(ValueError, match="3 token counts but 2 char counts"):
        tt.summarize([1, 2, 3], [1, 2], {})


def test_cap_holding_leaves_room_and_the_end_token():
    assert tt.cap_holding(830, 128) == 960  # 959 -> next multiple of 64
    assert tt.cap_holding(767, 0) == 768  # 767 + <|im_end|> fits exactly
    assert tt.cap_holding(768, 0) == 832


def test_texts_render_the_fenced_answer_the_prompt_and_the_feedback():
    p = _stdio("codecontests/1_a", 6, solution="x = input()\nprint(x)\n\n\n")
    cfg = EnvConfig(turns=3, feedback_template=TEMPLATE, feedback_chars=1000)
    t = tt.texts(p, cfg)
    assert t["answer"] == "```python\nx = input()\nprint(x)\n```"
    assert t["user"] == build_prompt(p)
    assert t["prompt"] == (f"<|im_start|>system\n{tt.SYSTEM}<|im_end|>\n<|im_start|>user\n{build_prompt(p)}"
                           "<|im_end|>\n<|im_start|>assistant\n")
    fb = t["feedback"]
    assert "Input:\n```\nin0\n```" in fb and "Expected output:\n```\nout0\n```" in fb
    assert "(2 of 3 answers left)" in fb
    assert not any(f"in{i}" in fb or f"out{i}" in fb for i in range(1, 6))  # nothing of a hidden test
    assert tt.feedback_turn("F").startswith("\n<|im_start|>user\nF<|im_end|>")


def test_feedback_is_none_without_a_visible_test_and_answer_none_without_a_reference():
    p = _stdio("mbpp/2", 1, solution="")  # one test: it stays hidden, no visible test
    t = tt.texts(p, EnvConfig())
    assert t["feedback"] is None and t["answer"] is None
    call = Problem(id="leetcode/3", source="leetcode", split="train", statement="Add.", entry_point="add",
                   starter_code="def add(a, b):\n", solutions=["def add(a, b):\n    return a + b\n"],
                   tests=[CallTest(args="[1, 2]", expected="3", public=True), CallTest(args="[2, 2]", expected="4")])
    fb = tt.feedback_text(call, EnvConfig(feedback_template=TEMPLATE))
    assert "add(1, 2)" in fb and "add(2, 2)" not in fb


def test_select_rows_applies_the_stages_filters(tmp_path: Path):
    probs = tmp_path / "gov" / "problems"
    probs.mkdir(parents=True)
    ids = [f"codecontests/p{i}" for i in range(40)]
    write_problems(probs / "codecontests.jsonl",
                   [_stdio(ids[0], 5), _stdio(ids[1], 6), _stdio(ids[2], 4), _stdio(ids[3], 9),
                    _stdio("codecontests/t", 9, split="test")] + [_stdio(i, 6) for i in ids[4:]])
    (tmp_path / "gov" / "contamination.jsonl").write_text(json.dumps({"id": ids[3], "flagged": True}) + "\n")
    params = {"train": {"train_sets": ["codecontests/train"], "rl_share": 1.0}, "manifests": {"grpo_min_tests": 5},
              "repair": {"visible_tests": 1, "datasets": [{"name": "mbpp_reg"}], "train": {"min_hidden_tests": 5}}}
    rows, counts = tt.select_rows(probs, params)
    # GRPO: >= 5 tests, not flagged; repair: >= 5 hidden tests (one of the tests is visible), flags not read
    assert [p.id for p in rows["grpo"]] == [ids[0], ids[1], *ids[4:]]
    assert [p.id for p in rows["repair"]] == [ids[1], ids[3], *ids[4:]]
    assert counts["grpo"]["contaminated"] == 1 and counts["repair"]["too_few_tests"] == 2
    params["train"]["rl_share"] = 0.5
    half, _ = tt.select_rows(probs, params)
    assert [p.id for p in half["grpo"]] == [p.id for p in rows["grpo"] if in_rl_share(p.id, 0.5)]
    assert 0 < len(half["grpo"]) < len(rows["grpo"])


def test_table_prints_a_row_per_set_and_source_with_the_sweep_columns():
    caps = {"turn_tokens": 768, "max_response_length": 2048, "max_prompt_length": 1024}
    a = tt.summarize([10, 900], [30, 2700], {"turn_tokens": 768, "max_response_length": 2048, "turn_1024": 1024},
                     extra=1)
    pr = tt.summarize([50, 1060], [200, 4000], {"max_prompt_length": 1024})
    res = {"repair": {"mbpp": {"answer": a, "prompt": pr, "feedback_turn": {"count": 0}, "no_reference": 0},
                      "longest": []}}
    out = tt.table(res, caps, (768, 1024)).splitlines()
    assert out[0].startswith("| set | source | answers | p50 | p90 | p99 | max | cut at 768 (turn) | cut at 1,024 |")
    assert out[2] == ("| repair | mbpp | 2 | 10 | 900 | 900 | 900 | 1 (50.0 %) | 0 (0.0 %) | 0 (0.0 %) | 3.0 "
                      "| 1 (50.0 %) | 1,060 / 1,060 | - |")


@pytest.mark.slow
def test_qwen_vocabulary_reproduces_qwen2_token_ids():
    """Needs PyPI (tiktoken and the dashscope wheel, ~5 MB, cached under /tmp/rlvr-turn-tokens); skipped offline."""
    try:
        enc = tt.qwen_encoding(Path("/tmp/rlvr-turn-tokens"))
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"Qwen vocabulary not fetchable here: {exc}")
    # Qwen2/2.5's ids: "Hello, world" and the chat header "<|im_start|>user\n"
    assert enc.encode("Hello, world") == [9707, 11, 1879]
    assert enc.encode("<|im_start|>user\n", allowed_special="all") == [151644, 872, 198]
    assert tt.count(enc, tt.chat_prompt("")) == len(enc.encode(tt.chat_prompt(""), allowed_special="all"))
