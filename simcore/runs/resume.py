"""Finishing a run that failed after paid calls, from its own cassette.

A run on a real backend records every call it made in its directory's
``cassette.sqlite``, a run that failed too (a provider outage, a spent budget, a
server that went away). Run again from its manifest (scenario, config, seed,
backend) with that cassette as a read-only source (cassette mode ``resume``), the
calls it recorded are answered from the cassette and only the rest are sent; the
replies being the same, the finished run's trace and results are an uninterrupted
run's. ``python -m simcore.run --resume RUN_DIR`` does it (:func:`simcore.cli.main`),
and a failed run prints that command (:func:`finish_command`).

The resumed run is a new run directory beside the failed one, whose manifest
names the failed run (``resumed_from``); the failed run is left as it was.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from backends.cassette import Cassette
from backends.errors import BackendConfigError
from backends.registry import BackendSpec, check_spec
from simcore.base.config import ConfigError
from simcore.base.files import read_cassette, read_run

COMMAND = "python -m simcore.run --resume"

#: The backend options a resumed run may change: how its calls are made (limits, timeouts,
#: retries, breaker, budget, fail-fast, the key's variable), not what they return.
CALL_OPTIONS = frozenset({
    "api_key_env", "max_concurrency", "rpm", "tpm", "timeout_s", "max_retries", "breaker_window",
    "breaker_threshold", "budget_usd", "fail_fast",
})
#: Every flag a resumed run may be given (by its dest): those options, the server's address,
#: where the run is written and how it is printed, and its analysis settings. The rest of
#: its definition comes from its manifest.
MAY_CHANGE = CALL_OPTIONS | {"resume", "base_url", "out", "json", "trace", "device", "embed_cache", "plot_level"}


def recorded_calls(run_dir: str | Path) -> int:
    """The calls a run's cassette answers (its recorded responses); 0 without a cassette."""
    path = Path(run_dir) / "cassette.sqlite"
    if not path.is_file():
        return 0
    cassette = Cassette(path, readonly=True)
    try:
        return sum(e.kind == "response" and e.body.get("finish_reason") != "count" for e in cassette.entries())
    finally:
        cassette.close()


def finish_command(run_dir: str | Path, results: Mapping[str, Any]) -> str | None:
    """The command that finishes a failed run from its cassette, or None (it finished, or has no
    recorded call to spare: run it again)."""
    if results.get("status") == "ok" or not recorded_calls(run_dir):
        return None
    return f"{COMMAND} {shlex.quote(str(run_dir))}"


@dataclasses.dataclass(frozen=True)
class Resumed:
    """A failed run, read back to be finished."""

    run_dir: Path
    scenario: str
    config: dict[str, Any]
    seed: int
    spec: BackendSpec  # the recorded backend, answered from the run's cassette first
    recorded: int  # calls its cassette answers


def read_failed(run_dir: str | Path, given: Mapping[str, Any]) -> Resumed:
    """The failed run in ``run_dir``, checked, with the options ``given`` (flags by their dest) laid
    over its recorded backend.

    Raises:
        ConfigError: one line: not a run directory, a run that finished, one with no cassette,
            or a flag that would change what the run is.
        DamagedFile: when one of its files fails its check.
    """
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise ConfigError(f"resume: {str(run_dir)!r} is not a run directory (it has no manifest.json)")
    fixed = sorted(k for k in given if k not in MAY_CHANGE)
    if fixed:
        flag = "--" + fixed[0].replace("_", "-")
        raise ConfigError(f"resume: {flag} is the resumed run's own (its manifest's); drop it (only its calls' "
                          "limits, retries, timeout, budget, key and --base-url, --out and the analysis flags "
                          "may change)")
    run = read_run(run_dir, trace=False)
    manifest = run.manifest
    if run.results.get("status") == "ok":
        raise ConfigError(f"resume: {run_dir} finished ok; there is nothing to finish")
    cassette = read_cassette(run_dir, manifest)
    recorded = recorded_calls(run_dir) if cassette is not None else 0
    if not recorded:
        raise ConfigError(f"resume: {run_dir} recorded no call to answer from (no cassette.sqlite, or no reply in "
                          "it); run it again as it was run")
    spec = BackendSpec.from_dict(manifest["backend"])
    options = {k: v for k, v in spec.options.items() if k not in ("cassette", "cassette_mode")}
    options.update({k: v for k, v in given.items() if k in CALL_OPTIONS})
    options.update(cassette=str(cassette), cassette_mode="resume")
    try:
        spec = check_spec(dataclasses.replace(spec, base_url=given.get("base_url") or spec.base_url, options=options))
    except BackendConfigError as exc:
        raise ConfigError(str(exc)) from None
    return Resumed(run_dir, manifest["scenario"], manifest["config"], int(manifest["seed"]), spec, recorded)
