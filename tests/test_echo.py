"""Echoes: the spans of a reply that repeat what the model was given, and JSON copied from the prompt."""

from __future__ import annotations

from hypothesis import given as hypothesis_given
from hypothesis import strategies as st

from backends.base import Message
from simcore.replies.echo import (
    compact,
    echo_spans,
    echoes_json,
    given_texts,
    repeated_share,
    set_aside,
)

PROMPT = (
    "You are playing one game of the prisoner's dilemma as Agent D. Follow the strategy below.\n\n"
    "Payoffs per game (you, opponent): both cooperate 3, 3; you cooperate and they defect 0, 5; "
    "you defect and they cooperate 5, 0; both defect 1, 1.\n\n"
    "Games so far this round:\nAgent B vs Agent D: DEFECT, DEFECT\nAgent B vs Agent C: DEFECT, DEFECT\n\n"
    'Reply with JSON: {"action": "COOPERATE" or "DEFECT"}'
)


def echoed(reply: str, given: tuple[str, ...] = (PROMPT,)) -> list[str]:
    return [reply[a:b].strip() for a, b in echo_spans(reply, given)]


def test_a_copied_line_or_sentence_is_an_echo_whatever_its_case_spaces_and_punctuation():
    assert echoed("AGENT B VS AGENT D -- defect defect") == ["AGENT B VS AGENT D -- defect defect"]
    assert echoed("Follow   the strategy below!") == ["Follow   the strategy below!"]
    # A chat template's tokens mixed into a long copied stretch do not make it the model's own.
    reply = "[INST]You are playing one game of the prisoner's dilemma as Agent D. <<SYS>> Follow the strategy below."
    assert "".join(echoed(reply)) and set_aside(reply, echo_spans(reply, (PROMPT,))).strip() == ""


def test_the_models_own_sentences_stay_even_with_words_of_the_prompt_in_them():
    assert echoed("I will cooperate.") == []
    assert echoed("I cooperate because both cooperate 3, 3 beats both defect 1, 1.") == []
    reply = "Both defect 1, 1. So I defect."
    assert echoed(reply) == ["Both defect 1, 1."]
    assert set_aside(reply, echo_spans(reply, (PROMPT,))).strip() == "So I defect."


def test_short_replies_are_echoes_only_when_they_are_a_whole_line_of_the_prompt():
    assert echoed("DEFECT") == [] and echoed("Agent C") == []
    assert echoed("Agent B vs Agent C: DEFECT, DEFECT") == ["Agent B vs Agent C: DEFECT, DEFECT"]
    assert echoed("A) Keep it", ("Options:\nA) Keep it\nB) Tell them",)) == ["A) Keep it"]


def test_json_copied_from_the_prompt_whole_or_cut_is_an_echo_and_an_answer_is_not():
    for block in ('{"action": "COOPERATE" or "DEFECT"}', '{"action": "COOPERATE"', '{"Action":"cooperate" OR',
                  '{ "action" :\n "COOPERATE"'):
        assert echoes_json(block, (PROMPT,)), block
    for block in ('{"action": "COOPERATE"}', '{"action": "DEFECT"', '{"reasoning": "x", "action": "DEFECT"}'):
        assert not echoes_json(block, (PROMPT,)), block
    assert compact(' {"A" :\n 1} ') == b'{"a":1}'


def test_what_the_model_was_given_is_every_message_but_its_own_earlier_replies():
    messages = (Message("system", "sys"), Message("user", "ask"), Message("assistant", "mine"),
                Message("user", "again"))
    assert given_texts(messages) == ("sys", "ask", "again")
    assert given_texts(["a", "", "b"]) == ("a", "b")


def test_repeated_share_counts_the_words_in_copied_runs():
    assert repeated_share("both cooperate 3, 3; you cooperate and they defect", (PROMPT,)) == 1.0
    assert repeated_share("I think we should all cooperate now", (PROMPT,)) == 0.0
    assert repeated_share("anything", ()) == 0.0


@hypothesis_given(st.text(max_size=300), st.text(max_size=300))
def test_echo_spans_never_raise_and_lie_inside_the_reply(reply, prompt):
    for a, b in echo_spans(reply, (prompt,)):
        assert 0 <= a < b <= len(reply)
    echoes_json(reply, (prompt,))
    assert isinstance(set_aside(reply, echo_spans(reply, (prompt,))), str)
