"""Near-duplicate audit: planted duplicates found, clean data untouched, deterministic, datasketch-exact signatures,
monotone in the threshold, and real numbers on bundled HumanEval/HumanEval+ and MBPP/sanitized-MBPP."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from datasketch import LeanMinHash, MinHash, MinHashLSH
from pydantic import ValidationError

from rlvr.data.neardup import (
    NearDupConfig,
    exact_jaccard,
    find_near_duplicates,
    minhash_signatures,
    near_dedup,
    near_duplicate_pairs,
    shingle_set,
    shingle_sets,
)
from rlvr.data.schema import Problem, StdioTest

WORDS = ("array integer string graph tree node edge path sum maximum minimum count number query answer modulo "
         "prime divisor subsequence substring palindrome matrix grid cell row column distance weight cost value "
         "index pair triple window interval segment order sorted reverse rotate shift balance bracket digit "
         "binary decimal even odd positive negative zero length width height area volume point line circle").split()


def _text(rng: random.Random, n: int = 60) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _p(pid: str, statement: str, role: str) -> Problem:
    return Problem(id=pid, source=pid.split("/")[0], split="x", statement=statement,
                   tests=[StdioTest(stdin="1", stdout="1")], meta={"role": role})


def _perturb(text: str, k: int, rng: random.Random) -> str:
    w = text.split()
    for _ in range(k):
        w[rng.randrange(len(w))] = rng.choice(WORDS) + "x"
    return " ".join(w)


@pytest.fixture
def planted() -> list[Problem]:
    rng = random.Random(0)
    e, t3 = _text(rng), _text(rng)
    return [
        _p("train/0", _perturb(e, 2, rng), "train"),  # near copy of an eval statement, loaded before it
        _p("humaneval/0", e, "test"),
        _p("train/1", e.upper().replace(" ", "  \n"), "train"),  # exact after normalisation
        _p("train/2", t3, "train"),
        _p("train/3", _perturb(t3, 1, rng), "train"),  # train-train near copy
        _p("train/4", _text(rng), "train"),
        _p("mbpp/0", _text(rng), "dev"),
    ]


def test_signatures_equal_datasketch() -> None:
    sets = [shingle_set(_text(random.Random(i), 40 + i), NearDupConfig()) for i in range(5)]
    sig = minhash_signatures(sets, 64, 7, max_rows=50)  # small chunks: exercises the chunk boundaries
    for s, row in zip(sets, sig, strict=True):
        m = MinHash(num_perm=64, seed=7, scheme="affine32", hashfunc=lambda x: x)
        m.update_batch([int(v) & 0xFFFFFFFF for v in s])
        assert np.array_equal(m.hashvalues, row)


def test_planted_duplicates_clustered_and_dropped(planted: list[Problem]) -> None:
    kept, rep = near_dedup(planted, NearDupConfig())
    clusters = {tuple(c.members): c for c in rep.clusters}
    assert set(clusters) == {("train/0", "humaneval/0", "train/1"), ("train/2", "train/3")}
    c = clusters[("train/0", "humaneval/0", "train/1")]
    assert c.representative == "humaneval/0"  # eval role wins over the first-loaded training copy
    assert sorted(c.dropped) == ["train/0", "train/1"]
    assert clusters[("train/2", "train/3")].representative == "train/2"  # first loaded
    assert [p.id for p in kept] == ["humaneval/0", "train/2", "train/4", "mbpp/0"]
    assert {d["id"]: d["duplicate_of"] for d in rep.dropped} == {
        "train/0": "humaneval/0", "train/1": "humaneval/0", "train/3": "train/2"}
    assert all(jac >= 0.7 for c in rep.clusters for _, _, jac in c.pairs)
    assert rep.n_verified == 4 and rep.counts()["near_dup_dropped"] == 3


def test_clean_fixture_has_no_duplicates() -> None:
    rng = random.Random(1)
    probs = [_p(f"train/{i}", _text(rng), "train") for i in range(200)] + [_p("test/0", "", "test")]
    rep = find_near_duplicates(probs, NearDupConfig())
    assert rep.clusters == [] and rep.dropped == [] and rep.n_empty == 1


def test_eval_duplicates_kept_unless_configured() -> None:
    rng = random.Random(2)
    t = _text(rng)
    probs = [_p("humaneval/0", t, "test"), _p("humanevalplus/0", t, "test"), _p("x/0", t, "train")]
    assert near_dedup(probs, NearDupConfig())[1].dropped_ids() == {"x/0"}
    assert near_dedup(probs, NearDupConfig(drop_eval_duplicates=True))[1].dropped_ids() == {"humanevalplus/0", "x/0"}
    # role_of overrides meta: now the first problem is training data and the eval one represents the cluster
    rep = find_near_duplicates(probs, NearDupConfig(), role_of={"humaneval/0": "train"})
    assert rep.clusters[0].representative == "humanevalplus/0"
    assert rep.dropped_ids() == {"humaneval/0", "x/0"}


def test_deterministic(planted: list[Problem]) -> None:
    a = find_near_duplicates(planted, NearDupConfig(seed=3)).model_dump()
    b = find_near_duplicates(list(planted), NearDupConfig(seed=3)).model_dump()
    assert a == b


def test_threshold_monotone_and_exact() -> None:
    rng = random.Random(4)
    base = _text(rng, 80)
    texts = [base] + [_perturb(base, k, rng) for k in (0, 1, 2, 4, 6, 9, 13, 18)] + [_text(rng, 80) for _ in range(20)]
    cfg0 = NearDupConfig()
    sets = [shingle_set(t, cfg0) for t in texts]
    found = []
    for th in (0.3, 0.5, 0.7, 0.9):
        pairs, _ = near_duplicate_pairs(texts, NearDupConfig(threshold=th))
        for i, j, jac in pairs:
            assert jac == pytest.approx(exact_jaccard(sets[i], sets[j])) and jac >= th
        found.append({(i, j) for i, j, _ in pairs})
    assert all(a >= b for a, b in itertools.pairwise(found))  # higher threshold, subset of pairs
    assert found[0] != found[-1] and found[-1]


def test_char_shingles_and_bad_input() -> None:
    cfg = NearDupConfig(shingle="char", shingle_size=5)
    rng = random.Random(5)
    t = _text(rng)
    rep = find_near_duplicates([_p("a/0", t, "test"), _p("b/0", t.replace("a", "e", 1), "train")], cfg)
    assert rep.dropped_ids() == {"b/0"}
    with pytest.raises(ValueError, match="duplicate problem id 'a/0'"):
        find_near_duplicates([_p("a/0", t, "test"), _p("a/0", t, "test")], cfg)
    with pytest.raises(ValidationError):
        NearDupConfig(threshold=1.5)
    with pytest.raises(ValidationError):
        NearDupConfig(lsh_weights=(0.5, 0.6))


def test_bundled_humaneval_plus_identical_and_mbpp_overlap() -> None:
    from rlvr.data.loaders import load

    he, hep = load("humaneval"), load("humanevalplus")
    rep = find_near_duplicates(he + hep, NearDupConfig())
    jac = {(a, b): j for c in rep.clusters for a, b, j in c.pairs}
    # 163 of 164 HumanEval statements reappear verbatim in HumanEval+; EvalPlus edited HumanEval/115's text
    for p in he:
        key = (p.id, p.id.replace("humaneval/", "humanevalplus/"))
        assert jac[key] == 1.0 if p.id != "humaneval/HumanEval/115" else 0.7 <= jac[key] < 1.0
    mbpp, san = load("mbpp"), load("mbpp_sanitized")
    for p in mbpp:
        p.meta["role"] = "test"
    for p in san:
        p.meta["role"] = "train"
    rep = find_near_duplicates(mbpp + san, NearDupConfig())
    assert len(rep.dropped) > 100  # sanitized MBPP rewords a minority of prompts; most stay near-identical
    assert all(d["duplicate_of"].startswith("mbpp/") for d in rep.dropped)


def _corpus(n: int = 600, seed: int = 3) -> list[str]:
    """Random statements with planted near copies, short and empty texts, and Unicode to normalise."""
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(n):
        r = rng.random()
        if texts and r < 0.25:
            src = rng.choice(texts)
            texts.append(_perturb(src, rng.randint(0, 3), rng) if src.split() else src)
        elif r < 0.3:
            texts.append(rng.choice(["", "a", "sum b", "x y z", "!!", "Ｓum\xa0OF ａ", "odd odd odd odd"]))
        else:
            texts.append(_text(rng, rng.randint(3, 80)))
    return texts


@pytest.mark.parametrize("shingle,size", [("word", 1), ("word", 2), ("word", 3), ("word", 5), ("char", 4)])
def test_batch_shingles_equal_per_text(shingle: str, size: int) -> None:
    cfg = NearDupConfig(shingle=shingle, shingle_size=size)
    texts = _corpus(300)
    flat, sizes = shingle_sets(texts, cfg)
    ref = [shingle_set(t, cfg) for t in texts]
    assert sizes.tolist() == [r.size for r in ref] and 0 in sizes.tolist()
    assert np.array_equal(flat, np.concatenate(ref))


@pytest.mark.parametrize("workers", [1, 2])
def test_index_matches_datasketch_public_api(workers: int) -> None:
    """The batched query-then-insert (band keys from one byte string, forked signers) gives the candidates, pairs and
    index that datasketch's own MinHashLSH.query/insert with a LeanMinHash per text give."""
    cfg = NearDupConfig(batch_size=64, workers=workers, num_perm=64)
    texts = _corpus()
    pairs, idx = near_duplicate_pairs(texts, cfg)
    ref = MinHashLSH(threshold=cfg.threshold, num_perm=cfg.num_perm, weights=cfg.lsh_weights)
    ref_pairs, ref_cands, mins = [], 0, {}
    for j, t in enumerate(texts):
        s = shingle_set(t, cfg)
        if not s.size:
            continue
        m = MinHash(num_perm=cfg.num_perm, seed=cfg.seed, scheme="affine32", hashfunc=lambda x: x)
        m.update_batch([int(v) & 0xFFFFFFFF for v in s])
        mins[j] = LeanMinHash(m)
        cands = ref.query(mins[j])
        ref_cands += len(cands)
        ref_pairs += [(i, j, exact_jaccard(shingle_set(texts[i], cfg), s)) for i in sorted(cands)]
        ref.insert(j, mins[j])
    ref_pairs = sorted(p for p in ref_pairs if p[2] >= cfg.threshold)
    assert len(pairs) > 20 and pairs == ref_pairs and idx.n_candidates == ref_cands
    assert idx.n_empty == len(texts) - len(mins) > 0
    for j, m in mins.items():  # the index is a complete datasketch index
        assert j in idx.lsh and sorted(idx.lsh.query(m)) == sorted(ref.query(m))
