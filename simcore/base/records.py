"""Run directories: atomic writes, manifests and provenance.

A run lands in ``<out>/<scenario>/<run-id>/``. It is assembled in a hidden
``.<run-id>.tmp`` sibling and renamed into place when complete, so a run directory
either holds a whole run or does not exist. Single files are written through a
temporary file and ``os.replace``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import uuid
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from backends.base import canonical_json
from simcore.base.config import ConfigError

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
PACKAGES = (
    "simpy", "mesa", "networkx", "numpy", "scipy", "scikit-learn", "pandas", "matplotlib",
    "aiohttp", "sentence-transformers", "torch", "dask", "pyyaml",
)


def current_umask() -> int:
    """The process's umask, read without changing it (Linux: /proc/self/status).

    Files and directories made through temporary names (mkstemp, mkdtemp) get
    their modes from this, as if they had been created directly.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at once
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600; a plain open() would not
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_out_dir(out: str | Path, field: str = "out") -> Path:
    """Check, before any work, that run directories can be created under ``out``.

    ``out`` need not exist yet; its nearest existing ancestor must be a directory
    that we may create entries in (probed with an empty directory made and removed
    at once, so a read-only file system counts even for root). Nothing is left behind.

    Raises:
        ConfigError: one line naming ``field``, the path and the problem.
    """
    out = Path(out)
    probe_at = out
    while not probe_at.exists():
        if probe_at == probe_at.parent:
            break
        probe_at = probe_at.parent
    if probe_at.exists() and not probe_at.is_dir():
        what = "is a file" if probe_at == out else f"cannot be created: {str(probe_at)!r} is a file"
        raise ConfigError(f"{field}: {str(out)!r} {what}, not a directory; give a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".simcore-probe-", dir=probe_at))
    except OSError as exc:
        raise ConfigError(
            f"{field}: cannot write under {str(probe_at)!r} ({exc.strerror or exc}); give a directory you can write to"
        ) from None
    return out


def write_json(path: str | Path, value: Any) -> None:
    """Atomically write ``value`` as indented, key-sorted JSON."""
    atomic_write(path, json.dumps(json.loads(canonical_json(value)), indent=2, sort_keys=True) + "\n")


def read_json(path: str | Path) -> Any:
    """Read a JSON file as it is, unchecked (tests and one-off tools).

    simcore itself reads its files back through :mod:`simcore.base.files`, which checks them.
    """
    return json.loads(Path(path).read_text())


def new_run_id(seed: int) -> str:
    """A unique, sortable run id: UTC time, seed and a random suffix."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-s{seed}-{uuid.uuid4().hex[:6]}"


def check_run_id(run_id: str) -> str:
    """Reject ids that could escape a directory (``..``, slashes, ...)."""
    if not RUN_ID.match(run_id) or ".." in run_id:
        raise ValueError(f"run id: must be letters, digits, '.', '_' or '-' (no '..'); got {run_id!r}")
    return run_id


@contextlib.contextmanager
def staged_dir(final: Path) -> Iterator[Path]:
    """Yield a hidden staging directory that becomes ``final`` if the block succeeds.

    On an exception the staging directory is removed and nothing appears.
    """
    final = Path(final)
    if final.exists():
        raise FileExistsError(f"{final} already exists")
    final.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        os.chmod(stage, 0o777 & ~current_umask())  # mkdtemp makes 0700; a plain mkdir would not
        yield stage
        os.replace(stage, final)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


@lru_cache(maxsize=1)
def code_revision() -> dict[str, Any]:
    """The git commit of the simcore checkout and whether it has local changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        commit = head.stdout.strip() if head.returncode == 0 else ""
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root, capture_output=True, text=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", ""
    return {"commit": commit or None, "dirty": bool(dirty) if commit else None}


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str | None]:
    """Versions of Python, simcore and its main dependencies."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("simcore", *PACKAGES):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def utc_now() -> str:
    """Current UTC time, ISO 8601, seconds precision."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
