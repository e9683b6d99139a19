"""Replies of real models with hand labels (tests/corpus/real/rerun_*.jsonl): loading and checking them.

Each line is one reply to a schema with everything the model was given (see
``tests/corpus/real/rerun.md``). :func:`read` reads it as the kernel does, and
:func:`compare` says where a reading disagrees with the label.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent / "real"
KEYS = {"id", "model", "json_mode", "scenario", "kind", "phase", "schema", "messages", "instruction", "allowed",
        "reply", "finish_reason", "label", "labelled", "note"}


def load(paths: list[Path] | None = None) -> list[dict[str, Any]]:
    """Every record of the rerun files (or of ``paths``), in file order."""
    paths = paths or sorted(CORPUS.glob("rerun_*.jsonl"))
    return [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]


def schema_of(record: dict[str, Any]) -> type:
    module, name = record["schema"].split(":")
    return getattr(importlib.import_module(module), name)


def fixed_fields(record: dict[str, Any]) -> list[str]:
    """The fields of a record's schema with an answer of a fixed kind (not free text): what labels judge."""
    from simcore.schema import Text, TextList, plan

    return [f.name for f in plan(schema_of(record)) if not isinstance(f.kind, (Text, TextList))]


def label_fields(record: dict[str, Any]) -> dict[str, Any]:
    """A record's label as {field: value}: what the reply commits to (see tests/corpus/real/rerun.md).

    A label is null (the reply commits to nothing), the value of the schema's one fixed-answer
    field ("DEFECT", "B"), or an object with a value for each fixed-answer field the reply
    commits to. Free-text fields are not labelled.
    """
    label = record["label"]
    if label is None:
        return {}
    if isinstance(label, dict):
        return label
    fixed = fixed_fields(record)
    if len(fixed) != 1:
        raise ValueError(f"{record['id']}: a bare label needs a schema with one fixed-answer field")
    return {fixed[0]: label}


def compare(record: dict[str, Any], got: dict[str, Any]) -> dict[str, list[str]]:
    """The fixed-answer fields a reading misread (a value the label does not give) or left out (a
    label it did not read); ``got`` holds the fields the reader read cleanly."""
    label = label_fields(record)
    wrong, left = [], []
    for name in fixed_fields(record):
        have, want = got.get(name), label.get(name)
        if have is None and want is None:
            continue
        if have is None:
            left.append(name)
        elif want is None or (have != want and not (isinstance(want, float) and abs(have - want) < 1e-9)):
            wrong.append(f"{name}: read {have!r}, label {want!r}")
    return {"misread": wrong, "left_out": left}


def read(record: dict[str, Any], read_reply: Any = None) -> Any:
    """The reading of one record's reply, given what the model was given, as the kernel reads it."""
    if read_reply is None:
        from simcore.reading import read_reply
    from backends.base import Message

    messages = tuple(Message(m["role"], m["content"]) for m in record["messages"])
    kwargs = {"finish_reason": record["finish_reason"], "allowed": record["allowed"],
              "instruction": record["instruction"]}
    try:
        return read_reply(record["reply"], schema_of(record), given=messages, **kwargs)
    except TypeError:  # a reader from before issue 33, without ``given``
        return read_reply(record["reply"], schema_of(record), **kwargs)
