"""Multi-turn repair on verl 0.9.1's agent loop: our judge as native tools, the tool config, the overrides, the rows.

verl >= 0.8 removed the built-in SandboxFusion tool and interactions; what is left is the ``tool_agent`` agent loop
(``verl/experimental/agent_loop/tool_agent_loop.py``) calling ``BaseTool`` subclasses declared in a YAML file
(``actor_rollout_ref.rollout.multi_turn.tool_config_path``; loaded by ``verl.tools.tool_registry.
initialize_tools_from_config``: ``tools: [{class_name, config: {type: native, ...}, tool_schema}]``). Facts read
from that source and relied on here:

* per call, the loop does ``create(create_kwargs=row.tools_kwargs[tool].create_kwargs)`` → ``execute(id, args)`` →
  ``release(id)``: a tool instance lives for one call, so per-problem data (the *visible* tests) travels in every
  call's ``create_kwargs``; the number of calls is bounded by ``multi_turn.max_assistant_turns`` (= K, the turns) and
  ``max_user_turns``, not by the tool;
* ``tools_kwargs`` comes from the dataset row's ``extra_info.tools_kwargs`` (``RLHFDataset``); the loop is chosen by
  the row's ``agent_name`` (verl's ``tool_agent``; ours: ``rlvr_tool_agent``, below).

Rows (:func:`repair_row_fields`): ``extra_info.tools_kwargs.run_tests.create_kwargs.ground_truth`` = the visible-test
problem, ``reward_model.ground_truth`` = the hidden-test problem (:func:`rlvr.repair.env.split_tests`), so the final
reward (:mod:`rlvr.reward.verl`) scores the last answer on hidden tests only, and the tool only ever sees visible ones.

The final answer: verl's reward manager decodes the *whole* multi-turn response (every assistant turn, and the tool
answers between them, special tokens dropped), so the extractor would also see the judge's feedback and the code of
earlier tool calls: a final turn without code could be scored on a fenced block the tool printed. The rows therefore
name our subclass :class:`FinalAnswerAgentLoop` (agent ``rlvr_tool_agent``, registered through
``actor_rollout_ref.rollout.agent.agent_loop_config_path``), which records the text of the last assistant turn in the
sample's ``extra_fields["final_answer"]``; verl's reward managers merge those fields into ``extra_info``, and
:func:`rlvr.reward.verl.compute_score` scores that text instead of the whole response.

The judge is :func:`rlvr.judge.client.get_judge` (a remote judge when ``RLVR_SANDBOX_URL`` is set), created lazily in
each rollout worker; its synchronous calls run in a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import yaml
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from rlvr.data.schema import Problem, from_ground_truth, ground_truth
from rlvr.io import atomic_write_text
from rlvr.repair.env import EnvConfig, cap_middle, format_feedback, split_tests
from rlvr.reward.verl import FINAL_ANSWER_KEY, TOOL_PARSE_FAILURES_KEY, TOOL_SANDBOX_ERRORS_KEY

__all__ = ["AGENT_NAME", "FINAL_ANSWER_KEY", "FinalAnswerAgentLoop", "PythonTool", "RunTestsTool",
           "accepted_feedback", "agent_loop_config", "episode_budget", "repair_overrides", "repair_row_fields",
           "repair_tool_config", "repair_verl_rows", "tool_call_text", "write_agent_loop_config",
           "write_repair_parquet", "write_tool_config"]

_JUDGE: Any = None
AGENT_NAME = "rlvr_tool_agent"
"""The rows' ``agent_name``: :class:`FinalAnswerAgentLoop`."""


def _judge(pool: str = "process", workers: int = 0, shards: int = 0) -> Any:
    """The tools' judge in this rollout worker: the node's shared judge (:class:`rlvr.judge.ray_pool.NodeJudge` of
    ``workers`` sandboxes over ``shards`` actors, 0 = automatic: the same actors verl's reward workers use, given the
    same two numbers) when ``pool`` is ``node``, inside Ray and without ``RLVR_SANDBOX_URL``; else
    :func:`rlvr.judge.client.get_judge`. Made once per process."""
    global _JUDGE
    if _JUDGE is None:
        from rlvr.config import RuntimeSettings
        from rlvr.judge.client import get_judge

        judge = None
        if pool == "node" and not RuntimeSettings().sandbox_url.strip():
            try:
                import ray
            except ImportError:
                ray = None
            if ray is not None and ray.is_initialized():
                from rlvr.judge.ray_pool import NodeJudge

                judge = NodeJudge(workers=workers or None, shards=shards or None)
        _JUDGE = judge if judge is not None else get_judge()
    return _JUDGE


def _env_cfg(config: dict[str, Any]) -> EnvConfig:
    return EnvConfig(**{k: v for k, v in config.items() if k in EnvConfig.model_fields})


def accepted_feedback(total: int) -> str:
    """What ``run_tests`` answers when the program passes all ``total`` visible tests."""
    return f"All {total} example tests passed."


class FinalAnswerAgentLoop(ToolAgentLoop):
    """verl's ``tool_agent`` loop (unchanged) that also records the final answer and the tool calls that failed to
    parse.

    After every generation, ``extra_fields[FINAL_ANSWER_KEY]`` = that turn's tokens decoded like verl's reward
    managers decode a response (``skip_special_tokens=True``), cut where the episode's response is cut
    (``rollout.response_length`` tokens), so the last one left is the answer the reward scores (module doc). A turn
    that ends on a tool call is recorded too: an episode whose last turn is a call (turns exhausted) has no final
    answer, and its text holds no fenced program.

    ``extra_fields[TOOL_PARSE_FAILURES_KEY]`` counts, over the episode, the turns' tool-call openings
    (``tool_parser.tool_call_start_token``, ``<tool_call>`` for ``hermes`` and ``qwen3_coder``) that verl's parser
    did not turn into a call (bad JSON, a missing closing tag, an unknown layout): verl drops those silently (it logs
    "Failed to decode tool call" and ends the episode as if the turn were a final answer). A call that parsed but was
    not run because the turn or length budget ended the episode is not a failure. The count reaches the reward's
    ``extra_info`` (verl merges ``extra_fields`` into it), which reports it per sample (``tool_parse_failures``), and
    :mod:`rlvr.train.verl.logs` sums it per step.

    ``turn_tokens`` (``repair.turn_tokens``; a key of our agent-loop config, :func:`agent_loop_config`, which verl's
    ``AgentLoopWorker._run_agent_loop`` passes to the constructor through ``hydra.utils.instantiate``): the token
    budget of every assistant turn. verl 0.9.1 has none: ``AgentLoopWorker.generate_sequences``
    (``experimental/agent_loop/agent_loop.py``) builds sampling params without ``max_tokens``, ``ToolAgentLoop``
    passes them on unchanged, and the vLLM server (``vLLMHttpServer.generate``,
    ``workers/rollout/vllm_rollout/vllm_async_server.py``) then lets a turn run to ``min(response_length,
    prompt_length + response_length - len(context))``, the whole rest of the episode. An explicit ``max_tokens`` it
    honours (clamped to the model's context); so each turn here asks for ``min(turn_tokens, response_length - tokens
    of the response so far)`` (:meth:`turn_max_tokens`). ``None``: verl's default."""

    async def _call_tool(self, tool_call: Any, tools_kwargs: dict[str, Any], agent_data: AgentData) -> Any:
        """verl's ``_call_tool``, counting in ``extra_fields[TOOL_SANDBOX_ERRORS_KEY]`` the calls that failed for the
        infrastructure's reasons: the judge answered ``sandbox_error`` (the tool's metrics ``verdict``), or the tool
        raised (verl then answers "Error executing tool …" with empty metrics). A call verl refused before running
        it (unknown tool name, arguments not JSON: the policy's error) is not counted."""
        out = await super()._call_tool(tool_call, tools_kwargs, agent_data)
        response, _, metrics = out
        text = str(getattr(response, "text", "") or "")
        failed = (isinstance(metrics, dict) and metrics.get("verdict") == "sandbox_error") or (
            not metrics and text.startswith("Error executing tool"))
        agent_data.extra_fields[TOOL_SANDBOX_ERRORS_KEY] = (
            int(agent_data.extra_fields.get(TOOL_SANDBOX_ERRORS_KEY, 0)) + int(failed))
        return out

    def __init__(self, *args: Any, turn_tokens: int | None = None, **kwargs: Any) -> None:
        if turn_tokens is not None and int(turn_tokens) < 1:
            raise ValueError(f"FinalAnswerAgentLoop: turn_tokens must be >= 1, got {turn_tokens}")
        super().__init__(*args, **kwargs)
        self.turn_tokens = None if turn_tokens is None else int(turn_tokens)

    def turn_max_tokens(self, agent_data: AgentData, sampling_params: dict[str, Any]) -> int | None:
        """The ``max_tokens`` of the next assistant turn: ``min(turn_tokens, response_length - len(response so
        far))`` tokens (the response so far: every earlier turn and tool answer, ``agent_data.response_mask``), and
        at most a ``max_tokens``/``max_new_tokens`` the caller already set; at least 1 (verl's servers reject less;
        ``ToolAgentLoop`` ends the episode before a turn with no budget left). ``None`` without ``turn_tokens``."""
        if self.turn_tokens is None:
            return None
        caps = [self.turn_tokens, self.response_length - len(agent_data.response_mask)]
        caps += [int(sampling_params[k]) for k in ("max_tokens", "max_new_tokens") if sampling_params.get(k)]
        return max(1, min(caps))

    async def _handle_generating_state(self, agent_data: AgentData, sampling_params: dict[str, Any],
                                       ignore_termination: bool = False) -> AgentState:
        cap = self.turn_max_tokens(agent_data, sampling_params)
        if cap is not None:  # vLLM reads max_tokens first, SGLang max_new_tokens: leave only the one
            sampling_params = {**{k: v for k, v in sampling_params.items() if k != "max_new_tokens"},
                               "max_tokens": cap}
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        ids = list(agent_data.response_ids)
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        opened = text.count(getattr(self.tool_parser, "tool_call_start_token", "<tool_call>"))
        if opened:
            if state == AgentState.PROCESSING_TOOLS:
                parsed = len(agent_data.tool_calls)
            else:  # parser not run (budget ended the episode) or it found nothing: parse again to tell them apart
                active = getattr(agent_data, "_active_tools", self.tools)
                _, calls = await self.tool_parser.extract_tool_calls(ids, [t.tool_schema for t in active.values()])
                parsed = len(calls)
            failed = max(0, opened - parsed)
            agent_data.extra_fields[TOOL_PARSE_FAILURES_KEY] = (
                int(agent_data.extra_fields.get(TOOL_PARSE_FAILURES_KEY, 0)) + failed)
        else:
            agent_data.extra_fields.setdefault(TOOL_PARSE_FAILURES_KEY, 0)
        agent_data.extra_fields.setdefault(TOOL_SANDBOX_ERRORS_KEY, 0)
        over = len(agent_data.response_mask) - self.response_length  # tokens of this turn past the response cap
        if over > 0:
            ids = ids[: max(0, len(ids) - over)]
        agent_data.extra_fields[FINAL_ANSWER_KEY] = self.tokenizer.decode(ids, skip_special_tokens=True)
        return state


def agent_loop_config(turn_tokens: int | None = None) -> list[dict[str, Any]]:
    """verl's agent-loop config (``rollout.agent.agent_loop_config_path``): ``[{name: AGENT_NAME, _target_: …}]``,
    plus ``turn_tokens`` (tokens per assistant turn, :class:`FinalAnswerAgentLoop`) when given: verl's
    ``AgentLoopWorker`` loads the file with OmegaConf and instantiates the entry with ``hydra.utils.instantiate``
    (``experimental/agent_loop/agent_loop.py``), so the entry's keys reach the constructor as keyword arguments."""
    entry: dict[str, Any] = {"name": AGENT_NAME, "_target_": f"{__name__}.{FinalAnswerAgentLoop.__qualname__}"}
    if turn_tokens is not None:
        entry["turn_tokens"] = int(turn_tokens)
    return [entry]


def write_agent_loop_config(path: str | Path, turn_tokens: int | None = None) -> Path:
    """Write :func:`agent_loop_config` (``turn_tokens`` passed on) as YAML to ``path`` atomically; returns the
    path."""
    atomic_write_text(path, yaml.safe_dump(agent_loop_config(turn_tokens), sort_keys=False))
    return Path(path)


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
        self.judge_args = (int(config.get("judge_pool_workers") or 0), int(config.get("judge_pool_shards") or 0))
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
        self.judge_args = (int(config.get("judge_pool_workers") or 0), int(config.get("judge_pool_shards") or 0))

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
                       judge_pool_workers: int = 0, judge_pool_shards: int = 0) -> dict[str, Any]:
    """The verl tool-config mapping (``{"tools": [...]}``): ``run_tests`` always, ``run_python`` in interpreter mode.
    Each tool's ``config`` carries ``type: native`` plus the :class:`EnvConfig` fields it reads; ``turn_penalty``
    defaults to ``cfg.turn_penalty``; ``judge_pool`` (``verl.judge_pool``): ``node`` = the tools judge on the node's
    shared judge, the one the reward workers use (:func:`_judge`; ``judge_pool_workers`` / ``judge_pool_shards`` as
    ``verl.*``, so both reach the same actors), ``process`` = each rollout worker its own."""
    env = cfg.model_dump(mode="json")
    pool = {"judge_pool": judge_pool, "judge_pool_workers": judge_pool_workers, "judge_pool_shards": judge_pool_shards}
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
                      judge_pool: str = "process", judge_pool_workers: int = 0, judge_pool_shards: int = 0) -> Path:
    """Write :func:`repair_tool_config` as YAML to ``path`` atomically; returns the path."""
    atomic_write_text(path, yaml.safe_dump(repair_tool_config(cfg, turn_penalty, judge_pool, judge_pool_workers,
                                                              judge_pool_shards), sort_keys=False))
    return Path(path)


def episode_budget(cfg: EnvConfig, turn_tokens: int) -> int:
    """The episode's response budget in tokens (verl's ``data.max_response_length``, which holds every assistant turn
    and every tool answer of a multi-turn episode): ``assistant_turns x turn_tokens + tool_answers x
    feedback_chars``, with ``assistant_turns`` = ``turns`` (+ ``max_tool_calls`` in interpreter mode, as
    :func:`repair_overrides`' ``max_assistant_turns``) and ``tool_answers`` = ``assistant_turns - 1`` (a tool answer
    follows every turn but the last). A tool answer is capped at ``feedback_chars`` characters
    (``multi_turn.max_tool_response_length``); with byte-level BPE tokenizers an ASCII character is at most one
    token, so for ASCII feedback this is an upper bound. Raises ``ValueError`` when ``turn_tokens`` < 1."""
    if turn_tokens < 1:
        raise ValueError(f"repair.turn_tokens={turn_tokens}: must be at least 1 token")
    assistant = cfg.turns + (cfg.max_tool_calls if cfg.mode == "interpreter" else 0)
    return assistant * turn_tokens + (assistant - 1) * cfg.feedback_chars


def repair_overrides(tool_config_path: str | Path, cfg: EnvConfig, tool_response_chars: int | None = None,
                     agent_loop_config_path: str | Path | None = None) -> list[str]:
    """Hydra overrides (``verl.trainer.main_ppo``) turning on the tool agent loop with our tools: multi-turn on,
    the tool config, ``max_assistant_turns`` = ``turns + max_tool_calls`` (interpreter) or ``turns``, tool response
    cap (characters; default ``cfg.feedback_chars``), the tool-call format ``cfg.tool_format``, and the agent loop
    :data:`AGENT_NAME` (:class:`FinalAnswerAgentLoop`) registered from ``agent_loop_config_path``
    (:func:`write_agent_loop_config`) as the default loop; without that path, verl's plain ``tool_agent``. Add them
    to the GRPO overrides of :mod:`rlvr.train.verl.overrides`."""
    turns = cfg.turns + (cfg.max_tool_calls if cfg.mode == "interpreter" else 0)
    mt = "actor_rollout_ref.rollout.multi_turn"
    return [
        f"{mt}.enable=True",
        f"{mt}.tool_config_path={tool_config_path}",
        f"{mt}.max_assistant_turns={turns}",
        f"{mt}.max_user_turns={turns}",
        f"{mt}.max_tool_response_length={tool_response_chars or cfg.feedback_chars}",
        f"{mt}.format={cfg.tool_format}",
        *([f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loop_config_path}",
           f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}"] if agent_loop_config_path else
          ["actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent"]),
    ]


def repair_row_fields(problem: Problem, cfg: EnvConfig) -> dict[str, Any]:
    """verl parquet fields of a repair row (module doc): ``agent_name``, ``reward_model`` (hidden ground truth) and
    ``extra_info.tools_kwargs`` (visible ground truth for ``run_tests``). Merge into the row of
    :mod:`rlvr.train.verl.data`; raises ``ValueError`` for a problem without tests."""
    visible, hidden = split_tests(problem, cfg.visible_tests)
    return {
        "agent_name": AGENT_NAME,
        "reward_model": {"style": "rule", "ground_truth": ground_truth(hidden)},
        "extra_info": {"tools_kwargs": {"run_tests": {"create_kwargs": {"ground_truth": ground_truth(visible)}}},
                       "need_tools_kwargs": True},
    }


def repair_verl_rows(problems: Sequence[Problem], cfg: EnvConfig) -> list[dict[str, Any]]:
    """verl RL rows for repair training: :func:`rlvr.data.export.verl_rows` (prompt, data_source, ability) with
    :func:`repair_row_fields` merged in (hidden ground truth for the reward, visible one for ``run_tests``)."""
    from rlvr.data.export import verl_rows

    rows = verl_rows(problems)
    for row, p in zip(rows, problems, strict=True):
        f = repair_row_fields(p, cfg)
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
