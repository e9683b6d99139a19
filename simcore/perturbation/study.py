"""A perturbation study: pairs for every perturbation and seed, the noise floor, the records.

:func:`run_study` runs, for each seed, one clean baseline, one perturbed run per
perturbation (all with that seed and the same config; baselines are shared by
the perturbations) and the noise-floor re-runs, and measures every pair.
:func:`write_study` writes ``<out>/perturbation/<study-id>/``:

- ``study.json``: the definition (scenario, config, perturbations, seeds, backend,
  re-runs, reuse, and the analysis ``options``: device, embedding cache, plots), the summary, the warnings and the prefix-reuse figures;
- ``pairs.csv`` / ``pairs.jsonl`` (the latter with each pair's alignment as a
  string of M/S/I/D), ``summary.csv``, ``noise.json``;
- ``report.md`` and ``plots/`` (d_norm distribution, manifestations, divergence position);
- ``runs/<scenario>/<run-id>/``: every run as an ordinary run directory
  (``pair<i>-baseline``, ``pair<i>-p<k>``, ``pair<i>-rerun<j>``), each replayable
  with ``python -m simcore.replay``; a perturbed run's manifest records its
  perturbation.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from backends.base import Backend
from backends.pricing import usage_cost
from backends.registry import BackendSpec, price_table
from simcore.analysis import settings
from simcore.analysis.divergence import CATEGORIES
from simcore.base.config import Config, ConfigError
from simcore.base.loops import outside_running_loop
from simcore.base.progress import progress_bar
from simcore.base.records import check_run_id, new_run_id, staged_dir, write_json
from simcore.perturbation.operators import parse_all
from simcore.perturbation.pairs import (
    REUSE,
    SeedRuns,
    StudyBackend,
    check_outcome,
    check_perturbations,
    default_noise_runs,
    noise_summary,
    paid_usage,
    pair_metrics,
    pair_seeds,
    rerun_divergence,
    run_seed,
)
from simcore.perturbation.results import (
    PerturbationResults,
    format_cell,
    perturbation_label,
)
from simcore.runs.runner import close_backend, scenario_backend, write_run
from simcore.runs.scenario import Scenario

MAX_PAIRS = 10_000
MAX_NOISE_RUNS = 100


@dataclass
class Study:
    """A finished study in memory: its results and every run."""

    results: PerturbationResults
    runs: list[SeedRuns]
    wall_s: float


def check_study(scenario: Scenario, config: Config, perturbations: Sequence[str], pairs: int, seed: int,
                noise_floor: int | None, spec: BackendSpec, reuse: str) -> tuple[list[str], int]:
    """Validate a study before anything runs; return (canonical SPECs, re-runs per seed).

    Raises:
        ConfigError: one line naming the field and what is allowed.
    """
    check_outcome(scenario)
    specs = parse_all(perturbations)
    if isinstance(pairs, bool) or not isinstance(pairs, int) or not 1 <= pairs <= MAX_PAIRS:
        raise ConfigError(f"pairs: must be an integer from 1 to {MAX_PAIRS}, got {pairs!r}")
    if noise_floor is None:
        noise_floor = default_noise_runs(spec)
    if isinstance(noise_floor, bool) or not isinstance(noise_floor, int) or not 0 <= noise_floor <= MAX_NOISE_RUNS:
        raise ConfigError(f"noise_floor: must be an integer from 0 to {MAX_NOISE_RUNS}, got {noise_floor!r}")
    if reuse not in REUSE:
        raise ConfigError(f"reuse: must be one of {', '.join(REUSE)}; got {reuse!r}")
    check_perturbations(scenario, config, seed, specs)
    return specs, noise_floor


async def run_study_async(
    scenario: Scenario,
    config: Config,
    perturbations: Sequence[str],
    *,
    pairs: int = 1,
    seed: int = 42,
    noise_floor: int | None = None,
    spec: BackendSpec | None = None,
    backend: Backend | None = None,
    reuse: str = "prefix",
    progress: bool = False,
) -> Study:
    """Run a study (see the module docstring); nothing is written.

    Args:
        scenario: The scenario (it must define ``outcome``).
        config: Its config, shared by every run.
        perturbations: SPEC strings (see :mod:`simcore.perturbation.operators`).
        pairs: Pairs per perturbation (seeds; see :func:`~simcore.perturbation.pairs.pair_seeds`).
        seed: The first pair's seed.
        noise_floor: Re-runs of each baseline; None: 0 on the stub, 1 on real backends.
        spec: Backend spec (the stub by default).
        backend: A ready backend (not closed here); built from ``spec`` when None.
        reuse: "prefix" (replay the baseline's responses up to the perturbation
            point) or "none" (send every call of the perturbed runs).
        progress: Show a progress bar on stderr.

    Raises:
        ConfigError: for bad input, before anything runs.
    """
    spec = spec or BackendSpec()
    specs, noise_runs = check_study(scenario, config, perturbations, pairs, seed, noise_floor, spec, reuse)
    seeds = pair_seeds(seed, pairs)
    owned = None
    if backend is None:
        owned = backend = scenario_backend(scenario, config, spec)
    views = StudyBackend(spec, backend)
    bar = None
    if progress:
        bar = progress_bar(len(seeds) * (1 + len(specs) + noise_runs), desc="perturbation study", unit="run",
                           dynamic_ncols=True)
    start = time.perf_counter()
    try:
        runs = list(await asyncio.gather(*(
            run_seed(scenario, config, s, specs, noise_runs, spec, views, reuse,
                     on_done=(bar.update if bar is not None else None))
            for s in seeds
        )))
    finally:
        if bar is not None:
            bar.close()
        await close_backend(owned)
    wall = time.perf_counter() - start
    reruns = [r for seed_runs in runs for r in rerun_divergence(seed_runs)]
    noise = noise_summary(spec, reruns, noise_runs)
    rows = []
    for k, p in enumerate(specs):
        for seed_runs in runs:
            rows.append(pair_metrics(scenario, seed_runs.baseline, seed_runs.perturbed[k],
                                     seed_runs.perturbations[k], noise["floor"]))
    phases = [e.fields["phase"] for r in runs for e in r.baseline.trace if "phase" in e.fields]
    definition = {
        "scenario": scenario.name,
        "config": config.to_dict(),
        "perturbations": specs,
        "pairs": pairs,
        "seed": seed,
        "seeds": seeds,
        "noise_floor_runs": noise_runs,
        "reuse": reuse,
        "backend": spec.to_dict(),
        "phases": list(dict.fromkeys(phases)),
        "options": settings.recorded(),  # --device, --embed-cache, --plots
    }
    return Study(PerturbationResults(definition, pd.DataFrame(rows), noise), runs, wall)


@outside_running_loop
def run_study(scenario: Scenario, config: Config, perturbations: Sequence[str], **kw: Any) -> Study:
    """Synchronous :func:`run_study_async` on a fresh event loop (from a running loop: on a worker thread)."""
    return asyncio.run(run_study_async(scenario, config, perturbations, **kw))


def cost_record(study: Study) -> dict[str, Any]:
    """Calls made, calls answered from a record (prefix reuse, a cassette), calls sent, and their cost."""
    calls = reused = live = 0
    cost = 0.0
    for seed_runs in study.runs:
        for trial in [seed_runs.baseline, *seed_runs.perturbed, *seed_runs.reruns]:
            r = trial.results.get("prefix_reuse", {})
            calls += r.get("calls", 0)
            reused += r.get("reused_calls", 0)
            live += r.get("live_calls", 0)
            cost += usage_cost(paid_usage(trial.world.usage, r), price_table(trial.backend))["cost_usd"]
    return {"calls": calls, "reused_calls": reused, "live_calls": live, "paid_cost_usd": cost}


def write_study(study: Study, out: str | Path = "runs", study_id: str | None = None,
                plots: bool = True) -> Path:
    """Write the study to ``<out>/perturbation/<study-id>/`` atomically; return the directory."""
    res = study.results
    d = res.definition
    study_id = check_run_id(study_id or f"{d['scenario']}-{new_run_id(d['seed'])}")
    final = Path(out) / "perturbation" / study_id
    with staged_dir(final) as stage:
        for i, seed_runs in enumerate(study.runs):
            write_run(seed_runs.baseline, stage / "runs", f"pair{i}-baseline")
            for k, trial in enumerate(seed_runs.perturbed):
                write_run(trial, stage / "runs", f"pair{i}-p{k}")
            for j, trial in enumerate(seed_runs.reruns):
                write_run(trial, stage / "runs", f"pair{i}-rerun{j}")
        res.write_tables(stage)
        res.report(stage, plots=plots)
        summary = res.summary()
        write_json(stage / "study.json", {
            "study_id": study_id,
            "definition": d,
            "warnings": res.warnings(),
            "noise_floor": {k: v for k, v in res.noise.items() if k != "reruns"},
            "calls": cost_record(study),
            "wall_s": study.wall_s,
            "summary": summary.to_dict(orient="records"),
        })
    res.files = {k: str(final / Path(v).relative_to(stage)) for k, v in res.files.items()}
    return final


def study_title(res: PerturbationResults) -> list[str]:
    """What a study's summary says first: the scenario, the pairs and each perturbation's label."""
    return [f"perturbation study of {res.definition['scenario']}: {len(res.pairs)} pairs",
            *(f"  {perturbation_label(i)} = {p}" for i, p in enumerate(res.perturbations))]


def calls_line(calls: Mapping[str, Any]) -> str:
    """What a study's summary says last: the calls it made, reused and sent (a :func:`cost_record`)."""
    return (f"calls: {calls['calls']} made, {calls['reused_calls']} answered from the baseline "
            f"(prefix reuse) or a cassette, {calls['live_calls']} sent (${calls['paid_cost_usd']:.4f})")


def format_summary(res: PerturbationResults, calls: dict[str, Any] | None = None) -> str:
    """The terminal summary: warnings first, then :func:`study_title`, the per-perturbation
    table and the manifestations, and :func:`calls_line`."""
    lines = []
    for w in res.warnings():
        bar = "!" * 78
        lines += [bar, f"WARNING: {w}", bar]
    summ = res.summary()
    labels = {p: perturbation_label(i) for i, p in enumerate(res.perturbations)}
    lines += study_title(res)
    cols = ["perturbation", "n_pairs", "n_applied", "mean_d_norm", "mean_t_star_norm",
            "answer_changed_rate", "recovery_rate", "token_overhead", "n_within_noise_floor"]
    table = summ[cols].assign(perturbation=summ["perturbation"].map(labels)).map(format_cell)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        lines.append(table.to_string(index=False))
    cats = summ[["perturbation"] + [c for c in summ.columns if c.startswith("n_") and c[2:] in CATEGORIES]]
    cats = cats.loc[:, (cats != 0).any(axis=0)].assign(perturbation=summ["perturbation"].map(labels))
    lines.append("manifestations:")
    lines.append(cats.rename(columns=lambda c: c.removeprefix("n_")).to_string(index=False))
    if calls is not None:
        lines.append(calls_line(calls))
    return "\n".join(lines)
