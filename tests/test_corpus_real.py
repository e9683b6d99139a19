"""The labelled corpus of real replies (tests/corpus/real, issue 33): no reply may be misread.

Every reply is read with the request it answered, through the kernel's one reading
entry point (:func:`simcore.replies.reading.read_reply`, with the call's ``allowed`` and
instruction), and each labelled field is compared with the label a person wrote
by reading the reply. A misread (a value the label does not allow) fails; a flag
where the label has a value is a lost reading, counted and printed but allowed.

``python -m tests.corpus.real`` prints the counts per model, JSON mode and kind.
"""

from __future__ import annotations

from simcore.replies.schema import plan
from tests.corpus import real

RECORDS = real.load()
KEYS = ("model", "json_mode", "scenario", "seed", "kind", "schema", "messages", "allowed", "instruction",
        "max_tokens", "reply", "finish_reason", "label", "note")


def test_the_corpus_is_there_and_every_record_is_complete_and_labelled():
    assert len(RECORDS) >= 200
    assert {r["model"] for r in RECORDS} == {"smollm2", "gemma", "qwen"}
    assert {r["json_mode"] for r in RECORDS} == {"on", "off"}
    assert {r["scenario"] for r in RECORDS} == {"acausal_cooperation", "veil_of_ignorance", "llm_auction",
                                                "context_corrosion"}
    for r in RECORDS:
        where = r["where"]
        assert set(KEYS) <= set(r), where
        assert r["finish_reason"] in ("stop", "length"), where
        assert [m["role"] for m in r["messages"]][-1] == "user", where
        schema = real.schema_of(r)
        assert set(r["label"]) == set(real.LABELLED[r["kind"]]), where
        fields = {f.name: f for f in plan(schema)}
        for name, want in r["label"].items():
            assert name in fields, where
            candidates = want["ambiguous"] if isinstance(want, dict) else [want]
            assert isinstance(candidates, list) and candidates, where
            for c in candidates:
                assert c is None or real.valid(fields[name], c, r["allowed"]), (where, name, c)


def test_keys_find_each_record():
    by_key = real.labels_by_key()
    assert len(by_key) == len(RECORDS)  # no reply to the same messages twice
    for r in RECORDS:
        assert by_key[real.key(r["messages"], r["reply"])]["where"] == r["where"]


def test_compare_counts_misreads_and_lost_readings():
    label = {"action": "DEFECT", "option": None, "rating": {"ambiguous": [2, 3]}, "text": real.ANY_TEXT}
    assert real.compare(label, {"action": "DEFECT", "option": None, "rating": 3, "text": "Cooperate first."}) == {
        "action": "right", "option": "right", "rating": "right", "text": "right"}
    assert real.compare(label, {"action": "COOPERATE", "option": "A", "rating": 4, "text": None}) == {
        "action": "misread", "option": "misread", "rating": "misread", "text": "lost"}
    assert real.compare(label, {}) == {"action": "lost", "option": "right", "rating": "right", "text": "lost"}


def test_no_real_reply_is_misread():
    table, misreads = real.tally(RECORDS)
    print(real.format_table(table))
    for line in misreads:
        print("MISREAD", line)
    assert not misreads, f"{len(misreads)} misread fields:\n" + "\n".join(misreads)


def test_a_record_is_read_as_the_kernel_read_its_reply(tmp_path):
    # The corpus stores what the kernel passed to the reader; reading a stored record must
    # give what the kernel got (stub replies: every kind of the veil and auction scenarios).
    import json

    from simcore.cli import main
    from simcore.runs.scenario import load_scenario

    for name, flags in {"veil_of_ignorance": ["--n-agents", "2", "--max-rounds", "1"],
                        "llm_auction": ["--n-agents", "5", "--n-vignettes", "1"]}.items():
        with real.capture() as calls:
            assert main(load_scenario(name), [*flags, "--out", str(tmp_path), "--plots", "none", "--json"]) == 0
        assert calls
        path = tmp_path / "stub-json_on.jsonl"
        path.write_text("".join(json.dumps({**c.record(), "label": {}}) + "\n" for c in calls))
        for c, rec in zip(calls, real.load(tmp_path)):
            names = list(real.LABELLED[c.kind])
            assert real.values(real.read(rec), names) == real.values(c.reading, names)
            assert rec["instruction"] == c.instruction


def test_the_corpus_has_a_held_out_part_of_fresh_decisions_from_every_model():
    # Held out (split.json): fresh (model, seed) groups, JSON mode off, labelled before any reader ran on them.
    held = [r for r in RECORDS if r["split"] == "heldout"]
    for model in ("smollm2", "gemma", "qwen"):
        decisions = [r for r in held if r["model"] == model and r["kind"] == "decision"]
        assert len(decisions) >= 100, model
        assert {r["json_mode"] for r in decisions} == {"off"}
        assert {"original", "structured"} <= {_decision_prompt(r) for r in decisions}, model
    assert {"ballot", "rating"} <= {r["kind"] for r in held}
    groups = real.split_groups()
    assert not groups["heldout"] & {(r["model"], int(r["seed"])) for r in RECORDS if r["split"] == "development"}


def _decision_prompt(rec):
    return "original" if "--decision-prompt original" in rec["flags"] else "structured"


def test_the_docs_tables_are_what_the_readers_give_now():
    # docs/real-models.md carries the development and held-out scores, written by benchmarks/eval_readers.py.
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "eval_readers.py"
    spec = importlib.util.spec_from_file_location("eval_readers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    md, _ = module.tables()
    doc = module.DOCS.read_text(encoding="utf-8")
    assert module.with_tables(doc, md) == doc, "run python benchmarks/eval_readers.py"


# -- capable models' replies (tests/corpus/capable, issue 48) ----------------------------------------------


def test_capable_replies_keep_their_source_and_their_moves_mapping():
    from tests.corpus import capable

    every = capable.load(labelled_only=False)
    assert {r["source"] for r in every} >= {"pcaspa", "phelps", "yoshino"} and len(every) >= 300
    held = capable.heldout_sources()
    assert held and held <= {r["source"] for r in every}  # at least one source held out entirely
    for r in every:
        assert r["repo"].count("/") == 1 and len(r["commit"]) == 40 and r["path"] and r["locator"], r["where"]
        assert set(r["moves"].values()) == {"COOPERATE", "DEFECT"} and r["reply_original"].strip(), r["where"]
        assert r["split"] == ("heldout" if r["source"] in held else "development")
    # Only labelled replies are read (a held-out source waits for its labels).
    labelled = capable.load()
    assert all(r["label"] is not None for r in labelled)
    for r in labelled:
        want = r["label"]["action"]
        assert want in ("COOPERATE", "DEFECT", None) or set(want["ambiguous"]) <= {"COOPERATE", "DEFECT", None}


def test_capable_replies_are_served_to_simcores_own_decision_prompt():
    from tests.corpus import capable

    req = capable.decision_request()
    assert req["messages"][-1]["content"].endswith("Decision (COOPERATE/DEFECT):")
    assert req["schema"] == "scenarios.acausal_cooperation.prompts:DecisionReply"
    read = capable.read({"reply": 'I would choose to "Cooperate".\n\nExplanation: it pays in the long run.'})
    assert read.fields["action"] == "COOPERATE"


def test_no_labelled_capable_reply_is_misread():
    from tests.corpus import capable

    bad = []
    for r in capable.load():
        got = real.values(capable.read(r), ["action"])
        if real.compare(r["label"], got)["action"] == "misread":
            bad.append(f"{r['where']} {r['source']}/{r['model']}: label {r['label']}, read {got}: {r['reply'][:80]!r}")
    assert not bad, "\n".join(bad)


def _script(name):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_reask_task_shows_the_reply_it_reasks_and_the_followup(tmp_path):
    import gzip
    import json

    labels = _script("label_replies")
    reask = next(r for r in RECORDS if real.reply_of(r) == "re-ask")
    t = labels.task(dict(reask), "x-0000")
    assert t["reask"] is True and t["follow_up"] == reask["messages"][-1]["content"]
    assert t["previous_reply"] and t["asked"] and t["reply"] == reask["reply"]
    # A capable source's records keep their ids; labels given bare merge as the field's value.
    src = tmp_path / "src.jsonl.gz"
    recs = [{"id": f"s-{n}", "source": "s", "kind": "decision", "model": "m", "moves": {"J": "COOPERATE", "F": "DEFECT"},
             "asked": "Which option, J or F?", "reply_original": text, "reply": text, "finish_reason": "stop",
             "label": None, "note": None} for n, text in enumerate(["J", "I cannot say."])]
    src.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in recs).encode()))
    assert labels.task(recs[0], labels.rid_of(recs[0], None, 0))["fields"]["action"]["moves"] == recs[0]["moves"]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"id": "s-0", "label": "COOPERATE", "reason": "J"}\n{"id": "s-1", "label": null}\n')
    b.write_text('{"id": "s-0", "label": {"action": "COOPERATE"}, "note": "J alone"}\n{"id": "s-1", "label": null}\n')
    assert labels.main(["corpus", str(src), "-", str(a), str(b), "--out", str(src)]) == 0
    merged = [json.loads(line) for line in gzip.decompress(src.read_bytes()).decode().splitlines()]
    assert [m["label"] for m in merged] == [{"action": "COOPERATE"}, {"action": None}] and merged[0]["note"] == "J"


def test_capture_leaves_out_the_dry_run_that_checks_the_context_window(tmp_path):
    # The collector once recorded the stub's replies of the window check as the model's (veil, seed 57).
    import contextlib
    import io

    from simcore.cli import main
    from simcore.runs.scenario import load_scenario

    flags = ["--n-agents", "2", "--max-rounds", "1", "--plots", "none", "--json"]
    got = []
    for extra in ([], ["--context-window", "4096"]):
        with real.capture() as calls, contextlib.redirect_stdout(io.StringIO()):
            assert main(load_scenario("veil_of_ignorance"), [*flags, *extra, "--out", str(tmp_path / str(len(got)))]) == 0
        got.append([(c.kind, c.reply) for c in calls])
    assert got[0] == got[1] and got[0]
