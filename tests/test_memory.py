"""Memory strategies."""

from __future__ import annotations

import pytest

from simcore.base.config import ConfigError
from simcore.sim.memory import FullMemory, RecentMemory, make_memory, render
from simcore.sim.messages import Message

MSGS = [Message(i, float(i), f"S{i}", "word " * 10) for i in range(6)]


def test_full_and_recent():
    assert FullMemory().select(MSGS) == MSGS
    assert RecentMemory(2).select(MSGS) == MSGS[-2:]
    assert make_memory("recent:3") == RecentMemory(3)
    assert make_memory("full") == FullMemory()


def test_budget_keeps_the_most_recent_that_fit():
    per_message = 1 + 13 + 1  # speaker, text and separator, in estimated tokens
    kept = FullMemory(budget_tokens=per_message * 2).select(MSGS)
    assert kept == MSGS[-2:]
    assert FullMemory(budget_tokens=1).select(MSGS) == []


def test_render_and_errors():
    assert render(MSGS[:2]).splitlines()[0].startswith("S0: word")
    for bad in ("recent:0", "recent:x", "summary", "full:2"):
        with pytest.raises(ConfigError, match="^memory: "):
            make_memory(bad)
