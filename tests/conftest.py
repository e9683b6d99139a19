"""Fixtures shared by test files."""

from __future__ import annotations

import importlib
import sys
import textwrap
from importlib import metadata

import mesa  # noqa: F401
import pytest

from simcore.runs import scenario as scenario_module

# NOTE: mesa is imported here, where the stack is short, for performance: its module loggers
# call inspect.stack() on import, which reads the source of every frame's file (about 1.6 s
# in each xdist worker when a test's deep stack first imports it).

PACKAGE = '''
import dataclasses

from simcore.runs.scenario import ResultEntry
from tests.batch_scenarios import FLAKY

SCENARIO = dataclasses.replace(FLAKY, name="mylab", description="My lab's study. More words.",
                               outcome=ResultEntry("lengths"))
ALT = dataclasses.replace(SCENARIO, name="alt", description="The alternative.")
NOT_A_SCENARIO = 3
'''
ENTRY_POINTS = '''
[simcore.scenarios]
mylab = mylab_exp:SCENARIO
broken = mylab_missing:SCENARIO
context_corrosion = mylab_exp:ALT
'''


class IsolatedMetadata:
    """What :mod:`simcore.runs.scenario` reads from ``importlib.metadata``, limited to simcore's
    own distribution (the built-in scenarios) and those in ``paths`` (those a test installs),
    never this environment's others."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def entry_points(self, group: str) -> metadata.EntryPoints:
        dists = [metadata.distribution("simcore"), *(metadata.distributions(path=self.paths) if self.paths else ())]
        return metadata.EntryPoints(ep for dist in dists for ep in dist.entry_points if ep.group == group)


@pytest.fixture(autouse=True)
def scenario_distributions(monkeypatch):
    """Scenario discovery sees no installed package but those a test installs (``installed``),
    so a user's own scenario package (the tutorial's ``rumour``) changes no test's result."""
    isolated = IsolatedMetadata()
    monkeypatch.setattr(scenario_module, "metadata", isolated)
    scenario_module.clear_cache()
    yield isolated
    scenario_module.clear_cache()


@pytest.fixture
def installed(tmp_path, monkeypatch, scenario_distributions):
    """A distribution installed the way pip installs one: a package and its dist-info."""
    site = tmp_path / "site"
    (site / "mylab_exp").mkdir(parents=True)
    (site / "mylab_exp" / "__init__.py").write_text(PACKAGE)
    (site / "mylab_crash.py").write_text("raise RuntimeError('boom at import')\n")
    info = site / "mylab_exp-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mylab-exp\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    monkeypatch.syspath_prepend(str(site))
    scenario_distributions.paths.append(str(site))
    # (the package's ``variant`` function hides its module of the same name)
    monkeypatch.setattr(importlib.import_module("scenarios.perturbation.variant"), "_scenarios", {})
    scenario_module.clear_cache()
    yield site
    scenario_module.clear_cache()
    for name in [m for m in sys.modules if m.startswith("mylab")]:
        del sys.modules[name]


@pytest.fixture(autouse=True, scope="session")
def _embed_cache(tmp_path_factory):
    """Tests never touch the user's embedding cache: one under the session's tmp dir.

    Set in the environment, so subprocesses and pool workers use it too. The xdist workers
    share one (the cache is safe for concurrent processes), so a text that both embed is
    encoded once: about 100 texts, 4 s of a run's encoding. Tests that count what is
    encoded give themselves a cache of their own.
    """
    import os

    from simcore.analysis import embed_cache

    old = os.environ.get(embed_cache.ENV)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the session's directory, above each worker's own
        shared = tmp_path_factory.getbasetemp().parent / "embed-cache"
        shared.mkdir(exist_ok=True)
    else:
        shared = tmp_path_factory.mktemp("embed-cache")
    os.environ[embed_cache.ENV] = str(shared)
    yield
    if old is None:
        os.environ.pop(embed_cache.ENV, None)
    else:
        os.environ[embed_cache.ENV] = old


@pytest.fixture(autouse=True)
def _analysis_env(monkeypatch):
    """The command lines put --plots/--device/--embed-cache in the environment: undo it after each test."""
    import os

    from simcore.analysis import embed_cache, embeddings, plots

    monkeypatch.setenv(plots.PLOTS_ENV, "all")
    monkeypatch.setenv(embeddings.DEVICE_ENV, "auto")
    monkeypatch.setenv(embed_cache.ENV, os.environ[embed_cache.ENV])


@pytest.fixture
def no_plots(monkeypatch):
    """No figures (``SIMCORE_PLOTS=none``) for a test that reads none: the runs and Monte Carlos it
    calls, here or in the processes it starts, draw nothing (a context corrosion run's four plots,
    or a Monte Carlo's comparison figure, are about 0.5 s of matplotlib). A command line sets the
    level from its own ``--plots`` (``--plots none``), a sweep's figure from ``plot=False``."""
    from simcore.analysis import plots

    monkeypatch.setenv(plots.PLOTS_ENV, "none")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests run first. Each drives Chromium for seconds, and collected where they
    are (test_view.py, near the end) one of them was the run's last test on one xdist worker
    while the other sat idle: 5.6 s and 6.5 s of two runs."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is None)  # stable: the rest keep their order
