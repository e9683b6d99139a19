"""Collect real replies for the labelled corpus (``tests/corpus/real/``).

Starts a local llama.cpp server per model (``backends/llamacpp.py``), runs every
scenario through its own command line (``simcore.cli.main``, small configs unless
``--as-given``) at the given seeds and JSON modes, with the defaults of a real
backend (one re-ask of an unreadable reply, as users run it; ``--reask N`` to
change that), and records every call with a schema: the messages as sent, the
reply kind and schema, the allowed options, the instruction a reply must not
merely repeat, ``max_tokens``, the reply and its ``finish_reason``. A re-ask is a
row of its own (``reask``: its number, 0 for a first reply), whose messages end
with the reply it re-asks and the follow-up. Nothing about how simcore read a
reply is written: labels are written by a person reading the replies.

Writes one JSON line per reply to ``--out`` (default
``runs/real_replies/<model>-json_<mode>.jsonl``, appended, so an interrupted
collection keeps what it got) with ``label`` and ``note`` left null. Label them,
then add the lines to ``tests/corpus/real/`` (see ``tests/corpus/README.md``)::

    python benchmarks/collect_real_replies.py --models smollm2 --json-modes off --seeds 1,2
    python benchmarks/collect_real_replies.py --models qwen --scenarios llm_auction --seeds 5 \\
        --extra llm_auction="--n-vignettes 3"
    # a command exactly as a user gives it (no small-world flags), default re-asks
    python benchmarks/collect_real_replies.py --models smollm2 --scenarios acausal_cooperation --seeds 57 \\
        --as-given --extra acausal_cooperation="--n-agents 4 --rounds 2 --decision-prompt original"
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.llamacpp import MODELS, llama_server, model_path  # noqa: E402
from simcore.cli import main as run_cli  # noqa: E402
from simcore.runs.scenario import load_scenario  # noqa: E402
from tests.corpus.real import capture  # noqa: E402

# Small worlds, as command-line flags of each scenario; --extra adds to them.
FLAGS: dict[str, list[str]] = {
    "acausal_cooperation": ["--n-agents", "4", "--rounds", "1", "--no-embeddings", "--strategy-tokens", "300"],
    "veil_of_ignorance": ["--n-agents", "3", "--max-rounds", "1", "--max-output-tokens", "400"],
    "llm_auction": ["--n-agents", "5", "--n-vignettes", "1"],
    "context_corrosion": ["--rounds", "1", "--n-peers", "2", "--no-metrics", "--dominant-tokens", "200"],
}
JSON_MODES = {"on": "auto", "off": "off"}


def collect_one(name: str, url: str, model: str, mode: str, seed: int, reask: int | None, extra: list[str],
                out: Path, runs: Path, small: bool = True) -> int:
    """Run one scenario once and append its calls to ``out``; returns how many.

    ``reask`` None keeps the backend's default; ``small`` False runs ``extra`` alone (no small-world flags).
    """
    flags = [*FLAGS[name], *extra] if small else list(extra)
    args = [*flags, "--backend", "llamacpp", "--base-url", url, "--model", model,
            "--json-mode", JSON_MODES[mode], "--seed", str(seed), "--timeout", "900",
            "--plots", "none", "--out", str(runs), "--json"]
    if reask is not None:
        args += ["--reask", str(reask)]
    start = time.monotonic()
    # (stdout is the run's results JSON: how its replies were read, which the collector never shows)
    with capture() as calls, contextlib.redirect_stdout(io.StringIO()):
        code = run_cli(load_scenario(name), args)
    with open(out, "a", encoding="utf-8") as f:
        for c in calls:
            rec = {**c.record(), "json_mode": mode, "seed": seed, "flags": shlex.join(flags),
                   "reask": int(c.fields.get("reask", 0)), "label": None, "note": None}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    reasks = sum(1 for c in calls if c.fields.get("reask"))
    print(f"{model} json={mode} {name} seed {seed}: exit {code}, {len(calls)} replies ({reasks} of them re-asks) "
          f"in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    return len(calls)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--models", default="smollm2,gemma,qwen", help=f"comma-separated: {', '.join(MODELS)}")
    p.add_argument("--json-modes", default="off", help="comma-separated: on, off (default: off)")
    p.add_argument("--scenarios", default=",".join(FLAGS), help="comma-separated scenario names")
    p.add_argument("--seeds", default="1", help="comma-separated run seeds")
    p.add_argument("--reask", type=int, default=None,
                   help="re-asks per unreadable reply (default: the backend's, 1; each re-ask is a row of its own)")
    p.add_argument("--as-given", action="store_true",
                   help="run each scenario with its --extra flags only, not the small-world flags (a user's command)")
    p.add_argument("--extra", action="append", default=[], metavar="SCENARIO=FLAGS",
                   help="more flags for one scenario, e.g. llm_auction='--n-vignettes 2'")
    p.add_argument("--n-ctx", type=int, default=4096, help="the server's context window")
    p.add_argument("--out", help="JSONL to append to (default: runs/real_replies/<model>-json_<mode>.jsonl)")
    args = p.parse_args(argv)
    extra: dict[str, list[str]] = {}
    for item in args.extra:
        name, sep, flags = item.partition("=")
        if not sep or name not in FLAGS:
            p.error(f"--extra: give SCENARIO=FLAGS with SCENARIO one of {', '.join(FLAGS)}; got {item!r}")
        extra[name] = shlex.split(flags)
    scenarios = args.scenarios.split(",")
    for name in scenarios:
        if name not in FLAGS:
            p.error(f"--scenarios: each must be one of {', '.join(FLAGS)}; got {name!r}")
    modes = args.json_modes.split(",")
    if any(m not in JSON_MODES for m in modes):
        p.error(f"--json-modes: each must be on or off; got {args.json_modes!r}")
    models = args.models.split(",")
    if any(m not in MODELS for m in models):
        p.error(f"--models: each must be one of {', '.join(MODELS)}; got {args.models!r}")
    if not all(s.strip().isdigit() for s in args.seeds.split(",")):
        p.error(f"--seeds: comma-separated whole numbers; got {args.seeds!r}")
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = ROOT / "runs" / "real_replies"
    runs.mkdir(parents=True, exist_ok=True)
    total, start = 0, time.monotonic()
    for model in models:
        with llama_server(model_path(model), n_ctx=args.n_ctx, log=runs / f"{model}.server.log") as url:
            for mode in modes:
                out = Path(args.out) if args.out else runs / f"{model}-json_{mode}.jsonl"
                for name in scenarios:
                    for seed in seeds:
                        total += collect_one(name, url, model, mode, seed, args.reask, extra.get(name, []), out, runs,
                                             small=not args.as_given)
    print(f"{total} replies in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
