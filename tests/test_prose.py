"""Reading prose conservatively: clauses that count, negation, revisions, cut replies, amounts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.replies.prose import (
    bare,
    clauses,
    dialogue,
    echoes,
    money_mentions,
    negated,
    opening,
    prepare,
    rounds_written,
    said,
    torn,
    veto,
    words_of,
    words_to_number,
)


def test_negation_looks_back_within_the_clause_only():
    s = "not A but B"
    assert negated(s, s.index("A")) and not negated(s, s.index("B"))
    s = "I do not want to defect"
    assert negated(s, s.index("defect"))
    s = "Not 90%, more like 70%"
    assert negated(s, s.index("90"), span=1) and not negated(s, s.index("70"), span=1)


def test_a_preposition_negates_only_the_mention_right_after_it():
    for s, word in [("I vote against defecting", "defecting"), ("rather than A", "A"), ("instead of A", "A"),
                    ("B over A", "A")]:
        assert negated(s, s.rindex(word)), s
    # Found on SmolLM2: "against" four words back turned a defection into cooperation.
    s = "I defend myself against exploitation by defecting"
    assert not negated(s, s.index("defecting"))


def test_a_real_reply_about_other_players_states_no_move():
    """SmolLM2-135M-Instruct, acausal decision, JSON mode off (2026-11-25): read as COOPERATE before."""
    from scenarios.acausal_cooperation.prompts import DecisionReply
    from simcore.replies.reading import read_reply

    reply = ("In this scenario, two players (A and B) play a prisoner's dilemma game with each other. The payoffs "
             "are calculated based on the strategy you write, where A defends themselves against B by defecting 3 "
             "times, while B cooperatively defends themselves by cooperating 2 times; but when both players "
             "cooperate, they both defect 1 time.")
    reading = read_reply(reply, DecisionReply)
    assert reading.value is None and reading.errors == ("action: names no action of its own",)
    # SmolLM2 again, a cut reply: "when asked to cooperate" is a condition on Player A, not a move.
    reply = ("Two players, A and B, are arrested for a crime and interrogated separately by the police. Player A "
             "defends Player B against charges, but Player B defends Player A against charges. However, when asked "
             "to cooperate with the police, Player A chooses to defect from Player B's payoff of 0 (the only "
             "possible outcome), which Player B then chose to defect from Player A's payoff of 5 (their own choice).")
    assert read_reply(reply, DecisionReply, finish_reason="length").value is None
    # "against" four words back made "by defecting" count, as a negated defection: COOPERATE.
    assert read_reply("I defend myself against exploitation by defecting.", DecisionReply).value is None
    assert read_reply("I vote against defecting.", DecisionReply).value.action == "COOPERATE"


@pytest.mark.parametrize("text, counts", [
    ("I will cooperate.", [True]),
    ("I cooperate when they cooperate.", [False]),  # a condition: a strategy, not this move
    ("It seems that the option C is best.", [False]),  # hedged (SmolLM2, then "B and D are both best")
    ("Should I cooperate?", [False]),
    ("If they defect, I will defect too.", [False, False]),  # a supposition, consequent included
    ("If I had to choose, I'd pick C.", [True, True]),  # a framing, not a supposition
    ("I might cooperate.", [False]),  # hedged
    ("I can't choose whether to cooperate.", [False]),
])
def test_which_clauses_may_state_an_answer(text, counts):
    assert [c.counts for c in clauses(text)] == counts


@pytest.mark.parametrize("text, forms", [
    ("I will cooperate.", ["own"]),
    ("Both players cooperate and each other player defects.", ["mention", "mention"]),  # about others
    ("I think Player A should defect.", ["other"]),  # the nearest person named before it acts
    ("I will cooperate with Agent B and defect against Agent C.", ["own", "own"]),  # (aimed at two agents)
    ("You should defect.", ["own"]),  # "you" are the agent asked
    ("You are cooperating with the subagent.", ["mention"]),  # a description, no directive
    ("The best move is to cooperate.", ["impersonal"]),
    ("The final decision is DEFECT.", ["own"]),
    ("DEFECT.", ["bare"]),
    ("If I defect while they cooperate, I get 5.", ["mention", "mention"]),  # a supposition
    ("If they defect, I will defect.", ["mention", "own"]),  # the consequence is voiced
])
def test_whose_answer_a_clause_gives(text, forms):
    answer = re.compile(r"cooperat\w*|defect\w*", re.I)
    got = []
    for clause in clauses(text):
        for m in answer.finditer(clause.text):
            got.append(said(clause, m.group(0).upper(), m.start(), m.end(), bare(clause.text, answer)).form)
    assert got == forms


def test_you_are_the_others_in_a_reply_spoken_to_a_group():
    (clause,) = clauses("You should choose principle 1.")
    assert said(clause, "1", 21, 22, False).form == "own"
    assert said(clause, "1", 21, 22, False, spoken=True).form == "other"


def test_answers_aimed_at_several_agents_or_rounds_are_no_one_answer():
    def one(text):
        answer = re.compile(r"cooperat\w*|defect\w*", re.I)
        return [said(c, m.group(0)[:3].upper(), m.start(), m.end(), False) for c in clauses(text)
                for m in answer.finditer(c.text)]

    assert veto("COO", one("I will cooperate with Agent B."))[1] is None
    assert "several" in veto("COO", one("I will cooperate with Agent B and cooperate with Agent C."))[1]
    assert "several" in veto("DEF", one("In round 1 I defect. In round 2 I defect."))[1]
    assert "also puts" in veto("COO", one("I will cooperate. If they defect, I will defect."))[1]
    assert rounds_written("**Round 1:** you DEFECT\nDecision: COOPERATE\n**Round 2:** you DEFECT") == {"1", "2"}


def test_a_conclusion_stands_alone():
    cs = clauses("A lottery would be unfair, so B.")
    assert [c.alone for c in cs] == [False, True]
    assert [c.alone for c in clauses("Both A and C.")] == [False, False]


def test_prepare_drops_quotes_and_keeps_what_follows_a_revision():
    assert "defect" not in prepare("My opponent wrote 'I will defect next round', but I'll cooperate anyway.")
    assert prepare("Option B, no wait, option C: the board decides.").strip(" ,").startswith("option C")


def test_a_cut_reply_keeps_its_opening_sentence_or_a_clause_of_it_closed_by_because():
    assert opening("I will defect this round because their last moves") == "I will defect this round "
    assert opening("I cooperate. Unless they") == "I cooperate."
    assert opening("I will cooperate unless") == ""
    # Later prose never answers: the conclusion a cut reply was heading for is unknown.
    assert opening("Let me think it through. I will defect this round. Then") == "Let me think it through."
    assert opening("### My move\n\nI would cooperate with Agent D. Here's why: the") == "I would cooperate with Agent D."
    assert opening("I will cooperate. Actually, given their record, I") == ""
    assert prepare("I will cooperate, unless", truncated=True) == ""


def test_torn_and_dialogue():
    assert torn("Either would work; hard to choose.") and not torn("I choose B.")
    assert dialogue("[Member 12]\nAnswer: C\n\n[Member 13]\nSame.") and not dialogue("Vote: C")


def test_money_mentions_with_units_periods_and_words():
    found = money_mentions("I think a fair floor is $1,250 per month, which is $15,000 per year.")
    assert [(m.value, m.marked, m.period) for m in found] == [(1250.0, True, "month"), (15000.0, True, "year")]
    assert [m.value for m in money_mentions("fifteen grand")] == [15000.0]
    assert [m.value for m in money_mentions("12 000 or 12k")] == [12000.0, 12000.0]
    assert money_mentions("85%") == [] and [m.value for m in money_mentions("9 out of 10")] == [10.0]


def test_words_to_number():
    assert words_to_number("twelve thousand five hundred") == 12500
    assert words_to_number("one hundred and twenty") == 120
    assert words_to_number("a thousand") == 1000
    assert words_to_number("twelve apples") is None


def _echoes_by_definition(text: str, instruction: str, share: float = 0.6) -> bool:
    words = re.findall(r"\w+", text.lower())
    if len(words) < 6 or not instruction:
        return False
    source = re.findall(r"\w+", instruction.lower())
    runs = {tuple(source[i : i + 4]) for i in range(max(1, len(source) - 3))}
    mine = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    return sum(g in runs for g in mine) >= share * len(mine)


_WORDS = st.lists(st.sampled_from("state your view the risk is high low and we should act now".split()), max_size=30)


@given(_WORDS, _WORDS, st.sampled_from([0.3, 0.6, 0.9]))
def test_echoes_is_its_definition(text, instruction, share):
    # echoes() skips building the runs when too few words are in the instruction: never another answer.
    text, instruction = " ".join(text), " ".join(instruction)
    assert echoes(text, instruction, share) == _echoes_by_definition(text, instruction, share)


@settings(max_examples=500)
@given(st.one_of(st.text(), st.text(alphabet=st.characters(max_codepoint=127)),
                 st.text(alphabet=" _-.,'\"\n\t\r\x0b\x1cabcAB09\u00e9\u00df\u0660")))
def test_words_of_is_the_regex(text):
    # The ASCII shortcut (translate, split) finds exactly the \w+ runs, whitespace of every kind included.
    assert words_of(text) == re.findall(r"\w+", text)


def test_echoes_examples():
    instruction = "State your view on the proposal in two sentences and give your confidence."
    assert echoes("state your view on the proposal in two sentences", instruction)
    assert not echoes("I support the proposal because the risk is low.", instruction)
    assert not echoes("State your view", instruction)  # under six words
