"""Context corrosion: does a structurally dominant agent collapse a group's diversity?

See ``../shared/seeds/context_corrosion.md`` for the experiment and the README for
the CLI. ``SCENARIO`` is what the framework runs.
"""

from scenarios.context_corrosion.analysis import analyze, summarize, write_artifacts
from scenarios.context_corrosion.behaviour import make_behaviour
from scenarios.context_corrosion.config import CorrosionConfig
from scenarios.context_corrosion.experiment import build
from simcore.scenario import ResultEntry, Scenario

SCENARIO = Scenario(
    name="context_corrosion",
    description=(
        "Context corrosion: D (800 tokens, speaks first, biased framing in run A) and "
        "peers (200 tokens) answer a task, discuss for N rounds and vote."
    ),
    config_type=CorrosionConfig,
    build=build,
    analyze=analyze,
    behaviour=make_behaviour,
    summarize=summarize,
    write_artifacts=write_artifacts,
    counterfactual=("biased", True, False),
    outcome=ResultEntry("final_positions"),
)
