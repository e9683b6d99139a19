"""simcore.embeddings: a text's vector depends on the text alone."""

from __future__ import annotations

import numpy as np
import pytest

from simcore import embeddings

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
    reference = embeddings.get_model().encode(TEXTS[:2], normalize_embeddings=True)
    np.testing.assert_allclose(first[:2], reference, atol=1e-5)  # the same model, up to float rounding
    assert embeddings.encode([]).shape == (0, embeddings.DIM)
