"""``rlvr convert``: verl RL parquet files (PRIME / TACO / APPS style code rows, or rlvr's own) → rlvr problems JSONL.

A verl RL row (verl's data preparation doc, "Prepare Data for Post-Training"; the ``examples/data_preprocess``
scripts write them) is ``{"data_source", "prompt": [{"role", "content"}], "ability", "reward_model": {"style",
"ground_truth"}, "extra_info": {"split", "index", …}}``. ``reward_model.ground_truth`` is read by
:func:`rlvr.data.schema.from_ground_truth`: verl's ``{"inputs", "outputs"[, "fn_name"]}`` layout
(:mod:`rlvr.data.verl_layout`) or rlvr's own payload, a JSON string or a struct. Each row becomes one
:class:`~rlvr.data.schema.Problem`:

* ``id``: ``extra_info.id`` when present (rlvr's own parquet), else ``"<data_source>/<split>/<index>"`` from
  ``extra_info``, else ``"<data_source>/<file stem>/<row number>"``; ids must be unique across the files converted.
* ``source`` = ``data_source``; ``split`` = ``extra_info.split`` (or ``--split``); ``statement`` = the last ``user``
  message of ``prompt`` (a string prompt is taken whole); the whole chat prompt is kept in ``meta["prompt"]`` and the
  original ``extra_info`` in ``meta["extra_info"]``.

Usage::

    rlvr convert train.parquet [more.parquet …] --out data/raw/taco.jsonl

The output is the JSONL of :func:`rlvr.data.schema.write_problems` (written atomically), read back with
:func:`rlvr.data.schema.read_problems`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from rlvr.data.schema import Problem, from_ground_truth

__all__ = ["convert_rows", "main", "problem_from_row", "read_parquet_rows"]


def read_parquet_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of a parquet file as Python dicts, batch by batch (pyarrow; bounded memory for large files).

    Raises ``ValueError`` naming the file when it is not a readable parquet."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(str(path))
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError variants
        raise ValueError(f"{path}: not a readable parquet file ({exc})") from exc
    for batch in pf.iter_batches(batch_size=1024):
        yield from batch.to_pylist()


def _statement(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if users and isinstance(users[-1], str):
            return users[-1]
    return ""


def problem_from_row(row: dict[str, Any], where: str, default_id: str, split: str | None = None) -> Problem:
    """One verl RL row → :class:`Problem` (field mapping in the module doc).

    Args:
        row: the row as a dict. where: ``"<file>:row <n>"`` for error messages.
        default_id: the id used when ``extra_info`` names none. split: overrides ``extra_info.split``.

    Raises:
        ValueError: ``"<where>: field '<name>': <problem>"`` for a missing ``data_source`` or
            ``reward_model.ground_truth`` or a ground truth neither layout reads.
    """
    ds = row.get("data_source")
    if not isinstance(ds, str) or not ds:
        raise ValueError(f"{where}: field 'data_source': missing or not a string")
    rm = row.get("reward_model")
    gt = rm.get("ground_truth") if isinstance(rm, dict) else None
    if gt is None:
        raise ValueError(f"{where}: field 'reward_model.ground_truth': missing")
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    try:
        base = from_ground_truth(gt, ds)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: field 'reward_model.ground_truth': {exc}") from exc
    if isinstance(extra.get("id"), str) and extra["id"]:
        pid = extra["id"]
    elif extra.get("index") is not None:
        pid = f"{ds}/{extra.get('split') or split or 'train'}/{extra['index']}"
    else:
        pid = default_id
    meta = dict(base.meta)
    if row.get("prompt") is not None:
        meta["prompt"] = row["prompt"]
    if extra:
        meta["extra_info"] = extra
    return base.model_copy(update={
        "id": pid, "source": ds, "split": split or extra.get("split") or "train",
        "statement": _statement(row.get("prompt")), "meta": meta,
    })


def convert_rows(paths: Iterable[str | Path], split: str | None = None) -> list[Problem]:
    """Every row of every parquet in ``paths`` as problems, in order.

    Raises ``ValueError`` naming the file, row and field of the first bad row, or the two rows sharing an id."""
    out: list[Problem] = []
    seen: dict[str, str] = {}
    for path in paths:
        path = Path(path)
        for n, row in enumerate(read_parquet_rows(path)):
            where = f"{path}:row {n}"
            p = problem_from_row(row, where, f"{row.get('data_source')}/{path.stem}/{n}", split)
            if p.id in seen:
                raise ValueError(f"{where}: problem id {p.id!r} repeats {seen[p.id]} (give extra_info.index unique "
                                 "values or convert the files separately)")
            seen[p.id] = where
            out.append(p)
    return out


@click.command("convert")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="problems JSONL to write (atomically)")
@click.option("--split", default=None, help="split name for every problem (default: extra_info.split, else train)")
def main(inputs: tuple[Path, ...], out_path: Path, split: str | None) -> None:
    """Convert verl RL parquet files (PRIME/TACO/APPS-style code ground truth, or rlvr's own) into rlvr problems.

    Each row's reward_model.ground_truth ({"inputs", "outputs", "fn_name"} or rlvr's {"tests", …}) becomes one
    problem, judged exactly as compute_score judges that row."""
    from collections import Counter

    from rlvr.data.schema import write_problems

    try:
        problems = convert_rows(inputs, split)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    n = write_problems(out_path, problems)
    kinds = Counter(("call" if p.entry_point else "stdio") if p.meta.get("ground_truth_layout") == "verl" else "rlvr"
                    for p in problems)
    click.echo(f"{n} problem(s) → {out_path} ({json.dumps(dict(sorted(kinds.items())))})")
