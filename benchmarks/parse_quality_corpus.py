"""Parse quality of every scenario against the fake server answering from the reply corpus.

The fake OpenAI-compatible server answers each scenario's structured calls from
``tests/corpus`` (replies in the forms real chat models write, each with its
expected reading), as ``tests/test_reading_e2e.py`` does; that test checks every
reading, this script counts them. For each scenario and JSON mode (auto, off), it
runs three random seeds without re-asks and sums, per reply kind the corpus
serves, the parse-quality report (replies read as JSON, by label, by prose, and
unreadable, i.e. flagged) beside the corpus's own count of replies that are
unreadable by design (refusals, empty or cut replies, hedges, and votes for an
option the vignette does not offer: the corpus's ballots name options A-D, and some
vignettes have A-C). The test's checks
run too, so a misread stops the script; "flagged readable" is what the reader
flagged beyond those.

Writes ``benchmarks/results/parse_quality_corpus.{json,md}``. Takes about a minute::

    python benchmarks/parse_quality_corpus.py
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.fake_server import FakeServer  # noqa: E402
from backends.registry import BackendSpec  # noqa: E402
from simcore.base.records import write_json  # noqa: E402
from simcore.runs.runner import run_trial_async  # noqa: E402
from simcore.runs.scenario import load_scenario  # noqa: E402
from tests.test_reading_e2e import CHECKS, RUNS, fake_config  # noqa: E402

SEEDS = (1, 2, 3)
COUNTS = ("replies", "json", "label", "prose", "unreadable")
# The reply kinds the corpus serves, per scenario (other calls get the fake server's default reply).
SERVED = {"acausal_cooperation": ("decision",), "context_corrosion": ("final_vote",),
          "llm_auction": ("ballot",), "veil_of_ignorance": ("rating", "turn")}


async def measure(name: str, json_mode: str) -> dict[str, dict[str, int]]:
    scenario = load_scenario(name)
    config = scenario.config_type.from_mapping(RUNS[name])
    totals: dict[str, Counter[str]] = {}
    async with FakeServer(fake_config()) as server:
        for seed in SEEDS:
            spec = BackendSpec("openai-compatible", "fake-1", base_url=server.openai_url,
                               options={"json_mode": json_mode, "reask": 0, "max_retries": 0})
            trial = await run_trial_async(scenario, config, seed, spec)
            entries = CHECKS[name](trial)  # asserts that every served reply was read as expected, or flagged
            for kind in SERVED[name]:
                row = trial.results["parse_quality"][kind]
                totals.setdefault(kind, Counter()).update({k: row[k] for k in COUNTS})
            # (a veil rating with an item unreadable by design, the others kept, is unreadable as a reply)
            by_design = sum(e["expect"] == "unreadable" or (e.get("kind") == "rating" and None in e["expect"])
                            for e in entries)
            totals[SERVED[name][0]]["unreadable_by_design"] += by_design  # veil: both kinds summed below
    if name == "veil_of_ignorance":  # the corpus entries of both veil kinds are counted together
        both = Counter()
        for kind in SERVED[name]:
            both.update(totals.pop(kind))
        totals = {"rating+turn": both}
    return {kind: {**dict(c), "flagged_readable": c["unreadable"] - c["unreadable_by_design"]}
            for kind, c in sorted(totals.items())}


def markdown(rows: list[dict[str, Any]]) -> str:
    cols = (*COUNTS, "unreadable_by_design", "flagged_readable")
    lines = ["| scenario | JSON mode | reply kind | replies | JSON | label | prose | flagged | "
             "unreadable by design | flagged readable | misread |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['scenario']} | {r['json_mode']} | {r['kind']} | "
                     + " | ".join(str(r[k]) for k in cols) + " | 0 |")
    return "\n".join(lines) + "\n"


def main() -> int:
    # No options; --help says what the script does before it overwrites its results.
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    rows = []
    start = time.perf_counter()
    for name in sorted(RUNS):
        for mode in ("auto", "off"):
            for kind, counts in asyncio.run(measure(name, mode)).items():
                rows.append({"scenario": name, "json_mode": mode, "kind": kind, **counts})
    out = ROOT / "benchmarks" / "results" / "parse_quality_corpus.json"
    write_json(out, {"written": time.strftime("%Y-%m-%d"), "seeds": list(SEEDS), "configs": RUNS,
                     "wall_s": round(time.perf_counter() - start, 1), "rows": rows})
    out.with_suffix(".md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
