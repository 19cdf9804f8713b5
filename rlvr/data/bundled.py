"""Registry of the benchmark files bundled under ``data/raw/`` (provenance and checksums: ``data/raw/README.md``).

A dataset is named ``"name"`` or ``"name:version"`` (``"humanevalplus:v0.1.9"``); a name without a version resolves to
:data:`DEFAULT_VERSIONS`. Each entry lists its files (path relative to the raw folder, sha256, record count, the split
all its records belong to, or ``None`` when the loader derives the split per record) and the normaliser in
:mod:`rlvr.data.loaders` that maps a record to :class:`~rlvr.data.schema.Problem`.

Every read goes through :func:`verify_sha256`: a file whose bytes differ from the registry is an error, never a silent
change of the benchmark.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator

from rlvr.data.errors import DataError

__all__ = [
    "BUNDLED",
    "DEFAULT_VERSIONS",
    "ID_FIELDS",
    "VERSIONED",
    "BundledDataset",
    "BundledFile",
    "DatasetName",
    "canonical_name",
    "decode_utf8",
    "default_raw_dir",
    "iter_records",
    "non_utf8_error",
    "parse_spec",
    "read_id_list",
    "read_text_utf8",
    "record_id",
    "resolve",
    "sha256_file",
    "verify_sha256",
]


@dataclass(frozen=True)
class BundledFile:
    """One stored file: ``path`` relative to the raw folder, ``sha256`` (hex) of its bytes as stored (``.gz``
    included), ``records`` its record count, ``split`` the split of all its records (``None``: derived per record)."""

    path: str
    sha256: str
    records: int
    split: str | None = None


@dataclass(frozen=True)
class BundledDataset:
    """A dataset (one version): its files, auxiliary files (not records: ``reference_check`` results, ``ids`` = the
    committed id list of a fixed subset such as ``mbpp_reg``) and the key of its normaliser in
    :data:`rlvr.data.loaders.NORMALISERS`."""

    name: str
    version: str | None
    loader: str
    files: tuple[BundledFile, ...]
    aux: dict[str, BundledFile] = field(default_factory=dict)
    license: str = ""
    origin: str = ""

    @property
    def key(self) -> str:
        """``"name"`` or ``"name:version"``."""
        return self.name if self.version is None else f"{self.name}:{self.version}"

    @property
    def slug(self) -> str:
        """File-name form of the key: ``"humanevalplus-v0.1.10"``, ``"mbpp"``."""
        return self.name if self.version is None else f"{self.name}-{self.version}"


def _ds(name: str, version: str | None, loader: str, files: list[BundledFile], **kw: Any) -> BundledDataset:
    return BundledDataset(name=name, version=version, loader=loader, files=tuple(files), **kw)


_DATASETS: list[BundledDataset] = [
    _ds("humaneval", None, "humaneval",
        [BundledFile("humaneval/HumanEval.jsonl.gz",
                     "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef", 164, "test")],
        license="MIT", origin="openai/human-eval@6d43fb98 data/HumanEval.jsonl.gz"),
    _ds("mbpp", None, "mbpp",
        [BundledFile("mbpp/mbpp.jsonl", "ccf64ceae9c5403bf50a044cb6d505bfd2a2963ee58338ba268fd65beab92a9f", 974)],
        license="CC-BY-4.0", origin="deepseek-ai/DeepSeek-Coder@2f9fd859 Evaluation/MBPP/data/mbpp.jsonl"),
    _ds("mbpp_reg", None, "mbpp_reg",
        [BundledFile("mbpp/mbpp.jsonl", "ccf64ceae9c5403bf50a044cb6d505bfd2a2963ee58338ba268fd65beab92a9f", 974)],
        aux={"ids": BundledFile("mbpp/mbpp_reg_ids.txt",
                                "e3122e1aaa8c69b9aff2cf4ff62efb9a1fc78fe270632c24ea67d6cb9ed5537c", 100)},
        license="CC-BY-4.0", origin="MBPP (as `mbpp`) restricted to the committed id list mbpp/mbpp_reg_ids.txt"),
    _ds("mbpp_sanitized", None, "mbpp_sanitized",
        [BundledFile("mbpp/sanitized-mbpp.json",
                     "ca95deaa9a01ef0a6f439f88bcf0dd3db3563d22f22aad6cae04ebb9a8d8c8e9", 427)],
        license="CC-BY-4.0",
        origin="google-research mbpp/sanitized-mbpp.json (via mrigankpawagi/PropertyEval@b2be813d)"),
    _ds("humanevalplus", "v0.1.9", "humanevalplus",
        [BundledFile("evalplus/HumanEvalPlus-v0.1.9.jsonl.gz",
                     "e62f4130146963d969da64553f407a66e52d095adbfed4ee6733b4d59e14a3ed", 164, "test")],
        license="Apache-2.0", origin="evalplus/humanevalplus_release@68cd26d5 HumanEvalPlus.jsonl.gz"),
    _ds("humanevalplus", "v0.1.10", "humanevalplus",
        [BundledFile("evalplus/HumanEvalPlus-v0.1.10.jsonl.gz",
                     "272720b90ac375502c8ed23cd791c2a93dfb22a911641a494da74a426c09f101", 164, "test")],
        license="Apache-2.0", origin="evalplus/humanevalplus_release@200defce HumanEvalPlus.jsonl.gz"),
    _ds("mbppplus", "v0.1.0", "mbppplus",
        [BundledFile("evalplus/MbppPlus-v0.1.0.jsonl.gz",
                     "57d639e77667d88930052b2b07212011c25c0bab94dfc1f19d15e1f7f558bfa9", 399, "test")],
        license="Apache-2.0", origin="evalplus/mbppplus_release@f995b084 MbppPlus.jsonl.gz"),
    _ds("mbppplus", "v0.2.0", "mbppplus",
        [BundledFile("evalplus/MbppPlus-v0.2.0.jsonl.gz",
                     "af43697e8791c4c149bdfd6b489d8b5412507551ac20e28a439f650b8225db63", 378, "test")],
        license="Apache-2.0", origin="evalplus/mbppplus_release@dadf43da MbppPlus.jsonl.gz"),
    _ds("leetcode", None, "leetcode",
        [BundledFile("leetcodedataset/LeetCodeDataset-v0.2.0-train.jsonl.gz",
                     "7c3e4221572920a9e6c822083a327d2238ea70b5b3ba18459bee6855ef93e2c7", 1890, "train"),
         BundledFile("leetcodedataset/LeetCodeDataset-v0.3.1-test.jsonl.gz",
                     "3ae536cb41342076691730b72424fdfb9264f233e05c81bf37b5f7e227ea1853", 228, "test")],
        license="MIT", origin="newfacade/LeetCodeDataset@182cd19f data/"),
    _ds("leetcode_contest", None, "leetcode_contest",
        [BundledFile("leetcode_contest_deepseek/20240121-Jul.jsonl.gz",
                     "8cedeae9a76c1e6cec07da3b9f13045864bc763c66e49239b04d766eecff2da4", 180, "test")],
        license="MIT (repo code licence; no data licence stated)",
        origin="deepseek-ai/DeepSeek-Coder@2f9fd859 Evaluation/LeetCode/data/20240121-Jul.jsonl"),
    _ds("codecontests", None, "codecontests",
        [BundledFile("codecontests_subset300/codecontests_train_subset300.jsonl.gz",
                     "a6de7b7a69eb653235d4758abc9d3a582884631a775b330c9ac30a4a2c3402c7", 300, "train")],
        aux={"reference_check": BundledFile("codecontests_subset300/reference_check.json",
                                            "c50bfa32deff845885c82e1fea743f437f8d465ec96377d48b94281598c74a4d", 300)},
        license="CC-BY-4.0 (underlying CodeContests)", origin="justinchiu-test/codecontests-repo@a366655d"),
    _ds("apps", None, "apps",
        [BundledFile("apps_mapcoder150/selected150.jsonl.gz",
                     "115483c5fe38ab07dae45df31e8f463403df42ac663df05752f8f5c17cf46b22", 150, "train")],
        license="MIT", origin="Md-Ashraful-Pramanik/MapCoder@0027da71 data/APPS/selected150.jsonl"),
]

#: ``"name"`` / ``"name:version"`` → dataset.
BUNDLED: dict[str, BundledDataset] = {d.key: d for d in _DATASETS}

#: Version used when a spec names no version.
DEFAULT_VERSIONS: dict[str, str] = {"humanevalplus": "v0.1.10", "mbppplus": "v0.2.0"}


#: Names of the datasets that come in versions (``humanevalplus``, ``mbppplus``).
VERSIONED: frozenset[str] = frozenset(d.name for d in _DATASETS if d.version is not None)

_DASH_VERSION = re.compile(r"^(?P<name>.+)-(?P<version>v\d+(?:\.\d+)*)$")


def parse_spec(spec: str) -> tuple[str, str | None]:
    """Split a dataset spec into ``(name, version)``; the version defaults from :data:`DEFAULT_VERSIONS`.

    Both spellings of a version are read: ``"humanevalplus:v0.1.10"`` and the file-name form
    ``"humanevalplus-v0.1.10"`` (the dash form only for a name of :data:`VERSIONED`, so a name containing ``-v1`` of
    another dataset is left whole). :func:`canonical_name` gives the one spelling rlvr writes.

    >>> parse_spec("humanevalplus-v0.1.10") == parse_spec("humanevalplus:v0.1.10") == ("humanevalplus", "v0.1.10")
    True

    Raises :class:`DataError` on an empty name."""
    name, _, version = spec.strip().partition(":")
    if not version:
        m = _DASH_VERSION.match(name)
        if m and m.group("name") in VERSIONED:
            name, version = m.group("name"), m.group("version")
    if not name:
        raise DataError(f"dataset spec {spec!r}: empty dataset name")
    return name, (version or DEFAULT_VERSIONS.get(name))


def canonical_name(spec: str) -> str:
    """The one spelling of a dataset: ``name`` or ``name-version`` with the default version filled, the form of its
    files (``data/governance/problems/<name>.jsonl``), manifests and metrics keys. Either spelling of
    :func:`parse_spec` goes in.

    >>> canonical_name("humanevalplus:v0.1.10"), canonical_name("humanevalplus"), canonical_name("mbpp")
    ('humanevalplus-v0.1.10', 'humanevalplus-v0.1.10', 'mbpp')
    """
    name, version = parse_spec(spec)
    return name if version is None else f"{name}-{version}"


DatasetName = Annotated[str, AfterValidator(canonical_name)]
"""A params section's dataset-name field: either spelling goes in, :func:`canonical_name`'s is stored
(``humanevalplus:v0.1.10`` and ``humanevalplus-v0.1.10`` are one dataset)."""


def resolve(spec: str) -> BundledDataset:
    """Look up a bundled dataset by ``"name[:version]"``.

    Raises :class:`DataError` naming the spec and the known datasets when it is not bundled."""
    name, version = parse_spec(spec)
    key = name if version is None else f"{name}:{version}"
    if key not in BUNDLED:
        raise DataError(f"dataset spec {spec!r}: unknown bundled dataset {key!r}; known: {sorted(BUNDLED)}")
    return BUNDLED[key]


def default_raw_dir() -> Path:
    """The bundled raw folder: ``$RLVR_RAW_DIR`` if set, else ``data/raw`` of the repository holding this package."""
    env = os.environ.get("RLVR_RAW_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "data" / "raw"


def sha256_file(path: str | Path) -> str:
    """sha256 (hex) of the bytes of ``path``, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_sha256(path: str | Path, expected: str) -> None:
    """Raise :class:`DataError` naming the file, the expected and the actual sha256 when they differ, or when the
    file is missing."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: bundled file missing (expected sha256 {expected})")
    actual = sha256_file(path)
    if actual != expected:
        raise DataError(f"{path}: sha256 mismatch: expected {expected}, actual {actual}")


#: Record fields that hold a record's own id, in the order tried when an error message names the record.
ID_FIELDS = ("task_id", "id", "name", "question_id")


def record_id(rec: Any) -> str | None:
    """The record's own id for error messages: the first of :data:`ID_FIELDS` present in ``rec`` (``None`` when
    ``rec`` is not a dict or has none). Undecodable bytes show as ``\\xNN`` escapes."""
    if not isinstance(rec, dict):
        return None
    for key in ID_FIELDS:
        if rec.get(key) is not None:
            return _printable(str(rec[key]))
    return None


def _printable(s: str) -> str:
    """``s`` with lone surrogates (``surrogateescape``-decoded bytes) written as ``\\xNN`` escapes."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _surrogate_path(value: Any, path: str = "") -> str | None:
    """Dotted path (``test_list[2]``, ``meta.title``) of the first string in ``value`` holding a lone surrogate (an
    undecodable byte under ``surrogateescape``), or ``None``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "<value>"
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            key = _printable(str(k))
            if (found := _surrogate_path(key, f"{path}.<key>" if path else "<key>")) is not None:
                return found
            if (found := _surrogate_path(v, f"{path}.{key}" if path else key)) is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if (found := _surrogate_path(v, f"{path}[{i}]")) is not None:
                return found
    return None


def non_utf8_error(where: str, raw: bytes, exc: UnicodeDecodeError, rec: Any = None) -> DataError:
    """The :class:`DataError` for undecodable bytes: ``"<where>: non-UTF-8 bytes b'\\xff' at byte <offset> …"``,
    plus the record's id (:func:`record_id`) and the field holding the bytes when ``rec`` (the record parsed with
    ``surrogateescape``) is given. ``raw``/``exc`` are the bytes and the decode error of that record or line; the
    offset is 0-based within ``raw``."""
    bad = raw[exc.start : min(exc.end, exc.start + 8)]
    msg = f"{where}: non-UTF-8 bytes {bad!r} at byte {exc.start} ({exc.reason})"
    rid = record_id(rec)
    if rid is not None:
        msg += f", record id {rid!r}"
    field_path = _surrogate_path(rec) if rec is not None else None
    if field_path is not None:
        msg += f", field '{field_path}'"
    return DataError(msg)


def decode_utf8(raw: bytes, where: str) -> str:
    """``raw`` decoded as UTF-8.

    Raises :class:`DataError` from :func:`non_utf8_error` naming ``where`` (the file, or ``file:line``), the offending
    bytes and their offset, and, when the text still parses as JSON with the bad bytes escaped, the record id and
    field."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        try:
            rec = json.loads(raw.decode("utf-8", "surrogateescape"))
        except ValueError:
            rec = None
        raise non_utf8_error(where, raw, exc, rec if isinstance(rec, dict) else None) from exc


def read_text_utf8(path: str | Path) -> str:
    """Whole file ``path`` (``.gz`` transparently) as UTF-8 text. Raises :class:`DataError` naming the file, the line
    (1-based) and, for a JSON array, the record index and id of the first undecodable byte."""
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        where, rec = f"{path}:{line}", None
        try:
            data = json.loads(raw.decode("utf-8", "surrogateescape"))
        except ValueError:
            data = None
        if isinstance(data, list):
            idx = next((i for i, r in enumerate(data, 1) if _surrogate_path(r) is not None), None)
            if idx is not None:
                where, rec = f"{path}:{line} (record {idx})", data[idx - 1]
        elif isinstance(data, dict):
            rec = data
        shifted = UnicodeDecodeError(exc.encoding, exc.object, exc.start - line_start, exc.end - line_start,
                                     exc.reason)
        raise non_utf8_error(where, raw[line_start:], shifted, rec) from exc


def iter_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` from a JSONL file (``.gz`` transparently) or, for ``*.json``, a JSON array
    (the "line" is then the 1-based record index).

    Blank lines are skipped. Raises :class:`DataError` naming the file and line on malformed JSON, on a record that is
    not a JSON object, and on bytes that are not UTF-8 (then also the byte offset in the line, the record's id and the
    field when the line still parses; :func:`decode_utf8`)."""
    path = Path(path)
    if path.suffix == ".json":
        text = read_text_utf8(path)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{exc.lineno}: malformed JSON: {exc.msg}") from exc
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON array of records")
        for i, rec in enumerate(data, 1):
            if not isinstance(rec, dict):
                raise DataError(f"{path}:{i}: record is not a JSON object")
            yield i, rec
        return
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = decode_utf8(raw, f"{path}:{lineno}")
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: malformed JSON line: {exc.msg} (column {exc.colno})") from exc
            if not isinstance(rec, dict):
                raise DataError(f"{path}:{lineno}: record is not a JSON object")
            yield lineno, rec


def read_id_list(path: str | Path) -> list[int]:
    """Integer ids of a committed id-list file: one id per line; ``#`` starts a comment (header), blank lines are
    skipped. Raises :class:`DataError` naming the file and line of a non-integer, a repeated id or undecodable bytes,
    and naming the file when it holds no id."""
    path = Path(path)
    ids: list[int] = []
    seen: set[int] = set()
    for lineno, line in enumerate(read_text_utf8(path).splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        try:
            n = int(body)
        except ValueError as exc:
            raise DataError(f"{path}:{lineno}: not an integer id: {body!r}") from exc
        if n in seen:
            raise DataError(f"{path}:{lineno}: id {n} listed twice")
        seen.add(n)
        ids.append(n)
    if not ids:
        raise DataError(f"{path}: no ids listed")
    return ids
