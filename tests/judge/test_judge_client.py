"""RemoteJudge (retries, native and SandboxFusion-fallback modes) and get_judge()."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from door_server import serving

from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest
from rlvr.judge import client as jc
from rlvr.judge.client import RemoteJudge, RemoteUnavailable, get_judge, reset_judge
from rlvr.judge.server import create_app
from rlvr.judge.verdict import JudgeResult, TestResult, summarise

STDIO = Problem(id="t/sum", source="t", split="test", statement="", time_limit_s=2.0,
                tests=[StdioTest(stdin="1 2\n", stdout="3\n"), StdioTest(stdin="5 5\n", stdout="10\n")])
FUNC = Problem(id="t/add", source="t", split="test", statement="", entry_point="add", time_limit_s=2.0,
               solution_prefix="import math", test_setup="OFFSET = 0",
               tests=[CallTest(args="[1, 2]", expected="3"), CallTest(args="[0.5, 0.25]", expected="0.75"),
                      AssertTest(code="assert candidate(2, 2) == 4 + OFFSET")])


def _echo(request: httpx.Request) -> dict[str, str]:
    """The headers an rlvr server answers with: the request's ``X-Request-ID`` echoed."""
    rid = request.headers.get("x-request-id")
    return {"X-Request-ID": rid} if rid else {}


def _jr(verdict: str, n: int = 2) -> dict:
    res = [TestResult(index=i, verdict=verdict if i == 0 else "accepted") for i in range(n)]
    return summarise(res, 0.01).model_dump(mode="json")


class Recorder:
    """An httpx MockTransport handler: answers from a script of (status, json) or exceptions, counting calls."""

    def __init__(self, script: list, info_status: int = 200) -> None:
        self.script = list(script)
        self.info_status = info_status
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rlvr/info":
            return httpx.Response(self.info_status, json={"judge_version": "x", "languages": ["python"]})
        self.paths.append(request.url.path)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        status, body = item
        return httpx.Response(status, json=body, headers=_echo(request))


def _remote(rec: Recorder, **kw) -> RemoteJudge:
    rj = RemoteJudge("http://judge.test:8080/run_code", transport=httpx.MockTransport(rec), backoff_s=0.01, **kw)
    rj._sleep = lambda s: None  # no real waiting in unit tests
    return rj


# ---------------------------------------------------------------------------------------------------------- retries
def test_base_url_drops_a_run_code_suffix() -> None:
    assert RemoteJudge("http://h:1/run_code/").base_url == "http://h:1"
    with pytest.raises(ValueError, match="http"):
        RemoteJudge("judge:8080")


def test_wrong_answer_is_never_retried() -> None:
    rec = Recorder([(200, _jr("wrong_answer"))])
    with _remote(rec) as rj:
        jr = rj.judge(STDIO, "print(3)")
    assert jr.verdict == "wrong_answer" and rec.paths == ["/rlvr/judge"]


def test_program_timeout_and_bad_request_are_not_retried() -> None:
    rec = Recorder([(200, _jr("timeout"))])
    with _remote(rec) as rj:
        assert rj.judge(STDIO, "while 1: pass").verdict == "timeout"
    assert len(rec.paths) == 1
    rec = Recorder([(400, {"detail": "field 'ground_truth': bad"})])
    with _remote(rec) as rj, pytest.raises(ValueError, match="rejected"):
        rj.judge(STDIO, "x")
    assert len(rec.paths) == 1


def test_unknown_language_raises_like_the_embedded_judge() -> None:
    from rlvr.judge.languages import UnknownLanguageError

    rec = Recorder([(400, {"detail": "field 'language': unknown language 'cobol'"})])
    with _remote(rec) as rj, pytest.raises(UnknownLanguageError):
        rj.judge(STDIO, "x", language="cobol")


def test_gateway_errors_are_retried_then_succeed() -> None:
    rec = Recorder([(503, {}), (502, {}), (504, {}), (200, _jr("accepted"))])
    slept: list[float] = []
    rj = _remote(rec, retries=4, max_backoff_s=0.05)
    rj._sleep = slept.append
    with rj:
        assert rj.judge(STDIO, "ok").verdict == "accepted"
    assert len(rec.paths) == 4 and len(slept) == 3
    assert all(0.0 <= s <= 0.05 for s in slept)  # jittered, capped


def test_transport_errors_exhaust_retries_into_sandbox_error() -> None:
    rec = Recorder([httpx.ConnectError("refused")])
    with _remote(rec, retries=2) as rj:
        jr = rj.judge(STDIO, "print(3)")
        assert jr.verdict == "sandbox_error" and jr.total == 2 and "unavailable after 3 attempts" in jr.message
        rr = rj.run_code("print(1)")
        assert rr.status == "Error" and rr.verdict == "sandbox_error"
        with pytest.raises(RemoteUnavailable):
            rj.call_outputs(FUNC, "def add(a, b): return a + b")
    assert rec.paths.count("/rlvr/judge") == 3


def test_server_error_500_is_sandbox_error_without_retry() -> None:
    rec = Recorder([(500, {"detail": "Internal Server Error"})])
    with _remote(rec) as rj:
        assert rj.judge(STDIO, "x").verdict == "sandbox_error"
    assert len(rec.paths) == 1


def test_judge_many_keeps_order_and_bounds_concurrency() -> None:
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rlvr/info":
            return httpx.Response(200, json={})
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        sol = json.loads(request.content)["solution"]
        return httpx.Response(200, json=_jr("accepted" if sol.startswith("good") else "wrong_answer"),
                              headers=_echo(request))

    sols = [f"good{i}" if i % 3 else f"bad{i}" for i in range(12)]
    with RemoteJudge("http://j.test", transport=httpx.MockTransport(handler), concurrency=3) as rj:
        out = rj.judge_many([(STDIO, s) for s in sols])
    assert [r.verdict for r in out] == ["accepted" if s.startswith("good") else "wrong_answer" for s in sols]
    assert 1 <= state["max"] <= 3


def test_plain_sandboxfusion_server_is_detected_and_used_through_run_code() -> None:
    """No /rlvr/info (404): each stdio test is one /run_code call, compared on the client."""
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/run_code":
            return httpx.Response(404, json={"detail": "Not Found"})
        body = json.loads(request.content)
        seen.append(body)
        a, b = map(int, body["stdin"].split())
        run = {"status": "Finished", "execution_time": 0.01, "return_code": 0, "stdout": f"{a + b}\n", "stderr": ""}
        return httpx.Response(200, json={"status": "Success", "message": "", "run_result": run})

    with RemoteJudge("http://sf.test", transport=httpx.MockTransport(handler)) as rj:
        jr = rj.judge(STDIO, "a, b = map(int, input().split()); print(a + b)")
    assert jr.verdict == "accepted" and jr.total == 2
    assert [b["stdin"] for b in seen] == ["1 2\n", "5 5\n"]
    assert all(b["run_timeout"] == 2.0 and b["memory_limit_MB"] == 1024 and b["language"] == "python" for b in seen)
    assert "expected" not in json.dumps(seen) and "10\\n" not in json.dumps([b["code"] for b in seen])


# ----------------------------------------------------------------------------------------------------- get_judge
def test_get_judge_remote_from_env_is_a_reused_singleton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVR_SANDBOX_URL", "http://127.0.0.1:9")
    reset_judge()
    try:
        j = get_judge()
        assert isinstance(j, RemoteJudge) and j.base_url == "http://127.0.0.1:9"
        assert get_judge() is j
        j.close()
        j2 = get_judge()
        assert j2 is not j and not j2.closed  # a closed judge is replaced
    finally:
        reset_judge()
    assert j2.closed


def test_get_judge_embedded_without_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlvr.judge import Judge

    monkeypatch.delenv("RLVR_SANDBOX_URL", raising=False)
    monkeypatch.setenv("RLVR_SANDBOX_WORKERS", "1")
    reset_judge()
    try:
        j = get_judge()
        assert isinstance(j, Judge) and get_judge() is j
    finally:
        reset_judge()
    assert jc._JUDGE is None


# -------------------------------------------------------------------------------- against a real server + judge
@pytest.fixture(scope="module")
def live_url(judge) -> Iterator[str]:
    """uvicorn + the real embedded judge on a free port, in a thread; stops itself at teardown."""
    with serving(create_app(judge)) as (_, url):
        yield url


CASES = [
    (STDIO, "a, b = map(int, input().split())\nprint(a + b)\n", "accepted"),
    (STDIO, "print(3)\n", "wrong_answer"),
    (STDIO, "print(1/0)\n", "runtime_error"),
    (STDIO, "print(3\n", "syntax_error"),
    (FUNC, "def add(a, b):\n    return a + b\n", "accepted"),
    (FUNC, "def add(a, b):\n    return a - b\n", "wrong_answer"),
    (FUNC, "def add(a, b):\n    raise ValueError('no')\n", "runtime_error"),
    (FUNC, "class R(int):\n    pass\ndef add(a, b):\n    return R(1)\n", "wrong_answer"),
]


@pytest.mark.parametrize("native", [True, False], ids=["native", "fallback"])
def test_remote_judge_matches_embedded_verdicts(live_url: str, judge, native: bool) -> None:
    with RemoteJudge(live_url, native=native) as rj:
        got = rj.judge_many([(p, s) for p, s, _ in CASES])
    for (p, s, want), jr in zip(CASES, got, strict=True):
        assert isinstance(jr, JudgeResult)
        assert jr.verdict == want, (native, s, jr.message)
        assert jr.verdict == judge.judge(p, s).verdict
        assert jr.total == len(p.tests)


@pytest.mark.parametrize("native", [True, False], ids=["native", "fallback"])
def test_remote_judge_timeout_and_call_outputs(live_url: str, native: bool) -> None:
    slow = STDIO.model_copy(update={"time_limit_s": 1.0, "tests": STDIO.tests[:1]})
    with RemoteJudge(live_url, native=native) as rj:
        assert rj.judge(slow, "while True:\n    pass\n").verdict == "timeout"
        assert rj.call_outputs(FUNC, "def add(a, b):\n    return (a, [b])\n") == ["(1, [2])", "(0.5, [0.25])"]
        with pytest.raises(ValueError, match="compile"):
            rj.call_outputs(FUNC, "def add(a, b)\n")
        rr = rj.run_code("print(input().upper())", stdin="abc\n")
        assert rr.verdict == "accepted" and rr.stdout == "ABC\n"


# --------------------------------------------------------------------------------------------------- backpressure
def test_503_retry_after_is_honoured_capped_and_does_not_use_retries() -> None:
    answers = [httpx.Response(503, headers={"Retry-After": "3"}, json={"detail": "saturated"})] * 5

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rlvr/info":
            return httpx.Response(200, json={})
        return answers.pop(0) if answers else httpx.Response(200, json=_jr("accepted"), headers=_echo(request))

    rj = RemoteJudge("http://judge.test", transport=httpx.MockTransport(handler), retries=0, max_backoff_s=2.0)
    slept: list[float] = []
    rj._sleep = slept.append
    with rj:
        assert rj.judge(STDIO, "ok").verdict == "accepted"
    assert len(slept) == 5 and rj.backpressure_waits == 5
    assert all(2.0 <= s <= 3.0 for s in slept)  # Retry-After 3 s capped at 2 s, plus up to 50 % jitter


def test_503_retry_after_gives_up_after_max_wait() -> None:
    rj = RemoteJudge("http://judge.test", retries=0, max_wait_s=5.0, transport=httpx.MockTransport(
        lambda r: httpx.Response(200, json={}) if r.url.path == "/rlvr/info"
        else httpx.Response(503, headers={"Retry-After": "2"})))
    rj._sleep = lambda s: None
    with rj:
        jr = rj.judge(STDIO, "ok")
    assert jr.verdict == "sandbox_error" and "Retry-After" in jr.message
    assert 1 <= rj.backpressure_waits <= 2  # 2-3 s per wait within a 5 s budget


def test_retry_after_parses_seconds_and_http_dates() -> None:
    from email.utils import formatdate

    assert RemoteJudge.retry_after_s(httpx.Response(503, headers={"Retry-After": "4"})) == 4.0
    later = RemoteJudge.retry_after_s(httpx.Response(503, headers={"Retry-After": formatdate(time.time() + 60,
                                                                                             usegmt=True)}))
    assert later is not None and 55 <= later <= 61
    assert RemoteJudge.retry_after_s(httpx.Response(503, headers={"Retry-After": "soon"})) is None
    assert RemoteJudge.retry_after_s(httpx.Response(503)) is None


# ------------------------------------------------------------------------------------------------------ request ids
def test_an_answer_for_another_request_is_never_returned() -> None:
    """A 200 carrying another request's id (a proxy mixing up answers) is discarded and retried; the request's own
    answer is the one returned, and a server that never echoes the id gives sandbox_error, not a foreign verdict."""
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rlvr/info":
            return httpx.Response(200, json={})
        rid = json.loads(request.content)["request_id"]
        sent.append(rid)
        if len(sent) == 1:  # someone else's accepted result
            return httpx.Response(200, json={**_jr("accepted"), "request_id": "other"},
                                  headers={"X-Request-ID": "other"})
        return httpx.Response(200, json={**_jr("wrong_answer"), "request_id": rid}, headers={"X-Request-ID": rid})

    rj = RemoteJudge("http://j.test", transport=httpx.MockTransport(handler), retries=2)
    rj._sleep = lambda s: None
    with rj:
        assert rj.judge(STDIO, "x").verdict == "wrong_answer"
    assert len(sent) == 2 and sent[0] == sent[1]  # one logical request: the same id on its retry

    def silent(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=_jr("accepted"))  # no id echoed

    rj = RemoteJudge("http://j.test", transport=httpx.MockTransport(silent), retries=1, native=True)
    rj._sleep = lambda s: None
    with rj:
        res = rj.judge(STDIO, "x")
    assert res.verdict == "sandbox_error" and "request id" in res.message


def test_run_code_rejections_raise_like_the_embedded_judge() -> None:
    from rlvr.judge.languages import UnknownLanguageError

    rec = Recorder([(400, {"detail": "field 'language': unknown language 'cobol'"})])
    with _remote(rec) as rj, pytest.raises(UnknownLanguageError):
        rj.run_code("x", language="cobol")
    rec = Recorder([(422, {"detail": [], "message": "field 'run_timeout': Input should be greater than 0"})])
    with _remote(rec) as rj, pytest.raises(ValueError, match="run_timeout"):
        rj.run_code("x", timeout_s=-1)


def test_fallback_scoring_bounds_and_guards_returned_values() -> None:
    from rlvr.judge.fallback import score_run

    test = CallTest(args="[1]", expected="1.5")
    mark = "@@m@@"

    def run(value: str) -> str:
        data = {"status": "Success", "run_result": {"status": "Finished", "return_code": 0, "stdout": "",
                                                    "stderr": f"\n{mark}value {value}\n"}}
        return score_run(0, test, data, mark, True, None).verdict

    assert run("1.5") == "accepted"
    assert run("9" * 200_000) == "wrong_answer"  # too many digits: not parsed at all
    assert run("1" + "0" * 400) == "wrong_answer"  # int too large to compare with a float: not an exception
    assert run("[" * 5000 + "]" * 5000) == "wrong_answer"  # too deep to parse
