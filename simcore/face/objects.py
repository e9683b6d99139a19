"""What a run directory holds, as Python objects: :class:`Run`, :class:`MonteCarlo`,
:class:`Sweep` and :class:`Study`, and :func:`load`, which reopens any of them offline.

Each object is a view of its directory (``.dir``), read through the file readers
of :mod:`simcore.base.files` (hashes and schemas checked), with DataFrames for the
tables, a ``_repr_html_`` that shows in a notebook what the command prints, its
tables and its plots, and a ``repr()`` that shows the same in text, without the tables
and plots. Comparison records become table rows in one place,
:func:`comparison_row`.
"""

from __future__ import annotations

import asyncio
import base64
import html
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from backends.registry import BackendSpec
from simcore.analysis.divergence import CATEGORIES
from simcore.analysis.stats import verdict
from simcore.base.config import ConfigError
from simcore.base.files import read_record, read_run, read_trace
from simcore.base.loops import call_outside_loop
from simcore.batch.plan import build_plan
from simcore.batch.report import format_summary as sweep_summary
from simcore.batch.store import read_definition
from simcore.batch.sweep import read_results
from simcore.cli import error_sentence, format_arms, run_lines
from simcore.perturbation.results import PerturbationResults
from simcore.perturbation.study import format_summary as study_summary
from simcore.replay import replay_async
from simcore.runs.counterfactual import compared_metrics, scalar_metrics, trial_dir
from simcore.runs.resume import finish_command
from simcore.runs.scenario import load_scenario

#: The comparison table's columns after ``metric``: column -> how a comparison record gives it.
#: A column the statistics add later is one line here.
COMPARISON_COLUMNS = {
    "mean_a": lambda d: d.get("mean_a"),
    "mean_b": lambda d: d.get("mean_b"),
    "difference": lambda d: d.get("delta_mean"),
    "ci_low": lambda d: d.get("ci_low") if not d.get("no_interval") else None,  # NaN where no interval is shown
    "ci_high": lambda d: d.get("ci_high") if not d.get("no_interval") else None,
    "p_value": lambda d: d.get("p_value"),
    "p_adjusted": lambda d: d.get("p_adjusted"),
    "significant": lambda d: d.get("significant"),
    "test": lambda d: d.get("test"),
    "family": lambda d: d.get("family"),
    "decision": verdict,
    "confounded": lambda d: bool((d.get("calibration") or {}).get("confounded")),
    "ci_level": lambda d: d.get("ci_level"),  # the level of the Holm step that decided the row
    "no_interval": lambda d: d.get("no_interval"),  # why no interval can inform ("4 pairs cannot reach ...")
}
NUMERIC = ("mean_a", "mean_b", "difference", "ci_low", "ci_high", "ci_level", "p_value", "p_adjusted")


def comparison_row(metric: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """One compared metric's record (an entry of a comparison's ``difference_summary``) as a row."""
    return {"metric": metric, **{column: get(record) for column, get in COMPARISON_COLUMNS.items()}}


def comparison_table(comparisons: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> pd.DataFrame:
    """Rows of (leading columns, comparison): one per compared metric of each comparison."""
    rows = [{**lead, **comparison_row(m, comparison["difference_summary"][m])}
            for lead, comparison in comparisons for m in compared_metrics(dict(comparison))]
    df = pd.DataFrame(rows, columns=None if rows else ["metric", *COMPARISON_COLUMNS])
    for column in NUMERIC:
        df[column] = pd.to_numeric(df[column], errors="coerce")
    return df


def _html(title: str, text: str, directory: Path, tables: Iterable[tuple[str, pd.DataFrame]] = ()) -> str:
    """A notebook's view: the title, what the command prints, tables, and the PNG plots inline."""
    parts = [f"<div><b>{html.escape(title)}</b> <code>{html.escape(str(directory))}</code>",
             f"<pre style=\"white-space:pre-wrap\">{html.escape(text)}</pre>"]
    for caption, df in tables:
        parts.append(f"<details><summary>{html.escape(caption)}</summary>{df.to_html(max_rows=50)}</details>")
    for png in sorted(directory.glob("plots/*.png")):
        data = base64.b64encode(png.read_bytes()).decode()
        parts.append(f'<img src="data:image/png;base64,{data}" alt="{html.escape(png.name)}" '
                     'style="max-width:720px">')
    return "\n".join(parts) + "</div>"


class _Shown:
    """What every object shows: in a notebook, its title, its directory, what its command
    prints, its tables and its plots; as ``repr()``, the same without the tables and plots."""

    _dir: Path

    def _view(self) -> tuple[str, str]:
        """The title and what the command prints."""
        raise NotImplementedError

    def _tables(self) -> list[tuple[str, pd.DataFrame]]:
        return []

    def __repr__(self) -> str:
        title, text = self._view()
        return f"{title}: {self._dir}\n{text}"

    def _repr_html_(self) -> str:
        return _html(*self._view(), self._dir, self._tables())


def _directory(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"path: {str(path)!r} is not a directory")
    return path


class Run(_Shown):
    """One run directory (``runs/<scenario>/<run-id>/``), its manifest and results checked."""

    def __init__(self, path: str | Path) -> None:
        self._dir = _directory(path)
        self._record = read_run(self._dir, trace=False)
        self._events: pd.DataFrame | None = None

    @property
    def dir(self) -> Path:
        """The run directory."""
        return self._dir

    @property
    def results(self) -> dict[str, Any]:
        """``results.json``."""
        return self._record.results

    @property
    def manifest(self) -> dict[str, Any]:
        """``manifest.json``: scenario, seed, config, backend, versions."""
        return self._record.manifest

    @property
    def metrics(self) -> pd.DataFrame:
        """The scalar metrics, one row indexed by the run id."""
        return pd.DataFrame([scalar_metrics(self.results)], index=pd.Index([self._dir.name], name="run_id"))

    @property
    def events(self) -> pd.DataFrame:
        """The trace: ``t``, ``seq``, ``kind``, ``agent``, one column per event field, ``payload``."""
        if self._events is None:
            self._events = self._read_events()
        return self._events

    def _read_events(self) -> pd.DataFrame:
        rows = [json.loads(line) for line in read_trace(self._dir, self.manifest).splitlines() if line.strip()]
        fields = list(dict.fromkeys(k for e in rows for k in e.get("fields") or {}))
        return pd.DataFrame(
            [{"t": e["t"], "seq": e["seq"], "kind": e["kind"], "agent": e.get("agent"),
              **{f: (e.get("fields") or {}).get(f) for f in fields}, "payload": e.get("payload")} for e in rows],
            columns=["t", "seq", "kind", "agent", *fields, "payload"],
        )

    @property
    def transcript(self) -> pd.DataFrame:
        """The messages agents said: ``t``, ``agent``, ``text``, then the event fields (phase, round ...)."""
        said = self.events[self.events["kind"] == "message"]
        fields = [c for c in said.columns if c not in ("t", "seq", "kind", "agent", "payload")]
        out = said.assign(text=[(p or {}).get("text") for p in said["payload"]])
        return out[["t", "agent", "text", *fields]].reset_index(drop=True)

    def replay(self) -> bool:
        """Run it again from its manifest (and cassette) and say whether the trace is identical,
        as ``python -m simcore.replay`` does."""
        return call_outside_loop(lambda: asyncio.run(replay_async(self._dir)).identical)

    def _view(self) -> tuple[str, str]:
        lines = run_lines(load_scenario(self.manifest["scenario"]), self.results)
        if self.results.get("status") != "ok":
            lines.append(f"trial failed: {error_sentence(self.results.get('error'))}")
            finish = finish_command(self._dir, self.results)
            if finish:
                lines.append(f"finish it from its cassette: {finish}")
        return f"Run of {self.manifest['scenario']} (seed {self.manifest['seed']})", "\n".join(lines)

    def _tables(self) -> list[tuple[str, pd.DataFrame]]:
        return [("metrics", self.metrics.T)]


#: A group directory's mode -> the key of its comparison in ``summary.json``.
MODES = {"monte_carlo": "statistical_comparison", "counterfactual": "counterfactual_comparison"}


class MonteCarlo(_Shown):
    """A Monte Carlo's (or a counterfactual pair's) own directory: ``summary.json`` and ``trials.csv``."""

    def __init__(self, path: str | Path) -> None:
        self._dir = _directory(path)
        self._summary = read_record(self._dir / "summary.json", {"mode": (lambda v: v in MODES, "monte_carlo "
                                                                          "or counterfactual")})

    @property
    def dir(self) -> Path:
        """The Monte Carlo's directory."""
        return self._dir

    @property
    def summary(self) -> dict[str, Any]:
        """``summary.json``: seeds, trial ids, per-arm aggregates, the comparison."""
        return self._summary

    @property
    def trials(self) -> pd.DataFrame:
        """One row per trial (``trials.csv``): arm, seed, run id, status, every scalar metric."""
        return pd.read_csv(self._dir / "trials.csv")

    @property
    def comparison(self) -> pd.DataFrame:
        """One row per compared metric (see :data:`COMPARISON_COLUMNS`)."""
        return comparison_table([({}, self._summary[MODES[self._summary["mode"]]])])

    def run(self, arm: str, trial: int = 0) -> Run:
        """Trial ``trial`` of arm ``"A"`` or ``"B"`` as a :class:`Run`."""
        ids = self._summary.get(f"run_{arm}_trial_ids")
        if ids is None or not 0 <= trial < len(ids):
            raise ConfigError(f"trial: arm must be 'A' or 'B' and trial from 0 to {self._summary['n_trials'] - 1}, "
                              f"got {arm!r}, {trial!r}")
        where = trial_dir(self._dir, self._summary, ids[trial])
        if not where.is_dir():
            raise ConfigError(f"trial: run {ids[trial]} is not in {where.parent}")
        return Run(where)

    def _view(self) -> tuple[str, str]:
        return f"Monte Carlo of {self._summary['scenario']}", format_arms(self._summary)

    def _tables(self) -> list[tuple[str, pd.DataFrame]]:
        return [("trials", self.trials)]


class Sweep(_Shown):
    """A sweep directory (``sweep.json``, ``results.parquet``/``.csv``, ``summary.json``)."""

    def __init__(self, path: str | Path) -> None:
        self._dir = _directory(path)
        self._definition = read_definition(self._dir)
        if self._definition is None:
            raise ConfigError(f"path: {str(self._dir)!r} holds no sweep (no sweep.json)")
        self._summary = read_record(self._dir / "summary.json")

    @property
    def dir(self) -> Path:
        """The sweep directory."""
        return self._dir

    @property
    def table(self) -> pd.DataFrame:
        """One row per planned trial (the results table, ``results.csv``)."""
        return read_results(self._dir)

    @property
    def summary(self) -> dict[str, Any]:
        """``summary.json``."""
        return self._summary

    @property
    def comparison(self) -> pd.DataFrame:
        """One row per cell and compared metric: ``cell``, the cell's grid values, ``a``, ``b``,
        then the comparison columns (see :data:`COMPARISON_COLUMNS`)."""
        return comparison_table(
            ({"cell": c["cell"], **c.get("params", {}), "a": c.get("a"), "b": c.get("b")}, c["result"])
            for c in self._summary.get("comparisons") or [] if isinstance(c.get("result"), dict)
        )

    def _view(self) -> tuple[str, str]:
        d = self._definition
        plan = build_plan(load_scenario(d["scenario"]), d["trials"], [tuple(g) for g in d["grid"]],
                          None if d["conditions"] is None else tuple(d["conditions"]), base=d["base_config"],
                          seed=d["seed"], seed_scope=d["seed_scope"], spec=BackendSpec.from_dict(d["backend"]))
        return f"Sweep of {d['scenario']}", sweep_summary(plan, self._summary)

    def _tables(self) -> list[tuple[str, pd.DataFrame]]:
        return [("comparison", self.comparison)]


class Study(_Shown):
    """A perturbation study's directory (``runs/perturbation/<study-id>/``)."""

    def __init__(self, path: str | Path) -> None:
        self._dir = _directory(path)
        self._results = PerturbationResults.load(self._dir)
        self._record = read_record(self._dir / "study.json")

    @property
    def dir(self) -> Path:
        """The study directory."""
        return self._dir

    @property
    def table(self) -> pd.DataFrame:
        """One row per perturbation: pairs, applied, mean d_norm and t*, rates, overhead, manifestations."""
        return self._results.summary()

    @property
    def pairs(self) -> pd.DataFrame:
        """One row per pair (baseline and perturbed run of one seed)."""
        return self._results.pairs

    @property
    def manifestations(self) -> pd.DataFrame:
        """Pairs per perturbation and manifestation category (how the perturbation showed)."""
        table = self.table
        counts = [f"n_{c}" for c in CATEGORIES if f"n_{c}" in table.columns]
        return table[["perturbation", *counts]].rename(columns=lambda c: c.removeprefix("n_"))

    def _view(self) -> tuple[str, str]:
        return (f"Perturbation study of {self._results.definition['scenario']}",
                study_summary(self._results, self._record.get("calls")))

    def _tables(self) -> list[tuple[str, pd.DataFrame]]:
        return [("pairs", self.pairs)]


def load(path: str | Path) -> Run | MonteCarlo | Sweep | Study:
    """Reopen a run directory offline, as the object its call returned.

    A perturbation study (``study.json``), a sweep (``sweep.json``), a Monte Carlo or
    counterfactual pair (``summary.json`` and ``trials.csv``), or one run
    (``manifest.json``).

    Raises:
        ConfigError: when ``path`` is none of them.
        DamagedFile: when a file fails its hash or schema check.
    """
    path = _directory(path)
    for marker, kind in (("study.json", Study), ("sweep.json", Sweep), ("trials.csv", MonteCarlo),
                         ("manifest.json", Run)):
        if (path / marker).is_file():
            return kind(path)
    raise ConfigError(f"path: {str(path)!r} is not a run, Monte Carlo, sweep or perturbation study directory "
                      "(it has no manifest.json, trials.csv, sweep.json or study.json)")
