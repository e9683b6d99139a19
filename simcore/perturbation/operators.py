"""Perturbation operators and the SPEC strings that name them.

A perturbation is one or more operators joined with ``+``; each operator is
``NAME[:KEY=VALUE,...]``. Values that hold ``,`` ``+`` ``=`` ``:`` or spaces are
quoted with ``'...'`` or ``"..."``::

    blank:agent=D,phase=discussion,round=1
    replace:agent=P2,round=2,text="I now fully agree with D."
    drop:agent=P1,round=2+delay:agent=P3,phase=final,by=30

Every operator is a :class:`simcore.sim.kernel.Intervention` and acts on one kind of
event, chosen with a *selector*: ``agent``, ``phase``, ``round``,
``field.NAME`` (any other structural field, e.g. ``field.game=3``; values as they
appear in the trace, booleans as true/false), ``after`` (simulated time at or
after which events count) and ``nth`` (which matching event, from 0; ``all``
for every one). The default is ``nth=0``: the first matching event.

====================  ==========  ===============================================
operator              event       what it does
====================  ==========  ===============================================
``replace``           message     the text becomes ``text=``
``truncate``          message     keeps the first ``keep=`` share (default 0.5)
``blank``             message     the text becomes empty
``inject``            message     adds ``text=`` at the ``where=`` end (start|end)
``drop``              order       ``agent`` loses its turn in a speaking order
``swap``              order       ``a`` and ``b`` (default: the first two) swap
``budget``            call        ``max_tokens`` becomes ``tokens=`` (nth=all)
``remove_edge``       time        from time ``at=`` on, ``v`` no longer hears ``u``
``fail``              call        the call fails (the scenario sees an error)
``delay``             call        the reply arrives ``by=`` simulated s later
``none``              -           nothing (a control pair)
====================  ==========  ===============================================

``on=`` moves a text operator from the public message (``message``, the default:
what others hear) to the model's raw reply (``reply``: what the agent itself
gets back and parses; a JSON reply changed this way usually fails to parse) or,
for ``inject`` only, to the prompt (``prompt``: the end of the user message).

The first event at which any operator acts is the *perturbation point*: every
request created before it is identical to the baseline's, which is what prefix
reuse (:mod:`simcore.perturbation.pairs`) relies on.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping, Sequence

from backends.base import LLMRequest, LLMResponse
from backends.base import Message as ChatMessage
from simcore.base.config import ConfigError
from simcore.sim.kernel import Intervention

if TYPE_CHECKING:
    from simcore.sim.agents import LLMAgent
    from simcore.sim.kernel import LLMCall, World

FIELD = "perturb"
_SPECIAL = set(",+=:'\" \t")


class PerturbationError(RuntimeError):
    """The failure a ``fail`` operator gives a call."""


def _text_of(value: Any) -> str:
    """A structural field value as selectors compare it (as the trace writes it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


@dataclass(frozen=True)
class Selector:
    """Which events an operator acts on.

    Attributes:
        agent: The agent (speaker, caller), or None for any.
        phase: The ``phase`` field, or None for any.
        round: The ``round`` field (as text), or None for any.
        fields: Other structural fields that must match, as (name, text) pairs.
        after: Only events at or after this simulated time count.
        nth: Which matching event (0 = the first); None for every one.
    """

    agent: str | None = None
    phase: str | None = None
    round: str | None = None
    fields: tuple[tuple[str, str], ...] = ()
    after: float | None = None
    nth: int | None = 0

    def matches(self, agent: str | None, fields: Mapping[str, Any], now: float) -> bool:
        """Whether an event of ``agent`` with ``fields`` at time ``now`` is selected (ignoring nth)."""
        if self.agent is not None and agent != self.agent:
            return False
        if self.phase is not None and _text_of(fields.get("phase", "")) != self.phase:
            return False
        if self.round is not None and ("round" not in fields or _text_of(fields["round"]) != self.round):
            return False
        for name, value in self.fields:
            if name not in fields or _text_of(fields[name]) != value:
                return False
        return self.after is None or now >= self.after


@dataclass
class Operator(Intervention):
    """Base of the operators: a selector, a counter of matches and a log of what was done.

    Subclasses set ``name``, ``summary`` (one line for ``--help``),
    ``option_parsers`` (option -> (parser, default, required)) and the selector
    keys that make sense for them (``selects``), and override the kernel hooks
    they act through. ``applied`` logs every change made (time, trace index,
    agent, fields).
    """

    selector: Selector = dataclasses.field(default_factory=Selector)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    option_parsers: ClassVar[dict[str, tuple[Callable[[str, str], Any], Any, bool]]] = {}
    selects: ClassVar[tuple[str, ...]] = ("agent", "phase", "round", "field", "after", "nth")
    default_nth: ClassVar[int | None] = 0

    def __post_init__(self) -> None:
        self._seen = 0
        self.applied: list[dict[str, Any]] = []

    def _select(self, agent: str | None, fields: Mapping[str, Any], now: float) -> bool:
        if not self.selector.matches(agent, fields, now):
            return False
        k, self._seen = self._seen, self._seen + 1
        return self.selector.nth is None or k == self.selector.nth

    def _log(self, world: "World", agent: str | None, fields: Mapping[str, Any], **what: Any) -> None:
        entry = {"operator": self.name, "t": world.now, "event": len(world.trace), "agent": agent}
        entry.update({"fields": {k: _text_of(v) for k, v in fields.items()}, **what})
        self.applied.append(entry)

    def spec(self) -> str:
        """The canonical SPEC of this operator."""
        s = self.selector
        parts: list[tuple[str, Any]] = [("agent", s.agent), ("phase", s.phase), ("round", s.round)]
        parts += [(f"field.{k}", v) for k, v in s.fields]
        parts.append(("after", None if s.after is None else _num(s.after)))
        if s.nth != self.default_nth:
            parts.append(("nth", "all" if s.nth is None else s.nth))
        for key, (_, default, _) in self.option_parsers.items():
            value = self.options.get(key, default)
            if value != default:
                parts.append((key, _num(value) if isinstance(value, float) else value))
        args = ",".join(f"{k}={_quote(str(v))}" for k, v in parts if v is not None)
        return f"{self.name}:{args}" if args else self.name


def _num(x: float) -> str:
    return repr(float(x)).removesuffix(".0") if float(x).is_integer() else repr(float(x))


def _quote(value: str) -> str:
    if value and not (_SPECIAL & set(value)):
        return value
    return f"'{value}'" if '"' in value else f'"{value}"'


# -- option parsers: (operator name, raw text) -> value -------------------------

def _nonneg_float(what: str) -> Callable[[str, str], float]:
    def parse(op: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (value >= 0 and math.isfinite(value)):
            raise ConfigError(f"{FIELD}: {op}: {what} must be a number >= 0, got {raw!r}")
        return value
    return parse


def _share(op: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise ConfigError(f"{FIELD}: {op}: keep must be a number between 0 and 1 (exclusive), got {raw!r}")
    return value


def _tokens(op: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{FIELD}: {op}: tokens must be an integer >= 1, got {raw!r}")
    return value


def _any_text(op: str, raw: str) -> str:
    return raw


def _name(key: str) -> Callable[[str, str], str]:
    def parse(op: str, raw: str) -> str:
        if not raw:
            raise ConfigError(f"{FIELD}: {op}: {key} must name an agent, got nothing")
        return raw
    return parse


def _choice(key: str, choices: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(op: str, raw: str) -> str:
        if raw not in choices:
            raise ConfigError(f"{FIELD}: {op}: {key} must be one of {', '.join(choices)}; got {raw!r}")
        return raw
    return parse


# -- text operators: replace, truncate, blank, inject ----------------------------

@dataclass
class TextOperator(Operator):
    """Changes a text: a public message (default), the raw reply, or (inject) the prompt."""


    def transform(self, text: str) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def target(self) -> str:
        return self.options.get("on", "message")

    def message(self, agent: "LLMAgent", text: str, fields: Mapping[str, Any]) -> str:
        if self.target != "message" or not self._select(agent.name, fields, agent.world.now):
            return text
        new = self.transform(text)
        self._log(agent.world, agent.name, fields, target="message", chars=[len(text), len(new)])
        return new

    def response(self, call: "LLMCall", response: LLMResponse | BaseException) -> LLMResponse | BaseException:
        # Only replies count as matches: a call that failed anyway has no text.
        world = call.agent.world
        if self.target != "reply" or not isinstance(response, LLMResponse):
            return response
        if not self._select(call.agent.name, call.fields, world.now):
            return response
        new = self.transform(response.text)
        self._log(world, call.agent.name, call.fields, target="reply", chars=[len(response.text), len(new)])
        return dataclasses.replace(response, text=new)


@dataclass
class Replace(TextOperator):
    name: ClassVar[str] = "replace"
    summary: ClassVar[str] = "replace an agent's message with text=..."
    option_parsers: ClassVar[dict[str, Any]] = {
        "text": (_any_text, None, True),
        "on": (_choice("on", ("message", "reply")), "message", False),
    }

    def transform(self, text: str) -> str:
        return self.options["text"]


@dataclass
class Truncate(TextOperator):
    name: ClassVar[str] = "truncate"
    summary: ClassVar[str] = "keep the first keep=share (default 0.5) of an agent's message"
    option_parsers: ClassVar[dict[str, Any]] = {
        "keep": (_share, 0.5, False),
        "on": (_choice("on", ("message", "reply")), "message", False),
    }

    def transform(self, text: str) -> str:
        return text[: int(len(text) * self.options.get("keep", 0.5))]


@dataclass
class Blank(TextOperator):
    name: ClassVar[str] = "blank"
    summary: ClassVar[str] = "blank an agent's message (empty text)"
    option_parsers: ClassVar[dict[str, Any]] = {
        "on": (_choice("on", ("message", "reply")), "message", False),
    }

    def transform(self, text: str) -> str:
        return ""


@dataclass
class Inject(TextOperator):
    name: ClassVar[str] = "inject"
    summary: ClassVar[str] = "inject the sentence text=... at where=start|end (default end)"
    option_parsers: ClassVar[dict[str, Any]] = {
        "text": (_any_text, None, True),
        "where": (_choice("where", ("start", "end")), "end", False),
        "on": (_choice("on", ("message", "reply", "prompt")), "message", False),
    }

    def transform(self, text: str) -> str:
        sentence = self.options["text"]
        if not text:
            return sentence
        return f"{sentence} {text}" if self.options.get("where", "end") == "start" else f"{text} {sentence}"

    def request(self, agent: "LLMAgent", request: LLMRequest, fields: Mapping[str, Any]) -> LLMRequest:
        if self.target != "prompt" or not self._select(agent.name, fields, agent.world.now):
            return request
        messages = list(request.messages)
        i = max((k for k, m in enumerate(messages) if m.role == "user"), default=len(messages) - 1)
        messages[i] = ChatMessage(messages[i].role, self.transform(messages[i].content))
        self._log(agent.world, agent.name, fields, target="prompt")
        return dataclasses.replace(request, messages=tuple(messages))


# -- order operators: drop, swap ------------------------------------------------

@dataclass
class Drop(Operator):
    name: ClassVar[str] = "drop"
    summary: ClassVar[str] = "drop an agent's turn from a speaking order (agent= required)"
    selects: ClassVar[tuple[str, ...]] = ("agent", "phase", "round", "after", "nth")

    def order(self, phase: str, round_index: int, agents: list["LLMAgent"]) -> list["LLMAgent"]:
        who = self.selector.agent
        names = [a.name for a in agents]
        if who not in names or not self._select(who, {"phase": phase, "round": round_index}, agents[0].world.now):
            return agents
        self._log(agents[0].world, who, {"phase": phase, "round": round_index}, order=names)
        return [a for a in agents if a.name != who]


@dataclass
class Swap(Operator):
    name: ClassVar[str] = "swap"
    summary: ClassVar[str] = "swap speakers a= and b= (default: the first two) in a speaking order"
    selects: ClassVar[tuple[str, ...]] = ("phase", "round", "after", "nth")
    option_parsers: ClassVar[dict[str, Any]] = {"a": (_name("a"), None, False), "b": (_name("b"), None, False)}

    def order(self, phase: str, round_index: int, agents: list["LLMAgent"]) -> list["LLMAgent"]:
        names = [a.name for a in agents]
        a, b = self.options.get("a"), self.options.get("b")
        if a is None:
            i, j = 0, 1
        elif a in names and b in names:
            i, j = names.index(a), names.index(b)
        else:
            return agents
        if len(agents) < 2 or not self._select(None, {"phase": phase, "round": round_index}, agents[0].world.now):
            return agents
        self._log(agents[0].world, None, {"phase": phase, "round": round_index}, order=names)
        out = list(agents)
        out[i], out[j] = out[j], out[i]
        return out


# -- call operators: budget, fail, delay ----------------------------------------

@dataclass
class Budget(Operator):
    name: ClassVar[str] = "budget"
    summary: ClassVar[str] = "set an agent's token budget (max_tokens) to tokens=N; default nth=all"
    option_parsers: ClassVar[dict[str, Any]] = {"tokens": (_tokens, None, True)}
    default_nth: ClassVar[int | None] = None

    def request(self, agent: "LLMAgent", request: LLMRequest, fields: Mapping[str, Any]) -> LLMRequest:
        tokens = self.options["tokens"]
        if not self._select(agent.name, fields, agent.world.now):
            return request
        self._log(agent.world, agent.name, fields, max_tokens=[request.max_tokens, tokens])
        return dataclasses.replace(request, max_tokens=tokens)


@dataclass
class Fail(Operator):
    name: ClassVar[str] = "fail"
    summary: ClassVar[str] = "make a call fail (the waiting process gets a PerturbationError)"

    def response(self, call: "LLMCall", response: LLMResponse | BaseException) -> LLMResponse | BaseException:
        world = call.agent.world
        if not isinstance(response, LLMResponse) or not self._select(call.agent.name, call.fields, world.now):
            return response
        self._log(world, call.agent.name, call.fields)
        return PerturbationError(f"call failed by the perturbation ({self.spec()})")


@dataclass
class Delay(Operator):
    name: ClassVar[str] = "delay"
    summary: ClassVar[str] = "deliver a reply by=S simulated seconds later"
    option_parsers: ClassVar[dict[str, Any]] = {"by": (_nonneg_float("by"), None, True)}

    def delay(self, call: "LLMCall", delay: float) -> float:
        world = call.agent.world
        if not self._select(call.agent.name, call.fields, world.now):
            return delay
        self._log(world, call.agent.name, call.fields, delay=[delay, delay + self.options["by"]])
        return delay + self.options["by"]


# -- topology: remove_edge -------------------------------------------------------

@dataclass
class RemoveEdge(Operator):
    """Takes effect before the first message posted at or after ``at``.

    Only posts use the topology, so this is exactly the same as removing the
    edge at time ``at``.
    """

    name: ClassVar[str] = "remove_edge"
    summary: ClassVar[str] = "from simulated time at=T (default 0) on, v= no longer hears u="
    selects: ClassVar[tuple[str, ...]] = ()
    option_parsers: ClassVar[dict[str, Any]] = {
        "u": (_name("u"), None, True),
        "v": (_name("v"), None, True),
        "at": (_nonneg_float("at"), 0.0, False),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        self._done = False

    def message(self, agent: "LLMAgent", text: str, fields: Mapping[str, Any]) -> str:
        world = agent.world
        if not self._done and world.now >= self.options.get("at", 0.0):
            self._done = True
            u, v = self.options["u"], self.options["v"]
            if world.board.remove_edge(u, v, world.by_name):
                self._log(world, None, {}, edge=[u, v])
        return text


@dataclass
class NoOp(Operator):
    name: ClassVar[str] = "none"
    summary: ClassVar[str] = "change nothing (a control pair: it measures the pair machinery itself)"
    selects: ClassVar[tuple[str, ...]] = ()


OPERATORS: dict[str, type[Operator]] = {
    op.name: op for op in (Replace, Truncate, Blank, Inject, Drop, Swap, Budget, RemoveEdge, Fail, Delay, NoOp)
}


# -- the combination ---------------------------------------------------------------

class Perturbation(Intervention):
    """Operators applied together in one run, and where they first acted.

    Attributes:
        operators: The operators, in SPEC order.
        point: Where the perturbation first acted: simulated time ``t``, trace
            index ``event`` and ``calls_before`` (requests created before it), or
            None while nothing has been changed.
    """

    def __init__(self, operators: Sequence[Operator]) -> None:
        self.operators = tuple(operators)
        self.point: dict[str, Any] | None = None
        self._requests = 0
        self._occurrence: dict[str, int] = {}
        self._prefix: set[tuple[str, int]] = set()

    def describe(self) -> str:
        """The canonical SPEC (what run manifests record)."""
        return "+".join(op.spec() for op in self.operators)

    @property
    def applied(self) -> list[dict[str, Any]]:
        """Everything the operators did, in order of simulated time and trace position."""
        out = [e for op in self.operators for e in op.applied]
        return sorted(out, key=lambda e: (e["t"], e["event"]))

    def in_prefix(self, digest: str, occurrence: int) -> bool:
        """Whether the request (digest, occurrence) was created before the perturbation point."""
        return (digest, occurrence) in self._prefix

    def validate(self, world: "World") -> None:
        """Check agent names and edges against a built (unrun) world.

        Raises:
            ConfigError: naming the operator and what is allowed.
        """
        names = list(world.by_name)
        for op in self.operators:
            wanted = [("agent", op.selector.agent)] + [(k, op.options.get(k)) for k in ("a", "b", "u", "v")]
            for key, who in wanted:
                if who is not None and who not in world.by_name:
                    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
                    raise ConfigError(f"{FIELD}: {op.name}: {key}: no agent {who!r}; agents are {shown}")
            if isinstance(op, RemoveEdge):
                u, v = op.options["u"], op.options["v"]
                graph = world.board.graph
                if u == v or (graph is not None and not graph.has_edge(u, v)):
                    raise ConfigError(f"{FIELD}: remove_edge: {v} does not hear {u} in this topology")

    def _count(self) -> int:
        return sum(len(op.applied) for op in self.operators)

    def _acted(self, world: "World", before: int) -> None:
        # The first hook call in which any operator applied is the perturbation point.
        if self.point is None and self._count() > before:
            self.point = {"t": world.now, "event": len(world.trace), "calls_before": self._requests}

    def request(self, agent: "LLMAgent", request: LLMRequest, fields: Mapping[str, Any]) -> LLMRequest:
        before = self._count()
        for op in self.operators:
            request = op.request(agent, request, fields)
        self._acted(agent.world, before)
        digest = request.digest()
        occ = self._occurrence.get(digest, 0)
        self._occurrence[digest] = occ + 1
        if self.point is None:
            self._prefix.add((digest, occ))
        self._requests += 1
        return request

    def response(self, call: "LLMCall", response: LLMResponse | BaseException) -> LLMResponse | BaseException:
        before = self._count()
        for op in self.operators:
            response = op.response(call, response)
        self._acted(call.agent.world, before)
        return response

    def delay(self, call: "LLMCall", delay: float) -> float:
        before = self._count()
        for op in self.operators:
            delay = op.delay(call, delay)
        self._acted(call.agent.world, before)
        return delay

    def order(self, phase: str, round_index: int, agents: list["LLMAgent"]) -> list["LLMAgent"]:
        if not agents:
            return agents
        world, before = agents[0].world, self._count()
        for op in self.operators:
            if agents:
                agents = op.order(phase, round_index, agents)
        self._acted(world, before)
        return agents

    def message(self, agent: "LLMAgent", text: str, fields: Mapping[str, Any]) -> str:
        before = self._count()
        for op in self.operators:
            text = op.message(agent, text, fields)
        self._acted(agent.world, before)
        return text


# -- parsing ---------------------------------------------------------------------

def _split(text: str, sep: str, what: str) -> list[str]:
    """Split on ``sep`` outside quotes."""
    parts, cur, quote = [], [], ""
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if quote:
        raise ConfigError(f"{FIELD}: unterminated {quote} quote in {what!r}")
    parts.append("".join(cur))
    return parts


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    if any(q in value for q in "'\""):
        raise ConfigError(f"{FIELD}: quote a whole value, not part of it: {value!r}")
    return value


def _operator(text: str) -> Operator:
    head, colon, rest = text.strip().partition(":")
    name = head.strip()
    cls = OPERATORS.get(name)
    if cls is None:
        shown = name if name else text.strip()
        raise ConfigError(f"{FIELD}: unknown operator {shown!r}; operators: {', '.join(OPERATORS)}")
    if colon and not rest.strip():
        raise ConfigError(f"{FIELD}: {name}: nothing after ':'; write {name} alone or {name}:KEY=VALUE,...")
    sel: dict[str, Any] = {"nth": cls.default_nth}
    fields: list[tuple[str, str]] = []
    opts: dict[str, Any] = {}
    seen: set[str] = set()
    allowed = [k if k != "field" else "field.NAME" for k in cls.selects] + list(cls.option_parsers)
    for arg in _split(rest, ",", text) if rest.strip() else []:
        key, eq, raw = arg.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"{FIELD}: {name}: {arg.strip()!r} is not KEY=VALUE")
        if key in seen:
            raise ConfigError(f"{FIELD}: {name}: {key} given twice")
        seen.add(key)
        value = _unquote(raw)
        sel_key = "field" if key.startswith("field.") else key
        if sel_key in cls.selects:
            if sel_key == "field":
                fname = key.removeprefix("field.")
                if not fname or fname in ("phase", "round"):
                    raise ConfigError(f"{FIELD}: {name}: {key}: name a field other than phase and round")
                fields.append((fname, value))
            elif key == "after":
                sel["after"] = _nonneg_float("after")(name, value)
            elif key == "nth":
                if value == "all":
                    sel["nth"] = None
                elif value.isdigit():
                    sel["nth"] = int(value)
                else:
                    raise ConfigError(f"{FIELD}: {name}: nth must be an integer >= 0 or 'all', got {value!r}")
            elif not value:
                raise ConfigError(f"{FIELD}: {name}: {key} needs a value")
            else:
                sel[key] = value
        elif key in cls.option_parsers:
            opts[key] = cls.option_parsers[key][0](name, value)
        else:
            raise ConfigError(f"{FIELD}: {name}: unknown key {key!r}; allowed: {', '.join(allowed) or 'none'}")
    for key, (_, _, required) in cls.option_parsers.items():
        if required and key not in opts:
            raise ConfigError(f"{FIELD}: {name}: needs {key}=...")
    if cls is Drop and "agent" not in sel:
        raise ConfigError(f"{FIELD}: drop: needs agent=... (whose turn to drop)")
    if cls is RemoveEdge and opts.get("u") is not None and opts.get("u") == opts.get("v"):
        raise ConfigError(f"{FIELD}: remove_edge: u and v must be two different agents")
    if cls is Swap and ("a" in opts) != ("b" in opts):
        raise ConfigError(f"{FIELD}: swap: give both a= and b=, or neither (the first two speakers)")
    if opts.get("on") == "prompt" and cls is not Inject:
        raise ConfigError(f"{FIELD}: {name}: on=prompt is for inject only")
    selector = Selector(sel.get("agent"), sel.get("phase"), sel.get("round"), tuple(fields),
                        sel.get("after"), sel["nth"])
    return cls(selector, opts)


def parse_perturbation(spec: str) -> Perturbation:
    """Parse a SPEC (see the module docstring) into a fresh :class:`Perturbation`.

    Each call returns new operator objects: a perturbation keeps per-run state
    (match counters, the log), so every run needs its own.

    Raises:
        ConfigError: one line naming what is wrong and what is allowed.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(
            f"{FIELD}: empty; expected OPERATOR[:KEY=VALUE,...] joined with '+'; operators: {', '.join(OPERATORS)}"
        )
    parts = _split(spec.strip(), "+", spec)
    if any(not p.strip() for p in parts):
        raise ConfigError(f"{FIELD}: empty operator between '+' in {spec!r}")
    return Perturbation([_operator(p) for p in parts])


def canonical_spec(spec: str) -> str:
    """The canonical form of a SPEC (validated)."""
    return parse_perturbation(spec).describe()


def operator_help() -> str:
    """The operator table for ``--help``."""
    lines = []
    for name, cls in OPERATORS.items():
        keys = [k if k != "field" else "field.NAME" for k in cls.selects] + list(cls.option_parsers)
        lines.append(f"  {name:<12} {cls.summary}\n  {'':<12} keys: {', '.join(keys) or 'none'}")
    return "\n".join(lines)


def parse_all(specs: Iterable[str]) -> list[str]:
    """Validate SPECs; return their canonical forms (duplicates are an error)."""
    out: list[str] = []
    for spec in specs:
        canon = canonical_spec(spec)
        if canon in out:
            raise ConfigError(f"{FIELD}: {spec!r} is given twice (as {canon!r})")
        out.append(canon)
    if not out:
        raise ConfigError(f"{FIELD}: give at least one --perturb SPEC")
    return out
