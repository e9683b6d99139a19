"""Bash blocks whose ``python -m MODULE ARGS`` commands run inside the test's process.

A docs page's bash block runs in bash as the page gives it (pipes, ``||``, globs, ``cd``),
but ``python`` there is a shell function: for ``python -m`` it sends the arguments and the
working directory to this process over a local socket (bash's ``/dev/tcp``), which runs the
module with :func:`tests.commands.run_module`, as ``python -m`` would, and the function
prints what the command printed and returns its exit status. That spares a fresh
interpreter (about 0.85 s of imports) per command. Any other use of ``python`` runs the
interpreter as usual.

The commands run in this process's main thread (signal handlers can be set), one at a
time, each with the environment as it was before it (what a command puts in
``os.environ`` does not reach the next one, as it would not from a process), and with the
working directory first on ``sys.path``, as ``python -m`` puts it; modules imported from
there are forgotten afterwards, so a file the page rewrites is read afresh.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from simcore.runs import scenario as scenario_module
from tests.commands import Ran, run_module

# The shell function: arguments as NUL-separated fields after their count; the reply is
# "STATUS OUT ERR" (the files holding what the command printed).
FUNCTION = r"""
python() {
    if [ "${1-}" != "-m" ]; then command python "$@"; return; fi
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


def _run_here(cwd: str, argv: list[str]) -> Ran:
    """``python -m argv[0] argv[1:]`` in ``cwd``, in this process, as a fresh one would run it."""
    env, path, modules = dict(os.environ), list(sys.path), set(sys.modules)
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
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(cwd + os.sep):
                del sys.modules[name]
        scenario_module.clear_cache()


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


def run_bash(script: str, cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``bash -euo pipefail`` in ``cwd``, its ``python -m`` commands in this process."""
    with socket.create_server(("127.0.0.1", 0)) as server, tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        port = server.getsockname()[1]
        out_path, err_path = tmp_dir / "stdout", tmp_dir / "stderr"
        with out_path.open("w") as out, err_path.open("w") as err:
            proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", FUNCTION % {"port": port} + script],
                                    cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True)
            try:
                _serve(server, proc, tmp_dir, timeout)
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out_path.read_text(), err_path.read_text())


def _serve(server: socket.socket, proc: subprocess.Popen, tmp_dir: Path, timeout: float) -> None:
    """Answer the script's ``python -m`` requests until bash exits."""
    deadline = time.monotonic() + timeout
    count = 0
    exited = os.pidfd_open(proc.pid)  # readable once bash has exited
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(server, selectors.EVENT_READ)
            sel.register(exited, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic()))}
                if not ready:
                    raise subprocess.TimeoutExpired(proc.args, timeout)
                if server not in ready:
                    return
                conn, _ = server.accept()
                with conn:
                    cwd, *argv = _read_request(conn)
                    ran = _run_here(cwd, argv)
                    count += 1
                    out, err = tmp_dir / f"{count}.out", tmp_dir / f"{count}.err"
                    out.write_text(ran.stdout)
                    err.write_text(ran.stderr)
                    conn.sendall(f"{ran.returncode} {out} {err}\n".encode())  # (temporary paths: no spaces)
    finally:
        os.close(exited)
