"""How people read a metric (simcore.analysis.glossary): declarations, lookup by name or glob, key
metrics, and what a scenario that declares none gets in the run browser."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.analysis.glossary import Metric, key_metrics, metric_of
from simcore.runs.scenario import load_scenario
from simcore.view.figures import Vocabulary, vocabulary


def test_a_metric_needs_a_label_and_a_percentage_has_no_unit():
    with pytest.raises(ValueError, match="label must be a non-empty text"):
        Metric(" ")
    with pytest.raises(ValueError, match="a percentage has no unit"):
        Metric("share", unit="USD", percent=True)
    assert Metric("cost", unit="USD").money and not Metric("time", unit="s").money


def test_lookup_by_name_then_glob_and_key_metrics_in_declaration_order():
    declared = {"b": Metric("B", key=True), "share_*": Metric("share", key=True), "a": Metric("A", key=True),
                "c": Metric("C")}
    assert metric_of(declared, "share_x").label == "share" and metric_of(declared, "d") is None
    assert key_metrics(declared) == ["b", "a"]  # a glob names no one metric, so it is never key


def test_a_scenario_without_declarations_still_shows_its_first_numeric_metrics():
    bare = replace(load_scenario("veil_of_ignorance"), metrics={})
    assert bare.key_metrics() == [] and bare.metric_of("chosen_amount") is None
    words = Vocabulary(bare.name, bare.metrics, bare.declared_kinds())
    figures = words.key_figures({"zeta": 1, "alpha": 0.5, "label": "x", "beta": 2.0, "flag": True, "gamma": 3,
                                 "delta": 4})
    assert [f.name.name for f in figures] == ["alpha", "beta", "delta", "gamma"]
    assert [f.name.label for f in figures] == ["alpha", "beta", "delta", "gamma"]  # its names, undescribed
    assert vocabulary("no_such_scenario").key_names({"m": 1.0}) == ["m"]  # a run of one not installed here
