"""Runs that several test files read, made once per test run rather than once per test.

A test module that uses them names this module in its ``pytest_plugins``.

- :func:`hash_seed_pair`: each of :data:`HASH_SEED_CASES` computed in the test's process and
  in one fresh interpreter started with another ``PYTHONHASHSEED``, which computes them all:
  one Python start for every scenario's test of hash-seed independence, where each started
  one to three (:func:`other_hash_seed` gives that interpreter's results alone).

Under pytest-xdist each worker is a process of its own; :func:`once_per_run` makes a value
once for all of them (the first worker to ask makes it, under a lock, and the others read it).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def once_per_run(factory: pytest.TempPathFactory, name: str, make: Callable[[], Any]) -> Any:
    """``make()`` (a JSON value), made once per test run and shared by every xdist worker.

    Without xdist the session is the run: it is simply made. Under xdist the workers' base
    temporary directories share a parent of this run's own, where the first worker writes it.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make()
    shared = factory.getbasetemp().parent
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / f"{name}.json"
        if not done.is_file():
            done.write_text(json.dumps(make()))
        return json.loads(done.read_text())


# -- hash-seed independence --------------------------------------------------------------------

def _trace_sha(scenario: str, fields: dict[str, Any], seed: int) -> str:
    from simcore.runs.runner import run_trial
    from simcore.runs.scenario import load_scenario

    s = load_scenario(scenario)
    return run_trial(s, s.config_type.from_mapping(fields), seed).trace.sha256()


def _perturbation_pairs() -> str:
    """A perturbation study's pairs, as the command writes them (pairs.jsonl)."""
    from tests.commands import run_module

    with tempfile.TemporaryDirectory() as out:
        ran = run_module("scenarios.perturbation", "--scenario", "context_corrosion", "--rounds", "2",
                         "--n-peers", "2", "--no-metrics", "--perturb", "swap:round=1",
                         "--perturb", "inject:agent=P2,round=1,text=y", "--pairs", "2", "--no-plot",
                         "--out", out, "--json")
        assert ran.returncode == 0, ran.stderr
        (study,) = (Path(out) / "perturbation").iterdir()
        return (study / "pairs.jsonl").read_text()


def _corrosion_run() -> dict[str, Any]:
    """A context-corrosion run with its metrics (MiniLM embeddings): what its results.json says."""
    from scenarios.context_corrosion import SCENARIO
    from simcore.base.records import read_json
    from simcore.runs.runner import run_trial, write_run

    with tempfile.TemporaryDirectory() as out:
        res = read_json(write_run(run_trial(SCENARIO, SCENARIO.config_type(rounds=2), 21), out) / "results.json")
    return {k: res[k] for k in ("trace_sha256", "lifecycle_entropy", "metrics")}


#: What each scenario's hash-seed test computes: a trace's sha256, a study's pairs, or a run's results.
HASH_SEED_CASES: dict[str, Callable[[], Any]] = {
    "context_corrosion": lambda: _trace_sha(
        "context_corrosion", {"rounds": 2, "n_peers": 3, "order": "random", "topology": "small_world:k=2,p=0.5",
                              "metrics": False}, 1234),
    "context_corrosion_run": _corrosion_run,
    "acausal_cooperation": lambda: _trace_sha(
        "acausal_cooperation", {"n_agents": 3, "rounds": 2, "scripted": "random:0.4,grudger", "embeddings": False}, 11),
    "llm_auction": lambda: _trace_sha("llm_auction", {"mechanism": "free_discussion", "n_agents": 5, "n_vignettes": 2}, 9),
    "veil_of_ignorance": lambda: _trace_sha("veil_of_ignorance", {"memory": "decomposed", "max_rounds": 3}, 5),
    "perturbation": _perturbation_pairs,
}
PROBE = "simcore hash probe"


def hash_seed_results() -> dict[str, Any]:
    """Every case's result in this process, and this process's hash of :data:`PROBE`."""
    return {"hash": hash(PROBE), "cases": {name: case() for name, case in HASH_SEED_CASES.items()}}


@pytest.fixture(scope="session")
def other_hash_seed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every one of :data:`HASH_SEED_CASES` as an interpreter with another hash seed computed it."""

    def make() -> dict[str, Any]:
        seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
        code = "import json; from tests.shared_runs import hash_seed_results; print(json.dumps(hash_seed_results()))"
        # (no case reads a figure: none is drawn)
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT), "SIMCORE_PLOTS": "none"}
        res = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True,
                             timeout=300, env=env)
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout)

    theirs = once_per_run(tmp_path_factory, "other_hash_seed", make)
    # The two interpreters hash strings differently, so set and dict orders built from them differ.
    assert theirs["hash"] != hash(PROBE), "the other interpreter got this one's hash seed"
    return theirs["cases"]


@pytest.fixture(scope="session")
def hash_seed_pair(other_hash_seed: dict[str, Any]) -> Callable[[str], tuple[Any, Any]]:
    """``pair(case)``: one of :data:`HASH_SEED_CASES` computed here, and as an interpreter with
    another hash seed computed it."""
    return lambda case: (HASH_SEED_CASES[case](), other_hash_seed[case])
