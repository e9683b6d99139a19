"""The fail-fast switch: once tripped, every later call of the run fails."""

from __future__ import annotations

import asyncio

from backends.errors import RunHalted


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
