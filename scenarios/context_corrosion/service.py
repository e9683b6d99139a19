"""The HTTP service of context corrosion (the seed's HTTP API), on aiohttp.web.

A web service of this one scenario: it runs its experiments on request. It is not
simcore's run browser (:mod:`simcore.view`, which reads any run directory), though
both serve the same run-directory layout.

``python -m scenarios.context_corrosion serve [--host H] [--port P] [--out DIR]``
binds 127.0.0.1:8000 by default. Endpoints:

- ``POST /run-experiment``: one run, or a counterfactual pair
  (``run_counterfactual``); body fields ``task_id`` 0-4, ``temperature`` 0-1,
  ``rounds`` 1-5, ``biased_dominant``, ``run_counterfactual``, ``seed``.
- ``POST /run-monte-carlo``: ``n_trials`` per arm (the range of ``--trials``:
  ``MIN_TRIALS`` to ``MAX_TRIALS`` of :mod:`simcore.runs.counterfactual`), arms sharing seeds;
  body fields ``task_id``, ``temperature``, ``rounds``, ``n_trials``, ``seed``.
- ``GET /experiment/{id}``: the full log of a run (``experiment.json``) or the
  summary of a pair or Monte Carlo (``summary.json``).
- ``GET /tasks``, ``GET /health``.
- ``GET /static/experiments/{id}/plots/{file}.png``: the plots.

Every experiment lands in the run-directory layout (``<out>/context_corrosion/<id>/``),
so the CLI, replay and the batch tools read API runs too, and stored records are
read back through :mod:`simcore.base.files`. Experiments run one at a time in a
worker process, so the server keeps answering while one is being computed.

Answers other than 200 (always ``{"error": "<field>: what is wrong", "field": ...}``):

- 400: a body that is not a JSON object of the allowed fields and values
  (malformed, not UTF-8, nested, a huge number, a key given twice ...), or an id
  that is not a run id; 408: a body slower than ``BODY_TIMEOUT_S``; 413: a body
  over ``MAX_BODY`` bytes;
- 404: no such experiment or plot; 500 (field ``record``): the stored record is
  damaged (named, relative to the output root);
- 503 with ``Retry-After``: ``MAX_QUEUE`` experiments are already waiting or
  running, or the server is stopping.

An experiment whose client has hung up is cancelled at its next trial. SIGTERM
or SIGINT stops the server within ``GRACE_S`` plus a second or so: running work is
cancelled, and killed if it does not stop in time (its staging directories are
removed; finished run directories are whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import multiprocessing
import re
import secrets
import shutil
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from aiohttp import web

from scenarios.context_corrosion.tasks import TASKS
from simcore.api import (
    MAX_SEED,
    MAX_TRIALS,
    MIN_TRIALS,
    OBJECT,
    RUN_ID,
    TEXT,
    BackendSpec,
    ConfigError,
    DamagedFile,
    OneLineParser,
    backend_spec,
    check_run_id,
    fail,
    load_scenario,
    new_run_id,
    parse_json,
    quality_warnings,
    read_record,
    read_run,
    run_arms_async,
    run_trial_async,
    trial_dir,
    write_run,
)

SCENARIO_NAME = "context_corrosion"
PLOT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\.png$")
MAX_BODY = 64 * 1024  # bytes; every valid body is far smaller
BODY_TIMEOUT_S = 10.0  # a body that takes longer to arrive gets 408
MAX_QUEUE = 4  # experiments accepted at once (waiting or running); past it, 503
GRACE_S = 2.0  # on shutdown, how long a running experiment may take to stop before it is killed


@dataclass(frozen=True)
class Field:
    """One accepted body field: its JSON type, range and default."""

    kind: str  # "int", "number" or "bool"
    default: Any
    lo: float | None = None
    hi: float | None = None

    def describe(self) -> str:
        noun = {"int": "an integer", "number": "a number", "bool": "true or false"}[self.kind]
        return f"{noun} from {self.lo:g} to {self.hi:g}" if self.lo is not None else noun

    def check(self, name: str, value: Any) -> Any:
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value),
            "bool": isinstance(value, bool),
        }[self.kind]
        if ok and self.lo is not None:
            ok = self.lo <= value <= self.hi  # type: ignore[operator]
        if not ok:
            raise ConfigError(f"{name}: must be {self.describe()}, got {json.dumps(value)}")
        return float(value) if self.kind == "number" else value


def fresh_seed() -> int:
    """A new random seed for a request that gives none: repeating a request replicates the
    experiment instead of returning the same trials (the seed used is in the response)."""
    return secrets.randbelow(MAX_SEED + 1)


COMMON = {
    "task_id": Field("int", 0, 0, 4),
    "temperature": Field("number", 0.7, 0.0, 1.0),
    "rounds": Field("int", 3, 1, 5),
    "seed": Field("int", fresh_seed, 0, MAX_SEED),
}
EXPERIMENT_FIELDS = {
    **COMMON,
    "biased_dominant": Field("bool", True),
    "run_counterfactual": Field("bool", False),
}
MONTE_CARLO_FIELDS = {**COMMON, "n_trials": Field("int", 5, MIN_TRIALS, MAX_TRIALS)}


def parse_body(raw: bytes, fields: Mapping[str, Field]) -> dict[str, Any]:
    """Validate a request body against ``fields``; defaults fill what is missing.

    Raises:
        ConfigError: naming the offending field (``body`` for a body that is not
            a JSON object: malformed, not UTF-8, nested too deeply, an integer
            with too many digits, a key given twice).
    """
    try:
        data = parse_json(raw if raw.strip() else b"{}")
    except ValueError as exc:
        raise ConfigError(f"body: must be a JSON object; {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"body: must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown field; allowed: {', '.join(fields)}")
    return {
        name: f.check(name, data[name]) if name in data else (f.default() if callable(f.default) else f.default)
        for name, f in fields.items()
    }


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON error response; ``field`` is the name before the first colon."""
    return web.json_response({"error": message, "field": message.split(":", 1)[0]}, status=status,
                             headers=headers)


# -- views of stored records (read through simcore.base.files) -----------------------

def run_view(run_dir: Path) -> dict[str, Any]:
    """A run's seed-style view from its results.json."""
    run_id = run_dir.name
    res = read_run(run_dir, trace=False).results
    return {
        "experiment_id": run_id,
        "status": res["status"],
        "seed": res.get("seed"),
        "task_id": res.get("task_id"),
        "task_title": res.get("task_title"),
        "biased_dominant": res.get("biased_dominant"),
        "metrics_summary": res.get("metrics_summary"),
        # What each figure rests on, and how the replies were read.
        "basis": res.get("basis"),
        "parse_quality": res.get("parse_quality"),
        "warnings": quality_warnings(res.get("parse_quality") or {}),
        "plots": urls(run_id, res.get("plots")),
    }


def group_view(root: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """The seed's counterfactual or Monte Carlo response from a group summary."""
    gid = summary["experiment_id"]
    cfg = summary["config"]
    if summary["mode"] == "counterfactual":
        return {
            "mode": "counterfactual",
            "experiment_id": gid,
            "seed": summary.get("seed"),
            "task_id": cfg.get("task"),
            "run_A": run_view(trial_dir(root / gid, summary, summary["run_A_trial_ids"][0])),
            "run_B": run_view(trial_dir(root / gid, summary, summary["run_B_trial_ids"][0])),
            "counterfactual_comparison": summary.get("counterfactual_comparison"),
            "failed_trials": summary.get("failed_trials", []),
        }
    return {**summary, "task_id": cfg.get("task"), "plots": urls(gid, summary.get("plots"))}


def urls(run_id: str, plots: Any) -> dict[str, str]:
    """Static URLs of a run's or group's plots (``{name: relative path}``)."""
    if not isinstance(plots, Mapping):
        return {}
    return {k: f"/static/experiments/{run_id}/{v}" for k, v in plots.items()}


def _name(value: Any) -> bool:
    # Checked like ids from a URL: a stored record must not lead outside the output root.
    return isinstance(value, str) and bool(RUN_ID.match(value)) and ".." not in value


def _run_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_name(v) for v in value)


SUMMARY_SCHEMA = {
    "mode": (lambda v: v in ("counterfactual", "monte_carlo"), "counterfactual or monte_carlo"),
    "experiment_id": TEXT,
    "config": OBJECT,
    "run_A_trial_ids": (_run_ids, "a non-empty list of run ids"),
    "run_B_trial_ids": (_run_ids, "a non-empty list of run ids"),
}


def experiment_dir(root: Path, experiment_id: str) -> Path:
    """Where a run, a group, or a group's trial is (or would be): a trial of group G is
    ``G-A<i>`` / ``G-B<i>``, found inside G once G's summary is written.

    Raises:
        DamagedFile: when the group's summary is there but fails its check.
    """
    d = root / experiment_id
    group = root / experiment_id.rpartition("-")[0]
    if not d.exists() and (group / "summary.json").is_file():
        summary = read_record(group / "summary.json", SUMMARY_SCHEMA)
        if experiment_id in summary["run_A_trial_ids"] + summary["run_B_trial_ids"]:
            return trial_dir(group, summary, experiment_id)
    return d


def lookup(root: Path, experiment_id: str) -> dict[str, Any] | None:
    """The stored record of a run, a group or a group's trial, or None if there is none.

    Raises:
        DamagedFile: when the record is there but fails its check.
    """
    d = experiment_dir(root, experiment_id)
    if (d / "experiment.json").is_file():
        record = read_record(d / "experiment.json")
        record["plots"] = urls(experiment_id, record.get("plots"))
        return {"experiment_id": experiment_id, **record}
    if (d / "summary.json").is_file():
        return group_view(root, read_record(d / "summary.json", SUMMARY_SCHEMA))
    if (d / "manifest.json").is_file():  # a run without a log (a failed trial)
        return run_view(d)
    return None


# -- the work, in the worker process ----------------------------------------------

_CANCEL: Any = None  # in the worker: the shared id of the job to stop


def _init_worker(cancel: Any) -> None:
    global _CANCEL
    _CANCEL = cancel
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    from tqdm import tqdm

    # tqdm's default lock is a multiprocessing semaphore, which a killed worker
    # would leave behind; the worker's bars are off anyway.
    tqdm.set_lock(threading.RLock())


def _run_job(job_id: int, kind: str, body: dict[str, Any], out: str, spec: BackendSpec, name: str) -> dict[str, Any]:
    """Run one experiment (in the worker process); ``{"cancelled": True}`` if stopped."""
    return asyncio.run(_job(job_id, kind, body, Path(out), spec, name))


async def _job(job_id: int, kind: str, body: dict[str, Any], out: Path, spec: BackendSpec, name: str) -> dict[str, Any]:
    def cancelled() -> bool:
        return _CANCEL is not None and _CANCEL.value == job_id

    scenario = load_scenario(SCENARIO_NAME)  # found by name, as every entry point finds one
    root = out / SCENARIO_NAME
    try:
        if cancelled():
            raise asyncio.CancelledError
        if kind == "single":
            cfg = _config(scenario, body, body["biased_dominant"])
            trial = await run_trial_async(scenario, cfg, body["seed"], spec)
            if cancelled():
                raise asyncio.CancelledError
            return {"mode": "single", **run_view(write_run(trial, out, name))}
        n_trials = body["n_trials"] if kind == "monte_carlo" else None
        summary = await run_arms_async(scenario, _config(scenario, body), body["seed"], n_trials=n_trials,
                                       spec=spec, out=out, progress=False, group_id=name, cancelled=cancelled)
        return group_view(root, summary)
    except asyncio.CancelledError:
        return {"cancelled": True}


def _config(scenario: Any, body: Mapping[str, Any], biased: bool = True) -> Any:
    return scenario.config_type(
        task=body["task_id"], temperature=body["temperature"], rounds=body["rounds"], biased=biased
    )


def _noop() -> None:
    """A first task that makes the worker process start."""


class Worker:
    """The process experiments run in, one at a time: cancellable, killable.

    It forks from a clean server process (not from the API's own, whose threads
    make fork unsafe) that has imported the heavy modules once. Forking from it
    blocks until those imports are done, so the worker is started from a thread
    of its own, never from the event loop.
    """

    def __init__(self) -> None:
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(
            ["scenarios.context_corrosion", "simcore.runs.counterfactual", "simcore.analysis.minilm", "scipy.special",
             "tokenizers", "safetensors.numpy"])
        self.cancel_id = self._ctx.Value("q", 0, lock=False)  # the job the worker is to stop
        self._pool: ProcessPoolExecutor | None = None
        self._ready: asyncio.Future[None] | None = None

    @property
    def ready(self) -> bool:
        """Whether the process is up."""
        return self._ready is not None and self._ready.done() and self._ready.exception() is None

    def start(self) -> asyncio.Future[None]:
        """Start the process in the background; the future is done when it is up."""
        if self._ready is None:
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[None] = loop.create_future()
            pool = ProcessPoolExecutor(max_workers=1, mp_context=self._ctx, initializer=_init_worker,
                                       initargs=(self.cancel_id,))
            self._pool, self._ready = pool, ready

            def warm() -> None:
                try:
                    pool.submit(_noop).result()
                    outcome: BaseException | None = None
                except BaseException as exc:  # noqa: BLE001 - reported to whoever waits
                    outcome = exc
                if self._pool is not pool:  # killed while it was starting
                    _kill(pool)
                with contextlib.suppress(RuntimeError):  # the loop may be gone
                    loop.call_soon_threadsafe(_settle, ready, outcome)

            threading.Thread(target=warm, name="cc-worker-start", daemon=True).start()
        return self._ready

    async def run(self, *args: Any) -> Any:
        """Run ``args[0](*args[1:])`` in the worker process.

        Raises:
            BrokenProcessPool: when the process died or was killed.
        """
        ready = self.start()
        pool = self._pool
        try:
            await asyncio.shield(ready)
            if pool is not self._pool:
                raise BrokenProcessPool("the worker process was stopped")
            assert pool is not None
            return await asyncio.wrap_future(pool.submit(*args))
        except BrokenProcessPool:
            if pool is self._pool:
                self.kill()  # a new process next time
            raise

    def kill(self) -> None:
        """Kill the process, whatever it is doing."""
        pool, ready = self._pool, self._ready
        self._pool = self._ready = None
        if ready is not None and not ready.done():
            # Still starting: the starting thread holds the pool's lock until the
            # process is up, and kills it then (see start); waiters learn now.
            ready.set_exception(BrokenProcessPool("the worker process was stopped"))
        elif pool is not None:
            _kill(pool)

    def close(self) -> None:
        """Let an idle process exit (one still starting is killed once it is up)."""
        ready = self._ready
        if ready is not None and not ready.done():
            self.kill()
            return
        pool, self._pool, self._ready = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _kill(pool: ProcessPoolExecutor) -> None:
    # ProcessPoolExecutor has no public way to stop a running task (3.14 adds
    # kill_workers); its process table is the only handle.
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            proc.kill()
    # With its process dead the pool's manager thread ends at once; waiting for it
    # lets it release the pool's queues (else they leak semaphores at exit).
    pool.shutdown(wait=True, cancel_futures=True)


def _settle(future: asyncio.Future[None], outcome: BaseException | None) -> None:
    if not future.done():
        if outcome is None:
            future.set_result(None)
        else:
            future.set_exception(outcome)


# -- the service ------------------------------------------------------------------

@dataclass
class Job:
    """One accepted experiment: its number and the id its run or group directory gets."""

    id: int
    kind: str
    name: str
    started: float = 0.0


class Service:
    """Runs experiments into ``out`` in one worker process, and reads them back.

    Experiments run one at a time in a separate process, so that neither their CPU
    work nor the GIL slows the server down: ``/health`` and lookups answer at once
    whatever is running. At most ``max_queue`` experiments are accepted (waiting or
    running); past that a request gets 503 with ``Retry-After``. An experiment whose
    client has gone is cancelled (at its next trial), and so is every experiment on
    shutdown; one that does not stop within ``grace_s`` is killed with its worker,
    and its half-written staging directories are removed.

    Args:
        out: Output root (runs land in ``out/context_corrosion/``).
        spec: Backend for every experiment.
        max_queue: Experiments accepted at once, waiting or running.
        grace_s: How long shutdown waits for a running experiment to stop.
    """

    def __init__(self, out: str | Path = "runs", spec: BackendSpec | None = None, *,
                 max_queue: int = MAX_QUEUE, grace_s: float = GRACE_S) -> None:
        self.out = Path(out)
        self.root = self.out / SCENARIO_NAME
        self.spec = spec or BackendSpec()
        self.max_queue = max_queue
        self.grace_s = grace_s
        self.pending = 0  # accepted and not answered: waiting or running
        self.closing = False
        self.running: tuple[Job, asyncio.Future[Any]] | None = None
        self.job_s = 10.0  # moving average of an experiment's duration, for Retry-After
        self._turn = asyncio.Lock()  # FIFO: experiments run in the order they came
        self._ids = itertools.count(1)
        self.worker = Worker()

    def _remove_staging(self, job: Job) -> None:
        """Remove the staging directories a killed job left (its run ids start with its name;
        a group's trials are staged inside the group's directory)."""
        if self.root.is_dir():
            for stage in [*self.root.glob(f".{job.name}*.tmp"), *self.root.glob(f"{job.name}/*/.{job.name}*.tmp")]:
                shutil.rmtree(stage, ignore_errors=True)

    # -- accepting and running experiments --------------------------------------
    def busy(self) -> web.Response | None:
        """503 with Retry-After when no more work can be accepted, else None."""
        if self.closing:
            return error(503, "server: shutting down", {"Retry-After": "5"})
        if self.pending >= self.max_queue:
            wait = max(1, math.ceil(self.job_s * self.pending))
            return error(503, f"server: busy, {self.pending} experiments are waiting or running "
                              f"(the limit); retry later", {"Retry-After": str(wait)})
        return None

    async def submit(self, request: web.Request, kind: str, body: dict[str, Any]) -> web.Response:
        """Queue an experiment, run it when its turn comes, and answer with its view."""
        refused = self.busy()
        if refused is not None:
            return refused
        self.pending += 1
        prefix = {"single": "", "counterfactual": "cf-", "monte_carlo": "mc-"}[kind]
        job = Job(next(self._ids), kind, prefix + new_run_id(body["seed"]))
        try:
            async with self._turn:
                if self.closing:
                    return error(503, "server: shutting down", {"Retry-After": "5"})
                if _gone(request):
                    return error(503, "request: the client went away before the experiment started")
                return await self._run(request, job, body)
        finally:
            self.pending -= 1

    async def _run(self, request: web.Request, job: Job, body: dict[str, Any]) -> web.Response:
        loop = asyncio.get_running_loop()
        job.started = loop.time()
        fut = asyncio.ensure_future(
            self.worker.run(_run_job, job.id, job.kind, body, str(self.out), self.spec, job.name))
        self.running = (job, fut)
        try:
            while not fut.done():
                await asyncio.wait({fut}, timeout=0.1)
                if not fut.done() and _gone(request):
                    self.worker.cancel_id.value = job.id  # the worker stops at the next trial
            result = fut.result()
        except asyncio.CancelledError:
            self.worker.cancel_id.value = job.id
            raise
        except BrokenProcessPool:
            if self.closing:
                return error(503, "server: shutting down; the experiment was stopped", {"Retry-After": "5"})
            return error(500, "experiment: the worker process stopped; nothing was recorded for this request")
        except Exception as exc:  # noqa: BLE001 - a bug in an experiment must not take the server down
            return error(500, f"experiment: failed: {type(exc).__name__}: {exc}")
        finally:
            self.running = None
        self.job_s = 0.7 * self.job_s + 0.3 * (loop.time() - job.started)
        if result.get("cancelled"):
            return error(503, "request: cancelled (the client went away, or the server is stopping)")
        return json_response(result)

    async def close(self) -> None:
        """Stop: refuse new work, cancel what runs, kill it after ``grace_s``."""
        self.closing = True
        if self.running is not None:
            job, fut = self.running
            self.worker.cancel_id.value = job.id
            done, _ = await asyncio.wait({fut}, timeout=self.grace_s if self.worker.ready else 0)
            if not done:
                self.worker.kill()
                await asyncio.wait({fut}, timeout=1.0)
                self._remove_staging(job)
        self.worker.close()

    # -- handlers -----------------------------------------------------------
    async def read_body(self, request: web.Request, fields: Mapping[str, Field]) -> dict[str, Any] | web.Response:
        """The validated body, or the error response (400, 408 or 413)."""
        try:
            raw = await asyncio.wait_for(request.read(), BODY_TIMEOUT_S)
        except asyncio.TimeoutError:
            return error(408, f"body: not received within {BODY_TIMEOUT_S:g} s")
        except web.HTTPRequestEntityTooLarge:
            return error(413, f"body: must be at most {MAX_BODY} bytes")
        try:
            return parse_body(raw, fields)
        except ConfigError as exc:
            return error(400, str(exc))

    async def run_experiment(self, request: web.Request) -> web.Response:
        body = await self.read_body(request, EXPERIMENT_FIELDS)
        if isinstance(body, web.Response):
            return body
        return await self.submit(request, "counterfactual" if body["run_counterfactual"] else "single", body)

    async def run_monte_carlo(self, request: web.Request) -> web.Response:
        body = await self.read_body(request, MONTE_CARLO_FIELDS)
        if isinstance(body, web.Response):
            return body
        return await self.submit(request, "monte_carlo", body)

    async def experiment(self, request: web.Request) -> web.Response:
        eid = request.match_info["id"]
        try:
            check_run_id(eid)
        except ValueError:
            return error(400, f"experiment_id: must be letters, digits, '.', '_' or '-' (no '..'); got {eid!r}")
        try:
            record = await asyncio.to_thread(lookup, self.root, eid)
        except DamagedFile as exc:
            # Named relative to the output root: the client has no business with server paths.
            try:
                where = Path(exc.path).resolve().relative_to(self.out.resolve()).as_posix()
            except ValueError:
                where = Path(exc.path).name
            return error(500, f"record: the stored record of experiment {eid!r} is damaged: {where}: {exc.problem}")
        if record is None:
            return error(404, f"experiment_id: no experiment {eid!r}")
        return json_response(record)

    async def static_plot(self, request: web.Request) -> web.StreamResponse:
        eid, name = request.match_info["id"], request.match_info["name"]
        try:
            check_run_id(eid)
        except ValueError:
            return error(400, f"experiment_id: must be letters, digits, '.', '_' or '-' (no '..'); got {eid!r}")
        if not PLOT_NAME.match(name) or ".." in name:
            return error(400, f"file: must be a plot file name like similarity_heatmap_run_a.png; got {name!r}")
        try:
            path = await asyncio.to_thread(experiment_dir, self.root, eid) / "plots" / name
        except DamagedFile:
            path = None
        if path is None or not path.is_file():
            return error(404, f"file: no plot {name!r} for experiment {eid!r}")
        return web.FileResponse(path)

    async def tasks(self, request: web.Request) -> web.Response:
        return json_response([t.to_dict() for t in TASKS])

    async def health(self, request: web.Request) -> web.Response:
        return json_response({"status": "ok"})


def _gone(request: web.Request) -> bool:
    """Whether the client has closed its connection."""
    transport = request.transport
    return transport is None or transport.is_closing()


def json_response(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status, dumps=lambda v: json.dumps(v, default=str))


SERVICE = web.AppKey("service", Service)


def make_app(out: str | Path = "runs", spec: BackendSpec | None = None, *,
             max_queue: int = MAX_QUEUE, grace_s: float = GRACE_S) -> web.Application:
    """The aiohttp application (also used by the tests); see :class:`Service` for the limits."""
    service = Service(out, spec, max_queue=max_queue, grace_s=grace_s)
    app = web.Application(client_max_size=MAX_BODY)
    app[SERVICE] = service
    app.add_routes([
        web.post("/run-experiment", service.run_experiment),
        web.post("/run-monte-carlo", service.run_monte_carlo),
        web.get("/experiment/{id}", service.experiment),
        web.get("/static/experiments/{id}/plots/{name}", service.static_plot),
        web.get("/tasks", service.tasks),
        web.get("/health", service.health),
    ])

    async def startup(app: web.Application) -> None:
        # Serve once experiments can run: the first start of the worker imports the
        # heavy modules (seconds), and a server stopped during it would have to
        # abandon a process half-way through its start.
        await service.worker.start()

    async def shutdown(app: web.Application) -> None:
        await service.close()

    app.on_startup.append(startup)
    app.on_shutdown.append(shutdown)
    return app


async def serve(host: str, port: int, out: str | Path, spec: BackendSpec, max_queue: int = MAX_QUEUE) -> None:
    """Serve until SIGINT or SIGTERM; prints the bound address first."""
    # A short shutdown timeout: the app's own shutdown hook has already stopped the work.
    runner = web.AppRunner(make_app(out, spec, max_queue=max_queue), shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]
    print(f"context_corrosion API on http://{bound[0]}:{bound[1]} (runs in {out}); Ctrl-C stops it", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def build_serve_parser() -> OneLineParser:
    """The ``serve`` subcommand's parser."""
    parser = OneLineParser(
        prog="python -m scenarios.context_corrosion serve",
        description="Serve the context-corrosion HTTP API (POST /run-experiment, POST /run-monte-carlo, "
        "GET /experiment/{id}, GET /tasks, GET /health, plots under /static/experiments/).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", default="8000", help="port, 0 for any free one (default: 8000)")
    parser.add_argument("--out", default="runs", help="output root (default: runs)")
    parser.add_argument("--backend", default="stub", help="LLM backend (default: stub)")
    parser.add_argument("--model", default=None, help="model for the agents")
    parser.add_argument("--base-url", default=None, help="endpoint of an HTTP backend")
    parser.add_argument("--max-queue", default=str(MAX_QUEUE), metavar="N",
                        help=f"experiments accepted at once, waiting or running; past it, 503 (default: {MAX_QUEUE})")
    return parser


def serve_command(argv: Sequence[str]) -> int:
    """``python -m scenarios.context_corrosion serve``."""
    args = build_serve_parser().parse_args(list(argv))
    try:
        max_queue = int(args.max_queue)
        if max_queue < 1 or str(max_queue) != args.max_queue.strip():
            raise ValueError
    except ValueError:
        fail(f"max_queue: must be an integer >= 1, got {args.max_queue!r}")
    try:
        port = int(args.port)
        if not 0 <= port <= 65535 or str(port) != args.port.strip():
            raise ValueError
    except ValueError:
        fail(f"port: must be an integer from 0 to 65535, got {args.port!r}")
    try:
        spec = backend_spec(args)
    except ConfigError as exc:
        fail(str(exc))
    try:
        asyncio.run(serve(args.host, port, args.out, spec, max_queue))
    except OSError as exc:
        fail(f"host/port: cannot bind {args.host}:{port}: {exc.strerror or exc}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve_command(sys.argv[1:]))
