"""The judge server's trust boundary on input and output (rlvr.judge.api.limits, .common, .admission).

Bad input gets a 4xx naming the field and never reaches the judge; whatever a program writes or returns gets a verdict
or a run result, never a 500. Most tests use a fake judge (the server's logic is under test); the last ones run hostile
programs through the real embedded judge (session fixture ``judge``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rlvr.data.schema import CallTest, Problem, StdioTest
from rlvr.judge.api.app import create_app
from rlvr.judge.core import RunResult
from rlvr.judge.verdict import JudgeResult, TestResult, summarise

STDIO = Problem(id="t/echo", source="t", split="test", statement="", tests=[StdioTest(stdin="1\n", stdout="1\n")])


class FakeJudge:
    """Records calls. ``run_code`` answers ``stdout`` as given; ``judge`` raises ``raises`` when set."""

    workers = 1

    def __init__(self, stdout: str = "ok\n", raises: BaseException | None = None) -> None:
        self.calls: list[str] = []
        self.stdout = stdout
        self.raises = raises
        self.release = threading.Event()
        self.release.set()

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        self.calls.append("judge")
        self.release.wait(30)
        if self.raises is not None:
            raise self.raises
        res = [TestResult(index=i, verdict="accepted", stdout=self.stdout) for i in range(len(problem.tests))]
        return summarise(res, 0.01)

    def run_code(self, code: str, **kw: Any) -> RunResult:
        self.calls.append("run_code")
        return RunResult(status="Finished", verdict="accepted", exit_code=0, stdout=self.stdout, stderr=self.stdout)

    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]:
        self.calls.append("call_outputs")
        return []


@pytest.fixture
def fake() -> FakeJudge:
    return FakeJudge()


@pytest.fixture
def client(fake: FakeJudge) -> Iterator[TestClient]:
    with TestClient(create_app(fake)) as c:
        yield c


# ------------------------------------------------------------------------------------------------------ limits: 422
@pytest.mark.parametrize(("field", "value"), [
    ("run_timeout", -1), ("run_timeout", 0), ("run_timeout", 61), ("run_timeout", 1e300), ("run_timeout", "soon"),
    ("compile_timeout", -5), ("compile_timeout", 10**400), ("memory_limit_MB", 0), ("memory_limit_MB", 8),
    ("memory_limit_MB", 5000), ("memory_limit_MB", -2), ("memory_limit_MB", 2**70),
])
def test_run_code_limits_out_of_range_are_422_naming_the_field(client: TestClient, fake: FakeJudge, field: str,
                                                                 value: Any) -> None:
    r = client.post("/run_code", json={"code": "print(1)", field: value})
    assert r.status_code == 422, r.text
    assert f"field '{field}'" in r.json()["message"]
    assert "input" not in r.json()["detail"][0]  # the offending input (maybe megabytes) is not echoed
    assert not fake.calls


def test_nan_and_infinity_literals_in_the_body_are_400(client: TestClient, fake: FakeJudge) -> None:
    for lit in ("NaN", "Infinity", "-Infinity"):
        r = client.post("/run_code", content=f'{{"code": "print(1)", "run_timeout": {lit}}}',
                        headers={"content-type": "application/json"})
        assert r.status_code == 400 and "request body" in r.json()["detail"], (lit, r.text)
    assert not fake.calls


def test_limits_in_range_reach_the_judge(client: TestClient, fake: FakeJudge) -> None:
    r = client.post("/run_code", json={"code": "x", "run_timeout": 60, "compile_timeout": 0.5, "memory_limit_MB": 16})
    assert r.status_code == 200 and fake.calls == ["run_code"]
    r = client.post("/run_code", json={"code": "x", "memory_limit_MB": -1})
    assert r.status_code == 200


def test_scalebox_limits_and_tolerance_are_checked(client: TestClient, fake: FakeJudge) -> None:
    cases = {"type": "stdin_stdout", "input": ["1\n"], "output": ["1\n"]}
    base = {"completion": "x", "config": {"language": "python", "provided_data": {"test_cases": cases}}}
    for key, value in (("run_timeout", -3), ("run_timeout", 1e9), ("memory_limit_MB", 1)):
        bad = {**base, "config": {**base["config"], key: value}}
        r = client.post("/common_evaluate_batch", json=bad)
        assert r.status_code == 422 and f"field 'config.{key}'" in r.json()["message"], r.text
    bad = {**base, "config": {**base["config"], "extra": {"float_tolerance": "abc"}}}
    r = client.post("/common_evaluate_batch", json=bad)
    assert r.status_code == 400 and "config.extra.float_tolerance" in r.json()["detail"]
    bad = {**base, "config": {**base["config"], "language": "cobol"}}
    r = client.post("/common_evaluate_batch", json=bad)
    assert r.status_code == 400 and "field 'config.language'" in r.json()["detail"]
    assert not fake.calls


def test_native_problem_limits_and_language_are_checked(client: TestClient, fake: FakeJudge) -> None:
    for upd, field in (({"time_limit_s": 1000.0}, "problem.time_limit_s"), ({"time_limit_s": -1.0},
                       "problem.time_limit_s"), ({"memory_limit_mb": 1 << 20}, "problem.memory_limit_mb"),
                       ({"tests": []}, "problem.tests")):
        body = {"problem": STDIO.model_copy(update=upd).model_dump(mode="json"), "solution": "print(1)"}
        r = client.post("/rlvr/judge", json=body)
        assert r.status_code == 400 and f"field '{field}'" in r.json()["detail"], r.text
    r = client.post("/rlvr/judge", json={"problem": STDIO.model_dump(mode="json"), "solution": "x",
                                         "language": "cobol"})
    assert r.status_code == 400 and r.json()["detail"].startswith("field 'language'")
    assert not fake.calls


# ------------------------------------------------------------------------------------------------ file names: 400
@pytest.mark.parametrize("name", [
    "/etc/passwd", "../x", "a/../../b", "a/..", "a\x00b", "a\nb", "x" * 300, "d/" + "y" * 1100, "dir/", "", "./a",
    "a//b",
])
def test_bad_file_names_are_400(client: TestClient, fake: FakeJudge, name: str) -> None:
    r = client.post("/run_code", json={"code": "x", "files": {name: "aGk="}})
    assert r.status_code == 400 and "field 'files'" in r.json()["detail"], r.text
    assert not fake.calls


def test_good_file_names_and_the_file_count_cap(client: TestClient, fake: FakeJudge) -> None:
    r = client.post("/run_code", json={"code": "x", "files": {"in.txt": "aGk=", "sub/dir/data.bin": "aGk="}})
    assert r.status_code == 200
    r = client.post("/run_code", json={"code": "x", "files": {f"f{i}": "aGk=" for i in range(65)}})
    assert r.status_code == 400 and "at most 64" in r.json()["detail"]


# ------------------------------------------------------------------------------------------------ body size: 413
def _asgi_post(app: Any, path: str, chunks: Iterator[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """Drive ``app`` directly (no client buffering): the body arrives chunk by chunk. Returns (status, chunks read)."""
    read = 0
    sent: list[dict] = []

    async def receive() -> dict:
        nonlocal read
        chunk = next(chunks, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), *headers], "client": ("t", 1), "server": ("t", 80)}
    asyncio.run(app(scope, receive, send))
    return next(m["status"] for m in sent if m["type"] == "http.response.start"), read


def test_a_200_mb_streamed_body_is_413_after_the_limit_not_buffered(fake: FakeJudge) -> None:
    app = create_app(fake)  # default RLVR_SANDBOX_MAX_BODY_MB = 32
    mib = b"x" * (1 << 20)
    status, read = _asgi_post(app, "/run_code", iter([b'{"code": "'] + [mib] * 200), [])
    assert status == 413 and read <= 34  # stopped after ~32 MiB of the 200
    assert not fake.calls


def test_a_declared_200_mb_body_is_413_before_reading_it(fake: FakeJudge) -> None:
    app = create_app(fake)
    status, read = _asgi_post(app, "/common_evaluate_batch", iter([b"{}"] * 10),
                              [(b"content-length", str(200 << 20).encode())])
    assert status == 413 and read == 0
    with TestClient(create_app(fake, max_body_mb=0.001)) as c:
        r = c.post("/run_code", json={"code": "x" * 5000})
        assert r.status_code == 413 and "RLVR_SANDBOX_MAX_BODY_MB" in r.json()["detail"]


def test_a_huge_integer_in_the_body_is_400_not_parsed(client: TestClient, fake: FakeJudge) -> None:
    body = '{"completion": "x", "config": {"language": "python", "extra": {"n": ' + "7" * 1_000_000 + "}}}"
    r = client.post("/common_evaluate_batch", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "number out of range" in r.json()["detail"]
    assert not fake.calls


# ------------------------------------------------------------------------------------- program output: a verdict
def test_undecodable_output_is_rendered_with_replacement_characters() -> None:
    fake = FakeJudge(stdout="ok\udcff\udcfe\x00end\n")  # surrogateescape form of b"ok\xff\xfe\x00end\n"
    with TestClient(create_app(fake)) as c:
        r = c.post("/run_code", json={"code": "x"})
        assert r.status_code == 200 and r.json()["run_result"]["stdout"] == "ok\ufffd\ufffd\x00end\n"
        r = c.post("/rlvr/judge", json={"problem": STDIO.model_dump(mode="json"), "solution": "x"})
        assert r.status_code == 200 and r.json()["tests"][0]["stdout"] == "ok\ufffd\ufffd\x00end\n"


@pytest.mark.parametrize("exc", [OverflowError("int too large to convert to float"), RecursionError("deep"),
                                 ValueError("bad literal"), MemoryError()])
def test_a_judge_exception_while_scoring_is_a_wrong_answer_not_a_500(exc: BaseException) -> None:
    with TestClient(create_app(FakeJudge(raises=exc)), raise_server_exceptions=False) as c:
        r = c.post("/rlvr/judge", json={"problem": STDIO.model_dump(mode="json"), "solution": "x"})
        assert r.status_code == 200 and r.json()["verdict"] == "wrong_answer"
        assert type(exc).__name__ in r.json()["message"]
        cases = {"type": "stdin_stdout", "input": ["1\n"], "output": ["1\n"]}
        r = c.post("/common_evaluate_batch", json={"completion": "x", "config": {
            "language": "python", "provided_data": {"test_cases": cases}}})
        assert r.status_code == 200 and r.json()["verdict"] == "wrong_answer"


def test_an_infrastructure_failure_is_a_500_sandbox_error() -> None:
    from rlvr.judge.sandbox import SandboxError

    for exc in (SandboxError("bwrap failed to start"), RuntimeError("judge is closed")):
        with TestClient(create_app(FakeJudge(raises=exc)), raise_server_exceptions=False) as c:
            r = c.post("/rlvr/judge", json={"problem": STDIO.model_dump(mode="json"), "solution": "x"})
            assert r.status_code == 500 and r.json()["detail"].startswith("sandbox_error:")


def test_the_event_loop_serves_while_a_judge_call_runs(fake: FakeJudge) -> None:
    """The judge call (and the parsing of returned values inside it) runs in the thread pool, not in the handler."""
    fake.release.clear()
    with TestClient(create_app(fake, workers=1)) as c:
        out: dict[str, Any] = {}
        t = threading.Thread(target=lambda: out.update(r=c.post("/rlvr/judge", json={
            "problem": STDIO.model_dump(mode="json"), "solution": "x"})))
        t.start()
        try:
            for _ in range(200):
                if fake.calls:
                    break
                threading.Event().wait(0.01)
            assert fake.calls == ["judge"] and t.is_alive()  # the judge call is blocked …
            assert c.get("/v1/ping").json() == "pong"  # … and the server still answers
        finally:
            fake.release.set()
            t.join(30)
        assert out["r"].status_code == 200


# ------------------------------------------------------------------------------------------------- request ids
def test_native_answers_echo_the_request_id(client: TestClient) -> None:
    body = {"problem": STDIO.model_dump(mode="json"), "solution": "x", "request_id": "abc123"}
    r = client.post("/rlvr/judge", json=body)
    assert r.json()["request_id"] == "abc123" and r.headers["x-request-id"] == "abc123"
    r = client.post("/rlvr/judge", json={**body, "request_id": None}, headers={"X-Request-ID": "hdr-7"})
    assert r.json()["request_id"] == "hdr-7" and r.headers["x-request-id"] == "hdr-7"
    r = client.post("/run_code", json={"code": "x"}, headers={"X-Request-ID": "run-9"})
    assert r.headers["x-request-id"] == "run-9" and "request_id" not in r.json()  # SandboxFusion model unchanged


# ------------------------------------------------------------------------------------ hostile programs, real judge
@pytest.fixture
def real_client(judge) -> Iterator[TestClient]:
    with TestClient(create_app(judge)) as c:
        yield c


def test_real_invalid_utf8_stdout_gets_a_run_result(real_client: TestClient) -> None:
    code = "import sys\nsys.stdout.buffer.write(b'ok\\xff\\xfe\\x00x\\n')\nsys.stderr.buffer.write(b'\\x80')\n"
    r = real_client.post("/run_code", json={"code": code})
    assert r.status_code == 200 and r.json()["status"] == "Success"
    assert r.json()["run_result"]["stdout"].startswith("ok\ufffd")
    p = STDIO.model_copy(update={"tests": [StdioTest(stdin="", stdout="1\n")]})
    r = real_client.post("/rlvr/judge", json={"problem": p.model_dump(mode="json"), "solution": code})
    assert r.status_code == 200 and r.json()["verdict"] == "wrong_answer"


def test_real_huge_int_returned_for_a_float_gets_a_verdict(real_client: TestClient) -> None:
    p = Problem(id="t/f", source="t", split="test", statement="", entry_point="f",
                tests=[CallTest(args="[1]", expected="1.5")])
    r = real_client.post("/rlvr/judge", json={"problem": p.model_dump(mode="json"),
                                              "solution": "def f(x):\n    return 10 ** 300000\n"})
    assert r.status_code == 200 and r.json()["verdict"] in ("wrong_answer", "runtime_error")
    assert real_client.get("/v1/ping").json() == "pong"
