"""Read back what simcore wrote, checking it first: one reader per kind of file.

Every file simcore reads back goes through the reader of its kind, here, which
checks the file's hash against the run's manifest where one is recorded and its
schema always. Replay, batch resume, the HTTP API and the report tools use these
readers and nothing else. A file that fails its check raises
:class:`DamagedFile`, whose message names the file and what is wrong; the
command-line tools print it as one line and exit with status 2.

=================  =========================================  ==========================
kind               reader                                     checked against
=================  =========================================  ==========================
manifest.json      :func:`read_manifest`                      its schema
trace.jsonl        :func:`read_trace`                         ``trace_sha256``, ``n_events``
results.json       :func:`read_results`                       ``files`` hash, schema, manifest
a run directory    :func:`read_run`                           all three above
cassette.sqlite    :func:`read_cassette`                      ``files`` hash, SQLite, schema
embeddings.npz     :func:`read_embeddings`                    ``files`` hash, arrays
other JSON files   :func:`read_record`, :func:`read_jsonl`    ``files`` hash, top-level keys
a ledger line      :func:`read_ledger_line`                   its schema
calibration.json   :func:`read_calibration`                   its schema, each metric's row
sweep.json         :func:`read_sweep_definition`              its schema
heartbeat.json     :func:`read_heartbeat`                     its schema
a comparison       :func:`read_comparison`                    both files' schemas
=================  =========================================  ==========================

The manifest lists the sha256 of every other file of its run directory under
``files`` (runs written before that field existed are checked by schema only).
The manifest itself has no recorded hash: it is the record the others are
checked against, so its schema is checked field by field.

Nothing here writes.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from backends.cassette import check_cassette
from backends.errors import DamagedFile
from simcore.base.heartbeat import HEARTBEAT, STATES
from simcore.base.rng import MAX_SEED

__all__ = [
    "DamagedFile",
    "RunRecord",
    "file_sha256",
    "parse_json",
    "read_calibration",
    "read_cassette",
    "read_comparison",
    "read_embeddings",
    "read_heartbeat",
    "read_jsonl",
    "read_ledger_line",
    "read_manifest",
    "read_record",
    "read_results",
    "read_run",
    "read_sweep_definition",
    "read_trace",
]

MANIFEST, TRACE, RESULTS, CASSETTE = "manifest.json", "trace.jsonl", "results.json", "cassette.sqlite"
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RunRecord:
    """A run directory that passed its checks.

    Attributes:
        path: The run directory.
        manifest: Its manifest.
        results: Its results.
    """

    path: Path
    manifest: dict[str, Any]
    results: dict[str, Any]


# -- JSON ------------------------------------------------------------------------

def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_json(raw: bytes | str) -> Any:
    """Parse JSON strictly: UTF-8, no duplicate keys; any failure is a ValueError.

    Catches what ``json.loads`` lets through as other exceptions (a non-UTF-8
    byte, an integer past Python's digit limit, nesting past the recursion
    limit), so that callers handle one exception type.

    Raises:
        ValueError: one short phrase saying what is wrong.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise ValueError("empty")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise ValueError("malformed JSON (nested too deeply)") from None
    except ValueError as exc:  # an over-long integer, a duplicate key
        raise ValueError(f"malformed JSON ({str(exc).splitlines()[0]})") from None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DamagedFile(path, "is missing") from None
    except OSError as exc:
        raise DamagedFile(path, f"cannot be read ({exc.strerror or exc})") from None


def _json_object(path: Path, data: bytes | None = None) -> dict[str, Any]:
    try:
        value = parse_json(_read_bytes(path) if data is None else data)
    except ValueError as exc:
        raise DamagedFile(path, str(exc)) from None
    if not isinstance(value, dict):
        raise DamagedFile(path, f"must hold a JSON object, holds {type(value).__name__}")
    return value


# -- schema checks ----------------------------------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


Check = tuple[Callable[[Any], bool], str]
TEXT: Check = (lambda v: isinstance(v, str) and bool(v), "a non-empty string")
STRING: Check = (lambda v: isinstance(v, str), "a string")
OBJECT: Check = (lambda v: isinstance(v, dict), "an object")
LIST: Check = (lambda v: isinstance(v, list), "a list")
INDEX: Check = (lambda v: _is_int(v) and v >= 0, "an integer >= 0")
SEED: Check = (lambda v: _is_int(v) and 0 <= v <= MAX_SEED, f"an integer from 0 to {MAX_SEED}")
NUMBER: Check = (_is_number, "a number")
HASH: Check = (lambda v: isinstance(v, str) and bool(SHA256.match(v)), "a sha256 (64 hex digits)")


def _optional(check: Check) -> Check:
    return (lambda v: v is None or check[0](v), f"{check[1]} or null")


def _check(path: Path, data: Mapping[str, Any], schema: Mapping[str, Check], *,
           required: bool = True, prefix: str = "") -> None:
    """Check ``data``'s fields against ``schema``; missing fields are an error if ``required``."""
    for name, (ok, describe) in schema.items():
        if name not in data:
            if required:
                raise DamagedFile(path, f"{prefix}{name}: missing (must be {describe})")
            continue
        if not ok(data[name]):
            got = json.dumps(data[name], default=str)
            got = got if len(got) <= 60 else got[:57] + "..."
            raise DamagedFile(path, f"{prefix}{name}: must be {describe}, got {got}")


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file, read in chunks."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _check_hash(run_dir: Path, manifest: Mapping[str, Any] | None, name: str) -> None:
    """Compare a run file with the hash its manifest records (manifests before ``files`` record none)."""
    files = (manifest or {}).get("files")
    if files is None:
        return
    path = run_dir / name
    expected = files.get(name)
    if expected is None:  # the manifest lists every file of its run: an unlisted name is a damaged listing
        raise DamagedFile(path, f"is not among the files that {MANIFEST} records")
    try:
        actual = file_sha256(path)
    except FileNotFoundError:
        raise DamagedFile(path, "is missing") from None
    except OSError as exc:
        raise DamagedFile(path, f"cannot be read ({exc.strerror or exc})") from None
    if actual != expected:
        raise DamagedFile(path, f"damaged: its sha256 {actual[:12]}... is not the {expected[:12]}... "
                                f"that {MANIFEST} records")


def _check_hash_beside(path: Path) -> None:
    """Check a file against the manifest in its directory, if there is one."""
    if path.name != MANIFEST and (path.parent / MANIFEST).is_file():
        files = recorded_files(path.parent)
        _check_hash(path.parent, None if files is None else {"files": files}, path.name)


def recorded_files(directory: str | Path) -> dict[str, str] | None:
    """The sha256 of each file that a directory's ``manifest.json`` records, by relative path.

    A directory's manifest is a run's (:func:`read_manifest`) or, beside a
    ``comparison.json``, a mechanism comparison's (:func:`read_comparison_manifest`);
    each is read by its own reader. None where there is no manifest, or it records
    no hashes (files written before manifests recorded them).

    Raises:
        DamagedFile: when the manifest fails its reader's check.
    """
    directory = Path(directory)
    if not (directory / MANIFEST).is_file():
        return None
    if (directory / "comparison.json").is_file():
        return read_comparison_manifest(directory).get("files")
    return read_manifest(directory).get("files")


# -- run directories ----------------------------------------------------------------

MANIFEST_SCHEMA: dict[str, Check] = {
    "scenario": TEXT,
    "run_id": TEXT,
    "seed": SEED,
    "config": OBJECT,
    "backend": OBJECT,
    "status": TEXT,
    "trace_sha256": HASH,
    "n_events": INDEX,
}
BACKEND_SCHEMA: dict[str, Check] = {"name": TEXT, "model": TEXT, "base_url": _optional(TEXT), "options": OBJECT}
# Every field simcore.runs.runner.manifest has ever written. Another name is damage (a key
# changed in place, "files" to "fi es" say, still parses, and would silently drop the
# hash checks the field carries), so a new field must be added here too.
MANIFEST_FIELDS = frozenset({
    *MANIFEST_SCHEMA, "models", "versions", "code_revision", "created_utc", "perturbation", "embeddings", "files",
    "sent", "options", "resumed_from",
})


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    """A run's ``manifest.json``, its schema checked field by field.

    Raises:
        DamagedFile: naming the file and the field.
    """
    path = Path(run_dir) / MANIFEST
    data = _json_object(path)
    unknown = sorted(set(data) - MANIFEST_FIELDS)
    if unknown:
        raise DamagedFile(path, f"{unknown[0]!r} is not a manifest field")
    _check(path, data, MANIFEST_SCHEMA)
    _check(path, data["backend"], BACKEND_SCHEMA, required=False, prefix="backend.")
    _check(path, data, {"perturbation": _optional(STRING), "files": OBJECT, "sent": OBJECT, "options": OBJECT,
                        "resumed_from": STRING}, required=False)
    for name, digest in data.get("files", {}).items():
        if name.startswith("/") or ".." in name.split("/"):
            raise DamagedFile(path, f"files: {name!r} is not a path inside the run directory")
        _check(path, {name: digest}, {name: HASH}, prefix="files.")
    return data


def check_trace(run_dir: str | Path, manifest: Mapping[str, Any]) -> Path:
    """The path of a run's ``trace.jsonl``, hashed in chunks against the manifest's ``trace_sha256``.

    Raises:
        DamagedFile: when the file is missing or is not the trace the manifest records.
    """
    path = Path(run_dir) / TRACE
    try:
        actual = file_sha256(path)
    except FileNotFoundError:
        raise DamagedFile(path, "is missing") from None
    except OSError as exc:
        raise DamagedFile(path, f"cannot be read ({exc.strerror or exc})") from None
    if actual != manifest["trace_sha256"]:
        with open(path, "rb") as fh:
            lines = sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
        raise DamagedFile(
            path,
            f"damaged: {lines} lines where {MANIFEST} records {manifest['n_events']} events, "
            f"sha256 {actual[:12]}... where it records {manifest['trace_sha256'][:12]}...",
        )
    return path


def read_trace(run_dir: str | Path, manifest: Mapping[str, Any]) -> bytes:
    """A run's ``trace.jsonl``, checked against the manifest's ``trace_sha256`` (see :func:`check_trace`)."""
    return _read_bytes(check_trace(run_dir, manifest))


RESULTS_SCHEMA: dict[str, Check] = {"status": TEXT, "trace_sha256": HASH, "n_events": INDEX}


def read_results(run_dir: str | Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A run's ``results.json``: its hash, schema, and agreement with the manifest.

    Raises:
        DamagedFile: naming the file and what is wrong.
    """
    run_dir = Path(run_dir)
    path = run_dir / RESULTS
    _check_hash(run_dir, manifest, RESULTS)
    data = _json_object(path)
    _check(path, data, RESULTS_SCHEMA)
    _check(path, data, {"metrics": OBJECT, "usage": OBJECT, "seed": SEED,
                        "cost_usd": _optional(NUMBER)}, required=False)
    for name in ("trace_sha256", "n_events", "seed"):
        if name in data and data[name] != manifest.get(name):
            raise DamagedFile(path, f"{name}: {json.dumps(data[name])} is not the "
                                    f"{json.dumps(manifest.get(name))} that {MANIFEST} records")
    return data


def read_run(run_dir: str | Path, *, trace: bool = True) -> RunRecord:
    """Check a run directory: manifest, results and (unless ``trace`` is False) trace.

    Raises:
        DamagedFile: naming the first file that fails and what is wrong.
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if trace:
        read_trace(run_dir, manifest)
    return RunRecord(run_dir, manifest, read_results(run_dir, manifest))


def read_record(path: str | Path, schema: Mapping[str, Check] | None = None) -> dict[str, Any]:
    """A JSON object file (``experiment.json``, ``summary.json``, ``study.json`` ...).

    If the directory holds a manifest that records the file's hash, the hash is
    checked too (the manifest is read through :func:`read_manifest`).

    Args:
        path: The file.
        schema: Top-level fields it must have, name -> (check, description).

    Raises:
        DamagedFile: naming the file and what is wrong.
    """
    path = Path(path)
    _check_hash_beside(path)
    data = _json_object(path)
    if schema:
        _check(path, data, schema)
    return data


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """A JSON-lines file of objects (``pairs.jsonl`` ...); blank lines are skipped.

    Raises:
        DamagedFile: naming the file, the line and what is wrong.
    """
    path = Path(path)
    data = _read_bytes(path)
    rows = []
    for n, line in enumerate(data.splitlines(), 1):
        if line.strip():
            rows.append(_json_object(Path(f"{path}:{n}"), line))
    return rows


def read_cassette(run_dir: str | Path, manifest: Mapping[str, Any]) -> Path | None:
    """Check a run's ``cassette.sqlite`` (hash, SQLite, schema, every entry); its path or None.

    Open it afterwards with ``backends.cassette.Cassette(path, readonly=True)``,
    which checks it again (cheaply) and opens it with SQLite's ``mode=ro``.

    Raises:
        DamagedFile: naming the file and what is wrong.
    """
    run_dir = Path(run_dir)
    path = run_dir / CASSETTE
    recorded = CASSETTE in manifest.get("files", {})
    if not path.exists() and not recorded:
        return None
    _check_hash(run_dir, manifest, CASSETTE)
    check_cassette(path, deep=True)
    return path


def read_embeddings(path: str | Path, dim: int) -> dict[tuple[str, int, str], Any]:
    """An ``embeddings.npz``'s vectors by (phase, round, agent), checked
    (:meth:`simcore.analysis.embeddings.EmbeddingStore.load` wraps them in a store).

    Checks the hash (when a manifest beside it records one) and the arrays: ``keys`` of
    shape (n, 3) holding (phase, round, agent) with an integer round, and
    ``vectors`` of shape (n, ``dim``), float32 and finite. Never unpickles.

    Raises:
        DamagedFile: naming the file and what is wrong.
    """
    path = Path(path)
    _check_hash_beside(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            if set(data.files) != {"keys", "vectors"}:
                raise DamagedFile(path, f"must hold arrays keys and vectors, holds {sorted(data.files)}")
            keys, vectors = data["keys"], data["vectors"]
    except DamagedFile:
        raise
    except FileNotFoundError:
        raise DamagedFile(path, "is missing") from None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise DamagedFile(path, f"is not a readable .npz file ({type(exc).__name__}: {exc})") from None
    if keys.ndim != 2 or keys.shape[1] != 3 or keys.dtype.kind != "U":
        raise DamagedFile(path, f"keys: must be an (n, 3) array of strings, got {keys.dtype} {keys.shape}")
    if vectors.shape != (len(keys), dim) or vectors.dtype != np.float32:
        raise DamagedFile(path, f"vectors: must be ({len(keys)}, {dim}) float32, got {vectors.dtype} {vectors.shape}")
    if not np.isfinite(vectors).all():
        raise DamagedFile(path, "vectors: hold NaN or infinite values")
    out = {}
    for (phase, rnd, agent), vec in zip(keys, vectors):
        try:
            key = (str(phase), int(rnd), str(agent))
        except ValueError:
            raise DamagedFile(path, f"keys: round must be an integer, got {str(rnd)!r}") from None
        out[key] = vec
    return out


# -- sweeps -------------------------------------------------------------------------

LEDGER_SCHEMA: dict[str, Check] = {"index": INDEX, "run_id": TEXT, "seed": SEED, "status": TEXT}
LEDGER_OPTIONAL: dict[str, Check] = {
    "run_dir": _optional(TEXT),
    "error": _optional(STRING),
    "metrics": OBJECT,
    "trace_sha256": _optional(HASH),
    "calls": INDEX,
    "llm_errors": INDEX,
    "prompt_tokens": INDEX,
    "completion_tokens": INDEX,
    "tokens": INDEX,
    "cost_usd": NUMBER,
    "wall_s": _optional(NUMBER),
    "total_s": _optional(NUMBER),
    "readability": OBJECT,
}
# A trial's replies as the readability test reads them (simcore.analysis.readability.Arm).
LEDGER_READABILITY: dict[str, Check] = {"replies": INDEX, "unreadable": INDEX, "slots": _optional(OBJECT)}


def read_ledger_line(line: str, where: str | Path) -> dict[str, Any]:
    """One line of a sweep's ``ledger.jsonl``, its schema checked.

    Args:
        line: The line.
        where: Its file and line number, for the message (``ledger.jsonl:7``).

    Raises:
        DamagedFile: naming the line and what is wrong.
    """
    try:
        row = parse_json(line)
    except ValueError as exc:
        raise DamagedFile(where, str(exc)) from None
    if not isinstance(row, dict):
        raise DamagedFile(where, f"must hold a JSON object, holds {type(row).__name__}")
    _check(Path(where), row, LEDGER_SCHEMA)
    _check(Path(where), row, LEDGER_OPTIONAL, required=False)
    if "readability" in row:
        _check(Path(where), row["readability"], LEDGER_READABILITY, prefix="readability.")
    return row


SWEEP_SCHEMA: dict[str, Check] = {"definition": OBJECT}
DEFINITION_SCHEMA: dict[str, Check] = {
    "scenario": TEXT, "trials": INDEX, "grid": LIST, "seed": SEED, "seed_scope": TEXT,
    "base_config": OBJECT, "backend": OBJECT, "conditions": _optional(LIST),
}


def read_sweep_definition(sweep_dir: str | Path) -> dict[str, Any] | None:
    """The definition stored in a sweep directory's ``sweep.json``, or None if there is none.

    Raises:
        DamagedFile: when the file exists but is damaged.
    """
    path = Path(sweep_dir) / "sweep.json"
    if not path.is_file():
        return None
    data = _json_object(path)
    _check(path, data, SWEEP_SCHEMA)
    _check(path, data["definition"], DEFINITION_SCHEMA, prefix="definition.")
    return data["definition"]


HEARTBEAT_SCHEMA: dict[str, Check] = {
    "kind": TEXT, "state": (lambda v: v in STATES, f"one of {', '.join(STATES)}"),
    "started": NUMBER, "beat": NUMBER, "beat_s": (lambda v: _is_number(v) and v > 0, "a number > 0"),
    "last_trial": _optional(NUMBER), "total": INDEX, "written": INDEX, "failed": INDEX, "written_at_start": INDEX,
}


def read_heartbeat(directory: str | Path) -> dict[str, Any] | None:
    """A running sweep's or group's ``heartbeat.json`` (:mod:`simcore.base.heartbeat`), or None without one.

    Raises:
        DamagedFile: when the file exists but is damaged (a torn write cannot happen: it is
            replaced atomically).
    """
    path = Path(directory) / HEARTBEAT
    if not path.is_file():
        return None
    data = _json_object(path)
    _check(path, data, HEARTBEAT_SCHEMA)
    return data


RATE: Check = (lambda v: v is None or (_is_number(v) and 0 <= v <= 1), "a number from 0 to 1 or null")
CALIBRATION_SCHEMA: dict[str, Check] = {
    "monte_carlos": INDEX, "trials": INDEX, "written": STRING, "metrics": LIST,
}
CALIBRATION_ROW_SCHEMA: dict[str, Check] = {
    "metric": TEXT,
    "confounded": (lambda v: isinstance(v, bool), "true or false"),
    "reason": _optional(STRING),
    **{name: RATE for name in ("fp_rate", "fp_low", "fp_high", "power", "power_low", "power_high")},
}


def read_calibration(path: str | Path) -> dict[str, Any]:
    """A scenario's installed ``calibration.json`` (written by ``simcore.runs.calibration --install``).

    Raises:
        DamagedFile: when the file or one of its metric rows fails the schema, so a
            damaged calibration never silently drops the marks it carries.
    """
    path = Path(path)
    data = _json_object(path)
    _check(path, data, CALIBRATION_SCHEMA)
    for k, row in enumerate(data["metrics"]):
        if not isinstance(row, dict):
            raise DamagedFile(path, f"metrics[{k}]: must be an object")
        _check(path, row, CALIBRATION_ROW_SCHEMA, prefix=f"metrics[{k}].")
    return data


# -- mechanism comparisons (python -m scenarios.llm_auction compare) --------------------

COMPARISON_MANIFEST_SCHEMA: dict[str, Check] = {
    "scenario": TEXT, "run_id": TEXT, "seed": SEED, "config": OBJECT, "mechanisms": LIST, "trial_seeds": LIST,
}
COMPARISON_SCHEMA: dict[str, Check] = {"mechanisms": OBJECT, "pairs": LIST}


def read_comparison_manifest(compare_dir: str | Path) -> dict[str, Any]:
    """A mechanism comparison's ``manifest.json``.

    It describes the comparison (the command, mechanisms, trial seeds), not a run,
    so it has its own schema; since 2026-11 it records its files' hashes (``files``),
    and since 2026-11-27 its backend, models and the trials' cost (``backend``,
    ``models``, ``cost_usd``).

    Raises:
        DamagedFile: naming the file and what is wrong.
    """
    path = Path(compare_dir) / MANIFEST
    manifest = _json_object(path)
    _check(path, manifest, COMPARISON_MANIFEST_SCHEMA)
    _check(path, manifest, {"files": OBJECT, "backend": OBJECT, "models": LIST, "cost_usd": NUMBER}, required=False)
    for name, digest in manifest.get("files", {}).items():
        if name.startswith("/") or ".." in name.split("/"):
            raise DamagedFile(path, f"files: {name!r} is not a path inside the comparison directory")
        _check(path, {name: digest}, {name: HASH}, prefix="files.")
    return manifest


def read_comparison(compare_dir: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A mechanism comparison directory: its ``manifest.json`` and ``comparison.json``,
    the latter checked against the hash the manifest records (where it records one).

    Raises:
        DamagedFile: naming the file and what is wrong.
    """
    compare_dir = Path(compare_dir)
    manifest = read_comparison_manifest(compare_dir)
    _check_hash(compare_dir, manifest, "comparison.json")
    comparison = _json_object(compare_dir / "comparison.json")
    _check(compare_dir / "comparison.json", comparison, COMPARISON_SCHEMA)
    return manifest, comparison
