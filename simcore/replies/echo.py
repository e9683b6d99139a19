"""What the model was given is never its answer: the spans of a reply that repeat its prompt.

Small models often write back what they were given: the instructions, the payoff
table, the game history, the option list, the JSON example, another agent's message.
Such a span states nothing of the model's own, so :mod:`simcore.replies.reading` sets it
aside before it reads labels or prose.

Text is compared as words: lower case, without punctuation or white space. A word of
the reply is *repeated* when it lies in a run of :data:`K` words that the prompt (any
of the messages the model was given) also holds, in that order. The reply is judged
by units, its lines and the sentences in them; a unit is an **echo** when

- it is a whole line of the prompt (of two words or more), or
- every word of it is repeated, or
- it has :data:`K` words or more and at most one in ten of them is its own.

A chat template's markers (``[INST]``, ``<<SYS>>``, ``<|im_start|>``) are no words.

A JSON object in a reply echoes the prompt when its text, without white space and in
lower case, starts at one of the prompt's braces: the prompt's JSON example, whole or
cut (``{"action": "COOPERATE"`` of ``{"action": "COOPERATE" or "DEFECT"}``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable, NamedTuple, Sequence

from simcore.replies.prose import TEMPLATE

#: Words in a run that counts as repeated.
K = 4

_WORD = re.compile(r"\w+")
_UNIT = re.compile(r"[^\n]+?(?:[.!?](?=\s)|$)", re.M)
_WS = b" \t\n\r\f\v"


class Prompt(NamedTuple):
    """One message of a prompt, prepared for comparison (cached per text)."""

    grams: frozenset[tuple[str, ...]]  # its runs of K words
    lines: frozenset[tuple[str, ...]]  # its lines of two words or more, as words


@lru_cache(maxsize=512)
def _prompt(text: str) -> Prompt:
    # Cached: a system prompt or an instruction is the same in many calls.
    words = _WORD.findall(text.lower())
    grams = frozenset(tuple(words[i : i + K]) for i in range(len(words) - K + 1))
    lines = frozenset(w for w in (tuple(_WORD.findall(line.lower())) for line in text.split("\n")) if len(w) >= 2)
    return Prompt(grams, lines)


def given_texts(given: Iterable[Any]) -> tuple[str, ...]:
    """The texts of what a model was given: strings, or chat messages (their ``content``).

    The model's own earlier replies (role ``assistant``, in a re-ask) are not what it was given.
    """
    out = []
    for m in given:
        if isinstance(m, str):
            out.append(m)
        elif getattr(m, "role", "user") != "assistant":
            out.append(m.content)
    return tuple(t for t in out if t)


def _repeated(words: list[str], prompts: list[Prompt]) -> list[bool]:
    """For each word, whether it lies in a run of K words that a prompt also holds."""
    repeated = [False] * len(words)
    for i in range(len(words) - K + 1):
        gram = tuple(words[i : i + K])
        if any(gram in p.grams for p in prompts):
            for j in range(i, i + K):
                repeated[j] = True
    return repeated


def repeated_share(text: str, given: Sequence[str]) -> float:
    """The share of the words of ``text`` that repeat ``given`` (in runs of :data:`K` words)."""
    words = _WORD.findall(text.lower())
    if not words or not given:
        return 0.0
    return sum(_repeated(words, [_prompt(g) for g in given])) / len(words)


def echo_spans(text: str, given: Sequence[str]) -> list[tuple[int, int]]:
    """The spans of ``text`` (start, end) that are echoes of ``given`` (see the module docstring)."""
    if not given or not text.strip():
        return []
    prompts = [_prompt(g) for g in given]
    # A chat template's markers are no words of the model's own (blanked, positions kept).
    bare = TEMPLATE.sub(lambda m: " " * len(m.group(0)), text)
    found = [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(bare)]
    words = [w for w, _, _ in found]
    repeated = _repeated(words, prompts)
    spans = []
    w = 0
    for unit in _UNIT.finditer(text):
        a, b = unit.span()
        while w < len(found) and found[w][1] < a:
            w += 1
        first = w
        while w < len(found) and found[w][2] <= b:
            w += 1
        n = w - first
        if n == 0:
            continue
        own = n - sum(repeated[first:w])
        if own == 0 or (n >= K and own * 10 <= n) or (n >= 2 and any(tuple(words[first:w]) in p.lines for p in prompts)):
            spans.append((a, b))
    return spans


def set_aside(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with each span (they may overlap) replaced by a line break: what is left cannot join across it."""
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    for a, b in reversed(merged):
        text = text[:a] + "\n" + text[b:]
    return text


def compact(text: str) -> bytes:
    """``text`` in lower case without white space, as UTF-8: what JSON echoes are compared by."""
    return text.lower().encode().translate(None, _WS)


@lru_cache(maxsize=256)
def _compact_at(window: str) -> bytes:
    # Cached: the prompt's JSON example is the same in many calls.
    return compact(window)


def echoes_json(block: str, given: Sequence[Any]) -> bool:
    """Whether a JSON object of a reply (its text, maybe cut) copies what the model was given
    (texts, or chat messages as :func:`given_texts` takes them) from one of its braces."""
    head = None
    for g in given:
        if not isinstance(g, str):
            if getattr(g, "role", "user") == "assistant":
                continue
            g = g.content
        i = g.find("{")
        while i != -1:
            if head is None:
                head = compact(block[:48])
            # Compared in growing prefixes: most objects differ from the prompt within a few bytes.
            size, mine = 48, head
            while True:
                theirs = _compact_at(g[i : i + size]) if size == 48 else compact(g[i : i + size])
                n = min(len(mine), len(theirs))
                if mine[:n] != theirs[:n]:
                    break
                if size >= len(block) and len(theirs) >= len(mine):
                    return True
                if size >= len(block) and i + size >= len(g):
                    break  # the prompt ends first
                size *= 4
                mine = compact(block[:size])
            i = g.find("{", i + 1)
    return False


# A heading of the prompt: a line that opens with a name and a colon ("Your strategy:", "Payoffs
# per game (you, opponent): ...", "Games so far this round (anonymized):").
# (A numbered item, "1. **Model composition**:", is a point of the text's own reasoning, not a section.)
_HEADING = re.compile(r"^[ \t>#*_\-]*(?:\*\*|__)?([A-Za-z][^:\n*]{1,60}?)(?:\*\*|__)?[ \t]*:", re.M)


def _heading_key(label: str) -> str:
    return " ".join(_WORD.findall(label.lower()))


def prompt_headings(given: Sequence[Any]) -> dict[str, frozenset[tuple[str, ...]]]:
    """The headings of the last message the model was given, but its last line (the line a reply
    completes, "Decision (COOPERATE/DEFECT):"): each with its lines there, as words."""
    texts = given_texts(given)
    if not texts:
        return {}
    lines = [line for line in texts[-1].split("\n") if line.strip()][:-1]
    out: dict[str, set[tuple[str, ...]]] = {}
    for line in lines:
        m = _HEADING.match(line)
        if m:
            out.setdefault(_heading_key(m.group(1)), set()).add(tuple(_WORD.findall(line.lower())))
    return {k: frozenset(v) for k, v in out.items()}


def rewrites_prompt(text: str, given: Sequence[Any], answers: Iterable[str] = ()) -> bool:
    """Whether a reply writes the prompt's own sections again, changed: two of its headings or more at
    the start of lines, one at least over other content than the prompt's ("Payoffs per game ...:"
    with payoffs of its own), as a model does that continues its prompt instead of answering it.
    What it writes under them is an invented prompt, not its answer. A heading copied with its line
    unchanged is an echo (set aside), and ``answers``, the schema's labels, are the reply's to write."""
    headings = prompt_headings(given)
    own = set(answers)
    found: dict[str, bool] = {}  # heading -> whether its line here differs from the prompt's
    for line in text.split("\n"):
        m = _HEADING.match(line)
        key = _heading_key(m.group(1)) if m else None
        if key in headings and key not in own:
            changed = tuple(_WORD.findall(line.lower())) not in headings[key]
            found[key] = found.get(key, False) or changed
    return len(found) >= 2 and any(found.values())
