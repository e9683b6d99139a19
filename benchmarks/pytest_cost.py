"""A pytest plugin that records what each test costs: wall time, CPU time, processes started.

Loaded by ``benchmarks/bench_suite.py --profile`` (``-p pytest_cost``, this folder on
PYTHONPATH), never by the suite itself. For each test (setup, call and teardown together)
it appends one JSON line to ``$SIMCORE_TEST_COST/<pid>.jsonl``:

- ``wall_s``: elapsed time (depends on the machine's load);
- ``cpu_s``: CPU time of the test's process plus that of the child processes it waited
  for (``getrusage``), which depends far less on load;
- ``popen``: the processes it started with :mod:`subprocess` (audit event
  ``subprocess.Popen``), and how many of them were Python interpreters.

Python interpreters started deeper down (a shell that runs ``python -m``, a pool's
workers) are counted by the interpreter-start log that bench_suite.py installs beside it.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest

_state: dict = {"popen": 0, "python": 0}


def _audit(event: str, args: tuple) -> None:
    if event == "subprocess.Popen":
        _state["popen"] += 1
        argv = [str(a) for a in (args[1] or [])] if isinstance(args[1], (list, tuple)) else [str(args[1])]
        if Path(str(args[0])).name.startswith("python") or (argv and Path(argv[0]).name.startswith("python")):
            _state["python"] += 1


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_configure(config) -> None:
    if os.environ.get("SIMCORE_TEST_COST"):
        sys.addaudithook(_audit)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    out = os.environ.get("SIMCORE_TEST_COST")
    if not out:
        yield
        return
    popen, python = _state["popen"], _state["python"]
    wall, cpu = time.monotonic(), _cpu()
    start = time.time()
    yield
    record = {"test": item.nodeid, "pid": os.getpid(), "start": start, "end": time.time(),
              "wall_s": round(time.monotonic() - wall, 4), "cpu_s": round(_cpu() - cpu, 4),
              "popen": _state["popen"] - popen, "python_popen": _state["python"] - python}
    with open(Path(out) / f"{os.getpid()}.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")

