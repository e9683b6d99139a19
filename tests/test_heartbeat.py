"""A running sweep's or Monte Carlo's heartbeat: what it writes, and what the browser reads from it.

The clock is the test's own (the writer and :func:`pulse` take it), so nothing waits on the
wall clock. That a sweep and a Monte Carlo leave one behind is checked where they run
(tests/test_batch.py, tests/test_counterfactual.py); that the browser shows it, in tests/test_view.py.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from simcore.base.files import DamagedFile, read_heartbeat
from simcore.base.heartbeat import BEAT_S, FLOOR_S, HEARTBEAT, SLACK, Heartbeat, pulse


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_heartbeat_counts_trials_and_records_how_the_process_ended(tmp_path):
    clock = Clock()
    beat = Heartbeat(tmp_path, "sweep", total=10, written=2, failed=1, about={"scenario": "x"}, clock=clock,
                     background=False)
    first = read_heartbeat(tmp_path)
    assert first is not None and (first["state"], first["written"], first["written_at_start"]) == ("running", 2, 2)
    assert first["scenario"] == "x" and first["last_trial"] is None
    clock.now += 4
    beat.trial()
    clock.now += 0.5  # within a second of the last write: counted, written with the next
    beat.trial(ok=False)
    on_disk = read_heartbeat(tmp_path)
    assert (on_disk["written"], on_disk["beat"]) == (3, 1004.0)
    clock.now += 2
    beat.close("interrupted")
    last = read_heartbeat(tmp_path)
    assert (last["state"], last["written"], last["failed"], last["last_trial"]) == ("interrupted", 4, 2, 1004.5)
    with pytest.raises(ValueError, match="state: must be one of finished, interrupted, failed"):
        beat.close("running")


def test_a_heartbeat_used_as_a_context_says_how_the_block_ended(tmp_path):
    for error, state in ((None, "finished"), (ValueError, "failed"), (KeyboardInterrupt, "interrupted")):
        where = tmp_path / state
        with pytest.raises(error) if error else contextlib.nullcontext():
            with Heartbeat(where, "monte_carlo", total=2, clock=Clock(), background=False):
                if error:
                    raise error
        assert read_heartbeat(where)["state"] == state


def test_pulse_gives_rate_and_time_left_and_calls_a_quiet_heartbeat_stopped():
    record = {"kind": "sweep", "state": "running", "started": 0.0, "beat": 100.0, "beat_s": BEAT_S,
              "last_trial": 100.0, "total": 60, "written": 25, "failed": 0, "written_at_start": 5}
    now = pulse(record, 101.0)
    # 20 trials in this pass over 100 s: 0.2 per second, 35 to go.
    assert now.state == "running" and now.rate_per_s == pytest.approx(0.2) and now.eta_s == pytest.approx(175)
    # Trials land every 5 s, the writes at least every 10 s: stale after 3 x 5 s, but never under the floor.
    assert now.stale_after_s == max(FLOOR_S, SLACK * 5.0)
    assert pulse(record, 100.0 + FLOOR_S).state == "running"
    late = pulse(record, 100.0 + FLOOR_S + 1)
    assert (late.state, late.written, late.total, late.eta_s) == ("stopped", 25, 60, None)
    # Slow trials (one a minute): the writes come every beat_s, and that sets the limit.
    slow = {**record, "last_trial": 1200.0, "beat": 1200.0, "written": 25}
    assert pulse(slow, 1201.0).stale_after_s == max(FLOOR_S, SLACK * BEAT_S)
    # Before the first trial there is no rate, and a process that ended says how.
    fresh = {**record, "last_trial": None, "written": 5}
    assert (pulse(fresh, 101.0).rate_per_s, pulse(fresh, 101.0).since_trial_s) == (None, None)
    assert pulse({**record, "state": "finished"}, 10_000.0).state == "finished"


def test_a_damaged_heartbeat_is_named(tmp_path):
    (tmp_path / HEARTBEAT).write_text(json.dumps({"kind": "sweep", "state": "dancing"}))
    with pytest.raises(DamagedFile, match="state: must be one of running, finished, interrupted, failed"):
        read_heartbeat(tmp_path)
    assert read_heartbeat(tmp_path / "none") is None
