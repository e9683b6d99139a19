"""Parse quality on real models, with misreads measured against hand labels.

``collect`` runs every scenario (small worlds, the default token budgets, seed 1, no
re-asks) on local models behind llama.cpp, JSON mode on and off, and keeps every reply
to a schema with everything the model was given (its messages), the call's allowed
choices and its ``finish_reason``, one JSON object a line, in
``tests/corpus/real/rerun_<model>_<on|off>.jsonl``. Each record's ``label`` starts
as null: a person then reads the reply and writes down what it commits to (see
``tests/corpus/real/rerun.md``).

``report`` reads every labelled record with the readers as they are now (the request
it answered, as the kernel passes it) and writes the table in docs/real-models.md: per
model, JSON mode and reply kind, how the replies were read, and how many readings
disagree with the labels (misread) or leave out a field the reply committed to
(flagged readable). ``--reader-from REV`` reads them with the readers of a git
revision instead (for a before/after comparison).

Slow to collect (minutes per model and JSON mode on two cores); ``report`` takes
seconds::

    python benchmarks/real_replies.py collect --models gemma,smollm2,qwen
    python benchmarks/real_replies.py report
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.corpus.rerun import CORPUS, compare, fixed_fields, label_fields, load, read  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "real_replies.json"
# Small worlds that keep each scenario's default token budgets.
CONFIGS: dict[str, dict[str, Any]] = {
    "acausal_cooperation": {"n_agents": 3, "rounds": 1, "embeddings": False},
    "context_corrosion": {"rounds": 1, "n_peers": 2, "metrics": False},
    "llm_auction": {"n_agents": 5, "n_vignettes": 1},
    "veil_of_ignorance": {"n_agents": 2, "max_rounds": 1},
}
JSON_MODES = {"on": "auto", "off": "off"}


def _capture(records: list[dict[str, Any]], model: str, mode: str, scenario: str) -> Any:
    """An intervention that keeps every reply to a schema with its request, changing nothing."""
    from simcore.kernel import Intervention
    from simcore.schema import reply_kind

    class Capture(Intervention):
        def response(self, call: Any, response: Any) -> Any:
            if call.schema is not None and hasattr(response, "text"):
                records.append({
                    "model": model, "json_mode": mode, "scenario": scenario, "kind": reply_kind(call.schema),
                    "phase": call.fields.get("phase", ""),
                    "schema": f"{call.schema.__module__}:{call.schema.__qualname__}",
                    "messages": [{"role": m.role, "content": m.content} for m in call.request.messages],
                    "instruction": call.instruction,
                    "allowed": {k: (dict(v) if hasattr(v, "items") else list(v)) for k, v in (call.allowed or {}).items()}
                    or None,
                    "reply": response.text, "finish_reason": response.finish_reason,
                    "label": None, "labelled": False, "note": "",
                })
            return response

    return Capture()


async def _collect_one(model: str, url: str, mode: str, name: str, seed: int) -> list[dict[str, Any]]:
    from backends.registry import BackendSpec
    from simcore.runner import run_trial_async
    from simcore.scenario import load_scenario

    scenario = load_scenario(name)
    config = scenario.config_type.from_mapping(CONFIGS[name])
    spec = BackendSpec("llamacpp", model, base_url=url,
                       options={"json_mode": JSON_MODES[mode], "timeout_s": 900, "reask": 0})
    records: list[dict[str, Any]] = []
    trial = await run_trial_async(scenario, config, seed, spec, intervention=_capture(records, model, mode, name),
                                  analyze=False)
    if trial.status != "ok":
        raise RuntimeError(f"{model} {mode} {name}: {trial.error}")
    return records


def collect(models: list[str], modes: list[str], scenarios: list[str], seed: int) -> None:
    from backends.llamacpp import llama_server, model_path

    CORPUS.mkdir(parents=True, exist_ok=True)
    logs = ROOT / "runs" / "real_replies"
    logs.mkdir(parents=True, exist_ok=True)
    for model in models:
        with llama_server(model_path(model), n_ctx=8192, log=logs / f"{model}.server.log") as url:
            for mode in modes:
                path = CORPUS / f"rerun_{model}_{mode}.jsonl"
                for name in scenarios:  # appended scenario by scenario, to the replies kept before
                    kept = load([path]) if path.exists() else []
                    if any(r["scenario"] == name for r in kept):
                        continue
                    start = time.perf_counter()
                    got = asyncio.run(_collect_one(model, url, mode, name, seed))
                    for i, r in enumerate(got, len(kept) + 1):
                        r["id"] = f"{model}-{mode}-{i:03d}"
                    with path.open("a") as f:
                        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in got))
                    print(f"{model} json={mode} {name}: {len(got)} replies in {time.perf_counter() - start:.0f} s",
                          flush=True)


# -- reading against the labels ---------------------------------------------------

def _reader_at(rev: str) -> Any:
    """``read_reply`` of the readers at git revision ``rev`` (reading, prose, schema and what they import)."""
    tmp = Path(tempfile.mkdtemp(prefix="readers-"))
    (tmp / "simcore").mkdir()
    (tmp / "simcore" / "__init__.py").write_text("")
    for name in ("reading", "prose", "schema", "echo"):
        out = subprocess.run(["git", "show", f"{rev}:simcore/{name}.py"], cwd=ROOT, capture_output=True, text=True)
        if out.returncode == 0:
            (tmp / "simcore" / f"{name}.py").write_text(out.stdout)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]); "
            "import simcore.reading as r; print(r.__file__)")
    assert subprocess.run([sys.executable, "-c", code, str(tmp), str(ROOT)], capture_output=True).returncode == 0
    return tmp


def table(records: list[dict[str, Any]], reader_dir: Path | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows per (model, JSON mode, reply kind) and the list of misreads."""
    if reader_dir is not None:  # the readers of another revision, in a process of their own
        out = subprocess.run([sys.executable, __file__, "_readings", str(reader_dir)], input=json.dumps(records),
                             capture_output=True, text=True, cwd=ROOT, check=True)
        readings = json.loads(out.stdout)
    else:
        readings = [_summary(r, read(r)) for r in records]
    rows: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    misreads = []
    for r, got in zip(records, readings):
        c = rows[(r["model"], r["json_mode"], r["kind"])]
        c["replies"] += 1
        c[got["how"]] += 1
        c["echo"] += got["echo"]
        c["partial"] += got["partial"]
        c["truncated"] += r["finish_reason"] == "length"
        c["labelled_readable"] += bool(label_fields(r))
        c["fixed"] += bool(fixed_fields(r))  # a kind of free text only has no label to judge by
        diff = compare(r, got["fields"])
        c["misread"] += bool(diff["misread"])
        c["flagged_readable"] += bool(diff["left_out"]) and not diff["misread"]
        if diff["misread"]:
            misreads.append(f"{r['id']} ({r['kind']}): {'; '.join(diff['misread'])}")
    out_rows = [{"model": m, "json_mode": j, "kind": k, **dict(c)} for (m, j, k), c in sorted(rows.items())]
    return out_rows, misreads


def _summary(record: dict[str, Any], reading: Any) -> dict[str, Any]:
    fields = dict(getattr(reading, "partial", ()) or ())  # (readers before issue 33 keep no fields)
    if reading.value is not None:
        fields = {k: getattr(reading.value, k) for k in reading.value.__dataclass_fields__}
    return {"how": reading.how, "echo": bool(getattr(reading, "echo", False)),
            "partial": bool(getattr(reading, "kept_some", False)), "fields": fields}


COLUMNS = ("replies", "json", "label", "prose", "unreadable", "echo", "partial", "truncated", "labelled_readable",
           "flagged_readable", "misread")


def markdown(rows: list[dict[str, Any]]) -> str:
    before = any("misread_before" in r for r in rows)
    columns = COLUMNS + (("misread_before",) if before else ())
    head = ("| model | JSON mode | reply kind | replies | JSON | label | prose | unreadable | of them echoes | "
            "of them partial | cut at max_tokens | commit to an answer (labels) | flagged readable | misread |"
            + (" misread before |" if before else ""))
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    judged = columns[columns.index("labelled_readable"):]
    for r in rows:
        cells = [str(r.get(k, 0)) if r.get("fixed") or k not in judged else "n/a" for k in columns]
        lines.append(f"| {r['model']} | {r['json_mode']} | {r['kind']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary(rows: list[dict[str, Any]]) -> str:
    """Markdown: the rows added up per model and JSON mode (the judged columns over kinds with labels)."""
    acc: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in rows:
        c = acc[(r["model"], r["json_mode"])]
        for k in ("replies", "json", "label", "prose", "unreadable", "echo", "partial", "truncated"):
            c[k] += r.get(k, 0)
        if r.get("fixed"):
            for k in ("replies", "labelled_readable", "flagged_readable", "misread", "misread_before"):
                c["judged_" + k] += r.get(k, 0)
    before = any("misread_before" in r for r in rows)
    head = ("| model | JSON mode | replies | JSON / label / prose | unreadable (echoes, partial) | cut at max_tokens | "
            "with a fixed-answer field | commit to an answer (labels) | flagged readable | misread |"
            + (" misread before |" if before else ""))
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for (model, mode), c in sorted(acc.items()):
        lines.append(
            f"| {model} | {mode} | {c['replies']} | {c['json']} / {c['label']} / {c['prose']} | {c['unreadable']} "
            f"({c['echo']}, {c['partial']}) | {c['truncated']} | {c['judged_replies']} | {c['judged_labelled_readable']} | "
            f"{c['judged_flagged_readable']} | {c['judged_misread']} |" + (f" {c['judged_misread_before']} |" if before else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="run the models and keep their replies (labels left null)")
    c.add_argument("--models", default="gemma,smollm2,qwen")
    c.add_argument("--json-modes", default="on,off")
    c.add_argument("--scenarios", default=",".join(CONFIGS))
    c.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("report", help="read the labelled replies and write the table")
    r.add_argument("--reader-from", metavar="REV", help="read with the readers of this git revision")
    r.add_argument("--before", metavar="REV", help="also count the misreads of the readers of this git revision")
    r.add_argument("--out", default=str(OUT))
    sub.add_parser("_readings").add_argument("reader_dir")
    args = p.parse_args(argv)
    if args.command == "collect":
        collect(args.models.split(","), args.json_modes.split(","), args.scenarios.split(","), args.seed)
        return 0
    if args.command == "_readings":  # internal: readings by the readers in reader_dir, as JSON on stdout
        sys.path.insert(0, args.reader_dir)
        for name in [m for m in sys.modules if m == "simcore" or m.startswith("simcore.")]:
            del sys.modules[name]
        from simcore.reading import read_reply

        records = json.loads(sys.stdin.read())
        print(json.dumps([_summary(rec, read(rec, read_reply)) for rec in records], default=str))
        return 0
    everything = load()
    records = [rec for rec in everything if rec.get("labelled")]
    unlabelled = len(everything) - len(records)
    reader = _reader_at(args.reader_from) if args.reader_from else None
    rows, misreads = table(records, reader)
    result = {"written": time.strftime("%Y-%m-%d"), "reader": args.reader_from or "working tree",
              "configs": CONFIGS, "unlabelled": unlabelled, "rows": rows, "misreads": misreads}
    if args.before:
        old_rows, old_misreads = table(records, _reader_at(args.before))
        for row, old in zip(rows, old_rows):
            row["misread_before"] = old.get("misread", 0)
        result.update(before=args.before, misreads_before=old_misreads)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    Path(args.out).with_suffix(".md").write_text(summary(rows) + "\n" + markdown(rows))
    print(summary(rows) + "\n" + markdown(rows))
    print(f"{sum(r['replies'] for r in rows)} labelled replies ({unlabelled} unlabelled left out); "
          f"{len(misreads)} misread")
    for m in misreads:
        print("  MISREAD", m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
