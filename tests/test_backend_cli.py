"""The backend flags of the shared CLI: validation, --estimate, --budget-usd, --cassette, replay."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from backends.fake_server import FakeConfig, FakeServer, Fault, Latency
from scenarios.context_corrosion import SCENARIO
from simcore.base.records import read_json
from simcore.cli import main
from tests.commands import run_module

SMALL = ["--rounds", "1", "--n-peers", "2", "--dominant-tokens", "64", "--peer-tokens", "48"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server():
    srv = FakeServer(FakeConfig())
    with srv.in_thread():
        yield srv


def run_cli(argv, capsys):
    code = main(SCENARIO, argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--budget-usd", "-1"], "budget_usd: must be a number >= 0"),
        (["--max-concurrency", "0"], "max_concurrency: must be an integer >= 1"),
        (["--timeout", "abc"], "timeout_s: must be a number"),
        (["--rpm", "0"], "rpm: must be a number > 0"),
        (["--backend", "openai-compatible"], "base_url: backend 'openai-compatible' needs --base-url"),
        (["--backend", "llamacpp", "--base-url", "127.0.0.1:8080"], "base_url: must start with http"),
        (["--cassette-mode", "replay"], "cassette: --cassette-mode replay needs an existing --cassette file"),
        (["--prices", "/no/such/file.json"], "prices: file '/no/such/file.json' not found"),
        (["--backend", "nope"], "backend: must be one of"),
        (["--reask", "6"], "reask: must be an integer"),
        (["--reask", "-1"], "reask: must be an integer"),
        (["--reask", "two"], "reask: must be an integer"),
        (["--reask-max-tokens", "0"], "reask_max_tokens: must be an integer >= 1"),
    ],
)
def test_bad_backend_flags_exit_2_with_one_line_and_write_nothing(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(SCENARIO, [*argv, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


def test_a_missing_key_names_the_variable(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(SCENARIO, ["--backend", "openai", "--model", "gpt-4.1-mini", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "OPENAI_API_KEY" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_estimate_prints_calls_tokens_and_cost_and_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # an estimate needs no key
    code, out, _ = run_cli(["--backend", "openai", "--model", "gpt-4.1-mini", "--estimate", "--json",
                            "--reask", "0", "--out", str(tmp_path), *SMALL], capsys)
    data = json.loads(out)
    assert code == 0 and data["total"]["calls"] == 9 and data["total"]["cost_usd"] > 0
    assert not any(tmp_path.iterdir())
    # Real backends re-ask replies cut at these small budgets (once by default): the estimate counts them.
    code, out, _ = run_cli(["--backend", "openai", "--model", "gpt-4.1-mini", "--estimate", "--json",
                            "--out", str(tmp_path), *SMALL], capsys)
    assert code == 0 and json.loads(out)["total"]["calls"] > 9
    code, out, _ = run_cli(["--estimate", *SMALL], capsys)
    assert code == 0 and "stub dry run" in out and "total" in out


def test_budget_flag_stops_the_run_and_records_why(server, capsys, tmp_path):
    server.reset(FakeConfig())
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-1": {"input": 100.0, "output": 100.0}}))
    code, out, err = run_cli(["--backend", "openai-compatible", "--base-url", server.openai_url,
                              "--model", "fake-1", "--budget-usd", "0.05", "--prices", str(prices),
                              "--out", str(tmp_path / "runs"), *SMALL], capsys)
    assert code == 1 and "BudgetExceeded" in err
    run_dir = next((tmp_path / "runs" / "context_corrosion").iterdir())
    results = read_json(run_dir / "results.json")
    assert results["status"] == "error" and results["error"]["type"] == "BudgetExceeded"
    assert results["cost_usd"] <= 0.05 and 0 < server.stats()["requests"] < 9
    assert read_json(run_dir / "manifest.json")["backend"]["options"]["budget_usd"] == 0.05


def test_cassette_flag_then_offline_replay_cli(server, capsys, tmp_path, monkeypatch):
    server.reset(FakeConfig(Latency.parse("fixed:0.001"), faults=(Fault.parse("503:first=2"),)))
    cassette = tmp_path / "c.sqlite"
    args = ["--backend", "openai-compatible", "--base-url", server.openai_url, "--model", "fake-1",
            "--cassette", str(cassette), "--out", str(tmp_path / "runs"), "--seed", "9", "--plots", "none", *SMALL]
    code, _, _ = run_cli(args, capsys)
    assert code == 0 and server.stats()["requests"] == 11  # 9 calls + 2 retried faults
    server.reset(FakeConfig())
    code, _, _ = run_cli(args + ["--cassette-mode", "replay"], capsys)
    assert code == 0 and server.stats()["requests"] == 0
    first, second = sorted((tmp_path / "runs" / "context_corrosion").iterdir())
    assert (first / "trace.jsonl").read_bytes() == (second / "trace.jsonl").read_bytes()
    # The replay command needs neither the server (it gets no request) nor a key: nothing in the
    # environment but PATH and the tests' own settings (the embedding cache, the plots).
    for name in [n for n in os.environ if n != "PATH" and not n.startswith("SIMCORE_")]:
        monkeypatch.delenv(name)
    done = run_module("simcore.replay", str(first), cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip().endswith("identical to the recorded run"), done.stderr
    assert server.stats()["requests"] == 0


@pytest.mark.parametrize("preset, server_name", [("ollama", "Ollama"), ("vllm", "vLLM"),
                                                 ("llamacpp", "the llama.cpp server")])
def test_a_local_server_that_is_not_running_fails_before_work(preset, server_name, capsys, tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SystemExit) as exc:
        main(SCENARIO, ["--backend", preset, "--base-url", f"http://127.0.0.1:{port}/v1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == f"error: nothing is listening at http://127.0.0.1:{port}: is {server_name} running?\n"
    assert not any(tmp_path.iterdir())


def test_a_trial_error_prints_as_a_sentence():
    from simcore.cli import error_sentence

    line = error_sentence({"type": "TransportError", "message": "ollama: connection failed", "sim_time": 2.5})
    assert line == "ollama: connection failed (TransportError at simulated time 2.5)"
    assert "{" not in line and "'type'" not in line
