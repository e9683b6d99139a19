"""simcore.analysis.minilm: the numpy MiniLM computes what sentence-transformers computes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.analysis import embeddings
from simcore.analysis.minilm import MiniLM

TEXTS = [
    "The city should deploy the system with monitoring for bias.",
    "Lupus is more likely; confirm it with autoimmune antibody tests first.",
    "Approve the dam for its clean energy and climate benefits. " * 6,
    "I'd rank B > A > C — B's cost ($12,000) is fair, naïve as that sounds.",
    "DEFECT!!! 🙂",
    "short",
    "",
    "x " * 600,  # longer than the model's 256 tokens: truncated
]


@pytest.fixture(scope="module")
def numpy_model() -> MiniLM:
    return MiniLM(embeddings.model_path())


@pytest.fixture(scope="module")
def torch_model():
    """The reference: sentence-transformers on the CPU (what a GPU run uses, on another device)."""
    return embeddings.sentence_transformer("cpu")


def test_tokens_are_the_tokens_sentence_transformers_feeds(numpy_model, torch_model):
    expected = torch_model.tokenizer(TEXTS, truncation=True, max_length=torch_model.max_seq_length)["input_ids"]
    assert numpy_model.token_ids(TEXTS) == expected
    assert max(len(ids) for ids in expected) == numpy_model.max_length == 256


def test_vectors_match_sentence_transformers(numpy_model, torch_model):
    ours = numpy_model.embed(numpy_model.token_ids(TEXTS))
    theirs = torch_model.encode(TEXTS, batch_size=1, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), embeddings.DIM)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)  # the same model, up to float rounding
    # Far closer than any two different texts, so no metric can tell the engines apart.
    assert np.min(np.sum(ours * theirs, axis=1)) > 1 - 1e-6


@pytest.mark.slow  # (about 30 s of forward passes: the GPU path, checked on the CPU)
def test_the_bucketed_torch_path_is_batch_independent_too(numpy_model, torch_model):
    """The GPU path, run here on the CPU: each text padded to its bucket, bit-identical in any batch."""
    alone = np.stack([embeddings._forward_torch(torch_model, [t])[0] for t in TEXTS])
    together = embeddings._forward_torch(torch_model, TEXTS[::-1])[::-1]
    assert np.array_equal(alone, together)
    np.testing.assert_allclose(alone, numpy_model.embed(numpy_model.token_ids(TEXTS)), rtol=0, atol=1e-5)


words = st.sampled_from(["agree", "option", "B", "the", "group", "because", "risk", "?", "no", "42"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.lists(words, max_size=40).map(" ".join), min_size=1, max_size=6))
def test_a_vector_depends_on_its_text_alone(numpy_model, batch):
    together = numpy_model.embed(numpy_model.token_ids(batch))
    for text, vec in zip(batch, together):
        assert np.array_equal(numpy_model.embed(numpy_model.token_ids([text]))[0], vec)


def test_vectors_do_not_depend_on_the_blas_thread_count(numpy_model):
    """A sweep's workers run BLAS on fewer threads than a single run: the vectors must not change.

    (With the products split over BLAS threads, 1 and 2 threads gave other last bits.)
    """
    import hashlib
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import hashlib; from simcore.analysis.minilm import MiniLM; from simcore.analysis.embeddings import model_path; "
            "from tests.test_minilm import TEXTS; m = MiniLM(model_path()); "
            "print(hashlib.sha256(m.embed(m.token_ids(TEXTS)).tobytes()).hexdigest())")
    root = Path(__file__).resolve().parent.parent
    digests = {
        threads: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                                env={**os.environ, "OPENBLAS_NUM_THREADS": threads}).stdout.strip()
        for threads in ("1", "2", "3")
    }
    here = hashlib.sha256(numpy_model.embed(numpy_model.token_ids(TEXTS)).tobytes()).hexdigest()
    assert set(digests.values()) == {here}, digests
