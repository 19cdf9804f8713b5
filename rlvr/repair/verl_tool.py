"""Multi-turn repair on verl 0.9.1's agent loop: the repair protocol in verl's ``ToolAgentLoop``, the agent-loop
config, the overrides, the rows (the ``run_tests``/``run_python`` tools of the tool variant:
:mod:`rlvr.repair.verl_tool_variant`).

The protocol (:mod:`rlvr.repair.protocol`, the one the evaluation runs): the first user message is the single-turn
prompt GRPO trains on; every reply is an attempt judged on the *visible* tests; a failing one gets the feedback (with
the protocol's rules: answers left, how the episode ends) as the next **user** turn; the program graded is the
episode's last program. verl 0.9.1 has no user-turn
mechanism (its ``interaction`` hooks are gone; what is left is the ``tool_agent`` loop,
``verl/experimental/agent_loop/tool_agent_loop.py``, whose tool answers are ``tool`` turns), so our subclass
:class:`FinalAnswerAgentLoop` (agent ``rlvr_tool_agent``, registered through
``actor_rollout_ref.rollout.agent.agent_loop_config_path``) plays :class:`rlvr.repair.protocol.Episode` after every
generation and appends its message as a user turn through verl's own token merge (response mask 0). Facts read from
verl's source and relied on here:

* verl's ``AgentLoopWorker`` instantiates the loop once per trajectory (``hydra.utils.instantiate`` of our config
  entry, whose keys reach the constructor) and calls ``run(sampling_params, **row)``: the row's ``extra_info``
  carries the visible tests (:data:`VISIBLE_KEY`);
* the reward managers decode the *whole* multi-turn response (every assistant turn and the feedback between them),
  so the extractor would also see code the feedback quotes: the loop records the program graded in the sample's
  ``extra_fields["final_answer"]`` (verl merges ``extra_fields`` into the reward's ``extra_info``) and
  :func:`rlvr.reward.verl.compute_score` scores that instead of the whole response; verl's ``tool_rewards`` field
  carries ``-turn_penalty`` per feedback turn, which ``compute_score`` adds.

Rows (:func:`repair_row_fields`): ``prompt`` = the protocol's first message, ``extra_info[VISIBLE_KEY]`` = the
visible-test problem, ``reward_model.ground_truth`` = the hidden-test problem (:func:`rlvr.repair.env.split_tests`),
so the reward scores the final program on hidden tests only and the feedback only ever uses visible ones.

The tool variant (:mod:`rlvr.repair.verl_tool_variant`: verl ``BaseTool`` subclasses for a policy that calls
``run_tests`` through its chat template's tool-call syntax) is not used by the repair stage; its tools share this
module's judge (:func:`_judge`).

The judge is :func:`rlvr.judge.client.get_judge` (a remote judge when ``RLVR_SANDBOX_URL`` is set) or the node's
shared judge (``verl.judge_pool: node``), created lazily in each rollout worker; its synchronous calls run in a
thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop

from rlvr.data.schema import from_ground_truth
from rlvr.repair.protocol import EnvConfig, Episode, accepted_feedback, fenced
from rlvr.repair.verl_config import (
    AGENT_NAME,
    FEEDBACK_TURNS_KEY,
    VISIBLE_KEY,
    agent_loop_config,
    episode_budget,
    repair_overrides,
    repair_row_fields,
    repair_verl_rows,
    write_agent_loop_config,
    write_repair_parquet,
)
from rlvr.reward.verl import (
    FINAL_ANSWER_KEY,
    TOOL_PARSE_FAILURES_KEY,
    TOOL_REWARDS_KEY,
    TOOL_SANDBOX_ERRORS_KEY,
)

__all__ = ["AGENT_NAME", "FEEDBACK_TURNS_KEY", "FINAL_ANSWER_KEY", "TOOL_REWARDS_KEY", "VISIBLE_KEY",
           "FinalAnswerAgentLoop", "accepted_feedback", "agent_loop_config", "episode_budget", "repair_overrides",
           "repair_row_fields", "repair_verl_rows", "write_agent_loop_config", "write_repair_parquet"]

_JUDGE: Any = None
def _judge(pool: str = "process", workers: int = 0, shards: int = 0, max_timeouts: int = 3) -> Any:
    """The tools' judge in this rollout worker: the node's shared judge (:class:`rlvr.judge.ray_pool.NodeJudge` of
    ``workers`` sandboxes over ``shards`` actors, 0 = automatic: the same actors verl's reward workers use, given the
    same two numbers) when ``pool`` is ``node``, inside Ray and without ``RLVR_SANDBOX_URL``; else
    :func:`rlvr.judge.client.get_judge`. Either judges under ``max_timeouts`` (``reward_shaping.max_timeouts``, as the
    reward: :mod:`rlvr.reward.timeouts`; the node's actors are shared with the reward workers, so the value must be
    theirs). Made once per process. Raises :class:`rlvr.config.ConfigError` when the judge cannot apply the value."""
    global _JUDGE
    if _JUDGE is None:
        from rlvr.config import RuntimeSettings
        from rlvr.judge.client import get_judge
        from rlvr.reward.timeouts import node_judge, reward_judge

        judge = None
        if pool == "node" and not RuntimeSettings().sandbox_url.strip():
            try:
                import ray
            except ImportError:
                ray = None
            if ray is not None and ray.is_initialized():
                judge = node_judge(workers or None, shards or None, max_timeouts)
        _JUDGE = reward_judge(judge if judge is not None else get_judge(), max_timeouts)
    return _JUDGE


def _env_cfg(config: dict[str, Any]) -> EnvConfig:
    return EnvConfig(**{k: v for k, v in config.items() if k in EnvConfig.model_fields})


class FinalAnswerAgentLoop(ToolAgentLoop):
    """verl's ``tool_agent`` loop running the repair protocol (:mod:`rlvr.repair.protocol`) with feedback as user
    turns, and recording the program graded.

    A row that carries its visible tests (``extra_info[VISIBLE_KEY]``, :func:`repair_row_fields`) is played as a
    protocol :class:`~rlvr.repair.protocol.Episode`: after every generation the turn's text is given to
    ``Episode.step`` (judged on the visible tests in a thread, with the tools' judge :func:`_judge`); unless that
    ends the episode, its message (feedback, or a ```python-run output) is appended as a ``user`` message through
    verl's own token merge (``ct_merge_context_msg``: response mask 0, as verl does for a tool answer) and the loop
    generates again. verl's tool parser is not consulted for such a row: every reply is an answer or a python-run
    call, as in the evaluation. The episode also ends, as every verl episode does, when the response budget
    (``rollout.response_length``) or ``multi_turn.max_assistant_turns`` / ``max_user_turns`` run out; the program
    graded is then the last one so far.

    Recorded in the sample's ``extra_fields`` (which verl's reward managers merge into the reward's ``extra_info``):
    ``FINAL_ANSWER_KEY`` = the episode's last program as a single fenced block (:func:`rlvr.repair.protocol.fenced`
    of :attr:`Episode.final`), or the last turn's text when no answer had code, so :func:`rlvr.reward.verl.
    compute_score` scores the program the evaluation grades; ``tool_rewards`` (verl's own key, ``TOOL_REWARDS_KEY``)
    = ``-turn_penalty`` per feedback turn (answers − 1), which ``compute_score`` adds to the score; ``feedback_turns``
    (``FEEDBACK_TURNS_KEY``). Each turn's text is decoded like verl's reward managers decode a response
    (``skip_special_tokens=True``) and cut where the episode's response is cut (``rollout.response_length`` tokens).

    A row without ``VISIBLE_KEY`` runs verl's plain tool loop; then ``FINAL_ANSWER_KEY`` is the last turn's text and
    ``extra_fields[TOOL_SANDBOX_ERRORS_KEY]`` counts the feedback judgings (protocol rows: an answer whose visible-test
    verdict was ``sandbox_error``) and tool calls (plain tool loop, :meth:`_call_tool`) that failed for the
    infrastructure's reasons; :mod:`rlvr.train.verl.logs` sums it per step (``tool_sandbox_errors``).

    ``extra_fields[TOOL_PARSE_FAILURES_KEY]`` counts the turns' tool-call openings
    (``tool_parser.tool_call_start_token``) that verl's parser did not turn into a call (verl drops those silently).

    Constructor keywords (keys of our agent-loop config, :func:`agent_loop_config`, which verl's
    ``AgentLoopWorker._run_agent_loop`` passes through ``hydra.utils.instantiate``; one instance per trajectory):
    ``env`` (a dict of :class:`~rlvr.repair.protocol.EnvConfig` fields: feedback template, caps, turns, mode,
    ``turn_penalty``; default: the defaults), ``judge_pool`` / ``judge_pool_workers`` / ``judge_pool_shards`` (as
    ``verl.*``, :func:`_judge`), ``judge_max_timeouts`` (``reward_shaping.max_timeouts``, :func:`_judge`), and
    ``turn_tokens`` (``repair.turn_tokens``): the token budget of every assistant
    turn. verl 0.9.1 has none: ``AgentLoopWorker.generate_sequences`` (``experimental/agent_loop/agent_loop.py``)
    builds sampling params without ``max_tokens``, ``ToolAgentLoop`` passes them on unchanged, and the vLLM server
    (``vLLMHttpServer.generate``, ``workers/rollout/vllm_rollout/vllm_async_server.py``) then lets a turn run to
    ``min(response_length, prompt_length + response_length - len(context))``, the whole rest of the episode. An
    explicit ``max_tokens`` it honours (clamped to the model's context); so each turn here asks for
    ``min(turn_tokens, response_length - tokens of the response so far)`` (:meth:`turn_max_tokens`). ``None``:
    verl's default. Raises ``ValueError`` for ``turn_tokens`` < 1 or an unknown ``env`` key."""

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

    def __init__(self, *args: Any, turn_tokens: int | None = None, env: dict[str, Any] | None = None,
                 judge_pool: str = "process", judge_pool_workers: int = 0, judge_pool_shards: int = 0,
                 judge_max_timeouts: int = 3, **kwargs: Any) -> None:
        if turn_tokens is not None and int(turn_tokens) < 1:
            raise ValueError(f"FinalAnswerAgentLoop: turn_tokens must be >= 1, got {turn_tokens}")
        super().__init__(*args, **kwargs)
        self.turn_tokens = None if turn_tokens is None else int(turn_tokens)
        env_dict = _plain(env) if env is not None else {}
        self.env_cfg = EnvConfig(**env_dict)
        self.judge_spec = (str(judge_pool), int(judge_pool_workers or 0), int(judge_pool_shards or 0),
                           int(judge_max_timeouts))
        self.episode: Episode | None = None

    async def run(self, sampling_params: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        """verl's ``run``, after starting the protocol episode of a row that carries ``extra_info[VISIBLE_KEY]``
        (class doc)."""
        info = kwargs.get("extra_info") or {}
        gt = info.get(VISIBLE_KEY) if isinstance(info, dict) else None
        if gt is not None:
            first = next((m for m in kwargs.get("raw_prompt") or [] if m.get("role") == "user"), None)
            self.episode = Episode(from_ground_truth(gt, "repair"), _judge(*self.judge_spec), self.env_cfg,
                                   str(first["content"]) if first else None)
        return await super().run(sampling_params, *args, **kwargs)

    def turn_max_tokens(self, agent_data: AgentData, sampling_params: dict[str, Any]) -> int | None:
        """The ``max_tokens`` of the next assistant turn: ``min(turn_tokens, response_length - len(response so
        far))`` tokens (the response so far: every earlier turn and user/tool turn, ``agent_data.response_mask``),
        and at most a ``max_tokens``/``max_new_tokens`` the caller already set; at least 1 (verl's servers reject
        less; ``ToolAgentLoop`` ends the episode before a turn with no budget left). ``None`` without
        ``turn_tokens``."""
        if self.turn_tokens is None:
            return None
        caps = [self.turn_tokens, self.response_length - len(agent_data.response_mask)]
        caps += [int(sampling_params[k]) for k in ("max_tokens", "max_new_tokens") if sampling_params.get(k)]
        return max(1, min(caps))

    def _out_of_budget(self, agent_data: AgentData, ignore_termination: bool) -> bool:
        """verl's own end conditions after a generation (``ToolAgentLoop._handle_generating_state``)."""
        return ((not ignore_termination and len(agent_data.response_mask) >= self.response_length)
                or bool(self.max_assistant_turns and agent_data.assistant_turns >= self.max_assistant_turns)
                or bool(self.max_user_turns and agent_data.user_turns >= self.max_user_turns))

    async def _handle_generating_state(self, agent_data: AgentData, sampling_params: dict[str, Any],
                                       ignore_termination: bool = False) -> AgentState:
        cap = self.turn_max_tokens(agent_data, sampling_params)
        if cap is not None:  # vLLM reads max_tokens first, SGLang max_new_tokens: leave only the one
            sampling_params = {**{k: v for k, v in sampling_params.items() if k != "max_new_tokens"},
                               "max_tokens": cap}
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        agent_data.extra_fields.setdefault(TOOL_SANDBOX_ERRORS_KEY, 0)
        ids = list(agent_data.response_ids)
        over = len(agent_data.response_mask) - self.response_length  # tokens of this turn past the response cap
        cut = ids[: max(0, len(ids) - over)] if over > 0 else ids
        text = self.tokenizer.decode(cut, skip_special_tokens=True)
        if self.episode is None:
            await self._count_parse_failures(agent_data, ids, state)
            agent_data.extra_fields[FINAL_ANSWER_KEY] = text
            return state
        return await self._protocol_turn(agent_data, text, self._out_of_budget(agent_data, ignore_termination))

    async def _protocol_turn(self, agent_data: AgentData, text: str, out_of_budget: bool) -> AgentState:
        """One protocol step on the turn's ``text`` (class doc): record the final program and the penalties, then
        end the episode or append the user turn and generate again."""
        ep = self.episode
        assert ep is not None
        agent_data.tool_calls = []  # no verl tool under the protocol
        reply = await asyncio.to_thread(ep.step, text)
        failed = reply.visible is not None and reply.visible.verdict == "sandbox_error"
        agent_data.extra_fields[TOOL_SANDBOX_ERRORS_KEY] = (
            int(agent_data.extra_fields.get(TOOL_SANDBOX_ERRORS_KEY, 0)) + int(failed))
        final = ep.final
        agent_data.extra_fields[FINAL_ANSWER_KEY] = fenced(final) if final is not None else text
        agent_data.extra_fields[TOOL_PARSE_FAILURES_KEY] = 0
        if reply.done or out_of_budget or reply.message is None:
            return self._finish(agent_data)
        if agent_data.messages and agent_data.messages[-1].get("role") == "assistant":
            agent_data.messages[-1] = {"role": "assistant", "content": text}  # the text, tool-call syntax and all
        else:
            agent_data.messages.append({"role": "assistant", "content": text})
        previous = list(agent_data.messages)
        agent_data.messages.append({"role": "user", "content": reply.message})
        merged, mask, logprobs = await self.ct_merge_context_msg(
            previous, agent_data.messages, agent_data.prompt_ids, agent_data.response_mask,
            agent_data.response_logprobs or None, tools=getattr(agent_data, "_active_tool_schemas", self.tool_schemas))
        if len(mask) >= self.response_length:  # verl's rule for a tool answer that does not fit
            return self._finish(agent_data)
        agent_data.prompt_ids, agent_data.response_mask = merged.token_ids, mask
        if agent_data.response_logprobs:
            agent_data.response_logprobs = logprobs or []
        agent_data.user_turns += 1
        return AgentState.GENERATING

    def _finish(self, agent_data: AgentData) -> AgentState:
        """End the protocol episode: the turn penalties (``-turn_penalty`` per feedback turn) into verl's
        ``tool_rewards`` and the count into ``FEEDBACK_TURNS_KEY``."""
        ep = self.episode
        assert ep is not None
        ep.done = True
        n = ep.feedback_turns
        agent_data.tool_rewards[:] = [-self.env_cfg.turn_penalty] * n
        agent_data.extra_fields[FEEDBACK_TURNS_KEY] = n
        return AgentState.TERMINATED

    async def _count_parse_failures(self, agent_data: AgentData, ids: list[int], state: AgentState) -> None:
        """Plain tool loop (no protocol row): count the tool-call openings verl's parser dropped (class doc)."""
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        opened = text.count(getattr(self.tool_parser, "tool_call_start_token", "<tool_call>"))
        if not opened:
            agent_data.extra_fields.setdefault(TOOL_PARSE_FAILURES_KEY, 0)
            return
        if state == AgentState.PROCESSING_TOOLS:
            parsed = len(agent_data.tool_calls)
        else:  # parser not run (budget ended the episode) or it found nothing: parse again to tell them apart
            active = getattr(agent_data, "_active_tools", self.tools)
            _, calls = await self.tool_parser.extract_tool_calls(ids, [t.tool_schema for t in active.values()])
            parsed = len(calls)
        agent_data.extra_fields[TOOL_PARSE_FAILURES_KEY] = (
            int(agent_data.extra_fields.get(TOOL_PARSE_FAILURES_KEY, 0)) + max(0, opened - parsed))


def _plain(obj: Any) -> dict[str, Any]:
    """An OmegaConf node (what hydra passes) or a mapping as a plain dict."""
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(obj, DictConfig):
            return dict(OmegaConf.to_container(obj, resolve=True))  # type: ignore[arg-type]
    except ImportError:  # pragma: no cover - hydra comes with verl
        pass
    return dict(obj)
