"""The persistent embedding cache: vectors on disk, shared by processes and later runs.

One SQLite file, ``<dir>/embeddings.sqlite``, holds a row per (model, device,
dtype, sha256 of the text); the model column also names the engine that ran it
(:func:`simcore.analysis.embeddings.cache_namespace`). Engine, device and dtype are part of
the key because their vectors differ in the last bits: a sweep never mixes them.

Concurrent writers are safe: the database runs in WAL mode (readers never block
the writer), every write is one ``INSERT OR IGNORE`` transaction (two processes
that encode the same text store it once, and a vector is never overwritten), and
a busy database is waited for, not failed on. That includes a new file opened by
several workers at once: switching it to WAL can be refused at once, without
SQLite's busy wait, and is then tried again (4 workers opening a new cache
together had 8 of 160 opens fail before).

Where it lives: ``--embed-cache DIR`` sets ``SIMCORE_EMBED_CACHE``, which pool
workers inherit; ``none`` turns the cache off. By default it is
``$XDG_CACHE_HOME/simcore`` (or ``~/.cache/simcore``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from backends.errors import DamagedFile

ENV = "SIMCORE_EMBED_CACHE"
OFF = "none"
FILE = "embeddings.sqlite"
COLUMNS = ("model", "device", "dtype", "sha256", "vec")
#: Seconds a process waits for a busy database before calling it unusable.
BUSY_S = 60


def cache_dir() -> Path | None:
    """The cache directory the environment names, or None when the cache is off."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() == OFF:
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "simcore"


class DiskCache:
    """Vectors by (model, device, dtype, text sha256) in one SQLite file.

    One connection per process (re-opened after a fork), used under a lock, so
    threads of one process share it.
    """

    def __init__(self, path: str | Path, dim: int) -> None:
        self.path = Path(path)
        self.dim = dim
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def damaged(self, problem: BaseException | str) -> DamagedFile:
        """The one-line error for a cache file SQLite cannot use, saying how to go on."""
        return DamagedFile(self.path, f"is not a usable embedding cache ({problem}); delete it, or give "
                                      "--embed-cache another directory or none")

    def check(self) -> None:
        """Raise :class:`DamagedFile` if the file exists but is not this cache (run before any work).

        This reads the header and the table's layout, not every page: damage deeper in
        the file is named the same way when a read meets it.
        """
        if not self.path.exists():
            return
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_S)
            try:
                columns = [row[1] for row in conn.execute("PRAGMA table_info(vectors)")]
            finally:
                conn.close()
        except (sqlite3.DatabaseError, OSError) as exc:
            raise self.damaged(exc) from None
        if columns and columns != list(COLUMNS):
            raise self.damaged(f"its vectors table has columns {', '.join(columns)}")

    def _db(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=BUSY_S, check_same_thread=False, isolation_level=None)
                _to_wal(conn)
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (model TEXT, device TEXT, dtype TEXT, sha256 TEXT, "
                    "vec BLOB NOT NULL, PRIMARY KEY (model, device, dtype, sha256)) WITHOUT ROWID"
                )
            except (sqlite3.DatabaseError, OSError) as exc:
                raise self.damaged(exc) from None
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def get_many(self, namespace: tuple[str, str, str], keys: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored vectors of ``keys`` (text sha256s); missing keys are left out."""
        keys = list(keys)
        found: dict[str, np.ndarray] = {}
        with self._lock:
            db = self._db()
            for start in range(0, len(keys), 500):  # under SQLite's limit on bound parameters
                chunk = keys[start : start + 500]
                try:
                    rows = db.execute(
                        "SELECT sha256, vec FROM vectors WHERE model=? AND device=? AND dtype=? "
                        f"AND sha256 IN ({','.join('?' * len(chunk))})", (*namespace, *chunk),
                    ).fetchall()
                except sqlite3.DatabaseError as exc:
                    raise self.damaged(exc) from None
                for key, blob in rows:
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if vec.shape == (self.dim,):  # a row of another width is not ours: encode again
                        found[key] = vec
        return found

    def put_many(self, namespace: tuple[str, str, str], vectors: Mapping[str, np.ndarray]) -> None:
        """Store ``vectors`` by text sha256; rows already there are kept as they are."""
        rows = [(*namespace, k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in vectors.items()]
        if not rows:
            return
        with self._lock:
            db = self._db()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?, ?, ?)", rows)
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                raise self.damaged(exc) from None

    def count(self) -> int:
        """Number of stored vectors (all namespaces)."""
        with self._lock:
            return self._db().execute("SELECT COUNT(*) FROM vectors").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


def _to_wal(conn: sqlite3.Connection) -> None:
    """Put the database in WAL mode, waiting while another process holds the lock the switch needs.

    SQLite answers "database is locked" at once here, without its busy wait, while
    another connection opens or switches the same new file (the mode, once set,
    stays in the file, so later opens find it set and need no lock).
    """
    deadline = time.monotonic() + BUSY_S
    pause = 0.005
    while True:
        try:
            # A refused switch may also come back as the old mode; past the deadline the
            # cache works on in that mode, with writers waiting for readers.
            if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() == "wal" \
                    or time.monotonic() > deadline:
                return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.25)
