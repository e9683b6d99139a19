"""One endpoint: a request sent over aiohttp under the budget, the limits, the breaker and retries."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import random
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping
from urllib.parse import urlsplit

from backends.base import LLMRequest, LLMResponse
from backends.breaker import BreakerPolicy, BreakerState, CircuitBreaker
from backends.context import TOKENIZERS, count_from, prompt_text, server_root
from backends.errors import (
    BackendError,
    BadRequest,
    ContextOverflow,
    MalformedResponse,
    MissingAPIKey,
    ProviderError,
    RequestTimeout,
    ServerNotListening,
    TransportError,
    http_error,
    not_listening,
    redact,
)
from backends.middleware.adapt import Sent, refused_param
from backends.middleware.bucket import TokenBucket
from backends.middleware.halt import Halt
from backends.middleware.ledger import Ledger, prompt_upper_estimate
from backends.middleware.retry import RetryPolicy, parse_retry_after, retry_delay_in_body
from backends.middleware.stats import Books, CallTally, ProviderStats
from backends.models import ModelRule, rule_for
from backends.providers import (
    Preset,
    WireRequest,
    auth_headers,
    build_request,
    error_text,
    parse_response,
    reasoning_allowance,
)

if TYPE_CHECKING:  # aiohttp itself is imported where a request is sent
    import aiohttp

log = logging.getLogger("simcore.backends")
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


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
        model_rules: A user's model-rules file (``--model-rules``), or None.
    """

    def __init__(self, preset: Preset, base_url: str, api_key_env: str | None, limits: Limits,
                 retry: RetryPolicy, ledger: Ledger, halt: Halt, *, json_mode: str = "auto",
                 jitter_seed: int = 0, breaker: BreakerPolicy | None = None,
                 breaker_listeners: list[Callable[[BreakerState], None]] | None = None,
                 model_rules: str | None = None) -> None:
        self.preset = preset
        self.name = preset.name
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.limits = limits
        self.retry = retry
        self.ledger = ledger
        self.halt = halt
        self.json_mode = json_mode
        self.model_rules = model_rules
        self.sent = Sent(preset.name)
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
        sent = self.sent
        if model in sent.rules:
            rule = sent.rules[model]
        else:
            rule = rule_for(self.preset.name, model, self.model_rules)
            sent.use(model, rule)
        wire = self._wire(request, model, rule)
        payload = json.dumps(wire.body, ensure_ascii=False).encode()
        max_out = request.max_tokens + reasoning_allowance(request, rule)
        tokens = prompt_upper_estimate(request) + max_out
        books = Books(self.stats, tally.of(self.name) if tally is not None else None)
        reserved = self.ledger.reserve(request, max_out)
        books.add("requests")
        breaker = self.breaker
        try:
            retry = 0
            while True:
                outcome, seconds, probe = await self._attempt(
                    wire.url, auth_headers(self.preset, key), payload, tokens, key, books, wire.body)
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
                refused = getattr(error, "param", None)
                if refused and (sent.drop(model, refused, str(error)) or refused in sent.drops(model)):
                    # A parameter the model does not take: sent again without it (no retry spent;
                    # a concurrent call may have dropped it already).
                    breaker.record(True, probe)
                    wire = self._wire(request, model, rule)
                    payload = json.dumps(wire.body, ensure_ascii=False).encode()
                    continue
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

    def _wire(self, request: LLMRequest, model: str, rule: ModelRule | None) -> WireRequest:
        """The request as sent now: ``rule`` applied, the parameters refused so far left out."""
        wire = build_request(self.preset, self.base_url, request, model, self.json_mode, rule,
                             self.sent.drops(model))
        if wire.schema_in_prompt:
            self.sent.schema_in_prompt.add(model)
        return wire

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
                       key: str | None, books: Books,
                       body: Mapping[str, Any]) -> tuple[LLMResponse | BackendError, float, bool]:
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
                outcome, seconds = await self._send(state, url, headers, payload, tokens, key, books, body)
            except BaseException:
                if probe:
                    self.breaker.abandon_probe()
                raise
        return outcome, seconds, probe

    async def _send(self, state: _LoopState, url: str, headers: Mapping[str, str], payload: bytes,
                    tokens: int, key: str | None, books: Books,
                    body: Mapping[str, Any]) -> tuple[LLMResponse | BackendError, float]:
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
                    retry_after = parse_retry_after(resp.headers)
                    should_retry = {"true": True, "false": False}.get(resp.headers.get("x-should-retry", ""))
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
        return self._interpret(status, raw, retry_after, key, should_retry, body), seconds

    def _interpret(self, status: int, raw: bytes, retry_after: float | None, key: str | None,
                   should_retry: bool | None = None,
                   body: Mapping[str, Any] | None = None) -> LLMResponse | BackendError:
        """The response, or the typed error, that a status and body amount to.

        Read as each provider sends it: the wait of a 429 in its body (Gemini's
        RetryInfo), ``x-should-retry``, the parameter a 400 refuses by name, and Groq's
        ``json_validate_failed``, whose ``failed_generation`` is the model's reply.
        """
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
            failed = _failed_generation(data) if status == 400 else None
            if failed is not None:  # the reply, which the reader reads (and re-asks) like any other
                return LLMResponse(failed, None, "json_validate_failed")
            detail = error_text(data) if data is not None else text[:300]
            if retry_after is None:
                retry_after = retry_delay_in_body(data)
            error = http_error(status, f"{self.name}: HTTP {status} from {self._host}: {detail}", retry_after,
                               should_retry)
            if isinstance(error, BadRequest) and not isinstance(error, ContextOverflow) and body is not None:
                error.param = refused_param(data, body)
            return error
        try:
            return parse_response(self.preset, data)
        except (MalformedResponse, ProviderError) as exc:
            return type(exc)(f"{self.name}: {exc}")

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


def _failed_generation(data: Any) -> str | None:
    """Groq's reply that failed JSON validation (``json_validate_failed``), or None."""
    err = data.get("error") if isinstance(data, Mapping) else None
    if isinstance(err, Mapping) and err.get("code") == "json_validate_failed":
        failed = err.get("failed_generation")
        return failed if isinstance(failed, str) else None
    return None


def _status_args(error: BackendError) -> tuple[Any, ...]:
    status = getattr(error, "status", None)
    return () if status is None else (status, getattr(error, "retry_after", None))
