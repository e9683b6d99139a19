"""simcore.analysis.stats: intervals and tests chosen from a metric's kind, checked against
reference libraries (statsmodels, scipy) and published examples, and valid at the edges."""

from __future__ import annotations

import gc
import itertools
import math
import random
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import (
    confint_proportions_2indep,
    proportion_confint,
    score_test_proportions_2indep,
)

from simcore.analysis import stats
from simcore.analysis.metric_kinds import continuous, count, proportion, score
from simcore.analysis.stats import (
    BOOTSTRAP_RESAMPLES,
    MAX_EXACT_PAIRS,
    RANDOM_PATTERNS,
    Step,
    bootstrap_mean_ci,
    cohen_d,
    compare_metrics,
    compare_one,
    decide,
    describe,
    error_bar,
    fisher_exact,
    holm,
    holm_steps,
    interval_text,
    level_text,
    mcnemar_exact,
    mcnemar_exact_ci,
    newcombe_paired_ci,
    proportion_ci,
    sign_flip,
    unpaired_proportion_p,
)


def rows(**cols: list) -> list[dict]:
    n = len(next(iter(cols.values())))
    return [{k: v[i] for k, v in cols.items()} for i in range(n)]


def table(u: list[int], v: list[int]) -> tuple[int, int, int, int]:
    pairs = list(zip(u, v))
    return pairs.count((1, 1)), pairs.count((1, 0)), pairs.count((0, 1)), pairs.count((0, 0))


finite = st.floats(-5, 5, allow_nan=False).map(lambda x: round(x, 3))


# -- reference checks -------------------------------------------------------------------

@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=12))
def test_holm_equals_statsmodels(ps):
    # statsmodels' multipletests runs a full gc.collect() on every call (0.1-0.6 s in a worker that
    # holds the suite's objects: a minute for hypothesis's 100 examples); the collection has no
    # part in its result, so it is skipped here, for this call only.
    with mock.patch.object(gc, "collect", lambda *args: 0):
        reference = multipletests(ps, method="holm")[1]
    assert holm(ps) == pytest.approx(list(reference), abs=1e-12)


def test_holm_known_example_and_gaps():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, None, 0.01]) == [pytest.approx(0.5), None, pytest.approx(0.02)]


def test_wilson_equals_statsmodels():
    for n in (1, 2, 3, 5, 10, 37, 200):
        for k in range(n + 1):
            for level in (0.95, 0.99, 1 - 0.05 / 6):
                ref = proportion_confint(k, n, alpha=1 - level, method="wilson")
                assert proportion_ci(k, n, level) == pytest.approx(ref, abs=1e-12), (k, n, level)


def test_wilson_ends_are_exact_for_every_n():
    for n in range(1, 1001):
        assert proportion_ci(n, n)[1] == 1.0 and proportion_ci(0, n)[0] == 0.0, n
        for k in {0, 1, n // 3, n // 2, n - 1, n}:
            lo, hi = proportion_ci(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n)
    assert proportion_ci(0, 0) == (None, None)
    with pytest.raises(ValueError, match="successes"):
        proportion_ci(3, 2)


def barnard_extreme_set(k1: int, n1: int, k2: int, n2: int) -> np.ndarray:
    """The tables scipy's barnard_exact counts as extreme (its pooled statistic, compared without a tolerance)."""
    x1, x2 = np.arange(n1 + 1.0)[:, None], np.arange(n2 + 1.0)[None, :]
    pooled = (x1 + x2) / (n1 + n2)
    with np.errstate(all="ignore"):
        w = (x1 / n1 - x2 / n2) / np.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    w[x1 / n1 == x2 / n2] = 0
    return np.abs(w) >= abs(w[k1, k2])


def test_unpaired_yes_no_test_equals_scipy_barnard_exact():
    # At a difference of 0 the exact unconditional score test is Barnard's (pooled). scipy
    # compares the statistics without a tolerance, so where two tables tie in exact
    # arithmetic (mirror images) rounding can leave one out; compared where both count the same tables.
    from simcore.analysis.stats import _score_z

    compared = 0
    for n1, n2 in ((3, 3), (5, 7), (10, 10), (4, 12)):
        z = _score_z(np.arange(n1 + 1.0)[:, None], n1, np.arange(n2 + 1.0)[None, :], n2, 0.0)
        for k1 in range(n1 + 1):
            for k2 in range(n2 + 1):
                if k1 + k2 in (0, n1 + n2):
                    continue
                ours = np.abs(z) >= abs(z[k1, k2]) - 1e-9 * max(1.0, abs(z[k1, k2]))
                if not (ours == barnard_extreme_set(k1, n1, k2, n2)).all():
                    continue
                ref = sps.barnard_exact([[k1, k2], [n1 - k1, n2 - k2]], pooled=True).pvalue
                assert unpaired_proportion_p(k1, n1, k2, n2) == pytest.approx(ref, rel=1e-6, abs=1e-9), (k1, n1, k2, n2)
                compared += 1
    assert compared > 150


def test_unpaired_yes_no_test_counts_mirror_ties():
    # 5 of 5 against 1 of 7: the table 0 of 5 against 6 of 7 is exactly as extreme (|p1 - p2|
    # = 6/7, pooled 1/2 in both). Counting it, the largest chance over the nuisance is at
    # p = 1/2: (1/32) (8/128) twice, 1/256 (scipy, which rounds it away: 9/4096).
    assert unpaired_proportion_p(5, 5, 1, 7) == pytest.approx(1 / 256, rel=1e-9)
    assert unpaired_proportion_p(3, 3, 0, 3) == pytest.approx(2 / 64, rel=1e-9)  # exact at 3 vs 3, not Fisher's 0.1


def test_the_score_tests_restricted_estimates_maximise_the_likelihood():
    # Miettinen and Nurminen's closed form, checked against a numerical maximum (statsmodels'
    # score test agrees at a difference of 0 only: away from 0 its restricted estimates are
    # not the maximum, e.g. 30/100 against 45/100 at -0.3 it gives p2 = 0.484 where the
    # likelihood peaks at 0.537).
    from scipy.optimize import minimize_scalar

    from simcore.analysis.stats import _restricted, _score_z

    for k1, n1, k2, n2, d in ((30, 100, 45, 100, -0.3), (5, 80, 20, 90, -0.3), (3, 10, 6, 12, 0.2), (0, 7, 7, 9, -0.5)):
        _, p2 = _restricted(np.array(float(k1)), n1, np.array(float(k2)), n2, d)

        def minus_log_likelihood(q2: float) -> float:
            q1 = q2 + d
            return -(k1 * np.log(q1) + (n1 - k1) * np.log1p(-q1) + k2 * np.log(q2) + (n2 - k2) * np.log1p(-q2))

        best = minimize_scalar(minus_log_likelihood, bounds=(max(0, -d) + 1e-12, min(1, 1 - d) - 1e-12),
                               method="bounded", options={"xatol": 1e-12})
        assert float(p2) == pytest.approx(best.x, abs=1e-6), (k1, n1, k2, n2, d)
    for k1, n1, k2, n2 in ((30, 100, 45, 100), (5, 80, 20, 90), (0, 60, 7, 70)):
        ref = score_test_proportions_2indep(k1, n1, k2, n2, compare="diff", correction=True, return_results=True)
        assert float(_score_z(np.array(float(k1)), n1, np.array(float(k2)), n2, 0.0)) == pytest.approx(ref.statistic)
        assert unpaired_proportion_p(k1, n1, k2, n2) == pytest.approx(ref.pvalue)


def test_newcombe_paired_matches_the_published_example():
    # Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables,
    # ch. 8: complete response before and after consolidation therapy (Cavo et al.
    # 2012), 59 / 6 / 16 / 80 pairs: the Newcombe square-and-add interval of the
    # difference -0.0621 is -0.1186 to -0.0046, and the exact McNemar p is 0.052479.
    lo, hi = newcombe_paired_ci(59, 6, 16, 80)
    assert (round(lo, 4), round(hi, 4)) == (-0.1186, -0.0046)
    assert mcnemar_exact(6, 16) == pytest.approx(0.052479, abs=5e-7)


def test_newcombe_paired_without_correlation_is_the_unpaired_interval():
    # With a*d - b*c in [0, n/2] the correlation term is 0, and the paired interval
    # combines the two margins' Wilson intervals as the unpaired one does.
    for both, only_a, only_b, neither in ((3, 1, 1, 1), (0, 3, 0, 0), (5, 2, 2, 1), (3, 2, 2, 2)):
        n = both + only_a + only_b + neither
        margins = (both + only_a, only_b + neither, both + only_b, only_a + neither)
        assert 0 <= both * neither - only_a * only_b <= n / 2 or min(margins) == 0
        ref = confint_proportions_2indep(both + only_a, n, both + only_b, n, method="newcomb")
        assert newcombe_paired_ci(both, only_a, only_b, neither) == pytest.approx(tuple(map(float, ref)), abs=1e-10)


def test_mcnemar_equals_statsmodels_exact():
    for b in range(0, 25):
        for c in range(0, 25, 3):
            ref = mcnemar([[7, b], [c, 4]], exact=True).pvalue
            assert mcnemar_exact(b, c) == pytest.approx(ref, abs=1e-12), (b, c)


def test_fisher_on_the_tea_tasting_example():
    # Fisher's lady tasting tea: 3 of 4 cups right each way, two-sided p = 34/70.
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(34 / 70)
    assert fisher_exact(4, 4, 0, 4) == pytest.approx(2 / 70)


def test_the_unpaired_comparison_of_numbers_is_welchs_test_and_interval_as_scipy_computes_them():
    a, b = [1.0, 2.0, 3.0, 4.0, 2.5], [2.0, 3.0, 4.0, 5.5]
    res = sps.ttest_ind(a, b, equal_var=False)
    row = decide({"m": compare_one(a, b, paired_samples=False)}, family="metrics")["m"]
    assert row["test"] == "Welch t-test"
    assert (row["t_statistic"], row["p_value"]) == pytest.approx((res.statistic, res.pvalue))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(res.confidence_interval(0.95)))


def brute_sign_flip(d: list[float]) -> float:
    """Two-sided p by enumerating every sign pattern: twice the smaller tail."""
    t = sum(d)
    sums = [sum(s * x for s, x in zip(signs, d)) for signs in itertools.product((1, -1), repeat=len(d))]
    upper = sum(s >= t - 1e-12 for s in sums) / len(sums)
    lower = sum(s <= t + 1e-12 for s in sums) / len(sums)
    return min(1.0, 2 * min(upper, lower))


@given(st.lists(finite, min_size=1, max_size=9))
def test_sign_flip_equals_brute_force_enumeration(d):
    assert sign_flip(d).p == pytest.approx(brute_sign_flip(d))


def test_sign_flip_equals_scipy_permutation_test():
    rng = np.random.default_rng(5)
    for n in (3, 6, 10):
        x, y = rng.normal(size=n), rng.normal(size=n) + 0.8
        ref = sps.permutation_test((x, y), lambda a, b, axis: np.mean(a - b, axis=axis), vectorized=True,
                                   permutation_type="samples", n_resamples=10**6)
        assert sign_flip(x - y).p == pytest.approx(ref.pvalue)


def test_sign_flip_on_yes_no_differences_is_exact_mcnemar():
    u = [1, 1, 1, 0, 1, 1, 0, 1, 1, 1]
    v = [0, 0, 1, 0, 0, 1, 1, 0, 0, 0]
    _, only_a, only_b, _ = table(u, v)
    assert sign_flip([x - y for x, y in zip(u, v)]).p == pytest.approx(mcnemar_exact(only_a, only_b))


# -- the edges the issue names ---------------------------------------------------------------

def test_three_identical_yes_no_pairs_are_not_significant():
    # perturbation.context_corrosion, 3 pairs: the answer changed in every perturbed run.
    out = compare_metrics(rows(answer_changed=[1, 1, 1]), rows(answer_changed=[0, 0, 0]), ["answer_changed"],
                          paired_samples=True, seed=0, kinds={"answer_changed": proportion()})["answer_changed"]
    assert out["test"] == "exact McNemar" and out["p_value"] == pytest.approx(0.25)
    assert out["significant"] is False and out["family"] == "Holm across 1 metric"
    assert -1 <= out["ci_low"] <= 0 <= out["ci_high"] <= 1


def test_three_identical_continuous_differences_give_the_exact_smallest_p():
    out = compare_metrics(rows(m=[0.5, 0.7, 0.2]), rows(m=[0.4, 0.6, 0.1]), ["m"], paired_samples=True, seed=0,
                          kinds={"m": score(0, 1)})["m"]
    assert out["test"] == "exact sign-flip" and out["p_value"] == pytest.approx(0.25) and out["significant"] is False
    # Three pairs can reject no shift at 95% (the smallest p is 0.25): no interval, and why.
    assert out["ci_low"] is None and out["ci_high"] is None and out["ci_level"] == 0.95
    assert out["no_interval"] == "3 pairs cannot reach 95% (6 pairs can)"
    assert interval_text(out) == "no interval: 3 pairs cannot reach 95% (6 pairs can)"


def test_equal_or_too_few_pairs_are_not_tested_and_leave_the_family():
    a = rows(echo=[3, 3, 3, 3], one=[1.0, None, None, None], m=[0.9, 0.8, 0.95, 0.7])
    b = rows(echo=[3, 3, 3, 3], one=[0.0, 0.5, None, None], m=[0.1, 0.2, 0.05, 0.3])
    out = compare_metrics(a, b, ["echo", "one", "m"], paired_samples=True, seed=0)
    assert out["echo"]["not_tested"] == "equal in every pair" and out["echo"]["p_adjusted"] is None
    assert out["one"]["not_tested"] == "1 pair with both values" and out["one"]["significant"] is None
    assert out["m"]["family"] == "Holm across 1 metric" and out["m"]["p_adjusted"] == out["m"]["p_value"] == 0.125


def test_constant_unpaired_arms_get_an_exact_test_never_p_0():
    out = compare_metrics(rows(m=[0.5] * 3), rows(m=[0.7] * 3), ["m"], paired_samples=False, seed=0,
                          kinds={"m": score(0, 1)})["m"]
    assert out["test"] == "exact permutation (both arms constant)" and out["p_value"] == pytest.approx(0.1)
    assert out["significant"] is False and out["ci_low"] is None
    assert out["no_interval"] == "3 and 3 trials cannot reach 95% (4 per arm can)"
    equal = compare_metrics(rows(m=[0.5] * 4), rows(m=[0.5] * 4), ["m"], paired_samples=False, seed=0,
                            kinds={"m": score(0, 1)})["m"]
    assert equal["p_value"] == 1.0 and (equal["ci_low"], equal["ci_high"]) == (0.0, 0.0)  # 4 per arm can
    big = compare_metrics(rows(m=[0.5] * 8), rows(m=[0.7] * 8), ["m"], paired_samples=False, seed=0,
                          kinds={"m": score(0, 1)})["m"]
    assert big["p_value"] == pytest.approx(2 / math.comb(16, 8)) and big["significant"] is True
    assert big["ci_low"] == big["ci_high"] == pytest.approx(-0.2)


def test_yes_no_values_get_wilson_and_likert_means_stay_in_range():
    s = describe([1, 1, 0], kind=proportion())  # veil: consensus in 2 of 3 trials
    assert s.interval == "Wilson score" and (s.ci_low, s.ci_high) == proportion_ci(2, 3)
    likert = describe([4.0, 3.67, 3.67], kind=score(1, 4))
    assert likert.interval.startswith("bootstrap") and 1 <= likert.ci_low <= likert.mean <= likert.ci_high <= 4
    assert describe([4.0, 3.67, 3.67]).ci_high > 4  # what the t interval said
    assert describe([True, True, False, None]).interval == "Wilson score"  # undeclared true/false


def test_the_bootstrap_draws_in_blocks_the_resamples_one_draw_gives(monkeypatch):
    """Resampling a block of rows at a time (for speed) gives every interval that one draw of all
    the resamples gives: the generator's stream does not depend on how the draws are cut."""
    rng = np.random.default_rng(3)
    for n in (2, 7, 300, 2250):  # 2250: several blocks of 29 rows
        x = np.sort(rng.normal(size=n).round(3))
        means = x[np.random.default_rng(0).integers(n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)
        lo, hi = np.quantile(means, [(1 - 0.95) / 2, (1 + 0.95) / 2])
        mean = math.fsum(x) / n
        assert bootstrap_mean_ci(x) == (min(mean, lo), max(mean, hi)), n
        if n < 1000:
            with monkeypatch.context() as m:
                m.setattr(stats, "BOOTSTRAP_BLOCK", 3 * n - 1)  # blocks of 2 rows, and one row at the end
                assert bootstrap_mean_ci(x) == (min(mean, lo), max(mean, hi)), n


def test_describe_by_kind():
    x = [0.0, 0.0, 0.0, 0.3]
    t = describe(x)
    assert t.interval == "t" and (t.ci_low, t.ci_high) == pytest.approx(sps.t.interval(0.95, 3, 0.075, sps.sem(x)))
    assert describe(x, bounds=(0.0, 1.0)).ci_low >= 0.0  # bounds: a score, no clipping needed
    assert describe([0, 0, 0, 3], kind=count()).ci_low >= 0
    shares = describe([0.9, 1.0, 1.0, 0.95, 1.0], kind=proportion())
    assert shares.interval.startswith("bootstrap") and 0 <= shares.ci_low <= shares.mean <= shares.ci_high <= 1
    assert shares == describe([1.0, 0.95, 1.0, 1.0, 0.9], kind=proportion())  # order does not matter
    wrong = describe([0.5, 1.5], kind=proportion())
    assert wrong.ci_low is None and "leave the declared range [0, 1]" in wrong.interval
    assert describe([0.5], kind=proportion()).ci_low is None and describe([]).n == 0
    assert describe(["a", "b", None]).kind == "category" and describe(["a", "b", None]).n == 2


@given(st.one_of(st.none(), st.floats(-2, 2)), st.one_of(st.none(), st.floats(-2, 2)),
       st.one_of(st.none(), st.floats(-2, 2)))
def test_error_bars_are_never_negative(centre, lo, hi):
    below, above = error_bar(centre, lo, hi)
    assert below >= 0 and above >= 0


# -- properties ---------------------------------------------------------------------------

KINDS = {"share": proportion(), "likert": score(1, 4), "cosine": score(-1, 1), "n": count(), "x": continuous()}


def values_of(kind_name: str, n: int) -> st.SearchStrategy:
    element = {
        "share": st.sampled_from([0.0, 1.0]) | st.floats(0, 1),
        "yes_no": st.sampled_from([0.0, 1.0]),
        "likert": st.floats(1, 4),
        "cosine": st.floats(-1, 1),
        "n": st.integers(0, 20).map(float),
        "x": st.floats(-100, 100),
    }[kind_name]
    return st.lists(element.map(lambda v: round(v, 3)), min_size=n, max_size=n)


@st.composite
def arms(draw, binary: bool | None = None):
    name = draw(st.sampled_from(["yes_no"] if binary else list(KINDS)))
    kind = proportion() if name == "yes_no" else KINDS[name]
    n = draw(st.integers(2, 20))
    return kind, draw(values_of(name, n)), draw(values_of(name, n))


@settings(deadline=None, max_examples=60)
@given(arms())
def test_every_interval_of_a_bounded_metric_lies_in_its_bounds(case):
    kind, a, b = case
    s = describe(a, kind=kind)
    if kind.bounded and s.ci_low is not None:
        assert kind.low <= s.ci_low <= s.mean <= s.ci_high <= kind.high
    for paired in (True, False):
        row = decide({"m": compare_one(a, b, kind, paired_samples=paired, seed=1)}, family="metrics")["m"]
        if kind.bounded and row["ci_low"] is not None:
            assert -kind.span() <= row["ci_low"] <= row["ci_high"] <= kind.span()


@settings(deadline=None, max_examples=60)
@given(arms())
def test_p_lies_in_0_1_and_never_below_the_exact_smallest(case):
    kind, a, b = case
    for paired in (True, False):
        row = compare_one(a, b, kind, paired_samples=paired, seed=2).row
        if row["p_value"] is not None:
            assert 0 < row["p_value"] <= 1
        if paired and row["test"] in ("exact sign-flip", "exact McNemar"):
            assert row["p_value"] >= 2.0 ** (1 - row["n_pairs"]) - 1e-15


@settings(deadline=None, max_examples=40)
@given(arms(), st.randoms(use_true_random=False))
def test_shuffling_the_trials_changes_nothing(case, rnd):
    kind, a, b = case
    order = list(range(len(a)))
    rnd.shuffle(order)
    for paired in (True, False):
        one = decide({"m": compare_one(a, b, kind, paired_samples=paired, seed=3)}, family="metrics")
        two = decide({"m": compare_one([a[i] for i in order], [b[i] for i in order], kind, paired_samples=paired,
                                       seed=3)}, family="metrics")
        assert one == two
    assert describe(a, kind=kind) == describe([a[i] for i in order], kind=kind)


def agrees(row: dict) -> bool:
    """Significant exactly when the printed interval excludes 0; no interval only where it says why."""
    if row["significant"] is None:
        return row["ci_low"] is None and row["no_interval"] is None
    if row["ci_low"] is None:
        return row["significant"] is False and bool(row["no_interval"]) and interval_text(row).startswith("no interval")
    return row["significant"] == (row["ci_low"] > 0 or row["ci_high"] < 0)


@settings(deadline=None, max_examples=150)
@given(st.lists(arms(), min_size=1, max_size=6), st.booleans())
def test_every_row_is_significant_exactly_when_its_interval_excludes_0(cases, paired):
    # By construction: each row's interval is its test's inversion at the level of the Holm
    # step that decided it, and both use one rule (k * p < alpha) on one p.
    pending = {i: compare_one(a, b, kind, paired_samples=paired, seed=4) for i, (kind, a, b) in enumerate(cases)}
    for row in decide(pending, family="metrics").values():
        assert agrees(row), row


@settings(deadline=None, max_examples=150)
@given(st.lists(st.one_of(st.floats(1e-6, 1.0), st.sampled_from([0.0025, 0.01, 0.0125, 0.025, 0.05, 1.0])),
                min_size=1, max_size=12))
def test_holm_steps_decide_exactly_as_adjusted_p(ps):
    # p-values at Holm's own thresholds (0.05/4 = 0.0125, ...) are where rounding could split them.
    for p, adj, step in zip(ps, holm(ps), holm_steps(ps)):
        assert step.rejects(p) == (adj < 0.05)
        assert 1 <= step.k <= len(ps)


def test_a_family_with_real_effects_draws_each_row_at_its_holm_step():
    # The auction's compare: two rows with p = 0.0039 significant at Holm steps 0.05/9 and
    # 0.05/8; Bonferroni's 0.05/13 interval contained 0 beside "significant".
    d = [0.1, 0.12, 0.08, 0.11, 0.09, 0.1, 0.13, 0.07, 0.1, -0.01]  # one sign pattern short of unanimous
    strong = [0.9, 0.8, 0.7, 0.95, 0.85, 0.75, 0.9, 0.8, 0.7, 0.6]
    a = rows(**{f"s{i}": strong for i in range(4)}, **{f"d{i}": [0.5 + x for x in d] for i in range(2)},
             **{f"n{i}": [0.5] * 5 + [0.6] * 5 for i in range(7)})
    b = rows(**{f"s{i}": [0.0] * 10 for i in range(4)}, **{f"d{i}": [0.5] * 10 for i in range(2)},
             **{f"n{i}": [0.55, 0.45] * 5 for i in range(7)})
    out = compare_metrics(a, b, list(a[0]), paired_samples=True, seed=0, kinds=dict.fromkeys(a[0], score(0, 1)))
    assert out["d0"]["p_value"] == pytest.approx(4 / 1024) and out["d0"]["significant"] is True
    assert {out["d0"]["ci_level"], out["d1"]["ci_level"]} == {1 - 0.05 / 9, 1 - 0.05 / 8}
    assert out["d0"]["ci_low"] > 0 and out["d1"]["ci_low"] > 0
    assert all(agrees(row) for row in out.values())
    assert "each at the level of the Holm step that decided its row" in level_text(list(out.values()))


@settings(deadline=None)
@given(st.lists(st.integers(-30, 30).map(lambda v: v / 10), min_size=2, max_size=10),
       st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_the_sign_flip_interval_inverts_the_test(d, level):
    step = Step(1, 1 - level)
    flip = sign_flip(d)
    ends = flip.interval(step)
    assume(ends is not None)
    lo, hi = ends
    for shift in sorted({*np.linspace(min(d) - 1, max(d) + 1, 41).round(6), lo, hi}):
        rejected = step.rejects(sign_flip([x - shift for x in d]).p)
        assert rejected == (shift < lo - 1e-9 or shift > hi + 1e-9), (shift, lo, hi)


@given(st.integers(0, 15), st.integers(0, 15), st.integers(0, 15), st.integers(0, 15),
       st.sampled_from([0.95, 0.99, 1 - 0.05 / 15]))
def test_paired_yes_no_intervals(both, only_a, only_b, neither, level):
    """The paired comparison of yes/no outcomes: the exact McNemar test, and an interval that
    holds the difference, covers the exact McNemar interval's side of 0 and excludes 0
    exactly where the test rejects."""
    n = both + only_a + only_b + neither
    assume(only_a + only_b > 0 and n >= 2)
    a = [1] * (both + only_a) + [0] * (only_b + neither)
    b = [1] * both + [0] * only_a + [1] * only_b + [0] * neither
    row = decide({"m": compare_one(a, b, proportion(), paired_samples=True)}, family="metrics", alpha=1 - level)["m"]
    assert row["test"] == "exact McNemar" and row["p_value"] == pytest.approx(mcnemar_exact(only_a, only_b))
    lo, hi = row["ci_low"], row["ci_high"]
    assert -1 <= lo <= (only_a - only_b) / n <= hi <= 1
    e_lo, e_hi = mcnemar_exact_ci(both, only_a, only_b, neither, level)
    assert (e_lo > 0 or e_hi < 0) == (mcnemar_exact(only_a, only_b) < 1 - level)
    assert (lo > 0 or hi < 0) == (mcnemar_exact(only_a, only_b) < 1 - level) == (row["significant"] is True)


def test_many_pairs_use_seeded_random_sign_patterns():
    rng = np.random.default_rng(0)
    d = rng.normal(0.3, 1, size=MAX_EXACT_PAIRS + 14)
    one, two = sign_flip(d, seed=7), sign_flip(d, seed=7)
    assert not one.exact and one.patterns == RANDOM_PATTERNS + 1 and one.p == two.p
    assert one.p == pytest.approx(sps.ttest_1samp(d, 0).pvalue, abs=0.02)  # close to the t-test's at n = 30
    assert sign_flip(np.full(40, 0.2)).p == pytest.approx(2 / (RANDOM_PATTERNS + 1))
    shuffled = d.copy()
    random.Random(1).shuffle(shuffled)
    assert sign_flip(shuffled, seed=7).p == one.p


# -- one family, one adjusted p, one decision -------------------------------------------------

def test_every_row_has_one_adjusted_p_and_its_family():
    a = rows(x=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], y=[0.0, 0.1, 0.2, 0.3, 0.2, 0.1], z=[1, 1, 0, 1, 1, 1])
    b = rows(x=[2.0, 3.0, 4.0, 5.5, 6.1, 7.2], y=[0.0, 0.1, 0.2, 0.31, 0.3, 0.0], z=[0, 1, 0, 0, 0, 0])
    out = compare_metrics(a, b, ["x", "y", "z"], paired_samples=True, seed=1, kinds={"z": proportion()})
    ps = [out[k]["p_value"] for k in "xyz"]
    for k, adj, step in zip("xyz", holm(ps), holm_steps(ps)):
        row = out[k]
        assert row["family"] == "Holm across 3 metrics" and row["p_adjusted"] == pytest.approx(adj)
        assert row["significant"] == (adj < 0.05) == step.rejects(row["p_value"])
        assert row["ci_level"] == pytest.approx(1 - 0.05 / step.k)
        assert row["ci_adjustment"] == f"Holm step 0.05/{step.k} of 3 metrics"
        assert not any("holm" in key for key in row), row
        assert row["decided_by"] == ("paired test chosen by each metric's kind (named per row), Holm across 3 "
                                     "metrics, adjusted p < 0.05")
    assert out["z"]["test"] == "exact McNemar" and out["x"]["test"] == "exact sign-flip"


def test_unpaired_comparison_uses_welch_and_the_exact_unconditional_test():
    a = rows(x=[1.0, 2.0, 3.0, 4.0], ok=[1, 1, 1, 0])
    b = rows(x=[2.0, 3.0, 4.0, 5.5], ok=[0, 0, 1, 0])
    out = compare_metrics(a, b, ["x", "ok"], paired_samples=False, seed=1, kinds={"ok": proportion()})
    res = sps.ttest_ind([1, 2, 3, 4], [2, 3, 4, 5.5], equal_var=False)
    assert out["x"]["test"] == "Welch t-test" and out["x"]["p_value"] == pytest.approx(res.pvalue)
    level = out["x"]["ci_level"]  # Holm stops at the first row: both at 1 - 0.05/2
    assert level == 1 - 0.05 / 2 and out["ok"]["ci_level"] == level
    assert (out["x"]["ci_low"], out["x"]["ci_high"]) == pytest.approx(tuple(res.confidence_interval(level)))
    assert out["ok"]["test"] == "exact unconditional (score)"
    ref = sps.barnard_exact([[3, 1], [1, 3]], pooled=True).pvalue  # no ties between tables here
    assert out["ok"]["p_value"] == pytest.approx(ref, rel=1e-6) and out["ok"]["p_value"] < fisher_exact(3, 4, 1, 4)
    assert out["x"]["delta_mean"] == pytest.approx(-1.125) and "n_pairs" not in out["x"]


def test_comparisons_are_seeded_and_paired_needs_equal_lengths():
    a, b = rows(m=[0.1, 0.5, 0.2, 0.9] * 5), rows(m=[0.3, 0.1, 0.0, 0.4] * 5)
    assert compare_metrics(a, b, ["m"], paired_samples=True, seed=9) == compare_metrics(
        a, b, ["m"], paired_samples=True, seed=9)
    with pytest.raises(ValueError):
        compare_metrics(a, b[:3], ["m"], paired_samples=True, seed=9)


def test_trials_without_readable_data_are_left_out_and_counted():
    a = [0.9, None, 0.7, 0.8, 0.6, 0.75]
    b = [0.1, 0.2, 0.3, None, float("nan"), 0.15]
    out = compare_metrics(rows(m=a), rows(m=b), ["m"], paired_samples=True, seed=1)["m"]
    assert (out["n_undefined_a"], out["n_undefined_b"]) == (1, 2)
    assert (out["n_a"], out["n_b"], out["n_pairs"]) == (5, 4, 3)
    assert out["mean_a"] == pytest.approx(sum([0.9, 0.7, 0.8, 0.6, 0.75]) / 5)
    # Only the pairs with both sides defined enter the paired test.
    assert out["p_value"] == pytest.approx(brute_sign_flip([0.9 - 0.1, 0.7 - 0.3, 0.75 - 0.15]))

    from simcore.cli import format_arms

    summary = {"mode": "monte_carlo", "scenario": "s", "n_trials": 6, "failed_trials": [],
               "counterfactual": {"field": "f", "A": True, "B": False},
               "statistical_comparison": {"difference_summary": {"m": out}},
               "run_A_aggregate": {}, "run_B_aggregate": {}}
    text = format_arms(summary)
    assert "(3 trials without readable data left out)" in text and "interval at 95%, not adjusted (one test)" in text


# -- edges found by red-teaming (each failed before its fix) ------------------------------------

def exact_sign_flip(d: list[float]) -> float:
    """Two-sided sign-flip p in exact rational arithmetic (no tolerance at all)."""
    from fractions import Fraction

    fr = [Fraction(x) for x in d]
    t = sum(fr)
    sums = [sum(s * x for s, x in zip(signs, fr)) for signs in itertools.product((1, -1), repeat=len(d))]
    return min(1.0, 2 * min(sum(s >= t for s in sums), sum(s <= t for s in sums)) / len(sums))


@settings(deadline=None, max_examples=60)
@given(st.lists(st.sampled_from([2.0**-20, 2.0**-10, 1.0, 2.0**10]).flatmap(
    lambda m: st.integers(-9, 9).map(lambda k: k * m)), min_size=1, max_size=8))
def test_sign_flip_equals_exact_enumeration_across_magnitudes(d):
    # Binary fractions, so that the exact sums are the intended ones (decimals such as
    # 0.009 - 0.008 - 0.001 leave a residue that the test rightly reads as a tie).
    assert sign_flip(d).p == pytest.approx(exact_sign_flip(d))


def test_sign_flip_reads_differences_below_1e_12_of_the_largest_as_ties():
    # The documented tie rule: floating-point noise beside real differences is no
    # difference (context corrosion's Monte Carlo has -3.6e-15 beside 0.05), and so are
    # genuine differences 12 orders of magnitude below the largest one.
    assert sign_flip([-3.55e-15, 0.02, 0.03, 0.04, 0.05]).p == sign_flip([0.0, 0.02, 0.03, 0.04, 0.05]).p
    assert sign_flip([1e6] + [1e-7] * 9).p == 1.0 and exact_sign_flip([1e6] + [1e-7] * 9) == 2 / 1024


def test_paired_difference_is_the_mean_over_the_pairs_the_test_uses():
    # 10 pairs in which A exceeds B by 0.1, and 4 trials whose A value is undefined. The
    # difference was mean(all A) - mean(all B) = -0.057 next to the paired interval
    # [0.1, 0.1], "significant": an estimate outside its own interval, of the other sign.
    a, b = [0.5, 0.6] * 5 + [None] * 4, [0.4, 0.5] * 5 + [0.95] * 4
    out = compare_metrics(rows(m=a), rows(m=b), ["m"], paired_samples=True, seed=0, kinds={"m": score(0, 1)})["m"]
    assert out["n_pairs"] == 10 and out["significant"] is True
    assert out["delta_mean"] == pytest.approx(0.1) and out["ci_low"] <= out["delta_mean"] <= out["ci_high"]
    assert (out["mean_a"], out["mean_b"]) == pytest.approx((0.55, (4.5 + 3.8) / 14))  # each arm's own mean
    assert out["cohen_d"] == pytest.approx(cohen_d([0.5, 0.6] * 5, [0.4, 0.5] * 5)) and out["cohen_d"] > 0


@settings(deadline=None, max_examples=60)
@given(arms(), st.data())
def test_a_paired_interval_contains_its_difference_with_gaps(case, data):
    kind, a, b = case
    gaps = data.draw(st.lists(st.sampled_from(["a", "b", None]), min_size=len(a), max_size=len(a)))
    a = [None if g == "a" else v for v, g in zip(a, gaps)]
    b = [None if g == "b" else v for v, g in zip(b, gaps)]
    row = decide({"m": compare_one(a, b, kind, paired_samples=True, seed=5)}, family="metrics")["m"]
    if row["ci_low"] is not None:
        assert row["ci_low"] <= row["delta_mean"] <= row["ci_high"], row


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("kind, a, b", [
    (proportion(), [3, 5, 2], [0, 1, 0]),
    (proportion(), [30, 50, 20, 40, 60, 70, 80, 90], [0, 1, 0, 1, 0, 1, 0, 1]),
    (score(1, 4), [5, 6, 7, 8, 9], [1, 2, 3, 4, 4]),
    (count(), [-1, -2, -3, -4], [1, 2, 3, 4]),
])
def test_values_outside_the_declared_range_are_not_tested(kind, a, b, paired):
    # A "proportion" of 3, 5, 2 was tested and given the interval [-1, 1] around a
    # difference of 3; describe() already refused such values.
    out = compare_metrics(rows(m=a), rows(m=b), ["m"], paired_samples=paired, seed=0, kinds={"m": kind})["m"]
    assert out["p_value"] is None and out["significant"] is None and out["ci_low"] is None
    assert out["not_tested"].startswith("values ") and f"leave the declared range {kind.range_text()}" in out["not_tested"]


@pytest.mark.parametrize("paired", [True, False])
def test_infinite_values_are_not_tested(paired):
    # Differences 1, 1, 1, inf were "not significant" with p = 1 (paired) or had no p and
    # no reason (unpaired).
    inf = float("inf")
    out = compare_metrics(rows(m=[1.0, 2.0, 3.0, inf]), rows(m=[0.0, 1.0, 2.0, 3.0]), ["m"], paired_samples=paired,
                          seed=0)["m"]
    assert out["p_value"] is None and out["significant"] is None and out["not_tested"] == "infinite values"
    s = describe([1.0, 2.0, inf])
    assert s.n == 3 and s.ci_low is None and s.ci_high is None and s.interval == "none: infinite values"


def test_holm_leaves_nan_out_like_none():
    # A NaN p sorted anywhere and made every adjusted p 1.0 (0.01 among three became 1.0).
    assert holm([float("nan"), 0.01, 0.02]) == [None, pytest.approx(0.02), pytest.approx(0.02)]
    ref = multipletests([0.01, 0.02], method="holm")[1]
    assert holm([0.01, float("nan"), 0.02]) == [pytest.approx(ref[0]), None, pytest.approx(ref[1])]
    with pytest.raises(ValueError, match="p-values"):
        holm([0.5, 1.5])


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e300])
def test_tiny_and_huge_magnitudes_give_the_figures_of_ordinary_ones(scale):
    # At 1e-300 the squares underflowed: std 0, a t interval of width 0, Welch's p = 0
    # (scipy's too) and Cohen's d a ZeroDivisionError; at 1e300 the mean overflowed.
    import statistics

    x, y = [1.0, 2.0, 3.0, 1.5], [0.0, 1.0, 0.5, 0.25]
    xs, ys = [v * scale for v in x], [v * scale for v in y]
    s = describe(xs)
    assert s.mean == pytest.approx(statistics.mean(x) * scale, rel=1e-12)
    assert s.std == pytest.approx(statistics.stdev(x) * scale, rel=1e-12)
    ref = sps.t.interval(0.95, 3, loc=statistics.mean(x), scale=statistics.stdev(x) / 2)
    assert (s.ci_low, s.ci_high) == pytest.approx((ref[0] * scale, ref[1] * scale), rel=1e-12)
    out = compare_metrics(rows(m=xs), rows(m=ys), ["m"], paired_samples=False, seed=0)["m"]
    res = sps.ttest_ind(x, y, equal_var=False)
    assert out["p_value"] == pytest.approx(res.pvalue, rel=1e-9) and out["cohen_d"] == pytest.approx(cohen_d(x, y))
    lo, hi = res.confidence_interval(0.95)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((lo * scale, hi * scale), rel=1e-9)


def test_paired_pairs_without_a_discordant_one_among_gaps_compare():
    # Found by hypothesis: pairs (None, 0), (0, 0), (0, 0) left no discordant pair, and the exact
    # McNemar test at a shift divided by their count.
    row = decide({"m": compare_one([None, 0.0, 0.0], [0.0, 0.0, 0.0], proportion(), paired_samples=True, seed=5)},
                 family="metrics")["m"]
    assert row["p_value"] == 1.0 and row["significant"] is False
    assert row["ci_low"] is None or row["ci_low"] <= row["delta_mean"] <= row["ci_high"]
