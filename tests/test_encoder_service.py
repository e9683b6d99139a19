"""One encoder for a whole sweep, the fork-server pool, and what a sweep records about its pace.

The sweep's shared encoder is tested with the CPU encoder (``encoder="shared"``):
what it changes, where the texts are encoded, is the same on a GPU. Every check
reads what the code recorded (the pace record, manifests, vectors on disk), never
a clock.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pytest

from simcore.analysis import embed_cache, embeddings
from simcore.analysis.encoder_service import EncoderService, RemoteEncoder, use_service
from simcore.base.config import ConfigError
from simcore.batch import VOLATILE_COLUMNS, run_sweep
from simcore.batch.executors import Pace
from simcore.batch.plan import build_plan
from simcore.batch.store import LEDGER, SweepStore
from simcore.runs.scenario import load_scenario

# Embedding metrics on, and small: two peers, one round.
BASE = {"n_peers": 2, "rounds": 1, "plots": False}
TRIALS = 2


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=list(VOLATILE_COLUMNS))


def vectors(df: pd.DataFrame) -> dict[str, bytes]:
    """Every trial's stored vectors, by run directory."""
    root = Path(df.attrs["sweep_dir"])
    out = {}
    for run_dir in df["run_dir"]:
        with np.load(root / run_dir / "embeddings.npz") as npz:
            out[run_dir] = npz["keys"].tobytes() + npz["vectors"].tobytes()
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pd.DataFrame]:
    """The sweep run serially in this process, on a cold cache of its own."""
    old = os.environ[embed_cache.ENV]
    os.environ[embed_cache.ENV] = str(tmp_path_factory.mktemp("cache-ref"))
    embeddings.clear_cache()
    try:
        yield run_sweep("context_corrosion", TRIALS, base=BASE, executor="serial", plot=False,
                        out=tmp_path_factory.mktemp("ref") / "s")
    finally:
        os.environ[embed_cache.ENV] = old


@pytest.mark.parametrize(("executor", "workers", "encoder"), [
    ("local", 1, "per-worker"),
    ("local", 2, "per-worker"),
    ("local", 2, "shared"),
    ("asyncio", 1, "auto"),
])
def test_results_and_vectors_are_the_same_whatever_runs_them(reference: pd.DataFrame, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, executor: str,
                                                             workers: int, encoder: str) -> None:
    monkeypatch.setenv(embed_cache.ENV, str(tmp_path / "cache"))  # cold: every vector computed again
    embeddings.clear_cache()
    df = run_sweep("context_corrosion", TRIALS, base=BASE, executor=executor, workers=workers, encoder=encoder,
                   plot=False, out=tmp_path / "s")
    assert (df["status"] == "ok").all()
    assert any(c.startswith("metric_avg_") for c in df.columns)  # embedding metrics were computed
    pd.testing.assert_frame_equal(stable(reference), stable(df))  # every metric column, exactly
    assert vectors(df) == vectors(reference)


def test_the_shared_encoder_serves_every_worker_and_no_worker_loads_a_model(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(embed_cache.ENV, str(tmp_path / "cache"))
    embeddings.clear_cache()
    df = run_sweep("context_corrosion", TRIALS, base=BASE, workers=2, encoder="shared", plot=False,
                   out=tmp_path / "s")
    pace = df.attrs["summary"]["timing"]["pace"]
    assert pace["encoder"] == "shared"
    assert pace["workers_that_loaded_a_model"] == 0 and pace["workers_that_imported_torch"] == 0
    assert pace["worker_encode_share"] == 0  # the service computed every vector
    served = pace["encoder_service"]
    assert served["workers"] == pace["worker_processes"] >= 1
    assert served["requests"] >= 1 and served["texts"] >= 1
    # The manifests name the engine that made the vectors: the sweep process's.
    for run_dir in df["run_dir"]:
        manifest = json.loads((tmp_path / "s" / run_dir / "manifest.json").read_text())
        assert manifest["embeddings"] == embeddings.settings()
    # The service kept the disk cache, under the engine's key.
    disk = embeddings.disk_cache()
    assert disk is not None and disk.count() >= 1


def test_each_worker_encodes_for_itself_by_default_on_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(embed_cache.ENV, str(tmp_path / "cache"))
    df = run_sweep("context_corrosion", 1, base=BASE, workers=2, plot=False, out=tmp_path / "s")
    pace = df.attrs["summary"]["timing"]["pace"]
    assert pace["encoder"] == "in each process" and "encoder_service" not in pace
    assert pace["workers_that_loaded_a_model"] == pace["worker_processes"] >= 1
    # A cold cache: the workers' own encoders computed vectors, and every trial wrote its run.
    assert 0 < pace["worker_encode_share"] < 1 and 0 < pace["worker_write_share"] < 1


def test_pool_workers_take_the_environment_of_each_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Workers fork from a server started once; a later sweep's --embed-cache must still reach them.
    for name in ("first", "second"):
        monkeypatch.setenv(embed_cache.ENV, str(tmp_path / name))
        run_sweep("context_corrosion", 1, base=BASE, workers=2, encoder="per-worker", plot=False,
                  out=tmp_path / f"s-{name}")
        assert (tmp_path / name / embed_cache.FILE).is_file()


def test_the_service_answers_a_remote_as_the_process_encoder_would(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(embed_cache.ENV, embed_cache.OFF)
    texts = ["a short sentence", "another one, a little longer than the first", "a short sentence"]
    with EncoderService() as service:
        remote = RemoteEncoder(service.address, service.authkey)
        got = remote.encode(texts)
        assert remote.settings == embeddings.settings()
        assert service.stats()["workers"] == 1 and service.stats()["texts"] == 3
    embeddings.clear_cache()
    assert np.array_equal(got, embeddings.encode(texts))


def test_a_failing_service_is_a_clear_error_in_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(texts):
        raise ValueError("embeddings: the weights are not installed")

    with EncoderService() as service:
        remote = RemoteEncoder(service.address, service.authkey)
        monkeypatch.setattr(embeddings, "encode", broken)
        with pytest.raises(RuntimeError, match="the sweep's encoder failed: ValueError: embeddings: the weights"):
            remote.encode(["x"])


@pytest.mark.parametrize(("mode", "executor", "address", "embeds", "shared"), [
    ("auto", "local", None, True, False),  # this machine's device is the CPU
    ("shared", "local", None, True, True),
    ("shared", "dask", None, True, True),  # a LocalCluster
    ("shared", "dask", "tcp://10.0.0.5:8786", True, False),  # remote workers cannot reach the socket
    ("shared", "serial", None, True, False),  # one process: its own encoder is the only one
    ("shared", "local", None, False, False),  # nothing to embed
    ("per-worker", "local", None, True, False),
])
def test_when_a_sweep_shares_its_encoder(monkeypatch: pytest.MonkeyPatch, mode: str, executor: str,
                                         address: str | None, embeds: bool, shared: bool) -> None:
    monkeypatch.setattr(embeddings, "accelerator_possible", lambda: False)
    assert use_service(mode, executor, address, embeds) is shared


def test_an_unknown_encoder_mode_is_one_line_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^encoder: must be one of auto, shared, per-worker; got 'gpu'$"):
        run_sweep("context_corrosion", 1, base=BASE, encoder="gpu", out=tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_outcomes_that_finish_together_cost_one_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = build_plan(load_scenario("context_corrosion"), 3, None, None)
    store = SweepStore(tmp_path / "s", plan, resume=False)
    store.open()
    synced = []
    monkeypatch.setattr("simcore.batch.store.os.fsync", lambda fd: synced.append(fd))
    try:
        with store.batch():
            for job in plan.jobs:
                store.append({"index": job.index, "run_id": job.run_id, "seed": job.seed, "status": "ok"})
        assert len(synced) == 1
        store.append({"index": 0, "run_id": plan.jobs[0].run_id, "seed": plan.jobs[0].seed, "status": "ok"})
        assert len(synced) == 2  # outside a batch, every line is synced at once
    finally:
        store.close()
    lines = (tmp_path / "s" / LEDGER).read_text().splitlines()
    assert [json.loads(line)["attempt"] for line in lines] == [1, 1, 1, 2]


def test_pace_splits_worker_time_into_startup_trials_gaps_and_tail_and_trials_into_encoding_and_writing() -> None:
    pace = Pace()
    pace.slots, pace.started, pace.ended = 3, 100.0, 110.0
    pace.trials, pace.parent_s = 4, 0.02
    pace.samples = [  # two processes ran trials; the third slot never did
        {"pid": 1, "start": 101.0, "end": 104.0, "encode_s": 2.0, "write_s": 0.1, "model_loaded": True,
         "torch_imported": False},
        {"pid": 1, "start": 105.0, "end": 109.0, "encode_s": 3.0, "write_s": 0.2, "model_loaded": True,
         "torch_imported": False},
        {"pid": 2, "start": 102.0, "end": 106.0, "encode_s": 0.5, "write_s": 0.3, "model_loaded": False,
         "torch_imported": False},
        {"pid": 2, "start": 106.0, "end": 108.0, "encode_s": 1.0, "write_s": 0.7, "model_loaded": False,
         "torch_imported": False},
    ]
    report = pace.report()
    assert report["parent_ms_per_trial"] == pytest.approx(5.0)
    assert report["worker_busy_s"] == pytest.approx(13.0)
    assert report["worker_idle_share"] == pytest.approx(17.0 / 30.0)
    assert report["worker_startup_s_mean"] == pytest.approx(1.5)
    assert report["worker_tail_s_mean"] == pytest.approx(1.5)
    assert report["worker_gaps_s"] == pytest.approx(1.0)  # pid 1's second between its trials
    assert report["workers_that_loaded_a_model"] == 1 and report["worker_processes"] == 2
    assert report["worker_encode_share"] == pytest.approx(6.5 / 13.0)
    assert report["worker_write_share"] == pytest.approx(1.3 / 13.0)


@pytest.mark.parametrize("trials, shared", [(1, False), (embeddings.GPU_MIN_TRIALS - 1, False),
                                            (embeddings.GPU_MIN_TRIALS, True)])
def test_auto_shares_a_gpu_only_for_a_sweep_large_enough_to_pay_for_it(
        monkeypatch: pytest.MonkeyPatch, trials: int, shared: bool) -> None:
    # A machine whose torch sees a GPU, faked: the rule is what is tested, not CUDA.
    monkeypatch.setattr(embeddings, "check_device", lambda name: "cpu" if name == "cpu" else "cuda")
    monkeypatch.delenv(embeddings.DEVICE_ENV, raising=False)
    assert use_service("auto", "local", None, True, trials=trials) is shared
    assert use_service("auto", "serial", None, True, trials=trials) is False  # it encodes in this process anyway


def test_a_pool_worker_embeds_on_its_share_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    # numpy's BLAS loaded in the fork server with a thread per core; the CPU encoder takes its
    # thread count from the worker's share instead (else W workers run W x cores threads).
    from simcore.analysis.minilm import THREADS_ENV
    from simcore.batch.executors import _init_worker

    monkeypatch.setattr(os, "environ", dict(os.environ))
    _init_worker(1, environ={"SIMCORE_EMBED_CACHE": "none"})
    assert os.environ[THREADS_ENV] == "1" and os.environ["SIMCORE_EMBED_CACHE"] == "none"
