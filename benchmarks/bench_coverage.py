"""Line coverage of simcore/, backends/ and scenarios/ by the default test run (coverage.py).

    pip install coverage   # not in any extra: only this script needs it
    python benchmarks/bench_coverage.py                           # this checkout, this interpreter
    python benchmarks/bench_coverage.py --tree ../old --python ../old/.venv/bin/python --label before

The method, the same for any checkout so that two figures compare: ``coverage run`` of the
default run (``python -m pytest -n 2``, the marks of setup.cfg) with a configuration this
script writes, which measures every Python process the tests start (``patch = subprocess``:
pytest-xdist's workers, ``python -m ...`` commands, the tutorial's sandbox, a Jupyter kernel),
multiprocessing's and Dask's workers (``concurrency = multiprocessing``) and processes stopped
by SIGTERM (``sigterm``); the data files are combined and the lines counted per package.
Tests that fail under coverage's slower tracing are reported, not hidden. Writes
benchmarks/results/coverage.json (or ``--out``), keyed by ``--label``, keeping other labels.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGES = ("simcore", "backends", "scenarios")


def rcfile(tree: Path, data: Path) -> str:
    sources = ",".join(str(tree / p) for p in PACKAGES)
    return (f"[run]\nparallel = true\nsource = {sources}\ndata_file = {data}\n"
            "concurrency = thread, multiprocessing\npatch = subprocess, _exit\nsigterm = true\n")


def measure(tree: Path, python: str, workers: int, paths: list[str]) -> dict:
    """Run the default suite under coverage in ``tree``; the per-package line figures."""
    with tempfile.TemporaryDirectory(prefix="simcore-cov-") as tmp:
        rc = Path(tmp, "coveragerc")
        rc.write_text(rcfile(tree, Path(tmp, ".coverage")))
        env = {**os.environ, "COVERAGE_RCFILE": str(rc), "VIRTUAL_ENV": str(Path(python).parent.parent),
               # the tests' "python" commands: this checkout's interpreter, whatever venv is active here
               "PATH": os.pathsep.join([str(Path(python).parent), os.environ.get("PATH", "")])}
        start = time.monotonic()
        run = subprocess.run([python, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q",
                              "-p", "no:cacheprovider", "-n", str(workers), *paths],
                             cwd=tree, env=env, capture_output=True, text=True, check=False)
        wall = time.monotonic() - start
        subprocess.run([python, "-m", "coverage", "combine", f"--rcfile={rc}", "-q"], cwd=tree, env=env, check=True)
        report = Path(tmp, "coverage.json")
        subprocess.run([python, "-m", "coverage", "json", f"--rcfile={rc}", "-q", "-o", str(report)],
                       cwd=tree, env=env, check=True)
        files = json.loads(report.read_text())["files"]
    per: dict[str, dict[str, int]] = {p: {"statements": 0, "covered": 0} for p in PACKAGES}
    elsewhere = []  # files of another checkout, imported by a process of the run: named, not counted
    for name, info in files.items():
        path = (tree / name).resolve()  # (coverage.py 7.17 reports names relative to the run's directory)
        if not path.is_relative_to(tree):
            elsewhere.append(name)
            continue
        top = path.relative_to(tree).parts[0]
        per[top]["statements"] += info["summary"]["num_statements"]
        per[top]["covered"] += info["summary"]["covered_lines"]
    total = {k: sum(v[k] for v in per.values()) for k in ("statements", "covered")}
    for row in (*per.values(), total):
        row["percent"] = round(100 * row["covered"] / row["statements"], 2) if row["statements"] else None
    tail = run.stdout.strip().splitlines()[-1:] or [""]
    return {"packages": per, "total": total, "pytest_exit": run.returncode, "pytest_summary": tail[0],
            "failed": [line for line in run.stdout.splitlines() if line.startswith("FAILED ")],
            "outside_the_tree": elsewhere,
            "wall_s": round(wall, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=HERE.parent, help="the checkout to measure (default: this one)")
    parser.add_argument("--python", default=sys.executable, help="its interpreter (with coverage installed)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (default 2)")
    parser.add_argument("--label", default="now", help="the key the figures are stored under (default: now)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "coverage.json")
    parser.add_argument("paths", nargs="*", help="test files to run instead of the whole default run")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True,
                            text=True, check=False).stdout.strip()
    figures = {"commit": commit, "date": time.strftime("%Y-%m-%d"), "paths": args.paths,
               **measure(tree, args.python, args.workers, args.paths)}
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    results[args.label] = figures
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    for name, row in [*figures["packages"].items(), ("total", figures["total"])]:
        print(f"{name:10} {row['covered']:6d} / {row['statements']:6d} lines  {row['percent']:6.2f}%")
    print(f"pytest: {figures['pytest_summary']} (exit {figures['pytest_exit']}), {figures['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
