"""verl 0.9.1 beside TRL 1.x (rlvr.train.verl.compat): the FSDP engine's model patching must not import TRL's removed
value-head class. Found on the lent H100: every verl worker died with ImportError once trl was installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("verl")
pytest.importorskip("trl")

from rlvr.train.verl import compat


@pytest.fixture
def restore_verl(monkeypatch):
    """Undo patch_verl after the test (it rebinds module globals)."""
    import verl.utils.import_utils as iu
    from verl.models.transformers import monkey_patch as mp

    monkeypatch.setattr(iu, "is_trl_available", iu.is_trl_available)
    monkeypatch.setattr(mp, "is_trl_available", mp.is_trl_available)
    return mp


def _tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1))


def test_verls_model_patching_fails_with_this_trl_and_works_after_patch_verl(restore_verl):
    mp = restore_verl
    assert not compat.value_head_available()  # trl 1.16: the class is gone
    with pytest.raises(ImportError, match="AutoModelForCausalLMWithValueHead"):
        mp.apply_monkey_patch(_tiny_qwen2(), use_remove_padding=False)
    assert compat.patch_verl() is True
    mp.apply_monkey_patch(_tiny_qwen2(), use_remove_padding=False)  # no longer raises
    assert mp.is_trl_available() is False
    import verl.utils.import_utils as iu

    assert iu.is_trl_available() is False


def test_main_patches_then_runs_the_module_as_main_with_its_arguments(tmp_path):
    (tmp_path / "probe_mod.py").write_text(
        "import sys\n"
        "from verl.models.transformers import monkey_patch as mp\n"
        "if __name__ == '__main__':\n"
        "    print(sys.argv, mp.is_trl_available())\n")
    out = subprocess.run([sys.executable, "-m", "rlvr.train.verl.compat", "probe_mod", "a=1", "--b"],
                         capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:{sys.path[0]}"})
    # as under `python -m probe_mod a=1 --b`: argv[0] is the module's file
    assert out.stdout.strip() == f"{[str(tmp_path / 'probe_mod.py'), 'a=1', '--b']} False"
    bad = subprocess.run([sys.executable, "-m", "rlvr.train.verl.compat"], capture_output=True, text=True)
    assert bad.returncode == 1 and "usage: python -m rlvr.train.verl.compat MODULE" in bad.stderr


@pytest.mark.slow
def test_the_ray_setup_hook_patches_every_worker():
    ray = pytest.importorskip("ray")

    def probe():
        from verl.models.transformers import monkey_patch as mp

        return mp.is_trl_available()

    hook = compat.RAY_HOOK_OVERRIDE.split("=", 1)[1]
    ray.init(num_cpus=1, include_dashboard=False, runtime_env={"worker_process_setup_hook": hook})
    try:
        assert ray.get(ray.remote(probe).remote()) is False
    finally:
        ray.shutdown()
