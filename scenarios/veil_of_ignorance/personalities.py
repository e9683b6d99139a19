"""Personality templates: named personality texts that agents refer to by name.

The original experiment let a config give an agent's personality as text or as a
reference to a saved template. Here an agent entry gives ``personality: TEXT`` or
``personality_template: NAME``. The shipped templates are in ``personalities.yaml``
beside this module; a config's ``personality_templates: FILE`` adds a YAML file of
your own (``name: text`` lines), whose names win over shipped ones of the same name.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from simcore.api import ConfigError

SHIPPED = Path(__file__).with_name("personalities.yaml")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


def templates(user_file: str = "") -> dict[str, str]:
    """The shipped templates, plus (and overridden by) those of ``user_file``.

    Raises:
        ConfigError: naming ``personality_templates`` and the problem with the file.
    """
    found = dict(_read(SHIPPED, *_stamp(SHIPPED)))
    if user_file:
        path = Path(user_file).expanduser()
        if not path.is_file():
            raise ConfigError(f"personality_templates: file {user_file!r} not found")
        found.update(_read(path, *_stamp(path)))
    return found


def _stamp(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=32)
def _read(path: Path, _mtime: int, _size: int) -> tuple[tuple[str, str], ...]:
    # Cached per file version: configs are validated again on every replace().
    import yaml

    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"personality_templates: cannot read {str(path)!r} as UTF-8 YAML: {first}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"personality_templates: {str(path)!r} must hold name: text lines")
    out = []
    for name, text in data.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"personality_templates: {path}: {name!r} is not a template name (a letter, then "
                              "letters, digits, '_', '.', '-')")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"personality_templates: {path}: {name}: must be a non-empty personality text")
        out.append((name, text.strip()))
    return tuple(out)
