"""The token bucket that paces requests and tokens per minute."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable


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
