"""The analysis settings a command's flags choose, as every process of a run reads them.

``--device``, ``--embed-cache`` and ``--plots`` (:func:`simcore.cli.add_analysis_args`)
are carried by environment variables, which pool workers and Dask workers started
from the command inherit; :func:`recorded` is what a run, a Monte Carlo, a sweep or a
study records of them (its ``options``), so a record says how its analysis was done.
"""

from __future__ import annotations

from simcore.analysis import embed_cache, embeddings, plots

#: The variables the analysis flags set (a Python call restores them on the way out).
ENV = (embeddings.DEVICE_ENV, embed_cache.ENV, plots.PLOTS_ENV)


def recorded() -> dict[str, str]:
    """The settings in effect: the device asked for (``auto`` unless one was named), the
    embedding cache's directory (or ``none``) and the plot level."""
    cache = embed_cache.cache_dir()
    return {"device": embeddings.requested_device(), "embed_cache": str(cache) if cache else embed_cache.OFF,
            "plots": plots.plot_level()}
