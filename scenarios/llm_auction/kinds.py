"""The metrics of an LLM-auction run: every metric's kind (``Scenario.kinds``), and those compared between arms."""

from simcore.api import continuous, count, proportion, score

#: The metrics compared between two arms (``Scenario.compare``) and between mechanisms (:mod:`.compare`).
COMPARED = ("correctness", "mean_reward", "spend_per_vignette", "cost_per_vignette", "participation")
#: Every metric's kind and bounds (``Scenario.kinds``); rates are shares of yes/no outcomes.
KINDS = {
    **dict.fromkeys((
        "correctness", "majority_rate", "no_decision_rate",
        "private_accuracy", "vote_accuracy", "proposer_accuracy", "participation", "late_bid_rate",
        "participation_*", "vote_accuracy_*", "proposer_share_*",
    ), proportion()),
    "correctness_ci_low": score(0, 1), "correctness_ci_high": score(0, 1),
    **dict.fromkeys(("n_vignettes", "n_agents", "n_correct", "parse_errors"), count()),
    **dict.fromkeys((
        "total_cost", "cost_per_vignette", "spend_per_vignette", "message_tokens_per_vignette",
        "proposals_per_vignette", "critiques_per_vignette", "mean_price", "sim_time_end",
    ), continuous(0)),
    # A reward is net of the agent's costs, so it can be negative.
    **dict.fromkeys(("total_reward", "mean_reward", "mean_reward_*"), continuous()),
}
