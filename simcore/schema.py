"""Structured replies: dataclass schemas, JSON schemas and lenient parsing.

A reply schema is a frozen dataclass whose fields are str, int, float, bool,
``list[...]`` of those, or ``Literal[...]``. Numeric bounds go in field metadata as
``{"range": (lo, hi)}``. From it we derive the JSON schema that real providers get
in JSON mode, and we parse model output back into an instance.

Parsing is lenient, because models are sloppy: code fences are stripped, the first
balanced ``{...}`` block is tried when the whole text is not JSON, numbers in
strings are converted and out-of-range numbers are clamped. What still cannot be
parsed is kept raw and flagged ``parse_error``; it never raises.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, get_args, get_origin

from backends.base import canonical_json

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True, slots=True)
class Parsed:
    """Outcome of parsing one reply.

    Attributes:
        value: A schema instance, a dict (no schema), or None on failure.
        parse_error: True when no usable JSON object could be recovered.
        issues: Notes on repairs made (clamped numbers, defaults used, ...).
    """

    value: Any
    parse_error: bool
    issues: tuple[str, ...] = ()


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@lru_cache(maxsize=None)
def json_schema(cls: type) -> dict[str, Any]:
    """Return the JSON schema (draft 2020-12 subset) of a dataclass reply schema.

    The result is cached and shared (do not mutate it), and carries its canonical
    JSON so that hashing requests does not re-serialise it every call.
    """
    props: dict[str, Any] = {}
    required: list[str] = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        props[f.name] = _type_schema(hints[f.name], f.metadata)
        required.append(f.name)
    return CanonicalDict(
        title=cls.__name__,
        type="object",
        properties=props,
        required=required,
        additionalProperties=False,
    )


class CanonicalDict(dict):
    """A dict that remembers its canonical JSON (computed once, at creation)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.canonical = canonical_json(self)


def _type_schema(tp: Any, meta: Any = None) -> dict[str, Any]:
    origin = get_origin(tp)
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    if origin in (list, tuple):
        return {"type": "array", "items": _type_schema(get_args(tp)[0])}
    if tp in _SCALARS:
        out: dict[str, Any] = {"type": _SCALARS[tp]}
        if meta and "range" in meta:
            out["minimum"], out["maximum"] = meta["range"]
        return out
    raise TypeError(f"unsupported schema field type: {tp!r}")


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def extract_json_object(text: str) -> dict[str, Any] | None:
    """Return the JSON object in ``text``: the whole text, else its first ``{...}`` block."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        stripped = _FENCE.sub("", stripped)
    try:
        value = json.loads(stripped)
        if isinstance(value, dict):
            return value
    except (json.JSONDecodeError, ValueError):
        pass
    start = text.find("{")
    while start != -1:
        end = _balanced_end(text, start)
        if end is None:
            return None
        try:
            value = json.loads(text[start : end + 1])
            if isinstance(value, dict):
                return value
        except (json.JSONDecodeError, ValueError):
            pass
        start = text.find("{", start + 1)
    return None


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


def parse_reply(text: str, schema: type | None) -> Parsed:
    """Parse ``text`` leniently into ``schema`` (a dataclass) or a plain dict.

    Args:
        text: Raw model output.
        schema: Reply dataclass, or None to return the JSON object as a dict.

    Returns:
        A :class:`Parsed`; ``parse_error`` is set when nothing usable was found.
    """
    obj = extract_json_object(text)
    if obj is None:
        return Parsed(None, True, ("no JSON object found",))
    if schema is None:
        return Parsed(obj, False)
    issues: list[str] = []
    kwargs: dict[str, Any] = {}
    for name, tp, meta, default, factory in _plan(schema):
        if name in obj:
            value = obj[name]
            # Fast paths: the value already has the declared plain type.
            if type(value) is tp and (tp is str or tp is bool):
                kwargs[name] = value
                continue
            if tp is float and type(value) in (float, int) and value == value:  # NaN takes the slow path
                bounds = meta.get("range")
                if bounds is None or bounds[0] <= value <= bounds[1]:
                    kwargs[name] = float(value)
                    continue
            ok, value = _coerce(value, tp, meta, issues, name)
            if ok:
                kwargs[name] = value
                continue
        if default is not dataclasses.MISSING:
            kwargs[name] = default
        elif factory is not dataclasses.MISSING:
            kwargs[name] = factory()
        else:
            issues.append(f"{name}: missing or invalid")
            return Parsed(None, True, tuple(issues))
        issues.append(f"{name}: default used")
    return Parsed(schema(**kwargs), False, tuple(issues))


@lru_cache(maxsize=None)
def _plan(schema: type) -> tuple[tuple[str, Any, Any, Any, Any], ...]:
    hints = _hints(schema)
    return tuple(
        (f.name, hints[f.name], f.metadata, f.default, f.default_factory)
        for f in dataclasses.fields(schema)
    )


def _coerce(value: Any, tp: Any, meta: Any, issues: list[str], name: str) -> tuple[bool, Any]:
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)
        if value in choices:
            return True, value
        if isinstance(value, str):
            for c in choices:
                if isinstance(c, str) and c.lower() == value.strip().lower():
                    return True, c
        return False, None
    if origin in (list, tuple):
        if isinstance(value, (str, int, float, bool)):
            value = [value]
        if not isinstance(value, list):
            return False, None
        out = []
        for item in value:
            ok, v = _coerce(item, get_args(tp)[0], None, issues, name)
            if ok:
                out.append(v)
        return True, tuple(out) if origin is tuple else out
    if tp is str:
        if isinstance(value, (dict, list)):
            return True, json.dumps(value, ensure_ascii=False)
        return True, str(value)
    if tp is bool:
        if isinstance(value, bool):
            return True, value
        if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
            return True, value.strip().lower() in ("true", "yes", "1")
        if isinstance(value, (int, float)):
            return True, bool(value)
        return False, None
    if tp in (int, float):
        try:
            num = float(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            num = None
        if num is None or num != num:
            return False, None
        if meta and "range" in meta:
            lo, hi = meta["range"]
            if num < lo or num > hi:
                issues.append(f"{name}: {num} clamped to [{lo}, {hi}]")
                num = min(max(num, lo), hi)
        return True, int(round(num)) if tp is int else num
    return False, None
