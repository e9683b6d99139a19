"""Synchronous calls that work inside a running event loop (a Jupyter cell, an async app).

simcore's synchronous entry points run their work with ``asyncio.run``, process
pools and Dask clients, none of which may start from a thread whose event loop is
running: in a Jupyter kernel (ipykernel 6+) every cell runs inside one.
:func:`outside_running_loop` makes such a function call itself, from a running
loop, on a fresh worker thread that has no loop, and waits for it, the way
jupyter_core's ``run_sync`` and Prefect's sync bridge do; without a running loop
it is a plain call. The whole function moves to the thread, not just one
coroutine, so everything it does (each ``asyncio.run``, thread-local state such as
a sweep's shared backend) happens on one thread, as it would in a script. Patching
the loop to re-enter itself (nest_asyncio) is left alone: it changes every
caller's loop and the library is no longer maintained.

An interrupt (Ctrl-C, a notebook's stop button) reaches the waiting thread; it is
passed on to the worker as a ``KeyboardInterrupt``, so the work stops the way it
would in a script (an interrupted sweep keeps its finished trials), and is raised
to the caller once the worker has finished. :func:`to_thread` is the awaitable
form, for an ``async def`` twin whose work is synchronous: cancelling the awaiting
task interrupts the worker the same way.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import functools
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

__all__ = ["call_outside_loop", "in_running_loop", "outside_running_loop", "to_thread"]


def in_running_loop() -> bool:
    """Whether this thread is running an event loop (a call from a coroutine or a Jupyter cell)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Worker(threading.Thread):
    """Runs ``fn`` once, in the caller's context (contextvars), and keeps its outcome."""

    def __init__(self, fn: Callable[[], T], on_finish: Callable[[], None] | None = None) -> None:
        super().__init__(name="simcore-call", daemon=True)
        self._call = functools.partial(contextvars.copy_context().run, fn)
        self._on_finish = on_finish
        self.finished = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        # An interrupt is sent only while run() is inside its try: one that landed between the
        # thread's start and run(), or after the work, killed the thread before it could say it
        # had finished, and the caller waited for ever.
        self._gate = threading.Lock()
        self._entered = self._cancelled = self._done = False

    def run(self) -> None:
        try:
            try:
                with self._gate:
                    self._entered = True
                    if self._cancelled:
                        raise KeyboardInterrupt
                self.result = self._call()
            finally:
                with self._gate:
                    self._done = True
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            self.error = exc
        finally:
            self.finished.set()
            if self._on_finish is not None:
                self._on_finish()

    def interrupt(self) -> None:
        """Raise ``KeyboardInterrupt`` in the worker (at its next Python instruction)."""
        with self._gate:
            if not self._entered:
                self._cancelled = True  # run() raises it as it starts
            elif not self._done:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.ident), ctypes.py_object(KeyboardInterrupt))

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


def call_outside_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``; from a running event loop, on a worker thread without one.

    The caller's thread waits (its loop too, as any synchronous call makes it). An
    interrupt while it waits is passed to the worker, and raised here once the
    worker has stopped.
    """
    if not in_running_loop():
        return fn(*args, **kwargs)
    worker = _Worker(functools.partial(fn, *args, **kwargs))
    launched = interrupted = False
    while True:
        try:
            if not launched:
                launched = True
                worker.start()  # inside the try: an interrupt may come while it starts
            # In slices: a signal that lands on another thread is handled here within one. (Not
            # join(): an interrupted join can leave is_alive() false while the thread still runs.)
            while not worker.finished.wait(0.1):
                pass
            break
        except KeyboardInterrupt:
            # Passed on, then waited for: the work must stop (and tidy up) before the caller goes
            # on. A worker that has not reached its work yet never starts it.
            interrupted = True
            worker.interrupt()
            if not worker.is_alive() and not worker.finished.is_set():
                raise  # not started yet: nothing runs, nothing to wait for
    if interrupted and worker.error is None:
        raise KeyboardInterrupt
    return worker.outcome()


def outside_running_loop(fn: Callable[..., T]) -> Callable[..., T]:
    """Decorate a synchronous function so that it may be called from a running event loop
    (see :func:`call_outside_loop`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        return call_outside_loop(fn, *args, **kwargs)

    return wrapper


async def to_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Await ``fn(*args, **kwargs)`` run on a worker thread; cancelling interrupts the worker.

    Unlike :func:`asyncio.to_thread`, a cancelled await does not leave the work
    running: the worker gets a ``KeyboardInterrupt``, and the cancellation goes on
    once it has stopped.
    """
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    worker = _Worker(functools.partial(fn, *args, **kwargs),
                     on_finish=lambda: loop.call_soon_threadsafe(done.set_result, None))
    worker.start()
    try:
        await asyncio.shield(done)
    except asyncio.CancelledError:
        worker.interrupt()
        await asyncio.shield(done)
        raise
    return worker.outcome()
