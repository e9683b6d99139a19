"""A throwaway virtual environment on top of the running one, for tests that pip-install.

``python -m venv --without-pip`` makes one in a fraction of a second. A ``.pth`` file
adds the running interpreter's site-packages to it through ``site.addsitedir`` (so
the ``.pth`` files there, such as an editable install of simcore, work too), and a
``pip`` script runs the parent's pip. So everything installed in the running
environment can be imported in the sandbox, ``pip install`` writes only into the
sandbox, and the shared environment is never changed. pip runs offline: no index,
no build isolation (the build backend comes from the parent).

Except a user's own scenario packages: the sandbox sees each parent site-packages
through a view (a directory of links) without the files of any distribution that
declares a simcore scenario, so a package installed there (the tutorial's
``rumour``, after its ``pip install -e .``) neither imports nor registers in the sandbox.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from simcore.runs.scenario import ENTRY_POINT_GROUP

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Sandbox:
    """A virtual environment at ``root`` (see the module docstring)."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def env(self) -> dict[str, str]:
        """Environment for commands run in the sandbox: its bin/ first, this checkout's simcore."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PIP_USER")}
        env.update(
            PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}",
            VIRTUAL_ENV=str(self.root),
            PYTHONPATH=str(REPO),
            PIP_NO_INDEX="1",
            PIP_NO_BUILD_ISOLATION="0",  # pip reads this as --no-build-isolation
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        )
        return env

    def run(self, command: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run a bash command in ``cwd``; fails the test with its output when it fails."""
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=self.env(),
                             capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise AssertionError(f"{command!r} exited {res.returncode}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}")
        return res


def make_sandbox(root: Path) -> Sandbox:
    """Create a sandbox at ``root``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    box = Sandbox(root)
    purelib = subprocess.run([str(box.python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    parents = [Path(p) for p in site.getsitepackages() if Path(p).is_dir()]
    views = [_view_without_scenario_packages(p, root / f"parent-site-{i}") for i, p in enumerate(parents)]
    lines = "".join(f"import site; site.addsitedir({str(v)!r})\n" for v in views)
    Path(purelib, "_parent_site_packages.pth").write_text(lines)
    pip = box.bin / "pip"
    pip.write_text(f'#!/bin/sh\nexec "{box.python}" -m pip "$@"\n')
    pip.chmod(0o755)
    return box


def _view_without_scenario_packages(parent: Path, view: Path) -> Path:
    """``view``: a link to each entry of the site-packages ``parent``, but for the files of the
    distributions other than simcore that declare a simcore scenario (their packages, ``.pth``
    files and dist-info); simcore's own entry points are the built-in scenarios."""
    hidden: set[str] = set()
    for dist in metadata.distributions(path=[str(parent)]):
        if dist.name != "simcore" and any(ep.group == ENTRY_POINT_GROUP for ep in dist.entry_points):
            hidden |= {Path(f).parts[0] for f in dist.files or ()} - {"..", "__pycache__"}
    view.mkdir()
    for entry in parent.iterdir():
        if entry.name not in hidden:
            (view / entry.name).symlink_to(entry)
    return view
