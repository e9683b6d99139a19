"""The Python face of simcore: the calls and objects that ``import simcore`` gives.

:mod:`.calls` (``simulate``, ``monte_carlo``, ``sweep``, ``perturb`` and their
``_async`` twins), :mod:`.objects` (``Run``, ``MonteCarlo``, ``Sweep``, ``Study``
and ``load``), :mod:`.options` (keywords checked as the commands' flags). Users
import these names from :mod:`simcore` itself; ``tests/golden/python_face.json``
records them.
"""
