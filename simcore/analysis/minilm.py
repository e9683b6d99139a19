"""all-MiniLM-L6-v2 computed with numpy: the CPU encoder, with no torch to import.

Importing torch, transformers and sentence-transformers takes 4-6 s on two cores,
more than a default run's simulation and analysis together. This module reads the
same files sentence-transformers reads (``model.safetensors``, ``tokenizer.json``
and the three configs) and computes the same thing: BERT's forward pass, mean
pooling over the text's tokens, L2 normalisation. It loads in about 0.3 s. Its
vectors agree with sentence-transformers' on the CPU to a few units in the 7th
decimal (``tests/test_minilm.py`` checks 1e-5; see docs/analysis-speed.md).

A text's vector is the same bit for bit whatever else is in its batch and however
many threads compute it: each text runs alone at its own length (no padding), with
single-threaded matrix products (see :meth:`MiniLM.embed`).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np

#: How many threads embed texts at once in this process (a sweep sets each worker's share
#: of the cores; unset, as many as BLAS has).
THREADS_ENV = "SIMCORE_ENCODER_THREADS"


class MiniLM:
    """A BERT sentence encoder with mean pooling, read from a sentence-transformers directory.

    Args:
        path: the model directory (``simcore.analysis.embeddings.model_path()``).
    """

    def __init__(self, path: str | Path) -> None:
        import scipy.special  # noqa: F401 - loaded now, so the controller below sees every BLAS
        from safetensors.numpy import load_file
        from threadpoolctl import ThreadpoolController
        from tokenizers import Tokenizer

        path = Path(path)
        config = json.loads((path / "config.json").read_text())
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        if config.get("hidden_act") != "gelu" or not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{path}: only a BERT model with GELU and mean pooling is supported")
        self.max_length = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.dim = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.eps = np.float32(config["layer_norm_eps"])
        # Built once: finding the loaded BLAS libraries costs about a millisecond a time.
        self._blas = ThreadpoolController().select(user_api="blas")
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer.no_padding()  # the file asks for padding; here each text runs at its own length
        w = load_file(str(path / "model.safetensors"))
        self.words = w["embeddings.word_embeddings.weight"]
        # Token type 0 for every token (one segment), as sentence-transformers feeds it.
        self.positions = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
        self.norm0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        scale = np.float32(1.0 / np.sqrt(self.dim // self.heads))
        self.layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def t(name: str) -> np.ndarray:
                return np.ascontiguousarray(w[p + name + ".weight"].T)  # x @ W.T as x @ t

            # Query, key and value in one product; the query carries the 1/sqrt(head size).
            qkv = np.concatenate([t("attention.self.query") * scale, t("attention.self.key"),
                                  t("attention.self.value")], axis=1)
            qkv_bias = np.concatenate([w[p + "attention.self.query.bias"] * scale,
                                       w[p + "attention.self.key.bias"], w[p + "attention.self.value.bias"]])
            self.layers.append((
                (qkv, qkv_bias),
                (t("attention.output.dense"), w[p + "attention.output.dense.bias"]),
                (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                (t("intermediate.dense"), w[p + "intermediate.dense.bias"]),
                (t("output.dense"), w[p + "output.dense.bias"]),
                (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            ))

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, [CLS] and [SEP] included, cut to the model's maximum length."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def embed(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Sentence vectors (n, dim) of token-id lists, float32 and L2-normalised.

        BLAS runs on one thread while texts are embedded, and the texts are spread
        over :data:`THREADS_ENV` threads where set (a sweep's worker gets its share of
        the cores), else as many as BLAS had: a product split over several BLAS threads
        gives other last bits than one computed whole, so this keeps vectors the same
        for any thread count.
        """
        if not len(ids):
            return np.zeros((0, self.dim), dtype=np.float32)
        share = os.environ.get(THREADS_ENV, "")
        threads = int(share) if share.isdigit() and int(share) > 0 else \
            max((lib.num_threads for lib in self._blas.lib_controllers), default=1)
        rows = [np.asarray(row, dtype=np.int64) for row in ids]
        with self._blas.limit(limits=1):
            if threads == 1 or len(rows) == 1:
                return np.stack([self._embed_one(r) for r in rows])
            with ThreadPoolExecutor(min(threads, len(rows)), thread_name_prefix="simcore-minilm") as pool:
                return np.stack(list(pool.map(self._embed_one, rows)))

    def _embed_one(self, tokens: np.ndarray) -> np.ndarray:
        # One text at its own length: no padding, so no mask, and every product has
        # shapes set by this text alone (the module doc says why that matters).
        n = len(tokens)
        x = _layer_norm(self.words[tokens] + self.positions[:n], *self.norm0, self.eps)
        for qkv, out, norm1, up, down, norm2 in self.layers:
            q, k, v = _linear(x, *qkv).reshape(n, 3, self.heads, -1).transpose(1, 2, 0, 3)
            context = (_softmax(q @ k.transpose(0, 2, 1)) @ v).transpose(1, 0, 2).reshape(n, self.dim)
            x = _layer_norm(_linear(context, *out) + x, *norm1, self.eps)
            x = _layer_norm(_linear(_gelu(_linear(x, *up)), *down) + x, *norm2, self.eps)
        pooled = x.mean(axis=0)
        return (pooled / max(np.float32(np.linalg.norm(pooled)), np.float32(1e-12))).astype(np.float32)


def _linear(x: np.ndarray, weight_t: np.ndarray, bias: np.ndarray) -> np.ndarray:
    y = x @ weight_t
    y += bias
    return y


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: np.float32) -> np.ndarray:
    x = x - x.mean(axis=-1, keepdims=True)
    x /= np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    x *= gain
    x += bias
    return x


def _softmax(x: np.ndarray) -> np.ndarray:
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x) with the error function (not the tanh approximation)."""
    from scipy.special import erf

    g = erf(x * np.float32(1.0 / np.sqrt(2.0)))
    g += 1.0
    g *= 0.5
    x *= g
    return x
