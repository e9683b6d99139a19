"""simcore.stats.compare_metrics: the arm comparison shared by scenarios."""

from __future__ import annotations

import pytest
from scipy import stats as sps

from simcore.stats import compare_metrics, holm


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
    assert out["x"]["significant_holm"] == (out["x"]["p_value_holm"] < 0.05)


def test_paired_comparison_uses_the_pairs():
    # B = A + 1 exactly plus a tiny wobble: Welch sees nothing, the paired test sees it all
    a = [0.0, 5.0, 10.0, 15.0, 20.0]
    b = [x + 1 + w for x, w in zip(a, [0.01, -0.01, 0.02, 0.0, -0.02])]
    out = compare_metrics(rows(m=a), rows(m=b), ["m"], paired_samples=True, seed=3)["m"]
    assert out["p_value"] > 0.5
    assert out["paired_p_value"] == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert out["paired_p_value"] < 1e-6 and out["significant_holm"] is True
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
