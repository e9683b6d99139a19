"""What a sweep runs: the grid, the condition axis, the trial seeds and the run ids.

A sweep is the Cartesian product of grid values (the *cells*), times the values of
one condition axis (e.g. ``biased`` True/False), times ``trials`` Monte Carlo
repetitions. Every config is validated exactly as the CLI validates it
(:func:`simcore.base.config.coerce_field`, then construction through
:meth:`Config.from_mapping`) and built once, before anything runs.

Seeds are drawn here, in the parent, from the sweep seed: trial ``t`` of a cell
gets ``derive_seed(sweep_seed, "trial:<cell key>:<t>")``, where the cell key is
the canonical JSON of the cell's parameters (``seed_scope="cell"``) or empty
(``seed_scope="sweep"``, the same seeds in every cell). All conditions of a cell
share their seeds, so A/B differences are paired. Keys are stable: adding a grid
value or more trials never changes the seeds of existing trials.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterator, Mapping, Sequence

from backends.base import canonical_json
from backends.registry import BACKENDS, BackendSpec, identity_spec
from simcore.base.config import Config, ConfigError, coerce_field
from simcore.base.rng import MAX_SEED, derive_seed
from simcore.runs.runner import build_world
from simcore.runs.scenario import Scenario

SEED_SCOPES = ("cell", "sweep")
NO_CONDITION = "none"


@dataclass(frozen=True)
class TrialJob:
    """One trial of the plan: what a worker needs to run and record it.

    Attributes:
        index: Position in the plan (cell-major, then condition, then trial).
        cell: Grid cell index.
        condition: Condition index (0 when there is no condition axis).
        trial: Monte Carlo repetition within the cell.
        seed: The run seed (shared by all conditions of the same cell and trial).
        run_id: Name of the trial's run directory.
        config: The validated config.
    """

    index: int
    cell: int
    condition: int
    trial: int
    seed: int
    run_id: str
    config: Config


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep definition and its trials.

    Attributes:
        scenario: The scenario.
        trials: Repetitions per cell and condition.
        seed: The sweep seed.
        seed_scope: "cell" (independent seeds per cell) or "sweep" (shared).
        grid: ``(field, values)`` pairs, coerced, in the order given.
        conditions: ``(field, values)`` of the condition axis, or None.
        base: The config every cell starts from.
        spec: Backend spec.
        jobs: All trials, in plan order.
    """

    scenario: Scenario
    trials: int
    seed: int
    seed_scope: str
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    conditions: tuple[str, tuple[Any, ...]] | None
    base: Config
    spec: BackendSpec
    jobs: tuple[TrialJob, ...]

    @cached_property
    def cells(self) -> list[dict[str, Any]]:
        """The parameters of each grid cell, in cell order."""
        names = [name for name, _ in self.grid]
        return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in self.grid))]

    @property
    def condition_labels(self) -> list[str]:
        """``field=value`` per condition, or ``["none"]`` without a condition axis."""
        if self.conditions is None:
            return [NO_CONDITION]
        field, values = self.conditions
        return [f"{field}={_label(v)}" for v in values]

    def definition(self) -> dict[str, Any]:
        """Everything that determines the sweep's results (plain JSON)."""
        return {
            "scenario": self.scenario.name,
            "trials": self.trials,
            "seed": self.seed,
            "seed_scope": self.seed_scope,
            "grid": [[name, list(values)] for name, values in self.grid],
            "conditions": None if self.conditions is None else [self.conditions[0], list(self.conditions[1])],
            "base_config": self.base.to_dict(),
            # Limits, timeouts and retries say how the replies were fetched, not what
            # they are: a resume may change them.
            "backend": identity_spec(self.spec).to_dict(),
        }

    @cached_property
    def sweep_id(self) -> str:
        """A short hash of :meth:`definition`: the same sweep always has the same id."""
        return hashlib.sha256(canonical_json(self.definition()).encode()).hexdigest()[:12]

    def dispatch_groups(self) -> Iterator[list[TrialJob]]:
        """Jobs grouped by (trial, cell), trial-major.

        Each group holds every condition of one cell and trial (a matched set), and
        trial-major order means that a sweep stopped early (budget, fail-fast) has
        balanced cells.
        """
        n_cond = 1 if self.conditions is None else len(self.conditions[1])
        n_cells = len(self.jobs) // (n_cond * self.trials)
        for t in range(self.trials):
            for c in range(n_cells):
                start = (c * n_cond) * self.trials
                yield [self.jobs[start + k * self.trials + t] for k in range(n_cond)]


def _label(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def parse_values(text: str, what: str) -> tuple[str, list[Any]]:
    """Split ``name=v1,v2`` (or ``name=["v1", "v2"]`` for values holding commas).

    Raises:
        ConfigError: when the text is malformed.
    """
    name, sep, rest = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name:
        raise ConfigError(f"{what}: must look like FIELD=V1,V2 (or FIELD=[JSON list]), got {text!r}")
    rest = rest.strip()
    if rest.startswith("["):
        try:
            values = json.loads(rest)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{what}: {name}: invalid JSON list {rest!r} ({exc.msg})") from None
        if not isinstance(values, list):
            raise ConfigError(f"{what}: {name}: must be a JSON list, got {rest!r}")
    else:
        values = [v.strip() for v in rest.split(",")]
    if not values or any(v == "" for v in values):
        raise ConfigError(f"{what}: {name}: needs at least one value and no empty ones, got {rest!r}")
    return name, values


def _coerce_axis(config_type: type[Config], what: str, name: str, values: Sequence[Any]) -> tuple[Any, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ConfigError(f"{what}: {name}: must be a list of values, got {values!r}")
    if not values:
        raise ConfigError(f"{what}: {name}: needs at least one value")
    out = tuple(coerce_field(config_type, name, v) for v in values)
    seen: list[Any] = []
    for v in out:
        if v in seen:
            raise ConfigError(f"{what}: {name}: lists {_label(v)} more than once")
        seen.append(v)
    return out


def build_plan(
    scenario: Scenario,
    trials: int,
    grid: Mapping[str, Sequence[Any]] | Sequence[tuple[str, Sequence[Any]]] | None = None,
    conditions: tuple[str, Sequence[Any]] | None = None,
    *,
    base: Config | Mapping[str, Any] | None = None,
    seed: int = 42,
    seed_scope: str = "cell",
    spec: BackendSpec | None = None,
) -> SweepPlan:
    """Validate a sweep and lay out its trials.

    Args:
        scenario: The scenario.
        trials: Repetitions per cell and condition (>= 1).
        grid: Field -> values; values may be CLI strings or Python values.
        conditions: ``(field, values)`` of the condition axis, or None.
        base: Fixed field values (a config or a mapping) that every cell starts from.
        seed: The sweep seed, 0..2**32-1.
        seed_scope: "cell" or "sweep" (see the module docstring).
        spec: Backend spec (the stub by default).

    Raises:
        ConfigError: one line naming the field and what is allowed.
    """
    config_type = scenario.config_type
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ConfigError(f"trials: must be an integer >= 1, got {trials!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed: must be an integer from 0 to {MAX_SEED}, got {seed!r}")
    if seed_scope not in SEED_SCOPES:
        raise ConfigError(f"seed_scope: must be one of {', '.join(SEED_SCOPES)}; got {seed_scope!r}")
    spec = spec or BackendSpec()
    if spec.name not in BACKENDS:
        raise ConfigError(f"backend: must be one of {', '.join(BACKENDS)}; got {spec.name!r}")
    if base is None:
        base_cfg = config_type()
    elif isinstance(base, Config):
        if not isinstance(base, config_type):
            raise ConfigError(f"config: must be a {config_type.__name__}, got {type(base).__name__}")
        base_cfg = base
    else:
        base_cfg = config_type.from_mapping(base)

    items = list(grid.items()) if isinstance(grid, Mapping) else list(grid or [])
    axes: list[tuple[str, tuple[Any, ...]]] = []
    for name, values in items:
        if name in (a for a, _ in axes):
            raise ConfigError(f"grid: {name}: given more than once")
        axes.append((name, _coerce_axis(config_type, "grid", name, values)))
    cond: tuple[str, tuple[Any, ...]] | None = None
    if conditions is not None:
        cname, cvalues = conditions
        if cname in (a for a, _ in axes):
            raise ConfigError(f"conditions: {cname}: is also a grid field; use one or the other")
        cond = (cname, _coerce_axis(config_type, "conditions", cname, cvalues))
        if len(cond[1]) < 2:
            raise ConfigError(f"conditions: {cname}: needs at least two values to compare")

    names = [a for a, _ in axes]
    cond_values: tuple[Any, ...] = (None,) if cond is None else cond[1]
    width_c = len(str(max(0, _n_cells(axes) - 1)))
    width_t = len(str(trials - 1))
    jobs: list[TrialJob] = []
    for c, combo in enumerate(itertools.product(*(v for _, v in axes))):
        cell = dict(zip(names, combo))
        key = canonical_json(cell) if seed_scope == "cell" else ""
        seeds = [derive_seed(seed, f"trial:{key}:{t}") for t in range(trials)]
        for k, cv in enumerate(cond_values):
            values = dict(cell) if cond is None else {**cell, cond[0]: cv}
            try:
                config = config_type.from_mapping(values, base=base_cfg)
            except ConfigError as exc:
                where = ", ".join(f"{n}={_label(v)}" for n, v in values.items())
                raise ConfigError(f"{exc} (grid cell {where})") from None
            stem = f"cell{c:0{width_c}d}" + ("" if cond is None else f"-cond{k}")
            for t in range(trials):
                jobs.append(TrialJob(len(jobs), c, k, t, seeds[t], f"{stem}-trial{t:0{width_t}d}", config))
    return SweepPlan(scenario, trials, seed, seed_scope, tuple(axes), cond, base_cfg, spec, tuple(jobs))


def _n_cells(axes: Sequence[tuple[str, Sequence[Any]]]) -> int:
    n = 1
    for _, values in axes:
        n *= len(values)
    return n


def check_buildable(plan: SweepPlan) -> None:
    """Build a world for every distinct config (on the stub), so that build-time
    errors (e.g. a topology that does not fit the group size) surface before any
    trial runs.

    Raises:
        ConfigError: naming the field and the grid cell.
    """
    stub = dataclasses.replace(plan.spec, name="stub")
    seen: set[tuple[int, int]] = set()
    for job in plan.jobs:
        if job.trial != 0 or (job.cell, job.condition) in seen:
            continue
        seen.add((job.cell, job.condition))
        try:
            build_world(plan.scenario, job.config, job.seed, stub).release()
        except ConfigError as exc:
            raise ConfigError(f"{exc} (run {job.run_id})") from None
