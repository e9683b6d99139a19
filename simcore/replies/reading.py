"""Reading a model's reply into its schema: JSON, then labelled lines, then prose.

:func:`read_reply` tries, for every field of the schema (see :mod:`simcore.replies.schema`):

1. **JSON**: the whole reply, a fenced block or objects embedded in prose; keys in
   any order or case (``Final Answer``, ``finalAnswer``), extra keys ignored,
   trailing commas, smart quotes and Python-style literals repaired. Several
   objects must agree (an echo of ``{"action": "COOPERATE"} or {"action":
   "DEFECT"}`` is no answer).
2. **Labelled lines**: ``Decision: DEFECT``, ``**Final answer:** ...``, ``## Vote``
   over its value, bullets and numbering stripped; the last label of a field wins.
3. **Prose**, for kinds that allow it (decisions, options; the whole reply as the
   first required text field), only when exactly one reading survives, and never
   for refusals or echoes of the instructions.

A field given by two sources must agree, or the reply is unreadable. A reply
missing a required field is **unreadable**: it is flagged and kept raw, and no
default is ever played in its place.

A reply with no text whose ``finish_reason`` is ``reasoning``
(:data:`backends.providers.REASONING_CUT`) was cut by the model's own reasoning: the
token budget went to thinking before any answer began. It is no reply to read: its
reading is ``reasoning_cut`` (:data:`REASONING_CUT`), counted apart from unreadable
replies, and re-asked with more room to reason.

A reply whose ``finish_reason`` is ``length`` was cut at max_tokens. Fields that
are complete in it (a JSON value closed before the cut, a labelled line that is
not the last) are *salvaged*; a field cut in the middle is never read, and prose
is not read at all (what was cut may have changed it).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, NamedTuple, Sequence

from backends.providers import REASONING_CUT as CUT_BY_REASONING
from simcore.replies import prose
from simcore.replies.echo import (
    echo_spans,
    echoes_json,
    given_texts,
    repeated_share,
    rewrites_prompt,
    set_aside,
)
from simcore.replies.schema import (
    Choice,
    FieldPlan,
    Text,
    TextList,
    clean,
    json_example,
    norm,
    plan,
)

HOWS = ("json", "label", "prose")
UNREADABLE = "unreadable"
#: The reading of a reply its model's reasoning cut before any answer (no reply to read).
REASONING_CUT = "reasoning_cut"
_NO_ANSWER = "cut off by its own reasoning before it gave any answer"


@dataclass(frozen=True, slots=True)
class FieldFlag:
    """A required field that a reply did not give cleanly.

    Attributes:
        field: The field's name.
        raw: The text or JSON value it was read from ("" when none was found).
        why: What was wrong.
    """

    field: str
    raw: str
    why: str


@dataclass(frozen=True, slots=True)
class Reading:
    """How one reply was read.

    Attributes:
        value: The schema instance, or None when unreadable.
        how: "json", "label" or "prose" (the weakest source a required field
            needed), or "unreadable".
        truncated: The reply was cut at max_tokens (``finish_reason`` "length").
        errors: Why it is unreadable, or notes on optional fields that were not read.
        partial: The fields an unreadable reply gave cleanly, as (name, value) pairs
            (kept only where a required field is among them): a multi-field reply keeps
            what it got right. Empty for a readable reply (its ``value`` holds them).
        flags: The required fields not read, each with its raw text and why.
        echo: The reply only repeats what the model was given (see :mod:`simcore.replies.echo`).
        partial_how: The weakest source the fields in ``partial`` needed.
    """

    value: Any
    how: str
    truncated: bool = False
    errors: tuple[str, ...] = ()
    partial: tuple[tuple[str, Any], ...] = ()
    flags: tuple[FieldFlag, ...] = ()
    echo: bool = False
    partial_how: str = "json"

    @property
    def readable(self) -> bool:
        return self.how not in (UNREADABLE, REASONING_CUT)

    @property
    def reasoning_cut(self) -> bool:
        """The model spent its whole budget reasoning and gave no answer."""
        return self.how == REASONING_CUT

    @property
    def salvaged(self) -> bool:
        """Cut at max_tokens, yet every required field was complete."""
        return self.truncated and self.readable

    @property
    def fields(self) -> dict[str, Any]:
        """The fields read cleanly, by name: all of a readable reply's, or :attr:`partial`."""
        if self.value is not None:
            return {name: getattr(self.value, name) for name in self.value.__dataclass_fields__}
        return dict(self.partial)

    @property
    def kept_some(self) -> bool:
        """Unreadable as a whole, yet with some required field read cleanly (kept in :attr:`partial`)."""
        return not self.readable and bool(self.partial)

    def describe(self) -> str:
        """One line for logs and re-ask prompts."""
        if self.readable:
            return f"read by {self.how}" + (" (salvaged from a cut reply)" if self.truncated else "")
        cut = "cut off at the token limit; " if self.truncated else ""
        return cut + ("; ".join(self.errors) or "no answer found")


_ECHO_ONLY = "repeats what it was given (prompt, history, options or JSON example) and says nothing of its own"


def read_reply(text: str, schema: type, *, finish_reason: str = "stop",
               allowed: Mapping[str, Any] | None = None, instruction: str = "",
               given: Sequence[Any] = (), known: Reading | None = None) -> Reading:
    """Read ``text`` into ``schema``; never raises.

    Args:
        text: The raw reply.
        schema: A reply dataclass (see :mod:`simcore.replies.schema`).
        finish_reason: As the backend reported it; "length" marks a cut reply.
        allowed: Per-call choices, by field name (e.g. a vignette's option keys
            and texts for an :func:`~simcore.replies.schema.option` field).
        instruction: What the reply answers (system prompt and instruction, not the
            transcript): a JSON text value that merely repeats it is no answer.
        given: Everything the model was given (the request's messages, or their
            texts): spans of the reply that repeat it are set aside before labels and
            prose are read, and a JSON object copied from it is no answer.
        known: The reading of the reply this one re-asks: the fields it read
            cleanly stand, and this reply need give only the others. A re-ask asks for
            a JSON object and nothing else, so its reply answers only by a JSON object
            of its own: labels and prose around it are not read.
    """
    rp = _reader_plan(schema)
    fields = rp.fields
    allowed = allowed or {}
    text = text if isinstance(text, str) else ""
    if finish_reason == CUT_BY_REASONING and not text.strip():
        return Reading(None, REASONING_CUT, False, (_NO_ANSWER,))
    truncated = finish_reason in ("length", CUT_BY_REASONING)
    objects, spans, broken = json_objects(text, truncated)
    copied: list[tuple[int, int]] = []  # JSON objects copied from the prompt: no answer, and part of an echo
    if objects:
        # Copied from the prompt, or written into an instruction ("Reply with JSON: {...}", "Reply again
        # with only this JSON object:" over a fenced object): the instruction's example, no answer.
        for a, b in spans:
            line = _instruction_start(text, a)
            if given and echoes_json(text[a:b], given):
                copied.append((a, b))
            elif _INSTRUCTED.search(text, line, a):
                copied.append((line, b))
        if copied:
            own = [i for i, (a, b) in enumerate(spans) if not any(x <= a and b <= y for x, y in copied)]
            objects, spans = [objects[i] for i in own], [spans[i] for i in own]
    # The text around the reply's own JSON, at the same positions.
    rest = "" if spans == [(0, len(text))] else _remove(text, spans)
    texts = given_texts(given) if given and rest.strip() else ()
    if copied or broken or rest.strip():
        # Lists of answers ("COOPERATE or DEFECT", an option list) and echoes never answer.
        aside = [span for f in fields for span in f.kind.lists(rest, allowed.get(f.name))]
        echo = (echo_spans(rest, texts) if texts else []) + copied
        if echo and not objects and not _WORDS.search(set_aside(rest, echo)):
            return Reading(None, UNREADABLE, truncated, (_ECHO_ONLY,), echo=True)
        if aside:
            # A list in parentheses is a format hint ("Decision (COOPERATE/DEFECT): ..."): blanked in
            # place, so that the label around it still reads.
            hints = [(a - 1, b + 1) for a, b in aside if rest[a - 1 : a] == "(" and rest[b : b + 1] == ")"]
            for a, b in hints:
                rest = rest[:a] + " " * (b - a) + rest[b:]
            aside = [(a, b) for a, b in aside if (a - 1, b + 1) not in hints]
        # A list is blanked in place: the sentence around it stays whole, so that a condition before it
        # ("if you defect and cooperate (i.e., ...), you will ...") still holds after it.
        rest = prose.blank(rest, aside) if aside else rest
        if echo or broken:
            rest = set_aside(rest, echo + broken)  # (nothing inside broken JSON answers)
    if spans and rest:
        rest = _PADDING.sub("\n", rest)  # the own JSON's blanks, no longer needed for positions
    if rest.strip() and prose.dialogue(text):  # (a reply of JSON alone invents nothing around it)
        return Reading(None, UNREADABLE, truncated, ("invents a conversation instead of answering",))
    if rest.strip() and given and rewrites_prompt(text, given, rp.names):
        return Reading(None, UNREADABLE, truncated, ("writes its prompt's sections again instead of answering",))
    own = [i for i, o in enumerate(objects) if _keyed(o, rp.names)]
    blocks = {id(objects[i]): text[spans[i][0] : spans[i][1]] for i in own} if len(spans) == len(objects) else {}
    keyed = [objects[i] for i in own]
    keyed, clash = _resolve(keyed, text, spans if len(keyed) == len(objects) else [], fields)
    if clash:
        return Reading(None, UNREADABLE, truncated, (clash,))
    # A re-ask's reply answers only as the re-ask asked, by a JSON object of its own: what it writes around
    # one (the follow-up written back, a chat about the task) is no answer.
    reask = known is not None
    labels = label_values(rest, schema, truncated) if rest.strip() and not reask else {}  # (blank: no label)
    # (An object of one key can hide no second answer; only a nested or cut one needs its text scanned.)
    by_norm = [_with_deeper(_normed(obj), blocks.get(id(obj), ""), rp, allowed,
                            truncated or any(isinstance(v, (dict, list)) for v in obj.values()))
               if len(obj) > 1 or truncated else _normed(obj) for obj in keyed]
    earlier = dict(known.partial) if known is not None else {}
    values: dict[str, Any] = {}
    errors: list[str] = []
    flags: list[FieldFlag] = []
    notes: list[str] = []
    rank = HOWS.index(known.partial_how) if earlier else 0
    for f in fields:
        if earlier.get(f.name) is not None:
            values[f.name] = earlier[f.name]
            continue
        found: list[tuple[int, Any]] = []
        problems: list[str] = []
        raws: list[Any] = []
        for obj in by_norm:
            for raw in _lookup(obj, f):
                raws.append(raw)
                _add(found, problems, 0, f, raw, allowed, instruction)
        for raw in labels[f.name] if isinstance(labels.get(f.name), Twice) else [labels.get(f.name)] * (f.name in labels):
            raws.append(raw)
            _add(found, problems, 1, f, raw, allowed, instruction)
        if not found and not problems and broken and not earlier:
            problems.append("its JSON breaks off before this field is complete and valid" if truncated
                            else "its JSON does not parse")
        if not found and not problems and reask:
            problems.append("not in a JSON object of its own (a re-ask asks for the JSON alone)")
        if not found and not problems:
            # Prose names no field: with two fields of a kind (four ratings), it cannot say which.
            if f.kind.prose and f.name in rp.alone:
                value, err = f.kind.from_prose(rest, allowed.get(f.name), truncated, spoken=rp.spoken)
                if err is None:
                    found.append((2, value))
                elif rest.strip():
                    problems.append(err)
            elif f is rp.primary and not keyed and not truncated:
                body = _prose_body(rest, rp.pattern, instruction, texts)
                if body:
                    found.append((2, body))
        # (Two answers can only conflict when there are two.)
        conflict = len(found) > 1 and len({json.dumps(v, sort_keys=True, default=str) for _, v in found}) > 1
        message = None
        if conflict:
            message = f"{f.name}: conflicting answers"
        elif not found:
            message = f"{f.name}: " + (problems[0] if problems else "missing")
        elif f.required and found[0][1] in ("", [], None):
            message = f"{f.name}: is empty"
        elif f.required and min(r for r, _ in found) < 2 and f.kind.prose:
            why = _reasoning(keyed, rest, fields, f)
            gainsaid = f.kind.against(why, found[0][1], allowed.get(f.name), truncated) if why else None
            if gainsaid is not None:
                message = f"{f.name}: the reasoning {gainsaid}"
        if message is None and f.kind.prose and min(r for r, _ in found) > 0 and len(prose.rounds_written(text)) > 1:
            message = f"{f.name}: writes answers for several rounds or games"
        if message is None:
            values[f.name] = found[0][1]
            if f.required:
                rank = max(rank, min(r for r, _ in found))
        elif f.required:
            errors.append(message)
            flags.append(FieldFlag(f.name, _raw_text(raws[0]) if raws else "", message.split(": ", 1)[1]))
        elif problems or conflict:
            notes.append(message)
    if errors:
        # Kept only where a required field was read: an optional reasoning alone is nothing to keep.
        kept = any(f.required and f.name in values for f in fields)
        partial = tuple((f.name, values[f.name]) for f in fields if f.name in values) if kept else ()
        return Reading(None, UNREADABLE, truncated, tuple(errors), partial, tuple(flags), partial_how=HOWS[rank])
    try:
        value = schema(**{f.name: values.get(f.name) for f in fields})
    except (TypeError, ValueError) as exc:  # a schema's own checks
        partial = tuple((f.name, values[f.name]) for f in fields if f.name in values)
        return Reading(None, UNREADABLE, truncated, (str(exc),), partial, partial_how=HOWS[rank])
    return Reading(value, HOWS[rank], truncated, tuple(notes))


_WORDS = re.compile(r"\w")
# An instruction to write JSON, in any wording ("Reply with JSON:", "Reply again with only this JSON object",
# "respond in the following JSON format"): what it introduces is its example.
_INSTRUCTED = re.compile(r"\b(?:reply|respond|answer)\b(?:\s+\w+){0,6}?\s+(?:with|in|using)\b[^\n.{]{0,40}?\bjson\b",
                         re.I)
_FENCE_LINE = re.compile(r"[ \t>*_`]*(?:```[\w+.-]*)?[ \t*_`]*")


def _instruction_start(text: str, at: int) -> int:
    """Where the instruction that introduces a JSON object at ``text[at]`` may begin: the start of the
    object's line, or, for an object on a line of its own, of the line above it (past blank and fence
    lines between them)."""
    line = text.rfind("\n", 0, at) + 1
    if text[line:at].strip() and not _FENCE_LINE.fullmatch(text[line:at]):
        return line
    for _ in range(3):  # (the object's own line, then up past a fence mark or a blank line)
        if not line:
            return 0
        line = text.rfind("\n", 0, line - 1) + 1
        if not _FENCE_LINE.fullmatch(text[line : text.find("\n", line)]):
            return line
    return line


def _raw_text(raw: Any) -> str:
    return raw if isinstance(raw, str) else json.dumps(raw, default=str)


class _ReaderPlan(NamedTuple):
    fields: tuple[FieldPlan, ...]
    names: frozenset[str]  # every alias of every field
    alone: frozenset[str]  # fields whose kind no other field shares (prose can say which it is)
    primary: FieldPlan | None  # the text field a reply made of prose fills
    by_alias: dict[str, str]  # alias -> field name (a field's own name first; the first field wins)
    pattern: re.Pattern  # any field's label
    spoken: bool  # the reply is spoken to a group ("you" are the others): the schema's SPOKEN


@lru_cache(maxsize=None)
def _reader_plan(schema: type) -> _ReaderPlan:
    # Cached per schema: what every reply to it needs, computed once.
    fields = plan(schema)
    kinds = [type(f.kind) for f in fields]
    by_alias: dict[str, str] = {}
    for f in fields:
        for a in f.aliases:
            by_alias.setdefault(a, f.name)
    return _ReaderPlan(
        fields,
        frozenset(a for f in fields for a in f.aliases),
        frozenset(f.name for f in fields if kinds.count(type(f.kind)) == 1),
        _first_text(fields),
        by_alias,
        _label_re(list(by_alias)),
        bool(getattr(schema, "SPOKEN", False)),
    )


_PLACEHOLDER = re.compile(
    r"^\s*(?:str(?:ing)?|text|number(?:\s*\(?0\s*-\s*1\)?)?|integer|float|bool(?:ean)?|true or false|letter|"
    r"label|dollars?\b.*|amount|\.\.\.|<[^>]*>|\[[^\]]*\]|your [\w ]+ here|[\w ]+ here|"
    r"(?:\w+|\"\w+\") or (?:\w+|\"\w+\"))\s*$",
    re.IGNORECASE,
)


def _add(found: list, problems: list, rank: int, f: FieldPlan, raw: Any, allowed: Mapping[str, Any],
         instruction: str = "") -> None:
    if isinstance(raw, dict) or (isinstance(raw, list) and not isinstance(f.kind, TextList)):
        problems.append(f"{raw!r:.60} is {'an object' if isinstance(raw, dict) else 'a list'}, not one value")
        return
    if isinstance(raw, str) and (
        (_PLACEHOLDER.match(raw) and not (isinstance(f.kind, Choice) and raw.strip().strip("\"").upper() in f.kind.options))
        or prose.echoes(raw, instruction)
        or (isinstance(f.kind, Text) and _restates_example(raw, instruction, f.aliases))
    ):
        problems.append(f"{raw[:60]!r} repeats the instructions instead of answering")
        return
    value, err = f.kind.read(raw, allowed.get(f.name))
    if err is None:
        found.append((rank, value))
    else:
        problems.append(err)


def _restates_example(value: str, instruction: str, aliases: tuple[str, ...]) -> bool:
    """Whether a text value is the instruction's JSON example for its field again: it opens with three
    words of the example's value in a row, or seven in ten of its words are the example's
    ("At most three sentences." of "a concise strategy for your subagent, at most three sentences")."""
    examples = _example_values(instruction)
    example = next((examples[a] for a in aliases if a in examples), "")
    words = prose.words_of(value.lower())
    if not example or not words:
        return False
    given = prose.words_of(example.lower())
    runs = {" ".join(given[i : i + 3]) for i in range(len(given) - 2)}
    vocabulary = set(given)
    return (len(words) >= 3 and " ".join(words[:3]) in runs) or sum(w in vocabulary for w in words) >= 0.7 * len(words)


@lru_cache(maxsize=256)
def _example_values(instruction: str) -> dict[str, str]:
    """The text values a JSON example in the instruction gives its keys, by normalised key."""
    # Cached: the calls of one turn answer the same instruction.
    return {norm(k): v for k, v in _EXAMPLE_PAIR.findall(instruction)}


_EXAMPLE_PAIR = re.compile(r'"([^"\n]{1,40})"\s*:\s*"([^"\n]{1,300})"')


def _first_text(fields: tuple[FieldPlan, ...]) -> FieldPlan | None:
    """The text field a reply made of prose fills: the first required one, else the first."""
    texts = [f for f in fields if isinstance(f.kind, Text)]
    return next((f for f in texts if f.required), texts[0] if texts else None)


# -- JSON --------------------------------------------------------------------

_SMART = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})


def json_objects(text: str, truncated: bool = False) -> tuple[list[dict[str, Any]], list[tuple[int, int]],
                                                              list[tuple[int, int]]]:
    """The JSON objects in ``text``, their spans, and the spans of broken JSON.

    Complete top-level ``{...}`` blocks are parsed (with repairs); in a cut reply, an
    object left open at the end gives its complete key/value pairs, only while the
    text from its brace to the cut is still a valid prefix of a JSON document. A
    block that does not parse, or an open one that gives no pair, is broken: no
    answer, and nothing inside it (an object nested in it, a key that looks like a
    label, a string) answers either.
    """
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):  # the common case: JSON and nothing else
        try:
            whole = _JSON.decode(stripped)
        except (json.JSONDecodeError, ValueError, RecursionError):
            whole = None
        if isinstance(whole, dict):
            return [whole], [(0, len(text))], []
    out: list[dict[str, Any]] = []
    spans: list[tuple[int, int]] = []
    broken: list[tuple[int, int]] = []
    i = text.find("{")
    while i != -1:
        end = _balanced_end(text, i)
        if end is None:
            partial = partial_object(text, i) if truncated else {}
            if partial:
                out.append(partial)
                spans.append((i, len(text)))
            else:  # (a valid prefix with no pair complete is JSON too: what its strings say is not prose)
                broken.append((i, len(text)))
            break
        obj = parse_object(text[i : end + 1])
        if obj is not None:
            out.append(obj)
            spans.append((i, end + 1))
        else:
            broken.append((i, end + 1))
        i = text.find("{", end + 1)
    return out, spans, broken


def parse_object(block: str) -> dict[str, Any] | None:
    """A dict from one ``{...}`` block: JSON, else repaired JSON, else a Python literal."""
    for candidate in (block, _repair(block)):
        try:
            value = _JSON.decode(candidate)
        except (json.JSONDecodeError, ValueError, RecursionError):
            continue
        return value if isinstance(value, dict) else None
    python = block.translate(_SMART)
    if _JOINED.search(python):
        return None  # two strings with no comma between them: a broken list, not one string Python would join
    try:
        value = ast.literal_eval(python)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# A string literal closed and another opened with only white space between them.
_JOINED = re.compile(r"""(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')\s+["']""")


def _repair(block: str) -> str:
    s = block.translate(_SMART)
    s = re.sub(r",\s*([}\]])", r"\1", s)
    s = re.sub(r"^\s*//[^\n]*$|/\*.*?\*/", "", s, flags=re.M | re.S)  # comments
    s = re.sub(r"\\(?![\"\\/bfnrtu])", "", s)  # invalid escapes such as \''
    s = re.sub(r"(?<!\\)\n(?=[^\"{}]*\"\s*[,}])", " ", s)  # raw line breaks inside strings
    return re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", re.sub(r"\bNone\b", "null", s)))


def _balanced_end(text: str, start: int) -> int | None:
    """Index of the brace closing the one at ``start``, skipping braces in strings."""
    depth, in_str, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


_WS = re.compile(r"[\s,]*")
_COLON = re.compile(r"\s*:\s*")
_SPACE = re.compile(r"\s*")


def partial_object(text: str, start: int) -> dict[str, Any]:
    """The complete key/value pairs of an object cut off before its end.

    Only where ``text[start:]`` is still a valid prefix of a JSON document (see
    :func:`valid_prefix`): ``{"action": "COOPERATE" or {"DEFECT`` gives nothing. A
    string value counts once its closing quote is there, a number or literal once a
    delimiter follows it; the pair being written when the text ends is left out.
    """
    if not valid_prefix(text, start):
        return {}
    out: dict[str, Any] = {}
    i = start + 1
    while True:
        i = _WS.match(text, i).end()
        if i >= len(text) or text[i] != '"':
            return out
        try:
            key, i = _JSON.raw_decode(text, i)
            colon = _COLON.match(text, i)
            if colon is None:
                return out
            value, j = _JSON.raw_decode(text, colon.end())
        except (json.JSONDecodeError, ValueError, RecursionError):
            return out
        k = _SPACE.match(text, j).end()
        if not isinstance(value, (str, list, dict)) and (k >= len(text) or text[k] not in ",}"):
            return out
        _put(out, key, value)
        i = k


_TOKEN = re.compile(
    r'\s*(?:(?P<punct>[{}\[\]:,])|(?P<string>"(?:[^"\\]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")|'
    r"(?P<number>-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<literal>true|false|null))"
)
# What a token may be cut to at the end of the text: an open string, a number, a literal begun.
_CUT_TOKEN = re.compile(
    r'\s*(?:"(?:[^"\\]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{0,4})?)*|-?(?:0|[1-9]\d*)?(?:\.\d*)?(?:[eE][-+]?\d*)?|'
    r"t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?)\Z"
)


def valid_prefix(text: str, start: int) -> bool:
    """Whether ``text[start:]``, an object left open at the end of a cut reply, is a prefix of
    some valid JSON document (strings may hold raw line breaks, as ``json.loads(strict=False)``
    allows): only then can its complete pairs be what the model was writing."""
    stack: list[str] = []  # the open containers, "{" or "["
    want = "value"  # what comes next: value, key, colon, comma (or a close), key_or_close, value_or_close
    i = start
    while True:
        m = _TOKEN.match(text, i)
        if m is None:
            return _CUT_TOKEN.match(text, i) is not None and bool(stack)
        i = m.end()
        punct, kind = m.group("punct"), m.lastgroup
        if want in ("key", "key_or_close"):
            if kind == "string":
                want = "colon"
            elif punct == "}" and want == "key_or_close":
                stack.pop()
                want = "comma"
            else:
                return False
        elif want == "colon":
            if punct != ":":
                return False
            want = "value"
        elif want in ("value", "value_or_close"):
            if punct in ("{", "["):
                stack.append(punct)
                want = "key_or_close" if punct == "{" else "value_or_close"
            elif punct == "]" and want == "value_or_close":
                stack.pop()
                want = "comma"
            elif kind in ("string", "number", "literal"):
                want = "comma"
            else:
                return False
        else:  # after a value: a comma, or the close of its container
            if not stack:
                return False  # the document ended before the cut: this is no open object
            if punct == ",":
                want = "key" if stack[-1] == "{" else "value"
            elif punct == ("}" if stack[-1] == "{" else "]"):
                stack.pop()
                want = "comma"
            else:
                return False


def _keyed(obj: Mapping[str, Any], names: frozenset[str]) -> bool:
    """Whether a top-level object has a key among ``names`` (a schema's aliases).

    Only the reply's own top-level object answers: one nested in another object
    (``{"rounds": [{"action": ...}]}``, ``{"response": {"action": ...}}``) describes
    something else, or answers inside an invented frame.
    """
    return any(norm(k) in names for k in obj)


_REVISED = re.compile(
    r"\b(?:draft|on second thought|on (?:further )?reflection|actually|correction|corrected|revised|revision|"
    r"final (?:answer|version|decision|vote|bid|rating)|let me reconsider|no,? wait|scratch that|instead)\b",
    re.IGNORECASE,
)


def _resolve(objs: list[dict[str, Any]], text: str, spans: list[tuple[int, int]],
             fields: tuple[FieldPlan, ...]) -> tuple[list[dict[str, Any]], str | None]:
    """Several JSON objects must agree on every field they share; an explicit revision
    between them ("Draft: {...} On second thought: {...}") keeps the last."""
    if len(objs) < 2:
        return objs, None
    normed = [_normed(o) for o in objs]
    for f in fields:
        said = {json.dumps(f.kind.read(v), sort_keys=True, default=str) for o in normed for v in _lookup(o, f)}
        if len(said) > 1:
            between = text[: spans[-1][0]] if len(spans) == len(objs) else ""
            if _REVISED.search(between):
                return objs[-1:], None
            return objs, f"{f.name}: several JSON objects that disagree"
    return objs, None


class Twice(tuple):
    """The values of a key given twice, differently, in one object: no value of it stands."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        _put(out, k, v)
    return out


def _put(out: dict[str, Any], k: str, v: Any) -> None:
    if k in out and out[k] != v:
        prev = out[k]
        out[k] = Twice((*prev, v) if isinstance(prev, Twice) else (prev, v))
    else:
        out[k] = v


# Keys given twice are kept as :class:`Twice` (``json.loads`` would keep the last in silence).
_JSON = json.JSONDecoder(object_pairs_hook=_pairs)


def _normed(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` keyed by normalised key (keys that normalise alike and differ: :class:`Twice`)."""
    out = {norm(k): v for k, v in obj.items()}
    if len(out) < len(obj):  # some keys normalise alike: do they agree?
        out = {}
        for k, v in obj.items():
            _put(out, norm(k), v)
    return out


def _with_deeper(by_norm: dict[str, Any], block: str, rp: _ReaderPlan, allowed: Mapping[str, Any],
                 deep: bool) -> dict[str, Any]:
    """``by_norm`` with each fixed answer it gives joined by every other answer the object names for its
    field: the values of keys naming the field anywhere in the object's text ``block`` when ``deep``
    (nested or cut: ``{"action": "COOPERATE", "previous": [{"action": "DEFECT"``, a nested
    ``"action_type": "DEFECT"``), and, at any depth, a value of another key that is exactly another answer
    of the field (``{"action": "COOPERATE", "type": "DEFECT"}``, ``"choices": [{"name": "DEFECT"}]``), unless
    the key says the value is someone else's or an earlier one (``"opponent_action"``, ``"last_move"``). An
    object that names two answers for one field commits to neither."""
    pairs = []
    if deep:
        for k, v in _PAIR.findall(block):
            try:  # (a bad escape in a model's JSON is no pair, never an error)
                pairs.append((norm(json.loads(f'"{k}"', strict=False)), json.loads(v, strict=False)))
            except ValueError:
                continue
    else:
        pairs = list(by_norm.items())
    out = by_norm
    for f in rp.fields:
        if isinstance(f.kind, (Text, TextList)):
            continue
        top = next((a for a in f.aliases if by_norm.get(a) is not None), None)
        if top is None:
            continue
        # Below the top level, a key that names the field among other words ("action type") gives it too;
        # a key that names no field of the schema gives it where its value is exactly an answer.
        given = [v for k, v in pairs if k in f.aliases or (k not in by_norm and _names(k, f.aliases))]
        given += [n for k, v in pairs if k not in rp.names and not _NOT_OURS.search(k)
                  and (n := f.kind.names(v, allowed.get(f.name))) is not None]
        if len({json.dumps(v) for v in given}) > 1:
            out = dict(out) if out is by_norm else out
            out[top] = Twice(given)
    return out


# A key (normalised) that says whose or when its value is, other than the reply's own answer now.
_NOT_OURS = re.compile(
    r"\b(?:their|his|her|opponents?|other|others|partners?|agent|player|last|previous|prior|initial|earlier|"
    r"original|history|past|expected|predicted|prediction)\b"
)


def _names(key: str, aliases: tuple[str, ...]) -> bool:
    """Whether a normalised key (words and single spaces) holds one of a field's names as whole words
    ("action type")."""
    return any(f" {a} " in f" {key} " for a in aliases)


# A key and a plain value in JSON text (escaped quotes inside strings never start one).
_PAIR = re.compile(r'"((?:[^"\\\n]|\\.)*)"\s*:\s*("(?:[^"\\\n]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false)')


def _lookup(by_norm: Mapping[str, Any], f: FieldPlan) -> list[Any]:
    """Every value, not null, that ``by_norm`` (see :func:`_normed`) gives ``f`` under any alias."""
    out: list[Any] = []
    for alias in f.aliases:
        value = by_norm.get(alias)
        if isinstance(value, Twice):
            out.extend(v for v in value if v is not None)
        elif value is not None:
            out.append(value)
    return out


_REASONING_KEYS = {"reasoning", "reason", "explanation", "rationale", "analysis", "thoughts", "thinking", "argument"}


def _reasoning(keyed: list[dict[str, Any]], rest: str, fields: tuple[FieldPlan, ...], field: FieldPlan) -> str:
    """The reply's reasoning around an answer: what a consistency check reads."""
    parts = []
    for obj in keyed:
        for k, v in obj.items():
            key = norm(k)
            if isinstance(v, str) and key not in field.aliases and (
                key in _REASONING_KEYS or any(key in f.aliases and isinstance(f.kind, Text) for f in fields)
            ):
                parts.append(v)
    for line in rest.split("\n"):
        m = _ANY_LABEL.match(line)
        if m is None:
            parts.append(line)
        elif norm(m.group("label")) in _REASONING_KEYS:
            parts.append(m.group("value"))
    return "\n".join(p for p in parts if p.strip())


def _remove(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the spans and fence marks blanked: a line break, then spaces (positions kept)."""
    for a, b in spans:
        text = text[:a] + "\n" + " " * (b - a - 1) + text[b:]
    return _FENCE_MARK.sub(lambda m: "\n" + " " * (len(m.group(0)) - 1), text) if "```" in text else text


_PADDING = re.compile(r"\n {7,}")
_FENCE_MARK = re.compile(r"```[\w+.-]*")


# -- labelled lines -------------------------------------------------------------

_ANY_LABEL = re.compile(
    r"^\s*(?:[#>]+\s*|[-*\u2022+]\s+|\d{1,2}[.)]\s+)?(?:\*\*|__|\*)?\s*"
    r"(?P<label>[A-Za-z][A-Za-z0-9 _'/()-]{0,40}?)\s*(?:\*\*|__|\*)?\s*:\s*(?P<value>.*)$"
)
_HEADING = re.compile(r"^\s*(?:#+\s*|\*\*|__)(?P<label>[A-Za-z][A-Za-z0-9 _'/()-]{0,48}?)\s*(?:\*\*|__)?:?\s*$")
_QUALIFIER = r"(?:(?:my|our|the|your|final|revised|updated|new|proposed|chosen|overall|corrected|current)\s+)*"
_TAG = re.compile(r"<(?P<tag>[A-Za-z_][\w-]{0,40})>\s*(?P<value>.*?)\s*</(?P=tag)>", re.DOTALL)


# A line that opens with markup, a number or a bullet and one or two words in title case before a label: a
# heading of the reply's own points ("4. **Strategy Choice**:", "## Power Decision:").
_LONGER_HEADING = re.compile(r"\s*(?:[-*\u2022+]\s+|\d{1,2}[.)]\s+)?(?:\*\*|__|#+\s*)(?:[A-Z][a-z]+\s+){1,2}\Z")
_NOT_MINE = re.compile(
    r"\b(?:their|his|her|opponent'?s?|other|partner'?s?|agent \w+'?s?|player \w+'?s?|last|previous|prior|"
    r"initial|earlier|original)\W+(?:\w+\W+)?$",
    re.IGNORECASE,
)


def label_key(label: str) -> str:
    """A label as compared with field aliases: no qualifiers ("Final", "Revised") or asides."""
    s = norm(re.sub(r"\([^)]*\)", " ", label))
    return re.sub(rf"^{_QUALIFIER}", "", s).strip()


def _label_re(aliases: list[str]) -> re.Pattern:
    return _label_re_of(tuple(aliases))


@lru_cache(maxsize=256)
def _label_re_of(aliases: tuple[str, ...]) -> re.Pattern:
    # Cached: built from a schema's aliases, the same for every reply to it.
    words = "|".join(sorted((r"\s+".join(map(re.escape, a.split())) for a in aliases), key=len, reverse=True))
    return re.compile(
        rf"(?<![\w])(?:\*\*|__)?{_QUALIFIER}(?P<label>{words})(?:\s*\([^)]*\))?\s*(?:\*\*|__)?\s*"
        rf"(?:[:=]|\s[-\u2013\u2014]\s)\s*(?:\*\*|__)?",
        re.IGNORECASE,
    )


def label_values(text: str, schema: type, truncated: bool = False) -> dict[str, Any]:
    """The value each field's labels give: ``Label: value`` anywhere in a line,
    headings over their value, and tags (``<vote>B</vote>``).

    A field labelled twice with different values takes the last only where the reply
    revises explicitly (a "Final", "Revised" label, or "on reflection", "actually"
    between them); else it gets both, as :class:`Twice`, and no value stands. In a cut
    reply the last line (which may be cut) is not read.
    """
    rp = _reader_plan(schema)
    by_alias = rp.by_alias
    found: list[tuple[int, str, str]] = []  # (position, field, value)
    for m in _TAG.finditer(text):
        name = by_alias.get(label_key(m.group("tag")))
        if name is not None and (not truncated or m.end() < len(text)):
            found.append((m.start(), name, clean(m.group("value"))))
    original = text
    text = _TAG.sub(lambda m: "\n", text)
    lines = text.split("\n")
    if truncated:  # the last line may be cut, unless it visibly ended
        while lines and not lines[-1].strip():
            lines.pop()
        if lines and not (text.endswith("\n") and re.search(r"[.!?)\"'*]\s*$", lines[-1])):
            lines.pop()
    pattern = rp.pattern
    offset = 0
    for k, line in enumerate(lines):
        # Labels of someone else's or an earlier answer ("Their last move:", "Initial vote:") are not the reply's,
        # nor is a heading that ends with a field's name ("4. **Strategy Choice**:" names another thing).
        marks = [m for m in pattern.finditer(line)
                 if not _NOT_MINE.search(line, 0, m.start()) and not _LONGER_HEADING.match(line, 0, m.start())]
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
            value = clean(line[m.end() : end].strip().rstrip(",;"))
            found.append((offset + m.start(), by_alias[label_key(m.group("label"))], value))
        if not marks:
            head = _HEADING.match(line)
            name = by_alias.get(label_key(head.group("label"))) if head else None
            if name is not None:
                tail = _following(lines, k, pattern)
                if tail is not None and not (truncated and k + 1 + len(tail) >= len(lines)):
                    found.append((offset, name, " ".join(tail)))
        offset += len(line) + 1
    out: dict[str, Any] = {}
    since: dict[str, int] = {}  # where the field's value last changed
    for at, name, value in sorted(found):
        if not value:
            continue
        before = out.get(name)
        if before is None or before == value:
            out[name] = value
        elif _REVISED.search(original, since[name], at + 40):
            out[name] = value  # an explicit revision: the last label wins
        else:
            out[name] = Twice((*before, value) if isinstance(before, Twice) else (before, value))
        if before != value:
            since[name] = at
    return out


def _following(lines: list[str], k: int, pattern: re.Pattern) -> list[str] | None:
    """The lines under a heading, up to a blank line or the next label."""
    tail: list[str] = []
    for nxt in lines[k + 1 :]:
        if not nxt.strip():
            if tail:
                break
            continue
        if pattern.search(nxt) or _HEADING.match(nxt):
            break
        tail.append(clean(nxt.strip()))
    return tail or None


# -- prose -------------------------------------------------------------------

_REFUSAL = re.compile(
    r"\b(?:as an ai|as a language model|sorry|i(?:'m| am) (?:unable|not able)|not sure how to|i cannot|i can't|"
    r"i can not|i won't (?:be able|answer|provide|take part|participate)|i do not (?:have|feel comfortable)|"
    r"i don't (?:have|feel comfortable)|not able to (?:answer|provide|choose)|(?:prefer|rather) not to|"
    r"decline to|no personal (?:views|opinions|stake))\b",
    re.IGNORECASE,
)
_STALL = re.compile(r"\b(?:let me (?:think|consider|see|reflect)|i need (?:more )?time|give me a (?:moment|second)|"
                    r"hmm+|thinking about (?:it|that|this))\b", re.IGNORECASE)
# Prose about the deliberation rather than a position in it ("The panel talked about ...").
_NARRATIVE = re.compile(r"\b(?:the (?:panel|group|discussion|committee)|members|panelists|discussed|talked about|"
                        r"debated|whether)\b", re.IGNORECASE)


def _prose_body(text: str, pattern: re.Pattern, instruction: str = "", given: Sequence[str] = ()) -> str | None:
    """The reply as one text field's value: prose that states a position, without labelled lines.

    Not a refusal, an echo of the instructions, a paraphrase mostly made of what the model
    was given (half its words or more in runs the prompt holds), a question, a hedge ("not
    sure"), or a narrative about the group with no position of the speaker's own.
    """
    lines = [ln for ln in text.split("\n") if not pattern.search(ln) and not _HEADING.match(ln)]
    body = clean("\n".join(lines).strip())
    if not body or len(body.split()) < 2 or body.endswith(("?", ":")) or "{" in body or "}" in body:
        return None
    if _REFUSAL.search(body) or _INSTRUCTED.search(body) or prose.torn(body) or _PLACEHOLDER.match(body):
        return None
    if prose.echoes(body, instruction) or len(re.findall(r"[A-Za-z]{2,}", body)) < 2:
        return None  # the instructions again, or no words at all
    if given and repeated_share(body, given) >= 0.5:
        return None  # the prompt again, in pieces
    if _STALL.search(body) and len(body.split()) <= 12:
        return None  # "Hmm, let me think about that."
    if _NARRATIVE.search(body) and not re.search(r"\b(?:i|my|we|our)\b", body, re.IGNORECASE):
        return None
    return body


def reask_prompt(reading: Reading, schema: type) -> str:
    """The follow-up message that re-asks an unreadable reply: what was wrong, and the JSON wanted.

    A reply that gave some required fields cleanly (:attr:`Reading.partial`) is asked for
    the missing ones only, by name; their answers join the fields it gave (see ``known``
    in :func:`read_reply`).
    """
    missing = tuple(fl.field for fl in reading.flags)
    if reading.partial and missing:
        given = ", ".join(name for name, _ in reading.partial if name not in missing)
        whys = "; ".join(f"{fl.field}: {fl.why}" for fl in reading.flags)
        return (
            f"Your reply gave {given}, but not {', '.join(missing)} ({whys}). Reply again with only the "
            f"missing {'field' if len(missing) == 1 else 'fields'} as this JSON object and nothing else: "
            f"{json_example(schema, missing)}"
        )
    if reading.reasoning_cut:
        problem = ("You spent your whole token budget thinking and gave no answer. Think briefly this time; "
                   "the answer is what counts.")
    elif reading.truncated:
        problem = "Your reply was cut off at the length limit before it was complete."
    else:
        problem = f"Your reply could not be read ({'; '.join(reading.errors) or 'no answer found'})."
    return (
        f"{problem} Reply again with only this JSON object and nothing else, keeping it short: "
        f"{json_example(schema)}"
    )
