"""Label collected real replies by hand, and add them to the corpus (no reader runs here).

The steps, for replies that ``benchmarks/collect_real_replies.py`` wrote (see
``tests/corpus/LABELLING.md`` for the standard and ``tests/corpus/README.md`` for the
development/held-out split)::

    # 1. a task file per labeller: each reply with what the model was given, ids PREFIX-0000 ...
    python benchmarks/label_replies.py tasks runs/real_replies/qwen-json_off.jsonl qwen-4 --out tasks/qwen.jsonl
    # 2. two labellers write labels/qwen.A.jsonl and labels/qwen.B.jsonl ({"id", "label", "note"} lines)
    # 3. where they differ: list, then settle each in a file of {"id", "label", "why"} lines
    python benchmarks/label_replies.py differ labels/qwen.A.jsonl labels/qwen.B.jsonl
    # 4. the labelled records, as a corpus file
    python benchmarks/label_replies.py corpus runs/real_replies/qwen-json_off.jsonl qwen-4 \\
        labels/qwen.A.jsonl labels/qwen.B.jsonl --settled labels/qwen.settled.jsonl \\
        --out tests/corpus/real/qwen-json_off-4.jsonl.gz

Nothing here imports a reader: labels are written without knowing what a reader makes
of a reply.
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
    with open(src, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def task(rec: dict[str, Any], rid: str) -> dict[str, Any]:
    """What a labeller sees of one record."""
    msgs = rec["messages"]
    reask = len(msgs) >= 3 and msgs[-2]["role"] == "assistant"
    prompt = msgs[-3]["content"] + "\n\n[follow-up message:]\n" + msgs[-1]["content"] if reask else msgs[-1]["content"]
    return {
        "id": rid, "kind": rec["kind"], "fields": fields_of(rec), "cut": rec["finish_reason"] == "length",
        "reask": reask, "previous_reply": clip(msgs[-2]["content"], 1500) if reask else None,
        "system": clip(msgs[0]["content"]) if msgs[0]["role"] == "system" else None,
        "prompt": clip(prompt), "reply": rec["reply"],
    }


def load_labels(path: Path) -> dict[str, dict[str, Any]]:
    return {d["id"]: d for d in records(path)}


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


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
            out[rid] = (fixed[rid]["label"], f"labellers {how} (A: {json.dumps(x['label'])}, {x.get('note')}; "
                                             f"B: {json.dumps(y['label'])}, {y.get('note')}); settled: {fixed[rid]['why']}")
        elif same(x["label"], y["label"]):
            out[rid] = (x["label"], x.get("note") or y.get("note"))
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
    t.add_argument("prefix")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--start", type=int, default=0)
    t.add_argument("--stop", type=int)
    d = sub.add_parser("differ", help="list the ids two labellers labelled differently")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    c = sub.add_parser("corpus", help="write the labelled records as a corpus file")
    c.add_argument("src", type=Path)
    c.add_argument("prefix")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path, nargs="?", help="a second labeller's file (held-out replies have two)")
    c.add_argument("--settled", type=Path, help="settled labels, {id, label, why} lines: where the two differ, or overruling both")
    c.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.step == "tasks":
        with open(args.out, "w", encoding="utf-8") as g:
            for n, rec in enumerate(records(args.src)):
                if n >= args.start and (args.stop is None or n < args.stop):
                    g.write(json.dumps(task(rec, f"{args.prefix}-{n:04d}"), ensure_ascii=False) + "\n")
    elif args.step == "differ":
        la, lb = load_labels(args.a), load_labels(args.b)
        differ = [rid for rid in la if not same(la[rid]["label"], lb[rid]["label"])]
        print(f"{len(la)} labelled, {len(la) - len(differ)} alike, {len(differ)} differ")
        for rid in differ:
            print(json.dumps({"id": rid, "a": la[rid], "b": lb[rid]}, ensure_ascii=False))
    else:
        labels = (settle(args.a, args.b, args.settled) if args.b
                  else {rid: (d["label"], d.get("note")) for rid, d in load_labels(args.a).items()})
        lines, seen = [], {}
        for n, rec in enumerate(records(args.src)):
            rid = f"{args.prefix}-{n:04d}"
            if rid not in labels:
                continue
            rec["id"] = rid
            rec["label"], rec["note"] = canonical(rec, labels[rid][0]), labels[rid][1]
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
