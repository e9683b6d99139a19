"""Typed, validated scenario configs.

A scenario config is a frozen dataclass deriving from :class:`Config`, whose
fields are declared with :func:`param`::

    @dataclass(frozen=True)
    class MyConfig(Config):
        rounds: int = param(3, lo=1, hi=5, help="discussion rounds")
        order: str = param("fixed", choices=ORDER_POLICIES)

Construction validates every field, so an invalid config cannot exist. Errors are
one line and name the field and what is allowed: the CLI turns them into exit
status 2, the HTTP API into status 400, and the batch runner checks a whole grid
before it runs anything.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Union


class ConfigError(ValueError):
    """Bad input: a one-line message that names the field and what is allowed."""


def param(
    default: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[Any, ...] | None = None,
    help: str = "",
    check: Callable[[Any], str | None] | None = None,
) -> Any:
    """Declare a config field with its allowed values.

    Args:
        default: Default value (the seed experiment's).
        lo: Smallest allowed number, inclusive.
        hi: Largest allowed number, inclusive.
        choices: The allowed values.
        help: One line for ``--help``.
        check: Extra check returning an error text (without the field name) or None.
    """
    meta = {"lo": lo, "hi": hi, "choices": choices, "help": help, "check": check}
    if isinstance(default, (list, dict, set)):
        raise TypeError("param: use tuples, not mutable defaults")
    return dataclasses.field(default=default, metadata=meta)


def check_with(validator: Callable[[Any], Any]) -> Callable[[Any], str | None]:
    """Turn a parser that raises ``ConfigError("name: problem")`` into a ``check``."""

    def check(value: Any) -> str | None:
        try:
            validator(value)
        except ConfigError as exc:
            return str(exc).split(": ", 1)[-1]
        return None

    return check


@lru_cache(maxsize=None)
def field_types(cls: type) -> dict[str, Any]:
    """Resolved type hints of a config class."""
    return typing.get_type_hints(cls)


def _base_type(tp: Any) -> tuple[Any, bool]:
    """Strip ``Optional``: return (inner type, whether None is allowed)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _describe(tp: Any, meta: Mapping[str, Any]) -> str:
    choices = meta.get("choices")
    if choices:
        return "one of " + ", ".join("'' (empty)" if c == "" else str(c) for c in choices)
    lo, hi = meta.get("lo"), meta.get("hi")
    noun = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, str(tp))
    if lo is not None and hi is not None:
        return f"{noun} from {lo:g} to {hi:g}"
    if lo is not None:
        return f"{noun} >= {lo:g}"
    if hi is not None:
        return f"{noun} <= {hi:g}"
    return noun


def coerce_field(cls: type, name: str, value: Any) -> Any:
    """Convert ``value`` (e.g. a CLI string) to field ``name``'s type.

    Raises:
        ConfigError: when it cannot be converted.
    """
    f = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    if f is None:
        allowed = ", ".join(x.name for x in dataclasses.fields(cls))
        raise ConfigError(f"{name}: unknown field; fields are: {allowed}")
    tp, optional = _base_type(field_types(cls)[name])
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null", "")):
        if optional:
            return None
        raise ConfigError(f"{name}: must be {_describe(tp, f.metadata)}, got nothing")
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "yes", "1", "on", "false", "no", "0", "off"):
                return value.lower() in ("true", "yes", "1", "on")
            raise ValueError
        if tp is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float):
                if not value.is_integer():
                    raise ValueError
                return int(value)
            return int(value)
        if tp is float:
            if isinstance(value, bool):
                raise ValueError
            out = float(value)
            if out != out:
                raise ValueError
            return out
        if tp is str:
            if isinstance(value, (dict, list)):
                raise ValueError
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: must be {_describe(tp, f.metadata)}, got {value!r}") from None
    origin = typing.get_origin(tp)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: must be a list, got {value!r}")
        item = typing.get_args(tp)[0] if typing.get_args(tp) else Any
        if dataclasses.is_dataclass(item):
            return tuple(_build(item, f"{name}[{i}]", v) for i, v in enumerate(value))
        return tuple(value)
    if dataclasses.is_dataclass(tp):
        return _build(tp, name, value)
    return value


def _build(cls: type, where: str, value: Any) -> Any:
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be a mapping, got {value!r}")
    if issubclass(cls, Config):
        try:
            return cls.from_mapping(value)
        except ConfigError as exc:
            raise ConfigError(f"{where}.{exc}") from None
    try:
        return cls(**value)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class Config:
    """Base of scenario configs: validates on construction."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            tp, optional = _base_type(field_types(type(self))[f.name])
            meta = f.metadata
            if value is None and optional:
                continue
            if tp in (int, float, bool, str):
                ok = isinstance(value, tp) and not (tp is not bool and isinstance(value, bool))
                if tp is float and isinstance(value, int) and not isinstance(value, bool):
                    object.__setattr__(self, f.name, float(value))
                    value, ok = float(value), True
                if not ok:
                    raise ConfigError(f"{f.name}: must be {_describe(tp, meta)}, got {value!r}")
            choices = meta.get("choices")
            if choices and value not in choices:
                raise ConfigError(f"{f.name}: must be {_describe(tp, meta)}; got {value!r}")
            lo, hi = meta.get("lo"), meta.get("hi")
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ConfigError(f"{f.name}: must be {_describe(tp, meta)}, got {value!r}")
            check = meta.get("check")
            if check is not None:
                problem = check(value)
                if problem:
                    raise ConfigError(f"{f.name}: {problem}")
        self.check()

    def check(self) -> None:
        """Cross-field checks; override and raise :class:`ConfigError`."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], base: "Config | None" = None) -> "Config":
        """Build a config from a mapping (YAML, JSON, CLI), coercing scalar strings.

        Args:
            data: Field values; unknown keys are an error.
            base: Config whose values fill the fields ``data`` leaves out.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"config: must be a mapping of field names to values, got {type(data).__name__}")
        values = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)} if base else {}
        for key, value in data.items():
            values[key] = coerce_field(cls, str(key), value)
        return cls(**{k: v for k, v in values.items() if k in {f.name for f in dataclasses.fields(cls)}})

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form, used in manifests (tuples become lists)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> "Config":
        """A copy with some fields changed (validated)."""
        return type(self).from_mapping(changes, base=self)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value
