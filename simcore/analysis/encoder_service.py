"""One encoder for a whole sweep: worker processes send their texts to it.

A sweep on a GPU machine must not make every worker process import torch and open
a CUDA context of its own. :class:`EncoderService` runs in the sweep's own
process: it listens on a Unix socket, and a thread per connected worker hands each
request to :func:`simcore.analysis.embeddings.encode`, whose one encoder thread merges the
requests of all workers into batches. Workers call :func:`attach` (the executors
do it before each trial); from then on their :func:`~simcore.analysis.embeddings.encode`
asks the service for every text missing from their own memory cache, and their
:func:`~simcore.analysis.embeddings.settings` are the service's, so each manifest names the
engine and device that really made its vectors.

Vectors are per text (see :mod:`simcore.analysis.embeddings`), so they are the same whether
a worker encodes a text itself or the service does, on the same engine: results
never depend on which process encoded them. The service writes the persistent
cache; the cache key still names the engine.

Only processes on this machine can reach the socket (the Dask executor with a
remote scheduler leaves each worker its own encoder).
"""

from __future__ import annotations

import os
import secrets
import threading
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Sequence

import numpy as np

from simcore.analysis import embeddings

MODES = ("auto", "shared", "per-worker")


class EncoderService:
    """Encodes the texts of every worker of a sweep in this process.

    Use as a context manager; :attr:`address` and :attr:`authkey` are what
    workers :func:`attach` to.

    Args:
        preload: Start loading the model at once (while the workers start).
    """

    def __init__(self, preload: bool = False) -> None:
        self.authkey = secrets.token_bytes(16)
        self._listener = Listener(family="AF_UNIX", authkey=self.authkey)
        self.address: str = self._listener.address  # type: ignore[assignment]
        self.requests = 0
        self.texts = 0
        self.clients: set[int] = set()  # pids of the workers that connected
        self._lock = threading.Lock()
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, name="simcore-encoder-service", daemon=True)
        self._accepting.start()
        if preload:
            embeddings.preload()

    def __enter__(self) -> "EncoderService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, Any]:
        """What the service did: requests, texts asked for, worker processes served, and its settings."""
        with self._lock:
            out: dict[str, Any] = {"requests": self.requests, "texts": self.texts, "workers": len(self.clients)}
        out["process_encoded"] = embeddings.counts()["encoded"]
        return out

    def _accept(self) -> None:
        while True:
            try:
                conn = self._listener.accept()
            except (OSError, EOFError):  # closed, or a client that failed the handshake
                if self._closed:
                    return
                continue
            if self._closed:
                conn.close()
                return
            thread = threading.Thread(target=self._serve, args=(conn,), name="simcore-encoder-client", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: Connection) -> None:
        with conn:
            while True:
                try:
                    kind, payload = conn.recv()
                except (EOFError, OSError):
                    return  # the worker is gone
                try:
                    if kind == "hello":
                        with self._lock:
                            self.clients.add(int(payload))
                        reply: Any = embeddings.settings()
                    else:
                        texts = list(payload)
                        with self._lock:
                            self.requests += 1
                            self.texts += len(texts)
                        reply = embeddings.encode(texts)
                except Exception as exc:  # noqa: BLE001 - the worker's trial reports it
                    conn.send(("error", f"{type(exc).__name__}: {exc}"))
                else:
                    conn.send(("ok", reply))

    def close(self) -> None:
        """Stop accepting workers; connected ones end as their workers exit."""
        if self._closed:
            return
        self._closed = True
        try:  # wake the accepting thread, blocked in accept()
            Client(self.address, family="AF_UNIX", authkey=self.authkey).close()
        except OSError:
            pass
        self._accepting.join(5)
        self._listener.close()


class RemoteEncoder:
    """A worker's end of the service: one connection, used by one thread at a time."""

    def __init__(self, address: str, authkey: bytes) -> None:
        self.address = address
        self._conn = Client(address, family="AF_UNIX", authkey=authkey)
        self._lock = threading.Lock()
        self.settings: dict[str, str] = self._ask("hello", os.getpid())

    def _ask(self, kind: str, payload: Any) -> Any:
        with self._lock:
            self._conn.send((kind, payload))
            status, reply = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"the sweep's encoder failed: {reply}")
        return reply

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts`` (n, dim), computed or looked up by the service."""
        return self._ask("encode", list(texts))


def attach(address: str, authkey: bytes) -> None:
    """Send this process's texts to the service at ``address`` from now on (idempotent)."""
    current = embeddings.remote_encoder()
    if current is None or current.address != address:
        embeddings.use_remote(RemoteEncoder(address, authkey))


def use_service(mode: str, executor: str, address: str | None, embeds: bool, trials: int = 1) -> bool:
    """Whether a sweep runs :class:`EncoderService` (the rule docs/batch.md gives).

    Args:
        mode: ``auto`` (share one encoder when this process's device is a GPU),
            ``shared`` (always, also on the CPU) or ``per-worker`` (never).
        executor: Only the ``local`` pool and a Dask LocalCluster run workers that
            can reach this process; the other executors encode in this process anyway.
        address: A Dask scheduler's address (remote workers: no service).
        embeds: Whether any trial of the sweep embeds texts.
        trials: The trials the encoder would serve (``auto`` takes a GPU only for enough of them).

    Raises:
        ValueError: one line, for an unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"encoder: must be one of {', '.join(MODES)}; got {mode!r}")
    if mode == "per-worker" or not embeds or executor not in ("local", "dask") or address is not None:
        return False
    if mode == "shared":
        return True
    # Resolving auto imports torch only where a GPU driver exists (embeddings.check_device).
    requested = embeddings.requested_device()
    where = embeddings.auto_device(trials) if requested == "auto" else embeddings.check_device(requested)
    return where != "cpu"
