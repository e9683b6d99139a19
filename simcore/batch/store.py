"""The sweep directory: its definition, its ledger of finished trials, resuming.

Layout::

    <sweep dir>/
        sweep.json          the definition (scenario, grid, conditions, seed, ...)
                            and the backend options of the first pass
        ledger.jsonl        one line per attempt of a trial, appended and fsynced (once for
                            the trials that finish together)
        <scenario>/<run-id>/  one run directory per trial (simcore.runs.runner.write_run)
        failed/<run-id>-<n>/  run directories of failed attempts that were run again
        results.csv, results.parquet, summary.json, summary.csv, plots/

A trial's attempt is over once its run directory exists: ``write_run`` assembles
it in a hidden ``.<run-id>.*.tmp`` directory and renames it into place. Its
ledger line (with its attempt number) is appended only after that. The ledger
keeps every attempt; a trial's last line is its state.

On resume, torn ledger lines and staging directories left by a crash are removed,
run directories that lack a ledger line (a crash between the rename and the
append) are read back, and the trials whose last attempt failed (unless
``keep_failed``) or that have no run directory run again. A trial that finished
"ok" is never run again. Every ledger line and run directory is read through
:mod:`simcore.base.files`: a run directory that fails its check (a trace that is not
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
from typing import Any, Iterator, TextIO

from backends.base import canonical_json
from backends.registry import RUN_OPTIONS
from simcore.base.config import ConfigError
from simcore.base.files import (
    DamagedFile,
    read_ledger_line,
    read_record,
    read_sweep_definition,
)
from simcore.base.records import (
    atomic_write,
    code_revision,
    package_versions,
    utc_now,
    write_json,
)
from simcore.batch.plan import SweepPlan
from simcore.batch.worker import outcome_from_run_dir

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


def read_backend_options(path: str | Path) -> dict[str, Any]:
    """The backend run options (limits, timeouts, retries ...) stored with the sweep in ``path``."""
    file = Path(path) / SWEEP_FILE
    return dict(read_record(file).get("backend_options") or {}) if file.is_file() else {}


def finished_summary(path: str | Path, plan: SweepPlan) -> dict[str, Any] | None:
    """The summary of the finished sweep of ``plan`` in ``path``, or None.

    Finished: the directory holds this very sweep (the same definition), no trial
    is pending, and its tables were written after the ledger's last line (the
    summary counts every attempt the ledger holds), so they show every trial.
    """
    path = Path(path)
    summary_file = path / "summary.json"
    try:
        stored = read_definition(path) if path.is_dir() else None
        if stored is None or not summary_file.is_file() or not (path / "results.parquet").is_file():
            return None
        if stored != json.loads(canonical_json(plan.definition())):
            return None
        summary = read_record(summary_file)
    except DamagedFile:
        return None  # --resume reads it, names what is damaged and writes the tables again
    ledger = path / LEDGER
    lines = ledger.read_text(encoding="utf-8", errors="replace").splitlines() if ledger.is_file() else []
    if summary.get("n_pending") or summary.get("attempts") != len(lines):
        return None
    return summary


class SweepStore:
    """Owns a sweep directory while a sweep runs in it (holds an exclusive lock).

    Args:
        path: The sweep directory.
        plan: The sweep's plan.
        resume: Whether an existing sweep in ``path`` may be continued.
        keep_failed: On resume, keep failed trials as they are instead of running them again.

    Attributes:
        finished: The last attempt of each trial that will not run again, by plan index.
        rerun: Plan indices of failed trials that will run again.
        attempts: How many attempts the ledger holds, by plan index.
        spent_usd: The cost of every attempt in the ledger.

    Raises:
        ConfigError: when ``path`` holds something else, or another process holds it.
    """

    def __init__(self, path: str | Path, plan: SweepPlan, resume: bool, keep_failed: bool = False) -> None:
        self.path = Path(path).resolve()
        self.plan = plan
        self.resume = resume
        self.keep_failed = keep_failed
        self.notes: list[str] = []
        self.finished: dict[int, dict[str, Any]] = {}
        self.rerun: list[int] = []
        self.attempts: dict[int, int] = {}
        self.spent_usd = 0.0
        self._ledger: TextIO | None = None
        self._lock: TextIO | None = None
        self._deferred: int | None = None  # lines written since a batch began, unsynced

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
        mine = json.loads(canonical_json(self.plan.definition()))
        if not self.resume:
            if stored != mine:
                raise ConfigError(f"out: {self.path} already holds another sweep; choose another --out, "
                                  "or pass --resume to finish that one")
            raise ConfigError(f"out: {self.path} already holds this sweep, unfinished; pass --resume to finish it")
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
                    "backend_options": {k: v for k, v in self.plan.spec.options.items() if k in RUN_OPTIONS},
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
        ledger = self.path / LEDGER
        lines = ledger.read_text(encoding="utf-8", errors="replace").splitlines() if ledger.is_file() else []
        history: list[dict[str, Any]] = []
        last: dict[int, dict[str, Any]] = {}
        for n, line in enumerate(lines, 1):
            try:
                row = read_ledger_line(line, f"{ledger}:{n}")
                job = jobs[row["index"]]
                valid = row["run_id"] == job.run_id and row["seed"] == job.seed
            except (DamagedFile, IndexError):
                valid = False
            if valid:  # else a torn last line, or a line that is not this sweep's
                history.append(row)
                last[row["index"]] = row
        dropped = len(lines) - len(history)
        rewrite = dropped > 0
        if dropped:
            self.notes.append(f"dropped {dropped} damaged or foreign ledger line(s)")
        recovered: list[dict[str, Any]] = []
        for index, row in sorted(last.items()):
            run_dir = row.get("run_dir")
            if run_dir and not (self.path / run_dir).is_dir():
                continue  # its run directory was removed (or set aside): run it again
            if row["status"] != "ok" and run_dir and _newer_run(self.path / run_dir, row):
                continue  # a re-run finished but lost its ledger line: read back below
            if run_dir:
                try:
                    checked = outcome_from_run_dir(jobs[index], self.path / run_dir)
                    if row.get("trace_sha256") not in (None, checked["trace_sha256"]):
                        raise DamagedFile(self.path / run_dir, "its trace is not the one its ledger line records")
                except DamagedFile as exc:
                    self._set_aside(self.path / run_dir, index, exc)
                    continue
            self.finished[index] = row
        if runs.is_dir():
            for entry in sorted(runs.iterdir()):
                job = by_run_id.get(entry.name)
                if job is None or job.index in self.finished or not entry.is_dir():
                    continue
                try:
                    row = outcome_from_run_dir(job, entry)
                except DamagedFile as exc:
                    self._set_aside(entry, job.index, exc)
                    continue
                row["attempt"] = sum(1 for r in history if r["index"] == job.index) + 1
                self.finished[job.index] = row
                recovered.append(row)
        if recovered:
            self.notes.append(f"recovered {len(recovered)} finished trial(s) that had no ledger line")
        history += recovered
        if rewrite or recovered:
            atomic_write(ledger, "".join(_line(r) for r in history))
        for row in history:
            self.attempts[row["index"]] = self.attempts.get(row["index"], 0) + 1
            self.spent_usd += float(row.get("cost_usd") or 0.0)
        if not self.keep_failed:
            self.rerun = sorted(i for i, r in self.finished.items() if r["status"] != "ok")
            for index in self.rerun:
                del self.finished[index]

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
    def append(self, row: dict[str, Any]) -> dict[str, Any]:
        """Record a finished attempt durably (after its run directory exists); return its row.

        The row gets its attempt number: 1 for a trial's first attempt.
        """
        assert self._ledger is not None, "store is not open"
        index = row["index"]
        self.attempts[index] = self.attempts.get(index, 0) + 1
        row = {**row, "attempt": self.attempts[index]}
        self._ledger.write(_line(row))
        if self._deferred is None:
            self._sync()
        else:
            self._deferred += 1
        self.finished[index] = row
        self.spent_usd += float(row.get("cost_usd") or 0.0)
        return row

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Append the rows of trials that finished together with one fsync at the end.

        A crash inside the batch loses at most those lines; their run directories
        exist, and resume reads them back (see the module doc).
        """
        self._deferred = 0
        try:
            yield
        finally:
            n, self._deferred = self._deferred, None
            if n and self._ledger is not None:
                self._sync()

    def _sync(self) -> None:
        assert self._ledger is not None, "store is not open"
        self._ledger.flush()
        os.fsync(self._ledger.fileno())

    def close(self) -> None:
        """Close the ledger and release the lock."""
        for fh in (self._ledger, self._lock):
            if fh is not None:
                with contextlib.suppress(OSError):
                    fh.close()
        self._ledger = self._lock = None


def _line(row: dict[str, Any]) -> str:
    return canonical_json(row) + "\n"


def _newer_run(run_dir: Path, row: dict[str, Any]) -> bool:
    """Whether ``run_dir`` holds another attempt than the failed one ``row`` records."""
    try:
        results = read_record(run_dir / "results.json")
    except DamagedFile:
        return False
    return results.get("status") == "ok" or results.get("trace_sha256") != row.get("trace_sha256")
