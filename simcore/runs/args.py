"""Argument handling every command shares: one-line errors, seeds and counts, and the two-pass parse.

A command whose flags depend on a scenario (the scenario's config fields become
flags) parses twice: once to find the scenario's name among the arguments, then
with the scenario's flags added (:func:`parse_scenario_args`).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from simcore.base.config import ConfigError
from simcore.base.rng import MAX_SEED
from simcore.runs.scenario import Scenario, load_scenario


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line on stderr, exit status 2.

    A flag it does not know gets the closest one it does, as a name does
    (``--rouds``: "did you mean --rounds?"; argparse itself learns this only in Python
    3.14), or, with no close one, the flags it does know. ``elsewhere`` names flags
    that other commands take and this one refuses, with the reason, so that a user who
    brings one (``python -m simcore.replay RUN --seed 3``) is told why rather than
    only that it is unknown.
    """

    def __init__(self, *args: Any, elsewhere: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.elsewhere = dict(elsewhere or {})

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}{self._suggestion(message)}\n")

    def _suggestion(self, message: str) -> str:
        head = "unrecognized arguments: "
        if not message.startswith(head):
            return ""
        tokens = message.removeprefix(head).split()
        guesses = self.guesses(tokens)
        if not guesses:
            listed = [f for f in self._own_flags() if f != "--help"]
            flags = [t for t in tokens if t.startswith("-")]
            return f"; its flags: {', '.join(listed)} (see --help)" if flags and len(listed) <= 8 else ""
        if len(guesses) == 1:
            flag, match = guesses[0]
            said = [] if flag == match else [f"did you mean {match}?"]
        else:
            said = [f"did you mean {', '.join(f'{m} (for {f})' for f, m in guesses)}?"]
        said += [f"{self.prog} takes no {m}: {self.elsewhere[m]}" for m in dict.fromkeys(m for _, m in guesses)
                 if m in self.elsewhere]
        return "; " + " ".join(said)

    def guesses(self, tokens: Sequence[str]) -> list[tuple[str, str]]:
        """(flag, the flag meant) for each of ``tokens`` that is close to a flag this command or
        another takes (:attr:`elsewhere`) but not one of this command's own."""
        own = self._own_flags()
        known = sorted({*own, *self.elsewhere})
        out = []
        for flag in (t.split("=", 1)[0] for t in tokens if t.startswith("-")):
            if flag in own:
                continue
            match = flag if flag in self.elsewhere else next(
                iter(difflib.get_close_matches(flag, known, n=1, cutoff=0.7)), None)
            if match is not None:
                out.append((flag, match))
        return out

    def _own_flags(self) -> list[str]:
        return sorted(flag for flag in self._option_string_actions if flag.startswith("--"))


def say(text: str) -> None:
    """Print to stdout; a reader that went away (``| head``) ends output quietly."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush cannot fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def fail(message: str) -> NoReturn:
    """Print a one-line error and exit with status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_seed(value: Any) -> int:
    """Validate a seed: an integer in 0..2**32-1."""
    try:
        seed = int(value)
        if str(value).strip() not in (str(seed), f"+{seed}"):
            raise ValueError
    except (TypeError, ValueError):
        raise ConfigError(f"seed: must be an integer from 0 to {MAX_SEED}, got {value!r}") from None
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed: must be an integer from 0 to {MAX_SEED}, got {seed}")
    return seed


def parse_int(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    """Validate a count given on the command line: an integer from ``lo`` (to ``hi``).

    Raises:
        ConfigError: naming ``name`` and the range, for anything but a plain
            integer in range (``"3.0"``, ``"+3"`` and ``"1_0"`` included).
    """
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = lo - 1
    if str(value).strip() != str(n) or n < lo or (hi is not None and n > hi):
        allowed = f">= {lo}" if hi is None else f"from {lo} to {hi}"
        raise ConfigError(f"{name}: must be an integer {allowed}, got {value!r}")
    return n


def parse_scenario_args(
    build_parser: Callable[[Scenario | None, bool], argparse.ArgumentParser],
    argv: Sequence[str],
    default: str | None = None,
    check: Callable[[Scenario, argparse.Namespace], None] | None = None,
) -> tuple[Scenario, argparse.Namespace]:
    """Parse ``argv`` of a command whose flags include a scenario's config fields.

    The first pass parses with ``build_parser(None, False)`` (no help, no scenario
    flags, the scenario optional) only to find the name in ``args.scenario``
    (``default`` when none is given) and load it; the second parses ``argv`` for
    good with ``build_parser(scenario, True)``.

    Args:
        build_parser: The command's parser for a scenario (None: without its
            flags) and whether it adds ``--help``.
        argv: The arguments.
        default: The scenario when the arguments name none.
        check: Called with the scenario and the first pass's arguments before
            the second pass, to refuse a scenario this command cannot take.

    Returns:
        The scenario and the parsed arguments. A name that finds no scenario
        exits with its one-line error (status 2), as the parser's errors do.
    """
    first = build_parser(None, False)
    known, unknown = first.parse_known_args(argv)
    name = known.scenario or default
    scenario = None
    if name:
        try:
            scenario = load_scenario(name)
        except ValueError as exc:
            # A mistyped flag of the command's own can leave its value where the name goes
            # (``--seeed 3``): then the flag is what to correct, as the full parse would say.
            if isinstance(first, OneLineParser) and first.guesses(unknown):
                first.error(f"unrecognized arguments: {' '.join(unknown)}")
            fail(str(exc))
        if check is not None:
            check(scenario, known)
    args = build_parser(scenario, True).parse_args(argv)
    assert scenario is not None  # without a name the second pass exits: the scenario is required
    return scenario, args
