"""Per-request ``max_timeouts`` on the judge server's ``/rlvr/judge`` (issue 44: a 7B profile's
``reward_shaping.max_timeouts: 1`` against an rlvr judge server), the client that sends it, and node judge actors
named by their factory.

On main ``/rlvr/judge`` had no such field (the body's extra key was ignored: the server judged at its own 3),
``/rlvr/info`` did not say the server's rule, ``RemoteJudge`` never sent it, ``reward_judge`` refused a native server
for any value but 3, and ``NodeJudge``'s actor names did not depend on the factory; these tests fail there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from door_server import serving
from fastapi.testclient import TestClient

from rlvr.config import ConfigError
from rlvr.data.schema import Problem, StdioTest
from rlvr.judge.client import RemoteJudge
from rlvr.judge.server import create_app
from rlvr.judge.verdict import JudgeResult, TestResult, summarise

LOOP = "while True:\n    pass\n"
SKIPPED = "not run after repeated timeouts"


def _problem(n_tests: int = 5, time_limit_s: float = 0.2) -> Problem:
    return Problem(id="t/loop", source="t", split="train", statement="echo", time_limit_s=time_limit_s,
                   tests=[StdioTest(stdin=str(i), stdout=str(i)) for i in range(n_tests)])


class RuleJudge:
    """A fake server judge with a timeout rule: records the ``max_timeouts`` each call judged under (a view is a
    shallow copy: the record list is shared)."""

    workers = 1

    def __init__(self, max_timeouts: int = 3) -> None:
        self.max_timeouts = max_timeouts
        self.seen: list[int] = []

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        self.seen.append(self.max_timeouts)
        return summarise([TestResult(index=i, verdict="accepted") for i in range(len(problem.tests))], 0.0, "")


class NoRuleJudge(RuleJudge):
    """A server judge without a timeout rule attribute."""

    def __init__(self) -> None:
        self.seen = []

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        self.seen.append(-1)
        return summarise([TestResult(index=i, verdict="accepted") for i in range(len(problem.tests))], 0.0, "")


def _body(**extra: Any) -> dict[str, Any]:
    return {"problem": _problem().model_dump(mode="json"), "solution": "print(1)", **extra}


@pytest.fixture
def rule_server() -> Iterator[tuple[RuleJudge, TestClient]]:
    j = RuleJudge(3)
    with TestClient(create_app(j)) as c:
        yield j, c


# ---------------------------------------------------------------------------------------------------------- server
def test_info_advertises_the_servers_rule_and_a_request_may_lower_it(rule_server) -> None:
    judge, client = rule_server
    assert client.get("/rlvr/info").json()["max_timeouts"] == 3
    for value in (1, 2, 3):
        r = client.post("/rlvr/judge", json=_body(max_timeouts=value))
        assert r.status_code == 200, r.text
    assert client.post("/rlvr/judge", json=_body()).status_code == 200  # absent: the server's own rule
    assert judge.seen == [1, 2, 3, 3]
    assert judge.max_timeouts == 3  # the server's judge keeps its rule: the request judged on a view


@pytest.mark.parametrize(("value", "asked"), [(0, "0 (run every test)"), (4, "4"), (99, "99")])
def test_zero_or_a_value_above_the_servers_is_refused_naming_both(rule_server, value, asked) -> None:
    judge, client = rule_server
    r = client.post("/rlvr/judge", json=_body(max_timeouts=value))
    assert r.status_code == 400
    detail = r.json()["detail"]
    assert detail == (f"field 'max_timeouts': {asked} is above this server's max_timeouts=3; a request may ask for "
                      f"1 to 3")
    assert "\n" not in detail and judge.seen == []  # refused before anything ran


@pytest.mark.parametrize("value", [-1, 1.5, "1", True])
def test_a_value_that_is_not_an_int_ge_0_is_a_schema_error(rule_server, value) -> None:
    judge, client = rule_server
    r = client.post("/rlvr/judge", json=_body(max_timeouts=value))
    assert r.status_code == 422 and "max_timeouts" in json.dumps(r.json()) and judge.seen == []


def test_a_server_at_0_takes_any_value_and_a_judge_without_the_rule_none() -> None:
    judge = RuleJudge(0)
    with TestClient(create_app(judge)) as client:
        assert client.get("/rlvr/info").json()["max_timeouts"] == 0
        assert all(client.post("/rlvr/judge", json=_body(max_timeouts=v)).status_code == 200 for v in (0, 1, 7))
    assert judge.seen == [0, 1, 7]
    bare = NoRuleJudge()
    with TestClient(create_app(bare)) as client:
        assert client.get("/rlvr/info").json()["max_timeouts"] is None
        r = client.post("/rlvr/judge", json=_body(max_timeouts=1))
        assert r.status_code == 400 and r.json()["detail"].startswith("field 'max_timeouts': 1 asked for")
        assert client.post("/rlvr/judge", json=_body()).status_code == 200
    assert bare.seen == [-1]


def test_the_real_judge_stops_a_looping_submission_after_the_requested_timeouts(judge) -> None:
    """The embedded judge behind the server (3 by its own rule): a program that loops on a 5-test problem (0.2 s per
    test) runs 1 test under a request's max_timeouts=1, the other four count as timeouts without running; without the
    field it runs 3."""
    problem = _problem(5, 0.2).model_dump(mode="json")
    with TestClient(create_app(judge)) as client:
        ran = {}
        for value in (1, None):
            extra = {} if value is None else {"max_timeouts": value}
            r = client.post("/rlvr/judge", json={"problem": problem, "solution": LOOP, **extra})
            assert r.status_code == 200, r.text
            res = r.json()
            assert res["verdict"] == "timeout" and res["passed"] == 0 and res["total"] == 5
            assert [t["verdict"] for t in res["tests"]] == ["timeout"] * 5
            ran[value] = sum(SKIPPED not in t["message"] for t in res["tests"])
    assert ran == {1: 1, None: 3}, ran
    assert judge.max_timeouts == 3


# ---------------------------------------------------------------------------------------------------------- client
class Server:
    """An httpx MockTransport handler playing an rlvr server whose ``/rlvr/info`` says ``info``; records the bodies
    of ``/rlvr/judge`` requests."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rlvr/info":
            return httpx.Response(200, json=self.info)
        body = json.loads(request.content)
        self.bodies.append(body)
        n = len(body["problem"]["tests"])
        jr = summarise([TestResult(index=i, verdict="accepted") for i in range(n)], 0.0, "").model_dump(mode="json")
        rid = request.headers.get("x-request-id")
        return httpx.Response(200, json={**jr, "request_id": body.get("request_id") or rid},
                              headers={"X-Request-ID": rid} if rid else {})


def _remote(server: Server, **kw: Any) -> RemoteJudge:
    return RemoteJudge("http://judge.test:8080", transport=httpx.MockTransport(server), backoff_s=0.01, **kw)


NEW = {"judge_version": "x", "languages": ["python"], "max_timeouts": 3}
OLD = {"judge_version": "x", "languages": ["python"]}


def test_client_sends_its_value_only_when_it_differs_from_the_servers() -> None:
    server = Server(NEW)
    with _remote(server, max_timeouts=1) as one, _remote(server) as default:
        assert one.server_max_timeouts() == 3 and one.native_max_timeouts() == 1
        one.judge(_problem(), "print(1)")
        default.judge(_problem(), "print(1)")
    assert [b.get("max_timeouts") for b in server.bodies] == [1, None]
    assert "max_timeouts" not in server.bodies[1]  # the server's own rule: the body is what it was


def test_client_refuses_a_value_the_server_cannot_apply_with_one_line() -> None:
    with _remote(Server(OLD), max_timeouts=1) as old:
        with pytest.raises(ConfigError, match=r"^max_timeouts=1: the judge server at http://judge.test:8080 does not "
                                              r"take a per-request max_timeouts"):
            old.judge(_problem(), "print(1)")
    with _remote(Server(OLD)) as old_default:  # an older server at today's rule: as before
        assert old_default.judge(_problem(), "print(1)").verdict == "accepted"
    for mine, asked in ((0, "0 (run every test)"), (5, "5")):
        with _remote(Server(NEW), max_timeouts=mine) as judge:
            with pytest.raises(ConfigError) as err:
                judge.judge(_problem(), "print(1)")
            msg = str(err.value)
            assert msg.startswith(f"max_timeouts={asked}: the judge server at http://judge.test:8080 has "
                                  f"max_timeouts=3") and "\n" not in msg
    with _remote(Server({**NEW, "max_timeouts": 0}), max_timeouts=0) as zero:  # the server runs every test too
        assert zero.native_max_timeouts() is None


def test_reward_judge_over_a_live_judge_server_applies_the_value(judge) -> None:
    """``reward_judge`` over a RemoteJudge of an rlvr server (the real judge behind it, its own rule 3): a view that
    sends 1, so a looping program on a 5-test problem runs 1 test; the stage's judge itself still judges at 3."""
    from rlvr.reward.timeouts import reward_judge

    with serving(create_app(judge)) as (_, url), RemoteJudge(url) as remote:
        view = reward_judge(remote, 1)
        assert view is not remote and view.max_timeouts == 1 and remote.max_timeouts == 3
        ran = {}
        for name, j in (("view", view), ("remote", remote)):
            res = j.judge(_problem(5, 0.2), LOOP)
            assert res.verdict == "timeout" and [t.verdict for t in res.tests] == ["timeout"] * 5
            ran[name] = sum(SKIPPED not in t.message for t in res.tests)
        assert ran == {"view": 1, "remote": 3}, ran


# ------------------------------------------------------------------------------------------------------ node judge
def test_node_judge_actor_names_carry_a_timeout_rule_other_than_3() -> None:
    """Callers reach the node's judge actors by name: callers of different ``max_timeouts`` get different actors
    (on main one name for every value, so the first caller's rule judged every caller's submissions)."""
    from rlvr.judge.ray_pool import NodeJudge, node_actor_name

    assert node_actor_name("n1", 0, 2) == node_actor_name("n1", 0, 2, 3) == "rlvr-node-judge-n1-0of2"  # as before
    assert node_actor_name("n1", 0, 2, 1) == "rlvr-node-judge-n1-max_timeouts_1-0of2"
    names = {node_actor_name("n1", i, 2, m) for m in (0, 1, 2, 3) for i in (0, 1)}
    assert len(names) == 8  # another value, another actor
    handle = object.__new__(NodeJudge)  # what a NodeJudge reaches by name (no Ray here)
    handle._node_id, handle.shards, handle.max_timeouts = "n1", [1, 1], 1
    assert handle.actor_name(1) == "rlvr-node-judge-n1-max_timeouts_1-1of2"


def test_node_judge_passes_its_rule_to_the_handle_that_names_the_actors(monkeypatch) -> None:
    """:func:`rlvr.reward.timeouts.node_judge` builds the handle with the factory of its value and that value, which
    names the actors; at 3 the default factory and today's names."""
    import rlvr.judge.ray_pool as ray_pool
    from rlvr.reward.timeouts import node_judge

    built: list[dict[str, Any]] = []

    class Handle:
        def __init__(self, workers=None, factory="rlvr.judge.core:Judge", shards=None, max_timeouts=3):
            built.append({"factory": factory, "max_timeouts": max_timeouts})
            self.max_timeouts = max_timeouts

    monkeypatch.setattr(ray_pool, "NodeJudge", Handle)
    assert node_judge(4, None, 1).max_timeouts == 1 and node_judge(4, None, 3).max_timeouts == 3
    assert built == [{"factory": "rlvr.reward.timeouts:judge_max_timeouts_1", "max_timeouts": 1},
                     {"factory": "rlvr.judge.core:Judge", "max_timeouts": 3}]
