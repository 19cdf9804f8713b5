"""The hostile corpus itself (no judge): at least 60 programs over every family of issue 14, unique names, known
probe targets, and every Python program compiles (a program that does not compile would be rejected for the wrong
reason and prove nothing)."""

from __future__ import annotations

from hostile import PROBES, Hostile, abuse, forging, guards, host_work, laundering, reading, secrets, shadowing, state

FAMILIES = {"forging": forging, "laundering": laundering, "reading": reading, "guards": guards,
            "shadowing": shadowing, "secrets": secrets, "abuse": abuse, "host_work": host_work}


def _all() -> list[Hostile]:
    return [h for m in FAMILIES.values() for h in m.PROGRAMS]


def test_corpus_has_at_least_60_programs_over_every_family():
    progs = _all()
    assert len(progs) + len(state.PAIRS) >= 60
    assert {h.family for h in progs} == set(FAMILIES)
    assert all(len(m.PROGRAMS) >= 5 for m in FAMILIES.values())
    assert len(state.PAIRS) >= 8
    names = [h.name for h in progs] + [p.name for p in state.PAIRS]
    assert len(names) == len(set(names))


def test_host_work_family_has_at_least_40_generated_programs():
    assert len(host_work.PROGRAMS) >= 40  # issue 28, item 6


def test_every_target_is_a_probe_and_every_python_program_compiles():
    known = set(PROBES) | set(shadowing.SHAPES)
    for h in _all():
        assert h.targets and set(h.targets) <= known, h.name
        if h.language == "python":
            compile(h.code.replace("{TAG}", "1"), h.name, "exec")
    for p in state.PAIRS:
        if p.language == "python":
            compile(p.planter.replace("{TOKEN}", "x"), p.name, "exec")
            compile(p.reader, p.name, "exec")
