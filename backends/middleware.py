"""The middleware between the kernel and real providers.

One :class:`Provider` per endpoint sends requests over aiohttp and applies, in
this order: the budget (a cost reservation made before anything is sent), the
concurrency limit, the requests-per-minute and tokens-per-minute buckets, the
per-request timeout, and retries with exponential backoff and jitter (Retry-After
honoured up to a cap) on connection errors, timeouts, malformed bodies and HTTP
408/409/429/5xx. :class:`Router` picks the provider from the model string.

Nothing here touches the trace: waits and jitter are wall-clock and come from a
private ``random.Random`` seeded from the options, so retries change when a
response arrives, never what the run records.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

import aiohttp

from backends.base import Backend, LLMRequest, LLMResponse, Usage
from backends.errors import (
    BackendConfigError,
    BackendError,
    BudgetExceeded,
    MalformedResponse,
    MissingAPIKey,
    RequestTimeout,
    RunHalted,
    TransportError,
    UnpricedModel,
    http_error,
    redact,
)
from backends.pricing import PriceTable, cost_usd
from backends.providers import (
    Preset,
    auth_headers,
    build_request,
    error_text,
    get_preset,
    parse_response,
    split_model,
)

log = logging.getLogger("simcore.backends")
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before trying again.

    Attributes:
        max_retries: Retries after the first attempt (0: never retry).
        backoff_base_s: First backoff; it doubles with each retry.
        backoff_max_s: Cap on one backoff.
        retry_after_cap_s: Cap on a server's Retry-After.
    """

    max_retries: int = 6
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_cap_s: float = 60.0

    def delay(self, retry: int, error: BaseException, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (0-based) after ``error``.

        Retry-After wins when the server gave one (plus up to 10% jitter so that
        clients told the same moment do not all return at once); otherwise "equal
        jitter" backoff: half the exponential step fixed, half drawn at random.
        """
        after = getattr(error, "retry_after", None)
        if after is not None:
            wait = min(max(float(after), 0.0), self.retry_after_cap_s)
            return wait + rng.uniform(0.0, 0.1 * wait)
        step = min(self.backoff_max_s, self.backoff_base_s * 2.0**retry)
        return step / 2 + rng.uniform(0.0, step / 2)


@dataclass(frozen=True)
class Limits:
    """Per-provider limits.

    Attributes:
        max_concurrency: Requests in flight at once.
        rpm: Requests started per minute (None: unlimited).
        tpm: Tokens per minute, counting the prompt estimate plus ``max_tokens``
            as providers do (None: unlimited).
        timeout_s: Wall-clock limit on one attempt, from sending to the full body.
    """

    max_concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None
    timeout_s: float = 120.0


class TokenBucket:
    """A token bucket refilled continuously at ``rate`` per second, holding ``capacity``.

    A take larger than the capacity waits for a full bucket and leaves it in
    debt, so one big request is never refused, only paced.
    """

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, capacity)
        self.level = self.capacity
        self.stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    async def take(self, amount: float) -> None:
        """Wait until ``amount`` can be taken, then take it (FIFO among waiters)."""
        async with self._lock:
            while True:
                self._refill()
                need = min(amount, self.capacity)
                if self.level >= need:
                    self.level -= amount
                    return
                await asyncio.sleep((need - self.level) / self.rate)

    def give_back(self, amount: float) -> None:
        """Return tokens that were taken but not used (a reply shorter than ``max_tokens``)."""
        self._refill()
        self.level = min(self.capacity, self.level + amount)


def prompt_upper_estimate(request: LLMRequest) -> int:
    """A generous prompt-token estimate: one token per 3 characters, 4 per message.

    Most tokenizers give about one token per 4 English characters; the margin keeps
    budget reservations and TPM pacing on the safe side.
    """
    return sum(math.ceil(len(m.content) / 3) + 4 for m in request.messages)


class Ledger:
    """Spending so far, per model, and the budget cap.

    Before a request is sent it reserves its worst case (prompt estimate at the
    input price plus ``max_tokens`` at the output price); the request is refused
    with :class:`BudgetExceeded` if spent + reserved + worst case would pass the
    budget. When the response arrives the reservation becomes the actual cost (the
    worst case if the provider reported no usage). Shared by every provider of a
    run, and by every trial of a sweep that shares the backend.
    """

    def __init__(self, prices: PriceTable, budget_usd: float | None = None) -> None:
        self.prices = prices
        self.budget_usd = budget_usd
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self.by_model: dict[str, dict[str, float]] = {}

    def worst_case(self, request: LLMRequest) -> float | None:
        """Upper cost estimate of ``request``, or None when its model has no price."""
        return cost_usd(request.model, prompt_upper_estimate(request), request.max_tokens, self.prices)

    def reserve(self, request: LLMRequest) -> float:
        """Reserve the worst case of ``request``; return the amount reserved.

        Raises:
            UnpricedModel: a budget is set and the model has no price.
            BudgetExceeded: the request could take spending past the budget.
        """
        if self.budget_usd is None:
            return 0.0
        worst = self.worst_case(request)
        if worst is None:
            raise UnpricedModel(
                f"budget: model {request.model!r} has no price, so --budget-usd cannot be enforced; "
                "add it to a prices file (--prices)"
            )
        if self.spent_usd + self.reserved_usd + worst > self.budget_usd + 1e-12:
            raise BudgetExceeded(
                f"budget: a call to {request.model} could cost up to ${worst:.6f}; "
                f"${self.spent_usd:.6f} spent and ${self.reserved_usd:.6f} reserved of ${self.budget_usd:.6f}"
            )
        self.reserved_usd += worst
        return worst

    def release(self, reserved: float) -> None:
        """Drop a reservation whose request failed."""
        self.reserved_usd = max(0.0, self.reserved_usd - reserved)

    def settle(self, request: LLMRequest, reserved: float, usage: Usage | None) -> float:
        """Turn a reservation into the actual cost; return that cost."""
        self.release(reserved)
        led = self.by_model.setdefault(
            request.model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        )
        led["calls"] += 1
        if usage is None:
            cost = reserved  # the worst case when a budget reserved it (reserve refuses unpriced models)
        else:
            led["prompt_tokens"] += usage.prompt_tokens
            led["completion_tokens"] += usage.completion_tokens
            cost = cost_usd(request.model, usage.prompt_tokens, usage.completion_tokens, self.prices) or 0.0
        led["cost_usd"] += cost
        self.spent_usd += cost
        return cost


class Halt:
    """The fail-fast switch shared by a run's providers and trials."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._event: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    @property
    def halted(self) -> bool:
        return self.reason is not None

    def trip(self, reason: str) -> None:
        """Halt: every later call fails with :class:`RunHalted`."""
        if self.reason is None:
            self.reason = reason
            if self._event is not None:
                self._event[1].set()

    def check(self) -> None:
        """Raise :class:`RunHalted` if halted."""
        if self.reason is not None:
            raise RunHalted(f"run halted (--fail-fast) after: {self.reason}")

    async def sleep(self, seconds: float) -> None:
        """Sleep, waking early (and raising RunHalted) if the run halts."""
        loop = asyncio.get_running_loop()
        if self._event is None or self._event[0] is not loop:
            self._event = (loop, asyncio.Event())
            if self.halted:
                self._event[1].set()
        event = self._event[1]
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        self.check()


@dataclass
class ProviderStats:
    """Counters of one provider (wall-clock side; never traced)."""

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    failures: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items() if k != "in_flight"}


class _LoopState:
    """Objects bound to one event loop (aiohttp session, semaphore, buckets)."""

    def __init__(self, limits: Limits) -> None:
        self.loop = asyncio.get_running_loop()
        self.session: aiohttp.ClientSession | None = None
        self.sem = asyncio.Semaphore(limits.max_concurrency)
        self.rpm = TokenBucket(limits.rpm / 60.0, limits.rpm / 60.0) if limits.rpm else None
        self.tpm = TokenBucket(limits.tpm / 60.0, limits.tpm / 60.0) if limits.tpm else None
        self.max_concurrency = limits.max_concurrency

    def http(self) -> aiohttp.ClientSession:
        if self.session is None or self.session.closed:
            self.session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_concurrency, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=None),
                # Honour HTTP(S)_PROXY only when one is set: with trust_env aiohttp
                # looks proxies up in a worker thread on every request.
                trust_env=any(os.environ.get(v) for v in _PROXY_VARS),
            )
        return self.session


class Provider:
    """One endpoint: protocol, key, limits, retries and the shared ledger.

    The key is read from the environment when a request is made and kept only in
    the request headers; it is never stored on this object, logged or raised.

    Args:
        preset: The provider preset.
        base_url: Endpoint (the preset's unless overridden).
        api_key_env: Environment variable holding the key, or None.
        limits: Concurrency, rate and timeout limits.
        retry: Retry policy.
        ledger: The run's cost ledger.
        halt: The run's fail-fast switch.
        json_mode: JSON mode override for the OpenAI protocol ("auto": the preset's).
        jitter_seed: Seed of the private jitter generator.
    """

    def __init__(self, preset: Preset, base_url: str, api_key_env: str | None, limits: Limits,
                 retry: RetryPolicy, ledger: Ledger, halt: Halt, *, json_mode: str = "auto",
                 jitter_seed: int = 0) -> None:
        self.preset = preset
        self.name = preset.name
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.limits = limits
        self.retry = retry
        self.ledger = ledger
        self.halt = halt
        self.json_mode = json_mode
        self.stats = ProviderStats()
        self._rng = random.Random(jitter_seed)
        self._state: _LoopState | None = None
        self._host = urlsplit(base_url).netloc or base_url

    def __repr__(self) -> str:
        return f"Provider({self.name!r}, {self.base_url!r})"

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            self._state = _LoopState(self.limits)
        return self._state

    def _key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise MissingAPIKey(f"{self.name}: set the {self.api_key_env} environment variable to your API key")
        return key

    async def complete(self, request: LLMRequest, model: str) -> LLMResponse:
        """Send ``request`` (as provider model ``model``) with retries; return the response.

        Raises:
            BackendError: a typed error once retries are exhausted or pointless.
        """
        self.halt.check()
        key = self._key()
        wire = build_request(self.preset, self.base_url, request, model, self.json_mode)
        payload = json.dumps(wire.body, ensure_ascii=False).encode()
        tokens = prompt_upper_estimate(request) + request.max_tokens
        reserved = self.ledger.reserve(request)
        self.stats.requests += 1
        try:
            for attempt in range(self.retry.max_retries + 1):
                outcome, seconds = await self._attempt(wire.url, auth_headers(self.preset, key), payload, tokens, key)
                if isinstance(outcome, LLMResponse):
                    self.ledger.settle(request, reserved, outcome.usage)
                    reserved = 0.0
                    tpm = self._loop_state().tpm
                    if tpm is not None and outcome.usage is not None:
                        tpm.give_back(max(0, tokens - outcome.usage.total_tokens))
                    return LLMResponse(
                        outcome.text, outcome.usage, outcome.finish_reason, outcome.model or model,
                        outcome.system_fingerprint, seconds,
                    )
                error = outcome
                self.stats.errors[type(error).__name__] = self.stats.errors.get(type(error).__name__, 0) + 1
                if not error.retryable or attempt == self.retry.max_retries:
                    self.stats.failures += 1
                    suffix = f" (after {attempt + 1} attempts)" if attempt else ""
                    raise type(error)(f"{error}{suffix}", *_status_args(error))
                wait = self.retry.delay(attempt, error, self._rng)
                self.stats.retries += 1
                log.warning("%s: %s; retry %d/%d in %.2f s", self.name, error, attempt + 1,
                            self.retry.max_retries, wait)
                await self.halt.sleep(wait)
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            if reserved:
                self.ledger.release(reserved)

    async def _attempt(self, url: str, headers: Mapping[str, str], payload: bytes, tokens: int,
                       key: str | None) -> tuple[LLMResponse | BackendError, float]:
        """One HTTP attempt: the response or the typed error it ended in, and its seconds.

        The seconds run from sending to the full body, so queueing for a
        concurrency slot or a rate token does not count as latency.
        """
        state = self._loop_state()
        stats = self.stats
        async with state.sem:
            self.halt.check()
            if state.tpm is not None:
                await state.tpm.take(tokens)
            if state.rpm is not None:
                await state.rpm.take(1)
            stats.attempts += 1
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            start = time.perf_counter()
            try:
                async with asyncio.timeout(self.limits.timeout_s):
                    async with state.http().post(url, data=payload, headers=headers) as resp:
                        status = resp.status
                        retry_after = _retry_after(resp.headers)
                        raw = await resp.read()
            except TimeoutError:
                msg = f"{self.name}: no response from {self._host} within {self.limits.timeout_s:g} s"
                return RequestTimeout(msg), time.perf_counter() - start
            except (aiohttp.ClientError, OSError) as exc:
                detail = redact(str(exc) or type(exc).__name__, key)
                msg = f"{self.name}: connection to {self._host} failed: {type(exc).__name__}: {detail}"
                return TransportError(msg), time.perf_counter() - start
            finally:
                stats.in_flight -= 1
            seconds = time.perf_counter() - start
        return self._interpret(status, raw, retry_after, key), seconds

    def _interpret(self, status: int, raw: bytes, retry_after: float | None,
                   key: str | None) -> LLMResponse | BackendError:
        """The response, or the typed error, that a status and body amount to."""
        ok = 200 <= status < 300
        text = redact(raw.decode("utf-8", errors="replace"), key, key_shapes=not ok)
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
            if ok:
                snippet = redact(text[:120], key)
                return MalformedResponse(f"{self.name}: response body is not JSON: {snippet!r}")
        if not ok:
            detail = error_text(data) if data is not None else text[:300]
            return http_error(status, f"{self.name}: HTTP {status} from {self._host}: {detail}", retry_after)
        try:
            return parse_response(self.preset, data)
        except MalformedResponse as exc:
            return MalformedResponse(f"{self.name}: {exc}")

    async def aclose(self) -> None:
        """Close the HTTP session of the current loop, if any."""
        state = self._state
        if state is not None and state.session is not None and not state.session.closed:
            try:
                if state.loop is asyncio.get_running_loop():
                    await state.session.close()
            except RuntimeError:
                pass
        self._state = None


def _status_args(error: BackendError) -> tuple[Any, ...]:
    status = getattr(error, "status", None)
    return () if status is None else (status, getattr(error, "retry_after", None))


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from Retry-After (seconds or an HTTP date) or retry-after-ms."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


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
    """

    name = "router"

    def __init__(self, default: str, options: Mapping[str, Any], base_url: str | None,
                 ledger: Ledger, halt: Halt, stub: Backend | None = None) -> None:
        self.default = default
        self.options = dict(options)
        self.base_url = base_url
        self.ledger = ledger
        self.halt = halt
        self.stub = stub
        self.providers: dict[str, Provider] = {}

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
        limits = Limits(
            max_concurrency=int(opts.get("max_concurrency") or preset.max_concurrency),
            rpm=opts.get("rpm"),
            tpm=opts.get("tpm"),
            timeout_s=float(opts.get("timeout_s", 120.0)),
        )
        retry = RetryPolicy(
            max_retries=int(opts.get("max_retries", 6)),
            backoff_base_s=float(opts.get("backoff_base_s", 0.5)),
            backoff_max_s=float(opts.get("backoff_max_s", 30.0)),
            retry_after_cap_s=float(opts.get("retry_after_cap_s", 60.0)),
        )
        json_mode = str(opts.get("json_mode", "auto")) if is_default else "auto"
        prov = Provider(preset, base_url, key_env, limits, retry, self.ledger, self.halt,
                        json_mode=json_mode, jitter_seed=int(opts.get("jitter_seed", 0)))
        self.providers[preset_name] = prov
        return prov

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Route and send ``request``."""
        preset_name, model = split_model(request.model, self.default)
        if preset_name == "stub":
            if self.stub is None:
                raise BackendConfigError("backend: no stub behaviour for 'stub:' models")
            self.halt.check()
            return await self.stub.complete(request)
        try:
            provider = self.provider(preset_name)
        except BackendConfigError as exc:
            raise BackendError(str(exc)) from None
        return await provider.complete(request, model)

    def stats(self) -> dict[str, Any]:
        """Per-provider counters."""
        return {name: p.stats.to_dict() for name, p in sorted(self.providers.items())}

    async def aclose(self) -> None:
        """Close every provider's HTTP session."""
        for prov in self.providers.values():
            await prov.aclose()
