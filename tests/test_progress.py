"""rlvr.progress: bars on a terminal, silent in CI or when stderr is not a TTY; RLVR_PROGRESS forces either way."""

from __future__ import annotations

import io

import pytest

from rlvr.progress import progress, progress_enabled


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("RLVR_PROGRESS", raising=False)


def test_tty_outside_ci_shows_bars() -> None:
    assert progress_enabled(Tty()) is True


def test_not_a_tty_is_quiet() -> None:
    assert progress_enabled(io.StringIO()) is False


@pytest.mark.parametrize("value", ["true", "1", "TRUE", "yes"])
def test_ci_is_quiet_even_on_a_tty(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    assert progress_enabled(Tty()) is False


def test_ci_false_does_not_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    assert progress_enabled(Tty()) is True


def test_rlvr_progress_forces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("RLVR_PROGRESS", "1")
    assert progress_enabled(io.StringIO()) is True
    monkeypatch.setenv("RLVR_PROGRESS", "0")
    assert progress_enabled(Tty()) is False


def test_disabled_bar_still_iterates_and_counts(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("RLVR_PROGRESS", "0")
    assert list(progress(range(3), desc="x")) == [0, 1, 2]
    with progress(total=5, desc="y") as bar:
        bar.update(5)
    assert capsys.readouterr().err == ""


def test_enabled_bar_shows_count_and_eta(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("RLVR_PROGRESS", "1")
    with progress(total=4, desc="judge", unit="sample") as bar:
        bar.update(4)
        assert bar.n == 4
    err = capsys.readouterr().err
    # count/total, elapsed<remaining (the ETA) and the rate's unit
    assert "judge" in err and "0/4" in err and "[00:00<" in err and "sample/s" in err
