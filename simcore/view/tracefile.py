"""A checked trace, indexed so that any page of it is read without loading the rest.

:func:`open_trace` checks ``trace.jsonl`` against its manifest once
(:func:`simcore.base.files.read_trace`), then keeps only where each line starts and,
per event, small codes for its kind and agent and its simulated time. A page is
read by seeking to its lines. Indices are cached per file and rebuilt when the
file's size or modification time changes.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from simcore.base.files import DamagedFile, read_trace

CACHE_SIZE = 8


@dataclass(frozen=True)
class TraceIndex:
    """Where each event of a checked trace lies, and what it is.

    Attributes:
        path: The trace file.
        stamp: (mtime_ns, size) of the file when it was checked.
        offsets: Byte offset of each line, plus the file's length (n + 1 values).
        kinds: Per event, an index into ``kind_names``.
        agents: Per event, an index into ``agent_names`` (-1: no agent).
        times: Per event, its simulated time.
        kind_names: Event kinds, in order of first appearance.
        agent_names: Agents, in the order of their first LLM call (then first appearance).
    """

    path: Path
    stamp: tuple[int, int]
    offsets: np.ndarray
    kinds: np.ndarray
    agents: np.ndarray
    times: np.ndarray
    kind_names: tuple[str, ...]
    agent_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.kinds)

    def select(self, kinds: Sequence[str] = (), agents: Sequence[str] = ()) -> np.ndarray:
        """Indices of the events of the given kinds and agents (all when empty)."""
        mask = np.ones(len(self), dtype=bool)
        if kinds:
            codes = [i for i, k in enumerate(self.kind_names) if k in kinds]
            mask &= np.isin(self.kinds, codes)
        if agents:
            codes = [i for i, a in enumerate(self.agent_names) if a in agents]
            mask &= np.isin(self.agents, codes)
        return np.flatnonzero(mask)

    def read(self, rows: Sequence[int]) -> list[dict[str, Any]]:
        """The events at ``rows`` (indices), parsed."""
        out = []
        with open(self.path, "rb") as fh:
            for i in rows:
                start, end = int(self.offsets[i]), int(self.offsets[i + 1])
                fh.seek(start)
                out.append(json.loads(fh.read(end - start)))
        return out


_cache: OrderedDict[Path, TraceIndex] = OrderedDict()
_lock = threading.Lock()


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def open_trace(run_dir: Path, manifest: Mapping[str, Any]) -> TraceIndex:
    """The index of a run's trace, checked against ``manifest`` when (re)built.

    Raises:
        DamagedFile: when the trace is missing or is not the one the manifest records.
    """
    path = run_dir / "trace.jsonl"
    try:
        stamp = _stamp(path)
    except FileNotFoundError:
        raise DamagedFile(path, "is missing") from None
    with _lock:
        hit = _cache.get(path)
        if hit is not None and hit.stamp == stamp and hit.path == path:
            _cache.move_to_end(path)
            return hit
    index = _build(path, stamp, read_trace(run_dir, manifest))
    with _lock:
        _cache[path] = index
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return index


def _build(path: Path, stamp: tuple[int, int], data: bytes) -> TraceIndex:
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1
    offsets = np.concatenate(([0], ends)).astype(np.int64)
    if offsets[-1] != len(data):  # a last line without its newline
        offsets = np.append(offsets, len(data))
    n = len(offsets) - 1
    kinds = np.empty(n, dtype=np.int32)
    agents = np.empty(n, dtype=np.int32)
    times = np.empty(n, dtype=np.float64)
    kind_code: dict[str, int] = {}
    agent_code: dict[str | None, int] = {None: -1}
    callers: dict[str, None] = {}
    for i in range(n):
        e = json.loads(data[offsets[i]:offsets[i + 1]])
        kind, agent = e["kind"], e["agent"]
        kinds[i] = kind_code.setdefault(kind, len(kind_code))
        agents[i] = agent_code.setdefault(agent, len(agent_code) - 1)
        times[i] = e["t"]
        if kind == "llm.call" and agent is not None:
            callers.setdefault(agent, None)
    names = [a for a in agent_code if a is not None]
    order = list(callers) + [a for a in names if a not in callers]
    remap = np.array([order.index(a) for a in names] + [-1], dtype=np.int32)  # -1 maps to the last slot
    agents = remap[agents]
    return TraceIndex(path, stamp, offsets, kinds, agents, times, tuple(kind_code), tuple(order))
