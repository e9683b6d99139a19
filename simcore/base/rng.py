"""Named random streams spawned from one run seed.

Each stream is ``SeedSequence(seed, spawn_key=words(sha256(name)))``, so a stream's
values depend only on the run seed and its name. Adding a stream never shifts
another, and nothing here depends on ``hash()`` or PYTHONHASHSEED.
"""

from __future__ import annotations

import hashlib
import random
from functools import lru_cache

import numpy as np

MAX_SEED = 2**32 - 1


@lru_cache(maxsize=65536)
def name_key(name: str) -> tuple[int, ...]:
    """Map a stream name to four 32-bit words of its sha256."""
    digest = hashlib.sha256(name.encode()).digest()
    return tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))


def seed_sequence(seed: int, name: str) -> np.random.SeedSequence:
    """Return the SeedSequence of stream ``name`` under run seed ``seed``."""
    return np.random.SeedSequence(seed, spawn_key=name_key(name))


def derive_seed(seed: int, name: str) -> int:
    """Return a 32-bit integer seed for stream ``name`` (for APIs that want an int)."""
    return int(seed_sequence(seed, name).generate_state(1)[0])


class Streams:
    """Lazily created, cached random generators keyed by name.

    Asking twice for the same name returns the same generator, which continues
    where it left off.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._numpy: dict[str, np.random.Generator] = {}
        self._python: dict[str, random.Random] = {}

    def numpy(self, name: str) -> np.random.Generator:
        """Return the numpy Generator of stream ``name``."""
        gen = self._numpy.get(name)
        if gen is None:
            gen = self._numpy[name] = np.random.default_rng(seed_sequence(self.seed, name))
        return gen

    def python(self, name: str) -> random.Random:
        """Return a ``random.Random`` for stream ``name`` (Mesa's AgentSet wants one)."""
        gen = self._python.get(name)
        if gen is None:
            gen = self._python[name] = random.Random(derive_seed(self.seed, "py:" + name))
        return gen
