"""Divergence metrics: distance, alignment, t*, control flow, manifestation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcore.analysis.divergence import (
    CATEGORIES,
    classify_manifestation,
    comparable_signatures,
    compare_signatures,
    control_flow,
    manifestation_group,
)
from simcore.sim.trace import RACE, TraceEvent

sigs = st.lists(st.sampled_from(["a|X|", "b|X|", "a|Y|", "c|-|"]), max_size=12)


def reference_levenshtein(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@given(sigs, sigs)
def test_distance_alignment_and_t_star_properties(a, b):
    c = compare_signatures(a, b)
    assert c.distance == reference_levenshtein(a, b)
    assert c.distance == c.substitutions + c.insertions + c.deletions
    assert 0.0 <= c.d_norm <= 1.0
    # the alignment rebuilds both sequences
    assert [a[p.i] for p in c.alignment if p.i is not None] == a
    assert [b[p.j] for p in c.alignment if p.j is not None] == b
    for p in c.alignment:
        if p.op == "match":
            assert a[p.i] == b[p.j]
        if p.op == "substitution":
            assert a[p.i] != b[p.j]
    if c.distance == 0:
        assert c.t_star is None and c.t_star_norm is None
    else:
        assert c.alignment[c.t_star].op != "match"
        assert all(p.op == "match" for p in c.alignment[: c.t_star])
        assert 0.0 <= c.t_star_norm < 1.0
        assert c.t_star_norm == c.t_star / len(c.alignment)
    assert compare_signatures(b, a).distance == c.distance


def test_empty_and_identical():
    assert compare_signatures([], []).d_norm == 0.0
    c = compare_signatures(["x"], ["x"])
    assert (c.distance, c.t_star) == (0, None)


def test_tie_breaking_prefers_match_then_substitution_then_insertion():
    c = compare_signatures(["x", "y"], ["y"])
    assert [p.op for p in c.alignment] == ["deletion", "match"]
    assert c.t_star == 0 and c.t_star_norm == 0.0
    c = compare_signatures(["x"], ["y"])
    assert [p.op for p in c.alignment] == ["substitution"]
    c = compare_signatures(["x"], ["y", "x"])
    assert [p.op for p in c.alignment] == ["insertion", "match"]
    # from the end: substitution is preferred over insertion+deletion
    c = compare_signatures(["a", "b"], ["a", "c"])
    assert [p.op for p in c.alignment] == ["match", "substitution"]
    assert c.t_star == 1 and c.t_star_norm == 0.5


def test_control_flow():
    base = ["call|A|", "reply|A|", "call|B|", "reply|B|"]
    rerouted = ["call|A|", "reply|A|", "call|C|", "reply|C|"]
    cf = control_flow(base, rerouted, compare_signatures(base, rerouted))
    assert cf.reroutes == 2 and not cf.early_termination and not cf.extended_execution
    # a turn against an event of nobody (a phase marker) is not a reroute
    marker = ["call|A|", "reply|A|", "phase|-|phase=x", "reply|B|"]
    cf = control_flow(base, marker, compare_signatures(base, marker))
    assert cf.reroutes == 0 and cf.total_changes == 0
    short = base[:2]
    cf = control_flow(base, short, compare_signatures(base, short))
    assert cf.early_termination and cf.early_termination_count == 2
    # a run that fails: its last event is paired with the baseline's last one by
    # substitution, yet the baseline's last three events never happen in it
    failed = ["call|A|", "reply|A|", "error|B|"]
    c = compare_signatures(base + ["end|-|"], failed)
    assert c.alignment[-1].op == "substitution"
    cf = control_flow(base + ["end|-|"], failed, c)
    assert cf.early_termination and cf.early_termination_count == 2  # 3 missing, 2 fewer events
    assert not cf.extended_execution  # the error replaces an event; the run is not longer
    # repeated signatures are counted with their multiplicity
    rounds = ["a|X|", "b|Y|"] * 3
    cf = control_flow(rounds, rounds[:3], compare_signatures(rounds, rounds[:3]))
    assert cf.early_termination_count == 3 and not cf.extended_execution
    # a turn dropped in the middle is no early termination
    dropped = ["call|A|", "reply|A|", "end|-|"]
    cf = control_flow(base + ["end|-|"], dropped, compare_signatures(base + ["end|-|"], dropped))
    assert not cf.early_termination and not cf.extended_execution
    # replies reordered at the end: nothing is missing
    reordered = ["call|A|", "reply|B|", "call|B|", "reply|A|"]
    cf = control_flow(base, reordered, compare_signatures(base, reordered))
    assert not cf.early_termination and not cf.extended_execution
    longer = base + ["call|A|", "reply|A|", "call|A|"]
    cf = control_flow(base, longer, compare_signatures(base, longer))
    assert cf.extended_execution and cf.extended_execution_count == 3 and cf.total_changes == 3


# (answer_changed, answer_null, early_termination, extended_execution, reroutes,
#  total_changes, d_norm) -> category. Derived by hand from the rules of traxr's
#  metrics/manifest.py (the tool the perturbation metrics come from), including
#  inputs that our own pair metrics never produce.
NAN = float("nan")
TRAXR_CASES = [
    # consistent inputs, one per category
    ((True, True, True, False, 0, 1, 0.1), "catastrophic_failure"),
    ((True, True, False, False, 0, 0, 0.6), "catastrophic_failure"),
    ((False, True, False, False, 0, 0, 0.5), "catastrophic_failure"),  # the bound is inclusive
    ((False, False, True, False, 0, 2, 0.1), "early_termination"),
    ((True, True, False, False, 0, 2, 0.49), "structural_divergence_with_outcome_change"),
    ((False, False, False, True, 0, 3, 0.05), "loop_or_extended_execution"),
    ((False, False, False, True, 0, 1, 0.2), "loop_or_extended_execution"),
    ((False, False, False, True, 0, 2, 0.19), "structural_divergence_recovered"),
    ((True, False, False, False, 0, 0, 0.0), "silent_semantic_corruption"),
    ((False, False, False, False, 2, 2, 0.1), "strategy_reroute"),
    ((True, False, False, False, 1, 1, 0.1), "strategy_reroute"),
    ((True, False, False, False, 0, 0, 0.1), "structural_divergence_with_outcome_change"),
    ((False, False, False, False, 0, 0, 0.1), "structural_divergence_recovered"),
    ((False, False, False, False, 0, 0, 0.0), "no_observable_effect"),
    # the answer changed with a tiny or negative d_norm: still silent
    ((True, False, False, False, 0, 0, 1e-12), "silent_semantic_corruption"),
    ((True, False, False, False, 0, 0, 1e-9), "silent_semantic_corruption"),
    ((True, False, False, False, 0, 0, 2e-9), "structural_divergence_with_outcome_change"),
    ((True, False, False, False, 0, 0, -0.1), "silent_semantic_corruption"),
    # total_changes > 0 with d_norm 0: a structural divergence
    ((True, False, False, False, 0, 2, 0.0), "structural_divergence_with_outcome_change"),
    ((False, False, False, False, 0, 1, 0.0), "structural_divergence_recovered"),
    ((False, False, False, True, 0, 1, 0.0), "structural_divergence_recovered"),
    # extended execution flagged but nothing counted: the flag alone blocks nothing
    ((False, False, False, True, 0, 0, 0.0), "no_observable_effect"),
    ((True, False, False, True, 0, 0, 0.0), "silent_semantic_corruption"),
    # reroutes with d_norm 0
    ((False, False, False, False, 2, 2, 0.0), "strategy_reroute"),
    ((True, False, False, False, 1, 1, 0.0), "strategy_reroute"),
    ((True, False, False, False, 1, 0, 0.0), "silent_semantic_corruption"),  # total_changes decides first
    ((False, False, False, False, 1, 0, 0.0), "strategy_reroute"),
    # no distance measured (None or NaN)
    ((True, False, False, False, 0, 0, None), "outcome_change_uncategorized"),
    ((True, False, False, False, 0, 0, NAN), "outcome_change_uncategorized"),
    ((False, False, False, False, 0, 0, None), "no_observable_effect"),
    ((False, True, False, False, 0, 0, NAN), "no_observable_effect"),
    ((True, True, True, False, 0, 0, None), "catastrophic_failure"),
    ((True, False, False, False, 0, 1, None), "structural_divergence_with_outcome_change"),
    ((False, False, False, True, 0, 3, None), "loop_or_extended_execution"),
    ((False, False, False, False, None, None, 0.0), "no_observable_effect"),
    # a negative total_changes: neither silent nor structural
    ((True, False, False, False, 0, -1, 0.0), "outcome_change_uncategorized"),
    ((False, False, False, False, 0, -1, 0.0), "no_observable_effect"),
]


@pytest.mark.parametrize("args, expected", TRAXR_CASES)
def test_classification_matches_traxr(args, expected):
    assert classify_manifestation(*args) == expected


def test_groups_match_traxr():
    assert {c: manifestation_group(c) for c in CATEGORIES} == {
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


def test_every_category_has_a_group():
    groups = {manifestation_group(c) for c in CATEGORIES}
    assert groups == {"silent_corruption", "behavioral_detours", "combined_disruption", "no_observable_effect"}
    with pytest.raises(ValueError, match="^category: "):
        manifestation_group("nonsense")


# -- concurrent replies compare as a set -------------------------------------------

def ev(t, kind, agent=None, **fields):
    return TraceEvent(0, t, kind, agent, fields)


def batch(arrival, race=False, bids=False, t0=0.0, phase="p"):
    """Calls of A, B, C at t0 (in that order), replies arriving in ``arrival`` order."""
    out = [ev(t0, RACE, phase=phase)] if race else []
    out += [ev(t0, "llm.call", a, phase=phase) for a in "ABC"]
    for k, a in enumerate(arrival, 1):
        out.append(ev(t0 + k, "llm.reply", a, phase=phase))
        if bids:
            out.append(ev(t0 + k, "bid", a, phase="auction", on_time=True))
    return out


def test_reordered_parallel_replies_are_no_divergence():
    base, other = batch("ABC"), batch("BAC")
    assert [e.signature for e in base] != [e.signature for e in other]
    a, b = comparable_signatures(base), comparable_signatures(other)
    assert a == b == [e.signature for e in base]
    c = compare_signatures(a, b)
    assert c.distance == 0 and control_flow(a, b, c).reroutes == 0
    # without the canonical order the same pair counted two reroutes
    raw_a, raw_b = [e.signature for e in base], [e.signature for e in other]
    assert control_flow(raw_a, raw_b, compare_signatures(raw_a, raw_b)).reroutes == 2


def test_a_race_keeps_arrival_order():
    a, b = comparable_signatures(batch("ABC", race=True)), comparable_signatures(batch("BAC", race=True))
    assert a == [e.signature for e in batch("ABC", race=True)]
    c = compare_signatures(a, b)
    assert c.distance > 0 and control_flow(a, b, c).reroutes > 0
    # a race event of other fields, or of another instant, marks nothing
    other = [ev(0.0, RACE, phase="q")] + batch("CAB")
    later = [ev(-1.0, RACE, phase="p")] + batch("CAB")
    assert comparable_signatures(other)[1:] == comparable_signatures(later)[1:] == comparable_signatures(batch("ABC"))


def test_arrival_records_travel_with_their_reply():
    a, b = comparable_signatures(batch("ABC", bids=True)), comparable_signatures(batch("BCA", bids=True))
    assert a == b
    assert a[3:] == ["llm.reply|A|phase=p", "bid|A|on_time=True,phase=auction",
                     "llm.reply|B|phase=p", "bid|B|on_time=True,phase=auction",
                     "llm.reply|C|phase=p", "bid|C|on_time=True,phase=auction"]


def test_what_follows_the_batch_stays_in_place():
    # after the last reply, the protocol's own events (ballots in agent order) stay put,
    # even when the last reply is A's and A's ballot comes first
    tail = [ev(3.0, "ballot", a, phase="p") for a in "ABC"] + [ev(3.0, "decision", phase="p")]
    a = comparable_signatures(batch("BCA") + tail)
    b = comparable_signatures(batch("ABC") + tail)
    assert a == b
    # an event of someone else in the middle keeps its place
    mid = batch("CBA")
    mid.insert(5, ev(1.5, "message", "Z"))
    out = comparable_signatures(mid)
    assert out[5] == "message|Z|" and out[3:5] + out[6:] == comparable_signatures(batch("ABC"))[3:]


def test_calls_answered_before_the_next_is_made_are_sequential():
    # zero-duration replies: B is asked after A's reply, at the same instant
    seq = [ev(0.0, "llm.call", "A"), ev(0.0, "llm.reply", "A"), ev(0.0, "llm.call", "B"), ev(0.0, "llm.reply", "B")]
    assert comparable_signatures(seq) == [e.signature for e in seq]
    swapped = [seq[2], seq[3], seq[0], seq[1]]
    assert comparable_signatures(swapped) == [e.signature for e in swapped]
    # a call made later is a batch of its own; an unanswered call leaves the rest alone
    two = batch("CBA") + [ev(9.0, "llm.call", "A", phase="p"), ev(10.0, "llm.error", "A", phase="p")]
    assert comparable_signatures(two)[-2:] == ["llm.call|A|phase=p", "llm.error|A|phase=p"]
    cut = batch("CB")
    assert comparable_signatures(cut)[3:] == ["llm.reply|B|phase=p", "llm.reply|C|phase=p"]


@given(st.permutations(range(5)), st.permutations(range(5)))
def test_any_arrival_order_of_a_batch_compares_equal(p, q):
    names = ["A", "B", "C", "D", "E"]

    def trace(order):
        out = [ev(0.0, "phase", phase="x")] + [ev(0.0, "llm.call", n, phase="x") for n in names]
        out += [ev(1.0 + k, "llm.reply", names[i], phase="x") for k, i in enumerate(order)]
        return out + [ev(9.0, "phase", phase="y")]

    a, b = trace(p), trace(q)
    assert comparable_signatures(a) == comparable_signatures(b)
    assert sorted(comparable_signatures(a)) == sorted(e.signature for e in a)
