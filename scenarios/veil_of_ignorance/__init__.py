"""Veil of ignorance: can a group agree on a principle of distributive justice?

See ``../shared/seeds/veil_of_ignorance.md`` for the experiment and the README for
the CLI. ``SCENARIO`` is what the framework runs.
"""

from scenarios.veil_of_ignorance.analysis import (
    KINDS,
    METRICS,
    analyze,
    outcome,
    summarize,
    write_artifacts,
)
from scenarios.veil_of_ignorance.behaviour import make_behaviour
from scenarios.veil_of_ignorance.config import VeilConfig
from scenarios.veil_of_ignorance.experiment import build
from simcore.api import Null, Scenario

SCENARIO = Scenario(
    name="veil_of_ignorance",
    description=(
        "Veil of ignorance: agents rate four principles of income distribution, deliberate "
        "until they agree (or run out of rounds), rate again and are interviewed; then each "
        "draws an income class under the chosen principle. Agent lists (names, "
        "personalities, models), the distribution set and logging options come from a "
        "--config YAML file; see scenarios/veil_of_ignorance/configs/."
    ),
    config_type=VeilConfig,
    build=build,
    analyze=analyze,
    behaviour=make_behaviour,
    summarize=summarize,
    write_artifacts=write_artifacts,
    outcome=outcome,
    kinds=KINDS,
    metrics=METRICS,
    null=Null(
        config={"persuasion": 0.0},
        why="nothing anyone says moves anyone, so ratings after the talk equal those before",
        effects=("likert_shift_mean", "likert_abs_shift_mean", "likert_shift_maximize_minimum",
                 "likert_shift_maximize_average", "likert_shift_floor_constraint", "likert_shift_range_constraint"),
    ),
)
