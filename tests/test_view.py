"""The run browser (simcore.view): routes through aiohttp's test client, pages in headless Chromium.

Runs are made once per session in a temporary RUNS_DIR, on the stub, each the smallest
that shows its page: a run with a cassette (so its prompts are recorded), a shorter run
to compare it with, one run of every other scenario, a Monte Carlo group, a sweep, a
mechanism comparison, a perturbation study, a damaged run, links that lead outside
RUNS_DIR, and, from copies of the sweep and the group with a heartbeat written here, a
sweep and a group still running and a sweep that stopped. The app judges heartbeats by
:data:`CLOCK`, the tests' own clock, so nothing waits on the wall clock. Browser tests
are marked ``browser``, share one Chromium, and skip, saying why, where Chromium,
chromedriver or selenium is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import sys
import threading
import time
from html import unescape
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from markupsafe import escape

from simcore.view.app import _breakable, make_app
from simcore.view.paths import BadId, resolve_id, split_id

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

#: The clock the app judges heartbeats by (seconds since the epoch); tests move it.
CLOCK = [2_000_000_000.0]


def _clock() -> float:
    return CLOCK[0]


def write_heartbeat(directory: Path, written: int, total: int, *, beat: float, last_trial: float | None,
                    started: float, kind: str = "sweep", **about) -> None:
    """A heartbeat as a running sweep or group writes it (simcore.base.heartbeat), at chosen times."""
    import json

    (directory / "heartbeat.json").write_text(json.dumps({
        **about, "kind": kind, "state": "running", "pid": 1, "started": started, "beat": beat, "beat_s": 10.0,
        "last_trial": last_trial, "total": total, "written": written, "failed": 0, "written_at_start": 0}))


def _quiet(fn, *args):
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        return fn(*args)


def _one(root: Path, pattern: str) -> str:
    found = sorted(p for p in root.glob(pattern) if p.is_dir())
    assert found, pattern
    return found[0].relative_to(root).as_posix()


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """A RUNS_DIR with one of each kind of entry, and the ids of what is in it."""
    from scenarios.context_corrosion import SCENARIO
    from simcore.batch.command import main as batch_main
    from simcore.perturbation import run_study, write_study
    from simcore.run import run_scenario

    base = tmp_path_factory.mktemp("view")
    root = base / "runs"
    root.mkdir()
    quick = ["--no-metrics", "--rounds", "2"]
    assert _quiet(run_scenario, "context_corrosion",
                  ["--seed", "7", *quick, "--out", str(root), "--cassette", str(base / "c.sqlite")]) == 0
    ids = {"cassette": _one(root, "context_corrosion/*-s7-*")}
    assert _quiet(run_scenario, "context_corrosion", ["--seed", "7", "--no-metrics", "--rounds", "1",
                                                       "--out", str(root / "short")]) == 0
    ids["short"] = _one(root, "short/context_corrosion/*-s7-*")
    # A Monte Carlo compares the arms' metrics, so it computes them (--no-metrics is refused there).
    assert _quiet(run_scenario, "context_corrosion", ["--seed", "3", "--rounds", "2", "--trials", "2",
                                                       "--out", str(root / "mc")]) == 0
    ids["group"] = _one(root, "mc/context_corrosion/mc-*[0-9a-f]")
    assert _quiet(batch_main, ["context_corrosion", "--trials", "1", "--grid", "rounds=1,2", "--no-metrics",
                               "--executor", "serial", "--no-plot", "--no-progress",
                               "--out", str(root / "sweeps" / "s1")]) == 0
    ids["sweep"] = "sweeps/s1"
    from scenarios.llm_auction import compare_command as compare_main

    assert _quiet(compare_main, ["--trials", "2", "--n-agents", "5", "--n-vignettes", "2",
                                 "--out", str(root / "cmp")]) == 0
    ids["comparison"] = _one(root, "cmp/llm_auction/compare-*")
    cfg = SCENARIO.config_type(rounds=2, metrics=False)
    study = _quiet(run_study, SCENARIO, cfg, ["drop:agent=P1,round=2"])
    ids["study"] = _quiet(write_study, study, root, None, True).relative_to(root).as_posix()
    # One run of every other scenario, the smallest that has its key metrics.
    for name, flags in (("veil_of_ignorance", ["--max-rounds", "1"]),
                        ("acausal_cooperation", ["--n-agents", "2", "--rounds", "2", "--no-embeddings"]),
                        ("llm_auction", ["--n-agents", "5", "--n-vignettes", "1"])):
        assert _quiet(run_scenario, name, ["--seed", "5", *flags, "--out", str(root / "each")]) == 0
        ids[name] = _one(root, f"each/{name}/*-s5-*")
    # A sweep still running (4 of 8 trials written, the last a moment ago) and one whose process
    # stopped two minutes ago; a Monte Carlo still running, one trial of each arm written.
    now = CLOCK[0]
    for name, beat in (("live", now - 1), ("stopped", now - 120)):
        copy = root / "sweeps" / name
        shutil.copytree(root / ids["sweep"], copy)
        for done in ("summary.json", "summary.csv", "results.csv", "results.parquet"):
            (copy / done).unlink(missing_ok=True)
        ledger = copy / "ledger.jsonl"
        ledger.write_bytes(b"".join(ledger.read_bytes().splitlines(keepends=True)[:2]))
        write_heartbeat(copy, 2, 4, beat=beat, last_trial=beat, started=beat - 20, scenario="context_corrosion")
        ids[f"{name}_sweep"] = f"sweeps/{name}"
    group = root / ids["group"]
    running = root / "mc" / "context_corrosion" / "mc-20990101T000000-s9-aaaaaa"
    for arm in "AB":
        trial = next((group / "trials").glob(f"*-{arm}0"))
        shutil.copytree(trial, running / "trials" / f"{running.name}-{arm}0")
    write_heartbeat(running, 2, 4, beat=now - 2, last_trial=now - 2, started=now - 12, kind="monte_carlo",
                    scenario="context_corrosion", seed=9, counterfactual={"field": "biased", "A": True, "B": False})
    ids["running_group"] = running.relative_to(root).as_posix()
    # A damaged run: the trace cut short.
    damaged = root / "damaged" / "cut-run"
    shutil.copytree(root / ids["short"], damaged)
    trace = damaged / "trace.jsonl"
    trace.write_bytes(trace.read_bytes()[: trace.stat().st_size // 2])
    ids["damaged"] = "damaged/cut-run"
    # Links leading out of RUNS_DIR: a whole run, and one run's manifest.
    outside = base / "outside"
    shutil.copytree(root / ids["short"], outside / "secret-run")
    (outside / "secret.txt").write_text("SECRET")
    (root / "linked").symlink_to(outside / "secret-run", target_is_directory=True)
    leak = root / "leaky" / "leak-run"
    shutil.copytree(root / ids["short"], leak)
    (leak / "manifest.json").unlink()
    (leak / "manifest.json").symlink_to(outside / "secret-run" / "manifest.json")
    ids["leaky"] = "leaky/leak-run"
    return root, ids


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


@contextlib.asynccontextmanager
async def client_for(root: Path):
    client = TestClient(TestServer(make_app(root, clock=_clock)))
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()


async def _get(root: Path, *urls: str) -> list[tuple[int, str]]:
    async with client_for(root) as client:
        out = []
        for url in urls:
            res = await client.get(url)
            out.append((res.status, await res.text()))
        return out


async def _get_bytes(root: Path, *urls: str) -> list[tuple[int, bytes]]:
    async with client_for(root) as client:
        return [(res.status, await res.read()) for res in [await client.get(url) for url in urls]]


def get(root: Path, *urls: str) -> list[tuple[int, str]]:
    return asyncio.run(_get(root, *urls))


async def _raw_get(root: Path, target: str) -> tuple[int, str]:
    """GET ``target`` exactly as written (an HTTP client would normalise ``..`` away)."""
    async with client_for(root) as client:
        reader, writer = await asyncio.open_connection(client.host, client.port)
        writer.write(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        raw = await reader.read()
        writer.close()
    head, _, body = raw.decode(errors="replace").partition("\r\n\r\n")
    return int(head.split()[1]), body


# -- ids and paths -------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["", "..", "a/../b", "/etc", "a//b", ".hidden", "a/.staging", "x" * 300,
                                 "a/b/c/d/e/f/g/h/i", "a\\b", "a\x00b", "%2e%2e"])
def test_split_id_refuses_anything_but_plain_names(bad):
    with pytest.raises(BadId):
        split_id(bad)


def test_resolve_id_refuses_a_symlink_that_leads_outside(runs):
    root, ids = runs
    with pytest.raises(BadId):
        resolve_id(root.resolve(), "linked")
    assert resolve_id(root.resolve(), ids["short"]).is_dir()


# -- routes ------------------------------------------------------------------------------------

def test_index_lists_every_kind_of_entry_and_the_damage(runs):
    root, ids = runs
    [(status, html)] = get(root, "/")
    assert status == 200
    for key in ("cassette", "short", "group", "sweep", "study", "damaged"):
        assert ids[key] in html, key
    for kind in ("run", "montecarlo", "sweep", "study"):
        assert f'data-k-kind="{kind}"' in html
    assert re.search(r"cut-run/trace.jsonl: damaged: \d+ lines where manifest.json records \d+ events", html)
    assert "leak-run" in html and "outside the runs directory" in html
    assert "secret-run" not in html and "SECRET" not in html


def test_run_page_shows_transcript_metrics_manifest_and_flags(runs):
    root, ids = runs
    [(status, html)] = get(root, f"/run/{ids['cassette']}")
    assert status == 200
    assert html.count('class="ev kind-message') >= 10
    assert "&rarr; D, P2, P3, P4" in html  # P1's audience on the complete topology
    assert 'class="prompt"' in html and "/prompt/" in html
    assert "manifest.json" in html and "trace_sha256" in html
    assert "Parse quality" in html and "in / " in html  # tokens per call


def test_run_page_pages_and_filters_the_transcript(runs):
    root, ids = runs
    (s1, page1), (s2, page2), (s3, only_p1) = get(
        root, f"/run/{ids['cassette']}?size=10", f"/run/{ids['cassette']}?size=10&page=2",
        f"/run/{ids['cassette']}?agent=P1&kind=message")
    assert s1 == s2 == s3 == 200
    seqs = lambda html: [int(s) for s in re.findall(r'id="ev(\d+)"', html)]  # noqa: E731
    assert seqs(page1) == list(range(10)) and seqs(page2) == list(range(10, 20))
    assert 'class="next"' in page1 and 'class="prev"' in page2
    assert only_p1.count('class="ev kind-message') == len(seqs(only_p1)) >= 2
    assert "<b class=\"who\">P1</b>" in only_p1 and "<b class=\"who\">P2</b>" not in only_p1


def test_prompt_comes_from_the_cassette(runs):
    root, ids = runs
    [(_, html)] = get(root, f"/run/{ids['cassette']}")
    key = re.search(r"request=([0-9a-f]{16})", html).group(1)
    (status, prompt), (bad_status, _), (missing, _) = get(
        root, f"/prompt/{ids['cassette']}?request={key}", f"/prompt/{ids['cassette']}?request=../../x",
        f"/prompt/{ids['cassette']}?request=0000000000000000")
    assert status == 200 and "role-system" in prompt and "role-user" in prompt and "Task:" in prompt
    assert bad_status == 400 and missing == 404


def test_a_run_without_a_cassette_says_it_recorded_no_prompts(runs):
    root, ids = runs
    [(status, html)] = get(root, f"/run/{ids['short']}")
    assert status == 200 and "recorded no prompts" in html and 'class="prompt"' not in html
    # The notes above the transcript are sentences apart ("keep one).Costs per call" once ran them together).
    notes = re.sub(r"\s+", " ", html.split('id="transcript-notes">', 1)[1].split("</p>", 1)[0])
    assert "keep one). Costs per call priced as stub." in notes and not re.search(r"[.)][A-Z]", notes), notes


def test_breakable_text_wraps_only_after_separators_and_stays_escaped():
    assert str(_breakable("mc/context_corrosion/mc-1.2")) == "mc/<wbr>context_<wbr>corrosion/<wbr>mc-<wbr>1.<wbr>2"
    assert str(_breakable("<b>_x")) == "&lt;b&gt;_<wbr>x"


def test_the_index_shows_each_key_metric_by_name_and_value(runs):
    from simcore.view.catalog import Catalog

    root, _ = runs
    [(status, html)] = get(root, "/")
    assert status == 200 and "ellipsis" not in html
    entries = {e.id: e for e in Catalog(root).scan()}
    shown = 0
    for row in _rows(html):
        eid = re.search(r'href="/[a-z]+/([^"]+)"', row).group(1)
        cell = row.split('class="metrics">', 1)[1].split("</td>", 1)[0]
        pairs = re.findall(r'<dt>(.*?)</dt><dd><span class="v">(.*?)</span>', cell)
        assert [(n.replace("<wbr>", ""), v) for n, v in pairs] == [
            (str(escape(f.name.label)), str(escape(f.text))) for f in entries[eid].figures], eid
        shown += len(pairs)
    assert shown >= 10


def test_the_key_metrics_are_the_ones_the_scenario_declares(runs):
    """A run's key figures are its scenario's declared key metrics, in their order, by their labels and
    in their units (not the first metrics by name)."""
    from simcore.base.files import read_record
    from simcore.runs.scenario import load_scenario
    from simcore.view.catalog import Catalog

    root, ids = runs
    entries = {e.id: e for e in Catalog(root).scan()}
    for name in ("veil_of_ignorance", "acausal_cooperation", "llm_auction"):
        scenario = load_scenario(name)
        metrics = read_record(root / ids[name] / "results.json")["metrics"]
        figures = entries[ids[name]].figures
        assert [f.name.name for f in figures] == [k for k in scenario.key_metrics() if k in metrics] != []
        assert [f.name.label for f in figures] == [scenario.metric_of(f.name.name).label for f in figures]
    veil = {f.name.name: f.text for f in entries[ids["veil_of_ignorance"]].figures}
    amount = read_record(root / ids["veil_of_ignorance"] / "results.json")["metrics"]["chosen_amount"]
    assert veil["chosen_amount"] == ("-" if amount is None else f"${amount:,}")
    assert veil["consensus_reached"] in ("yes", "no")
    assert entries[ids["llm_auction"]].figures[0].text.endswith("%")  # correctness, declared a percentage


def test_monte_carlo_and_comparison_rows_show_backend_cost_and_their_result(runs):
    from simcore.base.files import read_record
    from simcore.runs.scenario import load_scenario
    from simcore.view.catalog import Catalog

    root, ids = runs
    entries = {e.id: e for e in Catalog(root).scan()}
    group, comparison = entries[ids["group"]], entries[ids["comparison"]]
    assert (group.backend, group.models, group.cost_usd) == ("stub", ["stub"], 0.0)
    diffs = read_record(root / ids["group"] / "summary.json")["statistical_comparison"]["difference_summary"]
    compared = {k: d for k, d in diffs.items() if isinstance(d, dict) and "delta_mean" in d}
    # The group's key figures: the differences A - B of its scenario's declared key metrics, in their order.
    keys = [k for k in load_scenario("context_corrosion").key_metrics() if k in compared]
    assert [f.name.name for f in group.figures] == keys and keys
    assert all(f.name.label.startswith("Δ ") and f.value == pytest.approx(compared[f.name.name]["delta_mean"], abs=1e-9)
               for f in group.figures)
    assert [f.verdict for f in group.figures] == [
        "significant" if compared[k]["significant"] else "not significant" for k in keys]
    n = sum(d["significant"] for d in compared.values())
    assert group.note.endswith(f"; {n} of {len(compared)} metrics significant")
    assert (comparison.backend, comparison.models, comparison.cost_usd) == ("stub", ["stub"], 0.0)
    rows = [d for pair in read_record(root / ids["comparison"] / "comparison.json")["pairs"]
            for d in pair.values() if isinstance(d, dict) and isinstance(d.get("significant"), bool)]
    n = sum(d["significant"] for d in rows)
    assert len(rows) >= 10 and comparison.note.endswith(f"; {n} of {len(rows)} differences significant")
    [(_, html)] = get(root, "/")
    row = next(r for r in _rows(html) if f'href="/group/{ids["group"]}"' in r)
    assert "<td>stub / stub</td>" in row and "$0.0000" in row and "<dt>Δ " in row


def test_a_comparison_manifest_with_a_bad_backend_is_a_damaged_row_not_a_failed_page(runs, tmp_path):
    import json

    root, ids = runs
    copy = tmp_path / "runs" / "cmp"
    shutil.copytree(root / ids["comparison"], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "backend": "stub"}))
    [(status, html)] = get(tmp_path / "runs", "/")
    assert status == 200 and "manifest.json: backend: must be an object, got &#34;stub&#34;" in html


def test_a_groups_row_sums_its_trials_cost_and_takes_their_backend():
    from simcore.view.catalog import Entry, Trial, nest

    group = Entry("x/mc-1", "montecarlo", trials=[Trial("A #0", "x/mc-1/trials/mc-1-A0"),
                                                  Trial("B #0", "x/mc-1/trials/mc-1-B0"), Trial("A #1", None)])
    trials = {"x/mc-1/trials/mc-1-A0": Entry("x/mc-1/trials/mc-1-A0", "run", backend="openai", models=["m1"],
                                             cost_usd=0.5, seed=3, status="ok"),
              "x/mc-1/trials/mc-1-B0": Entry("x/mc-1/trials/mc-1-B0", "run", backend="openai", models=["m2"],
                                             cost_usd=0.25, seed=3, status="error")}
    [row] = nest([group], trials.get)
    assert (row.backend, row.models, row.cost_usd) == ("openai", ["m1", "m2"], 0.75)
    assert [(t.seed, t.status) for t in row.trials] == [(3, "ok"), (3, "error"), (None, None)]
    assert group.cost_usd is None and group.trials[0].seed is None  # the cached entry is left as it was


def test_a_group_written_before_the_trials_moved_inside_still_nests_them(runs, tmp_path):
    """Groups written before 2026-11-27 keep their trials beside them, and no trials_dir."""
    import json

    root, ids = runs
    old = tmp_path / "runs" / "context_corrosion"
    group = old / ids["group"].rsplit("/", 1)[1]
    shutil.copytree(root / ids["group"], group)
    for trial in (group / "trials").iterdir():
        trial.rename(old / trial.name)
    (group / "trials").rmdir()
    summary = json.loads((group / "summary.json").read_text())
    del summary["trials_dir"]
    (group / "summary.json").write_text(json.dumps(summary))
    (status, html), (gstatus, page) = get(tmp_path / "runs", "/", f"/group/context_corrosion/{group.name}")
    assert status == gstatus == 200
    rows = _rows(html)
    assert len(rows) == 1 and "<td>stub / stub</td>" in rows[0]
    trials = summary["run_A_trial_ids"] + summary["run_B_trial_ids"]
    assert all(f'href="/run/context_corrosion/{t}"' in html for t in trials)
    assert all(f'href="/run/context_corrosion/{t}"' in page for t in trials) and page.count("/compare?a=") == 2


def test_plot_captions_say_nothing_unless_a_manifest_fails_to_vouch(runs, tmp_path):
    import json

    root, ids = runs
    # (the sweep's plots are drawn and captioned as a group's are; the fixture's sweep has none)
    for status, page in get(root, f"/group/{ids['group']}", f"/study/{ids['study']}", f"/comparison/{ids['comparison']}"):
        plots = page.split('id="plots"', 1)[1].split("</section>", 1)[0]
        captions = [c.replace("<wbr>", "") for c in re.findall(r"<figcaption>(.*?)</figcaption>", plots)]
        assert status == 200 and captions and all(c.endswith(".png") for c in captions), captions
    # A run written before manifests recorded hashes, and a plot added to a run after it was written.
    old = tmp_path / "runs" / "old-run"
    shutil.copytree(root / ids["cassette"], old)
    (old / "plots").mkdir(exist_ok=True)
    shutil.copy(next((root / ids["group"] / "plots").glob("*.png")), old / "plots" / "added.png")
    (status, page), (plot, body) = get(tmp_path / "runs", "/run/old-run", "/plot/old-run?name=plots/added.png")
    assert status == 200 and "added.png <span class=\"muted\">(damaged: not among the files" in page.replace("<wbr>", "")
    assert plot == 422 and body.endswith("added.png: is not among the files that manifest.json records")
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["files"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    [(status, page)] = get(tmp_path / "runs", "/run/old-run")
    [(plot, png)] = asyncio.run(_get_bytes(tmp_path / "runs", "/plot/old-run?name=plots/added.png"))
    assert status == 200 and "file hash not recorded: written before 2026-11-23" in page
    assert plot == 200 and png.startswith(b"\x89PNG")  # nothing to check it against


def test_damaged_run_shows_the_readers_message_and_the_server_goes_on(runs):
    root, ids = runs
    (status, html), (after, _) = get(root, f"/run/{ids['damaged']}", "/")
    assert status == 200 and after == 200
    assert re.search(r"trace.jsonl: damaged: \d+ lines where manifest.json records \d+ events", html)
    assert "The trace cannot be shown" in html


def test_a_manifest_linked_from_outside_is_not_read(runs):
    root, ids = runs
    [(status, html)] = get(root, f"/run/{ids['leaky']}")
    assert status == 200 and "is a link to a place outside the runs directory; not read" in html, html[:300]
    assert "trace_sha256" not in html


@pytest.mark.parametrize("url", [
    "/run/..", "/run/%2e%2e/%2e%2e/etc", "/run/context_corrosion/..%2F..%2Fetc", "/run//etc/passwd",
    "/run/linked", "/run/nosuch/run", "/run/.hidden", "/group/linked", "/sweep/..%2f", "/study/nosuch",
    "/plot/linked?name=plots/x.png", "/prompt/linked?request=0000000000000000",
    "/compare?a=linked&b=linked", "/compare?a=..&b=..", "/static/../app.py", "/static/%2e%2e/app.py",
])
def test_traversal_and_unknown_ids_get_404(runs, url):
    root, _ = runs
    status, body = asyncio.run(_raw_get(root, url))
    assert status == 404, (url, status, body[:200])
    assert "SECRET" not in body and "import" not in body


def test_wrong_kind_gets_404(runs):
    root, ids = runs
    statuses = [s for s, _ in get(root, f"/sweep/{ids['cassette']}", f"/run/{ids['sweep']}",
                                  f"/study/{ids['group']}", f"/group/{ids['study']}")]
    assert statuses == [404] * 4


def test_plot_names_outside_the_entry_are_refused(runs):
    root, ids = runs
    statuses = [s for s, _ in get(root, f"/plot/{ids['short']}?name=../../../outside/secret.txt",
                                  f"/plot/{ids['short']}?name=/etc/passwd",
                                  f"/plot/{ids['short']}?name=trace.jsonl")]
    assert statuses == [404, 404, 404]


def test_compare_aligns_two_runs_and_marks_t_star(runs):
    from simcore.analysis.divergence import comparable_signatures, compare_signatures
    from simcore.base.files import read_manifest, read_trace
    from simcore.sim.trace import Trace

    root, ids = runs
    a, b = ids["cassette"], ids["short"]
    [(status, html)] = get(root, f"/compare?a={a}&b={b}")
    assert status == 200
    sigs = [comparable_signatures(Trace.from_jsonl(read_trace(root / i, read_manifest(root / i)).decode()).events)
            for i in (a, b)]
    expected = compare_signatures(*sigs)
    ops = "".join(p.op[0].upper() for p in expected.alignment)
    assert f"<code>{ops}</code>" in html
    assert f'id="d-norm">{expected.d_norm:.4f}<' in html
    assert html.count('id="tstar"') == 1 and f"{expected.t_star} (t*_norm" in html


def test_study_pairs_open_as_a_comparison_matching_the_stored_alignment(runs):
    from simcore.base.files import read_jsonl

    root, ids = runs
    [(status, html)] = get(root, f"/study/{ids['study']}")
    assert status == 200
    link = re.search(r'class="compare-link" href="([^"]+)"', html).group(1).replace("&amp;", "&")
    [(status, cmp)] = get(root, link)
    stored = read_jsonl(root / ids["study"] / "pairs.jsonl")[0]["alignment"]
    assert status == 200 and f"<code>{stored}</code>" in cmp


def test_an_auction_comparison_is_listed_and_shown_not_called_damaged(runs):
    root, ids = runs
    [(status, html)] = get(root, "/")
    row = next(r for r in html.split("<tr ") if ids["comparison"] in r)
    assert 'data-k-kind="comparison"' in row and "damaged" not in row
    assert f'href="/comparison/{ids["comparison"]}"' in row and "2 trials each" in row
    [(status, page)] = get(root, f"/comparison/{ids['comparison']}")
    assert status == 200 and "Mechanism comparison of llm_auction" in page
    for mechanism in ("auction", "free_discussion", "turn_taking"):
        assert f"<td>{_breakable(mechanism)}</td>" in page
    assert "adjusted p: Holm across" in page and "correctness_by_mechanism.png" in page
    # Spend and charged cost per vignette are both shown, each named and explained.
    assert "spend per vignette" in page and "charged per vignette" in page and "charge_baselines is off" in page
    # The installed calibration's confound marks every row of a confounded metric that involves
    # the auction (its cause), auction - turn_taking too, and no row between the other two: said
    # once under the table, each row marked with its note.
    table = page.split('id="pairs-table"')[1].split("<tbody>")[1].split("</tbody>")[0]
    notes = dict(re.findall(r'<li id="pairs-table-note-(\d+)">([^<]*)', page))
    for row in table.split("<tr")[1:]:
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        a, b, metric = cells[:3]
        marks = re.findall(r'href="#pairs-table-note-(\d+)"', row.split("</td>")[-2])
        confounded = any(notes[k].startswith("confounded under the null") for k in marks)
        assert confounded == (metric in ("cost_per_vignette", "participation", "mean_reward") and "auction" in (a, b)), row
    assert get(root, f"/run/{ids['comparison']}")[0][0] == 404  # not a run


def test_group_and_sweep_pages(runs):
    root, ids = runs
    (gs, group), (ss, sweep), (rs, rows) = get(root, f"/group/{ids['group']}", f"/sweep/{ids['sweep']}",
                                               f"/sweep-rows/{ids['sweep']}")
    assert gs == ss == rs == 200
    assert group.count("/compare?a=") == 2 and "Trials" in group
    # one family, one adjusted p per row, the test named, each interval at its Holm step's level,
    # and where two pairs cannot reach it, no interval but the reason, said once under each table
    assert ("adjusted p: Holm across 6 metrics; intervals at 99.17%, each at the level of the Holm step that "
            "decided its row") in group
    tables = group.count('class="sortable comparison sticky"')
    assert tables == 2 and group.count("no interval: 2 pairs cannot reach 99.17% (8 pairs can)") == tables
    assert "<td>exact sign-flip</td>" in group and "decided by: paired test chosen by each metric" in group
    assert "bootstrap percentile" in group  # each arm's aggregates name their interval
    assert 'data-key="rounds"' in sweep and "4 trials planned, 4 ok" in sweep
    assert rows.count("<tr ") == 4 and 'data-k-rounds="1"' in rows and 'data-k-rounds="2"' in rows


def _rows(html: str) -> list[str]:
    """The runs table's own rows (a group's nested trials are a "child" row after it)."""
    return [r for r in html.split("<tr ")[1:] if "data-k-kind=" in r.split(">", 1)[0]]


def test_comparison_plots_are_served_and_checked_against_its_manifest(runs, tmp_path):
    from simcore.base.files import read_comparison_manifest, recorded_files

    root, ids = runs
    cid = ids["comparison"]
    files = recorded_files(root / cid)
    assert files == read_comparison_manifest(root / cid)["files"] and "comparison.json" in files
    names = sorted(n for n in files if n.endswith(".png"))
    assert len(names) == 3
    [(status, page)] = get(root, f"/comparison/{cid}")
    assert status == 200 and "no hash recorded" not in page
    plots = asyncio.run(_get_bytes(root, *(f"/plot/{cid}?name={n}" for n in names)))
    assert all(s == 200 and body.startswith(b"\x89PNG") for s, body in plots)
    # A plot changed after the comparison was written is refused as damaged, naming the file.
    copy = tmp_path / "runs" / "cmp"
    shutil.copytree(root / cid, copy)
    png = copy / names[0]
    png.write_bytes(png.read_bytes()[:-10])
    [(status, body)] = get(tmp_path / "runs", f"/plot/cmp?name={names[0]}")
    assert status == 422 and "damaged" in body and "is not a manifest field" not in body


def test_the_index_nests_monte_carlo_and_sweep_trials_under_their_group(runs):
    from simcore.base.files import read_record
    from simcore.runs.counterfactual import trial_dir

    root, ids = runs
    [(status, html)] = get(root, "/")
    assert status == 200
    summary = read_record(root / ids["group"] / "summary.json")
    # The trials sit inside the group's directory (trial_dir), where the walk does not go.
    trials = [trial_dir(ids["group"], summary, t).as_posix() for t in summary["run_A_trial_ids"] + summary["run_B_trial_ids"]]
    assert all(t.startswith(ids["group"] + "/trials/") and (root / t / "manifest.json").is_file() for t in trials)
    rows = _rows(html)
    # No trial is a row of its own; each is in its group's nested table, labelled by its condition.
    assert not [r for r in rows for t in trials if f'/{t}"' in r.split("</td>", 2)[1]]
    group = html.split(f'href="/group/{ids["group"]}"', 1)[1].split('<tr data-k-kind=', 1)[0].replace("<wbr>", "")
    assert '<details class="trials">' in group and "<details class=\"trials\" open" not in group
    for t in trials:
        assert f'href="/run/{t}"' in group
    assert "biased=true #0" in group and "biased=false #1" in group
    group_row = next(r for r in rows if f'href="/group/{ids["group"]}"' in r)
    n = int(re.search(r"(\d+) replies", group_row).group(1))
    assert n == sum(c["replies"] for arm in summary["parse_quality"].values() for c in arm.values()) > 0
    sweep = html.split(f'href="/sweep/{ids["sweep"]}"', 1)[1].split('<tr data-k-kind=', 1)[0].replace("<wbr>", "")
    assert sweep.count("/run/sweeps/s1/") == 4 and "rounds=1, biased=true #0" in sweep


def test_two_conditions_are_compared_by_their_labels_and_their_texts(runs):
    root, ids = runs
    [(_, group)] = get(root, f"/group/{ids['group']}")
    assert "arm A (biased=true)" in group and "arm B (biased=false)" in group
    link = re.search(r'href="(/compare\?a=[^"]+)"', group).group(1).replace("&amp;", "&")
    [(status, html)] = get(root, link)
    assert status == 200
    assert "A (biased=true):" in html and "B (biased=false):" in html and "baseline" not in html
    assert "Distance shown: <b>text</b>" in html
    differ, compared = map(int, re.search(r"<b>(\d+) of (\d+)</b> aligned texts differ", html).groups())
    assert 0 < differ <= compared
    assert "Each agent's first text that differs" in html and "<mark>" in html
    assert "none: the structures match" in html or 'id="tstar"' in html  # the structure, second and said so


def test_a_perturbation_pair_is_compared_by_its_structure(runs):
    root, ids = runs
    [(_, study)] = get(root, f"/study/{ids['study']}")
    link = re.search(r'class="compare-link" href="([^"]+)"', study).group(1).replace("&amp;", "&")
    [(status, html)] = get(root, link)
    assert status == 200 and "A (baseline):" in html and "B (perturbed: drop:agent=P1,round=2):" in html
    assert "Distance shown: <b>structural</b>" in html and 'id="d-norm"' in html


def test_a_sweep_links_each_later_condition_to_the_first(runs):
    root, ids = runs
    [(_, rows)] = get(root, f"/sweep-rows/{ids['sweep']}")
    links = re.findall(r'href="(/compare\?a=[^"]+)">compare with biased=true<', rows)
    assert len(links) == 2
    [(status, html)] = get(root, links[0].replace("&amp;", "&"))
    assert status == 200 and "A (biased=true):" in html and "B (biased=false):" in html


def test_the_favicon_is_served_and_linked(runs):
    root, _ = runs
    async def fetch():
        async with client_for(root) as client:
            res = await client.get("/favicon.ico")
            page = await (await client.get("/")).text()
            return res.status, res.headers["Content-Type"], await res.read(), page
    status, ctype, body, page = asyncio.run(fetch())
    assert status == 200 and ctype.startswith("image/svg+xml") and body.startswith(b"<svg")
    assert '<link rel="icon" href="/static/favicon.svg"' in page


def test_a_running_sweep_shows_its_ledger_and_skips_a_torn_line(runs, tmp_path):
    root, ids = runs
    live = tmp_path / "runs" / "live"
    shutil.copytree(root / ids["sweep"], live)
    (live / "summary.json").unlink()
    (live / "heartbeat.json").unlink()  # a sweep written before sweeps kept one
    ledger = live / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(lines[0] + lines[1][:40])  # the second line is still being written
    (s1, index), (s2, page), (s3, rows) = get(tmp_path / "runs", "/", "/sweep/live", "/sweep-rows/live")
    assert s1 == s2 == s3 == 200
    assert "running or stopped" in index and "1 of 4 trials written" in index
    assert "No heartbeat: written before sweeps and Monte Carlos recorded one" in page
    assert 'data-refresh="/sweep-rows/live" data-every="5.0"' in page and 'data-every="2.0"' in page  # the default polls
    assert rows.count("<tr ") == 1
    ledger.write_bytes(b"".join(lines))
    [(_, rows)] = get(tmp_path / "runs", "/sweep-rows/live")
    assert rows.count("<tr ") == 4


# -- what each page says first -------------------------------------------------------------------

def _section(html: str, sid: str) -> str:
    """The section (or box) of a page with id ``sid``, or ''."""
    m = re.search(rf'<(section|div)[^>]* id="{sid}"', html)
    return html[m.start():].split("</section>" if m.group(1) == "section" else "</div>", 1)[0] if m else ""


def _headline_text(html: str) -> str:
    pre = re.search(r'<section class="headline" id="headline"[^>]*>\s*<pre>(.*?)</pre>', html, re.S)
    return unescape(pre.group(1)) if pre else ""


def expected_headlines(root: Path, ids: dict[str, str]) -> dict[str, str]:
    """Each page's headline, as its command prints it: from the same functions, on the same files."""
    from scenarios.llm_auction.compare import headline as comparison_headline
    from simcore.base.files import read_comparison, read_manifest, read_record, read_results
    from simcore.batch.report import headline as sweep_headline
    from simcore.cli import arms_headline, run_lines
    from simcore.perturbation.results import PerturbationResults
    from simcore.perturbation.study import calls_line, study_title
    from simcore.runs.scenario import load_scenario

    expected = {}
    for key in ("cassette", "veil_of_ignorance", "acausal_cooperation", "llm_auction"):
        path = root / ids[key]
        results = read_results(path, read_manifest(path))
        expected[f"/run/{ids[key]}"] = "\n".join(run_lines(load_scenario(results["scenario"]), results))
    expected[f"/group/{ids['group']}"] = "\n".join(arms_headline(read_record(root / ids["group"] / "summary.json")))
    expected[f"/sweep/{ids['sweep']}"] = sweep_headline(read_record(root / ids["sweep"] / "summary.json"))
    study = read_record(root / ids["study"] / "study.json")
    expected[f"/study/{ids['study']}"] = "\n".join(
        [*study_title(PerturbationResults.load(root / ids["study"])), calls_line(study["calls"])])
    expected[f"/comparison/{ids['comparison']}"] = comparison_headline(read_comparison(root / ids["comparison"])[1])
    return expected


def test_every_page_opens_with_what_its_command_printed(runs):
    """The run, group, sweep, study and comparison pages open with the summary their command printed,
    from the same functions, before anything else of theirs."""
    root, ids = runs
    expected = expected_headlines(root, ids)
    pages = dict(zip(expected, get(root, *expected)))
    for url, text in expected.items():
        status, html = pages[url]
        assert status == 200 and _headline_text(html) == text, url
        # first: nothing of the entry's own comes before it but its title and facts
        assert html.index('id="headline"') < min(html.index(x) for x in ('id="keys"', "</main>") if x in html), url
    # A run of a scenario that is not installed here still shows, saying why its summary is missing.
    odd = root.parent / "odd-runs"
    shutil.copytree(root / ids["short"], odd / "r")
    manifest = json.loads((odd / "r" / "manifest.json").read_text())
    (odd / "r" / "manifest.json").write_text(json.dumps({**manifest, "scenario": "not_installed_here"}))
    [(status, html)] = get(odd, "/run/r")
    assert status == 200 and "scenario &#39;not_installed_here&#39; is not installed here" in html


def test_every_page_shows_the_scenarios_key_metrics_after_its_headline(runs):
    from simcore.runs.scenario import load_scenario

    root, ids = runs
    for key in ("veil_of_ignorance", "acausal_cooperation", "llm_auction", "cassette"):
        [(_, html)] = get(root, f"/run/{ids[key]}")
        labels = re.findall(r'<dt><a class="m"[^>]*>(.*?)</a></dt>', _section(html, "keys"))
        scenario = load_scenario(key if key != "cassette" else "context_corrosion")
        metrics = json.loads((root / ids[key] / "results.json").read_text())["metrics"]
        assert [unescape(x.replace("<wbr>", "")) for x in labels] == [
            scenario.metric_of(k).label for k in scenario.key_metrics() if k in metrics] and labels
    [(_, group)] = get(root, f"/group/{ids['group']}")
    keys = _section(group, "keys")
    for k in load_scenario("context_corrosion").key_metrics()[:4]:
        assert load_scenario("context_corrosion").metric_of(k).label in unescape(keys.replace("<wbr>", "")), k
    [(_, comparison)] = get(root, f"/comparison/{ids['comparison']}")
    heads = unescape(_section(comparison, "keys").replace("<wbr>", ""))
    assert all(load_scenario("llm_auction").metric_of(k).label in heads for k in load_scenario("llm_auction").key_metrics())
    [(_, study)] = get(root, f"/study/{ids['study']}")
    assert all(x in _section(study, "keys") for x in ("mean d_norm", "mean t*_norm", "answer changed", "token ratio"))


def test_numbers_print_by_their_kind_one_resolution_per_column():
    from simcore.analysis.glossary import Metric
    from simcore.analysis.metric_kinds import count, proportion
    from simcore.view.numbers import format_for, p_text

    money, share = Metric("m", unit="USD"), Metric("s", percent=True)
    assert [format_for([v], money).text(v) for v in (12000, 25666.667, 0.911)] == ["$12,000", "$25,667", "$0.911"]
    assert format_for([0.0, 0.0], money).text(0.0) == "$0.00" and format_for([-0.015], money).text(-0.015) == "-$0.0150"
    assert format_for([0.822], share).text(0.822) == "82.2%" and format_for([0.5], share).diff(1 / 6) == "+16.7 pp"
    assert format_for([0.5], share).interval(0.1, 0.5) == "[+10.0, +50.0] pp"
    # One resolution for the whole column: no 3.39e-04 among three-decimal figures.
    column = format_for([3.39e-4, 0.5, 0.123])
    assert [column.text(v) for v in (3.39e-4, 0.5, 0.123)] == ["0.000", "0.500", "0.123"]
    assert format_for([264.25], Metric("t", unit="s")).text(264.25) == "264 s"
    assert format_for([4, 12], None, count()).text(1234) == "1,234"
    assert format_for([True]).text(True) == "yes" and format_for([None]).text(None) == "-"
    assert format_for([0.0, 1.0], None, proportion(), trials=True).text(1.0) == "yes"  # a ledger's outcome
    assert format_for([0.0, 1.0], None, proportion()).text(1.0) == "1.00"  # a mean is a number
    assert format_for([-0.0]).text(-0.0) == "0.000" and format_for([-1e-9, 0.5]).diff(-1e-9) == "+0.000"
    assert (p_text(0.0004), p_text(0.5), p_text(None)) == ("<0.001", "0.500", "-")
    assert format_for([0.1]).interval(None, 0.2) == "n/a" and format_for([0.1]).span(None, 1) == ""


# -- links, downloads ------------------------------------------------------------------------------

def _crumbs(html: str) -> list[tuple[str | None, str]]:
    nav = html.split('<nav class="crumbs"', 1)[1].split("</nav>", 1)[0]
    return [(href or None, text.replace("<wbr>", "")) for href, text in
            re.findall(r'(?:<a href="([^"]*)"[^>]*>|<span class="here">)(.*?)</(?:a|span)>', nav)]


def test_every_page_reaches_its_parents_by_links(runs):
    from simcore.base.files import read_record
    from simcore.runs.counterfactual import trial_dir

    root, ids = runs
    summary = read_record(root / ids["group"] / "summary.json")
    trial = trial_dir(ids["group"], summary, summary["run_A_trial_ids"][0]).as_posix()
    sweep_trial = next(p for p in (root / ids["sweep"] / "context_corrosion").iterdir()).relative_to(root).as_posix()
    study_run = f"{ids['study']}/runs/context_corrosion/pair0-p0"
    cases = {f"/run/{trial}": f"/group/{ids['group']}", f"/run/{sweep_trial}": f"/sweep/{ids['sweep']}",
             f"/run/{study_run}": f"/study/{ids['study']}", f"/group/{ids['group']}": "/?q=mc/context_corrosion/",
             f"/sweep/{ids['sweep']}": "/?q=sweeps/", f"/comparison/{ids['comparison']}": "/?q=cmp/llm_auction/",
             f"/run/{ids['veil_of_ignorance']}": "/?q=each/veil_of_ignorance/", "/glossary": "/"}
    for (url, parent), (status, html) in zip(cases.items(), get(root, *cases)):
        crumbs = _crumbs(html)
        assert status == 200 and crumbs[0] == ("/", "simcore runs"), url
        assert parent in [h for h, _ in crumbs], (url, crumbs)
        assert crumbs[-1][0] is None  # the page itself, not a link
    # A crumb that names no entry filters the runs table by its path.
    [(_, index)] = get(root, "/?q=mc/context_corrosion/")
    assert 'value="mc/context_corrosion/"' in index


def test_the_index_picks_two_runs_to_compare(runs):
    root, ids = runs
    [(_, index)] = get(root, "/")
    picks = re.findall(r'<input type="checkbox" class="pick" form="pick" name="run" value="([^"]+)"', index)
    assert ids["cassette"] in picks and ids["short"] in picks and ids["group"] not in picks  # runs only
    assert '<form class="controls" id="pick" action="/compare" method="get">' in index
    (status, html), (bad, why) = get(root, f"/compare?run={ids['cassette']}&run={ids['short']}", f"/compare?run={ids['short']}")
    assert status == 200 and "Distance shown" in html
    assert bad == 400 and "pick exactly two runs to compare, got 1" in why


def test_a_perturbed_runs_transcript_marks_where_the_perturbation_acted(runs):
    from simcore.base.files import read_manifest, read_results

    root, ids = runs
    run = f"{ids['study']}/runs/context_corrosion/pair0-p0"
    point = read_results(root / run, read_manifest(root / run))["perturbation"]["point"]
    (status, html), (_, small) = get(root, f"/run/{run}", f"/run/{run}?size=10")
    assert status == 200 and "drop acted on P1&#39;s turn" in html
    # The mark stands just before the event at which it acted, and the banner links to its page.
    assert re.search(rf'id="perturbation-0">.*?</li>\s*<li class="ev[^"]*" id="ev{point["event"]}"', html, re.S)
    page = point["event"] // 10 + 1
    assert f"?page={page}&amp;size=10#perturbation-0" in small
    [(_, baseline)] = get(root, f"/run/{ids['study']}/runs/context_corrosion/pair0-baseline")
    assert "perturbation-0" not in baseline


def _offered(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'<a href="(/file/[^"]+)" download>', html)]


def test_every_file_a_manifest_lists_downloads_as_it_is(runs):
    from urllib.parse import parse_qs, urlsplit

    from simcore.base.files import recorded_files

    root, ids = runs
    pages = [f"/run/{ids['cassette']}", f"/group/{ids['group']}", f"/sweep/{ids['sweep']}", f"/study/{ids['study']}",
             f"/comparison/{ids['comparison']}"]
    for url, (status, html) in zip(pages, get(root, *pages)):
        eid = url.split("/", 2)[2]
        links = _offered(html)
        assert status == 200 and links, url
        names = [parse_qs(urlsplit(link).query)["name"][0] for link in links]
        recorded = recorded_files(root / eid)
        if recorded is not None:  # every file the manifest records, and the manifest
            assert sorted(names) == sorted(["manifest.json", *recorded]), url
        else:
            assert {"summary.json", "sweep.json", "study.json"} & set(names) and not [n for n in names if n.startswith(".")]
        got = asyncio.run(_get_bytes_headers(root, *links))
        for name, (code, body, disposition) in zip(names, got):
            assert code == 200 and body == (root / eid / name).read_bytes(), (url, name)
            assert disposition == f'attachment; filename="{name.rsplit("/", 1)[-1]}"'


async def _get_bytes_headers(root: Path, *urls: str) -> list[tuple[int, bytes, str | None]]:
    async with client_for(root) as client:
        out = []
        for url in urls:
            res = await client.get(url)
            out.append((res.status, await res.read(), res.headers.get("Content-Disposition")))
        return out


def test_downloads_stay_inside_the_entry_and_refuse_a_changed_file(runs, tmp_path):
    root, ids = runs
    run = ids["short"]
    bad = ["../../../outside/secret.txt", "/etc/passwd", "..", ".lock", "plots/../manifest.json", "x" * 300,
           "nosuch.json", "%2e%2e/manifest.json"]
    for name in bad:
        status, body = asyncio.run(_raw_get(root, f"/file/{run}?name={name}"))
        assert status == 404 and "SECRET" not in body, (name, status)
    assert asyncio.run(_raw_get(root, f"/file/{ids['sweep']}?name=.lock"))[0] == 404  # hidden: never offered
    assert asyncio.run(_raw_get(root, "/file/linked?name=manifest.json"))[0] == 404  # a linked entry
    status, body = asyncio.run(_raw_get(root, f"/file/{ids['leaky']}?name=manifest.json"))
    assert status == 422 and "SECRET" not in body  # a manifest linked from outside
    # A file changed after its manifest recorded it is refused, naming it.
    copy = tmp_path / "runs" / "r"
    shutil.copytree(root / run, copy)
    (copy / "results.json").write_text((copy / "results.json").read_text().replace('"ok"', '"OK"', 1))
    [(status, body)] = get(tmp_path / "runs", "/file/r?name=results.json")
    assert status == 422 and "results.json: damaged: its sha256 is not the one manifest.json records" in body


# -- progress of what still runs --------------------------------------------------------------------

def test_running_and_stopped_sweeps_and_groups_say_so_with_their_progress(runs):
    root, ids = runs
    index, live, stopped, group, progress = get(root, "/", f"/sweep/{ids['live_sweep']}", f"/sweep/{ids['stopped_sweep']}",
                                                f"/group/{ids['running_group']}", f"/progress/{ids['live_sweep']}")
    rows = {re.search(r'href="/[a-z]+/([^"]+)"', r).group(1): r for r in _rows(index[1])}
    assert 'class="status-running">running' in rows[ids["live_sweep"]] and "2 of 4 trials" in rows[ids["live_sweep"]]
    assert 'class="status-stopped">stopped' in rows[ids["stopped_sweep"]]
    assert 'class="status-running">running' in rows[ids["running_group"]]
    assert 'data-k-kind="montecarlo"' in rows[ids["running_group"]]
    text = lambda html: re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html.replace("<br>", " "))))  # noqa: E731
    # 2 trials in the 20 s from its start to the last: 6 a minute, so the other 2 in about 20 s.
    assert "running 2 of 4 trials written · 6.0 trials/min · about 20 s left · last trial 1 s ago" in text(live[1])
    assert "stopped: no heartbeat for 2 min 0 s" in text(stopped[1]) and "2 of 4 trials written" in text(stopped[1])
    assert "--resume --out" in stopped[1]  # and how to finish it
    assert "running 2 of 4 trials written" in text(group[1]) and "biased=true #0" in text(group[1])
    assert progress[0] == 200 and 'data-state="running"' in progress[1]
    # The same heartbeat, an hour later, is a stopped sweep's.
    CLOCK[0] += 3600
    try:
        [(_, later)] = get(root, f"/progress/{ids['live_sweep']}")
    finally:
        CLOCK[0] -= 3600
    assert 'data-state="stopped"' in later and "no heartbeat for 1 h 0 min" in text(later)
    [(_, finished)] = get(root, f"/progress/{ids['sweep']}")
    assert 'data-state="finished"' in finished


def test_the_glossary_defines_every_metric_the_pages_link_to(runs):
    from simcore.runs.scenario import load_scenario

    root, ids = runs
    pages = [f"/run/{ids[k]}" for k in ("veil_of_ignorance", "acausal_cooperation", "llm_auction")] + [
        f"/group/{ids['group']}", f"/comparison/{ids['comparison']}", f"/study/{ids['study']}", "/glossary"]
    got = get(root, *pages)
    glossary = got[-1][1]
    anchors = set(re.findall(r'<tr id="(m-[^"]+)"', glossary))
    for name in ("veil_of_ignorance", "acausal_cooperation", "llm_auction", "context_corrosion"):
        scenario = load_scenario(name)
        for metric, info in scenario.metrics.items():
            assert info.description and str(escape(info.description)) in glossary, (name, metric)
    linked = {a for _, html in got[:-1] for a in re.findall(r'href="/glossary#(m-[^"]+)"', html)}
    assert linked and linked <= anchors, sorted(linked - anchors)
    # every name on a page has its description on hover
    [(_, veil)] = get(root, f"/run/{ids['veil_of_ignorance']}")
    amount = load_scenario("veil_of_ignorance").metric_of("chosen_amount")
    assert f'title="{amount.label} (chosen_amount): {escape(amount.description)} [USD; continuous &gt;= 0]"' in veil


def test_html_in_agent_text_is_escaped(tmp_path):
    import hashlib

    from simcore.base.records import write_json
    from simcore.sim.trace import Trace

    trace = Trace()
    trace.emit(0.0, "message", "<img src=x onerror=alert(1)>", {"phase": "<b>"},
               {"text": "<script>alert('agent')</script>"})
    data = trace.to_jsonl().encode()
    run = tmp_path / "x" / "hostile"
    run.mkdir(parents=True)
    (run / "trace.jsonl").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    write_json(run / "results.json", {"status": "ok", "trace_sha256": sha, "n_events": 1,
                                      "metrics": {"<i>m</i>": 1}})
    write_json(run / "manifest.json", {
        "scenario": "<u>s</u>", "run_id": "hostile", "seed": 1, "config": {}, "status": "ok",
        "backend": {"name": "stub", "model": "stub"}, "trace_sha256": sha, "n_events": 1})
    (_, page), (_, index) = get(tmp_path, "/run/x/hostile", "/")
    for html in (page, index):
        body = html.split("</head>", 1)[1]
        assert "<script>alert" not in body and "<img" not in body and "<u>" not in body and "<i>m" not in body
    assert "&lt;script&gt;alert(&#39;agent&#39;)&lt;/script&gt;" in page


# -- replay --------------------------------------------------------------------------------------

async def _post(root: Path, url: str, headers: dict[str, str]) -> tuple[int, dict | str]:
    async with client_for(root) as client:
        res = await client.post(url, headers=headers)
        try:
            return res.status, await res.json()
        except Exception:  # noqa: BLE001
            return res.status, await res.text()


class _Ran:
    """What ``asyncio.create_subprocess_exec`` returns, for a command that already ran."""

    def __init__(self, ran) -> None:
        self.returncode, self._out = ran.returncode, (ran.stdout.encode(), ran.stderr.encode())

    async def communicate(self) -> tuple[bytes, bytes]:
        return self._out

    def kill(self) -> None:
        pass

    async def wait(self) -> int:
        return self.returncode


@pytest.fixture
def replay_in_process(monkeypatch):
    """The replay button's ``python -m simcore.replay RUN --json`` runs in this process (as
    tests/commands.py runs a command), not in a new interpreter: the app reads its exit status,
    stdout and stderr as it reads a process's. test_replay_button_reports_identical_and_writes_nothing
    replays in a real process. Yields the commands run."""
    from tests.commands import run_module

    ran: list[tuple[str, ...]] = []

    async def exec_(program, *args, cwd=None, **_):
        assert (program, args[0]) == (sys.executable, "-m"), (program, args)
        ran.append(args[1:])
        return _Ran(await asyncio.to_thread(run_module, *args[1:], cwd=cwd))

    monkeypatch.setattr(asyncio, "create_subprocess_exec", exec_)
    yield ran


def test_replay_button_reports_identical_and_writes_nothing(runs):
    root, ids = runs
    before = _snapshot(root)
    status, data = asyncio.run(_post(root, f"/replay/{ids['cassette']}", {"X-Simcore-View": "1"}))
    assert status == 200 and data["outcome"] == "identical", data
    assert _snapshot(root) == before


def test_replay_of_a_damaged_run_says_damaged(runs, replay_in_process):
    root, ids = runs
    status, data = asyncio.run(_post(root, f"/replay/{ids['damaged']}", {"X-Simcore-View": "1"}))
    assert status == 200 and data["outcome"] == "damaged" and "trace.jsonl: damaged" in data["detail"]
    assert replay_in_process == [("simcore.replay", str(root / ids["damaged"]), "--json")]


def test_replay_needs_the_pages_header(runs):
    root, ids = runs
    status, _ = asyncio.run(_post(root, f"/replay/{ids['cassette']}", {}))
    assert status == 403


# -- the command ------------------------------------------------------------------------------

def test_command_binds_localhost_by_default_and_prints_its_url(runs):
    import subprocess

    root, _ = runs
    proc = subprocess.Popen([sys.executable, "-m", "simcore.view", str(root), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, line + proc.stderr.read()
        port = int(m.group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        listening = Path("/proc/net/tcp").read_text() if Path("/proc/net/tcp").exists() else ""
        if listening:  # the socket is bound to 127.0.0.1 (0100007F), not to every address
            rows = [r.split() for r in listening.splitlines()[1:]]
            local = [r[1] for r in rows if r[3] == "0A" and int(r[1].split(":")[1], 16) == port]
            assert local == ["0100007F:%04X" % port]
    finally:
        proc.terminate()
        proc.wait(10)


def test_command_rejects_a_missing_directory(tmp_path):
    from tests.commands import run_module

    res = run_module("simcore.view", str(tmp_path / "nope"))
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        f"error: runs_dir: {str(tmp_path / 'nope')!r} is not a directory"]


# -- in a browser --------------------------------------------------------------------------------

def _chromium() -> tuple[str, str] | str:
    """(browser, driver) paths, or why the browser tests cannot run."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[browser]')"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        return "Chromium or chromedriver is missing (apt-get install chromium chromium-driver)"
    return browser, driver


@pytest.fixture(scope="session")
def server(runs):
    """The browser's server on a free port, in a thread."""
    root, ids = runs
    loop = asyncio.new_event_loop()
    # (progress polled every 0.1 s, not 2: test_browser_a_running_sweep_counts_up_then_shows_stopped waits for
    # polls; the tables' rows still every 5 s, so that none is replaced while a test reads it)
    runner = web.AppRunner(make_app(root, clock=_clock, poll_s=0.1))
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}", ids
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    found = _chromium()
    if isinstance(found, str):
        pytest.skip(found)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(found[1]))
    driver.shots = Path(os.environ.get("SIMCORE_VIEW_SHOTS") or tmp_path_factory.mktemp("screenshots"))
    yield driver
    driver.quit()


def _wait(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


@pytest.mark.browser
def test_browser_runs_table_sorts_and_filters(server, browser):
    from selenium.webdriver.common.by import By

    base, ids = server
    browser.get(base + "/")
    rows = lambda: [r for r in browser.find_elements(By.CSS_SELECTOR, "#runs > tbody > tr:not(.child)")  # noqa: E731
                    if r.is_displayed()]
    n = len(rows())
    assert n >= 6
    browser.find_element(By.CSS_SELECTOR, "select.filter[data-key=kind] option[value=study]").click()
    assert len(rows()) == 1 and ids["study"] in rows()[0].text
    browser.find_element(By.CSS_SELECTOR, "select.filter[data-key=kind] option[value='']").click()
    seed_th = [th for th in browser.find_elements(By.CSS_SELECTOR, "#runs > thead > tr > th") if th.text.startswith("seed")][0]
    seed_th.click()
    col = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#runs > thead > tr > th")].index(seed_th.text)
    seeds = [r.find_elements(By.TAG_NAME, "td")[col].text for r in rows()]
    numbers = [int(s) for s in seeds if s.isdigit()]
    assert numbers == sorted(numbers) and len(numbers) >= 5
    # A group's nested trials (and a damaged row's message) move with it: after sorting, each still
    # follows its own row.
    for child in browser.find_elements(By.CSS_SELECTOR, "#runs > tbody > tr.child"):
        parent = browser.execute_script("return arguments[0].previousElementSibling;", child)
        if child.find_elements(By.CSS_SELECTOR, "td.why-damaged"):
            assert "damaged-row" in parent.get_attribute("class")
        else:
            assert parent.get_attribute("data-k-kind") in ("montecarlo", "counterfactual", "sweep")
    browser.save_screenshot(str(browser.shots / "runs.png"))
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]  # the favicon too


@pytest.mark.browser
def test_browser_index_fits_1280_px_with_trials_nested_and_collapsed(server, browser):
    from selenium.webdriver.common.by import By

    base, ids = server
    browser.set_window_size(1280, 1000)
    try:
        browser.get(base + "/")
        inner = browser.execute_script("return window.innerWidth;")
        assert browser.execute_script("return document.documentElement.scrollWidth;") <= inner
        last = browser.find_elements(By.CSS_SELECTOR, "#runs > thead > tr > th")[-1]
        assert last.text == "note" and browser.execute_script(
            "return arguments[0].getBoundingClientRect().right;", last) <= inner
        group_run = ids["group"].rsplit("/", 1)[0]
        trial = browser.find_element(By.CSS_SELECTOR, f'#runs a[href^="/run/{group_run}/"]')
        assert not trial.is_displayed()  # collapsed: a <details>, closed, which needs no script
        details = trial.find_element(By.XPATH, "./ancestor::details")
        details.find_element(By.TAG_NAME, "summary").click()
        assert trial.is_displayed() and "#0" in details.text
        assert browser.execute_script("return document.documentElement.scrollWidth;") <= inner
        browser.save_screenshot(str(browser.shots / "runs-1280.png"))
        status = browser.execute_script(
            "return fetch('/favicon.ico').then(r => r.status + ' ' + r.headers.get('content-type'));")
        assert status == "200 image/svg+xml"
        assert browser.execute_script("return document.querySelector('link[rel=icon]').href;").endswith(
            "/static/favicon.svg")
    finally:
        browser.set_window_size(1400, 1000)


@pytest.mark.browser
def test_browser_index_at_1280_px_shows_every_key_metric_value_whole(runs, server, browser):
    from simcore.view.catalog import Catalog

    root, _ = runs
    base, ids = server
    expected = {e.id: [[f.name.label, f.text] for f in e.figures] for e in Catalog(root).scan()}
    browser.set_window_size(1280, 1000)
    try:
        browser.get(base + "/")
        browser.execute_script("document.querySelectorAll('details.trials').forEach(d => d.open = true);")
        # Every key figure of every row, read from the page: name, value, and whether both lie whole
        # inside their cell (not clipped, no ellipsis).
        shown = browser.execute_script("""
          const out = {};
          for (const tr of document.querySelectorAll("#runs > tbody > tr[data-k-kind]")) {
            const id = tr.querySelector("td.id a").getAttribute("href").replace(/^\\/[a-z]+\\//, "");
            const cell = tr.querySelector("td.metrics"), box = cell.getBoundingClientRect();
            out[id] = [...cell.querySelectorAll("dl.figures > div")].map(d => {
              const parts = [d.querySelector("dt"), d.querySelector("dd .v")];
              const whole = parts.every(e => {
                const r = e.getBoundingClientRect();
                return r.width > 0 && r.left >= box.left - 0.5 && r.right <= box.right + 0.5
                  && e.scrollWidth <= e.clientWidth + 1 && getComputedStyle(e).textOverflow !== "ellipsis";
              });
              return [parts[0].innerText.replace(/\\n/g, ""), parts[1].innerText, whole];
            });
          }
          return out;""")
        assert set(shown) == set(expected)
        for eid, figures in shown.items():
            assert [f[:2] for f in figures] == expected[eid], eid
            assert all(f[2] for f in figures), (eid, figures)
        assert sum(map(len, shown.values())) >= 10 and all(f[0].startswith("Δ ") for f in shown[ids["group"]])
        # (that no word breaks inside: test_browser_every_page_at_1280_and_390_px)
        inner = browser.execute_script("return window.innerWidth;")
        assert browser.execute_script("return document.documentElement.scrollWidth;") <= inner
        browser.save_screenshot(str(browser.shots / "runs-1280-metrics.png"))
    finally:
        browser.set_window_size(1400, 1000)


@pytest.mark.browser
def test_browser_compare_of_two_conditions_says_where_their_texts_differ(server, browser):
    from selenium.webdriver.common.by import By

    base, ids = server
    browser.get(f"{base}/group/{ids['group']}")
    browser.find_element(By.LINK_TEXT, "compare").click()
    _wait(lambda: "/compare" in browser.current_url)
    labels = browser.find_element(By.CSS_SELECTOR, "p.labels").text
    assert "A (biased=true)" in labels and "B (biased=false)" in labels and "baseline" not in labels
    assert browser.find_element(By.ID, "distance-shown").text.startswith("Distance shown: text")
    assert "aligned texts differ" in browser.find_element(By.ID, "text-distance").text
    first = browser.find_elements(By.CSS_SELECTOR, "#text-diffs tbody tr")
    assert first and all(r.find_elements(By.TAG_NAME, "mark") for r in first)
    browser.find_element(By.ID, "only-diff").click()
    shown = [r for r in browser.find_elements(By.CSS_SELECTOR, "#aligned tbody tr") if r.is_displayed()]
    # The structures match, so what still shows is where the texts differ.
    assert shown and all("text-differs" in r.get_attribute("class") or "op-match" not in r.get_attribute("class")
                         for r in shown)
    browser.save_screenshot(str(browser.shots / "compare-conditions.png"))


@pytest.mark.browser
def test_browser_plots_of_a_comparison_and_a_study_load(server, browser):
    from selenium.webdriver.common.by import By

    base, ids = server
    for page in (f"/comparison/{ids['comparison']}", f"/study/{ids['study']}", f"/group/{ids['group']}"):
        browser.get(base + page)
        images = browser.find_elements(By.CSS_SELECTOR, "#plots img")
        assert images, page
        for img in images:
            browser.execute_script("arguments[0].scrollIntoView();", img)
            _wait(lambda: browser.execute_script("return arguments[0].complete;", img))
            assert browser.execute_script("return arguments[0].naturalWidth;", img) > 0, img.get_attribute("src")
    browser.save_screenshot(str(browser.shots / "comparison.png"))


@pytest.mark.browser
def test_browser_run_page_expands_a_prompt_and_replays(server, browser, replay_in_process):
    from selenium.webdriver.common.by import By

    base, ids = server
    browser.get(f"{base}/run/{ids['cassette']}")
    prompt = browser.find_element(By.CSS_SELECTOR, "details.prompt summary")
    prompt.click()
    slot = browser.find_element(By.CSS_SELECTOR, "details.prompt .slot")
    _wait(lambda: "Task:" in slot.text)
    assert "system" in slot.text
    browser.save_screenshot(str(browser.shots / "run.png"))
    browser.find_element(By.ID, "replay").click()
    result = browser.find_element(By.ID, "replay-result")
    _wait(lambda: result.text.startswith(("identical", "differs", "damaged", "error")))
    assert result.text.startswith("identical"), result.text
    assert [argv[0] for argv in replay_in_process] == ["simcore.replay"]


@pytest.mark.browser
def test_browser_compare_scrolls_to_t_star(server, browser):
    from selenium.webdriver.common.by import By

    base, ids = server
    browser.get(f"{base}/study/{ids['study']}")
    browser.find_element(By.CSS_SELECTOR, "a.compare-link").click()
    _wait(lambda: "/compare" in browser.current_url)
    tstar = browser.find_element(By.ID, "tstar")
    top = browser.execute_script("return arguments[0].getBoundingClientRect().top;", tstar)
    assert 0 <= top <= browser.execute_script("return window.innerHeight;")
    browser.find_element(By.ID, "only-diff").click()
    shown = [r for r in browser.find_elements(By.CSS_SELECTOR, "#aligned tbody tr") if r.is_displayed()]
    # (a pair that matches in structure stays when its texts differ)
    assert shown and all("op-match" not in r.get_attribute("class") or "text-differs" in r.get_attribute("class")
                         for r in shown)
    assert [r for r in shown if "op-match" not in r.get_attribute("class")]
    browser.find_element(By.ID, "only-diff").click()
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", tstar)
    browser.save_screenshot(str(browser.shots / "compare.png"))


@pytest.mark.browser
def test_browser_sweep_filters_by_grid_field(server, browser):
    from selenium.webdriver.common.by import By

    base, ids = server
    browser.get(f"{base}/sweep/{ids['sweep']}")
    visible = lambda: [r for r in browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr") if r.is_displayed()]  # noqa: E731
    assert len(visible()) == 4
    browser.find_element(By.CSS_SELECTOR, "select.filter[data-key=rounds] option[value='2']").click()
    assert len(visible()) == 2
    browser.save_screenshot(str(browser.shots / "sweep.png"))


# -- every page, at a desktop's width and a phone's ------------------------------------------------

#: A phone: 390 x 844 CSS pixels, laid out as a phone lays out (the page's declared viewport counts).
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}
DESKTOP = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}

#: In the page: what is wrong with its layout, as a list of lines (empty when all is well).
LAYOUT_PROBLEMS = """
const out = [], W = window.innerWidth;
const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + String(e.className).split(" ")[0] : "");
// Nothing wider than the window except inside a box that scrolls it.
const main = document.querySelector("main");
if (main.scrollWidth > main.clientWidth + 1) out.push(`main overflows: ${main.scrollWidth} > ${main.clientWidth}`);
for (const e of document.querySelectorAll(".scroll, table, pre, h1, dl.keyfigs, nav.crumbs, .progress, p")) {
  if (e.parentElement.closest(".scroll")) continue;  // inside a box that scrolls
  const r = e.getBoundingClientRect();
  if (r.width && (r.right > W + 1 || r.left < -1)) out.push(`${name(e)} out of the window: ${r.left}..${r.right} of ${W}`);
}
// No table cell cut off: its content fits it (a wide table scrolls in its box instead).
for (const c of document.querySelectorAll("td, th")) {
  if (c.offsetParent === null) continue;
  if (c.scrollWidth > c.clientWidth + 1) out.push(`cell cut off: ${c.textContent.trim().slice(0, 40)} (${c.scrollWidth} > ${c.clientWidth})`);
}
// Nothing overlapping: the key figures' cards, and the header's two sides.
const boxes = [...document.querySelectorAll("dl.keyfigs .kf"), ...document.querySelectorAll("header > *")]
  .map(e => [e, e.getBoundingClientRect()]);
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const [a, p] = boxes[i], [b, q] = boxes[j];
  if (a.parentElement !== b.parentElement) continue;
  if (p.left < q.right - 1 && q.left < p.right - 1 && p.top < q.bottom - 1 && q.top < p.bottom - 1)
    out.push(`${name(a)} overlaps ${name(b)}`);
}
// No word broken in the middle: within a run of text (the page's <wbr> and elements end one), a line
// never starts with a letter or digit that follows one.
const midword = el => {
  const found = [], range = document.createRange();
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walk.nextNode(); node; node = walk.nextNode()) {
    let top = null, prev = "";
    for (let i = 0; i < node.length; i++) {
      const ch = node.data[i];
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect || /\\s/.test(ch)) { prev = ch; continue; }
      if (top !== null && rect.top > top + 2 && /[A-Za-z0-9$%]/.test(prev) && /[A-Za-z0-9]/.test(ch))
        found.push(prev + "|" + node.data.slice(i, i + 8));
      top = rect.top; prev = ch;
    }
  }
  return found;
};
for (const e of document.querySelectorAll("h1, h2, nav.crumbs, dl.keyfigs dt, dl.keyfigs dd, th, td, .progress, figcaption, ul.files li")) {
  if (e.offsetParent === null) continue;
  for (const b of midword(e)) out.push(`${name(e)} broken mid-word: ${b}`);
}
return out;
"""


def _show(browser, metrics: dict, url: str) -> None:
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    browser.get(url)


def _rect(browser, selector: str) -> dict | None:
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e && e.getBoundingClientRect().toJSON();", selector)


@pytest.mark.browser
def test_browser_every_page_at_1280_and_390_px(runs, server, browser):
    """Each page at 1280 x 900 and on a 390 x 844 phone: its first screen (1280) shows what its
    command printed and its key metrics; no table cell is cut off, nothing lies outside the window
    or over something else, no word is broken in the middle; every file it offers downloads, and
    every plot opens full size."""
    root, _ = runs
    base, ids = server
    headlines = expected_headlines(root, ids)
    pages = [*headlines, f"/run/{ids['study']}/runs/context_corrosion/pair0-p0", f"/sweep/{ids['live_sweep']}",
             f"/sweep/{ids['stopped_sweep']}", f"/group/{ids['running_group']}", "/glossary", "/"]
    try:
        for url in pages:
            for metrics in (DESKTOP, PHONE):
                _show(browser, metrics, base + url)
                where = f"{url} at {metrics['width']} px"
                assert browser.execute_script("return window.innerWidth;") == metrics["width"], where
                problems = browser.execute_script(LAYOUT_PROBLEMS)
                assert problems == [], (where, problems)
                if metrics is DESKTOP and url in headlines:
                    shown = browser.execute_script("return document.querySelector('#headline pre').innerText;")
                    assert shown == headlines[url], where
                    for part in ("#headline", "#keys"):
                        rect = _rect(browser, part)
                        assert rect and 0 <= rect["top"] and rect["bottom"] <= 900, (where, part, rect)
                if metrics is DESKTOP:
                    # Every file offered downloads (an attachment), and every plot is a link to itself, full size.
                    got = browser.execute_async_script("""
                      const done = arguments[arguments.length - 1];
                      Promise.all([...document.querySelectorAll("#files a[download]")].map(a => fetch(a.href)
                        .then(r => [a.textContent, r.status, r.headers.get("content-disposition") || ""])))
                        .then(done, e => done(String(e)));""")
                    assert all(status == 200 and cd.startswith("attachment") for _, status, cd in got), (where, got)
                    assert got or url in ("/", "/glossary"), where
                    plots = browser.execute_script("""return [...document.querySelectorAll("#plots img")]
                      .map(i => [i.getAttribute("src"), i.closest("a") && i.closest("a").getAttribute("href")]);""")
                    assert all(src == href for src, href in plots), (where, plots)
                browser.save_screenshot(str(browser.shots / f"{url.strip('/').replace('/', '_') or 'index'}-{metrics['width']}.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.browser
def test_browser_a_running_sweep_counts_up_then_shows_stopped(runs, server, browser):
    """The page follows the heartbeat as trials land (count, rate and time left change), and
    calls the sweep stopped once its heartbeat is older than it should be."""
    from selenium.webdriver.common.by import By

    root, _ = runs
    base, ids = server
    sweep = root / ids["live_sweep"]
    saved = (sweep / "heartbeat.json").read_bytes()
    now = CLOCK[0]
    try:
        browser.get(f"{base}/sweep/{ids['live_sweep']}")
        box = browser.find_element(By.ID, "progress")
        first = box.text
        assert "2 of 4 trials written" in first and "6.0 trials/min" in first and "about 20 s left" in first
        # A third trial lands 10 s later: the page shows it at its next poll.
        write_heartbeat(sweep, 3, 4, beat=now + 9, last_trial=now + 9, started=now - 21)
        CLOCK[0] = now + 10
        _wait(lambda: "3 of 4 trials written" in box.text, timeout=30)
        assert "6.0 trials/min" in box.text and "about 10 s left" in box.text, box.text
        # Then nothing more: an hour later the heartbeat is stale, and the page says stopped.
        CLOCK[0] = now + 3600
        _wait(lambda: "STOPPED" in box.text.upper() and "no heartbeat for" in box.text, timeout=30)
        assert "3 of 4 trials written" in box.text
        browser.save_screenshot(str(browser.shots / "sweep-stopped.png"))
    finally:
        CLOCK[0] = now
        (sweep / "heartbeat.json").write_bytes(saved)


def test_the_page_is_documented():
    doc = Path(__file__).resolve().parents[1] / "docs" / "view.md"
    assert doc.is_file() and "python -m simcore.view" in doc.read_text()


def test_timeline_flags_unreadable_reasked_and_failed_replies_and_pairs_them_with_calls():
    from simcore.view.timeline import rows

    f = {"phase": "p"}
    events = [
        {"seq": 0, "t": 0, "kind": "llm.call", "agent": "A", "fields": f, "payload": {"request": "a" * 16}},
        {"seq": 1, "t": 0, "kind": "llm.call", "agent": "B", "fields": f, "payload": {"request": "b" * 16}},
        {"seq": 2, "t": 1, "kind": "llm.reply", "agent": "B", "fields": f,
         "payload": {"text": "??", "tokens": [10, 2], "read": "unreadable", "parse_error": True, "why": "no JSON"}},
        {"seq": 3, "t": 1, "kind": "llm.error", "agent": "A", "fields": f,
         "payload": {"error": "Timeout", "message": "took too long"}},
        {"seq": 4, "t": 1, "kind": "llm.reply", "agent": "B", "fields": {**f, "reask": 1},
         "payload": {"text": "{}", "tokens": [20, 3], "finish_reason": "length", "salvaged": True}},
    ]
    out = rows(events, None, lambda p, c: (p + c) / 1e6)
    assert out[2]["request"] == "b" * 16 and out[3]["request"] == "a" * 16
    assert [k for k, _ in out[2]["flags"]] == ["unreadable"] and out[2]["cost"] == 12 / 1e6
    assert out[3]["flags"] == [("error", "Timeout: took too long")]
    assert [k for k, _ in out[4]["flags"]] == ["salvaged", "truncated", "reask"] and out[4]["request"] is None


def test_a_run_page_shows_float_noise_as_0_and_its_raw_results_exact(tmp_path, no_plots):
    # context corrosion's D self-drift of a text against itself: 3.55e-15 where the command
    # printed 0.000; its kind is a score in [0, 2], so it is noise.
    from backends.registry import BackendSpec
    from simcore.runs.runner import run_trial, write_run
    from simcore.runs.scenario import load_scenario

    scenario = load_scenario("context_corrosion")
    trial = run_trial(scenario, scenario.config_type(rounds=1), 5, BackendSpec())
    trial.results["metrics"]["dominant_self_drift"] = 3.552713678800501e-15
    path = write_run(trial, tmp_path, "noise-run")
    [(status, html)] = get(tmp_path, f"/run/{path.relative_to(tmp_path).as_posix()}")
    metrics = html.split('<section id="metrics">')[1].split("</section>")[0].replace("<wbr>", "")
    assert status == 200 and re.search(r'>dominant_self_drift</a></td><td class="n" data-v="0.0">0.000</td>', metrics)
    assert "e-15" not in metrics and "3.552713678800501e-15" in html  # results.json, shown raw, stays exact
