"""Python's cyclic garbage collector while large worlds run.

A large run allocates millions of containers, and each full collection rescans
every long-lived object: the imports, the built world (tens of millions of objects
at 10^6 agents) and every call still waiting for its round. So while a world of
:data:`LARGE_WORLD` agents or more runs:

- the heap alive when it starts is **frozen** (``gc.freeze``: never scanned,
  freed by reference counting as usual);
- a full collection waits for :data:`FULL_COLLECTION_EVERY` collections of the
  middle generation (Python's default is 10). At 10^6 agents (the kernel
  benchmark's workload) this took the collector from 15 full collections and
  20 s of an 83 s run to 2 and 4 s.

Young garbage is collected as usual, and no value changes. When the last large
world ends, the threshold comes back and the heap thaws. Smaller worlds leave the
collector alone: their runs are short, and a Monte Carlo of them leaves garbage
(finished worlds are cyclic) that Python's own full collections should find.

Cycles frozen with the heap (a finished world no longer referenced) would outlive
every later run if large runs followed one another. So when the heap has grown by
:data:`REGROWTH` since it was last collected, it is collected once before it is
frozen again (Python's own rule for full collections, applied between runs).
Growth is read from ``sys.getallocatedblocks()``, which is cheap, not by counting
the frozen objects, which walks them all.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from typing import Iterator

#: The size (in agents) from which a world counts as large.
LARGE_WORLD = 10_000
#: While a large world runs, a full collection waits for this many collections of the middle generation.
FULL_COLLECTION_EVERY = 1000
#: The share by which the heap may grow between two collections of it at large worlds' starts.
REGROWTH = 0.25

_running = 0  # large worlds running in this process
_thresholds = gc.get_threshold()  # as they were before the first of them started
_collected_size: int | None = None  # allocated blocks right after the last collection


@contextlib.contextmanager
def running(n_agents: int) -> Iterator[None]:
    """The collector's settings while a world of ``n_agents`` agents runs (see the module docstring)."""
    if n_agents < LARGE_WORLD:
        yield
        return
    _large_world_started()
    try:
        yield
    finally:
        _large_world_ended()


def _large_world_started() -> None:
    global _running, _thresholds, _collected_size
    if _running == 0:
        size = sys.getallocatedblocks()
        if _collected_size is None:
            _collected_size = size
        elif size > _collected_size * (1 + REGROWTH):
            gc.collect()
            _collected_size = sys.getallocatedblocks()
        gc.freeze()
        _thresholds = gc.get_threshold()
        gc.set_threshold(_thresholds[0], _thresholds[1], max(_thresholds[2], FULL_COLLECTION_EVERY))
    _running += 1


def _large_world_ended() -> None:
    global _running
    _running -= 1
    if _running == 0:
        gc.set_threshold(*_thresholds)
        gc.unfreeze()
