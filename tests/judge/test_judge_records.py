"""The runner's record channel (``rlvr/judge/sandbox/inside/proc.py``), on the host: what :class:`proc.Channel` writes
is what :class:`proc.Records` reads back, only with the child's nonce, and nonces never repeat within a runner."""

from __future__ import annotations

import os

import pytest


def _written(proc, nonce, send):
    r, w = os.pipe()
    try:
        send(proc.Channel(w, nonce))
        os.close(w)
        w = -1
        return os.read(r, 1 << 16)
    finally:
        os.close(r)
        if w != -1:
            os.close(w)


@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_ok_record_round_trips(proc, code):
    data = _written(proc, "abc1", lambda ch: ch.ok(code))
    assert proc.Records("abc1").feed(data) == [{"ok": True, "x": code}]


def test_records_need_the_childs_nonce(proc):
    data = _written(proc, "abc1", lambda ch: ch.ok(0))
    data += _written(proc, "abc1", lambda ch: ch.put(e="ValueError", m="m"))
    assert proc.Records("abc2").feed(data) == []
    assert proc.Records("abc1").feed(data) == [{"ok": True, "x": 0}, {"e": "ValueError", "m": "m"}]


def test_a_record_like_the_ok_form_but_with_more_fields_is_read_as_json(proc):
    body = b'{"ok": true, "x": 1, "e": "Forged", "n": "abc1"}'
    data = len(body).to_bytes(4, "big") + body
    assert proc.Records("abc1").feed(data) == [{"ok": True, "x": 1, "e": "Forged"}]


def test_split_feeds_are_reassembled(proc):
    data = _written(proc, "k9", lambda ch: ch.ok(7))
    parser = proc.Records("k9")
    assert parser.feed(data[:5]) == []
    assert parser.feed(data[5:]) == [{"ok": True, "x": 7}]


def test_nonces_differ_between_children_of_one_runner(proc):
    nonces = [proc.next_nonce() for _ in range(1000)]
    assert len(set(nonces)) == len(nonces)
    assert all(len(n) > 24 for n in nonces)  # a 96-bit random key plus the counter

