"""The event trace: what happened, when, in simulated time.

Every event has a sequence number, a simulated time, a kind, an optional agent,
``fields`` (small structural values such as phase and round) and ``payload``
(content: texts, parsed replies, numbers). The structural signature of an event is
built from kind, agent and fields only, never from payload, so that perturbation
analysis compares what happened rather than what was said.

Wall-clock time never enters a trace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from backends.base import canonical_json

#: Kind of the event a protocol emits just before it makes calls whose replies
#: race: the protocol acts on each reply as it arrives, and its outcome depends on
#: the order of arrival (an open floor, where the first to finish speaks first).
#: Its fields are those of the calls it marks. Replies of concurrent calls that no
#: such event marks compare as a set (see :func:`simcore.analysis.divergence.comparable_signatures`).
RACE = "race"

#: Kinds of events that only record a reply's arrival, emitted by the replying
#: agent at the moment its reply arrives, and that change nothing that depends on
#: the order of arrival (a sealed bid: the auction ranks bids by amount and the
#: deadline, never by order). They travel with their reply when replies are compared as a set.
ARRIVAL_RECORDS = frozenset({"bid"})


#: How a run keeps its trace: ``memory`` (every event, as objects), ``stream``
#: (written to trace.jsonl as it happens, see :class:`StreamedTrace`) or ``auto``
#: (streamed from :data:`STREAM_FROM_AGENTS` agents up).
TRACE_MODES = ("auto", "stream", "memory")

#: The world size from which ``auto`` streams the trace. Below it a trace costs
#: little memory, and analyses that walk the events find them as objects.
STREAM_FROM_AGENTS = 10_000


def streams(mode: str, n_agents: int) -> bool:
    """Whether a run of ``n_agents`` agents streams its trace under ``mode``."""
    if mode not in TRACE_MODES:
        raise ValueError(f"trace: must be one of {', '.join(TRACE_MODES)}; got {mode!r}")
    return mode == "stream" or (mode == "auto" and n_agents >= STREAM_FROM_AGENTS)


class Fields(dict):
    """Structural fields that many events share: a read-only dict that carries its canonical JSON.

    :meth:`simcore.sim.kernel.World.shared_fields` makes one per distinct set of fields
    (the calls, replies and messages of one round all carry ``{phase, round}``), so
    writing an event reuses the JSON instead of encoding the same fields again.
    Changing one raises ``TypeError``; copy it (``dict(fields)``) to change it.
    """

    __slots__ = ("json",)

    def __init__(self, fields: Mapping[str, Any]) -> None:
        super().__init__(fields)
        self.json = canonical_json(self)

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("fields: shared structural fields are read-only; copy them (dict(fields)) to change them")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return Fields, (dict(self),)  # (not item by item: that would go through __setitem__)


_STRING = json.encoder.encode_basestring  # how canonical_json writes a str (UTF-8 kept)
_FLOAT = float.__repr__  # how it writes a finite float (also for subclasses such as numpy's)


def event_line(seq: int, t: float, kind: str, agent: str | None, fields: Mapping[str, Any],
               payload: Mapping[str, Any]) -> str:
    """An event as one canonical JSON line (no newline): ``canonical_json`` of its dict, byte for byte.

    Written key by key, in the sorted order canonical JSON puts them in, so that
    shared :class:`Fields` give their JSON as it is (one event or more per LLM call
    is written, and most of them carry shared fields).
    """
    return "".join((
        '{"agent":', "null" if agent is None else _STRING(agent) if type(agent) is str else canonical_json(agent),
        ',"fields":', fields.json if type(fields) is Fields else canonical_json(fields),
        ',"kind":', _STRING(kind) if type(kind) is str else canonical_json(kind),
        ',"payload":', canonical_json(payload),
        ',"seq":', str(seq) if type(seq) is int else canonical_json(seq),
        ',"t":', _FLOAT(t) if type(t) is float and t - t == 0 else canonical_json(t),  # (t - t is nan for inf and nan)
        "}",
    ))


class TraceEvent(NamedTuple):
    """One event of a run.

    A named tuple rather than a class instance: cheaper to build and to hold,
    which counts at one or more per LLM call. (The collector keeps tracking named
    tuples, unlike plain ones; a large world streams its trace instead of holding it.)
    """

    seq: int
    t: float
    kind: str
    agent: str | None = None
    fields: Mapping[str, Any] = {}
    payload: Mapping[str, Any] = {}

    @property
    def signature(self) -> str:
        """Structural signature: ``kind|agent|k=v,...`` with fields in key order."""
        parts = ",".join(f"{k}={self.fields[k]}" for k in sorted(self.fields))
        return f"{self.kind}|{self.agent or '-'}|{parts}"

    def to_json(self) -> str:
        """Serialise as one canonical JSON line (no newline): see :func:`event_line`."""
        return event_line(*self)

    @classmethod
    def from_json(cls, line: str) -> "TraceEvent":
        """Parse one line written by :meth:`to_json`."""
        d = json.loads(line)
        return cls(d["seq"], d["t"], d["kind"], d["agent"], d["fields"], d["payload"])


class Trace:
    """An append-only list of events with deterministic serialisation."""

    def __init__(self, events: Iterable[TraceEvent] = ()) -> None:
        self.events: list[TraceEvent] = list(events)
        self._lines: list[str] = []  # serialised prefix, reused by to_jsonl and sha256

    def emit(
        self,
        t: float,
        kind: str,
        agent: str | None = None,
        fields: Mapping[str, Any] | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> TraceEvent:
        """Append an event and return it."""
        event = TraceEvent(len(self.events), t, kind, agent, fields or {}, payload or {})
        self.events.append(event)
        return event

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def of_kind(self, *kinds: str) -> list[TraceEvent]:
        """Return the events whose kind is one of ``kinds``, in order."""
        return [e for e in self.events if e.kind in kinds]

    def signatures(self) -> list[str]:
        """Return the structural signature of every event, in order."""
        return [e.signature for e in self.events]

    def to_jsonl(self) -> str:
        """Return the whole trace as JSON lines, each ending in a newline."""
        lines = self._lines
        # Events are immutable and only ever appended, so lines already written stay valid.
        lines.extend(e.to_json() + "\n" for e in self.events[len(lines) :])
        return "".join(lines)

    def sha256(self) -> str:
        """Return the sha256 of :meth:`to_jsonl`'s UTF-8 bytes."""
        return hashlib.sha256(self.to_jsonl().encode()).hexdigest()

    @classmethod
    def from_jsonl(cls, text: str) -> "Trace":
        """Parse text written by :meth:`to_jsonl`."""
        return cls(TraceEvent.from_json(line) for line in text.splitlines() if line.strip())


class StreamedTrace:
    """A trace written to a file as it happens, holding none of its events.

    Lines are byte for byte those of :meth:`Trace.to_jsonl`, so the file, its
    sha256 and replay are the same as with an in-memory trace. Memory no longer
    grows with the number of events. Reading the events back (iteration,
    :meth:`of_kind`, :meth:`to_jsonl`) reads the file: events come back as their
    JSON values (lists for tuples), as from a written run.

    Args:
        path: Where to write; the file is created (or truncated).
        events: Events already recorded (a memory trace switched to streaming).
    """

    #: Lines kept before one write (and one hash update).
    BUFFER_LINES = 4096

    def __init__(self, path: str | Path, events: Iterable[TraceEvent] = ()) -> None:
        self.path = Path(path)
        self._file: Any = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        self._hash = hashlib.sha256()
        self._buffer: list[str] = []
        self._n = 0
        for e in events:
            self.emit(e.t, e.kind, e.agent, e.fields, e.payload)

    @classmethod
    def temporary(cls, directory: str | Path | None = None, events: Iterable[TraceEvent] = ()) -> "StreamedTrace":
        """A streamed trace in a new hidden file in ``directory`` (default: the system's temp dir)."""
        if directory is not None:
            Path(directory).mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".trace-", suffix=".jsonl.tmp", dir=directory)
        os.close(fd)
        return cls(name, events)

    def emit(
        self,
        t: float,
        kind: str,
        agent: str | None = None,
        fields: Mapping[str, Any] | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> TraceEvent:
        """Write an event (buffered) and return it."""
        event = TraceEvent(self._n, t, kind, agent, fields or {}, payload or {})
        self._n += 1
        buffer = self._buffer
        buffer.append(event.to_json())
        if len(buffer) >= self.BUFFER_LINES:
            self.flush()
        return event

    def flush(self) -> None:
        """Write the buffered lines to the file."""
        if self._buffer:
            data = ("\n".join(self._buffer) + "\n").encode()
            self._buffer.clear()
            self._hash.update(data)
            if self._file is None:
                raise ValueError("trace: the streamed trace is closed; it takes no more events")
            self._file.write(data)
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        """Flush, sync and close the file; the events stay readable."""
        if self._file is not None:
            self.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def move_to(self, path: str | Path) -> None:
        """Close and move the file to ``path``, where it is read from then on."""
        self.close()
        shutil.move(self.path, path)
        self.path = Path(path)

    def discard(self) -> None:
        """Close and delete the file (a run that will not be written)."""
        with contextlib.suppress(OSError):
            self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[TraceEvent]:
        self.flush()
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                yield TraceEvent.from_json(line)

    @property
    def events(self) -> list[TraceEvent]:
        """Every event, read back from the file."""
        return list(self)

    def of_kind(self, *kinds: str) -> list[TraceEvent]:
        """Return the events whose kind is one of ``kinds``, in order."""
        return [e for e in self if e.kind in kinds]

    def signatures(self) -> list[str]:
        """Return the structural signature of every event, in order."""
        return [e.signature for e in self]

    def to_jsonl(self) -> str:
        """Return the whole trace as JSON lines, each ending in a newline (read from the file)."""
        self.flush()
        return self.path.read_bytes().decode()

    def sha256(self) -> str:
        """Return the sha256 of the trace's bytes (kept as it is written)."""
        self.flush()
        return self._hash.hexdigest()


def first_difference(a: list[str], b: list[str]) -> int | None:
    """Return the index of the first differing line of two traces, or None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
