"""Re-run a recorded run and compare traces: ``python -m simcore.replay RUN_DIR``.

The run is rebuilt from its manifest (scenario, config, seed, backend, and the
perturbation of a perturbed run) and run again; nothing is written (a large
world's new trace streams to a temporary directory, deleted afterwards). A
run on a real backend is answered from its ``cassette.sqlite``, offline and
without a key. The new trace is compared line by line with
the recorded ``trace.jsonl``. Prints ``trace sha256 <hash> identical to the recorded
run``, or both hashes and the first event that differs; exits 0 when identical, 1
when not, 2 on bad input.
With ``--analysis`` the scenario's analysis runs too, and its metrics are compared
with the ones ``results.json`` records: it prints how many match, or each one that
differs, recorded against recomputed (and exits 1 when one does).

Every file is read through :mod:`simcore.base.files` and checked before the run
starts: a recorded trace whose sha256 is not the one its manifest records is
reported as damaged (exit 2), never as a replay that differs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from backends.base import canonical_json
from backends.registry import BackendSpec, replay_backend
from simcore.base.config import ConfigError
from simcore.base.files import (
    DamagedFile,
    check_trace,
    read_cassette,
    read_manifest,
    read_results,
)
from simcore.perturbation import parse_perturbation
from simcore.runs.args import OneLineParser, fail
from simcore.runs.runner import close_backend, run_trial_async
from simcore.runs.scenario import load_scenario
from simcore.sim.trace import StreamedTrace, Trace, first_difference


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
        metrics: With the analysis: the number of metrics ``results.json`` records.
        metrics_differ: With the analysis: each metric whose recomputed value is not
            the recorded one, as ``[recorded, recomputed]`` (None: not recomputed).
    """

    identical: bool
    recorded_sha256: str
    replayed_sha256: str
    first_diff: int | None = None
    recorded: str | None = None
    replayed: str | None = None
    metrics: int | None = None
    metrics_differ: dict[str, list[Any]] | None = None

    @property
    def ok(self) -> bool:
        """The traces are identical, and so are the metrics if the analysis ran."""
        return self.identical and not self.metrics_differ

    def analysis_lines(self) -> list[str]:
        """What the recomputed analysis showed, for the terminal (nothing without the analysis)."""
        if self.metrics_differ is None:
            return []
        if not self.metrics_differ:
            return [f"analysis recomputed: all {self.metrics} metrics equal the ones results.json records"]
        lines = [f"analysis recomputed: {len(self.metrics_differ)} of {self.metrics} metrics differ from "
                 "results.json:"]
        lines += [f"  {name}: recorded {json.dumps(a)}, recomputed {json.dumps(b)}"
                  for name, (a, b) in sorted(self.metrics_differ.items())]
        return lines


async def replay_async(run_dir: str | Path, analysis: bool = False) -> ReplayResult:
    """Replay the run in ``run_dir`` and compare its trace with the recorded one.

    Only the trace is compared, so the scenario's analysis (embeddings, plots) is
    skipped unless ``analysis`` asks for it (to check that it still runs).

    Raises:
        ConfigError: when the directory is not a run directory.
        DamagedFile: when a file the replay needs fails its check (the recorded
            trace above all: its sha256 must be the one the manifest records).
    """
    run_dir = Path(run_dir)
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file():
        raise ConfigError(f"run_dir: {str(run_dir)!r} is not a run directory (it has no manifest.json)")
    # Check every file the replay trusts before running anything: a damaged
    # recorded trace must not be reported as a replay that differs.
    manifest = read_manifest(run_dir)
    trace_path = check_trace(run_dir, manifest)
    read_cassette(run_dir, manifest)
    scenario = load_scenario(manifest["scenario"])
    try:
        config = scenario.config_type.from_mapping(manifest["config"])
    except ConfigError as exc:
        raise DamagedFile(manifest_path, f"config.{exc}") from None
    spec = BackendSpec.from_dict(manifest["backend"])
    behaviour = scenario.behaviour(config) if scenario.behaviour else None
    intervention = None
    if manifest.get("perturbation") is not None:
        try:
            intervention = parse_perturbation(manifest["perturbation"])
        except ValueError as exc:
            raise DamagedFile(manifest_path, f"perturbation: {exc}") from None
    backend = replay_backend(spec, run_dir, behaviour)
    with tempfile.TemporaryDirectory(prefix="simcore-replay-") as scratch:
        try:
            # A large world streams its new trace to scratch space, as it did when recorded.
            trial = await run_trial_async(
                scenario, config, int(manifest["seed"]), spec, backend, intervention,
                analyze=analysis, trace="auto", trace_dir=scratch,
            )
        finally:
            await close_backend(backend)
        try:
            result = _compare(trace_path, manifest["trace_sha256"], trial.trace)
        finally:
            if isinstance(trial.trace, StreamedTrace):
                trial.trace.discard()
    if not analysis:
        return result
    recorded = read_results(run_dir, manifest).get("metrics") or {}
    # Through JSON, as results.json was written: numpy scalars and NaN compare as recorded.
    recomputed = json.loads(canonical_json(trial.results.get("metrics") or {}))
    differ = {name: [value, recomputed.get(name)] for name, value in recorded.items()
              if canonical_json(value) != canonical_json(recomputed.get(name))}
    return dataclasses.replace(result, metrics=len(recorded), metrics_differ=differ)


def _compare(trace_path: Path, recorded_sha: str, replayed: Trace | StreamedTrace) -> ReplayResult:
    """The replayed trace against the recorded one (whose sha256 :func:`check_trace` confirmed)."""
    replayed_sha = replayed.sha256()
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


def build_parser() -> OneLineParser:
    """The command's parser."""
    parser = OneLineParser(
        prog="python -m simcore.replay",
        description="Re-run a recorded run from its manifest and compare the traces.",
        elsewhere={
            "--seed": "a replay runs the recorded run's own seed (python -m simcore.run NAME --seed N runs another)",
            "--backend": "a replay is answered from the run's cassette, or by the stub, offline",
            "--out": "a replay writes nothing",
        },
    )
    parser.add_argument("run_dir", help="a run directory (runs/<scenario>/<run-id>)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--analysis", action="store_true",
                        help="also run the scenario's analysis (embeddings and metrics; slower), "
                        "which the trace comparison does not need")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(replay_async(args.run_dir, analysis=args.analysis))
    except DamagedFile as exc:
        fail(f"cannot replay: the recorded run is damaged: {exc}")
    except (ConfigError, ValueError) as exc:
        fail(f"cannot replay {args.run_dir}: {exc}")
    if args.json:
        print(json.dumps(result.__dict__, indent=2))
        return 0 if result.ok else 1
    if result.identical:
        print(f"trace sha256 {result.recorded_sha256} identical to the recorded run")
    else:
        print(f"trace sha256 {result.replayed_sha256} differs from the recorded run's {result.recorded_sha256}")
        print(f"first difference at event {result.first_diff}:")
        print(f"  recorded: {result.recorded}")
        print(f"  replayed: {result.replayed}")
    for line in result.analysis_lines():
        print(line)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
