"""Lenient parsing of model output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hypothesis import given
from hypothesis import strategies as st

from simcore.schema import extract_json_object, json_schema, parse_reply


@dataclass(frozen=True)
class Vote:
    choice: Literal["yes", "no"]
    confidence: float = field(default=0.5, metadata={"range": (0.0, 1.0)})
    points: list[str] = field(default_factory=list)


def test_plain_fenced_and_embedded_json():
    assert parse_reply('{"choice": "yes"}', Vote).value == Vote("yes")
    assert parse_reply('```json\n{"choice": "no", "confidence": 0.9}\n```', Vote).value == Vote("no", 0.9)
    text = 'Sure! Here you go: {"choice": "YES", "points": "one"} Hope that helps {x}'
    assert parse_reply(text, Vote).value == Vote("yes", 0.5, ["one"])


def test_braces_inside_strings_do_not_confuse_the_scanner():
    text = 'noise {"choice": "no", "points": ["a } b", "{c"]} trailing'
    assert parse_reply(text, Vote).value == Vote("no", 0.5, ["a } b", "{c"])


def test_repairs_are_noted():
    p = parse_reply('{"choice": "yes", "confidence": "1.7"}', Vote)
    assert p.value.confidence == 1.0 and not p.parse_error
    assert any("clamped" in i for i in p.issues)


def test_unusable_output_is_flagged_not_raised():
    for text in ("", "no json here", '{"confidence": 0.2}', '{"choice": "maybe"}', "[1, 2]", '{"choice": '):
        p = parse_reply(text, Vote)
        assert p.parse_error and p.value is None


@dataclass(frozen=True)
class Estimate:
    value: float
    weight: float = 1.0


def test_nan_is_not_a_number_with_or_without_a_range():
    # json.loads accepts NaN; the parser must not pass it on as a valid float
    p = parse_reply('{"value": NaN}', Estimate)
    assert p.parse_error and p.value is None
    p = parse_reply('{"value": 2, "weight": NaN}', Estimate)
    assert p.value == Estimate(2.0, 1.0) and "weight: default used" in p.issues
    assert parse_reply('{"choice": "no", "confidence": NaN}', Vote).value == Vote("no", 0.5)


def test_no_schema_returns_the_object():
    assert parse_reply('x {"a": 1}', None).value == {"a": 1}


def test_json_schema():
    s = json_schema(Vote)
    assert s["properties"]["choice"] == {"enum": ["yes", "no"]}
    assert s["properties"]["confidence"] == {"type": "number", "minimum": 0.0, "maximum": 1.0}
    assert s["properties"]["points"] == {"type": "array", "items": {"type": "string"}}
    assert s["required"] == ["choice", "confidence", "points"]


@given(st.text())
def test_never_raises_on_arbitrary_text(text):
    p = parse_reply(text, Vote)
    assert p.parse_error == (p.value is None)
    extract_json_object(text)
