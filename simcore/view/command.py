"""The run browser's command, ``python -m simcore.view [RUNS_DIR] [--host HOST] [--port P]``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from simcore.base.config import ConfigError
from simcore.runs.args import OneLineParser, fail, parse_int

DEFAULT_PORT = 8765


def build_parser() -> OneLineParser:
    """The command's parser."""
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
    parser.add_argument("--port", default=str(DEFAULT_PORT),
                        help=f"port, 0 to 65535 (default: {DEFAULT_PORT}; 0 picks a free one)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    args = build_parser().parse_args(argv)
    root = Path(args.runs_dir)
    if not root.is_dir():
        fail(f"runs_dir: {args.runs_dir!r} is not a directory")
    try:
        port = parse_int("port", args.port, 0, 65535)
    except ConfigError as exc:
        fail(str(exc))
    try:
        asyncio.run(serve(root, args.host, port))
    except KeyboardInterrupt:
        pass
    return 0


async def serve(root: Path, host: str, port: int) -> None:
    """Serve the browser of ``root`` on ``host:port`` until interrupted."""
    from aiohttp import web

    # Deferred on purpose: the app brings aiohttp and jinja2 (heavy), needed only once the arguments are good.
    from simcore.view.app import make_app

    runner = web.AppRunner(make_app(root), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        fail(f"port: cannot listen on {host}:{port} ({exc.strerror or exc})")
    bound = runner.addresses[0][1]
    shown = f"[{host}]" if ":" in host else host
    print(f"simcore.view: browsing {root.resolve()} at http://{shown}:{bound}/ (Ctrl-C stops)", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
