"""The damage suite: every file kind simcore reads back, damaged, fed to every consumer.

For each kind (manifest, trace, results, cassette, embeddings, ledger line, sweep
definition) the file is truncated, emptied, overwritten in part with random
bytes, or given the wrong schema or types, and then fed to what reads it:
replay, batch resume, the readers themselves (the HTTP API's damaged records are
in test_context_corrosion_service.py, config files in test_cli.py). The promise: one
line naming the file and the problem, exit status 2 (or, for resume, the trial
runs again and a note says so), and the damaged files are left exactly as they were.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.cassette import Cassette, check_cassette
from backends.registry import BackendSpec
from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.analysis.embeddings import DIM, EmbeddingStore
from simcore.base import files as run_files
from simcore.base.files import DamagedFile
from simcore.batch import TIMING_COLUMNS, run_sweep
from simcore.batch.command import main as batch_main
from simcore.replay import main as replay_main
from simcore.runs.runner import run_trial, write_run
from tests.batch_scenarios import FLAKY
from tests.commands import Ran, run_module

ROOT = Path(__file__).resolve().parent.parent


# -- damage -----------------------------------------------------------------------

def truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def empty(data: bytes) -> bytes:
    return b""


def random_bytes(data: bytes) -> bytes:
    rng = random.Random(len(data))
    # In an SQLite file, a third of the way in may be free space, which no reader
    # needs and no check can see; the first page's b-tree (the schema) is always used.
    start = 100 if data.startswith(b"SQLite format 3") else len(data) // 3
    return data[:start] + bytes(rng.randrange(256) for _ in range(64)) + data[start + 64:]


def wrong_json_schema(data: bytes) -> bytes:
    """Valid JSON whose fields have the wrong types (a record) or another shape (a list)."""
    value = json.loads(data)
    if isinstance(value, dict):
        key = next(k for k in ("seed", "status", "scenario") if k in value)
        value[key] = "forty-two" if key == "seed" else 7
    return json.dumps(value).encode()


def wrong_trace_schema(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    event = json.loads(lines[1])
    event["seq"] = "one"
    return b"".join([lines[0], json.dumps(event).encode() + b"\n", *lines[2:]])


def wrong_cassette_schema(path: Path) -> None:
    """A valid SQLite file, but not a cassette: another table and no format stamp."""
    path.unlink()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    db.execute("INSERT INTO notes (text) VALUES ('mine')")
    db.commit()
    db.close()


DAMAGE: dict[str, Callable[[bytes], bytes]] = {"truncate": truncate, "empty": empty, "random": random_bytes}


def damage(path: Path, how: str) -> None:
    """Damage ``path`` in place: one of DAMAGE, or "schema" (wrong schema for its kind)."""
    if how != "schema":
        path.write_bytes(DAMAGE[how](path.read_bytes()))
    elif path.suffix == ".sqlite":
        wrong_cassette_schema(path)
    elif path.suffix == ".jsonl":
        path.write_bytes(wrong_trace_schema(path.read_bytes()))
    else:
        path.write_bytes(wrong_json_schema(path.read_bytes()))


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: its sha256 and mtime (to prove nothing was touched)."""
    return {
        p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def one_line_exit_2(capsys: pytest.CaptureFixture[str], call: Callable[[], object]) -> str:
    with pytest.raises(SystemExit) as exc:
        call()
    assert exc.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


# -- a recorded run ---------------------------------------------------------------

@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small run on the stub, recorded with a cassette (so it has every run file)."""
    out = tmp_path_factory.mktemp("recorded")
    spec = BackendSpec(options={"cassette": str(out / "user.sqlite")})
    trial = run_trial(SCENARIO, CorrosionConfig(rounds=1, n_peers=2, metrics=False), 7, spec)
    run_dir = write_run(trial, out)
    assert {"manifest.json", "trace.jsonl", "results.json", "cassette.sqlite"} <= {p.name for p in run_dir.iterdir()}
    return run_dir


@pytest.fixture()
def run_dir(recorded: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(recorded, tmp_path / recorded.name))


def test_an_intact_run_passes_every_reader_and_its_manifest_vouches_for_every_file(run_dir: Path) -> None:
    run = run_files.read_run(run_dir)
    assert run.results["status"] == "ok" and run.manifest["run_id"] == run_dir.name
    files = run.manifest["files"]
    assert set(files) == {p.name for p in run_dir.iterdir() if p.is_file()} - {"manifest.json"}
    assert all(run_files.file_sha256(run_dir / name) == digest for name, digest in files.items())
    assert run_files.read_cassette(run_dir, run.manifest) == run_dir / "cassette.sqlite"
    assert run_files.read_record(run_dir / "experiment.json")["seed"] == 7


# -- replay -----------------------------------------------------------------------

@pytest.mark.parametrize("how", ["truncate", "empty", "random", "schema"])
@pytest.mark.parametrize("name", ["manifest.json", "trace.jsonl", "cassette.sqlite"])
def test_replay_of_a_damaged_run_is_one_line_exit_2_and_touches_nothing(
    run_dir: Path, capsys: pytest.CaptureFixture[str], name: str, how: str
) -> None:
    damage(run_dir / name, how)
    before = snapshot(run_dir)
    line = one_line_exit_2(capsys, lambda: replay_main([str(run_dir)]))
    assert line.startswith("error: cannot replay: the recorded run is damaged: ") and name in line, line
    assert "differs" not in line
    assert snapshot(run_dir) == before  # nothing modified, no -wal/-shm files appeared


def test_a_manifest_field_error_names_the_file_and_the_field(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "seed": "forty-two"}))
    line = one_line_exit_2(capsys, lambda: replay_main([str(run_dir)]))
    assert f"{path}: seed: must be an integer from 0 to 4294967295, got \"forty-two\"" in line
    path.write_text(json.dumps({**manifest, "config": {**manifest["config"], "rounds": 99}}))
    line = one_line_exit_2(capsys, lambda: replay_main([str(run_dir)]))
    assert f"{path}: config.rounds: must be an integer from 1 to 5" in line


def test_replay_cli_on_a_truncated_trace_exits_2(run_dir: Path) -> None:
    trace = run_dir / "trace.jsonl"
    trace.write_bytes(truncate(trace.read_bytes()))
    res = run_module("simcore.replay", str(run_dir), cwd=ROOT)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "trace.jsonl: damaged" in res.stderr


# -- a user's cassette (--cassette) -----------------------------------------------------

def _cli(*args: str, cwd: Path) -> Ran:
    return run_module("scenarios.context_corrosion", "--rounds", "1", "--n-peers", "2", "--no-metrics", *args,
                      cwd=cwd)


@pytest.mark.parametrize("how", ["truncate", "random", "schema", "text"])
@pytest.mark.parametrize("mode", ["auto", "replay", "record"])
def test_a_damaged_or_foreign_cassette_is_refused_and_left_as_it_was(
    recorded: Path, tmp_path: Path, how: str, mode: str
) -> None:
    cassette = tmp_path / "mine.sqlite"
    if how == "text":
        cassette.write_text("these are my notes, not a database\n")
    else:
        shutil.copy(recorded.parent.parent / "user.sqlite", cassette)
        damage(cassette, how)
    before = snapshot(tmp_path)
    header = cassette.read_bytes()[:20]
    res = _cli("--cassette", str(cassette), "--cassette-mode", mode, "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(cassette) in lines[0], res.stderr
    assert snapshot(tmp_path) == before  # not modified, no run directory, no -wal/-shm files
    assert cassette.read_bytes()[:20] == header  # still in its own journal mode, never switched to WAL


def test_a_cassette_simcore_creates_is_left_as_one_plain_file(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    Cassette(path).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.sqlite"]
    assert path.read_bytes()[18:20] == b"\x01\x01"  # rollback journal, not WAL
    check_cassette(path, deep=True)


def test_a_read_only_cassette_is_opened_read_only(recorded: Path, tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite"
    shutil.copy(recorded / "cassette.sqlite", path)
    before = snapshot(tmp_path)
    c = Cassette(path, readonly=True)
    assert len(c) > 0
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        c._db.execute("DELETE FROM entries")
    c.close()
    assert snapshot(tmp_path) == before


def test_a_cassette_entry_with_the_wrong_types_is_named(recorded: Path, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    shutil.copy(recorded / "cassette.sqlite", path)
    db = sqlite3.connect(path)
    db.execute("UPDATE entries SET body = '{\"text\": 5}' WHERE rowid = (SELECT MIN(rowid) FROM entries)")
    db.commit()
    db.close()
    with pytest.raises(DamagedFile, match=r"entry \(.*a response needs text"):
        check_cassette(path, deep=True)
    with pytest.raises(DamagedFile, match="a response needs text"):
        Cassette(path, readonly=True).entries()


# -- embeddings -------------------------------------------------------------------

def _embeddings(path: Path, **arrays: np.ndarray) -> None:
    store = EmbeddingStore()
    rng = np.random.default_rng(0)
    for i, agent in enumerate(("D", "P1", "P2")):
        store._vectors[("phase1", i, agent)] = rng.standard_normal(DIM).astype(np.float32)
    if arrays:
        np.savez(path, **arrays)
    else:
        store.save(path)


@pytest.mark.parametrize("how", ["truncate", "empty", "random"])
def test_damaged_embeddings_are_named(tmp_path: Path, how: str) -> None:
    path = tmp_path / "embeddings.npz"
    _embeddings(path)
    assert len(EmbeddingStore.load(path)) == 3
    damage(path, how)
    before = snapshot(tmp_path)
    with pytest.raises(DamagedFile, match="embeddings.npz"):
        EmbeddingStore.load(path)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("arrays, problem", [
    ({"keys": np.array([["p", "x", "a"]]), "vectors": np.zeros((1, DIM), np.float32)}, "round must be an integer"),
    ({"keys": np.array([["p", "1", "a"]]), "vectors": np.zeros((1, 3), np.float32)}, "vectors: must be"),
    ({"keys": np.array([["p", "1", "a"]]), "vectors": np.zeros((1, DIM), np.float64)}, "float32"),
    ({"keys": np.array([["p", "1", "a"]]), "vectors": np.full((1, DIM), np.nan, np.float32)}, "NaN"),
    ({"keys": np.array([1, 2, 3])}, "must hold arrays keys and vectors"),
    ({"keys": np.array([object()], dtype=object), "vectors": np.zeros((1, DIM), np.float32)}, "not a readable"),
])
def test_embeddings_with_the_wrong_schema_are_named(tmp_path: Path, arrays: dict, problem: str) -> None:
    path = tmp_path / "embeddings.npz"
    _embeddings(path, **arrays)
    with pytest.raises(DamagedFile, match=problem):
        run_files.read_embeddings(path, DIM)


def test_embeddings_in_a_run_directory_are_checked_against_the_manifest(run_dir: Path) -> None:
    path = run_dir / "embeddings.npz"
    _embeddings(path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["files"]["embeddings.npz"] = run_files.file_sha256(path)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert len(run_files.read_embeddings(path, DIM)) == 3
    _embeddings(path, keys=np.array([["phase1", "0", "D"]]), vectors=np.ones((1, DIM), np.float32))
    with pytest.raises(DamagedFile, match="is not the .* that manifest.json records"):
        run_files.read_embeddings(path, DIM)  # a valid file, but not the one the run wrote


# -- the hash catches what the schema cannot --------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["trace.jsonl", "results.json", "cassette.sqlite", "experiment.json", "timings.json"]),
       where=st.floats(0, 1), junk=st.binary(min_size=1, max_size=40))
def test_any_change_to_a_file_the_manifest_vouches_for_is_caught(
    recorded: Path, tmp_path_factory: pytest.TempPathFactory, name: str, where: float, junk: bytes
) -> None:
    run_dir = Path(shutil.copytree(recorded, tmp_path_factory.mktemp("h") / "run"))
    path = run_dir / name
    data = path.read_bytes()
    at = int(where * len(data))
    changed = data[:at] + junk + data[at + len(junk):]
    if changed == data:
        return
    path.write_bytes(changed)
    manifest = run_files.read_manifest(run_dir)
    read = {
        "trace.jsonl": lambda: run_files.read_trace(run_dir, manifest),
        "results.json": lambda: run_files.read_results(run_dir, manifest),
        "cassette.sqlite": lambda: run_files.read_cassette(run_dir, manifest),
        "experiment.json": lambda: run_files.read_record(path),
        "timings.json": lambda: run_files.read_record(path),
    }[name]
    with pytest.raises(DamagedFile, match=name):
        read()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1), junk=st.binary(min_size=1, max_size=20))
def test_a_damaged_manifest_is_refused_or_read_never_a_crash(
    recorded: Path, tmp_path_factory: pytest.TempPathFactory, where: float, junk: bytes
) -> None:
    run_dir = Path(shutil.copytree(recorded, tmp_path_factory.mktemp("m") / "run"))
    path = run_dir / "manifest.json"
    data = path.read_bytes()
    at = int(where * len(data))
    path.write_bytes(data[:at] + junk + data[at + len(junk):])
    try:
        manifest = run_files.read_manifest(run_dir)
    except DamagedFile as exc:
        assert str(exc).startswith(str(path) + ": ")
        return
    # It parsed and has the right shape (a change inside a string, say): whatever
    # else it says, the files are still checked against it.
    assert isinstance(manifest["seed"], int) and isinstance(manifest["files"], dict)


@given(raw=st.one_of(
    st.binary(max_size=200),
    st.integers(1, 20_000).map(lambda n: b"[" * n),
    st.integers(4000, 6000).map(lambda n: b'{"seed": ' + b"9" * n + b"}"),
    st.just(b'{"a": 1, "a": 2}'),
))
def test_parse_json_fails_only_with_a_value_error(raw: bytes) -> None:
    try:
        run_files.parse_json(raw)
    except ValueError as exc:
        assert "\n" not in str(exc)


# -- batch resume ------------------------------------------------------------------

def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=list(TIMING_COLUMNS))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return run_sweep(FLAKY, 3, conditions=None, executor="serial", out=tmp_path_factory.mktemp("s") / "sweep",
                     plot=False)


@pytest.mark.parametrize("how", ["truncate", "empty", "random", "schema"])
@pytest.mark.parametrize("name", ["manifest.json", "trace.jsonl", "results.json", "timings.json"])
def test_resume_runs_a_damaged_trial_again_says_so_and_keeps_the_damaged_files(
    sweep: pd.DataFrame, tmp_path: Path, name: str, how: str
) -> None:
    if how == "schema" and name == "timings.json":
        how = "random"  # timings.json has no field of its own that resume relies on
    out = Path(shutil.copytree(sweep.attrs["sweep_dir"], tmp_path / "s"))
    ledger = (out / "ledger.jsonl").read_text()
    victim = out / "flaky" / sorted(p.name for p in (out / "flaky").iterdir())[1]
    damage(victim / name, how)
    kept = snapshot(victim)
    notes: list[str] = []
    df = run_sweep(FLAKY, 3, conditions=None, executor="serial", out=out, resume=True, plot=False, echo=notes.append)
    # The re-run is the trial's second attempt; every other figure is the first run's.
    expected = stable(sweep)
    expected.loc[expected["run_id"] == victim.name, "attempt"] = 2
    pd.testing.assert_frame_equal(stable(df), expected)
    assert df.attrs["summary"]["timing"]["trials_run"] == 1
    said = [n for n in notes if "is damaged" in n]
    assert len(said) == 1 and name in said[0] and f"damaged/{victim.name}" in said[0], notes
    assert snapshot(out / "damaged" / victim.name) == kept  # set aside, untouched
    run_files.read_run(victim)  # the trial's new run directory is whole

    def rows(text: str) -> list[dict]:
        return sorted(({k: v for k, v in json.loads(line).items() if k not in TIMING_COLUMNS}
                       for line in text.splitlines()), key=lambda r: (r["index"], r["attempt"]))

    # The ledger keeps every attempt: the damaged one's line, then the re-run's.
    before = rows(ledger)
    rerun = [{**r, "attempt": 2} for r in before if r["run_id"] == victim.name]
    assert rows((out / "ledger.jsonl").read_text()) == sorted(before + rerun, key=lambda r: (r["index"], r["attempt"]))


def test_resume_drops_a_damaged_ledger_line_and_keeps_its_trial(sweep: pd.DataFrame, tmp_path: Path) -> None:
    out = Path(shutil.copytree(sweep.attrs["sweep_dir"], tmp_path / "s"))
    lines = (out / "ledger.jsonl").read_text().splitlines(keepends=True)
    row = json.loads(lines[0])
    lines[0] = json.dumps({**row, "index": "zero"}) + "\n"        # wrong type
    lines.insert(1, "\x00\xff not json at all\n")                  # random bytes
    (out / "ledger.jsonl").write_text("".join(lines))
    notes: list[str] = []
    df = run_sweep(FLAKY, 3, conditions=None, executor="serial", out=out, resume=True, plot=False, echo=notes.append)
    pd.testing.assert_frame_equal(stable(df), stable(sweep))
    assert df.attrs["summary"]["timing"]["trials_run"] == 0  # its run directory was whole: read back
    assert any("dropped 2 damaged or foreign ledger line(s)" in n for n in notes), notes
    assert any("recovered 1" in n for n in notes), notes


@pytest.mark.parametrize("how", ["truncate", "empty", "random", "schema"])
def test_batch_resume_with_a_damaged_sweep_json_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    out = tmp_path / "s"
    out.mkdir()
    definition = {"scenario": "context_corrosion", "trials": 2, "seed": 42, "seed_scope": "cell", "grid": [],
                  "conditions": None, "base_config": {}, "backend": {"name": "stub"}}
    (out / "sweep.json").write_text(json.dumps({"definition": definition}))
    if how == "schema":
        (out / "sweep.json").write_text(json.dumps({"definition": {**definition, "seed": "forty-two"}}))
    else:
        damage(out / "sweep.json", how)
    before = snapshot(out)
    line = one_line_exit_2(capsys, lambda: batch_main(["context_corrosion", "--resume", "--out", str(out)]))
    assert "sweep.json" in line
    assert snapshot(out) == before


def test_a_manifest_key_changed_in_place_is_damage_not_a_run_without_hashes(recorded: Path, tmp_path: Path) -> None:
    # Found by the property test above: '"files"' garbled to '"fi es"' still parses, and a
    # manifest without "files" (one written before the field existed) skips every hash check.
    run_dir = Path(shutil.copytree(recorded, tmp_path / "run"))
    path = run_dir / "manifest.json"
    path.write_bytes(path.read_bytes().replace(b'"files"', b'"fi es"'))
    with pytest.raises(DamagedFile, match="'fi es' is not a manifest field"):
        run_files.read_manifest(run_dir)


def test_a_file_the_manifest_does_not_list_is_damage(recorded: Path, tmp_path: Path) -> None:
    run_dir = Path(shutil.copytree(recorded, tmp_path / "run"))
    path = run_dir / "manifest.json"
    path.write_bytes(path.read_bytes().replace(b'"results.json"', b'"results.jsoX"'))
    manifest = run_files.read_manifest(run_dir)
    with pytest.raises(DamagedFile, match="results.json: is not among the files that manifest.json records"):
        run_files.read_results(run_dir, manifest)


def test_a_comparison_directory_is_read_by_its_own_schema(tmp_path):
    """An auction comparison's manifest.json is not a run's: read as a run's it would look damaged."""
    import json

    from simcore.base.files import DamagedFile, read_comparison

    d = tmp_path / "compare-x"
    d.mkdir()
    manifest = {"scenario": "llm_auction", "run_id": "compare-x", "seed": 42, "config": {},
                "mechanisms": ["auction", "free_discussion"], "trial_seeds": [1, 2], "command": "..."}
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "comparison.json").write_text(json.dumps({"mechanisms": {}, "pairs": []}))
    assert read_comparison(d) == (manifest, {"mechanisms": {}, "pairs": []})
    (d / "comparison.json").write_text(json.dumps({"mechanisms": {}}))
    with pytest.raises(DamagedFile, match=r"comparison.json: pairs: missing \(must be a list\)"):
        read_comparison(d)
    (d / "manifest.json").write_text(json.dumps({**manifest, "seed": -1}))
    with pytest.raises(DamagedFile, match=r"manifest.json: seed: must be an integer from 0"):
        read_comparison(d)
