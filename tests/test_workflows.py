"""README.md's "Five common workflows" 1–3, run in the order written (issue 45, item 1).

The commands are read from README.md's code blocks (a README change is what is tested) and run, with the venv's DVC,
in a git clone of this checkout (its uncommitted changes applied) whose params.yaml is a tiny slice of the embedded
default: a few problems per dataset, one optimiser step per training stage (SFT one epoch), one GRPO seed, a smaller
tiny model, and repair evaluated without its training (``repair.train.max_steps: 0``). Every stage runs; no README
command is skipped. The slice's run is made first and committed, as the repository ships its committed run (its
stages run in one process and are recorded with ``dvc commit``: the same outputs as ``dvc repro``, with torch/TRL
imported once instead of once per stage). Then, in order:

1. ``dvc repro`` finds nothing stale, and the "one screen of experiments" filter prints the columns it names
   (Experiment, reward, seeds, the two headline accepted@1 columns) in at most 120 columns;
2. the ablation runs the stages with the ``reward`` param (``grpo@<seed>``) and, of the stages after them,
   only those whose inputs changed; sft and dpo are reused. Its diff shows the ``reward`` param and only metrics the
   reward can change (GRPO's, repair's, the final evaluation of GRPO and repair, the headline);
3. after workflow 2, the phase diff shows ``eval.headline`` and exactly the headline rows the committed run's
   per-phase files give, i.e. what it shows without workflow 2 first: nothing of the sparse reward.

At this size no policy solves a problem (every score is 0, so the GRPO models and every metric come out equal under
either reward): the checks that bite are the stages DVC runs and the params each diff lists. On the README of
main before issue 45 (an ablation run in the workspace, ``dvc exp run -S reward=sparse``) workflow 3's diff lists
``reward`` beside ``eval.headline``, and the test fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
SCREEN = 120

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (BIN / "dvc").exists() or shutil.which("git") is None,
                                 reason="needs the venv's dvc and git")]

#: Deep-merged over params.yaml in the clone: every stage still runs, on a few problems and a step or two.
SLICE: dict[str, Any] = {
    "governance": {
        "datasets": [
            {"name": "mbpp", "role": "train", "splits": ["train"], "max_problems": 4},
            {"name": "mbpp_reg", "role": "dev", "max_problems": 4},
            {"name": "humaneval", "role": "test", "max_problems": 4},
        ],
        "references": {"max_solutions": 1, "max_incorrect": 1},
    },
    # grpo_min_tests 3: the local GRPO applies the RL floor to train.train_sets, this slice's 3-test synthetic family
    "manifests": {"verl_train": ["mbpp/train"], "verl_val": ["mbpp_reg/dev"], "sft_sets": ["mbpp/train"],
                  "dpo_sets": ["mbpp/train"], "grpo_min_tests": 3},
    "judge_check": {"must_pass": ["humaneval"], "full_datasets": []},
    "model": {"vocab_size": 1024, "hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1,
              "intermediate_size": 64, "max_position_embeddings": 512},
    "synthetic": {"templates": ["add", "mul"], "max_constant": 5, "n_tests": 3,
                  "feedback": {"instances": 8, "min_constant": 10, "max_constant": 40, "dev": 2}},
    "baseline": {"datasets": [{"name": "synthetic", "splits": ["dev"]}, {"name": "mbpp_reg", "limit": 2}],
                 "sampling": {"max_new_tokens": 16}},
    "seeds": [1],
    "train": {"max_completion_length": 16, "eval_max_new_tokens": 16, "report_to": ["none"]},
    "sft": {"epochs": 1, "per_device_train_batch_size": 8},
    "dpo": {"max_steps": 1, "k": 2, "per_device_train_batch_size": 4},
    "grpo": {"max_steps": 1, "num_generations": 2, "per_device_train_batch_size": 4},
    "repair": {"turns": 2, "sampling": {"max_new_tokens": 16},
               "train": {"max_steps": 0, "train_sets": ["synthetic/train"]},
               "datasets": [{"name": "synthetic", "splits": ["dev"]}, {"name": "mbpp_reg", "limit": 2}]},
    "eval": {"datasets": [{"name": "synthetic", "splits": ["dev"], "k": True}, {"name": "mbpp_reg", "limit": 4},
                          {"name": "humaneval", "limit": 4}],
             "greedy": {"max_new_tokens": 16}, "sampling": {"max_new_tokens": 16}, "n": 2, "ks": [1, 2],
             "budget_tokens": 16, "bootstrap": 100},
    "report": {"bootstrap": 100},
}


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` deep-merged into a copy of ``base`` (dicts merge key by key; lists and scalars replace)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def readme_workflow(number: int) -> list[str]:
    """The commands of README.md's workflow ``number`` (its paragraph starts ``**<number>. ``): the lines of its
    fenced ``bash`` blocks, trailing comments stripped."""
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^\*\*{number}\. .*?(?=^\*\*{number + 1}\. |^## )", text, re.S | re.M)
    assert m, f"README.md: no workflow {number}"
    cmds = [re.sub(r"\s+#.*$", "", line).strip()
            for block in re.findall(r"^```bash\n(.*?)^```", m.group(0), re.S | re.M) for line in block.splitlines()]
    assert [c for c in cmds if c], f"README.md: workflow {number} has no command"
    return [c for c in cmds if c]


def project(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A git clone of this checkout (uncommitted changes of tracked files applied) with the slice's params, and the
    environment its commands run in: the venv's dvc first on PATH, this checkout's ``rlvr`` (the clone's code) on
    PYTHONPATH, which ``stages/run.sh`` then finds. Not the clone's own folder: pytest's temporary folders are private
    to their user, and the judge's bubblewrap sandbox binds ``rlvr/judge/sandbox/inside`` as another one."""
    repo = tmp / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True, timeout=300)
    patch = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=ROOT, check=True, capture_output=True).stdout
    if patch:
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=repo, input=patch, check=True)
    params = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8"))
    (repo / "params.yaml").write_text(yaml.safe_dump(merge(params, SLICE), sort_keys=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLVR_", "DVC_", "GIT_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT), WANDB_MODE="disabled",
               RLVR_PROGRESS="0", COLUMNS="200", DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return repo, env


def sh(cmd: str, repo: Path, env: dict[str, str], timeout: float = 600) -> str:
    """Run ``cmd`` in ``repo``; its stdout + stderr. Fails the test with the output's tail on a non-zero exit."""
    out = subprocess.run(["bash", "-c", cmd], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{text[-4000:]}"
    return text


#: Runs the stages given as JSON ``[[script, [args...]], ...]`` one after the other in this one process (the imports
#: of torch/transformers/TRL paid once, not once per stage as under ``dvc repro``).
_DRIVER = """
import importlib.util, json, sys
for i, (script, args) in enumerate(json.loads(sys.argv[1])):
    spec = importlib.util.spec_from_file_location(f"_stage_{i}", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    print(f"Running stage {script} {args}", flush=True)
    mod.main.main(args=args, standalone_mode=False)
"""


def committed_run(repo: Path, env: dict[str, str]) -> None:
    """What the repository ships, for the slice: every stage run (in dvc.yaml's order, in one process), recorded with
    ``dvc commit`` and committed to git, so the workflows start from a clean workspace whose HEAD holds the run."""
    import networkx as nx
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc_repo:
        order = list(reversed(list(nx.topological_sort(dvc_repo.index.graph))))
        runs = []
        for st in order:
            for out in st.outs:  # as `dvc repro` does: no stale file of the shipped run stays in a folder output
                path = Path(out.fs_path)
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            words = st.cmd.split()
            assert words[:2] == ["sh", "stages/run.sh"], st.cmd
            runs.append([words[2], words[3:]])
    subprocess.run([sys.executable, "-P", "-c", _DRIVER, json.dumps(runs)], cwd=repo, env=env, check=True, timeout=900)
    sh("dvc commit -f -q && git add -A && git commit -qm 'the slice, run'", repo, env)


def reward_stages(repo: Path) -> tuple[set[str], set[str]]:
    """The stages with the ``reward`` param, and those plus every stage that depends on one of them (DVC's own graph of
    the clone): ``dvc exp run -S reward=…`` must run the first, may run only the second (DVC skips a later stage
    whose deps came out unchanged)."""
    import networkx as nx
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc_repo:
        graph = dvc_repo.index.graph  # an edge goes from a stage to a stage it depends on
        direct = [st for st in graph if any(isinstance(d, ParamsDependency) and "reward" in d.params
                                            for d in st.deps)]
        after = {a.name for st in direct for a in nx.ancestors(graph, st)}  # name: grpo@1 (addressing: a path)
        return {st.name for st in direct}, {st.name for st in direct} | after


def table_rows(text: str) -> list[tuple[str, str]]:
    """``(path, key)`` of each row of the table(s) ``dvc exp diff`` prints, plain or ``--md`` (header and rule rows
    dropped)."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") \
            else line.split()
        if len(cells) < 2 or cells[0] in ("Path", "") or set(cells[0]) <= set("-: "):
            continue
        rows.append((cells[0], cells[1]))
    return rows


#: Metrics files the reward can change: GRPO's (training and its Dev evaluation), repair's (trained from GRPO seed 1),
#: and the final evaluation of GRPO, repair and the headline (GRPO by default) and its seed statistics.
REWARD_METRICS = re.compile(r"^metrics/(grpo/|eval_grpo_seed|repair/|final/(eval_grpo_seed|eval_repair|headline/|"
                            r"seeds/grpo/))")


def width(text: str) -> int:
    """Widest line of ``text``, in characters (trailing blanks not counted)."""
    return max(len(line.rstrip()) for line in text.splitlines())


def check_screen(cmd: str, repo: Path, env: dict[str, str]) -> str:
    """Workflow 1's "one screen of experiments": the columns it names are printed, in at most 120 columns."""
    out = sh(cmd.replace("dvc exp show", "dvc exp show --no-pager", 1), repo, env)
    header = next(line for line in out.splitlines() if "Experiment" in line)
    for column in ("Experiment", "reward", "seeds", "synthetic.accepted@1", "mbpp_reg.accepted@1"):
        assert column in header, f"{cmd}: no column {column}:\n{out}"
    assert width(out) <= SCREEN, f"{cmd}: {width(out)} columns:\n{out}"
    return out


def test_workflows_1_to_3_in_order(tmp_path):
    repo, env = project(tmp_path)
    sh("git commit -qam 'the slice'", repo, env)
    committed_run(repo, env)
    head_params = (repo / "params.yaml").read_text(encoding="utf-8")

    # 1. Re-run what changed: nothing is stale; the one screen of experiments.
    assert "Data and pipelines are up to date." in sh("dvc repro", repo, env)
    (screen,) = readme_workflow(1)
    check_screen(screen, repo, env)

    # 2. An ablation: exactly the stages that depend on `reward` re-run; the diff shows only what the reward changes.
    run2, diff2 = readme_workflow(2)
    assert "-S reward=sparse" in run2
    out = sh(run2, repo, env)
    ran = set(re.findall(r"Running stage '([^']+)'", out))
    direct, dependent = reward_stages(repo)
    assert direct <= ran <= dependent and {"sft", "dpo"} <= set(re.findall(r"Stage '([^']+)' didn't change", out)), out
    rows = table_rows(sh(diff2, repo, env))
    assert ("params.yaml", "reward") in rows, rows
    other = [r for r in rows if r[0] != "params.yaml" and not REWARD_METRICS.match(r[0])]
    assert not [r for r in rows if r[0] == "params.yaml" and r[1] != "reward"] and not other, rows

    # 3. What one phase changed over another, after workflow 2: eval.headline and the headline metrics only, and
    # exactly the headline rows the committed run's per-phase files give (nothing of the sparse reward).
    run3, diff3 = readme_workflow(3)
    sh(run3, repo, env)
    out = sh(diff3, repo, env)
    rows = table_rows(out)
    assert [r for r in rows if r[0] == "params.yaml"] == [("params.yaml", "eval.headline")], out
    expected = set()
    for path in sorted((repo / "metrics/final/headline").glob("*.json")):
        head = f"metrics/final/headline/{path.name}"
        grpo = json.loads(sh(f"git show HEAD:{head}", repo, env))["headline"][path.stem]
        dpo = json.loads(sh(f"git show HEAD:metrics/final/eval_dpo/{path.name}", repo, env))
        expected |= {(head, f"headline.{path.stem}.{k}") for k in grpo if dpo.get(k) != grpo[k]}
    assert {r for r in rows if r[0] != "params.yaml"} == expected, out

    # The experiments are in the one screen, still within 120 columns; the workspace is still HEAD's.
    assert "headline-dpo" in check_screen(screen, repo, env)
    assert (repo / "params.yaml").read_text(encoding="utf-8") == head_params
