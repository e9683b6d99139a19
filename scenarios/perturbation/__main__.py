"""``python -m scenarios.perturbation``: a perturbation study of any scenario; see ``--help``.

The command itself (flags, checks, the ``report`` subcommand) is
:mod:`simcore.perturbation.command`, which :func:`simcore.perturb` shares.
"""

from simcore.api import perturbation_study_main

raise SystemExit(perturbation_study_main())
