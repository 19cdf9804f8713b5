"""Shared fixtures: one embedded judge per test session (sandboxes are warm and reused), GPU auto-skip."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("WANDB_MODE", "disabled")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``@pytest.mark.gpu`` tests when no CUDA device is present."""
    # NVML's device count, not the CUDA runtime's: torch.cuda.is_available() would otherwise initialise CUDA in the
    # pytest process, and a process forked from it later (vLLM's engine core) then fails with "Cannot re-initialize
    # CUDA in forked subprocess" (torch docs, torch.cuda.is_available; seen on the lent H100)
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        # get_closest_marker, not `"gpu" in item.keywords`: keywords also hold folder names (a checkout named gpu)
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def judge():
    """The real embedded judge (bubblewrap), two workers, shared by the whole session."""
    from rlvr.judge import Judge

    j = Judge(workers=2)
    yield j
    j.close()


@pytest.fixture
def metrics_show_width():
    """``width(files, root) -> (characters, columns)`` of the table ``dvc metrics show FILE...`` prints, run in
    ``root`` (paths shown relative to it), for these JSON metrics files: DVC's own table
    (``dvc.compare.metrics_table``: one column per flattened leaf key, values at the default precision 5) rendered as
    ``dvc.ui.table.plain_table`` does (``tabulate``, plain format)."""
    import json
    from pathlib import Path

    from dvc.compare import metrics_table
    from tabulate import tabulate

    def width(files, root) -> tuple[int, int]:
        data = {Path(f).relative_to(root).as_posix(): {"data": json.loads(Path(f).read_text(encoding="utf-8"))}
                for f in files}
        td = metrics_table({"workspace": {"data": data}}, precision=5, round_digits=True)
        text = tabulate(list(td), td.keys(), tablefmt="plain", disable_numparse=True, missingval="-")
        return max(len(line) for line in text.splitlines()), len(td.keys()) - 1

    return width
