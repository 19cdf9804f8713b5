"""The judge's HTTP server: SandboxFusion /run_code, ScaleBox /common_evaluate_batch, native /rlvr/* endpoints.

Most tests inject a fake judge (the server's logic, not the sandbox, is under test); the last ones run real programs
through the real embedded judge (session fixture ``judge``)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from door_server import serving
from fastapi.testclient import TestClient

from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest, ground_truth
from rlvr.judge.core import RunResult
from rlvr.judge.server import create_app, extract_fenced
from rlvr.judge.verdict import JudgeResult, TestResult, summarise


class FakeJudge:
    """Records calls; a solution containing ``GOOD`` passes every test, ``BOOM`` is a sandbox error, else the first
    test fails with wrong_answer. ``run_code`` echoes stdin and exits with the code named ``EXIT<n>`` in the code."""

    workers = 1

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        self.calls.append(("judge", (problem, solution), {"language": language}))
        if "BOOM" in solution:
            v = "sandbox_error"
        else:
            v = "accepted" if "GOOD" in solution else "wrong_answer"
        res = [
            TestResult(index=i, verdict="accepted" if (v == "accepted" or i > 0) else v, exit_code=0, stdout="out")
            for i in range(len(problem.tests))
        ]
        return summarise(res, 0.01, "" if v == "accepted" else "first test failed")

    def judge_many(self, items, language: str = "python"):
        return [self.judge(p, s, language) for p, s in items]

    def run_code(self, code, stdin="", timeout_s=10.0, memory_limit_mb=1024, files=None, language="python"):
        self.calls.append(("run_code", (code,), {"stdin": stdin, "timeout_s": timeout_s,
                                                 "memory_limit_mb": memory_limit_mb, "files": files}))
        if "SLEEP" in code:
            return RunResult(status="TimeLimitExceeded", verdict="timeout", stdout="", stderr="", time_s=timeout_s)
        rc = int(code.split("EXIT", 1)[1][0]) if "EXIT" in code else 0
        return RunResult(status="Finished", verdict="accepted" if rc == 0 else "runtime_error", exit_code=rc,
                         stdout=stdin, stderr="" if rc == 0 else "Traceback: boom\n", time_s=0.01, cpu_s=0.005)

    def call_outputs(self, problem, solution):
        self.calls.append(("call_outputs", (problem, solution), {}))
        if "NOCOMPILE" in solution:
            raise ValueError(f"{problem.id}: solution does not compile")
        return ["3" for t in problem.tests if isinstance(t, CallTest)]


@pytest.fixture
def fake() -> FakeJudge:
    return FakeJudge()


@pytest.fixture
def client(fake: FakeJudge) -> Iterator[TestClient]:
    with TestClient(create_app(fake)) as c:
        yield c


def _problem() -> Problem:
    return Problem(id="toy/add", source="toy", split="test", statement="add", entry_point="add",
                   tests=[CallTest(args="[1, 2]", expected="3"), AssertTest(code="assert candidate(2, 2) == 4")])


# ---------------------------------------------------------------------------------------------------- SandboxFusion
def test_ping_answers_pong(client: TestClient) -> None:
    r = client.get("/v1/ping")
    assert r.status_code == 200 and r.json() == "pong"


def test_run_code_success_maps_to_sandboxfusion_fields(client: TestClient, fake: FakeJudge) -> None:
    r = client.post("/run_code", json={"code": "print(input())", "language": "python", "stdin": "hi", "run_timeout": 3})
    assert r.status_code == 200
    d = r.json()
    assert d["status"] == "Success" and d["compile_result"] is None and d["files"] == {}
    assert d["run_result"]["status"] == "Finished" and d["run_result"]["return_code"] == 0
    assert d["run_result"]["stdout"] == "hi" and d["verdict"] == "accepted"
    kw = fake.calls[-1][2]
    assert kw["timeout_s"] == 3.0 and kw["memory_limit_mb"] == 1024 and kw["stdin"] == "hi"  # -1 → server default


def test_run_code_failure_and_timeout(client: TestClient) -> None:
    d = client.post("/run_code", json={"code": "EXIT3", "language": "python"}).json()
    assert d["status"] == "Failed" and d["run_result"]["return_code"] == 3 and d["verdict"] == "runtime_error"
    d = client.post("/run_code", json={"code": "SLEEP", "language": "python", "run_timeout": 1}).json()
    assert d["status"] == "Failed" and d["run_result"]["status"] == "TimeLimitExceeded"


def test_run_code_files_are_base64_decoded(client: TestClient, fake: FakeJudge) -> None:
    b64 = base64.b64encode(b"data\n").decode()
    r = client.post("/run_code", json={"code": "x", "language": "python", "files": {"in.txt": b64},
                                       "memory_limit_MB": 256})
    assert r.status_code == 200
    assert fake.calls[-1][2]["files"] == {"in.txt": b"data\n"} and fake.calls[-1][2]["memory_limit_mb"] == 256


def test_run_code_bad_base64_is_400_naming_the_field(client: TestClient) -> None:
    r = client.post("/run_code", json={"code": "x", "language": "python", "files": {"a.txt": "@@not base64@@"}})
    assert r.status_code == 400 and "files.a.txt" in r.json()["detail"]


def test_run_code_unsupported_language_is_400_naming_the_field(client: TestClient, fake: FakeJudge) -> None:
    r = client.post("/run_code", json={"code": "puts 1", "language": "ruby"})
    assert r.status_code == 400
    assert "field 'language'" in r.json()["detail"] and "ruby" in r.json()["detail"]
    assert not fake.calls  # never reached the judge


# ------------------------------------------------------------------------------------------------------- ScaleBox
def test_common_evaluate_batch_stdio(client: TestClient, fake: FakeJudge) -> None:
    payload = {
        "completion": "```python\nGOOD = 1\na, b = map(int, input().split())\nprint(a + b)\n```",
        "config": {"language": "python", "run_timeout": 4,
                   "provided_data": {"test_cases": {"type": "stdin_stdout", "input": ["1 2", "3 4"],
                                                    "output": ["3", "7"], "fn_name": None}},
                   "extra": {"run_all_cases": True}},
    }
    r = client.post("/common_evaluate_batch", json=payload)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["accepted"] is True and d["pass_ratio"] == 1.0 and d["verdict"] == "accepted" and d["total"] == 2
    assert d["extracted_code"].startswith("GOOD = 1\n") and "```" not in d["extracted_code"]
    assert [t["passed"] for t in d["tests"]] == [True, True]
    assert d["tests"][1]["test_info"] == {"input": {"stdin": "3 4"}, "output": {"stdout": "7"}}
    assert d["tests"][0]["exec_info"]["status"] == "Success"
    problem, code = fake.calls[-1][1]
    assert [(t.stdin, t.stdout) for t in problem.tests] == [("1 2", "3"), ("3 4", "7")]
    assert problem.time_limit_s == 4.0 and code == d["extracted_code"]


def test_common_evaluate_batch_function_call_and_failure(client: TestClient, fake: FakeJudge) -> None:
    payload = {
        "completion": "def add(a, b):\n    return a - b\n",
        "config": {"language": "python",
                   "provided_data": {"test_cases": {
                       "type": "function_call", "fn_name": "add",
                       "input": [[1, 2], [3, [4, True]]], "output": [[3], [{"k": None}]]}}},
    }
    d = client.post("/common_evaluate_batch", json=payload).json()
    assert d["accepted"] is False and d["verdict"] == "wrong_answer" and d["pass_ratio"] == 0.5
    assert d["tests"][0]["passed"] is False and d["tests"][0]["verdict"] == "wrong_answer"
    assert d["tests"][0]["exec_info"]["status"] == "Success"  # it ran fine; the answer was wrong
    problem, _ = fake.calls[-1][1]
    assert problem.entry_point == "add" and problem.time_limit_s == 10.0
    assert [(t.args, t.expected) for t in problem.tests] == [("[1, 2]", "3"), ("[3, [4, True]]", "{'k': None}")]


def test_common_evaluate_batch_json_input(client: TestClient, fake: FakeJudge) -> None:
    payload = {"completion": "GOOD", "config": {"language": "python", "provided_data": {"test_cases": {
        "type": "function_call", "fn_name": "f", "json_input": True, "input": ["[1, 2]\n\"x\""], "output": ["[3]"]}}}}
    assert client.post("/common_evaluate_batch", json=payload).status_code == 200
    problem, _ = fake.calls[-1][1]
    assert problem.tests[0].args == "[[1, 2], 'x']" and problem.tests[0].expected == "[3]"


def test_common_evaluate_batch_humaneval_assert(client: TestClient, fake: FakeJudge) -> None:
    test = "def check(candidate):\n    assert candidate(2) is True\n"
    payload = {"completion": "```python\ndef is_prime(n):\n    return GOOD\n```",
               "config": {"language": "python", "provided_data": {"test_cases": {
                   "type": "assert", "test": test, "entry_point": "is_prime"}}}}
    d = client.post("/common_evaluate_batch", json=payload).json()
    assert d["accepted"] is True
    problem, _ = fake.calls[-1][1]
    assert problem.entry_point == "is_prime" and problem.tests[0].code.endswith("check(candidate)\n")


def test_common_evaluate_batch_rlvr_superset(client: TestClient, fake: FakeJudge) -> None:
    gt = ground_truth(_problem())
    payload = {"completion": "GOOD", "dataset": "toy", "id": 7, "config": {"language": "python", "provided_data": {
        "ground_truth": gt, "rlvr_tests": [{"kind": "call", "args": "[0, 0]", "expected": "0"}]},
        "extra": {"float_tolerance": 1e-6}}}
    d = client.post("/common_evaluate_batch", json=payload).json()
    assert d["id"] == 7 and d["total"] == 3 and d["extra"]["pass_ratio"] == 1.0
    problem, _ = fake.calls[-1][1]
    assert problem.id == "toy/add" and problem.entry_point == "add" and problem.float_tolerance == 1e-6
    assert [t.kind for t in problem.tests] == ["call", "assert", "call"]
    assert problem.time_limit_s == _problem().time_limit_s  # a ground_truth keeps its own limit


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"provided_data": {"test_cases": {"type": "stdin_stdout", "input": ["1"], "output": ["1"]}}},
         "config.language"),
        ({"language": "python", "provided_data": {"test_cases": {"type": "stdin_stdout", "input": ["1"],
                                                                 "output": ["1", "2"]}}}, "test_cases.output"),
        ({"language": "python", "provided_data": {"test_cases": {"type": "function_call", "fn_name": "f",
                                                                 "input": [[1]], "output": [1]}}}, "output[0]"),
        ({"language": "python", "provided_data": {"test_cases": {"type": "stdin_stdout", "input": ["1"],
                                                                 "output": ["1"]}},
          "extra": {"special_judge_program": "import sys"}}, "special_judge_program"),
        ({"language": "python", "provided_data": {}}, "no test cases"),
        ({"language": "python", "provided_data": {"test_cases": {"type": "magic"}}}, "test_cases.type"),
    ],
)
def test_common_evaluate_batch_bad_requests_are_400(client: TestClient, fake: FakeJudge, config, needle) -> None:
    r = client.post("/common_evaluate_batch", json={"completion": "x", "config": config})
    assert r.status_code == 400 and needle in r.json()["detail"]
    assert not fake.calls


def test_extract_fenced_takes_last_block_of_the_language() -> None:
    text = "```cpp\nint x;\n```\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```"
    assert extract_fenced(text, "python") == "print(2)\n"
    assert extract_fenced(text, "cpp") == "int x;\n"
    assert extract_fenced("print(3)", "python") == "print(3)"


# ---------------------------------------------------------------------------------------------------------- native
def test_rlvr_judge_with_problem_and_with_ground_truth(client: TestClient, fake: FakeJudge) -> None:
    p = _problem()
    r = client.post("/rlvr/judge", json={"problem": p.model_dump(mode="json"), "solution": "GOOD"})
    assert r.status_code == 200
    jr = JudgeResult.model_validate(r.json())
    assert jr.verdict == "accepted" and jr.total == 2
    assert fake.calls[-1][1][0] == p
    r = client.post("/rlvr/judge", json={"ground_truth": ground_truth(p), "data_source": "toy", "solution": "bad"})
    jr = JudgeResult.model_validate(r.json())
    assert jr.verdict == "wrong_answer" and jr.passed == 1 and fake.calls[-1][1][0].tests == p.tests


def test_rlvr_judge_needs_exactly_one_problem_source(client: TestClient) -> None:
    p = _problem()
    r = client.post("/rlvr/judge", json={"solution": "x"})
    assert r.status_code == 400 and "exactly one" in r.json()["detail"]
    r = client.post("/rlvr/judge", json={"problem": p.model_dump(mode="json"), "ground_truth": ground_truth(p),
                                         "solution": "x"})
    assert r.status_code == 400
    r = client.post("/rlvr/judge", json={"ground_truth": {"no": "tests"}, "solution": "x"})
    assert r.status_code == 400 and "ground_truth" in r.json()["detail"]


def test_rlvr_call_outputs_and_info(client: TestClient) -> None:
    p = _problem()
    r = client.post("/rlvr/call_outputs", json={"problem": p.model_dump(mode="json"), "solution": "def add(a,b): ...",
                                                "request_id": "rq-1"})
    assert r.status_code == 200 and r.json() == {"outputs": ["3"], "request_id": "rq-1"}
    assert r.headers["x-request-id"] == "rq-1"
    r = client.post("/rlvr/call_outputs", json={"problem": p.model_dump(mode="json"), "solution": "NOCOMPILE"})
    assert r.status_code == 400 and "does not compile" in r.json()["detail"]
    info = client.get("/rlvr/info").json()
    assert "python" in info["languages"] and info["workers"] == 1 and info["judge_version"]


# --------------------------------------------------------------------------------- a real server, the official client
@pytest.fixture
def live_url(fake: FakeJudge) -> Iterator[str]:
    """uvicorn serving the fake judge on a free local port, in a thread; stops itself at teardown."""
    with serving(create_app(fake)) as (_, url):
        yield url


def test_official_sandbox_fusion_client_against_the_server(live_url: str) -> None:
    import sandbox_fusion as sf

    ok = sf.run_code(sf.RunCodeRequest(code="print(input())", stdin="abc", language="python"), endpoint=live_url,
                     max_attempts=1, client_timeout=30)
    assert ok.status == sf.RunStatus.Success and ok.run_result.stdout == "abc" and ok.run_result.return_code == 0
    assert sf.summary_run_code_result(ok, sf.SummaryMapping()) == "Success"
    bad = sf.run_code(sf.RunCodeRequest(code="EXIT1", language="python"), endpoint=live_url, max_attempts=1)
    assert bad.status == sf.RunStatus.Failed and bad.run_result.return_code == 1
    assert sf.summary_run_code_result(bad, sf.SummaryMapping(RunFailed="rf")) == "rf"
    # set_sandbox_endpoint + the env-free default path of the client
    sf.set_sandbox_endpoint(live_url + "/")
    try:
        again = sf.run_code(sf.RunCodeRequest(code="print(1)", stdin="z", language="python"), max_attempts=1)
    finally:
        sf.set_sandbox_endpoint("http://localhost:8080")
    assert again.run_result.stdout == "z"


# ------------------------------------------------------------------------------------------------ the real judge
@pytest.fixture
def real_client(judge) -> Iterator[TestClient]:
    with TestClient(create_app(judge)) as c:
        yield c


def test_real_program_through_run_code(real_client: TestClient) -> None:
    d = real_client.post("/run_code", json={"code": "print(sum(map(int, input().split())))", "stdin": "2 3\n",
                                            "language": "python", "run_timeout": 5}).json()
    assert d["status"] == "Success" and d["run_result"]["stdout"] == "5\n" and d["verdict"] == "accepted"
    d = real_client.post("/run_code", json={"code": "raise SystemExit(4)", "language": "python"}).json()
    assert d["status"] == "Failed" and d["run_result"]["return_code"] == 4


def test_real_program_through_common_evaluate_batch(real_client: TestClient) -> None:
    cases = {"type": "stdin_stdout", "input": ["1 2\n", "3 4\n"], "output": ["3\n", "7\n"]}
    good = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    d = real_client.post("/common_evaluate_batch", json={
        "completion": good, "config": {"language": "python", "run_timeout": 5,
                                       "provided_data": {"test_cases": cases}}}).json()
    assert d["accepted"] is True and d["pass_ratio"] == 1.0
    assert d["tests"][1]["exec_info"]["run_result"]["stdout"] == "7\n"
    d = real_client.post("/common_evaluate_batch", json={
        "completion": "print(3)", "config": {"language": "python", "provided_data": {"test_cases": cases}}}).json()
    assert d["accepted"] is False and d["pass_ratio"] == 0.5 and d["tests"][1]["verdict"] == "wrong_answer"


def test_real_problem_through_rlvr_judge(real_client: TestClient) -> None:
    p = _problem()
    r = real_client.post("/rlvr/judge", json={"problem": p.model_dump(mode="json"),
                                              "solution": "def add(a, b):\n    return a + b\n"})
    assert JudgeResult.model_validate(r.json()).verdict == "accepted"
    r = real_client.post("/rlvr/judge", json={"problem": p.model_dump(mode="json"), "solution": "def add(a, b"})
    assert JudgeResult.model_validate(r.json()).verdict == "syntax_error"
    stdio = Problem(id="t/s", source="t", split="test", statement="", tests=[StdioTest(stdin="", stdout="1\n")])
    r = real_client.post("/rlvr/judge", json={"problem": stdio.model_dump(mode="json"), "solution": "print(1)",
                                              "language": "brainfuck"})
    assert r.status_code == 400 and "language" in r.json()["detail"]


def test_real_compiled_language_through_run_code(real_client: TestClient) -> None:
    from rlvr.judge.languages import available_languages

    if "cpp" not in available_languages():
        pytest.skip("g++ not installed")
    src = '#include <cstdio>\nint main(){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);}\n'
    d = real_client.post("/run_code", json={"code": src, "language": "cpp", "stdin": "2 3\n"}).json()
    assert d["status"] == "Success" and d["run_result"]["stdout"] == "5\n"
    assert d["compile_result"]["return_code"] == 0
    d = real_client.post("/run_code", json={"code": "int main(){ return x; }", "language": "cpp"}).json()
    assert d["status"] == "Failed" and d["run_result"] is None and d["compile_result"]["return_code"] == 1
    assert "x" in d["compile_result"]["stderr"] and d["verdict"] == "syntax_error"


def test_rlvr_sandbox_serve_starts_a_working_server(tmp_path) -> None:
    """The console command end to end: app factory + lifespan-created embedded judge; stopped by its own pid."""
    import httpx
    from door_server import sandbox_serve, serve_env

    with sandbox_serve(tmp_path / "serve.log", serve_env(RLVR_SANDBOX_WORKERS="1")) as url:
        d = httpx.post(f"{url}/run_code", json={"code": "print(6 * 7)", "language": "python"}, timeout=60).json()
        assert d["status"] == "Success" and d["run_result"]["stdout"] == "42\n"


def test_uvicorn_stack_prefers_the_c_stack_and_falls_back_without_it(monkeypatch) -> None:
    """serve() runs uvicorn on uvloop + httptools when they import (project dependencies), on asyncio + h11 else;
    each choice is one uvicorn accepts."""
    import builtins
    import importlib.util

    from rlvr.judge.api.app import uvicorn_stack

    fast = {"loop": "uvloop", "http": "httptools"}
    want = {k: v if importlib.util.find_spec(v) else {"loop": "asyncio", "http": "h11"}[k] for k, v in fast.items()}
    assert uvicorn_stack() == want
    real = builtins.__import__

    def without(missing: set[str]):
        def imp(name: str, *args: Any, **kwargs: Any) -> Any:
            if name in missing:
                raise ImportError(f"no module named {name!r}")
            return real(name, *args, **kwargs)
        return imp

    monkeypatch.setattr(builtins, "__import__", without({"uvloop", "httptools"}))
    assert uvicorn_stack() == {"loop": "asyncio", "http": "h11"}
    monkeypatch.setattr(builtins, "__import__", without({"uvloop"}))
    assert uvicorn_stack()["loop"] == "asyncio"
    monkeypatch.setattr(builtins, "__import__", real)
    for stack in ({"loop": "asyncio", "http": "h11"}, uvicorn_stack()):
        config = uvicorn.Config(create_app(FakeJudge()), **stack)
        config.load()  # resolves the protocol class: raises for a stack uvicorn cannot use
