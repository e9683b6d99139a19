"""Replay round-trips a run and detects tampering."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.replay import main as replay_main
from simcore.runs.runner import run_trial, write_run
from tests.commands import run_module

ROOT = Path(__file__).resolve().parent.parent


def record(tmp_path: Path, seed: int = 5, **cfg) -> Path:
    trial = run_trial(SCENARIO, CorrosionConfig(rounds=1, n_peers=2, metrics=False, **cfg), seed)
    return write_run(trial, tmp_path)


def test_replay_identical(tmp_path, capsys):
    run_dir = record(tmp_path)
    assert replay_main([str(run_dir)]) == 0
    out = capsys.readouterr().out.strip()
    recorded = json.loads((run_dir / "manifest.json").read_text())["trace_sha256"]
    assert out == f"trace sha256 {recorded} identical to the recorded run"


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), order=st.sampled_from(["fixed", "random", "rotating"]))
def test_replay_property(tmp_path_factory, seed, order):
    run_dir = record(tmp_path_factory.mktemp("r"), seed, order=order)
    assert replay_main([str(run_dir)]) == 0


def _rewrite_trace(run_dir: Path, lines: list[str], *, vouch: bool) -> None:
    """Replace the recorded trace; with ``vouch``, make the manifest record the new one."""
    text = "".join(lines)
    (run_dir / "trace.jsonl").write_text(text)
    if vouch:
        path = run_dir / "manifest.json"
        manifest = json.loads(path.read_text())
        digest = hashlib.sha256(text.encode()).hexdigest()
        manifest["trace_sha256"] = manifest["files"]["trace.jsonl"] = digest
        manifest["n_events"] = len(lines)
        path.write_text(json.dumps(manifest))


def _tampered(run_dir: Path) -> list[str]:
    lines = (run_dir / "trace.jsonl").read_text().splitlines(keepends=True)
    event = json.loads(lines[7])
    event["t"] = event["t"] + 1.0
    lines[7] = json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n"
    return lines


def test_replay_detects_a_trace_that_its_manifest_vouches_for_but_does_not_replay(tmp_path, capsys):
    run_dir = record(tmp_path)
    _rewrite_trace(run_dir, _tampered(run_dir), vouch=True)
    assert replay_main([str(run_dir)]) == 1
    out = capsys.readouterr().out
    assert "differs from the recorded run's" in out and "first difference at event 7" in out


@pytest.mark.parametrize("damage", ["edited", "truncated", "emptied"])
def test_a_damaged_recorded_trace_is_reported_as_damaged_not_as_a_difference(tmp_path, capsys, damage):
    run_dir = record(tmp_path)
    lines = (run_dir / "trace.jsonl").read_text().splitlines(keepends=True)
    lines = {"edited": _tampered(run_dir), "truncated": lines[:-3], "emptied": []}[damage]
    _rewrite_trace(run_dir, lines, vouch=False)
    with pytest.raises(SystemExit) as exc:
        replay_main([str(run_dir)])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "the recorded run is damaged" in captured.err and "trace.jsonl: damaged" in captured.err
    assert f"{len(lines)} lines where manifest.json records" in captured.err


def test_replay_cli_exit_codes(tmp_path):
    run_dir = record(tmp_path)
    ok = run_module("simcore.replay", str(run_dir), cwd=ROOT)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("identical to the recorded run")
    bad = run_module("simcore.replay", str(tmp_path), cwd=ROOT)
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1


def test_replay_compares_traces_without_the_analysis_unless_asked(tmp_path, capsys, monkeypatch):
    import dataclasses

    run_dir = record(tmp_path)
    calls = []

    def counting(world, config):
        calls.append(config)
        return SCENARIO.analyze(world, config)

    monkeypatch.setattr("simcore.replay.load_scenario", lambda name: dataclasses.replace(SCENARIO, analyze=counting))
    assert replay_main([str(run_dir)]) == 0 and calls == []
    assert replay_main([str(run_dir), "--analysis"]) == 0 and len(calls) == 1
    assert capsys.readouterr().out.count("identical to the recorded run") == 2


def test_replay_with_the_analysis_compares_its_metrics_with_the_recorded_ones(tmp_path, capsys, monkeypatch):
    import dataclasses

    run_dir = record(tmp_path)
    recorded = json.loads((run_dir / "results.json").read_text())["metrics"]
    assert replay_main([str(run_dir)]) == 0
    plain = capsys.readouterr().out
    assert replay_main([str(run_dir), "--analysis"]) == 0
    out = capsys.readouterr().out
    assert out == plain + f"analysis recomputed: all {len(recorded)} metrics equal the ones results.json records\n"
    # An analysis that no longer computes what was recorded: the differing metric, and exit 1.
    name = sorted(recorded)[0]

    def changed(world, config):
        results = SCENARIO.analyze(world, config)
        return {**results, "metrics": {**results["metrics"], name: 12345}}

    monkeypatch.setattr("simcore.replay.load_scenario", lambda _: dataclasses.replace(SCENARIO, analyze=changed))
    assert replay_main([str(run_dir), "--analysis"]) == 1
    assert capsys.readouterr().out == plain + (
        f"analysis recomputed: 1 of {len(recorded)} metrics differ from results.json:\n"
        f"  {name}: recorded {json.dumps(recorded[name])}, recomputed 12345\n")
    assert replay_main([str(run_dir)]) == 0  # the trace alone still matches
