"""The router: the provider of each request, picked from its model string."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from backends.base import Backend, LLMRequest, LLMResponse
from backends.breaker import BreakerPolicy, BreakerState
from backends.errors import BackendConfigError, BackendError
from backends.middleware.halt import Halt
from backends.middleware.ledger import Ledger
from backends.middleware.provider import Limits, Provider
from backends.middleware.retry import RetryPolicy
from backends.middleware.stats import CallTally
from backends.providers import get_preset, split_model


class Router:
    """Picks the provider for each request from its model string.

    ``"openrouter:google/gemini-2.5-flash"`` goes to OpenRouter; a model without a
    known preset prefix goes to ``default``. Providers are created on first use.

    Args:
        default: The run's default preset.
        options: Backend options (limits, retries, json mode, base URL, key env).
        base_url: Endpoint override for the default preset.
        ledger: The run's ledger.
        halt: The run's fail-fast switch.
        stub: Backend for models routed to ``stub:``.
        share: Divide each provider's concurrency, request and token rates by
            this: a sweep that runs trials in ``share`` processes at once gives
            each its share, so that the limits hold for the sweep as a whole.

    Attributes:
        breaker_listeners: Told of every change of any provider's circuit breaker.
    """

    name = "router"

    def __init__(self, default: str, options: Mapping[str, Any], base_url: str | None,
                 ledger: Ledger, halt: Halt, stub: Backend | None = None, share: int = 1) -> None:
        self.default = default
        self.options = dict(options)
        self.base_url = base_url
        self.ledger = ledger
        self.halt = halt
        self.stub = stub
        self.share = share
        self.providers: dict[str, Provider] = {}
        self.breaker_listeners: list[Callable[[BreakerState], None]] = []

    def provider(self, preset_name: str) -> Provider:
        """The provider of ``preset_name`` (created on first use)."""
        prov = self.providers.get(preset_name)
        if prov is not None:
            return prov
        preset = get_preset(preset_name)
        is_default = preset_name == self.default
        base_url = (self.base_url if is_default and self.base_url else None) or preset.base_url
        if not base_url:
            raise BackendConfigError(f"base_url: backend {preset_name!r} needs --base-url")
        opts = self.options
        key_env = (opts.get("api_key_env") if is_default else None) or preset.api_key_env
        share = self.share
        rpm, tpm = opts.get("rpm"), opts.get("tpm")
        limits = Limits(
            max_concurrency=max(1, int(opts.get("max_concurrency") or preset.max_concurrency) // share),
            rpm=None if rpm is None else rpm / share,
            tpm=None if tpm is None else tpm / share,
            timeout_s=float(opts.get("timeout_s", 120.0)),
        )
        retry = RetryPolicy(
            max_retries=int(opts.get("max_retries", 6)),
            backoff_base_s=float(opts.get("backoff_base_s", 0.5)),
            backoff_max_s=float(opts.get("backoff_max_s", 30.0)),
            retry_after_cap_s=float(opts.get("retry_after_cap_s", 60.0)),
        )
        breaker = BreakerPolicy(
            window=int(opts.get("breaker_window", BreakerPolicy.window)),
            threshold=float(opts.get("breaker_threshold", BreakerPolicy.threshold)),
            probe_s=float(opts.get("breaker_probe_s", BreakerPolicy.probe_s)),
        )
        json_mode = str(opts.get("json_mode", "auto")) if is_default else "auto"
        prov = Provider(preset, base_url, key_env, limits, retry, self.ledger, self.halt,
                        json_mode=json_mode, jitter_seed=int(opts.get("jitter_seed", 0)),
                        breaker=breaker, breaker_listeners=self.breaker_listeners,
                        model_rules=opts.get("model_rules"))
        self.providers[preset_name] = prov
        return prov

    async def complete(self, request: LLMRequest, tally: CallTally | None = None,
                       stub: Backend | None = None) -> LLMResponse:
        """Route and send ``request``.

        Args:
            request: The request.
            tally: The calling trial's counters.
            stub: The calling trial's stub for ``stub:`` models (its scenario
                behaviour may differ from trial to trial); the router's own otherwise.
        """
        preset_name, model = split_model(request.model, self.default)
        if preset_name == "stub":
            stub = stub or self.stub
            if stub is None:
                raise BackendConfigError("backend: no stub behaviour for 'stub:' models")
            self.halt.check()
            return await stub.complete(request)
        try:
            provider = self.provider(preset_name)
        except BackendConfigError as exc:
            raise BackendError(str(exc)) from None
        return await provider.complete(request, model, tally)

    async def count_tokens(self, request: LLMRequest) -> int | None:
        """Tokens of ``request``'s prompt text by its provider's tokenizer, or None (see :meth:`Provider.count_tokens`)."""
        preset_name, model = split_model(request.model, self.default)
        if preset_name == "stub":
            return None
        try:
            return await self.provider(preset_name).count_tokens(request, model)
        except (BackendConfigError, BackendError):  # (no base URL, no key): the completion will say so
            return None

    def sent(self, models: Any = None) -> dict[str, dict[str, Any]]:
        """What each provider was sent for its models (their rules, the parameters they
        refused; see :mod:`backends.middleware.adapt`), by preset and model; ``models``:
        only these model strings (as agents name them)."""
        wanted = None if models is None else {split_model(m, self.default) for m in models}
        out: dict[str, dict[str, Any]] = {}
        for name, prov in sorted(self.providers.items()):
            for model in sorted(prov.sent.rules):
                if wanted is not None and (name, model) not in wanted:
                    continue
                record = prov.sent.record(model)
                if record:
                    out.setdefault(name, {})[model] = record
        return out

    def stats(self) -> dict[str, Any]:
        """Per-provider counters, with each circuit breaker's state."""
        return {
            name: {**p.stats.to_dict(), "breaker": {"state": p.breaker.state, "opened": p.breaker.opened}}
            for name, p in sorted(self.providers.items())
        }

    async def aclose(self) -> None:
        """Close every provider's HTTP session."""
        for prov in self.providers.values():
            await prov.aclose()
