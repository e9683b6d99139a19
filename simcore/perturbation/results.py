"""The results of a perturbation study: pair table, summary, warnings, report and plots.

:class:`PerturbationResults` holds one row per pair (see
:func:`simcore.perturbation.pairs.pair_metrics`) and the noise floor;
:meth:`~PerturbationResults.summary` makes the per-perturbation table and
:meth:`~PerturbationResults.report` writes ``report.md`` with three plots:
the d_norm distribution, the manifestation counts and the divergence position.
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from backends.registry import BackendSpec
from simcore.analysis import plots as figures
from simcore.analysis import readability, stats
from simcore.analysis.divergence import CATEGORIES, GROUPS, manifestation_group
from simcore.analysis.glossary import Metric
from simcore.analysis.metric_kinds import continuous, count, proportion, score
from simcore.base.files import OBJECT, read_jsonl, read_manifest, read_record, read_run
from simcore.base.records import atomic_write
from simcore.batch.store import read_definition
from simcore.perturbation.pairs import PAIR_METRICS, UNAVAILABLE, noise_summary

GROUP_ORDER = ("silent_corruption", "behavioral_detours", "combined_disruption", "no_observable_effect")
# One hue family per group, so the bars read by group first and category second.
_COLORS = {
    "silent_semantic_corruption": "#c62828",
    "outcome_change_uncategorized": "#ef9a9a",
    "strategy_reroute": "#1565c0",
    "structural_divergence_with_outcome_change": "#42a5f5",
    "loop_or_extended_execution": "#90caf9",
    "structural_divergence_recovered": "#26a69a",
    "catastrophic_failure": "#4a148c",
    "early_termination": "#8e24aa",
    "no_observable_effect": "#bdbdbd",
}


#: How people read the columns of a study's summary (one row per perturbation).
SUMMARY_METRICS = {
    "mean_d_norm": Metric("mean d_norm", f"{PAIR_METRICS['d_norm'].description} Mean over the pairs, with its "
                          "95% bootstrap interval.", key=True),
    "mean_t_star_norm": Metric("mean t*_norm", f"{PAIR_METRICS['t_star_norm'].description} Mean over the pairs "
                               "that diverged.", key=True),
    "answer_changed_rate": Metric("answer changed", "Share of pairs whose perturbed run gave another final "
                                  "answer than its baseline.", percent=True, key=True),
    "recovery_rate": Metric("recovered", "Share of the pairs that diverged whose final answer stayed the same "
                            "(and not empty).", percent=True, key=True),
    "token_overhead": Metric("token ratio", f"{PAIR_METRICS['token_overhead'].description} Mean over the pairs "
                             "with usage.", key=True),
    "n_pairs": Metric("pairs", "Pairs of a clean baseline and its perturbed run (failed baselines left out)."),
    "n_applied": Metric("applied", "Pairs in which the perturbation acted."),
    "n_within_noise_floor": Metric("within noise floor", "Pairs whose d_norm is at most the noise floor."),
}
#: The kinds of the study's summary columns and of the pair columns its pages show.
SUMMARY_KINDS = {
    **dict.fromkeys(("mean_d_norm", "mean_t_star_norm", "d_norm", "t_star_norm", "noise_floor"), score(0, 1)),
    **dict.fromkeys(("answer_changed_rate", "recovery_rate", "answer_changed", "applied", "within_noise_floor"),
                    proportion()),
    **dict.fromkeys(("n_pairs", "n_applied", "n_within_noise_floor", "reroutes", "t_star"), count()),
    "token_overhead": continuous(0),
}


def _num(value: Any) -> float | None:
    """A float, or None for None/NaN/"unavailable"."""
    if value is None or isinstance(value, str):
        return None
    x = float(value)
    return None if math.isnan(x) else x


def _pairs(sub: pd.DataFrame, prefix: str) -> list[tuple[int, int] | None]:
    """Each pair's slots ``<prefix>_perturbed`` and ``<prefix>_baseline`` (None where not matched)."""
    if f"{prefix}_perturbed" not in sub.columns:
        return [None] * len(sub)
    return [None if _num(a) is None or _num(b) is None else (int(a), int(b))
            for a, b in zip(sub[f"{prefix}_perturbed"], sub[f"{prefix}_baseline"])]


def _answers(sub: pd.DataFrame, arm: str) -> tuple[int, int] | None:
    """An arm's (answers, answers given on a re-ask), None where a run did not count the latter."""
    if f"reask_read_{arm}" not in sub.columns or any(_num(v) is None for v in sub[f"reask_read_{arm}"]):
        return None
    return int(sub[f"answers_{arm}"].sum()), int(sub[f"reask_read_{arm}"].sum())


def _rate_ci(name: str, k: int, n: int) -> dict[str, float | None]:
    lo, hi = stats.proportion_ci(k, n)
    return {f"{name}_ci_low": lo, f"{name}_ci_high": hi}


@dataclass
class PerturbationResults:
    """A study's pairs and noise floor.

    Attributes:
        definition: Scenario, config, perturbations, seeds, backend, re-runs, reuse.
        pairs: One row per pair, in (perturbation, seed) order.
        noise: The noise floor (see :func:`simcore.perturbation.pairs.noise_summary`).
        files: Paths written so far (filled in by the writers).
    """

    definition: dict[str, Any]
    pairs: pd.DataFrame
    noise: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    # Readability is a family of tests across the perturbations: computed once, on first use.
    _readability: dict[str, dict[str, Any]] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def perturbations(self) -> list[str]:
        """The perturbations, in study order."""
        listed = list(self.definition.get("perturbations") or [])
        return listed + [p for p in dict.fromkeys(self.pairs["perturbation"]) if p not in listed]

    def warnings(self) -> list[str]:
        """Things a reader must know before trusting the numbers."""
        out = []
        if self.noise.get("warning"):
            out.append(self.noise["warning"])
        for p in self.perturbations:
            sub = self.pairs[self.pairs["perturbation"] == p]
            missed = int((~sub["applied"].astype(bool)).sum())
            if missed and set(p.split(" @ ")[0].split("+")) != {"none"}:  # "none" never acts, by design
                phases = self.definition.get("phases")
                hint = f" (the baselines' phases: {', '.join(map(str, phases))})" if phases else ""
                out.append(f"{p!r} never acted in {missed} of {len(sub)} pairs (no event matched its "
                           f"selector): those pairs measure nothing{hint}")
        failed = int((self.pairs["baseline_status"] != "ok").sum())
        if failed:
            out.append(f"{failed} pairs have a failed baseline; they are left out of the summary")
        for p, record in self.readability().items():
            if record.get("mark"):
                out.append(f"{p!r}: perturbed and baseline runs {record['mark'].removeprefix('arms ')} "
                           f"({record['test']}, {record['unit']}): figures that need those replies compare "
                           "different replies")
            reask = record.get("reask") or {}
            if reask.get("mark"):
                out.append(f"{p!r}: perturbed and baseline runs {reask['mark'].removeprefix('arms ')} "
                           f"({reask['test']}, {reask['unit']}): their answers were obtained differently")
        return out

    def readability(self) -> dict[str, dict[str, Any]]:
        """Per perturbation: whether the perturbed runs' replies could be read as often as
        their baselines' (arm A perturbed, B baseline; :mod:`simcore.analysis.readability`),
        Holm across the perturbations, with the test of their answers given only when asked
        again (``reask``, a family of its own). Empty for a study recorded before pairs counted
        replies."""
        if self._readability is None:
            self._readability = self._test_readability()
        return self._readability

    def _test_readability(self) -> dict[str, dict[str, Any]]:
        if "replies_perturbed" not in self.pairs.columns:
            return {}
        records = {}
        for p in self.perturbations:
            sub = self.pairs[(self.pairs["perturbation"] == p) & (self.pairs["baseline_status"] == "ok")]
            records[p] = readability.from_counts(
                (int(sub["replies_perturbed"].sum()), int(sub["unreadable_perturbed"].sum())),
                (int(sub["replies_baseline"].sum()), int(sub["unreadable_baseline"].sum())),
                _pairs(sub, "unreadable_only"))
            records[p]["reask"] = readability.reask_from_counts(
                *(_answers(sub, arm) for arm in ("perturbed", "baseline")), _pairs(sub, "reask_only"))
        return readability.decide(records, family="perturbations")

    def summary(self) -> pd.DataFrame:
        """One row per perturbation (pairs with a failed baseline left out).

        Columns: perturbation, n_pairs, n_applied, mean_d_norm (and its 95%
        percentile bootstrap interval, inside [0, 1]), mean_t_star_norm (over pairs that diverged),
        n_diverged, answer_changed_rate, recovery_rate (diverged pairs whose answer
        is unchanged and not null), each rate with its Wilson 95% interval,
        token_overhead (mean over pairs with usage, else "unavailable"),
        token_overhead_n, n_within_noise_floor (None when the floor is unknown),
        live_calls and reused_calls (prefix reuse), then one ``n_<category>``
        column per manifestation category and one ``group_<group>`` per group, then
        the readability of the perturbed runs against their baselines (:meth:`readability`):
        ``unreadable_share_perturbed``, ``unreadable_share_baseline``, ``readability_test``,
        ``readability_p_adjusted`` and ``readability_mark`` (None where they do not differ), and
        beside them the share of answers that came from a re-ask: ``reask_share_perturbed``,
        ``reask_share_baseline``, ``reask_test``, ``reask_p_adjusted`` and ``reask_mark``.
        ``attrs["warnings"]`` holds :meth:`warnings`.
        """
        reading = self.readability()
        rows = []
        for p in self.perturbations:
            sub = self.pairs[(self.pairs["perturbation"] == p) & (self.pairs["baseline_status"] == "ok")]
            d = stats.describe(sub["d_norm"].tolist(), kind=score(0, 1))
            diverged = sub[sub["d_norm"] > 0]
            t_star = stats.describe([_num(v) for v in diverged["t_star_norm"]], kind=score(0, 1))
            changed = int(sub["answer_changed"].astype(bool).sum())
            overheads = [x for x in (_num(v) for v in sub["token_overhead"]) if x is not None]
            within = [v for v in sub["within_noise_floor"] if v is not None and not _isnan(v)]
            recovered = diverged[~diverged["answer_changed"].astype(bool) & ~diverged["answer_null"].astype(bool)]
            row: dict[str, Any] = {
                "perturbation": p,
                "n_pairs": len(sub),
                "n_applied": int(sub["applied"].astype(bool).sum()),
                "mean_d_norm": d.mean,
                "d_norm_ci_low": d.ci_low,
                "d_norm_ci_high": d.ci_high,
                "mean_t_star_norm": t_star.mean,
                "n_diverged": len(diverged),
                "answer_changed_rate": changed / len(sub) if len(sub) else None,
                **_rate_ci("answer_changed", changed, len(sub)),
                "recovery_rate": len(recovered) / len(diverged) if len(diverged) else None,
                **_rate_ci("recovery", len(recovered), len(diverged)),
                "token_overhead": float(np.mean(overheads)) if overheads else UNAVAILABLE,
                "token_overhead_n": len(overheads),
                "n_within_noise_floor": int(sum(bool(v) for v in within)) if within else None,
                "live_calls": int(pd.to_numeric(sub["live_calls"], errors="coerce").fillna(0).sum()),
                "reused_calls": int(pd.to_numeric(sub["reused_calls"], errors="coerce").fillna(0).sum()),
            }
            counts = sub["manifestation"].value_counts()
            for c in CATEGORIES:
                row[f"n_{c}"] = int(counts.get(c, 0))
            for g in GROUP_ORDER:
                row[f"group_{g}"] = int(sum(counts.get(c, 0) for c in CATEGORIES if GROUPS[c] == g))
            if p in reading:
                r = reading[p]
                row.update(unreadable_share_perturbed=r["share_a"], unreadable_share_baseline=r["share_b"],
                           readability_test=r["test"], readability_p_adjusted=r["p_adjusted"],
                           readability_mark=r["mark"])
                q = r["reask"]
                row.update(reask_share_perturbed=q["share_a"], reask_share_baseline=q["share_b"],
                           reask_test=q["test"], reask_p_adjusted=q.get("p_adjusted"), reask_mark=q.get("mark"))
            rows.append(row)
        df = pd.DataFrame(rows)
        df.attrs["warnings"] = self.warnings()
        return df

    # -- writing ---------------------------------------------------------------
    def write_tables(self, out: Path) -> dict[str, str]:
        """``pairs.csv``, ``pairs.jsonl`` (with alignments), ``summary.csv``, ``noise.json``."""
        out = Path(out)
        pairs = self.pairs.drop(columns=["alignment"], errors="ignore")
        files = {
            "pairs_csv": out / "pairs.csv",
            "pairs_jsonl": out / "pairs.jsonl",
            "summary_csv": out / "summary.csv",
            "noise_json": out / "noise.json",
        }
        atomic_write(files["pairs_csv"], pairs.to_csv(index=False))
        records = self.pairs.replace({np.nan: None}).to_dict(orient="records")
        atomic_write(files["pairs_jsonl"], "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records))
        atomic_write(files["summary_csv"], self.summary().to_csv(index=False))
        atomic_write(files["noise_json"], json.dumps(self.noise, indent=2, sort_keys=True) + "\n")
        self.files.update({k: str(v) for k, v in files.items()})
        return {k: str(v) for k, v in files.items()}

    def report(self, out: str | Path, plots: bool = True) -> dict[str, str]:
        """Write ``report.md`` and (with ``plots``) ``plots/*.png`` into ``out``; return their paths."""
        out = Path(out)
        files: dict[str, Path] = {}
        if plots and len(self.pairs):
            files["plot_d_norm"] = out / "plots" / "d_norm.png"
            files["plot_manifestation"] = out / "plots" / "manifestation.png"
            files["plot_divergence_position"] = out / "plots" / "divergence_position.png"
            plot_d_norm(self, files["plot_d_norm"])
            plot_manifestation(self, files["plot_manifestation"])
            plot_divergence_position(self, files["plot_divergence_position"])
        files["report_md"] = out / "report.md"
        atomic_write(files["report_md"], self.markdown({k: p.relative_to(out).as_posix() for k, p in files.items()}))
        self.files.update({k: str(v) for k, v in files.items()})
        return {k: str(v) for k, v in files.items()}

    def markdown(self, plot_paths: Mapping[str, str] | None = None) -> str:
        """The report's text."""
        d = self.definition
        plot_paths = plot_paths or {}
        lines = [f"# Perturbation study: {d.get('scenario')}", ""]
        for w in self.warnings():
            lines += [f"> **WARNING:** {w}", ""]
        floor = self.noise.get("floor")
        floor_text = (
            f"{floor:.4f} (largest d_norm among {len(self.noise.get('reruns', []))} re-runs)"
            if self.noise.get("measured") else
            ("0 (deterministic stub: the same seed gives the same trace)" if floor == 0.0 else "not measured")
        )
        lines += [
            f"- backend: {d.get('backend', {}).get('name')} (model {d.get('backend', {}).get('model')})",
            f"- pairs per perturbation: {d.get('pairs')}; seeds: {', '.join(str(s) for s in d.get('seeds', []))}",
            f"- prefix reuse: {d.get('reuse')}; noise floor: {floor_text}",
            f"- config: `{json.dumps(d.get('config', {}), sort_keys=True)}`",
            "",
            "Perturbations:",
            "",
        ]
        lines += [f"- **{perturbation_label(i)}** `{p}`" for i, p in enumerate(self.perturbations)]
        summ = self.summary()
        if len(summ):
            summ = summ.assign(perturbation=[perturbation_label(i) for i in range(len(summ))])
            cols = ["perturbation", "n_pairs", "n_applied", "mean_d_norm", "mean_t_star_norm", "answer_changed_rate",
                    "recovery_rate", "token_overhead", "n_within_noise_floor", "live_calls", "reused_calls"]
            lines += ["", "## Summary", "", _md_table(summ[cols]), "", "Manifestations (pairs per category):", ""]
            cat_cols = ["perturbation"] + [f"n_{c}" for c in CATEGORIES]
            lines += [_md_table(summ[cat_cols].rename(columns=lambda c: c.removeprefix("n_"))), ""]
        titles = {
            "plot_d_norm": "d_norm per pair",
            "plot_manifestation": "Manifestations",
            "plot_divergence_position": "Where divergence began",
        }
        for key, title in titles.items():
            if key in plot_paths:
                lines += [f"## {title}", "", f"![{title}]({plot_paths[key]})", ""]
        lines += ["## Pairs", ""]
        cols = ["perturbation", "seed", "applied", "d_norm", "t_star_norm", "reroutes", "early_termination",
                "extended_execution", "answer_changed", "answer_null", "manifestation", "token_overhead",
                "within_noise_floor"]
        label = {p: perturbation_label(i) for i, p in enumerate(self.perturbations)}
        lines += [_md_table(self.pairs[cols].assign(perturbation=self.pairs["perturbation"].map(label))), ""]
        lines += ["Metric definitions: docs/perturbation.md in the simcore repository.", ""]
        return "\n".join(lines)

    # -- loading ---------------------------------------------------------------
    @classmethod
    def load(cls, study_dir: str | Path) -> "PerturbationResults":
        """Read a study directory written by :func:`simcore.perturbation.study.write_study`."""
        study_dir = Path(study_dir)
        study = read_record(study_dir / "study.json", {"definition": OBJECT})
        rows = read_jsonl(study_dir / "pairs.jsonl")
        return cls(study["definition"], pd.DataFrame(rows), read_record(study_dir / "noise.json"))

    @classmethod
    def from_sweep(cls, sweep_dir: str | Path) -> "PerturbationResults":
        """Gather the pairs of a batch sweep of ``perturbation.<scenario>``.

        Each finished trial's ``results.json`` holds its pair. The rows are
        labelled ``SPEC @ field=value,...`` by the sweep's grid and condition
        fields (other than ``perturb``), so that the summary has one row per
        perturbation and parameter cell. The noise floor is the largest d_norm
        among all the re-runs of the sweep, and every pair's
        ``within_noise_floor`` is measured against it.

        Raises:
            ValueError: when the directory holds no finished perturbation pairs.
        """

        sweep_dir = Path(sweep_dir)
        definition = read_definition(sweep_dir) or {}
        axes = [name for name, _ in definition.get("grid", [])]
        if definition.get("conditions"):
            axes.append(definition["conditions"][0])
        axes = [a for a in axes if a != "perturb"]
        table = pd.read_csv(sweep_dir / "results.csv")
        ok = table[(table["status"] == "ok") & table["run_dir"].notna()]
        rows, reruns, runs_per_seed = [], [], 0
        for _, trial in ok.iterrows():
            results = read_run(sweep_dir / trial["run_dir"], trace=False).results
            if "pair" not in results:
                raise ValueError(f"sweep: {sweep_dir} is not a sweep of perturbation.<scenario>")
            row = dict(results["pair"])
            if axes:
                row["perturbation"] += " @ " + ",".join(f"{a}={trial[a]}" for a in axes)
            rows.append({**row, "run_dir": trial["run_dir"]})
            reruns += results["noise"]["reruns"]
            runs_per_seed = results["noise"]["runs_per_seed"]
        if not rows:
            raise ValueError(f"sweep: {sweep_dir} has no finished perturbation pairs")
        manifest = read_manifest(sweep_dir / ok["run_dir"].iloc[0])
        noise = noise_summary(BackendSpec.from_dict(manifest["backend"]), reruns, runs_per_seed)
        df = pd.DataFrame(rows)
        df["noise_floor"] = noise["floor"]
        df["within_noise_floor"] = None if noise["floor"] is None else df["d_norm"] <= noise["floor"]
        return cls({
            "scenario": manifest["scenario"],
            "config": definition.get("base_config", manifest["config"]),
            "perturbations": list(dict.fromkeys(df["perturbation"])),
            "pairs": int(df.groupby("perturbation").size().max()),
            "seeds": sorted({int(x) for x in df["seed"]}),
            "backend": manifest["backend"],
            "reuse": manifest["config"].get("reuse"),
            "noise_floor_runs": runs_per_seed,
            "sweep": str(sweep_dir),
        }, df, noise)


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def format_cell(v: Any) -> str:
    """A table cell: floats to 3 decimals, booleans yes/no, nothing for None/NaN."""
    if v is None or _isnan(v):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.3f}"
    return str(v).replace("|", "\\|")


def perturbation_label(i: int) -> str:
    """The short name of the ``i``-th perturbation (from 0) in tables and plots: ``#1``, ``#2``, ...

    ``#`` starts no agent's name, so a label never reads as an agent (``P1`` would,
    in context_corrosion).
    """
    return f"#{i + 1}"


def _md_table(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(str(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(format_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


# -- plots -----------------------------------------------------------------------

def _label(i: int, spec: str, width: int = 38) -> str:
    short = spec if len(spec) <= 2 * width else spec[: 2 * width - 3] + "..."
    label = perturbation_label(i)
    return f"{label}: " + "\n".join(textwrap.wrap(short, width)) if short else label


def _figure(n_rows: int, width: float = 8.5, layout: str | None = None):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, 1.6 + 0.75 * max(1, n_rows)), layout=layout)


def _jitter(n: int) -> np.ndarray:
    # Fixed offsets (no randomness): points of one row spread over +-0.18.
    return np.zeros(n) if n < 2 else np.linspace(-0.18, 0.18, n)


def plot_d_norm(res: PerturbationResults, path: Path) -> None:
    """Each pair's d_norm per perturbation (points, and a box from 5 pairs on), with the noise floor."""
    specs = res.perturbations
    fig = _figure(len(specs))
    ax = fig.subplots()
    for i, p in enumerate(specs):
        x = res.pairs.loc[res.pairs["perturbation"] == p, "d_norm"].astype(float).to_numpy()
        y = len(specs) - 1 - i
        if len(x) >= 5:
            ax.boxplot([x], positions=[y], vert=False, widths=0.5, showfliers=False,
                       medianprops={"color": "black"}, boxprops={"color": "0.5"})
        ax.scatter(np.sort(x), y + _jitter(len(x)), s=22, color="#1565c0", alpha=0.75, zorder=3,
                   label="pair" if i == 0 else None)  # every row has its pairs
    floor = res.noise.get("floor")
    if floor is not None:
        ax.axvline(floor, color="#c62828", linestyle="--", linewidth=1.2,
                   label=f"noise floor ({floor:.3f}{'' if res.noise.get('measured') else ', deterministic'})")
    ax.set_yticks(range(len(specs)), [_label(i, p) for i, p in enumerate(specs)][::-1], fontsize="small")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.6, len(specs) - 0.4)
    ax.set_xlabel("d_norm (Levenshtein distance of structural signatures / longer trace)")
    ax.set_title(f"{res.definition.get('scenario')}: trace divergence per pair")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    # (through the module: save_figure is looked up per call, and tests replace it)
    figures.save_figure(fig, path, tight=True)


def plot_manifestation(res: PerturbationResults, path: Path) -> None:
    """Stacked bars: pairs per manifestation category, per perturbation."""
    specs = res.perturbations
    fig = _figure(len(specs), width=8.5)
    ax = fig.subplots()
    left = np.zeros(len(specs))
    ys = np.arange(len(specs))[::-1]
    for c in CATEGORIES:
        counts = np.array([
            int((res.pairs.loc[res.pairs["perturbation"] == p, "manifestation"] == c).sum()) for p in specs
        ])
        if counts.any():
            ax.barh(ys, counts, left=left, color=_COLORS[c], edgecolor="white", height=0.6,
                    label=f"{c}\n  group: {manifestation_group(c)}")
            left += counts
    ax.set_yticks(ys, [_label(i, p) for i, p in enumerate(specs)], fontsize="small")
    ax.set_xlabel("pairs")
    ax.set_title(f"{res.definition.get('scenario')}: manifestation of each pair (category, group)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False,
              title="category", title_fontsize="small", labelspacing=0.9)
    figures.save_figure(fig, path, tight=True)


def plot_divergence_position(res: PerturbationResults, path: Path) -> None:
    """t*_norm of each diverged pair, and where the perturbation first acted (share of the baseline trace)."""
    specs = res.perturbations
    # Constrained, so that the figure's legend gets a row of its own below the axis label.
    fig = _figure(len(specs), layout="constrained")
    ax = fig.subplots()
    applied_label = "perturbation applied (event / baseline events)"
    diverged_label = "divergence began (t* / aligned pairs)"
    for i, p in enumerate(specs):
        sub = res.pairs[res.pairs["perturbation"] == p]
        y = len(specs) - 1 - i
        t = np.array([v for v in (_num(x) for x in sub["t_star_norm"]) if v is not None])
        s = np.array([v for v in (_num(x) for x in sub["point_share"]) if v is not None])
        if len(s):
            ax.scatter(s, np.full(len(s), y + 0.22), marker="v", s=40, color="0.45", zorder=2, label=applied_label)
            applied_label = None
        if len(t):
            ax.scatter(np.sort(t), y + _jitter(len(t)) * 0.6, s=24, color="#c62828", zorder=3, label=diverged_label)
            diverged_label = None
        else:
            ax.text(0.5, y, "no pair diverged", ha="center", va="center", color="0.5", fontsize="small")
    ax.set_yticks(range(len(specs)), [_label(i, p) for i, p in enumerate(specs)][::-1], fontsize="small")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.6, len(specs) - 0.4)
    ax.set_xlabel("position in the run (0 = start, 1 = end)")
    ax.set_title(f"{res.definition.get('scenario')}: where divergence began")
    ax.grid(axis="x", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        # Below the axis label, not on it: the figure's legend gets its own row.
        fig.legend(fontsize="small", loc="outside lower center", ncols=2, frameon=False)
    figures.save_figure(fig, path, tight=True)
