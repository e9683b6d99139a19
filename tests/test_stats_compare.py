"""simcore.stats.compare_metrics: the arm comparison shared by scenarios."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from simcore.stats import (
    compare_metrics,
    describe,
    describe_proportion,
    error_bar,
    holm,
    proportion_ci,
)


def rows(**cols: list[float]) -> list[dict[str, float]]:
    n = len(next(iter(cols.values())))
    return [{k: v[i] for k, v in cols.items()} for i in range(n)]


def test_holm_known_example():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, None, 0.01]) == [pytest.approx(0.5), None, pytest.approx(0.02)]


def test_unpaired_comparison_has_welch_and_holm_but_no_paired_test():
    a = rows(x=[1.0, 2.0, 3.0, 4.0], y=[0.0, 0.1, 0.2, 0.3])
    b = rows(x=[2.0, 3.0, 4.0, 5.5], y=[0.0, 0.1, 0.2, 0.31])
    out = compare_metrics(a, b, ["x", "y"], paired_samples=False, seed=1)
    res = sps.ttest_ind([1, 2, 3, 4], [2, 3, 4, 5.5], equal_var=False)
    assert out["x"]["p_value"] == pytest.approx(res.pvalue)
    assert out["x"]["delta_mean"] == pytest.approx(-1.125)
    assert "paired_p_value" not in out["x"]
    assert out["x"]["p_value_holm"] == pytest.approx(holm([out["x"]["p_value"], out["y"]["p_value"]])[0])
    assert out["x"]["significant"] == (out["x"]["p_value_holm"] < 0.05)


def test_paired_comparison_uses_the_pairs():
    # B = A + 1 exactly plus a tiny wobble: Welch sees nothing, the paired test sees it all
    a = [0.0, 5.0, 10.0, 15.0, 20.0]
    b = [x + 1 + w for x, w in zip(a, [0.01, -0.01, 0.02, 0.0, -0.02])]
    out = compare_metrics(rows(m=a), rows(m=b), ["m"], paired_samples=True, seed=3)["m"]
    assert out["p_value"] > 0.5
    assert out["paired_p_value"] == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert out["paired_p_value"] < 1e-6 and out["significant"] is True
    assert out["ci95_low"] < -0.98 and out["ci95_high"] > -1.02 and out["ci95_high"] < -0.98 + 0.05


def test_bootstrap_is_seeded_and_paired_needs_equal_lengths():
    a, b = rows(m=[0.1, 0.5, 0.2, 0.9]), rows(m=[0.3, 0.1, 0.0, 0.4])
    one = compare_metrics(a, b, ["m"], paired_samples=True, seed=9)
    two = compare_metrics(a, b, ["m"], paired_samples=True, seed=9)
    assert one == two
    with pytest.raises(ValueError):
        compare_metrics(a, b[:3], ["m"], paired_samples=True, seed=9)


def test_missing_values_are_ignored():
    a = rows(m=[1.0, None, 3.0])
    b = rows(m=[1.0, 2.0, None])
    out = compare_metrics(a, b, ["m"], paired_samples=False, seed=0)["m"]
    assert out["n_a"] == 2 and out["n_b"] == 2 and out["delta_mean"] == pytest.approx(0.5)


# -- proportion intervals --------------------------------------------------------------
def test_wilson_ends_are_exact_for_every_n():
    for n in range(1, 1001):
        assert proportion_ci(n, n)[1] == 1.0 and proportion_ci(0, n)[0] == 0.0, n
        for k in {0, 1, n // 3, n // 2, n - 1, n}:
            lo, hi = proportion_ci(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n)
    assert proportion_ci(0, 0) == (None, None)
    with pytest.raises(ValueError, match="successes"):
        proportion_ci(3, 2)


def test_wilson_matches_the_closed_form_away_from_the_ends():
    # 7 of 20 at 95%: centre (p + z^2/2n) / (1 + z^2/n), half width as usual
    z = sps.norm.ppf(0.975)
    p, n = 0.35, 20
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    assert proportion_ci(7, 20) == pytest.approx((centre - half, centre + half), abs=1e-12)


def test_describe_proportion():
    # 0/1 values: the Wilson interval of the count
    s = describe_proportion([True, True, False, True, None])
    assert (s.n, s.mean) == (4, 0.75) and (s.ci_low, s.ci_high) == proportion_ci(3, 4)
    assert describe_proportion([1.0] * 4).ci_high == 1.0
    # shares per trial: a bootstrap interval inside [0, 1] around the mean, reproducible
    shares = [0.9, 1.0, 1.0, 0.95, 1.0]
    s = describe_proportion(shares)
    assert 0.0 <= s.ci_low <= s.mean <= s.ci_high <= 1.0 and s == describe_proportion(shares)
    t = describe(shares)
    assert t.ci_high > 1.0  # what the t interval said
    assert describe_proportion([0.5]).ci_low is None and describe_proportion([]).n == 0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        describe_proportion([0.5, 1.5])


def test_describe_clips_to_bounds():
    x = [0.0, 0.0, 0.0, 0.3]
    assert describe(x).ci_low < 0 and describe(x, bounds=(0.0, 1.0)).ci_low == 0.0


@given(st.one_of(st.none(), st.floats(-2, 2)), st.one_of(st.none(), st.floats(-2, 2)),
       st.one_of(st.none(), st.floats(-2, 2)))
def test_error_bars_are_never_negative(centre, lo, hi):
    below, above = error_bar(centre, lo, hi)
    assert below >= 0 and above >= 0


def test_trials_without_readable_data_are_left_out_and_counted():
    a = [0.9, None, 0.7, 0.8, 0.6, 0.75]
    b = [0.1, 0.2, 0.3, None, float("nan"), 0.15]
    out = compare_metrics(rows(m=a), rows(m=b), ["m"], paired_samples=True, seed=1)["m"]
    assert (out["n_undefined_a"], out["n_undefined_b"]) == (1, 2)
    assert (out["n_a"], out["n_b"]) == (5, 4)
    assert out["mean_a"] == pytest.approx(sum([0.9, 0.7, 0.8, 0.6, 0.75]) / 5)
    assert out["mean_b"] == pytest.approx(0.75 / 4)
    # Only the pairs with both sides defined enter the paired test.
    kept = [(0.9, 0.1), (0.7, 0.3), (0.75, 0.15)]
    expected = sps.ttest_1samp([x - y for x, y in kept], 0.0).pvalue
    assert out["paired_p_value"] == pytest.approx(expected)

    from simcore.cli import format_arms

    summary = {"mode": "monte_carlo", "scenario": "s", "n_trials": 6, "failed_trials": [],
               "counterfactual": {"field": "f", "A": True, "B": False},
               "statistical_comparison": {"difference_summary": {"m": out}},
               "run_A_aggregate": {}, "run_B_aggregate": {}}
    assert "(3 trials without readable data left out)" in format_arms(summary)
