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

One module per concept: :mod:`~backends.middleware.retry` (the retry policy),
:mod:`~backends.middleware.bucket` (rate pacing), :mod:`~backends.middleware.ledger`
(cost and budget), :mod:`~backends.middleware.halt` (fail-fast),
:mod:`~backends.middleware.stats` (counters), :mod:`~backends.middleware.provider`
(one endpoint) and :mod:`~backends.middleware.router` (the provider of each
request); this package re-exports their names.

Nothing here touches the trace: waits and jitter are wall-clock and come from a
private ``random.Random`` seeded from the options, so retries change when a
response arrives, never what the run records.
"""

from backends.middleware.bucket import TokenBucket
from backends.middleware.halt import Halt
from backends.middleware.ledger import Ledger, prompt_upper_estimate
from backends.middleware.provider import Limits, Provider, refused
from backends.middleware.retry import RetryPolicy
from backends.middleware.router import Router
from backends.middleware.stats import CallTally, ProviderStats

__all__ = [
    "CallTally",
    "Halt",
    "Ledger",
    "Limits",
    "Provider",
    "ProviderStats",
    "RetryPolicy",
    "Router",
    "TokenBucket",
    "prompt_upper_estimate",
    "refused",
]
