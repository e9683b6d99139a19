"""simcore.analysis.metric_kinds: every metric declares its kind and bounds, and every built-in
scenario's metrics keep to theirs."""

from __future__ import annotations

import asyncio
import math

import pandas as pd
import pytest

from backends.registry import BackendSpec
from simcore.analysis.metric_kinds import (
    Kind,
    category,
    check_metrics,
    continuous,
    count,
    inferred,
    kind_of,
    proportion,
    score,
)
from simcore.batch.report import METRIC_PREFIX, _describe
from simcore.runs.runner import run_trial_async
from simcore.runs.scenario import load_scenario


def test_constructors_and_their_bounds():
    assert proportion() == Kind("proportion", 0.0, 1.0) and proportion().span() == 1.0
    assert score(1, 4).label() == "score in [1, 4]" and score(1, 4).bounded
    assert count().label() == "count >= 0" and not count().bounded and count().span() is None
    assert continuous().label() == "continuous any number" and continuous(0).low == 0.0
    assert category().label() == "category" and not category().numeric


@pytest.mark.parametrize("args, message", [
    (("ratio", 0, 1), "must be one of proportion, score, count, continuous, category"),
    (("score", 0, None), "a score needs both bounds"),
    (("score", 4, 1), "low must be below high"),
    (("continuous", math.inf, None), "bounds must be finite"),
])
def test_bad_kinds_are_refused_in_one_line(args, message):
    with pytest.raises(ValueError, match=message):
        Kind(*args)


def test_values_outside_a_kind_are_named():
    assert proportion().violation(0.5) is None and proportion().violation(True) is None
    assert "outside [0, 1]" in proportion().violation(1.5)
    assert "whole number" in count().violation(2.5) and count().violation(3) is None
    assert "outside >= 0" in count().violation(-1)
    assert "numbers, not 'x'" in score(1, 4).violation("x")
    assert "a label" in category().violation(3) and category().violation("a") is None
    assert continuous().violation(None) is None and continuous().violation(float("nan")) is None


def test_lookup_by_name_then_glob_then_proportions():
    kinds = {"participation": proportion(), "participation_*": score(0, 1), "likert_?_x": score(1, 4)}
    assert kind_of(kinds, "participation") == proportion()
    assert kind_of(kinds, "participation_timid") == score(0, 1)
    assert kind_of(kinds, "likert_a_x") == score(1, 4)
    assert kind_of(kinds, "agreement", ["agreement"]) == proportion()
    assert kind_of(kinds, "unknown") is None


def test_undeclared_metrics_are_inferred_from_their_values():
    assert inferred([True, False, None]) == proportion()
    assert inferred(["a", None]) == category()
    assert inferred([0, 1, 1]) == continuous()  # 0/1 numbers may be counts: declare them
    assert inferred([]) == continuous()


def test_check_metrics_names_every_problem():
    problems = check_metrics({"a": proportion(), "b_*": count()}, {"a": 2.0, "b_x": 1, "c": 0.1, "b_y": -3})
    assert problems == [
        "a: 2.0 lies outside [0, 1] (declared proportion in [0, 1])",
        "c: no declared kind (value 0.1)",
        "b_y: -3 lies outside >= 0 (declared count >= 0)",
    ]


def test_scenario_proportions_still_count_as_proportions():
    from dataclasses import replace

    old = replace(load_scenario("veil_of_ignorance"), kinds={}, proportions=frozenset({"agreement_first_round"}))
    assert old.kind_of("agreement_first_round") == proportion() and old.kind_of("fallback") is None
    assert old.declared_kinds() == {"agreement_first_round": proportion()}


# Every built-in scenario (and the perturbation variant), on the stub, in configurations
# that reach each metric's values: a metric without a declared kind, or a value outside
# its bounds, fails here.
RUNS = [
    ("context_corrosion", {"rounds": 2}),
    ("context_corrosion", {"rounds": 1, "biased": False}),
    ("veil_of_ignorance", {}),
    ("veil_of_ignorance", {"persuasion": 0.0}),
    ("llm_auction", {"n_agents": 8, "n_vignettes": 4}),
    ("llm_auction", {"n_agents": 8, "n_vignettes": 4, "mechanism": "free_discussion"}),
    ("llm_auction", {"n_agents": 8, "n_vignettes": 4, "mechanism": "turn_taking"}),
    ("acausal_cooperation", {"n_agents": 4, "rounds": 4}),
    ("acausal_cooperation", {"n_agents": 4, "rounds": 3, "identity_insight": False, "scripted": "tit_for_tat,always_defect", "embeddings": False}),
    ("perturbation.context_corrosion", {"rounds": 2, "perturb": "drop:agent=P1,round=2"}),
    ("perturbation.context_corrosion", {"rounds": 2, "perturb": "none"}),
]


@pytest.mark.parametrize("name, fields", RUNS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(RUNS)])
def test_every_metric_of_every_scenario_declares_its_kind_and_keeps_to_it(name, fields):
    scenario = load_scenario(name)
    config = scenario.config_type().replace(**fields)
    for seed in (1, 2):
        trial = asyncio.run(run_trial_async(scenario, config, seed, BackendSpec()))
        assert trial.status == "ok", trial.error
        metrics = trial.results["metrics"]
        assert metrics
        assert check_metrics(scenario.kinds, metrics, scenario.proportions) == []
        # ... and the summaries find that kind: a sweep's (by pattern too) and a Monte Carlo's.
        for name, value in metrics.items():
            declared = scenario.kind_of(name)
            assert declared is not None and kind_of(scenario.declared_kinds(), name) == declared, name
            column = pd.Series([float(value) if isinstance(value, bool) else value], name=METRIC_PREFIX + name)
            assert _describe(scenario.declared_kinds(), column).kind == declared.name, name
            # ... and how people read it (the browser's hover and glossary): a label and a
            # description; a percentage only of a share in [0, 1].
            info = scenario.metric_of(name)
            assert info is not None and info.description, name
            assert not info.percent or (declared.low, declared.high) == (0.0, 1.0), name
        assert set(scenario.key_metrics()) <= set(metrics) and scenario.key_metrics()


def test_a_sweep_reads_likert_means_as_scores_on_1_to_4():
    # veil declares likert_final_* and likert_initial_* as score(1, 4) by pattern; the sweep
    # looked kinds up by exact name and gave 3.89 [3.41, 4.37], a t interval beyond the scale.
    veil = load_scenario("veil_of_ignorance")
    for name in ("likert_final_floor_constraint", "likert_initial_floor_constraint"):
        s = _describe(veil.declared_kinds(), pd.Series([4.0, 3.67, 4.0], name=METRIC_PREFIX + name))
        assert s.kind == "score" and s.bounds == (1.0, 4.0) and 1 <= s.ci_low <= s.mean <= s.ci_high <= 4, name
