"""A perturbation study of an external program, in the records of a built-in study.

For each pair seed, :func:`run_capture_study` runs the program once clean (the
baseline), ``noise_floor`` more times clean (the re-runs that measure how much it
diverges from itself), and once per perturbation, one run after another, each
through a fresh :class:`~simcore.capture.proxy.Proxy`. Every run becomes a
:class:`~simcore.runs.runner.TrialResult` of the scenario :data:`EXTERNAL`, so the
pairs are measured by :func:`simcore.perturbation.pairs.pair_metrics` and the
study is written by :func:`simcore.perturbation.study.write_study`: the same
``study.json``, ``pairs.csv``, ``summary.csv``, ``noise.json``, ``report.md``,
plots and run directories (``runs/external/pair<i>-baseline`` ...) as a study of a
simulation, which the run browser lists and shows the same way.

The noise floor is measured by default (one re-run per seed): a program is not
deterministic in general, whatever its upstream. With ``noise_floor=0`` it is
unmeasured, and the study says so in a warning on every output.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from backends.pricing import usage_cost
from backends.registry import BackendSpec, price_table
from simcore.base.config import Config, ConfigError, param
from simcore.base.records import atomic_write
from simcore.capture.perturb import CallPerturbation, check_spec
from simcore.capture.program import Outcome, run_program
from simcore.capture.proxy import Proxy, Session
from simcore.capture.recording import Recording, Redactor
from simcore.capture.upstream import HttpUpstream, StubUpstream
from simcore.capture.wire import Reply
from simcore.perturbation.operators import parse_all
from simcore.perturbation.pairs import (
    SeedRuns,
    pair_metrics,
    pair_seeds,
    rerun_divergence,
)
from simcore.perturbation.results import PerturbationResults
from simcore.perturbation.study import MAX_NOISE_RUNS, MAX_PAIRS, Study
from simcore.runs.runner import TrialResult
from simcore.runs.scenario import ResultEntry, Scenario
from simcore.sim.trace import Trace

#: How many characters of a run's stdout and stderr its results.json keeps.
TAIL = 4000
REUSE = ("prefix", "none")
#: The environment variables the SDKs read a key from: a program may send theirs.
PROGRAM_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


@dataclass(frozen=True)
class ProgramConfig(Config):
    """An external program as a study records it (what its runs' manifests hold as ``config``)."""

    command: str = param("", help="the program and its arguments, shell-quoted (secrets redacted)")
    answer: str = param("stdout", help="where its final answer is: stdout, or a file it writes")
    timeout_s: float = param(600.0, lo=1.0, hi=86400.0, help="wall-clock seconds a run may take")
    upstream: str = param("stub", help="where its calls went: stub, a preset or a base URL")
    model: str = param("", help="the model sent instead of the one it asks for ('' = as asked)")


def _not_simulated(*_: Any) -> Any:
    raise RuntimeError("external: a program runs through the capture proxy (python -m simcore.capture), "
                       "not in a simulated world")


def write_program_files(run_dir: Any, world: CapturedWorld, cfg: ProgramConfig,
                        results: dict[str, Any]) -> dict[str, Any]:
    """``stdout.txt`` and ``stderr.txt``: what the program wrote (secrets redacted)."""
    atomic_write(run_dir / "stdout.txt", world.stdout)
    atomic_write(run_dir / "stderr.txt", world.stderr)
    return {}


EXTERNAL = Scenario(
    name="external",
    description="An external program that calls LLMs (OpenAI's chat completions or Responses API, Anthropic's "
                "Messages API), run through the capture proxy.",
    config_type=ProgramConfig,
    build=_not_simulated,
    analyze=_not_simulated,
    write_artifacts=write_program_files,
    outcome=ResultEntry("answer"),
)


@dataclass
class CapturedWorld:
    """What a :class:`~simcore.runs.runner.TrialResult` needs of a world, for a captured run."""

    trace: Trace
    usage: dict[str, dict[str, int]]
    latency_s: dict[str, float]
    backend: Recording
    intervention: CallPerturbation | None
    stdout: str = ""
    stderr: str = ""


@dataclass
class Captured:
    """One run of the program: its record and its outcome."""

    seed: int
    role: str
    recording: Recording
    outcome: Outcome
    replies: dict[tuple[str, int], tuple[Any, Reply]]
    perturbation: CallPerturbation | None
    wall_s: float


async def capture_run(argv: Sequence[str], upstream: StubUpstream | HttpUpstream, redactor: Redactor, seed: int,
                      role: str, *, answer: str = "stdout", timeout_s: float = 600.0, model: str | None = None,
                      perturbation: CallPerturbation | None = None,
                      baseline: dict[tuple[str, int], tuple[Any, Reply]] | None = None) -> Captured:
    """Run the program once through a fresh proxy."""
    recording = Recording(f"{role}-{seed}", redactor)
    session = Session(upstream, recording, redactor, seed, model, perturbation, baseline)
    start = time.perf_counter()
    async with Proxy(session) as url:
        outcome = await run_program(argv, url, seed, answer, timeout_s)
    recording.exit(outcome.exit_code)
    return Captured(seed, role, recording, outcome, session.replies, perturbation, time.perf_counter() - start)


def trial_of(run: Captured, cfg: ProgramConfig, spec: BackendSpec, redactor: Redactor) -> TrialResult:
    """A captured run as a :class:`~simcore.runs.runner.TrialResult` of :data:`EXTERNAL`."""
    rec, out = run.recording, run.outcome
    status, error = "ok", None
    if out.timed_out or out.exit_code != 0:
        status = "error"
        last = (out.stderr.strip().splitlines() or [""])[-1]
        error = {"type": "Timeout" if out.timed_out else "ProgramExit",
                 "message": redactor.scrub(f"ran past {cfg.timeout_s:g} s and was killed" if out.timed_out
                                           else f"exit status {out.exit_code}: {last[:300]}"),
                 "sim_time": rec.clock}
    usage = rec.usage
    tool_calls = len(rec.trace.of_kind("tool.call"))
    results = {
        "scenario": EXTERNAL.name,
        "seed": run.seed,
        "status": status,
        "error": error,
        "role": run.role,
        "answer": redactor.scrub(out.answer),
        "exit_code": out.exit_code,
        "metrics": {
            "calls": rec.counts["calls"],
            "errors": sum(led["errors"] for led in usage.values()),
            "tool_calls": tool_calls,
            "prompt_tokens": sum(led["prompt_tokens"] for led in usage.values()),
            "completion_tokens": sum(led["completion_tokens"] for led in usage.values()),
            "calls_without_usage": sum(led["missing_usage"] for led in usage.values()),
        },
        "stdout_tail": redactor.scrub(out.stdout[-TAIL:]),
        "stderr_tail": redactor.scrub(out.stderr[-TAIL:]),
        "usage": usage,
        **usage_cost(usage, price_table(spec)),
        "n_events": len(rec.trace),
        "trace_sha256": rec.trace.sha256(),
        "prefix_reuse": {"calls": rec.counts["calls"], "reused_calls": rec.counts["reused_calls"],
                         "live_calls": rec.counts["live_calls"], "reused_usage": rec.reused},
        "endpoints": dict(sorted(rec.endpoints.items())),
        "unknown_endpoints": dict(sorted(rec.unknown_endpoints.items())),
    }
    if run.perturbation is not None:
        p = run.perturbation
        results["perturbation"] = {"spec": p.describe(), "point": p.point, "applied": redactor.scrub(p.applied)}
    world = CapturedWorld(rec.trace, usage, rec.latency_s, rec, run.perturbation,
                          redactor.scrub(out.stdout), redactor.scrub(out.stderr))
    return TrialResult(EXTERNAL, cfg, run.seed, spec, status, error, world, results, run.wall_s)  # type: ignore[arg-type]


def endpoint_counts(captured: Sequence[tuple[Captured, list[Captured], list[Captured]]], which: str) -> dict[str, int]:
    """How often the program called each endpoint, over every run of a study (``which``: ``endpoints``,
    or ``unknown_endpoints``, those the proxy does not speak)."""
    total: dict[str, int] = {}
    for base, again, perturbed in captured:
        for run in (base, *again, *perturbed):
            for endpoint, n in getattr(run.recording, which).items():
                total[endpoint] = total.get(endpoint, 0) + n
    return dict(sorted(total.items()))


def noise_record(reruns: Sequence[dict[str, Any]], requested: int) -> dict[str, Any]:
    """The noise floor of a program: the largest d_norm among its re-runs, or unmeasured
    (None, with a warning): a program is never taken to be deterministic."""
    out: dict[str, Any] = {"runs_per_seed": requested, "reruns": list(reruns), "deterministic": False}
    if reruns:
        out.update(floor=max(float(r["d_norm"]) for r in reruns), measured=True, warning=None)
    else:
        out.update(floor=None, measured=False, warning=(
            "NOISE FLOOR NOT MEASURED (--noise-floor 0): an external program need not be deterministic, so part "
            "or all of the divergence may be its own noise rather than the perturbation; within_noise_floor is "
            "unknown. Keep the default of one re-run (--noise-floor 1) or more."
        ))
    return out


def check_capture(argv: Sequence[str], perturbations: Sequence[str], pairs: int, noise_floor: int,
                  reuse: str, answer: str) -> list[str]:
    """Validate a study before anything runs; returns the canonical SPECs.

    Raises:
        ConfigError: one line naming the field and what is allowed.
    """
    import shutil
    from pathlib import Path

    if not argv:
        raise ConfigError("command: give the program to run after --, e.g. -- python my_agent.py")
    if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
        raise ConfigError(f"command: no program {argv[0]!r} found (not on PATH, not a file)")
    specs = parse_all(perturbations)
    for spec in specs:
        check_spec(spec)
    if isinstance(pairs, bool) or not isinstance(pairs, int) or not 1 <= pairs <= MAX_PAIRS:
        raise ConfigError(f"pairs: must be an integer from 1 to {MAX_PAIRS}, got {pairs!r}")
    if isinstance(noise_floor, bool) or not isinstance(noise_floor, int) or not 0 <= noise_floor <= MAX_NOISE_RUNS:
        raise ConfigError(f"noise_floor: must be an integer from 0 to {MAX_NOISE_RUNS}, got {noise_floor!r}")
    if reuse not in REUSE:
        raise ConfigError(f"reuse: must be one of {', '.join(REUSE)}; got {reuse!r}")
    if answer != "stdout" and (not answer.strip() or Path(answer).is_dir()):
        raise ConfigError(f"answer: must be stdout or a file the program writes; got {answer!r}")
    return specs


async def run_capture_study(
    argv: Sequence[str],
    perturbations: Sequence[str],
    upstream: StubUpstream | HttpUpstream,
    *,
    pairs: int = 1,
    seed: int = 42,
    noise_floor: int = 1,
    reuse: str = "prefix",
    answer: str = "stdout",
    timeout_s: float = 600.0,
    model: str | None = None,
    upstream_name: str = "stub",
    on_done: Callable[[], None] | None = None,
) -> Study:
    """Run a study of the program ``argv`` (see the module docstring); nothing is written.
    ``upstream`` is closed at the end.

    Raises:
        ConfigError: for bad input, before anything runs.
    """
    import os

    specs = check_capture(argv, perturbations, pairs, noise_floor, reuse, answer)
    redactor = Redactor()
    redactor.add(upstream.key)
    for name in PROGRAM_KEYS:  # the keys a program would send, if they are set
        redactor.add(os.environ.get(name))
    tick = on_done or (lambda: None)
    seeds = pair_seeds(seed, pairs)
    start = time.perf_counter()
    captured: list[tuple[Captured, list[Captured], list[Captured]]] = []
    try:
        for s in seeds:
            common = {"answer": answer, "timeout_s": timeout_s, "model": model}
            base = await capture_run(argv, upstream, redactor, s, "baseline", **common)
            tick()
            again = []
            for _ in range(noise_floor):
                again.append(await capture_run(argv, upstream, redactor, s, "rerun", **common))
                tick()
            perturbed = []
            for spec in specs:
                perturbed.append(await capture_run(
                    argv, upstream, redactor, s, "perturbed", **common, perturbation=CallPerturbation(spec),
                    baseline=base.replies if reuse == "prefix" else None))
                tick()
            captured.append((base, again, perturbed))
    finally:
        await upstream.aclose()
    wall = time.perf_counter() - start
    # Built once every run is done, so that every secret any run revealed is redacted everywhere.
    cfg = ProgramConfig(command=redactor.scrub(shlex.join(argv)), answer=answer, timeout_s=timeout_s,
                        upstream=redactor.scrub(upstream_name), model=model or "")
    spec = upstream.spec
    runs = []
    for base, again, perturbed in captured:
        seed_runs = SeedRuns(base.seed, list(specs), trial_of(base, cfg, spec, redactor),
                             [trial_of(p, cfg, spec, redactor) for p in perturbed],
                             [p.perturbation for p in perturbed],  # type: ignore[misc]
                             [trial_of(r, cfg, spec, redactor) for r in again])
        runs.append(seed_runs)
    reruns = [r for seed_runs in runs for r in rerun_divergence(seed_runs)]
    noise = noise_record(reruns, noise_floor)
    rows = [pair_metrics(EXTERNAL, seed_runs.baseline, seed_runs.perturbed[k], seed_runs.perturbations[k],
                         noise["floor"])
            for k in range(len(specs)) for seed_runs in runs]
    definition = {
        "scenario": EXTERNAL.name,
        "command": cfg.command,
        "answer": answer,
        "config": cfg.to_dict(),
        "perturbations": specs,
        "pairs": pairs,
        "seed": seed,
        "seeds": seeds,
        "noise_floor_runs": noise_floor,
        "reuse": reuse,
        "backend": spec.to_dict(),
        "phases": [],
        "endpoints": endpoint_counts(captured, "endpoints"),
        "unknown_endpoints": endpoint_counts(captured, "unknown_endpoints"),
    }
    return Study(PerturbationResults(definition, pd.DataFrame(rows), noise), runs, wall)
