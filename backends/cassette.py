"""Cassettes: every response of a run, in SQLite, for exact offline replay.

An entry is keyed by (scope, request digest, occurrence): the scope names the
trial (so one cassette can serve a whole sweep whose trials run interleaved on one
loop), the digest is :meth:`LLMRequest.digest`, and the occurrence counts identical
requests within the trial in creation order, which the kernel makes
deterministic. An entry holds the canonical request, and either the response
(text, usage, finish reason, model, fingerprint, latency) or the error the call
ended in, so a failed trial replays to the same error.

A cassette never holds a key or a header: requests are stored in their canonical
form, which has none, and responses as parsed fields.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from backends.base import LLMRequest, LLMResponse, Usage
from backends.errors import DamagedFile

# resume: as auto, the file read-only (a failed run's own cassette answers what it recorded).
MODES = ("auto", "record", "replay", "resume")
FORMAT = "simcore-cassette-1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    scope TEXT NOT NULL,
    digest TEXT NOT NULL,
    occurrence INTEGER NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('response', 'error')),
    body TEXT NOT NULL,
    PRIMARY KEY (scope, digest, occurrence)
);
"""


@dataclass(frozen=True)
class Entry:
    """One recorded call.

    Attributes:
        scope: The trial it belongs to.
        digest: The request's sha256 (:meth:`LLMRequest.digest`).
        occurrence: 0 for the first identical request in the trial, 1 for the next...
        model: The request's model string.
        request: The canonical request JSON.
        kind: "response" or "error".
        body: The response fields, or {"type", "message"} of the error.
    """

    scope: str
    digest: str
    occurrence: int
    model: str
    request: str
    kind: str
    body: dict[str, Any]

    def response(self) -> LLMResponse:
        """The recorded response (kind "response" only)."""
        b = self.body
        usage = None if b.get("usage") is None else Usage(*b["usage"])
        return LLMResponse(b["text"], usage, b["finish_reason"], b.get("model", ""),
                           b.get("system_fingerprint"), float(b.get("latency_s", 0.0)))


def response_entry(scope: str, occurrence: int, request: LLMRequest, res: LLMResponse) -> Entry:
    """An entry for a response."""
    body = {
        "text": res.text,
        "usage": _usage_row(res.usage),
        "finish_reason": res.finish_reason,
        "model": res.model,
        "system_fingerprint": res.system_fingerprint,
        "latency_s": res.latency_s,
    }
    return _entry(scope, occurrence, request, "response", body)


def _usage_row(usage: Usage | None) -> list[int] | None:
    """Usage as recorded: [prompt, completion], with [reasoning, cached] after them when either is nonzero."""
    if usage is None:
        return None
    return list(usage) if usage.reasoning_tokens or usage.cached_tokens else list(usage[:2])


def error_entry(scope: str, occurrence: int, request: LLMRequest, exc: BaseException) -> Entry:
    """An entry for a call that failed for good."""
    body = {"type": type(exc).__name__, "message": str(exc)}
    return _entry(scope, occurrence, request, "error", body)


def _entry(scope: str, occurrence: int, request: LLMRequest, kind: str, body: dict[str, Any]) -> Entry:
    # Only entries that are written need the canonical JSON (replay hits never do).
    return Entry(scope, request.digest(), occurrence, request.model, request.canonical(), kind, body)

# Writers open on each file in this process. Trials that run side by side (a comparison's arms on
# one loop) each open the run's cassette; a file goes back to one plain file only when the last
# of them closes, since SQLite leaves WAL mode only on a connection that is the file's only one.
_WRITERS: Counter[Path] = Counter()
_CREATED: set[Path] = set()
_WRITERS_LOCK = threading.Lock()


class Cassette:
    """A SQLite cassette file.

    The file is checked before anything else touches it (:func:`check_cassette`),
    so a damaged file, or one that is not a cassette, is reported and left as it
    was. Read-only cassettes are opened with SQLite's ``mode=ro``. A file this
    class creates runs in WAL mode while it records and is put back to a plain
    single file when closed; an existing file keeps its own journal mode.

    Args:
        path: The file; created (with its directory) unless ``readonly``.
        readonly: Open for lookups only.

    Raises:
        FileNotFoundError: when ``readonly`` and the file does not exist.
        DamagedFile: when the file exists and fails the check.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._created = False
        if readonly:
            if not self.path.is_file():
                raise FileNotFoundError(f"cassette: {str(self.path)!r} does not exist")
            check_cassette(self.path)
            self._db = _connect_readonly(self.path)
            return
        if self.path.exists():
            check_cassette(self.path)  # read-only probe: a foreign file is never written to
            self._db = sqlite3.connect(self.path)
            wal = self._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path)
            self._created = wal = True
            self._db.execute("PRAGMA journal_mode=WAL")
        self._key = self.path.resolve()
        with _WRITERS_LOCK:
            _WRITERS[self._key] += 1
            if self._created:
                _CREATED.add(self._key)
        if wal:
            # Each response is committed as it arrives; in WAL mode NORMAL keeps that
            # safe against a crashed or killed run without an fsync per call.
            self._db.execute("PRAGMA synchronous=NORMAL")
        if self._created:
            self._db.executescript(_SCHEMA)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
            self._db.commit()

    def get(self, scope: str | None, digest: str, occurrence: int) -> Entry | None:
        """The entry for a key; ``scope=None`` matches any scope (single-trial cassettes).

        Raises:
            DamagedFile: when the stored row cannot be read.
        """
        try:
            if scope is None:
                row = self._db.execute(
                    "SELECT * FROM entries WHERE digest=? AND occurrence=? ORDER BY scope LIMIT 1",
                    (digest, occurrence),
                ).fetchone()
            else:
                row = self._db.execute(
                    "SELECT * FROM entries WHERE scope=? AND digest=? AND occurrence=?",
                    (scope, digest, occurrence),
                ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise DamagedFile(self.path, f"not a readable cassette ({exc})") from None
        return None if row is None else _entry_from_row(self.path, row)

    def put(self, entry: Entry) -> None:
        """Insert or replace one entry, durably."""
        self.put_many([entry])

    def put_many(self, entries: Iterable[Entry]) -> None:
        """Insert or replace entries in one transaction."""
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)", _rows(entries))

    def entries(self) -> list[Entry]:
        """All entries, in key order.

        Raises:
            DamagedFile: when a stored row cannot be read.
        """
        try:
            rows = self._db.execute("SELECT * FROM entries ORDER BY scope, digest, occurrence").fetchall()
        except sqlite3.DatabaseError as exc:
            raise DamagedFile(self.path, f"not a readable cassette ({exc})") from None
        return [_entry_from_row(self.path, r) for r in rows]

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        """Close the database; a file created in this process is left as one plain file by the
        last of its writers here to close."""
        if not self.readonly:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            with _WRITERS_LOCK:
                _WRITERS[self._key] -= 1
                plain = _WRITERS[self._key] <= 0 and self._key in _CREATED
                if _WRITERS[self._key] <= 0:
                    del _WRITERS[self._key]
                    _CREATED.discard(self._key)
            if plain:
                try:
                    self._db.execute("PRAGMA journal_mode=DELETE")
                except sqlite3.OperationalError:
                    # Another process has the file open: it stays in WAL mode, which SQLite
                    # reads as well; every entry is already in the main file (checkpointed).
                    pass
        self._db.close()


SQLITE_MAGIC = b"SQLite format 3\x00"
_COLUMNS = {
    "meta": ("key", "value"),
    "entries": ("scope", "digest", "occurrence", "model", "request", "kind", "body"),
}


def check_cassette(path: str | Path, *, deep: bool = False) -> None:
    """Check that ``path`` is a readable simcore cassette, without modifying it.

    Checks the SQLite header, the database's own consistency (``PRAGMA
    quick_check``), the tables and columns, and the format stamp; with ``deep``,
    every entry as well.

    Raises:
        DamagedFile: naming the file and what is wrong.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise DamagedFile(path, f"cannot be read ({exc.strerror or exc})") from None
    if not head:
        raise DamagedFile(path, "is empty, not a simcore cassette")
    if head != SQLITE_MAGIC:
        raise DamagedFile(path, "is not an SQLite database, so not a simcore cassette")
    try:
        db = _connect_readonly(path)
    except sqlite3.Error as exc:
        raise DamagedFile(path, f"cannot be opened ({exc})") from None
    try:
        problems = [r[0] for r in db.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise DamagedFile(path, f"is damaged (SQLite: {problems[0]})")
        for table, columns in _COLUMNS.items():
            found = tuple(r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall())
            if found != columns:
                what = "has no table" if not found else f"has the wrong columns {list(found)} in table"
                raise DamagedFile(path, f"is not a simcore cassette: {what} {table!r}")
        row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        if row is None or row[0] != FORMAT:
            got = "no format stamp" if row is None else f"format {row[0]!r}"
            raise DamagedFile(path, f"is not a simcore cassette: {got}, expected {FORMAT!r}")
        if deep:
            for r in db.execute("SELECT * FROM entries"):
                _entry_from_row(path, r)
    except sqlite3.DatabaseError as exc:
        raise DamagedFile(path, f"is damaged (SQLite: {exc})") from None
    finally:
        db.close()


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only, leaving no side files next to it.

    A read-only connection to a WAL-mode file would create ``-wal`` and ``-shm``
    files; when there is no pending write-ahead log, ``immutable=1`` reads the
    file as it is instead.
    """
    uri = path.resolve().as_uri() + "?mode=ro"
    with open(path, "rb") as fh:
        header = fh.read(20)
    wal_log = path.with_name(path.name + "-wal")
    if header[18:19] == b"\x02" and not (wal_log.is_file() and wal_log.stat().st_size):
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _entry_from_row(path: Path, row: Sequence[Any]) -> Entry:
    """An entry from a stored row, checked field by field."""
    key = f"entry ({row[0]!r}, {str(row[1])[:16]}, {row[2]!r})"
    try:
        body = json.loads(row[6])
    except (TypeError, ValueError, RecursionError):
        raise DamagedFile(path, f"{key}: body is not JSON") from None
    problem = None
    if not (isinstance(row[0], str) and isinstance(row[1], str) and isinstance(row[2], int)
            and isinstance(row[3], str) and isinstance(row[4], str)):
        problem = "key, model or request has the wrong type"
    elif row[5] not in ("response", "error") or not isinstance(body, dict):
        problem = "kind must be 'response' or 'error' with an object body"
    elif row[5] == "response":
        usage, latency = body.get("usage"), body.get("latency_s", 0.0)
        if not isinstance(body.get("text"), str) or "finish_reason" not in body or not (
            usage is None or (isinstance(usage, list) and len(usage) in (2, 4)
                              and all(isinstance(u, int) and not isinstance(u, bool) for u in usage))
        ) or isinstance(latency, bool) or not isinstance(latency, (int, float)):
            problem = ("a response needs text (a string), finish_reason, usage (two integers, or four with "
                       "reasoning and cached tokens, or null)")
    elif not (isinstance(body.get("type"), str) and isinstance(body.get("message"), str)):
        problem = "an error needs type and message (strings)"
    if problem:
        raise DamagedFile(path, f"{key}: {problem}")
    return Entry(row[0], row[1], row[2], row[3], row[4], row[5], body)


def _rows(entries: Iterable[Entry]) -> list[tuple[Any, ...]]:
    return [
        (e.scope, e.digest, e.occurrence, e.model, e.request, e.kind,
         json.dumps(e.body, ensure_ascii=False, sort_keys=True))
        for e in entries
    ]


def write_cassette(path: str | Path, entries: Iterable[Entry]) -> None:
    """Write ``entries`` to a new single-file cassette at ``path`` (no WAL left behind)."""
    path = Path(path)
    db = sqlite3.connect(path)
    try:
        db.executescript(_SCHEMA)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
        db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)", _rows(entries))
        db.commit()
    finally:
        db.close()
