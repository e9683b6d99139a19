"""The reply corpus (tests/corpus): every reader against replies in the forms real models write.

A misread fails the test; flagging a readable reply as unreadable is tolerated
below 5% per kind (issue 13). The schemas here are the ones the corpus's prompts
asked for (tests/corpus/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from simcore.replies.reading import read_reply
from simcore.replies.schema import (
    amount,
    choice,
    confidence,
    flag,
    likert,
    option,
    text,
)
from tests.corpus.check_corpus import KINDS, load_corpus


@dataclass(frozen=True, kw_only=True)
class Decision:
    reasoning: str | None = text(required=False)
    action: str = choice("COOPERATE", "DEFECT")


@dataclass(frozen=True, kw_only=True)
class Vote:
    option: str = option(texts=("Warn the patient's family", "Keep the confidence", "Ask the ethics board",
                                 "Consult a lawyer"))


@dataclass(frozen=True, kw_only=True)
class Rating:
    reasoning: str | None = text(required=False)
    rating: int = likert()


@dataclass(frozen=True, kw_only=True)
class Floor:
    reasoning: str | None = text(required=False)
    amount: int = amount("amount", "floor", "floor income", lo=1, integer=True, period="year")


@dataclass(frozen=True, kw_only=True)
class Conf:
    answer: str | None = text(required=False)
    confidence: float = confidence(required=True)


@dataclass(frozen=True, kw_only=True)
class Bid:
    reasoning: str | None = text(required=False)
    bid: float = amount("bid", lo=0, hi=100, zero_words=True)


@dataclass(frozen=True, kw_only=True)
class Final:
    final_answer: str = text("final position", "answer", "position", "vote")
    final_confidence: float | None = confidence("final confidence", "confidence")
    changed_position: bool | None = flag("changed", "position changed")
    reason_for_change: str | None = text("reason", "reason for change", required=False)


SCHEMAS = {"decision": (Decision, "action"), "option": (Vote, "option"), "likert": (Rating, "rating"),
           "amount": (Floor, "amount"), "confidence": (Conf, "confidence"), "bid": (Bid, "bid"),
           "final": (Final, None)}
TOLERATED_FLAGS = 0.05


def reading_of(value: Any, field: str | None) -> Any:
    if field is not None:
        return getattr(value, field)
    return {k: getattr(value, k) for k in ("final_answer", "final_confidence", "changed_position", "reason_for_change")}


def agrees(got: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        return all(agrees(got[k], v) for k, v in expected.items())
    if isinstance(expected, float) or isinstance(got, float):
        return got is not None and expected is not None and abs(float(got) - float(expected)) < 1e-9
    return got == expected


@pytest.mark.parametrize("kind", KINDS)
def test_every_reply_is_read_as_meant_or_flagged(kind):
    schema, field = SCHEMAS[kind]
    misread, flagged, readable = [], [], 0
    for e in load_corpus(kind):
        r = read_reply(e["reply"], schema, finish_reason=e["finish_reason"])
        if e["expect"] == "unreadable":
            if r.readable:
                misread.append(f"{e['id']}: read {reading_of(r.value, field)!r}, expected unreadable")
            continue
        readable += 1
        if not r.readable:
            flagged.append(e["id"])
        elif not agrees(reading_of(r.value, field), e["expect"]):
            misread.append(f"{e['id']}: read {reading_of(r.value, field)!r}, expected {e['expect']!r}")
    assert not misread, "\n".join(misread)
    assert len(flagged) < TOLERATED_FLAGS * readable, f"flagged readable replies: {flagged}"
