"""A run's transcript as the browser shows it: who spoke, to whom, and at what cost.

Raw trace events become display rows here: each message gets its audience (the
agents that hear its speaker, from the run's topology), each reply its tokens,
cost and reading (unreadable, re-asked, salvaged), and each call the key of its
prompt, which :class:`PromptBook` finds in the run's cassette.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from backends.cassette import Cassette
from backends.pricing import cost_usd
from backends.registry import BackendSpec, price_table
from simcore.base.files import DamagedFile, parse_json, read_cassette
from simcore.sim import topology


def audience(manifest: Mapping[str, Any], names: Sequence[str]) -> tuple[dict[str, list[str]] | None, str]:
    """Who hears each agent, and a sentence on where that comes from.

    Built from the config's ``topology`` over ``names`` (the agents in the
    order of their first call, the order scenarios create them in). None for a
    topology read from a file (the browser reads nothing outside RUNS_DIR).
    """
    spec = (manifest.get("config") or {}).get("topology")
    if spec is None:
        return {a: [b for b in names if b != a] for a in names}, "no topology: everyone hears everyone"
    if not isinstance(spec, str) or spec.startswith("file:"):
        return None, f"topology {spec!r} is read from a file; listeners are not shown"
    try:
        graph = topology.build(spec, list(names), manifest["seed"])
    except (ValueError, OSError) as exc:
        return None, f"topology {spec!r} could not be rebuilt ({exc}); listeners are not shown"
    note = f"topology {spec} (edge u->v: v hears u)"
    if "remove_edge" in str(manifest.get("perturbation") or ""):
        note += "; this run's remove_edge perturbation is not reflected"
    return {a: sorted(graph.successors(a), key=list(names).index) for a in names}, note


def call_pricer(manifest: Mapping[str, Any]) -> tuple[Any, str | None]:
    """A function (prompt, completion tokens) -> USD or None, and the model it prices.

    A run whose agents all used one model is priced per call with the run's own
    price table; with several models, the trace does not say which call used
    which, so calls get tokens only.
    """
    models = [str(m) for m in manifest.get("models") or []]
    if len(models) != 1:
        return (lambda p, c: None), None
    try:
        table = price_table(BackendSpec.from_dict(manifest["backend"]))
    except (ValueError, TypeError, KeyError):
        return (lambda p, c: None), None
    model = models[0]
    return (lambda p, c: cost_usd(model, p, c, table)), model


def rows(events: Sequence[Mapping[str, Any]], hears: Mapping[str, list[str]] | None,
         price: Any) -> list[dict[str, Any]]:
    """Display rows for a page of events, each reply paired with its call on the page."""
    out: list[dict[str, Any]] = []
    open_calls: dict[tuple[str, str], deque[dict[str, Any]]] = {}
    for e in events:
        fields = e.get("fields") or {}
        payload = e.get("payload") or {}
        row = {"seq": e["seq"], "t": e["t"], "kind": e["kind"], "agent": e.get("agent"),
               "fields": fields, "payload": payload, "flags": [], "to": None}
        key = (str(e.get("agent")), repr(sorted(fields.items())))
        if e["kind"] == "message" and hears is not None and e.get("agent") in hears:
            row["to"] = hears[e["agent"]]
        elif e["kind"] == "llm.call":
            row["request"] = payload.get("request")
            open_calls.setdefault(key, deque()).append(row)
        elif e["kind"] in ("llm.reply", "llm.error"):
            pending = open_calls.get(key)
            call = pending.popleft() if pending else None
            row["request"] = None if call is None else call.get("request")
            tokens = payload.get("tokens")
            if isinstance(tokens, list) and len(tokens) == 2:
                row["tokens"] = tokens
                row["cost"] = price(int(tokens[0]), int(tokens[1]))
            if payload.get("parse_error"):
                row["flags"].append(("unreadable", payload.get("why") or "could not be read"))
            elif payload.get("read"):
                row["flags"].append(("read", f"read as {payload['read']}"))
            if payload.get("salvaged"):
                row["flags"].append(("salvaged", "cut at max_tokens, yet complete"))
            if payload.get("finish_reason") == "length":
                row["flags"].append(("truncated", "cut at max_tokens"))
            if e["kind"] == "llm.error":
                row["flags"].append(("error", f"{payload.get('error')}: {payload.get('message')}"))
        if "reask" in fields:
            row["flags"].append(("reask", f"re-ask {fields['reask']}"))
        out.append(row)
    return out


class PromptBook:
    """The prompts of a run, from its ``cassette.sqlite`` (checked by :func:`read_cassette`).

    Runs on the stub without ``--cassette`` record no prompts; :meth:`load`
    then returns None.
    """

    _cache: dict[Path, tuple[tuple[int, int], dict[str, list[dict[str, Any]]]]] = {}
    _lock = threading.Lock()

    @classmethod
    def load(cls, run_dir: Path, manifest: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]] | None:
        """Request key (first 16 hex digits of its digest) -> the requests, by occurrence.

        Raises:
            DamagedFile: when the cassette fails its check.
        """
        path = run_dir / "cassette.sqlite"
        if not path.exists() and "cassette.sqlite" not in (manifest.get("files") or {}):
            return None
        st = path.stat() if path.exists() else None
        stamp = (st.st_mtime_ns, st.st_size) if st else (0, 0)
        with cls._lock:
            hit = cls._cache.get(path)
            if hit is not None and hit[0] == stamp:
                return hit[1]
        read_cassette(run_dir, manifest)
        book: dict[str, list[dict[str, Any]]] = {}
        cassette = Cassette(path, readonly=True)
        try:
            entries = sorted(cassette.entries(), key=lambda e: (e.digest, e.occurrence, e.scope))
        finally:
            cassette.close()
        for entry in entries:
            try:
                request = parse_json(entry.request)
            except ValueError as exc:
                raise DamagedFile(path, f"entry {entry.digest[:12]}: request: {exc}") from None
            book.setdefault(entry.digest[:16], []).append(request)
        with cls._lock:
            cls._cache[path] = (stamp, book)
        return book


def perturbation_marks(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Where a perturbed run's perturbation acted, as its results record it (``perturbation.applied``:
    per change, the operator, simulated time, the trace index at which it acted, the agent and the
    fields); empty for a run that was not perturbed (or a pair trial, whose trace is another run's)."""
    record = results.get("perturbation")
    applied = record.get("applied") if isinstance(record, Mapping) else None
    if not isinstance(applied, list):
        return []
    out = []
    for k, entry in enumerate(a for a in applied if isinstance(a, Mapping) and isinstance(a.get("event"), int)):
        fields = ", ".join(f"{f}={v}" for f, v in (entry.get("fields") or {}).items())
        who = f" {entry['agent']}'s turn" if entry.get("agent") else ""
        text = f"{entry.get('operator')} acted on{who or ' the run'}" + (f" ({fields})" if fields else "")
        out.append({"k": k, "event": entry["event"], "t": entry.get("t"), "operator": entry.get("operator"),
                    "text": text})
    return out


def place_marks(marks: Sequence[Mapping[str, Any]], selected: Sequence[int], page: int,
                size: int) -> tuple[dict[int, list[Mapping[str, Any]]], list[Mapping[str, Any]], dict[int, int]]:
    """Where each mark goes among the transcript's shown events: before the first selected event at
    or after the trace index where it acted. Returns the marks of this page by the position of the
    row they precede, those that follow its last row, and the page of every mark (by its ``k``)."""
    here: dict[int, list[Mapping[str, Any]]] = {}
    end: list[Mapping[str, Any]] = []
    pages = {}
    first = (page - 1) * size
    for mark in marks:
        position = int(np.searchsorted(np.asarray(selected), mark["event"]))
        pages[mark["k"]] = min(position // size + 1, max(1, -(-len(selected) // size)))
        if first <= position < first + size and position < len(selected):
            here.setdefault(position - first, []).append(mark)
        elif position == len(selected) and pages[mark["k"]] == page:
            end.append(mark)
    return here, end, pages
