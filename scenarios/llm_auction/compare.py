"""``python -m scenarios.llm_auction compare``: the three mechanisms on shared seeds.

One run has one mechanism, so the comparison the seed asks for is its own
command. It runs every mechanism on the same N trial seeds (drawn from ``--seed``
with :func:`simcore.base.rng.derive_seed`), so the agents' private views are the same
across mechanisms within a trial and the differences are paired. It writes one
directory, atomically::

    <out>/llm_auction/compare-<utc>-s<seed>-<hex>/
        manifest.json        config, mechanisms, trial seeds, backend, models and the
                             trials' cost in dollars, versions, code revision
        comparison.json      per mechanism: correctness (pooled Wilson CI, and the
                             per-trial mean with the interval its kind calls for),
                             cost, reward, participation; by style; between
                             mechanisms, every metric of COMPARED for every pair of
                             mechanisms (paired; simcore.analysis.stats), one family: Holm
                             across all metrics x mechanism pairs
        summary.txt          the line the command prints first: each mechanism's pooled
                             correctness and how many differences were significant
        trials.csv           one row per (mechanism, trial): seed, status, every metric
        vignette_results.csv, agent_round_results.csv, bid_data.csv,
        agent_summary.csv, simulation_summary.csv   the seed's tables, all trials
        plots/correctness_by_mechanism.png, cost_vs_correctness.png,
              participation_by_style.png

Each trial is an ordinary run: ``python -m scenarios.llm_auction --mechanism M
--seed S`` with the same config reproduces it (its seed is in trials.csv).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from scenarios.llm_auction.analysis import TABLES, by_style, tables, write_tables
from scenarios.llm_auction.config import MECHANISMS, AuctionConfig
from scenarios.llm_auction.kinds import COMPARED, KINDS
from scenarios.llm_auction.plots import (
    correctness_by_mechanism,
    cost_vs_correctness,
    participation_by_style,
)
from simcore.api import (
    BackendConfigError,
    BackendSpec,
    ComparisonRow,
    ConfigError,
    OneLineParser,
    Scenario,
    add_common_args,
    add_config_args,
    annotate,
    apply_analysis_args,
    atomic_write,
    backend_spec,
    check_before_work,
    check_run_id,
    close_backend,
    code_revision,
    compare_one,
    comparison_lines,
    decide,
    derive_seed,
    describe,
    fail,
    figure,
    file_hashes,
    kind_of,
    new_run_id,
    package_versions,
    parse_seed,
    parse_trials,
    print_estimate,
    progress_bar,
    proportion_ci,
    readability_lines,
    readability_of_runs,
    resolve_config,
    run_trial_async,
    scale_of,
    scenario_backend,
    staged_dir,
    utc_now,
    write_json,
)
from simcore.api import (
    installed as installed_calibration,
)

ALPHA = 0.05


@dataclass
class Comparison:
    """All trials of a comparison, in memory."""

    config: AuctionConfig
    seed: int
    trial_seeds: list[int]
    mechanisms: list[str]
    frames: dict[str, pd.DataFrame]
    trials: pd.DataFrame
    results: dict[str, list[dict[str, Any]]]
    backend: BackendSpec


def trial_seeds(seed: int, n: int) -> list[int]:
    """The trial seeds of a comparison, drawn from its seed (independent of the mechanisms)."""
    return [derive_seed(seed, f"llm_auction.compare.{i}") for i in range(n)]


async def run_comparison_async(
    scenario: Scenario,
    cfg: AuctionConfig,
    seed: int,
    n_trials: int,
    mechanisms: Sequence[str] = MECHANISMS,
    spec: BackendSpec | None = None,
    progress: bool = False,
) -> Comparison:
    """Run every mechanism on the same trial seeds (trials of ``scenario``, llm_auction's);
    keep the tables of the trials that finished."""
    spec = spec or BackendSpec()
    seeds = trial_seeds(seed, n_trials)
    jobs = [(i, s, m) for i, s in enumerate(seeds) for m in mechanisms]
    # One real backend for all trials, so its concurrency and rate limits and its
    # budget hold for the whole comparison, and a missing key fails before any trial.
    shared = None if spec.name == "stub" else scenario_backend(scenario, cfg, spec)
    bar = progress_bar(len(jobs), desc="llm_auction compare", unit="trial", disable=not progress)

    async def one(s: int, m: str) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
        mcfg = cfg.replace(mechanism=m)
        trial = await run_trial_async(scenario, mcfg, s, spec, shared)
        bar.update(1)
        # Keep the results and tables only, so finished worlds can be freed.
        return trial.results, tables(trial.world, mcfg) if trial.status == "ok" else {}

    # All trials at once on one loop, so a real backend overlaps their calls;
    # gather keeps the job order, so the tables do not depend on timing.
    try:
        outcomes = await asyncio.gather(*(one(s, m) for _, s, m in jobs))
    finally:
        bar.close()
        await close_backend(shared)
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
    rows, results = [], {m: [] for m in mechanisms}
    for (i, s, m), (res, frames_of_trial) in zip(jobs, outcomes):
        results[m].append(res)
        rows.append({"mechanism": m, "trial": i, "seed": s, "status": res["status"], **res.get("metrics", {})})
        for name, frame in frames_of_trial.items():
            parts[name].append(frame)
    frames = {
        name: pd.concat(p, ignore_index=True) if p else pd.DataFrame() for name, p in parts.items()
    }
    return Comparison(cfg, seed, seeds, list(mechanisms), frames, pd.DataFrame(rows), results, spec)


def statistics(c: Comparison, scenario: Scenario) -> dict[str, Any]:
    """Per-mechanism figures with CIs, by style, and paired tests between mechanisms.

    The pair ``scenario`` calibrated (its counterfactual) carries its calibration marks.
    """
    vign, rounds, trials = c.frames["vignette_results"], c.frames["agent_round_results"], c.trials
    per_mech: dict[str, Any] = {}
    styles: dict[str, Any] = {}
    for m in c.mechanisms:
        v, r = vign[vign["mechanism"] == m], rounds[rounds["mechanism"] == m]
        t = trials[(trials["mechanism"] == m) & (trials["status"] == "ok")]
        k, n = int(v["correct"].sum()), len(v)
        lo, hi = proportion_ci(k, n)
        p_k, p_n = int(r["participated"].sum()), len(r)
        p_lo, p_hi = proportion_ci(p_k, p_n)
        per_mech[m] = {
            "trials_ok": int(len(t)),
            "trials_failed": int(((trials["mechanism"] == m) & (trials["status"] != "ok")).sum()),
            "correctness_pooled": {"rate": k / n if n else None, "k": k, "n": n, "ci_low": lo, "ci_high": hi},
            "participation_pooled": {
                "rate": p_k / p_n if p_n else None, "k": p_k, "n": p_n, "ci_low": p_lo, "ci_high": p_hi,
            },
            **{
                f"{key}_per_trial": describe(t[key].tolist(), kind=kind_of(KINDS, key)).to_dict() if key in t else None
                for key in (
                    "correctness", "majority_rate", "proposer_accuracy", "cost_per_vignette",
                    "spend_per_vignette", "mean_reward", "participation", "late_bid_rate",
                )
            },
        }
        styles[m] = by_style(r, v) if n else {}
    # The question is which mechanisms differ on which metric, so every metric of
    # every pair of mechanisms is one family: one Holm adjustment across all of them,
    # one adjusted p per row, and each interval at the level of the Holm step that decided its row.
    pairs = list(itertools.combinations(c.mechanisms, 2))
    pending, paired = {}, {}
    for a, b in pairs:
        ok = paired[a, b] = [
            (ra, rb) for ra, rb in zip(c.results[a], c.results[b])
            if ra["status"] == "ok" and rb["status"] == "ok"
        ]
        for key in COMPARED:
            pending[a, b, key] = compare_one(
                [x["metrics"].get(key) for x, _ in ok], [y["metrics"].get(key) for _, y in ok],
                kind_of(KINDS, key), paired_samples=True, seed=derive_seed(c.seed, f"compare.{a}.{b}.{key}"),
            )
    family = (f"comparisons ({len(COMPARED)} metrics x {len(pairs)} mechanism pair{'' if len(pairs) == 1 else 's'})")
    rows = decide(pending, family=family, alpha=ALPHA)
    # Whether each pair's replies could be read equally often: a family of its own (Holm
    # across the mechanism pairs), so it changes no metric's decision.
    reading = readability_of_runs({(a, b): ([x for x, _ in ok], [y for _, y in ok]) for (a, b), ok in paired.items()},
                                family="mechanism pairs", alpha=ALPHA)
    out = [{"a": a, "b": b, "n_pairs": len(paired[a, b]), **{key: rows[a, b, key] for key in COMPARED},
            "readability": reading[a, b]} for a, b in pairs]
    for p in out:  # the calibration's marks: on every pair that involves the confounded mechanism
        annotate(scenario, p, arms=(p["a"], p["b"]))
    return {"mechanisms": per_mech, "by_style": styles, "pairs": out}


def write_comparison(c: Comparison, stats: dict[str, Any], out: str | Path, run_id: str | None = None,
                     options: dict[str, str] | None = None) -> Path:
    """Write the comparison directory (see the module docstring); returns its path.

    ``options``: the analysis settings (:func:`simcore.api.apply_analysis_args`), recorded in the
    manifest; with ``plots`` ``none`` no plot is drawn.
    """
    run_id = check_run_id(run_id or f"compare-{new_run_id(c.seed)}")
    final = Path(out) / "llm_auction" / run_id
    with staged_dir(final) as stage:
        write_json(stage / "comparison.json", stats)
        atomic_write(stage / HEADLINE_FILE, headline(stats) + "\n")
        c.trials.to_csv(stage / "trials.csv", index=False)
        if not c.frames["vignette_results"].empty:
            write_tables(stage, c.frames)
        if not c.frames["vignette_results"].empty and (options or {}).get("plots") != "none":
            plots = stage / "plots"
            correctness_by_mechanism(c.frames["vignette_results"], plots / "correctness_by_mechanism.png",
                                     c.frames["agent_round_results"])
            cost_vs_correctness(c.trials[c.trials["status"] == "ok"], plots / "cost_vs_correctness.png")
            participation_by_style(c.frames["agent_round_results"], plots / "participation_by_style.png")
        # Last, so that it vouches for every other file, as a run's manifest does (simcore.base.files).
        every = [r for rs in c.results.values() for r in rs]
        write_json(stage / "manifest.json", {
            "scenario": "llm_auction", "command": "compare", "run_id": run_id, "seed": c.seed,
            "mechanisms": c.mechanisms, "trial_seeds": c.trial_seeds, "config": c.config.to_dict(),
            "backend": c.backend.to_dict(), "models": sorted({m for r in every for m in r.get("usage") or {}}),
            "cost_usd": sum(float(r.get("cost_usd") or 0.0) for r in every), "options": options or {},
            "versions": package_versions(), "code_revision": code_revision(), "created_utc": utc_now(),
            "files": file_hashes(stage),
        })
    return final


#: The file of a comparison directory that keeps :func:`headline` (the run browser opens its page with it).
HEADLINE_FILE = "summary.txt"


def headline(stats: dict[str, Any]) -> str:
    """What the comparison found, in one line: each mechanism's pooled correctness and how many
    differences between mechanisms were significant (the first line of :func:`report`)."""
    mechs = stats["mechanisms"]
    trials = {s["trials_ok"] + s["trials_failed"] for s in mechs.values()}
    failed = sum(s["trials_failed"] for s in mechs.values())

    def pooled(s: dict[str, Any]) -> str:
        p = s["correctness_pooled"]
        return "-" if p["rate"] is None else f"{p['rate']:.0%} ({p['k']}/{p['n']})"

    decided = [p[key]["significant"] for p in stats["pairs"] for key in COMPARED
               if isinstance(p[key].get("significant"), bool)]
    return (f"llm_auction compare: {len(mechs)} mechanisms on {'/'.join(map(str, sorted(trials)))} shared trial "
            f"seed(s){f', {failed} trials failed' if failed else ''}; correct (pooled): "
            + ", ".join(f"{m} {pooled(s)}" for m, s in mechs.items())
            + (f"; {sum(decided)} of {len(decided)} differences between mechanisms significant" if decided else ""))


def report(stats: dict[str, Any]) -> str:
    """A table for the terminal, after :func:`headline`."""

    def ci(d: dict[str, Any] | None, fmt: str = ".2f") -> str:
        if not d or d.get("mean", d.get("rate")) is None:
            return "-"
        mid = d.get("mean", d.get("rate"))
        unit = scale_of(d.get("bounds", [0.0, 1.0] if "rate" in d else None), (d.get("min"), d.get("max")))
        if d.get("ci_low") is None:
            return figure(mid, fmt, unit)
        return f"{figure(mid, fmt, unit)} [{figure(d['ci_low'], fmt, unit)}, {figure(d['ci_high'], fmt, unit)}]"

    lines = [headline(stats), "",
             f"{'mechanism':<16} {'correct (pooled)':<20} {'correct/trial':<20} {'spend/vignette $':<22} "
             f"{'reward/agent $':<22} participation"]
    for m, s in stats["mechanisms"].items():
        lines.append(
            f"{m:<16} {ci(s['correctness_pooled']):<20} {ci(s['correctness_per_trial']):<20} "
            f"{ci(s['spend_per_vignette_per_trial'], '.3f'):<22} {ci(s['mean_reward_per_trial'], '.3f'):<22} "
            f"{ci(s['participation_pooled'])}"
        )
    rows = [ComparisonRow(key, p[key], pair=f"{p['a']} - {p['b']} ({p['n_pairs']})")
            for p in stats["pairs"] for key in COMPARED]
    if rows:
        lines += ["", *comparison_lines("between mechanisms, a - b (pairs by trial seed)", rows)]
        for p in stats["pairs"]:
            lines += readability_lines(p.get("readability"), p["a"], p["b"], indent=f"  {p['a']} - {p['b']}: ")
    return "\n".join(lines)


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m scenarios.llm_auction compare",
        description=(
            "Run the three mechanisms on the same trial seeds and write the comparison: "
            "correctness, cost, reward and participation with 95% CIs, paired tests and plots. "
            "Config flags apply to every mechanism."
        ),
    )
    add_common_args(parser)
    parser.add_argument("--trials", default="30", help="trial seeds per mechanism, 1..10000 (default: 30)")
    parser.add_argument(
        "--mechanisms", default=",".join(MECHANISMS),
        help=f"comma-separated subset of {', '.join(MECHANISMS)} (default: all)",
    )
    add_config_args(parser, AuctionConfig)
    return parser


def parse_mechanisms(value: str) -> list[str]:
    """Validate ``--mechanisms``."""
    names = [m.strip() for m in value.split(",") if m.strip()]
    if not names or any(m not in MECHANISMS for m in names) or len(set(names)) != len(names):
        raise ConfigError(f"mechanisms: must be distinct names among {', '.join(MECHANISMS)}, got {value!r}")
    return names


def main(scenario: Scenario, argv: Sequence[str]) -> int:
    """The ``compare`` subcommand of ``scenario`` (llm_auction's, which passes itself); returns the exit status."""
    args = build_parser().parse_args(list(argv))
    try:
        seed = parse_seed(args.seed)
        n = parse_trials(args.trials, minimum=1)  # one seed: every mechanism on the same vignettes
        mechanisms = parse_mechanisms(args.mechanisms)
        if args.mechanism is not None:
            raise ConfigError("mechanism: compare runs several mechanisms; use --mechanisms")
        cfg = resolve_config(AuctionConfig, args)
        spec = backend_spec(args)
        options = apply_analysis_args(args, "all")
        if args.estimate:
            runs = [(cfg.replace(mechanism=m), s) for s in trial_seeds(seed, n) for m in mechanisms]
            return print_estimate(scenario, runs, spec, as_json=args.json)
        check_before_work(args.out, spec)
        installed_calibration(scenario)  # a damaged calibration.json is named before any trial runs
        # Worlds are built as trials start, so input that only building can reject
        # (e.g. a missing topology file) fails in the first trial, before any write.
        c = asyncio.run(run_comparison_async(scenario, cfg, seed, n, mechanisms, spec, progress=True))
    except (ConfigError, BackendConfigError) as exc:
        fail(str(exc))
    stats = statistics(c, scenario)
    out = write_comparison(c, stats, args.out, options=options)
    if args.json:
        print(json.dumps({**stats, "run_dir": str(out)}, indent=2, sort_keys=True, default=str))
    else:
        print(report(stats))
        print(f"comparison directory: {out}")
    return 0 if (c.trials["status"] == "ok").all() else 1
