"""The middleware between the kernel and real providers.

One :class:`Provider` per endpoint sends requests over aiohttp and applies, in
this order: the budget (a cost reservation made before anything is sent), the
concurrency limit, the circuit breaker (:mod:`backends.breaker`), the
requests-per-minute and tokens-per-minute buckets, the per-request timeout, and
retries with exponential backoff and jitter (Retry-After honoured up to a cap) on
connection errors, timeouts, malformed bodies and HTTP 408/409/429/5xx.
:class:`Router` picks the provider from the model string.

A provider counts its work twice: in its own :class:`ProviderStats` (the run's
totals) and in the :class:`CallTally` of the trial that made the request, so that
each trial records its own calls, retries, tokens and cost, and the trials'
figures add up to the run's.

Nothing here touches the trace: waits and jitter are wall-clock and come from a
private ``random.Random`` seeded from the options, so retries change when a
response arrives, never what the run records.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import json
import logging
import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping
from urllib.parse import urlsplit

from backends.base import Backend, LLMRequest, LLMResponse, Usage
from backends.breaker import BreakerPolicy, BreakerState, CircuitBreaker
from backends.context import TOKENIZERS, count_from, prompt_text, server_root
from backends.errors import (
    BackendConfigError,
    BackendError,
    BudgetExceeded,
    MalformedResponse,
    MissingAPIKey,
    RequestTimeout,
    RunHalted,
    ServerNotListening,
    TransportError,
    UnpricedModel,
    http_error,
    not_listening,
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

if TYPE_CHECKING:  # aiohttp itself is imported where a request is sent
    import aiohttp

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
    debt, so one big request is never refused, only paced. ``clock`` and ``sleep``
    are the monotonic clock and the wait (tests pace a bucket on a clock of their own).
    """

    def __init__(self, rate: float, capacity: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.rate = rate
        self.capacity = max(1.0, capacity)
        self.clock = clock
        self.sleep = sleep
        self.level = self.capacity
        self.stamp = clock()
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def _refill(self) -> None:
        now = self.clock()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    async def take(self, amount: float) -> None:
        """Wait until ``amount`` can be taken, then take it (FIFO among waiters)."""
        # The level outlives an event loop (a sweep worker runs each trial on a new
        # one); the lock cannot, so it is made per loop.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            while True:
                self._refill()
                need = min(amount, self.capacity)
                if self.level >= need:
                    self.level -= amount
                    return
                await self.sleep((need - self.level) / self.rate)

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
    """Counters of one provider, for a whole run or for one trial (wall-clock side; never traced).

    Attributes:
        requests: Requests made (each may take several attempts).
        attempts: HTTP attempts sent.
        retries: Attempts repeated after a transient fault (probes of an open
            circuit breaker are not retries).
        failures: Requests that failed for good.
        max_in_flight: The most attempts in flight at once.
        prompt_tokens: Prompt tokens the provider reported.
        completion_tokens: Completion tokens the provider reported.
        cost_usd: What the ledger charged (the worst case when usage was missing).
        errors: Failed attempts by error type.
    """

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    failures: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items() if k != "in_flight"}


class CallTally:
    """One trial's share of its providers' work: :class:`ProviderStats` per provider."""

    def __init__(self) -> None:
        self.providers: dict[str, ProviderStats] = {}

    def of(self, provider: str) -> ProviderStats:
        """The counters of ``provider`` (created on first use)."""
        stats = self.providers.get(provider)
        if stats is None:
            stats = self.providers[provider] = ProviderStats()
        return stats

    def to_dict(self) -> dict[str, Any]:
        return {name: s.to_dict() for name, s in sorted(self.providers.items())}


class _Books:
    """The counters one request updates: its provider's and its trial's."""

    __slots__ = ("books",)

    def __init__(self, *books: ProviderStats | None) -> None:
        self.books = [b for b in books if b is not None]

    def add(self, name: str, n: int | float = 1) -> None:
        for b in self.books:
            setattr(b, name, getattr(b, name) + n)

    def error(self, kind: str) -> None:
        for b in self.books:
            b.errors[kind] = b.errors.get(kind, 0) + 1

    def enter(self) -> None:
        for b in self.books:
            b.in_flight += 1
            b.max_in_flight = max(b.max_in_flight, b.in_flight)

    def leave(self) -> None:
        for b in self.books:
            b.in_flight -= 1


class _LoopState:
    """Objects bound to one event loop (aiohttp session, semaphore)."""

    def __init__(self, limits: Limits) -> None:
        self.loop = asyncio.get_running_loop()
        self.session: aiohttp.ClientSession | None = None
        self.sem = asyncio.Semaphore(limits.max_concurrency)
        self.max_concurrency = limits.max_concurrency

    def http(self) -> aiohttp.ClientSession:
        import aiohttp  # here, not at the top: runs on the stub never load it (~0.3 s)

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
        breaker: Circuit-breaker policy (None: the default one).
        breaker_listeners: Told of every change of the breaker's state.
    """

    def __init__(self, preset: Preset, base_url: str, api_key_env: str | None, limits: Limits,
                 retry: RetryPolicy, ledger: Ledger, halt: Halt, *, json_mode: str = "auto",
                 jitter_seed: int = 0, breaker: BreakerPolicy | None = None,
                 breaker_listeners: list[Callable[[BreakerState], None]] | None = None) -> None:
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
        self.breaker = CircuitBreaker(preset.name, breaker or BreakerPolicy(), breaker_listeners)
        # Rate buckets live as long as the provider (not one event loop), so a
        # limit holds across the trials a sweep worker runs one after another.
        self._rpm = TokenBucket(limits.rpm / 60.0, limits.rpm / 60.0) if limits.rpm else None
        self._tpm = TokenBucket(limits.tpm / 60.0, limits.tpm / 60.0) if limits.tpm else None
        self._rng = random.Random(jitter_seed)
        self._state: _LoopState | None = None
        self._host = urlsplit(base_url).netloc or base_url
        # The tokenizer endpoints left to try: the first that answers is kept, none once all fail.
        self._tokenizers = list(TOKENIZERS.get(preset.name, ()))

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

    async def complete(self, request: LLMRequest, model: str, tally: CallTally | None = None) -> LLMResponse:
        """Send ``request`` (as provider model ``model``) with retries; return the response.

        Args:
            request: The request.
            model: The provider's name for the model.
            tally: The calling trial's counters, updated along with the provider's.

        Raises:
            BackendError: a typed error once retries are exhausted or pointless.
        """
        self.halt.check()
        key = self._key()
        wire = build_request(self.preset, self.base_url, request, model, self.json_mode)
        payload = json.dumps(wire.body, ensure_ascii=False).encode()
        tokens = prompt_upper_estimate(request) + request.max_tokens
        books = _Books(self.stats, tally.of(self.name) if tally is not None else None)
        reserved = self.ledger.reserve(request)
        books.add("requests")
        breaker = self.breaker
        try:
            retry = 0
            while True:
                outcome, seconds, probe = await self._attempt(
                    wire.url, auth_headers(self.preset, key), payload, tokens, key, books)
                if isinstance(outcome, LLMResponse):
                    breaker.record(True, probe)
                    cost = self.ledger.settle(request, reserved, outcome.usage)
                    reserved = 0.0
                    books.add("cost_usd", cost)
                    if outcome.usage is not None:
                        books.add("prompt_tokens", outcome.usage.prompt_tokens)
                        books.add("completion_tokens", outcome.usage.completion_tokens)
                        if self._tpm is not None:
                            self._tpm.give_back(max(0, tokens - outcome.usage.total_tokens))
                    return LLMResponse(
                        outcome.text, outcome.usage, outcome.finish_reason, outcome.model or model,
                        outcome.system_fingerprint, seconds,
                    )
                error = outcome
                breaker.record(False if error.retryable else None, probe)
                books.error(type(error).__name__)
                if error.retryable and probe:
                    continue  # a failed probe costs no retry: wait for the next probe
                if not error.retryable or retry == self.retry.max_retries:
                    books.add("failures")
                    suffix = f" (after {retry + 1} attempts)" if retry else ""
                    raise type(error)(f"{error}{suffix}", *_status_args(error))
                wait = self.retry.delay(retry, error, self._rng)
                retry += 1
                books.add("retries")
                # (every error's message starts with the provider's name already)
                log.warning("%s; retry %d/%d in %.2f s", error, retry,
                            self.retry.max_retries, wait)
                await self.halt.sleep(wait)
        finally:
            if reserved:
                self.ledger.release(reserved)

    async def count_tokens(self, request: LLMRequest, model: str) -> int | None:
        """Tokens of ``request``'s prompt text by the server's tokenizer, or None where it has none.

        Tried once per request, without retries: a count that fails is estimated
        instead (see :mod:`backends.context`), which the trial records like a count.
        """
        if not self._tokenizers:
            return None
        key = self._key()
        text = prompt_text(request)
        state = self._loop_state()
        root = server_root(self.base_url)
        while self._tokenizers:
            path, field_name = self._tokenizers[0]
            try:
                async with state.sem, asyncio.timeout(self.limits.timeout_s):
                    async with state.http().post(root + path, json={field_name: text, "model": model},
                                                 headers=auth_headers(self.preset, key)) as resp:
                        status, raw = resp.status, await resp.read()
            except (TimeoutError, _client_error(), OSError) as exc:
                log.warning("%s: counting tokens at %s failed (%s); estimating", self.name, path,
                            type(exc).__name__)
                return None
            data = None
            if status == 200:
                try:
                    data = json.loads(raw)
                except ValueError:
                    pass
            count = count_from(data)
            if count is not None:
                self._tokenizers[1:] = []  # this one answers: keep it alone
                return count
            if status in (404, 405):  # no such endpoint on this server: try the next
                if self._tokenizers[:1] == [(path, field_name)]:  # (a concurrent count may have moved on)
                    self._tokenizers.pop(0)
                continue
            log.warning("%s: %s answered HTTP %d without a count; estimating", self.name, path, status)
            return None
        return None

    async def _attempt(self, url: str, headers: Mapping[str, str], payload: bytes, tokens: int,
                       key: str | None, books: _Books) -> tuple[LLMResponse | BackendError, float, bool]:
        """One HTTP attempt: the response or the typed error it ended in, its seconds,
        and whether it was the circuit breaker's probe.

        The seconds run from sending to the full body, so queueing for a
        concurrency slot, the breaker or a rate token does not count as latency.
        An attempt that gets no whole response within the timeout is cancelled
        (its connection closed) and comes back as a :class:`RequestTimeout`.
        """
        state = self._loop_state()
        async with state.sem:
            # Asked inside the slot: requests queued for a slot when the breaker
            # opens must wait too, not go out one last time.
            probe = await self.breaker.admit()
            try:
                outcome, seconds = await self._send(state, url, headers, payload, tokens, key, books)
            except BaseException:
                if probe:
                    self.breaker.abandon_probe()
                raise
        return outcome, seconds, probe

    async def _send(self, state: _LoopState, url: str, headers: Mapping[str, str], payload: bytes,
                    tokens: int, key: str | None, books: _Books) -> tuple[LLMResponse | BackendError, float]:
        """Send one attempt (the caller holds a concurrency slot)."""
        self.halt.check()
        if self._tpm is not None:
            await self._tpm.take(tokens)
        if self._rpm is not None:
            await self._rpm.take(1)
        books.add("attempts")
        books.enter()
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
        except (_client_error(), OSError) as exc:
            if self.preset.local and refused(exc):
                return ServerNotListening(not_listening(self.base_url, self.preset.server)), time.perf_counter() - start
            detail = redact(str(exc) or type(exc).__name__, key)
            msg = f"{self.name}: connection to {self._host} failed: {type(exc).__name__}: {detail}"
            return TransportError(msg), time.perf_counter() - start
        finally:
            books.leave()
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


def _client_error() -> type[Exception]:
    import aiohttp

    return aiohttp.ClientError


def refused(exc: BaseException) -> bool:
    """Whether a connection error is a refusal: nothing listens at the address.

    With several addresses for one host (``localhost``: ::1 and 127.0.0.1), asyncio
    joins the failures into one OSError without an errno; all of them must be refusals.
    """
    err = getattr(exc, "os_error", exc)  # aiohttp's ClientConnectorError wraps the OSError
    if isinstance(err, ConnectionRefusedError):
        return True
    codes = re.findall(r"\[Errno (\d+)\]", str(err)) if isinstance(err, OSError) else []
    return bool(codes) and all(int(c) == errno.ECONNREFUSED for c in codes)


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
                        breaker=breaker, breaker_listeners=self.breaker_listeners)
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
