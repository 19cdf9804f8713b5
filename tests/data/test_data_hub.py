"""Hub loaders with `datasets.load_dataset` patched (the Hub is unreachable in tests): records map to Problems."""

from __future__ import annotations

import datasets
import pytest

from rlvr.data.errors import DataError
from rlvr.data.hub import HUB, load_hub
from rlvr.data.loaders import load
from rlvr.data.schema import AssertTest, StdioTest

CC_RECORD = {
    "name": "1548_E. Gregor and the Two Painters",
    "description": "Print the sum.",
    "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
    "private_tests": {"input": ["2 2"], "output": ["4\n"]},
    "generated_tests": {"input": ["5 5\n", "0 0\n"], "output": ["10\n", "0\n"]},
    "source": 2,
    "difficulty": 11,
    "solutions": {"language": [2, 3, 1, 3], "solution": ["cpp", "print(sum(map(int, input().split())))", "py2",
                                                          "a,b=map(int,input().split());print(a+b)"]},
    "incorrect_solutions": {"language": [3], "solution": ["print(0)"]},
    "cf_contest_id": 1548, "cf_index": "E", "cf_points": 0.0, "cf_rating": 3400, "cf_tags": ["math"],
    "is_description_translated": False, "untranslated_description": "",
    "time_limit": {"seconds": 2, "nanos": 500000000}, "memory_limit_bytes": 256 * 1024 * 1024,
    "input_file": "", "output_file": "",
}
HE_RECORD = {"task_id": "HumanEval/0", "prompt": 'def f(x):\n    """Return x."""\n',
             "canonical_solution": "    return x\n", "entry_point": "f",
             "test": "def check(candidate):\n    assert candidate(1) == 1\n"}
MBPP_FULL = {"task_id": 601, "text": "Return x.", "code": "def f(x):\r\n  return x", "test_list": ["assert f(1) == 1"],
             "test_setup_code": "", "challenge_test_list": []}
MBPP_SAN = {"source_file": "nb", "task_id": 2, "prompt": "Return x.", "code": "def f(x): return x",
            "test_imports": ["import math"], "test_list": ["assert f(1) == 1"]}
MBPPPLUS = {"task_id": "2", "code": "\ndef f(x): return x\n", "prompt": "Return x.", "source_file": "nb",
            "test_imports": [], "test_list": ["assert f(1) == 1"],
            "test": "inputs = [[1]]\nresults = [1]\nfor i, (inp, exp) in enumerate(zip(inputs, results)):\n"
                    "    assertion(f(*inp), exp, 0)\n"}


@pytest.fixture
def fake_hub(monkeypatch):
    calls = []
    table = {
        ("deepmind/code_contests", None): {"train": [CC_RECORD], "valid": [], "test": []},
        ("openai/openai_humaneval", None): {"test": [HE_RECORD]},
        ("google-research-datasets/mbpp", "full"): {"train": [MBPP_FULL], "test": [], "validation": [], "prompt": []},
        ("google-research-datasets/mbpp", "sanitized"): {"train": [], "test": [MBPP_SAN], "validation": [],
                                                         "prompt": []},
        ("evalplus/humanevalplus", None): {"test": [HE_RECORD]},
        ("evalplus/mbppplus", None): {"test": [MBPPPLUS]},
    }

    def fake_load_dataset(path, name=None, *, split=None, revision=None, **kw):
        calls.append((path, name, split, revision))
        return datasets.Dataset.from_list(table[(path, name)][split]) if table[(path, name)][split] else []

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    return calls


def test_codecontests_hub(fake_hub):
    (p,) = load("codecontests", "hub")
    assert p.id == "codecontests/1548_E. Gregor and the Two Painters" and p.split == "train"
    assert [t.public for t in p.tests] == [True, False, False, False]
    assert all(isinstance(t, StdioTest) for t in p.tests) and p.tests[1].stdin == "2 2\n"
    assert p.solutions == ["print(sum(map(int, input().split())))", "a,b=map(int,input().split());print(a+b)"]
    assert p.incorrect_solutions == ["print(0)"]
    assert p.time_limit_s == 10.0 and p.meta["record_time_limit_s"] == 2.5 and p.memory_limit_mb == 1024
    assert [c[2] for c in fake_hub] == ["train", "valid", "test"]
    (q,) = load_hub("codecontests", splits=["train"], options={"include_generated": False, "time_limit_s": 3})
    assert len(q.tests) == 2 and q.time_limit_s == 3


def test_humaneval_and_mbpp_hub_match_bundled_normalisers(fake_hub):
    (he,) = load("humaneval", "hub")
    assert he.id == "humaneval/HumanEval/0" and he.statement == "Return x." and isinstance(he.tests[0], AssertTest)
    (mb,) = load("mbpp", "hub")
    assert mb.id == "mbpp/601" and mb.split == "train" and mb.entry_point == "f" and "\r" not in mb.solutions[0]
    (san,) = load("mbpp_sanitized", "hub", splits=["test"])
    assert san.test_setup == "import math" and san.split == "test"


def test_evalplus_hub(fake_hub):
    (hp,) = load("humanevalplus:v0.1.10", "hub", options={"revision": "v0.1.10"})
    assert hp.id == "humanevalplus/HumanEval/0" and hp.source == "humanevalplus" and hp.meta["version"] == "v0.1.10"
    assert ("evalplus/humanevalplus", None, "test", "v0.1.10") in fake_hub
    (mp,) = load("mbppplus", "hub")
    assert mp.id == "mbppplus/Mbpp/2" and mp.entry_point == "f" and mp.tests[0].code.startswith("inputs")
    assert mp.statement == "Return x.\nassert f(1) == 1"


def test_unknown_hub_dataset():
    with pytest.raises(DataError, match="no Hub mapping"):
        load_hub("leetcode_contest")
    assert set(HUB) == {"humaneval", "mbpp", "mbpp_reg", "mbpp_sanitized", "humanevalplus", "mbppplus", "codecontests"}


def test_bad_hub_record_names_location(fake_hub, monkeypatch):
    bad = dict(CC_RECORD, public_tests={"input": ["1"], "output": []})
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: [bad])
    with pytest.raises(DataError, match=r"hub:deepmind/code_contests/train:1: field 'public_tests'"):
        load_hub("codecontests", splits=["train"])
