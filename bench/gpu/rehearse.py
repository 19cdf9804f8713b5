"""Rehearse verl GRPO and repair with a scripted policy whose rollouts are programs that run (issue: the 7B recipe
with a real policy, item 6). Three steps, the first here, the second on the GPU machine, the third anywhere:

    # here (CPU): choose the problems, write the script, judge every scripted program here (the expected scores)
    python bench/gpu/rehearse.py script --kind grpo   --params params.rehearse.yaml --out .gpu/rehearse/grpo
    python bench/gpu/rehearse.py script --kind repair --params params.rehearse.yaml --out .gpu/rehearse/repair
    # there (GPUs): verl with every rollout turn answered from the script (rlvr.train.verl.scripted); the rest —
    # agent loops, run_tests tool calls, reward manager, judge, advantages, log-prob and update passes — as in training
    python bench/gpu/rehearse.py run --kind grpo --params params.rehearse.yaml --dir .gpu/rehearse/grpo \
        --model models/base
    # then: per step, the reward verl logged against the reward the script's proportions predict
    python bench/gpu/rehearse.py collect --dir .gpu/rehearse/grpo --out bench/gpu/rehearsal_grpo.json

The script (``script.json``, :class:`rlvr.train.verl.scripted.Script`) gives every problem a group *kind*, by its
place in the chosen list (``i % 6``: all_pass, mixed, mixed, all_fail, mixed, mixed), so the proportions are known
before the run:

========== =====================================================================================================
kind        GRPO group of 8 (``rollout_n`` 0..7)
========== =====================================================================================================
all_pass    8 x the judge-verified reference: zero variance (no gradient), reward 1
all_fail    3 x syntax error, 3 x runtime error, 2 x no program: zero variance, reward 0
mixed (x4)  3 x reference, 2 x mutant (a near miss of the reference the tests reject), 1 x syntax error,
            1 x runtime error, 1 x infinite loop (``timeout``)
========== =====================================================================================================

Repair kinds (sample ``n`` of problem ``i`` plays kind ``(i + n) % 4``, so every group holds all four), by the
repair protocol (:mod:`rlvr.repair.protocol`: every reply is an attempt judged on the visible
tests, feedback comes back as a user turn, the last program is graded, ``turn_penalty`` per feedback turn):
``first_pass`` (the reference), ``fixed`` (a mutant, then the reference), ``no_code_then_fixed`` (text without code,
then the reference), ``not_fixed`` (a mutant, a syntax error, the mutant again).

Every scripted program starts with a comment ``# rehearsal id=<problem> n=<rollout> label=<label>`` (a comment: it
changes no verdict), so a rollout in verl's dump names its sample. ``expected.json`` holds the score each sample gets
from :func:`rlvr.reward.verl.compute_score` here, on an idle CPU, with the run's reward mode and shaping: on the GPU
node a sample that scores lower than that is a load-caused verdict (a false timeout, the goal being 0).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rlvr.data.mutants import mutants  # noqa: E402  (one AST mutator for the rehearsal and governance's audit)

MARK = re.compile(r"# rehearsal id=(?P<id>\S+) n=(?P<n>\d+) label=(?P<label>\w+)")
GRPO_KINDS = ("all_pass", "mixed", "mixed", "all_fail", "mixed", "mixed")
GRPO_LABELS = {
    "all_pass": ["reference"] * 8,
    "all_fail": ["syntax_error"] * 3 + ["runtime_error"] * 3 + ["no_program"] * 2,
    "mixed": ["reference"] * 3 + ["mutant"] * 2 + ["syntax_error", "runtime_error", "timeout"],
}
REPAIR_KINDS = ("first_pass", "fixed", "no_code_then_fixed", "not_fixed")


def _fence(body: str) -> str:
    return f"```python\n{body}\n```"


def program(label: str, pid: str, n: int, reference: str, mutant: str | None) -> str:
    """The answer text of one scripted sample (module doc), marked with its id, rollout and label."""
    mark = f"# rehearsal id={pid} n={n} label={label}"
    if label == "reference":
        return _fence(f"{mark}\n{reference}")
    if label == "mutant":
        return _fence(f"{mark}\n{mutant if mutant is not None else reference}")
    if label == "syntax_error":
        return _fence(f"{mark}\n{reference}\n)\n")
    if label == "runtime_error":
        return _fence(f"{mark}\nraise ValueError('rehearsal')\n{reference}")
    if label == "timeout":
        return _fence(f"{mark}\nwhile True:\n    pass\n{reference}")
    if label == "no_program":
        return f"{mark}\nI cannot solve this one."
    raise ValueError(f"unknown label {label!r}")


def _params(path: str) -> Any:
    from rlvr.stage import Params

    return Params(Path(path))


# characters per token of the rehearsal's tokenizer (the project's 4,096-piece BPE of stages/model.py, far less compact
# than Qwen's 151k vocabulary) on the governed references, rounded down: the 2026-11-29 sitting cut a 1,999-character
# CodeContests reference at the repair turn cap of 768 tokens (2.6 characters per token), so its every episode scored 0
# where the script expected a pass. A reference must fit its turn at this rate, or the expected scores are wrong.
CHARS_PER_TOKEN = 2.0


def max_reference_chars(raw: dict[str, Any], kind: str) -> int:
    """The longest reference (characters) a scripted ``kind`` problem may have: its turn's token budget (GRPO:
    ``verl.max_response_length``, default 2,048; repair: ``repair.turn_tokens``, default ``max_new_tokens`` of
    ``repair.sampling``) x :data:`CHARS_PER_TOKEN`, less 200 characters for the rehearsal mark and the fence; at
    most 3,000 (GRPO's former fixed cap)."""
    if kind == "grpo":
        budget = int((raw.get("verl") or {}).get("max_response_length") or 2048)
    else:
        rp = raw.get("repair") or {}
        budget = int(rp.get("turn_tokens") or (rp.get("sampling") or {}).get("max_new_tokens") or 768)
    return min(3000, int(budget * CHARS_PER_TOKEN) - 200)


def _problems(params_path: str, kind: str, limit: int, min_tests: int, problems_dir: str | Path) -> list[Any]:
    """The first ``limit`` problems (by id) of the run's training sets with a reference of at most
    :func:`max_reference_chars` that pass the stages' RL filter (:func:`rlvr.data.manifests.rl_eligible`: ``min_tests``
    tests, no contamination flag in the governance folder above ``problems_dir``), among those the run trains on at
    its ``train.rl_share``
    (:func:`rlvr.train.overlap.in_rl_share`: a problem outside the share is never drawn, so a script for it would be
    dead weight)."""
    from rlvr.config import load_params
    from rlvr.train.overlap import in_rl_share

    raw = load_params(params_path)
    if kind == "grpo":
        sets = raw["manifests"]["verl_train"]
    else:
        sets = raw["repair"]["train"].get("train_sets") or raw["train"]["train_sets"]
    from rlvr.train.local.common import load_problem_sets

    cap = max_reference_chars(raw, kind)
    from rlvr.data.manifests import flagged_ids, rl_eligible

    # the RL floor and contamination flags of the stages themselves (rlvr.data.manifests.rl_eligible), then the share
    eligible, _ = rl_eligible(load_problem_sets(problems_dir, sets), min_tests, flagged_ids(Path(problems_dir).parent))
    ps = [p for p in eligible
          if p.solutions and len(p.solutions[0]) <= cap and in_rl_share(p.id, float(raw["train"].get("rl_share", 1.0)))]
    ps.sort(key=lambda p: p.id)
    # spread over the sources (the list is sorted by id, so one source would fill it)
    by_src: dict[str, list[Any]] = defaultdict(list)
    for p in ps:
        by_src[p.source].append(p)
    out: list[Any] = []
    while len(out) < limit and any(by_src.values()):
        for src in sorted(by_src):
            if by_src[src] and len(out) < limit:
                out.append(by_src[src].pop(0))
    return out


_SCORES: dict[str, dict[str, Any]] = {}


def _score(text: str, row: dict[str, Any], mode: str, shaping: Any, extra: dict[str, Any] | None = None) -> dict:
    """:func:`rlvr.reward.verl.compute_score` of ``text`` on the row, memoised on the text less its rehearsal mark
    (a comment: the same verdict) — every sample of a label would otherwise be judged again."""
    from rlvr.reward.verl import compute_score

    info = {**row["extra_info"], **(extra or {})}
    key = json.dumps([MARK.sub("#", text), MARK.sub("#", json.dumps(info, sort_keys=True, default=str)),
                      row["reward_model"]["ground_truth"], mode], sort_keys=True)
    if key not in _SCORES:
        _SCORES[key] = compute_score(row["data_source"], text, row["reward_model"]["ground_truth"], info,
                                     reward_mode=mode, reward_shaping=shaping)
    return _SCORES[key]


def _mutant(p: Any, row: dict[str, Any], mode: str, shaping: Any) -> str | None:
    for cand in [*p.incorrect_solutions[:2], *list(mutants(p.solutions[0]))[:6]]:
        r = _score(_fence(cand), row, "sparse", shaping)
        if r["score"] < 1.0 and r.get("status") not in ("sandbox_error", "syntax_error"):
            return cand
    return None


def cmd_script(a: argparse.Namespace) -> None:
    """Choose problems, write ``train.parquet`` (grpo) or ``problems.jsonl`` (repair), ``script.json`` and the
    scores expected here (``expected.json``)."""
    from rlvr.data.export import verl_rows
    from rlvr.io import atomic_write_json
    from rlvr.train.engine import load_reward_mode

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    raw = _params(a.params).raw()
    mode = load_reward_mode(a.params) if a.kind == "grpo" else "sparse"
    shaping = raw.get("reward_shaping")
    problems = _problems(a.params, a.kind, a.limit, a.min_tests, a.problems_dir)
    script: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    if a.kind == "grpo":
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = verl_rows(problems)
        pq.write_table(pa.Table.from_pylist(rows), out / "train.parquet")
    else:
        from rlvr.repair.eval import RepairParams
        from rlvr.repair.verl_tool import repair_verl_rows

        cfg = _params(a.params).section("repair", RepairParams)
        rows = repair_verl_rows(problems, cfg.env())
        with (out / "problems.jsonl").open("w", encoding="utf-8") as fh:
            for p in problems:
                fh.write(p.model_dump_json() + "\n")
    for i, (p, row) in enumerate(zip(problems, rows, strict=True)):
        ref = p.solutions[0]
        if not _score(_fence(ref), row, "sparse", shaping)["score"] >= 1.0:
            print(f"skip {p.id}: its reference is not accepted here", file=sys.stderr)
            continue
        mut = _mutant(p, row, mode, shaping)
        rollouts, exp = [], []
        if a.kind == "grpo":
            kind = GRPO_KINDS[i % len(GRPO_KINDS)]
            for n, label in enumerate(GRPO_LABELS[kind]):
                label = label if (label != "mutant" or mut is not None) else "syntax_error"
                text = program(label, p.id, n, ref, mut)
                # an infinite loop before anything is read times out by construction: not judged here (3 x the time
                # limit per sample on a loaded CPU), expected 0 as every failing verdict
                r = {"score": 0.0, "status": "timeout"} if label == "timeout" else _score(text, row, mode, shaping)
                rollouts.append({"label": label, "turns": [text]})
                exp.append({"n": n, "label": label, "score": r["score"], "status": r.get("status")})
        else:  # the repair protocol (rlvr.repair.protocol): every reply an attempt, feedback as user turns
            from rlvr.judge.client import get_judge
            from rlvr.repair.env import split_tests
            from rlvr.repair.protocol import Episode, fenced

            env = cfg.env()
            visible = split_tests(p, env.visible_tests)[0]
            for n in range(a.group):
                kind = REPAIR_KINDS[(i + n) % len(REPAIR_KINDS)]  # every kind in every group: each has signal
                wrong = mut if mut is not None else f"{ref}\n)\n"
                mark = f"# rehearsal id={p.id} n={n} label={kind}"
                turns = {"first_pass": [f"{mark}\n{ref}"],
                         "fixed": [f"{mark}\n{wrong}", f"{mark}\n{ref}"],
                         "no_code_then_fixed": [None, f"{mark}\n{ref}"],
                         "not_fixed": [f"{mark}\n{wrong}", f"{mark}\n{ref}\n)\n", f"{mark}\n{wrong}"]}[kind]
                texts = [fenced(t) if t is not None else f"{mark}\nI cannot solve this one." for t in turns]
                ep = Episode(visible, get_judge(), env)  # what the agent loop does with these replies, here
                for t in texts:
                    if ep.step(t).done:
                        break
                final = fenced(ep.final) if ep.final else ""
                r = _score(final, row, mode, shaping,
                           {"final_answer": final, "tool_rewards": [-env.turn_penalty] * ep.feedback_turns})
                rollouts.append({"label": kind, "turns": texts})
                exp.append({"n": n, "label": kind, "score": r["score"], "status": r.get("status"),
                            "answers": ep.answers})
        kind = kind if a.kind == "grpo" else "mixed_repair"
        script[p.id] = {"kind": kind, "rollouts": rollouts}
        expected[p.id] = {"kind": kind, "source": p.source, "tests": len(p.tests), "samples": exp}
        print(f"{p.id}: {kind}: {[e['score'] for e in exp]}", file=sys.stderr)
    atomic_write_json(out / "script.json", {"version": 1, "problems": script,
                                            "fallback": {"label": "unscripted", "turns": ["no program"]}})
    atomic_write_json(out / "expected.json", {"kind": a.kind, "reward_mode": mode, "problems": expected})
    print(f"{len(script)} problems scripted into {out}")


def cmd_run(a: argparse.Namespace) -> None:
    """verl on the GPUs with the script (``RLVR_SCRIPTED_POLICY``); the trained weights are not merged (the
    rehearsal measures the loop, not the model)."""
    from rlvr.model import resolve_model_ref
    from rlvr.train.verl import launch as vlaunch

    d = Path(a.dir).resolve()
    os.environ["RLVR_SCRIPTED_POLICY"] = str(d / "script.json")
    for f in d.glob("script.json.emitted.*.jsonl"):
        f.unlink()
    vlaunch._publish = lambda ckpt_dir, *args, **kw: str(ckpt_dir)  # no merge of the rehearsal's weights
    params = _params(a.params)
    if a.kind == "grpo":
        from rlvr.train.local.common import run_dir
        from rlvr.train.local.grpo import GRPOParams
        from rlvr.train.verl.launch import run_grpo_verl
        from rlvr.train.verl.overrides import VerlParams

        cfg = params.section("grpo", GRPOParams)
        vcfg = params.section("verl", VerlParams)
        mode = params.raw()["reward"]
        rdir = run_dir("rehearse_grpo", {"script": str(d)}, a.model, seed=cfg.seed)
        res = run_grpo_verl(cfg, vcfg, model_path=resolve_model_ref(a.model), train_files=d / "train.parquet",
                            val_files=d / "train.parquet", reward_mode=mode, out_model_dir=d / "model",
                            curves_path=d / "curves.tsv", run_dir=rdir, experiment_name="rehearse-grpo",
                            reward_shaping=params.raw().get("reward_shaping"))
    else:
        from rlvr.data.schema import read_problems
        from rlvr.repair.eval import RepairParams
        from rlvr.repair.verl_run import run_repair_verl

        cfg = params.section("repair", RepairParams)
        problems = read_problems(d / "problems.jsonl")
        res = run_repair_verl(cfg, params.path, a.model, problems, problems, d / "model", d / "curves.tsv",
                              reward_shaping=params.raw().get("reward_shaping"))
        rdir = None
    from rlvr.io import atomic_write_json

    atomic_write_json(d / "result.json", {"result": res, "run_dir": str(rdir) if rdir else None})
    print(json.dumps(res, default=str)[:2000])


def _dump_rows(run: Path) -> list[dict[str, Any]]:
    rows = []
    for f in sorted((run / "rollouts").glob("*.jsonl"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0):
        for line in f.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            r.setdefault("step", int(f.stem) if f.stem.isdigit() else None)
            rows.append(r)
    return rows


def judge_log_groups(run: Path, exp: dict[str, Any]) -> dict[str, Any]:
    """What the judge log (``<run>/judge/*.jsonl``, :mod:`rlvr.reward.judge_log`: one line per scored sample, written
    as each rollout is scored, so it exists before a step's update) says against the script: per problem, the
    multiset of the samples' ``pass_ratio`` against the expected scores (``dense``: score = pass_ratio; ``sparse``:
    accepted or not, score > 0 exactly when the graded program is accepted, turn penalty or not; the log has
    no ``rollout_n``, so groups are compared as multisets, ``k`` copies for a problem drawn ``k`` times; a step cut
    short leaves part of a group, which shows as differing), the groups
    that differ, the statuses, the judge seconds per sample (p50 / p99 / max / sum) and the log's span (first to last
    line, seconds). Timeouts are false when they land on a sample the script did not make an infinite loop."""
    import statistics
    from collections import Counter

    lines: list[dict[str, Any]] = []
    for f in sorted((run / "judge").glob("*.jsonl")):
        lines += [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in lines:
        by_id[str(r.get("id"))].append(r)
    differ, kinds, unscripted = [], Counter(), 0
    expected_timeouts = 0
    for pid, rs in by_id.items():
        e = exp["problems"].get(pid)
        if e is None:
            unscripted += len(rs)
            continue
        kinds[e["kind"]] += 1
        k = max(1, len(rs) // max(1, len(e["samples"])))
        if exp.get("reward_mode") == "dense":
            want = Counter(round(float(s["score"]), 6) for s in e["samples"] for _ in range(k))
            got = Counter(round(float(r.get("pass_ratio", 0.0)), 6) for r in rs)
        else:  # sparse (repair's default): a sample scores above 0 exactly when its graded program is accepted
            want = Counter("accepted" if float(s["score"]) > 0 else "rejected" for s in e["samples"] for _ in range(k))
            got = Counter("accepted" if r.get("status") == "accepted" else "rejected" for r in rs)
        expected_timeouts += k * sum(s.get("status") == "timeout" for s in e["samples"])
        if want != got:
            differ.append({"id": pid, "kind": e["kind"], "missing": {str(x): n for x, n in (want - got).items()},
                           "extra": {str(x): n for x, n in (got - want).items()},
                           "statuses": dict(Counter(r.get("status") for r in rs))})
    js = sorted(float(r.get("judge_s", 0.0)) for r in lines)
    ts = sorted(float(r["t"]) for r in lines if "t" in r)
    statuses = Counter(r.get("status") for r in lines)
    return {"samples": len(lines), "problems": len(by_id), "kinds": dict(kinds), "unscripted_samples": unscripted,
            "groups_as_expected": sum(kinds.values()) - len(differ), "groups_differing": differ,
            "statuses": dict(statuses), "timeouts": statuses.get("timeout", 0),
            "timeouts_scripted": expected_timeouts,
            "false_timeouts": max(0, statuses.get("timeout", 0) - expected_timeouts),
            "judge_s": {"p50": statistics.median(js), "p99": js[max(0, int(0.99 * len(js)) - 1)], "max": js[-1],
                        "sum": sum(js)} if js else None,
            "log_span_s": ts[-1] - ts[0] if ts else None}


VERL_LOG_KEYS = {"training/filter_groups/evicted_samples": "groups_evicted", "timing_s/gen": "gen_s",
                 "timing_s/step": "step_s", "num_turns/mean": "num_turns_mean"}


def verl_log_steps(run: Path) -> dict[int, dict[str, float]]:
    """Per step, from verl's file logger (``<run>/logs/attempt-*.jsonl``: ``{"step", "data"}`` per line, the last
    attempt's line winning): the groups dynamic sampling evicted as zero-variance (verl's
    ``training/filter_groups/evicted_samples``, which counts prompts), generation and step wall seconds and the
    mean turns per sample (:data:`VERL_LOG_KEYS`). Read as each step ends, so a run cut short still has its finished
    steps. Empty when there is no log."""
    out: dict[int, dict[str, float]] = {}
    for f in sorted((run / "logs").glob("attempt-*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a line cut by the end of the run
            data = r.get("data") or {}
            if isinstance(r.get("step"), int):
                out[r["step"]] = {name: float(data[k]) for k, name in VERL_LOG_KEYS.items() if k in data}
    return out


def cmd_collect(a: argparse.Namespace) -> None:
    """Per step: the reward verl logged (the rollout dump's scores) against the script's expected scores for the
    same samples; the samples that scored below expectation (load-caused verdicts); the zero-variance share of the
    groups; the curves' timings (the judge's wall share of the step)."""
    import statistics

    d = Path(a.dir)
    exp = json.loads((d / "expected.json").read_text(encoding="utf-8"))
    if a.run:
        run = Path(a.run)
    else:  # the newest verl run folder of this kind (rehearse_grpo/..., repair/...) with a rollout dump
        dumps = list((ROOT / ".cache/train").glob(f"*{exp['kind']}*/**/rollouts"))
        if not dumps:
            raise SystemExit(f"collect: no rollout dump under .cache/train for {exp['kind']}; pass --run")
        run = max(dumps, key=lambda p: p.stat().st_mtime).parent
    rows = _dump_rows(run) if (run / "rollouts").is_dir() else []
    steps: dict[int, dict[str, Any]] = {}
    below: list[dict[str, Any]] = []
    by_group: dict[tuple[int, str], list[float]] = defaultdict(list)
    labels: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        m = MARK.search(r.get("output", "") or "")
        st = steps.setdefault(r["step"], {"n": 0, "observed": [], "expected": [], "unmatched": 0})
        st["n"] += 1
        if not m:
            st["unmatched"] += 1
            continue
        e = exp["problems"][m["id"]]["samples"][int(m["n"])]
        st["observed"].append(float(r["score"]))
        st["expected"].append(float(e["score"]))
        by_group[(r["step"], m["id"])].append(float(r["score"]))
        labels[e["label"]][f"{float(r['score']):.4g}"] += 1
        # 1e-6: verl's dump holds float32 scores (0.8999999761581421 for 0.9 in the 2026-11-29 run)
        if float(r["score"]) < float(e["score"]) - 1e-6:
            below.append({"step": r["step"], "id": m["id"], "n": int(m["n"]), "label": e["label"],
                          "expected": e["score"], "observed": r["score"], "status": r.get("status")})
    vlog = verl_log_steps(run)
    table = []
    for s in sorted(steps):
        st = steps[s]
        groups = [v for (gs, _), v in by_group.items() if gs == s]
        zv = sum(1 for v in groups if max(v) - min(v) < 1e-6) / len(groups) if groups else None
        evicted = vlog.get(s, {}).get("groups_evicted")
        table.append({"step": s, "samples": st["n"], "unmatched": st["unmatched"],
                      "reward_observed": statistics.fmean(st["observed"]) if st["observed"] else None,
                      "reward_expected": statistics.fmean(st["expected"]) if st["expected"] else None,
                      "zero_variance_share": zv, "groups": len(groups),
                      # dynamic sampling's view: the zero-variance groups it evicted, of all the groups it drew
                      "groups_evicted": evicted,
                      "zero_variance_share_drawn": (evicted / (evicted + len(groups))
                                                    if evicted is not None and groups else None),
                      **{k: v for k, v in vlog.get(s, {}).items() if k != "groups_evicted"}})
    from rlvr.layout import layout_paths

    curves = (d / "curves.tsv").read_text(encoding="utf-8") if (d / "curves.tsv").exists() else ""
    cost = layout_paths(d / "curves.tsv")[1]
    cost = cost if cost is not None and Path(cost).exists() else None
    out = {"dir": str(d), "run": str(run), "reward_mode": exp["reward_mode"], "steps": table,
           "judge_log": judge_log_groups(run, exp),
           "below_expected": below, "false_timeouts": sum(1 for b in below if b["status"] == "timeout"),
           "scores_by_label": {k: dict(v) for k, v in labels.items()}, "curves_tsv": curves,
           "cost_tsv": Path(cost).read_text(encoding="utf-8") if cost else None}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for t in table:
        print(t)
    print(f"below expected: {len(below)}; false timeouts: {out['false_timeouts']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("script")
    s.add_argument("--kind", choices=["grpo", "repair"], required=True)
    s.add_argument("--params", default="params.yaml")
    s.add_argument("--out", required=True)
    s.add_argument("--limit", type=int, default=24, help="problems (GRPO: 3 steps of 8 prompts = 24)")
    s.add_argument("--min-tests", type=int, default=5)
    s.add_argument("--problems-dir", default="data/governance/problems", help="the governed problems")
    s.add_argument("--group", type=int, default=8, help="repair: rollouts per problem")
    r = sub.add_parser("run")
    r.add_argument("--kind", choices=["grpo", "repair"], required=True)
    r.add_argument("--params", default="params.yaml")
    r.add_argument("--dir", required=True)
    r.add_argument("--model", default="models/base")
    c = sub.add_parser("collect")
    c.add_argument("--dir", required=True)
    c.add_argument("--run", default="", help="the verl run folder (default: found under .cache/train)")
    c.add_argument("--out", required=True)
    a = ap.parse_args()
    {"script": cmd_script, "run": cmd_run, "collect": cmd_collect}[a.cmd](a)


if __name__ == "__main__":
    main()
