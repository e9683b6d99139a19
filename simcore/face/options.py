"""Keyword arguments named as a command's flags, checked by that command's own parser and code.

``simcore.simulate("context_corrosion", rounds=2, json_mode="off")`` means what
``python -m simcore.run context_corrosion --rounds 2 --json-mode off`` means:
:func:`command_args` turns the keywords into those flags and parses them with the
command's parser, so every field and option is coerced and checked by the code
that checks the command's, and a bad one raises :class:`~simcore.base.config.ConfigError`
with the line the command prints, never ``SystemExit``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
from typing import Any, Iterable, Iterator, Mapping, NoReturn, Sequence

from simcore.analysis import settings
from simcore.base.config import ConfigError


def flag_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each long flag of ``parser`` by its keyword name (``--json-mode`` -> ``json_mode``)."""
    out = {}
    for action in parser._actions:
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                out.setdefault(option[2:].replace("-", "_"), action)
    return out


def _tokens(name: str, action: argparse.Action, value: Any) -> list[str]:
    flag = next(o for o in action.option_strings if o[2:].replace("-", "_") == name)
    if isinstance(action, argparse.BooleanOptionalAction) or action.nargs == 0:
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: must be True or False, got {value!r}")
        if isinstance(action, argparse.BooleanOptionalAction):
            return [flag if value else "--no-" + flag[2:]]
        return [flag] if value else []
    if isinstance(action, argparse._AppendAction):
        values = [value] if isinstance(value, str) else list(value)
        return [f"{flag}={v}" for v in values]
    if isinstance(value, bool):
        value = str(value).lower()  # as a YAML config file or a flag spells it
    return [f"{flag}={value}"]  # one token: a value that starts with '-' stays a value


def command_args(parser: argparse.ArgumentParser, options: Mapping[str, Any], *, call: str,
                 positional: Sequence[str] = (), refused: Iterable[str] = ()) -> argparse.Namespace:
    """Parse ``options`` as the flags of ``parser``'s command (None: the flag is not given).

    Args:
        parser: The command's parser.
        options: Keyword name -> value, as :func:`flag_actions` names the flags.
        call: How the Python call is named in messages (``simulate('context_corrosion')``).
        positional: Arguments that come before the flags (a scenario's name).
        refused: Flags that mean nothing in Python (output format, dry runs).

    Raises:
        ConfigError: one line naming the option and what is allowed.
    """
    flags = {k: v for k, v in flag_actions(parser).items() if k not in set(refused)}
    argv = list(positional)
    for name, value in options.items():
        if name not in flags:
            guess = difflib.get_close_matches(name, sorted(flags), n=1, cutoff=0.7)
            hint = f"did you mean {guess[0]}?" if guess else f"see help(simcore.{call.partition('(')[0]})"
            raise ConfigError(f"{name}: not an option of {call}; {hint}")
        if value is not None:
            argv += _tokens(name, flags[name], value)

    def error(message: str) -> NoReturn:
        # argparse's "argument --plots: invalid choice ..." names the flag; here it is a keyword.
        raise ConfigError(re.sub(r"^argument --([\w-]+)[^:]*: ", lambda m: m.group(1).replace("-", "_") + ": ",
                                 message))

    parser.error = error  # type: ignore[method-assign]
    return parser.parse_args(argv)


@contextlib.contextmanager
def analysis_env() -> Iterator[None]:
    """Restore the analysis flags' environment variables (:data:`simcore.analysis.settings.ENV`) on
    the way out, so that one call's ``plots="none"`` does not hold for the kernel's next call."""
    saved = {name: os.environ.get(name) for name in settings.ENV}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
