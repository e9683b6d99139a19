"""The shared scenario CLI: flags, config files, errors, --json.

The commands run in this process (tests/commands.py), but for the two whose subject is the
process: a closed stdout pipe and the interpreter's ``-m`` lookup of a mistyped scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands import Ran, run_module

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, cwd: Path) -> Ran:
    return run_module("scenarios.context_corrosion", *args, cwd=cwd)


@pytest.mark.parametrize(
    "args, field",
    [
        (["--rounds", "0"], "rounds"),
        (["--task", "9"], "task"),
        (["--temperature", "3"], "temperature"),
        (["--rounds", "two"], "rounds"),
        (["--seed", "-1"], "seed"),
        (["--topology", "hexagon"], "topology"),
        (["--order", "loudest"], "order"),
        (["--memory", "recent:0"], "memory"),
        (["--backend", "nope"], "backend"),
    ],
)
def test_bad_values_exit_2_with_one_line_and_write_nothing(tmp_path, args, field):
    res = run_cli(*args, "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ")
    assert res.stdout == ""
    assert not (tmp_path / "runs").exists()


def test_unknown_flag_is_one_line(tmp_path):
    res = run_cli("--bogus", cwd=tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("module, argv, message", [
    ("scenarios.context_corrosion", ["--rouds", "3"], "unrecognized arguments: --rouds 3; did you mean --rounds?"),
    ("simcore.batch", ["context_corrosion", "--trails", "3", "--rouds=2"],
     "unrecognized arguments: --trails 3 --rouds=2; did you mean --trials (for --trails), --rounds (for --rouds)?"),
    ("simcore.replay", ["runs/x", "--analisys"], "unrecognized arguments: --analisys; did you mean --analysis?"),
    ("scenarios.perturbation", ["--pair", "2", "--perturbe", "none"],
     "unrecognized arguments: --perturbe none; did you mean --perturb?"),
    ("simcore.calibrate", ["context_corrosion", "--monte-carols", "3"],
     "unrecognized arguments: --monte-carols 3; did you mean --monte-carlos?"),
    ("scenarios.context_corrosion", ["--zzz"], "unrecognized arguments: --zzz"),
])
def test_a_misspelt_flag_gets_the_closest_one(tmp_path, module, argv, message):
    out = [] if module == "simcore.replay" else ["--out", str(tmp_path / "runs")]  # (replay writes nothing)
    res = run_module(module, *argv, *out, cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"python -m {module}: error: {message}\n"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command, argv, message", [
    # A flag other commands take: the closest, and why this command takes none.
    ("simcore.replay", ["runs/x", "--seeed", "3"], "unrecognized arguments: --seeed 3; did you mean --seed? "
     "python -m simcore.replay takes no --seed: a replay runs the recorded run's own seed "
     "(python -m simcore.run NAME --seed N runs another)"),
    # Nothing close: a command of few flags lists them.
    ("simcore.view.command", ["--bogus"], "unrecognized arguments: --bogus; its flags: --host, --port (see --help)"),
    # A mistyped flag whose value stood where the scenario's name goes: the flag is what to correct.
    ("simcore.calibrate", ["--seeed", "3"], "unrecognized arguments: --seeed; did you mean --seed?"),
])
def test_every_command_says_which_flag_was_meant(command, argv, message, capsys):
    import importlib

    with pytest.raises(SystemExit) as exc:
        importlib.import_module(command).main(argv)
    prog = command.removesuffix(".command")
    assert exc.value.code == 2 and capsys.readouterr().err == f"python -m {prog}: error: {message}\n"


def test_config_file_and_flag_precedence(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rounds: 1\nn_peers: 2\ntask: 3\nmetrics: false\n")
    res = run_cli("--config", str(cfg), "--task", "2", "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    results = json.loads(res.stdout)
    manifest = json.loads((Path(results["run_dir"]) / "manifest.json").read_text())
    assert manifest["config"]["rounds"] == 1 and manifest["config"]["task"] == 2


@pytest.mark.parametrize("content, needle", [
    ("rounds: [1, 2\n", "invalid YAML"),
    ("- 1\n- 2\n", "mapping"),
    ("rounds: 9\n", "rounds: must be an integer from 1 to 5"),
    ("colour: red\n", "colour: unknown field"),
])
def test_bad_config_files(tmp_path, content, needle):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(content)
    res = run_cli("--config", str(cfg), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert res.returncode == 2 and needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


BROKEN_CONFIGS = [
    (b"rounds: 1\nrounds: 2\n", "duplicate key 'rounds' (line 2)"),
    (b"memory:\n  kind: full\n  kind: recent\n", "duplicate key 'kind' (line 3)"),
    (b"", "is empty"),
    (b"# nothing but a comment\n", "is empty"),
    (b"rounds: 1\n\xff\xfe\n", "is not UTF-8 text (byte 10)"),
    ("task: 1\n".encode("utf-16"), "is not UTF-8 text (byte 0)"),
    (b"rounds: " + b"9" * 5000 + b"\n", "invalid YAML"),
    (b"[" * 5000, "invalid YAML"),
]


@pytest.mark.parametrize("content, needle", BROKEN_CONFIGS)
@pytest.mark.parametrize("command", ["scenario", "batch"])
def test_broken_config_files_are_one_line_naming_the_file(tmp_path, capsys, content, needle, command):
    from scenarios.context_corrosion import SCENARIO
    from simcore.batch.command import main as batch_main
    from simcore.cli import main as scenario_main

    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(content)
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exc:
        if command == "scenario":
            scenario_main(SCENARIO, ["--config", str(cfg), "--out", str(out)])
        else:
            batch_main(["context_corrosion", "--trials", "1", "--config", str(cfg), "--out", str(out)])
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: config: ") and str(cfg) in lines[0], lines
    assert needle in lines[0]
    assert not out.exists() and cfg.read_bytes() == content


def test_a_non_utf8_config_file_exits_2_from_the_command_line(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(b"rounds: 1\n# caf\xe9\n")
    res = run_cli("--config", str(cfg), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"error: config: {str(cfg)!r} is not UTF-8 text (byte 15); save it as UTF-8\n"


def test_json_output_is_only_json(tmp_path):
    res = run_cli("--rounds", "1", "--no-metrics", "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 0
    data = json.loads(res.stdout)
    assert data["status"] == "ok" and data["usage"]["stub"]["calls"] == 5 * 1 + 5 + 5


def test_default_run_prints_summary_and_run_dir(tmp_path):
    res = run_cli("--out", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 0
    assert "context corrosion" in res.stdout
    run_dir = Path(res.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    names = {p.name for p in run_dir.iterdir()}
    assert {"manifest.json", "results.json", "timings.json", "trace.jsonl"} <= names


@pytest.mark.parametrize("as_json", [False, True])
def test_a_run_whose_plots_fail_is_written_and_says_so(tmp_path, capsys, monkeypatch, as_json):
    """A figure that fails must not lose the run, nor pass unseen: a real model's unreadable
    answers once left a run without its plots, and only results.json said why."""
    import dataclasses

    from scenarios.context_corrosion import SCENARIO
    from simcore.cli import main as cli_main

    def broken(*_args):
        raise TypeError("'float' object is not iterable")

    scenario = dataclasses.replace(SCENARIO, write_artifacts=broken)
    argv = ["--rounds", "1", "--no-metrics", "--out", str(tmp_path), *(["--json"] if as_json else [])]
    assert cli_main(scenario, argv) == 0
    out, err = capsys.readouterr()
    assert err == "warning: the run was written without its plots and files: TypeError: 'float' object is not iterable\n"
    run_dir = next((tmp_path / "context_corrosion").iterdir())
    results = json.loads((run_dir / "results.json").read_text())
    assert results["artifact_error"] == "TypeError: 'float' object is not iterable" and results["status"] == "ok"
    assert (json.loads(out)["artifact_error"] if as_json else str(run_dir) in out)


def test_help(tmp_path):
    res = run_cli("--help", cwd=tmp_path)
    assert res.returncode == 0
    for flag in ("--seed", "--backend", "--model", "--out", "--config", "--json", "--rounds", "--task"):
        assert flag in res.stdout


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "scenarios.context_corrosion", "--rounds", "1", "--no-metrics", "--json",
         "--out", str(tmp_path)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    proc.stdout.close()  # the reader is gone before the run prints (like `| head` having exited)
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and "BrokenPipeError" not in err and "Traceback" not in err


def test_a_config_naming_models_is_said_before_any_call_when_model_is_given(capsys):
    """Per-agent models in a config file win over --model: never silently (issue 13, item 4)."""
    from scenarios.veil_of_ignorance import SCENARIO
    from simcore.cli import main as cli_main

    assert cli_main(SCENARIO, ["--config", "default", "--model", "mine", "--estimate"]) == 0
    err = capsys.readouterr().err
    assert "note: the config names models for Agent_1=gpt-4.1-mini, Agent_2=gpt-4.1" in err
    assert "--model mine applies only to calls that name none" in err
    # Without --model, or with no model named in the config, there is nothing to say.
    assert cli_main(SCENARIO, ["--config", "default", "--estimate"]) == 0
    assert cli_main(SCENARIO, ["--model", "mine", "--estimate"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_an_out_path_that_is_a_file_fails_before_any_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out, needle in ((blocker, "is a file, not a directory"), (blocker / "sub", "cannot be created")):
        res = run_cli("--out", str(out), cwd=tmp_path)
        assert res.returncode == 2 and res.stdout == ""
        assert res.stderr.startswith("error: out: ") and needle in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"] and blocker.read_text() == "x"


def test_an_unwritable_out_path_fails_before_any_work(tmp_path, monkeypatch):
    from simcore.base.config import ConfigError
    from simcore.base.records import check_out_dir

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("simcore.base.records.tempfile.mkdtemp", refuse)
    with pytest.raises(ConfigError, match=r"^out: cannot write under .*\(Permission denied\)"):
        check_out_dir(tmp_path / "runs")
    assert not any(tmp_path.iterdir())


def test_a_read_only_file_system_fails_before_any_work(tmp_path):
    import os
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(dir="/sys"))
        pytest.skip("/sys is writable here")
    except OSError:
        pass
    res = run_cli("--out", "/sys/simcore-runs", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == "" and not any(tmp_path.iterdir())
    assert res.stderr.startswith("error: out: cannot write under '/sys'") and res.stderr.count("\n") == 1


def test_a_mistyped_scenario_module_lists_the_scenarios(tmp_path):
    res = subprocess.run([sys.executable, "-m", "scenarios.context_corosion"], cwd=tmp_path, capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "did you mean context_corrosion?" in res.stderr
    assert "veil_of_ignorance" in res.stderr and "llm_auction" in res.stderr
