"""The capture study's command, ``python -m simcore.capture --perturb SPEC [options] -- PROGRAM [ARGS...]``.

A perturbation study of an external program that calls LLMs through OpenAI's chat
completions or Responses API or Anthropic's Messages API (see :mod:`simcore.capture`).
Exit status: 0 when every baseline finished, 1 when one failed, 2 on bad input (one
line, nothing run or written).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import textwrap
from collections.abc import Sequence

from simcore.base.config import ConfigError
from simcore.base.progress import progress_bar
from simcore.base.records import check_out_dir
from simcore.capture.study import check_capture, run_capture_study
from simcore.capture.upstream import make_upstream
from simcore.perturbation.study import cost_record, format_summary, write_study
from simcore.runs.args import OneLineParser, fail, parse_int, parse_seed

PROG = "python -m simcore.capture"

EPILOG = f"""\
The proxy speaks POST /v1/chat/completions, /v1/responses (OpenAI) and
/v1/messages (Anthropic). The program gets its URL in OPENAI_BASE_URL (and
OPENAI_API_BASE, SIMCORE_CAPTURE_URL), without /v1 in ANTHROPIC_BASE_URL, or in
place of {{base_url}} in its arguments. Its answer is what it prints (stdout), or
the file --answer names.

SPEC: OPERATOR[:KEY=VALUE,...] as for a simulation's study; for a program:
replace, truncate, blank, inject (the reply; inject on=prompt: the request),
drop (no reply: the connection is closed), fail (HTTP 500, the API's error
body), delay (by=S seconds),
budget (tokens=N), none. nth=K picks the K-th call (from 0) that matches the
selector; agent is the caller's X-Simcore-Agent header (default: program).

Examples:
  {PROG} --perturb "blank:nth=1" -- python my_agent.py
  {PROG} --upstream http://127.0.0.1:8080/v1 --model smollm2 \\
      --perturb "replace:nth=0,text='I do not know.'" --pairs 3 -- python my_agent.py
  {PROG} --upstream openai --perturb "fail:nth=2" --answer answer.txt -- ./agent --out answer.txt
"""


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog=PROG,
        description=textwrap.fill(
            "Perturbation study of an external program: each run goes through a recording proxy on "
            "127.0.0.1 that forwards the program's LLM calls (OpenAI chat completions or Responses, Anthropic "
            "Messages) upstream, records them as a simcore trace "
            "and, in perturbed runs, perturbs the replies it receives. Writes <out>/perturbation/"
            "<study-id>/ as a study of a simulation does (study.json, pairs.csv, summary.csv, report.md, "
            "plots/, runs/external/...).", 80
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--perturb", action="append", default=None, metavar="SPEC",
                        help="a perturbation (repeat for more; each gets its own pairs)")
    parser.add_argument("--pairs", default="1", metavar="N", help="pairs per perturbation (default: 1)")
    parser.add_argument("--noise-floor", default="1", metavar="K",
                        help="clean re-runs of each baseline that measure the program's own noise "
                        "(default: 1; 0 leaves the floor unmeasured, with a warning)")
    parser.add_argument("--seed", default="42", help="first pair's seed (SIMCORE_SEED; the stub's seed)")
    parser.add_argument("--upstream", default="stub",
                        help="where calls go: stub (simcore's, in process), a preset (openai, anthropic, "
                        "openrouter, llamacpp, ollama, vllm, ...) or a base URL (default: stub)")
    parser.add_argument("--upstream-api", default=None, metavar="APIS",
                        help="what the upstream speaks, comma-separated of chat, responses, messages (default: "
                        "openai chat,responses; anthropic messages; any other chat). A call in an API it speaks "
                        "is forwarded as it is; any other is translated to chat completions")
    parser.add_argument("--api-key-env", default=None, metavar="VAR",
                        help="environment variable holding the upstream's key (default: the preset's; "
                        "none: the program's own Authorization header is passed on)")
    parser.add_argument("--model", default=None, help="send this model instead of the one the program asks for")
    parser.add_argument("--answer", default="stdout", metavar="stdout|FILE",
                        help="where the program's final answer is (default: stdout)")
    parser.add_argument("--timeout", default="600", metavar="S", help="seconds a run may take (default: 600)")
    parser.add_argument("--reuse", default="prefix", choices=("prefix", "none"),
                        help="prefix: answer a perturbed run's calls before the perturbation point from the "
                        "baseline's replies when its request is the same (default); none: send every call")
    parser.add_argument("--out", "--output-dir", dest="out", default="runs", help="output root (default: runs)")
    parser.add_argument("--no-plot", action="store_true", help="skip the plots")
    parser.add_argument("--json", action="store_true", help="print the study summary as JSON")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    return parser


def format_endpoints(definition: dict) -> str:
    """Which endpoints the program called, over the study's runs (and those the proxy does not speak)."""
    def listed(counts: dict[str, int]) -> str:
        return "; ".join(f"{e} ({n} call{'s' * (n != 1)})" for e, n in counts.items())

    line = f"endpoints: {listed(definition['endpoints']) or 'none (the program made no call through the proxy)'}"
    if definition["unknown_endpoints"]:
        line += f"\nnot spoken by the proxy (answered 404): {listed(definition['unknown_endpoints'])}"
    return line


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study; returns the exit status."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        if not args.perturb:
            raise ConfigError("perturb: give at least one --perturb SPEC (none: a control pair)")
        seed = parse_seed(args.seed)
        pairs, noise = parse_int("pairs", args.pairs, 1), parse_int("noise_floor", args.noise_floor, 0)
        try:
            timeout = float(args.timeout)
        except ValueError:
            timeout = 0.0
        if not 1 <= timeout <= 86400:
            raise ConfigError(f"timeout: must be a number of seconds from 1 to 86400, got {args.timeout!r}")
        specs = check_capture(command, args.perturb, pairs, noise, args.reuse, args.answer)
        upstream = make_upstream(args.upstream, args.api_key_env, args.model, timeout, args.upstream_api)
        check_out_dir(args.out)
    except ConfigError as exc:
        fail(str(exc))
    if noise == 0:
        bar = "!" * 78
        print(f"{bar}\nWARNING: --noise-floor 0: the program's own noise goes unmeasured; every pair's "
              f"divergence may be noise.\n{bar}", file=sys.stderr)
    progress = progress_bar(pairs * (1 + noise + len(specs)), desc="capture study", unit="run",
                            disable=args.json)
    try:
        study = asyncio.run(run_capture_study(
            command, specs, upstream, pairs=pairs, seed=seed, noise_floor=noise, reuse=args.reuse,
            answer=args.answer, timeout_s=timeout, model=args.model, upstream_name=args.upstream,
            on_done=lambda: progress.update(1)))
    finally:
        progress.close()
    study_dir = write_study(study, args.out, plots=not args.no_plot)
    res = study.results
    calls = cost_record(study)
    failed = int((res.pairs["baseline_status"] != "ok").sum())
    if args.json:
        print(json.dumps({
            "study_dir": str(study_dir), "warnings": res.warnings(),
            "endpoints": res.definition["endpoints"], "unknown_endpoints": res.definition["unknown_endpoints"],
            "noise_floor": {k: v for k, v in res.noise.items() if k != "reruns"}, "calls": calls,
            "summary": res.summary().to_dict(orient="records"), "files": res.files,
        }, indent=2, sort_keys=True, default=str))
    else:
        print(f"program: {res.definition['command']}")
        print(format_endpoints(res.definition))
        print(format_summary(res, calls))
        print(f"study directory: {study_dir} (runs took {study.wall_s:.2f} s)")
    return 1 if failed else 0

