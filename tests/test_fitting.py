"""Requests that fit the model's context window (simcore.sim.fitting, backends.context).

On the stub (``--context-window``, counts estimated) and on the fake server, which
tells its window where llama.cpp, vLLM or llama-cpp-python do and refuses a
request that passes it as they do.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.base import LLMRequest, LLMResponse, Message, Usage
from backends.context import (
    estimate_prompt_tokens,
    probe_window,
    window_from_models,
    window_from_props,
    window_from_show,
)
from backends.errors import BadRequest, ContextOverflow, error_from_record, http_error
from backends.fake_server import FakeConfig, FakeServer
from scenarios.veil_of_ignorance import SCENARIO as VEIL
from simcore.api import LLMAgent, World
from simcore.base.records import read_json
from simcore.cli import main
from simcore.replay import replay_async
from simcore.replies.schema import choice, text
from simcore.sim.fitting import Fitter, min_reply_tokens
from simcore.sim.memory import FullMemory, RecentMemory
from simcore.sim.protocols import parallel

REFUSAL = ("This model's maximum context length is 4096 tokens. However, you requested 5760 tokens "
           "(4160 in the messages, 1600 in the completion). Please reduce the length of the messages or completion.")


@dataclass(frozen=True, kw_only=True)
class Move:
    KIND: ClassVar[str] = "decision"
    reasoning: str | None = text(required=False)
    action: str = choice("COOPERATE", "DEFECT")


class Recording:
    """Answers every request with a short JSON move; keeps what it was sent."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return LLMResponse('{"action": "COOPERATE"}', Usage(estimate_prompt_tokens(request), 8))


def events(trace, kind: str) -> list:
    return [e for e in trace.events if e.kind == kind]


# -- what servers say ------------------------------------------------------------------------

def test_a_refusal_names_the_window_and_the_prompt_and_replays_as_itself():
    err = http_error(400, f"llamacpp: HTTP 400 from 127.0.0.1:8080: {REFUSAL}")
    assert isinstance(err, ContextOverflow) and (err.window, err.prompt_tokens) == (4096, 4160)
    again = error_from_record(type(err).__name__, str(err))  # as a cassette gives it back
    assert isinstance(again, ContextOverflow) and (again.window, again.prompt_tokens) == (4096, 4160)
    other = http_error(400, "llamacpp: HTTP 400: bad schema")
    assert type(other) is BadRequest


def test_windows_are_read_where_each_server_says_them():
    assert window_from_props({"default_generation_settings": {"n_ctx": 4096}}) == 4096
    assert window_from_props({"n_ctx": 2048}) == 2048 and window_from_props({"detail": "Not Found"}) is None
    models = {"data": [{"id": "a", "max_model_len": 8192}, {"id": "b", "max_model_len": 1024}]}
    assert window_from_models(models, "b") == 1024 and window_from_models(models, "c") is None
    assert window_from_models({"data": [{"id": "only", "max_model_len": 512}]}, "other") == 512
    # llama-cpp-python's model list has no size.
    assert window_from_models({"data": [{"id": "m", "object": "model", "owned_by": "me"}]}, "m") is None
    show = {"parameters": "stop <|im_end|>\nnum_ctx 4096", "model_info": {"llama.context_length": 131072}}
    assert window_from_show(show) == 4096
    assert window_from_show({"model_info": {"qwen2.context_length": 32768}}) == 32768


def test_the_probe_asks_the_fake_server_where_it_says_its_window():
    for where, preset, expected in (("props", "llamacpp", 3000), ("models", "vllm", 3000), ("none", "llamacpp", None)):
        srv = FakeServer(FakeConfig(context_window=3000, window_in=where))
        with srv.in_thread():
            found = probe_window(preset, srv.openai_url, "fake")
        assert (found[0] if found else None) == expected, where
    assert probe_window("openai", "http://127.0.0.1:9/v1", "gpt") is None  # never asked


# -- fitting, on the stub --------------------------------------------------------------------

def test_the_reply_kind_sets_the_least_budget():
    assert min_reply_tokens(None) == 64
    assert 20 < min_reply_tokens(Move) < 64  # two short fields: "action" is one of two words


def run_world(backend, window: int | None, prompts: list[str], history: list[str] | None = None,
              max_tokens: int = 300, memory=None):
    world = World(1, backend, scenario="fit", fit=Fitter(window))
    agents = [LLMAgent(world, f"A{i}", max_output_tokens=max_tokens, memory=memory, persona="You play.")
              for i in range(len(prompts))]
    got = {}

    def proc():
        for i, line in enumerate(history or []):
            agents[i % len(agents)].say(line)
        got["replies"] = yield from parallel(world, agents, lambda a: prompts[agents.index(a)],
                                             schema=Move, phase="decision")

    world.process(proc())
    world.run()
    return world, got["replies"]


def test_a_budget_is_lowered_to_what_the_window_leaves_and_traced():
    backend = Recording()
    prompt = "Your move? " * 40  # about 150 tokens as estimated
    world, [reply] = run_world(backend, 400, [prompt])
    [sent] = backend.requests
    counted = estimate_prompt_tokens(sent)
    assert sent.max_tokens == 400 - counted < 300 and reply.value.action == "COOPERATE"
    [fit] = events(world.trace, "llm.fit")
    [call] = events(world.trace, "llm.call")
    assert fit.payload == {"window": 400, "prompt": [counted, counted], "max_tokens": [300, 400 - counted]}
    assert fit.seq + 1 == call.seq and call.payload["max_tokens"] == sent.max_tokens
    assert call.payload["request"] == sent.digest()[:16]
    assert world.parse_quality.to_dict()["decision"]["lowered"] == 1


def test_a_request_that_fits_is_sent_as_asked_and_not_marked():
    backend = Recording()
    world, _ = run_world(backend, 100_000, ["Your move?"])
    assert backend.requests[0].max_tokens == 300 and not events(world.trace, "llm.fit")
    assert world.parse_quality.to_dict()["decision"]["lowered"] == 0


def test_a_long_history_is_trimmed_by_the_memory_oldest_first():
    backend = Recording()
    history = [f"message {i}: " + "blah " * 40 for i in range(12)]  # about 55 tokens each
    world, [reply] = run_world(backend, 700, ["Your move?"], history=history)
    [sent] = backend.requests
    user = sent.messages[-1].content
    assert "message 11:" in user and "message 0:" not in user  # the newest kept, the oldest dropped
    kept = [i for i in range(12) if f"message {i}:" in user]
    assert kept == list(range(kept[0], 12))  # a suffix: nothing dropped from the middle
    [fit] = events(world.trace, "llm.fit")
    before, after = fit.payload["prompt"]
    assert before > 700 and after == estimate_prompt_tokens(sent) and after + sent.max_tokens <= 700
    assert sent.max_tokens >= min_reply_tokens(Move) and reply.value is not None


def test_recent_memory_trims_within_its_own_selection():
    from simcore.sim.messages import Message as Said

    mem = RecentMemory(k=3)
    msgs = [Said(i, float(i), "A", "word " * 20) for i in range(6)]
    assert mem.trim(msgs, 10_000) == msgs[-3:]
    assert mem.trim(msgs, 60) == msgs[-2:] and mem.trim(msgs, 0) == []
    assert FullMemory().trim(msgs, 60) == msgs[-2:]


def test_a_prompt_that_cannot_fit_fails_its_call_saying_what_would_fit():
    backend = Recording()
    world = World(1, backend, scenario="fit", fit=Fitter(50))
    agent = LLMAgent(world, "A", persona="You play.")
    outcome = {}

    def proc():
        try:
            yield agent.ask("Your move? " * 40, schema=Move, phase="decision")
        except ContextOverflow as exc:
            outcome["error"] = str(exc)

    world.process(proc())
    world.run()
    assert not backend.requests
    assert "A holds 50 tokens" not in outcome["error"]  # (the model is named, not the agent)
    assert "stub holds 50 tokens" in outcome["error"] and "decision prompt of A" in outcome["error"]
    assert "it would fit a window of" in outcome["error"]
    [err] = events(world.trace, "llm.error")
    assert err.payload["error"] == "ContextOverflow"


@settings(max_examples=30, deadline=None)
@given(window=st.integers(150, 3000), n_history=st.integers(0, 30), words=st.integers(1, 80),
       max_tokens=st.integers(16, 1200))
def test_every_request_sent_fits_its_window_or_fails_and_never_gets_less_than_its_kind_needs(
        window, n_history, words, max_tokens):
    backend = Recording()
    history = [f"m{i} " + "word " * words for i in range(n_history)]
    world = World(1, backend, scenario="fit", fit=Fitter(window))
    agents = [LLMAgent(world, f"A{i}", max_output_tokens=max_tokens, persona="You play.") for i in range(2)]

    def proc():
        for i, line in enumerate(history):
            agents[i % 2].say(line)
        for a in agents:
            try:
                yield a.ask("Your move?", schema=Move, phase="decision")
            except ContextOverflow:
                pass

    world.process(proc())
    world.run()
    need = min(max_tokens, min_reply_tokens(Move))
    for r in backend.requests:
        assert estimate_prompt_tokens(r) + r.max_tokens <= window
        assert need <= r.max_tokens <= max_tokens
    assert len(backend.requests) + len(events(world.trace, "llm.error")) == 2


# -- end to end: the command line, the fake server, replay -----------------------------------

def test_a_scenario_that_cannot_fit_is_refused_before_the_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(VEIL, ["--context-window", "300", "--n-agents", "2", "--max-rounds", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert "veil_of_ignorance: context window: stub holds 300 tokens" in err
    assert "it would fit a window of" in err and not any(tmp_path.iterdir())
    with pytest.raises(SystemExit) as exc:
        main(VEIL, ["--context-window", "0", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "context_window: must be an integer >= 1" in capsys.readouterr().err


VEIL_SMALL = ["--n-agents", "3", "--max-rounds", "2", "--seed", "5"]


def run_on_fake(tmp_path: Path, capsys, config: FakeConfig, *extra: str):
    srv = FakeServer(config)
    with srv.in_thread():
        code = main(VEIL, ["--backend", "llamacpp", "--base-url", srv.openai_url, *VEIL_SMALL, *extra,
                           "--out", str(tmp_path), "--json"])
        stats = srv.stats()
    out = capsys.readouterr()
    run_dir = next((tmp_path / "veil_of_ignorance").iterdir())
    trace = [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    return code, stats, out.err, run_dir, trace


def test_a_window_the_server_tells_fits_every_request_and_replays_without_it(tmp_path, capsys):
    # (with its plots: the choices this run could not read are the suite's one drawing of the
    # veil figure's "no valid choice" bars)
    code, stats, err, run_dir, trace = run_on_fake(
        tmp_path, capsys, FakeConfig(context_window=1500, window_in="props", tokenizer=True))
    assert code == 0 and stats["too_long"] == 0 and stats["token_counts"] > 0
    assert "the context window of llamacpp is 1500 tokens" in err
    assert read_json(run_dir / "manifest.json")["backend"]["options"]["context_window"] == 1500
    fits = [e for e in trace if e["kind"] == "llm.fit"]
    assert fits and all(e["payload"]["window"] == 1500 for e in fits)
    assert all(sum(e["payload"]["prompt"][1:]) + e["payload"]["max_tokens"][1] <= 1500 for e in fits)
    lowered = sum(c["lowered"] for c in read_json(run_dir / "results.json")["parse_quality"].values())
    assert lowered == sum(e["payload"]["max_tokens"][1] < e["payload"]["max_tokens"][0] for e in fits
                          if e["fields"]["phase"] != "memory")  # (memory notes are free text: no reply kind)
    # The server is gone: counts and replies come back from the cassette, and so do the decisions.
    assert asyncio.run(replay_async(run_dir)).identical


def test_a_window_named_only_in_a_refusal_is_learned_and_the_call_sent_again(tmp_path, capsys):
    code, stats, err, run_dir, trace = run_on_fake(
        tmp_path, capsys, FakeConfig(context_window=1200, window_in="none"), "--plots", "none")
    assert "does not say its context window" in err
    # The first three calls (at one instant) were refused once each; every later one fitted.
    assert code == 0 and stats["too_long"] == 3 and stats["by_status"]["400"] == 3
    learned = [e for e in trace if e["kind"] == "llm.fit" and e["payload"].get("learned")]
    assert len(learned) == 3 and all(e["payload"]["window"] == 1200 for e in learned)
    results = read_json(run_dir / "results.json")
    assert results["status"] == "ok" and all(u["errors"] == 0 for u in results["usage"].values())
    assert "context_window" not in read_json(run_dir / "manifest.json")["backend"]["options"]
    assert asyncio.run(replay_async(run_dir)).identical  # the refusals are in the cassette


def test_without_fitting_the_same_run_fails_on_the_fake_server(tmp_path, capsys):
    """The fake refuses what passes its window: what the tests above fit would fail unfitted."""
    srv = FakeServer(FakeConfig(context_window=1200, window_in="none"))
    with srv.in_thread():
        world_fail = asyncio.run(_one_unfitted_call(srv.openai_url))
    assert isinstance(world_fail, ContextOverflow) and world_fail.window == 1200


async def _one_unfitted_call(url: str):
    from backends.registry import BackendSpec, make_backend

    backend = make_backend(BackendSpec("llamacpp", "llamacpp", url, {"max_retries": 0}))
    try:
        request = LLMRequest("llamacpp", (Message("user", "x " * 2000),), max_tokens=800)
        await backend.complete(request)
    except ContextOverflow as exc:
        return exc
    finally:
        await backend.aclose()
    return None
