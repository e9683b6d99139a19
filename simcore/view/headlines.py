"""What each page says first: the summary its command prints, from the code that prints it.

=================  =====================================================================
page               its headline (the command's own function)
=================  =====================================================================
a run              ``simcore.cli.run_lines``: the scenario's ``summarize`` and the replies' quality
a group            ``simcore.cli.arms_headline``: what ran, the scenario's interpretation, warnings
a sweep            ``simcore.batch.report.headline`` and its failures (``format_failures``)
a study            ``simcore.perturbation.study.study_title`` and ``calls_line``
a comparison       its ``summary.txt``, the line ``python -m scenarios.llm_auction compare``
                   printed first (a scenario's own command: it records its headline)
=================  =====================================================================

Each returns the lines and, where they cannot be had, one sentence saying why (a
scenario not installed here, a summary written before the field it needs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from simcore.base.files import DamagedFile, recorded_files
from simcore.base.files import file_sha256 as _sha256
from simcore.batch.report import format_failures
from simcore.batch.report import headline as sweep_line
from simcore.cli import arms_headline, run_lines
from simcore.perturbation.results import PerturbationResults
from simcore.perturbation.study import calls_line, study_title
from simcore.replies.quality import summary_lines
from simcore.view.figures import scenario_named

#: The file in which a scenario's own command records the headline it printed (a mechanism comparison's).
HEADLINE_FILE = "summary.txt"

Headline = tuple[list[str], str | None]


def _failed(what: str, exc: BaseException) -> str:
    return f"{what} could not be written out ({type(exc).__name__}: {exc})"


def run_headline(manifest: Mapping[str, Any], results: Mapping[str, Any]) -> Headline:
    """What ``python -m simcore.run`` printed about this run."""
    name = manifest.get("scenario") or results.get("scenario")
    scenario = scenario_named(name)
    if scenario is None:
        return (summary_lines(results.get("parse_quality") or {}),
                f"scenario {name!r} is not installed here, so its summary cannot be written out")
    try:
        return [line for text in run_lines(scenario, results) for line in text.splitlines()], None
    except Exception as exc:  # noqa: BLE001 - a summary that fails on an old or failed run: the page goes on
        return summary_lines(results.get("parse_quality") or {}), _failed(f"{name}'s summary", exc)


def group_headline(summary: Mapping[str, Any]) -> Headline:
    """What ``--trials N`` / ``--counterfactual`` printed around its table."""
    try:
        return arms_headline(summary), None
    except (KeyError, TypeError, AttributeError) as exc:
        return [], _failed("the group's summary", exc)


def sweep_headline(summary: Mapping[str, Any]) -> Headline:
    """What ``python -m simcore.batch`` printed first, and its failures and the command that finishes it."""
    try:
        return [sweep_line(summary), *(line for line in format_failures(summary) if line)], None
    except (KeyError, TypeError, ValueError) as exc:
        return [], _failed("the sweep's summary", exc)


def study_headline(path: Path, study: Mapping[str, Any]) -> Headline:
    """What ``python -m scenarios.perturbation`` printed around its tables."""
    try:
        res = PerturbationResults.load(path)
        lines = study_title(res)
    except DamagedFile as exc:
        return [], str(exc)
    calls = study.get("calls")
    if isinstance(calls, Mapping) and {"calls", "reused_calls", "live_calls", "paid_cost_usd"} <= set(calls):
        lines.append(calls_line(calls))
    return lines, None


def recorded_headline(path: Path) -> Headline:
    """The headline a command recorded in ``summary.txt`` (checked against its manifest's hash)."""
    file = path / HEADLINE_FILE
    if not file.is_file():
        return [], "this comparison was written before its command recorded its summary (summary.txt)"
    recorded = recorded_files(path)
    if recorded is not None and recorded.get(HEADLINE_FILE) != _sha256(file):
        return [], f"{file}: damaged: its sha256 is not the one manifest.json records"
    return file.read_text(encoding="utf-8", errors="replace").splitlines(), None
