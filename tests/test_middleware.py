"""Every fault against the fake server; retries, limits and the budget checked from its counters."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time

import pytest
import pytest_asyncio

from backends.base import LLMRequest, Message
from backends.errors import (
    AuthenticationError,
    BadRequest,
    BudgetExceeded,
    MalformedResponse,
    RateLimited,
    RequestTimeout,
    RunHalted,
    ServerError,
    ServerNotListening,
    TransportError,
    UnpricedModel,
    redact,
)
from backends.fake_server import FakeConfig, FakeServer, Fault, Latency
from backends.middleware import RetryPolicy, TokenBucket, refused
from backends.registry import BackendSpec, make_backend

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}, "score": {"type": "integer",
          "minimum": 1, "maximum": 5}}, "required": ["answer", "score"]}
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5.0}


def req(i: int = 0, model: str = "m", max_tokens: int = 32, schema=SCHEMA) -> LLMRequest:
    return LLMRequest(model, (Message("user", f"question {i}"),), max_tokens=max_tokens, temperature=0.0,
                      seed=1, schema=schema, metadata={"i": i})


@pytest_asyncio.fixture
async def server():
    async with FakeServer(FakeConfig()) as srv:
        yield srv


def live(srv: FakeServer, **options):
    return make_backend(BackendSpec("openai-compatible", "m", base_url=srv.openai_url, options={**FAST, **options}))


def configure(srv: FakeServer, *faults: str, latency: str = "fixed:0", **kw) -> None:
    srv.reset(FakeConfig(Latency.parse(latency), faults=tuple(Fault.parse(f) for f in faults), **kw))


async def one(srv: FakeServer, **options):
    backend = live(srv, **options)
    try:
        return await backend.complete(req())
    finally:
        await backend.aclose()


async def idle(srv: FakeServer, within_s: float = 60.0) -> dict:
    """The server's counters once no request is in flight there (a client that gave up
    closes its connection; the server counts the request "cancelled" when it notices)."""
    for _ in range(int(within_s / 0.01)):
        if not srv.stats()["in_flight"]:
            break
        await asyncio.sleep(0.01)
    return srv.stats()


@pytest.mark.asyncio
async def test_a_clean_call_returns_schema_valid_json_with_usage(server):
    res = await one(server)
    data = json.loads(res.text)
    assert set(data) == {"answer", "score"} and 1 <= data["score"] <= 5
    assert res.usage.prompt_tokens > 0 and res.usage.completion_tokens > 0
    assert res.finish_reason == "stop" and res.system_fingerprint == "fp_fake" and res.model == "m"
    assert res.latency_s > 0
    assert server.stats()["requests"] == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", ["429:first=2,retry_after=0", "500:first=2", "503:first=2",
                                   "status=408:first=2", "status=409:first=2", "status=502:first=2",
                                   "drop:first=2", "malformed:first=2"])
async def test_transient_faults_are_retried_until_success(server, fault):
    configure(server, fault)
    res = await one(server)
    assert json.loads(res.text)["answer"]
    stats = server.stats()
    assert stats["requests"] == 3, stats
    assert sum(stats["faults"].values()) == 2


@pytest.mark.asyncio
async def test_timeouts_are_retried(server):
    # The first request hangs for 10 minutes: the client cuts it at its timeout and asks again.
    configure(server, "timeout:first=1,hang=600")
    res = await one(server, timeout_s=2.0)
    stats = await idle(server)
    assert res.text and stats["requests"] == 2 and stats["by_status"] == {"200": 1, "cancelled": 1}


@pytest.mark.asyncio
async def test_retry_after_is_honoured(server):
    configure(server, "429:first=2,retry_after=0.25")
    start = time.monotonic()
    await one(server)
    assert time.monotonic() - start >= 0.5
    assert server.stats()["by_status"] == {"200": 1, "429": 2}


@pytest.mark.asyncio
async def test_retry_after_is_capped(server, caplog):
    configure(server, "429:first=1,retry_after=3600")  # uncapped, the test would wait an hour
    with caplog.at_level("WARNING", logger="simcore.backends"):
        await asyncio.wait_for(one(server, retry_after_cap_s=0.1), 120)
    assert server.stats()["requests"] == 2
    (retry,) = [r for r in caplog.records if "retry 1/" in r.getMessage()]
    assert retry.args[-1] <= 0.1 * 1.1  # the wait the client chose: the cap (and its jitter), not the hour


@pytest.mark.asyncio
@pytest.mark.parametrize("fault, error", [("503:rate=1", ServerError), ("429:rate=1,retry_after=0", RateLimited),
                                          ("drop:rate=1", TransportError), ("malformed:rate=1", MalformedResponse),
                                          ("timeout:rate=1,hang=600", RequestTimeout)])
async def test_exhausted_retries_raise_a_typed_error(server, fault, error):
    configure(server, fault)
    # A timeout only the hung requests (10 minutes) reach, however slowly the others are answered
    # (under timeout:rate=1 every request hangs, so a short one cannot cut an answer).
    with pytest.raises(error) as info:
        await one(server, max_retries=2, timeout_s=0.25 if error is RequestTimeout else 30.0)
    assert "after 3 attempts" in str(info.value)
    assert server.stats()["requests"] == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("status, error", [(400, BadRequest), (404, BadRequest), (422, BadRequest),
                                           (401, AuthenticationError), (403, AuthenticationError)])
async def test_client_errors_are_not_retried(server, status, error):
    configure(server, f"status={status}:rate=1")
    with pytest.raises(error, match=f"HTTP {status}"):
        await one(server)
    assert server.stats()["requests"] == 1


@pytest.mark.asyncio
async def test_connection_refused_is_a_transport_error():
    srv = FakeServer()
    await srv.start()
    url = srv.openai_url
    await srv.stop()
    backend = make_backend(BackendSpec("openai-compatible", "m", base_url=url,
                                       options={**FAST, "max_retries": 1}))
    try:
        with pytest.raises(TransportError, match="connection to 127.0.0.1"):
            await backend.complete(req())
    finally:
        await backend.aclose()


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.asyncio
async def test_a_local_server_that_refuses_fails_at_once_in_one_sentence():
    port = free_port()
    backend = make_backend(BackendSpec("ollama", "m", base_url=f"http://127.0.0.1:{port}/v1",
                                       options={**FAST, "max_retries": 6}))
    try:
        with pytest.raises(ServerNotListening) as exc:
            await backend.complete(req())
        stats = backend.stats()["providers"]["ollama"]
    finally:
        await backend.aclose()
    assert str(exc.value) == f"nothing is listening at http://127.0.0.1:{port}: is Ollama running?"
    assert stats["attempts"] == 1 and stats["retries"] == 0


@pytest.mark.parametrize("text, expected", [
    ("[Errno 111] Connect call failed ('127.0.0.1', 1)", True),
    ("Multiple exceptions: [Errno 111] Connect call failed ('::1', 1, 0, 0), "
     "[Errno 111] Connect call failed ('127.0.0.1', 1)", True),
    ("Multiple exceptions: [Errno 99] Cannot assign ('::1', 1, 0, 0), "
     "[Errno 111] Connect call failed ('127.0.0.1', 1)", False),
    ("timed out", False),
])
def test_refused_reads_joined_connection_errors(text, expected):
    assert refused(OSError(text)) is expected
    assert refused(ConnectionRefusedError(111, "refused")) is True


@pytest.mark.asyncio
async def test_length_and_nonjson_content_are_answers_not_errors(server):
    configure(server, "length:first=1", "nonjson:first=1,model=other")
    backend = live(server)
    try:
        cut = await backend.complete(req())
        prose = await backend.complete(req(model="other"))
    finally:
        await backend.aclose()
    assert cut.finish_reason == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.text)
    assert prose.text.startswith("Sure!") and prose.finish_reason == "stop"
    assert server.stats()["requests"] == 2  # neither was retried


@pytest.mark.asyncio
async def test_concurrency_limit_is_respected(server):
    configure(server, latency="fixed:0.05")
    backend = live(server, max_concurrency=5)
    try:
        out = await asyncio.gather(*(backend.complete(req(i)) for i in range(30)))
    finally:
        await backend.aclose()
    assert len(out) == 30
    # The limiter's own high-water mark: 30 calls at once fill the 5 slots; the server never saw more.
    assert backend.stats()["providers"]["openai-compatible"]["max_in_flight"] == 5
    assert 1 <= server.stats()["max_concurrency"] <= 5


@pytest.mark.asyncio
async def test_requests_per_minute_limit(server):
    # 2400/min = 40/s with a burst of 40: 80 requests need at least 1 s.
    backend = live(server, rpm=2400, max_concurrency=64)
    start = time.monotonic()
    try:
        await asyncio.gather(*(backend.complete(req(i)) for i in range(80)))
    finally:
        await backend.aclose()
    elapsed = time.monotonic() - start
    # 40 beyond the burst at 40/s: at least 1 s (a bound that load can only lengthen). How the
    # bucket spaces its grants is tested on a clock of its own (test_token_bucket_paces_to_its_rate).
    assert server.stats()["requests"] == 80 and elapsed >= 0.95


@pytest.mark.asyncio
async def test_tokens_per_minute_limit(server):
    # 60000/min = 1000 tokens/s, bucket of 1000. Each request takes its prompt estimate
    # + max_tokens up front and gets back what the reply did not use, so what the
    # bucket gives out in the end is the tokens the server counted: the run must take
    # at least (counted - 1000) / 1000 seconds.
    backend = live(server, tpm=60000, max_concurrency=64)
    start = time.monotonic()
    try:
        await asyncio.gather(*(backend.complete(req(i, max_tokens=100, schema=None)) for i in range(30)))
    finally:
        await backend.aclose()
    elapsed = time.monotonic() - start
    stats = server.stats()
    used = stats["prompt_tokens"] + stats["completion_tokens"]
    assert stats["requests"] == 30 and used > 2000
    assert elapsed >= (used - 1000) / 1000 * 0.95


@pytest.mark.asyncio
async def test_budget_stops_before_it_is_exceeded(server, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input": 1000.0, "output": 1000.0}}))
    # Worst case of one call: (ceil(10/3)+4 + 32) tokens * $1000/M = $0.039; actual is lower.
    backend = live(server, budget_usd=0.1, prices=str(prices), max_concurrency=1)
    sent, refused = 0, None
    try:
        for i in range(10):
            try:
                await backend.complete(req(i))
                sent += 1
            except BudgetExceeded as exc:
                refused = exc
                break
        spent = backend.ledger.spent_usd
    finally:
        await backend.aclose()
    assert refused is not None and "could cost up to" in str(refused)
    assert server.stats()["requests"] == sent >= 2
    assert spent <= 0.1
    assert backend.ledger.by_model["m"]["calls"] == sent


@pytest.mark.asyncio
async def test_budget_holds_under_concurrency(server, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input": 1000.0, "output": 1000.0}}))
    configure(server, latency="fixed:0.05")
    backend = live(server, budget_usd=0.2, prices=str(prices), max_concurrency=32)
    try:
        out = await asyncio.gather(*(backend.complete(req(i)) for i in range(40)), return_exceptions=True)
        spent = backend.ledger.spent_usd
    finally:
        await backend.aclose()
    ok = [r for r in out if not isinstance(r, BaseException)]
    assert all(isinstance(r, BudgetExceeded) for r in out if isinstance(r, BaseException))
    assert server.stats()["requests"] == len(ok) and 0 < len(ok) < 40
    assert spent <= 0.2


@pytest.mark.asyncio
async def test_budget_with_an_unpriced_model_refuses_to_run(server):
    with pytest.raises(UnpricedModel, match="has no price"):
        await one(server, budget_usd=1.0)
    assert server.stats()["requests"] == 0


@pytest.mark.asyncio
async def test_anthropic_and_gemini_clients_against_the_fake_server(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic")
    monkeypatch.setenv("GEMINI_API_KEY", "test-gemini")
    for name in ("anthropic", "gemini"):
        backend = make_backend(BackendSpec(name, "model-x", base_url=server.url, options=FAST))
        try:
            res = await backend.complete(req())
        finally:
            await backend.aclose()
        assert set(json.loads(res.text)) == {"answer", "score"}, name
        assert res.usage.completion_tokens > 0 and res.finish_reason == "stop"
    assert server.stats()["by_model"] == {"m": 2}


@pytest.mark.asyncio
async def test_router_sends_prefixed_models_to_their_provider(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic")
    spec = BackendSpec("openai-compatible", "m", base_url=server.openai_url, options=FAST)
    backend = make_backend(spec)
    # anthropic: goes to the real Anthropic URL unless re-pointed; point the preset at the fake server.
    backend.inner.provider("anthropic").base_url = server.url
    try:
        a = await backend.complete(req(model="m"))
        b = await backend.complete(req(model="anthropic:claude-x"))
        c = await backend.complete(req(model="stub:anything"))
    finally:
        await backend.aclose()
    assert a.text and b.text and c.text
    assert server.stats()["by_model"] == {"claude-x": 1, "m": 1}  # the stub call never left the process
    assert set(backend.stats()["providers"]) == {"anthropic", "openai-compatible"}


def test_backoff_has_bounded_jitter_and_caps():
    policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=8.0, retry_after_cap_s=5.0)
    rng = random.Random(0)
    for retry in range(6):
        step = min(8.0, 2.0**retry)
        waits = [policy.delay(retry, RuntimeError(), rng) for _ in range(200)]
        assert min(waits) >= step / 2 and max(waits) <= step
        assert max(waits) - min(waits) > step / 10  # jitter is real

    class Limited(Exception):
        retry_after = 100.0

    assert 5.0 <= policy.delay(0, Limited(), rng) <= 5.5


class FakeClock:
    """A clock that moves only when the bucket waits on it: grants are exact, whatever the load."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 1e-9)  # as a real clock does: a wait always lets some time pass


@pytest.mark.asyncio
@pytest.mark.parametrize("rate, capacity, takes", [(100.0, 10.0, [1] * 30), (40.0, 40.0, [1] * 80),
                                                   (10.0, 5.0, [2, 7, 1, 1, 3, 5, 1])])
async def test_token_bucket_paces_to_its_rate(rate, capacity, takes):
    clock = FakeClock()
    bucket = TokenBucket(rate=rate, capacity=capacity, clock=clock, sleep=clock.sleep)
    granted = []
    for amount in takes:
        await bucket.take(amount)
        granted.append((clock.now, amount))
    # Never more than the burst plus the rate over any stretch of time (a take above the
    # capacity waits for a full bucket), and no later than that rule demands.
    for i, (t0, _) in enumerate(granted):
        for t1, _ in granted[i:]:
            within = sum(min(a, capacity) for t, a in granted[i:] if t <= t1)
            assert within <= capacity + rate * (t1 - t0) + 1e-9
    if max(takes) <= capacity:  # (no take in debt) exactly as long as the rate needs for what exceeds the burst
        assert clock.now == pytest.approx(max(0.0, (sum(takes) - capacity) / rate), abs=1e-6)


def test_a_placeholder_key_is_no_secret_and_leaves_a_reply_whole():
    # A local or fake server takes any key ("x"); removing it wherever it occurred turned every
    # Messages body's "type": "text" into something else, and each reply came back empty.
    body = '{"content": [{"type": "text", "text": "{\\"action\\": \\"DEFECT\\"}"}], "stop_reason": "end_turn"}'
    for placeholder in ("x", "none", "EMPTY", "sk-1234"):
        assert redact(body, placeholder, key_shapes=False) == body
    assert "sk-ant-0123456789" not in redact(f"key sk-ant-0123456789 in {body}", "sk-ant-0123456789", key_shapes=False)


def test_redact_removes_keys_and_key_shaped_strings():
    text = "bad key sk-abcdefghijklmnop and AIzaSyA1234567890abcdef, Bearer xyz, mine: SENTINEL-123456789012"
    out = redact(text, "SENTINEL-123456789012")
    for secret in ("sk-abcdefghijklmnop", "AIzaSyA1234567890abcdef", "xyz", "SENTINEL", "789012"):
        assert secret not in out
    prose = "a risk-assessment of sk-learn results by task-forces"
    assert redact(prose, "SENTINEL-123456789012", key_shapes=False) == prose
    assert "risk-assessment" in redact(prose) and "task-forces" in redact(prose)


@pytest.mark.asyncio
async def test_fail_fast_wakes_calls_that_wait_to_retry(server):
    # The slow call is told to come back in an hour (capped at 60 s): only the halt can end its wait.
    configure(server, "429:rate=1,retry_after=3600,model=slow", "503:rate=1,model=bad")
    backend = live(server, fail_fast=True, max_retries=3)
    try:
        slow, bad = await asyncio.wait_for(asyncio.gather(
            backend.for_trial("a").complete(req(model="slow")),
            backend.for_trial("b").complete(req(model="bad")), return_exceptions=True), 50)
    finally:
        await backend.aclose()
    assert isinstance(bad, ServerError) and isinstance(slow, RunHalted)
    assert server.stats()["by_model"] == {"bad": 4, "slow": 1}


@pytest.mark.asyncio
async def test_stub_models_in_a_shared_backend_follow_each_trials_behaviour(server):
    """Trials of different configs share a backend in a sweep: a ``stub:`` model must
    answer each with its own config's behaviour, not the backend's."""
    from backends.base import LLMResponse

    class Tagged:
        def __init__(self, tag):
            self.tag = tag

        async def complete(self, request):
            return LLMResponse(f"{self.tag}: {request.model}")

    backend = live(server)
    backend.make_stub = Tagged  # what make_backend builds from a trial's behaviour
    try:
        a, b, plain = backend.for_trial("a", "A"), backend.for_trial("b", "B"), backend.for_trial("c")
        replies = [await t.complete(req(model="stub:x")) for t in (a, b)]
        own = await plain.complete(req(model="stub:x"))  # no behaviour given: the backend's own stub
    finally:
        await backend.aclose()
    assert [r.text for r in replies] == ["A: stub:x", "B: stub:x"]
    assert json.loads(own.text)["score"] in range(1, 6) and server.stats()["requests"] == 0
