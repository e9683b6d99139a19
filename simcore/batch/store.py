"""The sweep directory: its definition, its ledger of finished trials, resuming.

Layout::

    <sweep dir>/
        sweep.json          the definition (scenario, grid, conditions, seed, ...)
        ledger.jsonl        one line per finished trial, appended and fsynced
        <scenario>/<run-id>/  one run directory per trial (simcore.runner.write_run)
        results.csv, results.parquet, summary.json, summary.csv, plots/

A trial is finished once its run directory exists: ``write_run`` assembles it in a
hidden ``.<run-id>.*.tmp`` directory and renames it into place. Its ledger line is
appended only after that. On resume, torn ledger lines and staging directories
left by a crash are removed, run directories that lack a ledger line (a crash
between the rename and the append) are read back, and only the trials with no
run directory run again. Every ledger line and run directory is read through
:mod:`simcore.readers`: a run directory that fails its check (a trace that is not
the one its manifest records, a damaged results.json ...) is moved to
``damaged/`` and its trial runs again, with a note saying so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any, TextIO

from backends.base import canonical_json
from simcore.batch.plan import SweepPlan
from simcore.batch.worker import outcome_from_run_dir
from simcore.config import ConfigError
from simcore.readers import DamagedFile, read_ledger_line, read_sweep_definition
from simcore.records import (
    atomic_write,
    code_revision,
    package_versions,
    utc_now,
    write_json,
)

SWEEP_FILE = "sweep.json"
LEDGER = "ledger.jsonl"
LOCK = ".lock"
DAMAGED = "damaged"


def read_definition(path: str | Path) -> dict[str, Any] | None:
    """The stored definition of the sweep in ``path``, or None if there is none.

    Raises:
        DamagedFile: when its ``sweep.json`` is damaged.
    """
    return read_sweep_definition(path)


class SweepStore:
    """Owns a sweep directory while a sweep runs in it (holds an exclusive lock).

    Args:
        path: The sweep directory.
        plan: The sweep's plan.
        resume: Whether an existing sweep in ``path`` may be continued.

    Raises:
        ConfigError: when ``path`` holds something else, or another process holds it.
    """

    def __init__(self, path: str | Path, plan: SweepPlan, resume: bool) -> None:
        self.path = Path(path).resolve()
        self.plan = plan
        self.resume = resume
        self.notes: list[str] = []
        self.finished: dict[int, dict[str, Any]] = {}
        self._ledger: TextIO | None = None
        self._lock: TextIO | None = None

    # -- opening ------------------------------------------------------------
    def check(self) -> None:
        """Check that the sweep may use the directory; writes nothing."""
        stored = read_definition(self.path) if self.path.is_dir() else None
        if stored is None:
            if self.resume:
                raise ConfigError(f"resume: {self.path} holds no sweep to resume (no {SWEEP_FILE})")
            if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
                raise ConfigError(f"out: {self.path} exists and is not empty; choose another --out")
            return
        if not self.resume:
            raise ConfigError(f"out: {self.path} already holds a sweep; pass --resume to finish it")
        mine = json.loads(canonical_json(self.plan.definition()))
        for key in sorted(set(mine) | set(stored)):
            if mine.get(key) != stored.get(key):
                raise ConfigError(
                    f"resume: {key} differs from the sweep in {self.path} "
                    f"(stored {json.dumps(stored.get(key))}, given {json.dumps(mine.get(key))})"
                )

    def open(self) -> dict[int, dict[str, Any]]:
        """Lock the directory, create or recover the sweep; return finished outcomes by index."""
        self.check()
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path / LOCK, "w")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise ConfigError(f"out: {self.path} is in use by another sweep process") from None
        if not (self.path / SWEEP_FILE).is_file():
            write_json(
                self.path / SWEEP_FILE,
                {
                    "sweep_id": self.plan.sweep_id,
                    "definition": self.plan.definition(),
                    "n_trials": len(self.plan.jobs),
                    "created_utc": utc_now(),
                    "versions": package_versions(),
                    "code_revision": code_revision(),
                },
            )
        else:
            self._recover()
        self._ledger = open(self.path / LEDGER, "a", encoding="utf-8")
        return self.finished

    def _recover(self) -> None:
        runs = self.path / self.plan.scenario.name
        removed = 0
        for parent in (self.path, runs):
            if not parent.is_dir():
                continue
            for entry in parent.iterdir():
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    if entry.is_dir():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink(missing_ok=True)
                    removed += 1
        if removed:
            self.notes.append(f"removed {removed} half-written staging file(s)")
        jobs = self.plan.jobs
        by_run_id = {job.run_id: job for job in jobs}
        rewrite = False
        ledger = self.path / LEDGER
        lines = ledger.read_text(encoding="utf-8", errors="replace").splitlines() if ledger.is_file() else []
        dropped = 0
        for n, line in enumerate(lines, 1):
            try:
                row = read_ledger_line(line, f"{ledger}:{n}")
                job = jobs[row["index"]]
                valid = row["run_id"] == job.run_id and row["seed"] == job.seed
            except (DamagedFile, IndexError):
                valid = False
            if not valid or row["index"] in self.finished:
                rewrite = True  # a torn last line, or a line that is not this sweep's
                dropped += not valid
                continue
            if row.get("run_dir"):
                run_dir = self.path / row["run_dir"]
                if not run_dir.is_dir():
                    rewrite = True  # its run directory was removed: run it again
                    continue
                try:
                    checked = outcome_from_run_dir(job, run_dir)
                    if row.get("trace_sha256") not in (None, checked["trace_sha256"]):
                        raise DamagedFile(run_dir, "its trace is not the one its ledger line records")
                except DamagedFile as exc:
                    self._set_aside(run_dir, job.index, exc)
                    rewrite = True
                    continue
            self.finished[row["index"]] = row
        if dropped:
            self.notes.append(f"dropped {dropped} damaged or foreign ledger line(s)")
        recovered = 0
        if runs.is_dir():
            for entry in sorted(runs.iterdir()):
                job = by_run_id.get(entry.name)
                if job is None or job.index in self.finished or not entry.is_dir():
                    continue
                try:
                    self.finished[job.index] = outcome_from_run_dir(job, entry)
                except DamagedFile as exc:
                    self._set_aside(entry, job.index, exc)
                    continue
                recovered += 1
        if recovered:
            self.notes.append(f"recovered {recovered} finished trial(s) that had no ledger line")
        if rewrite or recovered:
            body = "".join(_line(self.finished[i]) for i in sorted(self.finished))
            atomic_write(ledger, body)

    def _set_aside(self, run_dir: Path, index: int, exc: DamagedFile) -> None:
        """Move a run directory that failed its check to ``damaged/`` so the trial runs again."""
        dest = self.path / DAMAGED / run_dir.name
        n = 1
        while dest.exists():
            n += 1
            dest = self.path / DAMAGED / f"{run_dir.name}.{n}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(run_dir, dest)
        self.notes.append(f"trial {index} is damaged ({exc}); moved it to {dest.relative_to(self.path)} "
                          "and will run it again")

    # -- while running ------------------------------------------------------
    def append(self, row: dict[str, Any]) -> None:
        """Record a finished trial durably (after its run directory exists)."""
        assert self._ledger is not None, "store is not open"
        self._ledger.write(_line(row))
        self._ledger.flush()
        os.fsync(self._ledger.fileno())
        self.finished[row["index"]] = row

    def close(self) -> None:
        """Close the ledger and release the lock."""
        for fh in (self._ledger, self._lock):
            if fh is not None:
                with contextlib.suppress(OSError):
                    fh.close()
        self._ledger = self._lock = None


def _line(row: dict[str, Any]) -> str:
    return canonical_json(row) + "\n"
