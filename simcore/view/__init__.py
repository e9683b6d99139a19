"""The run browser: ``python -m simcore.view [RUNS_DIR]`` serves RUNS_DIR read-only.

See ``docs/view.md``. :func:`make_app` builds the aiohttp application.
"""

from simcore.view.app import make_app

__all__ = ["make_app"]
