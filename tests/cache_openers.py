"""Processes that open one new embedding cache at the same moment (tests/test_embeddings.py).

A module of its own, quick to import: the test spawns one process that runs
:func:`open_rounds`, and that process, which runs no other threads, forks the openers. Forked
from the test's own process instead (an xdist worker, with threads of its own), an opener
once waited for ever in ``sqlite3.connect``: another thread had held SQLite's lock at the fork.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import numpy as np

from simcore.analysis.embed_cache import DiskCache

NAMESPACE = ("m", "cpu", "float32")


def _open(path: str, start: Any, failures: Any) -> None:
    cache = DiskCache(path, 4)
    start.wait()
    try:
        cache.put_many(NAMESPACE, {"k": np.zeros(4, np.float32)})
    except Exception as exc:  # the failure is what the test counts
        failures.put(repr(exc))


def open_rounds(root: str, rounds: int, openers: int = 4) -> list[str]:
    """``rounds`` times, ``openers`` forked processes open a new cache together; what went wrong."""
    ctx = multiprocessing.get_context("fork")
    failures = ctx.Queue()
    problems: list[str] = []
    for round_ in range(rounds):
        path = f"{root}/{round_}.sqlite"
        start = ctx.Barrier(openers)
        procs = [ctx.Process(target=_open, args=(path, start, failures)) for _ in range(openers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            if p.exitcode != 0:
                problems.append(f"round {round_}: an opener ended with exit code {p.exitcode}")
                p.kill()
        while not failures.empty():
            problems.append(f"round {round_}: {failures.get()}")
        rows = DiskCache(path, 4).count()
        if rows != 1:
            problems.append(f"round {round_}: {rows} rows, not 1")
    return problems
