"""The Python face (``import simcore``): its names, recorded; its checks; every executor inside a
running event loop; and the docs notebook, executed by a real Jupyter kernel (nbclient, ipykernel).

The face is versioned with the package: ``tests/golden/python_face.json`` keeps its surface
for each ``simcore.__version__``, compared as the Scenario API's is
(:mod:`tests.test_scenario_api`). After an intended change, bump the version and record it::

    python -m tests.test_face --record

``python -m tests.test_face --page`` writes docs/python.md from docs/python.ipynb.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pandas as pd
import pytest

import simcore
from simcore.face.objects import COMPARISON_COLUMNS, comparison_row, comparison_table
from simcore.run import run_scenario
from tests.test_scenario_api import bump_problem, describe, parse_version

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden" / "python_face.json"
NOTEBOOK = ROOT / "docs" / "python.ipynb"
PAGE = ROOT / "docs" / "python.md"
FACE = {
    "simulate", "monte_carlo", "sweep", "perturb", "load",
    "simulate_async", "monte_carlo_async", "sweep_async", "perturb_async",
    "Run", "MonteCarlo", "Sweep", "Study",
    "ConfigError", "BackendConfigError", "DamagedFile", "__version__",
}
COMPARISON = ["metric", "mean_a", "mean_b", "difference", "ci_low", "ci_high", "p_value", "p_adjusted",
              "significant", "test", "family"]
SMALL = {"rounds": 1, "n_peers": 2}


def surface() -> dict:
    return {f"simcore:{name}": describe(getattr(simcore, name)) for name in sorted(simcore.__all__)
            if name != "__version__"}


def load_golden() -> dict:
    return json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}


def test_the_face_is_exactly_the_calls_objects_errors_and_version():
    assert set(simcore.__all__) == FACE and len(simcore.__all__) == len(FACE)
    assert all(getattr(simcore, name) is not None for name in simcore.__all__)


def test_the_face_is_the_one_recorded_for_this_version():
    golden = load_golden()
    assert simcore.__version__ in golden, "run python -m tests.test_face --record"
    recorded, now = golden[simcore.__version__], surface()
    diff = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    assert not diff, f"the Python face changed ({', '.join(diff)}): bump simcore.__version__ and record it"
    versions = sorted(golden, key=parse_version)
    for old, new in zip(versions, versions[1:]):
        assert bump_problem(old, golden[old], new, golden[new]) is None


def test_import_simcore_stays_light_and_the_old_kernel_names_still_import_with_a_warning():
    code = "import simcore, sys; print(sorted(m for m in ('pandas', 'mesa', 'simcore.face') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
    from simcore.sim.kernel import World

    with pytest.warns(DeprecationWarning, match="simcore.World is deprecated"):
        assert simcore.World is World
    with pytest.raises(AttributeError):
        simcore.no_such_name  # noqa: B018


def command_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line the command prints for ``argv`` (exit status 2)."""
    with pytest.raises(SystemExit) as exit_:
        run_scenario("context_corrosion", argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().removeprefix("error: ")


def test_a_bad_field_raises_config_error_with_the_commands_line_before_any_work(tmp_path, capsys):
    expected = command_error(["--rounds", "-1"], capsys)
    assert expected == "rounds: must be an integer from 1 to 5, got -1"
    for call in (lambda: simcore.simulate("context_corrosion", rounds=-1, out=tmp_path / "a"),
                 lambda: simcore.monte_carlo("context_corrosion", trials=2, rounds=-1, out=tmp_path / "b"),
                 lambda: simcore.sweep("context_corrosion", trials=2, rounds=-1, out=tmp_path / "c"),
                 lambda: simcore.perturb("context_corrosion", perturb="drop:agent=P1,round=1", rounds=-1,
                                         out=tmp_path / "d")):
        with pytest.raises(simcore.ConfigError) as exc:
            call()
        assert str(exc.value) == expected
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_out_none_is_a_new_temporary_directory_made_only_once_the_input_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(simcore.ConfigError):
        simcore.simulate("context_corrosion", out=None, rounds=-1)
    assert list(tmp_path.iterdir()) == []
    run = simcore.simulate("context_corrosion", out=None, plots="none", **SMALL)
    assert run.dir.parent.parent.parent == tmp_path and run.dir.parent.name == "context_corrosion"
    assert simcore.load(run.dir).results == run.results


def test_options_are_the_commands_flags_checked_by_the_command(tmp_path, capsys):
    with pytest.raises(simcore.ConfigError, match=r"^rouds: not an option of simulate\('context_corrosion'\); "
                                                  r"did you mean rounds\?$"):
        simcore.simulate("context_corrosion", rouds=1)
    with pytest.raises(simcore.ConfigError, match=r"^json: not an option"):
        simcore.simulate("context_corrosion", json=True)  # the printed output's form means nothing here
    assert str(pytest.raises(simcore.ConfigError, simcore.simulate, "context_corrosion", plots="most").value) \
        == "plots: invalid choice: 'most' (choose from 'all', 'summary', 'none')"
    said = str(pytest.raises(simcore.ConfigError, simcore.simulate, "context_corrosion", json_mode="never").value)
    # argparse's own line, with the keyword where the command names its flag
    assert command_error(["--json-mode", "never"], capsys).endswith(
        "error: argument --json-mode: " + said.removeprefix("json_mode: "))
    assert said.startswith("json_mode: invalid choice: 'never' (choose from 'auto', ")
    with pytest.raises(simcore.ConfigError, match=r"^biased: must be True or False"):
        simcore.simulate("context_corrosion", biased="yes")
    with pytest.raises(simcore.ConfigError, match=r"^executor: invalid choice: 'threads'"):
        simcore.sweep("context_corrosion", trials=2, executor="threads")
    with pytest.raises(simcore.ConfigError, match=r"^trials: must be an integer"):
        simcore.monte_carlo("context_corrosion", trials=2.5)
    with pytest.raises(simcore.ConfigError, match=r"^keep_failed: --keep-failed only applies with --resume$"):
        simcore.sweep("context_corrosion", trials=2, keep_failed=True, out=tmp_path)
    with pytest.raises(simcore.ConfigError, match=r"^conditions: must be 'default', None or \{field: values\}"):
        simcore.sweep("context_corrosion", trials=2, conditions={"biased": [True], "rounds": [1]}, out=tmp_path)
    with pytest.raises(simcore.ConfigError, match=r"^scenario: unknown scenario 'no_such_scenario'"):
        simcore.simulate("no_such_scenario")
    with pytest.raises(simcore.ConfigError, match=r"^path: .* is not a run, Monte Carlo, sweep or perturbation"):
        simcore.load(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_bad_field_in_a_script_is_the_commands_line(tmp_path, capsys, monkeypatch):
    script = ("import simcore\ntry:\n    simcore.simulate('context_corrosion', rounds=-1)\n"
              "except simcore.ConfigError as exc:\n    print(exc)\n")
    monkeypatch.chdir(tmp_path)
    exec(compile(script, "<script>", "exec"), {"__name__": "__main__"})  # as python -c runs it, in this process
    said = capsys.readouterr().out
    assert said.strip() == command_error(["--rounds", "-1"], capsys)
    assert list(tmp_path.iterdir()) == []


def test_a_monte_carlos_trials_open_as_runs_from_inside_its_directory(tmp_path):
    import simcore

    mc = simcore.monte_carlo("context_corrosion", trials=2, rounds=1, n_peers=2, out=tmp_path, plots="none")
    run = mc.run("B", 1)
    assert run.dir.parent == mc.dir / "trials"  # the group keeps its trials (docs/runs.md)
    assert run.results["run_id"] == mc.summary["run_B_trial_ids"][1]
    assert simcore.load(mc.dir).trials.shape[0] == 4
    with pytest.raises(simcore.ConfigError, match="trial"):
        mc.run("C", 0)
    # repr(): what the notebook view shows, in text: the directory and the comparison table.
    head, *table = repr(mc).splitlines()
    assert head == f"Monte Carlo of context_corrosion: {mc.dir}" and "decided by:" in repr(mc)
    assert any(line.split()[:1] == ["avg_peer_directional_delta"] for line in table)
    assert repr(run).splitlines()[0] == f"Run of context_corrosion (seed {run.manifest['seed']}): {run.dir}"


def test_comparison_rows_come_from_one_adapter_and_a_missing_interval_is_nan():
    record = {"mean_a": 0.5, "mean_b": 0.25, "delta_mean": 0.25, "ci_low": None, "ci_high": None,
              "p_value": 0.5, "p_adjusted": 1.0, "significant": False, "test": "exact sign-flip",
              "family": "Holm across 2 metrics", "calibration": {"confounded": True}}
    row = comparison_row("m", record)
    assert list(row)[:len(COMPARISON)] == COMPARISON and list(row) == ["metric", *COMPARISON_COLUMNS]
    assert row["difference"] == 0.25 and row["decision"] == "not significant" and row["confounded"] is True
    table = comparison_table([({"cell": 0}, {"difference_summary": {"m": record, "interpretation": "text"}})])
    assert list(table.columns[:2]) == ["cell", "metric"] and len(table) == 1
    assert pd.isna(table.loc[0, "ci_low"]) and table["ci_low"].dtype == float
    assert list(comparison_table([]).columns) == ["metric", *COMPARISON_COLUMNS]
    # Where the design cannot reach the level, no interval shows, and the row says why.
    why = "4 pairs cannot reach 99.17% (8 pairs can)"
    row = comparison_row("m", {**record, "ci_low": -4.0, "ci_high": 4.0, "no_interval": why})
    assert row["ci_low"] is None and row["ci_high"] is None and row["no_interval"] == why


def test_inside_a_running_loop_the_dask_executor_and_run_sweep_itself_work_and_a_sweep_resumes(tmp_path, no_plots):
    from simcore.batch import run_sweep

    async def cell():
        asyncio.get_running_loop()  # as in a Jupyter cell
        dask = simcore.sweep("context_corrosion", trials=1, conditions=None, executor="dask", workers=1,
                             out=tmp_path, plots="none", **SMALL)
        df = run_sweep("context_corrosion", trials=1, conditions=None, executor="serial", base=SMALL,
                       out=tmp_path / "direct", plot=False)
        return dask, df

    dask, df = asyncio.run(cell())
    assert simcore.load(dask.dir).summary == dask.summary
    resumed = simcore.sweep("context_corrosion", trials=1, conditions=None, executor="serial", out=tmp_path,
                            resume=True, plots="none", **SMALL)  # the same sweep, found under out from its definition
    assert resumed.dir == dask.dir and resumed.table["status"].tolist() == ["ok"]
    assert dask.summary["timing"]["executor"] == "dask" and dask.table["status"].tolist() == ["ok"]
    assert df["status"].tolist() == ["ok"]


# -- the notebook ----------------------------------------------------------------------

# Cells run after the docs notebook's own, in the same kernel: what "works in a notebook" means.
CHECKS = [
    """
import asyncio
asyncio.get_running_loop()  # every cell runs inside the kernel's event loop
from IPython.display import display
display(mc, sweep, study)
for obj in (run, mc, sweep, study, again):
    again_ = simcore.load(obj.dir)
    assert type(again_) is type(obj) and again_.dir == obj.dir
    assert obj._repr_html_().startswith("<div>") and str(obj.dir) in obj._repr_html_()
    assert repr(obj).splitlines()[0].endswith(f": {obj.dir}") and len(repr(obj).splitlines()) > 1
assert "perturbation study of context_corrosion" in repr(study) and "sweep " in repr(sweep)
""",
    """
COMPARISON = {comparison}
assert list(run.events.columns[:4]) == ["t", "seq", "kind", "agent"] and "phase" in run.events.columns
assert list(run.transcript.columns[:3]) == ["t", "agent", "text"] and len(run.transcript) == 3
assert len(run.metrics) == 1 and "avg_peer_directional_delta" in run.metrics.columns
assert list(mc.comparison.columns[:len(COMPARISON)]) == COMPARISON and len(mc.trials) == 4
assert list(sweep.comparison.columns[:2]) == ["cell", "rounds"] and set(COMPARISON) <= set(sweep.comparison.columns)
assert len(sweep.table) == 8 and sweep.summary["n_ok"] == 8
assert len(study.table) == 1 and len(study.pairs) == 1 and list(study.manifestations.columns)[0] == "perturbation"
""",
    """
for executor in ("asyncio", "local"):
    other = simcore.sweep("context_corrosion", trials=1, conditions=None, rounds=1, n_peers=2, executor=executor,
                          out=executor, plots="none")
    assert other.table["status"].tolist() == ["ok"]
    assert other.summary["timing"]["executor"] == executor
""",
    """
assert run.replay() is True and simcore.load(run.dir).results == run.results
import os
try:
    simcore.simulate("context_corrosion", rounds=-1, out="never")
except simcore.ConfigError as exc:
    assert str(exc) == {message!r}, str(exc)
else:
    raise AssertionError("no ConfigError")
assert not os.path.exists("never")
print("checks passed")
""",
]


def kernel_spec(where: Path) -> str:
    """A kernelspec for this interpreter (the suite's venv), whatever kernels are installed."""
    spec = where / "kernels" / "simcore-test"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "simcore tests", "language": "python",
    }))
    return "simcore-test"


def test_the_docs_notebook_and_the_face_run_in_a_jupyter_kernel(tmp_path, monkeypatch, capsys):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    message = command_error(["--rounds", "-1"], capsys)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    first_check = len(nb.cells)
    for i, code in enumerate(CHECKS):
        cell = nbformat.v4.new_code_cell(code.strip().replace("{comparison}", repr(COMPARISON))
                                         .replace("{message!r}", repr(message)))
        cell["id"] = f"check-{i}"
        nb.cells.append(cell)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    name = kernel_spec(tmp_path / "jupyter")
    work = tmp_path / "work"
    work.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jupyter_client's own
        nbclient.NotebookClient(nb, kernel_name=name, timeout=600, resources={"metadata": {"path": str(work)}}).execute()

    def outputs(cell_id: str) -> list:
        return next(c for c in nb.cells if c.get("id") == cell_id).outputs

    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # Each object shows as HTML: the run as the cell's value, the others displayed by the checks.
    assert any("text/html" in o.get("data", {}) and "Run of context_corrosion" in o["data"]["text/html"]
               for o in outputs("cell-03"))
    shown = [o["data"]["text/html"] for o in outputs("check-0") if o.output_type == "display_data"]
    assert [h.split("</b>")[0] for h in shown] == ["<div><b>Monte Carlo of context_corrosion",
                                                   "<div><b>Sweep of context_corrosion",
                                                   "<div><b>Perturbation study of context_corrosion"]
    assert any(o.output_type == "display_data" and "image/png" in o["data"] for o in outputs("cell-14"))  # the plot
    assert outputs("cell-20")[0]["text"].strip() == message  # the docs' bad-input cell
    assert outputs("cell-22")[0]["data"]["text/plain"] == "True"  # await simulate_async: the same trace
    assert "checks passed" in outputs(f"check-{len(CHECKS) - 1}")[0]["text"]
    assert len(nb.cells) == first_check + len(CHECKS)


def page(nb: dict) -> str:
    """docs/python.md: the notebook's markdown cells as they are, its code cells as Python blocks."""
    parts = ["<!-- Written by python -m tests.test_face --page from docs/python.ipynb: edit the notebook. -->"]
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        parts.append(source if cell["cell_type"] == "markdown" else f"```python\n{source}\n```")
    return "\n\n".join(parts) + "\n"


def test_the_docs_page_is_the_notebook_and_the_notebook_is_stored_without_outputs():
    nb = json.loads(NOTEBOOK.read_text())
    assert PAGE.read_text() == page(nb), "run python -m tests.test_face --page"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


def record() -> int:
    golden = load_golden()
    now = surface()
    version = simcore.__version__
    if golden.get(version, now) != now:
        print(f"error: version {version} is recorded with another face; bump simcore.__version__ first",
              file=sys.stderr)
        return 2
    previous = [v for v in golden if parse_version(v) < parse_version(version)]
    if previous:
        last = max(previous, key=parse_version)
        problem = bump_problem(last, golden[last], version, now)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    golden[version] = now
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"recorded the Python face {version} in {GOLDEN}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        raise SystemExit(record())
    if sys.argv[1:] == ["--page"]:
        PAGE.write_text(page(json.loads(NOTEBOOK.read_text())))
        raise SystemExit(0)
    print("usage: python -m tests.test_face --record | --page", file=sys.stderr)
    raise SystemExit(2)
