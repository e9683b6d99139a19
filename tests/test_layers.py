"""The floors of simcore import only downward, with no cycle, counting imports inside functions.

The scenarios are held to the same rules: no cycle among their modules, and no
import inside a function except a heavy deferral.

Order, lowest first: backends; simcore.base; simcore.replies; simcore.sim;
simcore.analysis; simcore.runs; the commands and the Scenario API (the rest of
simcore); scenarios. ``if TYPE_CHECKING:`` imports are left out (they never run).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOORS = ("backends", "simcore.base", "simcore.replies", "simcore.sim", "simcore.analysis", "simcore.runs",
          "simcore", "scenarios")
# Imports inside functions that defer a heavy import on purpose: (importer, imported).
HEAVY_DEFERRALS = {
    ("simcore.view.command", "simcore.view.app"),  # aiohttp and jinja2, after the arguments are checked
    ("scenarios.context_corrosion", "scenarios.context_corrosion.service"),  # aiohttp.web, only to serve
    ("scenarios.context_corrosion.analysis", "scenarios.context_corrosion.plots"),  # matplotlib, only to draw
}


def modules() -> dict[str, Path]:
    out = {}
    for top in ("simcore", "backends", "scenarios"):
        for path in (ROOT / top).rglob("*.py"):
            if "templates" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def floor(module: str) -> int:
    """The index in FLOORS of the most specific floor holding ``module``."""
    return max((len(f), i) for i, f in enumerate(FLOORS) if module == f or module.startswith(f + "."))[1]


@functools.cache
def _import_nodes(path: Path) -> tuple[tuple[ast.Import | ast.ImportFrom, bool], ...]:
    """The file's import statements that run, each with whether it is inside a function."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # never runs (both branches left out, as the test reads it)
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(path.read_text()), False)
    return tuple(found)


def imports(mods: dict[str, Path]) -> list[tuple[str, str, bool]]:
    """(importer, imported, inside a function) for every internal import that runs."""
    out = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, inner in _import_nodes(path):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    out.append((name, target, inner))
    return out


def cycles(edges: list[tuple[str, str, bool]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@functools.cache
def edges() -> tuple[tuple[str, str, bool], ...]:
    """Every internal import among simcore, backends and scenarios (made on first use, not at collection)."""
    return tuple(imports(modules()))


def test_every_import_goes_down_or_stays_on_its_floor():
    up = [f"{a} -> {b}" for a, b, _ in edges() if floor(b) > floor(a)]
    assert not up, f"imports that go up a floor: {up}"


def test_backends_import_no_simcore_and_simcore_and_backends_no_scenarios():
    bad = [f"{a} -> {b}" for a, b, _ in edges()
           if (a.startswith("backends") and b.startswith(("simcore", "scenarios")))
           or (a.startswith("simcore") and b.startswith("scenarios"))]
    assert not bad, bad


def test_no_import_cycle_among_simcore_and_backends_modules():
    framework = [e for e in edges() if not e[0].startswith("scenarios") and not e[1].startswith("scenarios")]
    assert cycles(framework) == []


def test_no_import_cycle_among_the_scenarios_modules():
    assert cycles([e for e in edges() if e[0].startswith("scenarios")]) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles([("a", "b", False), ("b", "c", True), ("c", "a", False), ("c", "d", False)]) == [["a", "b", "c"]]


def test_imports_inside_functions_only_defer_a_heavy_import():
    inner = {(a, b) for a, b, fn in edges() if fn}
    assert inner <= HEAVY_DEFERRALS, f"imports inside functions that are not heavy deferrals: {sorted(inner - HEAVY_DEFERRALS)}"


def test_simcore_keeps_about_a_dozen_modules_at_its_top_level():
    top = sorted(p.stem for p in (ROOT / "simcore").glob("*.py"))
    assert len(top) <= 12, top


def test_no_module_imports_a_commands_main():
    """A command's ``__main__`` only starts it: what others use lives in a module of its own."""
    mods = modules()
    tests = {f"tests.{path.stem}": path for path in (ROOT / "tests").glob("*.py")}
    found = [(a, b) for a, b, _ in imports({**mods, **tests}) if b.rpartition(".")[2] == "__main__"]
    assert found == []
