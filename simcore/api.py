"""The Scenario API: every framework name a scenario needs, in one place.

A scenario package imports framework names from this module alone (its own modules
among themselves as it likes): the built-in scenarios do, and
``tests/golden/scenario_api.json`` records exactly this face, one entry per name in
:data:`__all__`, under :data:`SCENARIO_API_VERSION`. A name leaves or changes only
with a major version; the modules behind it may move between floors freely.

What it holds, by group (every name of :data:`__all__` is in one):

- Configs: ``Config``, ``ConfigError``, ``param``, ``check_with``, ``config_file``,
  ``config_values``, ``load_config_file``, ``resolve_config``.
- Seeds: ``MAX_SEED``, ``derive_seed``.
- The simulation: ``World``, ``Process``, ``Reply``, ``LLMAgent``, ``HISTORY_HEADER``,
  ``Message``, ``Memory``, ``FullMemory``, ``RecentMemory``, ``make_memory``, ``render``,
  ``build`` and ``validate_spec`` (topologies), and the protocols: ``ORDER_POLICIES``,
  ``Decision``, ``DecisionRule``, ``Majority``, ``Plurality``, ``decision_rule``,
  ``open_floor``, ``parallel``, ``sealed_bid_auction``, ``speaking_order``,
  ``speaking_round``, ``tally``, ``vote``.
- Reply fields: ``amount``, ``choice``, ``confidence``, ``flag``, ``json_example``,
  ``likert``, ``option``, ``text``, ``text_list``; ``quality_warnings``.
- Metrics and statistics: ``category``, ``continuous``, ``count``, ``proportion``,
  ``score``, ``kind_of``, ``Metric`` (how people read a metric: label, unit, description, key), ``describe``, ``compare_metrics``, ``compare_one``,
  ``decide``, ``decision_p``, ``error_bar``, ``interval_text``, ``level_text``,
  ``levels_vary``, ``percent``, ``row_notes``, ``row_scale``, ``proportion_ci``,
  ``verdict``, ``ComparisonRow`` and ``comparison_lines`` (a comparison for the terminal),
  ``basis``, ``shown``, ``EmbeddingStore``, ``encode``, ``draw_all``,
  ``run_plots_wanted``; figures at their resolution: ``figure``, ``scale_of``;
  readability: ``arm_of``, ``compare_readability``, ``decide_readability``,
  ``readability_of_runs`` (a command's comparisons as one family, from their runs' results),
  ``readability_lines``; calibration marks: ``annotate``, ``installed``.
- Scenarios and trials: ``SCENARIO_API_VERSION``, ``Scenario``, ``Null``,
  ``ResultEntry``, ``load_scenario``, ``run_scenario``, ``TrialResult``,
  ``run_trial_async``, ``run_arms_async``, ``trial_dir``, ``generic_compare``, ``MIN_TRIALS``,
  ``MAX_TRIALS``, ``scenario_backend``, ``close_backend``, ``write_run``, ``file_hashes``.
- Run files: ``RUN_ID``, ``OBJECT``, ``TEXT``, ``DamagedFile``, ``parse_json``,
  ``read_record``, ``read_run``, ``atomic_write``, ``write_json``, ``staged_dir``,
  ``check_run_id``, ``new_run_id``, ``code_revision``, ``package_versions``,
  ``utc_now``, ``progress_bar``.
- Command-line helpers, for a scenario's own commands (the built-ins' ``compare``,
  ``serve`` and the perturbation study's command line): ``OneLineParser``, ``fail``,
  ``parse_seed``, ``parse_int``, ``parse_trials``, ``parse_scenario_args``,
  ``add_common_args``, ``add_config_args``, ``apply_analysis_args`` (which returns the
  analysis settings a command's record keeps), ``backend_spec``, ``check_before_work``,
  ``print_estimate``, ``BackendConfigError``.
- The perturbation study, which ``scenarios.perturbation`` drives (its command and
  the ``perturbation.<scenario>`` variants) and a scenario rarely needs:
  ``operator_help``, ``parse_perturbation``, ``REUSE``, ``UNAVAILABLE``, ``SeedRuns``,
  ``StudyBackend``, ``PAIR_METRICS``, ``check_outcome``, ``default_noise_runs``, ``noise_summary``,
  ``paid_usage``, ``pair_metrics``, ``pair_seeds``, ``rerun_divergence``, ``run_seed``,
  ``PerturbationResults``, ``check_study``, ``cost_record``, ``format_summary``,
  ``run_study``, ``write_study``, and the study's command, ``perturbation_study_main``.
- Backends: ``Backend``, ``LLMRequest``, ``BackendSpec``, ``CASSETTE_FILE``, ``Entry``,
  ``write_cassette``, ``price_table``, ``usage_cost``, ``generic_behaviour``,
  ``keyed_generator``.
"""

from __future__ import annotations

from backends.base import Backend, LLMRequest
from backends.cassette import Entry, write_cassette
from backends.errors import BackendConfigError
from backends.pricing import usage_cost
from backends.registry import CASSETTE_FILE, BackendSpec, price_table
from backends.stub import generic_behaviour, keyed_generator
from simcore.analysis.basis import basis, shown
from simcore.analysis.comparison_table import ComparisonRow, comparison_lines
from simcore.analysis.embeddings import EmbeddingStore, encode
from simcore.analysis.glossary import Metric
from simcore.analysis.metric_kinds import (
    category,
    continuous,
    count,
    kind_of,
    proportion,
    score,
)
from simcore.analysis.plots import draw_all, run_plots_wanted
from simcore.analysis.readability import arm_of, readability_lines
from simcore.analysis.readability import compare as compare_readability
from simcore.analysis.readability import decide as decide_readability
from simcore.analysis.readability import of_runs as readability_of_runs
from simcore.analysis.resolution import figure, scale_of
from simcore.analysis.stats import (
    compare_metrics,
    compare_one,
    decide,
    decision_p,
    describe,
    error_bar,
    interval_text,
    level_text,
    levels_vary,
    percent,
    proportion_ci,
    row_notes,
    row_scale,
    verdict,
)
from simcore.base.config import Config, ConfigError, check_with, param
from simcore.base.config_file import config_file, load_config_file
from simcore.base.files import (
    OBJECT,
    TEXT,
    DamagedFile,
    parse_json,
    read_record,
    read_run,
)
from simcore.base.progress import progress_bar
from simcore.base.records import (
    RUN_ID,
    atomic_write,
    check_run_id,
    code_revision,
    new_run_id,
    package_versions,
    staged_dir,
    utc_now,
    write_json,
)
from simcore.base.rng import MAX_SEED, derive_seed
from simcore.cli import (
    add_common_args,
    add_config_args,
    apply_analysis_args,
    backend_spec,
    check_before_work,
    config_values,
    parse_trials,
    print_estimate,
    resolve_config,
)
from simcore.perturbation.command import main as perturbation_study_main
from simcore.perturbation.operators import operator_help, parse_perturbation
from simcore.perturbation.pairs import (
    PAIR_METRICS,
    REUSE,
    UNAVAILABLE,
    SeedRuns,
    StudyBackend,
    check_outcome,
    default_noise_runs,
    noise_summary,
    paid_usage,
    pair_metrics,
    pair_seeds,
    rerun_divergence,
    run_seed,
)
from simcore.perturbation.results import PerturbationResults
from simcore.perturbation.study import (
    check_study,
    cost_record,
    format_summary,
    run_study,
    write_study,
)
from simcore.replies.quality import warnings as quality_warnings
from simcore.replies.schema import (
    amount,
    choice,
    confidence,
    flag,
    json_example,
    likert,
    option,
    text,
    text_list,
)
from simcore.run import run_scenario
from simcore.runs.args import (
    OneLineParser,
    fail,
    parse_int,
    parse_scenario_args,
    parse_seed,
)
from simcore.runs.counterfactual import (
    MAX_TRIALS,
    MIN_TRIALS,
    generic_compare,
    run_arms_async,
    trial_dir,
)
from simcore.runs.marks import annotate, installed
from simcore.runs.runner import (
    TrialResult,
    close_backend,
    file_hashes,
    run_trial_async,
    scenario_backend,
    write_run,
)
from simcore.runs.scenario import (
    SCENARIO_API_VERSION,
    Null,
    ResultEntry,
    Scenario,
    load_scenario,
)
from simcore.sim.agents import HISTORY_HEADER, LLMAgent
from simcore.sim.kernel import Process, Reply, World
from simcore.sim.memory import FullMemory, Memory, RecentMemory, make_memory, render
from simcore.sim.messages import Message
from simcore.sim.protocols import (
    ORDER_POLICIES,
    Decision,
    DecisionRule,
    Majority,
    Plurality,
    decision_rule,
    open_floor,
    parallel,
    sealed_bid_auction,
    speaking_order,
    speaking_round,
    tally,
    vote,
)
from simcore.sim.topology import build, validate_spec

__all__ = [
    "add_common_args",
    "add_config_args",
    "amount",
    "annotate",
    "apply_analysis_args",
    "arm_of",
    "atomic_write",
    "Backend",
    "backend_spec",
    "BackendConfigError",
    "BackendSpec",
    "basis",
    "build",
    "CASSETTE_FILE",
    "category",
    "check_before_work",
    "check_outcome",
    "check_run_id",
    "check_study",
    "check_with",
    "choice",
    "close_backend",
    "code_revision",
    "compare_metrics",
    "compare_one",
    "compare_readability",
    "comparison_lines",
    "ComparisonRow",
    "confidence",
    "Config",
    "config_file",
    "config_values",
    "ConfigError",
    "continuous",
    "cost_record",
    "count",
    "DamagedFile",
    "decide",
    "decide_readability",
    "Decision",
    "decision_p",
    "decision_rule",
    "DecisionRule",
    "default_noise_runs",
    "derive_seed",
    "describe",
    "draw_all",
    "EmbeddingStore",
    "encode",
    "Entry",
    "error_bar",
    "fail",
    "figure",
    "file_hashes",
    "flag",
    "format_summary",
    "FullMemory",
    "generic_behaviour",
    "generic_compare",
    "HISTORY_HEADER",
    "installed",
    "interval_text",
    "json_example",
    "keyed_generator",
    "kind_of",
    "level_text",
    "levels_vary",
    "likert",
    "LLMAgent",
    "LLMRequest",
    "load_config_file",
    "load_scenario",
    "Majority",
    "make_memory",
    "MAX_SEED",
    "MAX_TRIALS",
    "Memory",
    "Message",
    "Metric",
    "MIN_TRIALS",
    "new_run_id",
    "noise_summary",
    "Null",
    "OBJECT",
    "OneLineParser",
    "open_floor",
    "operator_help",
    "option",
    "ORDER_POLICIES",
    "package_versions",
    "PAIR_METRICS",
    "paid_usage",
    "pair_metrics",
    "pair_seeds",
    "parallel",
    "param",
    "parse_int",
    "parse_json",
    "parse_perturbation",
    "parse_scenario_args",
    "parse_seed",
    "parse_trials",
    "percent",
    "perturbation_study_main",
    "PerturbationResults",
    "Plurality",
    "price_table",
    "print_estimate",
    "Process",
    "progress_bar",
    "proportion",
    "proportion_ci",
    "quality_warnings",
    "read_record",
    "read_run",
    "readability_lines",
    "readability_of_runs",
    "RecentMemory",
    "render",
    "Reply",
    "rerun_divergence",
    "resolve_config",
    "ResultEntry",
    "REUSE",
    "row_notes",
    "row_scale",
    "run_arms_async",
    "RUN_ID",
    "run_plots_wanted",
    "run_scenario",
    "run_seed",
    "run_study",
    "run_trial_async",
    "scale_of",
    "Scenario",
    "SCENARIO_API_VERSION",
    "scenario_backend",
    "score",
    "sealed_bid_auction",
    "SeedRuns",
    "shown",
    "speaking_order",
    "speaking_round",
    "staged_dir",
    "StudyBackend",
    "tally",
    "TEXT",
    "text",
    "text_list",
    "trial_dir",
    "TrialResult",
    "UNAVAILABLE",
    "usage_cost",
    "utc_now",
    "validate_spec",
    "verdict",
    "vote",
    "World",
    "write_cassette",
    "write_json",
    "write_run",
    "write_study",
]
