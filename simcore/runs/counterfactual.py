"""Counterfactual pairs and Monte Carlo arms for any scenario with a counterfactual axis.

A scenario whose :class:`~simcore.runs.scenario.Scenario` sets ``counterfactual =
(field, a, b)`` can be run as two arms that differ only in that field:

- a **pair** (``--counterfactual``): arm A and arm B, both with the run seed;
- a **Monte Carlo** (``--trials N``): N trials per arm. The trial seeds are drawn
  from the run seed (``derive_seed(seed, "trial.<i>")``) and shared by both arms
  (common random numbers), so trial i of A and trial i of B form a pair.

All trials run concurrently on one asyncio loop, so a real backend overlaps all
their calls. The group gets a directory of its own, ``<out>/<scenario>/<group-id>/``,
and its trials sit inside it, so that ``<out>/<scenario>/`` keeps one entry per group:

- ``trials/<group-id>-A<i>/``, ``trials/<group-id>-B<i>/``: each trial's run
  directory (``summary.json`` names the folder, ``trials_dir``; :func:`trial_dir`
  finds a trial, in groups written before it too, whose trials sit beside the group);
- ``summary.json``: ids, seeds, per-arm aggregates of every scalar metric, and
  the comparison (the scenario's ``compare`` hook, or a generic one) with its
  ``readability`` (:mod:`simcore.analysis.readability`: whether the arms' replies
  could be read equally often); written last, so a group without it is one that
  was interrupted (its finished trials stay);
- ``trials.csv``: one row per trial (arm, seed, run id, status, every scalar metric);
- in ``summary.json``, ``backend``: the shared backend's totals (requests,
  attempts, retries, tokens, cost per provider), which are the sums of the
  trials' own figures in their ``timings.json``;
- ``plots/comparison.png``: arm A against arm B for each compared metric (N >= 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import dataclasses
import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from backends.registry import BackendSpec
from simcore.analysis import readability, stats
from simcore.analysis.basis import shares
from simcore.analysis.metric_kinds import Kind
from simcore.analysis.plots import (
    comparison_plot,
    pooled,
    run_plots_wanted,
    summary_plots_wanted,
)
from simcore.base.config import Config, ConfigError
from simcore.base.files import DamagedFile
from simcore.base.heartbeat import Heartbeat
from simcore.base.loops import outside_running_loop
from simcore.base.progress import progress_bar
from simcore.base.records import (
    RUN_ID,
    atomic_write,
    check_run_id,
    new_run_id,
    write_json,
)
from simcore.base.rng import derive_seed
from simcore.replies import quality
from simcore.runs.marks import annotate
from simcore.runs.runner import (
    TrialResult,
    close_backend,
    run_trial_async,
    scenario_backend,
    write_run_into,
)
from simcore.runs.scenario import Scenario

ARMS = ("A", "B")
# One range for --trials and the HTTP API's n_trials: a Monte Carlo of one trial
# per arm has no spread, so none of its statistics could be computed.
MIN_TRIALS = 2
MAX_TRIALS = 10_000
#: The folder of a group's directory that holds its trials' run directories (``summary.json``'s ``trials_dir``).
TRIALS_DIR = "trials"


def trial_seeds(seed: int, n_trials: int) -> list[int]:
    """The seeds of a Monte Carlo's trials, drawn from the run seed; shared by both arms."""
    return [derive_seed(seed, f"trial.{i}") for i in range(n_trials)]


def arm_configs(scenario: Scenario, config: Config) -> tuple[Config, Config]:
    """``config`` with the counterfactual field set to arm A's and arm B's value."""
    if scenario.counterfactual is None:
        raise ConfigError(f"counterfactual: scenario {scenario.name} defines no counterfactual axis")
    name, a, b = scenario.counterfactual
    return config.replace(**{name: a}), config.replace(**{name: b})


def scalar_metrics(results: dict[str, Any]) -> dict[str, float]:
    """The numeric scalars of a results object's ``metrics`` (booleans excluded)."""
    return {
        k: v for k, v in results.get("metrics", {}).items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def generic_compare(
    a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]], names: Sequence[str] | None = None,
    kinds: Mapping[str, Kind] | None = None,
) -> dict[str, Any]:
    """Compare arm A with arm B on scalar metrics (the ``Scenario.compare`` contract).

    Used for scenarios without ``compare`` (with their declared kinds), and by those
    with a fixed list of metrics (``names``). One trial per arm gives ``delta_mean``
    only; more give :func:`simcore.analysis.stats.compare_metrics` (paired when the arms'
    seeds match).

    Args:
        a: Arm A's results objects.
        b: Arm B's results objects.
        names: The metrics to compare (also the Holm family); booleans count as
            0/1 and missing values as None. Default: every scalar metric both arms have.
        kinds: The metrics' kinds (``Scenario.declared_kinds()``), from which the
            tests and intervals are chosen.
    """
    if names is None:
        rows_a, rows_b = [scalar_metrics(r) for r in a], [scalar_metrics(r) for r in b]
        names = sorted(set().union(*rows_a) & set().union(*rows_b)) if rows_a and rows_b else []
    else:
        def named(results: dict[str, Any]) -> dict[str, float | None]:
            # Booleans pass isinstance(int) and become 0/1; anything else non-numeric is missing.
            m = results.get("metrics", {})
            return {n: float(m[n]) if isinstance(m.get(n), (int, float)) else None for n in names}

        rows_a, rows_b = [named(r) for r in a], [named(r) for r in b]
    if len(a) == 1 and len(b) == 1:
        x, y = rows_a[0], rows_b[0]
        diff: dict[str, Any] = {
            n: {"delta_mean": None if x.get(n) is None or y.get(n) is None else x[n] - y[n]} for n in names
        }
        diff["statistical_mode"] = "single_trial_delta"
    else:
        seeds_a = [r.get("seed") for r in a]
        paired = seeds_a == [r.get("seed") for r in b]
        # Empty arms (a batch cell whose trials all failed) give entries without figures.
        first = int(seeds_a[0] or 0) if seeds_a else 0
        seed = derive_seed(first, "compare.bootstrap." + ",".join(map(str, seeds_a)))
        diff = stats.compare_metrics(rows_a, rows_b, names, paired_samples=paired, seed=seed, kinds=kinds)
        diff["statistical_mode"] = "multi_trial"
        diff["paired"] = paired
        diff["decision_rule"] = next((d["decided_by"] for d in diff.values() if "decided_by" in d), None)
    return {"difference_summary": diff}


def compared_metrics(comparison: dict[str, Any]) -> list[str]:
    """The metric names a comparison covers (its per-metric entries)."""
    diff = comparison.get("difference_summary", {})
    return [k for k, v in diff.items() if isinstance(v, dict) and "delta_mean" in v]


async def run_arms_async(
    scenario: Scenario,
    config: Config,
    seed: int,
    *,
    n_trials: int | None,
    spec: BackendSpec | None = None,
    out: str | Path = "runs",
    progress: bool = True,
    group_id: str | None = None,
    cancelled: Callable[[], bool] | None = None,
    plot_processes: bool = False,
) -> dict[str, Any]:
    """Run both arms, write every trial and the group summary; return the summary.

    Args:
        scenario: A scenario with a counterfactual axis.
        config: The base config (its counterfactual field is overridden per arm).
        seed: The run seed.
        n_trials: Trials per arm for a Monte Carlo; None for a single pair, both
            arms on ``seed`` itself.
        spec: Backend spec (stub by default).
        out: Output root.
        progress: Show a tqdm bar on stderr.
        group_id: Id of the group directory (generated if None).
        cancelled: Asked before each trial starts and before it is written; once it
            returns True, no trial starts or is written, and the call raises
            ``asyncio.CancelledError`` (trials already written stay, each whole).
        plot_processes: Draw every run's plots (``--plots all``) in worker
            processes (:func:`simcore.analysis.plots.pooled`), off the interpreter lock that
            the encoder and the other trials' analyses need. For a command line's
            process; a process that may itself be killed mid-run (the API's worker)
            leaves it off, so it never leaves drawing processes behind.

    Returns:
        The summary object (also written to ``summary.json``).
    """
    if n_trials is not None and not MIN_TRIALS <= n_trials <= MAX_TRIALS:
        raise ConfigError(f"trials: must be an integer from {MIN_TRIALS} to {MAX_TRIALS}, got {n_trials}")
    spec = spec or BackendSpec()
    cfg_a, cfg_b = arm_configs(scenario, config)
    mode = "counterfactual" if n_trials is None else "monte_carlo"
    seeds = [seed] if n_trials is None else trial_seeds(seed, n_trials)
    group_id = check_run_id(group_id or f"{'cf' if n_trials is None else 'mc'}-{new_run_id(seed)}")
    group_dir = _group_dir(out, scenario, group_id)
    if group_dir.exists():  # before any work, not after it
        raise FileExistsError(f"{group_dir} already exists")
    width = len(str(len(seeds) - 1))

    def run_id(arm: str, i: int) -> str:
        return f"{group_id}-{arm}" if n_trials is None else f"{group_id}-{arm}{i:0{width}d}"

    # A real backend is shared by all trials, so its concurrency and rate limits and
    # its budget hold for the whole group; each trial gets its own view (cassette).
    shared = None if spec.name == "stub" else scenario_backend(scenario, cfg_a, spec)

    bar = progress_bar(2 * len(seeds), desc=f"{scenario.name} {mode}", unit="trial", disable=not progress)

    loop = asyncio.get_running_loop()
    # One writer thread: run directories (plots above all) are written while the loop
    # goes on with other trials' calls and analysis; matplotlib stays on one thread.
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simcore-write")

    def write(trial: TrialResult, rid: str) -> str:
        path = write_run_into(trial, group_dir / TRIALS_DIR, rid)
        bar.update(1)  # from the writer thread: the loop may be busy analysing other trials
        heartbeat.trial(trial.status == "ok")
        return path.name

    def check() -> None:
        # Trials of a stub run may never yield to the loop, so a task cancel would
        # land only after all of them; this check stops the run between trials.
        if cancelled is not None and cancelled():
            raise asyncio.CancelledError

    async def one(arm: str, cfg: Config, i: int, s: int) -> tuple[TrialResult, str]:
        check()
        trial = await run_trial_async(scenario, cfg, s, spec, shared)
        check()
        rid = await loop.run_in_executor(writer, write, trial, run_id(arm, i))
        # The run is on disk and the summary needs only its results: drop the world,
        # or a long Monte Carlo holds every trial's world until the end.
        return dataclasses.replace(trial, world=None), rid

    jobs = [one(arm, cfg, i, s) for arm, cfg in zip(ARMS, (cfg_a, cfg_b)) for i, s in enumerate(seeds)]
    totals = None
    many_plots = pooled() if plot_processes and run_plots_wanted() and len(jobs) > 2 else contextlib.nullcontext()
    name = scenario.counterfactual[0]  # type: ignore[index]
    heartbeat = Heartbeat(group_dir, mode, 2 * len(seeds), about={
        "scenario": scenario.name, "seed": seed, "experiment_id": group_id,
        "counterfactual": {"field": name, "A": getattr(cfg_a, name), "B": getattr(cfg_b, name)}})
    with heartbeat:  # then finished, or how it stopped
        try:
            with many_plots:
                outcomes = await asyncio.gather(*jobs, return_exceptions=True)
            stats = getattr(shared, "stats", None)
            totals = stats() if callable(stats) else None
        finally:
            writer.shutdown(wait=True)
            bar.close()
            await close_backend(shared)
        for item in outcomes:
            if isinstance(item, BaseException):  # a bug, not a failed trial (those are results)
                raise item
        done: list[tuple[TrialResult, str]] = outcomes  # type: ignore[assignment]
        trials = {"A": done[: len(seeds)], "B": done[len(seeds):]}
        return write_summary(scenario, config, seed, mode, seeds, trials, out, group_id, totals)


def write_summary(
    scenario: Scenario,
    config: Config,
    seed: int,
    mode: str,
    seeds: list[int],
    trials: dict[str, list[tuple[TrialResult, str]]],
    out: str | Path,
    group_id: str,
    backend_totals: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compare the arms and write the group directory (summary, CSV, figure).

    ``backend_totals`` (a shared backend's :meth:`~backends.session.RunBackend.stats`)
    goes into the summary as ``backend``.
    """
    name, value_a, value_b = scenario.counterfactual  # type: ignore[misc]
    # Pairs in which either trial failed are left out, so the arms stay paired.
    ok = [i for i in range(len(seeds)) if all(trials[arm][i][0].status == "ok" for arm in ARMS)]
    res = {arm: [trials[arm][i][0].results for i in ok] for arm in ARMS}
    comparison = compare_arms(scenario, res["A"], res["B"]) if ok else {"difference_summary": {}}
    if ok:  # the arms share their seeds, so their runs pair reply by reply where they asked the same
        comparison["readability"] = readability.one(res["A"], res["B"], paired=True)
    annotate(scenario, comparison.get("difference_summary", {}))
    summary: dict[str, Any] = {
        "mode": mode,
        "experiment_id": group_id,
        "scenario": scenario.name,
        "seed": seed,
        "n_trials": len(seeds),
        "n_pairs_compared": len(ok),
        "counterfactual": {"field": name, "A": value_a, "B": value_b},
        "config": config.to_dict(),
        "trial_seeds": seeds,
        "run_A_trial_ids": [rid for _, rid in trials["A"]],
        "run_B_trial_ids": [rid for _, rid in trials["B"]],
        "trials_dir": TRIALS_DIR,
        "failed_trials": [
            {"run_id": rid, "arm": arm, "seed": t.seed, "error": t.error}
            for arm in ARMS for t, rid in trials[arm] if t.status != "ok"
        ],
        "run_A_aggregate": aggregate(scenario, res["A"]),
        "run_B_aggregate": aggregate(scenario, res["B"]),
        "parse_quality": {
            arm: quality.merge(t.results.get("parse_quality", {}) for t, _ in trials[arm]) for arm in ARMS
        },
        ("statistical_comparison" if mode == "monte_carlo" else "counterfactual_comparison"): comparison,
        "trials_csv": "trials.csv",
    }
    summary["warnings"] = quality.warnings(quality.merge(summary["parse_quality"].values()))
    if backend_totals is not None:
        summary["backend"] = backend_totals
    metrics = compared_metrics(comparison)
    # The trials are in the group's directory already: each file is written whole, and
    # summary.json last, as the mark of a finished group.
    group = _group_dir(out, scenario, group_id)
    group.mkdir(parents=True, exist_ok=True)
    atomic_write(group / "trials.csv", trials_csv(group_id, name, trials, seeds))
    if mode == "monte_carlo" and len(ok) >= 2 and metrics and summary_plots_wanted():
        comparison_plot(
            [scalar_metrics(r) for r in res["A"]], [scalar_metrics(r) for r in res["B"]],
            comparison.get("difference_summary", {}), group / "plots" / "comparison.png",
            metrics=metrics, labels=(f"A: {name}={value_a}", f"B: {name}={value_b}"),
            title=f"{scenario.name}: Monte Carlo, {len(ok)} paired trials per arm (seed {seed})",
        )
        summary["plots"] = {"comparison": "plots/comparison.png"}
    write_json(group / "summary.json", summary)
    return summary


def _group_dir(out: str | Path, scenario: Scenario, group_id: str) -> Path:
    return Path(out) / scenario.name / group_id


def trial_dir(group_dir: str | Path, summary: Mapping[str, Any], run_id: str) -> Path:
    """The run directory of trial ``run_id`` of the group in ``group_dir`` (whose ``summary.json``
    is ``summary``): inside the group, in its ``trials_dir``; beside it for a group written before
    the trials moved inside (2026-11), whose summary names no ``trials_dir``.

    Raises:
        DamagedFile: when the summary's ``trials_dir`` or ``run_id`` is not a plain name
            (a record must not lead outside the group's directory).
    """
    group_dir = Path(group_dir)
    sub = summary.get("trials_dir")
    for field, value in (("trials_dir", sub), ("run id", run_id)):
        if value is not None and not (isinstance(value, str) and RUN_ID.match(value) and ".." not in value):
            raise DamagedFile(group_dir / "summary.json", f"{field}: must be a plain directory name, got {value!r}")
    return group_dir / sub / run_id if sub is not None else group_dir.parent / run_id


def aggregate(scenario: Scenario, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Every scalar metric of an arm over its trials (:func:`simcore.analysis.stats.describe` by the metric's kind)."""
    rows = [scalar_metrics(r) for r in results]
    names = sorted(set().union(*rows)) if rows else []
    return {n: stats.describe([r.get(n) for r in rows], kind=scenario.kind_of(n)).to_dict() for n in names}


def compare_arms(scenario: Scenario, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """The scenario's ``compare`` of two arms, or :func:`generic_compare` with its declared kinds."""
    if scenario.compare is not None:
        return scenario.compare(a, b)
    return generic_compare(a, b, kinds=scenario.declared_kinds())


def trials_csv(
    group_id: str, field: str, trials: dict[str, list[tuple[TrialResult, str]]], seeds: list[int]
) -> str:
    """One row per trial: group, arm, the counterfactual value, index, seed, run id,
    status, wall seconds and every scalar metric (sorted columns)."""
    rows = []
    for arm in ARMS:
        for i, (t, rid) in enumerate(trials[arm]):
            rows.append({
                "experiment_id": group_id, "arm": arm, field: getattr(t.config, field), "trial": i,
                "seed": seeds[i], "run_id": rid, "status": t.status, "wall_s": round(t.wall_s, 6),
                **scalar_metrics(t.results),
                **shares(t.results.get("basis", {})),
                **quality.columns(t.results.get("parse_quality", {})),
            })
    head = ["experiment_id", "arm", field, "trial", "seed", "run_id", "status", "wall_s"]
    cols = head + sorted({k for r in rows for k in r} - set(head))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


@outside_running_loop
def run_arms(scenario: Scenario, config: Config, seed: int, **kwargs: Any) -> dict[str, Any]:
    """Synchronous :func:`run_arms_async` on a fresh event loop (from a running loop: on a worker thread)."""
    return asyncio.run(run_arms_async(scenario, config, seed, **kwargs))
