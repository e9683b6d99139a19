"""The pulse of a running sweep or Monte Carlo: ``heartbeat.json`` in its directory.

A sweep (``simcore.batch``) and a Monte Carlo or counterfactual group
(``simcore.runs.counterfactual``) keep a :class:`Heartbeat` while they run. It
rewrites ``heartbeat.json`` atomically when a trial is written (at most once a
second) and at least every ``beat_s`` seconds (10) from a background thread,
so that a trial that takes minutes does not make a live process look dead; at
the end it records how the process ended (finished, interrupted or failed).
A process killed outright records nothing more, and its heartbeat ages.

:func:`pulse` reads one for people (the run browser): trials written of the
total, this pass's rate and the time left at that rate, and whether the process
still beats. It is *stopped* when its last write is older than it should be: the
writes come every ``beat_s`` seconds or, when trials land faster, as often as they
land (the observed time between trials), so a heartbeat is stale once it is
:data:`SLACK` times that interval old, and never sooner than :data:`FLOOR_S`
seconds (a loaded machine may delay a write). With the defaults a killed sweep
shows as stopped 30 seconds after its last write.

The times are the wall clock's (seconds since the epoch): a heartbeat is about
the process, not the simulation, and nothing of it reaches a trace.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from simcore.base.records import atomic_write

HEARTBEAT = "heartbeat.json"
#: Seconds between writes while nothing lands.
BEAT_S = 10.0
#: A heartbeat is never called stale sooner than this many seconds after its last write.
FLOOR_S = 30.0
#: How many write intervals a heartbeat may miss before it is called stale.
SLACK = 3.0
#: Trials landing faster than this (seconds apart) share one write.
MIN_GAP_S = 1.0
#: What a heartbeat's ``state`` may be; ``stopped`` is what :func:`pulse` calls a running one gone quiet.
STATES = ("running", "finished", "interrupted", "failed")


class Heartbeat:
    """Writes ``heartbeat.json`` in ``directory`` while a sweep or a group runs.

    Args:
        directory: The sweep's or group's directory (created if missing).
        kind: ``sweep``, ``monte_carlo`` or ``counterfactual``.
        total: Trials planned.
        written: Trials already written before this process started (a resumed sweep).
        failed: Of those, how many failed.
        about: Fields that say what runs (scenario, seed ...), kept as they are.
        clock: The wall clock (seconds since the epoch); tests pass their own.
        every_s: Seconds between writes while no trial lands.
        background: Beat from a background thread (off: only :meth:`trial` and
            :meth:`close` write, for tests that drive the clock).
    """

    def __init__(self, directory: str | Path, kind: str, total: int, written: int = 0, failed: int = 0, *,
                 about: Mapping[str, Any] | None = None, clock: Callable[[], float] = time.time,
                 every_s: float = BEAT_S, background: bool = True) -> None:
        self.path = Path(directory) / HEARTBEAT
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self.record: dict[str, Any] = {
            **dict(about or {}), "kind": kind, "state": "running", "pid": os.getpid(),
            "started": now, "beat": now, "beat_s": every_s, "last_trial": None,
            "total": total, "written": written, "failed": failed, "written_at_start": written,
        }
        self._written_at = 0.0
        self._write(now)
        self._stop = threading.Event()
        self._thread = None
        if background:
            self._thread = threading.Thread(target=self._beat, args=(every_s,), name="simcore-heartbeat",
                                            daemon=True)
            self._thread.start()

    def trial(self, ok: bool = True) -> None:
        """Count a trial written; the file follows at most once a second (and at every beat)."""
        with self._lock:
            now = self._clock()
            self.record["written"] += 1
            self.record["failed"] += not ok
            self.record["last_trial"] = now
            if now - self._written_at >= MIN_GAP_S:
                self._write(now)

    def close(self, state: str) -> None:
        """Stop beating and record how the process ended (one of :data:`STATES` but running)."""
        if state not in STATES[1:]:
            raise ValueError(f"state: must be one of {', '.join(STATES[1:])}; got {state!r}")
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            self.record["state"] = state
            self._write(self._clock())

    def __enter__(self) -> "Heartbeat":
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """Close as finished, interrupted (Ctrl-C, a cancel: not an error) or failed (an error)."""
        self.close("finished" if kind is None else "failed" if issubclass(kind, Exception) else "interrupted")

    def _beat(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            with self._lock:
                if not self._stop.is_set():
                    self._write(self._clock())

    def _write(self, now: float) -> None:
        self.record["beat"] = now
        self._written_at = now
        try:
            atomic_write(self.path, json.dumps(self.record, indent=1, sort_keys=True) + "\n")
        except OSError:
            pass  # a full disk must not stop the trials; the heartbeat then ages and says so


@dataclass(frozen=True)
class Pulse:
    """A heartbeat read for people at time ``now`` (see :func:`pulse`).

    Attributes:
        state: ``running``, ``stopped`` (running, but its last write is stale),
            ``finished``, ``interrupted`` or ``failed``.
        written, total, failed: Trials written (of them failed) of those planned.
        rate_per_s: Trials written per second in this pass (None before the first).
        eta_s: Seconds left at that rate (None without a rate, or when not running).
        age_s: Seconds since the last write.
        stale_after_s: The age from which a running heartbeat is stopped.
        since_trial_s: Seconds since the last trial was written (None before the first).
        elapsed_s: Seconds from the start to the last write.
    """

    state: str
    written: int
    total: int
    failed: int
    rate_per_s: float | None
    eta_s: float | None
    age_s: float
    stale_after_s: float
    since_trial_s: float | None
    elapsed_s: float


def pulse(record: Mapping[str, Any], now: float) -> Pulse:
    """What a heartbeat record (read by :func:`simcore.base.files.read_heartbeat`) says at ``now``."""
    written, total = int(record["written"]), int(record["total"])
    landed = written - int(record.get("written_at_start") or 0)
    last = record.get("last_trial")
    span = (last - record["started"]) if last is not None else 0.0
    rate = landed / span if landed > 0 and span > 0 else None
    interval = min(float(record["beat_s"]), 1 / rate if rate else float(record["beat_s"]))
    stale_after = max(FLOOR_S, SLACK * interval)
    age = max(0.0, now - record["beat"])
    state = record["state"]
    if state == "running" and age > stale_after:
        state = "stopped"
    eta = (total - written) / rate if rate and state == "running" else None
    return Pulse(state, written, total, int(record.get("failed") or 0), rate, eta, age, stale_after,
                 None if last is None else max(0.0, now - last), record["beat"] - record["started"])
