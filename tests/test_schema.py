"""Reply schemas: field kinds, their JSON schemas and how each reads one value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.replies.schema import (
    Amount,
    Choice,
    Confidence,
    Flag,
    Likert,
    Option,
    amount,
    choice,
    confidence,
    json_example,
    json_schema,
    plan,
    reply_kind,
    text,
)


@dataclass(frozen=True, kw_only=True)
class Move:
    KIND: ClassVar[str] = "decision"
    reasoning: str | None = text(required=False)
    action: str = choice("COOPERATE", "DEFECT")
    confidence: float | None = confidence()


def test_json_schema_keeps_declaration_order_reasoning_first():
    s = json_schema(Move)
    assert list(s["properties"]) == ["reasoning", "action", "confidence"]
    assert s["properties"]["action"] == {"enum": ["COOPERATE", "DEFECT"]}
    assert s["properties"]["confidence"] == {"type": "number", "minimum": 0.0, "maximum": 1.0}
    assert s["required"] == ["reasoning", "action", "confidence"]
    assert s["additionalProperties"] is False and s.canonical.startswith("{")
    assert json_example(Move) == '{"reasoning": str, "action": "COOPERATE" or "DEFECT", "confidence": number 0-1}'


def test_plan_marks_required_fields_and_aliases():
    fields = {f.name: f for f in plan(Move)}
    assert fields["action"].required and not fields["reasoning"].required
    assert "decision" in fields["action"].aliases and fields["action"].aliases[0] == "action"
    assert reply_kind(Move) == "decision"


def test_plain_annotations_get_kinds_from_their_types():
    @dataclass(frozen=True)
    class Vote:
        choice: Literal["yes", "no"]
        confidence: float = field(default=0.5, metadata={"range": (0.0, 1.0)})
        points: list[str] = field(default_factory=list)

    s = json_schema(Vote)
    assert s["properties"]["choice"] == {"enum": ["yes", "no"]}
    assert s["properties"]["confidence"] == {"type": "number", "minimum": 0.0, "maximum": 1.0}
    assert s["properties"]["points"] == {"type": "array", "items": {"type": "string"}}
    assert reply_kind(Vote) == "vote"


def test_an_optional_helper_field_must_default_to_none():
    @dataclass(frozen=True, kw_only=True)
    class Bad:
        x: float = field(default=0.5, metadata={"kind": Confidence()})

    with pytest.raises(TypeError, match="defaults to None"):
        plan(Bad)


@pytest.mark.parametrize("raw, value", [
    ("85%", 0.85), ("85", 0.85), ("0.85", 0.85), (0.85, 0.85), (85, 0.85), ("17/20", 0.85),
    ("1", 1.0), (0, 0.0), ("about 80% sure", 0.8), ("0.85 (85%)", 0.85), ("100%", 1.0),
])
def test_confidence_reads_every_scale(raw, value):
    got, err = Confidence().read(raw)
    assert err is None and got == pytest.approx(value)


@pytest.mark.parametrize("raw", [
    "150", 150, -0.2, "110%", "high", "very confident", "7", 1.5, "between 0.6 and 0.8", None, True, "",
])
def test_confidence_out_of_range_or_unclear_is_an_error_never_clamped(raw):
    got, err = Confidence().read(raw)
    assert got is None and err


@pytest.mark.parametrize("raw, value", [
    ("$12,000", 12000), ("12k", 12000), ("12 000", 12000), ("12,000 dollars", 12000), ("USD 12000", 12000),
    ("$12.5k", 12500), ("twelve thousand dollars", 12000), (12000, 12000), ("not $10,000 but $12,000", 12000),
    ("In 2024 terms, $12,000.", 12000), ("$12,000 rather than $10,000", 12000),
])
def test_amounts_in_every_form(raw, value):
    got, err = Amount(lo=1, integer=True).read(raw)
    assert err is None and got == value


@pytest.mark.parametrize("raw", ["between 10k and 12k", "$10,000 or $12,000", "-5", 0, "lots", "", None])
def test_unclear_or_out_of_range_amounts_are_errors(raw):
    got, err = Amount(lo=1, integer=True).read(raw)
    assert got is None and err


def test_bid_bounds_are_checked_not_clamped():
    bid = Amount(lo=0, hi=100)
    assert bid.read("$45.50") == (45.5, None)
    assert bid.read(120)[0] is None and "out of range" in bid.read(120)[1]


@pytest.mark.parametrize("raw, score", [
    ("strongly disagree", 1), ("Strongly_Disagree", 1), ("disagree", 2), ("Agree.", 3), ("STRONGLY AGREE", 4),
    ("4 - strongly agree", 4), ("3/4", 3), ("2 out of 4", 2), (4, 4), ("I agree, but not strongly", 3),
    ("Strongly agree. I don't disagree at all.", 4), ("I don't agree.", 2), ("I agree strongly", 4),
])
def test_likert(raw, score):
    assert Likert().read(raw) == (score, None)


@pytest.mark.parametrize("raw", [
    "I neither agree nor disagree", "neutral", "strongly", "5", 0, 2.5, "3 - strongly agree", "somewhat agree",
    "agree or disagree", None,
])
def test_likert_unclear_is_an_error(raw):
    assert Likert().read(raw)[0] is None


TEXTS = {"A": "Warn the patient's family", "B": "Keep the confidence", "C": "Ask the ethics board"}


@pytest.mark.parametrize("raw, key", [
    ("B", "B"), ("b)", "B"), ("(B)", "B"), ("**B**", "B"), ("Option B", "B"), ("option: B", "B"),
    ("B - because it protects trust", "B"), ("B) Keep it", "B"), ("B Keep the confidence", "B"),
    ("Keep the confidence", "B"), ("I'd go with B.", "B"), ("Not A. I vote B.", "B"), ("I vote for option C", "C"),
    ("B over A", "B"),
])
def test_option(raw, key):
    assert Option().read(raw, TEXTS) == (key, None)


@pytest.mark.parametrize("raw", [
    "A or B, hard to choose", "D", "E", "A lottery would be unfair", "none of them", "", None, True,
    "Should we pick B?",
])
def test_option_unclear_is_an_error(raw):
    assert Option().read(raw, TEXTS)[0] is None


def test_option_keys_may_be_numbers():
    principle = Option(keys=("1", "2", "3", "4"), prefix=("principle",))
    assert principle.read(3) == ("3", None)
    # "1-4" echoes the prompt's range (seen from SmolLM2): never principle 1.
    assert principle.read("1-4, minimum income and maximum in dollars a year.")[0] is None
    assert principle.read("2 or 3")[0] is None and Option().read("A/B")[0] is None
    assert principle.read("Principle 4") == ("4", None)
    assert principle.read(5)[0] is None


def test_choice_reads_values_case_insensitively_and_prose_by_meaning():
    c = Choice(options=("COOPERATE", "DEFECT"))
    assert c.read("cooperate") == ("COOPERATE", None)
    assert c.read(" **Defect** ") == ("DEFECT", None)
    assert c.read("I will cooperate") == ("COOPERATE", None)
    assert c.read("maybe")[0] is None
    assert c.from_prose("The opponent did not defect last time, so I COOPERATE.") == ("COOPERATE", None)
    assert c.from_prose("I won't defect this time. I cooperate.") == ("COOPERATE", None)
    assert c.from_prose("They cooperated last round, so I will defect.") == ("DEFECT", None)
    assert c.from_prose("I'd rather cooperate than defect.") == ("COOPERATE", None)
    # Between two actions, refusing one is choosing the other.
    assert c.from_prose("I don't want to defect.") == ("COOPERATE", None)
    assert c.from_prose("I choose not to cooperate.") == ("DEFECT", None)
    assert c.from_prose("Cooperating got me exploited twice. I'm done being the sucker: I defect.") == ("DEFECT", None)
    for unclear in ("Should I cooperate or defect? It is hard to say.", "If they defect, I will defect too.",
                    "Cooperate or defect, both are fine.", "I might cooperate.",
                    "As an AI I can't choose whether to cooperate or defect.", "I cooperate. I defect."):
        assert c.from_prose(unclear)[0] is None, unclear


def test_flag():
    assert Flag().read("yes") == (True, None) and Flag().read(False) == (False, None)
    assert Flag().read("No, I did not") == (False, None)
    assert Flag().read("perhaps")[0] is None


@given(st.one_of(st.text(), st.integers(), st.floats(), st.booleans(), st.none()))
def test_kinds_never_raise(raw):
    for kind in (Confidence(), Amount(), Likert(), Option(), Choice(options=("X", "Y")), Flag()):
        value, err = kind.read(raw, None)
        assert (value is None) != (err is None)


def test_helpers_build_fields():
    @dataclass(frozen=True, kw_only=True)
    class Bid:
        bid: float = amount("bid", lo=0, hi=100)

    assert plan(Bid)[0].kind == Amount(labels=("bid",), lo=0, hi=100)


def test_fixed_answers_are_enums_so_a_constraining_provider_writes_only_those():
    from simcore.replies.schema import allowed_keys, likert, option

    @dataclass(frozen=True, kw_only=True)
    class Form:
        rating: int = likert("rating")
        pick: str = option(("A", "B", "C", "D"))
        number: str = option(("1", "2", "3"), integer=True)

    props = json_schema(Form)["properties"]
    assert props["rating"] == {"enum": list(Likert.scale)}
    assert props["pick"] == {"enum": ["A", "B", "C", "D"]}
    assert props["number"] == {"type": "integer", "enum": [1, 2, 3]}
    # A call's allowed options narrow the enum (a vignette with options A-C).
    narrowed = json_schema(Form, allowed_keys({"pick": {"A": "x", "B": "y", "C": "z"}}))["properties"]
    assert narrowed["pick"] == {"enum": ["A", "B", "C"]} and narrowed["rating"] == props["rating"]
    assert allowed_keys(None) is None and allowed_keys({"pick": ["B", "A"]}) == (("pick", ("B", "A")),)
    assert json_schema(Form, allowed_keys({"pick": ["A"]})) is json_schema(Form, allowed_keys({"pick": ["A"]}))


@pytest.mark.parametrize("name", ["veil_ratings", "veil_turn", "auction_ballot", "auction_assessment"])
@settings(deadline=None)  # the first example imports the scenarios: no test races the clock
@given(seed=st.integers(0, 2**32 - 1))
def test_every_value_the_schema_allows_is_read(name, seed):
    """A provider that fills the schema (the stub does, at random) always writes a readable reply."""
    import json

    import numpy as np

    from backends.stub import sample_schema
    from scenarios.llm_auction.experiment import Assessment, Ballot
    from scenarios.veil_of_ignorance.experiment import Ratings, Turn
    from simcore.replies.reading import read_reply
    from simcore.replies.schema import allowed_keys

    schema, allowed = {
        "veil_ratings": (Ratings, None), "veil_turn": (Turn, None),
        "auction_ballot": (Ballot, {"option": {"A": "Report it", "B": "Stay quiet", "C": "Ask first"}}),
        "auction_assessment": (Assessment, {"option": {"A": "Report it", "B": "Stay quiet", "C": "Ask first"}}),
    }[name]
    reply = json.dumps(sample_schema(json_schema(schema, allowed_keys(allowed)), np.random.default_rng(seed)))
    reading = read_reply(reply, schema, allowed=allowed)
    enums = [f.name for f in plan(schema) if "enum" in f.kind.json()]
    assert enums
    # Fields of a fixed set of answers are always read (a free field, such as veil's
    # amount drawn as filler text, may still fail on its own).
    assert not [e for e in reading.errors if e.split(":")[0] in enums], (reply, reading.errors)
    if schema is not Turn:
        assert reading.value is not None, (reply, reading.errors)
