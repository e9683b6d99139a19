"""What a figure rests on, and how the terminal shows it."""

from __future__ import annotations

from simcore.analysis.basis import Basis, basis, shares, shown


def test_basis_reason_only_when_something_was_left_out():
    assert basis(3, 3, "peers") == Basis(3, 3, "peers", None)
    assert basis(2, 3, "peers").reason == "1 of 3 peers unreadable or missing"
    assert basis(0, 4, "moves", "4 fallback moves").reason == "4 fallback moves"
    assert basis(2, 4, "agents").share == 0.5 and Basis(0, 0).share is None


def test_shown_says_n_when_partial_and_why_when_none():
    assert shown(-0.42, basis(2, 3, "peers"), "+.3f") == "-0.420 (2 of 3 peers readable)"
    assert shown(0.5, basis(3, 3, "peers")) == "0.500"
    assert shown(None, basis(0, 15, "agents", "15 of 15 rating replies unreadable")) == (
        "n/a (15 of 15 rating replies unreadable)")
    assert shown(None, None) == "n/a"
    assert shown(0.292, {"n": 11, "of": 24, "unit": "moves"}, ".1%") == "29.2% (11 of 24 moves readable)"


def test_shares_are_table_columns():
    assert shares({"x": {"n": 1, "of": 4}, "y": {"n": 0, "of": 0}}) == {"readable.x": 0.25, "readable.y": None}
