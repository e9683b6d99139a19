"""The LLM-auction config: the seed's defaults, validated.

Every field is a plain scalar, so the batch runner can sweep any of them; the
seed's future extensions are ``token_price`` (0.0001-0.01), ``n_agents`` (5-25)
and ``budget`` (0.10-2.00).
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.llm_auction.vignettes import VIGNETTES
from simcore.api import Config, check_with, make_memory, param, validate_spec

MECHANISMS = ("auction", "free_discussion", "turn_taking")
STYLES = ("assertive", "timid", "calibrated", "neutral")


def _check_styles(value: str) -> str | None:
    names = [s.strip() for s in value.split(",")]
    if not names or any(s not in STYLES for s in names):
        return f"must be a comma-separated list of {', '.join(STYLES)}, got {value!r}"
    return None


@dataclass(frozen=True)
class AuctionConfig(Config):
    """One run: N agents deliberate on a sequence of vignettes under one mechanism."""

    mechanism: str = param("auction", choices=MECHANISMS, help="deliberation mechanism")
    n_agents: int = param(20, lo=5, hi=25, help="panel size")
    n_vignettes: int = param(len(VIGNETTES), lo=1, hi=len(VIGNETTES), help="vignettes, in data order")
    styles: str = param(
        ",".join(STYLES), check=_check_styles,
        help="communication styles, assigned to agents A01.. in turn (round robin)",
    )
    assertive_multiplier: float = param(1.5, lo=0.0, hi=5.0, help="bid multiplier of assertive agents")
    timid_multiplier: float = param(0.5, lo=0.0, hi=5.0, help="bid multiplier of timid agents")
    calibrated_multiplier: float = param(1.0, lo=0.0, hi=5.0, help="bid multiplier of calibrated agents")
    neutral_multiplier: float = param(1.0, lo=0.0, hi=5.0, help="bid multiplier of neutral agents")
    budget: float = param(1.00, lo=0.10, hi=2.00, help="each agent's budget in USD")
    budget_scope: str = param(
        "run", choices=("run", "vignette"), help="the budget lasts the whole run or resets every vignette"
    )
    token_price: float = param(0.001, lo=0.0001, hi=0.01, help="USD per output token of a paid message")
    auction_rule: str = param(
        "first_price", choices=("first_price", "second_price"), help="what the auction winner pays"
    )
    bid_noise_sd: float = param(0.05, lo=0.0, hi=1.0, help="sd of the Gaussian noise added to bids, USD")
    bid_window: float = param(
        120.0, lo=1.0, hi=3600.0,
        help="simulated seconds from auction opening to the bid deadline (longer than the longest "
        "assessment: 400 tokens at 4 a second)",
    )
    reward_correct: float = param(0.50, lo=0.0, hi=10.0, help="USD each agent earns when the group is right")
    no_majority: str = param(
        "plurality", choices=("plurality", "none"),
        help="when no option has a majority: plurality winner (seeded tie-break) or no decision",
    )
    charge_baselines: bool = param(False, help="also charge token costs in the two baselines")
    # Unpaid replies get room to finish (docs/real-models.md); the paid messages' budgets are
    # part of the auction's economics and stay, with their short fields asked for first.
    assessment_tokens: int = param(400, lo=16, hi=4096, help="max tokens of a private assessment")
    proposal_tokens: int = param(100, lo=16, hi=4096, help="max tokens of a proposal")
    critique_tokens: int = param(60, lo=16, hi=4096, help="max tokens of a critique or comment")
    vote_tokens: int = param(120, lo=8, hi=1024, help="max tokens of a ballot")
    speaking_rate: float = param(4.0, lo=0.1, hi=1000.0, help="tokens per simulated second")
    temperature: float = param(0.7, lo=0.0, hi=2.0, help="sampling temperature")
    topology: str = param("complete", check=check_with(validate_spec), help="who hears whom")
    memory: str = param(
        "full", check=check_with(make_memory), help="memory within a vignette: full or recent:K"
    )
    stub_accuracy: float = param(
        0.5, lo=0.0, hi=1.0, help="stub behaviour: chance a private assessment picks the consensus"
    )
    confidence_signal: float = param(
        0.6, lo=0.0, hi=1.0,
        help="stub behaviour: how strongly stated confidence tracks correctness (0 = not at all)",
    )
    persuasion: float = param(
        0.5, lo=0.0, hi=1.0, help="stub behaviour: weight of heard arguments against one's own view"
    )
    primacy: float = param(
        0.1, lo=0.0, hi=0.9, help="stub behaviour: discount per position of each later message heard"
    )

    @property
    def style_cycle(self) -> tuple[str, ...]:
        """The styles, in the order they are dealt to agents."""
        return tuple(s.strip() for s in self.styles.split(","))

    def multiplier(self, style: str) -> float:
        """The bid multiplier of a communication style."""
        return float(getattr(self, f"{style}_multiplier"))

    def style_of(self, index: int) -> str:
        """The style of agent number ``index`` (0-based)."""
        cycle = self.style_cycle
        return cycle[index % len(cycle)]


def agent_names(n: int) -> list[str]:
    """A01, A02, ... (zero-padded so that names sort in order)."""
    return [f"A{i:02d}" for i in range(1, n + 1)]
