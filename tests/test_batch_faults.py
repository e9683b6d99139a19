"""Sweeps against a faulty provider: failed trials re-run on resume, failures by kind,
the finishing command, trial timeouts, failure caps, breaker pauses, and backend
flags and limits that hold in every executor (checked against the fake server)."""

from __future__ import annotations

import json
import shlex
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from backends.errors import BudgetExceeded, RateLimited, ServerError, UnpricedModel
from backends.fake_server import FakeConfig, FakeServer, Fault, Latency
from backends.registry import BackendSpec
from simcore.base.records import read_json
from simcore.batch import VOLATILE_COLUMNS, read_results, run_sweep
from simcore.batch.report import finish_command, format_summary
from simcore.batch.worker import FAILURE_KINDS, error_kind
from tests.batch_scenarios import FLAKY, ONE
from tests.commands import run_module

ROOT = Path(__file__).resolve().parent.parent
# 9 calls per trial, 3 of them at once, and no embedding model to load.
CC_BASE = {"n_peers": 2, "rounds": 1, "metrics": False}
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5.0}


@pytest.fixture(scope="module")
def server():
    srv = FakeServer(FakeConfig())
    with srv.in_thread():
        yield srv


def use(srv: FakeServer, *faults: str, latency: str = "fixed:0") -> None:
    """Zero the server's counters and give it these faults."""
    srv.reset(FakeConfig(Latency.parse(latency), faults=tuple(Fault.parse(f) for f in faults)))


def idle(srv: FakeServer, within_s: float = 60.0) -> dict:
    """The server's counters once no request is in flight there.

    A client that gives up on a request closes its connection, and the server
    counts the request as "cancelled" when it notices, a moment later; a request
    nobody gave up on would stay in flight for its whole hang (minutes), and the
    counters then say so.
    """
    deadline = time.monotonic() + within_s
    while srv.stats()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    return srv.stats()


def spec(srv: FakeServer, **options) -> BackendSpec:
    return BackendSpec("openai-compatible", "fake-1", base_url=srv.openai_url, options={**FAST, **options})


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=list(VOLATILE_COLUMNS))


def ledger(sweep: Path) -> list[dict]:
    return [json.loads(line) for line in (sweep / "ledger.jsonl").read_text().splitlines()]


# -- resume -------------------------------------------------------------------------

def test_resume_reruns_failed_trials_and_keep_failed_keeps_them(server, tmp_path: Path) -> None:
    out = tmp_path / "s"
    use(server, "500:first=3")
    kw = dict(conditions=None, executor="serial", plot=False, spec=spec(server, max_retries=0))
    first = run_sweep(ONE, 6, out=out, **kw)
    failed = first[first["status"] == "error"]
    assert list(failed.index) == [0, 1, 2] and (failed["error_kind"] == "server error").all()
    assert first.attrs["summary"]["finish_command"] == finish_command(
        "one", out.resolve(), ["--executor", "serial"])

    use(server)  # the provider has recovered
    kept = run_sweep(ONE, 6, out=out, resume=True, keep_failed=True, **kw)
    assert kept.attrs["summary"]["timing"]["trials_run"] == 0 and server.stats()["requests"] == 0
    pd.testing.assert_frame_equal(kept, first.assign(total_s=kept["total_s"]))

    notes: list[str] = []
    done = run_sweep(ONE, 6, out=out, resume=True, echo=notes.append, **kw)
    assert (done["status"] == "ok").all() and done.attrs["summary"]["finish_command"] is None
    assert done.attrs["summary"]["timing"]["trials_rerun"] == 3 and server.stats()["requests"] == 3
    assert "resume: re-running 3 failed trial(s) with the same seeds (--keep-failed keeps them as they are)" in notes
    assert list(done["attempt"]) == [2, 2, 2, 1, 1, 1]
    # Nothing duplicated: one row and one run directory per trial, every attempt in the ledger.
    assert done["run_id"].is_unique and sorted(p.name for p in (out / "one").iterdir()) == sorted(done["run_id"])
    attempts = [(r["run_id"], r["attempt"], r["status"]) for r in ledger(out)]
    assert sorted(attempts) == sorted(
        [(r, 1, "error") for r in failed["run_id"]] + [(r, 2, "ok") for r in failed["run_id"]]
        + [(r, 1, "ok") for r in first["run_id"][3:]])
    # The failed attempts' run directories are kept aside, as they were.
    aside = sorted((out / "failed").iterdir())
    assert [p.name for p in aside] == [f"{r}-1" for r in failed["run_id"]]
    assert all(read_json(p / "results.json")["status"] == "error" for p in aside)
    # Same seeds: the re-run trials are the trials an undisturbed sweep runs.
    clean = run_sweep(ONE, 6, out=tmp_path / "clean", **kw)
    pd.testing.assert_frame_equal(stable(done), stable(clean))
    # A finished sweep resumes to nothing.
    again = run_sweep(ONE, 6, out=out, resume=True, **kw)
    assert again.attrs["summary"]["timing"]["trials_run"] == 0 and len(ledger(out)) == 9


def test_a_rerun_that_finished_without_its_ledger_line_is_read_back(server, tmp_path: Path) -> None:
    out = tmp_path / "s"
    use(server, "500:first=1")
    kw = dict(conditions=None, executor="serial", plot=False, spec=spec(server, max_retries=0))
    run_sweep(ONE, 2, out=out, **kw)
    use(server)
    run_sweep(ONE, 2, out=out, resume=True, **kw)
    lines = (out / "ledger.jsonl").read_text().splitlines(keepends=True)
    (out / "ledger.jsonl").write_text("".join(lines[:-1]))  # killed after the re-run's rename
    use(server)
    notes: list[str] = []
    df = run_sweep(ONE, 2, out=out, resume=True, echo=notes.append, **kw)
    assert (df["status"] == "ok").all() and df.attrs["summary"]["timing"]["trials_run"] == 0
    assert any("recovered 1" in n for n in notes) and server.stats()["requests"] == 0
    assert list(df["attempt"]) == [2, 1]


# -- the summary --------------------------------------------------------------------

def test_failed_trials_by_kind_in_the_summary(server, tmp_path: Path) -> None:
    # One request per trial, run in order: each rule fails exactly one trial.
    use(server, "429:first=1,retry_after=0", "500:first=2", "malformed:first=3", "timeout:first=4,hang=30")
    df = run_sweep(ONE, 6, conditions=None, executor="serial", plot=False, out=tmp_path / "s",
                   spec=spec(server, max_retries=0, timeout_s=0.5))
    assert list(df["error_kind"][:4]) == ["rate limit", "server error", "malformed", "timeout"]
    assert list(df["status"]) == ["error"] * 4 + ["ok"] * 2
    summary = df.attrs["summary"]
    assert summary["failures"] == {"rate limit": 1, "server error": 1, "malformed": 1, "timeout": 1}
    text = _summary_text(df)
    assert "failed trials by kind (4):" in text
    for kind in ("rate limit", "server error", "malformed", "timeout"):
        assert any(line.split() == [*kind.split(), "1"] for line in text.splitlines()), kind
    assert summary["finish_command"] in text


def _summary_text(df: pd.DataFrame) -> str:
    from simcore.batch import plan_sweep

    plan = plan_sweep(ONE, 6, conditions=None)
    return format_summary(plan, df.attrs["summary"])


def test_error_kinds() -> None:
    assert error_kind(None) is None
    assert error_kind(RateLimited.__name__) == "rate limit"
    assert error_kind(ServerError.__name__) == "server error"
    assert error_kind(BudgetExceeded.__name__) == error_kind(UnpricedModel.__name__) == "budget"
    assert error_kind("TrialTimeout") == error_kind("RequestTimeout") == "timeout"
    assert error_kind("ZeroDivisionError") == "trial"
    assert list(FAILURE_KINDS)[:5] == ["rate limit", "server error", "timeout", "malformed", "budget"]


def test_cli_prints_the_failures_and_a_command_that_finishes_the_sweep(server, tmp_path: Path) -> None:
    use(server, "500:first=1")
    out = tmp_path / "cli"
    argv = ["context_corrosion", "--trials", "2", "--n-peers", "2", "--rounds", "1", "--no-metrics",
            "--backend", "openai-compatible", "--base-url", server.openai_url, "--model", "fake-1",
            "--max-retries", "0", "--timeout", "5", "--executor", "serial", "--out", str(out),
            "--no-progress", "--no-plot"]
    res = run_module("simcore.batch", *argv, cwd=ROOT)
    assert res.returncode == 1, res.stderr[-2000:]
    lines = res.stdout.splitlines()
    table = lines.index("failed trials by kind (1):")
    assert lines[table + 1].split() == ["server", "error", "1"]
    command = lines[lines.index("to finish the sweep (re-runs failed trials, runs skipped and pending ones):") + 1]
    assert command.strip() == finish_command("context_corrosion", out.resolve(), ["--executor", "serial"])
    # The stored backend options (--max-retries 0, --timeout 5) carry over to the resume.
    assert read_json(out / "sweep.json")["backend_options"] == {"max_retries": 0, "timeout_s": 5.0}
    # Running the printed command finishes the sweep.
    use(server)
    finish = shlex.split(command.strip())
    assert finish[:3] == ["python", "-m", "simcore.batch"]
    res = run_module(finish[2], *finish[3:], cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "re-running 1 failed trial(s)" in res.stderr and "failed trials by kind" not in res.stdout
    df = read_results(out)
    assert (df["status"] == "ok").all() and sorted(df["attempt"]) == [1, 1, 1, 2]
    assert all(read_json(out / d / "manifest.json")["backend"]["options"]["max_retries"] == 0 for d in df["run_dir"])


# -- stopping work ------------------------------------------------------------------

@pytest.mark.parametrize("executor", ["serial", "asyncio"])
def test_a_trial_past_the_trial_timeout_is_cancelled_and_cleaned_away(server, tmp_path: Path, executor: str) -> None:
    # The first request is accepted and not answered for 10 minutes; a trial of one instant call
    # takes milliseconds (under 0.1 s at a load average of 15 on 2 cores), so only that one can
    # reach the 1-s trial timeout.
    use(server, "timeout:first=1,hang=600")
    out = tmp_path / "s"
    kw = dict(conditions=None, executor=executor, plot=False, spec=spec(server, timeout_s=900))
    df = run_sweep(ONE, 4, out=out, trial_timeout_s=1.0, **kw)
    stats = idle(server)
    assert stats["in_flight"] == 0 and stats["by_status"] == {"200": 3, "cancelled": 1}  # cut, not waited out
    hung = df[df["status"] == "error"]
    assert len(hung) == 1 and (df["status"] == "ok").sum() == 3  # the others went on
    row = hung.iloc[0]
    assert row["error_kind"] == "timeout" and "--trial-timeout 1 s" in row["error"] and pd.isna(row["run_dir"])
    assert row["calls"] == 1 and row["prompt_tokens"] == 0  # its one call, cut off: counted, nothing spent
    runs = out / "one"
    assert sorted(p.name for p in runs.iterdir()) == sorted(df.loc[df["status"] == "ok", "run_id"])  # no partial files
    done = run_sweep(ONE, 4, out=out, resume=True, trial_timeout_s=1.0, **kw)
    assert (done["status"] == "ok").all()


def test_max_failed_trials_stops_the_sweep_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "s"
    df = run_sweep(FLAKY, 10, base={"fail_every": 1}, conditions=None, executor="serial", out=out,
                   max_failed_trials=3, plot=False)
    assert list(df["status"]) == ["error"] * 3 + ["skipped"] * 7
    assert (df["error"][3:] == "max-failed-trials").all()
    summary = df.attrs["summary"]
    assert summary["failures"] == {"trial": 3} and summary["finish_command"]
    assert len(ledger(out)) == 3 and read_results(out)["status"].tolist() == df["status"].tolist()


def test_a_breaker_pauses_the_sweep_while_its_provider_is_down(server, tmp_path: Path) -> None:
    use(server, latency="fixed:0.02")
    down = FakeConfig(Latency("fixed", 0.02), faults=(Fault("503", rate=1.0),))
    healthy = FakeConfig(Latency("fixed", 0.02))
    seen: dict[str, int] = {}
    notes: list[str] = []

    def outage() -> None:
        # After 20 answered requests the provider fails everything until the sweep says it has
        # paused (or a minute has passed: the assertions below then fail).
        def until(done) -> None:
            deadline = time.monotonic() + 60
            while not done() and time.monotonic() < deadline:
                time.sleep(0.005)

        until(lambda: server.stats()["requests"] >= 20)
        seen["start"] = server.stats()["requests"]
        server.config = down
        until(lambda: any(n.startswith("breaker: PAUSED") for n in notes))
        seen["end"] = server.stats()["requests"]
        server.config = healthy

    watcher = threading.Thread(target=outage, daemon=True)
    watcher.start()
    options = dict(max_retries=2, breaker_window=6, breaker_probe_s=0.3, max_concurrency=4)
    df = run_sweep(ONE, 32, conditions=None, executor="asyncio", concurrency=4, plot=False, out=tmp_path / "s",
                   spec=spec(server, **options), echo=notes.append)
    watcher.join(10)
    assert (df["status"] == "ok").all(), df["error"].dropna().tolist()
    assert any(n.startswith("breaker: PAUSED: openai-compatible failing (") for n in notes), notes
    assert "breaker: closed again; dispatching resumes" in notes
    # While it was down, only the requests in flight and the probes reached it.
    assert seen["end"] - seen["start"] <= 4 * 2 + 8, seen


# -- flags and limits in every executor ---------------------------------------------

@pytest.mark.parametrize("executor", ["serial", "asyncio", "local", "dask"])
def test_backend_flags_and_limits_reach_every_trial(server, tmp_path: Path, executor: str) -> None:
    """--max-retries 0 fails the trial of each failed request (the first request's 500 and every
    25th request's dropped connection), the concurrency cap holds for the sweep as a whole,
    --timeout reaches every trial, and each trial's own counts add up to what the server saw.

    Asserted in counts of events, exactly, on what the server and the clients record: every
    failure here is one the server itself made, after counting the request, and no attempt
    can reach the timeout (10 minutes, where a reply takes 20 ms), so every attempt a client
    counts is one the server counted, however busy the machine. (The timeout cutting a hung
    request is tested where it is asserted on its own: test_middleware, and the failure kinds
    above.)"""
    use(server, "500:first=1", "drop:every=25", latency="fixed:0.02")
    out = tmp_path / executor
    df = run_sweep("context_corrosion", 4, base=CC_BASE, executor=executor, workers=2, concurrency=8,
                   plot=False, out=out, spec=spec(server, max_retries=0, timeout_s=600.0, max_concurrency=2))
    stats = idle(server)
    assert stats["in_flight"] == 0 and stats["faults"]["500"] == 1 and stats["faults"]["drop"] >= 1
    assert stats["by_status"] == {"200": stats["requests"] - 1 - stats["faults"]["drop"], "500": 1,
                                  "0": stats["faults"]["drop"]}
    # The first request's 500 fails its trial; each other failure is a trial whose connection the server dropped
    # (two drops can fall in one trial).
    failed = df[df["status"] == "error"]
    kinds = failed["error_kind"].value_counts().to_dict()
    assert kinds.get("server error") == 1 and set(kinds) <= {"server error", "connection"}
    assert 1 <= kinds.get("connection", 0) <= stats["faults"]["drop"]
    # The cap holds for the sweep: the server never had more than 2 requests in flight, and the
    # limiter's own high-water mark in each trial's counts is the share of the cap its process got.
    assert 1 <= stats["max_concurrency"] <= 2, stats["max_concurrency"]
    timings = [read_json(out / d / "timings.json")["backend"]["providers"]["openai-compatible"]
               for d in df["run_dir"]]
    most = [t["max_in_flight"] for t in timings]
    if executor in ("serial", "asyncio"):  # one process: the whole cap, which 3 calls at once fill
        assert max(most) == 2 and min(most) >= 1
    else:  # two worker processes: one request each
        assert set(most) == {1}
    for run_dir in df["run_dir"]:
        options = read_json(out / run_dir / "manifest.json")["backend"]["options"]
        assert (options["max_retries"], options["timeout_s"], options["max_concurrency"]) == (0, 600.0, 2)
    # Every attempt the clients made is one the server counted, and the server saw no other.
    attempts = sum(t["attempts"] for t in timings)
    assert attempts == df["calls"].sum() + df["retries"].sum() == stats["requests"]
    assert sum(t["errors"].get("TransportError", 0) for t in timings) == stats["faults"]["drop"]
