"""Statistics shared by scenarios and the batch runner (scipy underneath).

All functions take plain sequences, ignore None and NaN, and return plain floats
(or None when a figure is undefined, e.g. a standard deviation of one value).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

# scipy.stats takes about half a second to import; a replay or a run without
# statistics never needs it, so each function that does imports it (from cache after the first).


def clean(values: Sequence[Any]) -> np.ndarray:
    """Values as a float array without None and NaN."""
    arr = np.array([v for v in values if v is not None], dtype=float)
    return arr[~np.isnan(arr)]


def _f(x: Any) -> float | None:
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics with a t-based 95% confidence interval of the mean."""

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    ci_low: float | None
    ci_high: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe(values: Sequence[Any], level: float = 0.95,
             bounds: tuple[float, float] | None = None) -> Summary:
    """n, mean, sample std (ddof=1), min, max and a t confidence interval of the mean.

    ``bounds``: the range the quantity cannot leave (a normalized distance lies in
    [0, 1]); the interval is clipped to it. Proportions want
    :func:`describe_proportion` instead.
    """
    x = clean(values)
    n = len(x)
    if n == 0:
        return Summary(0, None, None, None, None, None, None)
    mean = float(x.mean())
    if n == 1:
        return Summary(1, mean, None, mean, mean, None, None)
    std = float(x.std(ddof=1))
    from scipy import stats as sps

    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * std / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(bounds[0], lo), min(bounds[1], hi)
    return Summary(n, mean, std, float(x.min()), float(x.max()), lo, hi)


def proportion_ci(successes: int, n: int, level: float = 0.95) -> tuple[float | None, float | None]:
    """Wilson score interval of a proportion, inside [0, 1] and around k/n.

    At k = 0 the lower end is exactly 0 and at k = n the upper end exactly 1 (the
    closed form misses both by a rounding residue, which gave error bars of
    negative length); (None, None) without trials.

    Raises:
        ValueError: unless 0 <= successes <= n.
    """
    if not 0 <= successes <= n:
        raise ValueError(f"proportion_ci: need 0 <= successes <= n; got {successes} of {n}")
    if n == 0:
        return None, None
    from scipy import stats as sps

    z = float(sps.norm.ppf(0.5 + level / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else min(p, max(0.0, centre - half))
    hi = 1.0 if successes == n else max(p, min(1.0, centre + half))
    return lo, hi


def describe_proportion(values: Sequence[Any], level: float = 0.95, *, seed: int = 0,
                        n_resamples: int = 4000) -> Summary:
    """:func:`describe` for values that are proportions (each in [0, 1]), with a
    proportion interval of their mean.

    All values 0 or 1 (booleans included): the Wilson interval of the count.
    Otherwise (shares per trial, say): the percentile bootstrap of the mean, which
    stays inside the values' range; both are clipped to [0, 1] and contain the mean.
    Reproducible: the resampling draws from ``seed``.

    Raises:
        ValueError: for a value outside [0, 1] (not a proportion).
    """
    x = clean(values)
    n = len(x)
    if n == 0:
        return Summary(0, None, None, None, None, None, None)
    if x.min() < 0 or x.max() > 1:
        raise ValueError(f"describe_proportion: values must lie in [0, 1]; got {x.min():g} to {x.max():g}")
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if n > 1 else None
    if np.isin(x, (0.0, 1.0)).all():
        lo, hi = proportion_ci(int(x.sum()), n, level)
    elif n == 1:
        lo = hi = None
    else:
        rng = np.random.default_rng(seed)
        means = x[rng.integers(n, size=(n_resamples, n))].mean(axis=1)
        q_lo, q_hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
        lo, hi = min(mean, max(0.0, float(q_lo))), max(mean, min(1.0, float(q_hi)))
    return Summary(n, mean, std, float(x.min()), float(x.max()), lo, hi)


def error_bar(centre: float | None, lo: float | None, hi: float | None) -> tuple[float, float]:
    """Lengths below and above ``centre`` of an interval's error bar, never negative.

    A missing interval (or centre) draws no bar: (0, 0).
    """
    if centre is None or lo is None or hi is None:
        return 0.0, 0.0
    return max(0.0, centre - lo), max(0.0, hi - centre)


def cohen_d(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's d of a minus b with the pooled standard deviation."""
    x, y = clean(a), clean(b)
    if len(x) < 2 or len(y) < 2:
        return None
    pooled = ((len(x) - 1) * x.var(ddof=1) + (len(y) - 1) * y.var(ddof=1)) / (len(x) + len(y) - 2)
    if pooled == 0:
        return None
    return _f((x.mean() - y.mean()) / math.sqrt(pooled))


def welch(a: Sequence[Any], b: Sequence[Any]) -> dict[str, float | None]:
    """Welch's unequal-variance t-test of a against b: t statistic and two-sided p."""
    x, y = clean(a), clean(b)
    if len(x) < 2 or len(y) < 2:
        return {"t_statistic": None, "p_value": None}
    if x.var(ddof=1) == 0 and y.var(ddof=1) == 0:
        # Both samples constant: no test is defined; the means either match or not.
        return {"t_statistic": None, "p_value": 1.0 if x.mean() == y.mean() else 0.0}
    from scipy import stats as sps

    res = sps.ttest_ind(x, y, equal_var=False)
    return {"t_statistic": _f(res.statistic), "p_value": _f(res.pvalue)}


def paired(a: Sequence[Any], b: Sequence[Any]) -> dict[str, float | None]:
    """Paired t-test of a against b (same length, matched by position)."""
    if len(a) != len(b):
        raise ValueError("paired: both samples need the same length")
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    d = clean([x - y for x, y in pairs])
    if len(d) < 2:
        return {"t_statistic": None, "p_value": None, "n_pairs": len(d)}
    if d.std(ddof=1) == 0:
        return {"t_statistic": None, "p_value": 1.0 if d.mean() == 0 else 0.0, "n_pairs": len(d)}
    from scipy import stats as sps

    res = sps.ttest_1samp(d, 0.0)
    return {"t_statistic": _f(res.statistic), "p_value": _f(res.pvalue), "n_pairs": len(d)}


def bootstrap_mean_diff_ci(
    a: Sequence[Any],
    b: Sequence[Any],
    *,
    paired_samples: bool,
    seed: int,
    n_resamples: int = 2000,
    level: float = 0.95,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of mean(a) - mean(b); resamples pairs when paired.

    Args:
        a: First sample.
        b: Second sample.
        paired_samples: Resample (a_i, b_i) pairs together.
        seed: Seed of the resampling (results are reproducible).
        n_resamples: Bootstrap resamples.
        level: Confidence level.
    """
    rng = np.random.default_rng(seed)
    if paired_samples:
        d = clean([x - y for x, y in zip(a, b) if x is not None and y is not None])
        if len(d) < 2:
            return None, None
        idx = rng.integers(len(d), size=(n_resamples, len(d)))
        means = d[idx].mean(axis=1)
    else:
        x, y = clean(a), clean(b)
        if len(x) < 2 or len(y) < 2:
            return None, None
        means = (x[rng.integers(len(x), size=(n_resamples, len(x)))].mean(axis=1)
                 - y[rng.integers(len(y), size=(n_resamples, len(y)))].mean(axis=1))
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (None stays None), in input order."""
    idx = [i for i, p in enumerate(p_values) if p is not None]
    m = len(idx)
    order = sorted(idx, key=lambda i: p_values[i])  # type: ignore[arg-type, return-value]
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        adj = min(1.0, (m - rank) * float(p_values[i]))  # type: ignore[arg-type]
        running = max(running, adj)
        out[i] = running
    return out


def compare_metrics(
    a_rows: Sequence[Any],
    b_rows: Sequence[Any],
    names: Sequence[str],
    *,
    paired_samples: bool,
    seed: int,
    alpha: float = 0.05,
) -> dict[str, dict[str, Any]]:
    """Compare arm A with arm B on several scalar metrics.

    For each metric: the two means, ``delta_mean`` (A - B), Welch's t-test
    (``t_statistic``, ``p_value``, ``significant_p05``), Cohen's d with the pooled
    SD, a bootstrap 95% CI of the mean difference (``ci95_low``, ``ci95_high``) and
    Holm-adjusted p-values across ``names`` (``p_value_holm``). With paired samples
    (row i of A and row i of B share a trial seed) it adds the paired t-test
    (``paired_t_statistic``, ``paired_p_value``, ``paired_p_value_holm``) and the
    bootstrap resamples pairs.

    **The decision** is one rule, :func:`decision_rule`: the Holm-adjusted p of the
    paired t-test when the arms are paired (the more powerful test), else of Welch's,
    below ``alpha``. ``significant`` holds it and ``decided_by`` says it in words;
    every sentence, flag and plot of a comparison follows it. ``significant_p05``
    is the original experiment's field, computed as it defines it (Welch's raw p
    below 0.05), and is not the decision.

    Args:
        a_rows: Arm A, one mapping of metric name to value per trial.
        b_rows: Arm B, likewise; same length and order when paired.
        names: The metrics to compare (the family for the Holm correction).
        paired_samples: Whether rows are paired by position.
        seed: Seed of the bootstrap.
        alpha: Significance level of the ``significant_*`` flags.
    """
    if paired_samples and len(a_rows) != len(b_rows):
        raise ValueError("compare_metrics: paired arms need the same number of trials")
    out: dict[str, dict[str, Any]] = {}
    with warnings.catch_warnings():
        # scipy warns of precision loss for nearly constant samples; the figures
        # are still reported, and the warning would only clutter the terminal.
        warnings.simplefilter("ignore", RuntimeWarning)
        for name in names:
            out[name] = _compare_one(
                [row.get(name) for row in a_rows], [row.get(name) for row in b_rows],
                paired_samples=paired_samples, seed=seed, alpha=alpha,
            )
    # A metric equal in every pair (one that echoes the config, say) has nothing
    # to test; it must not inflate the Holm family.
    family = [n for n in names if not out[n].get("equal_in_every_pair")]
    for key in ("p_value", "paired_p_value") if paired_samples else ("p_value",):
        adjusted = holm([out[n][key] for n in family])
        for n in names:
            out[n][f"{key}_holm"] = None
        for n, p in zip(family, adjusted):
            out[n][f"{key}_holm"] = p
    rule = decision_rule(paired_samples, len(family), alpha)
    for n in names:
        p = out[n]["paired_p_value_holm" if paired_samples else "p_value_holm"]
        out[n]["significant"] = None if p is None else p < alpha
        out[n]["decided_by"] = rule
    return out


def decision_rule(paired: bool, family: int, alpha: float = 0.05) -> str:
    """The one rule that decides a comparison, in words."""
    test = "paired t-test" if paired else "Welch t-test"
    return f"{test}, Holm-adjusted across {family} compared metric{'' if family == 1 else 's'}, p < {alpha:g}"


def decision_p(entry: Mapping[str, Any]) -> float | None:
    """The p-value the decision rule uses for one compared metric."""
    return entry.get("paired_p_value_holm", entry.get("p_value_holm"))


def _compare_one(
    a: Sequence[Any], b: Sequence[Any], *, paired_samples: bool, seed: int, alpha: float
) -> dict[str, Any]:
    """One metric of :func:`compare_metrics` (before the Holm correction)."""
    x, y = clean(a), clean(b)
    entry: dict[str, Any] = {
        "n_a": len(x),
        "n_b": len(y),
        # Trials where the metric is undefined (no readable data): left out, and counted.
        "n_undefined_a": len(a) - len(x),
        "n_undefined_b": len(b) - len(y),
        "mean_a": _f(x.mean()) if len(x) else None,
        "mean_b": _f(y.mean()) if len(y) else None,
    }
    entry["delta_mean"] = (
        None if entry["mean_a"] is None or entry["mean_b"] is None else entry["mean_a"] - entry["mean_b"]
    )
    same = paired_samples and len(a) == len(b) and all(
        (u is None and v is None) or (u is not None and v is not None and (u == v or u != u and v != v))
        for u, v in zip(a, b)
    )
    if same:
        entry.update(t_statistic=None, p_value=None, equal_in_every_pair=True)
    else:
        entry.update(welch(a, b))
    entry["significant_p05"] = None if entry["p_value"] is None else entry["p_value"] < alpha
    entry["cohen_d"] = cohen_d(a, b)
    if paired_samples:
        test = {"t_statistic": None, "p_value": None} if same else paired(a, b)
        entry["paired_t_statistic"] = test["t_statistic"]
        entry["paired_p_value"] = test["p_value"]
    lo, hi = bootstrap_mean_diff_ci(a, b, paired_samples=paired_samples, seed=seed)
    entry["ci95_low"], entry["ci95_high"] = lo, hi
    return entry
