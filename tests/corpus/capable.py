"""Capable models' replies (``tests/corpus/capable/``), served to simcore's own decision prompt.

Each line of ``tests/corpus/capable/<source>.jsonl.gz`` is one reply that a capable model
(gpt-3.5-turbo, gpt-4, gemini-pro) wrote in a plain-text prisoner's-dilemma experiment that a
public research repository recorded (``benchmarks/capable_replies.py`` took it out of the
repository's data files): where it came from (``repo``, ``path``, ``commit``, ``locator``),
what that experiment asked (``asked``), its words for the moves and their mapping
(``moves``), the reply as written (``reply_original``) and with its move words mapped
(``reply``), and a label written by two labellers who read it with the experiment's question:
``{"action": "COOPERATE" | "DEFECT" | null | {"ambiguous": [...]}}``.

A reader is scored on them as the pipeline would read them: each reply is served, as a reply
to simcore's own decision prompt (the original experiment's plain-text prompt, with JSON
mode off, as issue 48's filer served them), to the reader the kernel uses. Sources are split
in ``tests/corpus/real/split.json`` (``sources``): a held-out source is labelled before any
reader runs on it.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import tempfile
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from simcore.replies.reading import Reading, read_reply

CAPABLE = Path(__file__).resolve().parent / "capable"
SPLIT = Path(__file__).resolve().parent / "real" / "split.json"
SCHEMA = "scenarios.acausal_cooperation.prompts:DecisionReply"


def heldout_sources(path: Path = SPLIT) -> set[str]:
    """The sources held out (``split.json``'s ``sources``); every other source is development."""
    if not path.exists():
        return set()
    return set(json.loads(path.read_text(encoding="utf-8")).get("sources", {}).get("heldout", ()))


def load(root: Path = CAPABLE, labelled_only: bool = True) -> list[dict[str, Any]]:
    """The records of every source (``*.jsonl.gz``), in file order, each with its ``split`` and ``where``;
    with ``labelled_only``, those whose label is written."""
    held = heldout_sources()
    out = []
    for path in sorted(root.glob("*.jsonl.gz")):
        for n, line in enumerate(gzip.decompress(path.read_bytes()).decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            if labelled_only and rec.get("label") is None:
                continue
            rec["split"] = "heldout" if rec["source"] in held else "development"
            rec["where"] = f"{path.name}:{n}"
            rec.update(json_mode="off", schema=SCHEMA)  # (plain-text experiments; simcore's decision reply)
            out.append(rec)
    return out


@lru_cache(maxsize=1)
def decision_request() -> dict[str, Any]:
    """Simcore's own decision request as the kernel sends it: the first decision call of a stub run of
    acausal cooperation with the original experiment's prompt (messages, instruction, allowed, schema)."""
    from simcore.cli import main as run_cli
    from simcore.runs.scenario import load_scenario
    from tests.corpus.real import capture

    with tempfile.TemporaryDirectory() as out, capture() as calls, contextlib.redirect_stdout(io.StringIO()):
        run_cli(load_scenario("acausal_cooperation"),
                ["--n-agents", "2", "--rounds", "1", "--no-embeddings", "--decision-prompt", "original",
                 "--seed", "1", "--plots", "none", "--out", out, "--json"])
    call = next(c for c in calls if c.kind == "decision")
    return {"messages": call.messages, "instruction": call.instruction, "allowed": call.allowed,
            "schema": call.schema}


def read(rec: Mapping[str, Any]) -> Reading:
    """Read a capable model's reply (its move words mapped) as the kernel reads a reply to simcore's
    decision prompt."""
    from backends.base import Message
    from scenarios.acausal_cooperation.prompts import DecisionReply

    req = decision_request()
    given = tuple(Message(m["role"], m["content"]) for m in req["messages"])
    return read_reply(rec["reply"], DecisionReply, finish_reason=rec.get("finish_reason", "stop"),
                      allowed=req["allowed"], instruction=req["instruction"], given=given)
