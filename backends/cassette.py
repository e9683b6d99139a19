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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from backends.base import LLMRequest, LLMResponse, Usage

MODES = ("auto", "record", "replay")
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
        "usage": None if res.usage is None else [res.usage.prompt_tokens, res.usage.completion_tokens],
        "finish_reason": res.finish_reason,
        "model": res.model,
        "system_fingerprint": res.system_fingerprint,
        "latency_s": res.latency_s,
    }
    return _entry(scope, occurrence, request, "response", body)


def error_entry(scope: str, occurrence: int, request: LLMRequest, exc: BaseException) -> Entry:
    """An entry for a call that failed for good."""
    body = {"type": type(exc).__name__, "message": str(exc)}
    return _entry(scope, occurrence, request, "error", body)


def _entry(scope: str, occurrence: int, request: LLMRequest, kind: str, body: dict[str, Any]) -> Entry:
    # Only entries that are written need the canonical JSON (replay hits never do).
    return Entry(scope, request.digest(), occurrence, request.model, request.canonical(), kind, body)


class Cassette:
    """A SQLite cassette file.

    Args:
        path: The file; created (with its directory) unless ``readonly``.
        readonly: Open for lookups only.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        if readonly:
            if not self.path.is_file():
                raise FileNotFoundError(f"cassette: {str(self.path)!r} does not exist")
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path)
            self._db.execute("PRAGMA journal_mode=WAL")
            # Each response is committed as it arrives; in WAL mode NORMAL keeps that
            # safe against a crashed or killed run without an fsync per call.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
            self._db.commit()
        self.readonly = readonly

    def get(self, scope: str | None, digest: str, occurrence: int) -> Entry | None:
        """The entry for a key; ``scope=None`` matches any scope (single-trial cassettes)."""
        if scope is None:
            row = self._db.execute(
                "SELECT * FROM entries WHERE digest=? AND occurrence=? ORDER BY scope LIMIT 1",
                (digest, occurrence),
            ).fetchone()
        else:
            row = self._db.execute(
                "SELECT * FROM entries WHERE scope=? AND digest=? AND occurrence=?", (scope, digest, occurrence)
            ).fetchone()
        if row is None:
            return None
        return Entry(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6]))

    def put(self, entry: Entry) -> None:
        """Insert or replace one entry, durably."""
        self.put_many([entry])

    def put_many(self, entries: Iterable[Entry]) -> None:
        """Insert or replace entries in one transaction."""
        rows = [
            (e.scope, e.digest, e.occurrence, e.model, e.request, e.kind,
             json.dumps(e.body, ensure_ascii=False, sort_keys=True))
            for e in entries
        ]
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def entries(self) -> list[Entry]:
        """All entries, in key order."""
        rows = self._db.execute("SELECT * FROM entries ORDER BY scope, digest, occurrence").fetchall()
        return [Entry(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6])) for r in rows]

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        """Close the database (checkpointing the WAL into the main file)."""
        if not self.readonly:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()


def write_cassette(path: str | Path, entries: Iterable[Entry]) -> None:
    """Write ``entries`` to a new single-file cassette at ``path`` (no WAL left behind)."""
    path = Path(path)
    db = sqlite3.connect(path)
    try:
        db.executescript(_SCHEMA)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
        db.executemany(
            "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(e.scope, e.digest, e.occurrence, e.model, e.request, e.kind,
              json.dumps(e.body, ensure_ascii=False, sort_keys=True)) for e in entries],
        )
        db.commit()
    finally:
        db.close()
