"""Backend specs and the factory that turns a spec into a backend.

A :class:`BackendSpec` is what a run records in its manifest: it names the backend
and its options but never holds a secret (keys come from environment variables
when the backend is built).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from backends.base import Backend
from backends.stub import Behaviour, StubBackend

BACKENDS = ("stub",)


@dataclass(frozen=True)
class BackendSpec:
    """Which backend a run uses.

    Attributes:
        name: Backend name (see ``BACKENDS``).
        model: Default model for agents that name none.
        base_url: Endpoint for HTTP backends.
        options: Backend-specific options (no secrets).
    """

    name: str = "stub"
    model: str = "stub"
    base_url: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain form for manifests."""
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BackendSpec":
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: data[k] for k in ("name", "model", "base_url", "options") if k in data})


def make_backend(spec: BackendSpec, behaviour: Behaviour | None = None) -> Backend:
    """Build the backend ``spec`` names.

    Args:
        spec: The backend spec.
        behaviour: The scenario's stub behaviour model (stub only).

    Raises:
        ValueError: for an unknown backend name.
    """
    if spec.name == "stub":
        return StubBackend(behaviour, malformed_rate=float(spec.options.get("malformed_rate", 0.0)))
    raise ValueError(f"backend: must be one of {', '.join(BACKENDS)}; got {spec.name!r}")


def replay_backend(spec: BackendSpec, run_dir: Any, behaviour: Behaviour | None = None) -> Backend:
    """The backend that reproduces a recorded run offline.

    The stub is rebuilt as it was; real backends are answered from the run's
    cassette.

    Raises:
        ValueError: when the run cannot be replayed offline.
    """
    if spec.name == "stub":
        return make_backend(spec, behaviour)
    raise ValueError(f"backend: replaying a {spec.name!r} run needs its cassette, which this run lacks")
