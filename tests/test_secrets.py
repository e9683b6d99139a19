"""A sentinel API key is used by the client but appears nowhere: run dir, cassette, stdout, stderr, logs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from backends.fake_server import FakeConfig, FakeServer, Fault, Latency
from scenarios.context_corrosion import SCENARIO
from simcore.cli import main

ROOT = Path(__file__).resolve().parent.parent
SENTINEL = "sk-SENTINEL-5f3a9c1e7b2d4068a1c3e5f7b9d1f3a5"
ENV = "SIMCORE_TEST_SECRET_KEY"


def run(args, env, tmp_path, name):
    done = subprocess.run(
        [sys.executable, "-m", "scenarios.context_corrosion", *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=180,
    )
    (tmp_path / f"{name}.stdout").write_text(done.stdout)
    (tmp_path / f"{name}.stderr").write_text(done.stderr)
    return done


def test_the_key_never_leaves_the_request_headers(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv(ENV, SENTINEL)  # the fake server (in this process) checks it
    env = {**os.environ, ENV: SENTINEL, "PYTHONPATH": str(ROOT)}
    faults = (Fault.parse("429:first=2,retry_after=0"), Fault.parse("503:first=1"), Fault.parse("nonjson:every=4"))
    server = FakeServer(FakeConfig(Latency.parse("fixed:0.001"), faults=faults, require_key_env=ENV))
    out = tmp_path / "runs"
    common = ["--backend", "openai-compatible", "--api-key-env", ENV, "--model", "fake-1", "--out", str(out),
              "--rounds", "1", "--n-peers", "2", "--dominant-tokens", "64", "--peer-tokens", "48"]
    with server.in_thread():
        ok = run([*common, "--base-url", server.openai_url, "--cassette", str(tmp_path / "c.sqlite")],
                 env, tmp_path, "ok")
        stats = server.stats()
        # A second run (in this process) whose key the server rejects: the error path must not leak.
        server.reset(FakeConfig(require_key_env="SIMCORE_TEST_OTHER_KEY"))
        capfd.readouterr()
        code = main(SCENARIO, [*common, "--base-url", server.openai_url, "--json"])
        rejected = capfd.readouterr()
        (tmp_path / "rejected.stdout").write_text(rejected.out)
        (tmp_path / "rejected.stderr").write_text(rejected.err)
    assert ok.returncode == 0, ok.stderr
    assert stats["by_status"].get("401", 0) == 0 and stats["by_status"]["200"] == 9  # the key was sent
    assert "retry" in ok.stderr  # the retry log lines are part of what we check
    assert code == 1 and "AuthenticationError" in rejected.out
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "cassette.sqlite" for p in files) and len(files) >= 12
    for path in files:
        data = path.read_bytes()
        assert SENTINEL.encode() not in data, path
        assert SENTINEL[-12:].encode() not in data, path
