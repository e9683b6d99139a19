"""What a provider was sent for each model: its rule, and the parameters it refused.

A model with a rule (:mod:`backends.models`) is sent what the rule allows. A model
without one is sent what any model of its protocol is sent; when the provider refuses
a request with HTTP 400 naming a parameter simcore can do without (temperature, seed,
a reasoning setting, ...), that parameter is dropped for the model, the call is sent
again, and from then on every call to the model goes without it. The experiment's
conditions changed, so the drop is said once on stderr and recorded in each run's
manifest (``sent``), with the rule that shaped the model's requests.

A drop lasts as long as the run's backend (a sweep's worker process): it is learned
again, once, by a process that starts without it.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Mapping

from backends.models import ModelRule

#: Request parameters that may be dropped when a provider refuses them by name
#: (``max_tokens``: sent as ``max_completion_tokens`` instead, as OpenAI's refusal asks).
DROPPABLE = frozenset({
    "temperature", "top_p", "top_k", "seed", "reasoning_effort", "thinking", "thinkingConfig",
    "max_tokens", "response_format",
})
_NAME = r"\w+(?:\.\w+)*"  # a parameter, possibly dotted ("generationConfig.thinkingConfig")
# Where providers name a refused parameter: OpenAI's "Unsupported value: 'temperature' ...",
# "Unsupported parameter: 'max_tokens' ...", Anthropic's "`temperature` is deprecated for this
# model.", xAI's "does not support parameter reasoningEffort", "'seed' is not supported with
# this model", Gemini's 'Unknown name "thinkingConfig"', and "Extra inputs are not permitted".
_NAMED = (
    re.compile(rf"Unsupported (?:value|parameter):\s*'({_NAME})'"),
    re.compile(rf"`({_NAME})` is (?:deprecated|not supported)"),
    re.compile(rf"does not support (?:the )?parameter:?\s*'?({_NAME})"),
    re.compile(rf"'({_NAME})' is not supported (?:with|by|for) this model"),
    re.compile(rf'Unknown name "({_NAME})"'),
    re.compile(rf"({_NAME}):?\s+Extra inputs are not permitted"),
)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def refused_param(data: Any, body: Mapping[str, Any]) -> str | None:
    """The droppable parameter of ``body`` that an error body says was refused, or None.

    OpenAI-style bodies name it in ``error.param``; others in the message.
    """
    err = data.get("error", data) if isinstance(data, Mapping) else None
    names: list[str] = []
    if isinstance(err, Mapping):
        if isinstance(err.get("param"), str):
            names.append(err["param"])
        message = str(err.get("message") or "")
    else:
        message = str(data or "")
    for pattern in _NAMED:
        names += pattern.findall(message)
    config = body.get("generationConfig") if isinstance(body.get("generationConfig"), Mapping) else {}
    for name in names:
        last = name.rsplit(".", 1)[-1]
        for candidate in (last, _snake(last)):
            if candidate in DROPPABLE and (candidate in body or candidate in config):
                return candidate
    return None


class Sent:
    """Per model: the rule applied, the parameters dropped, and whether a schema went into the prompt."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.rules: dict[str, ModelRule | None] = {}
        self.dropped: dict[str, dict[str, str]] = {}  # model -> param -> the refusal
        self.schema_in_prompt: set[str] = set()
        self._told: set[tuple[str, str]] = set()

    def drops(self, model: str) -> frozenset[str]:
        """The parameters dropped for ``model`` so far."""
        return frozenset(self.dropped.get(model, ()))

    def use(self, model: str, rule: ModelRule | None) -> None:
        """Note the rule of ``model``; say once on stderr that its temperature is not sent."""
        if model in self.rules:
            return
        self.rules[model] = rule
        if rule is not None and "temperature" not in rule.sampling:
            self._tell(model, "temperature",
                       f"{model} takes no temperature (model rule {rule.family!r}, {rule.origin}); it samples "
                       "at its default, as the run's manifest records")

    def drop(self, model: str, param: str, why: str) -> bool:
        """Drop ``param`` for ``model`` after a refusal; False when it was dropped already."""
        mine = self.dropped.setdefault(model, {})
        if param in mine:
            return False
        mine[param] = why[:300]
        self._tell(model, param, f"{self.provider} refused {param!r} for {model}; it is left out of this "
                                 "model's requests from now on, and the run's manifest records it "
                                 f"({why[:160]})")
        return True

    def _tell(self, model: str, param: str, text: str) -> None:
        if (model, param) not in self._told:
            self._told.add((model, param))
            print(f"note: {text}", file=sys.stderr, flush=True)

    def record(self, model: str) -> dict[str, Any] | None:
        """What the run's manifest says about ``model``'s requests, or None when nothing changed."""
        rule = self.rules.get(model)
        out: dict[str, Any] = {} if rule is None else {"rule": rule.describe()}
        if self.dropped.get(model):
            out["dropped"] = dict(sorted(self.dropped[model].items()))
        if model in self.schema_in_prompt:
            out["schema_in_prompt"] = True
        return out or None
