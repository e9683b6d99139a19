"""Null calibration: how often each compared metric "finds" an effect where there is none.

``python -m simcore.calibrate SCENARIO [--trials N] [--monte-carlos K] [flags]`` runs K
Monte Carlos under the scenario's null (:class:`~simcore.runs.scenario.Null`: the setting
in which its treatment has no effect) and K under its default, each of N trials per
arm, and applies the comparison's one decision rule (:func:`simcore.analysis.stats.decision_rule`)
to every compared metric. Per metric it reports:

- the **false-positive rate**: the share of null Monte Carlos the rule calls
  significant, with a Wilson 95% interval;
- the **power**: the same share under the default setting.

A metric whose false-positive interval lies wholly above the significance level is
**confounded under the null**: it differs between the arms even when the treatment
does nothing, so a "significant" result on it says nothing about the treatment.
``--install`` writes the figures beside the scenario (``calibration.json`` in its
package), and every comparison of that scenario marks such metrics, with the reason
(terminal, ``summary.json``, plots, the HTTP API).

For a scenario without a counterfactual, the null names per-trial *effects*
(metrics that are 0 when nothing happens); a Monte Carlo tests each against 0
(the sign-flip test, as for paired differences, Holm-adjusted across them).

Outputs (``<out>/calibration/<scenario>-<id>/``): ``calibration.json``,
``calibration.csv`` (one row per metric and setting), ``monte_carlos.csv`` (one row
per Monte Carlo and metric) and ``plots/calibration.png``.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from backends.base import canonical_json
from backends.registry import BackendSpec
from simcore.analysis import stats
from simcore.analysis.metric_kinds import Kind
from simcore.analysis.plots import save_figure
from simcore.base.config import Config, ConfigError
from simcore.base.records import (
    atomic_write,
    code_revision,
    staged_dir,
    utc_now,
    write_json,
)
from simcore.base.rng import derive_seed
from simcore.runs.counterfactual import arm_configs, compare_arms, trial_seeds
from simcore.runs.marks import CALIBRATION_FILE, installed
from simcore.runs.runner import run_trial_async
from simcore.runs.scenario import Scenario

SETTINGS = ("null", "default")


@dataclass(frozen=True)
class MetricCalibration:
    """One metric's calibration.

    Attributes:
        metric: The compared metric.
        n_null, n_default: Monte Carlos in which the rule could decide (the metric was defined).
        false_positives: Null Monte Carlos called significant.
        fp_rate, fp_low, fp_high: Their share and its Wilson 95% interval.
        detections, power, power_low, power_high: Likewise under the default setting.
        confounded: The false-positive interval lies wholly above alpha.
        reason: Why it is marked (the measured rate, and a known cause if the scenario names one).
    """

    metric: str
    n_null: int
    false_positives: int
    fp_rate: float | None
    fp_low: float | None
    fp_high: float | None
    n_default: int
    detections: int
    power: float | None
    power_low: float | None
    power_high: float | None
    confounded: bool
    reason: str | None


async def one_monte_carlo(scenario: Scenario, config: Config, seed: int, n_trials: int,
                          spec: BackendSpec, alpha: float) -> dict[str, dict[str, Any]]:
    """One Monte Carlo: per compared metric, whether the decision rule calls it significant.

    Returns:
        {metric: {"significant": bool | None, "delta": float | None, "p": float | None}}.
    """
    seeds = trial_seeds(seed, n_trials)
    if scenario.counterfactual is not None:
        arms = arm_configs(scenario, config)
        trials = await asyncio.gather(*(run_trial_async(scenario, c, s, spec) for c in arms for s in seeds))
        ok = [i for i in range(n_trials) if trials[i].status == trials[n_trials + i].status == "ok"]
        a = [trials[i].results for i in ok]
        b = [trials[n_trials + i].results for i in ok]
        if len(ok) < 2:
            return {}
        diff = compare_arms(scenario, a, b)["difference_summary"]
        return {
            m: {"significant": called(d), "delta": d.get("delta_mean"), "p": stats.decision_p(d)}
            for m, d in diff.items() if isinstance(d, dict) and "delta_mean" in d
        }
    effects = scenario.null.effects if scenario.null else ()
    trials = await asyncio.gather(*(run_trial_async(scenario, config, s, spec) for s in seeds))
    rows = [t.results.get("metrics", {}) for t in trials if t.status == "ok"]
    return effect_tests(rows, effects, alpha, seed=seed, kinds=scenario.declared_kinds())


def effect_tests(rows: Sequence[Mapping[str, Any]], effects: Sequence[str], alpha: float,
                 seed: int = 0, kinds: Mapping[str, Kind] | None = None) -> dict[str, dict[str, Any]]:
    """Each effect tested against 0 (the sign-flip test, as for paired differences),
    Holm-adjusted across the effects; an effect that is 0 in every trial is not tested.
    ``kinds``: the scenario's declarations, looked up as everywhere (by name or pattern)."""
    zero = [{m: 0.0 if r.get(m) is not None else None for m in effects} for r in rows]
    diff = stats.compare_metrics(rows, zero, list(effects), paired_samples=True, seed=seed, alpha=alpha, kinds=kinds)
    return {m: {"significant": called(d), "delta": d["delta_mean"], "p": d["p_adjusted"]} for m, d in diff.items()}


def called(entry: Mapping[str, Any]) -> bool | None:
    """Whether the rule called a compared metric significant; a metric equal in every
    pair was decided too (nothing differs), one without enough data was not (None)."""
    if entry.get("significant") is None and entry.get("equal_in_every_pair"):
        return False
    return entry.get("significant")


async def calibrate_async(scenario: Scenario, config: Config, *, seed: int, n_trials: int, monte_carlos: int,
                          spec: BackendSpec | None = None, alpha: float = 0.05,
                          progress: Any = None) -> dict[str, list[dict[str, dict[str, Any]]]]:
    """Every Monte Carlo of both settings: {setting: [per-metric outcome of each Monte Carlo]}."""
    if scenario.null is None:
        raise ConfigError(f"scenario: {scenario.name} declares no null; nothing to calibrate against")
    spec = spec or BackendSpec()
    configs = {"null": config.replace(**dict(scenario.null.config)), "default": config}
    out: dict[str, list[dict[str, dict[str, Any]]]] = {s: [] for s in SETTINGS}
    for k in range(monte_carlos):
        for setting in SETTINGS:
            mc_seed = derive_seed(seed, f"calibrate.{k}")  # the same seeds under both settings
            out[setting].append(await one_monte_carlo(scenario, configs[setting], mc_seed, n_trials, spec, alpha))
            if progress is not None:
                progress(1)
    return out


def summarize(scenario: Scenario, outcomes: Mapping[str, list[dict[str, dict[str, Any]]]],
              alpha: float) -> list[MetricCalibration]:
    """Per metric: false-positive rate and power with Wilson intervals, and the confounded mark."""
    metrics = sorted({m for mcs in outcomes.values() for mc in mcs for m in mc})
    notes = scenario.null.notes if scenario.null else {}
    out = []
    for m in metrics:
        figures = {}
        for setting in SETTINGS:
            decided = [mc[m]["significant"] for mc in outcomes[setting] if m in mc and mc[m]["significant"] is not None]
            k, n = sum(decided), len(decided)
            lo, hi = stats.proportion_ci(k, n)
            figures[setting] = (n, k, k / n if n else None, lo, hi)
        n0, k0, r0, lo0, hi0 = figures["null"]
        confounded = lo0 is not None and lo0 > alpha
        reason = None
        if confounded:
            reason = f"{k0} of {n0} null Monte Carlos significant ({r0:.0%}, 95% CI {lo0:.0%}-{hi0:.0%})"
            if m in notes:
                reason += f": {notes[m]}"
        n1, k1, r1, lo1, hi1 = figures["default"]
        out.append(MetricCalibration(m, n0, k0, r0, lo0, hi0, n1, k1, r1, lo1, hi1, confounded, reason))
    return out


def tables(outcomes: Mapping[str, list[dict[str, dict[str, Any]]]], rows: Sequence[MetricCalibration]) -> tuple[str, str]:
    """``calibration.csv`` (metric x setting) and ``monte_carlos.csv`` (Monte Carlo x metric)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["metric", "setting", "n_monte_carlos", "significant", "rate", "ci_low", "ci_high", "confounded"])
    for r in rows:
        w.writerow([r.metric, "null", r.n_null, r.false_positives, r.fp_rate, r.fp_low, r.fp_high, r.confounded])
        w.writerow([r.metric, "default", r.n_default, r.detections, r.power, r.power_low, r.power_high, r.confounded])
    mcs = io.StringIO()
    w = csv.writer(mcs, lineterminator="\n")
    w.writerow(["setting", "monte_carlo", "metric", "significant", "delta", "p"])
    for setting, runs in outcomes.items():
        for k, mc in enumerate(runs):
            for m, o in sorted(mc.items()):
                w.writerow([setting, k, m, o["significant"], o["delta"], o["p"]])
    return buf.getvalue(), mcs.getvalue()


def plot(rows: Sequence[MetricCalibration], alpha: float, title: str, path: Path) -> None:
    """False-positive rate and power per metric, with their Wilson intervals and alpha."""
    import numpy as np
    from matplotlib.figure import Figure

    names = [r.metric for r in rows]
    y = np.arange(len(rows))
    fig = Figure(figsize=(10, 1.2 + 0.45 * max(1, len(rows))), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True)
    for ax, key, label, colour in ((left, "fp", "false-positive rate under the null", "#c0392b"),
                                   (right, "power", "power under the default", "#2e86c1")):
        rate = [getattr(r, "fp_rate" if key == "fp" else "power") for r in rows]
        lo = [getattr(r, f"{key}_low") for r in rows]
        hi = [getattr(r, f"{key}_high") for r in rows]
        for yi, v, a, b in zip(y, rate, lo, hi):
            if v is None:
                ax.text(0.02, yi, "n/a", va="center", fontsize=8)
                continue
            ax.errorbar(v, yi, xerr=[[max(0.0, v - a)], [max(0.0, b - v)]], fmt="o", color=colour, capsize=3)
        ax.axvline(alpha, color="black", lw=0.8, ls="--", label=f"alpha = {alpha:g}")
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    left.set_yticks(y, [f"{n}  (CONFOUNDED)" if r.confounded else n for n, r in zip(names, rows)], fontsize=8)
    left.invert_yaxis()
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path)


def write(out: Path, scenario: Scenario, config: Config, args: Mapping[str, Any],
          outcomes: Mapping[str, list[dict[str, dict[str, Any]]]], rows: Sequence[MetricCalibration]) -> tuple[Path, dict[str, Any]]:
    """Write the calibration directory; return it and ``calibration.json``'s content."""
    assert scenario.null is not None
    record = {
        "scenario": scenario.name, "written": utc_now(), "code_revision": code_revision(),
        "command": args["command"], "config": config.to_dict(), "seed": args["seed"], "alpha": args["alpha"],
        "trials": args["trials"], "monte_carlos": args["monte_carlos"], "wall_s": args.get("wall_s"),
        "null": {"config": dict(scenario.null.config), "why": scenario.null.why,
                 "effects": list(scenario.null.effects)},
        "counterfactual": list(scenario.counterfactual) if scenario.counterfactual else None,
        "decision_rule": "per Monte Carlo, the comparison's own rule (simcore.analysis.stats.decision_rule)",
        "metrics": [asdict(r) for r in rows],
    }
    ident = hashlib.sha256(canonical_json({k: record[k] for k in ("config", "seed", "trials", "monte_carlos")}).encode())
    final = out / "calibration" / f"{scenario.name}-{ident.hexdigest()[:10]}"
    csv_text, mc_text = tables(outcomes, rows)
    with staged_dir(final) as stage:
        write_json(stage / CALIBRATION_FILE, record)
        atomic_write(stage / "calibration.csv", csv_text)
        atomic_write(stage / "monte_carlos.csv", mc_text)
        title = (f"{scenario.name}: null calibration, {args['monte_carlos']} Monte Carlos of {args['trials']} trials "
                 f"per arm; null: {', '.join(f'{k}={v}' for k, v in scenario.null.config.items())}")
        plot(rows, args["alpha"], title, stage / "plots" / "calibration.png")
    return final, record


def _pct(v: float | None, lo: float | None, hi: float | None, width: str = "") -> str:
    """A rate with its interval, ``n/a`` where no Monte Carlo could decide."""
    return "n/a" if v is None else f"{v:{width}.0%} [{lo:.0%}, {hi:.0%}]"


def format_table(rows: Sequence[MetricCalibration]) -> str:
    """The calibration table for the terminal."""
    width = max([len(r.metric) for r in rows] + [6])
    lines = [f"  {'metric':<{width}}  {'false positives (null)':<24}  {'power (default)':<20}  mark"]
    for r in rows:
        lines.append(f"  {r.metric:<{width}}  {_pct(r.fp_rate, r.fp_low, r.fp_high, '4'):<24}  "
                     f"{_pct(r.power, r.power_low, r.power_high, '4'):<20}  {'CONFOUNDED' if r.confounded else ''}")
    return "\n".join(lines)


def markdown_section(scenario: Scenario) -> str:
    """A scenario's installed calibration for docs/calibration.md: the command, its date
    and duration, and one row per metric (empty without an installed calibration)."""
    data = installed(scenario)
    if not data:
        return ""
    null = ", ".join(f"{k}={v}" for k, v in data["null"]["config"].items())
    took = f", {data['wall_s'] / 60:.1f} min" if data.get("wall_s") else ""
    lines = [f"`{data['command']}` ({data['written'][:10]}{took}; null: {null}). {data['monte_carlos']} Monte "
             f"Carlos of {data['trials']} trials{' per arm' if data.get('counterfactual') else ''} under each setting.",
             "", "| metric | false positives under the null | power under the default | mark |",
             "| --- | --- | --- | --- |"]
    for row in data["metrics"]:
        lines.append(f"| `{row['metric']}` | {_pct(row['fp_rate'], row['fp_low'], row['fp_high'])} | "
                     f"{_pct(row['power'], row['power_low'], row['power_high'])} | {_mark(row)} |")
    return "\n".join(lines)


def _mark(row: Mapping[str, Any]) -> str:
    cause = (row["reason"] or "").partition(": ")[2]
    return ("**confounded**" + (f": {cause}" if cause else "")) if row["confounded"] else ""


def markdown_table(scenarios: Sequence[Scenario]) -> str:
    """Every compared metric's installed calibration, one Markdown table (the README's).

    A scenario with no installed calibration is left out.
    """
    lines = ["| scenario | metric | false positives under the null | power at the default | mark |",
             "| --- | --- | --- | --- | --- |"]
    for scenario in scenarios:
        for row in (installed(scenario) or {}).get("metrics", []):
            fp = _pct(row["fp_rate"], row["fp_low"], row["fp_high"])
            power = _pct(row["power"], row["power_low"], row["power_high"])
            lines.append(f"| {scenario.name} | `{row['metric']}` | {fp} | {power} | {_mark(row)} |")
    return "\n".join(lines)
