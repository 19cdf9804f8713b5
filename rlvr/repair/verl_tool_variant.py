"""The tool variant of multi-turn repair on verl 0.9.1: the ``run_tests`` / ``run_python`` tools and their config.

verl ``BaseTool`` subclasses (:class:`RunTestsTool`, :class:`PythonTool`) declared in a YAML file
(:func:`write_tool_config`; verl reads it from ``multi_turn.tool_config_path`` with ``initialize_tools_from_config``)
for a policy that calls ``run_tests`` through its chat template's tool-call syntax (:func:`tool_call_text`). The
repair stage does not use it (the launch writes no tool config; the stage's loop is
:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`, feedback as user turns); it stays for the GPU suite's tool-use
check (``bench/gpu/teach_tools.py``). The tools judge with the agent loop's judge
(:func:`rlvr.repair.verl_tool._judge`: the node's shared judge or :func:`rlvr.judge.client.get_judge`), its
synchronous calls in a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import yaml
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from rlvr.data.schema import Problem, from_ground_truth
from rlvr.io import atomic_write_text
from rlvr.repair.protocol import EnvConfig, accepted_feedback, cap_middle, format_feedback
from rlvr.repair.verl_tool import _env_cfg, _judge

__all__ = ["PythonTool", "RunTestsTool", "repair_tool_config", "tool_call_text", "write_tool_config"]


class RunTestsTool(BaseTool):
    """``run_tests(code)``: judge ``code`` on the row's visible tests (``create_kwargs.ground_truth``) and return the
    repair feedback (:func:`rlvr.repair.env.format_feedback`). ``config``: the tool config (``EnvConfig`` fields
    such as ``field_chars``, ``feedback_template``). Step reward 0.0 (the reward is the final hidden verdict), or
    ``-turn_penalty`` from ``config`` per call: verl's ``ToolAgentLoop`` collects these in the sample's
    ``extra_fields["tool_rewards"]`` but never adds them to the score, so :func:`rlvr.reward.verl.compute_score`
    adds them to the final verdict's reward."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None) -> None:
        super().__init__(config, tool_schema)
        self.env_cfg = _env_cfg(config)
        self.turn_penalty = float(config.get("turn_penalty", 0.0))
        self.judge_pool = str(config.get("judge_pool", "process"))
        self.judge_args = (int(config.get("judge_pool_workers") or 0), int(config.get("judge_pool_shards") or 0),
                           int(config.get("judge_max_timeouts", 3)))
        self._problems: dict[str, Problem] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """Store the visible-test problem of ``kwargs['create_kwargs']['ground_truth']``; raises ``ValueError``
        when it is missing."""
        iid = instance_id or str(uuid4())
        gt = (kwargs.get("create_kwargs") or {}).get("ground_truth")
        if gt is None:
            raise ValueError("run_tests: the row's extra_info.tools_kwargs.run_tests.create_kwargs has no ground_truth")
        self._problems[iid] = from_ground_truth(gt, "repair")
        return iid, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse,
                                                                                                 float, dict]:
        """Judge ``parameters['code']`` on the visible tests; returns (feedback, step reward, {verdict, judge_s})."""
        problem = self._problems[instance_id]
        code = str(parameters.get("code", ""))
        if not problem.tests:
            return ToolResponse(text="There are no example tests for this problem."), -self.turn_penalty, {}
        res = await asyncio.to_thread(_judge(self.judge_pool, *self.judge_args).judge, problem, code)
        text = accepted_feedback(res.total) if res.accepted else format_feedback(problem, res, self.env_cfg)
        return ToolResponse(text=text), -self.turn_penalty, {"verdict": res.verdict, "judge_s": res.judge_s}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forget the instance."""
        self._problems.pop(instance_id, None)


class PythonTool(BaseTool):
    """``run_python(code)``: one sandboxed run (``judge.run_code``, empty stdin) returning exit status, stdout and
    stderr capped at ``tool_output_chars`` (interpreter mode)."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None) -> None:
        super().__init__(config, tool_schema)
        self.env_cfg = _env_cfg(config)
        self.judge_pool = str(config.get("judge_pool", "process"))
        self.judge_args = (int(config.get("judge_pool_workers") or 0), int(config.get("judge_pool_shards") or 0),
                           int(config.get("judge_max_timeouts", 3)))

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse,
                                                                                                 float, dict]:
        """Run ``parameters['code']``; returns (output, 0.0, {verdict})."""
        c = self.env_cfg
        judge = _judge(self.judge_pool, *self.judge_args)
        run = await asyncio.to_thread(judge.run_code, str(parameters.get("code", "")), "", c.tool_timeout_s,
                                      c.tool_memory_mb)
        text = cap_middle(f"[{run.verdict}, exit code {run.exit_code}]\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}",
                    c.tool_output_chars)
        return ToolResponse(text=text), 0.0, {"verdict": run.verdict}


def _schema(name: str, description: str, arg: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": arg}},
                       "required": ["code"]},
    }}


def tool_call_text(name: str, arguments: dict[str, str], fmt: str = "hermes") -> str:
    """The text of one call of tool ``name`` with string ``arguments`` in the syntax ``fmt`` that verl's tool parser
    of the same name reads back as that call (``hermes``: JSON inside ``<tool_call>`` tags, as Qwen2.5's chat
    template writes it; ``qwen3_coder``: ``<function=NAME>`` / ``<parameter=ARG>`` XML with raw values, Qwen3-Coder's
    template; both from verl 0.9.1 ``experimental/agent_loop/tool_parser.py``). Used to write tool-use transcripts,
    e.g. to teach a small policy the format (``bench/gpu/teach_tools.py``). Raises ``ValueError`` for another
    ``fmt``."""
    if fmt == "hermes":
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
    if fmt == "qwen3_coder":
        params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    raise ValueError(f"tool_call_text: unknown tool-call format {fmt!r} (hermes, qwen3_coder)")


def repair_tool_config(cfg: EnvConfig, turn_penalty: float | None = None, judge_pool: str = "process",
                       judge_pool_workers: int = 0, judge_pool_shards: int = 0,
                       judge_max_timeouts: int = 3) -> dict[str, Any]:
    """The verl tool-config mapping (``{"tools": [...]}``): ``run_tests`` always, ``run_python`` in interpreter mode.
    Each tool's ``config`` carries ``type: native`` plus the :class:`EnvConfig` fields it reads; ``turn_penalty``
    defaults to ``cfg.turn_penalty``; ``judge_pool`` (``verl.judge_pool``): ``node`` = the tools judge on the node's
    shared judge, the one the reward workers use (:func:`_judge`; ``judge_pool_workers`` / ``judge_pool_shards`` as
    ``verl.*``, so both reach the same actors), ``process`` = each rollout worker its own; ``judge_max_timeouts``:
    the judge's timeout rule (``reward_shaping.max_timeouts``, the reward's; written only when not the default 3)."""
    env = cfg.model_dump(mode="json")
    pool = {"judge_pool": judge_pool, "judge_pool_workers": judge_pool_workers, "judge_pool_shards": judge_pool_shards,
            **({"judge_max_timeouts": int(judge_max_timeouts)} if judge_max_timeouts != 3 else {})}
    turn_penalty = cfg.turn_penalty if turn_penalty is None else turn_penalty
    tools = [{
        "class_name": f"{__name__}.RunTestsTool",
        "config": {"type": "native", **env, "turn_penalty": turn_penalty, **pool},
        "tool_schema": _schema("run_tests", "Run a candidate solution on the example tests and get feedback.",
                               "The complete Python solution program."),
    }]
    if cfg.mode == "interpreter":
        tools.append({
            "class_name": f"{__name__}.PythonTool",
            "config": {"type": "native", **env, **pool},
            "tool_schema": _schema("run_python", "Run a Python program and get its output.",
                                   "The Python program to run (standard input is empty)."),
        })
    return {"tools": tools}


def write_tool_config(path: str | Path, cfg: EnvConfig, turn_penalty: float | None = None,
                      judge_pool: str = "process", judge_pool_workers: int = 0, judge_pool_shards: int = 0,
                      judge_max_timeouts: int = 3) -> Path:
    """Write :func:`repair_tool_config` as YAML to ``path`` atomically; returns the path."""
    atomic_write_text(path, yaml.safe_dump(repair_tool_config(cfg, turn_penalty, judge_pool, judge_pool_workers,
                                                              judge_pool_shards, judge_max_timeouts),
                                           sort_keys=False))
    return Path(path)
