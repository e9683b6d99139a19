"""The labelled corpus of real replies (``tests/corpus/real/``): capture, load, read, compare.

Each line of ``tests/corpus/real/*.jsonl.gz`` is one reply a real model wrote, with
the request it answered and a label written by a person who read it: per field,
the one value the reply itself commits to, ``null`` where it commits to none, or
``{"ambiguous": [candidates]}`` where it can fairly be read more than one way.
The layout is in ``tests/corpus/README.md``.

- :func:`capture` records every call worlds answer while it is active (what the
  collector, ``benchmarks/collect_real_replies.py``, writes out, and what the
  real-model tests check against the labels);
- :func:`read` reads a corpus record the way the kernel reads the reply it holds;
- :func:`compare` says, per labelled field, whether a reading is right, a misread
  (a value the label does not allow) or lost (flagged where the label has a value);
- :func:`split_of` says which part of the corpus a record is in (``split.json``):
  **development** (the replies reading rules may be changed against), **held-out**
  (fresh replies, labelled before any reader ran on them, that measure the readers
  as a classifier is measured) or the sealed **reserve** (labelled, never read, that
  replaces held-out groups moved to development); :func:`evaluate` counts a part.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from backends.base import LLMResponse
from simcore.replies.reading import Reading, read_reply
from simcore.replies.schema import (
    Amount,
    Choice,
    Confidence,
    FieldPlan,
    Flag,
    Likert,
    Option,
    Text,
    plan,
    reply_kind,
)
from simcore.sim.kernel import World

REAL = Path(__file__).resolve().parent / "real"
SPLITS = ("development", "heldout", "reserve")
ANY_TEXT = "*"  # the label of a text field that holds an answer of the reply's own (its wording is not compared)

# The fields labelled per reply kind: every field with a fixed answer (an action, an
# option, a rating, an amount, a confidence, a yes/no), and the required text fields
# (labelled ANY_TEXT or null). Optional free text (reasoning, key points, arguments)
# is not labelled.
LABELLED: dict[str, tuple[str, ...]] = {
    "decision": ("action",),
    "strategy": ("strategy",),
    "rating": ("maximize_minimum", "maximize_average", "floor_constraint", "range_constraint"),
    "turn": ("message", "principle", "constraint_amount"),
    "interview": ("explanation",),
    "assessment": ("option", "confidence"),
    "proposal": ("option", "confidence"),
    "critique": ("critique", "option", "confidence"),
    "ballot": ("option",),
    "initial": ("answer", "confidence"),
    "discussion": ("response", "confidence"),
    "final_vote": ("final_answer", "final_confidence", "changed_position"),
}


def key(messages: list[Mapping[str, str]] | tuple, reply: str) -> str:
    """The lookup key of a reply: sha256 of the messages it answered and its text."""
    msgs = [[m["role"], m["content"]] if isinstance(m, Mapping) else [m.role, m.content] for m in messages]
    return hashlib.sha256(json.dumps([msgs, reply], ensure_ascii=False).encode()).hexdigest()


def _plain(value: Any) -> Any:
    """``allowed`` as JSON (tuples become lists; mappings keep their order)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Captured:
    """One call a world answered: the request as sent, how the kernel read it, and the reply.

    ``reading`` is kept in memory only (the collector never writes it: labels are
    written without looking at what a reader made of the reply).
    """

    model: str
    scenario: str
    fields: dict[str, Any]
    kind: str
    schema: str
    messages: list[dict[str, str]]
    allowed: dict[str, Any] | None
    instruction: str
    max_tokens: int
    reply: str
    finish_reason: str
    reading: Reading | None = field(default=None, repr=False)
    previous_finish_reason: str | None = None  # a re-ask's: how the reply it re-asks ended

    def record(self) -> dict[str, Any]:
        """The corpus fields of this call (without ``reading``, label or note)."""
        rec = {"model": self.model, "scenario": self.scenario, "fields": self.fields, "kind": self.kind,
               "schema": self.schema, "messages": self.messages, "allowed": self.allowed,
               "instruction": pack_instruction(self.messages, self.instruction), "max_tokens": self.max_tokens,
               "reply": self.reply, "finish_reason": self.finish_reason}
        if self.previous_finish_reason is not None:
            rec["previous_finish_reason"] = self.previous_finish_reason
        return rec


def pack_instruction(messages: list[Mapping[str, str]], instruction: str) -> str | dict[str, int]:
    """The instruction, stored short where it is the system prompt and the end of the user message
    (``{"user_from": i}``, as the agents build it), else in full."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    user = messages[-1]["content"]
    rest = instruction[len(system) + 1:]
    if instruction.startswith(system + "\n") and user.endswith(rest):
        return {"user_from": len(user) - len(rest)}
    return instruction


def unpack_instruction(messages: list[Mapping[str, str]], stored: str | Mapping[str, int]) -> str:
    """The instruction :func:`pack_instruction` stored."""
    if isinstance(stored, str):
        return stored
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    return f"{system}\n{messages[-1]['content'][stored['user_from']:]}"


@contextlib.contextmanager
def capture() -> Iterator[list[Captured]]:
    """Record every call with a schema that any world answers inside the block.

    It wraps ``World._deliver``, where the kernel reads a reply, so it sees what
    the kernel read: the request (messages, ``allowed``, the instruction a reply
    must not merely repeat) and the response. A dry run's calls (a world whose backend
    says ``dry_run``: the stub run that checks prompts against a context window) are
    left out. Not re-entrant.
    """
    calls: list[Captured] = []
    original = World._deliver

    def deliver(world: World, call: Any, res: Any) -> None:
        request = call.request  # released by the kernel once delivered
        original(world, call, res)
        # (A dry run on the stub, as the context-window check makes before a run, wrote no reply.)
        if call.schema is None or not isinstance(res, LLMResponse) or getattr(world.backend, "dry_run", False):
            return
        reply = call.value
        calls.append(Captured(
            model=request.model, scenario=world.scenario,
            fields={k: v for k, v in call.fields.items() if isinstance(v, (str, int, float, bool))},
            kind=reply_kind(call.schema), schema=f"{call.schema.__module__}:{call.schema.__qualname__}",
            messages=[{"role": m.role, "content": m.content} for m in request.messages],
            allowed=None if call.allowed is None else _plain(call.allowed), instruction=call.instruction,
            max_tokens=request.max_tokens, reply=res.text, finish_reason=res.finish_reason,
            reading=reply.reading,
            previous_finish_reason=None if call.reask_of is None else call.reask_of.finish_reason,
        ))

    World._deliver = deliver  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        World._deliver = original  # type: ignore[method-assign]


# -- the corpus ---------------------------------------------------------------------

def split_groups(root: Path = REAL) -> dict[str, set[tuple[str, int]]]:
    """The (model, seed) groups of the held-out part and of the reserve (``split.json``); every
    other group is development."""
    path = root / "split.json"
    if not path.exists():
        return {"heldout": set(), "reserve": set()}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {part: {(model, int(seed)) for model, seeds in data[part].items() for seed in seeds}
            for part in ("heldout", "reserve")}


def split_of(rec: Mapping[str, Any], groups: Mapping[str, set[tuple[str, int]]] | None = None) -> str:
    """"development", "heldout" or "reserve": the part of the corpus ``rec``'s (model, seed) is in."""
    groups = split_groups() if groups is None else groups
    group = (rec["model"], int(rec.get("seed") or 0))
    return next((part for part in ("heldout", "reserve") if group in groups[part]), "development")


def load(root: Path = REAL, splits: tuple[str, ...] = ("development", "heldout")) -> list[dict[str, Any]]:
    """The labelled records of the corpus parts ``splits`` (``*.jsonl.gz`` and ``*.jsonl``), in file
    order, each with its ``split``. The reserve is left out unless asked for: it stays unread until
    it replaces held-out replies."""
    groups = split_groups(root)
    out = []
    for path in sorted([*root.glob("*.jsonl.gz"), *root.glob("*.jsonl")]):
        data = path.read_bytes()
        text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                rec = json.loads(line)
                rec["split"] = split_of(rec, groups)
                if rec["split"] not in splits:
                    continue
                rec["instruction"] = unpack_instruction(rec["messages"], rec["instruction"])
                rec["where"] = f"{path.name}:{n}"
                out.append(rec)
    return out


def labels_by_key(root: Path = REAL) -> dict[str, dict[str, Any]]:
    """Labelled records by :func:`key` (what the real-model tests look replies up by)."""
    return {key(r["messages"], r["reply"]): r for r in load(root)}


def schema_of(rec: Mapping[str, Any]) -> type:
    """The reply dataclass a record's reply was read into."""
    module, _, name = rec["schema"].partition(":")
    return getattr(importlib.import_module(module), name)


def read(rec: Mapping[str, Any]) -> Reading:
    """Read a record's reply as the kernel read it (see ``World._deliver``): a re-ask's reply with the
    reading of the reply it re-asks (``known``), read in turn from the messages before it."""
    return _read(rec, _known(rec))


def _read(rec: Mapping[str, Any], known: Reading | None) -> Reading:
    from backends.base import Message

    given = tuple(Message(m["role"], m["content"]) for m in rec["messages"])
    return read_reply(rec["reply"], schema_of(rec), finish_reason=rec["finish_reason"], allowed=rec["allowed"],
                      instruction=rec["instruction"], given=given, known=known)


def scored(rec: Mapping[str, Any]) -> tuple[Reading, dict[str, Any]]:
    """A local record's reading and the part of its label it is scored on: a re-ask that asked for some
    fields only is scored on those (the fields the reply it re-asks gave cleanly stand, and were scored
    on that reply's own row)."""
    known = _known(rec)
    carried = {name for name, _ in known.partial} if known is not None else set()
    return _read(rec, known), {k: v for k, v in rec["label"].items() if k not in carried}


def reask_of(messages: list[Mapping[str, str]]) -> tuple[str, str] | None:
    """(the reply it re-asks, the follow-up) where ``messages`` are a re-ask's, else None."""
    if len(messages) >= 3 and messages[-2]["role"] == "assistant":
        return messages[-2]["content"], messages[-1]["content"]
    return None


def _known(rec: Mapping[str, Any]) -> Reading | None:
    """The kernel's reading of the reply a re-ask re-asks: that reply read with the messages it answered
    and the instruction without the follow-up (a follow-up that says it was cut: it ended at max_tokens)."""
    found = reask_of(rec["messages"])
    if found is None:
        return None
    previous, follow_up = found
    instruction = rec["instruction"]
    if instruction.endswith("\n" + follow_up):
        instruction = instruction[: -len(follow_up) - 1]
    # (Records collected before the collector kept how the re-asked reply ended: its follow-up says it was cut.)
    ended = rec.get("previous_finish_reason") or ("length" if follow_up.startswith(CUT_FOLLOW_UP) else "stop")
    earlier = {**rec, "messages": rec["messages"][:-2], "reply": previous, "instruction": instruction,
               "finish_reason": ended}
    earlier.pop("previous_finish_reason", None)
    return read(earlier)


CUT_FOLLOW_UP = "Your reply was cut off at the length limit"  # how reask_prompt opens for a cut reply


def values(reading: Reading | None, names: list[str]) -> dict[str, Any]:
    """Each field's value in ``reading``; None for a field the reader left unread (flagged).

    A flagged multi-field reply gives the fields it kept (:attr:`Reading.fields`).
    """
    kept = {} if reading is None else reading.fields
    return {n: kept.get(n) for n in names}


def valid(f: FieldPlan, value: Any, allowed: Mapping[str, Any] | None) -> bool:
    """Whether a label's value is one the field can hold (for the corpus's own checks)."""
    kind = f.kind
    if isinstance(kind, Text):
        return value == ANY_TEXT
    if isinstance(kind, Choice):
        return value in kind.options
    if isinstance(kind, Option):
        keys = (allowed or {}).get(f.name) or kind.keys
        return isinstance(value, str) and value in [str(k) for k in keys]
    if isinstance(kind, Likert):
        return type(value) is int and 1 <= value <= len(kind.scale)
    if isinstance(kind, Confidence):
        return type(value) in (int, float) and 0 <= value <= 1
    if isinstance(kind, Amount):
        return type(value) in (int, float) and value >= kind.lo and (kind.hi is None or value <= kind.hi)
    if isinstance(kind, Flag):
        return type(value) is bool
    return False


def _same(label: Any, got: Any) -> bool:
    if label == ANY_TEXT:
        return isinstance(got, str) and bool(got.strip())
    if isinstance(label, bool) or isinstance(got, bool):
        return label is got
    if isinstance(label, (int, float)) and isinstance(got, (int, float)):
        return abs(label - got) <= 1e-9 * max(1.0, abs(label))
    return str(label) == str(got)


def compare(label: Mapping[str, Any], got: Mapping[str, Any]) -> dict[str, str]:
    """Per labelled field: "right", "misread" or "lost".

    A misread is a value the label does not allow: any value where the label is
    null, another value where it has one, a value outside an ambiguous label's
    candidates. Lost is no value where the label has one (or ambiguous
    candidates): a flagged reading, allowed but counted.
    """
    out = {}
    for name, want in label.items():
        value = got.get(name)
        if isinstance(want, Mapping) and "ambiguous" in want:
            ok = value is None or any(_same(c, value) for c in want["ambiguous"])
            out[name] = "right" if ok else "misread"
        elif want is None:
            out[name] = "right" if value is None else "misread"
        elif value is None:
            out[name] = "lost"
        else:
            out[name] = "right" if _same(want, value) else "misread"
    return out


def check(captured: list[Captured], by_key: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[int, list[str]]:
    """Compare the kernel's readings of captured calls with the labels of those in the corpus.

    Returns:
        (how many captured replies are in the corpus, one line per misread field).
    """
    by_key = labels_by_key() if by_key is None else by_key
    found, bad = 0, []
    for c in captured:
        rec = by_key.get(key(c.messages, c.reply))
        if rec is None:
            continue
        found += 1
        label = rec["label"]
        got = values(c.reading, list(label))
        for name, outcome in compare(label, got).items():
            if outcome == "misread":
                bad.append(f"{rec['where']} {name}: label {label[name]!r}, read {got[name]!r}: {c.reply[:80]!r}")
    return found, bad


COLUMNS = ("replies", "read", "flagged", "misread replies", "fields", "right", "misread", "lost")


def tally(records: list[Mapping[str, Any]]) -> tuple[dict[tuple[str, str, str], dict[str, int]], list[str]]:
    """Read every record and count, per (model, JSON mode, kind), the :data:`COLUMNS`:
    replies, read (readable) and flagged (unreadable) replies, replies with a misread
    field; labelled fields, and of those right, misread and lost (flagged where the label
    has a value).

    Returns:
        (the counts, one line per misread field).
    """
    table: dict[tuple[str, str, str], dict[str, int]] = {}
    misreads: list[str] = []
    for rec in records:
        reading, label = scored(rec)
        got = values(reading, list(label))
        row = table.setdefault((rec["model"], rec["json_mode"], rec["kind"]), dict.fromkeys(COLUMNS, 0))
        row["replies"] += 1
        row["read" if reading.readable else "flagged"] += 1
        outcomes = compare(label, got)
        row["misread replies"] += "misread" in outcomes.values()
        for name, outcome in outcomes.items():
            row["fields"] += 1
            row[outcome] += 1
            if outcome == "misread":
                misreads.append(f"{rec['where']} {rec['model']}/{rec['json_mode']}/{rec['kind']} {name}: "
                                f"label {label[name]!r}, read {got[name]!r}; reply {rec['reply'][:100]!r}")
    return table, misreads


def format_table(table: Mapping[tuple[str, str, str], Mapping[str, int]]) -> str:
    """The counts of :func:`tally` as a Markdown table, with a total row."""
    lines = ["| model | JSON mode | kind | " + " | ".join(COLUMNS) + " |", "|" + " --- |" * (3 + len(COLUMNS))]
    total = dict.fromkeys(COLUMNS, 0)
    for (model, mode, kind), row in sorted(table.items()):
        lines.append(f"| {model} | {mode} | {kind} | " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
        for c in COLUMNS:
            total[c] += row[c]
    lines.append("| all | | | " + " | ".join(str(total[c]) for c in COLUMNS) + " |")
    return "\n".join(lines)


EVAL_COLUMNS = ("replies", "labelled readable", "read", "misread", "precision", "readable but flagged", "recall")


def definite(want: Any) -> bool:
    """Whether a label gives one value (not null, not ambiguous)."""
    return want is not None and not (isinstance(want, Mapping) and "ambiguous" in want)


def reply_of(rec: Mapping[str, Any]) -> str:
    """"first" or "re-ask": whether a record's reply answers the request or a re-ask of it."""
    if "reask" in rec:
        return "re-ask" if rec["reask"] else "first"
    return "re-ask" if "messages" in rec and reask_of(rec["messages"]) is not None else "first"


COUNTED = ("replies", "labelled readable", "read", "misread", "misread read", "readable but flagged", "read right")


def evaluate(records: list[Mapping[str, Any]]) -> dict[tuple[str, ...], dict[str, Any]]:
    """The readers scored as a classifier, per (split, source, model, JSON mode, reply kind, reply):
    ``source`` is "local" for the small local models' replies (this module's corpus) or a capable
    models' source (:mod:`tests.corpus.capable`, their replies served to simcore's decision prompt);
    ``reply`` is "first" or "re-ask" (a re-ask's reply, read with the reply it re-asks).

    Per reply: **labelled readable** where its label gives one value for every required
    field; **read** where a reader found it readable; **misread** where any labelled field
    was given a value its label does not allow (a read reply, or a field a flagged reply
    kept); **readable but flagged** where it is labelled readable and the reader flagged
    it. Precision is the share of read replies with no misread; recall the share of
    labelled-readable replies read with no misread. Either is None where its denominator
    is 0.
    """
    from tests.corpus import capable

    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for rec in records:
        source = rec.get("source", "local")
        reading, label = scored(rec) if source == "local" else (capable.read(rec), rec["label"])
        outcomes = compare(label, values(reading, list(label)))
        required = {f.name for f in plan_of(rec) if f.required}
        readable = all(definite(label[name]) for name in label if name in required)
        misread = "misread" in outcomes.values()
        key = (rec["split"], source, rec["model"], rec["json_mode"], rec["kind"], reply_of(rec))
        row = rows.setdefault(key, dict.fromkeys(COUNTED, 0))
        row["replies"] += 1
        row["labelled readable"] += readable
        row["read"] += reading.readable
        row["misread"] += misread
        row["misread read"] += misread and reading.readable
        row["readable but flagged"] += readable and not reading.readable
        row["read right"] += readable and reading.readable and not misread
    for row in rows.values():
        _rates(row)
    return rows


def _rates(row: dict[str, Any]) -> None:
    row["precision"] = None if not row["read"] else 1 - row["misread read"] / row["read"]
    row["recall"] = None if not row["labelled readable"] else row["read right"] / row["labelled readable"]


def plan_of(rec: Mapping[str, Any]) -> tuple[FieldPlan, ...]:
    """The fields of a record's reply schema."""
    return plan(schema_of(rec))


KEY = ("split", "source", "model", "json_mode", "kind", "reply")


def totals(rows: Mapping[tuple[str, ...], Mapping[str, Any]],
           by: tuple[str, ...] = ("split", "source", "model")) -> dict[tuple[str, ...], dict[str, Any]]:
    """:func:`evaluate`'s rows summed over every part of their key but ``by`` (names of :data:`KEY`)."""
    at = [KEY.index(name) for name in by]
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for k, row in rows.items():
        acc = out.setdefault(tuple(k[i] for i in at), dict.fromkeys(COUNTED, 0))
        for c in acc:
            acc[c] += row[c]
    for row in out.values():
        _rates(row)
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def format_evaluation(rows: Mapping[tuple[str, ...], Mapping[str, Any]], split: str) -> str:
    """One split's rows of :func:`evaluate` as a Markdown table: per source, model, JSON mode, reply
    kind and reply (first or re-ask), then per source, model and reply, per reply, and all."""
    head = "| source | model | JSON mode | reply kind | reply | " + " | ".join(EVAL_COLUMNS) + " |"
    lines = [head, "|" + " --- |" * (5 + len(EVAL_COLUMNS))]

    def cells(row: Mapping[str, Any]) -> str:
        return " | ".join(_pct(row[c]) if c in ("precision", "recall") else str(row[c]) for c in EVAL_COLUMNS)

    mine = {k: v for k, v in rows.items() if k[0] == split}
    for (_, source, model, mode, kind, reply), row in sorted(mine.items()):
        lines.append(f"| {source} | {model} | {mode} | {kind} | {reply} | {cells(row)} |")
    for (_, source, model, reply), row in sorted(totals(mine, ("split", "source", "model", "reply")).items()):
        lines.append(f"| {source} | **{model}** | all | all | {reply} | {cells(row)} |")
    for (_, reply), row in sorted(totals(mine, ("split", "reply")).items()):
        lines.append(f"| **all** | | | | **{reply}** | {cells(row)} |")
    for row in totals(mine, ("split",)).values():
        lines.append(f"| **all** | | | | | {cells(row)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the counts per model, JSON mode and kind, and every misread (or, with
    ``--labels``, every record's label, note and reply, without reading any)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m tests.corpus.real", description=main.__doc__)
    p.add_argument("--labels", action="store_true", help="list labels and replies; run no reader")
    args = p.parse_args(argv)
    records = load()
    if args.labels:
        for rec in records:
            print(f"== {rec['where']} {rec['model']}/{rec['json_mode']} {rec['scenario']} {rec['kind']} "
                  f"finish={rec['finish_reason']}\nlabel: {json.dumps(rec['label'])}\nnote: {rec['note']}\n"
                  f"{rec['reply']}\n")
        return 0
    counts, bad = tally(records)
    print(format_table(counts))
    print(f"\n{len(bad)} misread fields")
    for line in bad:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
