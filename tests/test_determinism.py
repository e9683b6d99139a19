"""Same seed, same trace: in-process, across processes and PYTHONHASHSEED values."""

from __future__ import annotations


from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.runs.runner import run_trial

pytest_plugins = ["tests.shared_runs"]  # hash_seed_pair
SMALL = CorrosionConfig(rounds=2, n_peers=2, metrics=False)


def trace_text(seed: int, cfg: CorrosionConfig = SMALL) -> str:
    return run_trial(SCENARIO, cfg, seed).trace.to_jsonl()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), task=st.integers(0, 4), biased=st.booleans(),
       order=st.sampled_from(["fixed", "dominant_first", "random", "rotating"]))
def test_same_seed_same_trace(seed, task, biased, order):
    cfg = CorrosionConfig(rounds=2, n_peers=2, task=task, biased=biased, order=order, metrics=False)
    assert trace_text(seed, cfg) == trace_text(seed, cfg)


@settings(max_examples=10, deadline=None)
@given(a=st.integers(0, 2**32 - 1), b=st.integers(0, 2**32 - 1))
def test_different_seeds_different_traces(a, b):
    if a != b:
        assert trace_text(a) != trace_text(b)


def test_trace_identical_across_processes_and_hash_seeds(hash_seed_pair):
    """The same trace here and in an interpreter with another hash seed (tests/shared_runs.py)."""
    here, there = hash_seed_pair("context_corrosion")
    assert there == here
    cfg = CorrosionConfig(rounds=2, n_peers=3, order="random", topology="small_world:k=2,p=0.5", metrics=False)
    assert here == run_trial(SCENARIO, cfg, 1234).trace.sha256()
