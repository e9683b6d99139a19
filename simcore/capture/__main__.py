"""``python -m simcore.capture``: a perturbation study of an external program; see ``--help``
(:mod:`simcore.capture.command`)."""

from simcore.capture.command import main

raise SystemExit(main())
