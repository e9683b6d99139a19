"""Run directories: atomic writes, manifests, no secrets."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from backends.registry import BackendSpec
from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.base.records import atomic_write, check_run_id, staged_dir
from simcore.runs.runner import run_trial, run_trial_async, write_run
from tests.helpers import FailingBackend


def test_atomic_write_leaves_no_temp_files(tmp_path):
    atomic_write(tmp_path / "a.txt", "hello")
    assert (tmp_path / "a.txt").read_text() == "hello"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_staged_dir_is_all_or_nothing(tmp_path):
    final = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with staged_dir(final) as stage:
            (stage / "partial.txt").write_text("x")
            raise RuntimeError("crash while writing")
    assert not final.exists() and list(tmp_path.iterdir()) == []
    with staged_dir(final) as stage:
        (stage / "ok.txt").write_text("x")
    assert (final / "ok.txt").exists()


def test_run_ids_are_checked():
    for bad in ("../x", "a/b", "", ".hidden", "a..b"):
        with pytest.raises(ValueError):
            check_run_id(bad)


def test_manifest_contents_and_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SENTINEL-do-not-leak")
    trial = run_trial(SCENARIO, CorrosionConfig(rounds=1, n_peers=2), 9)
    run_dir = write_run(trial, tmp_path, run_id="test-run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["seed"] == 9 and manifest["scenario"] == "context_corrosion"
    assert manifest["config"]["rounds"] == 1
    assert manifest["backend"]["name"] == "stub"
    assert {"python", "simpy", "mesa", "numpy"} <= set(manifest["versions"])
    assert "commit" in manifest["code_revision"]
    assert manifest["trace_sha256"] == trial.trace.sha256()
    for root, _, files in os.walk(run_dir):
        for name in files:
            assert b"SENTINEL" not in open(os.path.join(root, name), "rb").read()


def test_failed_trial_keeps_partial_trace_and_error(tmp_path):
    trial = asyncio.run(run_trial_async(
        SCENARIO, CorrosionConfig(rounds=2, n_peers=2), 1, BackendSpec(), FailingBackend(["P2"], phase="discussion")))
    assert trial.status == "error" and trial.error["type"] == "ConnectionError"
    run_dir = write_run(trial, tmp_path)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "error" and results["error"]["message"]
    kinds = [json.loads(line)["kind"] for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    assert "llm.error" in kinds and "llm.reply" in kinds


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_run_directories_follow_the_umask(tmp_path, mask):
    from simcore.cli import main

    old = os.umask(mask)
    try:
        code = main(SCENARIO, ["--rounds", "1", "--n-peers", "2", "--no-metrics", "--out", str(tmp_path / "runs")])
    finally:
        os.umask(old)
    assert code == 0
    made = list((tmp_path / "runs").rglob("*"))
    dirs = [p for p in made if p.is_dir()]
    files = [p for p in made if p.is_file()]
    assert len(dirs) >= 2 and {"manifest.json", "trace.jsonl"} <= {p.name for p in files}
    assert {oct(p.stat().st_mode & 0o777) for p in dirs} == {oct(0o777 & ~mask)}
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o666 & ~mask)}
