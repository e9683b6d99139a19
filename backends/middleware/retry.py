"""Retries: when a failed attempt is tried again, and how long to wait first."""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Any, Mapping


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


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
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


def retry_delay_in_body(data: Any) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail in an error body (Gemini's 429s carry
    their wait there, ``"retryDelay": "37s"``, and no Retry-After header), or None."""
    err = data.get("error") if isinstance(data, Mapping) else None
    details = err.get("details") if isinstance(err, Mapping) else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = str(detail.get("retryDelay", "")).strip()
            try:
                return max(0.0, float(delay.removesuffix("s")))
            except ValueError:
                return None
    return None
