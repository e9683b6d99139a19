"""Finishing a run that failed after paid calls from its own cassette (``--resume RUN_DIR``).

The server is the fake one, in this process; it dies after a count of answered requests
(``drop:after=N``), never after a time, and counts every request it sees.
"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest

from backends.fake_server import FakeConfig, FakeServer, Fault
from simcore.base.files import read_cassette, read_manifest
from simcore.base.records import read_json
from simcore.run import main as run_main
from simcore.runs.resume import recorded_calls

SMALL = ["--n-peers", "2", "--rounds", "1", "--no-metrics", "--plots", "none"]  # 9 calls, 3 at once
ANSWERED = 5  # the server dies after answering this many


@pytest.fixture(scope="module")
def server():
    srv = FakeServer(FakeConfig())
    with srv.in_thread():
        yield srv


def argv(srv: FakeServer, out: Path) -> list[str]:
    return ["context_corrosion", "--backend", "openai-compatible", "--base-url", srv.openai_url, "--model", "fake-1",
            "--api-key-env", "SIMCORE_TEST_KEY", "--max-retries", "0", "--out", str(out), *SMALL]


@pytest.fixture(scope="module")
def runs(server, tmp_path_factory, monkeypatch_module):
    """An uninterrupted run, a run whose server died midway, and that run finished by the
    command it printed; with the requests the server saw for each."""
    monkeypatch_module.setenv("SIMCORE_TEST_KEY", "k")
    out = tmp_path_factory.mktemp("resume")
    seen = {}
    server.reset(FakeConfig())
    assert run_main(argv(server, out / "whole")) == 0
    seen["whole"] = server.stats()["requests"]
    server.reset(FakeConfig(faults=(Fault("drop", after=ANSWERED),)))
    code, printed = _run(argv(server, out / "failed"))
    seen["failed"] = server.stats()["by_status"]
    server.reset(FakeConfig())  # the server is back
    command = next(line.rpartition(": ")[2] for line in printed.splitlines() if line.startswith("finish it"))
    resumed_code, resumed_printed = _run(shlex.split(command)[3:] + ["--out", str(out / "failed")])
    seen["resumed"] = server.stats()["requests"]
    return {"out": out, "code": code, "printed": printed, "command": command, "seen": seen,
            "resumed_code": resumed_code, "resumed_printed": resumed_printed}


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _run(args: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run_main(args)
    return code, err.getvalue()


def _run_dir(root: Path, status: str) -> Path:
    [found] = [d for d in (root / "context_corrosion").iterdir()
               if read_json(d / "results.json")["status"] == status and not read_json(d / "manifest.json").get(
                   "resumed_from")]
    return found


def test_a_run_whose_server_died_prints_the_command_that_finishes_it(runs):
    failed = _run_dir(runs["out"] / "failed", "error")
    assert runs["code"] == 1 and runs["seen"]["failed"]["200"] == ANSWERED
    assert runs["command"] == f"python -m simcore.run --resume {shlex.quote(str(failed))}"
    assert f"({ANSWERED} calls recorded there are answered from it, only the rest are sent)" in runs["printed"]


def test_the_command_sends_only_the_missing_calls_and_its_results_are_an_uninterrupted_runs(runs):
    assert runs["resumed_code"] == 0
    whole = _run_dir(runs["out"] / "whole", "ok")
    failed = _run_dir(runs["out"] / "failed", "error")
    [resumed] = [d for d in (runs["out"] / "failed" / "context_corrosion").iterdir()
                 if read_json(d / "manifest.json").get("resumed_from") == str(failed)]
    # Only the calls the failed run had no reply for reached the server.
    assert recorded_calls(failed) == ANSWERED
    assert runs["seen"]["resumed"] == runs["seen"]["whole"] - ANSWERED
    assert f"{ANSWERED} calls answered from its cassette, {runs['seen']['resumed']} sent" in runs["resumed_printed"]
    a, b = read_json(resumed / "results.json"), read_json(whole / "results.json")
    assert {k: v for k, v in a.items() if k != "run_id"} == {k: v for k, v in b.items() if k != "run_id"}
    assert (resumed / "trace.jsonl").read_bytes() == (whole / "trace.jsonl").read_bytes()
    options = read_json(resumed / "manifest.json")["backend"]["options"]
    assert options["cassette_mode"] == "resume" and options["cassette"] == str(failed / "cassette.sqlite")
    # The failed run is left as it was: its cassette still matches its manifest.
    assert read_cassette(failed, read_manifest(failed)) is not None


@pytest.mark.parametrize("extra, message", [
    (["--seed", "7"], "resume: --seed is the resumed run's own (its manifest's); drop it"),
    (["--rounds", "2"], "resume: --rounds is the resumed run's own"),
    (["--model", "other"], "resume: --model is the resumed run's own"),
])
def test_a_resume_refuses_a_flag_that_would_change_the_run_with_one_line(runs, extra, message, capsys):
    failed = _run_dir(runs["out"] / "failed", "error")
    with pytest.raises(SystemExit) as exc:
        run_main(["--resume", str(failed), *extra])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and err.count("\n") == 1


def test_a_resume_of_a_run_that_finished_or_is_not_one_is_one_line(runs, capsys, tmp_path):
    whole = _run_dir(runs["out"] / "whole", "ok")
    failed = _run_dir(runs["out"] / "failed", "error")
    for target, message in ((whole, "finished ok; there is nothing to finish"),
                            (tmp_path, "is not a run directory")):
        with pytest.raises(SystemExit) as exc:
            run_main(["--resume", str(target)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and err.count("\n") == 1, err
    with pytest.raises(SystemExit):
        run_main(["veil_of_ignorance", "--resume", str(failed)])
    assert "is a run of context_corrosion, not veil_of_ignorance" in capsys.readouterr().err
