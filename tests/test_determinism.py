"""Same seed, same trace: in-process, across processes and PYTHONHASHSEED values."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.runs.runner import run_trial

ROOT = Path(__file__).resolve().parent.parent
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


SCRIPT = """
import hashlib, sys
from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.runs.runner import run_trial
cfg = CorrosionConfig(rounds=2, n_peers=3, order="random", topology="small_world:k=2,p=0.5", metrics=False)
print(hashlib.sha256(run_trial(SCENARIO, cfg, 1234).trace.to_jsonl().encode()).hexdigest())
"""


def test_trace_identical_across_processes_and_hash_seeds():
    digests = set()
    for hash_seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
            check=True,
        )
        digests.add(out.stdout.strip())
    cfg = CorrosionConfig(rounds=2, n_peers=3, order="random", topology="small_world:k=2,p=0.5", metrics=False)
    here = hashlib.sha256(run_trial(SCENARIO, cfg, 1234).trace.to_jsonl().encode()).hexdigest()
    assert digests == {here}
