"""verl launch files of repair training that need no verl import: the agent-loop config, the episode budget, the
multi-turn overrides and the repair rows (:mod:`rlvr.repair.verl_tool` re-exports them beside the agent loop)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from rlvr.data.schema import Problem, ground_truth
from rlvr.io import atomic_write_text
from rlvr.repair.env import split_tests
from rlvr.repair.protocol import EnvConfig, initial_messages

__all__ = ["AGENT_LOOP_TARGET", "AGENT_NAME", "FEEDBACK_TURNS_KEY", "VISIBLE_KEY", "agent_loop_config",
           "episode_budget", "repair_overrides", "repair_row_fields", "repair_verl_rows", "write_agent_loop_config",
           "write_repair_parquet"]

AGENT_NAME = "rlvr_tool_agent"
"""The rows' ``agent_name``: :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`."""
VISIBLE_KEY = "repair_visible"
"""``extra_info`` key of a repair row's visible-test ground truth (:func:`repair_row_fields`), read by
:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`."""
FEEDBACK_TURNS_KEY = "feedback_turns"
"""``extra_fields`` key of an episode's feedback turns (answers − 1), written by
:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`."""
AGENT_LOOP_TARGET = "rlvr.repair.verl_tool.FinalAnswerAgentLoop"
"""The ``_target_`` of :data:`AGENT_NAME` in the agent-loop config: :class:`rlvr.repair.verl_tool.
FinalAnswerAgentLoop`."""


def agent_loop_config(turn_tokens: int | None = None, env: EnvConfig | None = None, judge_pool: str = "process",
                      judge_pool_workers: int = 0, judge_pool_shards: int = 0,
                      judge_max_timeouts: int = 3) -> list[dict[str, Any]]:
    """verl's agent-loop config (``rollout.agent.agent_loop_config_path``): ``[{name: AGENT_NAME, _target_: …}]``, plus
    ``turn_tokens`` (tokens per assistant turn) when given, and with ``env`` the protocol's settings (``env``: the
    :class:`EnvConfig` fields; ``judge_pool*``: whose judge runs the visible tests,
    ``rlvr.repair.verl_tool._judge``; ``judge_max_timeouts``: its timeout rule, ``reward_shaping.max_timeouts``,
    written only when it is not the judge's default 3), all keywords of
    :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`: verl's
    ``AgentLoopWorker`` loads the file with OmegaConf and instantiates the entry with ``hydra.utils.instantiate``
    (``experimental/agent_loop/agent_loop.py``), so the entry's keys reach the constructor as keyword arguments."""
    entry: dict[str, Any] = {"name": AGENT_NAME, "_target_": AGENT_LOOP_TARGET}
    if turn_tokens is not None:
        entry["turn_tokens"] = int(turn_tokens)
    if env is not None:
        entry.update(env=env.model_dump(mode="json"), judge_pool=judge_pool, judge_pool_workers=judge_pool_workers,
                     judge_pool_shards=judge_pool_shards)
        if judge_max_timeouts != 3:
            entry["judge_max_timeouts"] = int(judge_max_timeouts)
    return [entry]


def write_agent_loop_config(path: str | Path, turn_tokens: int | None = None, env: EnvConfig | None = None,
                            judge_pool: str = "process", judge_pool_workers: int = 0,
                            judge_pool_shards: int = 0, judge_max_timeouts: int = 3) -> Path:
    """Write :func:`agent_loop_config` (arguments passed on) as YAML to ``path`` atomically; returns the path."""
    atomic_write_text(path, yaml.safe_dump(agent_loop_config(turn_tokens, env, judge_pool, judge_pool_workers,
                                                             judge_pool_shards, judge_max_timeouts),
                                           sort_keys=False))
    return Path(path)


def episode_budget(cfg: EnvConfig, turn_tokens: int) -> int:
    """The episode's response budget in tokens (verl's ``data.max_response_length``, which holds every assistant turn
    and every user turn between them): ``assistant_turns x turn_tokens + user_turns x user_chars``, with
    ``assistant_turns`` = ``turns`` (+ ``max_tool_calls`` in interpreter mode, as :func:`repair_overrides`'
    ``max_assistant_turns``), ``user_turns`` = ``assistant_turns - 1`` (feedback or a python-run output follows every
    turn but the last) and ``user_chars`` = ``feedback_chars`` (the cap of a feedback message,
    :func:`rlvr.repair.protocol.format_feedback`), or ``tool_output_chars`` when larger in interpreter mode (the cap
    of a python-run output, :func:`rlvr.repair.protocol.tool_output`). With byte-level BPE tokenizers an ASCII
    character is at most one token, so for ASCII feedback this bounds the user turns' text (the chat template adds a
    few tokens per turn; real feedback is far below its cap). Raises ``ValueError`` when ``turn_tokens`` < 1."""
    if turn_tokens < 1:
        raise ValueError(f"repair.turn_tokens={turn_tokens}: must be at least 1 token")
    interp = cfg.mode == "interpreter"
    assistant = cfg.turns + (cfg.max_tool_calls if interp else 0)
    user_chars = max(cfg.feedback_chars, cfg.tool_output_chars) if interp else cfg.feedback_chars
    return assistant * turn_tokens + (assistant - 1) * user_chars


def repair_overrides(tool_config_path: str | Path | None, cfg: EnvConfig, tool_response_chars: int | None = None,
                     agent_loop_config_path: str | Path | None = None) -> list[str]:
    """Hydra overrides (``verl.trainer.main_ppo``) turning on verl's multi-turn agent loop: multi-turn on,
    ``max_assistant_turns`` = ``max_user_turns`` = ``turns + max_tool_calls`` (interpreter) or ``turns``, the tool
    response cap (characters; default ``cfg.feedback_chars``), the tool-call format ``cfg.tool_format``, the tool
    config when ``tool_config_path`` is given (the repair protocol needs none: ``None``), and the agent loop
    :data:`AGENT_NAME` (:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`) registered from ``agent_loop_config_path``
    (:func:`write_agent_loop_config`) as the default loop; without that path, verl's plain ``tool_agent``. Add them
    to the GRPO overrides of :mod:`rlvr.train.verl.overrides`."""
    turns = cfg.turns + (cfg.max_tool_calls if cfg.mode == "interpreter" else 0)
    mt = "actor_rollout_ref.rollout.multi_turn"
    return [
        f"{mt}.enable=True",
        *([f"{mt}.tool_config_path={tool_config_path}"] if tool_config_path is not None else []),
        f"{mt}.max_assistant_turns={turns}",
        f"{mt}.max_user_turns={turns}",
        f"{mt}.max_tool_response_length={tool_response_chars or cfg.feedback_chars}",
        f"{mt}.format={cfg.tool_format}",
        *([f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loop_config_path}",
           f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}"] if agent_loop_config_path else
          ["actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent"]),
    ]


def repair_row_fields(problem: Problem, cfg: EnvConfig) -> dict[str, Any]:
    """verl parquet fields of a repair row (module doc): ``prompt`` (the protocol's first message,
    :func:`rlvr.repair.protocol.initial_messages`), ``agent_name``, ``reward_model`` (hidden ground truth) and
    ``extra_info[VISIBLE_KEY]`` (visible ground truth, for the feedback of
    :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`) plus ``extra_info.tools_kwargs.run_tests`` (the same, for
    the tool variant :class:`rlvr.repair.verl_tool_variant.RunTestsTool`). Merge into the row of
    :mod:`rlvr.train.verl.data`; raises ``ValueError`` for a problem without tests."""
    visible, hidden = split_tests(problem, cfg.visible_tests)
    vis = ground_truth(visible)
    return {
        "prompt": initial_messages(problem, cfg),
        "agent_name": AGENT_NAME,
        "reward_model": {"style": "rule", "ground_truth": ground_truth(hidden)},
        "extra_info": {VISIBLE_KEY: vis, "tools_kwargs": {"run_tests": {"create_kwargs": {"ground_truth": vis}}}},
    }


def repair_verl_rows(problems: Sequence[Problem], cfg: EnvConfig) -> list[dict[str, Any]]:
    """verl RL rows for repair training: :func:`rlvr.data.export.verl_rows` (data_source, ability) with
    :func:`repair_row_fields` merged in (the protocol's prompt, hidden ground truth for the reward, visible one for
    the agent loop's feedback)."""
    from rlvr.data.export import verl_rows

    rows = verl_rows(problems)
    for row, p in zip(rows, problems, strict=True):
        f = repair_row_fields(p, cfg)
        row["prompt"] = f["prompt"]
        row["agent_name"] = f["agent_name"]
        row["reward_model"] = f["reward_model"]
        row["extra_info"] = {**row["extra_info"], **f["extra_info"]}
    return rows


def write_repair_parquet(problems: Sequence[Problem], cfg: EnvConfig, path: str | Path) -> int:
    """Write :func:`repair_verl_rows` as a parquet file at ``path`` atomically; returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rlvr.io import atomic_open

    table = pa.Table.from_pylist(repair_verl_rows(problems, cfg))
    with atomic_open(path, "wb") as fh:
        pq.write_table(table, fh)
    return table.num_rows
