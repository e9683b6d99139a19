"""Tests of the veil-of-ignorance scenario."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.stub import StubBackend
from scenarios.veil_of_ignorance import SCENARIO
from scenarios.veil_of_ignorance.behaviour import make_behaviour, positions
from scenarios.veil_of_ignorance.config import VeilConfig
from scenarios.veil_of_ignorance.experiment import Ratings, Turn
from scenarios.veil_of_ignorance.principles import (
    DISTRIBUTIONS,
    Choice,
    agreement,
    apply_principle,
    detect_consensus,
    draw_classes,
    lift_veil,
)
from simcore.analysis.plots import PLOTS_ENV
from simcore.base.config import ConfigError
from simcore.base.rng import Streams
from simcore.cli import load_config_file, main
from simcore.replay import replay_async
from simcore.replies.reading import read_reply
from simcore.runs.runner import run_trial, run_trial_async, write_run
from simcore.sim.protocols import decision_rule

pytest_plugins = ["tests.shared_runs"]  # hash_seed_pair

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "scenarios" / "veil_of_ignorance" / "configs"
GOLDEN = Path(__file__).parent / "golden" / "veil_of_ignorance_small.jsonl"
SMALL = {"n_agents": 2, "max_rounds": 2}


def cfg(**changes) -> VeilConfig:
    return VeilConfig.from_mapping(changes)


def trial(seed: int = 7, backend=None, **changes):
    config = cfg(**changes)
    return asyncio.run(run_trial_async(SCENARIO, config, seed, backend=backend))


# -- parsing ------------------------------------------------------------------

@pytest.mark.parametrize(
    "value, score",
    [
        ("strongly disagree", 1), ("Strongly Disagree", 1), ("strongly_disagree", 1), ("disagree", 2),
        ("agree", 3), ("Agree.", 3), ("STRONGLY AGREE", 4), ("strongly-agree", 4),
        ("4 - strongly agree", 4), ("1 (strongly disagree)", 1), (4, 4), (2.0, 2), ("3", 3),
        ("3/4", 3), ("2 out of 4", 2),
        ("neutral", None), ("", None), (None, None), (5, None), (0, None), ("7", None),
        (True, None), (2.5, None), ("somewhat", None),
    ],
)
def test_parse_likert(value, score):
    assert _read(Ratings, "maximize_minimum", value) == score


@pytest.mark.parametrize(
    "value, pid",
    [
        (1, 1), ("3", 3), ("Principle 4", 4), ("#2", 2), ("maximize_minimum", 1),
        ("maximize the average with a floor constraint", 3), ("Average with a range constraint", 4),
        ("Maximize the minimum income", 1), ("maximize the average income", 2), ("maximin", 1),
        ("5", None), ("none of them", None), (None, None), (2.5, None), ("13000", None),
    ],
)
def test_parse_principle(value, pid):
    key = _read(Turn, "principle", value)
    assert (None if key is None else int(key)) == pid


@pytest.mark.parametrize(
    "value, amount",
    [("$13,000", 13000), ("13000", 13000), ("13k", 13000), ("14.5 thousand", 14500), (12000.0, 12000),
     ("USD 15000 a year", 15000), ("", None), ("None", None), (None, None), (-5, None), (0, None), (True, None)],
)
def test_parse_amount(value, amount):
    assert _read(Turn, "constraint_amount", value) == amount


def _read(schema, name, value):
    """One field of a reply schema read as the scenario reads it (None when unreadable)."""
    from simcore.replies.schema import plan

    kind = next(f.kind for f in plan(schema) if f.name == name)
    got, err = kind.read(value)
    return None if err else got


def _turn(principle, amount):
    r = read_reply(json.dumps({"message": "hi", "principle": principle, "constraint_amount": amount}), Turn)
    return r.value.choice() if r.readable else None


def test_a_turn_needs_an_amount_for_constraints_only():
    assert _turn("3", "$13,000") == Choice(3, 13000)
    assert _turn("3", "") is None  # a constraint without an amount is incomplete: unreadable
    assert _turn("4", "null") is None
    assert _turn(2, 5000) == Choice(2)  # amounts do not apply to principles 1 and 2
    assert _turn("no idea", "13000") is None


# -- consensus detection ----------------------------------------------------------

RNG = np.random.default_rng(0)


def test_unanimity_matches_ids_and_amounts():
    rule = decision_rule("unanimity")
    same = detect_consensus([Choice(3, 13000)] * 3, rule, RNG)
    assert same.reached and same.choice == "floor_constraint:13000"
    amounts_differ = detect_consensus([Choice(3, 13000), Choice(3, 13000), Choice(3, 14000)], rule, RNG)
    assert not amounts_differ.reached and amounts_differ.choice is None
    ids_differ = detect_consensus([Choice(3, 13000), Choice(4, 13000), Choice(3, 13000)], rule, RNG)
    assert not ids_differ.reached
    abstention = detect_consensus([Choice(1), Choice(1), None], rule, RNG)
    assert not abstention.reached
    assert detect_consensus([Choice(2)] * 4, rule, RNG).choice == "maximize_average"


def test_threshold_and_majority_rules():
    votes = [Choice(3, 13000), Choice(3, 13000), Choice(1), Choice(3, 13000), None]
    assert detect_consensus(votes, decision_rule("threshold:0.6"), RNG).reached
    assert not detect_consensus(votes, decision_rule("threshold:0.8"), RNG).reached
    assert detect_consensus(votes, decision_rule("majority"), RNG).choice == "floor_constraint:13000"
    split = [Choice(3, 13000), Choice(3, 14000), Choice(3, 15000)]
    assert not detect_consensus(split, decision_rule("majority"), RNG).reached


def test_agreement_share_with_and_without_amounts():
    votes = [Choice(3, 13000), Choice(3, 14000), None, Choice(3, 13000)]
    assert agreement(votes) == 0.5
    assert agreement(votes, by_principle=True) == 0.75
    assert agreement([None, None]) == 0.0


choices = st.one_of(
    st.none(),
    st.builds(Choice, st.sampled_from([1, 2])),
    st.builds(Choice, st.sampled_from([3, 4]), st.sampled_from([12000, 13000])),
)


@given(st.lists(choices, min_size=1, max_size=8))
def test_unanimity_iff_all_identical_and_valid(votes):
    decision = detect_consensus(votes, decision_rule("unanimity"), RNG)
    assert decision.reached == (votes[0] is not None and all(v == votes[0] for v in votes))


@given(st.lists(choices, min_size=1, max_size=8), st.sampled_from([0.5, 0.67, 1.0]))
def test_threshold_counts_matching_choices(votes, q):
    decision = detect_consensus(votes, decision_rule(f"threshold:{q}"), RNG)
    best = max((sum(v == c for v in votes) for c in votes if c is not None), default=0)
    assert decision.reached == (best >= q * len(votes) - 1e-12)


# -- the veil -------------------------------------------------------------------

@pytest.mark.parametrize(
    "choice, index, met",
    [
        (Choice(1), 3, True), (Choice(2), 0, True), (Choice(3, 13000), 2, True), (Choice(3, 12000), 0, True),
        (Choice(3, 15000), 3, True), (Choice(3, 20000), 3, False), (Choice(4, 15000), 1, True),
        (Choice(4, 17000), 2, True), (Choice(4, 20000), 0, True), (Choice(4, 1000), 3, False),
    ],
)
def test_principles_pick_the_documented_distribution(choice, index, met):
    assert apply_principle(choice, DISTRIBUTIONS) == (index, met)


def test_payoff_assignment_is_seeded_and_independent_of_the_outcome():
    def assign(seed, choice):
        s = Streams(seed)
        classes = draw_classes(5, (1,) * 5, s.numpy("veil.classes"))
        return lift_veil(choice, DISTRIBUTIONS, classes, s.numpy("veil.fallback"))

    a, b = assign(11, Choice(1)), assign(11, Choice(1))
    assert a == b
    other = assign(11, Choice(2))
    assert other.classes == a.classes and other.distribution != a.distribution
    assert other.incomes == tuple(DISTRIBUTIONS[0].incomes[c] for c in a.classes)
    assert {assign(s, None).distribution for s in range(40)} == {0, 1, 2, 3}  # fallback draws them all
    assert all(assign(s, None).fallback for s in range(3))
    assert len({assign(s, Choice(1)).classes for s in range(20)}) > 1


def test_class_weights_are_respected():
    classes = draw_classes(2000, (0, 0, 1, 0, 3), np.random.default_rng(3))
    assert set(classes) == {2, 4}
    assert 0.7 < classes.count(4) / len(classes) < 0.8


# -- configs -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["default", "temperature_test", "decomposed_memory_test"])
def test_shipped_configs_load(name):
    config = VeilConfig.from_mapping(load_config_file(str(CONFIGS / f"{name}.yaml")))
    assert config.experiment_id == name
    roster = config.roster()
    assert [a.name for a in roster] == ["Agent_1", "Agent_2", "Agent_3"]
    assert all(a.model.startswith("gpt-4.1") for a in roster)
    if name == "temperature_test":
        assert [a.temperature for a in roster] == [0.0, 0.7, 1.4]
    if name == "decomposed_memory_test":
        assert config.memory == "decomposed"
    assert VeilConfig.from_mapping(json.loads(json.dumps(config.to_dict()))) == config  # manifest round trip


def test_roster_fills_defaults_and_skips_taken_names():
    config = cfg(n_agents=4, agents=[{"name": "Agent_2", "personality": "You are careful."}], default_model="m")
    roster = config.roster()
    assert [a.name for a in roster] == ["Agent_2", "Agent_1", "Agent_3", "Agent_4"]
    assert roster[1].personality == config.default_personality
    assert {a.model for a in roster} == {"m"}
    assert cfg(n_agents=2).roster()[1].name == "Agent_2"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"agents": [{"name": "A", "personalty": "x"}]}, "agents[0].personalty: unknown field"),
        ({"agents": [{"name": "A"}, {"name": "A"}]}, "agents: names must be unique"),
        ({"agents": [{"name": "has space"}]}, "agents[0].name: must start with a letter"),
        ({"agents": [{"name": "Moderator"}]}, "agents[0].name: 'Moderator' is reserved"),
        ({"agents": [{"name": "A", "temperature": 3}]}, "agents[0].temperature: must be a number from 0 to 2"),
        ({"agents": "Agent_1"}, "agents"),
        ({"decision_rule": "supermajority"}, "decision_rule: must be majority, unanimity"),
        ({"memory": "forever"}, "memory: must be full, recent:K, summary or decomposed"),
        ({"max_rounds": 0}, "max_rounds: must be an integer from 1 to 100"),
        ({"distributions": [{"name": "D", "incomes": [1, 2]}]}, "distributions[0].incomes: must give one income per class"),
        ({"distributions": [{"name": "D", "incomes": ["a", 2, 3, 4, 5]}]}, "distributions[0].incomes: must be a list"),
        ({"class_weights": [1, 2]}, "class_weights: must be empty or 5"),
        ({"logging": {"enabled": "maybe"}}, "logging.enabled: must be true or false"),
        ({"experiment": {"rounds": 5}}, "experiment.rounds: unknown field; fields are: max_rounds"),
        ({"experiment": [5]}, "experiment: must be a mapping"),
        ({"defaults": {"persona": "x"}}, "defaults.persona: unknown field"),
        ({"memory_strategy": "summarized"}, "memory_strategy: must be one of full, recent, decomposed"),
        ({"experiment": {"max_rounds": 0}}, "max_rounds: must be an integer from 1 to 100"),
        ({"global_temperature": 3}, "temperature: must be a number from 0 to 2"),
        ({"experiment_id": "   "}, "experiment_id: must be 1 to 64 printable characters"),
    ],
)
def test_bad_config_is_one_line_naming_the_field(data, message):
    with pytest.raises(ConfigError) as err:
        VeilConfig.from_mapping(data)
    assert message in str(err.value) and "\n" not in str(err.value)


def _cli(argv, tmp_path, capsys):
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_:
        main(SCENARIO, [*argv, "--out", str(out)])
    return exit_.value.code, capsys.readouterr().err, out


@pytest.mark.parametrize(
    "content, message",
    [
        ("max_rounds: [1, 2\n", "config: invalid YAML"),
        ("agents:\n  - name: A\n    persona: x\n", "agents[0].persona: unknown field"),
        ("- just\n- a list\n", "must hold a mapping"),
        ("memory: recent:0\n", "memory: must be full, recent:K"),
    ],
)
def test_cli_bad_yaml_exits_2_and_writes_nothing(content, message, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    code, err, out = _cli(["--config", str(path)], tmp_path, capsys)
    assert code == 2 and message in err and err.count("\n") == 1
    assert not out.exists()


def test_cli_bad_flag_exits_2(tmp_path, capsys):
    code, err, out = _cli(["--decision-rule", "threshold:2"], tmp_path, capsys)
    assert code == 2 and err.startswith("error: decision_rule:") and not out.exists()


def test_cli_runs_a_shipped_config(tmp_path, capsys):
    out = tmp_path / "runs"
    code = main(SCENARIO, ["--config", str(CONFIGS / "decomposed_memory_test.yaml"), "--max-rounds", "2",
                           "--out", str(out), "--seed", "3"])
    assert code == 0
    (run_dir,) = (out / "veil_of_ignorance").iterdir()
    assert {p.name for p in run_dir.iterdir()} >= {"experiment.json", "trace.jsonl", "results.json", "manifest.json", "plots"}
    assert {p.name for p in (run_dir / "plots").iterdir()} == {"likert.png", "choices.png"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["memory"] == "decomposed" and manifest["config"]["max_rounds"] == 2
    assert sorted(manifest["models"]) == ["gpt-4.1-mini"]
    assert "veil of ignorance (decomposed_memory_test)" in capsys.readouterr().out


# -- runs -------------------------------------------------------------------------

def test_golden_trace_small_config():
    text = trial(7, **SMALL).trace.to_jsonl()
    if os.environ.get("SIMCORE_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "trace changed; rerun with SIMCORE_UPDATE_GOLDEN=1 if intended"


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["full", "recent:2", "summary", "decomposed"]))
def test_same_seed_same_trace(seed, memory):
    a, b = trial(seed, memory=memory, max_rounds=3), trial(seed, memory=memory, max_rounds=3)
    assert a.trace.to_jsonl() == b.trace.to_jsonl()
    assert a.results["metrics"] == b.results["metrics"]


def test_trace_identical_across_processes_and_hash_seeds(hash_seed_pair):
    """The same trace here and in an interpreter with another hash seed (tests/shared_runs.py)."""
    here, there = hash_seed_pair("veil_of_ignorance")
    assert there == here == trial(5, memory="decomposed", max_rounds=3).trace.sha256()


def test_replay_reproduces_a_written_run(tmp_path, no_plots):
    run_dir = write_run(run_trial(SCENARIO, cfg(**SMALL), 9), tmp_path)
    assert asyncio.run(replay_async(run_dir)).identical


def test_agent_centric_json_structure(tmp_path, no_plots):
    t = trial(4, memory="decomposed", n_agents=3)
    run_dir = write_run(t, tmp_path)
    data = json.loads((run_dir / "experiment.json").read_text())
    names = ["Agent_1", "Agent_2", "Agent_3"]
    assert sorted(data) == sorted(["experiment_metadata", *names])
    meta = data["experiment_metadata"]
    rounds = meta["rounds_taken"]
    assert rounds == t.results["metrics"]["rounds_taken"] >= 1
    assert meta["consensus"]["reached"] == t.results["metrics"]["consensus_reached"]
    assert [p["id"] for p in meta["principles"]] == [1, 2, 3, 4]
    assert set(meta["veil"]["assignments"]) == set(names)
    for n in names:
        agent = data[n]
        assert set(agent) == {"overall", "final", *[f"round_{r}" for r in range(rounds + 1)]}
        assert agent["overall"]["memory_strategy"] == "decomposed"
        assert set(agent["round_0"]["likert"]) == {"maximize_minimum", "maximize_average", "floor_constraint", "range_constraint"}
        for r in range(1, rounds + 1):
            entry = agent[f"round_{r}"]
            assert {"public_history", "memory", "strategy", "communication", "choice"} <= set(entry)
            assert [s["step"] for s in entry["memory_steps"]] == ["positions", "dynamics", "plan"]
            assert entry["communication"] and entry["strategy"]
            assert "input" not in entry and "raw_output" in entry  # the logging defaults


def test_logging_options_shape_the_json(tmp_path, monkeypatch, no_plots):
    quiet = {"capture_raw_inputs": False, "capture_raw_outputs": False, "capture_memory_steps": False,
             "include_times": False}
    run_dir = write_run(trial(4, logging=quiet, memory="decomposed", **SMALL), tmp_path)
    text = (run_dir / "experiment.json").read_text()
    for key in ('"input"', '"raw_output"', '"memory_steps"', '"t_asked"'):
        assert key not in text
    loud = {"capture_raw_inputs": True}
    data = json.loads((write_run(trial(4, logging=loud, **SMALL), tmp_path / "b") / "experiment.json").read_text())
    assert data["Agent_1"]["round_1"]["input"]["system"].startswith("You are an economist")
    monkeypatch.setenv(PLOTS_ENV, "all")  # the one run whose plots are read: drawn with logging off too
    off = write_run(trial(4, logging={"enabled": False}, **SMALL), tmp_path / "c")
    assert not (off / "experiment.json").exists() and (off / "plots" / "likert.png").exists()


def test_interview_is_stored_per_agent():
    t = trial(2)
    for name in t.world.state["names"]:
        interview = t.world.state["log"][name]["final"]["interview"]
        assert interview["question"].startswith(name)
        assert interview["explanation"] and interview["experience"]
    asked = t.trace.of_kind("llm.call")
    assert sum(e.agent == "Interviewer" for e in asked) == len(t.world.state["names"])


def test_descriptions_are_neutral():
    t = trial(1, memory="decomposed", max_rounds=2)
    prompts = "".join(a.persona for a in t.world.by_name.values()) + json.dumps(t.world.state["log"])
    for word in ("Rawls", "Harsanyi", "Nozick", "Bentham", "Mill ", "utilitarian", "Frohlich", "veil of ignorance"):
        assert word.lower() not in prompts.lower()


@pytest.mark.parametrize("rate", [0.3, 1.0])
def test_malformed_model_output_does_not_crash(rate):
    config = cfg(max_rounds=3)
    backend = StubBackend(make_behaviour(config), malformed_rate=rate)
    t = asyncio.run(run_trial_async(SCENARIO, config, 3, backend=backend))
    m = t.results["metrics"]
    assert t.status == "ok" and m["parse_errors"] > 0
    if rate == 1.0:
        assert not m["consensus_reached"] and m["fallback"] and m["invalid_choices"] == 9
        assert all(v is None for s in t.results["likert"]["initial"].values() for v in s.values())
        assert m["likert_shift_mean"] is None
        log = t.world.state["log"]["Agent_1"]
        assert log["round_1"]["parse_error"] and log["round_1"]["communication"].startswith("I am not sure")
        assert log["final"]["interview"]["parse_error"]


class FailingBackend(StubBackend):
    """The stub, except that deliberation turns of round 2 fail for good."""

    async def complete_batch(self, requests):
        return [
            RuntimeError("provider down") if r.metadata.get("round") == 2 else self.respond(r) for r in requests
        ]


def test_a_failed_backend_keeps_the_partial_run(tmp_path):
    config = cfg(persuasion=0.0)
    t = asyncio.run(run_trial_async(SCENARIO, config, 5, backend=FailingBackend(make_behaviour(config))))
    assert t.status == "error" and "provider down" in t.error["message"]
    m = t.results["metrics"]
    assert m["rounds_taken"] == 1 and not m["consensus_reached"] and t.results["veil"] is None
    assert "status error" in SCENARIO.summarize(t.results)
    assert set(m) == set(trial(5).results["metrics"]) and m["distribution"] is None  # stable columns
    run_dir = write_run(t, tmp_path)
    assert (run_dir / "trace.jsonl").read_text().count('"llm.error"') >= 1


def test_timeout_is_simulated_time_checked_between_rounds():
    t = trial(5, timeout_s=1.0, persuasion=0.0)
    m = t.results["metrics"]
    assert m["rounds_taken"] == 1 and m["end_reason"] in ("timeout", "consensus")
    long = trial(5, persuasion=0.0)
    assert long.results["metrics"]["rounds_taken"] > 1


def test_memory_strategies_decide_what_enters_prompts():
    full = trial(6, memory="full", persuasion=0.0, max_rounds=3).world.state["log"]["Agent_1"]
    recent = trial(6, memory="recent:1", persuasion=0.0, max_rounds=3).world.state["log"]["Agent_1"]
    summary = trial(6, memory="summary", persuasion=0.0, max_rounds=3).world.state["log"]["Agent_1"]
    assert full["round_3"]["memory_in_prompt"].count("[round ") == 3
    assert recent["round_3"]["memory_in_prompt"].count("[round ") == 1
    assert summary["round_3"]["memory_in_prompt"].count("[round ") == 1
    assert len(recent["round_3"]["public_history"].splitlines()) <= 1
    # Summary memory replaces the old discussion: only this round's earlier turns are shown.
    assert "No agreement after round 1" in full["round_3"]["public_history"]
    assert "No agreement after round" not in summary["round_3"]["public_history"]


def test_per_agent_models_reach_the_requests():
    agents = [{"name": "A", "model": "model-a"}, {"name": "B", "model": "model-b"}]
    t = trial(1, agents=agents, n_agents=3, default_model="model-c", feedback_model="model-f", max_rounds=1)
    assert {n: a.model_name for n, a in t.world.by_name.items()} == {
        "A": "model-a", "B": "model-b", "Agent_1": "model-c", "Interviewer": "model-f"
    }
    assert sorted(t.world.usage) == ["model-a", "model-b", "model-c", "model-f"]


def test_metrics_are_scalars_and_sweep_fields_take_strings():
    t = trial(0)
    assert all(v is None or isinstance(v, (bool, int, float, str)) for v in t.results["metrics"].values())
    swept = VeilConfig().replace(memory="summary", temperature="0.0", max_rounds="3", announce_choices="false")
    assert (swept.memory, swept.temperature, swept.max_rounds, swept.announce_choices) == ("summary", 0.0, 3, False)


def test_likert_shift_is_final_minus_initial():
    t = trial(3)
    lk = t.results["likert"]
    for name, shifts in lk["shift"].items():
        for key, s in shifts.items():
            assert s == lk["final"][name][key] - lk["initial"][name][key]
    m = t.results["metrics"]
    assert m["likert_shift_floor_constraint"] == pytest.approx(
        np.mean([lk["shift"][n]["floor_constraint"] for n in lk["shift"]])
    )


def test_stub_decodes_positions_latest_statement_wins():
    text = (
        "Agent_2: I support maximize the minimum income. Reason.\n"
        "Moderator: No agreement. Choices: Agent_1 supports maximize the average income; "
        "Agent_2 supports maximize the average with a floor constraint (floor $13,000); "
        "Agent_3 supports no valid choice."
    )
    assert positions(text, "Agent_1") == {"Agent_2": Choice(3, 13000)}


def test_some_trials_agree_and_others_do_not():
    reached = [trial(s).results["metrics"]["consensus_reached"] for s in range(12)]
    assert any(reached) and not all(reached)


@pytest.mark.slow
def test_consensus_rate_over_50_seeds_follows_persuasion():
    def rate(**changes):
        return np.mean([trial(s, **changes).results["metrics"]["consensus_reached"] for s in range(50)])

    default, none, strong = rate(), rate(persuasion=0.0), rate(persuasion=0.5)
    assert 0.3 <= default <= 0.7
    assert none < default < strong


# -- the original experiment's YAML layout ---------------------------------------------------

# The example configuration of the original experiment's design document, in its layout.
ORIGINAL_EXAMPLE = """
experiment_id: my_experiment
experiment:
  max_rounds: 5
  decision_rule: unanimity
  timeout_seconds: 300
agents:
  - name: "Agent_1"
    model: "gpt-4.1-mini"
    personality: "You are an economist focused on efficiency and optimal resource allocation."
  - name: "Agent_2"
    model: "gpt-4.1"
    personality: "You are a philosopher concerned with justice and fairness for all members of society."
  - name: "Agent_3"
    model: "gpt-4.1-mini"
    personality: "You are a pragmatist who focuses on what works in practice rather than theory."
defaults:
  personality: "You are an agent tasked to design a future society."
  model: "gpt-4.1-mini"
memory_strategy: "decomposed"
logging:
  enabled: true
  capture_raw_inputs: true
  capture_raw_outputs: true
  capture_memory_context: false
  capture_memory_steps: true
  include_processing_times: false
"""


def test_the_original_layout_loads(tmp_path):
    path = tmp_path / "original.yaml"
    path.write_text(ORIGINAL_EXAMPLE)
    c = VeilConfig.from_mapping(load_config_file(str(path)))
    assert (c.experiment_id, c.max_rounds, c.decision_rule, c.memory, c.n_agents) == (
        "my_experiment", 5, "unanimity", "decomposed", 3)
    assert [a.model for a in c.roster()] == ["gpt-4.1-mini", "gpt-4.1", "gpt-4.1-mini"]
    assert c.default_model == "gpt-4.1-mini" and c.default_personality.startswith("You are an agent tasked")
    assert c.logging.capture_raw_inputs and not c.logging.capture_memory_context and not c.logging.include_times
    assert c.timeout_s == VeilConfig().timeout_s  # the original's wall-clock guard is not simulated time
    assert VeilConfig.from_mapping(json.loads(json.dumps(c.to_dict()))) == c  # a manifest holds our layout


def test_original_layout_rules():
    # n_agents follows the list; entries without a name are numbered by position
    c = cfg(experiment={"max_rounds": 2}, agents=[{"name": "Ann"}, None, {"personality": "You are calm."},
                                                   {"name": "Bo"}])
    assert c.n_agents == 4 and [a.name for a in c.roster()] == ["Ann", "Agent_2", "Agent_3", "Bo"]
    # global_temperature overrides every agent's and the defaults' temperature
    c = cfg(global_temperature=0.0, defaults={"temperature": 0.9},
            agents=[{"name": "A", "temperature": 1.5}, {"name": "B"}])
    assert [a.temperature for a in c.roster()] == [0.0, 0.0]
    c = cfg(defaults={"temperature": 0.9}, agents=[{"name": "A", "temperature": 1.5}, {"name": "B"}])
    assert [a.temperature for a in c.roster()] == [1.5, 0.9]
    assert cfg(memory_strategy="recent").memory == "recent:3" and cfg(memory_strategy="full").memory == "full"
    # a field in this config's own name (a flag, say) wins over its original spelling
    assert cfg(experiment={"max_rounds": 4}, max_rounds=2).max_rounds == 2
    assert cfg(memory_strategy="decomposed", memory="full").memory == "full"
    assert cfg(agents=[{"name": "A"}, {"name": "B"}, {"name": "C"}], experiment={}, n_agents=2).n_agents == 2
    # output and performance are accepted and change nothing
    assert cfg(output={"formats": ["json"]}, performance={"debug_mode": True}) == cfg()
    # this config's own layout is untouched (nameless agents stay an error there)
    with pytest.raises(ConfigError, match="agents.0..name"):
        cfg(agents=[{"personality": "x"}])


def test_capture_memory_context_controls_memory_in_prompt():
    on = trial(6, max_rounds=2, persuasion=0.0).world.state["log"]["Agent_1"]["round_2"]
    off = trial(6, max_rounds=2, persuasion=0.0, logging={"capture_memory_context": False})
    assert "memory_in_prompt" in on and "memory_in_prompt" not in off.world.state["log"]["Agent_1"]["round_2"]


def test_lucas_is_shipped_in_the_original_layout(tmp_path, capsys):
    path = CONFIGS / "lucas.yaml"
    assert "experiment:" in path.read_text() and "defaults:" in path.read_text()
    c = VeilConfig.from_mapping(load_config_file(str(path)))
    assert (c.experiment_id, c.max_rounds, c.decision_rule, c.temperature) == ("Lucas Test", 3, "unanimity", 0.0)
    assert [(a.name, a.model, a.temperature) for a in c.roster()] == [
        ("Agent_1", "gpt-4.1-nano", 0.0), ("Boris", "gpt-4.1-nano", 0.0), ("Heidi", "gpt-4.1-nano", 0.0)]
    # --config NAME finds it without a path, and flags still override it
    out = tmp_path / "runs"
    assert main(SCENARIO, ["--config", "lucas", "--max-rounds", "1", "--plots", "none", "--out", str(out), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    manifest = json.loads((Path(results["run_dir"]) / "manifest.json").read_text())
    assert manifest["config"]["experiment_id"] == "Lucas Test" and manifest["config"]["max_rounds"] == 1


def test_cli_config_names_a_shipped_config_or_fails_in_one_line(tmp_path, capsys):
    code, err, out = _cli(["--config", "lukas"], tmp_path, capsys)
    assert code == 2 and err.count("\n") == 1 and not out.exists()
    assert "config: no file 'lukas' and no shipped config of that name; shipped: " in err
    assert all(name in err for name in ("default", "lucas", "temperature_test", "decomposed_memory_test"))
    code, err, _ = _cli(["--config", "nowhere/lucas.yaml"], tmp_path, capsys)
    assert code == 2 and "config: " in err and err.count("\n") == 1


def test_shipped_configs_are_found_from_derived_configs():
    from scenarios.context_corrosion import SCENARIO as CORROSION
    from scenarios.perturbation.variant import variant
    from simcore.cli import shipped_configs

    names = {"default", "lucas", "temperature_test", "decomposed_memory_test"}
    assert set(shipped_configs(VeilConfig)) == names
    assert set(shipped_configs(variant("veil_of_ignorance").config_type)) == names  # perturbation.<name>
    assert shipped_configs(CORROSION.config_type) == {}


# -- the original experiment's names: --output-dir, <experiment_id>.json, personality templates ----

def test_output_dir_writes_the_record_as_experiment_id_json(tmp_path, capsys):
    out = tmp_path / "custom_experiments" / "my_test"
    assert main(SCENARIO, ["--config", "default", "--output-dir", str(out), "--max-rounds", "1", "--plots", "none",
                           "--json"]) == 0
    run_dir = Path(json.loads(capsys.readouterr().out)["run_dir"])
    assert run_dir.parent == out / "veil_of_ignorance"
    record = json.loads((run_dir / "default.json").read_text())
    assert record == json.loads((run_dir / "experiment.json").read_text())
    assert record["experiment_metadata"]["experiment_id"] == "default"
    assert set(record) == {"experiment_metadata", "Agent_1", "Agent_2", "Agent_3"}  # agent-centric
    assert {"overall", "round_0", "round_1", "final"} <= set(record["Agent_1"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert "default.json" in manifest["files"]  # vouched for like every other run file
    results = json.loads((run_dir / "results.json").read_text())
    assert results["experiment_record"] == "default.json"


def test_out_and_output_dir_are_one_flag(tmp_path, capsys):
    from simcore.cli import build_parser

    parser = build_parser(SCENARIO)
    assert parser.parse_args(["--output-dir", "x"]).out == "x" and parser.parse_args(["--out", "y"]).out == "y"
    assert parser.parse_args([]).out == "runs"


@pytest.mark.parametrize("experiment_id, name", [
    ("Lucas Test", "Lucas Test.json"), ("a/b", "a_b.json"), ("../up", "_up.json"), ("...", "experiment.json"),
    ("experiment", "experiment.json"),
])
def test_record_names_stay_inside_the_run_directory(experiment_id, name):
    from scenarios.veil_of_ignorance.config import record_name

    assert record_name(experiment_id) == name


@pytest.mark.parametrize("experiment_id", ["manifest", "Results", "study", "summary", "sweep", "comparison"])
def test_an_experiment_id_that_would_overwrite_a_run_file_is_refused(experiment_id):
    with pytest.raises(ConfigError, match=f"^experiment_id: '{experiment_id}' would name the record"):
        cfg(experiment_id=experiment_id)


def test_logging_off_writes_neither_record(tmp_path, no_plots):
    run_dir = write_run(trial(**SMALL, logging={"enabled": False}), tmp_path)
    assert not (run_dir / "experiment.json").exists() and not (run_dir / "default.json").exists()


def test_shipped_personality_templates_load_by_name():
    from scenarios.veil_of_ignorance.personalities import templates

    shipped = templates()
    assert {"economist", "philosopher", "pragmatist", "designer"} <= set(shipped)
    c = cfg(agents=[{"name": "Ann", "personality_template": "economist"},
                    {"name": "Bob", "personality_template": "philosopher"},
                    {"name": "Cy", "personality": "You are a baker."}])
    assert [a.personality for a in c.roster()] == [shipped["economist"], shipped["philosopher"], "You are a baker."]
    assert shipped["economist"] == DEFAULT_AGENT_TEXTS[0]  # the default panel's texts, by name


DEFAULT_AGENT_TEXTS = [a.personality for a in VeilConfig().agents]


def test_users_own_templates_come_from_a_yaml_file_and_reach_the_prompt(tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("stoic: You are a stoic who accepts whatever income fate gives.\n"
                   "economist: You are an economist who distrusts markets.\n")
    changes = {"n_agents": 2, "max_rounds": 1, "personality_templates": str(own),
               "agents": [{"name": "Ann", "personality_template": "stoic"},
                          {"name": "Bob", "personality_template": "economist"}]}
    c = cfg(**changes)
    assert [a.personality for a in c.roster()] == ["You are a stoic who accepts whatever income fate gives.",
                                                   "You are an economist who distrusts markets."]  # own wins
    stub = StubBackend(make_behaviour(c))
    sent = []

    class Recording:
        name = "stub"

        async def complete_batch(self, requests):
            sent.extend(requests)
            return await stub.complete_batch(requests)

    t = trial(backend=Recording(), **changes)
    log = t.world.state["log"]
    assert log["Ann"]["overall"]["personality_template"] == "stoic"
    assert log["Bob"]["overall"]["personality"] == "You are an economist who distrusts markets."
    ann = [r for r in sent if r.metadata.get("agent") == "Ann"]
    assert ann and all(r.messages[0].role == "system" and r.messages[0].content.startswith("You are a stoic")
                       for r in ann)


@pytest.mark.parametrize("changes, message", [
    ({"agents": [{"name": "A", "personality_template": "banker"}]},
     "agents[0].personality_template: no template 'banker'; templates: cautious, designer, economist"),
    ({"agents": [{"name": "A", "personality": "x", "personality_template": "economist"}]},
     "agents[0].personality_template: give personality or personality_template, not both"),
    ({"personality_templates": "/no/such/file.yaml"},
     "personality_templates: file '/no/such/file.yaml' not found"),
])
def test_bad_templates_are_one_line_naming_the_field(changes, message):
    with pytest.raises(ConfigError) as exc:
        cfg(**changes)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


@pytest.mark.parametrize("content, message", [
    ("- a\n- b\n", "must hold name: text lines"),
    ("9lives: text\n", "'9lives' is not a template name"),
    ("calm: ''\n", "calm: must be a non-empty personality text"),
    ("calm: [unclosed\n", "cannot read"),
])
def test_a_bad_template_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "t.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=r"^personality_templates: .*" + message.replace("[", r"\[")):
        cfg(personality_templates=str(path))


def test_a_rating_reply_with_one_unreadable_item_keeps_the_other_three():
    """Issue 33: nine of ten real rating replies lost all four items for one bad one."""
    from tests.helpers import GarblingBackend

    config = cfg(n_agents=3, max_rounds=1)
    bad = ('{"reasoning": "A floor protects the worst off.", "maximize_minimum": "agree", '
           '"maximize_average": "somewhat agree", "floor_constraint": "strongly agree", "range_constraint": "disagree"}')
    backend = GarblingBackend(StubBackend(make_behaviour(config)),
                              lambda m: m["agent"] == "Agent_1" and m["phase"] == "rating_initial", bad)
    t = asyncio.run(run_trial_async(SCENARIO, config, 3, backend=backend))
    assert t.status == "ok", t.error
    initial = t.results["likert"]["initial"]
    assert initial["Agent_1"] == {"maximize_minimum": 3, "maximize_average": None, "floor_constraint": 4,
                                  "range_constraint": 2}
    b = t.results["basis"]
    assert b["likert_initial_maximize_average"]["n"] == 2 and b["likert_initial_maximize_minimum"]["n"] == 3
    assert b["likert_shift_maximize_average"]["n"] == 2 and b["likert_shift_floor_constraint"]["n"] == 3
    assert b["likert_shift_mean"] == {"n": 11, "of": 12, "unit": "ratings",
                                      "reason": "1 rating without a readable initial and final rating"}
    m = t.results["metrics"]
    assert m["likert_initial_maximize_minimum"] == pytest.approx(np.mean([initial[n]["maximize_minimum"] for n in initial]))
    log = t.world.state["log"]["Agent_1"]["round_0"]
    assert log["parse_error"] and log["reasoning"] == "A floor protects the worst off."
    assert log["unread_fields"] == {"maximize_average": {"raw": "somewhat agree", "why": "'somewhat agree': is not on the scale"}}
    assert t.results["parse_quality"]["rating"]["partial"] == 1
