"""mbpp_reg (Dev): the committed id list follows its rule, shares no id or paraphrase with the Test sets, loads bundled
and from the (patched) Hub, and its MBPP train copies are removed from Train by the governance exact dedup."""

from __future__ import annotations

import json

import datasets
import pytest

from rlvr.data.bundled import default_raw_dir, read_id_list, resolve
from rlvr.data.dedup import exact_dedup
from rlvr.data.errors import DataError
from rlvr.data.loaders import load, load_bundled, mbpp_split
from rlvr.data.mbpp_reg import IDS_FILE, derive_from_bundled, derive_ids, render_ids_file


def test_committed_file_is_the_rule_output():
    ids, counts = derive_from_bundled()
    assert (default_raw_dir() / IDS_FILE).read_text(encoding="utf-8") == render_ids_file(ids, counts)
    assert 100 <= len(ids) <= 200 and counts["from_prompt_validation"] + counts["from_train"] == len(ids)


def test_disjoint_from_every_test_set_by_id():
    reg = {int(p.meta["task_id"]) for p in load("mbpp_reg")}
    test_ids = {int(p.meta["task_id"]) for p in load("mbpp_sanitized")}
    for spec in ("mbppplus:v0.1.0", "mbppplus:v0.2.0"):
        test_ids |= {int(str(p.meta["task_id"]).split("/")[-1]) for p in load(spec)}
    assert len(reg) == 100 and not reg & test_ids
    assert all(not 11 <= t <= 510 for t in reg)  # the MBPP test split is never used


def test_problems_are_mbpp_records_renamed():
    reg = load_bundled("mbpp_reg")
    full = {p.meta["task_id"]: p for p in load_bundled("mbpp")}
    assert {p.split for p in reg} == {"dev"} and {p.source for p in reg} == {"mbpp_reg"}
    for p in reg:
        src = full[p.meta["task_id"]]
        assert p.id == f"mbpp_reg/{p.meta['task_id']}" and p.meta["mbpp_split"] == src.split
        assert p.statement == src.statement and p.tests == src.tests and p.solutions == src.solutions


def test_train_copies_removed_by_exact_dedup():
    reg = load_bundled("mbpp_reg")
    train = [p for p in load_bundled("mbpp") if p.split == "train"]
    for p in reg:
        p.meta["role"] = "dev"
    for p in train:
        p.meta["role"] = "train"
    shared = {f"mbpp/{p.meta['task_id']}" for p in reg if p.meta["mbpp_split"] == "train"}
    kept, rep = exact_dedup(train + reg)
    dropped = {d["id"]: d for d in rep.dropped}
    assert len(shared) == 54 and shared <= set(dropped)
    assert all(dropped[i]["reason"] == "train_overlaps_eval" for i in shared)
    assert not shared & {p.id for p in kept} and sum(p.source == "mbpp_reg" for p in kept) == 100


def test_derive_rule_order_and_errors():
    split_of = {1: "prompt", 11: "test", 511: "validation", 512: "validation", 601: "train", 602: "train", 603: "train"}
    assert derive_ids(split_of, excluded={512, 601}, size=3) == [1, 511, 602]
    with pytest.raises(ValueError, match="only 6 ids qualify"):
        derive_ids(split_of, excluded=set(), size=7)
    with pytest.raises(ValueError, match="more than size"):
        derive_ids(split_of, excluded=set(), size=2)


def test_id_file_errors_name_file_and_line(tmp_path):
    f = tmp_path / "ids.txt"
    f.write_text("# header\n1\n\nx2\n")
    with pytest.raises(DataError, match=rf"{f}:4: not an integer id: 'x2'"):
        read_id_list(f)
    f.write_text("1\n2 # note\n1\n")
    with pytest.raises(DataError, match=rf"{f}:3: id 1 listed twice"):
        read_id_list(f)
    f.write_text("# only a header\n")
    with pytest.raises(DataError, match="no ids listed"):
        read_id_list(f)


def test_listed_id_missing_from_data_is_an_error(tmp_path):
    ids_file = resolve("mbpp_reg").aux["ids"]
    (tmp_path / "mbpp").mkdir()
    lines = (default_raw_dir() / "mbpp/mbpp.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "mbpp" / "mbpp.jsonl").write_bytes(b"".join(lines[:10]))  # only task ids 1-10
    (tmp_path / ids_file.path).write_bytes((default_raw_dir() / ids_file.path).read_bytes())
    with pytest.raises(DataError, match=r"mbpp_reg_ids\.txt: 97 listed ids not found in the data: \[511, "):
        load_bundled("mbpp_reg", tmp_path, verify=False)


def test_hub_reads_every_split_and_keeps_listed_ids(monkeypatch):
    rows = {s: [] for s in ("train", "test", "validation", "prompt")}
    for line in (default_raw_dir() / "mbpp/mbpp.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        rows[mbpp_split(rec["task_id"])].append(rec)
    calls = []

    def fake_load_dataset(path, name=None, *, split=None, **kw):
        calls.append((path, name, split))
        return datasets.Dataset.from_list(rows[split])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    hub = load("mbpp_reg", "hub", splits=["dev"])
    assert sorted(c[2] for c in calls) == ["prompt", "test", "train", "validation"]
    assert {c[:2] for c in calls} == {("google-research-datasets/mbpp", "full")}
    bundled = load_bundled("mbpp_reg")
    assert sorted(p.id for p in hub) == sorted(p.id for p in bundled)
    assert load("mbpp_reg", "hub", splits=["validation"]) == []
