"""``python -m simcore.batch``: a parameter sweep / Monte Carlo of any scenario; see ``--help``.

The command itself is :mod:`simcore.batch.command`, which :func:`simcore.sweep` shares.
"""

from simcore.batch.command import main

raise SystemExit(main())
