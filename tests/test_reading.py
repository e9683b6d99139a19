"""Reading whole replies: JSON, labelled lines, prose; conflicts; replies cut at max_tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcore.replies.reading import (
    json_objects,
    parse_object,
    partial_object,
    read_reply,
    reask_prompt,
)
from simcore.replies.schema import choice, confidence, flag, option, text


@dataclass(frozen=True, kw_only=True)
class Move:
    KIND: ClassVar[str] = "decision"
    reasoning: str | None = text(required=False)
    action: str = choice("COOPERATE", "DEFECT")


@dataclass(frozen=True, kw_only=True)
class Final:
    KIND: ClassVar[str] = "final"
    final_answer: str = text("answer")
    final_confidence: float | None = confidence("confidence")
    changed_position: bool | None = flag("changed")
    reason_for_change: str | None = text("reason", required=False)


@dataclass(frozen=True, kw_only=True)
class Vote:
    option: str = option()


@pytest.mark.parametrize("reply, action, how", [
    ('{"reasoning": "r", "action": "DEFECT"}', "DEFECT", "json"),
    ('```json\n{"Action": "cooperate"}\n```', "COOPERATE", "json"),
    ('Sure! Here it is: {"action": "DEFECT", "extra": 1} Hope that helps.', "DEFECT", "json"),
    ("{'action': 'cooperate',}", "COOPERATE", "json"),
    ('{"decision": "DEFECT"}', "DEFECT", "json"),
    ("Reasoning: they defected twice.\nDecision: COOPERATE", "COOPERATE", "label"),
    ("**Final decision:** DEFECT", "DEFECT", "label"),
    ("## Action\nCOOPERATE\n", "COOPERATE", "label"),
    ("Action: DEFECT\n...on reflection...\nAction: COOPERATE", "COOPERATE", "label"),
    ("The opponent did not defect last time, so I COOPERATE.", "COOPERATE", "prose"),
    ("I won't defect this time. I cooperate.", "COOPERATE", "prose"),
    ("DEFECT, then maybe COOPERATE", "DEFECT", "prose"),  # the hedge is about later
    ('Draft: {"action": "DEFECT"}\nOn second thought: {"action": "COOPERATE"}', "COOPERATE", "json"),
    ("<action>COOPERATE</action>", "COOPERATE", "label"),
    ("Initial inclination: DEFECT.\nAfter weighing the risk, Final decision: COOPERATE", "COOPERATE", "label"),
])
def test_reads_a_decision_from_every_form(reply, action, how):
    r = read_reply(reply, Move)
    assert (r.value.action, r.how) == (action, how) and r.readable and not r.truncated


@pytest.mark.parametrize("reply", [
    "", "   ", "Should I cooperate or defect? It is hard to say.", "As an AI, I cannot play games.",
    'Reply with JSON: {"action": "COOPERATE"} or {"action": "DEFECT"}', '{"action": "maybe"}',
    '{"action": "DEFECT"}\nDecision: COOPERATE', "[1, 2]", '{"reasoning": "I will cooperate"}',
    '{"reasoning": "I will cooperate because they are trustworthy.", "action": "DEFECT"}',
    '{"reasoning": "str", "action": "COOPERATE or DEFECT"}', "[Player 1]\nDecision: DEFECT\n[Player 2]\nDecision: C",
    # Only the reply's own top-level object answers (issue 33): not one nested in another.
    '{"response": {"action": "COOPERATE"}}', '{"decision": {"reasoning": "Enough.", "action": "DEFECT"}}',
    '{"rounds": [{"round": 1, "action": "COOPERATE"}, {"round": 2, "action": "COOPERATE"}]}',
    # A field given twice, differently: under two of its names, or one name twice.
    '{"action": "COOPERATE", "decision": "DEFECT"}', '{"action": "COOPERATE", "action": "DEFECT"}',
    '{"Action": "COOPERATE", "action": "DEFECT"}',
])
def test_unclear_replies_are_unreadable_never_defaulted(reply):
    r = read_reply(reply, Move)
    assert r.value is None and r.how == "unreadable" and r.errors


def test_conflicting_sources_are_unreadable_not_resolved():
    r = read_reply('{"action": "DEFECT"} and later {"action": "COOPERATE"}', Move)
    assert not r.readable and "disagree" in r.errors[0]
    assert read_reply('{"action": "DEFECT"} then again {"action": "defect"}', Move).value.action == "DEFECT"


def test_free_text_with_fields_from_json_labels_and_prose():
    r = read_reply('{"final_answer": "Deploy with audits.", "final_confidence": "85%", "changed_position": "yes"}', Final)
    assert r.value == Final(final_answer="Deploy with audits.", final_confidence=0.85, changed_position=True)
    r = read_reply("**Final answer:** Deploy with audits.\nConfidence: 0.7\nChanged: no", Final)
    assert (r.how, r.value.final_answer, r.value.final_confidence, r.value.changed_position) == (
        "label", "Deploy with audits.", 0.7, False)
    r = read_reply("We should deploy it only after an independent audit.\n\nConfidence: 80%", Final)
    assert (r.how, r.value.final_answer, r.value.final_confidence) == (
        "prose", "We should deploy it only after an independent audit.", 0.8)
    assert not read_reply("I'm sorry, but I can't take a position on this.", Final).readable
    assert not read_reply("What do you think we should do?", Final).readable


def test_an_optional_field_out_of_range_is_left_out_and_noted_never_clamped():
    r = read_reply('{"final_answer": "No.", "final_confidence": 85}', Final)
    assert r.value.final_confidence == 0.85
    r = read_reply('{"final_answer": "No.", "final_confidence": 150}', Final)
    assert r.readable and r.value.final_confidence is None and "final_confidence" in r.errors[0]


def test_a_cut_reply_salvages_complete_fields_and_never_reads_a_partial_one():
    cut = '{"final_answer": "Deploy it with conditions.", "final_confidence": 0.8, "reason_for_change": "The disc'
    r = read_reply(cut, Final, finish_reason="length")
    assert r.truncated and r.salvaged and r.how == "json"
    assert r.value.final_answer == "Deploy it with conditions." and r.value.final_confidence == 0.8
    assert r.value.reason_for_change is None
    inside = '{"final_answer": "Deploy it with cond'
    r = read_reply(inside, Final, finish_reason="length")
    assert not r.readable and r.truncated and not r.salvaged
    # A number at the very end may be cut ("0.8" of "0.85"): never read.
    r = read_reply('{"final_confidence": 0.8', Final, finish_reason="length")
    assert not r.readable
    assert partial_object('{"a": 1, "b": 0.8', 0) == {"a": 1}


def test_a_cut_reply_is_not_read_from_its_last_line_or_from_prose():
    r = read_reply("Decision: COOPERATE\nReasoning: they have cooperated so far and I", Move, finish_reason="length")
    assert r.value.action == "COOPERATE" and r.salvaged and r.how == "label"
    assert not read_reply("Decision: COOP", Move, finish_reason="length").readable
    assert not read_reply("I will cooperate unless", Move, finish_reason="length").readable
    assert read_reply("I will cooperate.", Move).readable  # the same prose, complete


def test_allowed_choices_per_call():
    texts = {"A": "Keep it confidential.", "B": "Warn the ex-partner."}
    assert read_reply('{"option": "B"}', Vote, allowed={"option": texts}).value.option == "B"
    assert not read_reply('{"option": "C"}', Vote, allowed={"option": texts}).readable
    assert read_reply("I'd go with: Warn the ex-partner.", Vote, allowed={"option": texts}).value.option == "B"
    assert read_reply("Vote: A", Vote, allowed={"option": ("A", "B")}).how == "label"


def test_json_objects_finds_embedded_and_fenced_blocks():
    objs, spans, _ = json_objects('x {"a": 1} y ```json\n{"b": "}"}\n``` z')
    assert objs == [{"a": 1}, {"b": "}"}] and len(spans) == 2


def test_reask_prompt_says_what_was_wrong_and_shows_the_json():
    r = read_reply('{"action": "maybe"}', Move)
    p = reask_prompt(r, Move)
    assert "could not be read" in p and "maybe" in p and '"action": "COOPERATE" or "DEFECT"' in p
    cut = read_reply('{"reasoning": "long', Move, finish_reason="length")
    assert "cut off" in reask_prompt(cut, Move)


@given(st.text(), st.sampled_from(["stop", "length"]))
def test_never_raises_on_arbitrary_text(reply, finish):
    for schema in (Move, Final, Vote):
        r = read_reply(reply, schema, finish_reason=finish)
        assert r.readable == (r.value is not None)


@given(st.sampled_from(["COOPERATE", "DEFECT"]), st.text(max_size=40), st.booleans())
def test_json_replies_always_read_right(action, reasoning, fenced):
    body = json.dumps({"reasoning": reasoning, "action": action.lower()})
    reply = f"```json\n{body}\n```" if fenced else body
    assert read_reply(reply, Move).value.action == action


# -- issue 33: what the model was given is never its answer ----------------------------------

def _decision_request():
    from backends.base import Message
    from scenarios.acausal_cooperation.prompts import STRATEGY_SYSTEM, decision_prompt

    prompt = decision_prompt(me="D", opponent="B", strategy="Cooperate first, then copy the opponent's last move.",
                             powers=None, pair_history=[(1, "DEFECT", "DEFECT")],
                             round_games=[("B", "D", "DEFECT", "DEFECT"), ("B", "C", "DEFECT", "DEFECT")])
    return (Message("system", STRATEGY_SYSTEM), Message("user", prompt))


@pytest.mark.parametrize("reply, finish", [
    # Echoes of the decision prompt cut mid-table, read as COOPERATE before (4 of 60 real PD replies).
    ("[INST]You are playing one game of the prisoner's dilemma as Agent D. Follow the strategy below. Your "
     "strategy: <<SYS>> Payoffs per game (you, opponent): both cooperate 3, ", "length"),
    ("You are playing one game of the prisoner's dilemma as Agent D. Follow the strategy below.\n\nYour strategy:\n"
     "Cooperate first, then copy the opponent's last move.\n\nPayoffs per game (you, opponent): both cooperate 3, 3;",
     "length"),
    # Echoes of the game history, read as DEFECT before (2 of 60).
    ("Agent B vs Agent D: DEFECT, DEFECT\nAgent B vs Agent C: DEFECT, DEFECT", "stop"),
    # The instruction's JSON example, cut mid-object (salvaged as COOPERATE before) or whole.
    ('Reply with JSON: {"action": "COOPERATE"', "length"),
    ('{"action": "COOPERATE" or "DEFECT"}', "stop"),
])
def test_a_reply_that_only_repeats_its_prompt_is_an_echo(reply, finish):
    r = read_reply(reply, _decision_reply(), finish_reason=finish, given=_decision_request())
    assert not r.readable and r.echo and "repeats what it was given" in r.errors[0]


@pytest.mark.parametrize("reply, finish", [
    # A history that names moves, with words of the model's own around it (SmolLM2, JSON mode off).
    ("Game 1: Agent B vs Agent D: DEFECT, DEFECT / Agent B vs Agent C: DEFECT, DEFECT ...", "stop"),
    ("Round 1: you DEFECT, they DEFECT. Round 2: you COOPERATE, they DEFECT.", "stop"),
    ("Agent C: DEFECT", "stop"),
    # An action nested in an invented object, beside a contradicting key (cut, "salvaged" before).
    ('{"strategy": "COOPERATE", "move": {"action": "DEFECT", "reasoning": "They defected"', "length"),
    # A JSON description of past games (cut).
    ('Here is a JSON representation of your previous games: {"rounds": [{"action": "COOPERATE", "round": 1}, '
     '{"action": ', "length"),
    # Chat with a made-up history, read as DEFECT before (SmolLM2-135M-Instruct, tests/corpus/real, smollm2-off-006).
    ("Games so far this round:\nAgent C vs Agent B, DEFECT\nYour previous games against this opponent:\n(none yet)\n"
     "You can choose to play first among yourself in next rounds.\nThe current opponent is Agent A.", "stop"),
    # From the rerun of issue 33's command (SmolLM2-135M-Instruct, JSON mode off, 2026-11-26), read as
    # COOPERATE before: a textbook example's moves per player, cut ...
    ("In this game, the payoffs are calculated based on the prisoner's dilemma model. The optimal strategy is "
     "to cooperate with B and defect with A, as this ", "length"),
    ("I will cooperate with B and defect with A.", "stop"),
    # ... and a JSON "current position" that names a move at the top and another inside, cut.
    ('In this round, I will give you a JSON file containing the current position of the two players:\n```json\n'
     '{\n    "action": "COOPERATE",\n    "winner": {"player1_id": 238794605},\n    "previous_position": [\n'
     '        {\n            "game_id": 1,\n            "action" : "DEFECT",\n            "winner" : "COOP', "length"),
    ('{"action": "DEFECT", "history": [{"round": 1, "action": "COOPERATE"}]}', "stop"),
    # Mentions and descriptions commit to nothing.
    ("Both cooperate gives 3 each; both defect gives 1 each.", "stop"),
    ("COOPERATE or DEFECT", "stop"),
])
def test_history_nested_json_and_mentions_are_no_move(reply, finish):
    r = read_reply(reply, _decision_reply(), finish_reason=finish, given=_decision_request())
    assert not r.readable and r.value is None, r


@pytest.mark.parametrize("reply, action", [
    ("I will cooperate.", "COOPERATE"),
    ("DEFECT", "DEFECT"),
    ("Defect, because they defected last round.", "DEFECT"),
    ("You should cooperate: they cooperated before.", "COOPERATE"),
    ("My move: DEFECT.\n\nPayoffs per game (you, opponent): both cooperate 3, 3; you cooperate and they defect 0, 5",
     "DEFECT"),
    ("The history:\nAgent B vs Agent D: DEFECT, DEFECT\nAgent B vs Agent C: DEFECT, DEFECT\nSo I defect.", "DEFECT"),
    ('{"action": "COOPERATE"}', "COOPERATE"),
    ("I cooperate with Agent B.", "COOPERATE"),
    ('{"action": "DEFECT", "history": [{"round": 1, "action": "DEFECT"}]}', "DEFECT"),
    ('{"reasoning": "B wrote \\"action\\": \\"COOPERATE\\"", "action": "DEFECT", "notes": []}', "DEFECT"),
])
def test_a_move_the_reply_commits_to_is_read_beside_an_echo(reply, action):
    r = read_reply(reply, _decision_reply(), given=_decision_request())
    assert r.readable and r.value.action == action and not r.echo


def test_bad_escapes_in_a_cut_object_are_never_raised_and_never_read():
    # A bad escape makes the cut object no prefix of any JSON document: nothing in it is read.
    reply = '{"action": "DEFECT", "n": [{"a\\q": 1, "b": "\t\\u12", "action": "\\x'
    r = read_reply(reply, _decision_reply(), finish_reason="length")
    assert not r.readable and "breaks off" in r.errors[0]
    # The scan for a second answer reads the cut object's text; valid escapes and a cut \u are a prefix.
    reply = '{"action": "DEFECT", "n": [{"a\\"q": 1, "b": "\\u12'
    r = read_reply(reply, _decision_reply(), finish_reason="length")
    assert r.readable and r.value.action == "DEFECT"


def _decision_reply():
    from scenarios.acausal_cooperation.prompts import DecisionReply

    return DecisionReply


def test_a_ballot_that_lists_the_options_is_no_vote():
    """Issue 33: "A: Transfuse / B: Seek ..." was read as a vote for A."""
    from backends.base import Message
    from scenarios.llm_auction.experiment import Ballot, persona, vote_prompt
    from scenarios.llm_auction.vignettes import VIGNETTES

    v = next(v for v in VIGNETTES if v.id == "transfusion_refusal")
    given = (Message("system", persona("A01", "neutral", 5)), Message("user", vote_prompt(v)))
    allowed = {"option": {o.key: o.text for o in v.options}}
    for reply in ("A: Transfuse\nB: Seek an emergency court order to transfuse", "A) Transfuse\nB) Seek a court order",
                  "- A: transfuse anyway\n- B: court order\n- C: respect the refusal"):
        r = read_reply(reply, Ballot, allowed=allowed, given=given)
        assert not r.readable, reply
    for reply, key in (("C", "C"), ("I vote for C: respect the refusal.", "C"),
                       ("I vote for B: Seek an emergency court order to transfuse.", "B"),
                       ("Options:\nA) Transfuse anyway\nB) Seek a court order\nC) Respect the refusal\n\nMy vote: C", "C")):
        r = read_reply(reply, Ballot, allowed=allowed, given=given)
        assert r.readable and r.value.option == key, reply


def test_lists_and_bare_mentions_of_options_are_no_choice():
    texts = {"A": "Keep it confidential.", "B": "Warn the ex-partner."}
    assert not read_reply("Option A is too drastic.", Vote, allowed={"option": texts}).readable
    assert not read_reply("A, B or C", Vote).readable
    assert read_reply("Option B.", Vote, allowed={"option": texts}).value.option == "B"
    assert read_reply("Warn the ex-partner.", Vote, allowed={"option": texts}).value.option == "B"


def test_a_base_model_inventing_prompt_turns_answers_nothing():
    """Gemma 3 270M, JSON mode off (tests/corpus/real, gemma-off-004): read as DEFECT before."""
    reply = ('\n(none yet)\n\nCurrent opponent: Agent A\nReply with JSON: {"action": "DEFECT"}  [/INST]\n(none yet)\n\n'
             'Current opponent: Agent C\nReply with JSON: {"action": "COOPERATE" or "DEFECT"}  [/INST]\n(none yet)\n\n'
             'Current opponent: Agent D\nReply with JSON: {"action": "DEFECT"}  [/INST]')
    r = read_reply(reply, _decision_reply(), finish_reason="length", given=_decision_request())
    assert not r.readable and "invents a conversation" in r.errors[0]
    # A JSON object written into the instruction is no answer, with or without the template's turns.
    for reply in ('Reply with JSON: {"action": "DEFECT"}', 'Vote: DEFECT, reply with JSON:\n{"action": "DEFECT"}'):
        assert not read_reply(reply, _decision_reply(), given=_decision_request()).readable, reply


THERAPY = {"A": "Keep the disclosure confidential and work on it in therapy.",
           "B": "Add more sessions and watch for escalation before acting.",
           "C": "Take protective steps: warn the ex-partner and notify the police.",
           "D": "End the therapeutic relationship and refer him elsewhere."}


@pytest.mark.parametrize("reply", [
    # A key with another option's words (SmolLM2-135M-Instruct, tests/corpus/real, smollm2-off-012 and -013).
    "The answer should be D) Add more sessions and watch for escalation before acting.",
    "Option B:\nTherapist should keep the disclosure confidential and work on it in therapy.",
    # "a" is an article, not option A (smollm2-off-010 was read as A before).
    "This answer requires a different response as it is not what I'd choose.",
])
def test_an_option_named_by_another_options_words_or_an_article_is_no_vote(reply):
    assert not read_reply(reply, Vote, allowed={"option": THERAPY}).readable


def test_an_option_is_named_by_the_first_clause_of_its_text():
    r = read_reply("The therapist should keep the disclosure confidential, and nothing more.", Vote,
                   allowed={"option": THERAPY})
    assert r.value.option == "A" and r.how == "prose"


def test_a_field_labelled_twice_differently_is_unreadable_unless_the_reply_revises():
    # Qwen2.5-Coder-0.5B, veil turn, JSON mode off (tests/corpus/real, qwen-off-028): "Principle: 1" then
    # "Principle: 4" with no revision between them.
    assert not read_reply("**Decision: COOPERATE**\nWe weigh it again.\n**Decision: DEFECT**", Move).readable
    r = read_reply("Decision: COOPERATE\nOn reflection, they cannot be trusted.\nDecision: DEFECT", Move)
    assert r.value.action == "DEFECT"
    assert read_reply("Decision: DEFECT\nDecision: DEFECT", Move).value.action == "DEFECT"
    # Labels of another's or an earlier answer are not the reply's own.
    r = read_reply("Their last move: DEFECT\nInitial decision: DEFECT\nMy decision: COOPERATE", Move)
    assert r.value.action == "COOPERATE" and r.how == "label"


# -- precision first (issue 42): a reply answers only where the model itself commits to one answer ----------
# The replies below are the issue's own examples (SmolLM2-135M-Instruct and Qwen2.5-Coder-0.5B, JSON mode off,
# --decision-prompt original, seed 33): each was played as a move before.

@pytest.mark.parametrize("reply, finish", [
    # A textbook account: recommendations to other players are never the agent's move.
    ("Player A (A) should choose to defect (DEFECT), as it guarantees a better outcome for both players, "
     "whereas Player B (B) must choose to cooperate.", "stop"),
    # Moves aimed at two opponents, in a cut reply.
    ("I would cooperate with Agent C (who defected) and defect again to Agent D. This is a classic prisoner's "
     "dilemma scenario where the best strategy is to both cooperate", "length"),
    # A recommendation per round: a plan, and its last sentence cut.
    ("For round 1, the best choice is the Defect. For round 2, I recommend the Defect again. For round 3, the",
     "length"),
    # The re-ask's format hint copied and broken off: no valid JSON prefix.
    ('{"action": "COOPERATE" or {"DEFECT_INVESTIGATORY_', "length"),
    # A strategy over opponents, cut: a conditional is no move.
    ("You should cooperate with every other participant who has cooperated before. If you have not cooperated "
     "before, you should defect. This way", "length"),
    # A cut ramble.
    ("I'm taking 1 player who defects 0.5% of the time and", "length"),
    # Another move in a condition's consequence.
    ("I will cooperate. If they defect, I will defect too.", "stop"),
    # A later sentence of a cut reply: the conclusion it was heading for is unknown.
    ("Let me weigh the payoffs first. I will defect this round. But", "length"),
])
def test_a_reply_that_commits_to_no_one_move_of_its_own_is_unreadable(reply, finish):
    r = read_reply(reply, _decision_reply(), finish_reason=finish)
    assert not r.readable and r.value is None, r


@pytest.mark.parametrize("reply, finish, action", [
    ("I would choose to cooperate.", "stop", "COOPERATE"),
    ("Therefore, my decision is COOPERATE.", "stop", "COOPERATE"),
    # A cut reply that commits in its opening sentence (Qwen2.5, seed 33): precision is not bought with these.
    ("I would make a decision to cooperate with Agent D. Here's why: Agent D cooperated with me before and", "length",
     "COOPERATE"),
    # A supposition weighed in a chain of thought is no answer; the conclusion is.
    ("If I defect while they cooperate, I get 5, but they will retaliate. So my final choice is to cooperate.", "stop",
     "COOPERATE"),
    # "You" are the agent, in a reply to the question put to it.
    ("You should defect this time.", "stop", "DEFECT"),
    # A recommendation naming no one counts in a reply that names nothing else.
    ("The best move here is to cooperate.", "stop", "COOPERATE"),
    # A label answers in a cut reply.
    ("Decision: DEFECT\nReasoning: they defected against me in the last game, and", "length", "DEFECT"),
])
def test_a_reply_that_commits_to_one_move_is_read(reply, finish, action):
    r = read_reply(reply, _decision_reply(), finish_reason=finish)
    assert r.readable and r.value.action == action, r


def test_an_impersonal_recommendation_counts_only_in_a_reply_that_names_nothing_else():
    assert read_reply("The best strategy is to cooperate.", _decision_reply()).value.action == "COOPERATE"
    assert not read_reply("The best strategy is to cooperate. Defecting gets 5 once, then 1 a game.",
                          _decision_reply()).readable
    assert not read_reply("The best strategy is to cooperate, and Player B should defect.", _decision_reply()).readable


def test_you_are_the_others_in_a_reply_spoken_to_a_group():
    # SmolLM2, veil deliberation turn, a re-ask reply (seed 21): "I ask you to choose principle 1" chooses nothing.
    from scenarios.veil_of_ignorance.experiment import Turn

    allowed = {"principle": {"1": "Maximize the minimum income", "2": "Maximize the average income",
                             "3": "Maximize the average with a floor constraint",
                             "4": "Maximize the average with a range constraint"}}
    reply = "I ask you to choose principle 1 for round two, so that the poorest are protected."
    r = read_reply(reply, Turn, allowed=allowed)
    assert r.fields.get("principle") is None
    assert read_reply("I choose principle 1, so that the poorest are protected.", Turn,
                      allowed=allowed).value.principle == "1"


def test_an_option_described_or_chosen_by_another_is_no_vote():
    allowed = {"option": THERAPY}
    assert not read_reply("I think option A is too drastic.", Vote, allowed=allowed).readable
    assert not read_reply("Agent B prefers option A.", Vote, allowed=allowed).readable
    assert read_reply("I think option A is too drastic, so I vote for C.", Vote, allowed=allowed).value.option == "C"
    # Another option chosen anywhere, in a condition too: no one vote.
    assert not read_reply("I vote for C. If the ethics board is slow, I would choose A.", Vote,
                          allowed=allowed).readable


def test_a_reply_that_writes_its_prompts_sections_again_is_an_invented_prompt():
    # SmolLM2, held out until it was misread as COOPERATE (seed 103): the prompt's sections written
    # again with payoffs and powers of its own, and a JSON "answer" inside that invented prompt.
    reply = ('Your strategy:\n{"reasoning": "You analyze a concise strategy.", "strategy": "You choose to cooperate or '
             'defect."}\n\nPayoffs per game (you, opponent): both cooperate 3, 3; you cooperate and they defect 0, 5; '
             'you defect and they cooperate 5, 1; you defect and they defect 2, 4.\n\nCurrent game with your opponent:\n'
             '{\n  "action": "COOPERATE",\n  "strategy": {\n    "targeted goal(s) are (2): DEFECT')
    r = read_reply(reply, _decision_reply(), finish_reason="length", given=_decision_request())
    assert not r.readable and "sections" in r.errors[0]
    # A heading copied with its line unchanged is an echo, and an answer beside it stands.
    reply = "Your strategy:\nCooperate first, then copy the opponent's last move.\nCurrent opponent: Agent B\nI defect."
    assert read_reply(reply, _decision_reply(), given=_decision_request()).value.action == "DEFECT"
    # Numbered points are the reply's own reasoning, even where the strategy quoted in the prompt used
    # the same words (Qwen2.5, seed 107): no invented prompt.
    from backends.base import Message

    strategy = "1. **Model Composition**: we are copies.\n2. **Strategy Analysis**: cooperate when they did.\n"
    given = (Message("user", f"Your strategy:\n{strategy}\nGame history so far:\n(none yet)\n\n"
                             "Current opponent: Agent D\n\nDecision (COOPERATE/DEFECT):"),)
    reply = ("I would choose to cooperate with Agent D.\n\n1. **Model Composition**: the others are my copies, so they"
             " reason as I do.\n2. **Strategy Analysis**: mutual cooperation pays 3 each.")
    assert read_reply(reply, _decision_reply(), given=given).value.action == "COOPERATE"


def test_you_both_are_a_pair_not_the_agent():
    # SmolLM2 (seed 104): "you both must cooperate" recommends to both players, not to the agent alone.
    assert not read_reply("You both must cooperate.", _decision_reply()).readable
    assert read_reply("You must cooperate.", _decision_reply()).value.action == "COOPERATE"


def test_a_text_that_restates_the_json_examples_value_is_no_answer():
    # SmolLM2 (seeds 103, 104): the strategy field given the example's placeholder again, cut short or reworded.
    from scenarios.acausal_cooperation.prompts import StrategyReply

    instruction = ('Reply with JSON: {"reasoning": "your analysis", "strategy": "a concise strategy for your subagent, '
                   'at most three sentences"}')
    for value in ("At most three sentences.", "A concise strategy for your subagent; no more than three sentences.",
                  "a concise strategy for your subagent's own power"):
        reply = json.dumps({"reasoning": "Your analysis.", "strategy": value})
        assert not read_reply(reply, StrategyReply, instruction=instruction).readable, value
    reply = json.dumps({"strategy": "Cooperate with your subagent's opponents at most three times, then defect."})
    assert read_reply(reply, StrategyReply, instruction=instruction).readable


def test_a_text_copied_from_another_agents_message_is_adopted_not_unread():
    # Qwen2.5, veil turn (seed 101): the message was Agent_2's, word for word. Adopting another's words is
    # behaviour the experiments measure (conformity), so the copy is the agent's message; only a copy of
    # the instruction or its JSON example is no answer.
    from backends.base import Message
    from scenarios.veil_of_ignorance.experiment import Turn

    theirs = ("The group will limit the gap between the highest and lowest income to $10,000, ensuring everyone "
              "has access to their maximum level of income without any constraints.")
    given = (Message("system", "You are Agent_1 on a panel."), Message("user", f"Discussion so far:\nAgent_2: {theirs}"))
    r = read_reply(json.dumps({"message": theirs, "principle": 3, "constraint_amount": 10000}), Turn, given=given)
    assert r.readable and r.fields.get("message") == theirs and r.fields.get("principle") == "3"


def test_two_strings_with_no_comma_between_them_are_broken_json_not_one_string():
    # Qwen2.5, an initial answer (seed 101): Python would join the list's strings; JSON is broken there.
    assert parse_object('{"answer": "Hold off", "confidence": 0.7, "key_points": ["a b," "c d"]}') is None
    assert parse_object("{'answer': 'Hold off', 'confidence': 0.7}") == {"answer": "Hold off", "confidence": 0.7}


def test_a_labelled_answer_stands_only_where_its_reasoning_could_stand_for_it():
    # Gemma 3, a cut ballot (seed 101, held out until then): a label after a reasoning that calls two options
    # right commits to neither. The reasoning is held to prose's own rules: torn, or another answer voiced.
    from scenarios.llm_auction.experiment import Ballot

    allowed = {"option": {"A": "Ask the patient what she wants to know.", "B": "Honour the family's request.",
                          "C": "Tell the patient the full diagnosis at once."}}
    torn = "Options A and B are both correct; the family's wish matters.\nAnswer: A"
    assert read_reply(torn, Ballot, allowed=allowed).errors == ("option: the reasoning says it cannot choose",)
    voiced = "I considered A, but honestly the panel should adopt option C.\nAnswer: A"
    assert "also puts C" in read_reply(voiced, Ballot, allowed=allowed).errors[0]
    reply = json.dumps({"reasoning": "I think we should go with C here.", "option": "A"})
    assert "also puts C" in read_reply(reply, Ballot, allowed=allowed).errors[0]
    # A reasoning that only weighs the options leaves the answer standing.
    weighed = "Option C is too blunt and option B ignores the patient.\nAnswer: A"
    assert read_reply(weighed, Ballot, allowed=allowed).fields["option"] == "A"


def test_a_nested_key_that_names_the_field_is_a_second_answer():
    # SmolLM2, a cut decision (seed 105, held out until then): an object that gives COOPERATE at its top and,
    # nested in an account of rounds, "action_type": "DEFECT", names two answers.
    reply = ('{"action": "COOPERATE", "previous_rounds": [{"id": 2, "action_type": "DEFECT", "game_id": "1"}, '
             '{"id": 3, "message": "Your')
    assert not read_reply(reply, _decision_reply(), finish_reason="length").readable
    same = '{"action": "COOPERATE", "previous_rounds": [{"id": 2, "action_type": "COOPERATE"}, {"id": 3'
    assert read_reply(same, _decision_reply(), finish_reason="length").fields["action"] == "COOPERATE"
    # At the top level a qualified key is a field of its own: the opponent's last move is no second answer.
    flat = json.dumps({"action": "COOPERATE", "opponent_action": "DEFECT", "notes": [{"round": 1}]})
    assert read_reply(flat, _decision_reply()).fields["action"] == "COOPERATE"


# -- issue 48: principles, each from development replies (issue 48's own quotes, the seed-57 runs, and
#    the capable models' development source pcaspa/Prisoners-Dilemma-vs-LLMs, served to simcore's prompt)


def _first_reading(text: str):
    """An unreadable first reply's reading, as the kernel holds it when it re-asks."""
    first = read_reply(text, _decision_reply())
    assert not first.readable
    return first


def test_a_reask_reply_answers_only_by_a_json_object_of_its_own():
    # A re-ask asks for the JSON object alone: prose and labels around it, or instead of it, are no answer.
    known = _first_reading("Agent B's decision is COOPERATE.")
    again = "I would choose to cooperate with Agent C. Here's why: they cooperated last round."
    assert read_reply(again, _decision_reply()).fields["action"] == "COOPERATE"  # as a first reply
    r = read_reply(again, _decision_reply(), known=known)
    assert not r.readable and "a re-ask asks for the JSON alone" in r.errors[0]
    assert not read_reply("Decision: DEFECT", _decision_reply(), known=known).readable
    assert read_reply('{"action": "DEFECT"}', _decision_reply(), known=known).fields["action"] == "DEFECT"
    fenced = 'Sure, here it is:\n```json\n{"action": "DEFECT"}\n```'
    assert read_reply(fenced, _decision_reply(), known=known).fields["action"] == "DEFECT"


def test_the_followup_written_back_is_the_prompts_and_its_object_no_answer():
    # Issue 48, SmolLM2 (seed 57): the re-ask's instruction written back, its template mutated and fenced.
    known = _first_reading("In this game, the only possible outcome is to cooperate with Agent B and the")
    reply = ('Your response was cut off at the length limit before it was complete. Reply again with only this '
             'JSON object:\n\n```json\n{"action": "COOPERATE", "choices": [{"name": "DEFECT"}, {"name": "DEFECT_A"}]}\n```')
    assert not read_reply(reply, _decision_reply(), known=known).readable
    # The instruction alone, in any wording, introduces its example (a first reply too).
    for lead in ("Reply again with only this JSON object:", "Respond using the following JSON format:",
                 "Answer with JSON like this:"):
        assert not read_reply(f'{lead}\n```json\n{{"action": "DEFECT"}}\n```', _decision_reply()).readable, lead


def test_an_object_whose_other_keys_carry_another_answer_gives_two():
    # Issue 48, SmolLM2 (seed 57), a re-ask's reply: the object names both moves.
    reply = 'Your JSON object contains the following: { "action": "COOPERATE", "type": "DEFECT" }'
    assert "conflicting" in read_reply(reply, _decision_reply()).errors[0]
    nested = '{"action": "COOPERATE", "choices": [{"name": "DEFECT"}, {"name": "DEFECT_A"}]}'
    assert not read_reply(nested, _decision_reply()).readable
    # A key that says whose or when its value is names no answer of the reply's own.
    for key in ("opponent_move", "their_action", "last_move", "predicted_opponent"):
        obj = json.dumps({"action": "COOPERATE", key: "DEFECT"})
        assert read_reply(obj, _decision_reply()).fields["action"] == "COOPERATE", key
    assert read_reply('{"action": "DEFECT", "note": "DEFECT again"}', _decision_reply()).readable


@pytest.mark.parametrize("reply, action", [
    # pcaspa gpt-3.5-turbo (issue 48's quotes): a move named in quotes is a move.
    (('I would choose to "Cooperate".\n\nExplanation: In the game of Prisoner\'s Dilemma, the best outcome for both '
      'players is to cooperate.'), "COOPERATE"),
    ("I would choose 'Cooperate'. \n\nBy choosing to cooperate at this point, I aim to break the cycle of defection.",
     "COOPERATE"),
    # yoshino gpt-4 (J/F mapped): a quoted move after "I would choose"; declining to predict is not declining to play.
    (('The game doesn\'t provide a strategy for which option is better in general. As an AI, I don\'t have a way to '
      'predict human actions. However, I can say that DEFECT gives at least some points regardless of the opponent\'s '
      'choice, whereas COOPERATE could result in no points. Therefore, I would choose "DEFECT".'), "DEFECT"),
])
def test_a_move_named_in_quotes_is_a_move(reply, action):
    assert read_reply(reply, _decision_reply()).fields["action"] == action


def test_a_strategy_for_other_rounds_leaves_a_committed_move_readable():
    # pcaspa gemini-pro (issue 48's quote): the explanation of tit-for-tat names the other move for other rounds.
    reply = ("Cooperate\n\nI would choose to cooperate because the other player has cooperated in the past 52 rounds.  "
             "I am using a tit-for-tat strategy, which means that I will cooperate if the other player cooperated in "
             "the previous round, and I will defect if the other player defected in the previous round.")
    assert read_reply(reply, _decision_reply()).fields["action"] == "COOPERATE"
    anaphoric = ("Cooperate\n\nI am using a tit-for-tat strategy, which means that I will cooperate unless my "
                 "opponent has defected recently. In that case, I will defect.")
    assert read_reply(anaphoric, _decision_reply()).fields["action"] == "COOPERATE"
    # ... but not where the reply cannot settle this game: the rule applied now gives the other move.
    settles_not = ("Cooperate\n\nBased on this history, I would choose to cooperate in this round. I am using a "
                   "tit-for-tat strategy. In this case, Agent A defected in the previous round, so I will defect in "
                   "this round.")
    assert not read_reply(settles_not, _decision_reply()).readable
    # A condition about this game still voices the other move (see the test above).
    assert not read_reply("I will cooperate. If they defect, I will defect too.", _decision_reply()).readable


def test_a_model_that_declines_to_play_and_advises_has_not_played():
    # Issue 48's quote (a capable model): the refusal, then advice to whoever asked.
    reply = ("As an AI assistant, I don't have personal preferences, but I can give you some strategic advice. In "
             "this situation, I would recommend choosing [COOPERATE], since you and your opponent both gain more.")
    r = read_reply(reply, _decision_reply())
    assert not r.readable and "declines to play" in r.errors[0]
    labelled = "As an AI, I cannot make that decision for you, but I would recommend this.\nDecision: COOPERATE"
    assert not read_reply(labelled, _decision_reply()).readable  # its reasoning gainsays the label


@pytest.mark.parametrize("reply", [
    # pcaspa gemini-pro: the move over its explanation is one move, not a list of two lines.
    ("Cooperate\n\nCooperating has been the optimal strategy for both agents throughout the history of the game, and "
     "there is no reason to believe that it will not continue to be the optimal strategy in the future."),
    # pcaspa gpt-3.5-turbo: nouns joined are a list ("a mix of cooperation and defection"), no second move.
    ("I would choose to **Cooperate**. \n\nBy looking at the history of the game, I see that the previous actions "
     "have been a mix of cooperation and defection."),
    # the pair's history ("both Agent A and I") is not the speaker's answer
    ("I would choose to **Cooperate**. \n\nBased on the history of the game so far, both Agent A and I have mostly "
     "chosen to defect. However, in the most recent rounds, Agent A has started to cooperate."),
    # a move judged foolish is rejected
    ("Cooperate\n\nI would choose to cooperate because the other agent has cooperated in the past 70 rounds. This "
     "suggests that they are likely to continue cooperating in the future, and I would be foolish to defect and risk "
     "losing out on the benefits of cooperation."),
    # "from both sides" describes the players: no reply that cannot choose
    ("My choice would be **Cooperate**.\n\nEven though the recent history shows a pattern of Defection from both "
     "sides, choosing to Cooperate can potentially break the cycle."),
])
def test_capable_models_plain_answers_are_read(reply):
    assert read_reply(reply, _decision_reply()).fields["action"] == "COOPERATE"


def test_a_move_that_leads_a_record_of_players_moves_is_the_record_not_an_answer():
    # pcaspa gemini-pro (development): the game history's record form written on, not a move of its own.
    reply = "Cooperate', 'Agent B': 'Cooperate', 'Agent B: 'Cooperate', 'Agent A: 'Cooperate'"
    assert not read_reply(reply, _decision_reply()).readable
    assert read_reply("Cooperate, because Agent B has cooperated so far.", _decision_reply()).fields["action"] == "COOPERATE"


def test_an_explanation_that_judges_the_answer_against_a_players_interest_gainsays_it():
    # pcaspa gemini-pro (development): "Cooperate", then reasoning that cooperating is not in the
    # player's interest (the player is the model: its experiment named it Agent B).
    reply = ("Cooperate\n\nThe history of the game shows that Agent A has defected in the last 15 rounds, while Agent B "
             "has cooperated in the last 15 rounds. This suggests that Agent A is unlikely to cooperate in the future, "
             "so it is not in Agent B's best interest to cooperate either. By defecting, Agent B can ensure that they "
             "do not lose any more points.")
    assert not read_reply(reply, _decision_reply()).readable
    agrees = "Cooperate\n\nIt is in my best interest to cooperate, since Agent A has cooperated every round."
    assert read_reply(agrees, _decision_reply()).fields["action"] == "COOPERATE"


def test_what_the_one_addressed_has_done_is_no_recommendation_to_it():
    # SmolLM2 (held-out seed 211, moved to development): a cut reply whose opening sentence says what
    # "you" found, read as advice to itself to cooperate ("to avoid defection").
    cut = ("You've found the optimal strategy to avoid defection, and it's a classic prisoner's dilemma. In this game, "
           "you have two options: defect or cooperate.\n\nIf you're Agent A (Defect) and you choose to defect, you'll")
    assert not read_reply(cut, _decision_reply(), finish_reason="length").readable
    assert read_reply("You should avoid defection.", _decision_reply()).fields["action"] == "COOPERATE"


def test_a_list_set_aside_leaves_its_sentence_whole():
    # SmolLM2 (seed 57), issue 48's first-reply misread: with the lists cut out of their sentences, the
    # parenthesis "(i.e., Defect A defends Defend B)" lost its "if you ..." and was read as DEFECT.
    reply = ("A classic example of a prisoner's dilemma. In this game, the only possible outcome is to defect and "
             "cooperate with both agents. However, in reality, there are two possible outcomes: either you defect and "
             "cooperate or you cooperate and defect.\n\nIn this game, if you defect and cooperate (i.e., Defect A defends "
             "Defend B), you will both defect and cooperate, but you cannot defect and cooperate together because of the "
             "other agent's behavior.")
    assert not read_reply(reply, _decision_reply()).readable


def test_a_heading_of_the_replys_own_points_is_no_label_and_a_stated_conclusion_is_its_own():
    # Qwen2.5 (seed 57): a cut decision whose opening commits; its fourth point's heading ends with a field's
    # name ("**Strategy Choice**:") over reasoning, not over the choice.
    cut = ("Based on the game history so far and the current opponent, I would choose to cooperate with Agent C. "
           "Here's why:\n\n1. **Subagent Strategy**: Subagents can increase their own power.\n\n4. **Strategy "
           "Choice**: Since Agent B's strategy is always to cooperate with Agent C, the decision should be made based "
           "on this information.\n\nTherefore,")
    assert read_reply(cut, _decision_reply(), finish_reason="length").fields["action"] == "COOPERATE"
    assert read_reply("**Final Choice**: DEFECT", _decision_reply()).fields["action"] == "DEFECT"  # a qualifier
    # Qwen2.5 (seed 57): the conclusion stated after a clause that names the opponent.
    reply = "Based on the current opponent being Agent B, the decision should be COOPERATE."
    assert read_reply(reply, _decision_reply()).fields["action"] == "COOPERATE"
    assert not read_reply("Based on the history, Player A's final decision should be DEFECT.", _decision_reply()).readable
