"""Trace divergence between a baseline run and a perturbed run.

Everything here works on *structural signatures* (``TraceEvent.signature``:
``kind|agent|field=value,...``), never on content, so wording noise does not
register as divergence.

- :func:`comparable_signatures`: a trace's signatures in the order they compare
  in: the replies of concurrent calls in the order the calls were made, unless
  the protocol marked them as a race (:func:`comparison_order`: the same order,
  as indices into the trace).
- :func:`compare_signatures`: unit-cost Levenshtein distance, ``d_norm``, the
  alignment (Wagner-Fischer, backtracked from the end preferring match, then
  substitution, then insertion, then deletion), its counts, and ``t*``.
- :func:`control_flow`: reroutes, early termination and extended execution.
- :func:`classify_manifestation` and :func:`manifestation_group`: the taxonomy.

Conventions: an *insertion* is an event only the perturbed run has, a *deletion*
an event only the baseline has.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Sequence

from simcore.sim.trace import ARRIVAL_RECORDS, RACE, TraceEvent

Op = Literal["match", "substitution", "insertion", "deletion"]

_REPLIES = ("llm.reply", "llm.error")


@dataclass
class _Batch:
    """Calls made at one simulated instant before any of them was answered."""

    t: float
    size: int = 0
    open: bool = True
    # (rank of the call in the batch, first index, last index) of each reply unit
    units: list[tuple[int, int, int]] = field(default_factory=list)


def comparable_signatures(events: Sequence[TraceEvent]) -> list[str]:
    """The events' signatures in comparison order (see :func:`comparison_order`)."""
    sigs = [e.signature for e in events]
    return [sigs[j] for j in comparison_order(events)]


def comparison_order(events: Sequence[TraceEvent]) -> list[int]:
    """The events' indices in comparison order: concurrent replies as a set.

    Calls made at the same simulated instant before any of them is answered run
    concurrently (the kernel sends them together), and their replies arrive in
    order of their simulated durations. That order is an accident of reply
    lengths, not a choice of the protocol, so the replies of such a *batch* are
    put in the order their calls were made before two traces are compared: a
    change that only reorders them is no divergence and no reroute. Each reply
    keeps the events that only record its arrival (:data:`simcore.sim.trace.ARRIVAL_RECORDS`,
    same agent and instant, right after it), and the events of anything else
    keep their places.

    Calls preceded at their instant by a :data:`simcore.sim.trace.RACE` event with
    their fields stay in arrival order: the protocol's outcome depends on it (an
    open floor, where the first to finish speaks first).

    A reply is matched to the earliest unanswered call of the same agent and
    fields.
    """
    pending: dict[str, deque[tuple[_Batch, int]]] = {}
    raced: set[tuple[float, str]] = set()
    batches: list[_Batch] = []
    current: _Batch | None = None
    sigs = [e.signature for e in events]
    for i, e in enumerate(events):
        who_what = sigs[i].split("|", 1)[1]  # agent and fields: what ties a reply to its call
        fields = who_what.split("|", 1)[1]
        if e.kind == RACE:
            raced.add((e.t, fields))
        elif e.kind == "llm.call":
            if current is None or not current.open or current.t != e.t:
                current = _Batch(e.t)
                batches.append(current)
            rank = -1 if (e.t, fields) in raced else current.size
            current.size += 1
            pending.setdefault(who_what, deque()).append((current, rank))
        elif e.kind in _REPLIES and pending.get(who_what):
            batch, rank = pending[who_what].popleft()
            batch.open = False  # answered, so the batch was sent: later calls form a new one
            end = i
            while (end + 1 < len(events) and events[end + 1].kind in ARRIVAL_RECORDS
                   and events[end + 1].agent == e.agent and events[end + 1].t == e.t):
                end += 1
            if rank >= 0:
                batch.units.append((rank, i, end))
    keys = [(i, 0) for i in range(len(events))]
    for batch in batches:
        # The k-th unit to arrive gives its place to the k-th call made.
        for (_, slot, _), (_, first, last) in zip(batch.units, sorted(batch.units)):
            for offset, j in enumerate(range(first, last + 1)):
                keys[j] = (slot, offset)
    return sorted(range(len(events)), key=keys.__getitem__)


@dataclass(frozen=True)
class AlignedPair:
    """One step of the alignment: indices into baseline (i) and perturbed (j)."""

    op: Op
    i: int | None
    j: int | None


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare_signatures`.

    Attributes:
        distance: Levenshtein distance with unit costs.
        d_norm: ``distance / max(len)``; 0.0 when both are empty.
        substitutions: Substitutions in the alignment.
        insertions: Insertions (perturbed-only events).
        deletions: Deletions (baseline-only events).
        alignment: The aligned pairs, first to last.
        t_star: Index in ``alignment`` of the first pair that does not match,
            or None when the traces match.
        t_star_norm: ``t_star / len(alignment)``, in [0, 1), or None.
    """

    distance: int
    d_norm: float
    substitutions: int
    insertions: int
    deletions: int
    alignment: tuple[AlignedPair, ...]
    t_star: int | None
    t_star_norm: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain form (alignment as a list of dicts)."""
        return asdict(self)


def compare_signatures(baseline: Sequence[str], perturbed: Sequence[str]) -> Comparison:
    """Align two signature sequences and measure how far apart they are."""
    a, b = list(baseline), list(perturbed)
    n, m = len(a), len(b)
    # Wagner-Fischer table, one row per baseline prefix.
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for j in range(m + 1):
        table[0][j] = j
    for i in range(1, n + 1):
        row, prev = table[i], table[i - 1]
        row[0] = i
        ai = a[i - 1]
        for j in range(1, m + 1):
            cost = 0 if ai == b[j - 1] else 1
            row[j] = min(prev[j - 1] + cost, row[j - 1] + 1, prev[j] + 1)
    pairs: list[AlignedPair] = []
    i, j = n, m
    while i > 0 or j > 0:
        here = table[i][j]
        if i > 0 and j > 0 and a[i - 1] == b[j - 1] and here == table[i - 1][j - 1]:
            pairs.append(AlignedPair("match", i - 1, j - 1))
            i, j = i - 1, j - 1
        elif i > 0 and j > 0 and here == table[i - 1][j - 1] + 1:
            pairs.append(AlignedPair("substitution", i - 1, j - 1))
            i, j = i - 1, j - 1
        elif j > 0 and here == table[i][j - 1] + 1:
            pairs.append(AlignedPair("insertion", None, j - 1))
            j -= 1
        else:
            pairs.append(AlignedPair("deletion", i - 1, None))
            i -= 1
    pairs.reverse()
    distance = table[n][m]
    counts = {op: sum(p.op == op for p in pairs) for op in ("substitution", "insertion", "deletion")}
    t_star = next((k for k, p in enumerate(pairs) if p.op != "match"), None)
    return Comparison(
        distance=distance,
        d_norm=distance / max(n, m) if max(n, m) else 0.0,
        substitutions=counts["substitution"],
        insertions=counts["insertion"],
        deletions=counts["deletion"],
        alignment=tuple(pairs),
        t_star=t_star,
        t_star_norm=None if t_star is None else t_star / len(pairs),
    )


def signature_agent(signature: str) -> str:
    """The agent part of a ``kind|agent|fields`` signature ("-" for none)."""
    parts = signature.split("|")
    return parts[1] if len(parts) > 1 else "-"


@dataclass(frozen=True)
class ControlFlow:
    """Control-flow changes of a compared pair.

    Attributes:
        reroutes: Substituted pairs of the alignment that are turns of two
            different agents (both events have an agent, and the agents differ).
        early_termination: The perturbed run stopped short: it is shorter than
            the baseline, and the baseline ends with events it never has.
        early_termination_count: The smaller of the two shortfalls: the length
            difference, and the baseline's *missing end* (walking back from its
            last event, the events in excess of the perturbed run's as a
            multiset of signatures, up to the first that is not).
        extended_execution: The perturbed run went on longer: it is longer than
            the baseline, and ends with events the baseline never has.
        extended_execution_count: The mirror image of early_termination_count.
        total_changes: ``reroutes + early_termination_count + extended_execution_count``.

    Judging the ends by what never happens, rather than by the alignment's last
    steps, keeps a turn dropped mid-run, or parallel replies that arrive in
    another order at the end, from counting as stopping early; the length
    condition keeps a different agent finishing the run (a reroute) from counting
    as both stopping early and going on longer.
    """

    reroutes: int
    early_termination: bool
    early_termination_count: int
    extended_execution: bool
    extended_execution_count: int
    total_changes: int


def _missing_at_end(a: Sequence[str], b: Sequence[str]) -> int:
    """How many of ``a``'s last events are in excess of ``b``'s, counted back from the end."""
    excess = Counter(a)
    excess.subtract(Counter(b))
    n = 0
    for sig in reversed(a):
        if excess[sig] <= 0:
            break
        excess[sig] -= 1
        n += 1
    return n


def control_flow(baseline: Sequence[str], perturbed: Sequence[str], comparison: Comparison) -> ControlFlow:
    """Reroutes, early termination and extended execution of a compared pair."""
    reroutes = 0
    for p in comparison.alignment:
        if p.op == "substitution":
            a, b = signature_agent(baseline[p.i]), signature_agent(perturbed[p.j])  # type: ignore[index]
            # An event without an agent (a phase marker, a tally) is nobody's turn.
            reroutes += a != "-" and b != "-" and a != b
    shorter = len(baseline) - len(perturbed)
    early = min(_missing_at_end(baseline, perturbed), max(0, shorter))
    extended = min(_missing_at_end(perturbed, baseline), max(0, -shorter))
    return ControlFlow(reroutes, early > 0, early, extended > 0, extended, reroutes + early + extended)


CATEGORIES = (
    "catastrophic_failure",
    "early_termination",
    "loop_or_extended_execution",
    "silent_semantic_corruption",
    "strategy_reroute",
    "structural_divergence_with_outcome_change",
    "structural_divergence_recovered",
    "no_observable_effect",
    "outcome_change_uncategorized",
)

# The roll-up of traxr (github.com/anna-mazhar/traxr, metrics/manifest.py), the
# tool the perturbation metrics come from, so that group counts compare with its.
GROUPS = {
    "catastrophic_failure": "combined_disruption",
    "early_termination": "combined_disruption",
    "loop_or_extended_execution": "behavioral_detours",
    "strategy_reroute": "behavioral_detours",
    "structural_divergence_with_outcome_change": "behavioral_detours",
    "structural_divergence_recovered": "behavioral_detours",
    "silent_semantic_corruption": "silent_corruption",
    "outcome_change_uncategorized": "silent_corruption",
    "no_observable_effect": "no_observable_effect",
}

#: A d_norm at or below this counts as "no structural change" for silent corruption.
SILENT_D_NORM = 1e-9


def classify_manifestation(
    answer_changed: bool,
    perturbed_answer_is_null: bool,
    early_termination: bool,
    extended_execution: bool,
    reroutes: int | None,
    total_changes: int | None,
    d_norm: float | None,
) -> str:
    """The manifestation category of a pair; the first rule that holds wins.

    The rules and their order are traxr's, for every input, consistent or not.
    ``d_norm`` may be None or NaN (no distance measured); ``reroutes`` and
    ``total_changes`` of None count as 0. With ``d`` the distance:

    1. catastrophic_failure: null answer, and early termination or d >= 0.5;
    2. early_termination;
    3. loop_or_extended_execution: extended execution, and total_changes >= 3 or d >= 0.2;
    4. silent_semantic_corruption: the answer changed, d <= 1e-9 (zero, a rounding
       residue or negative) and total_changes == 0 (the control-flow flags alone
       do not block it);
    5. strategy_reroute: reroutes > 0;
    6. d > 0 or total_changes > 0: structural_divergence_with_outcome_change when
       the answer changed, else structural_divergence_recovered;
    7. no_observable_effect: the answer did not change;
    8. outcome_change_uncategorized: the rest (an answer changed with no distance
       measured, or with a negative total_changes).
    """
    d = None if d_norm is None or math.isnan(d_norm) else float(d_norm)
    changes = total_changes or 0
    if perturbed_answer_is_null and (early_termination or (d is not None and d >= 0.5)):
        return "catastrophic_failure"
    if early_termination:
        return "early_termination"
    if extended_execution and (changes >= 3 or (d is not None and d >= 0.2)):
        return "loop_or_extended_execution"
    if answer_changed and d is not None and d <= SILENT_D_NORM and changes == 0:
        return "silent_semantic_corruption"
    if (reroutes or 0) > 0:
        return "strategy_reroute"
    if (d is not None and d > 0) or changes > 0:
        return "structural_divergence_with_outcome_change" if answer_changed else "structural_divergence_recovered"
    if not answer_changed:
        return "no_observable_effect"
    return "outcome_change_uncategorized"


def manifestation_group(category: str) -> str:
    """The group of a category: silent_corruption, behavioral_detours,
    combined_disruption or no_observable_effect (traxr's roll-up).

    Raises:
        ValueError: for an unknown category.
    """
    try:
        return GROUPS[category]
    except KeyError:
        raise ValueError(f"category: must be one of {', '.join(CATEGORIES)}; got {category!r}") from None
