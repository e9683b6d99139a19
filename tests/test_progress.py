"""Progress output: tqdm on a terminal, whole lines in a log."""

from __future__ import annotations

import io
import threading

from simcore.base.progress import PlainProgress, progress_bar


def test_a_stream_that_is_not_a_terminal_gets_one_line_per_tenth():
    log = io.StringIO()
    bar = progress_bar(20, desc="sweep", unit="trial", file=log)
    assert isinstance(bar, PlainProgress)
    bar.set_postfix_str("fail=0")
    for _ in range(20):
        bar.update(1)
    bar.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert len(lines) == 10
    assert lines[0].startswith("sweep: 2/20 trials (10%), ") and lines[0].endswith(", fail=0")
    assert lines[-1].startswith("sweep: 20/20 trials (100%)")


def test_a_quiet_stretch_still_gets_a_line_every_interval_and_close_shows_the_end():
    log = io.StringIO()
    bar = PlainProgress(1000, "study", "run", log, every_s=0.0)
    bar.update(1)
    bar.update(1)
    bar.close()
    bar.close()
    assert log.getvalue().splitlines() == [
        line for line in log.getvalue().splitlines() if line.startswith("study: ")
    ]
    assert [line.split(" (")[0] for line in log.getvalue().splitlines()] == ["study: 1/1000 runs", "study: 2/1000 runs"]


def test_updates_from_threads_are_all_counted():
    log = io.StringIO()
    bar = PlainProgress(400, None, "trial", log)
    threads = [threading.Thread(target=lambda: [bar.update(1) for _ in range(100)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bar.close()
    assert bar.n == 400 and log.getvalue().splitlines()[-1].startswith("400/400 trials (100%)")


def test_a_terminal_gets_tqdm_and_disable_writes_nothing():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = progress_bar(3, desc="x", unit="trial", file=tty)
    bar.update(3)
    bar.close()
    assert "\r" in tty.getvalue()
    quiet = io.StringIO()
    bar = progress_bar(3, file=quiet, disable=True)
    bar.update(3)
    bar.close()
    assert quiet.getvalue() == ""


def test_a_notebook_gets_a_tqdm_bar_and_the_python_face_shows_bars_only_where_they_are_seen():
    from tqdm import tqdm

    from simcore.base.progress import in_notebook, shows_progress

    class OutStream(io.StringIO):  # as ipykernel's stream is named; not a terminal
        pass

    OutStream.__module__ = "ipykernel.iostream"
    cell = OutStream()
    assert in_notebook(cell) and shows_progress(cell) and not shows_progress(io.StringIO())
    bar = progress_bar(3, desc="sweep", unit="trial", file=cell)
    assert isinstance(bar, tqdm)  # the widget where ipywidgets is installed, else the text bar
    bar.update(3)
    bar.close()
