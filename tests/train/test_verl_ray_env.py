"""Ray env propagation and the judge preflight of verl launches: the driver's RLVR_*/WANDB_*/HF_* settings reach
every worker through the job's runtime_env (composed against verl 0.9.1's config and merged as its ``main_ppo``
merges it; on a real Ray cluster started elsewhere in the slow test), and a stage fails before verl starts when the
judge cannot run a correct program."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from rlvr.judge.verdict import JudgeResult
from rlvr.train.verl import launch as vlaunch
from rlvr.train.verl import preflight as vpre
from rlvr.train.verl.environ import propagated_env
from rlvr.train.verl.overrides import ray_env_override


def test_propagated_env_takes_settings_and_leaves_secrets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = propagated_env({"RLVR_SANDBOX_URL": "http://j:8080", "RLVR_CACHE_DIR": ".cache",
                                  "WANDB_MODE": "online", "WANDB_API_KEY": "s3cret", "HF_TOKEN": "hf_x",
                                  "HF_HOME": "/hf", "PATH": "/bin", "RAY_ADDRESS": "h:6379"})
    assert env == {"RLVR_SANDBOX_URL": "http://j:8080", "RLVR_CACHE_DIR": str(tmp_path / ".cache"),
                   "WANDB_MODE": "online", "HF_HOME": "/hf"}
    assert propagated_env({})["WANDB_MODE"] == "offline"


def test_env_override_composes_into_verls_ray_init_as_strings():
    pytest.importorskip("verl")
    pytest.importorskip("hydra")
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    env = {"RLVR_SANDBOX_WORKERS": "8", "RLVR_X": "true", "RLVR_SANDBOX_URL": "http://judge:8080/a,b", "HF_HOME":
           "/data/hf cache", "RLVR_Q": "it's {x} [y] = z", "RLVR_B": "C:\\x\\y\\", "RLVR_C": "x\\'y"}
    d = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=d, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=[ray_env_override(env)])
    # verl 0.9.1 main_ppo.run_ppo: merge its defaults with ray_kwargs.ray_init.runtime_env, pass to ray.init
    merged = OmegaConf.to_container(OmegaConf.merge(get_ppo_ray_runtime_env(cfg),
                                                    cfg.ray_kwargs.ray_init.get("runtime_env", {})))
    got = merged["env_vars"]
    assert {k: got[k] for k in env} == env and all(isinstance(v, str) for v in got.values())
    assert got["TOKENIZERS_PARALLELISM"] == "true"  # verl's own defaults kept
    with pytest.raises(ValueError, match="environment variable name"):
        ray_env_override({"BAD-NAME": "x"})
    with pytest.raises(ValueError, match="interpolate"):
        ray_env_override({"RLVR_X": "a${b}"})
    assert "RLVR_X" not in propagated_env({"RLVR_X": "a${b}"})


class _Judge:
    def __init__(self, verdict: str) -> None:
        self.verdict = verdict

    def judge(self, problem, solution):
        return JudgeResult(verdict=self.verdict, passed=int(self.verdict == "accepted"), total=1,
                           pass_ratio=float(self.verdict == "accepted"), judge_s=0.01)


def test_preflight_refuses_a_judge_that_cannot_run_a_correct_program(tmp_path):
    assert vpre.preflight({}, None, judge=_Judge("accepted"))[0]["verdict"] == "accepted"
    with pytest.raises(RuntimeError, match=r"judge preflight on .*sandbox_error"):
        vpre.preflight({}, None, judge=_Judge("sandbox_error"))
    calls = []  # a failing preflight stops the stage before verl runs

    def runner(argv, **kw):
        calls.append(argv)

    from test_verl_launch import GRPO_8X

    from rlvr.train.local.grpo import GRPOParams
    from rlvr.train.verl.overrides import VerlParams

    with pytest.raises(RuntimeError, match="judge preflight"):
        vlaunch.run_grpo_verl(
            GRPOParams(**GRPO_8X), VerlParams(), model_path="m", train_files=tmp_path / "t.parquet",
            val_files=tmp_path / "v.parquet", reward_mode="sparse", out_model_dir=tmp_path / "out",
            curves_path=tmp_path / "c.tsv", run_dir=tmp_path / "run", experiment_name="x", runner=runner,
            check=lambda env, address: vpre.preflight(env, address, judge=_Judge("sandbox_error")))
    assert calls == []


def test_preflight_with_the_real_judges(monkeypatch):
    """The embedded sandbox judge accepts the program; an unreachable judge server is refused by name."""
    if shutil.which("bwrap"):
        monkeypatch.delenv("RLVR_SANDBOX_URL", raising=False)
        rep = vpre.judge_preflight()
        assert rep["verdict"] == "accepted" and rep["judge"] == "Judge" and rep["sandbox_url"] is None
    monkeypatch.setenv("RLVR_SANDBOX_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(RuntimeError, match=r"RLVR_SANDBOX_URL=http://127.0.0.1:9"):
        vpre.judge_preflight()


@pytest.mark.slow
def test_existing_cluster_workers_get_the_env_and_are_preflighted(tmp_path):
    """A Ray head started by another process, with an environment without our settings (an existing cluster): a
    job's worker sees RLVR_* only through the job's runtime_env, and the per-node preflight fails on a bad
    RLVR_SANDBOX_URL, naming the node."""
    ray = pytest.importorskip("ray")
    import signal
    import time

    port = 6390 + os.getpid() % 50
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RLVR_") and k != "RAY_ADDRESS"}
    clean["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    clean["RAY_AUTH_MODE"] = "disabled"  # `ray start` turns token auth on by default; the driver here has none
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    tmp = tempfile.mkdtemp(prefix="rr", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
    head = subprocess.Popen([ray_bin, "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
                             "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={tmp}"],
                            env=clean, stdout=(tmp_path / "head.log").open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        address = f"127.0.0.1:{port}"
        env = {"RLVR_SANDBOX_URL": "http://127.0.0.1:9", "RLVR_PROBE": "seen"}
        import socket

        for _ in range(60):  # wait for the head's GCS port
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert head.poll() is None, "ray start --head exited"
            time.sleep(1)
        ray.init(address=address, runtime_env={"env_vars": {"RLVR_PROBE": "seen"}}, log_to_driver=False)
        probe = ray.remote(num_cpus=0)(lambda: (os.environ.get("RLVR_PROBE"), os.environ.get("RLVR_SANDBOX_URL")))
        assert ray.get(probe.remote(), timeout=120) == ("seen", None)  # the raylet's own env has neither
        ray.shutdown()
        with pytest.raises(RuntimeError, match=r"judge preflight on Ray node .*RLVR_SANDBOX_URL=http://127.0.0.1:9"):
            vpre.cluster_preflight(address, env, timeout_s=120)
        assert not ray.is_initialized()
        if shutil.which("bwrap"):
            reps = vpre.cluster_preflight(address, {}, timeout_s=120)
            assert len(reps) == 1 and reps[0]["verdict"] == "accepted" and reps[0]["sandbox_url"] is None
    finally:
        if ray.is_initialized():
            ray.shutdown()
        os.killpg(head.pid, signal.SIGTERM)  # the head and the Ray processes it started (its own session)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
