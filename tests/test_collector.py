"""The collector while large worlds run: frozen heap, rarer full collections, and garbage that is not kept."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from backends.stub import StubBackend
from simcore.api import LLMAgent, World
from simcore.sim import collector
from simcore.sim.kernel import run_worlds


@pytest.fixture
def large_from_three(monkeypatch):
    monkeypatch.setattr(collector, "LARGE_WORLD", 3)


def _world(seed: int, n_agents: int, seen: list) -> World:
    world = World(seed, StubBackend())
    for i in range(n_agents):
        LLMAgent(world, f"A{i}")  # a world and its agents refer to each other: cyclic garbage once dropped

    def probe(world):
        yield world.timeout(1)
        seen.append((gc.get_freeze_count() > 0, gc.get_threshold()[2]))

    world.process(probe(world))
    return world


def test_large_runs_leave_the_collector_as_they_found_it(large_from_three):
    before = gc.get_threshold()
    seen = []
    asyncio.run(run_worlds([_world(s, 3, seen) for s in range(3)]))
    assert seen == [(True, collector.FULL_COLLECTION_EVERY)] * 3
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_small_worlds_leave_the_collector_alone(large_from_three):
    before = gc.get_threshold()
    seen = []
    _world(1, 2, seen).run()
    assert seen == [(False, before[2])]


@pytest.fixture
def no_automatic_collection():
    was = gc.isenabled()
    gc.disable()  # only the collector module's own collections may free the worlds
    yield
    if was:
        gc.enable()


def _run_one(seed: int) -> weakref.ref:
    world = _world(seed, 3, [])
    world.run()
    return weakref.ref(world)


def test_finished_large_worlds_do_not_pile_up_in_the_frozen_heap(monkeypatch, large_from_three,
                                                                 no_automatic_collection):
    # Large runs one after another: each start freezes the heap, the previous runs' garbage with it.
    monkeypatch.setattr(collector, "REGROWTH", 0.0)  # collect whenever the heap grew
    monkeypatch.setattr(collector, "_collected_size", None)
    refs = [_run_one(seed) for seed in range(4)]
    assert [r() is None for r in refs[:-1]] == [True] * 3


def test_the_heap_is_not_collected_while_it_has_not_grown_enough(monkeypatch, large_from_three,
                                                                 no_automatic_collection):
    monkeypatch.setattr(collector, "REGROWTH", 1e9)
    monkeypatch.setattr(collector, "_collected_size", None)
    refs = [_run_one(seed) for seed in range(3)]
    assert all(r() is not None for r in refs)  # kept (frozen, then thawed) until the heap has grown enough
    gc.collect()
    assert all(r() is None for r in refs)
