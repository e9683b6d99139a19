"""``python -m simcore.view [RUNS_DIR] [--host HOST] [--port P]``: browse runs in a web page."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from simcore.runs.args import OneLineParser, fail

DEFAULT_PORT = 8765


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = OneLineParser(
        prog="python -m simcore.view",
        description="Browse the runs, Monte Carlo groups, sweeps and perturbation studies under RUNS_DIR "
                    "in a web page: transcripts in simulated time, metrics, plots, replay and run comparison. "
                    "Read-only.",
    )
    parser.add_argument("runs_dir", nargs="?", default="runs", metavar="RUNS_DIR",
                        help="the directory to browse (default: runs)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port (default: {DEFAULT_PORT}; 0 picks a free one)")
    args = parser.parse_args(argv)
    root = Path(args.runs_dir)
    if not root.is_dir():
        fail(f"runs_dir: {args.runs_dir!r} is not a directory")
    if not 0 <= args.port <= 65535:
        fail(f"port: must be an integer from 0 to 65535, got {args.port}")

    import asyncio

    from aiohttp import web

    # Deferred on purpose: the app brings aiohttp and jinja2 (heavy), needed only once the arguments are good.
    from simcore.view.app import make_app

    async def serve() -> None:
        runner = web.AppRunner(make_app(root), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            fail(f"port: cannot listen on {args.host}:{args.port} ({exc.strerror or exc})")
        port = runner.addresses[0][1]
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"simcore.view: browsing {root.resolve()} at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
