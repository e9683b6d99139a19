"""Parse quality: how a run's replies were read, per kind of reply.

Every turn that asked for a schema counts once, under the reading of its last
attempt (a re-ask supersedes the reply it re-asks):

- ``json``, ``label``, ``prose``: read, by the weakest source a required field needed;
- ``unreadable``: still unreadable after any re-asks (kept raw, flagged);
- ``reasoning_cut``: still cut by the model's own reasoning before any answer after
  any re-asks (a reasoning model that spent its whole budget thinking: no reply to
  read, and not counted as unreadable);
- ``truncated``: turns with a reply cut at max_tokens; ``salvaged``: turns whose
  final reply was cut yet complete in every required field;
- ``reasked``: turns that needed at least one re-ask; ``reask_read``: turns answered only when
  asked again (read from a re-ask's reply): answers a first reply did not give;
- ``lowered``: calls whose completion budget was lowered to fit the model's context
  window (:mod:`simcore.sim.fitting`; never below what the reply kind needs).
- ``echo``: unreadable turns whose final reply only repeated what the model was
  given (see :mod:`simcore.replies.echo`); ``partial``: unreadable turns whose final reply
  still gave some required fields cleanly (kept for the figures that use them).

``replies`` is the number of turns. A kind with more than :data:`WARN_SHARE` of its
turns unreadable gets a warning in the run's summary.

Each turn is also a **reply slot**: its kind, agent and structural fields (round,
phase, vignette, ...; a re-ask's ``reask`` left out, as the re-ask is the same turn),
numbered when they repeat. :meth:`ParseQuality.slots` records the run's slots (a
digest of all of them), those left unreadable and those answered only when asked
again, which is how two runs of a shared seed are paired reply by reply when their
arms are compared (:mod:`simcore.analysis.readability`).
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping

from simcore.replies.reading import HOWS, REASONING_CUT, UNREADABLE, Reading

WARN_SHARE = 0.02
COUNTS = ("replies", *HOWS, UNREADABLE, REASONING_CUT, "truncated", "salvaged", "reasked", "reask_read", "lowered",
          "echo", "partial")


class ParseQuality:
    """Running counts per reply kind (see the module docstring)."""

    __slots__ = ("counts", "_turns", "_latest", "_unreadable", "_reask_read")

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}
        self._turns: dict[str, int] = {}  # slot -> turns so far with it
        self._latest: dict[str, str] = {}  # slot -> its latest turn's key
        self._unreadable: set[str] = set()
        self._reask_read: set[str] = set()

    def record(self, kind: str, reading: Reading, earlier: tuple[Reading, ...] = (), slot: str | None = None) -> None:
        """Count a reading; ``earlier`` are the turn's previous attempts, oldest first;
        ``slot`` names the turn's agent and structural fields (see the module docstring)."""
        if slot is not None:
            base = f"{kind}|{slot}"
            if earlier:  # a re-ask: the same turn as its slot's latest
                key = self._latest.get(base, f"{base}#0")
            else:
                n = self._turns.get(base, 0)
                self._turns[base] = n + 1
                key = self._latest[base] = f"{base}#{n}"
            if reading.how == UNREADABLE:
                self._unreadable.add(key)
            else:
                self._unreadable.discard(key)
            if earlier and reading.readable:  # (a reply cut by its reasoning is no answer)
                self._reask_read.add(key)
        c = self.counts.get(kind)
        if c is None:
            c = self.counts[kind] = dict.fromkeys(COUNTS, 0)
        if earlier:
            last = earlier[-1]
            c[last.how] -= 1
            c["salvaged"] -= last.salvaged
            c["echo"] -= last.echo
            c["partial"] -= last.kept_some
            c["reasked"] += len(earlier) == 1
            c["reask_read"] += reading.readable  # (a re-ask follows an unreadable reply only: once per turn)
        else:
            c["replies"] += 1
        c[reading.how] += 1
        c["salvaged"] += reading.salvaged
        c["echo"] += reading.echo
        c["partial"] += reading.kept_some
        c["truncated"] += reading.truncated and not any(r.truncated for r in earlier)

    def lowered(self, kind: str) -> None:
        """Count a call of ``kind`` whose completion budget was lowered to fit the context window."""
        c = self.counts.get(kind)
        if c is None:
            c = self.counts[kind] = dict.fromkeys(COUNTS, 0)
        c["lowered"] += 1

    def to_dict(self) -> dict[str, dict[str, int]]:
        """Plain counts, kinds sorted."""
        return {k: dict(self.counts[k]) for k in sorted(self.counts)}

    def slots(self) -> dict[str, Any]:
        """The run's reply slots: how many (``turns``), a ``digest`` of all of them (equal
        digests: the same slots), the ``unreadable`` ones and those answered only when asked
        again (``reask_read``), sorted."""
        keys = sorted(f"{base}#{i}" for base, n in self._turns.items() for i in range(n))
        digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
        return {"turns": len(keys), "digest": digest, "unreadable": sorted(self._unreadable),
                "reask_read": sorted(self._reask_read)}


def warnings(quality: Mapping[str, Mapping[str, int]], share: float = WARN_SHARE) -> list[str]:
    """One line per kind whose unreadable share exceeds ``share``."""
    out = []
    for kind, c in quality.items():
        n, bad, cut = c.get("replies", 0), c.get(UNREADABLE, 0), c.get(REASONING_CUT, 0)
        if n and bad / n > share:
            out.append(
                f"WARNING: {bad} of {n} {kind} replies ({bad / n:.0%}) were unreadable; "
                "figures that need them leave them out"
            )
        if n and cut / n > share:
            out.append(
                f"WARNING: {cut} of {n} {kind} replies ({cut / n:.0%}) were cut by the model's own reasoning "
                "before any answer; give it more room (a model rule's reasoning allowance, docs/providers.md)"
            )
    return out


def summary_lines(quality: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The parse-quality table for the terminal: one line per kind, then any warnings."""
    if not quality:
        return []
    total = sum(c["replies"] for c in quality.values())
    if all(c["json"] == c["replies"] and not (c["truncated"] or c["reasked"] or c.get("lowered"))
           for c in quality.values()):
        return [f"  replies: {total}, every one read as JSON"]
    lines = ["  replies read (json/label/prose/unreadable; truncated, salvaged, re-asked; echoes, partial):"]
    for kind, c in quality.items():
        lines.append(
            f"    {kind:<14} {c['replies']:>5}: {c['json']}/{c['label']}/{c['prose']}/{c[UNREADABLE]}; "
            f"{c['truncated']} truncated, {c['salvaged']} salvaged, {c['reasked']} re-asked; "
            f"{c.get('echo', 0)} echoes, {c.get('partial', 0)} partial"
            + (f", {c['lowered']} with a budget lowered to fit the context window" if c.get("lowered") else "")
            + (f", {c[REASONING_CUT]} cut by their reasoning" if c.get(REASONING_CUT) else "")
        )
    return lines + [f"  {w}" for w in warnings(quality)]


def columns(quality: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Flat columns for results tables: ``parse.<kind>.<count>``."""
    return {f"parse.{kind}.{name}": c.get(name, 0) for kind, c in quality.items() for name in COUNTS}


def merge(qualities: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """Counts of several runs added up, per kind."""
    out: dict[str, dict[str, int]] = {}
    for q in qualities:
        for kind, c in q.items():
            acc = out.setdefault(kind, dict.fromkeys(COUNTS, 0))
            for name in COUNTS:
                acc[name] += int(c.get(name, 0))
    return {k: out[k] for k in sorted(out)}


def unreadable_share(quality: Mapping[str, Mapping[str, Any]]) -> float | None:
    """Unreadable turns over all turns, every kind together (None without any)."""
    n = sum(c.get("replies", 0) for c in quality.values())
    return sum(c.get(UNREADABLE, 0) for c in quality.values()) / n if n else None
