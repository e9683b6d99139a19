"""The docs run: every fenced block of docs/tutorial.md and docs/scenario-api.md is executed,
in order, in a fresh directory, so the pages cannot drift from the code.

What each block means:

- a block with ``title="PATH"`` writes that file (relative to the current directory);
  later blocks with the same title append to it (a file shown in pieces);
- ``bash``: run with ``bash -euo pipefail``; a ``cd`` carries over to later blocks;
- ``python`` without a title: run with ``python -`` in the current directory;
- ``toml`` without a title: parsed (a fragment shown for reading);
- ``text`` with ``title="output"``: must match the stdout of the bash or python block
  before it; ``...`` matches anything within a line, and a line of only ``...``
  matches any number of lines.

Any other block fails the test, so nothing on these pages is left unchecked. The
tutorial installs a package: it runs in a throwaway environment (tests/sandbox.py).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sandbox import REPO, make_sandbox

DOCS = REPO / "docs"
FENCE = re.compile(r"^([ \t]*)```([A-Za-z]*)[ \t]*(.*?)\n(.*?)^\1```[ \t]*$", re.M | re.S)
TITLE = re.compile(r'title="([^"]+)"')


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language, title (or None), text and line in the page."""

    lang: str
    title: str | None
    code: str
    line: int


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        indent, lang, info, code = m.groups()
        title = TITLE.search(info)
        code = "".join(line.removeprefix(indent) for line in code.splitlines(keepends=True))
        out.append(Block(lang, title.group(1) if title else None, code, text.count("\n", 0, m.start()) + 1))
    return out


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is ``expected`` with its ``...`` filled in (trailing spaces ignored)."""
    pattern = ""
    for line in expected.splitlines():
        if line.strip() == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += "[^\n]*".join(re.escape(part) for part in line.rstrip().split("...")) + r"\n"
    text = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return re.fullmatch(pattern, text) is not None


def run_page(page: Path, workdir: Path, env: dict[str, str] | None = None,
             python: str = sys.executable) -> dict[str, int]:
    """Execute ``page``'s blocks in ``workdir``; returns how many blocks of each kind ran."""
    cwd, last_out, written = workdir, None, set()
    counts = {"file": 0, "bash": 0, "python": 0, "toml": 0, "output": 0}
    state = workdir / ".doc-cwd"
    for b in blocks(page):
        where = f"{page.name}:{b.line}"
        if b.title == "output":
            assert b.lang == "text" and last_out is not None, f"{where}: an output block follows no command"
            assert output_matches(b.code, last_out), f"{where}: output differs\n--- expected\n{b.code}--- got\n{last_out}"
            counts["output"] += 1
            last_out = None
        elif b.title is not None:
            path = (cwd / b.title).resolve()
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a" if path in written else "w") as fh:
                fh.write(b.code)
            written.add(path)
            counts["file"] += 1
        elif b.lang in ("bash", "python"):
            if b.lang == "bash":
                script = f"cd {shlex.quote(str(cwd))}\n{b.code}\npwd > {shlex.quote(str(state))}\n"
                command = ["bash", "-euo", "pipefail", "-c", script]
            else:
                command = [python, "-"]
            res = subprocess.run(command, input=b.code if b.lang == "python" else None, cwd=cwd, env=env,
                                 capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, (f"{where}: exit status {res.returncode}\n--- block\n{b.code}"
                                         f"--- stdout\n{res.stdout}--- stderr\n{res.stderr}")
            if b.lang == "bash":
                cwd = Path(state.read_text().strip())
            last_out = res.stdout
            counts[b.lang] += 1
        elif b.lang == "toml":
            tomllib.loads(b.code)
            counts["toml"] += 1
        else:
            pytest.fail(f"{where}: a {b.lang or 'plain'} block is neither run, written nor checked")
    return counts


def test_output_matching():
    assert output_matches("a\n...\nd\n", "a\nb\nc\nd\n")
    assert output_matches("a\n...\nd\n", "a\nd\n")
    assert output_matches("run ... done\n", "run 12 s done\n")
    assert not output_matches("a\nd\n", "a\nb\nd\n")
    assert not output_matches("run ... done\n", "run 12 s\n")


def test_the_scenario_api_page_runs(tmp_path):
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    counts = run_page(DOCS / "scenario-api.md", tmp_path, env)
    assert counts["file"] >= 12 and counts["bash"] >= 3 and counts["output"] >= 3
    assert (tmp_path / "runs" / "poll").is_dir() and (tmp_path / "sweep" / "results.csv").is_file()


def test_the_tutorial_runs(tmp_path):
    import site

    def shared() -> set[str]:
        return {str(p) for d in site.getsitepackages() if Path(d).is_dir() for p in Path(d).iterdir()}

    before = shared()
    box = make_sandbox(tmp_path / "venv")
    work = tmp_path / "work"
    work.mkdir()
    counts = run_page(DOCS / "tutorial.md", work, box.env(), str(box.python))
    assert counts["bash"] >= 5 and counts["file"] >= 5 and counts["python"] >= 1 and counts["output"] >= 3
    # The shared environment is untouched: the tutorial's pip install went into the sandbox.
    assert shared() == before
