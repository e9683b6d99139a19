"""Reply schemas: what each kind of reply asks for, and how one value of it is read.

A reply schema is a frozen, keyword-only dataclass whose fields are declared with
the helpers below, one per kind of answer a scenario asks for::

    @dataclass(frozen=True, kw_only=True)
    class Move:
        KIND: ClassVar[str] = "decision"
        reasoning: str | None = text(required=False)
        action: str = choice("COOPERATE", "DEFECT")

- :func:`text` (free text), :func:`text_list`, :func:`flag` (yes/no);
- :func:`choice`: a decision between named actions (COOPERATE/DEFECT);
- :func:`option`: an option or a vote among keys (A-D, principles 1-4), whose
  allowed keys and texts may be given per call;
- :func:`likert`: a rating on a labelled scale;
- :func:`amount`: an amount of money (also a bid, with its bounds);
- :func:`confidence`: a probability on a 0-1 scale ("85%", "85" and "0.85" agree).

Each helper gives its field a :class:`Kind`, which derives the field's JSON schema
(what providers get in JSON mode, in declaration order: put the reasoning before
the decision, as the prompt does) and reads one raw value: a JSON value, or the
text after a label, or (for kinds that allow it) plain prose. A reader returns the
value or an error; it never guesses and never clamps. Reading a whole reply
(JSON, then labelled lines, then prose) is :mod:`simcore.replies.reading`.

A field without a default is *required*: the reply is unreadable without it.
Optional fields default to None and stay None when absent or unreadable. A reply
spoken to a group sets ``SPOKEN: ClassVar[bool] = True``: "you" in it are the others.
Plain annotations (str, float, bool, ``list[str]``, ``Literal[...]``) get a kind
from their type, so a minimal schema needs no helpers.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Mapping, Sequence, get_args, get_origin

from backends.base import canonical_json
from simcore.replies import prose

Result = tuple[Any, str | None]  # (value, error): exactly one of them is set


# -- text helpers --------------------------------------------------------------

_QUOTES = "\"'`\u201c\u201d\u2018\u2019"
_EDGE = re.compile(r"^[\s*_>#\-\u2022]*|[\s*_]*$")


def clean(text: str) -> str:
    """Strip whitespace, markdown emphasis and matching quotes around a short value."""
    s = _EDGE.sub("", str(text))
    while len(s) >= 2 and s[0] in _QUOTES and s[-1] in _QUOTES:
        s = s[1:-1].strip()
    return s


def norm(text: str) -> str:
    """Lower case, separators as single spaces: for comparing labels and keys."""
    return _norm(str(text))


@lru_cache(maxsize=8192)
def _norm(text: str) -> str:
    # Cached: every reply's keys and labels are normalised, and they repeat.
    s = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return re.sub(r"[\s_\-]+", " ", re.sub(r"[^\w\s\-]", " ", s.lower())).strip()


def _tiers(*found: set[Any], what: str) -> Result:
    """The answer of the first non-empty tier, if it holds exactly one."""
    for tier in found:
        if len(tier) == 1:
            return next(iter(tier)), None
        if tier:
            return None, f"names more than one {what}"
    return None, f"names no {what}"


# -- kinds -------------------------------------------------------------------

@dataclass(frozen=True)
class Kind:
    """How one field is asked for (its JSON schema) and read (one raw value).

    Attributes:
        labels: Extra labels that name the field in labelled lines or JSON keys
            (the field's own name always does).
        prose: Whether the field may be read from plain prose.
    """

    labels: tuple[str, ...] = ()
    prose: bool = False

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        """The field's JSON schema (``allowed``: this call's keys, for kinds that have them)."""
        return {"type": "string"}

    def read(self, raw: Any, allowed: Any = None) -> Result:
        """Read one raw value (a JSON value or a label's text)."""
        raise NotImplementedError

    def from_prose(self, text: str, allowed: Any = None, truncated: bool = False, spoken: bool = False) -> Result:
        """Read the field from a whole prose reply (kinds with ``prose``; see :mod:`simcore.replies.prose`).

        ``spoken``: the reply is spoken to a group, so that "you" are the others.
        """
        return None, "not stated"

    def lists(self, text: str, allowed: Any = None) -> list[tuple[int, int]]:
        """Spans of ``text`` that list several answers of this kind (see :func:`simcore.replies.prose.list_spans`)."""
        return []

    def names(self, value: Any, allowed: Any = None) -> Any:
        """The answer a JSON value under some other key is, where it is exactly one answer of this kind
        (``"type": "DEFECT"``), else None: an object whose other keys carry another answer gives two."""
        return None

    def commits(self, text: str, allowed: Any = None, truncated: bool = False) -> Any:
        """The answer a reasoning commits to, if it commits to exactly one (else None).

        A reply whose reasoning commits to another answer than its answer field
        is unreadable (see :mod:`simcore.replies.reading`).
        """
        value, err = self.from_prose(text, allowed, truncated) if self.prose else (None, "no prose")
        return None if err else value

    def agrees(self, a: Any, b: Any) -> bool:
        """Whether two readings say the same (a reasoning may say a rating's side, not its degree)."""
        return a == b

    def against(self, text: str, value: Any, allowed: Any = None, truncated: bool = False) -> str | None:
        """Why a reasoning around a JSON or labelled answer ``value`` gainsays it, or None.

        By default it gainsays the answer where it commits to exactly one other.
        """
        said = self.commits(text, allowed, truncated)
        return None if said is None or self.agrees(said, value) else f"says {said!r} but the answer says {value!r}"

    def example(self) -> str:
        """How the field looks in a prompt's JSON example."""
        return "str"


@dataclass(frozen=True)
class Text(Kind):
    """Free text; a reply made only of prose fills the first text field (see :mod:`simcore.replies.reading`)."""

    def read(self, raw: Any, allowed: Any = None) -> Result:
        if isinstance(raw, (dict, list)):
            return None, "is not text"
        return str(raw).strip(), None


@dataclass(frozen=True)
class TextList(Kind):
    """A list of short texts (a JSON array, or one text)."""

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "string"}}

    def read(self, raw: Any, allowed: Any = None) -> Result:
        items = raw if isinstance(raw, list) else [raw]
        out = [str(x).strip() for x in items if isinstance(x, (str, int, float)) and str(x).strip()]
        return (out, None) if out else (None, "is empty")

    def example(self) -> str:
        return "[str, ...]"


_YES = {"true", "yes", "y", "1", "changed", "i did", "yes i did", "i changed", "i changed it"}
_NO = {"false", "no", "n", "0", "unchanged", "not changed", "no i did not", "i did not", "i didn't"}


@dataclass(frozen=True)
class Flag(Kind):
    """Yes or no."""

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        return {"type": "boolean"}

    def read(self, raw: Any, allowed: Any = None) -> Result:
        if isinstance(raw, bool):
            return raw, None
        if isinstance(raw, (int, float)) and raw in (0, 1):
            return bool(raw), None
        s = norm(clean(str(raw)))
        if s in _YES:
            return True, None
        if s in _NO:
            return False, None
        first = s.split(" ", 1)[0] if s else ""
        if first in ("yes", "true"):
            return True, None
        if first in ("no", "false"):
            return False, None
        return None, f"{_show(raw)} is not yes or no"

    def example(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Choice(Kind):
    """A decision between named actions (e.g. COOPERATE or DEFECT).

    A value must be one action ("defect", "**COOPERATE**", or its initial "C"),
    else it is read as prose. Prose is read by the actions' own words (base form
    or "-ing"; the noun only when negated or standing alone), each with whose
    move it is (:func:`simcore.replies.prose.said`); between two actions a negated
    one means the other ("I won't defect": COOPERATE). A reading holds only where
    the speaker commits to exactly one action and voices no other anywhere
    (:func:`simcore.replies.prose.weigh`).
    """

    options: tuple[str, ...] = ()
    prose: bool = True

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        return {"enum": list(self.options)}

    def read(self, raw: Any, allowed: Any = None) -> Result:
        if not isinstance(raw, str):
            return None, f"{_show(raw)} is not one of {', '.join(self.options)}"
        s = clean(raw).rstrip(".!")
        for o in self.options:
            if s.lower() == o.lower():
                return o, None
        initials = [o for o in self.options if len(s) == 1 and o[:1].lower() == s.lower()]
        if len(initials) == 1 and len({o[:1].lower() for o in self.options}) == len(self.options):
            return initials[0], None
        value, err = self.from_prose(raw)
        return (value, None) if err is None else (None, f"{_show(raw)} is not one of {', '.join(self.options)}")

    def _forms(self, option: str) -> tuple[str, str, str]:
        """The option's verb, its "-ing" form and its noun, as patterns."""
        base = option.lower()
        stem = base[:-1] if base.endswith("e") else base
        return re.escape(base), rf"{re.escape(stem)}ing", rf"{re.escape(stem)}ion"

    def against(self, text: str, value: Any, allowed: Any = None, truncated: bool = False) -> str | None:
        return prose.gainsays(value, text, self._said)

    def _any(self) -> str:
        return _any_action(self.options)

    def names(self, value: Any, allowed: Any = None) -> Any:
        if not isinstance(value, str):
            return None
        s = clean(value).rstrip(".!").upper()
        return s if s in self.options else None

    def lists(self, text: str, allowed: Any = None) -> list[tuple[int, int]]:
        # Nouns joined are a list too ("a mix of cooperation and defection"; not "defect; cooperation it is").
        nouns = _noun_list(self.options)
        return prose.list_spans(text, self._any(), which=self._which) + [m.span() for m in nouns.finditer(text)]

    def _which(self, form: str) -> str:
        """The action a form of it names ("Cooperating" and "cooperation" are COOPERATE)."""
        low = form.lower()
        return next((o for o in self.options if low.startswith(o.lower().rstrip("e"))), low)

    def from_prose(self, text: str, allowed: Any = None, truncated: bool = False,
                   spoken: bool = False) -> Result:
        full = prose.prepare(text)
        why = prose.undecided(full)
        if why:
            return None, why
        every = self._said(full, spoken)
        head = self._said(prose.prepare(text, truncated), spoken) if truncated else every
        return prose.weigh(head, every, "action")

    def _said(self, text: str, spoken: bool = False) -> list[prose.Said]:
        """Every action the clauses of ``text`` name, and how (see :func:`simcore.replies.prose.said`)."""
        text = prose.blank(text, self.lists(text))
        out: list[prose.Said] = []
        binary = len(self.options) == 2
        answer = re.compile(rf"(?<![\w-])(?:{self._any()})(?![\w-])", re.I)
        for clause in prose.clauses(text):
            c = clause.text
            bare = re.sub(r"[\W_]+", " ", c).strip().lower()
            is_bare = prose.bare(c, answer)
            for o in self.options:
                verb, ing, noun = self._forms(o)
                hits = [(m, "verb") for m in re.finditer(rf"(?<![\w-]){verb}(?![\w-])", c, re.I)]
                hits += [(m, "ing") for m in re.finditer(rf"(?<![\w-]){ing}(?![\w-])", c, re.I)]
                hits += [(m, "noun") for m in re.finditer(rf"(?<![\w-]){noun}(?![\w-])", c, re.I)]
                for m, form in hits:
                    neg = prose.negated(c, m.start())
                    value = o
                    if neg:
                        if not binary:
                            continue
                        value = next(x for x in self.options if x != o)
                    one = prose.said(clause, value, m.start(), m.end(), is_bare, spoken)
                    alone = re.fullmatch(rf"(?:{ing}|{noun})(?: it is| again| for me| from me| now)?", bare, re.I)
                    # A noun describes ("mutual cooperation pays"), and so does an "-ing" form that is not
                    # what someone is doing ("Cooperating got me exploited"; "I'm defecting" is a move).
                    if not neg and not alone and (form == "noun" or (form == "ing" and not _DOING.search(c[: m.start()]))):
                        one = dataclasses.replace(one, form="mention")
                    out.append(one)
        return out

    def example(self) -> str:
        return " or ".join(f'"{o}"' for o in self.options)


@lru_cache(maxsize=64)
def _any_action(options: tuple[str, ...]) -> str:
    """A regex for any of the actions, as a verb or its "-ing" form."""
    forms = []
    for o in options:
        base = o.lower()
        forms += [re.escape(base), rf"{re.escape(base[:-1] if base.endswith('e') else base)}ing"]
    return "|".join(forms)


@lru_cache(maxsize=64)
def _noun_list(options: tuple[str, ...]) -> re.Pattern:
    """Two actions' nouns or more joined by "and", "or", a comma or a slash ("cooperation and defection")."""
    noun = "|".join(rf"{re.escape(o.lower()[:-1] if o.lower().endswith('e') else o.lower())}ion" for o in options)
    one = rf"(?<![\w-])(?:{noun})(?![\w-])"
    return re.compile(rf"{one}(?:\s*(?:,|/|\band\b|\bor\b|\bvs\.?|\bversus\b)\s*{one})+", re.IGNORECASE)


_DOING = re.compile(r"\b(?:am|'m|are|'re|be|keep|keeping|continue|start|stay|go on)\s+(?:\w+\s+)?$", re.I)
_AFFIRM = (
    r"(?:choose|chose|choosing|pick|picking|select|selecting|vote(?:s|d)?(?: for)?|voting(?: for)?|go(?:ing)? with|"
    r"support|supporting|recommend|prefer|opt for|favou?r|endorse|back|my (?:vote|choice|answer|pick|selection|"
    r"decision|preference|recommendation|proposal)(?: is| would be| goes to)?|answer is|i(?:'d| would) say|"
    r"final answer(?: is)?)"
)
_PREDICATE = (r"(?:is|isn't|was|wasn't|are|would|wouldn't|will|seems?|could|might|may|has|had|looks|sounds|does|"
              r"doesn't|fails|ignores|violates|risks|puts|goes too)\b")
_CHOSEN_AFTER = r"(?:is what i(?:'d| would)? ?(?:choose|pick|go with|vote for)|is my (?:choice|vote|pick|answer)|it is|gets my vote)"


@dataclass(frozen=True)
class Option(Kind):
    """One key among options (letters A-D, principle numbers 1-4, ...).

    ``allowed`` (per call) maps each allowed key to its text, or is a sequence of
    keys; without it, ``keys`` and ``texts`` hold. A value is read bare ("B",
    "b)", "(B)", "**B**"), after a word that names it ("Option B", "option: B"),
    leading ("B - because ...", "B) Keep it", "B Keep the confidence" when the
    words are option B's own, not another's), as an option's whole text, or
    through ``synonyms``. In prose a key counts after a verb of choice ("I'd go
    with B", "I vote for option B") before any mere mention ("Option A is too
    drastic"), and negated mentions ("not A") never count.

    Attributes:
        keys: Default keys.
        texts: Default texts, one per key.
        synonyms: (word, key) pairs; a short value naming exactly one key's words reads as it.
        prefix: Words that may introduce a key ("option", "principle").
        integer: Ask for a number in JSON mode.
    """

    keys: tuple[str, ...] = ("A", "B", "C", "D")
    texts: tuple[str, ...] = ()
    synonyms: tuple[tuple[str, str], ...] = ()
    prefix: tuple[str, ...] = ("option", "choice", "answer", "vote")
    prose: bool = True
    integer: bool = False

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        # An enum lets a provider that constrains output to the schema write only an allowed key.
        keys = list(self.keys if allowed is None else allowed)
        return {"type": "integer", "enum": [int(k) for k in keys]} if self.integer else {"enum": keys}

    def example(self) -> str:
        return "number" if self.integer else "letter"

    def _table(self, allowed: Any) -> dict[str, str]:
        if allowed is None:
            return dict(zip(self.keys, self.texts or ("",) * len(self.keys)))
        if isinstance(allowed, Mapping):
            return {str(k): str(v) for k, v in allowed.items()}
        return {str(k): "" for k in allowed}

    def read(self, raw: Any, allowed: Any = None) -> Result:
        table = self._table(allowed)
        if isinstance(raw, bool) or raw is None:
            return None, f"{_show(raw)} is not an option"
        if isinstance(raw, (int, float)):
            key = str(int(raw)) if float(raw).is_integer() else str(raw)
            return (key, None) if key in table else (None, f"{_show(raw)} is not one of {', '.join(table)}")
        s = clean(str(raw))
        found = self._read_value(s, table)
        if found is not None:
            return found
        value, err = self.from_prose(s, allowed)
        return (value, None) if err is None else (None, f"{_show(raw)} names none of {', '.join(table)}")

    def _key_re(self, table: Mapping[str, str]) -> str:
        return "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True))

    def _read_value(self, s: str, table: dict[str, str]) -> Result | None:
        keys = {k.lower(): k for k in table}
        bare = s.strip("()[]{}.:,;!*_ ").lower()
        if bare in keys:
            return keys[bare], None
        pre = "|".join(self.prefix)
        m = re.match(
            rf"^(?:(?P<pre>{pre})\s*[:#\-]?\s*)?[(\[]?(?P<key>{self._key_re(table)})(?![\w'])"
            rf"(?P<close>[)\]])?(?P<rest>.*)$",
            s, re.IGNORECASE | re.DOTALL,
        )
        if m:
            key, rest = keys[m.group("key").lower()], m.group("rest").strip(" .:,;-\u2013\u2014")
            if re.search(rf"(?:^|\s)(?:{self._key_re(table)})\)", rest, re.IGNORECASE):
                return None, f"{_show(s)} lists the options instead of choosing one"
            if re.match(rf"\s*(?:-|\u2013|to|or|and|/)\s*[(\[]?(?:{self._key_re(table)})(?![\w'])", m.group("rest"), re.I):
                return None, f"{_show(s)} gives a range of options, not one"
            others = [k for k, t in table.items() if k != key and t and _starts_with(rest, t)]
            if others:
                return None, f"{_show(s)}: option {key} is named with the words of option {others[0]}"
            sep = not rest or m.group("rest").lstrip()[:1] in tuple(".:,;-\u2013\u2014")
            if sep or m.group("pre") or m.group("close") or (table[key] and _starts_with(rest, table[key])):
                return key, None
            if re.match(r"(?:because|since|as|which|for|given|over|rather than|instead of|not)\b", rest, re.I):
                return key, None
        text = norm(s)
        by_text = [k for k, t in table.items() if t and norm(t) == text]
        if len(by_text) == 1:
            return by_text[0], None
        contained = [k for k, t in table.items() if t and len(norm(t)) > 3 and norm(t) in text]
        if len(contained) == 1 and len(text) <= len(norm(table[contained[0]])) + 40:
            return contained[0], None
        syn = {key for word, key in self.synonyms if key in table and re.search(rf"\b{re.escape(word)}\b", text)}
        if len(syn) == 1 and len(text.split()) <= 6:
            return next(iter(syn)), None
        return None

    def lists(self, text: str, allowed: Any = None) -> list[tuple[int, int]]:
        return prose.list_spans(text, self._key_re(self._table(allowed)), keys=True)

    def names(self, value: Any, allowed: Any = None) -> Any:
        # A key exactly, as text ("B"; a lower-case letter may be a word, a number another field's count).
        if not isinstance(value, str):
            return None
        s = clean(value)
        return s if s in self._table(allowed) and not s.isdigit() else None

    def from_prose(self, text: str, allowed: Any = None, truncated: bool = False, spoken: bool = False) -> Result:
        table = self._table(allowed)
        full = prose.prepare(text)
        why = prose.undecided(full)
        if why:
            return None, why
        every = self._said(full, table, spoken)
        head = self._said(prose.prepare(text, truncated), table, spoken) if truncated else every
        rejected = {s.value for s, tier in every if tier == "rejected"}

        def committed(tier: str) -> set[str]:
            return {s.value for s, t in head if t == tier and s.counts and s.form in ("own", "bare")} - rejected

        value, err = _tiers(committed("strong"), committed("weak"), what="option")
        if err is not None:
            # A recommendation naming no one ("the best option is B"), in a reply that names no other option.
            named = {s.value for s, _ in every}
            impersonal = {s.value for s, t in head if s.counts and s.form == "impersonal"} - rejected
            if len(impersonal) == 1 and named == impersonal and not any(s.form == "other" for s, _ in every):
                value, err = next(iter(impersonal)), None
        if err is not None:
            return None, err
        # Another option chosen anywhere, in any voice (a condition, a question, a recommendation to
        # others), or options aimed at several rounds or agents: no one answer.
        return prose.veto(value, [s for s, t in every if t != "rejected"])

    def _said(self, text: str, table: dict[str, str], spoken: bool) -> list[tuple[prose.Said, str]]:
        """Every option ``text`` names, with how (see :func:`simcore.replies.prose.said`) and its tier:
        "strong" (chosen: a verb of choice, "is my choice", the key alone), "weak" (named where the
        speaker speaks, or leading the reply), "rejected" (negated, or a key with another's words)."""
        text = prose.blank(text, self.lists(text, table))
        keys = {k.lower(): k for k in table}
        kre = self._key_re(table)
        pre = "|".join(self.prefix)
        out: list[tuple[prose.Said, str]] = []
        first_line = text.strip().split("\n", 1)[0]
        lead = self._read_value(first_line, table) if len(first_line) < 200 else None
        # A first line that states an option ("B) Keep it", "Option B - because"), not one that
        # says something about it ("Option A is too drastic").
        said_of = re.match(rf"^\W*(?:(?:{pre})\s*)?[(\[]?(?:{kre})[)\]]?\s+{_PREDICATE}", first_line, re.I)
        if lead is not None and lead[1] is None and not said_of:
            out.append((prose.Said(lead[0], "bare", True), "weak"))
        # A one-letter key is a capital here: "a" is an article ("I choose a different path").
        kcs = "|".join(f"(?-i:{re.escape(k)})" if len(k) == 1 and k.isalpha() else re.escape(k)
                       for k in sorted(table, key=len, reverse=True))
        affirm = re.compile(rf"\b{_AFFIRM}\s*[:\-]?\s*(?:for\s+)?(?:(?:{pre})\s*)?[(\[]?(?P<key>{kcs})(?![\w'])", re.I)
        after = re.compile(rf"(?:\b(?:{pre})\s*)?[(\[]?\b(?P<key>{kcs})\b[)\]]?[^.;]{{0,40}}?\b{_CHOSEN_AFTER}", re.I)
        named = re.compile(rf"\b(?:{pre})\s*[:#]?\s*[(\[]?(?P<key>{kre})(?![\w'])", re.I)
        described = re.compile(rf"[)\]]?\s+{_PREDICATE}", re.I)
        texts = {key: r"\b" + r"\W+".join(map(re.escape, words)) + r"\b"
                 for key, words in ((k, _lead_words(t)) for k, t in table.items()) if len(words) >= 2}
        # An option named bare: its key (after a word that names it) or its own words, and nothing else.
        answer = re.compile("|".join([named.pattern, *texts.values()]), re.I)
        for clause in prose.clauses(text):
            c = clause.text
            whole = c.strip().strip("*_ ")
            if re.fullmatch(rf"[(\[]?(?:{kre})[)\]]?[.!]?", whole, re.IGNORECASE):
                key = keys[whole.strip("()[].! ").lower()]
                alone = clause.alone and not clause.sentence.rstrip().endswith("?")
                out.append((prose.Said(key, "bare" if alone else "mention", clause.counts), "strong"))
                continue
            is_bare = prose.bare(c, answer)
            for pattern in (affirm, after):
                for m in pattern.finditer(c):
                    key = keys[m.group("key").lower()]
                    if prose.negated(c, m.start()):
                        out.append((prose.Said(key, "mention", clause.counts), "rejected"))
                    else:
                        out.append((prose.said(clause, key, m.start("key"), m.end(), False, spoken), "strong"))
            # A mere mention ("Option A is too drastic") is no choice; a committed or bare one is.
            found = [(keys[m.group("key").lower()], m) for m in named.finditer(c)]
            found += [(key, m) for key, pattern in texts.items() for m in re.finditer(pattern, c, re.IGNORECASE)]
            for key, m in found:
                if prose.negated(c, m.start()):
                    out.append((prose.Said(key, "mention", clause.counts), "rejected"))
                elif described.match(c, m.end()):
                    out.append((prose.Said(key, "mention", clause.counts), "weak"))
                else:
                    out.append((prose.said(clause, key, m.start(), m.end(), is_bare, spoken), "weak"))
        # A key given the words of another option ("D) Add more sessions", B's text) says neither.
        for m in re.finditer(rf"(?<![\w'])(?P<key>{kcs})[)\].:]\s+(?P<rest>[^\n]{{0,80}})", text):
            key = keys[m.group("key").lower()]
            others = {k for k, t in table.items() if k != key and t and _starts_with(m.group("rest"), t)}
            if others:
                out += [(prose.Said(k, "mention", True), "rejected") for k in others | {key}]
        return out

    def against(self, text: str, value: Any, allowed: Any = None, truncated: bool = False) -> str | None:
        table = self._table(allowed)
        return prose.gainsays(value, text, lambda full: [s for s, tier in self._said(full, table, False)
                                                         if tier != "rejected"])


def _lead_words(option_text: str) -> list[str]:
    """The words of an option's text up to its first clause break, as prose names it in one clause
    ("Keep the disclosure confidential" of "Keep the disclosure confidential and work on it")."""
    words = re.findall(r"\w+", option_text)
    first = re.findall(r"\w+", re.split(r"[,;:]|\b(?:and|but|or|so|because|then)\b", option_text, maxsplit=1)[0])
    return first if len(first) >= 2 else words


def _starts_with(text: str, option_text: str) -> bool:
    """Whether ``text`` begins with the first words of an option's text."""
    words = norm(option_text).split()[:2]
    return bool(words) and norm(text).startswith(" ".join(words))


_QUALIFIED = re.compile(
    r"\b(?:somewhat|slightly|mildly|moderately|partly|partially|kind of|sort of|fairly|rather|neither|"
    r"mostly|tend to)\s*$",
    re.IGNORECASE,
)
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "lowest": 1}


@dataclass(frozen=True)
class Likert(Kind):
    """A rating on a labelled scale, as its label or its score (1 = the first label).

    A negated "agree" is "disagree" ("I don't agree"); other negated labels are
    left out ("I don't strongly agree, but I agree" is agree); a label qualified
    off the scale ("somewhat agree"), two ratings, or a label and a score that
    differ are errors. A reasoning agrees with a rating when it is on the same
    side of the scale.
    """

    scale: tuple[str, ...] = ("strongly disagree", "disagree", "agree", "strongly agree")
    prose: bool = True

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        # The labels, so that a provider constraining output to the schema writes one of them.
        return {"enum": list(self.scale)}

    def example(self) -> str:
        return "label"

    def agrees(self, a: Any, b: Any) -> bool:
        half = (len(self.scale) + 1) / 2
        return a == b or (a - half) * (b - half) > 0

    def read(self, raw: Any, allowed: Any = None) -> Result:
        n = len(self.scale)
        where = f"a score 1-{n} or one of: {', '.join(self.scale)}"
        if isinstance(raw, bool) or raw is None:
            return None, f"{_show(raw)} is not {where}"
        if isinstance(raw, (int, float)):
            ok = float(raw).is_integer() and 1 <= raw <= n
            return (int(raw), None) if ok else (None, f"{_show(raw)} is not {where}")
        found, err = self._scan(str(raw), numbers="any")
        if err:
            return None, f"{_show(raw)}: {err}"
        return (found, None) if found is not None else (None, f"{_show(raw)} is not {where}")

    def _scan(self, text: str, numbers: str) -> tuple[int | None, str | None]:
        """The one rating ``text`` gives (None without any), or an error."""
        n = len(self.scale)
        s = re.sub(r"[_\-]+", " ", text.lower().replace("/", " of "))
        scores: set[int] = set()
        number = rf"(\d+)(?:\s*(?:of|out of)\s*{n})?(?![\w.])"
        cue = r"(?<![\w.])" if numbers == "any" else r"(?:\b(?:rate it|rating of|score of|give it|rating is|score is)\s+(?:an?\s+)?|^\s*)"
        pattern = cue + number
        for m in re.finditer(pattern, s):
            k = int(m.group(1))
            if not 1 <= k <= n:
                return None, "is off the scale"
            scores.add(k)
        for word, k in _ORDINAL.items():
            if k <= n and re.search(rf"\bthe {word} (?:option|point|one|choice|level|label)\b", s):
                scores.add(k)
        labelled: set[int] = set()
        taken: list[tuple[int, int]] = []
        for k, label in sorted(enumerate(self.scale, 1), key=lambda kl: -len(kl[1])):
            words = label.split()
            forms = [label] + ([f"{words[1]} {words[0]}"] if len(words) == 2 else [])  # "agree strongly"
            for m in re.finditer(r"\b(?:" + "|".join(map(re.escape, forms)) + r")\b", s):
                if any(a <= m.start() < b for a, b in taken):
                    continue
                taken.append((m.start(), m.end()))
                if _QUALIFIED.search(s[max(0, m.start() - 20) : m.start()]):
                    return None, "is not on the scale"
                if not prose.negated(s, m.start()):
                    labelled.add(k)
                elif f"dis{label}" in self.scale:
                    labelled.add(self.scale.index(f"dis{label}") + 1)
        if len(labelled) > 1 or (labelled and scores and labelled != scores) or len(scores) > 1:
            return None, "gives more than one rating"
        found = labelled or scores
        return (next(iter(found)) if found else None), None

    def commits(self, text: str, allowed: Any = None, truncated: bool = False) -> Any:
        said, _ = self._said(prose.prepare(text, truncated))
        values = {s.value for s in said if s.counts and s.form == "own"}
        return next(iter(values)) if len(values) == 1 else None

    def _answer(self) -> re.Pattern:
        """A rating as prose gives it: a label of the scale, or a score ("3", "3/4", "3 out of 4")."""
        labels = "|".join(re.escape(x) for x in sorted(self.scale, key=len, reverse=True))
        return _likert_answer(labels, len(self.scale))

    def lists(self, text: str, allowed: Any = None) -> list[tuple[int, int]]:
        return prose.list_spans(text, "|".join(re.escape(x) for x in sorted(self.scale, key=len, reverse=True)))

    def from_prose(self, text: str, allowed: Any = None, truncated: bool = False, spoken: bool = False) -> Result:
        full = prose.prepare(text)
        why = prose.undecided(full)
        if why:
            return None, why
        every, err = self._said(full, spoken)
        if truncated:
            head, err = self._said(prose.prepare(text, truncated), spoken)
        else:
            head = every
        return (None, err) if err else prose.weigh(head, every, "rating")

    def _said(self, text: str, spoken: bool = False) -> tuple[list[prose.Said], str | None]:
        """The rating each clause of ``text`` gives, and how; and the first error of a clause that
        states one (two ratings, one off the scale)."""
        text = prose.blank(text, self.lists(text))
        answer = self._answer()
        out: list[prose.Said] = []
        error = None
        for clause in prose.clauses(text):
            m = answer.search(clause.text)
            k, err = self._scan(clause.text, numbers="rated")
            if m is None and k is None:
                continue
            at, end = m.span() if m else (0, len(clause.text))  # (an ordinal: "the third option")
            one = prose.said(clause, k, at, end, m is not None and prose.bare(clause.text, answer), spoken)
            if err and error is None and one.counts and one.form in ("own", "bare"):
                error = err
            if k is not None:
                out.append(one)
        return out, error


@lru_cache(maxsize=64)
def _likert_answer(labels: str, n: int) -> re.Pattern:
    return re.compile(rf"\b(?:{labels})\b|(?<![\w.])\d+(?:\s*(?:/|of|out of)\s*{n})?(?![\w.])|"
                      r"\b(?:i |we )?(?:rate it|rating of|score of|give it|rating is|score is)\b", re.I)


_AMOUNT_CUE = re.compile(
    r"(?:propos\w*|choos\w*|chose|pick|set(?:ting)?(?: it| the floor| the range)?(?: at| to)?|bid(?:ding|s)?|go with|"
    r"offer|floor (?:of|at|to|should be|is)|range (?:of|at|to|should be|is)|should be|would be|will be|"
    r"my (?:answer|proposal|bid|floor|range|choice)(?: is)?|i'?d say|settle on|answer is|amount is|"
    r"at|to)\W*(?:about|around|roughly|approximately|~|some)?\W*$",
    re.IGNORECASE,
)
_ZERO = re.compile(r"\b(?:i(?:'ll| will)? pass|no bid|not bid(?:ding)?|don't bid|won't bid|do not bid|zero|nothing)\b", re.I)
_ALL = re.compile(r"\b(?:all of it|everything i have|all in|(?:my )?(?:entire|whole|full) budget)\b", re.I)


@dataclass(frozen=True)
class Amount(Kind):
    """An amount of money ("$12,000", "12k", "12 000", "twelve thousand dollars").

    Out-of-range amounts are errors, never clamped. Several different amounts are
    an error unless all but one are negated ("not $10,000 but $12,000") or, in
    prose, one is the stated choice ("... so I choose $15,000"). With ``period``,
    an amount given per another period ("$1,250 a month") is not read. A bid
    (``zero_words``) reads "I'll pass" as 0, and "all of it" as ``hi``.
    """

    lo: float = 0.0
    hi: float | None = None
    integer: bool = False
    period: str | None = None
    zero_words: bool = False
    prose: bool = True

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        return {"type": "string"}

    def example(self) -> str:
        return "dollars"

    def _check(self, v: float, raw: Any) -> Result:
        if v != v or v < self.lo or (self.hi is not None and v > self.hi):
            hi = "" if self.hi is None else f" to {self.hi:g}"
            return None, f"{_show(raw)} is out of range ({self.lo:g}{hi})"
        return (int(round(v)) if self.integer else v), None

    def _fits(self, m: prose.Money) -> bool:
        return self.period is None or m.period in (None, self.period)

    @staticmethod
    def _range(text: str) -> bool:
        """Whether ``text`` gives a range ("30 to 40 dollars", "$10k-$12k", "10,000 or 12,000")."""
        return bool(re.search(r"\d[\d,.]*\s*(?:k|thousand)?\s*(?:to|-|\u2013|or|and|/)\s*(?:US)?\$?\s*\d", text, re.I))

    def _words(self, text: str) -> float | None:
        if self.zero_words and _ALL.search(text) and self.hi is not None:
            return self.hi
        if self.zero_words and _ZERO.search(text):
            return 0.0
        return None

    def read(self, raw: Any, allowed: Any = None) -> Result:
        if isinstance(raw, bool) or raw is None:
            return None, f"{_show(raw)} is not an amount"
        if isinstance(raw, (int, float)):
            return self._check(float(raw), raw)
        s = str(raw)
        found = prose.money_mentions(s)
        if not found:
            word = self._words(s)
            return (None, f"{_show(raw)} is not an amount") if word is None else self._check(word, raw)
        fitting = [m for m in found if self._fits(m)]
        if not fitting:
            return None, f"{_show(raw)} is not an amount per {self.period}"
        if self._range(s):
            return None, f"{_show(raw)} gives a range, not an amount"
        marked = [m for m in fitting if m.marked] or fitting
        kept = {m.value for m in marked if not prose.negated(s, m.at)}
        if len(kept) != 1:
            return None, f"{_show(raw)} gives {'no' if not kept else 'more than one'} amount"
        return self._check(kept.pop(), raw)

    def from_prose(self, text: str, allowed: Any = None, truncated: bool = False, spoken: bool = False,
                   strict: bool = False) -> Result:
        original, text = text, prose.prepare(text, truncated)
        why = prose.undecided(text)
        if why:
            return None, why
        cued: set[float] = set()
        said: set[float] = set()
        word: set[float] = set()
        short = len(text.split()) <= 8
        for clause in prose.clauses(text):
            if not clause.counts:
                continue
            c = clause.text
            if self._range(c):
                return None, "gives a range, not an amount"
            mentions = [m for m in prose.money_mentions(c) if self._fits(m)]
            marked = [m for m in mentions if m.marked] or mentions
            for m in marked:
                if prose.negated(c, m.at):
                    continue
                if clause.alone and not c[: m.at].strip(" $") or _AMOUNT_CUE.search(c[max(0, m.at - 40) : m.at]):
                    cued.add(m.value)
                elif short:  # an amount alone ("$12,000", "About $12,000.") is the answer
                    said.add(m.value)
            if not mentions and (w := self._words(c)) is not None:
                word.add(w)
        if word and (cued | said) - word:
            return None, "both declines and names an amount"
        value, err = _tiers(cued, *(() if strict else (said, word)), what="amount")
        if err:
            return None, err
        value, err = prose.veto(value, self._voiced(prose.prepare(original), spoken))
        return (None, err) if err else self._check(value, text)

    def _voiced(self, text: str, spoken: bool) -> list[prose.Said]:
        """The amounts ``text`` proposes anywhere (a condition and a question too), and how."""
        out = []
        for clause in prose.clauses(text):
            c = clause.text
            for m in prose.money_mentions(c):
                if self._fits(m) and not prose.negated(c, m.at) and _AMOUNT_CUE.search(c[max(0, m.at - 40) : m.at]):
                    out.append(prose.said(clause, m.value, m.at, m.at + 1, False, spoken))
        return out

    def commits(self, text: str, allowed: Any = None, truncated: bool = False) -> Any:
        value, err = self.from_prose(text, allowed, truncated, strict=True)
        return None if err else value


_CONFIDENT = re.compile(r"confiden|\bsure\b|certain|likel|probab|chance|odds|percent|%", re.IGNORECASE)


@dataclass(frozen=True)
class Confidence(Kind):
    """A probability on a 0-1 scale: "0.85", "85%", "85", "17/20" and "9 out of 10" all read.

    Bare numbers from 0 to 1 are fractions and from 10 to 100 percentages; bare
    numbers between 1 and 10 could be either scale and are errors, as are values
    out of range and words ("high"). In prose, only numbers in a clause about
    confidence count ("I'm about 90% confident"), negated ones left out.
    """

    prose: bool = True

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        return {"type": "number", "minimum": 0.0, "maximum": 1.0}

    def example(self) -> str:
        return "number 0-1"

    @staticmethod
    def _scale(x: float, percent: bool, raw: Any) -> Result:
        if x != x:
            return None, f"{_show(raw)} is not a number"
        if percent:
            return (x / 100, None) if 0 <= x <= 100 else (None, f"{_show(raw)} is out of range 0-100%")
        if 0 <= x <= 1:
            return x, None
        if 10 <= x <= 100:
            return x / 100, None
        if 1 < x < 10:
            return None, f"{_show(raw)} is ambiguous on a 0-1 scale"
        return None, f"{_show(raw)} is out of range 0-1"

    def _values(self, s: str, raw: Any) -> list[tuple[int, Result]]:
        """(position, reading) of every number in ``s``."""
        out: list[tuple[int, Result]] = []
        low = s.lower()
        for m in re.finditer(r"(\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)", low):
            num, den = float(m.group(1)), float(m.group(2))
            ok = den > 0 and 0 <= num <= den
            out.append((m.start(), (num / den, None) if ok else (None, f"{_show(raw)} is out of range")))
        rest = re.sub(r"\d+(?:\.\d+)?\s*(?:/|out of)\s*\d+(?:\.\d+)?", lambda m: " " * len(m.group(0)), low)
        for m in prose.NUMBER.finditer(rest):
            tail = rest[m.end() : m.end() + 9].lstrip()
            out.append((m.start(), self._scale(float(m.group(0)), tail.startswith(("%", "percent")), raw)))
        if re.search(r"\b(?:zero|no) confidence\b|\bconfidence(?: of| is)? zero\b", low):
            out.append((low.find("zero") if "zero" in low else 0, (0.0, None)))
        return sorted(out, key=lambda x: x[0])

    def read(self, raw: Any, allowed: Any = None) -> Result:
        if isinstance(raw, bool) or raw is None:
            return None, f"{_show(raw)} is not a number"
        if isinstance(raw, (int, float)):
            return self._scale(float(raw), False, raw)
        values = self._values(str(raw), raw)
        if not values:
            return None, f"{_show(raw)} is not a number"
        bad = [e for _, (v, e) in values if e]
        if bad:
            return None, bad[0]
        distinct = {round(v, 9) for _, (v, _e) in values}
        return (values[0][1][0], None) if len(distinct) == 1 else (None, f"{_show(raw)} gives more than one number")

    def from_prose(self, text: str, allowed: Any = None, truncated: bool = False, spoken: bool = False) -> Result:
        text = prose.prepare(text, truncated)
        found: set[float] = set()
        for clause in prose.clauses(text):
            c = clause.text
            if not _CONFIDENT.search(c) or prose.torn(c):
                continue
            for at, (v, err) in self._values(c, c):
                if err is None and not prose.negated(c, at, span=1):  # "not 90%"; "No (confidence 0.9)" is fine
                    found.add(round(v, 9))
        return _tiers(found, what="confidence")

    def commits(self, text: str, allowed: Any = None, truncated: bool = False) -> Any:
        return None  # a reasoning that names numbers rarely states the confidence itself


@dataclass(frozen=True)
class Number(Kind):
    """A plain number within bounds (out of range is an error, never clamped)."""

    lo: float | None = None
    hi: float | None = None
    integer: bool = False

    def json(self, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer" if self.integer else "number"}
        if self.lo is not None and self.hi is not None:
            out["minimum"], out["maximum"] = self.lo, self.hi
        return out

    def example(self) -> str:
        return "number"

    def read(self, raw: Any, allowed: Any = None) -> Result:
        if isinstance(raw, bool) or raw is None:
            return None, f"{_show(raw)} is not a number"
        if isinstance(raw, str):
            found = {float(m.group(0)) for m in prose.NUMBER.finditer(raw)}
            if len(found) != 1:
                return None, f"{_show(raw)} is not one number"
            raw_num = found.pop()
        elif isinstance(raw, (int, float)):
            raw_num = float(raw)
        else:
            return None, f"{_show(raw)} is not a number"
        if raw_num != raw_num or (self.lo is not None and raw_num < self.lo) or (
            self.hi is not None and raw_num > self.hi
        ):
            return None, f"{_show(raw)} is out of range"
        if self.integer and not raw_num.is_integer():
            return None, f"{_show(raw)} is not a whole number"
        return (int(raw_num) if self.integer else raw_num), None


def _show(raw: Any) -> str:
    text = repr(raw) if not isinstance(raw, str) else repr(raw if len(raw) <= 60 else raw[:57] + "...")
    return text


# -- field helpers ---------------------------------------------------------------

def _field(kind: Kind, required: bool) -> Any:
    if required:
        return dataclasses.field(metadata={"kind": kind})
    return dataclasses.field(default=None, metadata={"kind": kind})


def text(*labels: str, required: bool = True) -> Any:
    """A free-text field."""
    return _field(Text(labels=labels), required)


def text_list(*labels: str, required: bool = False) -> Any:
    """A list of short texts."""
    return _field(TextList(labels=labels), required)


def flag(*labels: str, required: bool = False) -> Any:
    """A yes/no field."""
    return _field(Flag(labels=labels), required)


def choice(*options: str, labels: tuple[str, ...] = (), required: bool = True) -> Any:
    """A decision between named actions."""
    default = ("decision", "action", "move", "choice", "answer", "play", "vote")
    return _field(Choice(options=tuple(options), labels=labels or default), required)


def option(
    keys: Sequence[str] = ("A", "B", "C", "D"),
    *,
    texts: Sequence[str] = (),
    synonyms: Sequence[tuple[str, str]] = (),
    prefix: Sequence[str] = ("option", "choice", "answer", "vote"),
    labels: tuple[str, ...] = ("option", "choice", "vote", "answer", "selection", "pick", "decision"),
    integer: bool = False,
    required: bool = True,
) -> Any:
    """An option or vote among ``keys`` (which a call may replace, see :class:`Option`)."""
    kind = Option(labels=labels, keys=tuple(keys), texts=tuple(texts), synonyms=tuple(synonyms),
                  prefix=tuple(prefix), integer=integer)
    return _field(kind, required)


def likert(*labels: str, scale: Sequence[str] = Likert.scale, required: bool = True) -> Any:
    """A rating on a labelled scale."""
    return _field(Likert(labels=labels or ("rating", "score", "answer", "rate"), scale=tuple(scale)), required)


def amount(*labels: str, lo: float = 0.0, hi: float | None = None, integer: bool = False,
           period: str | None = None, zero_words: bool = False, required: bool = True) -> Any:
    """An amount of money within [lo, hi] (per ``period``, when given; see :class:`Amount`)."""
    kind = Amount(labels=labels or ("amount", "answer"), lo=lo, hi=hi, integer=integer, period=period,
                  zero_words=zero_words)
    return _field(kind, required)


def confidence(*labels: str, required: bool = False) -> Any:
    """A probability on a 0-1 scale."""
    return _field(Confidence(labels=labels or ("confidence", "confidence level", "certainty")), required)


def number(*labels: str, lo: float | None = None, hi: float | None = None, integer: bool = False,
           required: bool = True) -> Any:
    """A plain number within bounds."""
    return _field(Number(labels=labels, lo=lo, hi=hi, integer=integer), required)


# -- schemas -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class FieldPlan:
    """One field of a schema as the readers see it."""

    name: str
    kind: Kind
    required: bool
    aliases: tuple[str, ...]  # normalised names that refer to it (its own name first)


@lru_cache(maxsize=None)
def plan(schema: type) -> tuple[FieldPlan, ...]:
    """The fields of a reply schema with their kinds, in declaration order."""
    hints = typing.get_type_hints(schema)
    out = []
    for f in dataclasses.fields(schema):
        kind = f.metadata.get("kind") or _kind_of(hints[f.name], f.metadata)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if not required and f.default is not None and "kind" in f.metadata:
            raise TypeError(f"{schema.__name__}.{f.name}: an optional reply field defaults to None")
        names = [norm(f.name), *(norm(x) for x in kind.labels)]
        out.append(FieldPlan(f.name, kind, required, tuple(dict.fromkeys(names))))
    return tuple(out)


def _kind_of(tp: Any, meta: Mapping[str, Any]) -> Kind:
    """The kind a plain annotation implies."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _kind_of(inner[0], meta)
    if origin is Literal:
        return Choice(options=tuple(str(a) for a in args))
    if origin in (list, tuple):
        return TextList()
    if tp is str:
        return Text()
    if tp is bool:
        return Flag()
    if tp in (int, float):
        lo, hi = meta.get("range", (None, None))
        return Number(lo=lo, hi=hi, integer=tp is int)
    raise TypeError(f"unsupported reply field type: {tp!r}")


def reply_kind(schema: type) -> str:
    """The name of a schema's kind of reply (its ``KIND``, else its class name in snake case)."""
    declared = getattr(schema, "KIND", None)
    return declared or re.sub(r"(?<!^)(?=[A-Z])", "_", schema.__name__).lower()


def allowed_keys(allowed: Mapping[str, Any] | None) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """A call's ``allowed`` choices as a hashable key for :func:`json_schema` (each field's keys)."""
    if not allowed:
        return None
    return tuple(sorted((name, tuple(str(k) for k in keys)) for name, keys in allowed.items()))


@lru_cache(maxsize=None)
def json_schema(cls: type, allowed: tuple[tuple[str, tuple[str, ...]], ...] | None = None) -> dict[str, Any]:
    """The JSON schema (draft 2020-12 subset) of a reply schema, fields in declaration order.

    Fields with a fixed set of answers (actions, option keys, Likert labels) are
    enums, so a provider that constrains its output to the schema can only write
    one of them; ``allowed`` (from :func:`allowed_keys`) narrows a field's keys to
    this call's. The result is cached and shared (do not mutate it), and carries its
    canonical JSON so that hashing requests does not re-serialise it every call.
    """
    fields, narrowed = plan(cls), dict(allowed or ())
    return CanonicalDict(
        title=cls.__name__,
        type="object",
        properties={f.name: f.kind.json(narrowed.get(f.name)) for f in fields},
        required=[f.name for f in fields],
        additionalProperties=False,
    )


@lru_cache(maxsize=None)
def json_example(cls: type, only: tuple[str, ...] | None = None) -> str:
    """The reply's JSON shape as prompts show it, e.g. ``{"reasoning": str, "action": "COOPERATE" or "DEFECT"}``
    (``only``: these fields alone, in declaration order)."""
    return "{" + ", ".join(f'"{f.name}": {f.kind.example()}' for f in plan(cls) if only is None or f.name in only) + "}"


class CanonicalDict(dict):
    """A dict that remembers its canonical JSON (computed once, at creation)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.canonical = canonical_json(self)
