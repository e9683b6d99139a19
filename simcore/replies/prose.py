"""Reading answers out of plain prose, conservatively.

A prose reply is read only where it states the speaker's own answer. This module
cuts prose into clauses and says, for each, whether it counts:

- questions, suppositions and conditions ("if they defect, I will defect", "when
  asked to cooperate, A defects") and hedges ("I might cooperate") state nothing;
  a framing such as "if I had to choose" is not a supposition;
- an answer someone else gives or is advised to give ("they cooperated", "Player A
  should defect") is not the speaker's (:func:`actor`);
- quoted speech is someone else's; an explicit revision ("no wait", "on
  reflection", "make that") leaves only what follows it;
- in a reply cut at max_tokens only its opening sentence counts, once finished (or
  the clause of it that a "because" shows was finished): the conclusion a cut reply
  was heading for is unknown (:func:`opening`).

A clause that counts states an answer only where the speaker **commits** to it
(:func:`said`, :func:`weigh`): in its own voice ("I defect", "my vote is B", "you
should cooperate" said to the agent), as a stated conclusion ("the final decision is
DEFECT"), or as the answer alone, a sentence of its own or after a lead-in that
concludes ("So: B"); never as a recommendation to someone else ("Player A should
defect"), and an impersonal recommendation ("the best move is to defect") only in a
reply that names nothing else. A reply that voices another answer anywhere (in a
condition's consequence, a question, a recommendation to others), or aims answers at
several agents or rounds, commits to none (:func:`veto`). Lists that name several
answers ("COOPERATE or DEFECT", "DEFECT, DEFECT", an option list) never count
(:func:`list_spans`).

Negation is judged per mention (:func:`negated`), within its clause. The kinds of
:mod:`simcore.replies.schema` find their mentions in the clauses that count, and read an
answer only when exactly one survives.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_NEGATORS = frozenset(
    "not no never nor neither reject rejects rejected rejecting avoid avoids avoiding "
    "refuse refuses wont dont cannot cant".split()
)
# Prepositions negate only the mention right after them ("against defecting", "rather than
# A", "instead of A"): in "I defend myself against exploitation by defecting" the move is
# defecting.
_NEGATING_PREPOSITIONS = frozenset("without against instead than over".split())
_CLAUSE = re.compile(
    r"[.;!?](?=\s|$)|,(?!\d{3})|:(?!\d)|[\n\u2014]|\s-\s|"
    r"\b(?:but|so|then|thus|therefore|hence|and|because|since|while|whereas)\b",
    re.IGNORECASE,
)
_CONCLUDES = re.compile(r"(?:\b(?:so|then|thus|therefore|hence)|:)\s*$", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_FIRST = re.compile(r"\b(?:i|i'm|im|i'll|i'd|i've|me|my|mine|myself|we|we'll|we're|we'd|our|us|let's|let us)\b", re.I)
_THIRD = re.compile(
    r"\b(?:they|they're|they'll|they've|their|them|themselves|he|she|his|her|himself|herself|each other|"
    r"opponent|opponents|partner|others|players|participants|"
    r"other (?:player|agent|side|member|members|panelists?)|everyone|everybody|people|most|agent \w+|"
    r"player \w+|member \w+)\b",
    re.I,
)
# A condition, or a rule over whom or when ("every participant who ...", "otherwise"): a strategy, not a move.
_SUPPOSE = re.compile(
    r"\b(?:if|unless|when|whenever|in case|in (?:that|which|such a) case|as long as|provided that|suppose|"
    r"supposing|assuming|otherwise|else|"
    r"until|whoever|whichever|in return|in kind|tit[- ]for[- ]tat|reciprocat\w*|retaliat\w*)\b|"
    r"\b(?:every|any|each|all|those|anyone|anybody|everyone)\b[^.;:]{0,40}?\b(?:who|that|which|whose)\b",
    re.I,
)
_FRAMING = re.compile(
    r"\b(?:if i (?:had|have|were) to (?:choose|pick|decide|answer|vote|say|bid|rate)|if you ask me|if forced|"
    r"if i must|even if|even though|if anything|if i (?:imagine|put|picture) myself)\b",
    re.I,
)
_HEDGE = re.compile(
    r"\b(?:might|maybe|perhaps|possibly|probably|could|seems?|not sure|unsure|undecided|uncertain whether|"
    r"with probability|probabilit(?:y|ies) of|mixed strateg\w*|randomi[sz]e|coin flip|leaning|lean toward\w*|"
    r"tempted|tempting|considering|consider)\b",
    re.I,
)
_TORN = re.compile(
    r"\b(?:just as good|equally (?:good|valid|strong)|hard to (?:choose|say|decide|tell)|can't decide|"
    r"cannot decide|torn between|either (?:one|would|is fine|works)|both (?:options|are)|no preference|"
    r"(?:see|weigh|consider|understand|appreciate|weighing|considering) both sides|"
    r"(?:are|is) (?:both|all|each|equally) (?:correct|right|valid|good|fine|acceptable|reasonable|justified)|"
    r"not sure|I don't know|undecided)\b",
    re.I,
)
_WHETHER = re.compile(r"\bwhether\b", re.I)
_REVISION = re.compile(
    r"(?:^|[.;,!?:]\s*|\n)\s*(?:no,? wait|wait|actually|on second thought|on (?:further )?reflection|scratch that|"
    r"make (?:that|it)|correction|let me reconsider|i mean|hmm,? no|revised|update)\b",
    re.I,
)
_QUOTED = re.compile(r"\"[^\"\n]{3,}\"|\u201c[^\u201d\n]{3,}\u201d|(?<![\w])'[^'\n]{3,}'(?![\w])")
_SPEAKER = re.compile(
    r"^\s*\[?(?:member|user|assistant|agent|player|panelist|participant|human|ai|moderator)[ _]?\w*\]?\s*:?\s*$"
    r"|^\s*\[(?:member|user|assistant|agent|player|panelist|participant)[^\]]*\]",
    re.I | re.M,
)


_ONE_WORD = re.compile(r"[*_\s]*[\w-]+[.!]?[*_\s]*")


def _unquote(m: re.Match) -> str:
    """A quoted span as :func:`prepare` leaves it: a single word without its quotes, speech as a blank."""
    inner = m.group(0)[1:-1]
    return f" {inner} " if _ONE_WORD.fullmatch(inner) else " "


def negated(text: str, start: int, span: int = 4) -> bool:
    """Whether one of the ``span`` words before ``text[start]``, in its clause, negates it.

    "won't defect", "do not want to defect", "rather than A", "B over A" and "not
    A but B" (for A) are negated; "not A but B" (for B) is not.
    """
    window = _CLAUSE.split(text[max(0, start - 80) : start])[-1]
    words = re.findall(r"[\w']+", window.lower().replace("\u2019", "'"))[-span:]
    return any(w in _NEGATORS or w.endswith("n't") for w in words) or \
        any(w in _NEGATING_PREPOSITIONS for w in words[-2:]) or bool(_JUDGED_WRONG.search(window))


# A move judged wrong ("I would be foolish to defect", "it would be a mistake to defect", "it is not in
# Agent B's best interest to cooperate") is rejected, not voiced.
_JUDGED_WRONG = re.compile(
    r"\b(?:foolish|unwise|irrational|wrong|a mistake|a bad idea|pointless|no reason|"
    r"not\s+in\s+(?:[\w']+\s+){0,3}?interests?)\s+(?:for me\s+)?to\s+$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Clause:
    """A clause of prose and what it can say.

    Attributes:
        text: The clause.
        counts: Whether it may state the speaker's answer (see the module docstring).
        alone: Whether it stands alone as an answer: a whole sentence, or a conclusion
            ("..., so B.", "My answer: B"), not the value of another lead-in ("Round 1: B").
        lead: Whether it opens its sentence ("Cooperate, because ..."), not as a lead-in to
            a colon ("Defect: you get 5").
        sentence: The sentence it is part of.
        rule: Whether its sentence states a rule for other rounds: a condition about another
            time than this game ("I will defect if they defected in the previous round", "unless
            they defected recently", or "in that case" after such a sentence).
    """

    text: str
    counts: bool
    alone: bool
    lead: bool = False
    sentence: str = ""
    rule: bool = False


def prepare(text: str, truncated: bool = False) -> str:
    """The part of a prose reply that may be read: no quoted speech, after the last revision; of a reply
    cut at max_tokens, only its opening sentence (see :func:`opening`). A single word in quotes is a
    name, not speech: ``I would choose 'Cooperate'`` names its move, and keeps it, unquoted."""
    text = _QUOTED.sub(_unquote, text.replace("\u2019", "'"))
    if truncated:
        text = opening(text)
    marks = list(_REVISION.finditer(text))
    return text[marks[-1].end() :] if marks else text


_HEAD_LINE = re.compile(r"[ \t]*(?:#+[^\n]*|(?:\*\*|__)[^\n]*(?:\*\*|__)[ \t]*:?|[-=*_]{3,})[ \t]*(?:\n|$)")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


def opening(text: str) -> str:
    """What a reply cut at max_tokens may say in prose: its opening sentence, once finished.

    The conclusion a cut reply was heading for is unknown, so later prose never
    answers, and an opening sentence that a later revision ("actually", "on second
    thought") takes back says nothing. Headings before it are not sentences. An
    opening sentence cut in the middle gives the clause a "because" shows was
    finished ("I would cooperate because their ..."), else nothing.
    """
    i = 0
    while (m := _HEAD_LINE.match(text, i)) is not None and m.end() > i:
        i = m.end()
    while i < len(text) and text[i].isspace():
        i += 1
    end = _SENTENCE_END.search(text, i)
    if end is None:  # the cut fell inside the opening sentence
        head = text[i:]
        reason = re.search(r"\b(?:because|since|as|given that)\b", head)
        return head[: reason.start()] if reason else ""
    if _REVISION.search(text, end.start()):
        return ""
    return text[i : end.end()]


def sentences(text: str) -> list[str]:
    """Split prose into sentences (and lines)."""
    return [s for s in _SENTENCE.split(text) if s.strip()]


def clauses(text: str) -> list[Clause]:
    """The clauses of ``text``, each with whether it may state the speaker's answer."""
    out = []
    # A line that ends in a colon leads in to the next ("the decision for Agent C is:" over "COOPERATE").
    text = _LEADS_IN.sub(": ", text)
    previous = ""
    for sentence in sentences(text):
        s = sentence.strip()
        supposed = bool(_SUPPOSE.search(_FRAMING.sub(" ", s)))
        question = s.endswith("?")
        # A rule for other rounds: a condition about another time than this game, here or in the sentence an
        # "in that case" refers back to.
        rule = supposed and not question and bool(
            _OTHER_TIME.search(s) or (_BACK_REFERENCE.match(s) and _OTHER_TIME.search(previous)))
        previous = s
        pos = 0
        parts = []
        for m in _CLAUSE.finditer(s):
            parts.append((s[pos : m.start()], s[max(0, pos - 12) : pos]))
            pos = m.end()
        parts.append((s[pos:], s[max(0, pos - 12) : pos]))
        whole = len([p for p, _ in parts if p.strip()]) == 1
        head = ""  # the clause before this one
        for i, (part, before) in enumerate(parts):
            if not part.strip():
                continue
            # (Whose answer a clause gives is read per answer: see said().)
            counts = not (question or supposed or _HEDGE.search(part) or _WHETHER.search(part))
            if before.endswith(":"):
                # "My answer: B", "So: B" conclude; "Round 1: B", "Agent B: DEFECT" give a value of something else.
                alone = bool(_FIRST.search(head) or _CONCLUSION.search(head) or _CONCLUSION.search(before[:-1]))
                alone = alone and not _THIRD.search(head)
            else:
                alone = whole or bool(_CONCLUDES.search(before))
            # A sentence's first clause, unless it leads in to a colon ("Defect: you get 5").
            lead = not head and not (i + 1 < len(parts) and parts[i + 1][1].endswith(":"))
            out.append(Clause(part, counts, alone, lead, s, rule))
            head = part
    return out


_LEADS_IN = re.compile(r":[ \t]*\n\s*(?=\S)")
# Another time than this game: earlier or later rounds, or rounds in general.
_OTHER_TIME = re.compile(
    r"\b(?:previous|prior|last|next|future|later|earlier|past|recent|recently|again|from now on|going forward|"
    r"subsequent|remaining|thereafter|afterwards?|in the long run|(?:each|every|any|later|other) (?:round|game|turn)s?)\b",
    re.IGNORECASE,
)
_BACK_REFERENCE = re.compile(r"\W*(?:in (?:that|which|such a) case|if so|if not|otherwise|else)\b", re.IGNORECASE)
# A lead-in that concludes (before a colon).
_CONCLUSION = re.compile(
    r"\b(?:so|then|thus|therefore|hence|overall|in (?:short|sum|summary|conclusion)|conclusion|verdict|"
    r"bottom line|final|answer|decision|choice|move|vote|pick|recommendation|selection)\b\W*$",
    re.I,
)
# -- whose answer, to whom ------------------------------------------------------

# The people a clause can name as the one who acts: the speaker, the one addressed, someone else.
_ACTOR = re.compile(
    r"\b(?:(?P<me>i|i'm|im|i'll|i'd|i've|me|my|mine|myself|we|we'll|we're|we'd|we've|our|ours|us|let's)|"
    # the agent and others together, or the speaker and another ("both Agent A and I", "we both"): the pair
    r"(?P<pair>you both|you two|you all|both of you|all of you|we both|both of us|us both|"
    r"(?:both )?(?:agent|player|member|panelist|participant)[ _](?:[a-z]|\d+) and (?:i|me|myself))|"
    r"(?P<you>you|you're|you'll|you'd|you've|your|yours|yourself)|"
    r"(?P<other>they|they're|they'll|they'd|they've|their|theirs|them|themselves|he|she|his|her|hers|him|himself|"
    r"herself|opponents?|partners?|others|players|participants|members|panelists|everyone|everybody|people|"
    r"other (?:players?|agents?|sides?|members?|panelists?|participants?)|both (?:players|sides|agents|parties)|"
    r"both of (?:them|you)|each (?:player|agent|side|of (?:them|you))|all of (?:them|you)|the (?:group|panel)|"
    r"(?:agent|player|member|panelist|participant)[ _](?:[a-z]|\d+)))\b",
    re.I,
)
# A recommendation (whose it is depends on who is named), and a stated conclusion (the speaker's).
_RECOMMEND = re.compile(
    r"\b(?:should|must|ought to|recommend\w*|(?:i|we)(?:'d| would)? suggest|advis\w*|urge\w*|go with|let's|let us|"
    r"(?:best|right|wisest|smartest|optimal|rational|correct|better|only sensible|ideal|dominant) "
    r"(?:move|choice|option|action|decision|strategy|answer|play|course|response|call|bet|principle|interests?)|"
    r"it(?:'s| is| would be| will be) (?:best|better|wise|wiser|right|rational|optimal|ideal) to)\b",
    re.I,
)
# A clause that opens by stating the conclusion ("the decision should be", "so my final answer is").
_STATED = re.compile(
    r"^\W*(?:(?:so|thus|therefore|hence|then)\W+)?(?:the|my|our)\s+(?:final\s+)?(?:decision|choice|move|answer)\s+"
    r"(?:is|should be|would be|will be)\W*$",
    re.IGNORECASE,
)
_CONCLUDING = re.compile(
    r"\b(?:the|final|overall) (?:answer|choice|decision|move|vote|pick|selection|rating|verdict)"
    r"(?: is| would be| will be| here is)?\W*$",
    re.I,
)
# Whom or when an answer is aimed at: an agent after it ("defect against Agent D"), a round or game.
_AIMED = re.compile(
    r"\b(?:with|against|towards?|to|versus|vs\.?|for|on)\s+(?:the\s+)?"
    r"(?P<e>(?:agent|player|opponent|participant|member|panelist)[ _](?:[a-z]|\d+))\b",
    re.I,
)
_WHEN = re.compile(r"\b(?:round|game|turn|match)\s+(?:\d+|one|two|three|four|five|six|first|second|third|next)\b", re.I)
# What the one addressed has done, not what it is told to do.
_YOU_DID = re.compile(
    r"\byou(?:'ve| have| had|'d| did)?\s+(?:already\s+|just\s+)?(?:found|chosen|chose|picked|made|discovered|identified|"
    r"selected|played|done|reached|settled on)\b", re.I)
# A player's move given as the value of the player ("'Agent B': 'Cooperate'"): the game history's record form.
_RECORD = re.compile(r"\b(?:agent|player|member|panelist|participant)[ _](?:[a-z]|\d+)['\"]?\s*:\s*\S", re.I)
_WHO = re.compile(r"\b(?:agent|player|member|panelist|participant)[ _](?:[a-z]|\d+)\b", re.I)

# Whom an act is aimed at does not act ("cooperate with Agent C"); whose it is does ("the decision for Agent D").
_OBJECT = re.compile(r"\b(?:with|against|towards?|to|versus|vs\.?|on|about|than|at|like)\s+(?:the\s+)?$", re.I)

_ROUND_HEAD = re.compile(r"^[ \t>#*_\-]*(?:\d{1,2}[.)][ \t]+)?[*_]*(?:round|game)[ \t]+(\d+)\b", re.I | re.M)


def rounds_written(text: str) -> set[str]:
    """The rounds or games a reply writes a section for ("**Round 2:** ..." at the start of a line):
    a reply that writes several has invented a game by game account, not given this one answer."""
    return set(_ROUND_HEAD.findall(text))


def actor(text: str, at: int, end: int | None = None) -> str | None:
    """Who does what ``text`` says at ``at``: "me" (the speaker), "you", "other" (someone else, or "you
    both": a pair), or None (no one named).

    The nearest person named before it acts ("I think Player A should defect": Player
    A; "my opponent will defect": the opponent; "I will cooperate with B and defect with
    A": the speaker); with none before it, a first person after it makes it the
    speaker's ("Defect is my choice"), up to ``end`` (the end of its clause).
    """
    who = None
    for m in _ACTOR.finditer(text, 0, at):
        if not _OBJECT.search(text, 0, m.start()):  # ("cooperate with Agent C": Agent C does not act)
            who = "other" if m.lastgroup == "pair" else m.lastgroup
    if who is None and any(m.lastgroup == "me" for m in _ACTOR.finditer(text, at, len(text) if end is None else end)):
        return "me"
    return who


@dataclass(frozen=True, slots=True)
class Said:
    """One answer as a clause of prose gives it.

    Attributes:
        value: The answer.
        form: "own" (the speaker commits: "I defect", "you should defect" said to the
            agent, "the final decision is DEFECT"), "bare" (the answer alone, or leading
            its sentence), "impersonal" (a recommendation naming no one: "the best
            strategy is to cooperate"), "other" (a recommendation or directive to someone
            else: "Player A should defect") or "mention" (anything else: a description,
            history, a noun).
        counts: Whether its clause may state an answer (no question, condition or hedge).
        aimed: The agents, rounds or games it is aimed at ("agent d", "round 2").
        rule: Whether it is said in a rule for other rounds ("I will defect if they defected in the
            previous round"): a strategy's branch, not an answer to this question (see :class:`Clause`).
    """

    value: Any
    form: str
    counts: bool
    aimed: frozenset[str] = frozenset()
    rule: bool = False

    @property
    def voiced(self) -> bool:
        """Whether it puts the answer in a first-person, directive or recommending form (anywhere,
        in a condition or a question too): anything but a mere mention."""
        return self.form != "mention"


def said(clause: Clause, value: Any, at: int, end: int, bare_answer: bool, spoken: bool = False) -> Said:
    """How ``clause`` gives ``value``, found at ``clause.text[at:end]`` (see :class:`Said`).

    Who acts is read in the sentence up to the answer, so that a subject carries over
    a coordinated clause. "You" are the speaker addressed (a reply to a question put to
    the agent) only in a recommendation or directive ("you should defect"; "you are
    cooperating" describes), and someone else in a reply ``spoken`` to a group.
    """
    c = clause.text
    sentence = clause.sentence or c
    offset = max(0, sentence.find(c))
    who = actor(sentence, offset + at, offset + len(c))
    recommends = bool(_RECOMMEND.search(c))
    if who == "you" and _YOU_DID.search(c, 0, at):
        recommends = False  # what the one addressed has done describes ("you've found the optimal strategy to ...")
    if who == "you":
        who = "other" if spoken else ("me" if recommends else "you")
    if _antecedent(c, at):
        form = "mention"  # a supposition ("if I defect while they cooperate, I get 5"), not an answer
    elif who == "me" or _STATED.search(c[:at]):
        form = "own"  # (a clause that states the conclusion, "the decision should be DEFECT", is the speaker's)
    elif who == "other":
        form = "other" if recommends else "mention"
    elif who == "you":
        form = "mention"
    elif _CONCLUDING.search(c[:at]):
        form = "own"
    elif recommends:
        form = "impersonal"
    elif bare_answer and (clause.alone or (clause.lead and not _RECORD.search(sentence))) \
            and not sentence.rstrip().endswith("?"):
        # (An answer that leads a record of players' moves, "Cooperate', 'Agent B': 'Cooperate', ...", is the
        # record's first entry: the game history written on, not an answer standing alone.)
        form = "bare"
    else:
        form = "mention"
    aimed = {m.group("e").lower().replace("_", " ") for m in _AIMED.finditer(c, end)}
    if who == "other":
        named = [m.group(0).lower().replace("_", " ") for m in _WHO.finditer(sentence, 0, offset + at)]
        aimed |= set(named[-1:])
    aimed |= {m.group(0).lower() for m in _WHEN.finditer(sentence)}
    return Said(value, form, clause.counts, frozenset(aimed), clause.rule)


def _antecedent(text: str, at: int) -> bool:
    """Whether ``text[at]`` is inside the condition of a conditional ("if I defect ...", "unless
    they ..."): after a condition word with at most one person named between them. In "if they
    defect I will defect" the second "defect", after a second person, is the consequence."""
    marks = list(_SUPPOSE.finditer(text, 0, at))
    if not marks:
        return False
    return sum(1 for _ in _ACTOR.finditer(text, marks[-1].end(), at)) <= 1


def weigh(head: list[Said], full: list[Said], what: str) -> tuple[Any, str | None]:
    """The one answer a reply commits to, or why there is none.

    ``head`` are the answers where the reply may answer (all of it, or the opening
    sentence of a cut reply), ``full`` those anywhere in it. An answer stands only
    where the speaker commits to exactly one (in its own voice, or the answer alone,
    in a clause that states something) and :func:`veto` finds nothing against it. A
    recommendation that names no one ("the best strategy is to cooperate") counts
    only in a reply that mentions no other answer at all.
    """
    values = {s.value for s in head if s.counts and s.form in ("own", "bare")}
    if not values:
        values = {s.value for s in head if s.counts and s.form == "impersonal"}
        if {s.value for s in full} != values or any(s.form == "other" for s in full):
            values = set()
    if len(values) > 1:
        return None, f"names more than one {what}"
    if not values:
        return None, f"names no {what} of its own"
    return veto(next(iter(values)), full)


def gainsays(value: Any, text: str, said: Callable[[str], list[Said]]) -> str | None:
    """Why a reasoning ``text`` around a JSON or labelled answer ``value`` gainsays it, or None: as prose
    is held, it commits to none (:func:`undecided`), or :func:`veto` finds another answer in what
    ``said`` reads in it."""
    full = prepare(text)
    return undecided(full) or veto(value, said(full))[1]


def veto(value: Any, full: list[Said]) -> tuple[Any, str | None]:
    """``value``, unless the reply puts another answer in a first-person, directive or
    recommending form anywhere (a question and a hedge included), or aims its answers at
    several agents, rounds or games (a plan or a textbook example is no one answer).

    Another answer said only in a rule for other rounds ("I will defect if they defected in
    the previous round"; "... unless they defected recently. In that case, I will defect") is
    what a strategy would play in other circumstances, not another answer to this question:
    it leaves a committed ``value`` standing. A condition about this game ("If they defect, I
    will defect too") still voices another answer, and a reply whose only commitments are
    conditional commits to none (:func:`weigh`)."""
    others = {s.value for s in full if s.voiced and not s.rule} - {value}
    if others:
        return None, f"also puts {', '.join(sorted(map(str, others)))} in a first-person, directive or recommending form"
    aimed = set().union(*(s.aimed for s in full if s.voiced))
    if len(aimed) > 1:
        return None, f"aims answers at several agents, rounds or games ({', '.join(sorted(aimed))})"
    return value, None


_SEP = r"\s*(?:,|/|\||;|&|\+|\bor\b|\band\b|\bvs\.?|\bversus\b|\s-\s)\s*"


def list_spans(text: str, answer: str, keys: bool = False,
               which: Callable[[str], str] = str.lower) -> list[tuple[int, int]]:
    """Spans of ``text`` that list answers rather than choose one.

    ``answer`` is a regex for one answer (an action, an option key). A list is two
    answers or more joined by separators only ("COOPERATE or DEFECT", "DEFECT, DEFECT",
    "A/B", "cooperation and defection"), or two consecutive lines or more that each begin
    with an answer, different ones (``which`` says which answer a match is: "Cooperate"
    over "Cooperating has been ..." names one), as an option list does ("A: Transfuse"
    over "B: Seek a court order"). With ``keys``, a line's answer must stand as a key
    ("A)", "A:", "A.", "(A)", "Option A").
    """
    one = rf"(?<![\w-])(?:{answer})(?![\w-])"
    out = [m.span() for m in re.finditer(rf"{one}(?:{_SEP}{one})+", text, re.I)]
    head = rf"^[ \t]*(?:[-*\u2022+>#]+[ \t]*)?(?:\*\*|__)?(?:option[ \t]*)?[(\[]?(?P<a>{answer})"
    head += r"(?:[)\].:]|\*\*|__|[ \t]+[-\u2013\u2014])" if keys else r"(?![\w-])"
    pattern = re.compile(head, re.I)
    block: list[tuple[int, int, str]] = []
    pos = 0
    for line in [*text.split("\n"), "."]:  # (a last line that ends any block)
        m = pattern.match(line)
        if m:
            block.append((pos, pos + len(line), which(m.group("a"))))
        elif line.strip():  # a blank line does not end a list
            if len({a for _, _, a in block}) >= 2:
                out += [(a, b) for a, b, _ in block]
            block = []
        pos += len(line) + 1
    return out


def blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span blanked out by spaces (positions kept)."""
    for a, b in spans:
        text = text[:a] + " " * (b - a) + text[b:]
    return text


_FILLER = frozenset(
    "again now then so therefore thus hence ok okay yes well definitely simply just final answer move decision "
    "choice action option vote it is its for me this time round game not no never don t do".split()
)


def bare(text: str, answer: re.Pattern) -> bool:
    """Whether ``text`` is an answer and nothing else: its words outside ``answer``'s matches are filler
    ("DEFECT again", "**B**", "Option B.", "not defect")."""
    return answer.search(text) is not None and set(words_of(answer.sub(" ", text).lower())) <= _FILLER


def torn(text: str) -> bool:
    """Whether the reply says it cannot choose ("hard to say", "just as good", "not sure"), or that
    several answers are right ("A and B are both correct")."""
    return bool(_TORN.search(text))


# Declining to play ("As an AI assistant, I don't have personal preferences"), and advice to whoever asked
# ("I would recommend choosing ...", "you should ...").
_DECLINE = re.compile(
    r"\b(?:as an ai\b|as a language model|as an (?:ai )?assistant|i (?:don't|do not) have (?:personal |my own )?"
    r"(?:preferences|opinions|feelings|views|desires)|i (?:can't|cannot|can not|am unable to|am not able to) "
    r"(?:make (?:that|this|a|the) (?:decision|choice)|choose|decide|play)|it(?:'s| is) up to you)",
    re.IGNORECASE,
)
_ADVICE = re.compile(
    r"\b(?:advice|advise|recommend\w*|suggest\w*|you (?:should|could|might|may|can) (?:choose|consider|go|pick|opt|"
    r"play|cooperate|defect)|your (?:choice|decision|best (?:move|option|bet)))\b",
    re.IGNORECASE,
)


def undecided(text: str) -> str | None:
    """Why a reply's prose commits to no answer of its own whatever it names, or None: it says it cannot
    choose (:func:`torn`), or it declines to play and advises whoever asked instead (a model that gives
    advice has not played)."""
    if torn(text):
        return "says it cannot choose"
    if _DECLINE.search(text) and _ADVICE.search(text):
        return "declines to play and advises instead"
    return None


#: A chat template's markers ("[INST]", "<<SYS>>", "<|im_start|>", "<start_of_turn>").
TEMPLATE = re.compile(r"\[/?inst\]|<</?sys>>|<\|[\w ]{1,20}\|>|</?(?:start_of_turn|end_of_turn|s|bos|eos)>", re.I)


def dialogue(text: str) -> bool:
    """Whether the reply invents a conversation (speaker tags, or a chat template's turns), as base models do."""
    return len(_SPEAKER.findall(text)) >= 2 or len(TEMPLATE.findall(text)) >= 2


# -- numbers and amounts in text ----------------------------------------------

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i > 1}
_SCALES = {"hundred": 100, "thousand": 1000, "grand": 1000, "million": 1_000_000}
_WORD = "|".join([*_UNITS, *_TENS, *_SCALES, "a", "and"])
_WORDS_RE = re.compile(rf"\b(?:(?:{_WORD})[\s\-]+)*(?:{_WORD})\b", re.IGNORECASE)
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?|(?<![\w.])[-+]?\.\d+")


def words_to_number(text: str) -> int | None:
    """Read "twelve thousand five hundred" as 12500; None unless every word is a number word."""
    total = current = 0
    seen = False
    for w in re.split(r"[\s\-]+", text.lower().strip()):
        if w in ("and", ""):
            continue
        if w == "a":
            current = max(current, 1)
        elif w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w in _SCALES:
            total += max(current, 1) * _SCALES[w]
            current = 0
        else:
            return None
        seen = seen or w != "a"
    return total + current if seen else None


_MONEY = re.compile(
    r"(?P<neg>-\s*)?(?P<cur>US\$|USD\s?|\$|\u20ac|\u00a3)?\s*"
    r"(?<!\d)(?<!\d\.)(?P<num>\d{1,3}(?:(?:,|\u202f|\u00a0| )\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?(?!\d|\.\d)"
    r"(?!\s*(?:%|percent|/\s*\d|out of))\s*(?P<mult>k\b|K\b|thousand\b|grand\b|m\b|M\b|mn\b|million\b)?"
    r"(?P<unit>\s*(?:dollars?|usd|USD|bucks)\b)?"
)
_PERIOD = re.compile(
    r"^\W{0,3}(?:(?:dollars?|usd|bucks)\s*)?(?:per|a|an|each|every|/)\s*(?P<p>year|yr|annum|month|mo|week|wk|day|hour|hr)\b"
    r"|^\W{0,3}(?:(?:dollars?|usd|bucks)\s*)?(?P<q>yearly|annually|monthly|weekly|daily|hourly)\b",
    re.IGNORECASE,
)
_PERIODS = {"yr": "year", "annum": "year", "yearly": "year", "annually": "year", "mo": "month", "monthly": "month",
            "wk": "week", "weekly": "week", "daily": "day", "hourly": "hour", "hr": "hour"}


@dataclass(frozen=True, slots=True)
class Money:
    """An amount found in text: where, how much, whether marked as money, and per what period."""

    at: int
    value: float
    marked: bool
    period: str | None


def money_mentions(text: str) -> list[Money]:
    """Every amount in ``text`` ("$12,000", "12k", "12 000", "twelve thousand dollars")."""
    out = []
    for m in _MONEY.finditer(text):
        num = float(re.sub(r"[,\u202f\u00a0 ]", "", m.group("num")) + (m.group("frac") or ""))
        mult = (m.group("mult") or "").lower()
        num *= 1000 if mult in ("k", "thousand", "grand") else 1_000_000 if mult in ("m", "mn", "million") else 1
        if m.group("neg"):
            num = -num
        out.append(Money(m.start(), num, bool(m.group("cur") or m.group("unit") or mult), _period(text, m.end())))
    for m in _WORDS_RE.finditer(text):
        value = words_to_number(m.group(0))
        if value is not None and (value >= 10 or re.search(r"\bzero\b", m.group(0), re.I)):
            tail = text[m.end() : m.end() + 9].lower().lstrip()
            marked = tail.startswith(("dollar", "usd", "buck")) or "grand" in m.group(0).lower()
            out.append(Money(m.start(), float(value), marked, _period(text, m.end())))
    return sorted(out, key=lambda x: x.at)


def _period(text: str, end: int) -> str | None:
    m = _PERIOD.match(text[end : end + 24])
    if m is None:
        return None
    word = (m.group("p") or m.group("q")).lower()
    return _PERIODS.get(word, word)


@lru_cache(maxsize=4096)
def echoes(text: str, instruction: str, share: float = 0.6) -> bool:
    """Whether ``text`` repeats the instruction it answers (most of its 4-word runs are in it).

    Texts shorter than six words are never called echoes: a short answer may well
    use the instruction's words ("Keep the confidence"). Cached: a pure function,
    and the fields of one reply are often checked against one instruction.
    """
    words = words_of(text.lower())
    if len(words) < 6 or not instruction:
        return False
    vocabulary, source = _source_grams(instruction)
    need = share * (len(words) - 3)  # of the text's len(words) - 3 runs
    # A run is in the instruction only if its first word is, so this many words bound the
    # runs found: most answers fall short of it, without building their runs.
    if sum(map(vocabulary.__contains__, words)) < need:
        return False
    return sum(map(source.__contains__, _grams(words))) >= need


@lru_cache(maxsize=256)
def _source_grams(instruction: str) -> tuple[frozenset[str], frozenset[tuple[str, ...]]]:
    # Cached: the calls of one turn answer the same instruction.
    words = words_of(instruction.lower())
    return frozenset(words), frozenset(_grams(words))


_WORD_RUN = re.compile(r"\w+")
# Every ASCII character that is not a word character, as a space: in ASCII text, the
# words between spaces are then exactly the regex's \w+ runs, found several times faster.
_NOT_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not _WORD_RUN.match(c)})


def words_of(text: str) -> list[str]:
    """The runs of word characters in ``text``: what ``re.findall(r"\\w+", text)`` finds."""
    if text.isascii():
        return text.translate(_NOT_WORD).split()
    return _WORD_RUN.findall(text)


def _grams(words: list[str], n: int = 4) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(max(1, len(words) - n + 1))]
