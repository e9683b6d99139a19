"""Label collected real replies by hand, and add them to the corpus (no reader runs here).

The steps, for replies that ``benchmarks/collect_real_replies.py`` wrote, or for capable
models' replies that ``benchmarks/capable_replies.py`` took from public repositories (see
``tests/corpus/LABELLING.md`` for the standard and ``tests/corpus/README.md`` for the
development/held-out split)::

    # 1. a task file per labeller: each reply with what the model was asked (and, for a re-ask, the reply
    #    it re-asks and the follow-up), ids PREFIX-0000 ... (a capable source's records keep their ids)
    python benchmarks/label_replies.py tasks runs/real_replies/qwen-json_off.jsonl qwen-4 --out tasks/qwen.jsonl
    python benchmarks/label_replies.py tasks tests/corpus/capable/phelps.jsonl.gz --out tasks/phelps.jsonl
    # 2. two labellers write labels/qwen.A.jsonl and labels/qwen.B.jsonl ({"id", "label", "note"} lines)
    # 3. where they differ: list, then settle each in a file of {"id", "label", "why"} lines
    python benchmarks/label_replies.py differ labels/qwen.A.jsonl labels/qwen.B.jsonl
    # 4. the labelled records, as a corpus file (a capable source's file is written again, labelled)
    python benchmarks/label_replies.py corpus runs/real_replies/qwen-json_off.jsonl qwen-4 \\
        labels/qwen.A.jsonl labels/qwen.B.jsonl --settled labels/qwen.settled.jsonl \\
        --out tests/corpus/real/qwen-json_off-4.jsonl.gz

Labels may be given as ``{"action": ...}`` or, for a reply kind with one field, as the value
alone (``"DEFECT"``, ``null``). Inputs may be gzip-compressed (``.gz``). Nothing here imports
a reader: labels are written without knowing what a reader makes of a reply.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcore.replies.schema import Option  # noqa: E402
from tests.corpus.real import LABELLED, key, plan_of  # noqa: E402

SCALE = "1-4: strongly disagree=1, disagree=2, agree=3, strongly agree=4"


def clip(text: str, n: int = 3000) -> str:
    """``text``, shortened in the middle to about ``n`` characters."""
    return text if len(text) <= n else text[: n // 3] + "\n[...]\n" + text[-2 * n // 3:]


def fields_of(rec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The fields a labeller labels for a record, each with what it may hold."""
    allowed = rec.get("allowed") or {}
    out = {}
    for name in LABELLED[rec["kind"]]:
        if name in allowed:
            what: Any = allowed[name]
        elif name == "action":
            what = ["COOPERATE", "DEFECT"]
        elif name in ("maximize_minimum", "maximize_average", "floor_constraint", "range_constraint"):
            what = SCALE
        elif "confidence" in name:
            what = "a number in [0, 1]"
        elif name in ("critique", "changed_position"):
            what = "true or false"
        elif name == "constraint_amount":
            what = "whole dollars per year (principles 3 and 4 only)"
        elif name == "principle":
            what = ["1", "2", "3", "4"]
        else:
            what = 'text: "*" or null'
        out[name] = {"allowed": what}
    return out


def records(src: Path) -> Iterator[dict[str, Any]]:
    data = src.read_bytes()
    text = (gzip.decompress(data) if src.suffix == ".gz" else data).decode("utf-8")
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def task(rec: dict[str, Any], rid: str) -> dict[str, Any]:
    """What a labeller sees of one record: the request the reply answers (``asked``; a re-ask's reply
    answers the ``follow_up`` sent after its ``previous_reply``), whether it was cut, and the reply."""
    if "source" in rec:  # a capable model's reply, in its own experiment's words
        return {
            "id": rid, "kind": rec["kind"], "model": rec["model"],
            "fields": {"action": {"allowed": ["COOPERATE", "DEFECT"], "moves": rec["moves"]}},
            "cut": rec["finish_reason"] == "length", "reask": False, "system": None,
            "asked": clip(rec["asked"]), "previous_reply": None, "follow_up": None, "reply": rec["reply_original"],
        }
    msgs = rec["messages"]
    reask = len(msgs) >= 3 and msgs[-2]["role"] == "assistant"
    asked = msgs[-3]["content"] if reask else msgs[-1]["content"]
    return {
        "id": rid, "kind": rec["kind"], "model": rec["model"], "fields": fields_of(rec),
        "cut": rec["finish_reason"] == "length", "reask": reask,
        "system": clip(msgs[0]["content"]) if msgs[0]["role"] == "system" else None,
        "asked": clip(asked), "previous_reply": clip(msgs[-2]["content"], 1500) if reask else None,
        "follow_up": msgs[-1]["content"] if reask else None, "reply": rec["reply"],
    }


def rid_of(rec: dict[str, Any], prefix: str | None, n: int) -> str:
    """A record's id: its own (a capable source's), else ``PREFIX-nnnn`` by its place in the file."""
    if rec.get("id") and "source" in rec:
        return rec["id"]
    if prefix is None:
        raise SystemExit("give a PREFIX for the ids of a collection's records")
    return f"{prefix}-{n:04d}"


def load_labels(path: Path) -> dict[str, dict[str, Any]]:
    return {d["id"]: d for d in records(path)}


def as_fields(rec: dict[str, Any], label: Any) -> dict[str, Any]:
    """A label as the corpus keeps it, per field: a bare value (or null) labels the one field of its kind."""
    names = LABELLED[rec["kind"]]
    if isinstance(label, dict) and set(label) <= set(names) and "ambiguous" not in label:
        return label
    if len(names) == 1:
        return {names[0]: label}
    raise SystemExit(f"{rec.get('id')}: label {label!r} does not name the fields {', '.join(names)}")


def same(a: Any, b: Any) -> bool:
    """Whether two labels say the same (``"DEFECT"`` and ``{"action": "DEFECT"}`` do)."""
    return json.dumps(_bare(a), sort_keys=True) == json.dumps(_bare(b), sort_keys=True)


def _bare(label: Any) -> Any:
    if isinstance(label, dict) and len(label) == 1 and "ambiguous" not in label:
        return next(iter(label.values()))
    return label


def note_of(line: dict[str, Any]) -> Any:
    """A labeller's note on a label (``note``, or ``reason``)."""
    return line.get("note") or line.get("reason")


def canonical(rec: dict[str, Any], label: dict[str, Any]) -> dict[str, Any]:
    """``label`` with option keys as the text the reader gives them (a labeller's 3 is "3")."""
    options = {f.name for f in plan_of(rec) if isinstance(f.kind, Option)}

    def fix(v: Any) -> Any:
        if isinstance(v, dict) and "ambiguous" in v:
            return {"ambiguous": [fix(c) for c in v["ambiguous"]]}
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    return {name: fix(v) if name in options else v for name, v in label.items()}


def settle(a: Path, b: Path, settled: Path | None) -> dict[str, tuple[Any, str]]:
    """Every id's label and note: the two labellers' where they agree, the settled one where they
    differ, or where a settled line overrules both (a change of the standard, with its reason)."""
    la, lb = load_labels(a), load_labels(b)
    fixed = load_labels(settled) if settled else {}
    out = {}
    for rid, x in la.items():
        y = lb[rid]
        if rid in fixed:
            how = "differed" if not same(x["label"], y["label"]) else "agreed"
            out[rid] = (fixed[rid]["label"], (f"labellers {how} (A: {json.dumps(x['label'])}, {note_of(x)}; "
                                              f"B: {json.dumps(y['label'])}, {note_of(y)}); settled: {fixed[rid]['why']}"))
        elif same(x["label"], y["label"]):
            out[rid] = (x["label"], note_of(x) or note_of(y))
        else:
            raise SystemExit(f"{rid}: the labellers differ and no settled label is given")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    sub = p.add_subparsers(dest="step", required=True)
    t = sub.add_parser("tasks", help="write a labelling task file")
    t.add_argument("src", type=Path)
    t.add_argument("prefix", nargs="?", help="ids PREFIX-0000 ... (not for a capable source: its records have ids)")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--start", type=int, default=0)
    t.add_argument("--stop", type=int)
    d = sub.add_parser("differ", help="list the ids two labellers labelled differently")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    c = sub.add_parser("corpus", help="write the labelled records as a corpus file")
    c.add_argument("src", type=Path)
    c.add_argument("prefix", help="the ids' prefix as in tasks ('-' for a capable source)")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path, nargs="?", help="a second labeller's file (held-out replies have two)")
    c.add_argument("--settled", type=Path, help="settled labels, {id, label, why} lines: where the two differ, or overruling both")
    c.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.step == "tasks":
        with open(args.out, "w", encoding="utf-8") as g:
            for n, rec in enumerate(records(args.src)):
                if n >= args.start and (args.stop is None or n < args.stop):
                    g.write(json.dumps(task(rec, rid_of(rec, args.prefix, n)), ensure_ascii=False) + "\n")
    elif args.step == "differ":
        la, lb = load_labels(args.a), load_labels(args.b)
        differ = [rid for rid in la if not same(la[rid]["label"], lb[rid]["label"])]
        print(f"{len(la)} labelled, {len(la) - len(differ)} alike, {len(differ)} differ")
        for rid in differ:
            print(json.dumps({"id": rid, "a": la[rid], "b": lb[rid]}, ensure_ascii=False))
    else:
        labels = (settle(args.a, args.b, args.settled) if args.b
                  else {rid: (d["label"], note_of(d)) for rid, d in load_labels(args.a).items()})
        lines, seen = [], {}
        prefix = None if args.prefix == "-" else args.prefix
        for n, rec in enumerate(records(args.src)):
            rid = rid_of(rec, prefix, n)
            if rid not in labels:
                if "source" in rec:  # a capable source's file is written whole: a record unlabelled stays so
                    lines.append(json.dumps(rec, ensure_ascii=False))
                continue
            rec["id"] = rid
            label = as_fields(rec, labels[rid][0])
            rec["label"], rec["note"] = (canonical(rec, label) if "messages" in rec else label), labels[rid][1]
            if "source" in rec:
                lines.append(json.dumps(rec, ensure_ascii=False))
                continue
            # Two agents asked alike answer alike (identical copies): one record per request and reply.
            k = key(rec["messages"], rec["reply"])
            if k in seen:
                if not same(seen[k]["label"], rec["label"]):
                    raise SystemExit(f"{rid}: the same reply to the same request as {seen[k]['id']}, labelled otherwise")
                continue
            seen[k] = rec
            lines.append(json.dumps(rec, ensure_ascii=False))
        args.out.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))
        print(f"{args.out}: {len(lines)} records ({n + 1 - len(lines)} unlabelled or alike left out)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
