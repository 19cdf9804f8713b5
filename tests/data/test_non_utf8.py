"""Bytes that are not UTF-8 in any input the loaders read (JSONL, gzipped JSONL, JSON array, auxiliary JSON, id
lists, Hub records) are a DataError naming the file, the line/record, the record id and the field."""

from __future__ import annotations

import gzip
import json

import datasets
import pytest

from rlvr.data.bundled import iter_records, read_id_list
from rlvr.data.errors import DataError
from rlvr.data.loaders import load, load_bundled

GOOD = {"task_id": 601, "text": "Return x.", "code": "def f(x): return x", "test_list": ["assert f(1) == 1"],
        "test_setup_code": "", "challenge_test_list": []}


def _bad_line(task_id: int, field: str = "text") -> bytes:
    """A JSONL line whose ``field`` holds the byte 0xff (invalid in UTF-8) right after ``"Ret``."""
    line = json.dumps({**GOOD, "task_id": task_id}).encode()
    marker = f'"{field}": "'.encode()
    at = line.index(marker) + len(marker) + 3
    return line[:at] + b"\xff" + line[at:] + b"\n"


@pytest.mark.parametrize("name", ["x.jsonl", "x.jsonl.gz"])
def test_jsonl_names_file_line_id_and_field(tmp_path, name):
    data = json.dumps(GOOD).encode() + b"\n\n" + _bad_line(777)
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(DataError) as exc:
        list(iter_records(path))
    msg = str(exc.value)
    assert msg.startswith(f"{path}:3: non-UTF-8 bytes b'\\xff' at byte ")
    assert "record id '777'" in msg and "field 'text'" in msg


def test_json_array_names_line_record_id_and_field(tmp_path):
    recs = [json.dumps({**GOOD, "task_id": 1}).encode(), _bad_line(2, "code").rstrip()]
    path = tmp_path / "x.json"
    path.write_bytes(b"[\n" + b",\n".join(recs) + b"\n]")
    with pytest.raises(DataError, match=rf"{path}:3 \(record 2\): non-UTF-8 bytes .*record id '2', field 'code'"):
        list(iter_records(path))


def test_unparsable_line_still_names_file_and_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n{\"text\": \"a\xc3\x28\n")
    with pytest.raises(DataError, match=rf"{path}:2: non-UTF-8 bytes b'\\xc3' at byte 11") as exc:
        list(iter_records(path))
    assert "record id" not in str(exc.value)


def test_load_bundled_reports_bad_byte_not_unicode_error(tmp_path):
    (tmp_path / "mbpp").mkdir()
    target = tmp_path / "mbpp" / "mbpp.jsonl"
    target.write_bytes(json.dumps(GOOD).encode() + b"\n" + _bad_line(602, "code"))
    with pytest.raises(DataError, match=rf"{target}:2: non-UTF-8 .*record id '602', field 'code'"):
        load_bundled("mbpp", tmp_path, verify=False)


def test_aux_reference_check_and_id_list(tmp_path):
    aux = tmp_path / "codecontests_subset300" / "reference_check.json"
    aux.parent.mkdir()
    (aux.parent / "codecontests_train_subset300.jsonl.gz").write_bytes(gzip.compress(b""))
    aux.write_bytes(b'{"per_problem":\n {"a": ["ok\xfe"]}}')
    with pytest.raises(DataError, match=rf"{aux}:2: non-UTF-8 bytes b'\\xfe'.*field 'per_problem.a\[0\]'"):
        load_bundled("codecontests", tmp_path, verify=False)
    ids = tmp_path / "ids.txt"
    ids.write_bytes(b"# header\n1\n2\xff\n")
    with pytest.raises(DataError, match=rf"{ids}:3: non-UTF-8 bytes b'\\xff' at byte 1"):
        read_id_list(ids)


def test_hub_bytes_field_and_reader_errors(monkeypatch):
    def bytes_record(path, name=None, *, split=None, **kw):
        return [{**GOOD, "text": b"Ret\xffurn"}] if split == "train" else []

    monkeypatch.setattr(datasets, "load_dataset", bytes_record)
    with pytest.raises(DataError, match=r"hub:google-research-datasets/mbpp/train:1: non-UTF-8 bytes b'\\xff' at byte 3"
                                        r".*record id '601', field 'text'"):
        load("mbpp", "hub", splits=["train"])

    def reader_fails(path, name=None, *, split=None, **kw):
        raise UnicodeDecodeError("utf-8", b"ab\xffcd", 2, 3, "invalid start byte")

    monkeypatch.setattr(datasets, "load_dataset", reader_fails)
    with pytest.raises(DataError, match=r"hub:evalplus/mbppplus/test: non-UTF-8 bytes b'\\xffcd' at byte 2"):
        load("mbppplus", "hub")
