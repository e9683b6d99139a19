"""Finding scenarios by name (simcore.runs.scenario.load_scenario): built-ins, entry points of
an installed distribution, dotted paths; what a run records; bad names."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from backends.registry import BackendSpec
from scenarios.context_corrosion import SCENARIO as CORROSION
from simcore.batch.worker import WorkerContext
from simcore.replay import main as replay_main
from simcore.replay import replay_async
from simcore.runs.runner import run_trial, write_run
from simcore.runs.scenario import (
    ScenarioNotFound,
    clear_cache,
    installed_names,
    installed_scenarios,
    load_scenario,
    summary_line,
)


def test_builtin_names_resolve_as_before():
    assert load_scenario("context_corrosion") is CORROSION
    assert load_scenario("scenarios.context_corrosion") is CORROSION  # its dotted path: the same
    assert load_scenario("context_corrosion:SCENARIO") is CORROSION
    v = load_scenario("perturbation.context_corrosion")
    assert v.name == "perturbation.context_corrosion" and v.trial is not None


def test_an_entry_point_and_the_dotted_paths_of_one_scenario(installed):
    s = load_scenario("mylab")
    assert s.name == "mylab" and s.description.startswith("My lab's study")
    assert load_scenario("mylab") is s  # cached: one object per name and process
    # The dotted path of what the entry point names gets the entry point's name, which finds it again.
    assert load_scenario("mylab_exp").name == "mylab"
    assert load_scenario("mylab_exp:SCENARIO").name == "mylab"
    # A dotted path no entry point names keeps the path as its name.
    assert load_scenario("mylab_exp:ALT").name == "mylab_exp:ALT"
    # A built-in name is never taken over by an entry point.
    assert load_scenario("context_corrosion") is CORROSION


def test_a_user_scenario_runs_records_its_name_and_replays(installed, tmp_path):
    s = load_scenario("mylab_exp")
    trial = run_trial(s, s.config_type(), 5)
    run_dir = write_run(trial, tmp_path / "runs")
    assert run_dir.parent.name == "mylab"
    assert '"scenario": "mylab"' in (run_dir / "manifest.json").read_text()
    assert asyncio.run(replay_async(run_dir)).identical


def test_replay_of_a_scenario_that_is_no_longer_installed_is_one_line(installed, tmp_path, capsys):
    s = load_scenario("mylab")
    run_dir = write_run(run_trial(s, s.config_type(), 5), tmp_path / "runs")
    manifest = run_dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"scenario": "mylab"', '"scenario": "mylab_gone"'))
    with pytest.raises(SystemExit) as exc:
        replay_main([str(run_dir)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: cannot replay {run_dir}: scenario: unknown scenario 'mylab_gone' (tried ")
    assert "installed: " in err and "mylab" in err


def test_a_user_scenario_found_by_name_pickles_for_the_process_pool(installed):
    for name in ("mylab", "mylab_exp:ALT", "perturbation.mylab_exp:ALT"):
        s = load_scenario(name)
        ctx = WorkerContext(s, BackendSpec(), "/tmp/x")
        back = pickle.loads(pickle.dumps(ctx))
        assert back.scenario.name == s.name and back.scenario.config_type is s.config_type
        cfg = s.config_type()
        assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_perturbation_pairs_of_a_user_scenario(installed):
    v = load_scenario("perturbation.mylab")
    assert v.name == "perturbation.mylab"
    assert load_scenario("perturbation.mylab_exp").name == "perturbation.mylab"  # same inner scenario
    cfg = v.config_type.from_mapping({"perturb": "delay:agent=A,by=10"})
    trial = run_trial(v, cfg, 3)
    assert trial.status == "ok" and trial.results["inner_scenario"] == "mylab"
    assert trial.results["metrics"]["applied"] == 1
    alt = load_scenario("perturbation.mylab_exp:ALT")
    assert alt.config_type.__name__ == "Perturbation_mylab_exp:ALT"  # what --help shows


@pytest.mark.parametrize("name, message", [
    ("broken", "scenario: loading entry point 'broken' (mylab_missing:SCENARIO) failed: "
               "ModuleNotFoundError: No module named 'mylab_missing'"),
    ("mylab_crash", "scenario: importing mylab_crash failed: RuntimeError: boom at import"),
    ("mylab_exp:NOT_A_SCENARIO", "scenario: module mylab_exp has a int, not a Scenario, as NOT_A_SCENARIO"),
    ("mylab_exp:NOPE", "scenario: module mylab_exp defines no NOPE"),
    ("mylab_nope", "scenario: unknown scenario 'mylab_nope' (tried built-in mylab_nope, entry point "
                   "'mylab_nope' in simcore.scenarios, module mylab_nope); did you mean mylab?"),
    ("perturbation.mylab_nope.x", "scenario: unknown scenario 'mylab_nope.x' (tried module mylab_nope.x)"),
])
def test_bad_names_say_what_was_tried_in_one_line(installed, name, message):
    with pytest.raises(ScenarioNotFound) as exc:
        load_scenario(name)
    text = str(exc.value)
    assert text.startswith(message) and "\n" not in text


def test_an_entry_point_to_something_else_names_the_type_it_must_be(installed):
    info = installed / "notone-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: notone\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[simcore.scenarios]\nnotone = mylab_exp:NOT_A_SCENARIO\n")
    clear_cache()
    with pytest.raises(ScenarioNotFound) as exc:
        load_scenario("notone")
    # the type by the path scenario authors import it from (not the 3.x simcore.scenario)
    assert str(exc.value) == ("scenario: entry point 'notone' (mylab_exp:NOT_A_SCENARIO) is a int, "
                              "not a simcore.api.Scenario")


def test_unknown_and_malformed_names_list_the_installed_scenarios(installed):
    for name in ("contxt_corrosion", "../etc", "a b", ""):
        with pytest.raises(ScenarioNotFound) as exc:
            load_scenario(name)
        assert "installed: acausal_cooperation, context_corrosion, " in str(exc.value)
        assert "mylab" in str(exc.value) and "broken" in str(exc.value)
    with pytest.raises(ScenarioNotFound, match="did you mean context_corrosion"):
        load_scenario("contxt_corrosion")
    with pytest.raises(ScenarioNotFound, match="it has mylab_exp:ALT, mylab_exp:FLAKY, mylab_exp:SCENARIO"):
        load_scenario("mylab_exp:OTHER")


def test_installed_scenarios_load_each_for_its_description(installed):
    rows: dict = {}
    for row in installed_scenarios():
        rows.setdefault(row.name, row)
    assert rows["context_corrosion"].source == "built-in" and rows["context_corrosion"].ok
    assert rows["mylab"].ok and rows["mylab"].description == "My lab's study."
    assert rows["mylab"].source == "entry point mylab_exp:SCENARIO (mylab-exp 0.1)"
    assert not rows["broken"].ok and "No module named 'mylab_missing'" in rows["broken"].description
    assert "perturbation.<scenario>" in rows
    shadow = [r for r in installed_scenarios() if r.name == "context_corrosion" and r.source != "built-in"]
    assert len(shadow) == 1 and not shadow[0].ok and "shadowed" in shadow[0].description
    assert installed_names()[-2:] == ["broken", "mylab"]


def test_summary_line():
    assert summary_line("One. Two.") == "One."
    assert summary_line("Version 1.5 of it: short") == "Version 1.5 of it: short"
    assert summary_line("x" * 200, width=20) == "x" * 17 + "..."
