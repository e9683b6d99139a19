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

**Answers given only when asked again** are data too. A real backend re-asks a reply it
cannot read, and an answer that only the re-ask drew out (a first reply that predicted
the opponent's move, then the JSON when asked again) is counted like any other. Where
one arm's answers came from re-asks far more often than the other's, the arms differ in
how their answers were obtained. So each comparison also tests the share of its answers
(replies read) that came from a re-ask, by the same tests and with the same marks
(``record["reask"]``): the answer slots read in both arms of a shared-seed pair, matched
one to one, under McNemar; the arms' pooled answers under Fisher otherwise; Holm across
the comparisons' re-ask tests, a family of its own:
``arms differ in answers given only when asked again (62% vs 8% of answers came from a re-ask, p = 0.002)``.
Runs recorded before re-asked answers were counted are not tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from simcore.analysis import stats
from simcore.replies.reading import REASONING_CUT, UNREADABLE

ALPHA = stats.ALPHA


@dataclass(frozen=True)
class Arm:
    """The replies of one run (or of an arm pooled): how many, how many unreadable, its reply
    slots when recorded (:meth:`~simcore.replies.quality.ParseQuality.slots`), how many were
    answered only when asked again (None for a run recorded before they were counted), and how
    many were cut by the model's reasoning (no answer, yet not unreadable)."""

    replies: int
    unreadable: int
    slots: Mapping[str, Any] | None = None
    reask_read: int | None = None
    reasoning_cut: int = 0

    @property
    def answers(self) -> int:
        """The replies read (at first or on a re-ask)."""
        return self.replies - self.unreadable - self.reasoning_cut


def arm_of(results: Mapping[str, Any]) -> Arm:
    """One run's replies from its results (``parse_quality`` and ``reply_slots``)."""
    quality = results.get("parse_quality") or {}
    counted = all("reask_read" in c for c in quality.values())
    return Arm(sum(int(c.get("replies", 0)) for c in quality.values()),
               sum(int(c.get(UNREADABLE, 0)) for c in quality.values()),
               results.get("reply_slots"),
               sum(int(c["reask_read"]) for c in quality.values()) if counted else None,
               sum(int(c.get(REASONING_CUT, 0)) for c in quality.values()))


def _pooled(arms: Sequence[Arm]) -> tuple[int, int]:
    return sum(a.replies for a in arms), sum(a.unreadable for a in arms)


def _matched(a: Arm, b: Arm) -> bool:
    sa, sb = a.slots, b.slots
    return not (sa is None or sb is None or sa.get("digest") != sb.get("digest") or not (
        sa.get("turns") == a.replies == sb.get("turns") == b.replies))


def discordant(a: Arm, b: Arm) -> tuple[int, int] | None:
    """The slots unreadable in run ``a`` only and in run ``b`` only, where the two runs'
    slots match one to one (None where they do not, or were not recorded)."""
    if not _matched(a, b):
        return None
    ua, ub = set(a.slots.get("unreadable") or ()), set(b.slots.get("unreadable") or ())  # type: ignore[union-attr]
    return len(ua - ub), len(ub - ua)


def discordant_reasks(a: Arm, b: Arm) -> tuple[int, int] | None:
    """Of the slots answered in both runs, those answered only when asked again in run ``a`` only and
    in run ``b`` only, where the runs' slots match one to one and were recorded with their re-asked
    answers (None otherwise)."""
    if not _matched(a, b) or "reask_read" not in a.slots or "reask_read" not in b.slots:  # type: ignore[operator]
        return None
    sa, sb = a.slots, b.slots
    ua, ub = set(sa.get("unreadable") or ()), set(sb.get("unreadable") or ())  # type: ignore[union-attr]
    ra, rb = set(sa["reask_read"]) - ub, set(sb["reask_read"]) - ua  # type: ignore[index]
    return len(ra - rb), len(rb - ra)


def compare(a: Sequence[Arm], b: Sequence[Arm], *, paired: bool) -> dict[str, Any]:
    """The readability test of arm A against arm B, with the test of their answers given only
    when asked again (``reask``), before their families' adjustment.

    Args:
        a: Arm A's runs.
        b: Arm B's runs; paired by position when ``paired``.
        paired: Whether run i of A and run i of B share a seed.

    Returns:
        See :func:`from_counts`; ``reask`` as :func:`reask_from_counts`.
    """
    together = paired and len(a) == len(b)
    out = from_counts(_pooled(a), _pooled(b), [discordant(x, y) for x, y in zip(a, b)] if together else None)
    if any(x.reask_read is None for x in (*a, *b)):
        counts_a = counts_b = None
    else:
        counts_a = (sum(x.answers for x in a), sum(x.reask_read or 0 for x in a))
        counts_b = (sum(x.answers for x in b), sum(x.reask_read or 0 for x in b))
    out["reask"] = reask_from_counts(counts_a, counts_b,
                                     [discordant_reasks(x, y) for x, y in zip(a, b)] if together else None)
    return out


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
    }
    out.update(_test(arm_a, arm_b, pairs, "reply slots", "replies", "no reply asked for a format in"))
    return out


def reask_from_counts(arm_a: tuple[int, int] | None, arm_b: tuple[int, int] | None,
                      pairs: Sequence[tuple[int, int] | None] | None = None) -> dict[str, Any]:
    """The test of answers given only when asked again, from counts: each arm's (answers, answers that
    came from a re-ask), None for an arm whose runs did not count them; for paired arms each pair of
    runs' :func:`discordant_reasks` slots.

    Returns:
        ``answers_a``, ``reask_read_a``, ``share_a`` (the share of answers that came from a re-ask)
        and the same for B, and the test as :func:`from_counts` gives it.
    """
    if arm_a is None or arm_b is None:
        return {"answers_a": None, "reask_read_a": None, "share_a": None, "answers_b": None, "reask_read_b": None,
                "share_b": None, "test": None, "unit": None, "p_value": None,
                "not_tested": "runs recorded before answers given on a re-ask were counted"}
    (n_a, r_a), (n_b, r_b) = arm_a, arm_b
    out: dict[str, Any] = {
        "answers_a": n_a, "reask_read_a": r_a, "share_a": r_a / n_a if n_a else None,
        "answers_b": n_b, "reask_read_b": r_b, "share_b": r_b / n_b if n_b else None,
    }
    out.update(_test(arm_a, arm_b, pairs, "answer slots", "answers", "no reply was read in"))
    return out


def _test(arm_a: tuple[int, int], arm_b: tuple[int, int], pairs: Sequence[tuple[int, int] | None] | None,
          slots: str, units: str, none: str) -> dict[str, Any]:
    """McNemar on paired slots where every pair of runs matched one to one, else Fisher on the pooled
    (n, k) counts; ``not_tested`` where an arm has none."""
    (n_a, k_a), (n_b, k_b) = arm_a, arm_b
    out: dict[str, Any] = {"test": None, "unit": None, "p_value": None, "not_tested": None}
    if not n_a or not n_b:
        out["not_tested"] = f"{none} " + ("either arm" if not n_a and not n_b else "arm A" if not n_a else "arm B")
        return out
    if pairs and all(p is not None for p in pairs):
        only_a, only_b = sum(p[0] for p in pairs), sum(p[1] for p in pairs)  # type: ignore[index]
        out.update(test="exact McNemar", only_a=only_a, only_b=only_b, p_value=stats.mcnemar_exact(only_a, only_b),
                   unit=f"{n_a} {slots} paired by kind, agent and fields across {len(pairs)} shared-seed "
                        f"pair{'' if len(pairs) == 1 else 's'} of runs")
        return out
    why = "unpaired arms" if pairs is None else "the arms' runs asked different questions"
    out.update(test="Fisher's exact", p_value=stats.fisher_exact(k_a, n_a, k_b, n_b), unit=f"{units} pooled per arm ({why})")
    return out


def decide(records: Mapping[Any, dict[str, Any]], *, family: str = "comparisons",
           alpha: float = ALPHA) -> dict[Any, dict[str, Any]]:
    """One family of readability tests: Holm across them; each record gets ``family``,
    ``p_adjusted``, ``differs`` (adjusted p < alpha) and, where it differs, ``mark``. Their re-ask
    tests (``reask``, where present) are a family of their own, decided alike."""
    out = _decided(records, family, alpha, "arms differ in what could be read ({a:.0%} vs {b:.0%} unreadable, "
                                          "p = {p:.2g})")
    with_reask = {k: rec["reask"] for k, rec in records.items() if rec.get("reask") is not None}
    decided = _decided(with_reask, family, alpha, "arms differ in answers given only when asked again ({a:.0%} vs "
                                                  "{b:.0%} of answers came from a re-ask, p = {p:.2g})")
    return {k: {**rec, "reask": decided[k]} if k in decided else rec for k, rec in out.items()}


def _decided(records: Mapping[Any, dict[str, Any]], family: str, alpha: float, mark: str) -> dict[Any, dict[str, Any]]:
    keys = [k for k in records if records[k].get("p_value") is not None]
    adjusted = dict(zip(keys, stats.holm([records[k]["p_value"] for k in keys])))
    m = len(keys)
    name = f"its own: Holm across {m} {family}" if m > 1 else "its own (one test)"
    out = {}
    for k, rec in records.items():
        p = adjusted.get(k)
        rec = {**rec, "family": name, "p_adjusted": p, "differs": None if p is None else p < alpha, "mark": None}
        if rec["differs"]:
            rec["mark"] = mark.format(a=rec["share_a"], b=rec["share_b"], p=p)
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
    line only where some reply was unreadable (nothing when every reply could be read); and
    beside it, the same for its answers given only when asked again."""
    if not record:
        return []
    lines = _lines(record, "unreadable", "unreadable replies", a, b, indent)
    return lines + _lines(record.get("reask") or {}, "reask_read", "answers given only when asked again", a, b, indent)


def _lines(record: Mapping[str, Any], count: str, what: str, a: str, b: str, indent: str) -> list[str]:
    if record.get("p_value") is None or record.get("p_adjusted") is None:
        return []
    how = f"{record['test']}, {record['unit']}; family {record['family']}"
    if record.get("mark"):
        return [f"{indent}{record['mark']}: {how}"]
    if not (record.get(f"{count}_a") or record.get(f"{count}_b")):
        return []
    return [f"{indent}{what} {a} {record['share_a']:.0%}, {b} {record['share_b']:.0%}: not different "
            f"(p = {record['p_adjusted']:.2g}; {how})"]
