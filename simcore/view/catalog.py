"""Find what RUNS_DIR holds and summarise each entry for the runs table.

An *entry* is a directory of one of these kinds, found by the file that marks it:

=================  ===============================  =========================================
kind               marked by                        what it is
=================  ===============================  =========================================
``run``            ``manifest.json``                one run (a trial, a perturbed run ...)
``montecarlo``     ``summary.json`` (mode)          a Monte Carlo or counterfactual group
``counterfactual``
``sweep``          ``sweep.json`` / ``ledger.jsonl``  a batch sweep, finished or still running
``montecarlo``     ``heartbeat.json`` (no summary)  a Monte Carlo or counterfactual group still running
``study``          ``study.json``                   a perturbation study
``comparison``     ``comparison.json``              ``python -m scenarios.llm_auction compare``
=================  ===============================  =========================================

The walk does not descend into an entry (a study's runs are listed on its own
page), into hidden directories (staging directories, ``.lock``), or through
symlinked directories. A Monte Carlo's trials (run directories inside its
directory, or beside it in groups written before 2026-11-27) and a sweep's trials
(from its ledger) are not rows of their own: they are the group's ``trials``,
shown nested under its row, and a Monte Carlo's row takes its backend and cost from
them. Every file is read through :mod:`simcore.base.files`; a damaged entry is
listed with the reader's message. Summaries are cached per directory and recomputed
when a marker file changes; a running entry's progress (its ``heartbeat.json``,
:mod:`simcore.base.heartbeat`) is judged by the page at the time it is shown.

Key figures: a run's key metrics as its scenario declares them
(:mod:`simcore.view.figures`); a group's differences A - B of those metrics; a
sweep's first key metric, its mean per grid cell and condition; a comparison's
pooled correctness per mechanism; a study's mean d_norm per perturbation.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from simcore.base.files import (
    DamagedFile,
    read_comparison,
    read_heartbeat,
    read_ledger_line,
    read_manifest,
    read_record,
    read_results,
    read_sweep_definition,
    read_trace,
)
from simcore.base.heartbeat import HEARTBEAT
from simcore.replies.quality import merge, unreadable_share
from simcore.runs.counterfactual import TRIALS_DIR, trial_dir
from simcore.view.figures import Figure, Name, study_vocabulary, vocabulary
from simcore.view.paths import MAX_DEPTH, SEGMENT, BadId, entry_id, guard, resolve_id

MARKERS = ("manifest.json", "results.json", "trace.jsonl", "summary.json", "sweep.json", "ledger.jsonl", "study.json",
           "comparison.json", HEARTBEAT)
#: A group's key figures in the runs table, at most.
KEY_FIGURES = 5
#: A sweep's means per cell and condition in the runs table, at most.
SWEEP_CELLS = 8


@dataclass
class Trial:
    """One trial of a group, as its row nests it.

    Attributes:
        label: Its condition and number ("biased=true #0", "rounds=2, none #1").
        id: Its run directory relative to RUNS_DIR, or None where it has none yet.
        seed, status, parse: What the nested row shows.
    """

    label: str
    id: str | None
    seed: int | None = None
    status: str | None = None
    parse: str | None = None


@dataclass
class Entry:
    """One row of the runs table.

    Attributes:
        id: Path relative to RUNS_DIR.
        kind: run, montecarlo, counterfactual, group, sweep, study or comparison.
        scenario, created, seed, backend, models, status, cost_usd, parse: What the table
            shows (None where unknown).
        figures: The key figures (a Monte Carlo's: its differences A - B, each with its decision).
        figures_caption: What the figures are, where their names do not say (a sweep's means).
        damaged: The reader's message when a file failed its check.
        note: A short extra (trials, pairs, progress of a sweep).
        trials: A Monte Carlo's or a sweep's trials, nested under its row.
        heartbeat: The heartbeat of a sweep or group still running (or stopped), as recorded.
    """

    id: str
    kind: str
    scenario: str | None = None
    created: str | None = None
    seed: int | None = None
    backend: str | None = None
    models: list[str] = field(default_factory=list)
    status: str | None = None
    cost_usd: float | None = None
    parse: str | None = None
    figures: list[Figure] = field(default_factory=list)
    figures_caption: str | None = None
    damaged: str | None = None
    note: str = ""
    trials: list[Trial] = field(default_factory=list)
    heartbeat: dict[str, Any] | None = None


def kind_of(names: set[str]) -> str | None:
    """The kind a directory's file names mark, or None."""
    if "sweep.json" in names or "ledger.jsonl" in names:
        return "sweep"
    if "study.json" in names:
        return "study"
    if "comparison.json" in names:  # its manifest.json is the comparison's, not a run's
        return "comparison"
    if "manifest.json" in names:
        return "run"
    if "summary.json" in names or HEARTBEAT in names:  # a group's heartbeat: it is still running
        return "group"
    return None


class Catalog:
    """The entries under ``root``, summaries cached by the markers' modification times."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, tuple[tuple[Any, ...], Entry]] = {}

    def scan(self) -> list[Entry]:
        """Every entry under the root, newest first."""
        found: list[Entry] = []
        root_depth = len(self.root.parts)
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            here = Path(dirpath)
            kind = kind_of(set(filenames))
            if kind is not None and here != self.root:
                found.append(self.entry(here, kind, set(filenames)))
                dirnames[:] = []
                continue
            depth = len(here.parts) - root_depth
            dirnames[:] = sorted(d for d in dirnames if SEGMENT.match(d) and depth < MAX_DEPTH - 1)
        found.sort(key=lambda e: (e.created or "", e.id), reverse=True)
        return nest(found, self._trial_run)

    def _trial_run(self, eid: str) -> Entry | None:
        """The row of a group's trial that the walk did not reach (inside its group), if it is a run."""
        try:
            path = resolve_id(self.root, eid)
        except BadId:
            return None
        return self.entry(path, "run") if (path / "manifest.json").is_file() else None

    def entry(self, path: Path, kind: str | None = None, names: set[str] | None = None) -> Entry:
        """The summary of one directory (cached)."""
        if names is None:
            names = {p.name for p in path.iterdir()} if path.is_dir() else set()
        kind = kind or kind_of(names) or "unknown"
        key = tuple(_stamp(path / m) for m in MARKERS)
        eid = entry_id(self.root, path)
        hit = self._cache.get(eid)
        if hit is not None and hit[0] == key:
            return hit[1]
        entry = Entry(eid, kind)
        try:
            guard(self.root, *(path / m for m in MARKERS))
            {"run": _run, "group": _group, "sweep": _sweep, "study": _study,
             "comparison": _comparison}.get(kind, _unknown)(path, entry)
        except DamagedFile as exc:
            entry.damaged, entry.status = str(exc), "damaged"
        self._cache[eid] = (key, entry)
        return entry


def nest(entries: list[Entry], find: Callable[[str], Entry | None] = lambda eid: None) -> list[Entry]:
    """The entries without the runs that are a Monte Carlo's trials; each group gets copies of
    its own trials' rows with their status and parse quality, and the backend, models and total
    cost of its trials (the cached entries stay as they are). ``find`` gives the row of a trial
    that is not among ``entries`` (one inside its group's directory)."""
    runs = {e.id: e for e in entries if e.kind == "run"}
    taken: set[str] = set()
    out = []
    for e in entries:
        if e.trials and e.kind in ("montecarlo", "counterfactual"):
            trials, rows = [], []
            for t in e.trials:
                run = runs.get(t.id or "") or (find(t.id) if t.id else None)
                if run is not None:
                    taken.add(run.id)
                    rows.append(run)
                    t = Trial(t.label, t.id, run.seed, run.status, run.parse)
                trials.append(t)
            costs = [r.cost_usd for r in rows if r.cost_usd is not None]
            first = next((r for r in rows if r.backend), None)
            e = Entry(**{**e.__dict__, "trials": trials, "backend": first.backend if first else e.backend,
                         "models": sorted({m for r in rows for m in r.models}) or e.models,
                         "cost_usd": sum(costs) if costs else e.cost_usd})
        out.append(e)
    return [e for e in out if e.id not in taken]


def _count(n: Any, noun: str) -> str:
    """``3 trials``, ``1 trial``, ``? trials`` (a note in a narrow column: no "trial(s)" to break)."""
    return f"{n if n is not None else '?'} {noun}{'' if n == 1 else 's'}"


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _unknown(path: Path, entry: Entry) -> None:
    raise DamagedFile(path, "is not a run, group, sweep or study directory")


def _parse_cell(quality: dict[str, Any] | None) -> str | None:
    if not quality:
        return None
    if all(isinstance(c, dict) and all(isinstance(v, dict) for v in c.values()) for c in quality.values()):
        quality = merge(quality.values())  # a Monte Carlo's: per arm, then per kind
    share = unreadable_share(quality)
    reasked = sum(int(c.get("reasked", 0)) for c in quality.values())
    n = sum(int(c.get("replies", 0)) for c in quality.values())
    text = f"{n:,} replies, {share:.0%} unreadable" if share is not None else f"{n:,} replies"
    return text + (f", {reasked:,} re-asked" if reasked else "")


def _run(path: Path, entry: Entry) -> None:
    manifest = read_manifest(path)
    backend = manifest["backend"]
    entry.scenario, entry.seed = manifest["scenario"], manifest["seed"]
    entry.created, entry.status = manifest.get("created_utc"), manifest["status"]
    entry.backend = backend.get("name")
    entry.models = [str(m) for m in manifest.get("models") or [backend.get("model")]]
    if manifest.get("perturbation"):
        entry.note = f"perturbed: {manifest['perturbation']}"
    results = read_results(path, manifest)
    read_trace(path, manifest)  # hashed once per change of the files (the summary is cached)
    entry.status = results["status"]
    entry.cost_usd = results.get("cost_usd")
    entry.parse = _parse_cell(results.get("parse_quality"))
    entry.figures = vocabulary(entry.scenario).key_figures(results.get("metrics") or {})


def _group(path: Path, entry: Entry) -> None:
    if not (path / "summary.json").exists():
        return _running_group(path, entry)
    summary = read_record(path / "summary.json")
    entry.kind = summary.get("mode") if summary.get("mode") in ("monte_carlo", "counterfactual") else "group"
    entry.kind = entry.kind.replace("monte_carlo", "montecarlo")
    entry.scenario = summary.get("scenario") or path.parent.name
    entry.seed = summary.get("seed")
    entry.created = _created_from_id(path.name)
    failed = summary.get("failed_trials") or []
    entry.status = "ok" if not failed else f"{len(failed)} failed"
    entry.note = f"{_count(summary.get('n_trials'), 'trial')} per arm"
    entry.parse = _parse_cell(summary.get("parse_quality"))
    comparison = summary.get("statistical_comparison") or summary.get("counterfactual_comparison")
    diffs = comparison.get("difference_summary") if isinstance(comparison, dict) else None
    if isinstance(diffs, dict):
        _headline(entry, {name: d for name, d in diffs.items() if isinstance(d, dict) and "delta_mean" in d})
    for arm in ("A", "B"):
        label = arm_label(summary, arm)
        for k, name in enumerate(summary.get(f"run_{arm}_trial_ids") or []):
            entry.trials.append(Trial(f"{label} #{k}", trial_dir(entry.id, summary, str(name)).as_posix()))


def _running_group(path: Path, entry: Entry) -> None:
    """A group whose summary is not written yet: what its heartbeat says, and its trials so far."""
    beat = entry.heartbeat = read_heartbeat(path)
    assert beat is not None  # (kind_of found it)
    entry.kind = "counterfactual" if beat["kind"] == "counterfactual" else "montecarlo"
    entry.scenario, entry.seed = beat.get("scenario"), beat.get("seed")
    entry.created = _created_from_id(path.name)
    entry.note = f"{_count(beat['total'] // 2, 'trial')} per arm"
    trials = path / TRIALS_DIR
    for run in sorted(trials.iterdir()) if trials.is_dir() else []:
        arm, number = run.name.removeprefix(f"{path.name}-")[:1], run.name.removeprefix(f"{path.name}-")[1:]
        if run.is_dir() and not run.name.startswith(".") and arm in ("A", "B"):
            entry.trials.append(Trial(f"{arm_label(beat, arm)} #{int(number) if number.isdigit() else number}",
                                      f"{entry.id}/{TRIALS_DIR}/{run.name}"))


def _headline(entry: Entry, diffs: dict[str, dict[str, Any]]) -> None:
    """A group's key figures: the differences A - B of its scenario's key metrics (without
    declared ones, of its compared metrics, those found significant first, then by adjusted p),
    and in its note how many were significant."""
    def order(item: tuple[str, dict[str, Any]]) -> tuple[bool, float, str]:
        name, d = item
        p = d.get("p_adjusted")
        return not d.get("significant"), p if isinstance(p, (int, float)) else 2.0, name

    words = vocabulary(entry.scenario)
    keys = [k for k in words.keys if k in diffs] or [n for n, _ in sorted(diffs.items(), key=order)]
    entry.figures = [words.difference(name, diffs[name]) for name in keys[:KEY_FIGURES]]
    decided = [d["significant"] for d in diffs.values() if isinstance(d.get("significant"), bool)]
    if decided:
        entry.note += f"; {sum(decided)} of {len(decided)} metrics significant"


def condition(field_name: str, value: Any) -> str:
    """A condition as the pages write it: ``biased=true``, ``mechanism=auction``."""
    return f"{field_name}={value if isinstance(value, str) else json.dumps(value)}"


def arm_label(summary: dict[str, Any], arm: str) -> str:
    """A Monte Carlo arm by its condition (``biased=true``), else by its letter."""
    cf = summary.get("counterfactual") or {}
    return condition(cf["field"], cf.get(arm)) if cf.get("field") else arm


def _comparison(path: Path, entry: Entry) -> None:
    manifest, comparison = read_comparison(path)
    entry.scenario, entry.seed = manifest.get("scenario"), manifest.get("seed")
    entry.created, entry.status = manifest.get("created_utc"), "ok"
    backend = manifest.get("backend") or {}  # recorded since 2026-11-27, with the cost (checked by its reader)
    entry.backend, entry.cost_usd = backend.get("name"), manifest.get("cost_usd")
    entry.models = [str(m) for m in manifest.get("models") or []]
    entry.note = f"{_count(len(manifest['trial_seeds']), 'trial')} each: {', '.join(map(str, manifest['mechanisms']))}"
    words = vocabulary(entry.scenario)
    correct = words.name("correctness")
    entry.figures = [Figure(Name("correctness", f"{correct.label}: {m}", correct.title, correct.anchor), rate,
                            words.format("correctness", [rate]).text(rate))
                     for m, r in comparison["mechanisms"].items()
                     if isinstance(r, dict) and isinstance(r.get("correctness_pooled"), dict)
                     for rate in [r["correctness_pooled"].get("rate")]]
    decided = [d["significant"] for p in comparison.get("pairs") or [] if isinstance(p, dict)
               for d in p.values() if isinstance(d, dict) and isinstance(d.get("significant"), bool)]
    if decided:
        entry.note += f"; {sum(decided)} of {len(decided)} differences significant"


def _created_from_id(name: str) -> str | None:
    """The UTC time in a run id (``...YYYYmmddTHHMMSS-s...``), ISO-formatted."""
    for part in name.split("-"):
        if len(part) == 15 and part[8] == "T" and (part[:8] + part[9:]).isdigit():
            return f"{part[:4]}-{part[4:6]}-{part[6:8]}T{part[9:11]}:{part[11:13]}:{part[13:]}+00:00"
    return None


def _sweep(path: Path, entry: Entry) -> None:
    definition = read_sweep_definition(path)
    meta = read_record(path / "sweep.json") if definition is not None else {}
    ledger = ledger_rows(path)
    entry.created = meta.get("created_utc")
    if definition is not None:
        entry.scenario, entry.seed = definition["scenario"], definition["seed"]
        entry.backend = definition["backend"].get("name")
        entry.models = [str(definition["backend"].get("model"))]
    planned = meta.get("n_trials")
    done = sum(r.get("status") is not None for r in ledger.rows)
    layout = SweepLayout.of(definition)
    summary = read_record(path / "summary.json") if (path / "summary.json").is_file() else None
    if summary is not None:
        entry.status = "finished" if not summary.get("n_error") else f"finished, {summary['n_error']} failed"
        entry.cost_usd = summary.get("cost_usd")
        entry.parse = _parse_cell(summary.get("parse_quality"))
    else:
        entry.heartbeat = read_heartbeat(path)  # (its state is judged when the page is shown)
        entry.status = "running or stopped"
        entry.cost_usd = sum(float(r.get("cost_usd") or 0) for r in ledger.rows)
    entry.note = f"{done} of {planned if planned is not None else '?'} trials written"
    if ledger.damaged:
        entry.note += f"; {_count(len(ledger.damaged), 'ledger line')} unreadable"
    _cell_means(entry, layout, summary, ledger.rows)
    for row in ledger.rows:
        run_dir = row.get("run_dir")
        tid = f"{entry.id}/{run_dir}" if run_dir and (path / run_dir / "manifest.json").is_file() else None
        _, params, cond, trial = layout.place(row["index"])
        label = ", ".join([*(condition(k, v) for k, v in params.items()), *([cond] if cond != "none" else [])])
        entry.trials.append(Trial(f"{label or 'trial'} #{trial}", tid, row.get("seed"), row.get("status"),
                                  _parse_cell(_unflatten(row.get("quality")))))


def cell_groups(layout: "SweepLayout", summary: dict[str, Any] | None,
                rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A sweep's groups, one per grid cell and condition in the sweep's order: ``params``,
    ``condition``, ``n`` and each metric's ``stats`` (its summary's figures once ``summary.json``
    is written; before, the mean of the ledger's trials that finished ok so far)."""
    if summary is not None:
        return [{"params": g.get("params") or {}, "condition": str(g.get("condition")), "n": g.get("n"),
                 "stats": {k: m or {} for k, m in (g.get("metrics") or {}).items()}}
                for g in summary.get("groups") or []]
    cells: dict[tuple[int, int], dict[str, Any]] = {}
    for row in rows:
        if row.get("status") != "ok":
            continue
        cell, params, cond, _ = layout.place(row["index"])
        group = cells.setdefault((cell, layout.conditions.index(cond) if cond in layout.conditions else -1),
                                 {"params": params, "condition": cond, "n": 0, "values": {}})
        group["n"] += 1
        for name, v in (row.get("metrics") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                group["values"].setdefault(name, []).append(float(v))
    return [{**{k: g[k] for k in ("params", "condition", "n")},
             "stats": {name: {"mean": sum(v) / len(v)} for name, v in g["values"].items()}}
            for _, g in sorted(cells.items())]


def _cell_means(entry: Entry, layout: "SweepLayout", summary: dict[str, Any] | None,
                rows: list[dict[str, Any]]) -> None:
    """A sweep's key figures: its first key metric's mean per grid cell and condition."""
    words = vocabulary(entry.scenario)
    groups = cell_groups(layout, summary, rows)
    key = next(iter(words.key_names({k: 0.0 for g in groups for k in g["stats"]})), None)
    if key is None:
        return
    shown = words.name(key)
    means = [g["stats"].get(key, {}).get("mean") for g in groups]
    fmt = words.format(key, means)
    entry.figures_caption = f"mean {shown.label} per cell"
    for g, mean in list(zip(groups, means))[:SWEEP_CELLS]:
        label = ", ".join([*(condition(k, v) for k, v in g["params"].items()),
                           *([g["condition"]] if g["condition"] != "none" else [])])
        entry.figures.append(Figure(Name(key, label or "all trials", shown.title, shown.anchor), mean, fmt.text(mean)))
    if len(groups) > SWEEP_CELLS:
        entry.figures_caption += f" (first {SWEEP_CELLS} of {len(groups)})"


@dataclass
class SweepLayout:
    """Where a sweep's trial sits: its grid cell, condition and number (``TrialJob.index`` order:
    cell-major, then condition, then trial)."""

    names: list[str]
    cells: list[dict[str, Any]]
    conditions: list[str]
    trials: int

    @classmethod
    def of(cls, definition: dict[str, Any] | None) -> "SweepLayout":
        """The layout of a sweep definition (``sweep.json``); one cell and condition without one."""
        if definition is None:
            return cls([], [{}], ["none"], 1)
        names = [g[0] for g in definition["grid"]]
        cells = [dict(zip(names, combo)) for combo in itertools.product(*(g[1] for g in definition["grid"]))]
        conds = ["none"]
        if definition.get("conditions"):
            name, values = definition["conditions"]
            conds = [condition(name, v) for v in values]
        return cls(names, cells, conds, max(1, definition["trials"]))

    def place(self, index: int) -> tuple[int, dict[str, Any], str, int]:
        """The grid cell (its number and values), the condition and the trial number of trial ``index``."""
        cell, rest = divmod(index, len(self.conditions) * self.trials)
        cond, trial = divmod(rest, self.trials)
        return (cell, self.cells[cell] if cell < len(self.cells) else {},
                self.conditions[cond] if cond < len(self.conditions) else "?", trial)


def _unflatten(quality: Any) -> dict[str, dict[str, Any]] | None:
    """A ledger's ``parse.<kind>.<count>`` columns as parse quality per kind."""
    if not isinstance(quality, dict):
        return None
    out: dict[str, dict[str, Any]] = {}
    for key, value in quality.items():
        head, kind, name = (key.split(".", 2) + ["", ""])[:3]
        if head == "parse" and name:
            out.setdefault(kind, {})[name] = value
    return out or None


def _study(path: Path, entry: Entry) -> None:
    study = read_record(path / "study.json")
    definition = study.get("definition") or {}
    entry.scenario, entry.seed = definition.get("scenario"), definition.get("seed")
    backend = definition.get("backend") or {}
    entry.backend, entry.models = backend.get("name"), [str(backend.get("model"))]
    entry.created = _created_from_id(path.name)
    entry.cost_usd = (study.get("calls") or {}).get("paid_cost_usd")
    entry.status = "warnings" if study.get("warnings") else "ok"
    perts = definition.get("perturbations") or []
    entry.note = f"{_count(definition.get('pairs'), 'pair')} x {_count(len(perts), 'perturbation')}"
    words = study_vocabulary()
    d_norm = words.name("mean_d_norm")
    rows = [r for r in study.get("summary") or []
            if isinstance(r, dict) and isinstance(r.get("mean_d_norm"), (int, float))]
    fmt = words.format("mean_d_norm", [r["mean_d_norm"] for r in rows])
    entry.figures = [Figure(Name("mean_d_norm", f"{d_norm.label}: {r.get('perturbation')}", d_norm.title,
                                 d_norm.anchor), r["mean_d_norm"], fmt.text(r["mean_d_norm"])) for r in rows]


@dataclass
class Ledger:
    """The readable lines of a ledger, the last attempt per trial, and the damaged lines."""

    rows: list[dict[str, Any]]
    damaged: list[str]


def ledger_rows(sweep_dir: Path) -> Ledger:
    """A sweep's ``ledger.jsonl`` read line by line through :func:`read_ledger_line`.

    The last line of a ledger still being written may be torn; it and any other
    line that fails its check are reported, not fatal. A trial run twice (resume)
    keeps its last line.
    """
    path = sweep_dir / "ledger.jsonl"
    rows: dict[int, dict[str, Any]] = {}
    damaged: list[str] = []
    if not path.is_file():
        return Ledger([], [])
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                row = read_ledger_line(raw.decode("utf-8", errors="strict"), f"{path}:{n}")
            except UnicodeDecodeError:
                damaged.append(f"{path}:{n}: not UTF-8 text")
                continue
            except DamagedFile as exc:
                damaged.append(str(exc))
                continue
            rows[row["index"]] = row
    return Ledger([rows[i] for i in sorted(rows)], damaged)
