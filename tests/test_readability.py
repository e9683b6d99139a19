"""simcore.analysis.readability: every comparison tests whether its arms' replies could be read
equally often, and says so where they could not (issue 42, "readability is data")."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar

from backends.base import LLMRequest, LLMResponse, Usage
from backends.stub import sample_schema
from simcore.analysis.readability import Arm, arm_of
from simcore.api import LLMAgent, World
from simcore.base.config import Config, param
from simcore.replies.schema import choice, text
from simcore.runs.scenario import Scenario
from simcore.sim.protocols import parallel

# -- a scenario whose counterfactual changes only how often replies can be read ----------------


@dataclass(frozen=True, kw_only=True)
class Move:
    KIND: ClassVar[str] = "decision"
    reasoning: str | None = text(required=False)
    action: str = choice("COOPERATE", "DEFECT")


@dataclass(frozen=True)
class GarbleConfig(Config):
    """Six agents, three rounds of one decision each; ``garble`` of the replies are prose."""

    garble: float = param(0.1, lo=0.0, hi=1.0, help="share of replies that cannot be read")


def build(world: World, cfg: GarbleConfig) -> None:
    agents = [LLMAgent(world, f"P{i}", max_output_tokens=40) for i in range(6)]

    def rounds(world: World) -> Any:
        moves = []
        for r in range(3):
            replies = yield from parallel(world, agents, "Your move?", schema=Move, phase="decision", round=r)
            moves += [x.value.action for x in replies if x.value is not None]
        world.state["moves"] = moves

    world.process(rounds(world))


def analyze(world: World, cfg: GarbleConfig) -> dict[str, Any]:
    moves = world.state.get("moves", [])
    return {"metrics": {"cooperation": moves.count("COOPERATE") / len(moves) if moves else None}}


@dataclass(frozen=True)
class Garbled:
    """The stub's behaviour: a reply in the format, or with chance ``garble`` none at all."""

    garble: float

    def __call__(self, request: LLMRequest, rng: np.random.Generator) -> Any:
        if request.schema is not None and rng.random() < self.garble:
            return "Hmm, that depends on what the others do."
        return sample_schema(request.schema, rng) if request.schema is not None else "ok"


def garbled(cfg: GarbleConfig) -> Garbled:
    return Garbled(cfg.garble)


GARBLE = Scenario(
    name="garble", description="test scenario: arms that differ only in what could be read",
    config_type=GarbleConfig, build=build, analyze=analyze, behaviour=garbled,
    counterfactual=("garble", 0.8, 0.1),
)


def test_a_monte_carlo_whose_arms_differ_in_readability_says_so(tmp_path, no_plots):
    from simcore.cli import format_arms
    from simcore.runs.counterfactual import run_arms

    with contextlib.redirect_stderr(io.StringIO()):
        summary = run_arms(GARBLE, GarbleConfig(), 3, n_trials=4, out=tmp_path, progress=False)
    record = summary["statistical_comparison"]["readability"]
    # 72 reply slots per arm (6 agents x 3 rounds x 4 trials), matched across the shared seeds
    assert record["test"] == "exact McNemar" and record["replies_a"] == record["replies_b"] == 72
    assert record["share_a"] > 0.6 and record["share_b"] < 0.3 and record["differs"] is True
    assert record["mark"] == (f"arms differ in what could be read ({record['share_a']:.0%} vs "
                              f"{record['share_b']:.0%} unreadable, p = {record['p_adjusted']:.2g})")
    assert record["family"] == "its own (one test)" and record["p_adjusted"] == record["p_value"] < 1e-6
    written = json.loads((tmp_path / "garble" / summary["experiment_id"] / "summary.json").read_text())
    assert written["statistical_comparison"]["readability"]["mark"] == record["mark"]
    assert record["mark"] in format_arms(summary)


def test_a_sweep_comparison_whose_conditions_differ_in_readability_says_so(tmp_path, monkeypatch):
    from simcore.batch import report
    from simcore.batch.command import main

    reads = []
    read_run = report.read_run
    monkeypatch.setattr(report, "read_run", lambda *a, **kw: reads.append(a[0]) or read_run(*a, **kw))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["tests.test_readability:GARBLE", "--trials", "3", "--executor", "serial", "--no-plot",
                     "--no-progress", "--out", str(tmp_path / "sweep")])
    assert code == 0
    [comparison] = json.loads((tmp_path / "sweep" / "summary.json").read_text())["comparisons"]
    record = comparison["readability"]
    assert record["test"] == "exact McNemar" and record["differs"] is True
    assert record["mark"].startswith("arms differ in what could be read (") and record["mark"] in out.getvalue()
    # The summary read the trials' replies from the sweep's index (ledger.jsonl), no run directory again
    # (the one read is the first run's, for the kind of a metric the scenario does not declare), and they
    # are what each run's results.json holds.
    assert len(reads) == 1
    ledger = [json.loads(line) for line in (tmp_path / "sweep" / "ledger.jsonl").read_text().splitlines()]
    for row in ledger:
        results = json.loads((tmp_path / "sweep" / row["run_dir"] / "results.json").read_text())
        assert Arm(**row["readability"]) == arm_of(results)


def test_arms_that_read_alike_carry_no_mark(tmp_path, no_plots):
    from simcore.analysis.readability import readability_lines
    from simcore.runs.counterfactual import run_arms

    same = dataclasses.replace(GARBLE, counterfactual=("garble", 0.2, 0.2))
    with contextlib.redirect_stderr(io.StringIO()):
        summary = run_arms(same, GarbleConfig(), 3, n_trials=3, out=tmp_path, progress=False)
    record = summary["statistical_comparison"]["readability"]
    assert record["test"] == "exact McNemar" and record["only_a"] == record["only_b"] == 0
    assert record["differs"] is False and record["mark"] is None
    assert readability_lines(record)[0].startswith("  unreadable replies a 2")  # said, not marked


# -- the tests themselves --------------------------------------------------------------------


# (Imported in each test: the end-to-end tests above run against code without this module too.)
def slots(unreadable: list[str], turns: int = 4, digest: str = "d") -> dict[str, Any]:
    return {"turns": turns, "digest": digest, "unreadable": unreadable}


def test_mcnemar_on_matched_slots_equals_statsmodels():
    from simcore.analysis.readability import Arm, compare, discordant

    a = [Arm(4, 3, slots(["x#0", "y#0", "z#0"])), Arm(4, 2, slots(["x#0", "w#0"]))]
    b = [Arm(4, 1, slots(["x#0"])), Arm(4, 0, slots([]))]
    assert [discordant(x, y) for x, y in zip(a, b)] == [(2, 0), (2, 0)]
    rec = compare(a, b, paired=True)
    ref = mcnemar([[1, 4], [0, 3]], exact=True).pvalue  # 1 both, 4 only in A, 0 only in B, 3 neither
    assert rec["test"] == "exact McNemar" and rec["p_value"] == pytest.approx(ref)
    assert (rec["only_a"], rec["only_b"], rec["share_a"], rec["share_b"]) == (4, 0, 5 / 8, 1 / 8)


def test_runs_that_asked_different_questions_fall_back_to_fisher_on_pooled_counts():
    from simcore.analysis.readability import Arm, compare, from_counts

    a = [Arm(10, 8, slots([], turns=10, digest="auction")), Arm(10, 7, None)]  # an old run: no slots
    b = [Arm(12, 1, slots([], turns=12, digest="discussion")), Arm(12, 2, None)]
    rec = compare(a, b, paired=True)
    assert rec["test"] == "Fisher's exact" and "asked different questions" in rec["unit"]
    assert rec["p_value"] == pytest.approx(sps.fisher_exact([[15, 5], [3, 21]]).pvalue)
    assert compare(a, b, paired=False)["unit"] == "replies pooled per arm (unpaired arms)"
    assert from_counts((0, 0), (5, 1))["not_tested"] == "no reply asked for a format in arm A"


def test_a_family_of_readability_tests_is_holm_adjusted_and_marks_only_what_differs():
    from simcore.analysis.readability import Arm, decide, from_counts, one

    records = {"p1": from_counts((100, 80), (100, 20)), "p2": from_counts((100, 10), (100, 12)),
               "p3": from_counts((0, 0), (0, 0))}
    out = decide(records, family="mechanism pairs")
    assert out["p1"]["family"] == "its own: Holm across 2 mechanism pairs"
    assert out["p1"]["p_adjusted"] == pytest.approx(min(1.0, 2 * records["p1"]["p_value"]))
    assert out["p1"]["mark"] == f"arms differ in what could be read (80% vs 20% unreadable, p = {out['p1']['p_adjusted']:.2g})"
    assert out["p2"]["differs"] is False and out["p2"]["mark"] is None
    assert out["p3"]["differs"] is None and out["p3"]["not_tested"] == "no reply asked for a format in either arm"
    assert one([Arm(3, 0)], [Arm(3, 0)], paired=False)["family"] == "its own (one test)"


# -- reply slots: what pairs a reply of one run with the same reply of the other ------------------


class Scripted:
    """Attempt k of each turn gets ``script[k]``."""

    name = "scripted"

    def __init__(self, script: list[str]) -> None:
        self.script = script

    async def complete(self, request: LLMRequest) -> LLMResponse:
        k = min(int(request.metadata.get("reask", 0)), len(self.script) - 1)
        return LLMResponse(self.script[k], Usage(10, 5), "stop")


def slots_of(script: list[str], reask: int) -> dict[str, Any]:
    world = World(1, Scripted(script), scenario="test", reask=reask, reask_max_tokens=100)
    agents = [LLMAgent(world, f"A{i}", max_output_tokens=30) for i in range(2)]

    def proc() -> Any:
        for r in range(2):
            yield from parallel(world, agents, "Your move?", schema=Move, phase="decision", round=r)
        yield from parallel(world, agents[:1], "Again?", schema=Move, phase="decision", round=1)

    world.process(proc())
    world.run()
    return world.parse_quality.slots()


def test_reply_slots_number_repeats_and_count_a_reask_as_its_turn():
    unread = slots_of(["hmm"], reask=0)
    assert unread["turns"] == 5 and len(unread["unreadable"]) == 5
    assert 'decision|A0|{"phase":"decision","round":1}#1' in unread["unreadable"]  # the repeated turn
    # Re-asked and then read: the same five turns (no re-ask slot), none unreadable.
    fixed = slots_of(["hmm", '{"action": "DEFECT"}'], reask=1)
    assert fixed["turns"] == 5 and fixed["unreadable"] == [] and fixed["digest"] == unread["digest"]
    # ... and every one of them answered only when asked again; none where the first reply answers.
    assert len(fixed["reask_read"]) == 5 and unread["reask_read"] == []
    assert slots_of(['{"action": "DEFECT"}'], reask=1)["reask_read"] == []


def test_a_perturbation_that_makes_replies_unreadable_is_marked():
    # A 3-token budget cuts every reply of the perturbed runs: all 60 slots unreadable there,
    # none in their baselines; the control perturbation reads alike.
    from scenarios.context_corrosion import SCENARIO
    from simcore.perturbation import run_study

    with contextlib.redirect_stderr(io.StringIO()):
        study = run_study(SCENARIO, SCENARIO.config_type(rounds=2, metrics=False), ["budget:tokens=3", "none"],
                          pairs=3)
    res = study.results
    reading = res.readability()
    cut, control = reading["budget:tokens=3"], reading["none"]
    assert cut["test"] == "exact McNemar" and (cut["only_a"], cut["only_b"]) == (60, 0)
    assert cut["family"] == "its own: Holm across 2 perturbations"
    assert cut["mark"] == f"arms differ in what could be read (100% vs 0% unreadable, p = {cut['p_adjusted']:.2g})"
    assert control["differs"] is False
    assert any("'budget:tokens=3': perturbed and baseline runs differ in what could be read" in w
               for w in res.warnings())
    marks = res.summary()["readability_mark"]
    assert marks.iloc[0] == cut["mark"] and marks.isna().iloc[1]


# -- answers given only when asked again (issue 48): tested between arms as readability is ----------


@dataclass(frozen=True)
class LateConfig(Config):
    """Six agents, three rounds; ``late`` of the first replies answer nothing, their re-asks do."""

    late: float = param(0.1, lo=0.0, hi=1.0, help="share of first replies that only a re-ask answers")


@dataclass(frozen=True)
class Late:
    """A first reply in the format, or with chance ``late`` none; every re-ask in the format."""

    late: float

    def __call__(self, request: LLMRequest, rng: np.random.Generator) -> Any:
        if request.schema is None:
            return "ok"
        if not request.metadata.get("reask") and rng.random() < self.late:
            return "Agent B's decision is probably the same as last time."
        return sample_schema(request.schema, rng)


LATE = Scenario(
    name="late", description="test scenario: arms that differ only in answers given on a re-ask",
    config_type=LateConfig, build=build, analyze=analyze, behaviour=lambda cfg: Late(cfg.late),
    counterfactual=("late", 0.8, 0.1),
)


def test_arms_whose_answers_came_from_reasks_unequally_say_so_beside_readability(tmp_path, no_plots):
    from backends.registry import BackendSpec
    from simcore.cli import format_arms
    from simcore.runs.counterfactual import run_arms

    with contextlib.redirect_stderr(io.StringIO()):
        summary = run_arms(LATE, LateConfig(), 3, n_trials=3, out=tmp_path, progress=False,
                           spec=BackendSpec("stub", options={"reask": 1}))
    record = summary["statistical_comparison"]["readability"]
    assert record["unreadable_a"] == record["unreadable_b"] == 0 and record["mark"] is None  # every reply read
    reask = record["reask"]
    # 54 answer slots per arm (6 agents x 3 rounds x 3 trials), matched across the shared seeds
    assert reask["test"] == "exact McNemar" and reask["answers_a"] == reask["answers_b"] == 54
    assert reask["share_a"] > 0.6 and reask["share_b"] < 0.3 and reask["differs"] is True
    assert reask["mark"] == (f"arms differ in answers given only when asked again ({reask['share_a']:.0%} vs "
                             f"{reask['share_b']:.0%} of answers came from a re-ask, p = {reask['p_adjusted']:.2g})")
    assert reask["mark"] in format_arms(summary)


def reasked_slots(unreadable: list[str], reask_read: list[str], turns: int = 4) -> dict[str, Any]:
    return {**slots(unreadable, turns), "reask_read": reask_read}


def test_the_reask_test_pairs_slots_answered_in_both_arms_and_equals_statsmodels():
    from simcore.analysis.readability import Arm, compare, discordant_reasks

    # Run pair 1: x answered on a re-ask in A only; y in both; z unreadable in B (left out of the re-ask test).
    a = [Arm(4, 0, reasked_slots([], ["x#0", "y#0", "z#0"]), 3), Arm(4, 0, reasked_slots([], ["w#0"]), 1)]
    b = [Arm(4, 1, reasked_slots(["z#0"], ["y#0"]), 1), Arm(4, 0, reasked_slots([], []), 0)]
    assert [discordant_reasks(x, y) for x, y in zip(a, b)] == [(1, 0), (1, 0)]
    rec = compare(a, b, paired=True)["reask"]
    ref = mcnemar([[1, 2], [0, 4]], exact=True).pvalue
    assert rec["test"] == "exact McNemar" and rec["p_value"] == pytest.approx(ref)
    assert (rec["answers_a"], rec["reask_read_a"], rec["answers_b"], rec["reask_read_b"]) == (8, 4, 7, 1)
    # Unpaired, or slots that do not match: Fisher's exact on the answers pooled per arm.
    rec = compare(a, b, paired=False)["reask"]
    assert rec["test"] == "Fisher's exact" and rec["p_value"] == pytest.approx(sps.fisher_exact([[4, 4], [1, 6]]).pvalue)
    # Runs recorded before answers given on a re-ask were counted are not tested.
    old = compare([Arm(4, 0, slots([]))], [Arm(4, 0, slots([]))], paired=True)["reask"]
    assert old["p_value"] is None and old["not_tested"].startswith("runs recorded before")


def test_the_reask_tests_are_a_holm_family_of_their_own_and_said_beside_readability():
    from simcore.analysis.readability import (
        decide,
        from_counts,
        readability_lines,
        reask_from_counts,
    )

    records = {k: {**from_counts((100, 0), (100, 0)), "reask": reask_from_counts(ra, rb)}
               for k, (ra, rb) in {"p1": ((100, 60), (100, 10)), "p2": ((100, 5), (100, 6))}.items()}
    out = decide(records, family="mechanism pairs")
    p1, p2 = out["p1"]["reask"], out["p2"]["reask"]
    assert p1["family"] == "its own: Holm across 2 mechanism pairs"
    assert p1["p_adjusted"] == pytest.approx(min(1.0, 2 * records["p1"]["reask"]["p_value"]))
    assert p1["differs"] is True and p2["differs"] is False and p2["mark"] is None
    assert out["p1"]["p_value"] is not None and out["p1"]["mark"] is None  # readability decided apart
    assert readability_lines(out["p1"], "A", "B") == [f"  {p1['mark']}: {p1['test']}, {p1['unit']}; family {p1['family']}"]
    assert readability_lines(out["p2"], "A", "B")[0].startswith("  answers given only when asked again A 5%, B 6%")


@dataclass(frozen=True)
class LateWhenMarked:
    """A first reply that answers nothing where the prompt carries the mark; every other reply in the format."""

    def __call__(self, request: LLMRequest, rng: np.random.Generator) -> Any:
        if request.schema is None:
            return "ok"
        marked = any("LATEMARK" in m.content for m in request.messages)
        if marked and not request.metadata.get("reask"):
            return "Agent B's decision is probably the same as last time."
        return sample_schema(request.schema, rng)


def test_a_perturbation_whose_answers_come_from_reasks_is_marked_beside_readability():
    # The mark injected into every prompt leaves each first reply of the perturbed runs without an answer
    # and its re-ask answers: all 36 answer slots of the perturbed runs come from a re-ask, none of the baselines'.
    from backends.registry import BackendSpec
    from simcore.perturbation import run_study
    from simcore.runs.scenario import ResultEntry

    scenario = dataclasses.replace(LATE, behaviour=lambda cfg: LateWhenMarked(), outcome=ResultEntry("metrics"))
    with contextlib.redirect_stderr(io.StringIO()):
        study = run_study(scenario, LateConfig(), ["inject:text=LATEMARK,on=prompt,nth=all", "none"], pairs=2,
                          spec=BackendSpec("stub", options={"reask": 1}))
    res = study.results
    reading = res.readability()
    late, control = reading["inject:nth=all,text=LATEMARK,on=prompt"]["reask"], reading["none"]["reask"]
    assert late["test"] == "exact McNemar" and (late["only_a"], late["only_b"]) == (36, 0)
    assert (late["answers_a"], late["reask_read_a"], late["reask_read_b"]) == (36, 36, 0)
    assert late["family"] == "its own: Holm across 2 perturbations" and late["differs"] is True
    assert control["differs"] is False and control["reask_read_a"] == control["reask_read_b"] == 0
    assert reading["inject:nth=all,text=LATEMARK,on=prompt"]["mark"] is None  # every slot read in both arms
    assert any("differ in answers given only when asked again (100% vs 0%" in w for w in res.warnings())
    summary = res.summary()
    assert list(summary["reask_share_perturbed"]) == [1.0, 0.0] and list(summary["reask_share_baseline"]) == [0.0, 0.0]
    assert summary["reask_mark"].iloc[0] == late["mark"] and summary["reask_mark"].isna().iloc[1]
