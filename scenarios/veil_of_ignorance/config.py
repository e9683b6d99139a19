"""The veil-of-ignorance config: the seed's defaults, validated.

Scalar fields are CLI flags and batch-sweep axes (``memory``, ``temperature``,
``max_rounds``, ``decision_rule``, ...). The agent list, the distribution set and
the logging options are nested and come from a YAML file (``--config``); see
``configs/*.yaml`` for the shipped ones. A file may also use the original
experiment's layout (``experiment:``, ``defaults:``, ``global_temperature``,
``memory_strategy``, ...): :func:`from_original_layout` says what each key becomes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from scenarios.veil_of_ignorance.personalities import templates
from scenarios.veil_of_ignorance.principles import CLASSES, DISTRIBUTIONS, Distribution
from simcore.api import (
    ORDER_POLICIES,
    Config,
    ConfigError,
    check_with,
    decision_rule,
    make_memory,
    param,
)

DEFAULT_PERSONALITY = "You are an agent tasked to design a future society."
FEEDBACK_AGENT = "Interviewer"
MODERATOR = "Moderator"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_RESERVED = ("experiment_metadata", FEEDBACK_AGENT, MODERATOR)
# Files a run directory (or what the run browser takes for another kind of entry) already uses:
# the record named after experiment_id must not take their names.
_RUN_FILES = ("manifest", "results", "timings", "summary", "study", "sweep", "comparison", "ledger")


def _check_name(name: str) -> str | None:
    if not _NAME.match(name):
        return f"must start with a letter and hold only letters, digits, '_', '.', '-' (max 64); got {name!r}"
    if name in _RESERVED:
        return f"{name!r} is reserved"
    return None


def _check_label(label: str) -> str | None:
    if not label.strip() or len(label) > 64 or not label.isprintable():
        return f"must be 1 to 64 printable characters, not only spaces; got {label!r}"
    return None


def check_memory(spec: str) -> None:
    """Accept ``full``, ``recent[:K]``, ``summary`` or ``decomposed``."""
    if spec in ("summary", "decomposed"):
        return
    try:
        make_memory(spec)
    except ConfigError:
        raise ConfigError(f"memory: must be full, recent:K, summary or decomposed; got {spec!r}") from None


@dataclass(frozen=True)
class AgentSpec(Config):
    """One deliberating agent; empty fields fall back to the config's defaults."""

    name: str = param("", check=_check_name, help="unique agent name (required)")
    personality: str = param("", help="personality text (system prompt); empty: the template's, else "
                             "default_personality")
    model: str = param("", help="LLM model; empty: default_model, then --model")
    temperature: float | None = param(None, lo=0.0, hi=2.0, help="sampling temperature; empty: temperature")
    personality_template: str = param("", help="name of a personality template (see personalities.yaml and "
                                      "personality_templates), instead of personality")

    def check(self) -> None:
        if self.personality and self.personality_template:
            raise ConfigError("personality_template: give personality or personality_template, not both")


@dataclass(frozen=True)
class LoggingOptions(Config):
    """What the agent-centric JSON (``experiment.json``) holds; the trace is always complete.

    The original experiment's ``include_processing_times`` is accepted for ``include_times``.
    """

    enabled: bool = param(True, help="write experiment.json")
    capture_raw_inputs: bool = param(False, help="store every prompt (system and user) sent")
    capture_raw_outputs: bool = param(True, help="store every raw model reply")
    capture_memory_context: bool = param(True, help="store the memory each turn's prompt held (memory_in_prompt)")
    capture_memory_steps: bool = param(True, help="store each step of decomposed memory")
    include_times: bool = param(True, help="store simulated ask/reply times")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], base: Config | None = None) -> Config:
        if isinstance(data, Mapping) and "include_processing_times" in data:
            data = dict(data)
            value = data.pop("include_processing_times")
            data.setdefault("include_times", value)
        return super().from_mapping(data, base)


DEFAULT_AGENTS = (
    AgentSpec("Agent_1", "You are an economist focused on efficiency and optimal resource allocation."),
    AgentSpec(
        "Agent_2", "You are a philosopher concerned with justice and fairness for all members of society."
    ),
    AgentSpec("Agent_3", "You are a pragmatist who focuses on what works in practice rather than theory."),
)


@dataclass(frozen=True)
class VeilConfig(Config):
    """One deliberation behind the veil of ignorance.

    The first ``n_agents`` entries of ``agents`` take part; missing agents are
    ``Agent_<i>`` with the default personality and model.
    """

    experiment_id: str = param(
        "default", check=_check_label, help="label stored in experiment.json; the record is also written as "
        "<experiment_id>.json"
    )
    n_agents: int = param(3, lo=2, hi=50, help="number of deliberating agents")
    agents: tuple[AgentSpec, ...] = param(DEFAULT_AGENTS, help="named agents (YAML list)")
    default_personality: str = param(DEFAULT_PERSONALITY, help="personality of unlisted agents")
    personality_templates: str = param(
        "", help="YAML file of your own personality templates (name: text), beside the shipped ones"
    )
    default_model: str = param("", help="model of agents that name none; empty: --model")
    feedback_model: str = param("", help="model of the interviewer; empty: default_model")
    temperature: float = param(0.7, lo=0.0, hi=2.0, help="sampling temperature of agents that set none")
    max_output_tokens: int = param(
        800, lo=32, hi=8192, help="completion budget per call (at 400, small real models cut a third of ratings)"
    )
    max_rounds: int = param(5, lo=1, hi=100, help="most deliberation rounds")
    timeout_s: float = param(
        3600.0, lo=1.0, help="simulated seconds of deliberation after which no new round starts"
    )
    decision_rule: str = param(
        "unanimity", check=check_with(decision_rule), help="unanimity, majority, plurality or threshold:Q"
    )
    memory: str = param(
        "full", check=check_with(check_memory), help="full, recent:K, summary or decomposed (LLM-written)"
    )
    speaking_order: str = param("random", choices=ORDER_POLICIES, help="order of turns within a round")
    announce_choices: bool = param(True, help="after a round without agreement, post every agent's choice")
    classes: tuple[str, ...] = param(CLASSES, help="income class names, highest first")
    class_weights: tuple[float, ...] = param((), help="probability of each class; empty: equal")
    distributions: tuple[Distribution, ...] = param(DISTRIBUTIONS, help="the distribution set")
    logging: LoggingOptions = param(LoggingOptions(), help="contents of experiment.json")
    persuasion: float = param(
        0.15, lo=0.0, hi=5.0, help="stub behaviour: pull of others' positions, per round of exposure"
    )
    preference_noise: float = param(
        0.3, lo=0.0, hi=5.0, help="stub behaviour: spread of agents' latent preferences"
    )
    choice_noise: float = param(
        0.5, lo=0.0, hi=5.0, help="stub behaviour: choice randomness, times the temperature"
    )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], base: Config | None = None) -> Config:
        """Build from field values, in this config's layout or the original experiment's."""
        return super().from_mapping(from_original_layout(data) if isinstance(data, Mapping) else data, base)

    def check(self) -> None:
        stem = record_name(self.experiment_id).removesuffix(".json")
        if stem.lower() in _RUN_FILES:
            raise ConfigError(f"experiment_id: {self.experiment_id!r} would name the record {stem}.json, a file "
                              "name the run directory uses for its own; choose another")
        known = templates(self.personality_templates)
        for i, a in enumerate(self.agents):
            if a.personality_template and a.personality_template not in known:
                raise ConfigError(f"agents[{i}].personality_template: no template {a.personality_template!r}; "
                                  f"templates: {', '.join(sorted(known))}")
        names = [a.name for a in self.agents]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"agents: names must be unique; {dup[0]!r} appears more than once")
        if not self.distributions:
            raise ConfigError("distributions: must list at least one distribution")
        for i, d in enumerate(self.distributions):
            if len(d.incomes) != len(self.classes):
                raise ConfigError(
                    f"distributions[{i}].incomes: must give one income per class ({len(self.classes)}); "
                    f"got {len(d.incomes)}"
                )
        if self.class_weights and (
            len(self.class_weights) != len(self.classes)
            or any(type(w) not in (int, float) or w < 0 for w in self.class_weights)
            or sum(self.class_weights) <= 0
        ):
            raise ConfigError(
                f"class_weights: must be empty or {len(self.classes)} non-negative numbers with a positive "
                f"sum; got {list(self.class_weights)!r}"
            )

    def named_models(self) -> dict[str, str]:
        """The calls whose model the config names (who -> model); ``--model`` reaches only the others."""
        named = {a.name: a.model for a in self.roster() if a.model}
        if self.feedback_model or self.default_model:
            named["interviewer"] = self.feedback_model or self.default_model
        return named

    def roster(self) -> tuple[AgentSpec, ...]:
        """The deliberating agents, with every default filled in (templates as their text)."""
        listed = list(self.agents[: self.n_agents])
        taken = {a.name for a in listed}
        i = 1
        while len(listed) < self.n_agents:
            name = f"Agent_{i}"
            if name not in taken:
                listed.append(AgentSpec(name))
                taken.add(name)
            i += 1
        known = templates(self.personality_templates) if any(a.personality_template for a in listed) else {}
        return tuple(
            AgentSpec(
                a.name,
                a.personality or known.get(a.personality_template) or self.default_personality,
                a.model or self.default_model,
                self.temperature if a.temperature is None else a.temperature,
            )
            for a in listed
        )


def record_name(experiment_id: str) -> str:
    """The file the run's agent-centric record is also written to: ``<experiment_id>.json``,
    with characters a file name cannot hold (``/``, control characters, ...) as ``_``."""
    stem = re.sub(r"[^\w .-]", "_", experiment_id).strip().lstrip(".")
    return f"{stem or 'experiment'}.json"


# -- the original experiment's YAML layout -------------------------------------------

ORIGINAL_LAYOUT = ("experiment", "defaults", "global_temperature", "memory_strategy", "output", "performance")
_SECTIONS = {
    "experiment": {"max_rounds": "max_rounds", "decision_rule": "decision_rule", "timeout_seconds": None},
    "defaults": {"personality": "default_personality", "model": "default_model", "temperature": "temperature"},
}
#: The original memory strategies; its "recent" kept the last three memory entries.
ORIGINAL_MEMORY = {"full": "full", "recent": "recent:3", "decomposed": "decomposed"}


def from_original_layout(data: Mapping[str, Any]) -> dict[str, Any]:
    """Field values from a mapping in either layout (this config's is returned as is).

    The original experiment's keys become:

    - ``experiment.max_rounds``, ``experiment.decision_rule``: the fields of the
      same name; ``experiment.timeout_seconds`` (its wall-clock guard on a round's
      API calls) is accepted and not used: backends have their own timeouts, and
      ``timeout_s`` limits simulated time;
    - ``defaults.personality``, ``defaults.model``, ``defaults.temperature``:
      ``default_personality``, ``default_model``, ``temperature``;
    - ``global_temperature``: every agent's temperature (it overrides theirs and
      ``defaults.temperature``, as in the original);
    - ``memory_strategy`` (full, recent, decomposed): ``memory`` (recent is
      ``recent:3``, the original's three entries);
    - ``agents``: as here; an entry without a name is ``Agent_<i>`` (its position
      from 1), and ``n_agents`` is the list's length;
    - ``logging``: as here (``capture_memory_context``, and
      ``include_processing_times`` for ``include_times``);
    - ``output`` and ``performance`` (export formats, directories, debugging):
      accepted and not used; a run writes its run directory.

    A field given in this config's own name (a command-line flag, say) wins over
    its original spelling.

    Raises:
        ConfigError: for a key or value of the original layout that has no meaning here.
    """
    if not any(k in data for k in ORIGINAL_LAYOUT):
        return dict(data)
    out = {k: v for k, v in data.items() if k not in ORIGINAL_LAYOUT}
    found: dict[str, Any] = {}
    for section, names in _SECTIONS.items():
        values = data.get(section)
        if values is None:
            continue
        if not isinstance(values, Mapping):
            raise ConfigError(f"{section}: must be a mapping of {', '.join(names)}; got {values!r}")
        for key, value in values.items():
            if key not in names:
                raise ConfigError(f"{section}.{key}: unknown field; fields are: {', '.join(names)}")
            if names[key] is not None:
                found[names[key]] = value
    strategy = data.get("memory_strategy")
    if strategy is not None:
        if strategy not in ORIGINAL_MEMORY:
            raise ConfigError(f"memory_strategy: must be one of {', '.join(ORIGINAL_MEMORY)}; got {strategy!r}")
        found["memory"] = ORIGINAL_MEMORY[strategy]
    agents = out.get("agents")
    if isinstance(agents, (list, tuple)):
        agents = [dict(a or {}) if isinstance(a, Mapping) or a is None else a for a in agents]
        for i, a in enumerate(agents, 1):
            if isinstance(a, dict) and not a.get("name"):
                a["name"] = f"Agent_{i}"
        out["agents"] = agents
        found["n_agents"] = len(agents)
    if data.get("global_temperature") is not None:
        found["temperature"] = data["global_temperature"]
        if isinstance(agents, list):
            out["agents"] = [{**a, "temperature": None} if isinstance(a, dict) else a for a in agents]
    for section in ("output", "performance"):
        if section in data and not isinstance(data[section], (Mapping, type(None))):
            raise ConfigError(f"{section}: must be a mapping; got {data[section]!r}")
    for name, value in found.items():
        out.setdefault(name, value)
    return out
