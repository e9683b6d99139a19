"""The message board: visibility and removing an edge mid-run."""

from __future__ import annotations

import networkx as nx

from simcore.sim.messages import Board

NAMES = ["A", "B", "C"]


def texts(board: Board, name: str) -> list[str]:
    return [m.text for m in board.visible(name)]


def test_remove_edge_on_a_board_without_topology():
    board = Board(None)
    board.post(0, "A", "a1")
    board.post(0, "MOD", "moderator")  # not an agent: heard by all
    assert board.remove_edge("A", "B", NAMES)
    assert not board.broadcast
    board.post(1, "A", "a2")
    board.post(1, "C", "c1")
    board.post(2, "MOD", "moderator again")
    # B keeps what it heard, misses A's later message, still hears C and the moderator
    assert texts(board, "B") == ["a1", "moderator", "c1", "moderator again"]
    assert texts(board, "C") == ["a1", "moderator", "a2", "c1", "moderator again"]
    assert texts(board, "A") == ["a1", "moderator", "a2", "c1", "moderator again"]


def test_remove_edge_on_a_graph_copies_it_and_reports_missing_edges():
    ring = nx.DiGraph([("A", "B"), ("B", "C"), ("C", "A")])
    board = Board(ring)
    assert not board.remove_edge("B", "A", NAMES)  # A never heard B
    assert not board.remove_edge("A", "A", NAMES)
    assert board.remove_edge("A", "B", NAMES)
    assert ring.has_edge("A", "B")  # the caller's graph is untouched
    board.post(0, "A", "a1")
    assert texts(board, "B") == [] and texts(board, "A") == ["a1"]
