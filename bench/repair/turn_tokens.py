"""Qwen2.5 tokens of the answers the 7B recipe's repair and GRPO train on, against its per-turn cap (issue 42).

The 7B profiles cap every assistant turn of a repair episode at ``repair.turn_tokens`` (768) and a GRPO response at
``verl.max_response_length`` (2,048). This bench counts, with the real Qwen2/2.5 vocabulary, the tokens of each
training problem's first reference solution written as the policy is asked to write it, the first user turn, and a
feedback turn, and reports per source how many answers the caps would cut.

**Rows** (the stages' own selection, with the profile merged over ``params.yaml`` by
:func:`rlvr.config.profiles.apply_profile`):

* ``grpo``: ``train.train_sets`` through :func:`rlvr.data.manifests.rl_eligible` at ``manifests.grpo_min_tests``
  with ``<problems-dir>/../contamination.jsonl``'s flags (what the manifests stage writes to verl's parquet, and
  ``stages/grpo.py``'s local engine), then :func:`rlvr.train.overlap.apply_rl_share` at ``train.rl_share``;
* ``repair``: ``repair.train.train_sets`` through :func:`rlvr.data.manifests.min_tests_filter` on the hidden tests
  (:func:`rlvr.repair.env.split_tests` at ``repair.visible_tests``) at ``repair.train.min_hidden_tests``, then
  ``train.rl_share`` (``stages/repair.py``'s ``_train``).

**Texts counted** (:func:`texts`): the answer = :func:`rlvr.data.synthetic.completion_for` of ``solutions[0]`` (one
```python block, the SFT target and what the prompts ask for: "Return only the code, in a single ```python code
block"); the user turn = :func:`rlvr.repair.protocol.initial_messages` (= :func:`rlvr.data.prompts.build_messages`,
GRPO's prompt); the prompt as the model sees it = the user turn in Qwen2.5's chat framing with its default system
message (:data:`SYSTEM`, :func:`chat_prompt`); the feedback = :func:`rlvr.repair.protocol.format_feedback` with the
profile's template for a wrong answer on the first visible test whose output has the expected output's length
(:func:`feedback_text`). An assistant turn also generates ``<|im_end|>`` (1 token; vLLM counts it in
``max_tokens``), so an answer is cut when its tokens + 1 exceed the cap.

**Tokenizer** (:func:`qwen_encoding`): Qwen's byte-level BPE (151,643 regular tokens; Qwen2 technical report, Yang
et al. 2024, section 2.1 "Tokenizer": Qwen2 uses the same tokenizer as Qwen) from PyPI's ``dashscope`` wheel
(``dashscope/resources/qwen.tiktoken``, sha256 checked), with the pre-tokenization regex and the special-token ids
of that wheel's ``dashscope/tokenizers/qwen_tokenizer.py`` (``PAT_STR``, ``SPECIAL_START_ID`` 151643; the regex is
transformers' ``models/qwen2/tokenization_qwen2.py`` ``PRETOKENIZE_REGEX`` too), NFC-normalised first as Qwen2's
``tokenizer.json`` does. ``tiktoken`` runs the BPE. Neither is a project dependency: both are fetched into
``--cache`` (default ``/tmp/rlvr-turn-tokens``) with ``pip download``/``pip install --target``; the venv is untouched.

    .venv/bin/python bench/repair/turn_tokens.py --problems-dir /work/repro/data/governance/problems \\
        --profile profiles/qwen7b_4xh100.yaml          # -> bench/repair/turn_tokens.json
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import unicodedata
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the rlvr of this tree
    sys.path.insert(0, str(ROOT))

from rlvr.data.schema import Problem, StdioTest  # noqa: E402
from rlvr.data.synthetic import completion_for  # noqa: E402
from rlvr.judge.verdict import JudgeResult, TestResult  # noqa: E402
from rlvr.repair.env import split_tests  # noqa: E402
from rlvr.repair.protocol import EnvConfig, format_feedback, initial_messages  # noqa: E402

DASHSCOPE = "dashscope==2.0.2"
VOCAB_MEMBER = "dashscope/resources/qwen.tiktoken"
VOCAB_SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"
VOCAB_SIZE = 151_643
TIKTOKEN = "tiktoken==0.14.0"
#: dashscope 2.0.2 ``dashscope/tokenizers/qwen_tokenizer.py`` ``PAT_STR`` (= transformers' Qwen2 ``PRETOKENIZE_REGEX``)
PAT_STR = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
           r"""\s+(?!\S)|\s+""")
#: the chat tokens, ids from ``SPECIAL_START_ID`` = 151643 (the same ids in Qwen2.5's ``tokenizer.json``)
SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
#: Qwen2.5 instruct chat template's system message when the conversation has none
SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
END_TOKENS = 1  # <|im_end|> closing a generated assistant turn
#: per-turn caps whose share of cut answers is reported (the largest, 1,664, is the most a 3-turn episode with
#: 1,024 prompt and 2 x 1,000 feedback tokens leaves in one 8,192-token micro batch: (8,192 - 3,024) / 3, to 64)
SWEEP = (768, 896, 1024, 1280, 1536, 1664)
#: prompt caps whose share of prompts verl's filter would drop is reported
PROMPT_SWEEP = (1024, 1536, 2048, 2304)


def nearest_rank(values: Sequence[int], q: float) -> int:
    """The ``q``-th percentile (0 < q <= 100) of ``values`` by the nearest-rank method: the ``ceil(q/100 * n)``-th
    smallest value (always one of the values). Raises ``ValueError`` for no values or ``q`` outside (0, 100]."""
    if not values:
        raise ValueError("nearest_rank: no values")
    if not 0 < q <= 100:
        raise ValueError(f"nearest_rank: q={q} outside (0, 100]")
    s = sorted(values)
    return s[max(1, math.ceil(q / 100 * len(s))) - 1]


def summarize(tokens: Sequence[int], chars: Sequence[int], caps: Mapping[str, int], extra: int = 0
              ) -> dict[str, Any]:
    """Summary of one group of texts: ``count``, ``p50``/``p90``/``p99``/``max``/``mean`` of ``tokens``
    (:func:`nearest_rank`), ``chars_per_token`` (sum of ``chars`` / sum of ``tokens``), and for each ``caps`` entry
    ``over_<name>``: the count and share of texts with ``tokens + extra > cap`` (``extra``: tokens the turn adds,
    e.g. 1 for ``<|im_end|>``). Raises ``ValueError`` when ``tokens`` and ``chars`` differ in length."""
    if len(tokens) != len(chars):
        raise ValueError(f"summarize: {len(tokens)} token counts but {len(chars)} char counts")
    if not tokens:
        return {"count": 0}
    n = len(tokens)
    out: dict[str, Any] = {"count": n, **{f"p{q}": nearest_rank(tokens, q) for q in (50, 90, 99)},
                           "max": max(tokens), "mean": round(sum(tokens) / n, 1),
                           "chars_per_token": round(sum(chars) / max(1, sum(tokens)), 3)}
    for name, cap in caps.items():
        over = sum(t + extra > cap for t in tokens)
        out[f"over_{name}"] = {"cap": cap, "count": over, "share": round(over / n, 4)}
    return out


def cap_holding(p99: int, room: int, step: int = 64) -> int:
    """The smallest multiple of ``step`` tokens >= ``p99 + room + END_TOKENS``: a per-turn cap that holds the p99
    answer, its ``<|im_end|>`` and ``room`` tokens of explanation."""
    return math.ceil((p99 + room + END_TOKENS) / step) * step


def chat_prompt(user: str) -> str:
    """``user`` as Qwen2.5's chat template renders a one-message conversation for generation: the default system
    turn (:data:`SYSTEM`), the user turn, then the assistant header (``add_generation_prompt``)."""
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


def feedback_turn(feedback: str) -> str:
    """A feedback ``user`` turn as it follows a generated assistant turn (whose ``<|im_end|>`` the policy wrote):
    the newline, the user turn, and the next assistant header."""
    return f"\n<|im_start|>user\n{feedback}<|im_end|>\n<|im_start|>assistant\n"


def feedback_text(problem: Problem, cfg: EnvConfig) -> str | None:
    """The protocol's first feedback message for ``problem`` (:func:`rlvr.repair.protocol.format_feedback` with
    ``cfg``'s template and caps, after the first of ``cfg.turns`` answers): a wrong answer on the first visible test
    (:func:`rlvr.repair.env.split_tests`) whose output is that test's expected output (a wrong output of the right
    size); ``None`` when the problem has no visible test (its feedback says only whether code was found)."""
    visible, _ = split_tests(problem, cfg.visible_tests)
    if not visible.tests:
        return None
    test = visible.tests[0]
    shown = test.stdout if isinstance(test, StdioTest) else (getattr(test, "expected", None) or "AssertionError")
    n = len(visible.tests)
    res = JudgeResult(verdict="wrong_answer", passed=0, total=n, pass_ratio=0.0, judge_s=0.0,
                      tests=[TestResult(index=0, verdict="wrong_answer", stdout=shown, message=shown)])
    return format_feedback(visible, res, cfg, answers=1)


def texts(problem: Problem, cfg: EnvConfig) -> dict[str, str | None]:
    """The texts counted for ``problem`` (module doc): ``answer`` (``None`` without a reference), ``user``,
    ``prompt`` (:func:`chat_prompt`), ``feedback`` (:func:`feedback_text`)."""
    user = initial_messages(problem, cfg)[0]["content"]
    return {"answer": completion_for(problem.solutions[0]) if problem.solutions else None, "user": user,
            "prompt": chat_prompt(user), "feedback": feedback_text(problem, cfg)}


def select_rows(problems_dir: Path, params: Mapping[str, Any]) -> tuple[dict[str, list[Problem]], dict[str, Any]]:
    """The ``grpo`` and ``repair`` training rows of ``params`` (merged, profile applied) from the governed files in
    ``problems_dir`` (module doc). Returns ``({set: problems}, {set: the selection functions' counts})``. Raises what
    :func:`rlvr.train.local.common.load_problem_sets` raises (a missing file or split)."""
    from rlvr.data.manifests import flagged_ids, min_tests_filter, rl_eligible
    from rlvr.repair.eval import RepairParams
    from rlvr.train.local.common import load_problem_sets
    from rlvr.train.overlap import apply_rl_share

    train = params["train"]
    share = float(train.get("rl_share", 1.0))
    cfg = RepairParams(**params["repair"])
    grpo, g = rl_eligible(load_problem_sets(problems_dir, train["train_sets"]),
                          int(params["manifests"]["grpo_min_tests"]), flagged_ids(problems_dir.parent))
    grpo, g["rl_share"] = apply_rl_share(grpo, share)
    repair, r = min_tests_filter(load_problem_sets(problems_dir, cfg.train.train_sets or train["train_sets"]),
                                 cfg.train.min_hidden_tests, lambda p: len(split_tests(p, cfg.visible_tests)[1].tests))
    repair, r["rl_share"] = apply_rl_share(repair, share)
    return {"grpo": grpo, "repair": repair}, {"grpo": g, "repair": r}


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True)


def qwen_encoding(cache: Path) -> Any:
    """A ``tiktoken.Encoding`` of Qwen's vocabulary (module doc), fetching ``tiktoken`` (``pip install --no-deps
    --target <cache>/site``; its deps ``regex`` and ``requests`` are the venv's) and the ``dashscope`` wheel (``pip
    download --no-deps``) into ``cache`` when absent. Raises ``RuntimeError`` naming the file when the vocabulary's
    sha256 or size is not the expected one, ``subprocess.CalledProcessError`` when pip cannot fetch (offline)."""
    cache.mkdir(parents=True, exist_ok=True)
    try:
        import tiktoken
    except ImportError:
        site = cache / "site"
        if not (site / "tiktoken").is_dir():
            _pip("install", "--no-deps", "--target", str(site), TIKTOKEN)
        sys.path.append(str(site))  # after the venv's own packages
        import tiktoken
    vocab = cache / "qwen.tiktoken"
    if not vocab.is_file():
        _pip("download", "--no-deps", "--only-binary", ":all:", "-d", str(cache), DASHSCOPE)
        wheel = next(cache.glob("dashscope-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            vocab.write_bytes(zf.read(VOCAB_MEMBER))
    raw = vocab.read_bytes()
    if hashlib.sha256(raw).hexdigest() != VOCAB_SHA256:
        raise RuntimeError(f"{vocab}: sha256 is not {VOCAB_SHA256} ({DASHSCOPE}'s {VOCAB_MEMBER})")
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in raw.splitlines() if line)}
    if len(ranks) != VOCAB_SIZE:
        raise RuntimeError(f"{vocab}: {len(ranks)} tokens, expected {VOCAB_SIZE}")
    return tiktoken.Encoding("qwen", pat_str=PAT_STR, mergeable_ranks=ranks, special_tokens=SPECIAL)


def count(enc: Any, text: str) -> int:
    """Tokens of ``text`` (NFC-normalised; the chat tokens of :data:`SPECIAL` count one each)."""
    return len(enc.encode(unicodedata.normalize("NFC", text), allowed_special=set(SPECIAL)))


def prompt_fits(enc: Any, problems: Sequence[Problem], cfg: EnvConfig, max_prompt_length: int) -> list[Problem]:
    """The ``problems`` whose :func:`chat_prompt` fits ``max_prompt_length`` tokens: what verl 0.9.1's
    ``data.filter_overlong_prompts`` (set by :mod:`rlvr.train.verl.overrides`) keeps of a parquet
    (``verl/utils/dataset/rl_dataset.py``: the chat template's tokens with the generation prompt, ``<=`` the cap)."""
    return [p for p in problems if count(enc, chat_prompt(initial_messages(p, cfg)[0]["content"])) <= max_prompt_length]


def measure(enc: Any, rows: Mapping[str, Sequence[Problem]], cfg: EnvConfig, caps: Mapping[str, int],
            sweep: Sequence[int] = (), prompt_sweep: Sequence[int] = ()) -> dict[str, Any]:
    """Per row set and source (plus ``all``): :func:`summarize` of the ``answer`` tokens against ``caps``
    ``turn_tokens`` and ``max_response_length`` and each ``sweep`` cap (``turn_<n>``; + ``<|im_end|>``), of the
    ``user`` turn's and the ``prompt``'s tokens against ``max_prompt_length`` (the prompt's also against each
    ``prompt_sweep`` cap, ``prompt_<n>``), and of the ``feedback`` turn
    (:func:`feedback_turn`) against ``feedback_budget``; ``no_reference`` counts problems without a solution;
    ``longest``: the 10 longest answers (id, chars, tokens)."""
    answer_caps = {**{k: caps[k] for k in ("turn_tokens", "max_response_length")}, **{f"turn_{n}": n for n in sweep}}
    out: dict[str, Any] = {}
    for name, problems in rows.items():
        groups: dict[str, dict[str, list[int]]] = {}
        longest: list[tuple[int, int, str]] = []
        for p in problems:
            t = texts(p, cfg)
            for src in (p.source, "all"):
                g = groups.setdefault(src, {k: [] for k in ("at", "ac", "ut", "uc", "pt", "pc", "ft", "fc", "none")})
                g["ut"].append(count(enc, t["user"] or ""))
                g["uc"].append(len(t["user"] or ""))
                g["pt"].append(count(enc, t["prompt"] or ""))
                g["pc"].append(len(t["prompt"] or ""))
                if t["feedback"] is not None:
                    turn = feedback_turn(t["feedback"])
                    g["ft"].append(count(enc, turn))
                    g["fc"].append(len(turn))
                if t["answer"] is None:
                    g["none"].append(1)
                    continue
                g["at"].append(count(enc, t["answer"]))
                g["ac"].append(len(t["answer"]))
            if t["answer"] is not None:
                longest.append((groups["all"]["at"][-1], len(t["answer"]), p.id))
        out[name] = {src: {
            "answer": summarize(g["at"], g["ac"], answer_caps, extra=END_TOKENS),
            "user_turn": summarize(g["ut"], g["uc"], {"max_prompt_length": caps["max_prompt_length"]}),
            "prompt": summarize(g["pt"], g["pc"], {"max_prompt_length": caps["max_prompt_length"],
                                                   **{f"prompt_{n}": n for n in prompt_sweep}}),
            "feedback_turn": summarize(g["ft"], g["fc"], {"feedback_budget": caps["feedback_budget"]}),
            "no_reference": len(g["none"])} for src, g in sorted(groups.items(), key=lambda kv: kv[0] == "all")}
        out[name]["longest"] = [{"id": i, "chars": c, "tokens": n} for n, c, i in sorted(longest, reverse=True)[:10]]
    return out


def _cut(o: Mapping[str, Any]) -> str:
    return f"{o['count']} ({100 * o['share']:.1f} %)"


def table(results: Mapping[str, Any], caps: Mapping[str, int], sweep: Sequence[int] = ()) -> str:
    """A Markdown table of :func:`measure`'s ``results``: per set and source the answers' count, p50/p90/p99/max
    tokens, the answers cut at ``turn_tokens``, at each ``sweep`` cap (columns only for those :func:`measure` was
    given) and at ``max_response_length``, chars per token, the prompts over ``max_prompt_length`` (verl drops
    them), the prompt's and the feedback turn's p99 / max."""
    tt, mr, mp = caps["turn_tokens"], caps["max_response_length"], caps["max_prompt_length"]
    extra = [n for n in sweep if n != tt]
    head = ["set", "source", "answers", "p50", "p90", "p99", "max", f"cut at {tt:,} (turn)",
            *[f"cut at {n:,}" for n in extra], f"cut at {mr:,} (GRPO)", "chars/token", f"prompts > {mp:,}",
            "prompt p99 / max", "feedback turn p99 / max"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name, per in results.items():
        for src, s in per.items():
            if src == "longest" or not s["answer"].get("count"):
                continue
            a, pr, fb = s["answer"], s["prompt"], s["feedback_turn"]
            cells = [name, src, f"{a['count']:,}", a["p50"], a["p90"], f"{a['p99']:,}", f"{a['max']:,}",
                     _cut(a["over_turn_tokens"]), *[_cut(a[f"over_turn_{n}"]) for n in extra],
                     _cut(a["over_max_response_length"]), a["chars_per_token"], _cut(pr["over_max_prompt_length"]),
                     f"{pr['p99']:,} / {pr['max']:,}", f"{fb['p99']} / {fb['max']}" if fb.get("count") else "-"]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def _effective_params(params_path: Path, profile: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``params_path`` with ``profile`` selected and merged (:func:`rlvr.config.profiles.apply_profile`), and the
    profile's ``hardware`` block."""
    from rlvr.config import load_params
    from rlvr.config.profiles import apply_profile, load_scale_profile

    raw = load_params(params_path, raw=True)
    raw["profile"] = os.path.relpath(profile.resolve(), params_path.resolve().parent)
    return apply_profile(raw, params_path), load_scale_profile(profile)["hardware"]


def _files(problems_dir: Path, names: Sequence[str]) -> dict[str, Any]:
    out = {}
    for n in sorted(set(names)):
        f = problems_dir / f"{n}.jsonl"
        out[str(f)] = {"sha256": hashlib.sha256(f.read_bytes()).hexdigest(), "bytes": f.stat().st_size,
                       "mtime": dt.datetime.fromtimestamp(f.stat().st_mtime, dt.UTC).isoformat(timespec="seconds")}
    return out


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure, print the table, write the results JSON (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--problems-dir", type=Path, default=ROOT / "data/governance/problems",
                    help="governed problems (read only); contamination.jsonl is read from its parent")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--profile", type=Path, default=ROOT / "profiles/qwen7b_4xh100.yaml")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/rlvr-turn-tokens"),
                    help="where tiktoken and the dashscope wheel are fetched to")
    ap.add_argument("--room", type=int, default=128, help="tokens of explanation the recommended cap leaves")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/repair/turn_tokens.json")
    args = ap.parse_args(argv)
    params, hardware = _effective_params(args.params, args.profile)
    rep = params["repair"]
    cfg = EnvConfig(**{k: v for k, v in rep.items() if k in EnvConfig.model_fields})
    caps = {"turn_tokens": int(rep["turn_tokens"]), "max_response_length": int(params["verl"]["max_response_length"]),
            "max_prompt_length": int(params["verl"]["max_prompt_length"]), "feedback_budget": cfg.feedback_chars}
    rows, selection = select_rows(args.problems_dir, params)
    enc = qwen_encoding(args.cache)
    for name in list(rows):  # what verl trains on: its prompt filter drops the prompts over max_prompt_length
        rows[f"{name}_prompt_fits"] = prompt_fits(enc, rows[name], cfg, caps["max_prompt_length"])
    results = measure(enc, rows, cfg, caps, SWEEP, PROMPT_SWEEP)
    p99 = results["repair"]["all"]["answer"]["p99"]
    cap = cap_holding(p99, args.room)
    episode = caps["max_prompt_length"] + cfg.turns * cap + (cfg.turns - 1) * cfg.feedback_chars
    sets = {r.split("/")[0] for r in params["train"]["train_sets"] + (rep.get("train", {}).get("train_sets") or [])}
    doc = {
        "command": " ".join([".venv/bin/python", "bench/repair/turn_tokens.py", *(argv or sys.argv[1:])]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"node": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--", "rlvr", "bench/repair/turn_tokens.py", "params.yaml",
                               "profiles")),
        "profile": str(args.profile.resolve().relative_to(ROOT)) if args.profile.resolve().is_relative_to(ROOT)
        else str(args.profile), "caps": caps, "turns": cfg.turns,
        "tokenizer": {"vocabulary": f"{DASHSCOPE} {VOCAB_MEMBER}", "sha256": VOCAB_SHA256, "regular_tokens": VOCAB_SIZE,
                      "bpe": TIKTOKEN, "pat_str": PAT_STR, "special": SPECIAL, "normalize": "NFC",
                      "chat": chat_prompt("{user}")},
        "inputs": _files(args.problems_dir, sorted(sets)),
        "selection": selection,
        "results": results,
        "recommendation": {"repair_answer_p99": p99, "room": args.room, "turn_tokens": cap,
                           "episode_tokens": episode,
                           "ppo_max_token_len_per_gpu": hardware.get("ppo_max_token_len_per_gpu"),
                           "rule": "cap_holding: p99 answer + room + <|im_end|>, rounded up to 64; episode = "
                                   "max_prompt_length + turns x cap + (turns - 1) x feedback_chars"},
    }
    print(table(results, caps, SWEEP))
    print(f"repair p99 answer {p99} tokens: a cap of {cap} holds it with {args.room} tokens of room "
          f"(episode {episode:,} tokens vs ppo_max_token_len_per_gpu {hardware.get('ppo_max_token_len_per_gpu')})")
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return doc


if __name__ == "__main__":
    main()
