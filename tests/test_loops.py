"""Synchronous calls from a running event loop (simcore.base.loops): a worker thread, interrupts passed on."""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import signal
import threading
import time

import pytest

from simcore.base.loops import (
    call_outside_loop,
    in_running_loop,
    outside_running_loop,
    to_thread,
)

WHO = contextvars.ContextVar("who", default="nobody")


@outside_running_loop
def nested_asyncio_run(x: int) -> tuple[int, str, str]:
    """What a simcore entry point does: asyncio.run inside, then report where it ran."""
    async def double() -> int:
        return 2 * x

    return asyncio.run(double()), threading.current_thread().name, WHO.get()


def test_without_a_running_loop_the_call_is_a_plain_call():
    assert not in_running_loop()
    assert nested_asyncio_run(2) == (4, threading.current_thread().name, "nobody")


def test_from_a_running_loop_the_call_runs_on_a_worker_thread_with_the_callers_context():
    async def main():
        assert in_running_loop()
        WHO.set("cell")
        return nested_asyncio_run(3)

    value, thread, who = asyncio.run(main())
    assert value == 6 and thread == "simcore-call" and who == "cell"


def test_an_error_in_the_worker_reaches_the_caller_as_it_is():
    def boom():
        raise ValueError("bad field")

    async def main():
        return call_outside_loop(boom)

    with pytest.raises(ValueError, match="bad field"):
        asyncio.run(main())


def waited_until_interrupted(limit_s: float = 120.0) -> None:
    """The work of the interrupt tests: it waits for its interrupt, but not for ever.

    An interrupt that never reached it would otherwise hang the suite; this way the test
    fails, saying so.
    """
    for _ in range(int(limit_s / 0.01)):
        time.sleep(0.01)
    raise AssertionError(f"no KeyboardInterrupt reached the worker in {limit_s:.0f} s")


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt for the test, as in a terminal or a Jupyter kernel.

    A suite started as a background job of a shell without job control (``pytest ... &`` in
    a script) inherits SIGINT ignored, and then ``_thread.interrupt_main`` does nothing: the
    test waited its full 120 s and failed. A run under a profiler, started that way, showed
    it (SIGINT was ignored in the worker); the two earlier hangs were most likely the same.
    """
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_an_interrupt_while_waiting_is_passed_to_the_worker_which_stops_and_tidies_up(ctrl_c_raises):
    started, seen = threading.Event(), []

    def work():
        started.set()
        try:
            waited_until_interrupted()
        except KeyboardInterrupt:
            seen.append("interrupted, tidied up")
            raise

    def press_ctrl_c():
        started.wait()
        _thread.interrupt_main()

    async def main():
        threading.Thread(target=press_ctrl_c).start()
        return call_outside_loop(work)

    # A loop run as a Jupyter kernel runs its cells: SIGINT raises KeyboardInterrupt in the
    # waiting thread (asyncio.run would turn the first one into a cancellation of its task).
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(main())
    finally:
        loop.close()
    assert seen == ["interrupted, tidied up"]


def test_cancelling_an_awaited_worker_interrupts_it_and_waits_for_it():
    started, seen = threading.Event(), []

    def work():
        started.set()
        try:
            waited_until_interrupted()
        except KeyboardInterrupt:
            seen.append("stopped")
            raise

    async def main():
        task = asyncio.ensure_future(to_thread(work))
        await asyncio.get_running_loop().run_in_executor(None, started.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return list(seen)  # the worker had stopped before the cancellation went on

    assert asyncio.run(main()) == ["stopped"]


def test_an_awaited_worker_returns_its_value():
    async def main():
        return await to_thread(lambda a, b: a + b, 2, b=3)

    assert asyncio.run(main()) == 5


def test_an_interrupt_before_the_worker_reaches_its_work_stops_it_there_and_the_caller_returns():
    """An interrupt that reached the worker between its start and its work killed the thread
    before it could say it had finished, and the caller waited for ever (seen under a profiler).
    Now the worker never starts the work and the caller's wait ends with the thread."""
    from simcore.base.loops import _Worker

    ran = []
    worker = _Worker(lambda: ran.append("work"))
    worker.interrupt()  # before run(): it must not start the work
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and worker.finished.is_set()
    assert ran == [] and isinstance(worker.error, KeyboardInterrupt)
