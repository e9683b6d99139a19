"""The HTTP API against a real server on 127.0.0.1 (ephemeral port), with a real client."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.context_corrosion.service import EXPERIMENT_FIELDS, make_app, parse_body
from simcore.base.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent


async def started(runner: web.AppRunner) -> str:
    """Start ``runner`` on 127.0.0.1 (a port the OS picks); its base URL."""
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return f"http://{host}:{port}"


@pytest_asyncio.fixture
async def server(tmp_path):
    """A running server on 127.0.0.1; yields (base URL, session, output root)."""
    runner = web.AppRunner(make_app(tmp_path))
    base = await started(runner)
    async with aiohttp.ClientSession() as session:
        yield base, session, tmp_path
    await runner.cleanup()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server, on a loop thread of its own, for the tests whose requests it refuses: nothing
    runs and nothing is written, so they share it (and the worker process it starts) rather
    than start one each. Yields (base URL, output root)."""
    out = tmp_path_factory.mktemp("refusing")
    thread = LoopThread()
    runner = web.AppRunner(make_app(out))

    base = thread.run(started(runner))
    yield base, out
    thread.run(runner.cleanup())
    thread.close()


@pytest_asyncio.fixture
async def refusing(shared_server):
    """The shared server with a client of this test's own; yields (base URL, session, output root)."""
    base, out = shared_server
    async with aiohttp.ClientSession() as session:
        yield base, session, out


async def post(session, url, body):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    async with session.post(url, data=data, headers={"Content-Type": "application/json"}) as r:
        return r.status, await r.json()


async def get(session, url):
    async with session.get(url) as r:
        return r.status, (await r.json() if r.content_type == "application/json" else await r.read())


@pytest.mark.asyncio
async def test_health_and_tasks(server):
    base, s, _ = server
    assert await get(s, f"{base}/health") == (200, {"status": "ok"})
    status, tasks = await get(s, f"{base}/tasks")
    assert status == 200 and [t["id"] for t in tasks] == [0, 1, 2, 3, 4]
    assert tasks[2]["title"] == "Medical Diagnosis Ambiguity" and "description" in tasks[2]


BAD = [
    ("/run-experiment", {"task_id": 5}, "task_id"),
    ("/run-experiment", {"task_id": "1"}, "task_id"),
    ("/run-experiment", {"temperature": 1.5}, "temperature"),
    ("/run-experiment", {"rounds": 0}, "rounds"),
    ("/run-experiment", {"rounds": 6}, "rounds"),
    ("/run-experiment", {"biased_dominant": "yes"}, "biased_dominant"),
    ("/run-experiment", {"run_counterfactual": 1}, "run_counterfactual"),
    ("/run-experiment", {"seed": -1}, "seed"),
    ("/run-experiment", {"task": 1}, "task"),
    ("/run-experiment", b"{not json", "body"),
    ("/run-experiment", b"[1, 2]", "body"),
    ("/run-monte-carlo", {"n_trials": 1}, "n_trials"),
    ("/run-monte-carlo", {"n_trials": 10_001}, "n_trials"),
    ("/run-monte-carlo", {"temperature": -0.1}, "temperature"),
    ("/run-monte-carlo", {"biased_dominant": True}, "biased_dominant"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("path", "body", "field"), BAD)
async def test_bad_bodies_get_400_naming_the_field(refusing, path, body, field):
    base, s, out = refusing
    status, payload = await post(s, base + path, body)
    assert status == 400
    assert payload["field"] == field and payload["error"].startswith(f"{field}:")
    assert not (out / "context_corrosion").exists()  # nothing ran, nothing written


def test_parse_body_defaults_and_ranges():
    body = parse_body(b"", EXPERIMENT_FIELDS)
    seed = body.pop("seed")
    assert body == {"task_id": 0, "temperature": 0.7, "rounds": 3,
                    "biased_dominant": True, "run_counterfactual": False}
    # No seed given: a fresh one each time (a repeated request replicates, it does not repeat).
    seeds = {seed} | {parse_body(b"", EXPERIMENT_FIELDS)["seed"] for _ in range(5)}
    assert len(seeds) > 1 and all(0 <= s < 2**32 for s in seeds)
    assert parse_body(b'{"seed": 42}', EXPERIMENT_FIELDS)["seed"] == 42
    assert parse_body(b'{"temperature": 1}', EXPERIMENT_FIELDS)["temperature"] == 1.0
    with pytest.raises(ConfigError, match="temperature: must be a number from 0 to 1, got NaN"):
        parse_body(b'{"temperature": NaN}', EXPERIMENT_FIELDS)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    [
        "/experiment/no-such-run",
        "/static/experiments/no-such-run/plots/similarity_heatmap_run_a.png",
    ],
)
async def test_unknown_ids_get_404(refusing, path):
    base, s, _ = refusing
    status, payload = await get(s, base + path)
    assert status == 404 and "no" in payload["error"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    [
        "/experiment/..",
        "/experiment/%2E%2E",
        "/experiment/..%2F..%2Fsecret",
        "/experiment/a%2F..%2F..%2Fsecret",
        "/static/experiments/%2E%2E/plots/secret.png",
        "/static/experiments/x/plots/..%2F..%2F..%2Fsecret.png",
        "/static/experiments/x/plots/secret.txt",
    ],
)
async def test_traversal_is_refused(refusing, path):
    base, s, out = refusing
    # plant files that a traversal would reach (the same ones for each path: the server is shared)
    (out / "secret").mkdir(exist_ok=True)
    (out / "secret" / "experiment.json").write_text('{"leak": true}')
    (out / "secret.png").write_bytes(b"leak")
    async with s.get(base + path) as r:
        body = await r.read()
    assert r.status in (400, 404)
    assert b"leak" not in body


@pytest.mark.asyncio
async def test_run_experiment_single_and_lookup(server):
    base, s, out = server
    status, res = await post(s, f"{base}/run-experiment", {"task_id": 2, "rounds": 1, "seed": 3})
    assert status == 200, res
    assert res["mode"] == "single" and res["status"] == "ok" and res["biased_dominant"] is True
    assert res["task_title"] == "Medical Diagnosis Ambiguity"
    ms = res["metrics_summary"]
    assert set(ms["lifecycle_entropy"]) == {"phase1", "round_1", "final"}
    assert set(ms["directional_delta_per_peer"]) == {"P1", "P2", "P3", "P4"}
    assert set(res["plots"]) == {"similarity_heatmap", "similarity_progression", "entropy_plot", "shift_plot"}
    eid = res["experiment_id"]
    assert (out / "context_corrosion" / eid / "embeddings.npz").is_file()
    status, log = await get(s, f"{base}/experiment/{eid}")
    assert status == 200 and log["experiment_id"] == eid
    assert len(log["replies"]) == 15 and log["transcript"] and log["metrics_summary"] == ms
    assert "convergence_matrix" in log and "directional_convergence" in log
    async with s.get(base + res["plots"]["similarity_heatmap"]) as r:
        assert r.status == 200 and r.content_type == "image/png"
        assert (await r.read())[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.asyncio
async def test_run_experiment_counterfactual(server):
    base, s, _ = server
    status, res = await post(
        s, f"{base}/run-experiment", {"rounds": 1, "seed": 4, "run_counterfactual": True, "biased_dominant": False}
    )
    assert status == 200, res
    assert res["mode"] == "counterfactual"
    assert res["run_A"]["biased_dominant"] is True and res["run_B"]["biased_dominant"] is False
    assert res["run_A"]["seed"] == res["run_B"]["seed"] == 4
    diff = res["counterfactual_comparison"]["difference_summary"]
    assert diff["statistical_mode"] == "single_trial_delta" and "directional delta" in diff["interpretation"]
    status, again = await get(s, f"{base}/experiment/{res['experiment_id']}")
    assert status == 200 and again["run_A"]["experiment_id"] == res["run_A"]["experiment_id"]
    # Each arm's run sits inside the pair's directory, and is found by its id, with its plots.
    status, run_a = await get(s, f"{base}/experiment/{res['run_A']['experiment_id']}")
    assert status == 200 and run_a["experiment_id"] == res["run_A"]["experiment_id"] and run_a["replies"]
    async with s.get(base + res["run_B"]["plots"]["similarity_heatmap"]) as r:
        assert r.status == 200 and r.content_type == "image/png"


@pytest.mark.asyncio
async def test_run_monte_carlo_and_server_stays_responsive(server):
    base, s, out = server
    job = asyncio.create_task(post(s, f"{base}/run-monte-carlo", {"n_trials": 2, "rounds": 1, "seed": 5}))
    # Health answers while the Monte Carlo still runs: a server blocked by it would answer
    # none of them before the job's own reply (whatever the machine's load).
    answered_while_running = 0
    while not job.done():
        assert (await get(s, f"{base}/health"))[0] == 200
        answered_while_running += not job.done()
        await asyncio.sleep(0.05)
    status, res = await job
    assert status == 200, res
    assert answered_while_running >= 2, answered_while_running
    assert res["mode"] == "monte_carlo" and res["n_trials"] == 2 and res["task_id"] == 0
    assert len(res["run_A_trial_ids"]) == len(res["run_B_trial_ids"]) == 2
    diff = res["statistical_comparison"]["difference_summary"]
    assert diff["statistical_mode"] == "multi_trial_welch_t"
    for key in ("delta_mean", "t_statistic", "p_value", "significant_p05", "cohen_d"):
        assert key in diff["avg_peer_directional_delta"]
    assert res["run_A_aggregate"]["avg_peer_directional_delta"]["n"] == 2
    async with s.get(base + res["plots"]["comparison"]) as r:
        assert r.status == 200 and r.content_type == "image/png"
    # The trials sit inside the group's directory; each is still found by its id.
    root = out / "context_corrosion"
    assert [p.name for p in root.iterdir()] == [res["experiment_id"]]
    for rid in res["run_A_trial_ids"] + res["run_B_trial_ids"]:
        status, trial = await get(s, f"{base}/experiment/{rid}")
        assert status == 200 and trial["experiment_id"] == rid, trial


# -- hostile requests ---------------------------------------------------------------

HOSTILE = [
    (b"[" * 60_000, "nested too deeply"),
    (b'{"seed": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "nested too deeply"),
    (b'{"seed": ' + b"9" * 5000 + b"}", "Exceeds the limit"),
    (b"9" * 5000, "Exceeds the limit"),
    (b'{"seed": 1, "seed": 2}', "duplicate key 'seed'"),
    (b'{"rounds": 1, "task_id": "\xff"}', "not UTF-8"),
    (b'\xef\xbb\xbf{"rounds": 1}', "malformed JSON"),  # a byte-order mark
    (b"null", "got NoneType"),
    (b'"run"', "got str"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("body", "problem"), HOSTILE)
@pytest.mark.parametrize("path", ["/run-experiment", "/run-monte-carlo"])
async def test_hostile_bodies_get_400_naming_the_problem(refusing, path, body, problem):
    base, s, out = refusing
    status, payload = await post(s, base + path, body)
    assert status == 400, payload
    assert payload["field"] == "body" and problem in payload["error"]
    assert not (out / "context_corrosion").exists()


@pytest.mark.asyncio
@pytest.mark.parametrize(("body", "field"), [
    ({"seed": 10**30}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"temperature": 1e400}, "temperature"),
    ({"rounds": [1]}, "rounds"),
    ({"rounds": {"n": 1}}, "rounds"),
    ({"biased_dominant": None}, "biased_dominant"),
    ({"n_trials": True}, "n_trials"),
])
async def test_wrong_types_get_400_naming_the_field(refusing, body, field):
    base, s, _ = refusing
    path = "/run-monte-carlo" if field == "n_trials" else "/run-experiment"
    data = json.dumps(body).replace("Infinity", "1e400")
    status, payload = await post(s, base + path, data)
    assert status == 400 and payload["field"] == field, payload


@pytest.mark.asyncio
async def test_an_oversized_body_gets_413(refusing):
    base, s, out = refusing
    status, payload = await post(s, f"{base}/run-experiment", b'{"seed": 1, "pad": "' + b"x" * 70_000 + b'"}')
    assert status == 413 and payload["field"] == "body" and "65536" in payload["error"]


@pytest.mark.asyncio
async def test_a_slow_body_gets_408_and_the_server_keeps_answering(server, monkeypatch):
    import scenarios.context_corrosion.service as service

    # The body's wait ends when the test says so, not after seconds: the server's
    # asyncio.wait_for for the body (told apart by its timeout) times out once `give_up` is set.
    give_up, real_wait_for = asyncio.Event(), asyncio.wait_for

    async def wait_for(work, timeout):
        if timeout != service.BODY_TIMEOUT_S:
            return await real_wait_for(work, timeout)
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(give_up.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not task.done():
            task.cancel()
            raise asyncio.TimeoutError
        return task.result()

    monkeypatch.setattr(service, "BODY_TIMEOUT_S", 3600.0)
    monkeypatch.setattr(asyncio, "wait_for", wait_for)
    base, s, _ = server
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /run-experiment HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"se")
    await writer.drain()
    slow = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
    # Health is answered while the slow body still holds its request open (no 408 yet): a
    # server waiting for that body would answer health only after giving up on it.
    assert (await get(s, f"{base}/health"))[0] == 200 and not slow.done()
    give_up.set()
    head = await real_wait_for(slow, 60)
    assert head.startswith(b"HTTP/1.1 408")
    writer.close()


@settings(max_examples=200, deadline=None)
@given(raw=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                     st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                                  lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                                      st.sampled_from(list(EXPERIMENT_FIELDS) + ["x"]), kids, max_size=4),
                                  max_leaves=8).map(lambda v: json.dumps(v).encode())))
def test_parse_body_accepts_or_names_the_problem(raw):
    try:
        body = parse_body(raw, EXPERIMENT_FIELDS)
    except ConfigError as exc:
        field = str(exc).split(":", 1)[0]
        assert field in (*EXPERIMENT_FIELDS, "body", "x") and "\n" not in str(exc)
    else:
        assert set(body) == set(EXPERIMENT_FIELDS)


# -- damaged records --------------------------------------------------------------

async def _stored_run(out: Path, seed: int = 3) -> Path:
    from scenarios.context_corrosion import SCENARIO
    from scenarios.context_corrosion.config import CorrosionConfig
    from simcore.runs.runner import run_trial_async, write_run

    trial = await run_trial_async(SCENARIO, CorrosionConfig(rounds=1, n_peers=2, metrics=False), seed)
    return write_run(trial, out)


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "content"), [
    ("experiment.json", b'{"replies": ['),
    ("experiment.json", b""),
    ("experiment.json", b'{"seed": 3}'),  # valid JSON, but not what the run wrote
])
async def test_a_damaged_record_is_a_500_that_names_it_never_a_bad_id(server, name, content):
    base, s, out = server
    run_dir = await _stored_run(out)
    eid = run_dir.name
    assert (await get(s, f"{base}/experiment/{eid}"))[0] == 200
    (run_dir / name).write_bytes(content)
    status, payload = await get(s, f"{base}/experiment/{eid}")
    assert status == 500, payload
    assert payload["field"] == "record" and "experiment_id" not in payload["error"]
    assert f"context_corrosion/{eid}/{name}" in payload["error"] and "damaged" in payload["error"]
    assert str(out) not in payload["error"]  # no server paths


@pytest.mark.asyncio
async def test_a_group_summary_naming_a_foreign_path_is_a_damaged_record(server):
    base, s, out = server
    group = out / "context_corrosion" / "cf-x"
    group.mkdir(parents=True)
    (group / "summary.json").write_text(json.dumps({
        "mode": "counterfactual", "experiment_id": "cf-x", "config": {"task": 0},
        "run_A_trial_ids": ["../../secret"], "run_B_trial_ids": ["b"]}))
    status, payload = await get(s, f"{base}/experiment/cf-x")
    assert status == 500 and payload["field"] == "record", payload
    assert "context_corrosion/cf-x/summary.json: run_A_trial_ids: must be a non-empty list of run ids" in payload["error"]
    (group / "summary.json").write_text(json.dumps({
        "mode": "counterfactual", "experiment_id": "cf-x", "config": {"task": 0}, "trials_dir": "../..",
        "run_A_trial_ids": ["a"], "run_B_trial_ids": ["b"]}))
    status, payload = await get(s, f"{base}/experiment/cf-x")
    assert status == 500 and payload["field"] == "record", payload
    assert "context_corrosion/cf-x/summary.json: trials_dir: must be a plain directory name" in payload["error"]


# -- a bounded queue, cancellation, shutdown ---------------------------------------------

class LoopThread:
    """An event loop on a thread of its own (so that a client's load is not the server's)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return predicate()


def test_a_flood_is_refused_with_retry_after_the_queue_holds_and_health_keeps_answering(tmp_path):
    from scenarios.context_corrosion.service import SERVICE

    server, prober = LoopThread(), LoopThread()
    app = make_app(tmp_path, max_queue=2)
    service = app[SERVICE]
    runner = web.AppRunner(app)

    base = server.run(started(runner))
    # Health answers that came back while the experiment was running: a server whose loop
    # waited behind the flood or the experiment would give none (whatever the machine's load).
    answered_while_running: list[bool] = []
    probing = threading.Event()
    probing.set()

    async def probe_health() -> None:  # on its own thread and loop, like another client
        async with aiohttp.ClientSession() as s:
            while probing.is_set():
                async with s.get(f"{base}/health") as r:
                    assert r.status == 200
                answered_while_running.append(service.running is not None)
                await asyncio.sleep(0.01)

    long_job = {"n_trials": 20, "rounds": 1}

    async def flood() -> tuple[list, list[str]]:
        clients = [aiohttp.ClientSession() for _ in range(2)]
        accepted = [asyncio.create_task(c.post(f"{base}/run-monte-carlo", json=long_job)) for c in clients]
        assert await _until(lambda: service.pending == 2 and service.running is not None, 20)
        prober_done = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(probe_health(), prober.loop))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:

            async def one():
                async with s.post(f"{base}/run-monte-carlo", json=long_job) as r:
                    return r.status, r.headers.get("Retry-After"), await r.json()

            answers = await asyncio.gather(*(one() for _ in range(200)))
        assert service.pending == 2  # the queue never grew past its bound
        # The clients hang up: the queued experiment never starts, the running one stops.
        for task in accepted:
            task.cancel()
        for c in clients:
            await c.close()
        # (running is None once the worker has answered: it has stopped and runs nothing more)
        assert await _until(lambda: service.pending == 0 and service.running is None, 30)
        root = tmp_path / "context_corrosion"
        written = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []
        probing.clear()
        await prober_done
        return answers, written

    try:
        answers, written = asyncio.run(flood())
    finally:
        probing.clear()
        server.run(runner.cleanup())
        server.close()
        prober.close()
    root = tmp_path / "context_corrosion"
    # nothing more, up to the server's shutdown (which stops its worker process)
    assert (sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []) == written
    assert {a[0] for a in answers} == {503}
    assert all(a[1] is not None and int(a[1]) >= 1 for a in answers)
    assert all(a[2]["field"] == "server" and "busy" in a[2]["error"] for a in answers)
    # Health never waited behind the flood or the running experiment.
    assert sum(answered_while_running) >= 2, answered_while_running
    # at most the trials in flight when the clients left were written, inside their group; no staging left
    trials = [n for n in written if n.count("/") == 2 and n.split("/")[1] == "trials"]
    assert len(trials) <= 4 and all(n.startswith("mc-") for n in written), written
    assert not [n for n in written if "/." in n or n.startswith(".")], written


def test_serve_binds_localhost_and_sigterm_stops_it_busy_leaving_only_whole_runs(tmp_path):
    """SIGTERM during a Monte Carlo stops the work rather than waiting for it: the process exits 0,
    the experiment's client gets the 503 that says which way it was stopped (at its next trial, or
    killed after the service's grace period: both bounded by the code, not by the machine's load),
    fewer trials were written than the Monte Carlo asked for, and every one written is whole."""
    from scenarios.context_corrosion.service import GRACE_S
    from simcore.base.files import read_run

    proc = subprocess.Popen(
        [sys.executable, "-m", "scenarios.context_corrosion", "serve", "--port", "0", "--out", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("context_corrosion API on http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[3]

        async def busy_then_term():
            async with aiohttp.ClientSession() as s:
                assert await get(s, f"{url}/health") == (200, {"status": "ok"})
                assert (await get(s, f"{url}/tasks"))[0] == 200
                job = asyncio.create_task(post(s, f"{url}/run-monte-carlo", {"n_trials": 20, "rounds": 1}))
                root = tmp_path / "context_corrosion"
                # wait until the Monte Carlo has written a trial (inside its group), then stop it mid-way
                assert await _until(lambda: any(not p.name.startswith(".") for p in root.glob("mc-*/trials/*")), 120)
                proc.send_signal(signal.SIGTERM)
                return await job

        status, body = asyncio.run(busy_then_term())
        # (a guard against a hang, far above the grace period, not a measure of speed)
        assert proc.wait(timeout=30 + GRACE_S) == 0
        assert status == 503 and body["error"] in (
            "request: cancelled (the client went away, or the server is stopping)",
            "server: shutting down; the experiment was stopped"), body
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    assert "Traceback" not in stderr and "leaked" not in stderr, stderr
    root = tmp_path / "context_corrosion"
    assert [p.name.startswith("mc-") for p in root.iterdir()] == [True]  # the group, stopped: no summary.json
    runs = list(root.glob("mc-*/trials/*"))
    assert runs and not [p for p in runs if p.name.startswith(".")]  # no staging directories
    assert len(runs) < 2 * 20  # stopped before the end: not every trial of both arms was run
    for run_dir in runs:
        read_run(run_dir)  # every run directory is whole
