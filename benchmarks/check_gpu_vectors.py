"""Whether a text's vector on the GPU depends on its text alone, bit for bit, whatever its batch.

The sweep's shared encoder batches texts of many workers together, so a text's
batch mates depend on timing; its vector must not. This encodes the same texts
alone, all together, reversed and in a mixed order with other texts, on the
device torch sees (``cuda`` where there is one, else the CPU), and compares the
vectors bit for bit; it also gives the largest difference from the CPU's numpy
encoder. Writes ``benchmarks/results/gpu_vectors.json`` (or ``--out``).

    python benchmarks/check_gpu_vectors.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcore.analysis import embeddings  # noqa: E402
from simcore.analysis.minilm import MiniLM  # noqa: E402
from simcore.base.records import atomic_write, utc_now  # noqa: E402


def texts(n: int) -> list[str]:
    """``n`` texts of varied lengths (a few words to a few hundred), fixed by a seed."""
    rng = np.random.default_rng(7)
    words = "the group agrees option risk because we should cooperate defect patient court order vote".split()
    return [" ".join(rng.choice(words, size=int(rng.integers(3, 300)))) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="texts (default 200)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_vectors.json"))
    args = ap.parse_args()
    import torch

    where = "cuda" if torch.cuda.is_available() else "cpu"
    model = embeddings.sentence_transformer(where)
    sample = texts(args.n)
    others = texts(args.n + 37)[args.n:]
    alone = np.stack([embeddings._forward_torch(model, [t])[0] for t in sample])
    together = embeddings._forward_torch(model, sample)
    backwards = embeddings._forward_torch(model, sample[::-1])[::-1]
    mixed = embeddings._forward_torch(model, [*others[:20], *sample, *others[20:]])[20 : 20 + args.n]
    numpy = MiniLM(embeddings.model_path())
    cpu = numpy.embed(numpy.token_ids(sample))
    report = {
        "created_utc": utc_now(), "device": torch.cuda.get_device_name() if where == "cuda" else "cpu",
        "torch": torch.__version__, "texts": args.n,
        "same_bits_alone_vs_together": bool(np.array_equal(alone, together)),
        "same_bits_together_vs_reversed": bool(np.array_equal(together, backwards)),
        "same_bits_together_vs_mixed": bool(np.array_equal(together, mixed)),
        "max_abs_diff_alone_vs_together": float(np.abs(alone - together).max()),
        "max_abs_diff_vs_numpy_cpu": float(np.abs(together - cpu).max()),
    }
    atomic_write(args.out, json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0 if all(v for k, v in report.items() if k.startswith("same_bits")) else 1


if __name__ == "__main__":
    raise SystemExit(main())
