"""The docs run's ``python -m`` commands in a running interpreter (tests/inprocess.py): each
runs as a fresh process would, however many ran before it there."""

from __future__ import annotations

from multiprocessing import forkserver

from tests.inprocess import run_here

POOLED = '''
import concurrent.futures
import multiprocessing

import pooled

VALUE = {value}


def value():
    return VALUE


if __name__ == "__main__":
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["pooled"])  # (as simcore.batch.executors preloads a scenario)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        print(pool.submit(pooled.value).result())
'''


def test_a_process_pool_runs_the_code_as_it_is_now(tmp_path):
    """A fork server outlives its pool with the modules it preloaded: a later command's
    workers must not fork from it after the page rewrote those modules."""
    # A fork server an earlier test in this worker left has not preloaded pooled, so with it
    # running the test would pass whether or not run_here stops the server a command started.
    if forkserver._forkserver._forkserver_pid is not None:
        forkserver._forkserver._stop()  # (private, as in run_here; the next pool starts another)
    for value in (1, 22):  # (sizes differ: a stale .pyc is never taken for the new source)
        (tmp_path / "pooled.py").write_text(POOLED.format(value=value))
        ran = run_here(str(tmp_path), ["pooled"])
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, f"{value}\n", "")
