"""Replies that small real models wrote (tests/corpus/real/rerun_*.jsonl), each read with the request
it answered: no reading may disagree with the hand label of what the reply commits to (issue 33)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.corpus.rerun import KEYS, compare, label_fields, load, read, schema_of

RECORDS = load()


def test_the_records_are_whole_and_labelled():
    assert len(RECORDS) >= 100, "too few real replies to test anything"
    ids = [r["id"] for r in RECORDS]
    assert len(ids) == len(set(ids))
    for r in RECORDS:
        assert set(r) == KEYS, r["id"]
        assert r["labelled"], f"{r['id']}: not labelled yet"
        assert r["finish_reason"] in ("stop", "length") and r["json_mode"] in ("on", "off")
        schema_of(r)
        label_fields(r)  # a bare label needs a schema with one fixed-answer field
    # Both kinds of reply are there: ones that commit to an answer, and ones that commit to nothing.
    assert Counter(bool(label_fields(r)) for r in RECORDS).keys() == {True, False}


@pytest.mark.parametrize("model", sorted({r["model"] for r in RECORDS}))
def test_no_real_reply_is_misread(model):
    misread = []
    for r in RECORDS:
        if r["model"] == model and r["labelled"]:  # (an unlabelled record fails the test above)
            diff = compare(r, read(r).fields)
            misread += [f"{r['id']} ({r['kind']}): {m}" for m in diff["misread"]]
    assert not misread, "\n".join(misread)
