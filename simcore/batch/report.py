"""The results of a sweep: the per-trial table, the summary and the plot.

- ``results.csv`` / ``results.parquet``: one row per planned trial (see
  :func:`build_table`; metrics are ``metric_<name>`` columns).
- ``summary.json`` / ``summary.csv``: per cell and condition, n and each metric's
  mean, std and 95% CI (over trials with status "ok"; the interval its kind calls
  for, :func:`simcore.analysis.stats.describe`), plus comparisons between conditions: the
  scenario's own ``compare`` when it has one, otherwise
  :func:`simcore.analysis.stats.compare_metrics` on the pairs (the test each metric's kind
  calls for, one Holm family across the metrics), each with its ``readability``
  (:mod:`simcore.analysis.readability`). ``summary.csv`` shows float noise as 0
  (:mod:`simcore.analysis.resolution`). ``failures`` counts failed trials
  by kind (:data:`simcore.batch.worker.FAILURE_KINDS`), and ``finish_command`` is
  the command that finishes an unfinished sweep.
- ``plots/metrics.png``: each metric's mean and 95% CI across the grid, one line
  per condition.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from backends.base import canonical_json
from simcore.analysis import readability, stats
from simcore.analysis.comparison_table import ComparisonRow, comparison_lines
from simcore.analysis.metric_kinds import Kind, kind_of, proportion
from simcore.analysis.plots import save_figure
from simcore.analysis.resolution import at_resolution, figure
from simcore.base.files import read_run
from simcore.base.records import atomic_write
from simcore.base.rng import derive_seed
from simcore.batch.plan import NO_CONDITION, SweepPlan
from simcore.batch.worker import FAILURE_KINDS, OTHER_KIND
from simcore.replies import quality
from simcore.runs.marks import annotate

METRIC_PREFIX = "metric_"
TIMING_COLUMNS = ("wall_s", "total_s")
# Columns that depend on how the trials were run (wall time, attempts, retries),
# not on what they computed: drop them to compare two sweeps' results.
VOLATILE_COLUMNS = (*TIMING_COLUMNS, "attempt", "retries")
USAGE_COLUMNS = ("calls", "llm_errors", "retries", "prompt_tokens", "completion_tokens", "tokens", "cost_usd",
                 "unpriced_models")
STATUSES = ("ok", "error", "skipped", "pending")


def build_table(
    plan: SweepPlan, finished: Mapping[int, Mapping[str, Any]], unrun: Mapping[int, str]
) -> pd.DataFrame:
    """One row per planned trial, in plan order.

    Args:
        plan: The sweep plan.
        finished: Outcomes of finished trials by plan index.
        unrun: For trials that did not run: "skipped: <reason>" or "pending".
    """
    cells = plan.cells
    labels = plan.condition_labels
    sweep_id = plan.sweep_id
    rows: list[dict[str, Any]] = []
    metric_names: list[str] = []
    quality_names: list[str] = []
    for job in plan.jobs:
        row: dict[str, Any] = {"sweep_id": sweep_id, "scenario": plan.scenario.name, "cell": job.cell}
        row.update(cells[job.cell])
        row["condition"] = labels[job.condition]
        if plan.conditions is not None:
            row[plan.conditions[0]] = plan.conditions[1][job.condition]
        row.update(trial=job.trial, seed=job.seed, run_id=job.run_id)
        out = finished.get(job.index)
        if out is None:
            status, _, reason = unrun.get(job.index, "pending").partition(": ")
            row.update(status=status, attempt=None, error=reason or None, error_kind=None)
        else:
            row.update(status=out["status"], attempt=out.get("attempt"), error=out["error"],
                       error_kind=out.get("error_kind"))
            for name, value in out["metrics"].items():
                if name not in metric_names:
                    metric_names.append(name)
                row[METRIC_PREFIX + name] = value
            for name, value in out.get("quality", {}).items():
                if name not in quality_names:
                    quality_names.append(name)
                row[name] = value
            for col in (*USAGE_COLUMNS, "trace_sha256", "run_dir", *TIMING_COLUMNS):
                row[col] = out.get(col)
        rows.append(row)
    front = ["sweep_id", "scenario", "cell", *(n for n, _ in plan.grid), "condition"]
    if plan.conditions is not None:
        front.append(plan.conditions[0])
    front += ["trial", "seed", "run_id", "status", "attempt", "error", "error_kind"]
    columns = front + [METRIC_PREFIX + m for m in metric_names] + sorted(quality_names)
    columns += [*USAGE_COLUMNS, "trace_sha256", "run_dir", *TIMING_COLUMNS]
    return pd.DataFrame(rows, columns=columns)


def metric_columns(df: pd.DataFrame, plan: SweepPlan | None = None) -> list[str]:
    """The numeric metric columns of a results table that summaries and plots use.

    With ``plan``, metrics that echo a config field (context_corrosion reports
    ``rounds``, say) are left out: they restate the setup, and a plot of ``rounds``
    against ``rounds`` says nothing. They stay in results.csv.
    """
    echoes = set() if plan is None else {METRIC_PREFIX + f.name for f in dataclasses.fields(plan.scenario.config_type)}
    return [c for c in df.columns if c.startswith(METRIC_PREFIX) and c not in echoes and _numeric(df[c])]


def _numeric(column: pd.Series) -> bool:
    """Numbers, or true/false values with gaps (an object column of bools and Nones)."""
    if pd.api.types.is_numeric_dtype(column):
        return True
    values = column.dropna()
    return len(values) > 0 and all(isinstance(v, (bool, np.bool_)) for v in values)


def _clean(value: Any) -> Any:
    """NaN/inf to None, numpy scalars to Python, recursively (strict JSON)."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def sweep_metric_kinds(plan: SweepPlan, df: pd.DataFrame, sweep_dir: Path, metrics: list[str]) -> dict[str, Kind]:
    """The scenario's declared kinds, and proportion for an undeclared metric (of the
    summary's ``metrics`` columns) that the trials report as true/false.

    The results table holds true/false as 1/0 (``scalar_metrics``), which would read
    as numbers with a t interval, even one outside [0, 1]; a run's own ``results.json``
    keeps them true/false, so an undeclared metric's kind is read there, from the first
    finished run that has a value for it.
    """
    kinds = plan.scenario.declared_kinds()
    undeclared = {name for name in (c[len(METRIC_PREFIX):] for c in metrics) if kind_of(kinds, name) is None}
    found: dict[str, bool] = {}
    for run_dir in df.loc[df["status"] == "ok", "run_dir"] if undeclared else ():
        try:
            metrics = read_run(sweep_dir / run_dir, trace=False).results.get("metrics") or {}
        except Exception:  # noqa: BLE001 - a run that cannot be read says nothing of its kinds
            continue
        for name in undeclared - set(found):
            if metrics.get(name) is not None:
                found[name] = isinstance(metrics[name], bool)
        if len(found) == len(undeclared):
            break
    return {**kinds, **{name: proportion() for name, boolean in sorted(found.items()) if boolean}}


def _describe(kinds: Mapping[str, Kind], column: pd.Series) -> stats.Summary:
    """A metric over trials, with the interval its kind calls for (:func:`sweep_metric_kinds`;
    by exact name or by pattern, :func:`~simcore.analysis.metric_kinds.kind_of`)."""
    values = [None if v is None or v != v else (float(v) if isinstance(v, (bool, np.bool_)) else v)
              for v in column.tolist()]
    return stats.describe(values, kind=kind_of(kinds, str(column.name)[len(METRIC_PREFIX):]))


def summarize(plan: SweepPlan, df: pd.DataFrame, sweep_dir: Path,
              indexed: Mapping[str, readability.Arm] | None = None) -> dict[str, Any]:
    """Per-cell, per-condition descriptive statistics and condition comparisons (``indexed``: each
    trial's replies by its run directory, from the sweep's index; see :func:`indexed_arms`)."""
    metrics = metric_columns(df, plan)
    of_metric = sweep_metric_kinds(plan, df, sweep_dir, metrics)
    groups = []
    for (cell, condition), sub in df.groupby(["cell", "condition"], sort=False):
        ok = sub[sub["status"] == "ok"]
        groups.append({
            "cell": int(cell),
            "params": plan.cells[int(cell)],
            "condition": condition,
            "n": int(len(ok)),
            "n_error": int((sub["status"] == "error").sum()),
            "n_skipped": int((sub["status"] == "skipped").sum()),
            "n_pending": int((sub["status"] == "pending").sum()),
            "cost_usd": float(sub["cost_usd"].fillna(0).sum()),
            "tokens": int(sub["tokens"].fillna(0).sum()),
            "metrics": {m[len(METRIC_PREFIX):]: _describe(of_metric, ok[m]).to_dict() for m in metrics},
        })
    counts = df["status"].value_counts()
    skipped = df[df["status"] == "skipped"]
    kinds = df.loc[df["status"] == "error", "error_kind"].fillna(OTHER_KIND).value_counts()
    order = [*FAILURE_KINDS, OTHER_KIND]
    failures = {k: int(kinds[k]) for k in sorted(kinds.index, key=lambda k: order.index(k) if k in order else 99)}
    return _clean({
        "sweep_id": plan.sweep_id,
        "scenario": plan.scenario.name,
        "definition": plan.definition(),
        "n_planned": int(len(df)),
        **{f"n_{s}": int(counts.get(s, 0)) for s in STATUSES},
        "cost_usd": float(df["cost_usd"].fillna(0).sum()),
        "calls": int(df["calls"].fillna(0).sum()),
        "tokens": int(df["tokens"].fillna(0).sum()),
        "skipped": [{"run_id": r, "reason": e} for r, e in zip(skipped["run_id"], skipped["error"])],
        "parse_quality": quality_of(df),
        "warnings": quality.warnings(quality_of(df)),
        "failures": failures,
        "groups": groups,
        "comparisons": compare_conditions(plan, df, sweep_dir, metrics, of_metric, indexed),
    })


def indexed_arms(finished: Mapping[int, Mapping[str, Any]]) -> dict[str, readability.Arm]:
    """Each finished trial's replies by its run directory, as its index line (``ledger.jsonl``)
    recorded them (:func:`simcore.batch.worker.outcome`); a line written before it did has none."""
    return {row["run_dir"]: readability.Arm(**row["readability"]) for row in finished.values()
            if row.get("run_dir") and isinstance(row.get("readability"), Mapping)}


def quality_of(df: pd.DataFrame) -> dict[str, dict[str, int]]:
    """The sweep's parse-quality counts, per reply kind, from the table's ``parse.<kind>.<count>`` columns."""
    out: dict[str, dict[str, int]] = {}
    for col in df.columns:
        if col.startswith("parse.") and col.count(".") == 2:
            _, kind, name = col.split(".")
            out.setdefault(kind, {})[name] = int(df[col].fillna(0).sum())
    return {k: out[k] for k in sorted(out)}


def compare_conditions(plan: SweepPlan, df: pd.DataFrame, sweep_dir: Path, metrics: list[str],
                       kinds: Mapping[str, Kind] | None = None,
                       indexed: Mapping[str, readability.Arm] | None = None) -> list[dict[str, Any]]:
    """Compare each condition with the first one, within every cell, on matched trials
    (each metric tested as its kind in ``kinds`` calls for; default: the declared ones),
    and test whether the two conditions' replies could be read equally often
    (``readability``, :mod:`simcore.analysis.readability`, from ``indexed``: each trial's
    replies by its run directory, as the sweep's index recorded them).

    Only trials whose every compared condition finished "ok" are used, so the two
    lists stay paired by trial seed.
    """
    if plan.conditions is None:
        return []
    labels = plan.condition_labels
    out = []
    for cell, sub in df.groupby("cell", sort=False):
        ok = sub[sub["status"] == "ok"]
        ref = ok[ok["condition"] == labels[0]].set_index("trial")
        for k, label in enumerate(labels[1:], start=1):
            other = ok[ok["condition"] == label].set_index("trial")
            trials = sorted(set(ref.index) & set(other.index))
            a, b = ref.loc[trials], other.loc[trials]
            entry: dict[str, Any] = {
                "cell": int(cell),
                "params": plan.cells[int(cell)],
                "a": labels[0],
                "b": label,
                "n_pairs": len(trials),
            }
            if not trials:
                # A comparison of nothing: the scenario's own one raised (an IndexError) on empty arms.
                entry["method"] = "scenario" if plan.scenario.compare is not None else "generic"
                entry["not_compared"] = "no trial finished ok in both conditions"
                out.append(entry)
                continue
            # The readability test reads what each trial's index line recorded; only a scenario's own
            # comparison, or a trial recorded before the index held it, needs its results.json.
            runs_a, runs_b = _indexed(indexed, a["run_dir"]), _indexed(indexed, b["run_dir"])
            res_a = res_b = read_error = None
            if plan.scenario.compare is not None or runs_a is None or runs_b is None:
                try:
                    res_a = [read_run(sweep_dir / d, trace=False).results for d in a["run_dir"]]
                    res_b = [read_run(sweep_dir / d, trace=False).results for d in b["run_dir"]]
                except Exception as exc:  # noqa: BLE001 - a damaged run must not lose the sweep
                    res_a = res_b = None
                    read_error = f"{type(exc).__name__}: {exc}"
            if plan.scenario.compare is not None:
                entry["method"] = "scenario"
                if read_error is not None:
                    entry["error"] = read_error
                else:
                    try:
                        entry["result"] = plan.scenario.compare(res_a, res_b)
                    except Exception as exc:  # noqa: BLE001 - a failing statistic must not lose the sweep
                        entry["error"] = f"{type(exc).__name__}: {exc}"
            else:
                entry["method"] = "generic"
                entry["result"] = generic_compare(
                    a, b, metrics, seed=derive_seed(plan.seed, f"bootstrap:{cell}:{k}"),
                    kinds=plan.scenario.declared_kinds() if kinds is None else kinds,
                )
            if runs_a is None or runs_b is None:
                runs_a, runs_b = res_a, res_b
            if runs_a is not None and runs_b is not None:
                entry["readability"] = readability.one(runs_a, runs_b, paired=True)
            arms = condition_arms(plan, k)
            if arms is not None and "result" in entry:
                annotate(plan.scenario, entry["result"].get("difference_summary", entry["result"]), arms=arms)
            out.append(entry)
    return out


def _indexed(indexed: Mapping[str, readability.Arm] | None, run_dirs: pd.Series) -> list[readability.Arm] | None:
    """The trials' replies as their index lines recorded them, or None where one has none."""
    found = [indexed.get(d) for d in run_dirs] if indexed else [None]
    return None if any(a is None for a in found) else found  # type: ignore[return-value]


def condition_arms(plan: SweepPlan, k: int) -> tuple[Any, Any] | None:
    """The values of the scenario's counterfactual field that condition k and the first
    condition stand for, where the condition axis is that field (None otherwise): then
    the calibration's marks apply to their comparison (:func:`simcore.runs.marks.annotate`)."""
    cf = plan.scenario.counterfactual
    if plan.conditions is None or cf is None or plan.conditions[0] != cf[0]:
        return None
    values = plan.conditions[1]
    return values[0], values[k]


def generic_compare(a: pd.DataFrame, b: pd.DataFrame, metrics: list[str], seed: int,
                    kinds: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per metric, :func:`simcore.analysis.stats.compare_metrics` on pairs matched by trial seed:
    means, the difference a - b, the test its kind calls for, one Holm family across
    the metrics, the decision and the interval at the level of the Holm step that decided it."""
    names = [m[len(METRIC_PREFIX):] for m in metrics]
    rows_a = a[metrics].set_axis(names, axis=1).astype(object).where(a[metrics].notna().values, None)
    rows_b = b[metrics].set_axis(names, axis=1).astype(object).where(b[metrics].notna().values, None)
    return stats.compare_metrics(rows_a.to_dict("records"), rows_b.to_dict("records"), names,
                                 paired_samples=True, seed=seed, kinds=kinds)


def summary_frame(plan: SweepPlan, summary: Mapping[str, Any]) -> pd.DataFrame:
    """The long summary table: one row per cell, condition and metric (float noise as 0,
    :mod:`simcore.analysis.resolution`)."""
    rows = []
    for g in summary["groups"]:
        for metric, d in g["metrics"].items():
            unit = stats.group_scale(d)
            rows.append({
                "cell": g["cell"], **g["params"], "condition": g["condition"], "metric": metric, "n": d["n"],
                **{k: at_resolution(d[k], unit) for k in ("mean", "std", "ci_low", "ci_high")},
            })
    cols = ["cell", *(n for n, _ in plan.grid), "condition", "metric", "n", "mean", "std", "ci_low", "ci_high"]
    return pd.DataFrame(rows, columns=cols)


def comparison_frame(plan: SweepPlan, summary: Mapping[str, Any]) -> pd.DataFrame:
    """Generic comparisons as a table (empty when the scenario has its own)."""
    rows = []
    for c in summary["comparisons"]:
        if c["method"] != "generic" or "result" not in c:
            continue
        for metric, r in c["result"].items():
            unit = stats.row_scale(r)
            figures = {k: at_resolution(r.get(k), unit) for k in FIGURES}
            rows.append({"cell": c["cell"], **c["params"], "a": c["a"], "b": c["b"], "metric": metric,
                         "n_pairs": c["n_pairs"], **r, **figures})
    return pd.DataFrame(rows)


def write_outputs(plan: SweepPlan, df: pd.DataFrame, summary: Mapping[str, Any], sweep_dir: Path,
                  plot: bool = True) -> dict[str, str]:
    """Write the tables, the summary and the plot; return their paths."""
    files = {
        "results_csv": sweep_dir / "results.csv",
        "results_parquet": sweep_dir / "results.parquet",
        "summary_json": sweep_dir / "summary.json",
        "summary_csv": sweep_dir / "summary.csv",
    }
    atomic_write(files["results_csv"], df.to_csv(index=False))
    atomic_write(files["results_parquet"], df.to_parquet(index=False))
    atomic_write(files["summary_csv"], summary_frame(plan, summary).to_csv(index=False))
    if plot and metric_columns(df, plan) and (df["status"] == "ok").any():
        files["plot"] = sweep_dir / "plots" / "metrics.png"
        plot_metrics(plan, summary, files["plot"])
    out = {k: str(v) for k, v in files.items()}
    # In the order the report prints (metrics as the scenario compares them), not key-sorted:
    # a finished sweep run again prints its table from this file.
    atomic_write(files["summary_json"], json.dumps({**summary, "files": out}, indent=2) + "\n")
    return out


def plot_metrics(plan: SweepPlan, summary: Mapping[str, Any], path: Path) -> None:
    """Each metric's mean and 95% CI across the grid, one line per condition.

    The x axis is the first grid field with more than one value; the other grid
    fields and the condition make separate lines. Without a grid, the x axis is the
    condition.
    """
    # A bare Figure (no pyplot): no global backend switch in the caller's process.
    from matplotlib.figure import Figure

    groups = summary["groups"]
    metrics = list(groups[0]["metrics"]) if groups else []
    varying = [name for name, values in plan.grid if len(values) > 1]
    xname = varying[0] if varying else None

    def xkey(g: Mapping[str, Any]) -> Any:
        return g["condition"] if xname is None else g["params"][xname]

    def line(g: Mapping[str, Any]) -> str:
        parts = [] if xname is None or g["condition"] == NO_CONDITION else [g["condition"]]
        return ", ".join(parts + [f"{k}={v}" for k, v in g["params"].items() if k != xname and k in varying])

    xs = list(dict.fromkeys(xkey(g) for g in groups)) if xname is None else list(dict(plan.grid)[xname])
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    pos = {x: (x if numeric else i) for i, x in enumerate(xs)}
    ncols = min(3, max(1, len(metrics)))
    nrows = math.ceil(len(metrics) / ncols)
    # Constrained layout leaves room for the figure title above the panels' titles
    # (tight_layout ignores a suptitle, which then overlapped the first row).
    fig = Figure(figsize=(5.2 * ncols, 3.8 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    lines = list(dict.fromkeys(line(g) for g in groups))
    offsets = {name: 0.0 for name in lines}
    if xname is not None and len(lines) > 1:
        # Nudge lines sideways so that overlapping error bars stay readable.
        span = (max(pos.values()) - min(pos.values()) if numeric and len(xs) > 1 else len(xs)) or 1.0
        step = 0.012 * span
        offsets = {name: (i - (len(lines) - 1) / 2) * step for i, name in enumerate(lines)}
    for ax, metric in zip(axes.flat, metrics):
        for name in lines:
            pts = [(pos[xkey(g)] + offsets[name], g["metrics"][metric]) for g in groups if line(g) == name]
            pts = [(x, d) for x, d in pts if d["mean"] is not None]
            if not pts:
                continue
            x = [p[0] for p in pts]
            y = [p[1]["mean"] for p in pts]
            bars = [stats.error_bar(p[1]["mean"], p[1]["ci_low"], p[1]["ci_high"]) for p in pts]
            ax.errorbar(x, y, yerr=[[b[0] for b in bars], [b[1] for b in bars]], marker="o", capsize=3,
                        linestyle="-" if xname is not None else "none", label=name or None)
        ax.set_title(metric)
        ax.set_xlabel(xname or "condition")
        ax.set_ylabel("mean, 95% CI")
        if not numeric:
            ax.set_xticks(range(len(xs)), [str(x) for x in xs], rotation=20 if len(xs) > 3 else 0)
            ax.set_xlim(-0.5, len(xs) - 0.5)
        elif len(xs) <= 12:
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.grid(alpha=0.3)
        if any(lines) and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    fixed = ", ".join(f"{n}={v[0]}" for n, v in plan.grid if len(v) == 1)
    fig.suptitle(
        f"{plan.scenario.name} sweep {plan.sweep_id}: up to {plan.trials} trials per point"
        + (f" ({fixed})" if fixed else "")
    )
    save_figure(fig, path)


def finish_command(scenario: str, sweep_dir: str | Path, flags: list[str] | None = None) -> str:
    """The shell command that finishes the sweep in ``sweep_dir``."""
    argv = ["python", "-m", "simcore.batch", scenario, "--resume", "--out", str(sweep_dir), *(flags or [])]
    return shlex.join(argv)


def format_failures(summary: Mapping[str, Any]) -> list[str]:
    """Lines for the failed trials by kind and the command that finishes the sweep."""
    lines: list[str] = []
    failures = summary.get("failures") or {}
    if failures:
        width = max(len(k) for k in failures)
        lines += ["", f"failed trials by kind ({summary['n_error']}):"]
        lines += [f"  {kind:<{width}}  {n:>6}" for kind, n in failures.items()]
    if summary.get("finish_command"):
        lines += ["", "to finish the sweep (re-runs failed trials, runs skipped and pending ones):",
                  f"  {summary['finish_command']}"]
    return lines


def format_summary(plan: SweepPlan, summary: Mapping[str, Any], verbose: bool = False) -> str:
    """The printed report: status counts, each metric's mean and 95% CI per cell and
    condition, the comparisons (difference, interval, test, p, adjusted p, decision,
    interpretation),
    the failed trials by kind and the command that finishes the sweep.

    ``verbose`` prints the full detail instead (every column of summary.csv and
    every field of each comparison), as the files hold it.
    """
    if verbose:
        return format_details(plan, summary)
    lines = [headline(summary)]
    lines += _means_table(plan, summary)
    lines += _comparisons(summary)
    lines += format_failures(summary)
    if summary.get("parse_quality"):
        lines += [""] + quality.summary_lines(summary["parse_quality"])
    return "\n".join(lines)


def headline(summary: Mapping[str, Any]) -> str:
    """What a sweep's report says first: the trials planned and how they ended, calls, tokens and
    cost (the run browser opens a sweep's page with it)."""
    # (a summary written before calls were counted has none)
    usage = [f"calls {summary['calls']:,}"] if "calls" in summary else []
    usage += [f"tokens {summary['tokens']:,}", f"cost ${summary['cost_usd']:.4f}"]
    return (
        f"sweep {summary['sweep_id']} ({summary['scenario']}): {summary['n_planned']} trials planned, "
        + ", ".join(f"{summary['n_' + s]} {s}" for s in STATUSES if summary["n_" + s] or s == "ok")
        + "; " + ", ".join(usage)
    )


def _cell_name(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "all trials"


def _means_table(plan: SweepPlan, summary: Mapping[str, Any]) -> list[str]:
    """Per cell: one row per metric, one column per condition: ``mean [CI low, CI high]``."""
    groups = summary["groups"]
    metrics = list(groups[0]["metrics"]) if groups else []
    if not metrics:
        return []
    width = max(len(m) for m in metrics) + 4
    lines = ["", "mean [95% CI] per cell and condition (n: trials that finished ok):"]
    cells = list(dict.fromkeys(g["cell"] for g in groups))
    for cell in cells:
        row = [g for g in groups if g["cell"] == cell]
        heads = [("trials" if g["condition"] == NO_CONDITION else g["condition"]) + f" (n={g['n']})" for g in row]
        texts = [[_mean_text(d) for d in (g["metrics"][m] for m in metrics)] for g in row]
        cols = [max(len(h), *(len(t) for t in col)) + 2 for h, col in zip(heads, texts)]
        lines.append(f"{_cell_name(row[0]['params']):<{width}}" + "".join(f"{h:<{w}}" for h, w in zip(heads, cols)))
        for i, metric in enumerate(metrics):
            lines.append(f"  {metric:<{width - 2}}" + "".join(f"{col[i]:<{w}}" for col, w in zip(texts, cols)))
    return [line.rstrip() for line in lines]


def _mean_text(d: Mapping[str, Any]) -> str:
    """``mean [CI low, CI high]`` of one group's metric, float noise shown as 0."""
    if d["mean"] is None:
        return "n/a"
    unit = stats.group_scale(d)
    return f"{figure(d['mean'], scale=unit)} [{figure(d['ci_low'], scale=unit)}, {figure(d['ci_high'], scale=unit)}]"


def comparison_entries(comparison: Mapping[str, Any]) -> tuple[dict[str, Mapping[str, Any]], str | None]:
    """The per-metric entries of a comparison's result and its interpretation, for the
    scenario's own comparison (a ``difference_summary``) and the generic one alike."""
    result = comparison.get("result") or {}
    diff = result.get("difference_summary", result)
    entries = {k: v for k, v in diff.items() if isinstance(v, Mapping) and "delta_mean" in v}
    interpretation = diff.get("interpretation")
    return entries, interpretation if isinstance(interpretation, str) else None


def _comparisons(summary: Mapping[str, Any]) -> list[str]:
    """Each comparison as a table (:func:`~simcore.analysis.comparison_table.comparison_lines`), then
    whether the conditions' replies could be read equally often, and the scenario's interpretation."""
    lines: list[str] = []
    for c in summary["comparisons"]:
        head = f"{_cell_name(c['params'])}: {c['a']} - {c['b']} ({c['n_pairs']} pairs by trial seed)"
        if "error" in c or "not_compared" in c:
            lines += ["", head, f"  the comparison failed: {c['error']}" if "error" in c
                      else f"  not compared: {c['not_compared']}"]
            continue
        entries, interpretation = comparison_entries(c)
        if not entries:
            continue
        lines += ["", *comparison_lines(head, [ComparisonRow(m, d) for m, d in entries.items()])]
        lines += readability.readability_lines(c.get("readability"), c["a"], c["b"])
        if interpretation:
            lines.append(f"  {interpretation}")
    return [line.rstrip() for line in lines]


def format_details(plan: SweepPlan, summary: Mapping[str, Any]) -> str:
    """The full report (``--verbose``): the long summary table, every generic comparison
    column and every field of the scenario's own comparisons."""
    lines = [headline(summary), ""]
    table = summary_frame(plan, summary)
    if not table.empty:
        lines.append(table.drop(columns=["cell"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    comps = comparison_frame(plan, summary)
    if not comps.empty:
        lines += ["", "comparisons (a - b, paired by trial seed):",
                  comps.drop(columns=["cell"]).to_string(index=False, float_format=lambda v: f"{v:.4g}")]
    for c in summary["comparisons"]:
        if c["method"] != "scenario":
            continue
        lines += ["", f"{plan.scenario.name} comparison, cell {_cell_name(c['params'])}: {c['a']} vs {c['b']} "
                  f"({c['n_pairs']} pairs)"]
        if "error" in c or "not_compared" in c:
            lines.append(f"  failed: {c['error']}" if "error" in c else f"  not compared: {c['not_compared']}")
        else:
            lines += [f"  {k}: {v}" for k, v in _flatten(_at_resolution(c["result"]))]
    lines += format_failures(summary)
    if summary.get("parse_quality"):
        lines += [""] + quality.summary_lines(summary["parse_quality"])
    return "\n".join(lines)


def _at_resolution(value: Any) -> Any:
    """A comparison's result with every figure of a compared metric or a group at its
    resolution (float noise as 0): a metric's entry has ``delta_mean``, a group's ``ci_low``."""
    if isinstance(value, Mapping):
        out = {k: _at_resolution(v) for k, v in value.items()}
        if "delta_mean" in value:
            unit = stats.row_scale(value)
            out.update({k: at_resolution(value[k], unit) for k in FIGURES if k in value})
        elif "ci_low" in value and "mean" in value:
            unit = stats.group_scale(value)
            out.update({k: at_resolution(value[k], unit) for k in ("mean", "std", "min", "max", "ci_low", "ci_high")
                        if k in value})
        return out
    return value


#: The figures of a compared metric that are values of the metric (or differences of them).
FIGURES = ("mean_a", "mean_b", "delta_mean", "ci_low", "ci_high")


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, Mapping):
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(value, float):
        return [(prefix, f"{value:.4g}")]
    if isinstance(value, (list, tuple)) and len(value) > 6:
        return [(prefix, f"[{len(value)} values]")]
    return [(prefix, canonical_json(value) if not isinstance(value, str) else value)]
