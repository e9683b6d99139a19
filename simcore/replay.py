"""Re-run a recorded run and compare traces: ``python -m simcore.replay RUN_DIR``.

The run is rebuilt from its manifest (scenario, config, seed, backend, and the
perturbation of a perturbed run) and run again in memory; nothing is written. A
run on a real backend is answered from its ``cassette.sqlite``, offline and
without a key. The new trace is compared line by line with
the recorded ``trace.jsonl``. Prints the trace's sha256 and ``identical``, or the
first event that differs; exits 0 when identical, 1 when not, 2 on bad input.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from backends.registry import BackendSpec, replay_backend
from simcore.cli import OneLineParser, fail
from simcore.config import ConfigError
from simcore.records import read_json
from simcore.runner import close_backend, run_trial_async
from simcore.scenario import load_scenario
from simcore.trace import StreamedTrace, Trace, first_difference


@dataclass(frozen=True)
class ReplayResult:
    """Outcome of a replay.

    Attributes:
        identical: Whether the traces match byte for byte.
        recorded_sha256: sha256 of the recorded trace file.
        replayed_sha256: sha256 of the new trace.
        first_diff: Index of the first differing event, or None.
        recorded: That event as recorded (or None past the end).
        replayed: That event as replayed (or None past the end).
    """

    identical: bool
    recorded_sha256: str
    replayed_sha256: str
    first_diff: int | None = None
    recorded: str | None = None
    replayed: str | None = None


async def replay_async(run_dir: str | Path) -> ReplayResult:
    """Replay the run in ``run_dir`` and compare its trace with the recorded one.

    Raises:
        ConfigError: when the directory is not a run directory.
    """
    run_dir = Path(run_dir)
    manifest_path, trace_path = run_dir / "manifest.json", run_dir / "trace.jsonl"
    if not manifest_path.is_file() or not trace_path.is_file():
        raise ConfigError(f"run_dir: {str(run_dir)!r} has no manifest.json and trace.jsonl")
    manifest = read_json(manifest_path)
    scenario = load_scenario(manifest["scenario"])
    config = scenario.config_type.from_mapping(manifest["config"])
    spec = BackendSpec.from_dict(manifest["backend"])
    behaviour = scenario.behaviour(config) if scenario.behaviour else None
    intervention = None
    if manifest.get("perturbation") is not None:
        from simcore.perturbation import parse_perturbation

        intervention = parse_perturbation(manifest["perturbation"])
    backend = replay_backend(spec, run_dir, behaviour)
    with tempfile.TemporaryDirectory(prefix="simcore-replay-") as scratch:
        try:
            # A large world streams its new trace to scratch space, as it did when recorded.
            trial = await run_trial_async(
                scenario, config, int(manifest["seed"]), spec, backend, intervention, trace="auto", trace_dir=scratch,
            )
        finally:
            await close_backend(backend)
        try:
            return _compare(trace_path, trial.trace)
        finally:
            if isinstance(trial.trace, StreamedTrace):
                trial.trace.discard()


def _compare(trace_path: Path, replayed: Trace | StreamedTrace) -> ReplayResult:
    recorded_hash = hashlib.sha256()
    with open(trace_path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            recorded_hash.update(block)
    recorded_sha, replayed_sha = recorded_hash.hexdigest(), replayed.sha256()
    if recorded_sha == replayed_sha:
        return ReplayResult(True, recorded_sha, replayed_sha)
    replayed_text = replayed.to_jsonl()
    a = trace_path.read_bytes().decode(errors="replace").splitlines()
    b = replayed_text.splitlines()
    i = first_difference(a, b)
    i = 0 if i is None else i  # same lines, different bytes (e.g. line endings)
    return ReplayResult(
        False, recorded_sha, replayed_sha, i,
        a[i] if i < len(a) else None, b[i] if i < len(b) else None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = OneLineParser(
        prog="python -m simcore.replay",
        description="Re-run a recorded run from its manifest and compare the traces.",
    )
    parser.add_argument("run_dir", help="a run directory (runs/<scenario>/<run-id>)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(replay_async(args.run_dir))
    except (ConfigError, ValueError, KeyError, json.JSONDecodeError) as exc:
        fail(f"cannot replay {args.run_dir}: {exc}")
    if args.json:
        print(json.dumps(result.__dict__, indent=2))
    elif result.identical:
        print(f"{result.recorded_sha256} identical")
    else:
        print(f"{result.replayed_sha256} differs from recorded {result.recorded_sha256}")
        print(f"first difference at event {result.first_diff}:")
        print(f"  recorded: {result.recorded}")
        print(f"  replayed: {result.replayed}")
    return 0 if result.identical else 1


if __name__ == "__main__":
    sys.exit(main())
