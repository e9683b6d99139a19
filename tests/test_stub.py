"""The stub backend's encoders and estimates: the same bytes and counts as their plain definitions."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from backends.base import LLMRequest, Message, estimate_tokens
from backends.stub import StubBackend, to_json

_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=300)
@given(_JSON)
def test_to_json_is_the_json_encoder(value):
    assert to_json(value) == json.JSONEncoder(ensure_ascii=False).encode(value)


@given(st.text(max_size=2000))
def test_estimate_tokens_is_one_per_four_characters_rounded_up(text):
    assert estimate_tokens(text) == (max(1, math.ceil(len(text) / 4)) if text else 0)


def test_stub_replies_encode_a_behaviours_dict_as_json():
    backend = StubBackend(lambda request, rng: {"view": "ça va", "confidence": 0.25, "points": ["a", "b"]})
    reply = backend.respond(LLMRequest("stub", (Message("user", "Hi"),), max_tokens=100))
    assert reply.text == '{"view": "ça va", "confidence": 0.25, "points": ["a", "b"]}'
    assert reply.usage.completion_tokens == estimate_tokens(reply.text)
