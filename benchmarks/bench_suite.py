"""What CI costs: ``.ci/run`` on a fresh clone, timed, and (``--profile``) what each test costs.

    python benchmarks/bench_suite.py                          # HEAD: clone, .ci/run, figures
    python benchmarks/bench_suite.py --base 3f9551e --head HEAD   # two revisions, one after the other
    python benchmarks/bench_suite.py --rev HEAD --profile     # and the cost of each test and file
    python benchmarks/bench_suite.py --tree . --profile       # profile this checkout's .venv, no clone

Each revision is cloned from this repository into a new temporary directory and its own
``.ci/run`` runs there (install, the default test run, the docs build), as CI runs it; run it
with nothing else on the machine, since the figures are wall-clock times. From the output it
takes the total, the install's share (the ``CI:`` lines ``.ci/run`` prints; a revision whose
``.ci/run`` prints none gets its pytest time from pytest's summary line and the rest as
"other"), pytest's counts and its slowest tests.

``--profile`` then runs the default suite once more in the same clone, with its venv, under
the plugin ``benchmarks/pytest_cost.py`` (each test's wall and CPU time and the processes it
starts) and a log of every Python interpreter started from that venv (a ``.pth`` file put into
the clone's own venv), and writes each test's and each file's cost. CPU time and process counts
depend little on the machine's load; wall times do.

Writes benchmarks/results/suite.json (and with ``--profile``, suite_profile.json and
suite_profile.md): figures per revision, and with ``--base``, the ratio head/base.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in ([\d.]+)s")
CI_LINE = re.compile(r"^CI: (install|tests|docs|total) ([\d.]+) s")
TOP = 150  # tests kept one by one in suite_profile.json, by CPU time
DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S+)$")

# Logs each start of a Python interpreter of the profiled venv (a .pth file runs it at start).
STARTS_MODULE = '''\
import json as _j, os as _o, sys as _s, time as _t
try:
    with open({log!r}, "a") as _f:
        _f.write(_j.dumps({{"pid": _o.getpid(), "ppid": _o.getppid(), "t": _t.time(),
                           "test": _o.environ.get("PYTEST_CURRENT_TEST"),
                           "argv": list(getattr(_s, "orig_argv", _s.argv))[:6]}}) + "\\n")
except OSError:
    pass
'''


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def clone(rev: str, where: Path) -> str:
    """A fresh clone of this repository at ``rev`` in ``where``; its full commit id."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO), str(where)], check=True)
    git("checkout", "-q", commit, cwd=where)
    return commit


def parse_ci(output: str) -> dict:
    """The figures in ``.ci/run``'s output: its CI: lines, pytest's counts, time and slowest tests."""
    figures: dict = {}
    for line in output.splitlines():
        if m := CI_LINE.match(line):
            figures[f"{m.group(1)}_s"] = float(m.group(2))
        elif m := SUMMARY.match(line.strip("= ")):
            figures["counts"] = {w: int(n) for n, w in (part.split() for part in m.group(1).split(", "))}
            figures["pytest_s"] = float(m.group(2))
    slowest, block = [], False
    for line in output.splitlines():
        if "slowest" in line and "durations" in line:
            block = True
        elif block and (m := DURATION.match(line.strip())):
            slowest.append({"s": float(m.group(1)), "when": m.group(2), "test": m.group(3)})
        elif block and line.strip() and not line.startswith("("):
            block = False
    figures["slowest"] = slowest
    return figures


def run_ci(tree: Path) -> dict:
    """Run ``.ci/run`` in ``tree`` (as CI does: CI=true, no stdin); its figures and output."""
    env = {**os.environ, "CI": "true"}
    env.pop("VIRTUAL_ENV", None)
    load = os.getloadavg()[0]
    start = time.monotonic()
    res = subprocess.run(["bash", ".ci/run"], cwd=tree, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    wall = time.monotonic() - start
    figures = {"exit": res.returncode, "wall_s": round(wall, 1), "load_before": load,
               "load_after": os.getloadavg()[0], **parse_ci(res.stdout)}
    if "install_s" not in figures and "pytest_s" in figures:  # a .ci/run that prints no CI: lines
        figures["other_s"] = round(wall - figures["pytest_s"], 1)
    return {**figures, "output_tail": res.stdout[-6000:]}


def profile(tree: Path, python: str, workers: int, paths: list[str]) -> dict:
    """The default suite in ``tree`` once more, each test's cost recorded (see the module docstring)."""
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="simcore-profile-") as tmp:
        log = Path(tmp, "starts.jsonl")
        hook = site / "_simcore_bench_starts.py"
        pth = site / "_simcore_bench_starts.pth"
        hook.write_text(STARTS_MODULE.format(log=str(log)))
        pth.write_text("import _simcore_bench_starts\n")
        costs = Path(tmp, "costs")
        costs.mkdir()
        env = {**os.environ, "SIMCORE_TEST_COST": str(costs), "VIRTUAL_ENV": str(Path(python).parent.parent),
               # the tests' "python" commands: the profiled interpreter, whatever venv is active here
               "PATH": os.pathsep.join([str(Path(python).parent), os.environ.get("PATH", "")]),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
        try:
            start = time.monotonic()
            res = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_cost",
                                  "-n", str(workers), *paths], cwd=tree, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
            wall = time.monotonic() - start
        finally:
            hook.unlink(missing_ok=True)
            pth.unlink(missing_ok=True)
        tests = [json.loads(line) for f in sorted(costs.iterdir()) for line in f.read_text().splitlines()]
        starts = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    attribute_starts(tests, starts)
    summary = SUMMARY.match(res.stdout.strip().splitlines()[-1].strip("= ")) if res.stdout.strip() else None
    return {"exit": res.returncode, "wall_s": round(wall, 1), "summary": summary.group(0) if summary else None,
            "failed": [line.split()[1] for line in res.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))],
            "python_starts": len(starts), "tests": tests}


def attribute_starts(tests: list[dict], starts: list[dict]) -> None:
    """Give each test its count of Python starts (``python_starts``): those whose chain of parent
    processes reaches a test's process while that test ran (or that name the test in their
    environment). The pytest processes themselves (the main one, xdist's workers) belong to none."""
    by_pid = {s["pid"]: s for s in starts}
    runners = defaultdict(list)
    for t in tests:
        runners[t["pid"]].append(t)
        t["python_starts"] = 0
    by_id = {t["test"]: t for t in tests}
    for s in starts:
        if s["pid"] in runners:
            continue
        owner = by_id.get((s.get("test") or "").rsplit(" (", 1)[0])
        p = s
        while owner is None and p is not None:
            if p["ppid"] in runners:
                owner = next((t for t in runners[p["ppid"]] if t["start"] <= s["t"] <= t["end"] + 1), None)
                break
            p = by_pid.get(p["ppid"])
        if owner is not None:
            owner["python_starts"] += 1


def per_file(tests: list[dict]) -> dict[str, dict]:
    files: dict[str, dict] = {}
    for t in tests:
        f = files.setdefault(t["test"].split("::")[0], {"tests": 0, "wall_s": 0.0, "cpu_s": 0.0, "python_starts": 0})
        f["tests"] += 1
        f["wall_s"] += t["wall_s"]
        f["cpu_s"] += t["cpu_s"]
        f["python_starts"] += t["python_starts"]
    return {k: {**v, "wall_s": round(v["wall_s"], 1), "cpu_s": round(v["cpu_s"], 1)}
            for k, v in sorted(files.items(), key=lambda kv: -kv[1]["cpu_s"])}


def table(profiles: dict[str, dict]) -> str:
    """A markdown table of each file's cost per profiled revision, and the slowest tests."""
    labels = list(profiles)
    files = {f for p in profiles.values() for f in p["files"]}
    order = sorted(files, key=lambda f: -max(p["files"].get(f, {}).get("cpu_s", 0) for p in profiles.values()))
    head = "| file | " + " | ".join(f"{label}: tests, CPU s, wall s, Python starts" for label in labels) + " |"
    lines = [head, "| --- |" + " --- |" * len(labels)]
    for f in order:
        cells = []
        for label in labels:
            row = profiles[label]["files"].get(f)
            cells.append(f"{row['tests']}, {row['cpu_s']}, {row['wall_s']}, {row['python_starts']}" if row else "-")
        lines.append(f"| {f} | " + " | ".join(cells) + " |")
    totals = []
    for label in labels:
        rows = profiles[label]["files"].values()
        totals.append(f"{sum(r['tests'] for r in rows)}, {round(sum(r['cpu_s'] for r in rows), 1)}, "
                      f"{round(sum(r['wall_s'] for r in rows), 1)}, {sum(r['python_starts'] for r in rows)}")
    lines.append("| **all** | " + " | ".join(totals) + " |")
    out = ["\n".join(lines)]
    for label in labels:
        slow = sorted(profiles[label]["tests"], key=lambda t: -t["cpu_s"])[:40]
        out.append(f"### {label}: the 40 tests of most CPU time\n\n| CPU s | wall s | Python starts | test |\n"
                   "| --- | --- | --- | --- |\n"
                   + "\n".join(f"| {t['cpu_s']:.2f} | {t['wall_s']:.2f} | {t['python_starts']} | {t['test']} |"
                               for t in slow))
    return "\n\n".join(out) + "\n"


def measure(rev: str, with_profile: bool, workers: int) -> tuple[dict, dict | None]:
    where = Path(tempfile.mkdtemp(prefix="simcore-suite-"))
    try:
        commit = clone(rev, where)
        print(f"{rev} ({commit[:10]}): .ci/run in {where} ...", file=sys.stderr, flush=True)
        figures = {"rev": rev, "commit": commit, **run_ci(where)}
        print(summary_line(figures), file=sys.stderr, flush=True)
        prof = None
        if with_profile:
            prof = profile(where, str(where / ".ci-venv" / "bin" / "python"), workers, [])
            prof = {"rev": rev, "commit": commit, **prof}
        return figures, prof
    finally:
        shutil.rmtree(where, ignore_errors=True)


def summary_line(f: dict) -> str:
    parts = [f"total {f['wall_s']} s"]
    for key in ("install_s", "tests_s", "docs_s", "pytest_s", "other_s"):
        if key in f:
            parts.append(f"{key[:-2]} {f[key]} s")
    counts = ", ".join(f"{n} {w}" for w, n in f.get("counts", {}).items())
    return f"{f['rev']}: " + ", ".join(parts) + f"; {counts}; exit {f['exit']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the revision to measure (default HEAD)")
    parser.add_argument("--base", help="measure this revision first, then --head, and compare")
    parser.add_argument("--head", default="HEAD", help="with --base: the revision compared (default HEAD)")
    parser.add_argument("--profile", action="store_true", help="also record each test's cost (runs the suite again)")
    parser.add_argument("--tree", type=Path, help="profile this checkout with --python, without a clone or .ci/run")
    parser.add_argument("--python", help="with --tree: its interpreter (default: TREE/.venv/bin/python)")
    parser.add_argument("--label", help="with --tree: the name its profile is stored under (default: its commit)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers for --profile (default 2)")
    parser.add_argument("paths", nargs="*", help="with --tree: test files to profile instead of the default run")
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    machine = {"cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M")}
    profiles: dict[str, dict] = {}
    if args.tree:
        tree = args.tree.resolve()
        python = args.python or str(tree / ".venv" / "bin" / "python")
        label = args.label or git("rev-parse", "--short", "HEAD", cwd=tree)
        profiles[label] = profile(tree, python, args.workers, args.paths)
    else:
        revs = [args.base, args.head] if args.base else [args.rev]
        runs = []
        for rev in revs:
            figures, prof = measure(rev, args.profile, args.workers)
            runs.append(figures)
            if prof:
                profiles[rev] = prof
        result = {"machine": machine, "runs": runs}
        if args.base and all("wall_s" in r for r in runs):
            result["ratio_total_head_over_base"] = round(runs[1]["wall_s"] / runs[0]["wall_s"], 3)
        (RESULTS / "suite.json").write_text(json.dumps(result, indent=1) + "\n")
        for r in runs:
            print(summary_line(r))
        if "ratio_total_head_over_base" in result:
            print(f"head / base: {result['ratio_total_head_over_base']}")
    if profiles:
        for p in profiles.values():
            p["files"] = per_file(p["tests"])
            p["python_starts_by_tests"] = sum(t["python_starts"] for t in p["tests"])
            p["cpu_s_in_tests"] = round(sum(t["cpu_s"] for t in p["tests"]), 1)
            p["n_tests"] = len(p["tests"])
            p["tests"] = sorted(p["tests"], key=lambda t: -t["cpu_s"])[:TOP]  # the rest are in the file sums
        path = RESULTS / "suite_profile.json"
        old = json.loads(path.read_text()) if path.is_file() and args.tree else {}
        old.update({label: {**p, "machine": machine} for label, p in profiles.items()})
        path.write_text(json.dumps(old, indent=1) + "\n")
        (RESULTS / "suite_profile.md").write_text(table(old))
        for label, p in profiles.items():
            print(f"profile {label}: {p['summary']}; {p['n_tests']} tests, {p['cpu_s_in_tests']} s CPU in tests, "
                  f"{p['python_starts_by_tests']} Python starts by tests "
                  f"({p['python_starts']} in all); wall {p['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
