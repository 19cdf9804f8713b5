"""The ``rlvr`` console script: help texts, ``rlvr judge`` (fake judge) and its input errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlvr.cli import main
from rlvr.data.schema import AssertTest, Problem, StdioTest, write_problems
from rlvr.judge.verdict import TestResult, summarise


class FakeJudge:
    """Accepts a solution iff it contains ``return a + b`` or ``print(3)``; records what it judged."""

    workers = 1

    def __init__(self) -> None:
        self.items: list[tuple[Problem, str]] = []

    def judge_many(self, items, language: str = "python"):
        self.items += [it for it in items if it[0].id != "rlvr/preflight"]  # the judge's check at start
        out = []
        for p, s in items:
            ok = "return a + b" in s or "print(3)" in s or p.id == "rlvr/preflight"
            res = [TestResult(index=i, verdict="accepted" if ok else "wrong_answer") for i in range(len(p.tests))]
            out.append(summarise(res, 0.5, "" if ok else "wrong"))
        return out

    def call_outputs(self, problem, solution):  # pragma: no cover - toy problems have no pending call tests
        raise AssertionError("not expected")


PROBLEMS = [
    Problem(id="toy/T/0", source="toy", split="test", statement="add", entry_point="add",
            starter_code="def add(a, b):\n", tests=[AssertTest(code="assert candidate(1, 2) == 3")]),
    Problem(id="toy/T/1", source="toy", split="test", statement="print 3",
            tests=[StdioTest(stdin="", stdout="3\n"), StdioTest(stdin="x", stdout="3\n")]),
]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeJudge:
    j = FakeJudge()
    monkeypatch.setattr("rlvr.judge.client.get_judge", lambda: j)
    return j


@pytest.fixture
def pdir(tmp_path: Path) -> Path:
    d = tmp_path / "problems"
    write_problems(d / "toy.jsonl", PROBLEMS)
    return d


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _run(args: list[str]):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_help_lists_commands() -> None:
    r = _run(["--help"])
    assert r.exit_code == 0 and "judge" in r.output and "sandbox" in r.output
    r = _run(["sandbox", "serve", "--help"])
    assert r.exit_code == 0 and "--port" in r.output and "--workers" in r.output and "--host" in r.output
    r = _run(["judge", "--help"])
    assert r.exit_code == 0 and "--samples" in r.output and "--problems-dir" in r.output


def test_console_script_help_does_not_import_heavy_modules() -> None:
    code = ("import sys; from rlvr.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "mods = ('torch', 'transformers', 'fastapi', 'rlvr.judge.core', 'polars')\n"
            "heavy = [m for m in mods if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "HEAVY []" in out


def test_judge_happy_path(tmp_path: Path, pdir: Path, fake: FakeJudge) -> None:
    samples = _write(tmp_path / "s.jsonl", [
        json.dumps({"task_id": "T/0", "completion": "    return a + b\n"}),
        json.dumps({"task_id": "toy/T/1", "solution": "print(3)"}),
        "",
        json.dumps({"task_id": "T/1", "solution": "print(4)"}),
    ])
    out = tmp_path / "out" / "verdicts.jsonl"
    r = _run(["judge", "--dataset", "toy", "--samples", str(samples), "--out", str(out), "--problems-dir", str(pdir)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(x["task_id"], x["verdict"]) for x in rows] == [
        ("T/0", "accepted"), ("toy/T/1", "accepted"), ("T/1", "wrong_answer")]
    assert rows[2]["problem_id"] == "toy/T/1" and rows[2]["total"] == 2 and rows[2]["pass_ratio"] == 0.0
    assert set(rows[0]) == {"task_id", "problem_id", "verdict", "passed", "total", "pass_ratio", "judge_s", "message"}
    # completion → starter_code + completion (HumanEval/EvalPlus convention)
    assert fake.items[0][1] == "def add(a, b):\n    return a + b\n"
    assert "accepted fraction: 0.6667 (2/3)" in r.output and "wrong_answer" in r.output


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (['{"solution": "print(3)"}'], ":1: field 'task_id': missing"),
        (['{"task_id": "T/1", "solution": "print(3)"}', '{"task_id": "T/0", "solution": '], ":2: invalid JSON"),
        (['{"task_id": "T/9", "solution": "x"}'], ":1: field 'task_id': unknown task id 'T/9'"),
        (['{"task_id": "T/0"}'], ":1: field 'solution' (or 'completion')"),
        (['["T/0", "x"]'], ":1: expected a JSON object"),
    ],
)
def test_judge_bad_samples_fail_clearly_and_leave_no_output(
    tmp_path: Path, pdir: Path, fake: FakeJudge, lines: list[str], needle: str
) -> None:
    samples = _write(tmp_path / "bad.jsonl", lines)
    out = tmp_path / "verdicts.jsonl"
    r = _run(["judge", "--dataset", "toy", "--samples", str(samples), "--out", str(out), "--problems-dir", str(pdir)])
    assert r.exit_code != 0
    assert f"{samples}{needle}" in r.output
    assert not out.exists() and not list(tmp_path.glob(".verdicts.jsonl.*"))
    assert fake.items == []


def test_judge_unknown_dataset_is_a_clear_error(tmp_path: Path, fake: FakeJudge) -> None:
    samples = _write(tmp_path / "s.jsonl", ['{"task_id": "x", "solution": "y"}'])
    r = _run(["judge", "--dataset", "nosuchset", "--samples", str(samples), "--out", str(tmp_path / "o.jsonl"),
              "--problems-dir", str(tmp_path / "none")])
    assert r.exit_code != 0 and "nosuchset" in r.output and not (tmp_path / "o.jsonl").exists()


def test_judge_falls_back_to_the_bundled_loader(tmp_path: Path, fake: FakeJudge) -> None:
    samples = _write(tmp_path / "s.jsonl", [json.dumps({"task_id": "HumanEval/0", "completion": "    return a + b\n"})])
    out = tmp_path / "o.jsonl"
    r = _run(["judge", "--dataset", "humaneval", "--samples", str(samples), "--out", str(out),
              "--problems-dir", str(tmp_path / "empty")])
    assert r.exit_code == 0, r.output
    row = json.loads(out.read_text())
    assert row["problem_id"] == "humaneval/HumanEval/0"
    p, code = fake.items[0]
    assert code == p.starter_code + "    return a + b\n" and "has_close_elements" in code


def test_rlvr_judge_lives_in_cli_judge_and_stays_importable_from_cli() -> None:
    import rlvr.cli
    from rlvr.cli_judge import judge_cmd

    assert rlvr.cli.judge_cmd is judge_cmd and main.get_command(None, "judge") is judge_cmd
    with pytest.raises(AttributeError):
        rlvr.cli.no_such_name  # noqa: B018
