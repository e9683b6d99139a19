"""The streamed trace: the same bytes, sha256 and replay as the in-memory trace."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.base import canonical_json
from simcore.base.files import DamagedFile
from simcore.replay import replay_async
from simcore.runs.runner import run_trial, write_run
from simcore.runs.scenario import load_scenario
from simcore.sim import trace as trace_module
from simcore.sim.trace import (
    STREAM_FROM_AGENTS,
    Fields,
    StreamedTrace,
    Trace,
    TraceEvent,
    event_line,
    streams,
)
from tests.commands import run_module

GOLDEN = Path(__file__).parent / "golden"

# The golden cases of every scenario: (scenario, config fields, seed, golden file).
CASES = {
    "context_corrosion": ("context_corrosion", {"rounds": 1, "n_peers": 2}, 7, "context_corrosion_small"),
    "veil_of_ignorance": ("veil_of_ignorance", {"n_agents": 2, "max_rounds": 2}, 7, "veil_of_ignorance_small"),
    "acausal_cooperation": (
        "acausal_cooperation", {"n_agents": 2, "rounds": 2, "scripted": "tit_for_tat"}, 7, "acausal_cooperation_small",
    ),
    **{
        f"llm_auction_{m}": ("llm_auction", {"mechanism": m, "n_agents": 5, "n_vignettes": 1}, 2024, f"llm_auction_{m}")
        for m in ("auction", "free_discussion", "turn_taking")
    },
}


def _trial(case: str, mode: str, tmp_path: Path):
    name, fields, seed, _ = CASES[case]
    scenario = load_scenario(name)
    return run_trial(scenario, scenario.config_type.from_mapping(fields), seed, trace=mode, trace_dir=tmp_path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_streamed_trace_is_the_memory_trace_byte_for_byte(case, tmp_path):
    memory = _trial(case, "memory", tmp_path)
    streamed = _trial(case, "stream", tmp_path)
    assert isinstance(memory.trace, Trace) and isinstance(streamed.trace, StreamedTrace)
    text = memory.trace.to_jsonl()
    assert text == (GOLDEN / f"{CASES[case][3]}.jsonl").read_text()  # the golden trace, unchanged
    assert streamed.trace.to_jsonl() == text
    assert streamed.trace.path.read_bytes() == text.encode()
    assert streamed.trace.sha256() == memory.trace.sha256() == hashlib.sha256(text.encode()).hexdigest()
    assert streamed.results["trace_sha256"] == memory.results["trace_sha256"]
    assert len(streamed.trace) == len(memory.trace) == streamed.results["n_events"]
    streamed.trace.discard()


def test_streamed_run_directory_replays_identically(tmp_path, no_plots):
    trial = _trial("context_corrosion", "stream", tmp_path / "out" / "context_corrosion")
    staged = trial.trace.path
    run_dir = write_run(trial, tmp_path / "out", "streamed")
    assert not staged.exists()  # moved into the run directory, not copied
    assert [p.name for p in (tmp_path / "out" / "context_corrosion").iterdir()] == ["streamed"]
    assert hashlib.sha256((run_dir / "trace.jsonl").read_bytes()).hexdigest() == trial.results["trace_sha256"]
    assert trial.trace.to_jsonl() == (run_dir / "trace.jsonl").read_text()  # still readable after the move
    result = asyncio.run(replay_async(run_dir))
    assert result.identical, result


def test_streamed_events_read_back_as_written(tmp_path):
    memory = Trace()
    streamed = StreamedTrace(tmp_path / "t.jsonl")
    for trace in (memory, streamed):
        trace.emit(0, "start", None, {"phase": "a"}, {"xs": (1, 2), "text": "é\n\"q\""})
        trace.emit(1.5, "llm.reply", "P1", {"phase": "a", "round": 2}, {"text": "x"})
    back = streamed.events
    assert [e.signature for e in back] == memory.signatures() == streamed.signatures()
    assert back[0] == TraceEvent(0, 0, "start", None, {"phase": "a"}, {"xs": [1, 2], "text": "é\n\"q\""})
    assert [e.kind for e in streamed.of_kind("llm.reply")] == ["llm.reply"]
    assert streamed.to_jsonl() == memory.to_jsonl() and streamed.sha256() == memory.sha256()


def test_switching_a_memory_trace_to_a_stream_keeps_its_events(tmp_path):
    memory = Trace()
    memory.emit(0, "built", None, {}, {"n": 3})
    streamed = StreamedTrace(tmp_path / "t.jsonl", memory.events)
    for trace in (memory, streamed):
        trace.emit(2, "go", "A", {"k": 1})
    assert streamed.to_jsonl() == memory.to_jsonl() and len(streamed) == 2


def test_stream_buffer_boundaries_keep_bytes_and_hash(tmp_path, monkeypatch):
    monkeypatch.setattr(StreamedTrace, "BUFFER_LINES", 3)
    memory, streamed = Trace(), StreamedTrace(tmp_path / "t.jsonl")
    for i in range(10):
        for trace in (memory, streamed):
            trace.emit(i / 3, "tick", f"a{i}", {"i": i}, {"v": [i] * i})
        if i == 4:  # reading midway flushes; later events still land after it
            assert streamed.sha256() == memory.sha256()
    streamed.close()
    assert (tmp_path / "t.jsonl").read_text() == memory.to_jsonl()
    assert streamed.sha256() == memory.sha256()
    with pytest.raises(ValueError, match="closed"):
        streamed.emit(99, "late")
        streamed.flush()


def test_auto_streams_from_the_threshold_and_bad_modes_are_refused():
    assert not streams("auto", STREAM_FROM_AGENTS - 1) and streams("auto", STREAM_FROM_AGENTS)
    assert streams("stream", 1) and not streams("memory", 10**7)
    with pytest.raises(ValueError, match="trace: must be one of auto, stream, memory"):
        streams("disk", 5)


def test_failed_trial_leaves_no_trace_file(tmp_path):
    def broken(world, config):
        raise RuntimeError("analysis broke")

    scenario = dataclasses.replace(load_scenario("context_corrosion"), analyze=broken)
    cfg = scenario.config_type.from_mapping({"rounds": 1, "n_peers": 2})
    with pytest.raises(RuntimeError, match="analysis broke"):
        run_trial(scenario, cfg, 1, trace="stream", trace_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cli_trace_flag(tmp_path):
    def cli(*args):
        # (no plots: the trace is what is compared, and the figures cost more than the runs)
        return run_module("scenarios.context_corrosion", "--rounds", "1", "--n-peers", "2", "--plots", "none",
                          "--out", str(tmp_path), *args)

    bad = cli("--trace", "disk")
    assert bad.returncode == 2 and "--trace" in bad.stderr and "stream" in bad.stderr
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    assert cli("--trace", "stream", "--seed", "7").returncode == 0
    assert cli("--trace", "memory", "--seed", "7").returncode == 0
    runs = sorted((tmp_path / "context_corrosion").iterdir())
    assert len(runs) == 2 and all(not p.name.startswith(".") for p in runs)  # no staged trace left over
    a, b = ((p / "trace.jsonl").read_bytes() for p in runs)
    assert a == b


def test_replay_of_a_large_world_streams_and_finds_a_tampered_event(tmp_path, monkeypatch, no_plots):
    monkeypatch.setattr(trace_module, "STREAM_FROM_AGENTS", 1)  # every world is large now
    trial = _trial("context_corrosion", "auto", tmp_path / "out" / "context_corrosion")
    assert isinstance(trial.trace, StreamedTrace)
    run_dir = write_run(trial, tmp_path / "out", "big")
    scratch = []
    temporary = StreamedTrace.temporary.__func__

    def spy(cls, directory=None, events=()):
        scratch.append(directory)
        return temporary(cls, directory, events)

    monkeypatch.setattr(StreamedTrace, "temporary", classmethod(spy))
    assert asyncio.run(replay_async(run_dir)).identical
    assert len(scratch) == 1 and not Path(scratch[0]).exists()  # replayed to scratch space, then removed
    lines = (run_dir / "trace.jsonl").read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace('"seq":3', '"seq":33')
    (run_dir / "trace.jsonl").write_text("".join(lines))
    with pytest.raises(DamagedFile, match="trace.jsonl"):  # the manifest's hash vouches for the recorded trace
        asyncio.run(replay_async(run_dir))
    # A trace the manifest vouches for (hash rewritten with it) that the replay does not reproduce:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["trace_sha256"] = hashlib.sha256("".join(lines).encode()).hexdigest()
    manifest["files"].pop("trace.jsonl", None)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    result = asyncio.run(replay_async(run_dir))
    assert not result.identical and result.first_diff == 3 and '"seq":33' in result.recorded


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.text(max_size=12),
                     st.floats(allow_nan=True, allow_infinity=True))
_DICTS = st.dictionaries(st.text(max_size=6), st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3)), max_size=4)


@settings(max_examples=300, deadline=None)
@given(seq=st.integers(0, 10**9),
       t=st.one_of(st.integers(0, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                   st.floats(-1e9, 1e9).map(np.float64)),
       kind=st.text(max_size=10), agent=st.one_of(st.none(), st.text(max_size=10)),
       fields=_DICTS, payload=_DICTS, shared=st.booleans())
def test_event_line_is_canonical_json_of_the_event(seq, t, kind, agent, fields, payload, shared):
    # The key-by-key writer gives canonical_json's bytes for every event, shared fields or not.
    expected = canonical_json({"seq": seq, "t": t, "kind": kind, "agent": agent, "fields": fields, "payload": payload})
    if shared and all(v is None or isinstance(v, (str, int)) for v in fields.values()):
        fields = Fields(fields)
    assert event_line(seq, t, kind, agent, fields, payload) == expected
    assert TraceEvent(seq, t, kind, agent, fields, payload).to_json() == expected


def test_shared_fields_are_read_only_and_survive_pickling_and_copies():
    import copy
    import pickle

    fields = Fields({"phase": "talk", "round": 1})
    assert fields == {"phase": "talk", "round": 1} and fields.json == '{"phase":"talk","round":1}'
    for change in (lambda f: f.__setitem__("round", 2), lambda f: f.update(round=2), lambda f: f.pop("round"),
                   lambda f: f.clear(), lambda f: f.setdefault("x", 1), lambda f: f.__delitem__("phase")):
        with pytest.raises(TypeError, match="^fields: shared structural fields are read-only"):
            change(fields)
    assert fields == {"phase": "talk", "round": 1}
    for again in (pickle.loads(pickle.dumps(fields)), copy.deepcopy(fields), copy.copy(fields)):
        assert type(again) is Fields and again == fields and again.json == fields.json
    assert type(dict(fields)) is dict and {**fields, "round": 2} == {"phase": "talk", "round": 2}
