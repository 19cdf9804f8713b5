"""SandboxFusion's dataset API (``/submit``, ``/get_prompts``, ``/get_prompt_by_id``, ``/list_datasets``,
``/list_ids``): answered **501 Not Implemented**, with the alternative named in the body.

Why not served: verl's code reward (``verl/utils/reward_score/sandbox_fusion/utils.py``, ``call_sandbox_api``) posts to
``/run_code`` only, one request per test case, and ScaleBox users post whole submissions to
``/common_evaluate_batch``; both are served (:mod:`rlvr.judge.api.sandboxfusion`, :mod:`rlvr.judge.api.scalebox`). The
dataset API is for SandboxFusion's *own* bundled datasets (``humaneval_python``, ``mbpp``, ``code_contests``, … with
SandboxFusion's prompts, test code and ``TestConfig`` options such as ``extra.is_fewshot``); answering it from rlvr's
different problem files under the same names would return other prompts and other verdicts than the client expects.
The explicit 501 (instead of a 404) tells a client of the official ``sandbox_fusion`` package, whose ``submit``
raises ``Faas api responded with code 501: …`` with this body, what to call instead:

* judge a submission against given tests: ``POST /common_evaluate_batch`` (same ``SubmitRequest`` shape, with
  ``config.provided_data.test_cases`` or ``provided_data.ground_truth``);
* score a samples file against a bundled dataset: ``rlvr judge --dataset NAME --samples FILE`` (EvalPlus-compatible);
* prompts of a bundled dataset: ``data/governance/problems/<name>.jsonl`` (``statement``/``starter_code``), or
  ``rlvr.data.prompts.build_messages``.

SandboxFusion's other unserved endpoint, ``/run_jupyter`` (cells run in a Jupyter kernel), is answered 501 the same
way (:data:`OTHER_ENDPOINTS`), naming ``/run_code``. The official client retries *every* non-200 answer (tenacity,
``max_attempts`` 5 for ``submit`` and ``run_code``, 3 for ``run_jupyter``, exponential jitter: about 18 s for 5), so
a caller that expects the 501 passes ``max_attempts=1``.
"""

from __future__ import annotations

from fastapi import APIRouter

from rlvr.judge.api.common import BoundedJSONRoute, SafeJSONResponse

__all__ = ["ALTERNATIVE", "ENDPOINTS", "OTHER_ENDPOINTS", "router"]

router = APIRouter(route_class=BoundedJSONRoute)

#: SandboxFusion's dataset endpoints (``sandbox/server/online_judge_api.py``) and their HTTP methods.
ENDPOINTS: dict[str, str] = {
    "/submit": "POST",
    "/get_prompts": "POST",
    "/get_prompt_by_id": "POST",
    "/list_datasets": "GET",
    "/list_ids": "POST",
}

#: The 501 body's ``detail``: what to use instead.
ALTERNATIVE = (
    "SandboxFusion's dataset API is not served by rlvr (its datasets are not bundled here). To judge a submission "
    "against given tests, POST the same SubmitRequest to /common_evaluate_batch with config.provided_data.test_cases "
    "(or provided_data.ground_truth); to score samples against a bundled dataset, run `rlvr judge --dataset NAME "
    "--samples FILE`; code execution is POST /run_code. See docs/judge/api.md."
)


#: SandboxFusion's other endpoints rlvr does not serve: path → (method, the 501 body's ``detail``, ``alternative``).
OTHER_ENDPOINTS: dict[str, tuple[str, str, str]] = {
    "/run_jupyter": ("POST", "SandboxFusion's Jupyter execution (/run_jupyter) is not served by rlvr: run the cells' "
                     "code as one program with POST /run_code (nothing persists between requests). See "
                     "docs/judge/api.md.", "/run_code"),
}


def _not_implemented(path: str, detail: str = ALTERNATIVE,
                     alternative: str = "/common_evaluate_batch") -> SafeJSONResponse:
    return SafeJSONResponse(status_code=501, content={"detail": detail, "endpoint": path, "alternative": alternative})


def _register(path: str, method: str, detail: str = ALTERNATIVE, alternative: str = "/common_evaluate_batch") -> None:
    async def handler() -> SafeJSONResponse:
        return _not_implemented(path, detail, alternative)

    handler.__name__ = "sandboxfusion_unserved_" + path.strip("/")
    router.add_api_route(path, handler, methods=[method], status_code=501, include_in_schema=True,
                         summary=f"SandboxFusion {path}: 501, use {alternative}")


for _path, _method in ENDPOINTS.items():
    _register(_path, _method)
for _path, (_method, _detail, _alt) in OTHER_ENDPOINTS.items():
    _register(_path, _method, _detail, _alt)
