"""The Python face of simcore: the calls and objects that ``import simcore`` gives.

:mod:`.calls` (``simulate``, ``monte_carlo``, ``sweep``, ``perturb`` and their
``_async`` twins), :mod:`.objects` (``Run``, ``MonteCarlo``, ``Sweep``, ``Study``
and ``load``), :mod:`.options` (keywords checked as the commands' flags). Users
import these names from :mod:`simcore` itself; ``tests/golden/python_face.json``
records them.
"""

import warnings

with warnings.catch_warnings():
    # Mesa imports tqdm.auto, which in a Jupyter kernel without ipywidgets warns that its
    # widget bar is missing; simcore's bars fall back to tqdm's text bar there (simcore.base.progress).
    warnings.filterwarnings("ignore", message="IProgress not found")
    import mesa  # noqa: F401
