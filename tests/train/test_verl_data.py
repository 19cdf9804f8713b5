"""The verl SFT parquet's length rule: rows over the token budget are dropped and counted, never left to verl's
``truncation=error`` (one long statement would end the run)."""

from __future__ import annotations

import pytest

from rlvr.data.schema import Problem, StdioTest
from rlvr.model.tiny import build_tokenizer
from rlvr.train.verl.data import LENGTH_MARGIN_TOKENS, filter_by_length


def _problem(i: int, words: int) -> Problem:
    return Problem(id=f"p{i}", source="synthetic", split="train", statement="Print the number. " + "word " * words,
                   tests=[StdioTest(stdin="", stdout="1")])


def test_long_rows_are_dropped_and_counted():
    tok = build_tokenizer(["Print the number. word " * 10, "print(1)"] * 20, vocab_size=400)
    pairs = [(_problem(0, 5), "print(1)"), (_problem(1, 2000), "print(1)"), (_problem(2, 10), "print(1)")]
    kept, stats = filter_by_length(pairs, tok, max_length=256)
    assert [p.id for p, _ in kept] == ["p0", "p2"]
    assert stats["dropped_over_length"] == 1 and stats["rows_in"] == 3 and stats["rows_kept"] == 2
    assert 0 < stats["max_tokens_kept"] <= 256 - LENGTH_MARGIN_TOKENS
    with pytest.raises(ValueError, match="must exceed the margin"):
        filter_by_length(pairs, tok, max_length=LENGTH_MARGIN_TOKENS)
