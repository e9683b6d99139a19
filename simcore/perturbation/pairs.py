"""Paired runs: a clean baseline, perturbed runs with the same seed and config, re-runs.

For one seed, :func:`run_seed` runs the baseline, one perturbed run per
perturbation and the noise-floor re-runs of the baseline, and
:func:`pair_metrics` compares each perturbed run with the baseline.

**Prefix reuse.** Every run gets its own view of one backend
(:class:`StudyBackend`). A perturbed run's view answers each request created
before the perturbation point from the baseline's recorded responses (keyed, as
in a cassette, by :meth:`LLMRequest.digest` and occurrence), and sends the rest.
So a study pays only for the calls from the point on. Re-runs always send every
call: they measure the backend's own nondeterminism.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from backends.base import Backend, canonical_json
from backends.cassette import Cassette, Entry
from backends.middleware import Ledger
from backends.pricing import usage_cost
from backends.registry import BackendSpec, price_table
from backends.session import RunBackend, TrialBackend
from simcore.analysis import readability
from simcore.analysis.divergence import (
    classify_manifestation,
    comparable_signatures,
    compare_signatures,
    control_flow,
    manifestation_group,
)
from simcore.analysis.glossary import Metric
from simcore.base.config import Config, ConfigError
from simcore.base.rng import derive_seed
from simcore.perturbation.operators import Perturbation, parse_perturbation
from simcore.runs.runner import TrialResult, build_world, run_trial_async, trial_scope
from simcore.runs.scenario import Scenario

UNAVAILABLE = "unavailable"
REUSE = ("prefix", "none")
_OPS = {"match": "M", "substitution": "S", "insertion": "I", "deletion": "D"}


def deterministic(spec: BackendSpec) -> bool:
    """Whether the backend gives the same trace for the same seed (only the stub does)."""
    return spec.name == "stub"


def default_noise_runs(spec: BackendSpec) -> int:
    """Re-runs of the clean baseline by default: 0 on the stub, 1 on real backends."""
    return 0 if deterministic(spec) else 1


def pair_seeds(seed: int, pairs: int) -> list[int]:
    """Seeds of the pairs: ``seed`` itself first, then ``derive_seed(seed, "pair:<i>")``.

    Pair 0's baseline is therefore exactly ``python -m scenarios.<name> --seed S``.
    """
    return [seed] + [derive_seed(seed, f"pair:{i}") for i in range(1, pairs)]


def check_outcome(scenario: Scenario) -> None:
    """Perturbation studies compare final answers; the scenario must say what its answer is."""
    if scenario.outcome is None:
        raise ConfigError(f"scenario: {scenario.name} defines no outcome (Scenario.outcome); "
                          "a perturbation study needs one to compare final answers")


def check_perturbations(scenario: Scenario, config: Config, seed: int, specs: Iterable[str]) -> None:
    """Validate each SPEC against a built (never run) world: agent names, edges.

    Raises:
        ConfigError: naming the operator and what is allowed.
    """
    world = build_world(scenario, config, seed, BackendSpec())
    try:
        for spec in specs:
            parse_perturbation(spec).validate(world)
    finally:
        world.release()


# -- backends ------------------------------------------------------------------

class CountingSource:
    """What a run's :class:`TrialBackend` answers from, counting what it reuses.

    Args:
        lookup: ``(scope, digest, occurrence) -> Entry | None``.
        gate: A perturbation: only requests created before its point are answered.
        cassette: A writable user cassette that live responses are also recorded into.
    """

    def __init__(self, lookup: Callable[[str | None, str, int], Entry | None], *,
                 gate: Perturbation | None = None, cassette: Cassette | None = None) -> None:
        self._lookup = lookup
        self._gate = gate
        self._cassette = cassette
        self.readonly = cassette is None or cassette.readonly
        self.reused: dict[str, dict[str, int]] = {}

    def get(self, scope: str | None, digest: str, occurrence: int) -> Entry | None:
        if self._gate is not None and not self._gate.in_prefix(digest, occurrence):
            return None
        entry = self._lookup(scope, digest, occurrence)
        if entry is not None and entry.kind == "response":
            led = self.reused.setdefault(entry.model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            usage = entry.body.get("usage") or (0, 0)
            led["calls"] += 1
            led["prompt_tokens"] += int(usage[0])
            led["completion_tokens"] += int(usage[1])
        return entry

    def put(self, entry: Entry) -> None:
        assert self._cassette is not None
        self._cassette.put(entry)


class StudyBackend:
    """Per-run views of one backend.

    Args:
        spec: The backend spec.
        backend: A bare backend (the stub, a test double), a shared
            :class:`RunBackend`, or a strict-replay :class:`TrialBackend` (replaying
            a recorded pair: each run is then answered from its own scope).
    """

    def __init__(self, spec: BackendSpec, backend: Backend) -> None:
        self.replay: Cassette | None = None
        self.run: RunBackend | None = None
        if isinstance(backend, TrialBackend) and backend.run is None:
            self.replay = backend.source
        elif isinstance(backend, RunBackend):
            self.run = backend
        else:
            self.run = RunBackend(spec.name, backend, Ledger(price_table(spec), None))

    def _replay(self, role: str) -> TrialBackend:
        return TrialBackend(None, role, source=self.replay)

    def baseline(self, scope: str) -> TrialBackend:
        """The baseline's view: like a plain run (answered from a user cassette when there is one)."""
        if self.run is None:
            return self._replay("baseline")
        cassette = self.run.cassette
        if cassette is None:
            return TrialBackend(self.run, scope)
        return TrialBackend(self.run, scope, source=CountingSource(cassette.get, cassette=cassette),
                            mode=self.run.mode)

    def perturbed(self, scope: str, index: int, baseline: TrialBackend, perturbation: Perturbation,
                  reuse: str) -> TrialBackend:
        """A perturbed run's view: the baseline's responses up to the point (``reuse="prefix"``)."""
        if self.run is None:
            return self._replay(f"perturbed-{index}")
        if reuse == "none":
            return TrialBackend(self.run, scope)
        recorded = {(e.digest, e.occurrence): e for e in baseline.entries if e.kind == "response"}
        source = CountingSource(lambda _s, d, o: recorded.get((d, o)), gate=perturbation)
        return TrialBackend(self.run, scope, source=source)

    def rerun(self, scope: str, k: int) -> TrialBackend:
        """A re-run's view: every call is sent (never answered from a record)."""
        if self.run is None:
            return self._replay(f"rerun-{k}")
        return TrialBackend(self.run, scope)


# -- runs ----------------------------------------------------------------------

@dataclass
class SeedRuns:
    """All runs of one seed.

    Attributes:
        seed: The seed.
        specs: The perturbations (canonical SPECs), parallel to ``perturbed``.
        baseline: The clean run.
        perturbed: One perturbed run per perturbation.
        perturbations: The perturbation objects (their logs and points).
        reruns: The noise-floor re-runs of the baseline.
    """

    seed: int
    specs: list[str]
    baseline: TrialResult
    perturbed: list[TrialResult] = field(default_factory=list)
    perturbations: list[Perturbation] = field(default_factory=list)
    reruns: list[TrialResult] = field(default_factory=list)


def _reuse_record(view: TrialBackend) -> dict[str, Any]:
    reused: dict[str, dict[str, int]] = {}
    if isinstance(view.source, CountingSource):
        reused = view.source.reused
    return {
        "calls": view.counts["calls"],
        "reused_calls": sum(v["calls"] for v in reused.values()),
        "live_calls": view.counts["live_calls"],
        "reused_usage": reused,
    }


def paid_usage(usage: Mapping[str, Mapping[str, int]], reuse: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """A run's usage minus what was answered from a record (what its calls cost)."""
    out: dict[str, dict[str, int]] = {}
    for model, led in usage.items():
        r = reuse.get("reused_usage", {}).get(model, {})
        out[model] = {k: int(led.get(k, 0)) - int(r.get(k, 0)) for k in ("calls", "prompt_tokens", "completion_tokens")}
    return out


async def run_seed(
    scenario: Scenario,
    config: Config,
    seed: int,
    specs: Sequence[str],
    noise_runs: int,
    spec: BackendSpec,
    views: StudyBackend,
    reuse: str = "prefix",
    on_done: Callable[[], None] | None = None,
) -> SeedRuns:
    """Run the baseline, the perturbed runs and the re-runs of one seed.

    The re-runs start with the baseline; the perturbed runs start when the
    baseline is done (they reuse its responses). Each trial's results get a
    ``role`` ("baseline", "perturbed", "rerun"), and a perturbed run's get its
    ``perturbation`` (SPEC, point, what was applied) and ``prefix_reuse``.
    """
    scope = trial_scope(scenario, config, seed)
    tick = on_done or (lambda: None)

    async def one(view: TrialBackend, role: str, intervention: Perturbation | None = None) -> TrialResult:
        trial = await run_trial_async(scenario, config, seed, spec, view, intervention)
        trial.results["role"] = role
        trial.results["prefix_reuse"] = _reuse_record(view)
        if intervention is not None:
            trial.results["perturbation"] = {
                "spec": intervention.describe(), "point": intervention.point, "applied": intervention.applied,
            }
        tick()
        return trial

    base_view = views.baseline(scope)
    first = await asyncio.gather(
        one(base_view, "baseline"), *(one(views.rerun(scope, k), "rerun") for k in range(noise_runs))
    )
    out = SeedRuns(seed, list(specs), first[0], reruns=list(first[1:]))
    out.perturbations = [parse_perturbation(s) for s in specs]
    out.perturbed = list(await asyncio.gather(*(
        one(views.perturbed(scope, i, base_view, p, reuse), "perturbed", p)
        for i, p in enumerate(out.perturbations)
    )))
    return out


# -- metrics -------------------------------------------------------------------

def outcome_of(scenario: Scenario, results: Mapping[str, Any]) -> Any:
    """The run's final answer: None for a failed run, else the scenario's ``outcome``."""
    if results.get("status") != "ok":
        return None
    assert scenario.outcome is not None
    return scenario.outcome(dict(results))


def total_tokens(usage: Mapping[str, Mapping[str, int]]) -> int | None:
    """Prompt + completion tokens of a run, or None when any call lacked usage."""
    if not usage or any(led.get("missing_usage", 0) for led in usage.values()):
        return None
    return sum(int(led["prompt_tokens"]) + int(led["completion_tokens"]) for led in usage.values())


def token_overhead(baseline: int | None, perturbed: int | None) -> float | str:
    """Perturbed tokens / baseline tokens, or "unavailable" (never 1.0) without usage."""
    if baseline is None or perturbed is None or baseline <= 0:
        return UNAVAILABLE
    return perturbed / baseline


def divergence(baseline: Sequence[str], perturbed: Sequence[str]) -> dict[str, Any]:
    """Distance, alignment counts, t* and control flow of two signature sequences
    (in comparison order: :func:`simcore.analysis.divergence.comparable_signatures`)."""
    cmp = compare_signatures(baseline, perturbed)
    cf = control_flow(baseline, perturbed, cmp)
    return {
        "n_events_baseline": len(baseline),
        "n_events_perturbed": len(perturbed),
        "distance": cmp.distance,
        "d_norm": cmp.d_norm,
        "substitutions": cmp.substitutions,
        "insertions": cmp.insertions,
        "deletions": cmp.deletions,
        "t_star": cmp.t_star,
        "t_star_norm": cmp.t_star_norm,
        "reroutes": cf.reroutes,
        "early_termination": cf.early_termination,
        "early_termination_count": cf.early_termination_count,
        "extended_execution": cf.extended_execution,
        "extended_execution_count": cf.extended_execution_count,
        "total_changes": cf.total_changes,
        "alignment": "".join(_OPS[p.op] for p in cmp.alignment),
    }


#: How people read a pair's scalar metrics (definitions: docs/perturbation.md); the
#: ``perturbation.<scenario>`` variants declare them as their ``Scenario.metrics``.
PAIR_METRICS = {
    "d_norm": Metric("d_norm", "How far the perturbed run's events departed from the baseline's: the edit distance "
                     "of their structural signatures (kind, agent, phase) / the longer run's length; 0 identical, "
                     "1 nothing in common.", key=True),
    "t_star_norm": Metric("t*_norm", "Where the two runs first part, as a share of the aligned events: near 0 "
                          "at once, near 1 at the end; empty when they never part.", key=True),
    "answer_changed": Metric("answer changed", "Whether the perturbed run's final answer (the scenario's "
                             "outcome) differs from the baseline's.", key=True),
    "manifestation": Metric("manifestation", "How the perturbation showed, from the taxonomy (docs/perturbation.md): "
                            "silent corruption, a detour, combined disruption or no observable effect.", key=True),
    "token_overhead": Metric("token ratio", "Perturbed run's tokens / the baseline's (prompt + completion): 1 "
                             "costs the same, 1.2 costs 20% more; unavailable without usage."),
    "applied": Metric("applied", "Whether any operator acted (a perturbation whose selector matched nothing "
                      "measures nothing)."),
    "reroutes": Metric("reroutes", "Aligned turns taken by a different agent: another agent at a decision point."),
    "early_termination": Metric("early termination", "The perturbed run is shorter and lacks the baseline's end."),
    "extended_execution": Metric("extended execution", "The perturbed run is longer and has an end the baseline "
                                 "lacks."),
    "total_changes": Metric("control-flow changes", "Reroutes plus the events cut off or added at the end."),
    "answer_null": Metric("no answer", "Whether the perturbed run ended without a final answer."),
    "group": Metric("manifestation group", "The manifestation's group: silent corruption, behavioural detours, "
                    "combined disruption or no observable effect."),
    "noise_floor": Metric("noise floor", "The largest d_norm between a baseline and its own re-runs: what the "
                          "backend's randomness alone produces (0 on the deterministic stub)."),
    "within_noise_floor": Metric("within noise floor", "Whether d_norm is at most the noise floor: no divergence "
                                 "beyond what re-running alone gives."),
    "reused_calls": Metric("reused calls", "Calls answered from the baseline (the prefix before the "
                           "perturbation point) or a cassette."),
    "live_calls": Metric("live calls", "Calls sent to the backend."),
}


def pair_metrics(
    scenario: Scenario, baseline: TrialResult, perturbed: TrialResult, perturbation: Perturbation,
    noise_floor: float | None,
) -> dict[str, Any]:
    """Every metric of one pair (definitions: ``docs/perturbation.md``)."""
    d = divergence(comparable_signatures(baseline.trace.events), comparable_signatures(perturbed.trace.events))
    before, after = outcome_of(scenario, baseline.results), outcome_of(scenario, perturbed.results)
    changed = canonical_json(before) != canonical_json(after)
    null = after is None
    category = classify_manifestation(
        changed, null, d["early_termination"], d["extended_execution"], d["reroutes"],
        d["total_changes"], d["d_norm"],
    )
    tb, tp = total_tokens(baseline.world.usage), total_tokens(perturbed.world.usage)
    point = perturbation.point
    reuse = perturbed.results.get("prefix_reuse", {})
    paid = paid_usage(perturbed.world.usage, reuse)
    read_b, read_p = readability.arm_of(baseline.results), readability.arm_of(perturbed.results)
    slots = readability.discordant(read_p, read_b)  # None where the two runs asked different questions
    reasks = readability.discordant_reasks(read_p, read_b)
    return {
        "perturbation": perturbation.describe(),
        "seed": baseline.seed,
        "applied": point is not None,
        "n_applied": len(perturbation.applied),
        "point_t": None if point is None else point["t"],
        "point_event": None if point is None else point["event"],
        "point_share": None if point is None or not len(baseline.trace) else point["event"] / len(baseline.trace),
        **{k: v for k, v in d.items() if k != "alignment"},
        "answer_changed": changed,
        "answer_null": null,
        "manifestation": category,
        "group": manifestation_group(category),
        "tokens_baseline": tb,
        "tokens_perturbed": tp,
        "token_overhead": token_overhead(tb, tp),
        "noise_floor": noise_floor,
        "within_noise_floor": None if noise_floor is None else d["d_norm"] <= noise_floor,
        "baseline_status": baseline.status,
        "perturbed_status": perturbed.status,
        "perturbed_error": None if perturbed.error is None else f"{perturbed.error['type']}: {perturbed.error['message']}"[:300],
        "calls_perturbed": reuse.get("calls"),
        "reused_calls": reuse.get("reused_calls"),
        "live_calls": reuse.get("live_calls"),
        "paid_cost_usd": usage_cost(paid, price_table(perturbed.backend))["cost_usd"],
        # How many replies each run could read, and, where they asked the same questions,
        # the slots unreadable in one run only (simcore.analysis.readability).
        "replies_baseline": read_b.replies,
        "unreadable_baseline": read_b.unreadable,
        "replies_perturbed": read_p.replies,
        "unreadable_perturbed": read_p.unreadable,
        "unreadable_only_perturbed": None if slots is None else slots[0],
        "unreadable_only_baseline": None if slots is None else slots[1],
        # ... and the answers given only when asked again (None for runs that did not count them).
        "answers_baseline": read_b.answers,
        "answers_perturbed": read_p.answers,
        "reask_read_baseline": read_b.reask_read,
        "reask_read_perturbed": read_p.reask_read,
        "reask_only_perturbed": None if reasks is None else reasks[0],
        "reask_only_baseline": None if reasks is None else reasks[1],
        "alignment": d["alignment"],
    }


def rerun_divergence(runs: SeedRuns) -> list[dict[str, Any]]:
    """d_norm of each re-run against its baseline."""
    base = comparable_signatures(runs.baseline.trace.events)
    return [
        {"seed": runs.seed, "rerun": k,
         "d_norm": compare_signatures(base, comparable_signatures(r.trace.events)).d_norm,
         "status": r.status}
        for k, r in enumerate(runs.reruns)
    ]


def noise_summary(spec: BackendSpec, reruns: Sequence[Mapping[str, Any]], requested: int) -> dict[str, Any]:
    """The noise floor: the largest d_norm among the re-runs.

    Without re-runs it is 0.0 on the deterministic stub, and unmeasured (None,
    with a warning) on any other backend.
    """
    out: dict[str, Any] = {"runs_per_seed": requested, "reruns": list(reruns), "deterministic": deterministic(spec)}
    if reruns:
        out.update(floor=max(float(r["d_norm"]) for r in reruns), measured=True, warning=None)
    elif deterministic(spec):
        out.update(floor=0.0, measured=False, warning=None)
    else:
        out.update(floor=None, measured=False, warning=(
            f"NOISE FLOOR NOT MEASURED: backend {spec.name!r} is not deterministic, so part or all of the "
            "divergence may be sampling noise rather than the perturbation; within_noise_floor is unknown. "
            "Re-run with --noise-floor 1 (or more)."
        ))
    return out
