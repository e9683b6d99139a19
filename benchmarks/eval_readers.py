"""Score the reply readers on the labelled real-reply corpora, as a classifier is scored.

Two corpora, read as the pipeline reads them: the small local models' replies
(``tests/corpus/real/``, source "local"), each with the request it answered and, for a
re-ask, the reply it re-asks and the follow-up; and capable models' replies from public
research repositories (``tests/corpus/capable/``, one source per repository), each served
to simcore's own decision prompt. Both are split in ``tests/corpus/real/split.json``:
**development** replies, which reading rules may be changed against, and **held-out**
replies (local: by model and seed; capable: by source), labelled by hand before any reader
ran on them, which only measure. For each part, per source, model, reply kind and reply
(first replies and re-ask replies apart), this prints and writes: replies, labelled
readable (the label gives one value for every required field), read, misread (any
labelled field given a value its label does not allow), precision (read replies with no
misread), readable but flagged, and recall (labelled-readable replies read right).
Capable replies not labelled yet are left out.

Writes ``benchmarks/results/reader_eval.json`` and the two tables of
``docs/real-models.md`` (between its ``reader-eval`` markers)::

    python benchmarks/eval_readers.py            # print, write the JSON and the docs tables
    python benchmarks/eval_readers.py --check    # exit 1 if the docs tables are not what the readers give now
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.corpus import capable, real  # noqa: E402

DOCS = ROOT / "docs" / "real-models.md"
RESULTS = ROOT / "benchmarks" / "results" / "reader_eval.json"
SECTION = re.compile(r"(<!-- reader-eval:(?P<split>\w+):begin -->\n).*?(\n<!-- reader-eval:(?P=split):end -->)", re.S)


def tables() -> tuple[dict[str, str], dict[str, object]]:
    """The Markdown table of each split, and the JSON record of every row."""
    rows = real.evaluate([*real.load(), *capable.load()])
    md = {split: real.format_evaluation(rows, split) for split in ("development", "heldout")}
    data = {
        "columns": list(real.EVAL_COLUMNS),
        "rows": [dict(zip(real.KEY, k), **row) for k, row in sorted(rows.items())],
        "totals": [dict(zip(("split", "source", "model", "reply"), k), **row)
                   for k, row in sorted(real.totals(rows, ("split", "source", "model", "reply")).items())],
    }
    return md, data


def with_tables(doc: str, md: dict[str, str]) -> str:
    """``doc`` with each split's table put between its markers."""
    found = {m.group("split") for m in SECTION.finditer(doc)}
    missing = set(md) - found
    if missing:
        raise SystemExit(f"{DOCS}: no reader-eval markers for {', '.join(sorted(missing))}")
    return SECTION.sub(lambda m: m.group(1) + md[m.group("split")] + m.group(3), doc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if docs/real-models.md is stale")
    args = p.parse_args(argv)
    md, data = tables()
    doc = DOCS.read_text(encoding="utf-8")
    new = with_tables(doc, md)
    for split, table in md.items():
        print(f"## {split}\n\n{table}\n")
    if args.check:
        if new != doc:
            print(f"{DOCS} is stale: run python benchmarks/eval_readers.py", file=sys.stderr)
            return 1
        return 0
    DOCS.write_text(new, encoding="utf-8")
    RESULTS.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {DOCS.relative_to(ROOT)} and {RESULTS.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
