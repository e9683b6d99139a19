"""The Scenario API is versioned: its public surface cannot change without a version bump.

The surface is every name :mod:`simcore.api` exports (``SURFACE``): the
:class:`~simcore.runs.scenario.Scenario` fields and the signatures of the helpers
scenarios use, the objects docs/scenario-api.md documents.
``tests/golden/scenario_api.json`` keeps the surface of every released
``SCENARIO_API_VERSION``. After an intended change, bump the version (major when
something was removed or changed, minor when something was only added, patch for
neither) and record it::

    python -m tests.test_scenario_api --record

Recording refuses to overwrite a version with a different surface, so a change
always needs a bump.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any, ForwardRef

from simcore import api
from simcore.runs.scenario import SCENARIO_API_VERSION

GOLDEN = Path(__file__).parent / "golden" / "scenario_api.json"
# Since 4.0.0 the surface is exactly the face scenario authors import from (simcore.api).
SURFACE = tuple(f"simcore.api:{name}" for name in api.__all__ if name != "SCENARIO_API_VERSION")


def describe(obj: Any) -> Any:
    """What callers of ``obj`` depend on: signatures, fields and their types, values."""
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return {"exception": [b.__name__ for b in obj.__mro__[1:] if b is not object]}
    if isinstance(obj, type):
        out: dict[str, Any] = {}
        if dataclasses.is_dataclass(obj):
            # (A private field no caller can pass, such as a memo, is not part of the API.)
            out["fields"] = {f.name: [_type(f.type), _default(f)] for f in dataclasses.fields(obj)
                             if f.init or not f.name.startswith("_")}
        elif hasattr(obj, "_fields"):  # a NamedTuple
            out["fields"] = {name: _type(obj.__annotations__[name]) for name in obj._fields}
        for name, member in vars(obj).items():
            if name.startswith("_") and name != "__init__" or name in out.get("fields", {}):
                continue
            if isinstance(member, property):
                out[name] = "property"
            elif isinstance(member, (classmethod, staticmethod)):
                out[name] = _signature(member.__func__)
            elif inspect.isfunction(member) and not (dataclasses.is_dataclass(obj) and name == "__init__"):
                out[name] = _signature(member)
        return out
    if callable(obj):
        return _signature(obj)
    return re.sub(r" at 0x[0-9a-f]+", "", repr(obj))  # values that hold functions


def _signature(func: Any) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", str(inspect.signature(func)))  # default values that are functions


def _type(tp: Any) -> str:
    if isinstance(tp, str):
        return tp
    if isinstance(tp, ForwardRef):
        return tp.__forward_arg__
    return tp.__name__ if isinstance(tp, type) else str(tp)


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return re.sub(r" at 0x[0-9a-f]+", "", repr(f.default))
    return "factory" if f.default_factory is not dataclasses.MISSING else "required"


def surface() -> dict[str, Any]:
    out = {}
    for ref in SURFACE:
        module, _, name = ref.partition(":")
        out[ref] = describe(getattr(importlib.import_module(module), name))
    return out


def parse_version(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(x) for x in text.split("."))
    return major, minor, patch


def flatten(surface: dict[str, Any]) -> dict[str, Any]:
    """One entry per object, member and field, so that an added field counts as an addition."""
    out: dict[str, Any] = {}
    for ref, desc in surface.items():
        if not isinstance(desc, dict):
            out[ref] = desc
            continue
        out[ref] = "class"
        for key, value in desc.items():
            items = value.items() if key == "fields" else [(key, value)]
            out.update((f"{ref}.{name}", v) for name, v in items)
    return out


def _params(signature: str) -> tuple[list[str], str]:
    """The parameters of a signature string (split at top-level commas) and its return part."""
    body, _, ret = signature.rpartition(")")
    body = body[1:] if body.startswith("(") else body
    out, depth, cur = [], 0, ""
    for ch in body:
        depth += ch in "([{" and 1 or ch in ")]}" and -1 or 0
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out, ret


def extends(old: Any, new: Any) -> bool:
    """Whether signature ``new`` only adds optional parameters to ``old`` without moving any
    positional one, so that every call that worked still works (a minor change)."""
    if not (isinstance(old, str) and isinstance(new, str) and old.startswith("(") and new.startswith("(")):
        return False
    (op, oret), (np_, nret) = _params(old), _params(new)
    if oret != nret or [p for p in np_ if p in op] != op:
        return False
    keyword_only = False
    for p in np_:
        if p == "*" or p.startswith("*") and not p.startswith("**"):
            keyword_only = True
        if p not in op and not p.startswith("**"):
            later_positional = any(q in op and not keyword_only and not q.startswith("*") for q in np_[np_.index(p) + 1:])
            if "=" not in p or later_positional:
                return False
    return True


def bump_problem(old_version: str, old: dict[str, Any], new_version: str, new: dict[str, Any]) -> str | None:
    """Why ``new_version`` is not a valid semantic-version successor of ``old_version``, or None.

    A removed or changed entry (a field's type or default, a signature) needs a major
    bump; an added one, or a signature that only gained optional parameters, at least
    a minor bump.
    """
    o, n = parse_version(old_version), parse_version(new_version)
    old, new = flatten(old), flatten(new)
    grown = sorted(k for k in old if k in new and old[k] != new[k] and extends(old[k], new[k]))
    changed = sorted(k for k in old if k in new and old[k] != new[k] and k not in grown)
    removed, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    if n <= o:
        return f"{new_version} must come after {old_version}"
    if (removed or changed) and n[0] == o[0]:
        return f"{', '.join(removed + changed)} removed or changed: needs a major bump from {old_version}"
    if (added or grown) and n[:2] == o[:2]:
        return f"{', '.join(added + grown)} added: needs at least a minor bump from {old_version}"
    return None


def load_golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}


def test_the_surface_is_the_one_recorded_for_this_version():
    golden = load_golden()
    assert SCENARIO_API_VERSION in golden, (
        f"SCENARIO_API_VERSION {SCENARIO_API_VERSION} is not recorded; run python -m tests.test_scenario_api --record"
    )
    recorded, now = golden[SCENARIO_API_VERSION], surface()
    diff = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    assert not diff, (
        f"the Scenario API changed without a version bump ({', '.join(diff)}): bump "
        f"simcore.runs.scenario.SCENARIO_API_VERSION (now {SCENARIO_API_VERSION}) and run "
        "python -m tests.test_scenario_api --record"
    )


def test_recorded_versions_follow_semantic_versioning():
    golden = load_golden()
    versions = sorted(golden, key=parse_version)
    assert versions[-1] == SCENARIO_API_VERSION
    for old, new in zip(versions, versions[1:]):
        assert bump_problem(old, golden[old], new, golden[new]) is None


def test_the_bump_rule_catches_changes():
    base = {"a": "(x)", "b": "(y)", "C": {"fields": {"f": ["int", "required"]}, "m": "(self)"}}
    assert bump_problem("1.0.0", base, "1.0.1", base) is None
    assert bump_problem("1.0.0", base, "1.0.1", {**base, "c": "()"}) == "c added: needs at least a minor bump from 1.0.0"
    assert bump_problem("1.0.0", base, "1.1.0", {**base, "c": "()"}) is None
    assert "needs a major bump" in bump_problem("1.0.0", base, "1.1.0", {"a": "(x)", "C": base["C"]})
    with_field = {**base, "C": {"fields": {"f": ["int", "required"], "g": ["int", "0"]}, "m": "(self)"}}
    assert bump_problem("1.0.0", base, "1.0.1", with_field) == "C.g added: needs at least a minor bump from 1.0.0"
    assert bump_problem("1.0.0", base, "1.1.0", with_field) is None
    assert "C.f removed or changed" in bump_problem("1.0.0", base, "1.1.0", {**base, "C": {"fields": {}, "m": "(self)"}})
    assert "needs a major bump" in bump_problem("1.0.0", base, "1.1.0", {**base, "a": "(x, y)"})
    assert bump_problem("1.0.0", base, "2.0.0", {"a": "(x, y)"}) is None
    assert bump_problem("1.2.0", base, "1.1.9", base) == "1.1.9 must come after 1.2.0"
    # A signature that only gains optional parameters is an addition, not a change.
    assert bump_problem("1.0.0", base, "1.1.0", {**base, "a": "(x, y=None)"}) is None
    assert "added" in bump_problem("1.0.0", base, "1.0.1", {**base, "a": "(x, y=None)"})
    kw = {"f": "(self, a, *, b=1, **k) -> 'X'"}
    assert bump_problem("1.0.0", kw, "1.1.0", {"f": "(self, a, *, b=1, c=2, **k) -> 'X'"}) is None
    assert "major" in bump_problem("1.0.0", kw, "1.1.0", {"f": "(self, a, *, b=1, c, **k) -> 'X'"})
    assert "major" in bump_problem("1.0.0", kw, "1.1.0", {"f": "(self, a, *, b=1, **k) -> 'Y'"})
    assert "major" in bump_problem("1.0.0", base, "1.1.0", {**base, "a": "(w=None, x)"})


def test_the_surface_sees_a_scenario_field_change():
    from simcore.runs.scenario import Scenario

    extended = dataclasses.make_dataclass("Scenario", [("extra", int, dataclasses.field(default=0))],
                                          bases=(Scenario,), frozen=True)
    assert describe(extended)["fields"]["extra"] == ["int", "0"]
    assert describe(extended) != describe(Scenario)


def record() -> int:
    golden = load_golden()
    now = surface()
    if golden.get(SCENARIO_API_VERSION, now) != now:
        print(f"error: version {SCENARIO_API_VERSION} is recorded with another surface; bump "
              "simcore.runs.scenario.SCENARIO_API_VERSION first", file=sys.stderr)
        return 2
    previous = [v for v in golden if parse_version(v) < parse_version(SCENARIO_API_VERSION)]
    if previous:
        last = max(previous, key=parse_version)
        problem = bump_problem(last, golden[last], SCENARIO_API_VERSION, now)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    golden[SCENARIO_API_VERSION] = now
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"recorded the Scenario API {SCENARIO_API_VERSION} in {GOLDEN}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        print("usage: python -m tests.test_scenario_api --record", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(record())


def test_every_framework_name_the_built_in_scenarios_import_is_in_the_newest_published_api():
    import ast

    golden = load_golden()
    newest = golden[max(golden, key=parse_version)]
    published = {ref.partition(":")[2] for ref in newest if ref.startswith("simcore.api:")}
    outside = []
    for path in sorted((Path(__file__).parent.parent / "scenarios").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                outside += [f"{path.name}: import {a.name}" for a in node.names
                            if a.name.split(".")[0] in ("simcore", "backends")]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("simcore", "backends"):
                outside += [f"{path.name}: {node.module}:{a.name}" for a in node.names
                            if node.module != "simcore.api" or a.name not in published]
    assert not outside, f"scenarios import framework names outside the published simcore.api: {outside}"


def test_the_api_module_docstring_places_every_exported_name_in_a_group():
    groups = api.__doc__.partition("What it holds, by group")[2]
    listed = re.findall(r"``([A-Za-z_][A-Za-z0-9_]*)``", groups)
    assert sorted(set(api.__all__) - set(listed)) == []
    assert len(listed) == len(set(listed)), "a name listed in two groups"
