"""Cassettes: keys, occurrences, scopes, modes and exact replay (no network)."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.base import LLMRequest, LLMResponse, Message, Usage
from backends.cassette import Cassette, response_entry
from backends.errors import CassetteMiss, ServerError
from backends.middleware import Ledger
from backends.pricing import PriceTable
from backends.session import RunBackend, TrialBackend


class Noisy:
    """A backend whose answers differ on every call and come back in random order."""

    name = "noisy"

    def __init__(self, seed: int = 0, fail_on: str | None = None) -> None:
        self.rng = random.Random(seed)
        self.calls = 0
        self.fail_on = fail_on

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        n = self.calls
        await asyncio.sleep(self.rng.random() * 0.002)
        if self.fail_on and self.fail_on in request.messages[-1].content:
            raise ServerError("HTTP 503 from nowhere (after 2 attempts)", 503)
        return LLMResponse(f"answer #{n} to {request.messages[-1].content}", Usage(3, n), "stop", "noisy")


def req(text: str) -> LLMRequest:
    return LLMRequest("noisy-model", (Message("user", text),), max_tokens=8, seed=1)


def run_backend(inner, cassette=None, mode="auto", **kw) -> RunBackend:
    return RunBackend("noisy", inner, Ledger(PriceTable({})), cassette=cassette, mode=mode, **kw)


async def play(view: TrialBackend, batches: list[list[str]]) -> list[str | None]:
    out: list[str | None] = []
    for batch in batches:
        res = await view.complete_batch([req(t) for t in batch])
        out += [r.text if isinstance(r, LLMResponse) else f"{type(r).__name__}: {r}" for r in res]
    return out


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.lists(st.sampled_from("abc"), min_size=1, max_size=5), min_size=1, max_size=5),
       seed=st.integers(0, 1000))
def test_replay_returns_what_was_recorded_whatever_the_completion_order(tmp_path_factory, batches, seed):
    path = tmp_path_factory.mktemp("c") / "run.sqlite"

    async def go():
        view = run_backend(Noisy(seed)).for_trial("t")
        recorded = await play(view, batches)
        view.save_cassette(path)
        replay = TrialBackend(None, None, source=Cassette(path, readonly=True))
        replayed = await play(replay, batches)
        await replay.aclose()
        return recorded, replayed, view.entries

    recorded, replayed, entries = asyncio.run(go())
    assert replayed == recorded
    assert len(entries) == sum(map(len, batches))
    # identical requests are numbered 0, 1, 2, ... in creation order
    for text in "abc":
        occ = [e.occurrence for e in entries if f'"{text}"' in e.request]
        assert occ == list(range(len(occ)))


def test_scopes_keep_identical_requests_of_different_trials_apart(tmp_path):
    async def go():
        shared = Cassette(tmp_path / "shared.sqlite")
        run = run_backend(Noisy(1), shared)
        a, b = run.for_trial("trial-a"), run.for_trial("trial-b")
        first = await asyncio.gather(play(a, [["x", "x"], ["y"]]), play(b, [["x", "x"], ["y"]]))
        # Replay them in the other order, from the shared cassette, without a live backend.
        replay = RunBackend("noisy", Noisy(99), Ledger(PriceTable({})), cassette=shared, mode="replay")
        b2, a2 = replay.for_trial("trial-b"), replay.for_trial("trial-a")
        second_b = await play(b2, [["x", "x"], ["y"]])
        second_a = await play(a2, [["x", "x"], ["y"]])
        shared.close()
        return first, (second_a, second_b), replay.inner.calls

    (fa, fb), (sa, sb), live_calls = asyncio.run(go())
    assert fa != fb  # the noisy backend answered each trial differently
    assert (sa, sb) == (fa, fb) and live_calls == 0


def test_auto_mode_calls_only_on_a_miss_and_record_mode_always_calls(tmp_path):
    async def go():
        path = tmp_path / "c.sqlite"
        c1 = Cassette(path)
        inner = Noisy(2)
        r1 = await play(run_backend(inner, c1).for_trial("s"), [["a", "b"]])
        after_first = inner.calls
        r2 = await play(run_backend(inner, c1).for_trial("s"), [["a", "b", "c"]])
        after_auto = inner.calls
        r3 = await play(run_backend(inner, c1, mode="record").for_trial("s"), [["a"]])
        c1.close()
        return r1, r2, r3, after_first, after_auto, inner.calls

    r1, r2, r3, n1, n2, n3 = asyncio.run(go())
    assert n1 == 2 and n2 == 3 and n3 == 4
    assert r2[:2] == r1 and r3[0] != r1[0]


def test_replay_mode_miss_is_a_cassette_miss_and_errors_replay_as_errors(tmp_path):
    async def go():
        view = run_backend(Noisy(3, fail_on="boom")).for_trial("s")
        recorded = await play(view, [["ok", "boom"]])
        view.save_cassette(tmp_path / "r.sqlite")
        replay = TrialBackend(None, None, source=Cassette(tmp_path / "r.sqlite", readonly=True))
        replayed = await play(replay, [["ok", "boom"]])
        with pytest.raises(CassetteMiss, match="no recorded response"):
            await replay.complete(req("never asked"))
        await replay.aclose()
        return recorded, replayed

    recorded, replayed = asyncio.run(go())
    assert recorded[1].startswith("ServerError: HTTP 503")
    assert replayed == recorded


def test_fail_fast_halts_later_calls_of_every_trial():
    async def go():
        run = run_backend(Noisy(4, fail_on="boom"), fail_fast=True)
        a, b = run.for_trial("a"), run.for_trial("b")
        first = await play(a, [["boom"]])
        later = await play(b, [["fine"]])
        return first, later, run

    first, later, run = asyncio.run(go())
    assert first[0].startswith("ServerError") and later[0].startswith("RunHalted")
    assert run.halted and run.inner.calls == 1


def test_cassette_holds_requests_and_responses_only(tmp_path):
    async def go():
        view = run_backend(Noisy(5)).for_trial("s")
        await view.complete(req("hello"))
        view.save_cassette(tmp_path / "x.sqlite")

    asyncio.run(go())
    entries = Cassette(tmp_path / "x.sqlite", readonly=True).entries()
    assert len(entries) == 1
    e = entries[0]
    assert e.kind == "response" and e.occurrence == 0 and e.digest == req("hello").digest()
    assert set(e.body) == {"text", "usage", "finish_reason", "model", "system_fingerprint", "latency_s"}
    assert e.response().usage == Usage(3, 1)


@pytest.mark.parametrize("creator_closes", ["first", "last"])
def test_trials_side_by_side_share_a_new_cassette_whichever_closes_first(tmp_path, creator_closes):
    """A comparison's arms run on one loop, each opening the run's cassette: the one that created
    the file may close while the others still hold it (SQLite then refused to leave WAL mode:
    "database is locked"). The file ends as one plain file with every entry, whatever the order."""
    path = tmp_path / "run.sqlite"
    creator = Cassette(path)
    other = Cassette(path)
    creator.put(response_entry("a", 0, req("one"), LLMResponse("x", Usage(1, 1), "stop")))
    other.put(response_entry("b", 0, req("two"), LLMResponse("y", Usage(1, 1), "stop")))
    for c in (creator, other) if creator_closes == "first" else (other, creator):
        c.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sqlite"]
    read = Cassette(path, readonly=True)
    assert [e.scope for e in read.entries()] == ["a", "b"]
    assert read._db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
