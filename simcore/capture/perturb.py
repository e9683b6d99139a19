"""simcore's perturbation operators, applied by the capture proxy to a program's calls.

A SPEC is written as for a simulation (:mod:`simcore.perturbation.operators`) and
parsed by the same parser. What each operator does to a program's call:

==============  =====================================================================
``replace``     the reply's text becomes ``text=``
``truncate``    the reply keeps the first ``keep=`` share of its text
``blank``       the reply's text becomes empty
``inject``      ``text=`` is added to the reply (``where=start|end``), or with
                ``on=prompt`` to the request's last message before it is sent
``drop``        the reply never arrives: the proxy closes the connection unanswered
``fail``        the call fails: HTTP 500 with an error body, as a provider's outage
``delay``       the reply arrives ``by=`` seconds later (wall clock)
``budget``      the request's token limit becomes ``tokens=``
``none``        nothing (a control pair)
==============  =====================================================================

``swap`` and ``remove_edge`` need a speaking order or a topology, which a program
does not have; they are refused. ``on=message`` (the default) and ``on=reply``
both mean the reply here: what the program receives is its only message.

Selectors pick calls: ``agent`` is the caller's label (``program`` unless it sends
an ``X-Simcore-Agent`` header), ``phase`` the ``X-Simcore-Phase`` header,
``field.model``, ``field.role`` ... the call's structural fields, ``after`` a
logical time (replies received so far), and ``nth`` which matching call, from 0
(``blank:nth=2`` blanks the reply to the program's third call). Every operator
counts the calls that match its selector when they are made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simcore.base.config import ConfigError
from simcore.perturbation.operators import (
    FIELD,
    OPERATORS,
    Budget,
    Delay,
    Drop,
    Fail,
    Inject,
    NoOp,
    Operator,
    TextOperator,
    parse_perturbation,
)

#: Operators without a meaning for a program, and why.
REFUSED = {"swap": "a program has no speaking order", "remove_edge": "a program has no topology"}


@dataclass
class Plan:
    """What a perturbation does to one call."""

    prompt: list[Inject] = field(default_factory=list)
    budget: Budget | None = None
    reply: list[TextOperator] = field(default_factory=list)
    fail: Fail | None = None
    drop: Drop | None = None
    delay: list[Delay] = field(default_factory=list)

    @property
    def changes_request(self) -> bool:
        return bool(self.prompt) or self.budget is not None

    @property
    def withholds_reply(self) -> bool:
        return self.fail is not None or self.drop is not None


def check_spec(spec: str) -> None:
    """Refuse operators a program cannot take, in one line.

    Raises:
        ConfigError: naming the operator and why.
    """
    for op in parse_perturbation(spec).operators:
        if op.name in REFUSED:
            allowed = ", ".join(n for n in OPERATORS if n not in REFUSED)
            raise ConfigError(f"{FIELD}: {op.name}: {REFUSED[op.name]}; operators for programs: {allowed}")


class CallPerturbation:
    """One run's perturbation: which calls it acts on, what it did, and where it first acted.

    Attributes:
        point: Where it first acted: ``t`` (logical time), ``event`` (trace index)
            and ``calls_before``; None while nothing was changed.
    """

    def __init__(self, spec: str) -> None:
        check_spec(spec)
        self.inner = parse_perturbation(spec)
        self.point: dict[str, Any] | None = None
        self._matches = [0] * len(self.inner.operators)

    def describe(self) -> str:
        """The canonical SPEC (what run manifests record)."""
        return self.inner.describe()

    @property
    def applied(self) -> list[dict[str, Any]]:
        """Everything the operators did, in order."""
        return self.inner.applied

    def plan(self, agent: str, fields: Mapping[str, Any], t: float) -> Plan:
        """The operators acting on a call being made (each counts it if it matches)."""
        plan = Plan()
        for i, op in enumerate(self.inner.operators):
            if isinstance(op, NoOp) or not op.selector.matches(agent, fields, t):
                continue
            k, self._matches[i] = self._matches[i], self._matches[i] + 1
            if op.selector.nth is not None and k != op.selector.nth:
                continue
            if isinstance(op, Inject) and op.target == "prompt":
                plan.prompt.append(op)
            elif isinstance(op, TextOperator):
                plan.reply.append(op)
            elif isinstance(op, Budget):
                plan.budget = op
            elif isinstance(op, Fail):
                plan.fail = op
            elif isinstance(op, Drop):
                plan.drop = op
            elif isinstance(op, Delay):
                plan.delay.append(op)
        return plan

    def log(self, op: Operator, agent: str, fields: Mapping[str, Any], *, t: float, event: int, calls: int,
            **what: Any) -> None:
        """Record that ``op`` acted (in the format of the simulation's operators)."""
        op.applied.append({"operator": op.name, "t": t, "event": event, "agent": agent,
                           "fields": {k: str(v) for k, v in fields.items()}, **what})
        if self.point is None:
            self.point = {"t": t, "event": event, "calls_before": calls}
