"""``python -m simcore.run``: any scenario by name, --list, bad names, and the built-in
``python -m scenarios.X`` commands that delegate to it."""

from __future__ import annotations

import json

import pytest

from simcore.run import main, run_scenario
from tests.commands import run_module


def test_a_misspelt_name_is_one_line_listing_the_scenarios():
    res = run_module("simcore.run", "contxt_corrosion")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1
    assert res.stderr.startswith("error: scenario: unknown scenario 'contxt_corrosion' (tried built-in "
                                 "contxt_corrosion, entry point 'contxt_corrosion' in simcore.scenarios, "
                                 "module contxt_corrosion); did you mean context_corrosion? installed: "
                                 "acausal_cooperation, context_corrosion, llm_auction, perturbation.<scenario>, "
                                 "veil_of_ignorance")


def test_list_shows_built_ins_and_entry_points(installed, capsys):
    assert main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("acausal_cooperation ")
    assert any(line.startswith("context_corrosion ") and "Context corrosion:" in line for line in lines)
    mylab = next(line for line in lines if line.startswith("mylab "))
    assert "My lab's study." in mylab and "[entry point mylab_exp:SCENARIO (mylab-exp 0.1)]" in mylab
    broken = next(line for line in lines if line.startswith("broken "))
    assert "(unavailable)" in broken
    assert main(["--list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"name": "mylab", "source": "entry point mylab_exp:SCENARIO (mylab-exp 0.1)",
            "description": "My lab's study.", "ok": True} in rows


@pytest.mark.parametrize("argv, code, text", [
    ([], 2, "usage: python -m simcore.run NAME [flags]"),
    (["--help"], 0, "usage: python -m simcore.run NAME [flags]"),
    (["--seed", "3"], 2, "error: name: the scenario name comes first"),
    (["--list", "--all"], 2, "error: list: takes only --json; got --all"),
])
def test_top_level_usage(capsys, argv, code, text):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    assert rc == code and (out.out + out.err).startswith(text)


def test_the_scenario_flags_follow_the_name(tmp_path, capsys):
    argv = ["tests.batch_scenarios:FLAKY", "--seed", "4", "--boost", "2", "--out", str(tmp_path), "--json"]
    assert main(argv) == 0
    results = json.loads(capsys.readouterr().out)
    assert results["scenario"] == "tests.batch_scenarios:FLAKY" and results["seed"] == 4
    assert (tmp_path / "tests.batch_scenarios:FLAKY").is_dir()
    with pytest.raises(SystemExit) as exc:
        main(["tests.batch_scenarios:FLAKY", "--boost", "99", "--out", str(tmp_path / "no")])
    assert exc.value.code == 2 and not (tmp_path / "no").exists()
    assert capsys.readouterr().err.startswith("error: boost: must be a number from -10 to 10")


def test_help_names_the_command_that_was_typed(capsys):
    with pytest.raises(SystemExit):
        main(["context_corrosion", "--help"])
    assert capsys.readouterr().out.startswith("usage: python -m simcore.run context_corrosion ")
    with pytest.raises(SystemExit):
        run_scenario("context_corrosion", ["--help"], prog="python -m scenarios.context_corrosion")
    assert capsys.readouterr().out.startswith("usage: python -m scenarios.context_corrosion ")
    with pytest.raises(SystemExit):  # subcommands still dispatch
        main(["context_corrosion", "serve", "--help"])
    assert capsys.readouterr().out.startswith("usage: python -m scenarios.context_corrosion serve")
