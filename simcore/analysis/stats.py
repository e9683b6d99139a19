"""Statistics shared by scenarios, Monte Carlos, sweeps and calibration (scipy underneath).

Every interval and test is chosen here, from the metric's kind
(:mod:`simcore.analysis.metric_kinds`), by two functions: :func:`describe` (one group) and
:func:`compare_metrics` (two arms). The rule, in one table, is docs/statistics.md:

| kind, data | one group | test (paired / unpaired) | interval of the difference (paired / unpaired) |
| --- | --- | --- | --- |
| proportion, all values 0 or 1 | Wilson | exact McNemar / exact unconditional score test | Newcombe paired with exact McNemar / its inversion |
| other, a bound | bootstrap percentile | sign-flip / Welch | sign-flip inversion / Welch t, inside the bounds |
| other, no bound | t | sign-flip / Welch | sign-flip inversion / Welch t |

A comparison is one family: its p-values are Holm-adjusted across it, the adjusted p
decides, and each row's interval is drawn at the level of the Holm step that decided
it (:class:`Step`), from the test's own inversion, so that the interval excludes 0
exactly when the row is significant. Where the design cannot reach that level (too
few pairs for the exact test) a row has no interval, and says why. p is never 0.

All functions take plain sequences, ignore None and NaN, and return plain floats
(or None when a figure is undefined, e.g. a standard deviation of one value).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from simcore.analysis.metric_kinds import Kind, inferred, kind_of, score
from simcore.analysis.resolution import figure, scale_of

# scipy.stats takes about half a second to import; a replay or a run without
# statistics never needs it, so each function that does imports it (from cache after the first).

LEVEL = 0.95
ALPHA = 0.05
#: Up to this many pairs the sign-flip test enumerates all 2^n sign patterns.
MAX_EXACT_PAIRS = 16
#: Above it, this many random patterns (seeded) besides the observed one.
RANDOM_PATTERNS = 2**16 - 1
BOOTSTRAP_RESAMPLES = 4000
#: About this many values are resampled at a time (the bootstrap's arrays then stay in the CPU's cache).
BOOTSTRAP_BLOCK = 2**16


def clean(values: Sequence[Any]) -> np.ndarray:
    """Values as a float array without None and NaN."""
    arr = np.array([v for v in values if v is not None], dtype=float)
    return arr[~np.isnan(arr)]


def _f(x: Any) -> float | None:
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _constant(x: np.ndarray) -> bool:
    # Exactly, not by variance: the variance of [0.7, 0.7, 0.7] is 1e-32, not 0, and a
    # t statistic on it is 1e15 (p = 1e-31) where no test can say anything.
    return len(x) > 0 and bool((x == x[0]).all())


def _unit(*arrays: np.ndarray) -> float:
    """The unit to compute in: 1 for ordinary magnitudes (up to 2^300 and down to 2^-300),
    else a power of two near the largest one, so that squares of 1e-300 do not underflow
    to 0 (a standard deviation of 0, Welch's p = 0) nor sums of 1e308 overflow.

    Dividing by a power of two is exact, so the figures are those of the scaled values.
    """
    top = max((float(np.abs(x).max()) for x in arrays if len(x)), default=0.0)
    if not 0.0 < top < math.inf or 2.0**-300 <= top <= 2.0**300:
        return 1.0
    return 2.0 ** math.frexp(top)[1]


def _mean(x: np.ndarray) -> float:
    """The mean, correctly rounded (so the same for any order of the values)."""
    if _constant(x):
        return float(x[0])
    s = _unit(x)
    return math.fsum(x / s) / len(x) * s


def _std(x: np.ndarray) -> float | None:
    """The sample standard deviation (ddof=1); exactly 0 for constant values."""
    if len(x) < 2:
        return None
    s = _unit(x)
    return 0.0 if _constant(x) else float(np.sort(x / s).std(ddof=1)) * s


# -- one group -----------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """Descriptive statistics with a 95% confidence interval of the mean.

    ``kind`` names the metric's kind, ``bounds`` its declared [low, high] (either None
    where it has no bound; the scale at which figures are shown,
    :mod:`simcore.analysis.resolution`) and ``interval`` the method of the interval (or
    why there is none).
    """

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    ci_low: float | None
    ci_high: float | None
    kind: str = "continuous"
    interval: str | None = None
    bounds: tuple[float | None, float | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["bounds"] = None if self.bounds is None else list(self.bounds)
        return out


def describe(values: Sequence[Any], level: float = LEVEL,
             bounds: tuple[float, float] | None = None, kind: Kind | None = None) -> Summary:
    """n, mean, sample std (ddof=1), min, max and a confidence interval of the mean,
    chosen from the metric's kind:

    - a proportion whose values are all 0 or 1 (true/false): the Wilson interval of the count;
    - any other kind with a bound (a share, a Likert mean, a count, a time): the
      percentile bootstrap of the mean (4,000 resamples, seeded, so reproducible),
      which cannot leave the values' range and so not the bounds either;
    - an unbounded continuous value: the t interval.

    Args:
        values: One value per trial (None and NaN are left out).
        level: Confidence level.
        bounds: Shorthand for ``kind=score(*bounds)``.
        kind: The metric's kind; None: inferred from the values (true/false values
            are a proportion, anything else continuous).
    """
    if kind is None:
        kind = score(*bounds) if bounds is not None else inferred(values)
    return replace(_describe(values, level, kind), bounds=None if kind.name == "category" else (kind.low, kind.high))


def _describe(values: Sequence[Any], level: float, kind: Kind) -> Summary:
    if kind.name == "category":
        n = sum(not _missing(v) for v in values)
        return Summary(n, None, None, None, None, None, None, kind.name, "none: a category has no mean")
    x = clean(values)
    n = len(x)
    if n == 0:
        return Summary(0, None, None, None, None, None, None, kind.name, None)
    if not np.isfinite(x).all():
        # No mean, spread or interval of them (their sums are inf or NaN).
        return Summary(n, None, None, _f(x.min()), _f(x.max()), None, None, kind.name, "none: infinite values")
    mean, lo_x, hi_x, std = _mean(x), float(x.min()), float(x.max()), _std(x)
    outside = (kind.low is not None and lo_x < kind.low) or (kind.high is not None and hi_x > kind.high)
    if outside:
        why = f"none: values {lo_x:g} to {hi_x:g} leave the declared range {kind.range_text()}"
        return Summary(n, mean, std, lo_x, hi_x, None, None, kind.name, why)
    if kind.name == "proportion" and _binary(x):
        lo, hi = proportion_ci(int(x.sum()), n, level)
        return Summary(n, mean, std, lo_x, hi_x, lo, hi, kind.name, "Wilson score")
    if n == 1:
        return Summary(1, mean, None, mean, mean, None, None, kind.name, "none: one value")
    if kind.low is not None or kind.high is not None:
        lo, hi = bootstrap_mean_ci(x, level)
        return Summary(n, mean, std, lo_x, hi_x, lo, hi, kind.name,
                       f"bootstrap percentile ({BOOTSTRAP_RESAMPLES:,} resamples)")
    lo, hi = t_ci(x, level)
    return Summary(n, mean, std, lo_x, hi_x, lo, hi, kind.name, "t")


def _binary(x: np.ndarray) -> bool:
    return bool(np.isin(x, (0.0, 1.0)).all())


def t_ci(x: np.ndarray, level: float = LEVEL) -> tuple[float | None, float | None]:
    """The t interval of a mean (None, None for fewer than 2 values)."""
    n = len(x)
    if n < 2:
        return None, None
    from scipy import stats as sps

    mean = _mean(x)
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * _std(x) / math.sqrt(n)  # type: ignore[operator]
    return mean - half, mean + half


def bootstrap_mean_ci(x: np.ndarray, level: float = LEVEL, seed: int = 0,
                      n_resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean: inside [min x, max x], around the mean.

    The values are sorted first, so the interval does not depend on their order.
    """
    x = np.sort(np.asarray(x, dtype=float))
    rng = np.random.default_rng(seed)
    # NOTE: resampled a block of rows at a time rather than all at once, for performance. numpy
    # draws each index from the generator's one stream whatever the size of the call, so every
    # resample and its mean are the same either way (tests/test_stats.py checks it).
    rows = max(1, BOOTSTRAP_BLOCK // max(len(x), 1))
    means = np.concatenate([x[rng.integers(len(x), size=(min(rows, n_resamples - i), len(x)))].mean(axis=1)
                            for i in range(0, n_resamples, rows)])
    q_lo, q_hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    mean = _mean(x)
    # A percentile interval of a skewed tiny sample can miss the mean by a hair; the
    # reported interval always contains its estimate (and so stays inside the range).
    return min(mean, float(q_lo)), max(mean, float(q_hi))


@lru_cache(maxsize=16)
def _normal_quantile(p: float) -> float:
    """The standard normal distribution's quantile (kept: every Wilson interval needs it)."""
    from scipy import stats as sps

    return float(sps.norm.ppf(p))


def proportion_ci(successes: int, n: int, level: float = LEVEL) -> tuple[float | None, float | None]:
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
    z = _normal_quantile(0.5 + level / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else min(p, max(0.0, centre - half))
    hi = 1.0 if successes == n else max(p, min(1.0, centre + half))
    return lo, hi


def error_bar(centre: float | None, lo: float | None, hi: float | None) -> tuple[float, float]:
    """Lengths below and above ``centre`` of an interval's error bar, never negative.

    A missing interval (or centre) draws no bar: (0, 0).
    """
    if centre is None or lo is None or hi is None:
        return 0.0, 0.0
    return max(0.0, centre - lo), max(0.0, hi - centre)


def cohen_d(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's d of a minus b with the pooled standard deviation."""
    x, y = np.sort(clean(a)), np.sort(clean(b))
    if len(x) < 2 or len(y) < 2 or (_constant(x) and _constant(y)):
        return None
    s = _unit(x, y)  # d has no unit: computed in one where the squares neither underflow nor overflow
    x, y = x / s, y / s
    pooled = ((len(x) - 1) * _std(x) ** 2 + (len(y) - 1) * _std(y) ** 2) / (len(x) + len(y) - 2)  # type: ignore[operator]
    return _f((_mean(x) - _mean(y)) / math.sqrt(pooled))


# -- the level a row is decided at ---------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """The level at which one row of a family is decided and its interval drawn.

    Holm's procedure tests a family's m rows in order of their p-values, the r-th (from 0)
    at alpha / (m - r), and stops at the first it cannot reject. ``k`` is the divisor of
    the step that decided the row: m - r for a rejected row, and for every row Holm does
    not reject, that of the step where it stopped. A row is significant exactly when
    ``k * p < alpha`` (:meth:`rejects`, the product Holm's adjusted p is made of), and its
    interval holds the differences that the same rule does not reject: the interval
    excludes 0 exactly when the row is significant.

    Attributes:
        k: The step's divisor (1 for a family of one).
        alpha: The significance level.
    """

    k: int
    alpha: float = ALPHA

    def rejects(self, p: float) -> bool:
        """Whether a p-value is rejected at this step."""
        return self.k * p < self.alpha

    @property
    def level(self) -> float:
        """The confidence level of the row's interval, 1 - alpha/k."""
        return 1 - self.alpha / self.k


@dataclass(frozen=True)
class Bounds:
    """A row's interval of the difference (``low``, ``high``), or why there is none (``missing``)."""

    method: str
    low: float | None = None
    high: float | None = None
    missing: str | None = None


def percent(level: float) -> str:
    """A confidence level in words: ``99.17%``."""
    return f"{100 * level:.4g}%"


def _boundary(p_at: Callable[[float], float], step: Step, accepted: float, rejected: float,
              tol: float = 0.0) -> float:
    """Bisection between a shift the test does not reject and one it rejects; returns the
    last shift not rejected (so an interval's end never reaches a rejected shift)."""
    while True:
        mid = accepted + (rejected - accepted) / 2
        if mid in (accepted, rejected) or abs(rejected - accepted) <= tol:
            return accepted
        if step.rejects(p_at(mid)):
            rejected = mid
        else:
            accepted = mid


def _placed(lo: float, hi: float, estimate: float, p_at: Callable[[float], float],
            step: Step) -> tuple[float, float]:
    """A closed-form inversion's ends, on the side of 0 that the test's own p at 0 (the
    row's p) puts them: they can differ only by rounding, at a p within rounding of the
    level, and then the end toward 0 is found by bisection with the decision's own rule."""
    if not step.rejects(p_at(0.0)):
        return min(lo, 0.0), max(hi, 0.0)
    if lo <= 0.0 <= hi:
        if estimate > 0:
            lo = _boundary(p_at, step, estimate, 0.0)
        else:
            hi = _boundary(p_at, step, estimate, 0.0)
    return lo, hi


def _inverted(p_at: Callable[[float], float], estimate: float, low: float, high: float, step: Step,
              tol: float) -> tuple[float, float]:
    """The shifts in [low, high] that the test does not reject, each end found by bisection
    from ``estimate`` (which the test never rejects); where 0 lies between, the row's own
    p at 0 decides on which side of it the end lies."""

    def end(outer: float) -> float:
        inner = estimate
        if min(inner, outer) < 0.0 < max(inner, outer):
            if step.rejects(p_at(0.0)):
                outer = 0.0
            else:
                inner = 0.0
        if outer == inner or not step.rejects(p_at(outer)):
            return outer
        return _boundary(p_at, step, inner, outer, tol)

    return end(low), end(high)


# -- paired yes/no outcomes: exact McNemar ----------------------------------------------------

def newcombe_paired_ci(both: int, only_a: int, only_b: int, neither: int,
                       level: float = LEVEL) -> tuple[float, float]:
    """Newcombe's score interval of p_a - p_b for paired yes/no outcomes, inside [-1, 1].

    ``both``, ``only_a``, ``only_b``, ``neither`` count the pairs (a yes and b yes, a
    yes and b no, ...). The Wilson intervals of the two margins are combined with
    their estimated correlation, corrected towards 0 as in Newcombe (1998, method 10).
    """
    n = both + only_a + only_b + neither
    k1, k2 = both + only_a, both + only_b
    p1, p2 = k1 / n, k2 / n
    l1, u1 = proportion_ci(k1, n, level)
    l2, u2 = proportion_ci(k2, n, level)
    margins = (k1, n - k1, k2, n - k2)
    phi = 0.0
    if min(margins) > 0:
        a = both * neither - only_a * only_b
        root = math.sqrt(float(np.prod(np.array(margins, dtype=float))))
        if a > n / 2:
            phi = (a - n / 2) / root
        elif a < 0:
            phi = a / root
    d = p1 - p2
    e1, f2 = p1 - l1, u2 - p2  # type: ignore[operator]
    e2, f1 = p2 - l2, u1 - p1  # type: ignore[operator]
    lo = d - math.sqrt(max(0.0, e1 * e1 - 2 * phi * e1 * f2 + f2 * f2))
    hi = d + math.sqrt(max(0.0, e2 * e2 - 2 * phi * e2 * f1 + f1 * f1))
    return max(-1.0, lo), min(1.0, hi)


def mcnemar_exact_ci(both: int, only_a: int, only_b: int, neither: int,
                     level: float = LEVEL) -> tuple[float, float]:
    """The interval of p_a - p_b that inverts the exact McNemar test, inside [-1, 1].

    Conditional on the m discordant pairs: the Clopper-Pearson interval of the share
    of them that favour a, mapped to a difference at the observed discordance m/n. It
    excludes 0 exactly when :func:`mcnemar_exact` gives p < 1 - level; it ignores the
    uncertainty of the discordance itself, so a paired comparison (:func:`compare_one`) widens
    it to its hull with :func:`newcombe_paired_ci`.
    """
    from scipy import stats as sps

    n, m = both + only_a + only_b + neither, only_a + only_b
    if m == 0:
        return 0.0, 0.0
    tail = (1 - level) / 2
    lo = float(sps.beta.ppf(tail, only_a, only_b + 1)) if only_a else 0.0
    hi = float(sps.beta.ppf(1 - tail, only_a + 1, only_b)) if only_b else 1.0
    return m / n * (2 * lo - 1), m / n * (2 * hi - 1)


def _binomial_p(k: int, m: int, theta: float) -> float:
    """Two-sided p of k successes in m at success probability theta: twice the smaller tail."""
    from scipy import stats as sps

    return min(1.0, 2.0 * min(float(sps.binom.sf(k - 1, m, theta)), float(sps.binom.cdf(k, m, theta))))


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Exact McNemar test: two-sided binomial p of the discordant pairs (1 without any)."""
    m = only_a + only_b
    return 1.0 if m == 0 else _binomial_p(only_a, m, 0.5)


def _mcnemar_at(both: int, only_a: int, only_b: int, neither: int) -> Callable[[float], float]:
    """The exact McNemar p of the shift d0 of p_a - p_b (at the observed discordance); at 0, :func:`mcnemar_exact`."""
    n, m = both + only_a + only_b + neither, only_a + only_b

    def p_at(d0: float) -> float:
        if m == 0:  # no discordant pair: 0 of 0 is as likely at any shift
            return 1.0
        return _binomial_p(only_a, m, min(1.0, max(0.0, (1 + d0 * n / m) / 2)))

    return p_at


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Fisher's exact test of k1/n1 against k2/n2 (two-sided)."""
    from scipy import stats as sps

    return min(1.0, float(sps.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue))


# -- unpaired yes/no outcomes: the score test, exact unconditional where it is cheap ------------

#: Unpaired yes/no arms with at most this many possible tables ((n1 + 1)(n2 + 1), 50
#: trials per arm) are tested exactly (unconditionally); larger ones by the score test's
#: normal approximation, which is close there.
MAX_EXACT_TABLES = 51 * 51
_NUISANCE_GRID = 101


def _restricted(x1: np.ndarray, n1: int, x2: np.ndarray, n2: int, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """The maximum-likelihood p1, p2 under p1 - p2 = delta (Miettinen and Nurminen 1985),
    for every table (x1 of n1, x2 of n2) at once."""
    p1h, p2h = x1 / n1, x2 / n2
    if delta == 0.0:
        pooled = (x1 + x2) / (n1 + n2)
        return pooled, pooled
    theta = n2 / n1
    a = 1 + theta
    b = -(1 + theta + p1h + theta * p2h + delta * (theta + 2))
    c = delta * delta + delta * (2 * p1h + theta + 1) + p1h + theta * p2h
    d = -p1h * delta * (1 + delta)
    v = b**3 / (27 * a**3) - b * c / (6 * a * a) + d / (2 * a)
    u = np.sign(v) * np.sqrt(np.maximum(b * b / (9 * a * a) - c / (3 * a), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(u == 0, 0.0, v / u**3)
    w = (math.pi + np.arccos(np.clip(ratio, -1.0, 1.0))) / 3
    p1 = np.clip(2 * u * np.cos(w) - b / (3 * a), max(0.0, delta), min(1.0, 1 + delta))
    return p1, np.clip(p1 - delta, 0.0, 1.0)


def _score_z(x1: np.ndarray, n1: int, x2: np.ndarray, n2: int, delta: float) -> np.ndarray:
    """The score statistic of H0: p1 - p2 = delta, with Miettinen and Nurminen's variance."""
    p1, p2 = _restricted(x1, n1, x2, n2, delta)
    var = (p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2) * (n1 + n2) / (n1 + n2 - 1)
    num = x1 / n1 - x2 / n2 - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, num / np.sqrt(var), np.where(num == 0, 0.0, np.sign(num) * np.inf))
    return np.where(np.abs(num) <= 1e-15, 0.0, z)


def unpaired_proportion_p(k1: int, n1: int, k2: int, n2: int, delta: float = 0.0) -> float:
    """Two-sided p of H0: p1 - p2 = delta for independent yes/no samples (k1 of n1, k2 of n2).

    The score statistic orders the tables (Miettinen and Nurminen's, the one Barnard's
    test pools at delta = 0). Up to :data:`MAX_EXACT_TABLES` tables the p is exact and
    unconditional: the largest, over the nuisance p2, chance of a table at least as extreme
    (Chan and Zhang 1999; at delta = 0 it is Barnard's exact test). Beyond, the score test's
    normal p (Miettinen and Nurminen).
    """
    from scipy import stats as sps

    if abs(delta) >= 1.0:  # one possible pair of proportions: the table is certain or impossible
        return 1.0 if (k1, k2) == ((n1, 0) if delta > 0 else (0, n2)) else 0.0
    if (n1 + 1) * (n2 + 1) > MAX_EXACT_TABLES:
        z = float(_score_z(np.array(float(k1)), n1, np.array(float(k2)), n2, delta))
        return min(1.0, 2.0 * float(sps.norm.sf(abs(z))))
    from scipy.special import gammaln, xlog1py, xlogy

    x1, x2 = np.arange(n1 + 1, dtype=float), np.arange(n2 + 1, dtype=float)
    z = _score_z(x1[:, None], n1, x2[None, :], n2, delta)
    z_obs = abs(float(z[k1, k2]))
    # Tables whose statistic equals the observed one in exact arithmetic (mirror images)
    # can differ from it by rounding: within 1e-9 they count as ties, so as extreme.
    # (scipy's barnard_exact compares without a tolerance and so misses some ties.)
    extreme = (np.abs(z) >= z_obs - 1e-9 * max(1.0, z_obs)).astype(float)
    log_c1 = gammaln(n1 + 1) - gammaln(x1 + 1) - gammaln(n1 - x1 + 1)
    log_c2 = gammaln(n2 + 1) - gammaln(x2 + 1) - gammaln(n2 - x2 + 1)

    def chance(p2: np.ndarray) -> np.ndarray:
        """The chance of an extreme table at each nuisance p2 (and p1 = p2 + delta)."""
        p1 = np.clip(p2 + delta, 0.0, 1.0)[:, None]
        f1 = np.exp(log_c1 + xlogy(x1, p1) + xlog1py(n1 - x1, -p1))
        f2 = np.exp(log_c2 + xlogy(x2, p2[:, None]) + xlog1py(n2 - x2, -p2[:, None]))
        return np.einsum("gi,ij,gj->g", f1, extreme, f2)

    # The largest chance over the nuisance: a grid, then golden-section search around its best point.
    grid = np.linspace(max(0.0, -delta), min(1.0, 1.0 - delta), _NUISANCE_GRID)
    values = chance(grid)
    best = int(np.argmax(values))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    top = float(values[best])
    for _ in range(40):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        fc, fd = chance(np.array([c, d]))
        top = max(top, float(fc), float(fd))
        if fc >= fd:
            b = d
        else:
            a = c
    return min(1.0, top)


# -- paired differences of other kinds: the sign-flip test ------------------------------------

@dataclass(frozen=True)
class SignFlip:
    """The sign-flip (randomization) test of paired differences and its interval.

    Attributes:
        p: Two-sided p: twice the smaller one-sided p, at most 1; at least 2 / patterns.
        patterns: Sign patterns used (the observed one included).
        exact: Whether they are all 2^n patterns (else a seeded random set).
        subset_means: Sorted means of the differences over each flipped set (the
            interval's ends are among them).
        always: Patterns that count as at least as extreme at every shift (the observed one).
    """

    p: float
    patterns: int
    exact: bool
    subset_means: np.ndarray
    always: int

    def interval(self, step: Step) -> tuple[float, float] | None:
        """The shifts the test does not reject at ``step``: the test's own inversion, or
        None where it rejects none (too few pairs for the level).

        A shift d0 is rejected when the test of (differences - d0) has a p that ``step``
        rejects; the p of shift d0 is twice (always + #{subset means beyond d0}) / patterns,
        as :attr:`p` is at 0, so the interval excludes 0 exactly when ``step`` rejects :attr:`p`.
        """
        ms = self.subset_means

        def p_of(j: int) -> float:  # the p of a shift with j subset means beyond it (as in sign_flip)
            return min(1.0, 2 * ((self.always + j) / self.patterns))

        # the largest j whose p is rejected
        j = max(-1, math.floor(step.alpha / step.k / 2 * self.patterns) - self.always)
        while j >= 0 and not step.rejects(p_of(j)):
            j -= 1
        while j + 1 < len(ms) and step.rejects(p_of(j + 1)):
            j += 1
        if j < 0:
            return None
        return float(ms[j]), float(ms[len(ms) - 1 - j])


def pairs_needed(step: Step) -> int | None:
    """The fewest pairs whose sign-flip test can reach ``step`` (None: no number can, the
    family is too large for the random patterns' resolution)."""
    for n in range(1, MAX_EXACT_PAIRS + 1):
        if step.rejects(min(1.0, 2 * (1 / 2**n))):  # the exact test's smallest p
            return n
    return MAX_EXACT_PAIRS + 1 if step.rejects(min(1.0, 2 * (1 / (RANDOM_PATTERNS + 1)))) else None


def sign_flip(differences: Sequence[float], seed: int = 0) -> SignFlip:
    """The sign-flip test of paired differences (mean 0 under the null).

    Exact (all 2^n sign patterns) up to :data:`MAX_EXACT_PAIRS` pairs; above that,
    :data:`RANDOM_PATTERNS` random patterns drawn from ``seed`` and the observed one.
    The differences are sorted first, so the result does not depend on their order.
    The one-sided p of shift d0 is (always + #{flipped sets whose mean <= d0}) /
    patterns (Hartigan's subset means), which makes the interval the exact inversion.
    """
    d = np.sort(np.asarray(differences, dtype=float))
    n = len(d)
    if n == 0:
        raise ValueError("sign_flip: no differences")
    if n <= MAX_EXACT_PAIRS:
        masks = np.arange(1, 2**n, dtype=np.int64)
        flipped = ((masks[:, None] >> np.arange(n)) & 1).astype(bool)
        # Summed in extended precision, so that a subset's mean is its true mean rounded once
        # (three 0.1s average to 0.1, not 0.10000000000000002): the interval's ends are such
        # means, and a shift by an end must leave no rounding residue that reads as an effect.
        sums = (flipped.astype(np.longdouble) @ d.astype(np.longdouble))
        counts = flipped.sum(axis=1)
        patterns, always, exact = 2**n, 1, True
    else:
        # NOTE: each pattern is drawn as packed bytes (a bit per pair) and summed by
        # table lookup, a byte of 8 pairs at a time, instead of rng.random() < 0.5 and a
        # product, for performance: 300 pairs took 0.22 s a metric, now 0.03 s (a sweep's
        # summary is the last thing its user waits for).
        n_bytes = (n + 7) // 8
        bits = (np.arange(256)[:, None] >> np.arange(7, -1, -1)) & 1  # byte -> its 8 bits, first pair high
        padded = np.concatenate([d, np.zeros(8 * n_bytes - n)])
        byte_sums = bits @ padded.reshape(n_bytes, 8).T  # [byte value, byte position]: sum of its pairs
        byte_counts = bits.sum(axis=1)
        rng = np.random.default_rng(seed)
        sums = np.zeros(RANDOM_PATTERNS)
        counts = np.zeros(RANDOM_PATTERNS, dtype=np.int64)
        rows = max(1, 2**22 // n_bytes)  # patterns drawn at once: at most 4 MiB of them
        for start in range(0, RANDOM_PATTERNS, rows):
            packed = rng.integers(0, 256, size=(min(rows, RANDOM_PATTERNS - start), n_bytes), dtype=np.uint8)
            packed[:, -1] &= np.uint8((0xFF << (8 * n_bytes - n)) & 0xFF)  # the padding's bits are no pairs
            part = slice(start, start + len(packed))
            sums[part] = byte_sums[packed, np.arange(n_bytes)].sum(axis=1)
            counts[part] = byte_counts[packed].sum(axis=1)
        patterns, exact = RANDOM_PATTERNS + 1, False
        always = 1 + int((counts == 0).sum())  # a pattern that flips nothing is the observed one
        sums, counts = sums[counts > 0], counts[counts > 0]
    means = (sums / counts).astype(float)
    # Sums of values that cancel exactly (0.1 + 0.2 - 0.3) carry a rounding residue;
    # snapped to 0 so that a tie counts as one, for the p and the interval alike.
    scale = float(np.abs(d).max()) or 1.0
    means[np.abs(means) <= 1e-12 * scale] = 0.0
    means.sort()
    upper = (always + int(np.count_nonzero(means <= 0.0))) / patterns
    lower = (always + int(np.count_nonzero(means >= 0.0))) / patterns
    return SignFlip(min(1.0, 2 * min(upper, lower)), patterns, exact, means, always)


# -- unpaired differences of other kinds -----------------------------------------------------

@dataclass(frozen=True)
class Welch:
    """Welch's unequal-variance t-test of a against b, in a unit where squares neither
    underflow nor overflow (``unit``; the figures are those of the values).

    Attributes:
        difference: mean(a) - mean(b), in the unit.
        se: Its standard error, in the unit.
        df: Welch-Satterthwaite degrees of freedom.
        unit: The power of two the values were divided by.
    """

    difference: float
    se: float
    df: float
    unit: float

    def p_at(self, shift: float) -> float:
        """Two-sided p of H0: mean(a) - mean(b) = shift (in the unit)."""
        from scipy import stats as sps

        return min(1.0, 2.0 * float(sps.t.sf(abs(self.difference - shift) / self.se, self.df)))


def _welch(x: np.ndarray, y: np.ndarray) -> Welch | None:
    if len(x) < 2 or len(y) < 2 or (_constant(x) and _constant(y)):
        return None
    s = _unit(x, y)  # t, df and p have no unit (scipy's own squares gave p = 0 at 1e-300)
    x, y = x / s, y / s
    va, vb = _std(x) ** 2 / len(x), _std(y) ** 2 / len(y)  # type: ignore[operator]
    df = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
    return Welch(_mean(x) - _mean(y), math.sqrt(va + vb), df, s)


def constant_arms_p(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Exact permutation p of the mean difference when each arm is constant.

    Only the observed split of the pooled values (and its mirror, with equal arm
    sizes) is as extreme as the observed one; 1 when the arms are equal.
    """
    x, y = clean(a), clean(b)
    if x[0] == y[0]:
        return 1.0
    return _split_p(len(x), len(y))


def _split_p(n1: int, n2: int) -> float:
    """The smallest permutation p of two arms of n1 and n2 values (one split, and its mirror)."""
    return min(1.0, (2 if n1 == n2 else 1) / math.comb(n1 + n2, n1))


def trials_needed(step: Step) -> int | None:
    """The fewest trials per arm whose permutation test can reach ``step`` (None above 1,000)."""
    return next((n for n in range(2, 1001) if step.rejects(_split_p(n, n))), None)


# -- families -------------------------------------------------------------------------

def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (None and NaN become None and leave the family), in input order.

    Raises:
        ValueError: for a p-value outside [0, 1].
    """
    # A NaN sorts anywhere and turned every adjusted p of its family into 1.
    idx = [i for i, p in enumerate(p_values) if not _missing(p)]
    bad = [p_values[i] for i in idx if not 0.0 <= float(p_values[i]) <= 1.0]  # type: ignore[arg-type]
    if bad:
        raise ValueError(f"holm: p-values must lie in [0, 1] (or be None); got {bad[0]!r}")
    m = len(idx)
    order = sorted(idx, key=lambda i: p_values[i])  # type: ignore[arg-type, return-value]
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        adj = min(1.0, (m - rank) * float(p_values[i]))  # type: ignore[arg-type]
        running = max(running, adj)
        out[i] = running
    return out


def holm_steps(p_values: Sequence[float], alpha: float = ALPHA) -> list[Step]:
    """The Holm step that decides each p-value of a family (see :class:`Step`), in input order.

    ``Step.rejects(p)`` of each is exactly Holm's decision, adjusted p < alpha: a rejected
    p's own product k * p is at most its adjusted p, and Holm stops at a p whose product is
    at least alpha, which every larger p then exceeds at the same k.
    """
    adjusted = holm(p_values)
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    stop = next((rank for rank, i in enumerate(order) if not adjusted[i] < alpha), m)  # type: ignore[operator]
    steps: list[Step] = [Step(1, alpha)] * m
    for rank, i in enumerate(order):
        steps[i] = Step(m - rank if rank < stop else m - stop, alpha)
    return steps


@dataclass(frozen=True)
class Pending:
    """One row of a comparison before its family is known: the test is done, the
    interval waits for the level of the Holm step that decides it (:func:`decide`).

    Attributes:
        row: The row so far (means, counts, the test, its raw p or why it was not tested).
        interval: Computes the interval (:class:`Bounds`) at a :class:`Step`; None when
            the row has no interval.
    """

    row: dict[str, Any]
    interval: Callable[[Step], Bounds] | None = None

    @property
    def tested(self) -> bool:
        return not _missing(self.row.get("p_value"))


def compare_one(a: Sequence[Any], b: Sequence[Any], kind: Kind | None = None, *,
                paired_samples: bool, seed: int = 0) -> Pending:
    """Arm A against arm B on one metric: its test, chosen from the kind and the data
    (see the module docstring), before the family's adjustment.

    Args:
        a: Arm A's values, one per trial (None or NaN where undefined).
        b: Arm B's values; paired by position when ``paired_samples``.
        kind: The metric's kind (None: inferred from the values).
        paired_samples: Whether trial i of A and trial i of B form a pair.
        seed: Seed of the random sign patterns (results are reproducible).
    """
    if paired_samples and len(a) != len(b):
        raise ValueError("compare_metrics: paired arms need the same number of trials")
    if kind is None:
        kind = inferred([*a, *b])
    if kind.name == "category":
        return Pending({"kind": kind.name, "bounds": None, "test": None, "p_value": None,
                        "not_tested": "a category has no mean"})
    x, y = np.sort(clean(a)), np.sort(clean(b))
    # An infinite value has no mean to estimate or test (sums of them are inf or NaN).
    finite = bool(np.isfinite(x).all() and np.isfinite(y).all())
    row: dict[str, Any] = {
        "kind": kind.name,
        "bounds": [kind.low, kind.high],
        "n_a": len(x),
        "n_b": len(y),
        # Trials where the metric is undefined (no readable data): left out, and counted.
        "n_undefined_a": len(a) - len(x),
        "n_undefined_b": len(b) - len(y),
        "mean_a": _mean(x) if len(x) and finite else None,
        "mean_b": _mean(y) if len(y) and finite else None,
    }
    if paired_samples:
        pairs = np.array(sorted((float(u), float(v)) for u, v in zip(a, b) if not _missing(u) and not _missing(v)),
                         dtype=float).reshape(-1, 2)
        # The difference that the paired test and its interval are about: over the pairs
        # with both values, not each arm's mean over its own values (a trial defined in one
        # arm only moved it, even to the other side of its interval).
        row["delta_mean"] = _mean(pairs[:, 0] - pairs[:, 1]) if len(pairs) and finite else None
        row["cohen_d"] = cohen_d(pairs[:, 0], pairs[:, 1]) if finite else None
    else:
        row["delta_mean"] = None if row["mean_a"] is None or row["mean_b"] is None else row["mean_a"] - row["mean_b"]
        row["cohen_d"] = cohen_d(x, y) if finite else None
    row.update(test=None, p_value=None, not_tested=None)
    if paired_samples:
        row["n_pairs"] = len(pairs)
    values = np.concatenate([x, y])
    if not finite:
        row["not_tested"] = "infinite values"
        return Pending(row)
    if len(values) and ((kind.low is not None and values.min() < kind.low)
                        or (kind.high is not None and values.max() > kind.high)):
        # As describe(): a declared kind that the values contradict is a bug to show, not to test.
        row["not_tested"] = (f"values {values.min():g} to {values.max():g} leave the declared range "
                             f"{kind.range_text()}")
        return Pending(row)
    if paired_samples:
        if len(pairs) and all((_missing(u) and _missing(v)) or (not _missing(u) and not _missing(v) and u == v)
                              for u, v in zip(a, b)):
            # A metric equal in every pair (one that echoes the config, say) has nothing to test.
            row.update(equal_in_every_pair=True, not_tested="equal in every pair")
            return Pending(row)
        if len(pairs) < 2:
            row["not_tested"] = f"{len(pairs)} pair{'' if len(pairs) == 1 else 's'} with both values"
            return Pending(row)
        return _paired(row, pairs, kind, seed)
    if len(x) < 2 or len(y) < 2:
        row["not_tested"] = "fewer than 2 values in an arm"
        return Pending(row)
    return _unpaired(row, x, y, kind)


def _paired(row: dict[str, Any], pairs: np.ndarray, kind: Kind, seed: int) -> Pending:
    u, v = pairs[:, 0], pairs[:, 1]
    if kind.name == "proportion" and _binary(pairs.ravel()):
        both, only_a = int(((u == 1) & (v == 1)).sum()), int(((u == 1) & (v == 0)).sum())
        only_b, neither = int(((u == 0) & (v == 1)).sum()), int(((u == 0) & (v == 0)).sum())
        counts = (both, only_a, only_b, neither)
        p_at = _mcnemar_at(*counts)
        p = p_at(0.0)  # the exact McNemar p (mcnemar_exact), from the very function its interval inverts
        row.update(test="exact McNemar", p_value=p)
        d = (only_a - only_b) / len(pairs)

        def hull(step: Step) -> Bounds:
            e_lo, e_hi = _placed(*mcnemar_exact_ci(*counts, step.level), d, p_at, step)
            n_lo, n_hi = newcombe_paired_ci(*counts, step.level)
            lo, hi = min(n_lo, e_lo), max(n_hi, e_hi)
            # Newcombe's interval widens the exact one, but never across 0 where the exact test
            # rejects (it did not once up to 40 pairs at the levels in use; this makes it certain).
            if e_lo > 0 >= lo:
                lo = e_lo
            if e_hi < 0 <= hi:
                hi = e_hi
            return Bounds("Newcombe paired score and exact McNemar (hull)", lo, hi)

        return Pending(row, hull)
    flip = sign_flip(u - v, seed)
    row.update(test="exact sign-flip" if flip.exact else f"sign-flip ({RANDOM_PATTERNS:,} random patterns)",
               p_value=flip.p)
    n = len(pairs)

    def inversion(step: Step) -> Bounds:
        ends = flip.interval(step)
        if ends is not None:
            return Bounds("sign-flip inversion", *ends)
        need = pairs_needed(step)
        can = f"{need} pairs can" if need is not None else "no number of pairs can in a family this large"
        return Bounds("sign-flip inversion",
                      missing=f"{n} pair{'' if n == 1 else 's'} cannot reach {percent(step.level)} ({can})")

    return Pending(row, inversion)


def _unpaired(row: dict[str, Any], x: np.ndarray, y: np.ndarray, kind: Kind) -> Pending:
    if kind.name == "proportion" and _binary(np.concatenate([x, y])):
        k1, n1, k2, n2 = int(x.sum()), len(x), int(y.sum()), len(y)
        exact = (n1 + 1) * (n2 + 1) <= MAX_EXACT_TABLES

        def p_at(delta: float) -> float:
            return unpaired_proportion_p(k1, n1, k2, n2, delta)

        row.update(test="exact unconditional (score)" if exact else "score (Miettinen-Nurminen)", p_value=p_at(0.0))
        d = k1 / n1 - k2 / n2
        method = "exact unconditional score inversion (Chan-Zhang)" if exact else "Miettinen-Nurminen score"
        return Pending(row, lambda step: Bounds(method, *_inverted(p_at, d, -1.0, 1.0, step, tol=1e-9)))
    span = kind.span()
    if _constant(x) and _constant(y):
        p = constant_arms_p(x, y)
        row.update(test="exact permutation (both arms constant)", p_value=p)
        delta = float(x[0] - y[0])
        n1, n2 = len(x), len(y)

        def exact(step: Step) -> Bounds:
            # The test of a shift d0 has p = 1 at d0 = delta and the split's p at any other:
            # the interval is delta alone where that p is rejected, and none where it is not.
            if step.rejects(_split_p(n1, n2)):
                return Bounds("permutation inversion", delta, delta)
            need = trials_needed(step)
            can = f"{need} per arm can" if need is not None else "no number can"
            return Bounds("permutation inversion",
                          missing=f"{n1} and {n2} trials cannot reach {percent(step.level)} ({can})")

        return Pending(row, exact)
    w = _welch(x, y)
    assert w is not None  # at least 2 values per arm, not both constant
    row.update(test="Welch t-test", p_value=_f(w.p_at(0.0)), t_statistic=_f(w.difference / w.se))

    def welch_interval(step: Step) -> Bounds:
        from scipy import stats as sps

        half = float(sps.t.isf(step.alpha / step.k / 2, w.df)) * w.se
        lo, hi = _placed(w.difference - half, w.difference + half, w.difference, w.p_at, step)
        lo, hi = lo * w.unit, hi * w.unit
        if span is not None:  # a difference cannot leave the kind's possible differences
            lo, hi = max(lo, -span), min(hi, span)
        return Bounds("Welch t", lo, hi)

    return Pending(row, welch_interval)


def decide(pending: Mapping[Any, Pending], *, family: str, alpha: float = ALPHA,
           paired_samples: bool = True) -> dict[Any, dict[str, Any]]:
    """One family's decisions: Holm across its tested rows, each interval at the level of
    the Holm step that decided its row.

    Every tested row gets ``p_adjusted`` (Holm across the family), ``family`` (e.g.
    "Holm across 6 metrics"), ``significant`` (adjusted p < alpha) and an interval of
    the difference at the level of its Holm step (:class:`Step`): ``ci_low``,
    ``ci_high``, ``ci_level``, ``ci_method``, ``ci_adjustment``, or, where the design
    cannot reach that level, no interval and ``no_interval`` (why, and what would reach
    it). The interval excludes 0 exactly when the row is significant. A row that was not
    tested keeps ``not_tested`` (the reason) and gets no p, interval or decision.

    Args:
        pending: The rows (:func:`compare_one`), by any key.
        family: What the family's members are, plural (``"metrics"``,
            ``"comparisons (5 metrics x 3 mechanism pairs)"``).
        alpha: The significance level.
        paired_samples: Whether the rows are paired comparisons (for the rule's words).
    """
    keys = list(pending)
    tested = [k for k in keys if pending[k].tested]
    m = len(tested)
    members = _singular(family) if m == 1 else family
    name = f"Holm across {m} {members}"
    ps = [float(pending[k].row["p_value"]) for k in tested]
    adjusted = dict(zip(tested, holm(ps)))
    steps = dict(zip(tested, holm_steps(ps, alpha)))
    rule = decision_rule(paired_samples, name, alpha)
    out = {}
    for k in keys:
        row = dict(pending[k].row)
        p = adjusted.get(k)
        row.update(family=name, p_adjusted=p, significant=None if p is None else p < alpha, decided_by=rule,
                   ci_method=None, ci_level=None, ci_adjustment=None, ci_low=None, ci_high=None, no_interval=None)
        if p is not None and pending[k].interval is not None:
            step = steps[k]
            bounds = pending[k].interval(step)
            row.update(ci_method=bounds.method, ci_level=step.level, ci_low=bounds.low, ci_high=bounds.high,
                       no_interval=bounds.missing,
                       ci_adjustment=f"Holm step {alpha:g}/{step.k} of {m} {members}" if m > 1
                       else "not adjusted (one test)")
        out[k] = row
    return out


def _singular(family: str) -> str:
    head, sep, rest = family.partition(" ")
    return (head[:-1] if head.endswith("s") else head) + sep + rest


def compare_metrics(
    a_rows: Sequence[Any],
    b_rows: Sequence[Any],
    names: Sequence[str],
    *,
    paired_samples: bool,
    seed: int,
    alpha: float = ALPHA,
    kinds: Mapping[str, Kind] | None = None,
) -> dict[str, dict[str, Any]]:
    """Compare arm A with arm B on several metrics: one family, one decision per metric.

    Per metric (see :func:`compare_one` and :func:`decide`): the means and counts,
    ``delta_mean`` (A - B), Cohen's d, the ``test`` its kind calls for and its raw
    ``p_value`` (or ``not_tested`` with the reason), ``p_adjusted`` (Holm across the
    tested metrics, the ``family``), the decision ``significant`` (adjusted p below
    ``alpha``) with its rule ``decided_by``, and the interval of the difference at
    the level of the Holm step that decided its row (``ci_low``, ``ci_high``, ``ci_level``,
    ``ci_method``). Every sentence, flag and plot of a comparison follows
    ``significant``.

    Args:
        a_rows: Arm A, one mapping of metric name to value per trial.
        b_rows: Arm B, likewise; same length and order when paired.
        names: The metrics to compare (the family).
        paired_samples: Whether rows are paired by position (trials sharing a seed).
        seed: Seed of the random sign-flip patterns.
        alpha: Significance level.
        kinds: Each metric's kind (exact names or globs, as ``Scenario.kinds``);
            a metric without one is inferred from its values.
    """
    if paired_samples and len(a_rows) != len(b_rows):
        raise ValueError("compare_metrics: paired arms need the same number of trials")
    pending = {
        name: compare_one([row.get(name) for row in a_rows], [row.get(name) for row in b_rows],
                          kind_of(kinds or {}, name), paired_samples=paired_samples, seed=seed)
        for name in names
    }
    return decide(pending, family="metrics", alpha=alpha, paired_samples=paired_samples)


def decision_rule(paired: bool, family: str, alpha: float = ALPHA) -> str:
    """The one rule that decides a comparison, in words.

    Args:
        paired: Whether the arms are paired.
        family: The family's name, e.g. "Holm across 6 metrics".
        alpha: The significance level.
    """
    return (f"{'paired' if paired else 'unpaired'} test chosen by each metric's kind (named per row), "
            f"{family}, adjusted p < {alpha:g}")


def decision_p(entry: Mapping[str, Any]) -> float | None:
    """The p-value the decision rule uses for one compared metric: its adjusted p."""
    return entry.get("p_adjusted")


def verdict(entry: Mapping[str, Any]) -> str:
    """A compared metric's decision in words: significant, not significant, or why not tested."""
    if entry.get("significant") is True:
        return "significant"
    if entry.get("significant") is False:
        return "not significant"
    why = entry.get("not_tested")
    return f"not tested ({why})" if why else "not tested"


def row_scale(entry: Mapping[str, Any]) -> float | None:
    """The scale of a compared metric's figures (:func:`~simcore.analysis.resolution.scale_of`):
    the width of its declared range, else the larger of its arms' means."""
    return scale_of(entry.get("bounds"), (entry.get("mean_a"), entry.get("mean_b")))


def group_scale(summary: Mapping[str, Any]) -> float | None:
    """The scale of one group's figures of a metric (a :class:`Summary` as a dict): the
    width of its declared range, else its values' magnitude."""
    return scale_of(summary.get("bounds"), (summary.get("min"), summary.get("max")))


def interval_text(entry: Mapping[str, Any], spec: str = "+.3g") -> str:
    """``[low, high]`` of a compared metric's interval (float noise shown as 0),
    ``no interval: <why>`` where the design cannot reach its level, ``n/a`` without one."""
    if entry.get("no_interval"):
        return f"no interval: {entry['no_interval']}"
    lo, hi = entry.get("ci_low"), entry.get("ci_high")
    if lo is None or hi is None:
        return "n/a"
    unit = row_scale(entry)
    return f"[{figure(lo, spec, unit)}, {figure(hi, spec, unit)}]"


def row_notes(entry: Mapping[str, Any], reasons: bool = False) -> list[str]:
    """What a compared metric's row must say beside its decision: trials left out for want
    of readable data, and a confound that calibration found (with its reason if ``reasons``)."""
    notes = []
    left_out = (entry.get("n_undefined_a") or 0) + (entry.get("n_undefined_b") or 0)
    if left_out:
        notes.append(f"{left_out} trials without readable data left out")
    calibration = entry.get("calibration") or {}
    if calibration.get("confounded"):
        notes.append("CONFOUNDED UNDER THE NULL" + (f": {calibration.get('reason')}" if reasons else ""))
    return notes


def levels_vary(entries: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a comparison's rows have intervals at more than one level (then a table shows each row's)."""
    return len({e["ci_level"] for e in entries if e.get("ci_level") is not None}) > 1


def level_text(entries: Sequence[Mapping[str, Any]]) -> str | None:
    """The levels of a comparison's intervals, in words (None when no row has one)."""
    rows = [e for e in entries if e.get("ci_level") is not None]
    if not rows:
        return None
    if rows[0].get("ci_adjustment") == "not adjusted (one test)":
        return f"interval at {percent(rows[0]['ci_level'])}, not adjusted (one test)"
    levels = sorted({e["ci_level"] for e in rows})
    at = percent(levels[0]) if len(levels) == 1 else f"{percent(levels[0])} to {percent(levels[-1])}"
    return f"intervals at {at}, each at the level of the Holm step that decided its row"
