"""Progress on stderr: a tqdm bar on a terminal or in a notebook, a plain log elsewhere.

A bar redrawn with carriage returns turns a log file into one long line, so when
the stream is neither a terminal nor a notebook :func:`progress_bar` returns a
:class:`PlainProgress` that writes whole lines: one each time another tenth of the
work is done, or at least every ``every_s`` seconds while work goes on, and one at
the end. In a Jupyter kernel the bar is tqdm's notebook widget where ipywidgets is
installed, else tqdm's text bar, which notebooks redraw in place. The Python face
(:mod:`simcore.face`) shows bars only where :func:`shows_progress` says they are
seen, and stays quiet elsewhere.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from typing import Any, TextIO

PLAIN_EVERY_S = 30.0


def progress_bar(total: int, desc: str | None = None, unit: str = "it", disable: bool = False,
                 file: TextIO | None = None, **tqdm_kwargs: Any) -> Any:
    """A tqdm bar on a terminal, else a :class:`PlainProgress` with the methods simcore uses.

    Args:
        total: Units of work.
        desc: What is being done (the line's prefix).
        unit: Name of one unit ("trial", "run").
        disable: No output at all (a disabled tqdm bar).
        file: The stream (stderr by default).
        **tqdm_kwargs: Passed to tqdm on a terminal.
    """
    from tqdm import tqdm

    stream = sys.stderr if file is None else file
    if disable or _isatty(stream):
        return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=disable, **tqdm_kwargs)
    if in_notebook(stream):
        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.notebook import tqdm as widget

            return widget(total=total, desc=desc, unit=unit, **tqdm_kwargs)
        return tqdm(total=total, desc=desc, unit=unit, file=stream, **tqdm_kwargs)
    return PlainProgress(total, desc, unit, stream)


def in_notebook(stream: Any) -> bool:
    """Whether ``stream`` is a Jupyter kernel's output (ipykernel's ``OutStream``), shown in a notebook."""
    return type(stream).__module__.startswith("ipykernel.")


def shows_progress(stream: Any = None) -> bool:
    """Whether a progress bar on ``stream`` (stderr by default) is seen: a terminal or a notebook."""
    stream = sys.stderr if stream is None else stream
    return _isatty(stream) or in_notebook(stream)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class PlainProgress:
    """Progress as whole lines (for logs): ``desc: 30/100 trials (30%), 12 s, <postfix>``.

    Thread-safe: trials may finish on a writer thread.
    """

    def __init__(self, total: int, desc: str | None, unit: str, file: TextIO,
                 every_s: float = PLAIN_EVERY_S) -> None:
        self.total = max(0, int(total))
        self.desc = desc
        self.unit = unit
        self.file = file
        self.every_s = every_s
        self.n = 0
        self.postfix = ""
        self._start = self._last_t = time.monotonic()
        self._last_tenth = 0
        self._last_n = -1
        self._lock = threading.Lock()
        self._closed = False

    @staticmethod
    def format_sizeof(num: float) -> str:
        """tqdm's short form of a count (``12.3k``)."""
        from tqdm import tqdm

        return tqdm.format_sizeof(num)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units; write a line at each new tenth or after ``every_s`` seconds."""
        with self._lock:
            self.n += n
            tenth = (10 * self.n // self.total) if self.total else 0
            now = time.monotonic()
            if tenth > self._last_tenth or now - self._last_t >= self.every_s:
                self._last_tenth = max(tenth, self._last_tenth)
                self._line(now)

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        """Text shown after the count on the next line (``refresh`` is tqdm's; lines come on updates)."""
        with self._lock:
            self.postfix = text

    def write(self, text: str, file: TextIO | None = None) -> None:
        """Write a note on its own line."""
        with self._lock:
            print(text, file=file or self.file, flush=True)

    def close(self) -> None:
        """Write the final count, unless the last line already showed it."""
        with self._lock:
            if not self._closed and self.n != self._last_n:
                self._line(time.monotonic())
            self._closed = True

    def _line(self, now: float) -> None:
        units = self.unit if self.total == 1 else f"{self.unit}s"
        pct = f" ({100 * self.n // self.total}%)" if self.total else ""
        head = f"{self.desc}: " if self.desc else ""
        tail = f", {self.postfix}" if self.postfix else ""
        print(f"{head}{self.n}/{self.total} {units}{pct}, {now - self._start:.0f} s{tail}", file=self.file, flush=True)
        self._last_t, self._last_n = now, self.n
