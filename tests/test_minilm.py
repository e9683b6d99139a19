"""simcore.analysis.minilm: the numpy MiniLM computes what sentence-transformers computes.

The default run compares it with sentence-transformers' own token ids and vectors for
``TEXTS``, recorded in tests/golden/minilm_reference.json by
``python benchmarks/record_references.py`` (torch and sentence-transformers, the gpu extra,
are not installed for it). The tests marked ``gpu`` compare with the live library on the CPU,
and check that the recording is current: ``python -m pytest -m gpu`` with the gpu extra.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

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


MINILM_REFERENCE = Path(__file__).parent / "golden" / "minilm_reference.json"


@pytest.fixture(scope="module")
def numpy_model() -> MiniLM:
    return MiniLM(embeddings.model_path())


@pytest.fixture(scope="module")
def recorded() -> dict:
    """sentence-transformers' token ids and vectors for TEXTS, as recorded (see the module docstring)."""
    ref = json.loads(MINILM_REFERENCE.read_text())
    assert ref["texts"] == TEXTS, "TEXTS changed: rerun python benchmarks/record_references.py"
    ref["vectors"] = np.stack([np.frombuffer(base64.b64decode(v), dtype="<f4") for v in ref["vectors"]])
    return ref


@pytest.fixture(scope="module")
def torch_model():
    """The reference: sentence-transformers on the CPU (what a GPU run uses, on another device)."""
    pytest.importorskip("sentence_transformers", reason="the gpu extra is not installed")
    return embeddings.sentence_transformer("cpu")


def assert_tokens_match(numpy_model: MiniLM, expected: list[list[int]]) -> None:
    assert numpy_model.token_ids(TEXTS) == expected
    assert max(len(ids) for ids in expected) == numpy_model.max_length == 256


def assert_vectors_match(numpy_model: MiniLM, theirs: np.ndarray) -> None:
    ours = numpy_model.embed(numpy_model.token_ids(TEXTS))
    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), embeddings.DIM)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)  # the same model, up to float rounding
    # Far closer than any two different texts, so no metric can tell the engines apart.
    assert np.min(np.sum(ours * theirs, axis=1)) > 1 - 1e-6


def test_tokens_are_the_tokens_sentence_transformers_feeds(numpy_model, recorded):
    assert recorded["max_seq_length"] == 256
    assert_tokens_match(numpy_model, recorded["token_ids"])


def test_vectors_match_sentence_transformers(numpy_model, recorded):
    assert_vectors_match(numpy_model, recorded["vectors"])


@pytest.mark.gpu
def test_tokens_are_the_tokens_live_sentence_transformers_feeds(numpy_model, torch_model):
    expected = torch_model.tokenizer(TEXTS, truncation=True, max_length=torch_model.max_seq_length)["input_ids"]
    assert_tokens_match(numpy_model, expected)


@pytest.mark.gpu
def test_vectors_match_live_sentence_transformers(numpy_model, torch_model):
    assert_vectors_match(numpy_model, torch_model.encode(TEXTS, batch_size=1, normalize_embeddings=True,
                                                         convert_to_numpy=True))


@pytest.mark.gpu
def test_the_recorded_reference_is_current(recorded, torch_model):
    """What the default run checks against is what sentence-transformers computes here now."""
    ids = torch_model.tokenizer(TEXTS, truncation=True, max_length=torch_model.max_seq_length)["input_ids"]
    assert ids == recorded["token_ids"], "rerun python benchmarks/record_references.py"
    vectors = torch_model.encode(TEXTS, batch_size=1, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(vectors, recorded["vectors"], rtol=0, atol=1e-6)


@pytest.mark.slow  # (about 30 s of forward passes: the GPU path, checked on the CPU)
@pytest.mark.gpu
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

    (With the products split over BLAS threads, 1 and 2 threads gave other last bits.) The
    thread count is set in this process with threadpoolctl, as OPENBLAS_NUM_THREADS sets it
    at a process's start; the encoder reads it to spread its texts over threads.
    """
    import hashlib

    from threadpoolctl import threadpool_limits

    def digest() -> str:
        return hashlib.sha256(numpy_model.embed(numpy_model.token_ids(TEXTS)).tobytes()).hexdigest()

    here = digest()
    digests = {}
    for threads in (1, 2, 3):
        with threadpool_limits(limits=threads, user_api="blas"):
            assert {lib.num_threads for lib in numpy_model._blas.lib_controllers} == {threads}
            digests[threads] = digest()
    assert set(digests.values()) == {here}, digests
