"""The sweep's view of its workers' circuit breakers (see :mod:`backends.breaker`).

Each worker's shared backend has one breaker per provider. When one opens, the
worker writes a small file, ``<sweep dir>/.breakers/<host>-<pid>-<thread>.json``,
and removes it when the breaker closes. The sweep process reads these files: while
a breaker is open it dispatches no new trials (the ones in flight wait at the
breaker, and one of them probes), and the progress bar says so. Files work for
every executor, Dask workers on other machines included (they share the sweep
directory anyway).

A file whose probe is overdue (its worker went idle, or died) stops counting
after a grace period, so a stale file never holds a sweep back for long: the next
trial on that worker probes at once.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable

from backends.breaker import CLOSED, OPEN, BreakerState
from simcore.base.records import atomic_write

BOARD_DIR = ".breakers"
GRACE_S = 15.0  # how long past its due probe an open breaker still counts


class BreakerBoard:
    """Open breakers of a sweep's workers, as files in its directory.

    Args:
        sweep_dir: The sweep directory.
    """

    def __init__(self, sweep_dir: str | Path) -> None:
        self.dir = Path(sweep_dir) / BOARD_DIR
        self._cache: tuple[float, list[dict[str, Any]]] = (0.0, [])

    def clear(self) -> None:
        """Forget every breaker (at the start of a sweep pass)."""
        shutil.rmtree(self.dir, ignore_errors=True)

    def publisher(self, probe_timeout_s: float) -> Callable[[BreakerState], None]:
        """A breaker listener for one worker thread's backend.

        Args:
            probe_timeout_s: How long a probe may take (the request timeout).
        """
        path = self.dir / f"{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}.json"
        open_now: dict[str, dict[str, Any]] = {}

        def publish(state: BreakerState) -> None:
            if state.state == CLOSED:
                open_now.pop(state.provider, None)
            else:
                wait = state.next_probe_s if state.state == OPEN else probe_timeout_s
                open_now[state.provider] = {
                    "provider": state.provider, "state": state.state, "failures": state.failures,
                    "window": state.window, "next_probe_utc": time.time() + state.next_probe_s,
                    "hold_until": time.time() + wait + GRACE_S,
                }
            try:
                if open_now:
                    self.dir.mkdir(exist_ok=True)
                    atomic_write(path, json.dumps(list(open_now.values())))
                else:
                    path.unlink(missing_ok=True)
            except OSError:
                pass  # the board only informs; a full disk must not fail the trial

        return publish

    def open_breakers(self, max_age_s: float = 0.5) -> list[dict[str, Any]]:
        """The breakers that are open now, across all workers (cached for ``max_age_s``)."""
        now = time.time()
        if now - self._cache[0] < max_age_s:
            return self._cache[1]
        found: list[dict[str, Any]] = []
        if self.dir.is_dir():
            for file in sorted(self.dir.glob("*.json")):
                try:
                    entries = json.loads(file.read_text())
                except (OSError, ValueError):
                    continue  # removed or being replaced just now
                found += [e for e in entries if e.get("hold_until", 0) > now]
        self._cache = (now, found)
        return found

    def paused(self) -> bool:
        """Whether some provider's breaker is open."""
        return bool(self.open_breakers())

    def describe(self) -> str | None:
        """One line for the progress bar, or None when every breaker is closed."""
        entries = self.open_breakers()
        if not entries:
            return None
        now = time.time()
        parts = []
        for name in sorted({e["provider"] for e in entries}):
            mine = [e for e in entries if e["provider"] == name]
            worst = max(mine, key=lambda e: e["failures"])
            probe = min(max(0.0, e["next_probe_utc"] - now) for e in mine)
            when = "probing" if any(e["state"] != OPEN for e in mine) else f"probe in {probe:.0f}s"
            parts.append(f"{name} failing ({worst['failures']}/{worst['window']}), {when}")
        return "PAUSED: " + "; ".join(parts)
