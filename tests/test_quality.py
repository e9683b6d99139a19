"""Parse quality: one count per turn, under the reading of its last attempt."""

from __future__ import annotations

from simcore.replies.quality import (
    ParseQuality,
    columns,
    summary_lines,
    unreadable_share,
    warnings,
)
from simcore.replies.reading import FieldFlag, Reading

JSON, LABEL = Reading(object(), "json"), Reading(object(), "label")
BAD, CUT_BAD = Reading(None, "unreadable", False, ("x",)), Reading(None, "unreadable", True, ("x",))
SALVAGED = Reading(object(), "json", True)


def test_each_turn_counts_once_under_its_final_reading():
    q = ParseQuality()
    q.record("vote", JSON)
    q.record("vote", LABEL)
    q.record("vote", CUT_BAD)
    q.record("vote", JSON, (CUT_BAD,))  # the re-ask of the cut reply, read
    q.record("vote", BAD)
    q.record("vote", BAD, (BAD,))  # re-asked once, still unreadable
    q.record("vote", BAD, (BAD, BAD))  # and twice
    q.record("vote", SALVAGED)
    c = q.to_dict()["vote"]
    assert c == {"replies": 5, "json": 3, "label": 1, "prose": 0, "unreadable": 1, "reasoning_cut": 0, "truncated": 2,
                 "salvaged": 1, "reasked": 2, "reask_read": 1, "lowered": 0,
                 "echo": 0, "partial": 0}
    assert sum(c[k] for k in ("json", "label", "prose", "unreadable")) == c["replies"]


def test_budgets_lowered_to_fit_the_window_are_counted_and_said():
    from simcore.replies.quality import summary_lines

    q = ParseQuality()
    q.record("vote", JSON)
    q.lowered("vote")
    q.lowered("vote")  # (a call and its re-ask)
    c = q.to_dict()["vote"]
    assert c["lowered"] == 2 and c["replies"] == 1
    lines = summary_lines(q.to_dict())
    assert "every one read as JSON" not in " ".join(lines)
    assert lines[1].endswith("0 re-asked; 0 echoes, 0 partial, 2 with a budget lowered to fit the context window")


def test_echoes_and_partial_readings_are_counted_among_the_unreadable_by_their_last_attempt():
    echo = Reading(None, "unreadable", False, ("repeats what it was given",), echo=True)
    partial = Reading(None, "unreadable", False, ("b: missing",), (("a", 3),), (FieldFlag("b", "", "missing"),))
    q = ParseQuality()
    q.record("rating", echo)
    q.record("rating", partial)
    q.record("rating", echo)
    q.record("rating", partial, (echo,))  # the re-ask of an echo gave one field of two
    q.record("rating", JSON, (echo, partial))  # and the second re-ask the other
    c = q.to_dict()["rating"]
    assert (c["replies"], c["unreadable"], c["echo"], c["partial"], c["json"]) == (3, 2, 1, 1, 1)
    assert partial.kept_some and not echo.kept_some and not JSON.kept_some
    assert any("1 echoes, 1 partial" in line for line in summary_lines(q.to_dict()))


def test_warning_above_two_percent_unreadable():
    q = {"vote": {"replies": 100, "unreadable": 2}, "rating": {"replies": 40, "unreadable": 1}}
    assert warnings(q) == [w for w in warnings(q) if "rating" in w] and len(warnings(q)) == 1
    assert unreadable_share(q) == 3 / 140 and unreadable_share({}) is None


def test_summary_and_columns():
    q = ParseQuality()
    q.record("decision", BAD)
    d = q.to_dict()
    assert any("decision" in line and "1 of 1" not in line for line in summary_lines(d))
    assert any("WARNING: 1 of 1 decision replies" in line for line in summary_lines(d))
    assert columns(d)["parse.decision.unreadable"] == 1 and columns(d)["parse.decision.replies"] == 1


def test_an_all_json_run_gets_one_line():
    q = ParseQuality()
    q.record("vote", JSON)
    q.record("turn", JSON)
    assert summary_lines(q.to_dict()) == ["  replies: 2, every one read as JSON"]


def test_a_slot_answered_only_on_its_reask_is_recorded_and_a_reasoning_cut_is_no_answer():
    from simcore.analysis.readability import arm_of

    cut = Reading(None, "reasoning_cut", False, ("no answer",))
    q = ParseQuality()
    q.record("vote", BAD, slot="A")
    q.record("vote", JSON, (BAD,), slot="A")  # answered on its re-ask
    q.record("vote", cut, slot="B")
    q.record("vote", cut, (cut,), slot="B")  # cut by its reasoning again: no answer
    assert q.slots()["reask_read"] == ["vote|A#0"] and q.slots()["unreadable"] == []
    arm = arm_of({"parse_quality": q.to_dict(), "reply_slots": q.slots()})
    assert (arm.replies, arm.unreadable, arm.reasoning_cut, arm.answers, arm.reask_read) == (2, 0, 1, 1, 1)
