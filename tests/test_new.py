"""The scaffold, ``python -m simcore.new``: what it writes, bad input, and the package working
for real once pip-installed (in a throwaway environment; see tests/sandbox.py)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from simcore.base.config import ConfigError
from simcore.new import create, main, render
from tests.commands import run_module
from tests.inprocess import Server
from tests.sandbox import make_sandbox


def test_render_fills_every_placeholder_and_the_python_compiles():
    files = render("my_study")
    assert set(files) == {
        "pyproject.toml", "README.md", "tests/test_my_study.py",
        *(f"src/my_study/{m}.py" for m in ("__init__", "config", "experiment", "behaviour", "analysis")),
    }
    for rel, text in files.items():
        assert "$" not in text and "NAME" not in text, rel
        if rel.endswith(".py"):
            compile(text, rel, "exec")
    assert 'my_study = "my_study:SCENARIO"' in files["pyproject.toml"]
    assert "class MyStudyConfig(Config)" in files["src/my_study/config.py"]


@pytest.mark.parametrize("name, error", [
    ("Rumour", "name: must be a lower-case Python identifier"),
    ("my-study", "name: must be a lower-case Python identifier"),
    ("class", "name: must be a lower-case Python identifier"),
    ("context_corrosion", "name: 'context_corrosion' is a built-in scenario"),
    ("json", "name: a module 'json' can already be imported here"),
])
def test_bad_names_are_one_line_and_write_nothing(tmp_path, capsys, name, error):
    with pytest.raises(SystemExit) as exc:
        main([name, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {error}") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_an_existing_target_is_refused_and_left_alone(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match="^out: .* already exists"):
        create("mine", tmp_path)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no staging leftovers


def test_the_generated_package_installs_runs_sweeps_and_replays(tmp_path):
    made = run_module("simcore.new", "demo_study", "--out", str(tmp_path))
    assert made.returncode == 0, made.stderr
    out = made.stdout
    project = tmp_path / "demo_study"
    # It says how to run its tests, whose pytest only the extra brings (the README's first install has none).
    assert f"pip install -e {project}\n" in out and f"pip install -e '{project}[test]'\n" in out
    assert f"python -m pytest {project}\n" in out
    box = make_sandbox(tmp_path / "venv")
    box.run("pip install -q -e '.[test]'", cwd=project)

    # The commands run in one interpreter of the sandbox, each as ``python -m`` runs it
    # (tests/inprocess.py), which spares four interpreter starts; the package is the installed one.
    with Server(box.python, box.env()) as server:
        def command(line: str) -> str:
            ran = server.run(tmp_path, shlex.split(line))
            assert ran.returncode == 0, f"python -m {line} exited {ran.returncode}\n{ran.stderr}"
            return ran.stdout

        results = json.loads(command("simcore.run demo_study --seed 3 --json --out runs"))
        assert results["status"] == "ok" and results["metrics"]["agreement_n"] == 3
        run_dir = Path(results["run_dir"])
        assert run_dir.parent == Path("runs/demo_study")
        manifest = json.loads((tmp_path / run_dir / "manifest.json").read_text())
        assert manifest["scenario"] == "demo_study"

        assert command(f"simcore.replay {run_dir}").strip().endswith("identical to the recorded run")

        # (tests/test_scenario.py checks that a scenario found by name pickles for the process pool)
        command("simcore.batch demo_study --trials 2 --grid n_agents=2,3 --executor serial --out sweep --no-progress --no-plot")
        summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
        assert summary["n_ok"] == summary["n_planned"] == 8  # 2 cells x 2 arms (leader) x 2 trials

        # Calibration under the scaffold's null: the planted effect is found under the default only.
        cal = json.loads(command("simcore.calibrate demo_study --trials 6 --monte-carlos 2 --json --no-progress --out cal"))
        assert cal["null"]["config"] == {"leader_pull": 0.2}
        assert {m["metric"] for m in cal["metrics"]}, cal

        # The package's own tests pass, the planted effect included, run as the command said.
        command(f"pytest -q -p no:cacheprovider {project}")
        assert server.starts == 1  # (the five commands in one interpreter: nothing changed its site-packages)
    # The shared environment does not know the package.
    assert subprocess.run([sys.executable, "-c", "import demo_study"], capture_output=True).returncode != 0
