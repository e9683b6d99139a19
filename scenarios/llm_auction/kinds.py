"""The metrics of an LLM-auction run: every metric's kind (``Scenario.kinds``) and how people read it
(``Scenario.metrics``), and those compared between arms."""

from simcore.api import Metric, continuous, count, proportion, score

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
#: How people read each metric (``Scenario.metrics``); the key ones head every page about a run.
#: Money is the game's: budgets, bids, token prices and rewards in USD (the config's), not API cost.
METRICS = {
    "correctness": Metric("correct", "Share of vignettes the group decided for the consensus option.",
                          percent=True, key=True),
    "spend_per_vignette": Metric(
        "spend per vignette", "What one vignette's talk cost at the token price, charged or not: paid-message "
        "tokens x token price + the auction payment. Comparable across mechanisms.", unit="USD", key=True),
    "cost_per_vignette": Metric(
        "charged per vignette", "What the agents were charged per vignette, deducted from their reward: the "
        "winning bid and paid-message tokens x token price. Only the auction charges unless charge_baselines "
        "is set, so the two baselines' is $0 where their spend is not.", unit="USD", key=True),
    "mean_reward": Metric("mean reward", "Reward per agent and vignette: the reward for a right decision minus "
                          "what the agent was charged.", unit="USD", key=True),
    "participation": Metric("participation", "Share of agent-vignettes with a proposal or a critique.",
                            percent=True, key=True),
    "correctness_ci_low": Metric("correct, CI low", "Lower end of the Wilson 95% interval of correct."),
    "correctness_ci_high": Metric("correct, CI high", "Upper end of the Wilson 95% interval of correct."),
    "n_correct": Metric("correct vignettes", "Vignettes decided for the consensus option."),
    "n_vignettes": Metric("vignettes", "Vignettes played."),
    "n_agents": Metric("agents", "Agents in the group."),
    "majority_rate": Metric("majority reached", "Share of vignettes decided by a majority of the ballots.",
                            percent=True),
    "no_decision_rate": Metric("no decision", "Share of vignettes with no decision.", percent=True),
    "private_accuracy": Metric("private accuracy", "Share of readable private assessments that named the "
                               "consensus option, before any talk.", percent=True),
    "vote_accuracy": Metric("vote accuracy", "Share of readable ballots cast for the consensus option.",
                            percent=True),
    "proposer_accuracy": Metric("proposer right", "Auction: share of vignettes whose proposer proposed the "
                                "consensus option.", percent=True),
    "late_bid_rate": Metric("late bids", "Auction: share of bids that missed the bid window.", percent=True),
    "mean_price": Metric("mean price", "Auction: the mean price the winner paid for the proposer role.",
                         unit="USD"),
    "total_cost": Metric("total charged", "Everything the agents were charged over the run.", unit="USD"),
    "total_reward": Metric("total reward", "The agents' rewards summed over the run.", unit="USD"),
    "message_tokens_per_vignette": Metric("message tokens per vignette", "Output tokens of paid messages per "
                                          "vignette.", unit="tokens"),
    "proposals_per_vignette": Metric("proposals per vignette", "Proposals made per vignette."),
    "critiques_per_vignette": Metric("critiques per vignette", "Critiques made per vignette."),
    "participation_*": Metric("participation by style", "Participation of the agents of one communication "
                              "style (the last part of its name).", percent=True),
    "vote_accuracy_*": Metric("vote accuracy by style", "Vote accuracy of the agents of one communication style.",
                              percent=True),
    "mean_reward_*": Metric("mean reward by style", "Mean reward of the agents of one communication style.",
                            unit="USD"),
    "proposer_share_*": Metric("proposer share by style", "Auction: share of vignettes whose proposer had "
                               "that communication style.", percent=True),
    "parse_errors": Metric("unreadable replies", "Replies that stayed unreadable after any re-ask."),
    "sim_time_end": Metric("simulated time", "Simulated time at the end of the run.", unit="s"),
}
