"""The acausal-cooperation config: the seed's defaults, validated.

A YAML file may also use the original experiment's keys (its ``configs/*.yaml``:
``experiment_name``, ``num_agents``, ``num_rounds``, ``strategy_model``,
``decision_model``, ``temperature``); :func:`from_original_layout` says what each
becomes. The three configs it shipped are here too, by name: ``--config baseline``,
``high_temp``, ``low_temp``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from scenarios.acausal_cooperation.scripted import Script, parse_scripted
from simcore.api import Config, ConfigError, check_with, param


def _model_name(value: str) -> str | None:
    return None if value.strip() == value else "must have no leading or trailing spaces"


# The original experiment's models, as a preset the user selects (``--model-preset original``).
MODEL_PRESETS = {"original": ("google/gemini-2.5-flash", "openai/gpt-4.1-nano")}
#: How decision subagents are asked: simcore's prompt (payoffs, powers, JSON) or the original's plain text.
DECISION_PROMPTS = ("structured", "original")


def _label(value: str) -> str | None:
    if len(value) > 64 or not value.isprintable():
        return f"must be at most 64 printable characters; got {value!r}"
    return None


@dataclass(frozen=True)
class AcausalConfig(Config):
    """A prisoner's dilemma tournament: LLM players (a strategist and a decider each),
    optionally mixed with scripted players, over several rounds.

    Players are numbered 0..N-1: the LLM players first, then the scripted ones in
    the order given.
    """

    experiment_name: str = param(
        "", check=_label, help="label of the experiment (the original's configs name theirs); shown in "
        "the report and the comparison"
    )
    n_agents: int = param(10, lo=0, hi=50, help="LLM players (each a strategy agent plus its decision subagent)")
    rounds: int = param(10, lo=1, hi=200, help="rounds; each round every pair plays one game")
    scripted: str = param(
        "", check=check_with(parse_scripted),
        help="scripted players, comma-separated: always_cooperate, always_defect, tit_for_tat, "
        "grudger, win_stay_lose_shift, random[:P]",
    )
    identity_insight: bool = param(
        True, help="treatment: tell strategy agents they are identical copies (off = control)"
    )
    power_scaling: bool = param(True, help="scale payoffs by 1 + ln(power/100); off = classic payoffs")
    power_step: float = param(0.01, lo=0.0, hi=0.5, help="winner's power rises, loser's falls by this share")
    game_order: str = param("fixed", choices=("fixed", "random"), help="round-robin order within a round")
    history_window: int = param(
        10, lo=0, hi=10000, help="games of the current round shown (anonymized) to deciders"
    )
    strategy_model: str = param(
        "", check=_model_name, help="model of the strategy agents ('' = the preset's, else --model)"
    )
    decision_model: str = param(
        "", check=_model_name, help="model of the decision subagents ('' = the preset's, else --model)"
    )
    model_preset: str = param(
        "", choices=("", *MODEL_PRESETS),
        help="original: the original experiment's models (strategy google/gemini-2.5-flash, decision "
        "openai/gpt-4.1-nano) for the roles whose model is not given; '' = --model for every agent",
    )
    strategy_temperature: float = param(0.7, lo=0.0, hi=2.0, help="strategy agents' temperature")
    decision_temperature: float = param(0.3, lo=0.0, hi=2.0, help="decision subagents' temperature")
    # Chat models write before they answer: at the original 500 and 50, small real models cut
    # a third of strategies and every decision without JSON mode (docs/real-models.md).
    strategy_tokens: int = param(800, lo=16, hi=8192, help="strategy agents' max_output_tokens")
    decision_tokens: int = param(200, lo=4, hi=8192, help="decision subagents' max_output_tokens")
    decision_prompt: str = param(
        "structured", choices=DECISION_PROMPTS,
        help="structured: payoffs, powers and a JSON reply; original: the original experiment's plain "
        "text (strategy, game history, opponent, 'Decision (COOPERATE/DEFECT):')",
    )
    on_unparsed: str = param(
        "defect", choices=("defect", "cooperate"), help="move played when a decision cannot be parsed"
    )
    embeddings: bool = param(True, help="compute strategy similarity with MiniLM embeddings (slower start)")
    insight_uplift: float = param(
        0.4, lo=0.0, hi=1.0, help="stub behaviour: cooperativeness added when the insight is taken up"
    )
    insight_uptake: float = param(
        0.85, lo=0.0, hi=1.0, help="stub behaviour: chance a strategy agent reasons about identity"
    )
    reciprocity: float = param(
        0.5, lo=0.0, hi=1.0, help="stub behaviour: pull toward last round's cooperation rate"
    )
    asymmetry_defection: float = param(
        0.2, lo=0.0, hi=1.0, help="stub behaviour: extra defection chance when powers differ by >30%"
    )
    decision_noise: float = param(0.02, lo=0.0, hi=0.5, help="stub behaviour: chance a decision flips")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], base: Config | None = None) -> Config:
        """Build from field values, in this config's layout or the original experiment's."""
        return super().from_mapping(from_original_layout(data) if isinstance(data, Mapping) else data, base)

    def check(self) -> None:
        if self.n_agents + len(self.scripts) < 2:
            raise ConfigError(
                f"n_agents: LLM plus scripted players must be at least 2, got "
                f"{self.n_agents} + {len(self.scripts)}"
            )

    @property
    def role_models(self) -> tuple[str | None, str | None]:
        """(strategy, decision) model: the role's own, else the preset's, else None (--model)."""
        preset = MODEL_PRESETS.get(self.model_preset, ("", ""))
        return self.strategy_model or preset[0] or None, self.decision_model or preset[1] or None

    @property
    def scripts(self) -> tuple[Script, ...]:
        """The scripted players, parsed."""
        return parse_scripted(self.scripted)

    @property
    def n_players(self) -> int:
        """LLM plus scripted players."""
        return self.n_agents + len(self.scripts)


# -- the original experiment's YAML layout -------------------------------------------

#: The original experiment's config keys that have another name here.
ORIGINAL_KEYS = {"num_agents": "n_agents", "num_rounds": "rounds", "temperature": "strategy_temperature"}


def from_original_layout(data: Mapping[str, Any]) -> dict[str, Any]:
    """Field values from a mapping in either layout (this config's is returned as is).

    The original experiment's keys become: ``num_agents`` ``n_agents``,
    ``num_rounds`` ``rounds``, ``temperature`` ``strategy_temperature`` (its
    baseline's 0.7 is the temperature of its strategy requests; its decision
    requests keep their own 0.3, ``decision_temperature``); ``experiment_name``,
    ``strategy_model`` and ``decision_model`` keep their names. A field given in
    this config's own name (a command-line flag, say) wins over its original spelling.
    """
    if not any(k in data for k in ORIGINAL_KEYS):
        return dict(data)
    out = {k: v for k, v in data.items() if k not in ORIGINAL_KEYS}
    for key, name in ORIGINAL_KEYS.items():
        if key in data:
            out.setdefault(name, data[key])
    return out
