"""SandboxFusion's dataset API is answered 501 with the alternative named, through the official client's models."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from rlvr.judge.api.datasets import ENDPOINTS
from rlvr.judge.server import create_app


class _NoJudge:
    workers = 1

    def judge_many(self, items):  # pragma: no cover - never reached: the dataset API judges nothing
        raise AssertionError("the dataset API must not judge")

    def close(self) -> None:
        pass


@pytest.fixture
def client():
    with TestClient(create_app(_NoJudge())) as c:
        yield c


def test_dataset_endpoints_answer_501_naming_the_alternative(client):
    sf = pytest.importorskip("sandbox_fusion")
    cfg = sf.TestConfig(language="python")
    bodies = {
        "/submit": sf.SubmitRequest(dataset="mbpp", id=2, completion="def f(): pass", config=cfg).dict(),
        "/get_prompts": sf.GetPromptsRequest(dataset="mbpp", config=cfg).dict(),
        "/get_prompt_by_id": sf.GetPromptByIdRequest(dataset="mbpp", config=cfg, id=2).dict(),
        "/list_ids": {"dataset": "mbpp"},
    }
    for path, method in ENDPOINTS.items():
        r = client.get(path) if method == "GET" else client.post(path, json=bodies[path])
        assert r.status_code == 501, (path, r.status_code)
        body = r.json()
        assert body["endpoint"] == path and "/common_evaluate_batch" in body["detail"]
        assert "rlvr judge" in body["detail"]
    assert client.post("/no_such_endpoint", json={}).status_code == 404  # other paths stay 404


def test_official_client_error_carries_the_alternative(client, monkeypatch):
    sf = pytest.importorskip("sandbox_fusion")
    import sandbox_fusion.client as sfc

    # route the client's requests.post through the in-process app
    monkeypatch.setattr(sfc.requests, "post", lambda url, json=None, **kw: client.post(url.split("testserver")[1],
                                                                                       json=json))
    req = sf.SubmitRequest(dataset="mbpp", id=2, completion="x", config=sf.TestConfig(language="python"))
    with pytest.raises(Exception, match=r"code 501.*common_evaluate_batch"):
        sf.submit(req, endpoint="http://testserver", max_attempts=1)
    with pytest.raises(Exception, match="code 501"):
        sf.get_prompts(sf.GetPromptsRequest(dataset="mbpp", config=sf.TestConfig(language="python")),
                       endpoint="http://testserver")


def test_run_jupyter_answers_501_naming_run_code(client, monkeypatch):
    """/run_jupyter is unserved like the dataset API: 501 (not 404) naming /run_code, through the official client."""
    sf = pytest.importorskip("sandbox_fusion")
    import sandbox_fusion.client as sfc

    req = sf.RunJupyterRequest(cells=["print(1)"])
    r = client.post("/run_jupyter", json=req.dict())
    assert r.status_code == 501
    assert r.json()["endpoint"] == "/run_jupyter" and r.json()["alternative"] == "/run_code"
    monkeypatch.setattr(sfc.requests, "post", lambda url, json=None, **kw: client.post(url.split("testserver")[1],
                                                                                       json=json))
    with pytest.raises(Exception, match=r"code 501.*POST /run_code"):
        sf.run_jupyter(req, endpoint="http://testserver", max_attempts=1)


def test_the_official_client_retries_every_501_unless_max_attempts_is_1(client, monkeypatch):
    """The official client retries any non-200 (tenacity: 5 attempts for submit, exponential jitter, ~18 s): what
    docs/judge/api.md tells its users (``max_attempts=1``). Sleeps skipped; attempts counted."""
    sf = pytest.importorskip("sandbox_fusion")
    import sandbox_fusion.client as sfc

    calls = []

    def post(url, json=None, **kw):
        calls.append(url)
        return client.post(url.split("testserver")[1], json=json)

    monkeypatch.setattr(sfc.requests, "post", post)
    monkeypatch.setattr("time.sleep", lambda s: None)
    req = sf.SubmitRequest(dataset="mbpp", id=2, completion="x", config=sf.TestConfig(language="python"))
    for attempts, want in ((None, 5), (1, 1)):
        calls.clear()
        with pytest.raises(Exception, match="code 501"):
            sf.submit(req, endpoint="http://testserver", **({} if attempts is None else {"max_attempts": attempts}))
        assert len(calls) == want
