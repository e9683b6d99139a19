"""What each model family accepts, read from ``backends/models.json`` (and a user's file).

A :class:`ModelRule` says, for the models of one provider whose names match its glob
patterns (as providers name them: ``gpt-5*``, ``claude-opus-4-7*``, ``gemini-3*``):

- ``sampling``: which of the sampling parameters simcore sends (``temperature``,
  ``seed``) the family takes; the others are left out, and the model samples at its
  default;
- ``token_param``: the name of the completion cap in an OpenAI-protocol body;
- ``reasoning``: what is sent to keep the reply's budget for the answer (``send``,
  merged into the body; for Gemini into ``generationConfig``) and the ``allowance`` of
  tokens added to that budget for the reasoning a family cannot turn off;
- ``structured``: how a reply schema is asked for;
- ``source`` and ``checked``: where the rule comes from and when it was read.

Rules from ``--model-rules FILE`` (or ``$SIMCORE_MODEL_RULES``), in the same format,
come before the built-in ones: the longest matching pattern of the user's rules wins,
else the longest of the built-in ones. A model no rule matches is sent as before,
and a parameter its provider refuses is dropped once (see
:mod:`backends.middleware.adapt`).
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from backends.errors import BackendConfigError
from backends.providers import PRESETS

DEFAULT_RULES = Path(__file__).with_name("models.json")
ENV_VAR = "SIMCORE_MODEL_RULES"
SAMPLING = ("temperature", "seed")
TOKEN_PARAMS = ("max_tokens", "max_completion_tokens")
STRUCTURED = {
    "openai": ("json_schema", "json_object", "json_object_schema", "off"),
    "anthropic": ("output_format", "tool"),
    "gemini": ("response_json_schema",),
}
#: The wire protocol of each preset that rules may name (the rest speak OpenAI's).
PROTOCOLS = {"anthropic": "anthropic", "gemini": "gemini"}
_FIELDS = ("provider", "match", "family", "sampling", "token_param", "reasoning", "structured",
           "source", "checked", "note")


@dataclass(frozen=True)
class ModelRule:
    """One model family's rule (see the module docstring).

    Attributes:
        provider: The preset whose models it covers.
        match: Glob patterns of model names.
        family: A human name for the family.
        sampling: The sampling parameters (of ``SAMPLING``) the family takes.
        token_param: The OpenAI body's completion cap, or None (the preset's).
        send: Reasoning settings merged into the body.
        allowance: Tokens added to the reply's budget for reasoning.
        reasoning: Whether the family reasons (``reasoning`` is not null).
        structured: How a reply schema is asked for, or None (the preset's).
        source: Where the rule comes from.
        checked: The day it was checked (YYYY-MM-DD).
        origin: "built-in" or the user's file.
    """

    provider: str
    match: tuple[str, ...]
    family: str = ""
    sampling: tuple[str, ...] = SAMPLING
    token_param: str | None = None
    send: Mapping[str, Any] = field(default_factory=dict)
    allowance: int = 0
    reasoning: bool = False
    structured: str | None = None
    source: str = ""
    checked: str = ""
    origin: str = "built-in"

    def pattern(self, model: str) -> str | None:
        """The longest of this rule's patterns that ``model`` matches, or None."""
        hits = [p for p in self.match if fnmatch.fnmatchcase(model, p)]
        return max(hits, key=len) if hits else None

    def describe(self) -> dict[str, Any]:
        """What the rule changes, for the run's manifest."""
        out: dict[str, Any] = {"family": self.family, "source": self.source, "checked": self.checked,
                               "origin": self.origin}
        left = [p for p in SAMPLING if p not in self.sampling]
        if left:
            out["not_sent"] = left
        if self.reasoning:
            out["reasoning"] = {"send": dict(self.send), "allowance": self.allowance}
        if self.token_param:
            out["token_param"] = self.token_param
        if self.structured:
            out["structured"] = self.structured
        return out


def parse_rules(data: Any, where: str, origin: str | None = None) -> tuple[ModelRule, ...]:
    """Rules from a decoded JSON file (``{"rules": [...]}`` or a list).

    Raises:
        BackendConfigError: one line naming the rule and field at fault.
    """
    rows = data.get("rules") if isinstance(data, Mapping) else data
    if not isinstance(rows, list):
        raise BackendConfigError(f"model-rules: {where} must hold a list of rules (or {{\"rules\": [...]}})")
    return tuple(_rule(row, f"model-rules: {where}: rules[{i}]", origin or where) for i, row in enumerate(rows))


def _rule(row: Any, at: str, origin: str) -> ModelRule:
    if not isinstance(row, Mapping):
        raise BackendConfigError(f"{at}: must be an object")
    unknown = sorted(set(row) - set(_FIELDS))
    if unknown:
        raise BackendConfigError(f"{at}.{unknown[0]}: unknown field; known: {', '.join(_FIELDS)}")
    provider = row.get("provider")
    if provider not in PRESETS or provider == "stub":
        raise BackendConfigError(f"{at}.provider: must be a preset ({', '.join(p for p in PRESETS if p != 'stub')}); "
                                 f"got {provider!r}")
    match = row.get("match")
    if isinstance(match, str):
        match = [match]
    if not isinstance(match, list) or not match or not all(isinstance(m, str) and m for m in match):
        raise BackendConfigError(f"{at}.match: must be a model name or glob pattern, or a list of them")
    sampling = row.get("sampling", list(SAMPLING))
    if not isinstance(sampling, list) or any(s not in SAMPLING for s in sampling):
        raise BackendConfigError(f"{at}.sampling: must be a list of {', '.join(SAMPLING)}; got {sampling!r}")
    token_param = row.get("token_param")
    if token_param is not None and token_param not in TOKEN_PARAMS:
        raise BackendConfigError(f"{at}.token_param: must be one of {', '.join(TOKEN_PARAMS)}; got {token_param!r}")
    reasoning = row.get("reasoning")
    send: Mapping[str, Any] = {}
    allowance = 0
    if reasoning is not None:
        if not isinstance(reasoning, Mapping) or set(reasoning) - {"send", "allowance"}:
            raise BackendConfigError(f"{at}.reasoning: must be null or {{\"send\": {{...}}, \"allowance\": N}}")
        send = reasoning.get("send", {})
        if not isinstance(send, Mapping):
            raise BackendConfigError(f"{at}.reasoning.send: must be an object of body fields")
        allowance = reasoning.get("allowance", 0)
        if isinstance(allowance, bool) or not isinstance(allowance, int) or allowance < 0:
            raise BackendConfigError(f"{at}.reasoning.allowance: must be an integer >= 0; got {allowance!r}")
    protocol = PROTOCOLS.get(provider, "openai")
    structured = row.get("structured")
    if structured is not None and structured not in STRUCTURED[protocol]:
        raise BackendConfigError(f"{at}.structured: must be one of {', '.join(STRUCTURED[protocol])} for "
                                 f"{provider}; got {structured!r}")
    for name in ("family", "source", "checked"):
        if not isinstance(row.get(name, ""), str):
            raise BackendConfigError(f"{at}.{name}: must be a string")
    if not row.get("source"):
        raise BackendConfigError(f"{at}.source: say where the rule comes from (a page, an SDK, your own test)")
    return ModelRule(provider, tuple(match), str(row.get("family", "")), tuple(sampling), token_param,
                     dict(send), int(allowance), reasoning is not None, structured, str(row["source"]),
                     str(row.get("checked", "")), origin)


def _read(path: Path) -> tuple[ModelRule, ...]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BackendConfigError(f"model-rules: cannot read {str(path)!r}: {exc}") from None
    path = Path(path)
    builtin = Path(path) == DEFAULT_RULES
    return parse_rules(data, path.name if builtin else str(path), "built-in" if builtin else str(path))


@lru_cache(maxsize=8)
def load_rules(path: str | None = None) -> tuple[tuple[ModelRule, ...], tuple[ModelRule, ...]]:
    """(the user's rules, the built-in ones): ``path`` or ``$SIMCORE_MODEL_RULES``, and models.json."""
    override = path or os.environ.get(ENV_VAR)
    return (_read(Path(override)) if override else ()), _read(DEFAULT_RULES)


def rule_for(provider: str, model: str, path: str | None = None) -> ModelRule | None:
    """The rule of ``provider``'s ``model`` (a user's rule first), or None when no rule matches."""
    for rules in load_rules(path):
        best: tuple[int, ModelRule] | None = None
        for rule in rules:
            if rule.provider != provider:
                continue
            hit = rule.pattern(model)
            if hit is not None and (best is None or len(hit) > best[0]):
                best = (len(hit), rule)
        if best is not None:
            return best[1]
    return None
