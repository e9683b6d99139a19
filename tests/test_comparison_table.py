"""One comparison table: a Monte Carlo, a sweep's comparisons and ``llm_auction compare`` print a
compared metric's row the same way, through :func:`simcore.analysis.comparison_table.comparison_lines`."""

from __future__ import annotations

from scenarios.llm_auction.compare import report as auction_report
from scenarios.llm_auction.kinds import COMPARED
from simcore.analysis.comparison_table import ComparisonRow, comparison_lines
from simcore.batch.report import format_summary as sweep_summary
from simcore.cli import format_arms

ENTRY = {
    "delta_mean": 0.1234, "ci_low": 0.01, "ci_high": 0.2, "ci_level": 0.95, "test": "exact sign-flip",
    "p_value": 0.004, "p_adjusted": 0.012, "significant": True, "decided_by": "the one rule", "n_undefined_a": 1,
    "calibration": {"confounded": True, "reason": "it echoes the treatment"},
}
# The row from the difference on, white space folded: the same in every command.
ROW = ("+0.123 [+0.010, +0.200] exact sign-flip 0.004 0.012 significant "
       "(1 trials without readable data left out; CONFOUNDED UNDER THE NULL)")


def folded(text: str, metric: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.split()[:1] == [metric]]


def monte_carlo() -> str:
    return format_arms({
        "mode": "monte_carlo", "scenario": "s", "n_trials": 10, "failed_trials": [],
        "counterfactual": {"field": "f", "A": True, "B": False},
        "statistical_comparison": {"difference_summary": {"correctness": ENTRY}},
        "run_A_aggregate": {"correctness": {"mean": 0.5}}, "run_B_aggregate": {"correctness": {"mean": 0.4}},
    })


def sweep() -> str:
    summary = {"sweep_id": "x", "scenario": "s", "n_planned": 20, "n_ok": 20, "n_error": 0, "n_skipped": 0,
               "n_pending": 0, "tokens": 0, "cost_usd": 0.0, "groups": [],
               "comparisons": [{"cell": 0, "params": {}, "a": "A", "b": "B", "n_pairs": 10, "method": "generic",
                                "result": {"correctness": ENTRY}}]}
    return sweep_summary(None, summary)  # type: ignore[arg-type]  (no groups: the plan is not read)


def auction() -> str:
    pair = {"a": "auction", "b": "turn_taking", "n_pairs": 10, **{key: ENTRY for key in COMPARED}}
    return auction_report({"mechanisms": {}, "pairs": [pair]})


def test_every_command_prints_a_compared_metric_the_same_way():
    for text in (monte_carlo(), sweep(), auction()):
        [row] = [r for r in folded(text, "correctness")]
        assert row.endswith(ROW), row
        assert "decided by: the one rule" in text
        assert "CONFOUNDED UNDER THE NULL: correctness: it echoes the treatment" in text
    assert folded(monte_carlo(), "correctness")[0].startswith("correctness 0.500 0.400 +0.123")
    assert folded(auction(), "correctness")[0].startswith("correctness auction - turn_taking (10) +0.123")


def test_a_single_pair_has_a_difference_and_no_decision():
    [title, head, row] = comparison_lines("one pair", [ComparisonRow("m", {"delta_mean": -0.5})], arms=("A", "B"))
    assert title == "one pair" and head.split()[:2] == ["metric", "A"]
    assert " ".join(row.split()) == "m -0.500 n/a - - -"
