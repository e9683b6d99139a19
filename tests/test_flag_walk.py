"""Every flag of every command does what its help says, or is refused with one line.

The walk reads each command's flags from its argparse parser, so a flag added later
without a check here fails :func:`test_every_flag_of_every_command_is_walked`. Each
command runs as few times as covers its flags (one run takes most of them at once),
in-process, on the smallest configuration, against the fake server in this process
where a flag needs a real backend; each flag's value is then found where the command
records what it did (a run's manifest, a sweep's ``sweep.json`` and ``summary.json``, a
study's ``study.json``, a comparison's manifest) or in what it printed or wrote. A
scenario's config fields become flags through one function (:func:`simcore.cli.add_config_args`):
each field of each built-in scenario is walked through the config it resolves to, and one
field per command through the command's record.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backends.fake_server import FakeConfig, FakeServer, Fault
from simcore.base.config import ConfigError, _base_type, field_types
from simcore.base.records import read_json
from simcore.runs.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("context_corrosion", "veil_of_ignorance", "llm_auction", "acausal_cooperation",
             "perturbation.context_corrosion")
CC = load_scenario("context_corrosion")
SMALL = ["--n-peers", "2"]  # with --config setting rounds: 1, 9 calls
# The cheapest scenario with a counterfactual and a null: no embeddings, two agents, one round.
TINY_ACAUSAL = ["--n-agents", "2", "--rounds", "1", "--no-embeddings", "--plots", "none"]
KEY = "SIMCORE_WALK_KEY"
# Every backend flag with a value other than its default, and where the spec records it.
BACKEND = {
    "--api-key-env": (KEY, "api_key_env", KEY), "--json-mode": ("json_object", "json_mode", "json_object"),
    "--max-concurrency": ("3", "max_concurrency", 3), "--rpm": ("6000", "rpm", 6000.0),
    "--tpm": ("900000", "tpm", 900000.0), "--timeout": ("120", "timeout_s", 120.0),
    "--max-retries": ("0", "max_retries", 0), "--breaker-window": ("7", "breaker_window", 7),
    "--breaker-threshold": ("0.9", "breaker_threshold", 0.9), "--budget-usd": ("5", "budget_usd", 5.0),
    "--reask": ("2", "reask", 2), "--reask-max-tokens": ("512", "reask_max_tokens", 512),
    "--context-window": ("100000", "context_window", 100000), "--fail-fast": (None, "fail_fast", True),
    "--cassette-mode": ("record", "cassette_mode", "record"),
}
ANALYSIS = ["--device", "cpu", "--plots", "none"]


def flags(parser: argparse.ArgumentParser) -> set[str]:
    """The parser's long flags and positional arguments (by dest), but --help."""
    return {next((o for o in a.option_strings if o.startswith("--")), a.dest) for a in parser._actions
            if a.dest != "help"}


def config_flags(parser: argparse.ArgumentParser, config_type: type) -> set[str]:
    group = next((g for g in parser._action_groups if g.title == f"{config_type.__name__} fields"), None)
    return set() if group is None else {a.option_strings[0] for a in group._group_actions}


def run(main: Callable[..., int], *args: Any) -> tuple[int, str, str]:
    """A command's exit status and what it printed; a refusal is status 2 and one line."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(*args)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def refused(main: Callable[..., int], *args: Any, says: str) -> None:
    code, _, err = run(main, *args)
    assert code == 2 and err.count("\n") == 1 and says in err, err


def backend_argv(files: Path) -> list[str]:
    argv = []
    for flag, (value, _, _) in BACKEND.items():
        argv += [flag] if value is None else [flag, value]
    return [*argv, "--prices", str(files / "prices.json"), "--model-rules", str(files / "rules.json"), "--cassette",
            str(files / "c.sqlite")]


def assert_backend(options: dict[str, Any], files: Path) -> None:
    for flag, (_, name, value) in BACKEND.items():
        assert options.get(name) == value, (flag, options)
    assert options["prices"] == str(files / "prices.json") and options["cassette"] == str(files / "c.sqlite")
    assert options["model_rules"] == str(files / "rules.json")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    where = tmp_path_factory.mktemp("walk-files")
    (where / "prices.json").write_text(json.dumps({"fake-1": {"input": 1.0, "output": 2.0}}))
    (where / "small.yaml").write_text("rounds: 1\n")
    (where / "rules.json").write_text("[]")  # a model-rules file that adds no rule
    return where


@pytest.fixture(scope="module")
def env():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY, "k")
        yield mp


@pytest.fixture(scope="module")
def server():
    srv = FakeServer(FakeConfig())
    with srv.in_thread():
        yield srv


# -- the walk covers every flag ----------------------------------------------------------------------

def commands() -> dict[str, tuple[argparse.ArgumentParser, type | None]]:
    """Every command's parser and the config type whose fields it takes as flags."""
    from scenarios.acausal_cooperation import compare_configs
    from scenarios.context_corrosion.service import build_serve_parser
    from scenarios.llm_auction import compare as auction_compare
    from simcore import calibrate, cli, new, replay
    from simcore.batch import command as batch
    from simcore.capture import command as capture
    from simcore.perturbation import command as study
    from simcore.view import command as view

    out = {f"run {name}": (cli.build_parser(load_scenario(name)), load_scenario(name).config_type)
           for name in SCENARIOS}
    return {
        **out,
        "batch": (batch.build_parser(CC), CC.config_type),
        "perturbation": (study.build_parser(CC), CC.config_type),
        "perturbation report": (study.build_report_parser(), None),
        "calibrate": (calibrate.build_parser(CC), CC.config_type),
        "capture": (capture.build_parser(), None),
        "llm_auction compare": (auction_compare.build_parser(), load_scenario("llm_auction").config_type),
        "acausal_cooperation compare": (compare_configs.build_parser(),
                                        load_scenario("acausal_cooperation").config_type),
        "context_corrosion serve": (build_serve_parser(), None),
        "replay": (replay.build_parser(), None),
        "view": (view.build_parser(), None),
        "new": (new.build_parser(), None),
    }


COMMON = {"--seed", "--backend", "--model", "--base-url", "--out", "--config", "--json", *BACKEND, "--prices",
          "--model-rules", "--cassette", "--estimate", "--device", "--embed-cache", "--plots"}
# Each command's own flags (beside its config fields), as the walks below check them.
WALKED = {
    "run": COMMON | {"--trace", "--resume", "--counterfactual", "--trials"},
    "batch": COMMON | {"scenario", "--trials", "--grid", "--conditions", "--seed-scope", "--executor", "--workers",
                       "--address", "--concurrency", "--encoder", "--trial-timeout", "--max-failed-trials",
                       "--resume", "--keep-failed", "--dry-run", "--verbose", "--no-progress", "--no-plot"},
    "perturbation": COMMON | {"--scenario", "--perturb", "--pairs", "--noise-floor", "--reuse", "--no-plot",
                              "--no-progress"},
    "perturbation report": {"dir", "--no-plot"},
    "calibrate": {"scenario", "--trials", "--monte-carlos", "--alpha", "--seed", "--out", "--config", "--install",
                  "--json", "--no-progress"},
    "capture": {"--perturb", "--pairs", "--noise-floor", "--seed", "--upstream", "--upstream-api", "--api-key-env",
                "--model", "--answer", "--timeout", "--reuse", "--out", "--no-plot", "--json", "command"},
    "llm_auction compare": COMMON | {"--trials", "--mechanisms"},
    "acausal_cooperation compare": COMMON | {"--configs", "--trials"},
    "context_corrosion serve": {"--host", "--port", "--out", "--backend", "--model", "--base-url", "--max-queue"},
    "replay": {"run_dir", "--json", "--analysis"},
    "view": {"runs_dir", "--host", "--port"},
    "new": {"name", "--out"},
}


def test_every_flag_of_every_command_is_walked():
    """A command's flags are its config fields' and the ones its walk below checks, no more and no fewer;
    every parser is the shared one (one-line errors, "did you mean"), named as it is typed."""
    from simcore.runs.args import OneLineParser

    for name, (parser, config_type) in commands().items():
        own = flags(parser) - (config_flags(parser, config_type) if config_type else set())
        walked = WALKED["run" if name.startswith("run ") else name]
        if name.startswith("run ") and load_scenario(name.removeprefix("run ")).counterfactual is None:
            walked = walked - {"--counterfactual", "--trials"}  # no axis to compare: no Monte Carlo
        # A scenario's config field may take a common flag's name (context_corrosion's plots): the flag wins.
        assert own == walked, (name, sorted(own - walked), sorted(walked - own))
        assert isinstance(parser, OneLineParser) and parser.prog.startswith("python -m "), name
        for action in parser._actions:
            assert action.help, (name, action.dest)


# -- config fields -----------------------------------------------------------------------------------

def other_value(config_type: type, field: dataclasses.Field) -> str | None:
    """A value for the field other than its default, as typed on the command line (None: no scalar flag)."""
    tp, _ = _base_type(field_types(config_type)[field.name])
    meta, default = field.metadata, field.default
    if tp is bool:
        return str(not default).lower()
    if meta.get("choices"):
        return str(next(c for c in meta["choices"] if c != default))
    lo, hi = meta.get("lo"), meta.get("hi")
    if tp in (int, float):
        step = 1 if tp is int else (0.25 * ((hi - lo) if lo is not None and hi is not None else 1.0))
        for value in (default + step, default - step):
            if (lo is None or value >= lo) and (hi is None or value <= hi):
                return str(value)
        return None
    if tp is str:
        return (default or "") + "x"
    return None


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_config_field_flag_reaches_the_config_or_is_refused_with_one_line(name):
    from simcore.cli import build_parser, resolve_config

    scenario = load_scenario(name)
    parser = build_parser(scenario)
    reached = []
    for field in dataclasses.fields(scenario.config_type):
        flag = "--" + field.name.replace("_", "-")
        value = other_value(scenario.config_type, field)
        if flag not in config_flags(parser, scenario.config_type) or value is None:
            continue
        args = parser.parse_args([flag, value] if parser._option_string_actions[flag].nargs != 0
                                 else [flag if value == "true" else "--no-" + flag[2:]])
        try:
            config = resolve_config(scenario.config_type, args)
        except ConfigError as exc:  # a value the field's own check refuses: one line naming a field
            assert "\n" not in str(exc) and re.match(r"^[\w.\[\]]+: ", str(exc)), (flag, str(exc))
            continue
        assert str(getattr(config, field.name)).lower() == value.lower() or getattr(config, field.name) == type(
            getattr(config, field.name))(value), (flag, value, getattr(config, field.name))
        reached.append(flag)
    assert len(reached) >= len(config_flags(parser, scenario.config_type)) // 2, reached


# -- python -m simcore.run NAME (and python -m scenarios.NAME) -----------------------------------------

@pytest.fixture(scope="module")
def scenario_runs(server, files, env, tmp_path_factory):
    """One run with every common flag, on the fake server, which dies after 5 answers; the
    command it prints to finish it; a --counterfactual pair; a Monte Carlo; an --estimate."""
    from simcore.run import main

    out = tmp_path_factory.mktemp("walk-run")
    server.reset(FakeConfig(faults=(Fault("drop", after=5),)))
    argv = ["context_corrosion", "--seed", "7", "--backend", "openai-compatible", "--model", "fake-1",
            "--base-url", server.openai_url, "--out", str(out / "first"), "--config", str(files / "small.yaml"),
            "--json", *backend_argv(files), *ANALYSIS, "--embed-cache", str(out / "cache"), "--trace", "stream",
            "--no-metrics", *SMALL]
    first = run(main, argv)
    server.reset(FakeConfig())
    finish = json.loads(first[1])["finish_command"]
    resumed = run(main, [*shlex.split(finish)[3:], "--out", str(out / "resumed"), "--max-retries", "1"])
    cf = run(main, ["acausal_cooperation", "--counterfactual", "--out", str(out / "cf"), *TINY_ACAUSAL])
    mc = run(main, ["acausal_cooperation", "--trials", "2", "--out", str(out / "mc"), *TINY_ACAUSAL])
    estimate = run(main, ["context_corrosion", "--estimate", "--out", str(out / "estimate"), *SMALL])
    return {"out": out, "first": first, "resumed": resumed, "cf": cf, "mc": mc, "estimate": estimate}


def _only(root: Path) -> Path:
    (found,) = [p for p in root.iterdir() if p.is_dir()]
    return found


def test_the_run_commands_flags_reach_its_manifest(scenario_runs, files, server):
    out = scenario_runs["out"]
    code, printed, _ = scenario_runs["first"]
    assert code == 1  # the server died after 5 answers: --max-retries 0 and --fail-fast end the run
    results = json.loads(printed)  # --json: the results, and the command that finishes the run
    run_dir = Path(results["run_dir"])
    assert run_dir.parent == out / "first" / "context_corrosion"  # --out
    manifest = read_json(run_dir / "manifest.json")
    assert manifest["seed"] == 7 and manifest["config"]["rounds"] == 1 and manifest["config"]["n_peers"] == 2
    backend = manifest["backend"]
    assert (backend["name"], backend["model"], backend["base_url"]) == ("openai-compatible", "fake-1",
                                                                        server.openai_url)
    assert_backend(backend["options"], files)
    assert manifest["options"] == {"trace": "stream", "device": "cpu", "embed_cache": str(out / "cache"),
                                   "plots": "none"}
    # --resume: the printed command finishes it, and may change the retries.
    code, _, said = scenario_runs["resumed"]
    assert code == 0 and "calls answered from its cassette" in said
    resumed = read_json(_only(out / "resumed" / "context_corrosion") / "manifest.json")
    assert resumed["resumed_from"] == str(run_dir) and resumed["backend"]["options"]["max_retries"] == 1
    assert resumed["backend"]["options"]["cassette_mode"] == "resume"


def test_counterfactual_trials_and_estimate_reach_what_they_write(scenario_runs):
    out = scenario_runs["out"]
    assert scenario_runs["cf"][0] == 0 and scenario_runs["mc"][0] == 0
    cf = read_json(next((out / "cf" / "acausal_cooperation").glob("cf-*")) / "summary.json")
    mc = read_json(next((out / "mc" / "acausal_cooperation").glob("mc-*")) / "summary.json")
    assert (cf["mode"], cf["n_trials"]) == ("counterfactual", 1) and (mc["mode"], mc["n_trials"]) == ("monte_carlo", 2)
    code, printed, _ = scenario_runs["estimate"]
    assert code == 0 and "calls" in printed and not (out / "estimate").exists()


def test_a_resume_with_a_flag_that_changes_the_run_is_refused(scenario_runs):
    from simcore.run import main

    run_dir = Path(json.loads(scenario_runs["first"][1])["run_dir"])
    refused(main, ["--resume", str(run_dir), "--trials", "2"], says="resume: --trials is the resumed run's own")
    refused(main, ["context_corrosion", "--counterfactual", "--trials", "2"], says="trials: --counterfactual runs")


# -- python -m simcore.batch ---------------------------------------------------------------------------

def test_the_sweep_commands_flags_reach_its_records(files, env, tmp_path):
    from simcore.batch.command import main

    out = tmp_path / "sweep"
    argv = ["context_corrosion", "--trials", "1", "--grid", "n_peers=2", "--conditions", "none", "--seed", "7",
            "--seed-scope", "sweep", "--config", str(files / "small.yaml"), "--executor", "serial",
            "--encoder", "per-worker", "--trial-timeout", "300", "--max-failed-trials", "5", "--model", "stub:x",
            "--out", str(out), "--json", "--no-progress", "--no-plot", "--no-metrics", *ANALYSIS,
            "--embed-cache", str(tmp_path / "cache"), *[a for a in backend_argv(files)
                                                        if a not in ("--fail-fast",)]]
    code, printed, err = run(main, argv)
    assert code == 0, err
    summary = json.loads(printed)  # --json
    assert summary["sweep_id"] and "%" not in err  # --no-progress: no bar
    definition = read_json(out / "sweep.json")["definition"]
    assert definition["grid"] == [["n_peers", [2]]] and definition["conditions"] is None
    assert (definition["seed"], definition["seed_scope"], definition["trials"]) == (7, "sweep", 1)
    assert definition["base_config"]["rounds"] == 1 and definition["backend"]["model"] == "stub:x"
    options = summary["options"]
    assert (options["executor"], options["encoder"], options["trial_timeout_s"], options["max_failed_trials"]) == (
        "serial", "per-worker", 300.0, 5)
    assert (options["device"], options["embed_cache"], options["plots"], options["plot"]) == (
        "cpu", str(tmp_path / "cache"), "none", False)
    assert not (out / "plots").exists()  # --no-plot
    manifest = read_json(next((out / "context_corrosion").iterdir()) / "manifest.json")
    assert_backend({**manifest["backend"]["options"], "fail_fast": True,
                    "budget_usd": summary["budget_usd"]}, files)
    # --resume with --keep-failed, --verbose, and the execution flags of another executor.
    code, printed, err = run(main, ["context_corrosion", "--resume", "--keep-failed", "--out", str(out),
                                    "--verbose", "--executor", "asyncio", "--concurrency", "3", "--no-progress",
                                    "--fail-fast", "--no-plot"])
    assert code == 0, err
    again = read_json(out / "summary.json")["options"]
    assert (again["resume"], again["keep_failed"], again["executor"], again["concurrency"], again["fail_fast"]) == (
        True, True, "asyncio", 3, True)
    assert "metric" in printed and "ci_low" in printed  # --verbose: every summary column
    small = ["--rounds", "1", *SMALL, "--no-metrics"]
    code, printed, _ = run(main, ["context_corrosion", "--trials", "2", "--dry-run", "--out", str(tmp_path / "dry"),
                                  *small])
    assert code == 0 and "total trials: 4" in printed and not (tmp_path / "dry").exists()
    code, printed, _ = run(main, ["context_corrosion", "--trials", "2", "--estimate", "--out", str(tmp_path / "dry"),
                                  *small])
    assert code == 0 and "total trials: 4" in printed and not (tmp_path / "dry").exists()
    # Flags of another executor than the one that runs are refused, not ignored.
    refused(main, ["context_corrosion", "--trials", "1", "--executor", "serial", "--workers", "2"],
            says="workers: only the local and dask executors")
    refused(main, ["context_corrosion", "--trials", "1", "--concurrency", "2"], says="concurrency: only --executor")
    refused(main, ["context_corrosion", "--trials", "1", "--executor", "serial", "--address", "tcp://x:1"],
            says="address: only the dask executor")
    refused(main, ["context_corrosion", "--trials", "1", "--workers", "0"], says="workers: must be an integer")


def test_workers_reach_a_local_sweep(tmp_path, monkeypatch):
    from simcore.batch import command

    seen = {}

    def sweep(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise ConfigError("stopped here")  # a process pool is run_sweep's to test (test_batch)

    monkeypatch.setattr(command, "run_sweep", sweep)
    refused(command.main, ["context_corrosion", "--trials", "1", "--workers", "3", "--out", str(tmp_path / "s")],
            says="stopped here")
    assert (seen["executor"], seen["workers"]) == (None, 3)  # the default executor, local


# -- python -m scenarios.perturbation ------------------------------------------------------------------

def test_the_study_commands_flags_reach_its_record(files, env, tmp_path):
    from simcore.perturbation.command import main

    out = tmp_path / "study"
    argv = ["--scenario", "context_corrosion", "--perturb", "drop:agent=P1,round=1",
            "--pairs", "1", "--noise-floor", "1", "--reuse", "none", "--no-plot", "--no-progress", "--seed", "7",
            "--model", "stub:x", "--out", str(out), "--config", str(files / "small.yaml"), "--json", *SMALL,
            "--no-metrics", "--device", "cpu", "--plots", "summary", "--embed-cache", str(tmp_path / "cache"),
            *backend_argv(files)]
    code, printed, err = run(main, argv)
    assert code == 0, err
    study_dir = Path(json.loads(printed)["study_dir"])
    assert study_dir.parent == out / "perturbation" and "%" not in err
    d = read_json(study_dir / "study.json")["definition"]
    assert d["perturbations"] == ["drop:agent=P1,round=1"] and d["pairs"] == 1 and d["seed"] == 7
    assert (d["noise_floor_runs"], d["reuse"], d["config"]["rounds"], d["config"]["n_peers"]) == (1, "none", 1, 2)
    assert d["backend"]["model"] == "stub:x"
    assert_backend(d["backend"]["options"], files)
    assert d["options"] == {"device": "cpu", "embed_cache": str(tmp_path / "cache"), "plots": "summary"}
    assert not list(study_dir.rglob("*.png"))  # --no-plot: no study plot; --plots summary: no run's
    # report DIR, and --no-plot there.
    from simcore.perturbation.command import report_main

    code, printed, _ = run(report_main, [str(study_dir), "--no-plot"])
    assert code == 0 and "report_md" in printed and not list(study_dir.rglob("*.png"))
    code, printed, _ = run(main, ["--scenario", "context_corrosion", "--perturb", "none", "--estimate",
                                  "--out", str(tmp_path / "none")])
    assert code == 0 and not (tmp_path / "none").exists()


def test_the_default_study_with_device_and_plots_records_both_and_draws_no_plot(tmp_path):
    from simcore.perturbation.command import main

    code, printed, err = run(main, ["--device", "cpu", "--plots", "none", "--out", str(tmp_path), "--json",
                                    "--no-progress", "--rounds", "2", *SMALL, "--no-metrics"])
    assert code == 0 and "the default study" in err
    study_dir = Path(json.loads(printed)["study_dir"])
    assert read_json(study_dir / "study.json")["definition"]["options"]["device"] == "cpu"
    assert read_json(study_dir / "study.json")["definition"]["options"]["plots"] == "none"
    assert not list(study_dir.rglob("*.png"))


# -- the other commands ----------------------------------------------------------------------------------

def test_calibrate_flags_reach_its_record(files, tmp_path, monkeypatch):
    from simcore import calibrate

    monkeypatch.setattr(calibrate, "scenario_dir", lambda s: tmp_path / "installed")
    (tmp_path / "installed").mkdir()
    code, printed, err = run(calibrate.main, ["acausal_cooperation", "--trials", "2", "--monte-carlos", "1",
                                              "--alpha", "0.1", "--seed", "7", "--out", str(tmp_path / "c"),
                                              "--config", str(files / "small.yaml"), "--install", "--json",
                                              "--no-progress", *TINY_ACAUSAL[:-2]])
    assert code == 0 and err == "", err  # --no-progress
    record = json.loads(printed)
    assert (record["trials"], record["monte_carlos"], record["alpha"], record["seed"]) == (2, 1, 0.1, 7)
    assert record["config"]["rounds"] == 1 and record["config"]["n_agents"] == 2
    assert (tmp_path / "installed" / "calibration.json").is_file() and (tmp_path / "c").is_dir()


def test_capture_flags_reach_its_record(tmp_path, env, server):
    from simcore.capture.command import main

    server.reset(FakeConfig())
    program = ["--", sys.executable, str(ROOT / "tests" / "capture_agent.py")]
    code, printed, err = run(main, ["--perturb", "none", "--pairs", "1", "--noise-floor", "0", "--seed", "7",
                                    "--upstream", server.openai_url, "--upstream-api", "chat,responses",
                                    "--api-key-env", KEY, "--model", "m-1",
                                    "--answer", "stdout", "--timeout", "120", "--reuse", "none", "--out",
                                    str(tmp_path), "--no-plot", "--json", *program])
    assert code == 0, err
    study_dir = Path(json.loads(printed)["study_dir"])
    d = read_json(study_dir / "study.json")["definition"]
    assert study_dir.parent == tmp_path / "perturbation" and not list(study_dir.rglob("*.png"))
    assert (d["perturbations"], d["pairs"], d["seed"], d["noise_floor_runs"], d["reuse"]) == (
        ["none"], 1, 7, 0, "none")
    assert (d["config"]["upstream"], d["config"]["model"], d["config"]["answer"], d["config"]["timeout_s"]) == (
        server.openai_url, "m-1", "stdout", 120.0)
    assert d["backend"]["options"]["api_key_env"] == KEY and shlex.split(d["command"]) == program[1:]
    assert d["backend"]["options"]["upstream_api"] == "chat,responses"
    refused(main, ["--perturb", "none", "--api-key-env", KEY, *program], says="api_key_env: the stub upstream")


def test_the_compare_commands_flags_reach_their_manifests(files, env, tmp_path):
    from scenarios.acausal_cooperation import SCENARIO as ACAUSAL
    from scenarios.acausal_cooperation.compare_configs import main as acausal_compare
    from scenarios.llm_auction import SCENARIO as AUCTION
    from scenarios.llm_auction.compare import main as auction_compare

    common = ["--seed", "7", "--model", "stub:x", "--json", *ANALYSIS, "--embed-cache", str(tmp_path / "cache"),
              *backend_argv(files)]
    code, printed, err = run(auction_compare, AUCTION, ["--trials", "1", "--mechanisms", "auction,turn_taking",
                                                        "--n-agents", "5", "--n-vignettes", "1", "--out",
                                                        str(tmp_path / "a"), *common])
    assert code == 0, err
    manifest = read_json(Path(json.loads(printed)["run_dir"]) / "manifest.json")
    assert (manifest["mechanisms"], manifest["seed"], len(manifest["trial_seeds"])) == (
        ["auction", "turn_taking"], 7, 1)
    assert manifest["config"]["n_agents"] == 5 and manifest["backend"]["model"] == "stub:x"
    assert_backend(manifest["backend"]["options"], files)
    assert manifest["options"] == {"device": "cpu", "embed_cache": str(tmp_path / "cache"), "plots": "none"}
    assert not list(Path(json.loads(printed)["run_dir"]).rglob("*.png"))
    code, printed, err = run(acausal_compare, ACAUSAL, ["--configs", "baseline", "--trials", "1", "--rounds", "1",
                                                        "--n-agents", "2", "--no-embeddings", "--out",
                                                        str(tmp_path / "b"), *common])
    assert code == 0, err
    manifest = read_json(Path(json.loads(printed)["run_dir"]) / "experiment_comparison.json")
    assert list(manifest["configs"]) == ["baseline"] and manifest["configs"]["baseline"]["rounds"] == 1
    assert len(manifest["trial_seeds"]) == 1 and manifest["seed"] == 7
    assert_backend(manifest["backend"]["options"], files)
    assert manifest["options"] == {"device": "cpu", "embed_cache": str(tmp_path / "cache"), "plots": "none"}


def test_replay_view_new_and_serve_flags_reach_what_they_do(scenario_runs, tmp_path, monkeypatch):
    from scenarios.context_corrosion import service
    from simcore import new, replay
    from simcore.view import command as view

    run_dir = _only(scenario_runs["out"] / "resumed" / "context_corrosion")
    code, printed, _ = run(replay.main, [str(run_dir), "--json", "--analysis"])
    result = json.loads(printed)
    assert code == 0 and result["identical"] and result["metrics"] is not None  # --analysis recomputed them
    seen: dict[str, Any] = {}

    async def capture(*args: Any) -> None:
        seen["args"] = args

    monkeypatch.setattr(view, "serve", capture)
    assert run(view.main, [str(tmp_path), "--host", "127.0.0.2", "--port", "0"])[0] == 0
    assert seen["args"] == (tmp_path, "127.0.0.2", 0)
    monkeypatch.setattr(service, "serve", capture)
    assert run(service.serve_command, ["--host", "127.0.0.2", "--port", "0", "--out", str(tmp_path), "--backend",
                                       "stub", "--model", "stub:x", "--base-url", "http://127.0.0.1:9/v1",
                                       "--max-queue", "3"])[0] == 0
    host, port, out, spec, max_queue = seen["args"]
    assert (host, port, out, spec.model, spec.base_url, max_queue) == ("127.0.0.2", 0, str(tmp_path), "stub:x",
                                                                       "http://127.0.0.1:9/v1", 3)
    assert run(new.main, ["walkpkg", "--out", str(tmp_path / "pkgs")])[0] == 0
    assert (tmp_path / "pkgs" / "walkpkg" / "pyproject.toml").is_file()
