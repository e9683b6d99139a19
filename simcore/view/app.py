"""The run browser's web application (aiohttp, server-rendered pages).

Routes (``ID`` is an entry's path relative to RUNS_DIR):

=========================  ==================================================
``GET /``                  the runs table (``/rows`` : its rows, for live updates)
``GET /run/ID``            one run: transcript (paged), metrics, plots, manifest, events
``GET /prompt/ID?request=``  the prompt of one call, from the run's cassette
``POST /replay/ID``        run ``python -m simcore.replay`` on the run; JSON outcome
``GET /compare?a=ID&b=ID`` two runs aligned as the divergence metric aligns them
``GET /group/ID``          a Monte Carlo or counterfactual group
``GET /sweep/ID``          a sweep (``/sweep-rows/ID``: its trials, for live updates)
``GET /study/ID``          a perturbation study
``GET /plot/ID?name=``     a PNG of an entry, checked against its manifest
``GET /file/ID?name=``     a file the entry's page offers, as a download (:mod:`.downloads`)
``GET /progress/ID``       a running sweep's or group's progress, for live updates
``GET /glossary``          every declared metric: label, unit, kind, description
``GET /favicon.ico``       the icon (also ``/static/favicon.svg``)
=========================  ==================================================

Nothing here writes: every file is read through :mod:`simcore.base.files`, and a
file that fails its check is shown with the reader's message. Ids are checked by
:mod:`simcore.view.paths`; anything that is not an entry of the right kind is 404.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from aiohttp import web
from jinja2 import Environment, PackageLoader, Undefined, select_autoescape
from markupsafe import Markup, escape

from simcore.analysis.divergence import (
    compare_signatures,
    comparison_order,
    control_flow,
)
from simcore.analysis.readability import readability_lines
from simcore.analysis.resolution import at_resolution
from simcore.analysis.stats import group_scale
from simcore.base.files import (
    DamagedFile,
    read_comparison,
    read_heartbeat,
    read_jsonl,
    read_manifest,
    read_record,
    read_results,
    read_sweep_definition,
    recorded_files,
)
from simcore.base.heartbeat import Pulse, pulse
from simcore.batch.report import finish_command
from simcore.runs.counterfactual import trial_dir
from simcore.runs.scenario import installed_scenarios
from simcore.sim.trace import TraceEvent
from simcore.view import headlines, timeline
from simcore.view.catalog import (
    Catalog,
    Entry,
    SweepLayout,
    arm_label,
    cell_groups,
    kind_of,
    ledger_rows,
)
from simcore.view.compare import Pair, event_text, pair_of, text_differences
from simcore.view.downloads import offered, read_offered
from simcore.view.figures import (
    Vocabulary,
    glossary_anchor,
    scenario_named,
    study_vocabulary,
    vocabulary,
)
from simcore.view.numbers import MISSING, Format, is_number
from simcore.view.paths import BadId, guard, inside, resolve_id, split_id
from simcore.view.tables import comparison_table
from simcore.view.tracefile import open_trace

PAGE_SIZE = 200
MAX_PAGE_SIZE = 2000
#: Largest product of two traces' lengths that /compare aligns (the alignment is quadratic).
MAX_ALIGN_CELLS = 4_000_000
REPLAY_TIMEOUT_S = 600
#: Seconds between refreshes of a table's rows, whatever the progress poll: a shorter refresh
#: replaced rows while a reader (or a browser test) was reading them.
ROWS_POLL_S = 5.0
#: The day each kind of manifest began to record its files' hashes (``files``).
HASHES_SINCE = {"run": "2026-11-23", "comparison": "2026-11-26"}
STATIC = Path(__file__).with_name("static")
ROOT_KEY = web.AppKey("root", Path)
CATALOG_KEY = web.AppKey("catalog", Catalog)
ENV_KEY = web.AppKey("env", Environment)
REPLAY_LOCK_KEY = web.AppKey("replay_lock", asyncio.Lock)
CLOCK_KEY = web.AppKey("clock", Callable[[], float])
#: The page of each kind of entry.
PAGES = {"run": "run", "group": "group", "montecarlo": "group", "counterfactual": "group", "sweep": "sweep",
         "study": "study", "comparison": "comparison"}
#: Header the replay button sends; a cross-site form cannot set it, so no other page can start a replay.
REPLAY_HEADER = "X-Simcore-View"


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("simcore.view", "templates"),
                      autoescape=select_autoescape(default=True), trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.globals["readability_lines"] = lambda record, a, b: readability_lines(record, a, b, indent="")
    env.globals["page_of"] = lambda kind: PAGES.get(kind, kind)
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    # API cost: four decimals (a stub run's is $0.0000, a real one's often a fraction of a cent).
    env.filters["usd"] = lambda v: f"${v:,.4f}" if is_number(v) else MISSING
    env.filters["size"] = _size
    env.filters["duration"] = duration
    # An ISO time in UTC as "2026-11-26 10:33:41" (the column says UTC), which wraps at the space only.
    env.filters["when"] = lambda v: Markup(" ").join(
        Markup('<span class="nw">%s</span>') % part for part in str(v).removesuffix("+00:00").split("T")) if v else "-"
    env.filters["breakable"] = _breakable
    return env


def _breakable(text: Any) -> Markup:
    """``text`` escaped, with a line-break opportunity after each separator (``/ _ - . , =``), so that
    ids and names wrap there and not inside a word (``context_<wbr>corrosion``)."""
    return Markup("<wbr>").join(escape(part) for part in re.split(r"(?<=[/_\-.,=])", str(text)))


def _num(v: Any, digits: int = 3) -> str:
    """A figure without a declaration (a distance, a count of events): fixed decimals, never
    exponents (a value below them shows as 0 at that resolution)."""
    if v is None or isinstance(v, Undefined):
        return MISSING
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return Format(digits).text(v) if is_number(v) else MISSING
    return f"{v:,}" if isinstance(v, int) else str(v)


def _size(n: int | None) -> str:
    """A file's size: ``812 B``, ``14.2 kB``, ``31.5 MB``."""
    if n is None:
        return "missing"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def duration(seconds: float | None) -> str:
    """A span of wall-clock time in words: ``45 s``, ``2 min 5 s``, ``3 h 10 min``."""
    if seconds is None:
        return MISSING
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _render(request: web.Request, name: str, **context: Any) -> web.Response:
    html = request.app[ENV_KEY].get_template(name).render(**context)
    return web.Response(text=html, content_type="text/html")


def _not_found(what: str) -> web.HTTPNotFound:
    return web.HTTPNotFound(text=f"not found: {what}")


def _entry_dir(request: web.Request, *kinds: str) -> tuple[str, Path]:
    """The entry the URL names, of one of ``kinds`` (any kind when none are given); 404 otherwise."""
    eid = request.match_info["id"]
    root = request.app[ROOT_KEY]
    try:
        path = resolve_id(root, eid)
    except BadId as exc:
        raise _not_found(str(exc)) from None
    names = {p.name for p in path.iterdir()}
    kind = kind_of(names)
    if kind is None or kinds and kind not in kinds:
        raise _not_found(f"{eid!r} is not a {' or '.join(kinds or ('run directory',))}")
    return eid, path


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


def crumbs(root: Path, eid: str) -> list[tuple[str, str | None, str]]:
    """The way up from entry ``eid``: (label, link, kind) for each directory of its id, the
    entries among them linked to their pages, the others to the runs table filtered by them,
    and the entry itself last, without a link."""
    parts = eid.split("/")
    out: list[tuple[str, str | None, str]] = []
    for i in range(1, len(parts)):
        prefix = "/".join(parts[:i])
        here = root.joinpath(*parts[:i])
        kind = kind_of({p.name for p in here.iterdir()}) if here.is_dir() and inside(root, here) else None
        out.append((parts[i - 1], f"/{PAGES[kind]}/{prefix}" if kind in PAGES else f"/?q={prefix}/", kind or ""))
    return out + [(parts[-1], None, "")]


def _common(root: Path, eid: str, path: Path) -> dict[str, Any]:
    """What every entry's page has: the way up, and the files it offers."""
    ctx: dict[str, Any] = {"id": eid, "crumbs": crumbs(root, eid), "damage": [], "files": []}
    try:
        ctx["files"] = offered(root, path)
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
    return ctx


# -- the runs table -------------------------------------------------------------------

def _progress(entries: Sequence[Entry], now: float) -> dict[str, Pulse]:
    """The progress of every entry that has a heartbeat (and no summary yet), judged at ``now``."""
    return {e.id: pulse(e.heartbeat, now) for e in entries if e.heartbeat is not None}


async def index(request: web.Request) -> web.Response:
    entries = await _in_thread(request.app[CATALOG_KEY].scan)
    kinds = sorted({e.kind for e in entries})
    return _render(request, "index.html", entries=entries, kinds=kinds, root=str(request.app[ROOT_KEY]),
                   q=request.query.get("q", ""), progress=_progress(entries, request.app[CLOCK_KEY]()))


async def index_rows(request: web.Request) -> web.Response:
    entries = await _in_thread(request.app[CATALOG_KEY].scan)
    return _render(request, "_runs_rows.html", entries=entries, progress=_progress(entries, request.app[CLOCK_KEY]()))


# -- one run ----------------------------------------------------------------------------

def _int_arg(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    try:
        value = int(request.query.get(name, default))
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name}: must be an integer") from None
    return min(max(value, lo), hi)


def metric_rows(words: Vocabulary, metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every metric of a run, by name, each printed by its kind (a label's or a list's as it is)."""
    out = []
    for name, value in sorted(words.resolved(metrics).items()):
        text = words.format(name, [value]).text(value) if value is None or isinstance(value, (bool, int, float, str)) \
            else json.dumps(value)
        out.append({"name": words.name(name), "value": value if is_number(value) else None, "text": text})
    return out


def _run_context(root: Path, eid: str, path: Path, query: dict[str, Any]) -> dict[str, Any]:
    ctx: dict[str, Any] = {**_common(root, eid, path), "manifest": None, "results": None, "head": ([], None)}
    try:
        guard(root, *(path / n for n in ("manifest.json", "results.json", "trace.jsonl", "cassette.sqlite",
                                         "timings.json")))
        manifest = ctx["manifest"] = read_manifest(path)
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        return ctx
    words = vocabulary(manifest.get("scenario"))
    marks: list[dict[str, Any]] = []
    try:
        results = ctx["results"] = read_results(path, manifest)
        words = vocabulary(results.get("scenario") or manifest.get("scenario"))
        ctx["head"] = headlines.run_headline(manifest, results)
        # Shown at their resolution (float noise as 0) and by their kind; results.json itself is shown exact.
        ctx["key_figs"] = words.key_figures(results.get("metrics") or {})
        ctx["metrics"] = metric_rows(words, results.get("metrics") or {})
        marks = timeline.perturbation_marks(results)
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
    ctx["glossary"] = words.scope if words.metrics else None
    if (path / "timings.json").exists():
        try:
            ctx["timings"] = read_record(path / "timings.json")
        except DamagedFile as exc:
            ctx["damage"].append(str(exc))
    ctx["plots"] = _plots(root, path, manifest)
    ctx["nested"] = _nested_runs(root, path)
    try:
        trace = open_trace(path, manifest)
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        ctx["trace"] = None
        return ctx
    kinds = [k for k in query["kinds"] if k in trace.kind_names]
    agents = [a for a in query["agents"] if a in trace.agent_names]
    selected = trace.select(kinds, agents)
    size = query["size"]
    pages = max(1, -(-len(selected) // size))
    page = min(query["page"], pages)
    picked = selected[(page - 1) * size: page * size]
    hears, topology_note = timeline.audience(manifest, trace.agent_names)
    price, priced_model = timeline.call_pricer(manifest)
    try:
        prompts = timeline.PromptBook.load(path, manifest)
        ctx["prompts_note"] = None if prompts is not None else (
            "This run recorded no prompts: it has no cassette.sqlite (runs on a real backend, "
            "or with --cassette FILE, keep one).")
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        ctx["prompts_note"] = "The cassette is damaged; prompts are not shown."
        prompts = None
    marks_at, marks_end, mark_pages = timeline.place_marks(marks, selected, page, size)
    ctx.update(
        trace=trace, rows=timeline.rows(trace.read(picked), hears, price), n_selected=len(selected),
        page=page, pages=pages, size=size, kinds=kinds, agents=agents, topology_note=topology_note,
        has_prompts=prompts is not None, priced_model=priced_model,
        t_end=float(trace.times[-1]) if len(trace) else 0.0,
        marks=marks, marks_at=marks_at, marks_end=marks_end, mark_pages=mark_pages,
    )
    return ctx


def _plots(root: Path, path: Path, manifest: dict[str, Any] | None, kind: str = "run") -> list[dict[str, Any]]:
    """The PNGs of an entry, each with a note for its caption where its manifest does not vouch
    for it; none where the manifest does, or where the entry has no manifest (groups, sweeps and
    studies, whose plots no file records: docs/view.md)."""
    recorded = (manifest or {}).get("files")
    names = {n for n in recorded or {} if n.endswith(".png")}
    for sub in (path, path / "plots"):
        if sub.is_dir() and inside(root, sub):
            names |= {p.relative_to(path).as_posix() for p in sub.glob("*.png")}
    out = []
    for n in sorted(names):
        note = None
        if manifest is not None and recorded is None:
            note = f"file hash not recorded: written before {HASHES_SINCE[kind]}, when manifests began to record them"
        elif manifest is not None and n not in recorded:
            note = "damaged: not among the files its manifest records"
        out.append({"name": n, "note": note})
    return out


def _nested_runs(root: Path, path: Path) -> list[str]:
    """Run directories inside a run directory (a batch perturbation trial keeps its pair's runs)."""
    out = []
    sub = path / "runs"
    if not sub.is_dir() or not inside(root, sub):
        return out
    for dirpath, dirnames, filenames in os.walk(sub, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if "manifest.json" in filenames:
            out.append(Path(dirpath).relative_to(root).as_posix())
            dirnames[:] = []
    return out


async def run_page(request: web.Request) -> web.Response:
    eid, path = _entry_dir(request, "run")
    query = {
        "page": _int_arg(request, "page", 1, 1, 10**9),
        "size": _int_arg(request, "size", PAGE_SIZE, 10, MAX_PAGE_SIZE),
        "kinds": request.query.getall("kind", []),
        "agents": request.query.getall("agent", []),
    }
    ctx = await _in_thread(_run_context, request.app[ROOT_KEY], eid, path, query)
    return _render(request, "run.html", **ctx)


async def prompt(request: web.Request) -> web.Response:
    eid, path = _entry_dir(request, "run")
    key = request.query.get("request", "")
    if len(key) != 16 or any(c not in "0123456789abcdef" for c in key):
        raise web.HTTPBadRequest(text="request: must be 16 hex digits")

    def load() -> Any:
        guard(request.app[ROOT_KEY], path / "manifest.json", path / "cassette.sqlite")
        return timeline.PromptBook.load(path, read_manifest(path))

    try:
        book = await _in_thread(load)
    except DamagedFile as exc:
        return _render(request, "_prompt.html", damage=str(exc), requests=[])
    if book is None:
        return _render(request, "_prompt.html", damage=None, requests=[], none=True)
    if key not in book:
        raise _not_found(f"no recorded request {key}")
    return _render(request, "_prompt.html", damage=None, requests=book[key])


async def replay(request: web.Request) -> web.Response:
    if request.headers.get(REPLAY_HEADER) != "1":
        raise web.HTTPForbidden(text=f"replay: send the {REPLAY_HEADER}: 1 header (the page's button does)")
    eid, path = _entry_dir(request, "run")
    lock = request.app[REPLAY_LOCK_KEY]
    if lock.locked():
        return web.json_response({"outcome": "busy", "detail": "another replay is running; try again"},
                                 status=503, headers={"Retry-After": "5"})
    async with lock:
        result = await run_replay(path)
    return web.json_response(result)


async def run_replay(run_dir: Path) -> dict[str, Any]:
    """``python -m simcore.replay RUN_DIR --json`` in a subprocess, read back.

    Replay writes nothing; it still runs with a fresh temporary working directory,
    so that nothing it might leave lands in RUNS_DIR.
    """
    with tempfile.TemporaryDirectory(prefix="simcore-view-replay-") as tmp:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "simcore.replay", str(run_dir), "--json",
            cwd=tmp, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), REPLAY_TIMEOUT_S)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return {"outcome": "error", "detail": f"replay did not finish in {REPLAY_TIMEOUT_S} s"}
    last = (err.decode(errors="replace").strip().splitlines() or [""])[-1]
    if proc.returncode in (0, 1):
        try:
            data = json.loads(out)
        except ValueError:
            return {"outcome": "error", "detail": f"replay printed no JSON (exit {proc.returncode}) {last}"}
        if proc.returncode == 0:
            return {"outcome": "identical", "detail": f"trace sha256 {data['recorded_sha256']}", **data}
        return {"outcome": "differs", "detail": f"first difference at event {data['first_diff']}", **data}
    outcome = "damaged" if "damaged" in last else "error"
    return {"outcome": outcome, "detail": last or f"replay exited with status {proc.returncode}"}


# -- compare ---------------------------------------------------------------------------

def _load_events(root: Path, eid: str) -> tuple[list[Any], dict[str, Any]]:
    try:
        path = resolve_id(root, eid)
    except BadId as exc:
        raise _not_found(str(exc)) from None
    if not (path / "manifest.json").is_file():
        raise _not_found(f"{eid!r} is not a run")
    guard(root, path / "manifest.json", path / "trace.jsonl")
    manifest = read_manifest(path)
    trace = open_trace(path, manifest)
    events = [TraceEvent(e["seq"], e["t"], e["kind"], e["agent"], e["fields"], e["payload"])
              for e in trace.read(range(len(trace)))]
    return events, manifest


def _compare_context(root: Path, a: str, b: str) -> dict[str, Any]:
    ctx: dict[str, Any] = {"a": a, "b": b, "damage": [], "pair": Pair("conditions", "A", "B"),
                           "crumbs": [("compare", None, "")]}
    try:
        ea, ma = _load_events(root, a)
        eb, mb = _load_events(root, b)
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        return ctx
    ctx["pair"] = pair_of(ma, mb)
    if len(ea) * len(eb) > MAX_ALIGN_CELLS:
        ctx["too_big"] = (len(ea), len(eb))
        return ctx
    oa, ob = comparison_order(ea), comparison_order(eb)
    sa, sb = [ea[i].signature for i in oa], [eb[j].signature for j in ob]
    cmp = compare_signatures(sa, sb)
    flow = control_flow(sa, sb, cmp)
    aligned = []
    for k, p in enumerate(cmp.alignment):
        left, right = None if p.i is None else ea[oa[p.i]], None if p.j is None else eb[ob[p.j]]
        ta, tb = event_text(left), event_text(right)
        aligned.append({"k": k, "op": p.op, "t_star": k == cmp.t_star, "left": left, "right": right,
                        "text_differs": ta is not None and tb is not None and ta != tb})
    ctx.update(cmp=cmp, flow=flow, aligned=aligned, ma=ma, mb=mb, n_a=len(ea), n_b=len(eb),
               ops="".join(p.op[0].upper() for p in cmp.alignment), texts=text_differences(ea, eb, oa, ob, cmp))
    return ctx


async def compare(request: web.Request) -> web.Response:
    # Two ids: a=ID&b=ID, or two run=ID (the runs table's checkboxes).
    picked = request.query.getall("run", [])
    a, b = (picked + ["", ""])[:2] if picked else (request.query.get("a", ""), request.query.get("b", ""))
    if picked and len(picked) != 2:
        raise web.HTTPBadRequest(text=f"run: pick exactly two runs to compare, got {len(picked)}")
    for eid in (a, b):
        try:
            split_id(eid)
        except BadId as exc:
            raise _not_found(str(exc)) from None
    ctx = await _in_thread(_compare_context, request.app[ROOT_KEY], a, b)
    return _render(request, "compare.html", **ctx)


# -- groups, sweeps, studies, comparisons -------------------------------------------------

def _progress_of(path: Path, now: float, ctx: dict[str, Any]) -> Pulse | None:
    """The progress a running entry's heartbeat says at ``now`` (None without one)."""
    try:
        beat = read_heartbeat(path)
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        return None
    return None if beat is None else pulse(beat, now)


def _group_context(root: Path, eid: str, path: Path, now: float) -> dict[str, Any]:
    ctx: dict[str, Any] = {**_common(root, eid, path), "summary": None, "plots": _plots(root, path, None),
                           "head": ([], None), "pairs": [], "arms": {"A": "A", "B": "B"}}
    if not (path / "summary.json").exists():  # still running, or stopped: its heartbeat and its trials so far
        entry = Catalog(root).entry(path, "group")
        ctx.update(progress=_progress_of(path, now, ctx), running=entry, arms={a: arm_label(entry.heartbeat or {}, a)
                                                                               for a in "AB"})
        return ctx
    try:
        guard(root, path / "summary.json")
        summary = ctx["summary"] = read_record(path / "summary.json")
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        return ctx
    try:
        arms = [[trial_dir(eid, summary, str(rid)).as_posix() for rid in summary.get(f"run_{arm}_trial_ids") or []]
                for arm in ("A", "B")]
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        arms = [[], []]
    ctx["pairs"] = [{"i": i, "a": a, "b": arms[1][i] if i < len(arms[1]) else None} for i, a in enumerate(arms[0])]
    comparison = ctx["comparison"] = summary.get("statistical_comparison") or summary.get("counterfactual_comparison")
    ctx["aggregates"] = {arm: summary.get(f"run_{arm}_aggregate") or {} for arm in ("A", "B")}
    ctx["arms"] = {arm: arm_label(summary, arm) for arm in ("A", "B")}
    ctx["head"] = headlines.group_headline(summary)
    words = vocabulary(summary.get("scenario"))
    ctx["glossary"] = words.scope if words.metrics else None
    diffs = (comparison or {}).get("difference_summary") or {} if isinstance(comparison, dict) else {}
    rows = {k: d for k, d in sorted(diffs.items()) if isinstance(d, dict) and "delta_mean" in d}
    keys = [k for k in words.keys if k in rows]
    ctx["key_table"] = comparison_table([([], k, rows[k]) for k in keys], words) if keys else None
    ctx["table"] = comparison_table([([], k, d) for k, d in rows.items()], words) if rows else None
    ctx["aggregate_rows"] = {arm: _aggregate_rows(words, agg) for arm, agg in ctx["aggregates"].items()}
    return ctx


def _aggregate_rows(words: Vocabulary, aggregate: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An arm's aggregates (a :class:`~simcore.analysis.stats.Summary` per metric), printed by kind."""
    out = []
    for name, v in sorted(aggregate.items()):
        if not isinstance(v, dict):
            continue
        scale = group_scale(v)
        vals = {k: at_resolution(v.get(k), scale) for k in ("mean", "std", "ci_low", "ci_high")}
        fmt = words.format(name, [vals["mean"], vals["ci_low"], vals["ci_high"]])
        ci = fmt.span(vals["ci_low"], vals["ci_high"]) or "n/a"
        # A spread is a difference of values: a percentage's in percentage points.
        spread = fmt.diff(vals["std"]).lstrip("+")
        out.append({"name": words.name(name), "kind": v.get("kind") or "", "n": v.get("n"),
                    "mean": fmt.text(vals["mean"]), "std": spread, "ci": ci, "interval": v.get("interval") or ""})
    return out


def _comparison_context(root: Path, eid: str, path: Path) -> dict[str, Any]:
    ctx: dict[str, Any] = {**_common(root, eid, path), "manifest": None, "comparison": None,
                           "plots": _plots(root, path, None), "head": ([], None)}
    try:
        guard(root, path / "manifest.json", path / "comparison.json")
        ctx["manifest"], comparison = read_comparison(path)
        ctx["comparison"] = comparison
        ctx["plots"] = _plots(root, path, ctx["manifest"], "comparison")
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        return ctx
    ctx["head"] = headlines.recorded_headline(path)
    words = vocabulary(ctx["manifest"].get("scenario"))
    ctx["glossary"] = words.scope if words.metrics else None
    mechanisms = {m: r for m, r in comparison["mechanisms"].items() if isinstance(r, dict)}
    # Each mechanism's key metrics: the mean over its trials, with the interval its kind calls for.
    keys = [k for k in words.keys if any(isinstance(r.get(f"{k}_per_trial"), dict) for r in mechanisms.values())]
    columns = []
    for k in keys:
        cells = {m: r.get(f"{k}_per_trial") or {} for m, r in mechanisms.items()}
        fmt = words.format(k, [c.get(x) for c in cells.values() for x in ("mean", "ci_low", "ci_high")])
        columns.append({"name": words.name(k), "cells": {
            m: {"mean": fmt.text(c.get("mean")), "value": c.get("mean"),
                "ci": fmt.span(c.get("ci_low"), c.get("ci_high"))}
            for m, c in cells.items()}})
    ctx["key_columns"] = columns
    pooled = words.format("correctness", [])
    ctx["pooled"] = {}
    for m, r in mechanisms.items():
        rate = r.get("correctness_pooled") or {}
        ctx["pooled"][m] = {"rate": pooled.text(rate.get("rate")), "value": rate.get("rate"), "k": rate.get("k"),
                            "n": rate.get("n"), "ci": pooled.span(rate.get("ci_low"), rate.get("ci_high"))}
    ctx["charged"] = bool((ctx["manifest"].get("config") or {}).get("charge_baselines"))
    entries = [([p["a"], p["b"]], k, d) for p in comparison.get("pairs") or [] if isinstance(p, dict)
               for k, d in sorted(p.items()) if isinstance(d, dict) and "delta_mean" in d]
    ctx["table"] = comparison_table(entries, words, head=["a", "b"]) if entries else None
    return ctx


async def comparison_page(request: web.Request) -> web.Response:
    eid, path = _entry_dir(request, "comparison")
    ctx = await _in_thread(_comparison_context, request.app[ROOT_KEY], eid, path)
    return _render(request, "comparison.html", **ctx)


async def group_page(request: web.Request) -> web.Response:
    eid, path = _entry_dir(request, "group")
    ctx = await _in_thread(_group_context, request.app[ROOT_KEY], eid, path, request.app[CLOCK_KEY]())
    return _render(request, "group.html", **ctx)


def _sweep_rows(root: Path, path: Path) -> dict[str, Any]:
    """The sweep's trials from its ledger, each with its grid cell, condition and trial, and each
    metric column printed at one resolution by its kind."""
    ctx: dict[str, Any] = {"damage": [], "rows": [], "definition": None, "axes": []}
    guard(root, path / "sweep.json", path / "ledger.jsonl")
    try:
        definition = ctx["definition"] = read_sweep_definition(path)
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        definition = None
    ledger = ledger_rows(path)
    ctx["damage"] += ledger.damaged
    layout = SweepLayout.of(definition)
    ctx["axes"] = [(n, sorted({json.dumps(c[n]) for c in layout.cells})) for n in layout.names]
    words = vocabulary((definition or {}).get("scenario"))
    metric_names: dict[str, None] = {}
    for row in ledger.rows:
        cell, params, cond, trial = layout.place(row["index"])
        for name in row.get("metrics") or {}:
            metric_names.setdefault(name, None)
        run_dir = row.get("run_dir")
        run_id = None
        if run_dir and inside(root, path / run_dir) and (path / run_dir / "manifest.json").is_file():
            run_id = (path / run_dir).relative_to(root).as_posix()
        ctx["rows"].append({**row, "metrics": words.resolved(row.get("metrics") or {}), "cell": cell,
                            "condition": cond, "trial": trial, "params": {k: json.dumps(v) for k, v in params.items()},
                            "run": run_id})
    # A trial of a later condition is compared with the same cell's and trial's first condition (same seed).
    first = {(r["cell"], r["trial"]): r["run"] for r in ctx["rows"] if r["condition"] == layout.conditions[0]}
    for r in ctx["rows"]:
        other = first.get((r["cell"], r["trial"]))
        r["compare"] = other if r["run"] and other and other != r["run"] else None
    # Key metrics first, then the rest by name.
    ordered = [*words.key_names(metric_names), *sorted(metric_names)]
    ctx["metric_names"] = [words.name(n) for n in dict.fromkeys(ordered)]
    formats = {n.name: words.format(n.name, [r["metrics"].get(n.name) for r in ctx["rows"]], trials=True)
               for n in ctx["metric_names"]}
    for r in ctx["rows"]:
        r["texts"] = {n: formats[n].text(r["metrics"].get(n)) for n in formats}
    ctx["conditions"] = layout.conditions
    return ctx


def _sweep_context(root: Path, eid: str, path: Path, now: float) -> dict[str, Any]:
    ctx = {**_common(root, eid, path), "head": ([], None)}
    rows = _sweep_rows(root, path)
    ctx["damage"] += rows.pop("damage")
    ctx.update(rows, plots=_plots(root, path, None), summary=None)
    words = vocabulary((ctx["definition"] or {}).get("scenario"))
    ctx["glossary"] = words.scope if words.metrics else None
    if (path / "summary.json").exists():
        try:
            guard(root, path / "summary.json")
            ctx["summary"] = read_record(path / "summary.json")
            ctx["head"] = headlines.sweep_headline(ctx["summary"])
        except DamagedFile as exc:
            ctx["damage"].append(str(exc))
    else:
        ctx["progress"] = _progress_of(path, now, ctx)
        ctx["finish"] = finish_command((ctx["definition"] or {}).get("scenario", "SCENARIO"), path)
    groups = cell_groups(SweepLayout.of(ctx["definition"]), ctx["summary"], ctx["rows"])
    ctx["cells"] = _cell_table(words, groups, ctx["conditions"], ctx["summary"] is not None)
    comparisons = []
    for c in (ctx["summary"] or {}).get("comparisons") or []:
        result = c.get("result") or {}
        diffs = result.get("difference_summary", result) if isinstance(result, dict) else {}
        entries = [([], k, r) for k, r in sorted(diffs.items()) if isinstance(r, dict) and "delta_mean" in r]
        comparisons.append({**c, "interpretation": diffs.get("interpretation"),
                            "table": comparison_table(entries, words) if entries else None})
    ctx["comparisons"] = comparisons
    return ctx


def _cell_table(words: Vocabulary, groups: Sequence[Mapping[str, Any]], conditions: Sequence[str],
                from_summary: bool) -> dict[str, Any]:
    """The key metrics per grid cell and condition (:func:`simcore.view.catalog.cell_groups`): each
    one's mean, and its 95% interval once the summary is written."""
    names = words.key_names({k: 0.0 for g in groups for k in g["stats"]})
    columns = []
    for k in names:
        stats = [g["stats"].get(k) or {} for g in groups]
        fmt = words.format(k, [s.get(x) for s in stats for x in ("mean", "ci_low", "ci_high")])
        columns.append({"name": words.name(k), "cells": [
            {"mean": fmt.text(at_resolution(s.get("mean"), group_scale(s) if s.get("bounds") else None)),
             "ci": fmt.span(s.get("ci_low"), s.get("ci_high"))} for s in stats]})
    return {"groups": groups, "columns": columns, "conditioned": len(conditions) > 1, "from_summary": from_summary}


async def sweep_page(request: web.Request) -> web.Response:
    eid, path = _entry_dir(request, "sweep")
    try:
        ctx = await _in_thread(_sweep_context, request.app[ROOT_KEY], eid, path, request.app[CLOCK_KEY]())
    except DamagedFile as exc:
        ctx = {"id": eid, "crumbs": crumbs(request.app[ROOT_KEY], eid), "damage": [str(exc)], "rows": [], "axes": [],
               "plots": [], "summary": None, "metric_names": [], "conditions": [], "definition": None, "files": [],
               "head": ([], None), "comparisons": [], "cells": None}
    return _render(request, "sweep.html", **ctx)


async def sweep_rows(request: web.Request) -> web.Response:
    eid, path = _entry_dir(request, "sweep")
    try:
        ctx = await _in_thread(_sweep_rows, request.app[ROOT_KEY], path)
    except DamagedFile as exc:
        raise web.HTTPInternalServerError(text=str(exc)) from None
    return _render(request, "_sweep_rows.html", **ctx)


async def progress(request: web.Request) -> web.Response:
    """A running sweep's or group's progress line (the page polls it; it says ``finished`` once a
    summary is written, and the page then reloads)."""
    _, path = _entry_dir(request, "sweep", "group")
    ctx: dict[str, Any] = {"damage": []}
    done = (path / "summary.json").exists()
    beat = None if done else await _in_thread(_progress_of, path, request.app[CLOCK_KEY](), ctx)
    return _render(request, "_progress.html", progress=beat, done=done, damage=ctx["damage"])


def _study_context(root: Path, eid: str, path: Path) -> dict[str, Any]:
    ctx: dict[str, Any] = {**_common(root, eid, path), "study": None, "pairs": [], "plots": _plots(root, path, None),
                           "head": ([], None), "glossary": "study"}
    try:
        guard(root, path / "study.json", path / "pairs.jsonl", path / "noise.json")
        study = ctx["study"] = read_record(path / "study.json")
        rows = read_jsonl(path / "pairs.jsonl")
    except DamagedFile as exc:
        ctx["damage"].append(str(exc))
        return ctx
    ctx["head"] = headlines.study_headline(path, study)
    words = ctx["words"] = study_vocabulary()
    summary = [r for r in study.get("summary") or [] if isinstance(r, dict)]
    keys = ["n_pairs", "n_applied", *words.keys, "n_within_noise_floor"]
    ctx["summary_columns"] = [words.name(k) for k in keys]
    formats = {k: words.format(k, [r.get(k) for r in summary]) for k in keys}
    ctx["summary_rows"] = [{"perturbation": r.get("perturbation"),
                            "cells": [{"text": formats[k].text(r.get(k)), "value": r.get(k)} for k in keys],
                            "d_norm_ci": formats["mean_d_norm"].span(r.get("d_norm_ci_low"), r.get("d_norm_ci_high"))
                            or "n/a"} for r in summary]
    definition = study.get("definition") or {}
    seeds = list(definition.get("seeds") or [])
    perts = list(definition.get("perturbations") or [])
    runs = path / "runs" / str(definition.get("scenario", ""))
    pair_formats = {k: words.format(k, [r.get(k) for r in rows]) for k in ("d_norm", "answer_changed", "applied")}
    for row in rows:
        # A pair's runs are pair<i>-baseline and pair<i>-p<k> (simcore.perturbation.study.write_study).
        i = seeds.index(row.get("seed")) if row.get("seed") in seeds else None
        k = perts.index(row.get("perturbation")) if row.get("perturbation") in perts else None
        base = pert = None
        if i is not None and k is not None:
            if (runs / f"pair{i}-baseline").is_dir() and (runs / f"pair{i}-p{k}").is_dir():
                base = (runs / f"pair{i}-baseline").relative_to(root).as_posix()
                pert = (runs / f"pair{i}-p{k}").relative_to(root).as_posix()
        texts = {k: f.text(row.get(k)) for k, f in pair_formats.items()}
        ctx["pairs"].append({**row, "pair": i, "baseline_id": base, "perturbed_id": pert, "texts": texts})
    ctx["pair_names"] = {k: words.name(k) for k in ("d_norm", "t_star", "reroutes", "answer_changed", "applied",
                                                     "manifestation")}
    return ctx


async def study_page(request: web.Request) -> web.Response:
    eid, path = _entry_dir(request, "study")
    ctx = await _in_thread(_study_context, request.app[ROOT_KEY], eid, path)
    return _render(request, "study.html", **ctx)


# -- the glossary --------------------------------------------------------------------------

def _glossary_context() -> dict[str, Any]:
    """Every installed scenario's declared metrics, and a study's, for the glossary page."""
    sections = []
    for item in installed_scenarios():
        scenario = scenario_named(item.name) if item.ok and "<" not in item.name else None
        if scenario is None or not scenario.metrics:
            continue
        sections.append(_glossary_section(scenario.name, scenario.description, vocabulary(scenario.name)))
    sections.append(_glossary_section("study", "A perturbation study's tables: each pair of a clean baseline and "
                                      "its perturbed run, and the summary per perturbation.", study_vocabulary()))
    return {"sections": sections, "crumbs": [("glossary", None, "")], "damage": []}


def _glossary_section(scope: str, about: str, words: Vocabulary) -> dict[str, Any]:
    rows = []
    for name, info in words.metrics.items():
        kind = words.kinds.get(name)
        rows.append({"name": name, "anchor": glossary_anchor(scope, name), "info": info, "key": name in words.keys,
                     "kind": kind.label() if kind is not None else ""})
    rows.sort(key=lambda r: (not r["key"], words.keys.index(r["name"]) if r["key"] else 0, r["name"]))
    return {"scope": scope, "about": about, "rows": rows}


async def glossary(request: web.Request) -> web.Response:
    ctx = await _in_thread(_glossary_context)
    return _render(request, "glossary.html", **ctx)


# -- files -------------------------------------------------------------------------------

async def plot(request: web.Request) -> web.Response:
    eid = request.match_info["id"]
    root = request.app[ROOT_KEY]
    name = request.query.get("name", "")
    try:
        path = resolve_id(root, eid)
        parts = split_id(name)
    except BadId as exc:
        raise _not_found(str(exc)) from None
    file = path.joinpath(*parts)
    if not name.endswith(".png") or not file.is_file() or not inside(root, file):
        raise _not_found(f"no plot {name!r}")

    def load() -> bytes:
        data = file.read_bytes()
        # (a run's manifest, or a mechanism comparison's: simcore.base.files reads each by its kind;
        # one that records its files lists every file it vouches for, so an unlisted one is damage)
        recorded = recorded_files(path)
        if recorded is not None and name not in recorded:
            raise DamagedFile(file, "is not among the files that manifest.json records")
        if recorded is not None and hashlib.sha256(data).hexdigest() != recorded[name]:
            raise DamagedFile(file, "damaged: its sha256 is not the one manifest.json records")
        return data

    try:
        data = await _in_thread(load)
    except DamagedFile as exc:
        raise web.HTTPUnprocessableEntity(text=str(exc)) from None
    return web.Response(body=data, content_type="image/png")


async def download(request: web.Request) -> web.Response:
    """A file the entry's page offers, as an attachment (:func:`simcore.view.downloads.read_offered`)."""
    _, path = _entry_dir(request)
    name = request.query.get("name", "")
    try:
        data, content_type = await _in_thread(read_offered, request.app[ROOT_KEY], path, name)
    except BadId as exc:
        raise _not_found(str(exc)) from None
    except DamagedFile as exc:
        raise web.HTTPUnprocessableEntity(text=str(exc)) from None
    filename = name.rsplit("/", 1)[-1]
    return web.Response(body=data, content_type=content_type,
                        headers={"Content-Disposition": f'attachment; filename="{filename}"'})


async def favicon(request: web.Request) -> web.Response:
    """The icon, for browsers that ask for ``/favicon.ico`` before reading a page's link."""
    return web.Response(body=(STATIC / "favicon.svg").read_bytes(), content_type="image/svg+xml",
                        headers={"Cache-Control": "max-age=86400"})


@web.middleware
async def errors(request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
    """Unexpected failures become a 500 page naming the problem; the server goes on."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except DamagedFile as exc:
        return web.Response(text=f"damaged: {exc}", status=500)
    except Exception as exc:  # noqa: BLE001 - one bad page must not stop the server
        return web.Response(text=f"error: {type(exc).__name__}: {exc}", status=500)


@web.middleware
async def headers(request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
    """Pages load nothing from elsewhere, and are not framed."""
    response = await handler(request)
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response


def make_app(runs_dir: str | Path, clock: Callable[[], float] = time.time, poll_s: float = 2.0) -> web.Application:
    """The browser's application over ``runs_dir``; ``clock`` (the wall clock, seconds since the
    epoch) judges running sweeps' heartbeats, and a running sweep's or group's page asks for its
    progress every ``poll_s`` seconds (tables' rows every ``ROWS_POLL_S``)."""
    app = web.Application(middlewares=[headers, errors])
    root = Path(runs_dir).resolve()
    app[ROOT_KEY] = root
    app[CATALOG_KEY] = Catalog(root)
    app[ENV_KEY] = _environment()
    app[ENV_KEY].globals.update(poll_s=poll_s, rows_poll_s=ROWS_POLL_S)
    app[REPLAY_LOCK_KEY] = asyncio.Lock()
    app[CLOCK_KEY] = clock
    app.add_routes([
        web.get("/", index),
        web.get("/rows", index_rows),
        web.get("/run/{id:.+}", run_page),
        web.get("/prompt/{id:.+}", prompt),
        web.post("/replay/{id:.+}", replay),
        web.get("/compare", compare),
        web.get("/group/{id:.+}", group_page),
        web.get("/sweep/{id:.+}", sweep_page),
        web.get("/sweep-rows/{id:.+}", sweep_rows),
        web.get("/study/{id:.+}", study_page),
        web.get("/comparison/{id:.+}", comparison_page),
        web.get("/plot/{id:.+}", plot),
        web.get("/file/{id:.+}", download),
        web.get("/progress/{id:.+}", progress),
        web.get("/glossary", glossary),
        web.get("/favicon.ico", favicon),
        web.static("/static", STATIC, follow_symlinks=False),
    ])
    return app
