"""Adversarial suite through the HTTP app and the reward functions (issue 14, item 6; cross-request output).

Every hostile request gets a verdict or a 4xx with a message, never a 500; out-of-range limits, unknown languages,
path-traversal file names and oversized bodies are 4xx. After an infinite-timeout request, every later response
carries its own request's output. The TRL reward scores a batch holding hostile samples without raising, gives them
0 (not ``None``: ``sandbox_error`` must not be reachable by the submission) and scores the honest sample."""

from __future__ import annotations

import base64
import json
import secrets
import threading

import pytest
from fastapi.testclient import TestClient
from hostile import PROBES

from rlvr.data.schema import ground_truth
from rlvr.judge import Judge
from rlvr.judge.server import create_app
from rlvr.reward.trl import make_reward_funcs

INVALID_UTF8 = "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe\\xc3\\x28 \\xed\\xa0\\x80')\n"
HUGE_INT_FOR_FLOAT = "import sys\nsys.set_int_max_str_digits(0)\ndef half(x):\n    return 10 ** 100000\n"


@pytest.fixture(scope="module")
def client():
    """The app over its own one-worker judge (so a stuck request would block every later one)."""
    judge = Judge(workers=1)
    with TestClient(create_app(judge)) as c:
        yield c
    judge.close()


def _run(client, **body):
    return client.post("/run_code", content=json.dumps({"code": "print(1)", **body}),
                       headers={"content-type": "application/json"})


def test_invalid_utf8_stdout_gets_a_verdict(client):
    r = _run(client, code=INVALID_UTF8)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["run_result"]["stdout"].startswith("ok ")
    sub = {"completion": f"```python\n{INVALID_UTF8}```", "config": {"language": "python", "provided_data": {
        "test_case": [{"input": {"stdin": ""}, "output": {"stdout": "ok"}}]}}}
    r = client.post("/common_evaluate_batch", json=sub)
    assert r.status_code < 500, r.text[:300]


def test_huge_int_for_a_float_gets_a_verdict(client):
    body = {"problem": PROBES["float_call"]().model_dump(mode="json"), "solution": HUGE_INT_FOR_FLOAT}
    r = client.post("/rlvr/judge", json=body)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["verdict"] not in ("accepted", "sandbox_error")


@pytest.mark.parametrize(
    "body",
    [
        {"run_timeout": -1}, {"run_timeout": 1e308}, {"run_timeout": "Infinity"}, {"run_timeout": "NaN"},
        {"memory_limit_MB": 10**12}, {"compile_timeout": -5, "language": "cpp", "code": "int main(){}"},
        {"language": "brainfuck"}, {"language": "../../bin/sh"},
        {"files": {"../../escape.txt": base64.b64encode(b"x").decode()}},
        {"files": {"/etc/passwd": base64.b64encode(b"x").decode()}},
        {"files": {"a/../../b": base64.b64encode(b"x").decode()}},
        {"files": {"": base64.b64encode(b"x").decode()}},
    ],
    ids=["neg-timeout", "huge-timeout", "inf-timeout", "nan-timeout", "huge-memory", "neg-compile-timeout",
         "unknown-language", "language-path", "traversal", "absolute-path", "inner-traversal", "empty-name"],
)
def test_bad_requests_are_4xx(client, body):
    raw = json.dumps({"code": "print(1)", **body})  # json.dumps writes Infinity/NaN for the float cases
    r = client.post("/run_code", content=raw, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, f"{body}: {r.status_code} {r.text[:300]}"
    assert r.json().get("detail"), r.text[:300]


def test_oversized_body_is_4xx(client):
    r = _run(client, code="#" + "x" * (80 << 20))
    assert 400 <= r.status_code < 500, f"{r.status_code} {r.text[:200]}"


@pytest.mark.parametrize("timeout", ["1e308", "Infinity", "1e9"])
def test_no_cross_request_output_after_an_infinite_timeout(client, timeout):
    hostile = '{"code": "while True:\\n    print(\\"HOSTILE\\")", "run_timeout": ' + timeout + "}"
    box: dict = {}

    def send() -> None:
        box["r"] = client.post("/run_code", content=hostile, headers={"content-type": "application/json"})

    th = threading.Thread(target=send, daemon=True)
    th.start()
    th.join(timeout=20)
    for _ in range(4):
        tok = secrets.token_hex(8)
        out: dict = {}
        worker = threading.Thread(target=lambda t=tok, o=out: o.update(r=_run(client, code=f"print('{t}')",
                                                                                run_timeout=5)), daemon=True)
        worker.start()
        worker.join(timeout=90)
        assert "r" in out, "the judge stayed blocked by the infinite-timeout request"
        r = out["r"]
        assert r.status_code == 200, r.text[:300]
        run = r.json().get("run_result") or {}
        assert run.get("stdout", "").strip() == tok, f"a later request got {r.text[:300]}"
    if "r" in box:
        assert box["r"].status_code < 500 and tok not in box["r"].text


def test_reward_function_scores_a_batch_with_hostile_samples(judge):
    gt = ground_truth(PROBES["call"]())
    good = "```python\ndef add(a, b):\n    return a + b\n```"
    bad = [
        "```python\nimport os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef add(a, b):\n    return 0\n```",
        "```python\nimport os\nos.write(1, b'\\xff' * 5000000)\ndef add(a, b):\n    return 10 ** 100000\n```",
        "```python\nimport os\nos._exit(0)\n```",
    ]
    [reward] = make_reward_funcs("dense", judge=judge)
    scores = reward(prompts=["p"] * 4, completions=[good, *bad], ground_truth=[gt] * 4)
    assert scores[0] == 1.0
    assert scores[1:] == [0.0, 0.0, 0.0], scores
