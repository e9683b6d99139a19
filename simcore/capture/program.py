"""Running an external program once, pointed at the capture proxy.

The program gets the proxy's URL (ending in ``/v1``) in ``OPENAI_BASE_URL`` (and
``OPENAI_API_BASE``, ``SIMCORE_CAPTURE_URL``), the same without ``/v1`` in
``ANTHROPIC_BASE_URL`` (the Anthropic SDK adds ``/v1/messages``), the run's seed in
``SIMCORE_SEED``, and ``{base_url}`` in its arguments replaced by the URL, for
programs that take it as a flag. ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY`` are
set to a placeholder when the environment has no key for the SDK (clients refuse
to start without one; the stub and local servers need none).

Its final answer is what it prints on stdout (stripped), or the text of the file
``answer`` names, if the run wrote it (a file the run left untouched is no answer).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PLACEHOLDER_KEY = "simcore-capture"
URL_MARK = "{base_url}"
#: Most of a stream (stdout, stderr, an answer file) kept; the rest is cut.
MAX_KEPT = 1 << 20


@dataclass(frozen=True)
class Outcome:
    """How one run of the program ended.

    Attributes:
        exit_code: Its exit status (negative: killed by that signal).
        stdout, stderr: What it wrote (cut at ``MAX_KEPT`` characters).
        answer: Its final answer, or None.
        timed_out: It ran past the time limit and was killed.
    """

    exit_code: int
    stdout: str
    stderr: str
    answer: str | None
    timed_out: bool


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _text(data: bytes) -> str:
    return data[:MAX_KEPT].decode("utf-8", errors="replace")


async def run_program(argv: Sequence[str], base_url: str, seed: int, answer: str = "stdout",
                      timeout_s: float = 600.0) -> Outcome:
    """Run ``argv`` to its end (or the time limit) against the proxy at ``base_url``."""
    env = dict(os.environ)
    env.update(OPENAI_BASE_URL=base_url, OPENAI_API_BASE=base_url, SIMCORE_CAPTURE_URL=base_url,
               ANTHROPIC_BASE_URL=base_url.removesuffix("/v1"), SIMCORE_SEED=str(seed))
    env.setdefault("OPENAI_API_KEY", PLACEHOLDER_KEY)
    if not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")):
        env["ANTHROPIC_API_KEY"] = PLACEHOLDER_KEY
    target = None if answer == "stdout" else Path(answer)
    before = _stamp(target) if target is not None else None
    try:
        proc = await asyncio.create_subprocess_exec(
            *(a.replace(URL_MARK, base_url) for a in argv), env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:  # not executable, say: a run that could not start, as a shell reports it
        return Outcome(126, "", f"cannot start {argv[0]}: {exc.strerror or exc}", None, False)
    timed_out = False
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        timed_out = True
        proc.kill()
        out, err = await proc.communicate()
    code = proc.returncode if proc.returncode is not None else -9
    stdout, stderr = _text(out), _text(err)
    if target is None:
        found = stdout.strip() or None
    else:
        after = _stamp(target)
        found = None
        if after is not None and after != before:
            found = _text(target.read_bytes()).strip() or None
    return Outcome(code, stdout, stderr, found, timed_out)
