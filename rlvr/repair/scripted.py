"""Scripted policies for the repair protocol: fixed outputs per (episode, turn) that drive the evaluation
(:func:`rlvr.repair.eval.run_episodes`) and verl's agent loop (:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`)
alike, so a rehearsal can replay known programs (references, mutants, broken ones) through either path.

A policy is ``policy(first_message, turn) -> reply``: ``first_message`` is the content of the episode's first user
message (:func:`rlvr.repair.protocol.initial_messages`, the same text on both paths, so it identifies the problem),
``turn`` the number of assistant replies before this one (answers and python-run calls, from 0).
:func:`replies_policy` builds one from fixed reply lists. :class:`ScriptedGenerator` is the evaluation's generator,
:class:`ScriptedServer` verl's LLM server client (the agent loop's ``server_manager``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlvr.generate import Completion, GenerationStats, SamplingParams
from rlvr.train.verl.scripted import pick_turn, turn_ids

__all__ = ["Policy", "ScriptedGenerator", "ScriptedServer", "replies_policy"]

Policy = Callable[[str, int], str]
"""``policy(first_message, turn) -> reply`` (module doc)."""


def replies_policy(replies: Mapping[str, Sequence[str]] | Sequence[str],
                   key: Callable[[str], str] | None = None) -> Policy:
    """A policy from fixed replies: ``replies[k][turn]`` for the episode whose first message has key ``k``
    (``key(first_message)``; default: the first message itself), the last reply once the list is exhausted; a plain
    sequence is every episode's list (:func:`rlvr.train.verl.scripted.pick_turn`, the GRPO rehearsal's rule). Raises
    ``KeyError`` naming the key for an episode with no replies and ``ValueError`` for an empty list."""

    def policy(first_message: str, turn: int) -> str:
        if isinstance(replies, Mapping):
            k = key(first_message) if key else first_message
            if k not in replies:
                raise KeyError(f"scripted policy: no replies for episode {k[:80]!r}")
            seq = replies[k]
        else:
            seq = replies
        return pick_turn(seq, turn)

    return policy


class ScriptedGenerator:
    """The evaluation's generator (:class:`rlvr.generate.Generator` interface) over ``policy``: the reply to a
    conversation is ``policy(messages[0]["content"], number of assistant messages)``; ``n`` copies, 0 tokens."""

    model_id = "scripted"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.stats = GenerationStats()

    def generate(self, prompts: Sequence[Sequence[dict[str, str]]], n: int, sampling: SamplingParams,
                 ids: Sequence[str] | None = None) -> list[list[Completion]]:
        """One list of ``n`` equal completions per conversation of ``prompts``."""
        out = []
        for msgs in prompts:
            turn = sum(m["role"] == "assistant" for m in msgs)
            out.append([Completion(self.policy(msgs[0]["content"], turn), 0, "stop")] * n)
        return out


class ScriptedServer:
    """verl's LLM server client (the agent loop's ``server_manager``; verl 0.9.1 ``AsyncLLMServerManager.generate``
    interface) over ``policy``: each ``generate`` call of a request id is the next turn of that episode; its reply is
    ``policy(first_message, turn)`` encoded with ``tokenizer`` plus the EOS token, cut at the call's ``max_tokens``
    (:func:`rlvr.train.verl.scripted.turn_ids`).
    ``first_messages``: the episodes' possible first messages (e.g. the rows' ``prompt[0]["content"]``): the one
    found in the decoded prompt (the longest when several are) names the episode. Raises ``LookupError`` when the
    prompt holds none of them."""

    def __init__(self, tokenizer: Any, policy: Policy, first_messages: Sequence[str]) -> None:
        self.tok, self.policy = tokenizer, policy
        self.first_messages = sorted(set(first_messages), key=len, reverse=True)
        self.turns: dict[str, int] = defaultdict(int)

    def first_message(self, prompt_ids: Sequence[int]) -> str:
        """The first message of the episode whose tokens are ``prompt_ids``."""
        text = self.tok.decode(list(prompt_ids), skip_special_tokens=False)
        for m in self.first_messages:
            if m in text:
                return m
        raise LookupError(f"scripted server: the prompt holds none of the {len(self.first_messages)} first messages")

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any) -> Any:
        """The next turn of episode ``request_id`` as verl's ``TokenOutput``."""
        from verl.workers.rollout.replica import TokenOutput

        turn = self.turns[request_id]
        self.turns[request_id] += 1
        reply = self.policy(self.first_message(prompt_ids), turn)
        cap = sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens")
        ids, cut = turn_ids(self.tok, reply, int(cap) if cap else None)
        if cut:  # verl: stop_reason None = unknown (cut)
            return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason=None)
        # log-probs 0.0: verl's V1 trainer reads them whenever rollout.calculate_log_probs is on (the GPU
        # rehearsal found it; rlvr.train.verl.scripted, the policy the rehearsal installs in every worker)
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")
