"""``python -m simcore.view``: browse runs in a web page; see ``--help`` (:mod:`simcore.view.command`)."""

from simcore.view.command import main

raise SystemExit(main())
