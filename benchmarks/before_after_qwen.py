"""One context_corrosion run on a small real chat model, printed by older code and by this code.

Both runs go to one llama.cpp server (Qwen2.5-Coder-0.5B-Instruct, JSON mode
auto) with the same flags and random seed, so they get the same replies; what
differs is how the code reads them. The older code is a checkout of another
commit (``git worktree add --detach /tmp/old 3692d51``)::

    python benchmarks/before_after_qwen.py --before-tree /tmp/old

Writes ``benchmarks/results/context_corrosion_qwen_before_after.txt``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.llamacpp import llama_server, model_path  # noqa: E402

FLAGS = ["--rounds", "2", "--n-peers", "3", "--peer-tokens", "60", "--backend", "llamacpp", "--model", "qwen",
         "--seed", "1"]


def run(tree: Path, url: str, out: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "scenarios.context_corrosion", *FLAGS, "--base-url", url, "--out", str(out)]
    res = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    return res.stdout + (f"(exit {res.returncode}: {res.stderr.strip()[-500:]})\n" if res.returncode else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before-tree", required=True, help="a checkout of the older commit")
    args = p.parse_args()
    before = Path(args.before_tree).resolve()
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=before, capture_output=True, text=True)
    with tempfile.TemporaryDirectory() as tmp, llama_server(model_path("qwen"), n_ctx=8192) as url:
        text = [f"# context_corrosion on Qwen2.5-Coder-0.5B-Instruct (llama.cpp, JSON mode auto), "
                f"{' '.join(FLAGS[:6])} --seed 1, one server, {time.strftime('%Y-%m-%d')}",
                f"## before (commit {rev.stdout.strip()})", run(before, url, Path(tmp) / "before"),
                "## after (this checkout)", run(ROOT, url, Path(tmp) / "after")]
    out = ROOT / "benchmarks" / "results" / "context_corrosion_qwen_before_after.txt"
    out.write_text("\n".join(text))
    print(out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
