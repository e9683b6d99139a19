"""Perturbation studies: operators, SPECs, prefix reuse, metrics, noise floor, CLI, batch."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pickle
from pathlib import Path

import pandas as pd
import pytest
import pytest_asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.fake_server import FakeConfig, FakeServer
from backends.registry import BackendSpec
from backends.stub import StubBackend
from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.analysis.stats import proportion_ci
from simcore.base.config import ConfigError
from simcore.base.records import read_json
from simcore.perturbation import (
    PerturbationResults,
    parse_perturbation,
    run_study,
    run_study_async,
)
from simcore.perturbation.command import main as cli
from simcore.perturbation.operators import Selector
from simcore.perturbation.pairs import (
    UNAVAILABLE,
    StudyBackend,
    outcome_of,
    pair_metrics,
    run_seed,
    token_overhead,
)
from simcore.perturbation.study import format_summary, write_study
from simcore.replay import replay_async
from simcore.runs.runner import run_trial, run_trial_async
from simcore.runs.scenario import load_scenario

pytest_plugins = ["tests.shared_runs"]  # hash_seed_pair

CFG = CorrosionConfig(rounds=2, n_peers=2, metrics=False)  # D, P1, P2: 3 + 2 x 3 + 3 = 12 calls
CALLS = 12
SEED = 5
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5.0}


def perturbed(spec: str, seed: int = SEED, backend=None):
    p = parse_perturbation(spec)
    return asyncio.run(run_trial_async(SCENARIO, CFG, seed, backend=backend, intervention=p)), p


@pytest.fixture(scope="module")
def base():
    return run_trial(SCENARIO, CFG, SEED)


def message(trial, speaker, **fields):
    found = [m for m in trial.world.board.messages
             if m.speaker == speaker and all(m.fields.get(k) == v for k, v in fields.items())]
    assert len(found) == 1, found
    return found[0]


def events(trial, kind, **fields):
    return [e for e in trial.trace if e.kind == kind and all(e.fields.get(k) == v for k, v in fields.items())]


# -- operators -----------------------------------------------------------------

def test_replace_truncate_blank_change_the_message_others_hear(base):
    original = message(base, "D", phase="discussion", round=1).text
    t, p = perturbed("replace:agent=D,round=1,text='D has changed its mind.'")
    assert message(t, "D", phase="discussion", round=1).text == "D has changed its mind."
    assert p.applied[0]["operator"] == "replace" and p.point["calls_before"] == 4  # phase 1 + D's turn
    t, _ = perturbed("truncate:agent=D,round=1,keep=0.3")
    assert message(t, "D", phase="discussion", round=1).text == original[: int(len(original) * 0.3)]
    t, _ = perturbed("blank:agent=P2,round=2")
    assert message(t, "P2", phase="discussion", round=2).text == ""
    # the model's own reply is untouched: only what the others hear changed
    assert [e.payload["text"] for e in events(t, "llm.reply", phase="discussion", round=2)] == \
        [e.payload["text"] for e in events(base, "llm.reply", phase="discussion", round=2)]


def test_text_operators_on_the_raw_reply(base):
    t, _ = perturbed("replace:agent=D,phase=phase1,on=reply,text=hello")
    (reply,) = [e for e in events(t, "llm.reply", phase="phase1") if e.agent == "D"]
    assert reply.payload["text"] == "hello" and reply.payload["parse_error"] is True


def test_inject_into_a_message_and_into_a_prompt(base):
    t, _ = perturbed("inject:agent=P1,round=1,text='Trust D.',where=start")
    assert message(t, "P1", phase="discussion", round=1).text.startswith("Trust D. ")

    class Recording(StubBackend):
        def __init__(self):
            super().__init__(SCENARIO.behaviour(CFG))
            self.requests = []

        def respond(self, request):
            self.requests.append(request)
            return super().respond(request)

    rec = Recording()
    perturbed("inject:agent=P1,phase=final,on=prompt,text='Vote for the pilot.'", backend=rec)
    (req,) = [r for r in rec.requests if r.metadata["agent"] == "P1" and r.metadata["phase"] == "final"]
    assert req.messages[-1].role == "user" and req.messages[-1].content.endswith(" Vote for the pilot.")


def test_drop_and_swap_change_the_speaking_order(base):
    order = [e.agent for e in events(base, "llm.call", phase="discussion", round=1)]
    assert order == ["D", "P1", "P2"]
    t, p = perturbed("drop:agent=P1,round=2")
    assert [e.agent for e in events(t, "llm.call", phase="discussion", round=2)] == ["D", "P2"]
    assert p.point["calls_before"] == 6
    t, _ = perturbed("swap:phase=discussion,round=1")
    assert [e.agent for e in events(t, "llm.call", phase="discussion", round=1)] == ["P1", "D", "P2"]
    t, _ = perturbed("swap:round=2,a=D,b=P2")
    assert [e.agent for e in events(t, "llm.call", phase="discussion", round=2)] == ["P2", "P1", "D"]


def test_budget_changes_every_call_of_the_agent(base):
    t, p = perturbed("budget:agent=D,tokens=40")
    budgets = [e.payload["max_tokens"] for e in events(t, "llm.call") if e.agent == "D"]
    assert budgets == [40, 40, 40, 40] and len(p.applied) == 4
    assert {e.payload["max_tokens"] for e in events(base, "llm.call") if e.agent == "D"} == {800}
    t, p = perturbed("budget:agent=D,tokens=40,nth=1")
    assert [e.payload["max_tokens"] for e in events(t, "llm.call") if e.agent == "D"] == [800, 40, 800, 800]


def test_remove_edge_stops_a_listener_hearing_a_speaker(base):
    assert any(m.speaker == "D" for m in base.world.board.visible("P1"))
    t, p = perturbed("remove_edge:u=D,v=P1")
    assert not any(m.speaker == "D" for m in t.world.board.visible("P1"))
    assert any(m.speaker == "D" for m in t.world.board.visible("P2"))
    assert any(m.speaker == "P2" for m in t.world.board.visible("P1"))
    first_post = min(m.t for m in base.world.board.messages)
    assert p.point["t"] == first_post
    # from a later time on only: what P1 heard of D before stays
    later = max(m.t for m in base.world.board.messages if m.fields.get("round") == 1)
    t, _ = perturbed(f"remove_edge:u=D,v=P1,at={later}")
    heard = [m.fields["round"] for m in t.world.board.visible("P1") if m.speaker == "D"]
    assert heard == [1]


def test_fail_makes_the_selected_call_fail(base):
    t, p = perturbed("fail:phase=final,nth=1")
    assert t.status == "error"
    (err,) = events(t, "llm.error", phase="final")
    assert err.agent == "P1" and err.payload["error"] == "PerturbationError"


def test_delay_moves_a_reply_in_simulated_time(base):
    (b,) = [e for e in events(base, "llm.reply", phase="phase1") if e.agent == "P2"]
    t, _ = perturbed("delay:agent=P2,phase=phase1,by=100")
    (q,) = [e for e in events(t, "llm.reply", phase="phase1") if e.agent == "P2"]
    assert q.t == b.t + 100


def test_none_and_unmatched_selectors_change_nothing(base):
    for spec in ("none", "drop:agent=P1,round=9", "delay:agent=D,after=1e9,by=5"):
        t, p = perturbed(spec)
        assert t.trace.to_jsonl() == base.trace.to_jsonl() and p.point is None, spec


def test_operators_combine(base):
    t, p = perturbed("drop:agent=P1,round=2+delay:agent=D,phase=final,by=5")
    assert [e["operator"] for e in p.applied] == ["drop", "delay"]
    assert [e.agent for e in events(t, "llm.call", phase="discussion", round=2)] == ["D", "P2"]


def test_selector_fields_and_time():
    sel = Selector(agent="A", fields=(("game", "3"), ("reached", "true")), after=10.0)
    assert sel.matches("A", {"game": 3, "reached": True}, 10.0)
    assert not sel.matches("A", {"game": 3, "reached": False}, 10.0)
    assert not sel.matches("A", {"game": 3, "reached": True}, 9.0)
    assert not sel.matches("B", {"game": 3, "reached": True}, 12.0)
    assert not Selector(round="1").matches("A", {}, 0.0)


# -- SPEC strings ----------------------------------------------------------------

@pytest.mark.parametrize("spec, error", [
    ("", "perturb: empty"),
    ("bogus", "perturb: unknown operator 'bogus'"),
    ("drop:round=2", "perturb: drop: needs agent="),
    ("replace:agent=D", "perturb: replace: needs text="),
    ("truncate:keep=1.5", "perturb: truncate: keep must be a number between 0 and 1"),
    ("budget:tokens=0", "perturb: budget: tokens must be an integer >= 1"),
    ("delay:by=-1", "perturb: delay: by must be a number >= 0"),
    ("fail:nth=first", "perturb: fail: nth must be an integer >= 0 or 'all'"),
    ("fail:agnet=D", "perturb: fail: unknown key 'agnet'; allowed: agent, phase"),
    ("fail:agent=D,agent=P1", "perturb: fail: agent given twice"),
    ("fail:agent", "perturb: fail: 'agent' is not KEY=VALUE"),
    ("blank:on=prompt", "perturb: blank: on must be one of message, reply"),
    ("inject:text='unclosed", "perturb: unterminated ' quote"),
    ("inject:text=a'b'", "perturb: quote a whole value"),
    ("swap:a=D", "perturb: swap: give both a= and b="),
    ("remove_edge:u=D", "perturb: remove_edge: needs v="),
    ("remove_edge:u=D,v=D", "perturb: remove_edge: u and v must be two different agents"),
    ("fail:", "perturb: fail: nothing after ':'"),
    ("drop:agent=P1+", "perturb: empty operator between '+'"),
    ("fail:field.round=1", "perturb: fail: field.round: name a field other than phase and round"),
])
def test_spec_errors_are_one_line(spec, error):
    with pytest.raises(ConfigError) as exc:
        parse_perturbation(spec)
    assert str(exc.value).startswith(error) and "\n" not in str(exc.value)


@given(st.text(alphabet="ab ,+=:'\"xy", min_size=1, max_size=12).filter(lambda s: not ('"' in s and "'" in s)))
def test_canonical_spec_round_trips(text):
    p = parse_perturbation(f"inject:agent=P1,round=2,text={_quoted(text)}+delay:after=1.5,by=2,nth=all")
    again = parse_perturbation(p.describe())
    assert again.describe() == p.describe()
    assert p.operators[0].options["text"] == again.operators[0].options["text"] == text


def _needs_quotes(text):
    return bool(set(text) & set(",+=:'\" "))


def _quoted(text):
    if not _needs_quotes(text):
        return text
    return f"'{text}'" if '"' in text else f'"{text}"'


def test_unknown_agents_are_rejected_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="^perturb: drop: agent: no agent 'ZZ'; agents are D, P1, P2$"):
        run_study(SCENARIO, CFG, ["drop:agent=ZZ"])


# -- pairs, prefix reuse, noise floor -----------------------------------------------

@pytest_asyncio.fixture
async def server():
    async with FakeServer(FakeConfig()) as srv:
        yield srv


def fake(srv) -> BackendSpec:
    return BackendSpec("openai-compatible", "fake-1", base_url=srv.openai_url, options=FAST)


@pytest.mark.asyncio
async def test_prefix_reuse_pays_only_for_calls_from_the_point(server, tmp_path):
    study = await run_study_async(SCENARIO, CFG, ["drop:agent=P1,round=2"], seed=SEED, spec=fake(server),
                                  noise_floor=0)
    (row,) = study.results.pairs.to_dict(orient="records")
    # baseline: 12 calls; perturbed: 11 calls (P1's turn dropped), the first 6 replayed
    assert (row["calls_perturbed"], row["reused_calls"], row["live_calls"]) == (11, 6, 5)
    assert server.stats()["requests"] == CALLS + 5
    assert row["applied"] and row["d_norm"] > 0 and row["token_overhead"] != UNAVAILABLE
    # the perturbed run replays offline from its own cassette (the study's plots: read by no test here)
    out = write_study(study, tmp_path, plots=False)
    await server.stop()
    assert (await replay_async(out / "runs" / "context_corrosion" / "pair0-p0")).identical


@pytest.mark.asyncio
async def test_without_reuse_every_call_is_paid(server):
    study = await run_study_async(SCENARIO, CFG, ["drop:agent=P1,round=2"], seed=SEED, spec=fake(server),
                                  noise_floor=0, reuse="none")
    assert server.stats()["requests"] == CALLS + 11
    assert study.results.pairs.loc[0, "reused_calls"] == 0


@pytest.mark.asyncio
async def test_a_user_cassette_answers_the_baselines_of_a_later_study(server, tmp_path):
    spec = dataclasses.replace(fake(server), options={**FAST, "cassette": str(tmp_path / "mine.sqlite")})
    first = await run_study_async(SCENARIO, CFG, ["drop:agent=P1,round=2"], seed=SEED, spec=spec, noise_floor=0)
    assert server.stats()["requests"] == CALLS + 5
    server.reset()
    again = await run_study_async(SCENARIO, CFG, ["drop:agent=P1,round=2"], seed=SEED, spec=spec, noise_floor=0)
    assert server.stats()["requests"] == 5  # the baseline came from the cassette; the suffix is sent again
    assert again.runs[0].baseline.results["prefix_reuse"]["reused_calls"] == CALLS
    assert again.runs[0].baseline.trace.to_jsonl() == first.runs[0].baseline.trace.to_jsonl()
    assert again.results.pairs.loc[0, "d_norm"] == first.results.pairs.loc[0, "d_norm"]


@pytest.mark.asyncio
async def test_noise_floor_reruns_make_fresh_calls_on_real_backends(server):
    study = await run_study_async(SCENARIO, CFG, ["drop:agent=P1,round=2"], seed=SEED, spec=fake(server))
    res = study.results
    assert server.stats()["requests"] == CALLS + CALLS + 5  # baseline, one re-run (the default), suffix
    assert res.noise["measured"] and res.noise["floor"] == 0.0 and res.noise["warning"] is None
    assert res.pairs.loc[0, "within_noise_floor"] is False or not res.pairs.loc[0, "within_noise_floor"]
    assert res.warnings() == []


@pytest.mark.asyncio
async def test_unmeasured_noise_floor_on_a_real_backend_warns(server, tmp_path):
    study = await run_study_async(SCENARIO, CFG, ["none"], seed=SEED, spec=fake(server), noise_floor=0)
    res = study.results
    assert res.noise["floor"] is None and res.pairs.loc[0, "within_noise_floor"] is None
    assert any(w.startswith("NOISE FLOOR NOT MEASURED") for w in res.warnings())
    assert res.summary().attrs["warnings"] == res.warnings()
    assert res.summary().loc[0, "n_within_noise_floor"] is None
    assert "WARNING: NOISE FLOOR NOT MEASURED" in format_summary(res)
    out = write_study(study, tmp_path, plots=False)
    assert "> **WARNING:** NOISE FLOOR NOT MEASURED" in (out / "report.md").read_text()


def test_stub_noise_floor_is_zero_and_noop_is_no_observable_effect():
    res = run_study(SCENARIO, CFG, ["none", "drop:agent=P1,round=2"], pairs=2).results
    assert res.noise == {**res.noise, "floor": 0.0, "measured": False, "warning": None}
    none = res.pairs[res.pairs["perturbation"] == "none"]
    assert (none["d_norm"] == 0.0).all() and (none["manifestation"] == "no_observable_effect").all()
    assert none["within_noise_floor"].all() and (none["token_overhead"] == 1.0).all()
    assert none["t_star"].isna().all()
    drop = res.pairs[res.pairs["perturbation"] == "drop:agent=P1,round=2"]
    assert (drop["d_norm"] > 0).all() and not drop["within_noise_floor"].any()
    # a dropped turn is a detour, not a run that stopped short
    assert not drop["early_termination"].any() and not drop["extended_execution"].any()
    assert set(drop["manifestation"]) <= {"strategy_reroute", "structural_divergence_with_outcome_change"}
    # re-runs on the stub measure exactly 0
    res = run_study(SCENARIO, CFG, ["none"], noise_floor=2).results
    assert res.noise["measured"] and res.noise["floor"] == 0.0 and len(res.noise["reruns"]) == 2


def test_failed_call_is_a_catastrophic_failure_with_early_termination():
    (row,) = run_study(SCENARIO, CFG, ["fail:agent=P1,round=2"]).results.pairs.to_dict(orient="records")
    assert row["perturbed_status"] == "error" and row["answer_null"] and row["early_termination"]
    assert row["manifestation"] == "catastrophic_failure" and row["group"] == "combined_disruption"
    assert row["early_termination_count"] > 0 and row["t_star"] is not None


class NoUsage(StubBackend):
    def respond(self, request):
        return dataclasses.replace(super().respond(request), usage=None)


def test_token_overhead_is_unavailable_without_usage():
    res = run_study(SCENARIO, CFG, ["drop:agent=P1,round=2"], backend=NoUsage(SCENARIO.behaviour(CFG))).results
    assert res.pairs.loc[0, "token_overhead"] == UNAVAILABLE
    assert res.summary().loc[0, "token_overhead"] == UNAVAILABLE
    assert token_overhead(None, 10) == token_overhead(10, None) == token_overhead(0, 0) == UNAVAILABLE
    assert token_overhead(10, 15) == 1.5


def pair_once(seed: int, spec: str) -> dict:
    async def go():
        views = StudyBackend(BackendSpec(), StubBackend(SCENARIO.behaviour(CFG)))
        runs = await run_seed(SCENARIO, CFG, seed, [spec], 0, BackendSpec(), views)
        return pair_metrics(SCENARIO, runs.baseline, runs.perturbed[0], runs.perturbations[0], 0.0)
    return asyncio.run(go())


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([
    "drop:agent=P1,round=2", "swap:round=1", "budget:agent=D,tokens=40", "remove_edge:u=D,v=P2,at=30",
    "delay:agent=P2,by=7+inject:agent=D,round=2,text=x", "fail:phase=final",
]))
def test_the_same_pair_twice_gives_identical_metrics(seed, spec):
    assert pair_once(seed, spec) == pair_once(seed, spec)


def test_pair_metrics_do_not_depend_on_the_hash_seed(hash_seed_pair):
    """The command's pairs here and in an interpreter with another hash seed (tests/shared_runs.py)."""
    here, there = hash_seed_pair("perturbation")
    assert len(here.splitlines()) == 2 * 2  # two pairs of each perturbation
    assert there == here


# -- outcome hooks -----------------------------------------------------------------

@pytest.mark.parametrize("name, fields, check", [
    ("context_corrosion", {"rounds": 1, "n_peers": 2, "metrics": False},
     lambda o: set(o) == {"D", "P1", "P2"} and all(isinstance(v, str) for v in o.values())),
    ("veil_of_ignorance", {"n_agents": 2, "max_rounds": 2},
     lambda o: set(o) == {"consensus", "principle", "amount"} and isinstance(o["consensus"], bool)),
    ("acausal_cooperation", {"n_agents": 3, "rounds": 2, "embeddings": False},
     lambda o: o in {"A0", "A1", "A2"}),
    ("llm_auction", {"n_agents": 5, "n_vignettes": 2},
     lambda o: len(o) == 2 and all(v in (None, "A", "B", "C", "D") for v in o.values())),
])
def test_every_scenario_has_an_outcome(name, fields, check):
    scenario = load_scenario(name)
    trial = run_trial(scenario, scenario.config_type.from_mapping(fields), 3)
    answer = outcome_of(scenario, trial.results)
    assert answer is not None and check(answer), answer
    assert outcome_of(scenario, {**trial.results, "status": "error"}) is None


def test_outcomes_of_empty_results_are_null():
    for name in ("context_corrosion", "veil_of_ignorance", "acausal_cooperation", "llm_auction"):
        assert load_scenario(name).outcome({"metrics": {}}) is None, name


# -- results -------------------------------------------------------------------------

def synthetic() -> PerturbationResults:
    base = dict(applied=True, answer_null=False, baseline_status="ok", live_calls=3, reused_calls=2)
    rows = [
        dict(base, perturbation="a", d_norm=0.0, t_star_norm=None, answer_changed=False,
             token_overhead=1.0, manifestation="no_observable_effect", within_noise_floor=True),
        dict(base, perturbation="a", d_norm=0.2, t_star_norm=0.5, answer_changed=False,
             token_overhead=UNAVAILABLE, manifestation="structural_divergence_recovered", within_noise_floor=False),
        dict(base, perturbation="a", d_norm=0.4, t_star_norm=0.25, answer_changed=True,
             token_overhead=1.5, manifestation="strategy_reroute", within_noise_floor=False),
        dict(base, perturbation="b", d_norm=0.3, t_star_norm=0.1, answer_changed=True, answer_null=True,
             token_overhead=UNAVAILABLE, manifestation="catastrophic_failure", within_noise_floor=False),
        dict(base, perturbation="b", d_norm=0.5, t_star_norm=0.1, answer_changed=True,
             token_overhead=UNAVAILABLE, manifestation="catastrophic_failure", within_noise_floor=False,
             baseline_status="error"),
    ]
    return PerturbationResults({"scenario": "x", "perturbations": ["a", "b"]}, pd.DataFrame(rows),
                               {"floor": 0.0, "measured": False, "warning": None})


def test_summary_table():
    s = synthetic().summary().set_index("perturbation")
    a, b = s.loc["a"], s.loc["b"]
    assert a["n_pairs"] == 3 and a["mean_d_norm"] == pytest.approx(0.2)
    assert a["mean_t_star_norm"] == pytest.approx(0.375) and a["n_diverged"] == 2
    assert a["recovery_rate"] == 0.5 and a["answer_changed_rate"] == pytest.approx(1 / 3)
    assert (a["recovery_ci_low"], a["recovery_ci_high"]) == proportion_ci(1, 2)
    assert (a["answer_changed_ci_low"], a["answer_changed_ci_high"]) == proportion_ci(1, 3)
    assert 0.0 <= a["d_norm_ci_low"] <= a["mean_d_norm"] <= a["d_norm_ci_high"] <= 1.0
    assert a["token_overhead"] == 1.25 and a["token_overhead_n"] == 2
    assert a["n_within_noise_floor"] == 1 and a["live_calls"] == 9 and a["reused_calls"] == 6
    assert (a["n_no_observable_effect"], a["n_structural_divergence_recovered"], a["n_strategy_reroute"]) == (1, 1, 1)
    assert a["group_behavioral_detours"] == 2 and a["group_no_observable_effect"] == 1
    # b: the pair with a failed baseline is left out, and said so
    assert b["n_pairs"] == 1 and b["token_overhead"] == UNAVAILABLE and b["recovery_rate"] == 0.0
    assert b["n_catastrophic_failure"] == 1 and b["group_combined_disruption"] == 1
    assert any("failed baseline" in w for w in synthetic().warnings())


def test_a_studys_readability_is_tested_once(monkeypatch):
    """summary() needs the readability records and so do its warnings(): one family of tests, run once."""
    from simcore.analysis import readability

    res = synthetic()
    res.pairs = res.pairs.assign(replies_perturbed=4, unreadable_perturbed=[0, 1, 2, 0, 0], replies_baseline=4,
                                 unreadable_baseline=0, unreadable_only_perturbed=[0, 1, 2, 0, 0],
                                 unreadable_only_baseline=0)
    calls = []
    decide = readability.decide
    monkeypatch.setattr(readability, "decide", lambda *a, **kw: calls.append(1) or decide(*a, **kw))
    table = res.summary()
    res.warnings()
    assert len(calls) == 1 and set(table["readability_test"]) == {"exact McNemar"}


def test_report_and_plots(tmp_path):
    res = synthetic()
    res.pairs = res.pairs.assign(seed=1, point_share=0.2, reroutes=0, early_termination=False,
                                 extended_execution=False)
    files = res.report(tmp_path)
    assert {Path(f).name for f in files.values()} == {"report.md", "d_norm.png", "manifestation.png",
                                                       "divergence_position.png"}
    text = (tmp_path / "report.md").read_text()
    assert "## Summary" in text and "![d_norm per pair](plots/d_norm.png)" in text
    assert all(Path(f).stat().st_size > 10_000 for f in files.values() if f.endswith(".png"))


# -- command line ------------------------------------------------------------------

def test_cli_writes_a_study_that_replays(tmp_path, capsys):
    rc = cli(["--scenario", "context_corrosion", "--rounds", "2", "--n-peers", "2", "--no-metrics", "--perturb",
              "drop:agent=P1,round=2", "--perturb", "none", "--pairs", "2", "--out", str(tmp_path), "--json",
              "--no-progress"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    study = Path(out["study_dir"])
    for name in ("study.json", "pairs.csv", "pairs.jsonl", "summary.csv", "noise.json", "report.md",
                 "plots/d_norm.png", "plots/manifestation.png", "plots/divergence_position.png"):
        assert (study / name).is_file(), name
    assert [r["perturbation"] for r in out["summary"]] == ["drop:agent=P1,round=2", "none"]
    runs = study / "runs" / "context_corrosion"
    assert sorted(p.name for p in runs.iterdir()) == [
        "pair0-baseline", "pair0-p0", "pair0-p1", "pair1-baseline", "pair1-p0", "pair1-p1"]
    manifest = read_json(runs / "pair1-p0" / "manifest.json")
    assert manifest["perturbation"] == "drop:agent=P1,round=2"
    assert asyncio.run(replay_async(runs / "pair1-p0")).identical
    # without its perturbation the run would not replay: the manifest's record is what makes it
    path = runs / "pair1-p0" / "manifest.json"
    path.write_text(json.dumps({k: v for k, v in manifest.items() if k != "perturbation"}))
    assert not asyncio.run(replay_async(runs / "pair1-p0")).identical
    pairs = pd.read_csv(study / "pairs.csv")
    assert len(pairs) == 4 and "alignment" not in pairs.columns
    assert set(json.loads((study / "pairs.jsonl").read_text().splitlines()[0])["alignment"]) <= set("MSID")
    # report DIR rebuilds the same summary
    assert cli(["report", str(study), "--no-plot"]) == 0


def test_with_no_flags_a_small_default_study_runs_and_says_what_it_is(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(["--plots", "none", "--no-progress"]) == 0  # (no figure: neither the study's nor its runs')
    out, err = capsys.readouterr()
    assert err == ("the default study: context_corrosion with --perturb 'drop:agent=P1,round=2' (P1's round-2 "
                   "message dropped), one pair; --scenario and --perturb choose another\n")
    assert out.startswith("perturbation study of context_corrosion: 1 pairs\n  #1 = drop:agent=P1,round=2\n")
    (study,) = (tmp_path / "runs" / "perturbation").iterdir()
    assert f"study directory: runs/perturbation/{study.name}" in out
    pairs = pd.read_csv(study / "pairs.csv")
    assert list(pairs["perturbation"]) == ["drop:agent=P1,round=2"] and bool(pairs["applied"].iloc[0])


@pytest.mark.parametrize("argv, error", [
    (["--perturb", "bogus"], "perturb: unknown operator"),
    (["--perturb", "drop:agent=ZZ"], "perturb: drop: agent: no agent 'ZZ'"),
    ([], "perturb: give at least one --perturb SPEC"),
    (["--perturb", "none", "--pairs", "0"], "pairs: must be an integer >= 1"),
    (["--perturb", "none", "--noise-floor", "-1"], "noise_floor: must be an integer >= 0"),
    (["--perturb", "none", "--rounds", "9"], "rounds: must be an integer from 1 to 5"),
    (["--perturb", "none", "--perturb", "none"], "perturb: 'none' is given twice"),
])
def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, argv, error):
    with pytest.raises(SystemExit) as exc:
        cli(["--scenario", "context_corrosion", "--out", str(tmp_path / "out"), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {error}") and "\n" not in err
    assert not (tmp_path / "out").exists()


# -- batch runner --------------------------------------------------------------------

def test_variant_scenarios_load_and_pickle():
    v = load_scenario("perturbation.context_corrosion")
    assert v.name == "perturbation.context_corrosion" and v.trial is not None
    cfg = v.config_type.from_mapping({"rounds": 2, "perturb": "swap:round=1"})
    assert pickle.loads(pickle.dumps(cfg)) == cfg and pickle.loads(pickle.dumps(v)).name == v.name
    with pytest.raises(ConfigError, match="^perturb: unknown operator"):
        v.config_type.from_mapping({"perturb": "bogus"})
    with pytest.raises(ValueError, match="needs a variant: perturbation.<scenario>"):
        load_scenario("perturbation")
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        load_scenario("perturbation.nope")


@pytest.mark.slow  # (a whole sweep of studies; test_batch covers sweeps, the study tests cover perturbations)
def test_batch_sweep_over_perturbations_and_parameters(tmp_path):
    from simcore.batch import run_sweep

    df = run_sweep(
        "perturbation.context_corrosion", trials=2, grid={"rounds": [1, 2]},
        conditions=("perturb", ["drop:agent=P1,round=1", "none"]), base={"n_peers": 2},
        executor="serial", out=tmp_path / "sweep", plot=False,
    )
    assert len(df) == 8 and (df["status"] == "ok").all()
    none = df[df["perturb"] == "none"]
    drop = df[df["perturb"] == "drop:agent=P1,round=1"]
    assert (none["metric_d_norm"] == 0).all() and (none["metric_manifestation"] == "no_observable_effect").all()
    assert (drop["metric_d_norm"] > 0).all() and (drop["metric_applied"] == 1).all()
    # conditions share seeds, so each drop pair has a none pair with the same baseline
    assert sorted(none["seed"]) == sorted(drop["seed"])
    # a pair trial pays only what was sent: a none pair replays all of its perturbed run
    assert (none["metric_live_calls"] == 0).all()
    assert list(none["calls"]) == [9, 9, 12, 12]  # the baselines: 3 agents x (2 + rounds) calls
    res = PerturbationResults.from_sweep(tmp_path / "sweep")
    summary = res.summary()
    assert list(summary["perturbation"]) == [
        "drop:agent=P1,round=1 @ rounds=1", "none @ rounds=1", "drop:agent=P1,round=1 @ rounds=2", "none @ rounds=2"]
    assert (summary["n_pairs"] == 2).all()
    # true/false metrics get proportion intervals in the sweep's summary
    for group in read_json(tmp_path / "sweep" / "summary.json")["groups"]:
        for name in ("applied", "answer_changed", "early_termination"):
            d = group["metrics"][name]
            assert 0.0 <= d["ci_low"] <= d["mean"] <= d["ci_high"] <= 1.0, (name, d)
    pair_dir = tmp_path / "sweep" / df.loc[drop.index[0], "run_dir"]
    assert (pair_dir / "runs" / "context_corrosion" / "baseline" / "trace.jsonl").is_file()
    assert asyncio.run(replay_async(pair_dir)).identical
    assert asyncio.run(replay_async(pair_dir / "runs" / "context_corrosion" / "perturbed")).identical


# -- concurrency ---------------------------------------------------------------

def test_reordering_a_parallel_phase_is_no_reroute(base):
    spec = "delay:agent=P1,phase=phase1,by=1000"
    t, _ = perturbed(spec)
    order = [e.agent for e in events(t, "llm.reply", phase="phase1")]
    assert order != [e.agent for e in events(base, "llm.reply", phase="phase1")] and order[-1] == "P1"
    (row,) = run_study(SCENARIO, CFG, [spec], seed=SEED).results.pairs.to_dict(orient="records")
    assert row["applied"] and row["d_norm"] == 0.0 and row["reroutes"] == 0
    assert row["manifestation"] == "no_observable_effect"


def test_reordering_an_open_floor_is_a_reroute():
    from scenarios.llm_auction import SCENARIO as AUCTION
    from scenarios.llm_auction.config import AuctionConfig

    cfg = AuctionConfig(mechanism="free_discussion", n_agents=5, n_vignettes=1)
    base = run_trial(AUCTION, cfg, SEED)
    r1, r2 = [e for e in base.trace if e.kind == "llm.reply" and e.fields.get("phase") == "proposal"][:2]
    # the first to finish now finishes second: the two trade places on the floor
    spec = f"delay:agent={r1.agent},phase=proposal,by={r2.t - r1.t + 0.01}"
    (row,) = run_study(AUCTION, cfg, [spec], seed=SEED).results.pairs.to_dict(orient="records")
    assert row["applied"] and row["d_norm"] > 0 and row["reroutes"] > 0
