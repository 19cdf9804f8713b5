"""verl 0.9.1 and TRL >= 1.x in one environment: keep verl's FSDP engine from importing a TRL class that is gone.

Found on the lent H100 (docs/training/gpu.md): once ``trl`` 1.16 (the local engine's trainer library) was installed
beside verl 0.9.1, every verl FSDP worker died in ``verl.models.transformers.monkey_patch.apply_monkey_patch`` with
``ImportError: cannot import name 'AutoModelForCausalLMWithValueHead' from 'trl'``: verl patches that class's
``state_dict`` whenever ``verl.utils.import_utils.is_trl_available()`` (= ``find_spec("trl")``) is true, and TRL 1.x no
longer ships it (neither at the top level nor in ``trl.experimental.ppo``). Both the GRPO/repair workers (Ray) and the
SFT ranks (torchrun) build their model through that function.

:func:`patch_verl` makes verl's check answer "is the value-head class importable" instead of "is a package named trl
installed" (no TRL code is changed, and with an older TRL that still has the class nothing is patched). It is applied

* in every Ray worker of ``verl.trainer.main_ppo`` through Ray's ``worker_process_setup_hook`` (Ray docs, "Runtime
  environments"; the override :data:`RAY_HOOK_OVERRIDE`, which verl merges into ``ray.init(runtime_env=...)``), and
* in every torchrun rank of ``verl.trainer.sft_trainer`` by starting the module through this one:
  ``python -m rlvr.train.verl.compat verl.trainer.sft_trainer <overrides>`` (:func:`main`).
"""

from __future__ import annotations

import importlib
import importlib.util
import runpy
import sys
from collections.abc import Sequence

__all__ = ["RAY_HOOK_OVERRIDE", "main", "patch_verl", "value_head_available", "worker_setup"]

RAY_HOOK_OVERRIDE = "+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=rlvr.train.verl.compat.worker_setup"


def value_head_available() -> bool:
    """Whether TRL's ``AutoModelForCausalLMWithValueHead`` can be imported where verl looks for it
    (``trl.experimental.ppo``, then ``trl``); ``False`` when TRL is not installed."""
    for module in ("trl.experimental.ppo", "trl"):
        try:
            if hasattr(importlib.import_module(module), "AutoModelForCausalLMWithValueHead"):
                return True
        except ImportError:
            continue
    return False


def patch_verl() -> bool:
    """Point verl's ``is_trl_available`` (in ``verl.utils.import_utils`` and in the ``monkey_patch`` module that
    imported it by name) at :func:`value_head_available` when TRL is installed without the value-head class. Returns
    whether it patched; idempotent. Raises ``ImportError`` when verl is not installed."""
    if importlib.util.find_spec("trl") is None or value_head_available():
        return False
    import verl.utils.import_utils as import_utils
    from verl.models.transformers import monkey_patch

    import_utils.is_trl_available = value_head_available
    monkey_patch.is_trl_available = value_head_available
    return True


def worker_setup() -> None:
    """Ray ``worker_process_setup_hook`` (:data:`RAY_HOOK_OVERRIDE`): :func:`patch_verl` in each Ray worker process,
    register rlvr's advantage estimator ``rlvr_grpo`` (:mod:`rlvr.train.verl.advantage`) with verl, so the
    ``TaskRunner`` that computes advantages finds it, and make verl's agent-loop workers mask unscored (NaN-reward)
    samples out of the loss (:func:`rlvr.train.verl.mask.patch_agent_loop`); when ``RLVR_SCRIPTED_POLICY`` names a
    script, answer every rollout turn from it (:func:`rlvr.train.verl.scripted.install`: a rehearsal with programs
    that run, ``bench/gpu/rehearse.py``)."""
    patch_verl()
    importlib.import_module("rlvr.train.verl.advantage")
    importlib.import_module("rlvr.train.verl.mask").patch_agent_loop()
    importlib.import_module("rlvr.train.verl.scripted").install()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m rlvr.train.verl.compat MODULE [ARGS...]``: :func:`patch_verl`, then run ``MODULE`` as
    ``__main__`` with ``ARGS`` as ``python -m MODULE ARGS...`` would (``runpy.run_module``, ``sys.argv[0]`` = the
    module's file). Exits with status 2 and a usage line
    when no module is given."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        sys.exit("usage: python -m rlvr.train.verl.compat MODULE [ARGS...]")
    patch_verl()
    sys.argv = [args[0], *args[1:]]
    runpy.run_module(args[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
