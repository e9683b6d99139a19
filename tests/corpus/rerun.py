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


def label_fields(record: dict[str, Any]) -> dict[str, Any]:
    """A record's label as {field: value}: what the reply commits to (see tests/corpus/real/rerun.md).

    A label is null (the reply commits to nothing), the value of the schema's one fixed-answer
    field ("DEFECT", "B"), or an object with a value per field the reply commits to (``true``
    for a free-text field: the reply states one of its own).
    """
    from simcore.schema import Text, plan

    label = record["label"]
    if label is None:
        return {}
    if isinstance(label, dict):
        return label
    fixed = [f.name for f in plan(schema_of(record)) if f.required and not isinstance(f.kind, Text)]
    if len(fixed) != 1:
        raise ValueError(f"{record['id']}: a bare label needs a schema with one fixed-answer field")
    return {fixed[0]: label}


def compare(record: dict[str, Any], got: dict[str, Any]) -> dict[str, list[str]]:
    """The fields a reading misread (a value the label does not give) or left out (a label it did not read).

    ``got`` holds the fields the reader read cleanly. Free-text fields the label does not
    judge (an optional reasoning) are not compared.
    """
    from simcore.schema import Text, plan

    label = label_fields(record)
    wrong, left = [], []
    for f in plan(schema_of(record)):
        text = isinstance(f.kind, Text)
        if text and f.name not in label:
            continue
        have, want = got.get(f.name), label.get(f.name)
        if text and have is not None:
            have = True
        if have is None and want is None:
            continue
        if have is None:
            left.append(f.name)
        elif want is None or (have != want and not (isinstance(want, float) and abs(have - want) < 1e-9)):
            wrong.append(f"{f.name}: read {have!r}, label {want!r}")
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
    except TypeError:  # an older reader without ``given``
        return read_reply(record["reply"], schema_of(record), **kwargs)
