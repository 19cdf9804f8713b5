"""The judge as an HTTP service, one module per concept.

* :mod:`rlvr.judge.api.sandboxfusion` – SandboxFusion's ``GET /v1/ping`` and ``POST /run_code``.
* :mod:`rlvr.judge.api.scalebox` – ScaleBox's ``POST /common_evaluate_batch``.
* :mod:`rlvr.judge.api.datasets` – SandboxFusion's dataset API (``/submit``, ``/get_prompts``, …): 501 naming the
  alternative.
* :mod:`rlvr.judge.api.native` – rlvr's own ``/rlvr/judge``, ``/rlvr/call_outputs``, ``/rlvr/info``.
* :mod:`rlvr.judge.api.admission` – bounded admission (503 + ``Retry-After``) and the judge call in the thread pool.
* :mod:`rlvr.judge.api.metrics` – Prometheus collectors (``GET /metrics``).
* :mod:`rlvr.judge.api.common` – what every wire API shares (``BadRequest``, the judge of the app).
* :mod:`rlvr.judge.api.app` – the one app factory (:func:`~rlvr.judge.api.app.create_app`), JSON logs, ``serve``.

This package imports nothing on import (no FastAPI app is built); :mod:`rlvr.judge.server` re-exports the public
names for older importers.
"""
