"""Backend specs and the factory that turns a spec into a backend.

A :class:`BackendSpec` is what a run records in its manifest: it names the backend
(a preset, see :mod:`backends.providers`) and its options but never holds a secret
(keys come from environment variables when a request is sent).

- ``stub`` with no cassette, budget or fail-fast: the bare :class:`StubBackend`.
- Anything else: a :class:`~backends.session.RunBackend` (router + middleware +
  ledger + optional cassette), which the runner splits into per-trial views.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from backends.base import Backend
from backends.cassette import MODES, Cassette
from backends.errors import BackendConfigError, not_listening
from backends.middleware import Halt, Ledger, Router, refused
from backends.models import load_rules
from backends.pricing import PriceTable
from backends.providers import JSON_MODES, PRESETS, get_preset, split_model
from backends.session import RunBackend, TrialBackend
from backends.stub import Behaviour, StubBackend

BACKENDS = tuple(PRESETS)
CASSETTE_FILE = "cassette.sqlite"


@dataclass(frozen=True)
class BackendSpec:
    """Which backend a run uses.

    Attributes:
        name: Backend name (see ``BACKENDS``).
        model: Default model for agents that name none.
        base_url: Endpoint for HTTP backends.
        options: Backend-specific options (no secrets; see ``OPTIONS``).
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


def _number(lo: float, integer: bool = False, hi: float | None = None, low_open: bool = False):
    def check(name: str, value: Any) -> Any:
        kind = "an integer" if integer else "a number"
        try:
            v = int(value) if integer else float(value)
            if integer and float(value) != v:
                raise ValueError
        except (TypeError, ValueError):
            raise BackendConfigError(f"{name}: must be {kind}, got {value!r}") from None
        bad = v <= lo if low_open else v < lo
        if bad or (hi is not None and v > hi):
            rng = f"> {lo:g}" if low_open else (f"from {lo:g} to {hi:g}" if hi is not None else f">= {lo:g}")
            raise BackendConfigError(f"{name}: must be {kind} {rng}, got {value!r}")
        return v
    return check


def _choice(choices: tuple[str, ...]):
    def check(name: str, value: Any) -> Any:
        if value not in choices:
            raise BackendConfigError(f"{name}: must be one of {', '.join(choices)}; got {value!r}")
        return value
    return check


def _text(name: str, value: Any) -> Any:
    if not isinstance(value, str) or not value:
        raise BackendConfigError(f"{name}: must be a non-empty string, got {value!r}")
    return value


def _flag(name: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise BackendConfigError(f"{name}: must be true or false, got {value!r}")
    return value


# Option name -> validator. None values mean "not set" and are dropped.
OPTIONS = {
    "api_key_env": _text,
    "json_mode": _choice(JSON_MODES),
    "max_concurrency": _number(1, integer=True),
    "rpm": _number(0, low_open=True),
    "tpm": _number(0, low_open=True),
    "timeout_s": _number(0, low_open=True),
    "max_retries": _number(0, integer=True),
    "backoff_base_s": _number(0),
    "backoff_max_s": _number(0),
    "retry_after_cap_s": _number(0),
    "jitter_seed": _number(0, integer=True),
    "budget_usd": _number(0),
    "prices": _text,
    "model_rules": _text,
    "cassette": _text,
    "cassette_mode": _choice(MODES),
    "fail_fast": _flag,
    "malformed_rate": _number(0, hi=1),
    "reask": _number(0, integer=True, hi=5),
    "reask_max_tokens": _number(1, integer=True),
    "breaker_window": _number(0, integer=True),
    "breaker_threshold": _number(0, hi=1),
    "breaker_probe_s": _number(0, low_open=True),
    "context_window": _number(1, integer=True),
}

# Options that say how calls are made, not what they return: limits, timeouts,
# retries, breaker, budget, fail-fast and the key's variable. A sweep may change
# them on resume; they are not part of its identity (see :func:`identity_spec`).
RUN_OPTIONS = frozenset({
    "api_key_env", "max_concurrency", "rpm", "tpm", "timeout_s", "max_retries", "backoff_base_s",
    "backoff_max_s", "retry_after_cap_s", "jitter_seed", "budget_usd", "fail_fast",
    "breaker_window", "breaker_threshold", "breaker_probe_s",
})


def identity_spec(spec: BackendSpec) -> BackendSpec:
    """``spec`` without its :data:`RUN_OPTIONS`: the part that determines the replies."""
    return dataclasses.replace(spec, options={k: v for k, v in spec.options.items() if k not in RUN_OPTIONS})

REASK_MAX_TOKENS = 2048


def reask_settings(spec: BackendSpec) -> tuple[int, int]:
    """Re-asks per unreadable reply (default 1 on real backends, 0 on the stub) and their token cap."""
    opts = spec.options
    default = 0 if spec.name == "stub" else 1
    return int(opts.get("reask", default)), int(opts.get("reask_max_tokens", REASK_MAX_TOKENS))


def check_spec(spec: BackendSpec) -> BackendSpec:
    """Validate a spec; return it with its options normalised.

    Raises:
        BackendConfigError: one line naming the field and what is allowed.
    """
    get_preset(spec.name)
    options: dict[str, Any] = {}
    for key, value in spec.options.items():
        if key not in OPTIONS:
            raise BackendConfigError(f"backend option: unknown option {key!r}; known: {', '.join(OPTIONS)}")
        if value is not None:
            options[key] = OPTIONS[key](key, value)
    base_url = spec.base_url
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise BackendConfigError(f"base_url: must start with http:// or https://, got {base_url!r}")
    if spec.name == "openai-compatible" and not base_url:
        raise BackendConfigError("base_url: backend 'openai-compatible' needs --base-url")
    if "prices" in options and not Path(options["prices"]).is_file():
        raise BackendConfigError(f"prices: file {options['prices']!r} not found")
    if "model_rules" in options:
        if not Path(options["model_rules"]).is_file():
            raise BackendConfigError(f"model_rules: file {options['model_rules']!r} not found")
        load_rules(options["model_rules"])  # every rule checked now, before any work
    if options.get("cassette_mode") in ("replay", "resume") and not Path(options.get("cassette", "")).is_file():
        raise BackendConfigError(f"cassette: --cassette-mode {options['cassette_mode']} needs an existing --cassette "
                                 "file")
    return BackendSpec(spec.name, spec.model, base_url, options)


def missing_key(spec: BackendSpec) -> str | None:
    """The environment variable the default preset needs but lacks, or None."""
    if spec.options.get("cassette_mode") == "replay":
        return None
    preset = get_preset(spec.name)
    env = spec.options.get("api_key_env") or preset.api_key_env
    if env and not os.environ.get(env):
        return env
    return None


def check_servers(spec: BackendSpec, timeout_s: float = 3.0) -> None:
    """Fail at once when a local server the run needs (Ollama, llama.cpp, vLLM) is not running.

    Checks the run's default preset and the preset ``--model`` names, with one TCP
    connection each. Only a refusal counts: a slow or unresolvable host is left to
    the run's own timeouts and retries. A cassette replayed offline needs no server.

    Raises:
        BackendConfigError: "nothing is listening at URL: is SERVER running?".
    """
    if spec.options.get("cassette_mode") == "replay":
        return
    for name in dict.fromkeys((spec.name, split_model(spec.model or "", spec.name)[0])):
        preset = PRESETS.get(name)
        if preset is None or not preset.local or preset.protocol == "stub":
            continue
        url = (spec.base_url if name == spec.name else None) or preset.base_url
        parts = urlsplit(url or "")
        if not parts.hostname:
            continue
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
        except OSError as exc:
            if refused(exc):
                raise BackendConfigError(not_listening(url, preset.server)) from None


def price_table(spec: BackendSpec) -> PriceTable:
    """The run's prices: the built-in table, ``--prices``, and free local models.

    Calls to a local server (llama.cpp, Ollama, vLLM) cost nothing. On the stub, a
    call under a real model's name (``--backend stub --model gpt-4.1-mini``, or a
    config that names models) is priced as that model would charge, so stub runs
    and dry runs show what the run would cost; only the model ``stub`` is free.
    """

    def free(model: str) -> bool:
        if model == "stub" or model.startswith("stub:"):
            return True
        preset, _ = split_model(model, spec.name)
        if preset == "stub":  # the stub answering under a real model's name
            return False
        return PRESETS[preset].local if preset in PRESETS else False

    return PriceTable.load(spec.options.get("prices"), free)


def make_backend(spec: BackendSpec, behaviour: Behaviour | None = None, share: int = 1) -> Backend:
    """Build the backend ``spec`` names.

    Args:
        spec: The backend spec.
        behaviour: The scenario's stub behaviour model (for the stub and ``stub:`` models).
        share: How many such backends run at once (a sweep's worker processes):
            each gets 1/share of the concurrency limit, the request and token
            rates and the budget, so that together they keep the spec's limits.

    Raises:
        BackendConfigError: for bad options, or a missing API key.
    """
    spec = check_spec(spec)
    opts = spec.options
    malformed = float(opts.get("malformed_rate", 0.0))
    stub = StubBackend(behaviour, malformed_rate=malformed)
    if spec.name == "stub" and not {"cassette", "budget_usd", "fail_fast"} & set(opts):
        return stub
    env = missing_key(spec)
    if env:
        raise BackendConfigError(f"backend: {spec.name} needs the {env} environment variable (your API key)")
    budget = opts.get("budget_usd")
    ledger = Ledger(price_table(spec), None if budget is None else budget / share)
    halt = Halt()
    inner: Backend = (stub if spec.name == "stub"
                      else Router(spec.name, opts, spec.base_url, ledger, halt, stub, share=share))
    mode = opts.get("cassette_mode", "auto")
    cassette = Cassette(opts["cassette"], readonly=mode in ("replay", "resume")) if "cassette" in opts else None
    return RunBackend(spec.name, inner, ledger, cassette=cassette, mode=mode,
                      fail_fast=bool(opts.get("fail_fast", False)), halt=halt,
                      make_stub=lambda b: StubBackend(b, malformed_rate=malformed))


def default_concurrency(spec: BackendSpec) -> int:
    """The concurrency limit of ``spec``'s default provider (its option, else the preset's)."""
    return int(spec.options.get("max_concurrency") or get_preset(spec.name).max_concurrency)


def replay_backend(spec: BackendSpec, run_dir: Any, behaviour: Behaviour | None = None) -> Backend:
    """The backend that reproduces a recorded run offline.

    A run with a cassette is answered from it, strictly, with no network client
    and no key; a stub run without one is regenerated by the stub.

    Raises:
        ValueError: when the run cannot be replayed offline.
    """
    path = Path(run_dir) / CASSETTE_FILE
    if path.is_file():
        return TrialBackend(None, None, source=Cassette(path, readonly=True))
    if spec.name == "stub":
        return StubBackend(behaviour, malformed_rate=float(spec.options.get("malformed_rate", 0.0)))
    raise ValueError(f"backend: replaying a {spec.name!r} run needs its cassette, which this run lacks")


def add_backend_args(parser: Any, sweep: bool = False) -> None:
    """The backend flags beyond ``--backend/--model/--base-url`` (an argparse group).

    With ``sweep`` (the batch runner), ``--budget-usd``, ``--fail-fast`` and
    ``--estimate`` are described as they act on a whole sweep.
    """
    g = parser.add_argument_group(
        "LLM backend (real providers; keys only from environment variables)"
    )
    g.add_argument("--api-key-env", metavar="VAR", default=None,
                   help="environment variable holding the API key (default: the preset's, e.g. OPENAI_API_KEY)")
    g.add_argument("--json-mode", default=None, choices=JSON_MODES,
                   help="how OpenAI-compatible servers are asked for JSON (default: auto, per preset)")
    whole = " (for the whole sweep, shared among its worker processes)" if sweep else ""
    g.add_argument("--max-concurrency", metavar="N", default=None,
                   help=f"requests in flight per provider{whole} (default: 16; llamacpp 1, ollama 4, vllm 64)")
    g.add_argument("--rpm", metavar="N", default=None,
                   help=f"requests per minute per provider{whole} (default: unlimited)")
    g.add_argument("--tpm", metavar="N", default=None,
                   help=f"tokens per minute per provider{whole}, prompt estimate + max_tokens (default: unlimited)")
    g.add_argument("--timeout", metavar="S", dest="timeout_s", default=None,
                   help="seconds per request attempt; an attempt with no whole response by then is "
                        "cancelled and retried (default: 120)")
    g.add_argument("--max-retries", metavar="N", default=None,
                   help="retries on connection errors, timeouts, 408/409/429/5xx (default: 6)")
    g.add_argument("--breaker-window", metavar="N", default=None,
                   help="circuit breaker: attempts remembered per provider; 0 turns it off (default: 50)")
    g.add_argument("--breaker-threshold", metavar="P", default=None,
                   help="circuit breaker: stop sending to a provider when more than this share of a full "
                        "window failed, and probe it with exponential backoff until it answers (default: 0.5)")
    g.add_argument("--budget-usd", metavar="X", default=None,
                   help="cap on the cost of the whole sweep: stop dispatching when spent plus the expected "
                        "cost of the next trials would pass it, and refuse any call that could pass it; "
                        "the rest are 'skipped'" if sweep else
                        "refuse any call that could take spending past X dollars")
    g.add_argument("--prices", metavar="FILE", default=None,
                   help="JSON price table that overrides/extends backends/prices.json")
    g.add_argument("--model-rules", metavar="FILE", default=None,
                   help="JSON model rules (what each model family accepts) that come before backends/models.json "
                        "(default: $SIMCORE_MODEL_RULES, if set; see docs/providers.md)")
    g.add_argument("--cassette", metavar="PATH", default=None,
                   help="SQLite cassette to answer from and record into (see --cassette-mode)")
    g.add_argument("--cassette-mode", default=None, choices=MODES,
                   help="auto: replay hits, record misses (default); record: always call; replay: never call; "
                        "resume: replay hits, call for misses, leave the file as it is")
    g.add_argument("--fail-fast", action="store_true", default=None,
                   help="stop dispatching after the first failed trial (--max-failed-trials 1)" if sweep else
                        "halt the whole run after the first call that fails for good")
    g.add_argument("--reask", metavar="N", default=None,
                   help="re-ask a reply that cannot be read up to N times in the same turn, quoting it and "
                        "asking for the JSON only (default: 1 on real backends, 0 on the stub)")
    g.add_argument("--reask-max-tokens", metavar="N", default=None,
                   help=f"largest token budget a re-ask of a reply cut at max_tokens may get "
                        f"(each re-ask doubles it; default: {REASK_MAX_TOKENS})")
    g.add_argument("--context-window", metavar="N", default=None,
                   help="the model's context window in tokens: every request is fitted to it (its reply budget "
                        "lowered, its history trimmed by the agent's memory). Default: what the server says "
                        "(llama.cpp /props, vLLM's model list, Ollama's model info), or, for llama-cpp-python's "
                        "server, what its first refusal of a long prompt names")
    g.add_argument("--estimate", action="store_true",
                   help="same as --dry-run" if sweep else
                        "print the expected calls, tokens and cost (a dry run on the stub) and exit")


# The options that add_backend_args gives flags to (dest names).
FLAG_OPTIONS = ("api_key_env", "json_mode", "max_concurrency", "rpm", "tpm", "timeout_s", "max_retries",
                "breaker_window", "breaker_threshold", "budget_usd", "prices", "model_rules", "cassette",
                "cassette_mode",
                "fail_fast", "reask", "reask_max_tokens", "context_window")


def spec_from_args(args: Any) -> BackendSpec:
    """The (validated) backend spec that parsed flags describe.

    Raises:
        BackendConfigError: for bad values.
    """
    options = {n: getattr(args, n) for n in FLAG_OPTIONS if getattr(args, n, None) is not None}
    if options.get("cassette") is not None:
        options["cassette"] = str(Path(options["cassette"]))
    name = args.backend
    get_preset(name)
    return check_spec(BackendSpec(name=name, model=args.model or name, base_url=args.base_url, options=options))
