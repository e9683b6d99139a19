"""Commands run as ``python -m MODULE ARGS`` runs them, but inside the test's process.

A fresh interpreter costs about 0.85 s before a command does anything (its imports), and
most tests of a command check what it prints, writes and exits with, not the process: those
run the module's ``__main__`` here (:func:`runpy.run_module`, as ``-m`` does), with its own
``sys.argv``, its output captured and its exit status read from ``SystemExit``. A test whose
subject is the process itself (an entry point, a signal, a closed pipe, the hash seed, an
environment variable read at start) still starts one.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ran:
    """What a command did: its exit status and everything it printed."""

    returncode: int
    stdout: str
    stderr: str


def exit_status(code: object) -> int:
    """The status a process exits with after ``SystemExit(code)`` (what the interpreter does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # SystemExit("message"): printed, status 1
    return 1


def run_module(module: str, *args: str, cwd: str | Path | None = None) -> Ran:
    """Run ``python -m module *args`` in this process (in ``cwd`` if given), as its ``__main__``.

    An exception other than ``SystemExit`` propagates: it fails the test with its traceback,
    where the process would have printed it and exited 1.
    """
    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    sys.argv = [module, *args]
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            # runpy warns when the module was imported before (by this test or another one in
            # this process); it runs the module's code afresh as __main__ all the same.
            warnings.filterwarnings("ignore", r".* found in sys\.modules after import of package", RuntimeWarning)
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
                status = 0
            except SystemExit as exc:
                status = exit_status(exc.code)
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
    return Ran(status, out.getvalue(), err.getvalue())
