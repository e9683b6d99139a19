"""Capable models' replies in plain-text prisoner's-dilemma experiments, as labelled corpus data.

Public research repositories recorded the replies that capable models (gpt-3.5-turbo,
gpt-4, gemini-pro) wrote when an experiment asked them, in plain text, for a move in a
prisoner's dilemma. This script takes those replies out of the repositories' data files
(never their code), one record per reply, with where it came from (repository, path,
commit, place in the file), what the experiment asked, the experiment's own words for
the two moves and their mapping to COOPERATE and DEFECT, the reply as written, and the
reply with its move words mapped (what simcore's decision reader is served:
``benchmarks/eval_readers.py`` reads it as a reply to simcore's own decision prompt).

Each source is sampled (a fixed seed) to a few hundred replies at most, identical
replies once. Records are written to ``tests/corpus/capable/<source>.jsonl.gz`` with
``label`` and ``note`` null: two labellers label them (``benchmarks/label_replies.py``),
and which sources are held out is recorded in ``tests/corpus/real/split.json`` before any
reader runs on them. Give each repository as a clone (or a bare mirror) at its commit::

    python benchmarks/capable_replies.py \\
        --clone pcaspa/Prisoners-Dilemma-vs-LLMs=../clones/pcaspa \\
        --clone phelps-sg/llm-cooperation=../clones/phelps \\
        --clone yoshino/prisoner-s-dilemma-with-llm=../clones/yoshino

The phelps-sg source stores its transcripts as pandas pickles; they are loaded by an
unpickler that builds pandas and numpy objects only, and stands in a plain record for
each of the experiment's own classes (nothing of that project is imported or run).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import pickle
import random
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "corpus" / "capable"


@dataclass(frozen=True)
class Source:
    """One repository and the files its replies are taken from."""

    name: str
    repo: str
    commit: str
    files: tuple[tuple[str, str], ...]  # (path, model)
    moves: dict[str, str]  # the experiment's word for a move -> COOPERATE / DEFECT
    per_model: int  # replies sampled per model (all, where fewer)


SOURCES = {
    s.name: s for s in (
        Source("pcaspa", "pcaspa/Prisoners-Dilemma-vs-LLMs", "4c3ae99bd660fd19762c49709b3221a8e2d819ff",
               (("GPT3_5/llm_log.txt", "gpt-3.5-turbo-0125"), ("Gemini-Pro/llm_log.txt", "gemini-pro")),
               {"Cooperate": "COOPERATE", "Defect": "DEFECT"}, 150),
        Source("phelps", "phelps-sg/llm-cooperation", "067747c04f02d0996349534cc2c7afd02d9ec577",
               (("results/model-gpt-3.5-turbo/temp-0.2/with-chain-of-thought/dilemma.pickle", "gpt-3.5-turbo"),
                ("results/model-gpt-4/temp-0.2/dilemma.pickle", "gpt-4")),
               {"project green": "COOPERATE", "project blue": "DEFECT"}, 100),
        Source("yoshino", "yoshino/prisoner-s-dilemma-with-llm", "06b7990eca8d2adc4b9e0f5c338cade08425ea05",
               (("notes/gpt4_vs_specific_condition.ipynb", "gpt-4"),),
               {"J": "COOPERATE", "F": "DEFECT"}, 100),
    )
}

# The replies the issue that opened this corpus quotes (issue 48): always in the sample of their source.
QUOTED = ('I would choose to "Cooperate".', "I would choose 'Cooperate'.", "I am using a tit-for-tat strategy")

SEPARATOR = re.compile(r"\n-{50,}\n")
PCASPA_PROMPT = ("You are Agent B in a game of Prisoner's Dilemma.  The history of the game so far is {history}. "
                 "[...] What would you choose to do.  Respond by only using the word 'Cooperate' or 'Defect'. "
                 "[...]")


def git_show(clone: Path, commit: str, path: str) -> bytes:
    """A file of a clone (or a bare mirror) at ``commit``."""
    where = ["-C", str(clone)] if (clone / ".git").exists() else ["--git-dir", str(clone)]
    return subprocess.run(["git", *where, "show", f"{commit}:{path}"], check=True, capture_output=True).stdout


def map_moves(text: str, moves: dict[str, str]) -> str:
    """``text`` with the experiment's move words as COOPERATE and DEFECT (whole words; single-letter
    moves only as a capital standing alone, quoted, or after "Option")."""
    for word, move in moves.items():
        if word.lower() == move.lower():
            continue  # the experiment's own word is simcore's: the reply is served as written
        if len(word) == 1:
            text = re.sub(rf"(?<![\w'-])(?:Option |option )?{word}(?![\w'-])", move, text)
        else:
            text = re.sub(rf"(?<![\w-]){re.escape(word)}(?![\w-])", move, text, flags=re.IGNORECASE)
    return text


# -- pcaspa: log blocks (the prompt or its history, the reply, the experiment's own reading) -------

def pcaspa_replies(data: bytes, model: str) -> Iterator[dict[str, Any]]:
    text = data.decode("utf-8").replace("\r\n", "\n")
    for n, block in enumerate(SEPARATOR.split(text)):
        lines = block.strip("\n").split("\n")
        if len(lines) < 3 or not (lines[0].startswith("You are Agent B") or lines[0].startswith("[")):
            continue  # a strategy's name between runs, or the end of the file
        head, reply, theirs = lines[0], "\n".join(lines[1:-1]).strip(), lines[-1].strip()
        asked = head if head.startswith("You are") else PCASPA_PROMPT.format(history=head)
        yield {"locator": f"block {n} (separated by dashed lines)", "asked": asked, "reply": reply,
               "source_reading": theirs}


# -- phelps: pandas pickles of transcripts (user, assistant, user, ...) -----------------------------

class _Stand:
    """A plain record standing in for one of the source experiment's own classes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args

    def __setstate__(self, state: Any) -> None:
        self.state = state


_STANDS: dict[tuple[str, str], type] = {}
_SAFE_BUILTINS = frozenset(("list", "dict", "tuple", "set", "frozenset", "int", "float", "str", "bool", "complex",
                            "slice", "bytearray", "object"))


class _DataOnly(pickle.Unpickler):
    """Builds pandas and numpy objects only; the experiment's classes get a stand-in."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins":
            if name in _SAFE_BUILTINS:
                return super().find_class(module, name)
        elif module.split(".")[0] in ("pandas", "numpy", "copyreg", "collections", "datetime", "enum"):
            return super().find_class(module, name)
        elif module.split(".")[0] in ("llm_cooperation", "openai_pygenerator"):
            key = (module, name)
            if key not in _STANDS:
                _STANDS[key] = type(name, (_Stand,), {"__module__": module})
            return _STANDS[key]
        raise pickle.UnpicklingError(f"refused to build {module}.{name}")


def phelps_replies(data: bytes, model: str) -> Iterator[dict[str, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = _DataOnly(io.BytesIO(data)).load()
    for row, transcript in enumerate(frame["Transcript"]):
        opening = transcript[0]
        for turn in range(1, len(transcript), 2):
            asked = opening if turn == 1 else f"{opening}\n[... earlier rounds ...]\n{transcript[turn - 1]}"
            yield {"locator": f"row {row}, transcript item {turn}", "asked": asked, "reply": transcript[turn],
                   "source_reading": None, "condition": f"{frame['Group'][row]}; {frame['Condition'][row]}"}


# -- yoshino: a notebook's printed outputs ("retry.......(<reply>)": replies that were not one letter) ----

_RETRY = re.compile(r"retry\.{7}\((.*?)\)\n(?=Player|retry|Round|\Z)", re.DOTALL)
YOSHINO_PROMPT = ("You are playing a game repeatedly with another player. In this game, you can choose between "
                  "Option J and Option F. You will play 10 rounds in total with the same player. [the rules, and "
                  "the earlier rounds' results] You are currently playing round {round}. Q: Which Option do you "
                  "choose, Option J or Option F? You must response with either \"J\" or \"F\", one word.")


def yoshino_replies(data: bytes, model: str) -> Iterator[dict[str, Any]]:
    notebook = json.loads(data)
    for c, cell in enumerate(notebook["cells"]):
        for o, output in enumerate(cell.get("outputs", [])):
            text = "".join(output.get("text", []))
            for m in _RETRY.finditer(text):
                rounds = re.findall(r"Round (\d+)", text[: m.start()])
                yield {"locator": f"cell {c}, output {o}, offset {m.start()}",
                       "asked": YOSHINO_PROMPT.format(round=rounds[-1] if rounds else "?"),
                       "reply": m.group(1), "source_reading": None}


READERS: dict[str, Callable[[bytes, str], Iterator[dict[str, Any]]]] = {
    "pcaspa": pcaspa_replies, "phelps": phelps_replies, "yoshino": yoshino_replies,
}


def extract(source: Source, clone: Path, seed: int = 48) -> list[dict[str, Any]]:
    """The source's sampled replies as corpus records (label and note null)."""
    out: list[dict[str, Any]] = []
    for path, model in source.files:
        seen: dict[str, dict[str, Any]] = {}
        for found in READERS[source.name](git_show(clone, source.commit, path), model):
            if found["reply"].strip() and found["reply"] not in seen:
                seen[found["reply"]] = {**found, "path": path}
        unique = list(seen.values())
        quoted = [r for r in unique if any(q in r["reply"] for q in QUOTED)]
        rest = [r for r in unique if r not in quoted]
        rng = random.Random(f"{seed}:{source.name}:{path}")
        picked = quoted + rng.sample(rest, min(len(rest), source.per_model - len(quoted)))
        picked.sort(key=lambda r: unique.index(r))
        for r in picked:
            out.append({
                "id": f"{source.name}-{len(out):04d}", "source": source.name, "repo": source.repo,
                "commit": source.commit, "path": r["path"], "locator": r["locator"], "model": model,
                "kind": "decision", "asked": r["asked"], "moves": source.moves,
                "reply_original": r["reply"], "reply": map_moves(r["reply"], source.moves),
                "finish_reason": "stop", "source_reading": r.get("source_reading"),
                "condition": r.get("condition"), "label": None, "note": None,
            })
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--clone", action="append", default=[], metavar="REPO=PATH",
                   help="a clone or bare mirror of a source repository (owner/name=path)")
    p.add_argument("--out", type=Path, default=OUT, help=f"folder to write to (default: {OUT.relative_to(ROOT)})")
    args = p.parse_args(argv)
    by_repo = {s.repo: s for s in SOURCES.values()}
    clones = {}
    for item in args.clone:
        repo, sep, path = item.partition("=")
        if not sep or repo not in by_repo:
            p.error(f"--clone: give REPO=PATH with REPO one of {', '.join(by_repo)}; got {item!r}")
        clones[repo] = Path(path)
    if not clones:
        p.error("--clone: give at least one source repository")
    args.out.mkdir(parents=True, exist_ok=True)
    for repo, clone in clones.items():
        source = by_repo[repo]
        records = extract(source, clone)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        (args.out / f"{source.name}.jsonl.gz").write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        print(f"{source.name}: {len(records)} replies", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
