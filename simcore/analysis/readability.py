"""Readability as data: whether two arms' replies could be read equally often.

Metrics are computed on the replies that could be read. Where one arm's replies could
be read far less often than the other's, its metrics rest on a different subpopulation
of replies, and a difference between the arms may be a difference in what could be
read. So every comparison also tests whether the share of unreadable replies differs
between its arms, and says so where it does:
``arms differ in what could be read (83% vs 20% unreadable, p = 0.001)``.

The test is exact, and its unit the reply:

- **paired arms** (trials sharing a seed) whose runs asked the same questions: the
  reply slots of the two runs of a seed (kind, agent and structural fields, numbered
  where they repeat; :meth:`simcore.replies.quality.ParseQuality.slots`) are matched
  one to one, and the exact McNemar test compares the slots unreadable in one arm only
  with those unreadable in the other only;
- otherwise (unpaired arms, or runs whose slots differ: one mechanism asks for bids
  the other never asks for, one deliberation ends a round earlier, a run written
  before slots were recorded): Fisher's exact test on the arms' pooled counts.

Replies of one run are not independent draws (a model that cannot follow the format
fails it again), so either test reads a difference as surer than it is: a mark is a
warning to look, and a false one costs a look, where a missing one would let a
difference in what could be read pass for an effect.

Each comparison's readability test is a family of its own, separate from its metrics'
(so it never changes their decisions): Holm across the comparisons a command makes at
once (the mechanism pairs of ``llm_auction compare``), one test elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from simcore.analysis import stats
from simcore.replies.reading import UNREADABLE

ALPHA = stats.ALPHA


@dataclass(frozen=True)
class Arm:
    """The replies of one run (or of an arm pooled): how many, how many unreadable, and
    its reply slots when recorded (:meth:`~simcore.replies.quality.ParseQuality.slots`)."""

    replies: int
    unreadable: int
    slots: Mapping[str, Any] | None = None


def arm_of(results: Mapping[str, Any]) -> Arm:
    """One run's replies from its results (``parse_quality`` and ``reply_slots``)."""
    quality = results.get("parse_quality") or {}
    return Arm(sum(int(c.get("replies", 0)) for c in quality.values()),
               sum(int(c.get(UNREADABLE, 0)) for c in quality.values()),
               results.get("reply_slots"))


def _pooled(arms: Sequence[Arm]) -> tuple[int, int]:
    return sum(a.replies for a in arms), sum(a.unreadable for a in arms)


def discordant(a: Arm, b: Arm) -> tuple[int, int] | None:
    """The slots unreadable in run ``a`` only and in run ``b`` only, where the two runs'
    slots match one to one (None where they do not, or were not recorded)."""
    sa, sb = a.slots, b.slots
    if sa is None or sb is None or sa.get("digest") != sb.get("digest") or not (
            sa.get("turns") == a.replies == sb.get("turns") == b.replies):
        return None
    ua, ub = set(sa.get("unreadable") or ()), set(sb.get("unreadable") or ())
    return len(ua - ub), len(ub - ua)


def compare(a: Sequence[Arm], b: Sequence[Arm], *, paired: bool) -> dict[str, Any]:
    """The readability test of arm A against arm B (before its family's adjustment).

    Args:
        a: Arm A's runs.
        b: Arm B's runs; paired by position when ``paired``.
        paired: Whether run i of A and run i of B share a seed.

    Returns:
        See :func:`from_counts`.
    """
    pairs = [discordant(x, y) for x, y in zip(a, b)] if paired and len(a) == len(b) else None
    return from_counts(_pooled(a), _pooled(b), pairs)


def from_counts(arm_a: tuple[int, int], arm_b: tuple[int, int],
                pairs: Sequence[tuple[int, int] | None] | None = None) -> dict[str, Any]:
    """The readability test from counts: each arm's (replies, unreadable), and for paired
    arms each pair of runs' :func:`discordant` slots.

    Returns:
        ``replies_a``, ``unreadable_a``, ``share_a`` (unreadable share) and the same for
        B, ``test`` and ``unit`` (what was compared), ``p_value`` (or ``not_tested``
        with the reason); under McNemar, ``only_a`` and ``only_b`` (slots unreadable in
        one arm only).
    """
    (n_a, u_a), (n_b, u_b) = arm_a, arm_b
    out: dict[str, Any] = {
        "replies_a": n_a, "unreadable_a": u_a, "share_a": u_a / n_a if n_a else None,
        "replies_b": n_b, "unreadable_b": u_b, "share_b": u_b / n_b if n_b else None,
        "test": None, "unit": None, "p_value": None, "not_tested": None,
    }
    if not n_a or not n_b:
        out["not_tested"] = "no reply asked for a format in " + ("either arm" if not n_a and not n_b
                                                                   else "arm A" if not n_a else "arm B")
        return out
    if pairs and all(p is not None for p in pairs):
        only_a, only_b = sum(p[0] for p in pairs), sum(p[1] for p in pairs)  # type: ignore[index]
        out.update(test="exact McNemar", only_a=only_a, only_b=only_b, p_value=stats.mcnemar_exact(only_a, only_b),
                   unit=f"{n_a} reply slots paired by kind, agent and fields across {len(pairs)} shared-seed "
                        f"pair{'' if len(pairs) == 1 else 's'} of runs")
        return out
    why = "unpaired arms" if pairs is None else "the arms' runs asked different questions"
    out.update(test="Fisher's exact", p_value=stats.fisher_exact(u_a, n_a, u_b, n_b),
               unit=f"replies pooled per arm ({why})")
    return out


def decide(records: Mapping[Any, dict[str, Any]], *, family: str = "comparisons",
           alpha: float = ALPHA) -> dict[Any, dict[str, Any]]:
    """One family of readability tests: Holm across them; each record gets ``family``,
    ``p_adjusted``, ``differs`` (adjusted p < alpha) and, where it differs, ``mark``."""
    keys = [k for k in records if records[k].get("p_value") is not None]
    adjusted = dict(zip(keys, stats.holm([records[k]["p_value"] for k in keys])))
    m = len(keys)
    name = f"its own: Holm across {m} {family}" if m > 1 else "its own (one test)"
    out = {}
    for k, rec in records.items():
        p = adjusted.get(k)
        rec = {**rec, "family": name, "p_adjusted": p, "differs": None if p is None else p < alpha, "mark": None}
        if rec["differs"]:
            rec["mark"] = (f"arms differ in what could be read ({rec['share_a']:.0%} vs {rec['share_b']:.0%} "
                           f"unreadable, p = {p:.2g})")
        out[k] = rec
    return out


Runs = Sequence[Arm | Mapping[str, Any]]  # each run as its Arm, or its results (read by arm_of)


def of_runs(comparisons: Mapping[Any, tuple[Runs, Runs]], *, paired: bool = True, family: str = "comparisons",
          alpha: float = ALPHA) -> dict[Any, dict[str, Any]]:
    """The readability records of a command's comparisons, one family (:func:`compare` for each,
    then :func:`decide`): comparison key -> (arm A's runs, arm B's runs)."""
    def arms(runs: Runs) -> list[Arm]:
        return [r if isinstance(r, Arm) else arm_of(r) for r in runs]

    return decide({k: compare(arms(a), arms(b), paired=paired) for k, (a, b) in comparisons.items()},
                  family=family, alpha=alpha)


def one(a: Runs, b: Runs, *, paired: bool, alpha: float = ALPHA) -> dict[str, Any]:
    """A comparison's readability record, its test a family of one (:func:`of_runs`)."""
    return of_runs({0: (a, b)}, paired=paired, alpha=alpha)[0]


def readability_lines(record: Mapping[str, Any] | None, a: str = "a", b: str = "b", indent: str = "  ") -> list[str]:
    """A comparison's readability for the terminal: its mark where the arms differ, else a
    line only where some reply was unreadable (nothing when every reply could be read)."""
    if not record or record.get("p_value") is None:
        return []
    how = f"{record['test']}, {record['unit']}; family {record['family']}"
    if record.get("mark"):
        return [f"{indent}{record['mark']}: {how}"]
    if not (record.get("unreadable_a") or record.get("unreadable_b")):
        return []
    return [f"{indent}unreadable replies {a} {record['share_a']:.0%}, {b} {record['share_b']:.0%}: not different "
            f"(p = {record['p_adjusted']:.2g}; {how})"]
