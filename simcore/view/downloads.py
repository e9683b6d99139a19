"""The files of an entry that its page offers for download, and reading one safely.

A run's and a mechanism comparison's files are those their ``manifest.json``
records (and the manifest itself); each is checked against the hash recorded for
it before it is served, so a file changed since is refused as damaged. A group,
a sweep and a study have no manifest over their files: their plain top-level
files and their plots are offered as they are. Hidden files (a sweep's ``.lock``,
staging files) never are.

A name is offered only if it is in that list, and it is read only if it is a plain
relative path (:func:`simcore.view.paths.split_id`) that resolves, links followed,
inside RUNS_DIR: ``..``, absolute paths and links out are refused before anything is read.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from simcore.base.files import MANIFEST, DamagedFile, recorded_files
from simcore.view.paths import BadId, inside, split_id

#: Content types of the files simcore writes, where the standard table lacks them.
TYPES = {".jsonl": "application/x-ndjson", ".md": "text/markdown", ".parquet": "application/vnd.apache.parquet",
         ".sqlite": "application/vnd.sqlite3", ".npz": "application/octet-stream", ".csv": "text/csv"}


@dataclass(frozen=True)
class File:
    """One file a page offers.

    Attributes:
        name: Its path relative to the entry's directory.
        size: Its size in bytes (None where it is missing).
        checked: Whether a manifest records its hash (then it is checked before it is served).
    """

    name: str
    size: int | None
    checked: bool


def offered(root: Path, path: Path) -> list[File]:
    """The files the page of the entry in ``path`` offers (see the module docstring).

    Raises:
        DamagedFile: when the entry's manifest fails its check.
    """
    recorded = recorded_files(path)
    if recorded is not None:
        names = [MANIFEST, *sorted(recorded)]
    else:
        names = sorted(p.name for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        plots = path / "plots"
        if plots.is_dir() and inside(root, plots):
            names += sorted(f"plots/{p.name}" for p in plots.glob("*.png") if not p.name.startswith("."))
    out = []
    for name in names:
        file = path / name
        ok = file.is_file() and inside(root, file)
        out.append(File(name, file.stat().st_size if ok else None, recorded is not None and name != MANIFEST))
    return out


def read_offered(root: Path, path: Path, name: str) -> tuple[bytes, str]:
    """The bytes and content type of file ``name`` of the entry in ``path``, checked.

    Raises:
        BadId: for a name that is not a plain relative path, or that the page does not offer.
        DamagedFile: for a file that leads out of RUNS_DIR, is missing, or whose hash is not
            the one its manifest records.
    """
    split_id(name)  # plain names only: no "..", no absolute path, no hidden file
    files = {f.name: f for f in offered(root, path)}
    if name not in files:
        raise BadId(f"not a file of this entry: {name[:80]!r}")
    file = path / name
    if not inside(root, file):
        raise DamagedFile(file, "is a link to a place outside the runs directory; not read")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise DamagedFile(file, f"cannot be read ({exc.strerror or exc})") from None
    if files[name].checked:
        want = (recorded_files(path) or {}).get(name)
        if hashlib.sha256(data).hexdigest() != want:
            raise DamagedFile(file, "damaged: its sha256 is not the one manifest.json records")
    suffix = Path(name).suffix
    kind = TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    return data, kind
