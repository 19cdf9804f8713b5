"""Adversarial suite, the server's front door (issue 43, items 4 and 6): each hostile client of
:mod:`hostile.front_door` runs against a live server on loopback (behind
:func:`rlvr.judge.api.frontdoor.uvicorn_options`) while another tenant judges correct programs and pings.

For each: every tenant request ends ``accepted`` (retrying a 503 as :class:`~rlvr.judge.client.RemoteJudge` does),
every ping answers ``pong`` within :data:`PING_BOUND_S` (a generous guard against a stalled loop, not a speed
target), the hostile client sees only the statuses it is allowed (never a 500) and each it requires (the front door
acting: 408, 431, 503, a closed idle connection), the server's connections stay within its limit throughout, no
request carrying an unechoable id reached the judge, and nothing was answered 500."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from door_server import DoorJudge, Tenant, live_server
from hostile.front_door import CLIENTS, MARK, HostileClient

from rlvr.judge.api.frontdoor import FrontDoor

#: Longest a ping may take while a hostile client runs, seconds (guard against a stalled event loop).
PING_BOUND_S = 10.0
#: How long each hostile client runs, seconds (each also bounds its own count of connections and bytes).
ATTACK_S = 4.0
DOOR = FrontDoor(max_connections=48, max_header_bytes=16 << 10, header_timeout_s=1.5, keep_alive_s=2.0)


@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS, ids=[c.name for c in CLIENTS])
def test_front_door_holds_while_another_tenant_is_served(client: HostileClient) -> None:
    judge = DoorJudge(workers=2, delay_s=0.02)
    with live_server(judge, door=DOOR, max_queue=4, body_timeout_s=2.0) as live:
        tenant = Tenant(live.url).start()
        peak, done = [0], threading.Event()

        def sample() -> None:  # the server's connections while the hostile client runs
            while not done.wait(0.02):
                peak[0] = max(peak[0], live.connections())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        seen = client.run(live.addr, ATTACK_S)
        done.set()
        sampler.join(timeout=5)
        tenant.stop()
        deadline = time.monotonic() + 10
        while live.connections() > DOOR.max_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        held = live.connections()
        public = httpx.get(f"{live.url}/metrics", timeout=10).text
    assert not seen.violations, seen.violations
    assert not tenant.failed, f"{client.name}: the other tenant failed: {tenant.failed[:3]}"
    assert tenant.accepted >= 3
    assert not tenant.ping_failed, f"{client.name}: pings failed: {tenant.ping_failed[:3]}"
    assert max(tenant.ping_s) < PING_BOUND_S, f"{client.name}: a ping took {max(tenant.ping_s):.1f} s"
    bad = [s for s in seen.statuses if s not in client.allowed]
    assert not bad, f"{client.name}: unexpected statuses {sorted(set(map(str, bad)))}"
    missing = client.required - set(seen.statuses)
    assert not missing, f"{client.name}: the front door never answered {sorted(map(str, missing))}"
    assert peak[0] <= DOOR.max_connections + 1, f"{client.name}: {peak[0]} connections held at once"
    assert held <= DOOR.max_connections, f"{client.name}: {held} connections held"
    assert 'status="500"' not in public
    if client.name == "bad_request_ids":
        assert seen.statuses and not any(MARK in s for s in judge.solutions), "a request with a bad id ran"


@pytest.mark.slow
def test_connection_flood_cannot_starve_the_real_judge_of_descriptors(tmp_path) -> None:
    """``rlvr sandbox serve`` with an open-file limit of 256 (connection limit 64): 400 idle connections held while
    another tenant's real program runs. Before: the fds ran out, so the server stopped accepting and the tenant's
    sandbox could not be started (500 ``sandbox_error``, or no answer)."""
    import resource
    import socket

    from door_server import sandbox_serve, serve_env

    def low_nofile() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    held: list[socket.socket] = []
    env = serve_env(RLVR_SANDBOX_WORKERS="1", RLVR_SANDBOX_HEADER_TIMEOUT_S="30")
    with sandbox_serve(tmp_path / "serve.log", env, start_s=90, preexec_fn=low_nofile) as url:
        try:
            for _ in range(400):
                try:
                    held.append(socket.create_connection(("127.0.0.1", httpx.URL(url).port), timeout=5))
                except OSError:
                    pass
            time.sleep(0.5)
            assert httpx.get(f"{url}/v1/ping", timeout=30).json() == "pong"
            r = httpx.post(f"{url}/run_code", json={"code": "print(6 * 7)", "language": "python"}, timeout=120)
            assert r.status_code == 200, r.text[:300]
            assert r.json()["status"] == "Success" and r.json()["run_result"]["stdout"] == "42\n", r.text[:300]
        finally:
            for s in held:
                s.close()
