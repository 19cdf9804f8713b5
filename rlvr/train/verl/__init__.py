"""The verl engine (Ray + vLLM + FSDP, verl 0.9.1) for the sft and grpo stages, tested up to the GPU boundary.

* :mod:`~rlvr.train.verl.overrides` — params section ``verl``, hardware profiles (``profiles/*.yaml``), the Hydra
  override lists for ``verl.trainer.main_ppo`` (GRPO) and ``verl.trainer.sft_trainer`` (SFT);
* :mod:`~rlvr.train.verl.data` — the SFT ``messages`` parquet (the RL parquet is :mod:`rlvr.data.export`);
* :mod:`~rlvr.train.verl.launch` — run a stage: write overrides, launch (Ray), curves, merge;
* :mod:`~rlvr.train.verl.commands` — the trainers' argv, the files recording it, running it;
* :mod:`~rlvr.train.verl.environ` — the environment of the launch and of every Ray worker;
* :mod:`~rlvr.train.verl.logs` — verl ``file`` logger + rollout dumps → DVC plot TSVs;
* :mod:`~rlvr.train.verl.merge` — ``verl.model_merger`` on the last FSDP checkpoint → HuggingFace folder.

Importing this package never imports verl, Ray or torch.
"""
