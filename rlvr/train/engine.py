"""Which training engine a stage uses: the top-level ``params.yaml`` key ``engine: local | verl``.

``local`` = TRL on transformers models (:mod:`rlvr.train.local`, CPU or one GPU); ``verl`` = Ray + vLLM
(:mod:`rlvr.train.verl`). verl has no DPO: the ``dpo`` stage always uses ``local``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, get_args

from rlvr.config import ConfigError, load_params

__all__ = ["ENGINES", "Engine", "check_rl_sets", "load_engine", "load_reward_mode", "load_seeds"]

Engine = Literal["local", "verl"]
ENGINES: tuple[str, ...] = get_args(Engine)


def load_engine(path: str | Path = "params.yaml") -> str:
    """The ``engine`` key of ``params.yaml`` (default ``local`` when absent).

    Raises :class:`rlvr.config.ConfigError` naming the file when the value is not one of :data:`ENGINES`."""
    engine = load_params(path).get("engine", "local")
    if engine not in ENGINES:
        raise ConfigError(f"{path}: engine: {engine!r} is not one of {', '.join(ENGINES)}")
    return str(engine)


def check_rl_sets(engine: str, train_sets: Sequence[str], verl_train: Sequence[str], where: str | Path) -> None:
    """Under ``engine: verl`` GRPO trains on the manifests' parquet, built from ``manifests.verl_train``, and never
    reads ``train.train_sets`` (the local engine's GRPO prompts): a different list would be a param that engine
    ignores, and the two engines would train on different problems. Order does not matter.

    Raises :class:`rlvr.config.ConfigError` (one line naming ``where`` and both keys) when the engine is ``verl`` and
    the two lists name different ``"<dataset>/<split>"`` sets; under ``local`` the parquet is only written, so any
    pair is accepted."""
    if engine == "verl" and set(train_sets) != set(verl_train):
        raise ConfigError(f"{where}: train.train_sets {list(train_sets)} differs from manifests.verl_train "
                          f"{list(verl_train)}: under engine verl GRPO trains on manifests.verl_train's parquet and "
                          "ignores train.train_sets; make them name the same sets (the 7B profiles do)")


def load_reward_mode(path: str | Path = "params.yaml") -> str:
    """The top-level ``reward`` key (``sparse | dense | shaped``), validated by :mod:`rlvr.reward.modes`."""
    from rlvr.reward.modes import load_reward_config

    return load_reward_config(path).mode


def load_seeds(path: str | Path = "params.yaml") -> list[int]:
    """The top-level ``seeds`` list (GRPO seeds, DVC ``foreach``). Raises ``ConfigError`` if not a list of ints."""
    seeds = load_params(path).get("seeds", [1])
    if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
        raise ConfigError(f"{path}: seeds: expected a list of integers, got {seeds!r}")
    return seeds
