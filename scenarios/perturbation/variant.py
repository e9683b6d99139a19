"""``perturbation.<scenario>``: perturbation pairs of any scenario, for the batch runner.

``load_scenario("perturbation.context_corrosion")`` gives a scenario whose
config is context_corrosion's plus three fields, and one of whose trials is a
whole pair: the clean baseline, the perturbed run (same seed and config, prefix
reuse) and the noise-floor re-runs. So::

    python -m simcore.batch perturbation.context_corrosion --trials 5 \\
        --grid rounds=2,3 --conditions 'perturb=["drop:agent=P1,round=2","swap:round=1"]'

sweeps perturbations x scenario parameters. The fields:

- ``perturb``: the SPEC (default ``none``, a control pair);
- ``noise_floor``: re-runs of the baseline per pair (-1: 0 on the stub, 1 on
  real backends);
- ``reuse``: ``prefix`` (answer calls before the perturbation point from the
  baseline) or ``none``.

A trial's run directory holds the perturbed run's trace (``trace.jsonl``), the
pair in ``results.json`` (``pair``: every metric; ``metrics``: the scalars the
batch table shows), a cassette with every run of the pair (scoped
``baseline``, ``perturbed-0``, ``rerun-<k>``, so ``python -m simcore.replay``
replays the pair offline) and ``runs/<scenario>/{baseline,perturbed,rerun<k>}/``,
ordinary run directories. ``usage`` and ``cost_usd`` count only the calls sent.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

from simcore.api import (
    CASSETTE_FILE,
    PAIR_METRICS,
    REUSE,
    UNAVAILABLE,
    Backend,
    BackendSpec,
    Config,
    ConfigError,
    Entry,
    Scenario,
    SeedRuns,
    StudyBackend,
    TrialResult,
    World,
    category,
    check_outcome,
    check_with,
    continuous,
    count,
    default_noise_runs,
    load_scenario,
    noise_summary,
    paid_usage,
    pair_metrics,
    param,
    parse_perturbation,
    price_table,
    proportion,
    rerun_divergence,
    run_seed,
    score,
    usage_cost,
    write_cassette,
    write_run,
)

PREFIX = "Perturbation_"
FIELDS = ("perturb", "noise_floor", "reuse")
# The scalar metrics of a pair that become the batch table's columns.
BATCH_METRICS = (
    "applied", "d_norm", "t_star_norm", "reroutes", "early_termination", "extended_execution",
    "total_changes", "answer_changed", "answer_null", "manifestation", "group", "token_overhead",
    "noise_floor", "within_noise_floor", "reused_calls", "live_calls",
)
#: Their kinds and bounds (``Scenario.kinds``): the true/false ones are proportions.
KINDS = {
    **dict.fromkeys(("applied", "early_termination", "extended_execution", "answer_changed", "answer_null",
                     "within_noise_floor"), proportion()),
    **dict.fromkeys(("d_norm", "t_star_norm", "noise_floor"), score(0, 1)),
    **dict.fromkeys(("reroutes", "total_changes", "reused_calls", "live_calls"), count()),
    "manifestation": category(), "group": category(),
    "token_overhead": continuous(0),
}
_RUNS_KEY = "perturbation.runs"  # where a pair trial leaves its runs for write_artifacts

_scenarios: dict[str, Scenario] = {}


def variant(name: str) -> Scenario:
    """The scenario ``perturbation.<name>`` (built once per process).

    Raises:
        ValueError: for an unknown scenario, or one without an ``outcome``.
    """
    if name in _scenarios:
        return _scenarios[name]
    if name == "perturbation" or name.startswith("perturbation."):
        raise ValueError(f"scenario: perturbation.{name} is not a scenario; name the scenario to perturb")
    inner = load_scenario(name)
    if inner.name != name:  # another name of it (a dotted path of an entry point)
        _scenarios[name] = variant(inner.name)
        return _scenarios[name]
    try:
        check_outcome(inner)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    taken = [f for f in FIELDS if f in {x.name for x in dataclasses.fields(inner.config_type)}]
    if taken:
        raise ValueError(f"scenario: {name}'s config already has field(s) {', '.join(taken)}")
    cls_name = f"{PREFIX}{name}"
    config_type = dataclasses.make_dataclass(
        cls_name,
        [
            ("perturb", str, param("none", check=check_with(parse_perturbation),
                                   help="the perturbation SPEC (see --help of python -m scenarios.perturbation)")),
            ("noise_floor", int, param(-1, lo=-1, hi=100, help="re-runs of the baseline per pair; -1: 0 on "
                                       "the stub, 1 on real backends")),
            ("reuse", str, param("prefix", choices=REUSE, help="prefix: answer calls before the perturbation "
                                 "point from the baseline; none: send every call")),
        ],
        bases=(inner.config_type,),
        frozen=True,
    )
    # Picklable by reference (process pools): this module resolves the name (see __getattr__).
    config_type.__module__ = __name__
    config_type.__qualname__ = _qualname(name)
    scenario = Scenario(
        name=f"perturbation.{name}",
        description=(
            f"Perturbation pairs of {name}: one trial is a clean baseline, a perturbed run (--perturb "
            "SPEC) with the same seed and config, and the noise-floor re-runs; the metrics compare them."
        ),
        config_type=config_type,
        build=functools.partial(_build, name),
        analyze=functools.partial(_analyze, name),
        behaviour=functools.partial(_behaviour, name) if inner.behaviour else None,
        summarize=_summarize,
        write_artifacts=_write_artifacts,
        trial=functools.partial(_trial, name),
        kinds=KINDS,
        metrics=PAIR_METRICS,
    )
    _scenarios[name] = scenario
    return scenario


def _qualname(name: str) -> str:
    """The config class's attribute name here: pickle looks it up, and dots would nest."""
    return PREFIX + name if name.isidentifier() else f"{PREFIX}_{name.encode().hex()}"


def __getattr__(attr: str) -> Any:
    if attr.startswith(PREFIX):
        name = attr[len(PREFIX):]
        try:
            if name.startswith("_"):
                name = bytes.fromhex(name[1:]).decode()
            return variant(name).config_type
        except ValueError:
            pass
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def inner_config(inner: Scenario, config: Config) -> Config:
    """The inner scenario's own config (the perturbation fields dropped)."""
    return inner.config_type(**{f.name: getattr(config, f.name) for f in dataclasses.fields(inner.config_type)})


def _behaviour(name: str, config: Config) -> Any:
    inner = load_scenario(name)
    assert inner.behaviour is not None
    return inner.behaviour(inner_config(inner, config))


def _build(name: str, world: World, config: Any) -> None:
    """The perturbed world alone (what batch validation and ``--estimate`` build)."""
    inner = load_scenario(name)
    inner.build(world, inner_config(inner, config))
    world.intervention = perturbation = parse_perturbation(config.perturb)
    perturbation.validate(world)


def _analyze(name: str, world: World, config: Any) -> dict[str, Any]:
    inner = load_scenario(name)
    return inner.analyze(world, inner_config(inner, config))


def _combined(trials: list[TrialResult], reuses: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Usage of several runs, counting only the calls that were sent."""
    out: dict[str, dict[str, int]] = {}
    for trial, reuse in zip(trials, reuses):
        paid = paid_usage(trial.world.usage, reuse)
        for model, led in trial.world.usage.items():
            acc = out.setdefault(model, dict.fromkeys(
                ("calls", "errors", "prompt_tokens", "completion_tokens", "missing_usage"), 0))
            for k in ("calls", "prompt_tokens", "completion_tokens"):
                acc[k] += paid[model][k]
            acc["errors"] += led["errors"]
            acc["missing_usage"] += led["missing_usage"]
    return out


async def _trial(name: str, config: Any, seed: int, spec: BackendSpec, backend: Backend) -> TrialResult:
    """One pair: baseline, perturbed run and re-runs; the perturbed world is the trial's world."""
    scenario = variant(name)
    inner = load_scenario(name)
    icfg = inner_config(inner, config)
    noise_runs = config.noise_floor if config.noise_floor >= 0 else default_noise_runs(spec)
    start = time.perf_counter()
    runs = await run_seed(inner, icfg, seed, [config.perturb], noise_runs, spec, StudyBackend(spec, backend),
                          config.reuse)
    wall = time.perf_counter() - start
    noise = noise_summary(spec, rerun_divergence(runs), noise_runs)
    pair = pair_metrics(inner, runs.baseline, runs.perturbed[0], runs.perturbations[0], noise["floor"])
    trials = [runs.baseline, runs.perturbed[0], *runs.reruns]
    usage = _combined(trials, [t.results.get("prefix_reuse", {}) for t in trials])
    world = runs.perturbed[0].world
    world.state[_RUNS_KEY] = runs
    base = runs.baseline
    metrics = {k: (None if pair[k] == UNAVAILABLE else pair[k]) for k in BATCH_METRICS}
    results = {
        "scenario": scenario.name,
        "seed": seed,
        "status": base.status,
        "error": base.error,
        "inner_scenario": name,
        "metrics": metrics,
        "pair": pair,
        "noise": noise,
        "runs": {
            role: {"status": t.status, "n_events": len(t.trace), "trace_sha256": t.results["trace_sha256"]}
            for role, t in [("baseline", base), ("perturbed", runs.perturbed[0])]
            + [(f"rerun{k}", r) for k, r in enumerate(runs.reruns)]
        },
        "usage": usage,
        **usage_cost(usage, price_table(spec)),
        "n_events": len(world.trace),
        "trace_sha256": world.trace.sha256(),
    }
    return TrialResult(scenario, config, seed, spec, base.status, base.error, world, results, wall, base.encoder)


def _summarize(results: dict[str, Any]) -> str:
    p = results["pair"]
    return "\n".join([
        f"perturbation pair of {results['inner_scenario']} (seed {results['seed']}): {p['perturbation']}",
        f"  applied {p['applied']}, d_norm {p['d_norm']:.3f}, t*_norm {p['t_star_norm']}, "
        f"answer changed {p['answer_changed']}, manifestation {p['manifestation']} ({p['group']})",
    ])


def _rescoped(entries: list[Entry], scope: str) -> list[Entry]:
    return [dataclasses.replace(e, scope=scope) for e in entries]


def _write_artifacts(run_dir: Path, world: World, config: Any, results: dict[str, Any]) -> dict[str, Any]:
    """The pair's runs as run directories, and one cassette with all of them (scoped by role)."""
    runs: SeedRuns = world.state[_RUNS_KEY]
    roles = [("baseline", runs.baseline), ("perturbed", runs.perturbed[0])]
    roles += [(f"rerun{k}", r) for k, r in enumerate(runs.reruns)]
    entries: list[Entry] = []
    for role, trial in roles:
        write_run(trial, run_dir / "runs", role)
        scope = {"perturbed": "perturbed-0"}.get(role, role.replace("rerun", "rerun-"))
        entries += _rescoped(getattr(trial.world.backend, "entries", []), scope)
    (run_dir / CASSETTE_FILE).unlink(missing_ok=True)
    write_cassette(run_dir / CASSETTE_FILE, entries)
    return {"runs_dir": f"runs/{runs.baseline.scenario.name}"}
