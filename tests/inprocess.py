"""``python -m MODULE ARGS`` commands run in an interpreter that is already running.

A docs page's bash block runs in bash as the page gives it (pipes, ``||``, globs, ``cd``),
but ``python`` there is a shell function: for ``python -m`` it sends the arguments and the
working directory to the test's process over a local socket (bash's ``/dev/tcp``), which
has the command run, as ``python -m`` would (:func:`tests.commands.run_module`), and the
function prints what the command printed and returns its exit status. That spares a fresh
interpreter (about 1 s of imports) per command. Any other use of ``python`` (``python -``,
``python -c``) and ``python -m pip`` run the interpreter as usual.

The commands run one at a time in the main thread (signal handlers can be set) of either
the test's own process (:func:`run_here`) or a :class:`Server`: one interpreter of another
environment, such as a sandbox (tests/sandbox.py), which imports that environment's
packages as a user's ``python -m`` would. Each command runs with the environment as it
was before it (what a command puts in ``os.environ`` does not reach the next one, as it
would not from a process; the block's own ``export`` does not reach it either), with the
working directory first on ``sys.path``, as ``python -m`` puts it; modules imported from
there are forgotten afterwards, so a file the page rewrites is read afresh, and so are
simcore's resolved scenario names and a fork server the command started (which holds the
modules it preloaded).
"""

from __future__ import annotations

import json
import os
import selectors
import site
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import forkserver
from pathlib import Path

from simcore.runs import scenario as scenario_module
from tests.commands import Ran, run_module

# The shell function: arguments as NUL-separated fields after their count; the reply is
# "STATUS OUT ERR" (the files holding what the command printed).
FUNCTION = r"""
python() {
    if [ "${1-}" != "-m" ] || [ "${2-}" = pip ]; then command python "$@"; return; fi
    shift
    local fd status out err
    exec {fd}<>/dev/tcp/127.0.0.1/%(port)d
    printf '%%s\0' "$(($# + 1))" "$PWD" "$@" >&$fd
    read -r status out err <&$fd
    exec {fd}>&-
    cat "$out"; cat "$err" >&2; rm -f "$out" "$err"
    return "$status"
}
"""


def run_here(cwd: str, argv: Sequence[str]) -> Ran:
    """``python -m argv[0] argv[1:]`` in ``cwd``, in this process, as a fresh one would run it."""
    env, path, modules = dict(os.environ), list(sys.path), set(sys.modules)
    server_pid = forkserver._forkserver._forkserver_pid
    sys.path.insert(0, cwd)
    try:
        return run_module(*argv, cwd=cwd)
    except Exception:  # noqa: BLE001 (the interpreter prints the traceback and exits 1)
        return Ran(1, "", traceback.format_exc())
    finally:
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            file = getattr(sys.modules[name], "__file__", None) or ""
            # (not the environment's installed modules, which a sandbox may hold under cwd)
            if file.startswith(cwd + os.sep) and not file.startswith(sys.prefix + os.sep):
                del sys.modules[name]
        scenario_module.clear_cache()
        # A sweep's fork server outlives its pool, with the scenario's modules preloaded
        # (simcore.batch.executors): the next command's workers would fork from old code.
        if forkserver._forkserver._forkserver_pid not in (None, server_pid):
            forkserver._forkserver._stop()  # (private: multiprocessing has no public way)


class Server:
    """An interpreter of ``python`` (with environment ``env``) that runs ``python -m`` commands
    sent to it, one at a time, with :func:`run_here`.

    It starts at the first command, and again at the first command after its site-packages
    changed (a ``pip install`` since it started: a ``.pth`` file, a distribution, an entry
    point), so every command sees the environment as a fresh interpreter would.
    """

    def __init__(self, python: str | Path, env: dict[str, str] | None = None) -> None:
        self.python, self.env = str(python), env
        self.starts = 0
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        # What the interpreter itself prints (a crash, a pool worker's last words); shown if it dies.
        self._log = tempfile.TemporaryFile()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, cwd: str | Path, argv: Sequence[str], timeout: float = 300) -> Ran:
        """What ``python -m argv[0] argv[1:]`` run in ``cwd`` does."""
        for _ in range(2):
            if self._proc is None:
                self._start()
            assert self._sock is not None
            self._sock.settimeout(timeout)
            printed = self._log.seek(0, os.SEEK_END)
            try:
                self._sock.sendall(json.dumps([str(cwd), list(argv)]).encode() + b"\n")
                line = self._channel.readline()
            except TimeoutError:
                self._stop(kill=True)
                raise subprocess.TimeoutExpired(["python", "-m", *argv], timeout) from None
            if not line:
                status = self._stop()
                self._log.seek(printed)
                log = self._log.read().decode(errors="replace")
                return Ran(1, "", f"{log}the server's interpreter exited with status {status} during this command\n")
            reply = json.loads(line)
            if "stale" not in reply:
                return Ran(**reply)
            self._stop()
        raise AssertionError("a fresh server found its site-packages changed since it started")

    def close(self) -> None:
        """Stop the interpreter, for good."""
        self._stop()
        self._log.close()

    def _start(self) -> None:
        mine, theirs = socket.socketpair()
        with theirs:
            # -P: no directory of the server's own first on sys.path (each command puts its cwd there).
            self._proc = subprocess.Popen(
                [self.python, "-P", "-m", "tests.inprocess", str(theirs.fileno())], env=self.env,
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self._sock, self._channel = mine, mine.makefile("rb")
        self.starts += 1

    def _stop(self, kill: bool = False) -> int | None:
        """Stop the interpreter: it reads the end of its requests and exits (or is killed)."""
        if self._proc is None:
            return None
        assert self._sock is not None
        self._channel.close()
        self._sock.close()
        if kill:
            self._proc.kill()
        try:
            status = self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            status = self._proc.wait()
        self._proc = self._sock = None
        return status


def _site_stamp() -> list[tuple[str, int]]:
    """This interpreter's site-packages: each entry and when it last changed."""
    return sorted((entry.path, entry.stat(follow_symlinks=False).st_mtime_ns)
                  for d in site.getsitepackages() if os.path.isdir(d)
                  for entry in os.scandir(d) if entry.name != "__pycache__")


def serve(fd: int) -> None:
    """The server's loop: a request per line on the socket ``fd``, a reply per line."""
    stamp = _site_stamp()
    with socket.socket(fileno=fd) as sock, sock.makefile("rb") as requests:
        for line in requests:
            if _site_stamp() != stamp:
                sock.sendall(b'{"stale": true}\n')
                return
            cwd, argv = json.loads(line)
            sock.sendall(json.dumps(vars(run_here(cwd, argv))).encode() + b"\n")


def _read_request(conn: socket.socket) -> list[str]:
    data = b""
    while True:
        fields = data.split(b"\0")
        if len(fields) > 1 and len(fields) - 1 >= int(fields[0]) + 1:
            return [f.decode() for f in fields[1:int(fields[0]) + 1]]
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError(f"incomplete request: {data!r}")
        data += chunk


def run_bash(script: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300,
             server: Server | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``bash -euo pipefail`` in ``cwd``, its ``python -m`` commands in
    ``server``, or in this process if there is none."""
    with socket.create_server(("127.0.0.1", 0)) as listener, tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        port = listener.getsockname()[1]
        out_path, err_path = tmp_dir / "stdout", tmp_dir / "stderr"
        with out_path.open("w") as out, err_path.open("w") as err:
            proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", FUNCTION % {"port": port} + script],
                                    cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True)
            run: Callable[[str, list[str], float], Ran] = (
                server.run if server is not None else lambda cwd, argv, _timeout: run_here(cwd, argv))
            try:
                _serve_bash(listener, proc, tmp_dir, timeout, run)
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out_path.read_text(), err_path.read_text())


def _serve_bash(listener: socket.socket, proc: subprocess.Popen, tmp_dir: Path, timeout: float,
                run: Callable[[str, list[str], float], Ran]) -> None:
    """Answer the script's ``python -m`` requests until bash exits."""
    deadline = time.monotonic() + timeout
    count = 0
    exited = os.pidfd_open(proc.pid)  # readable once bash has exited
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(listener, selectors.EVENT_READ)
            sel.register(exited, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic()))}
                if not ready:
                    raise subprocess.TimeoutExpired(proc.args, timeout)
                if listener not in ready:
                    return
                conn, _ = listener.accept()
                with conn:
                    cwd, *argv = _read_request(conn)
                    ran = run(cwd, argv, max(1.0, deadline - time.monotonic()))
                    count += 1
                    out, err = tmp_dir / f"{count}.out", tmp_dir / f"{count}.err"
                    out.write_text(ran.stdout)
                    err.write_text(ran.stderr)
                    conn.sendall(f"{ran.returncode} {out} {err}\n".encode())  # (temporary paths: no spaces)
    finally:
        os.close(exited)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
