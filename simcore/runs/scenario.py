"""What a scenario provides to the framework, and how a name finds it.

A scenario is a :class:`Scenario` value, usually a module's ``SCENARIO``. The
CLI, the batch runner, replay, perturbation studies and the HTTP API work from it
alone, and they all find it by name through :func:`load_scenario`:

- a built-in name (``context_corrosion``), or ``<name>.<variant>`` for a built-in
  whose entry point is a ``variant`` function (``perturbation.context_corrosion``,
  ``perturbation.mypkg.myexp``);
- an entry point of the group ``simcore.scenarios`` (``rumour``, declared in the
  user's own ``pyproject.toml``).

Built-in scenarios are entry points too, the ones simcore's own distribution
declares (``setup.cfg``): one mechanism finds every scenario, and this module
never names the package that holds the built-ins;
- a dotted path: ``mypkg.myexp`` (its ``SCENARIO``) or ``mypkg.myexp:NAME``.

The reference, with one example per hook, is ``docs/scenario-api.md``; its
version is :data:`SCENARIO_API_VERSION`.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import re
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from simcore.analysis.glossary import Metric, key_metrics, metric_of
from simcore.analysis.metric_kinds import Kind, kind_of, proportion
from simcore.base.config import Config

if TYPE_CHECKING:
    from backends.base import Backend
    from backends.registry import BackendSpec
    from backends.stub import Behaviour
    from simcore.runs.runner import TrialResult
    from simcore.sim.kernel import World

SCENARIO_API_VERSION = "4.3.0"
"""Semantic version of the Scenario API: every name :mod:`simcore.api` exports, the
:class:`Scenario` fields among them (recorded in ``tests/golden/scenario_api.json``). A major bump breaks
existing scenarios; a minor one only adds."""

ENTRY_POINT_GROUP = "simcore.scenarios"
_DISTRIBUTION = "simcore"  # the distribution whose entry points are the built-in scenarios
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_BUILTIN = re.compile(r"^[a-z][a-z0-9_]*$")
_DOTTED = re.compile(rf"^{_IDENT}(\.{_IDENT})*(:{_IDENT})?$")


@dataclass(frozen=True)
class Null:
    """The setting under which a scenario's treatment has no effect (for calibration).

    ``python -m simcore.calibrate`` runs Monte Carlos under it and under the default,
    and reports per compared metric how often the decision rule "finds" an effect
    under the null (the false-positive rate) and under the default (the power).

    Attributes:
        config: Config overrides that switch the treatment's mechanism off (e.g.
            ``{"conformity": 0.0}``: nobody is influenced).
        why: One line: why nothing should differ there.
        effects: For a scenario without a counterfactual: per-trial metrics whose
            value is 0 when nothing happens; calibration tests them against 0.
        notes: Known reasons a metric differs even under the null, by metric; shown
            where calibration marks it confounded.
    """

    config: Mapping[str, Any]
    why: str
    effects: tuple[str, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    """A runnable experiment.

    Attributes:
        name: The name that finds this scenario again (see :func:`load_scenario`);
            it names run directories and is what manifests record. The loader sets
            it to the name the scenario was found by, so give it that name (the
            entry-point name, by convention the package name).
        description: One line for ``--help``.
        config_type: The scenario's :class:`~simcore.base.config.Config` subclass.
        build: Creates the agents, topology and processes in a fresh world.
        analyze: Reads the finished world; returns the results object, whose
            ``"metrics"`` entry maps names to scalars (the batch runner's columns).
        behaviour: Makes the stub behaviour model for a config, or None.
        summarize: Turns results into a few lines for the terminal.
        write_artifacts: Writes plots and scenario-specific files into a run dir;
            may return entries to add to the results (e.g. plot paths).
        commands: Extra subcommands (``python -m simcore.run X COMMAND ...``).
        counterfactual: ``(field, value_a, value_b)``: the config field whose two
            values make the scenario's A/B comparison (e.g. ``("biased", True, False)``).
        compare: The scenario's own statistics for two lists of results objects
            (arm A, arm B, paired by position when the arms share trial seeds).
            Its answer's ``"difference_summary"`` maps each compared metric to a
            dict with at least ``"delta_mean"`` (what ``--trials`` prints and plots).
        outcome: The final answer or decision, read from a results object
            (JSON-able; None when there is none); perturbation studies compare it.
        trial: Runs a whole trial itself, as ``await trial(config, seed, spec,
            backend)`` returning a :class:`~simcore.runs.runner.TrialResult`, instead of
            the runner building one world (a perturbation pair runs several, each
            with its own intervention; one passed to the runner is not used).
        proportions: Names of metrics that are proportions (each value a share in
            [0, 1]); the same as declaring them ``proportion()`` in ``kinds``
            (kept for scenarios written before ``kinds``).
        null: The scenario's null (see :class:`Null`), for ``python -m simcore.calibrate``.
        embeds: Whether a config's analysis embeds texts (then the model starts
            loading in the background when a trial on a real backend starts).
        kinds: Each metric's kind and bounds (:class:`~simcore.analysis.metric_kinds.Kind`),
            by name or by a glob for a family (``"participation_*"``). Summaries,
            comparisons and calibration choose their intervals and tests from it
            (docs/statistics.md); a metric without one is treated as its values
            suggest (true/false as a proportion, numbers as continuous).
        metrics: How people read each metric (:class:`~simcore.analysis.glossary.Metric`:
            label, description, unit, percentage or not, key or not), by name or by a
            glob for a family. The run browser shows the key metrics, in this order, on
            top of every page about the scenario's runs; without any, the first few
            numeric metrics stand in.
    """

    name: str
    description: str
    config_type: type[Config]
    build: Callable[["World", Any], None]
    analyze: Callable[["World", Any], dict[str, Any]]
    behaviour: Callable[[Any], "Behaviour"] | None = None
    summarize: Callable[[dict[str, Any]], str] | None = None
    write_artifacts: Callable[[Path, "World", Any, dict[str, Any]], dict[str, Any] | None] | None = None
    commands: Mapping[str, Callable[[list[str]], int]] = field(default_factory=dict)
    counterfactual: tuple[str, Any, Any] | None = None
    compare: Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]] | None = None
    outcome: Callable[[dict[str, Any]], Any] | None = None
    trial: Callable[[Any, int, "BackendSpec", "Backend"], Awaitable["TrialResult"]] | None = None
    proportions: frozenset[str] = frozenset()
    null: Null | None = None
    embeds: Callable[[Any], bool] | None = None
    kinds: Mapping[str, Kind] = field(default_factory=dict)
    metrics: Mapping[str, Metric] = field(default_factory=dict)

    def kind_of(self, metric: str) -> Kind | None:
        """The declared kind of ``metric`` (``kinds``, then ``proportions``), or None."""
        return kind_of(self.kinds, metric, self.proportions)

    def declared_kinds(self) -> dict[str, Kind]:
        """``kinds`` with the ``proportions`` added, for :func:`simcore.analysis.stats.compare_metrics`."""
        return {**{name: proportion() for name in sorted(self.proportions)}, **self.kinds}

    def metric_of(self, metric: str) -> Metric | None:
        """How people read ``metric`` (``metrics``, by name or glob), or None where undeclared."""
        return metric_of(self.metrics, metric)

    def key_metrics(self) -> list[str]:
        """The declared key metrics, in declaration order (empty when none are declared)."""
        return key_metrics(self.metrics)


@dataclass(frozen=True)
class ResultEntry:
    """An ``outcome`` that is one entry of the results object (None when missing or empty).

    A class rather than a lambda, so that scenarios stay picklable for process pools.
    """

    key: str

    def __call__(self, results: Mapping[str, Any]) -> Any:
        value = results.get(self.key)
        return None if value in (None, "", [], {}) else value


class ScenarioNotFound(ValueError):
    """A name that finds no scenario; the message lists the installed ones."""


def load_scenario(name: str) -> Scenario:
    """Find the scenario called ``name``: the one resolver every entry point uses.

    Tried in order: a built-in scenario ``<name>`` (``<name>.<rest>``
    asks the package's ``variant(rest)``); an entry point ``name`` of the group
    ``simcore.scenarios``; the module ``name`` (its ``SCENARIO``), or
    ``module:ATTR``. The scenario comes back with ``name`` set to a name that finds
    it again (the entry point's, when one points at it), which manifests record.
    Results are cached per process.

    Raises:
        ScenarioNotFound: (a ValueError) one line naming what was tried and the
            installed scenarios, for a malformed or unknown name, a module without
            a Scenario, or a module that fails to import.
    """
    return _load(name)


@functools.lru_cache(maxsize=None)
def _load(name: str) -> Scenario:
    if not isinstance(name, str) or not _DOTTED.match(name):
        raise ScenarioNotFound(
            f"scenario: must be a scenario name (e.g. context_corrosion) or a dotted path "
            f"(mypkg.myexp or mypkg.myexp:SCENARIO); got {name!r}; {_installed_hint(str(name))}"
        )
    module, colon, attr = name.partition(":")
    head, dot, rest = name.partition(".")
    package = head.partition(":")[0]
    if _is_builtin(package):
        if dot:  # a variant: perturbation.<any scenario name>
            return _load_builtin(name, package, rest)
        if colon:  # context_corrosion:SCENARIO
            module = _builtins()[package].module
        else:
            return _load_builtin(name, package, "")
    if not colon and not dot:
        point = _entry_point(name)
        if point is not None:
            found = _load_entry_point(point)
            return found if found.name == name else replace(found, name=name)
    tried = [] if colon or dot else [f"built-in {name}", f"entry point {name!r} in {ENTRY_POINT_GROUP}"]
    found = _load_path(name, module, attr or "SCENARIO", tried)
    canonical = _canonical(module, attr or "SCENARIO", found)
    return found if found.name == canonical else replace(found, name=canonical)


def _is_builtin(package: str) -> bool:
    return package in _builtins()


def _load_builtin(name: str, package: str, variant: str) -> Scenario:
    found = _builtins()[package].load()  # a Scenario, or the variant function of a package of variants
    make = None if isinstance(found, Scenario) else found
    if variant:
        if make is None:
            raise ScenarioNotFound(f"scenario: built-in {package} has no variants; got {name!r}; "
                                   f"{_installed_hint(name)}")
        scenario = make(variant)
    else:
        scenario = found if make is None else None
        if scenario is None and make is not None:
            raise ScenarioNotFound(
                f"scenario: {package} needs a variant: {package}.<scenario>, e.g. {package}.context_corrosion"
            )
    if not isinstance(scenario, Scenario):
        raise ScenarioNotFound(f"scenario: built-in {name} defines no SCENARIO; {_installed_hint(name)}")
    return scenario


@functools.lru_cache(maxsize=1)
def _entry_points() -> tuple[metadata.EntryPoint, ...]:
    return tuple(metadata.entry_points(group=ENTRY_POINT_GROUP))


def _is_ours(point: metadata.EntryPoint) -> bool:
    """Whether simcore's own distribution declares the entry point (a built-in scenario)."""
    dist = getattr(point, "dist", None)
    return dist is not None and dist.name.lower().replace("_", "-") == _DISTRIBUTION


@functools.lru_cache(maxsize=1)
def _builtins() -> dict[str, metadata.EntryPoint]:
    return {p.name: p for p in _entry_points() if _is_ours(p) and _BUILTIN.match(p.name)}


def _entry_point(name: str) -> metadata.EntryPoint | None:
    points = {p.value: p for p in _entry_points() if p.name == name}
    if len(points) > 1:
        raise ScenarioNotFound(
            f"scenario: entry point {name!r} in {ENTRY_POINT_GROUP} is declared more than once "
            f"({', '.join(sorted(points))}); name one by its dotted path"
        )
    return next(iter(points.values()), None)


def _load_entry_point(point: metadata.EntryPoint) -> Scenario:
    what = f"entry point {point.name!r} ({point.value})"
    try:
        scenario = point.load()
    except Exception as exc:  # noqa: BLE001 - the user's code: report it in one line
        raise ScenarioNotFound(f"scenario: loading {what} failed: {_one_line(exc)}") from None
    if not isinstance(scenario, Scenario):
        raise ScenarioNotFound(
            f"scenario: {what} is a {type(scenario).__name__}, not a simcore.api.Scenario"
        )
    return scenario


def _load_path(name: str, module_name: str, attr: str, tried: list[str]) -> Scenario:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            tried.append(f"module {module_name}")
            raise ScenarioNotFound(
                f"scenario: unknown scenario {name!r} (tried {', '.join(tried)}); {_installed_hint(name)}"
            ) from None
        raise ScenarioNotFound(f"scenario: importing {module_name} failed: {_one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the user's code: report it in one line
        raise ScenarioNotFound(f"scenario: importing {module_name} failed: {_one_line(exc)} "
                               f"(python -c 'import {module_name}' shows the traceback)") from None
    scenario = getattr(module, attr, None)
    if isinstance(scenario, Scenario):
        return scenario
    others = sorted(k for k, v in vars(module).items() if isinstance(v, Scenario) and k != attr)
    where = f"; it has {', '.join(f'{module_name}:{k}' for k in others)}" if others else ""
    what = "defines no" if scenario is None else f"has a {type(scenario).__name__}, not a Scenario, as"
    raise ScenarioNotFound(
        f"scenario: module {module_name} {what} {attr} (see docs/scenario-api.md){where}; {_installed_hint(name)}"
    )


def _canonical(module: str, attr: str, scenario: Scenario) -> str:
    """The shortest name that finds ``module:attr`` again."""
    value = f"{module}:{attr}"
    for point in _builtins().values():
        if point.value.replace(" ", "") == value:
            return point.name
    points = sorted((p.name != scenario.name, p.name) for p in _entry_points()
                    if p.value.replace(" ", "") == value and _usable(p.name) and not _is_builtin(p.name))
    if points:
        return points[0][1]
    return module if attr == "SCENARIO" else value


def _usable(entry_point_name: str) -> bool:
    return re.fullmatch(_IDENT, entry_point_name) is not None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True)
class Installed:
    """One installed scenario, as ``python -m simcore.run --list`` shows it.

    Attributes:
        name: What to pass to ``load_scenario`` (``perturbation.<scenario>`` for a
            package of variants).
        source: ``built-in`` or ``entry point <module:attr> (<distribution>)``.
        description: The scenario's one-line description (or why it cannot load).
        ok: False when it could not be loaded.
    """

    name: str
    source: str
    description: str
    ok: bool = True


def installed_names() -> list[str]:
    """Names of the built-in scenarios and the entry points, without importing any."""
    names = [f"{n}.<scenario>" if n == "perturbation" else n for n in _builtin_packages()]
    names += sorted({p.name for p in _entry_points() if _usable(p.name)} - set(_builtin_packages()))
    return names


def installed_scenarios() -> list[Installed]:
    """Every built-in scenario and entry point, loaded for its description."""
    out = []
    for package, point in sorted(_builtins().items()):
        found = point.load()
        if isinstance(found, Scenario):
            out.append(Installed(package, "built-in", summary_line(found.description)))
        else:  # a package of variants: its module's first docstring line describes it
            doc = (importlib.import_module(point.module).__doc__ or "").strip().splitlines()
            out.append(Installed(f"{package}.<scenario>", "built-in", summary_line(doc[0] if doc else "")))
    builtin = set(_builtin_packages())
    for point in sorted(_entry_points(), key=lambda p: (p.name, p.value)):
        if _is_ours(point):
            continue
        dist = getattr(point, "dist", None)
        source = f"entry point {point.value}" + (f" ({dist.name} {dist.version})" if dist is not None else "")
        if point.name in builtin or not _usable(point.name):
            why = "shadowed by the built-in scenario of that name" if point.name in builtin else (
                "not usable: an entry-point name must be a Python identifier")
            out.append(Installed(point.name, source, why, False))
            continue
        try:
            out.append(Installed(point.name, source, summary_line(_load_entry_point(point).description)))
        except ScenarioNotFound as exc:
            out.append(Installed(point.name, source, str(exc).removeprefix("scenario: "), False))
    return out


def summary_line(description: str, width: int = 88) -> str:
    """The first sentence of a description, cut to ``width`` characters."""
    text = " ".join(description.split())
    match = re.search(r"\.(\s|$)", text)
    first = text[: match.start() + 1] if match else text
    return first if len(first) <= width else first[: width - 3].rstrip() + "..."


def _builtin_packages() -> list[str]:
    return sorted(_builtins())


def _installed_hint(name: str) -> str:
    names = installed_names()
    close = difflib.get_close_matches(name, [n for n in names if "<" not in n], n=1)
    guess = f"did you mean {close[0]}? " if close else ""
    return f"{guess}installed: {', '.join(names) or 'none'} (python -m simcore.run --list)"


def clear_cache() -> None:
    """Forget resolved names and entry points (after installing a package in this process)."""
    _load.cache_clear()
    _entry_points.cache_clear()
    _builtins.cache_clear()
