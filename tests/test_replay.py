"""Replay round-trips a run and detects tampering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.replay import main as replay_main
from simcore.runner import run_trial, write_run

ROOT = Path(__file__).resolve().parent.parent


def record(tmp_path: Path, seed: int = 5, **cfg) -> Path:
    trial = run_trial(SCENARIO, CorrosionConfig(rounds=1, n_peers=2, metrics=False, **cfg), seed)
    return write_run(trial, tmp_path)


def test_replay_identical(tmp_path, capsys):
    run_dir = record(tmp_path)
    assert replay_main([str(run_dir)]) == 0
    out = capsys.readouterr().out.strip()
    recorded = json.loads((run_dir / "manifest.json").read_text())["trace_sha256"]
    assert out == f"{recorded} identical"


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), order=st.sampled_from(["fixed", "random", "rotating"]))
def test_replay_property(tmp_path_factory, seed, order):
    run_dir = record(tmp_path_factory.mktemp("r"), seed, order=order)
    assert replay_main([str(run_dir)]) == 0


def test_replay_detects_a_tampered_trace(tmp_path, capsys):
    run_dir = record(tmp_path)
    path = run_dir / "trace.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    event = json.loads(lines[7])
    event["t"] = event["t"] + 1.0
    lines[7] = json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))
    assert replay_main([str(run_dir)]) == 1
    out = capsys.readouterr().out
    assert "first difference at event 7" in out


def test_replay_detects_a_truncated_trace(tmp_path, capsys):
    run_dir = record(tmp_path)
    path = run_dir / "trace.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-3]))
    assert replay_main([str(run_dir)]) == 1
    assert "recorded: None" in capsys.readouterr().out


def test_replay_cli_exit_codes(tmp_path):
    run_dir = record(tmp_path)
    ok = subprocess.run([sys.executable, "-m", "simcore.replay", str(run_dir)], cwd=ROOT,
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("identical")
    bad = subprocess.run([sys.executable, "-m", "simcore.replay", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
