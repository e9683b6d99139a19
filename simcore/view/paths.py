"""Where the run browser may read: ids, and paths that stay inside RUNS_DIR.

An entry's id is its path relative to RUNS_DIR, ``/``-separated
(``context_corrosion/20261124T024438-s42-c692d8``). Every segment must be a plain
name (letters, digits, ``.``, ``_``, ``-``, not starting with a dot), so ``..``,
hidden staging directories, absolute paths and encoded separators are refused
before the file system is touched. A resolved path (symlinks followed) must still
lie inside RUNS_DIR, so a link that points elsewhere is never read.
"""

from __future__ import annotations

import re
from pathlib import Path

from simcore.base.files import DamagedFile

SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
MAX_DEPTH = 8


class BadId(ValueError):
    """An id that is not a path of plain names inside RUNS_DIR."""


def split_id(entry_id: str) -> list[str]:
    """The segments of an id, each checked.

    Raises:
        BadId: for an empty id, a segment that is not a plain name, or one too deep.
    """
    parts = entry_id.split("/")
    if not entry_id or len(parts) > MAX_DEPTH or not all(SEGMENT.match(p) for p in parts):
        raise BadId(f"not an id: {entry_id[:80]!r}")
    return parts


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, with every symlink resolved, lies in ``root`` (itself resolved)."""
    try:
        real = path.resolve(strict=False)
    except (OSError, RuntimeError):  # a symlink loop
        return False
    return real == root or root in real.parents


def resolve_id(root: Path, entry_id: str) -> Path:
    """The directory an id names, checked to lie inside ``root``.

    Raises:
        BadId: for a malformed id, or one that leads outside ``root`` or to no directory.
    """
    path = root.joinpath(*split_id(entry_id))
    if not inside(root, path) or not path.is_dir():
        raise BadId(f"no such entry: {entry_id[:80]!r}")
    return path


def entry_id(root: Path, path: Path) -> str:
    """The id of a directory under ``root``."""
    return path.relative_to(root).as_posix()


def guard(root: Path, *paths: Path) -> None:
    """Refuse files that are links leading out of ``root``, before any reader opens them.

    Raises:
        DamagedFile: naming the file, for one that resolves outside ``root``.
    """
    for path in paths:
        if (path.exists() or path.is_symlink()) and not inside(root, path):
            raise DamagedFile(path, "is a link to a place outside the runs directory; not read")
