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


@pytest.mark.parametrize("pad_mode", ["right", "no_padding"])
def test_every_kept_row_loads_in_verls_sft_dataset_with_truncation_error(tmp_path, pad_mode):
    """The rule's token count matches verl's own: rows kept just under the budget load through verl 0.9.1's
    ``MultiTurnSFTDataset`` (``truncation=error``, as the overrides set) without the length error, and a row one token
    over the budget is refused there (so the check below can fail)."""
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    from rlvr.train.verl.data import write_sft_parquet

    tok = build_tokenizer(["Print the number. word " * 10, "print(1)"] * 20, vocab_size=400)
    max_length = 256
    pairs = [(_problem(i, words), "print(1)") for i, words in enumerate(range(40, 100))]
    kept, stats = filter_by_length(pairs, tok, max_length=max_length)
    assert 0 < stats["rows_kept"] < stats["rows_in"]  # the budget falls inside the range of lengths
    assert stats["max_tokens_kept"] >= max_length - LENGTH_MARGIN_TOKENS - 2  # a row right at the edge is kept
    path = tmp_path / "sft.parquet"
    write_sft_parquet(kept, path)
    cfg = {"max_length": max_length, "truncation": "error", "messages_key": "messages", "pad_mode": pad_mode}
    ds = MultiTurnSFTDataset(str(path), tok, cfg)
    assert len(ds) == len(kept)
    for i in range(len(ds)):
        ds[i]  # raises ValueError("sequence_length=... is larger than self.max_length=...") on a long row
    tight = MultiTurnSFTDataset(str(path), tok, {**cfg, "max_length": stats["max_tokens_kept"] - 1})
    with pytest.raises(ValueError, match="larger than"):
        for i in range(len(tight)):
            tight[i]
