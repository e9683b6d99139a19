"""run_trial on the first scenario: phases, structure, the seed's parameters."""

from __future__ import annotations

import json

from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.runs.runner import run_trial, write_run


def test_three_phases_with_the_seeds_structure():
    trial = run_trial(SCENARIO, CorrosionConfig(), 42)
    world = trial.world
    calls = world.trace.of_kind("llm.call")
    # (1 + rounds) x 5 + 5 calls, as the seed says: 25 at rounds=3
    assert len(calls) == 25
    phase1 = [e for e in calls if e.fields["phase"] == "phase1"]
    assert {e.t for e in phase1} == {0}  # independent thought: all at once
    for r in (1, 2, 3):
        turns = [e.agent for e in calls if e.fields.get("round") == r]
        assert turns[0] == "D" and sorted(turns) == ["D", "P1", "P2", "P3", "P4"]
        times = [e.t for e in calls if e.fields.get("round") == r]
        assert times == sorted(times) and len(set(times)) == 5  # one after another
    finals = [e for e in calls if e.fields["phase"] == "final"]
    assert len({e.t for e in finals}) == 1
    assert {e.agent: e.payload["max_tokens"] for e in phase1} == {
        "D": 800, "P1": 200, "P2": 200, "P3": 200, "P4": 200}
    assert trial.results["metrics"]["parse_errors"] == 0


def test_only_d_gets_the_biased_framing_and_only_in_run_a():
    from scenarios.context_corrosion.tasks import task

    framing = task(0).framing
    a = run_trial(SCENARIO, CorrosionConfig(rounds=1), 1).world
    b = run_trial(SCENARIO, CorrosionConfig(rounds=1, biased=False), 1).world
    assert framing in a.by_name["D"].persona
    assert all(framing not in a.by_name[p].persona for p in ("P1", "P2", "P3", "P4"))
    assert all(framing not in ag.persona for ag in b.by_name.values())
    # everything else is identical: model, temperature, base prompt
    assert len({(ag.model_name, ag.temperature) for ag in a.by_name.values()}) == 1
    assert len({ag.persona for ag in b.by_name.values()}) == 1


def test_peers_hear_d_first_and_earlier_peers():
    world = run_trial(SCENARIO, CorrosionConfig(rounds=1), 3).world
    order = [m.speaker for m in world.board.messages]
    assert order == ["D", "P1", "P2", "P3", "P4"]


def test_experiment_log_is_written(tmp_path, no_plots):
    trial = run_trial(SCENARIO, CorrosionConfig(rounds=1, n_peers=2), 3)
    run_dir = write_run(trial, tmp_path)
    log = json.loads((run_dir / "experiment.json").read_text())
    assert len(log["replies"]) == 3 * 3
    assert {r["phase"] for r in log["replies"]} == {"phase1", "discussion", "final"}
    assert all("raw" in r and "parsed" in r for r in log["replies"])


def test_a_world_that_fails_to_build_is_not_pinned_by_mesa():
    import mesa
    import pytest

    from backends.registry import BackendSpec
    from simcore.base.config import ConfigError
    from simcore.runs.runner import build_world

    before = len(mesa.Agent._ids)
    cfg = CorrosionConfig(n_peers=2, topology="small_world:k=4,p=0.1")  # k does not fit 3 agents
    with pytest.raises(ConfigError, match="small_world k"):
        build_world(SCENARIO, cfg, 1, BackendSpec())
    assert len(mesa.Agent._ids) == before
