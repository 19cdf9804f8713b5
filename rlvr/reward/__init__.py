"""Verifiable rewards: judge verdicts → training rewards for verl and TRL.

* :mod:`rlvr.reward.modes`   – ``sparse`` / ``dense`` / ``shaped`` formulas, ``RewardConfig`` (``params.yaml``
  ``reward`` + ``reward_shaping``).
* :mod:`rlvr.reward.extract` – program extraction from a completion.
* :mod:`rlvr.reward.scoring` – bounded concurrent judging, per-request timeout, transport-only retries.
* :mod:`rlvr.reward.scorer`  – the shared scoring path (lazy process-wide judge).
* :mod:`rlvr.reward.timeouts` – ``reward_shaping.max_timeouts``: the training judges' timeout rule (views of the
  judge's pool, the node judge's factory); evaluation keeps the judge's default.
* :mod:`rlvr.reward.verl`    – ``compute_score`` / ``compute_score_async`` for verl's reward managers.
* :mod:`rlvr.reward.trl`     – ``make_reward_funcs`` for ``trl.GRPOTrainer``.
* :mod:`rlvr.reward.step_guard` – stop training after 2 consecutive steps whose judged samples were all
  ``sandbox_error`` (a dead judge), in both engines.
* :mod:`rlvr.reward.share_window` – stop training once the ``sandbox_error`` share stays above
  ``judge.max_sandbox_error_share`` for ``judge.sandbox_error_window_steps`` steps (a judge failing part of the time).

Importing any of them starts no sandbox and touches no network; the judge is created at the first reward call.
"""
