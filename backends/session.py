"""The backend a run uses: routing, middleware, cassette, ledger and fail-fast together.

:class:`RunBackend` is shared by every trial of a run or sweep (so the concurrency
limit, rate limits and budget are global); :meth:`RunBackend.for_trial` gives each
trial a :class:`TrialBackend` view that numbers identical requests, answers from a
cassette where it can, records every response and error for the trial's run
directory, trips the fail-fast switch, and counts the trial's own share of the
providers' work (requests, attempts, retries, tokens, cost): the trials' counts
add up to the run's.

A :class:`TrialBackend` without a run behind it replays a cassette strictly, with
no network client and no key: that is how ``python -m simcore.replay`` replays a
real run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable, Sequence

from backends.base import Backend, LLMRequest, LLMResponse, Usage, gather_settled
from backends.cassette import (
    Cassette,
    Entry,
    error_entry,
    response_entry,
    write_cassette,
)
from backends.context import count_request
from backends.errors import CassetteMiss, RunHalted, error_from_record
from backends.middleware import CallTally, Halt, Ledger, Router


class RunBackend:
    """Shared state of a run's backend.

    Args:
        name: The backend (preset) name.
        inner: What answers live calls: a :class:`Router`, or the stub.
        ledger: The cost ledger and budget.
        cassette: A user cassette (``--cassette``), or None.
        mode: Cassette mode: "auto", "record" or "replay".
        fail_fast: Halt every trial after the first call that fails for good.
        halt: The fail-fast switch (shared with the router's providers).
        make_stub: Builds a stub for a scenario behaviour, so that each trial's
            stub answers (the stub backend, ``stub:`` models) follow that trial's
            config when trials of different configs share this backend.
    """

    def __init__(self, name: str, inner: Backend, ledger: Ledger, *, cassette: Cassette | None = None,
                 mode: str = "auto", fail_fast: bool = False, halt: Halt | None = None,
                 make_stub: Callable[[Any], Backend] | None = None) -> None:
        self.name = name
        self.inner = inner
        self.ledger = ledger
        self.cassette = cassette
        self.mode = mode
        self.fail_fast = fail_fast
        self.halt = halt or Halt()
        self.make_stub = make_stub
        self._default: TrialBackend | None = None

    @property
    def halted(self) -> bool:
        """Whether fail-fast has stopped the run."""
        return self.halt.halted

    def for_trial(self, scope: str, behaviour: Any = None) -> "TrialBackend":
        """A per-trial view; ``scope`` identifies the trial in shared cassettes.

        ``behaviour`` is the trial's stub behaviour model (None: the backend's own).
        """
        stub = self.make_stub(behaviour) if behaviour is not None and self.make_stub is not None else None
        return TrialBackend(self, scope, source=self.cassette, mode=self.mode, stub=stub)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Complete outside any trial (scope "")."""
        if self._default is None:
            self._default = self.for_trial("")
        return await self._default.complete(request)

    def stats(self) -> dict[str, Any]:
        """Run-wide counters: per provider, and spending (the sum over its trials)."""
        providers = self.inner.stats() if isinstance(self.inner, Router) else {}
        return {"providers": providers, "spent_usd": self.ledger.spent_usd,
                "spent_by_model": {m: dict(v) for m, v in sorted(self.ledger.by_model.items())},
                "halted": self.halt.reason}

    async def close_sessions(self) -> None:
        """Close the HTTP sessions of the running loop; limits, breakers and spending stay."""
        if isinstance(self.inner, Router):
            await self.inner.aclose()

    async def aclose(self) -> None:
        """Close HTTP sessions and the cassette."""
        await self.close_sessions()
        if self.cassette is not None:
            self.cassette.close()
            self.cassette = None


class TrialBackend:
    """One trial's view of a backend: occurrence numbers, cassette lookups, recording.

    Args:
        run: The shared run backend, or None for a strict replay.
        scope: The trial's cassette scope; None matches any (single-trial cassettes).
        source: Cassette to answer from (and record into, unless read-only).
        mode: "auto" (answer from the cassette, else live and record), "record"
            (always live), "replay" (cassette only; a miss is an error) or "resume"
            (as auto, with a cassette opened read-only).
        stub: This trial's stub (see :meth:`RunBackend.for_trial`), or None.
    """

    def __init__(self, run: RunBackend | None, scope: str | None, *, source: Cassette | None = None,
                 mode: str = "auto", stub: Backend | None = None) -> None:
        if run is None:
            mode = "replay"
        self.run = run
        self.name = run.name if run is not None else "cassette"
        self.scope = scope
        self.source = source
        self.mode = mode
        self._occurrence: dict[str, int] = {}
        self._entries: list[tuple[int, Entry]] = []
        self._seq = 0
        self.stub = stub
        self.counts = {"calls": 0, "cassette_hits": 0, "live_calls": 0, "errors": 0}
        self.tally = CallTally()
        self.fingerprints: dict[str, set[str]] = {}

    def _key(self, request: LLMRequest) -> tuple[str, int, int]:
        # Called synchronously in request-creation order: that makes occurrences
        # deterministic whatever order the responses come back in.
        digest = request.digest()
        occ = self._occurrence.get(digest, 0)
        self._occurrence[digest] = occ + 1
        seq = self._seq
        self._seq += 1
        return digest, occ, seq

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer one request."""
        return await self._complete(request, *self._key(request))

    async def complete_batch(self, requests: Sequence[LLMRequest]) -> list[LLMResponse | BaseException]:
        """Answer requests concurrently; failures come back as exception values, in order."""
        keys = [self._key(r) for r in requests]
        return await gather_settled([self._complete(r, *k) for r, k in zip(requests, keys)])

    async def _complete(self, request: LLMRequest, digest: str, occ: int, seq: int) -> LLMResponse:
        self.counts["calls"] += 1
        scope = self.scope or ""
        if self.source is not None and self.mode != "record":
            entry = self.source.get(self.scope, digest, occ)
            if entry is not None and (entry.kind == "response" or self.mode == "replay"):
                self._record(seq, _rescoped(entry, self.scope), store=False)
                if entry.kind == "response":
                    self.counts["cassette_hits"] += 1
                    return entry.response()
                self.counts["errors"] += 1
                raise error_from_record(entry.body["type"], entry.body["message"])
            if entry is None and self.mode == "replay":
                exc = CassetteMiss(
                    f"cassette: no recorded response for request {digest[:16]} "
                    f"(occurrence {occ}, model {request.model})"
                )
                self._record(seq, error_entry(scope, occ, request, exc), store=False)
                self.counts["errors"] += 1
                raise exc
        run = self.run
        assert run is not None  # replay mode returned or raised above
        try:
            run.halt.check()
            self.counts["live_calls"] += 1
            inner = run.inner
            if isinstance(inner, Router):
                res = await inner.complete(request, self.tally, self.stub)
            else:
                res = await (self.stub or inner).complete(request)
        except Exception as exc:
            self.counts["errors"] += 1
            self._record(seq, error_entry(scope, occ, request, exc),
                         store=not isinstance(exc, RunHalted))
            if run.fail_fast and not isinstance(exc, RunHalted):
                run.halt.trip(f"{type(exc).__name__}: {exc}")
            raise
        self._record(seq, response_entry(scope, occ, request, res), store=True)
        return res

    async def count_tokens(self, requests: Sequence[LLMRequest]) -> list[int | None]:
        """Tokens of each request's prompt text by its provider's tokenizer (None: it has none).

        Counts are answered and recorded like responses, under
        :func:`~backends.context.count_request`, so a replay counts as the run did.
        """
        marked = [count_request(r) for r in requests]
        keys = [self._key(r) for r in marked]  # in request order, as for completions
        return list(await asyncio.gather(*(self._count(r, *k) for r, k in zip(marked, keys))))

    async def _count(self, request: LLMRequest, digest: str, occ: int, seq: int) -> int | None:
        if self.source is not None and self.mode != "record":
            entry = self.source.get(self.scope, digest, occ)
            if entry is not None and entry.kind == "response":
                self._record(seq, _rescoped(entry, self.scope), store=False)
                usage = entry.response().usage
                return None if usage is None else usage.prompt_tokens
            if self.mode == "replay":
                return None  # an older cassette, or another run's: estimated (the completion will miss)
        run = self.run
        count = await run.inner.count_tokens(request) if run is not None and isinstance(run.inner, Router) else None
        res = LLMResponse("", None if count is None else Usage(count, 0), "count")
        self._record(seq, response_entry(self.scope or "", occ, request, res), store=True)
        return count

    def _record(self, seq: int, entry: Entry, *, store: bool) -> None:
        self._entries.append((seq, entry))
        fingerprint = entry.body.get("system_fingerprint")
        if fingerprint:
            self.fingerprints.setdefault(entry.model, set()).add(str(fingerprint))
        if store and self.source is not None and not self.source.readonly and self.mode != "replay":
            self.source.put(entry)

    @property
    def entries(self) -> list[Entry]:
        """What this trial recorded, in request-creation order."""
        return [e for _, e in sorted(self._entries, key=lambda x: x[0])]

    def save_cassette(self, path: str | Path) -> None:
        """Write the trial's cassette (a run directory's ``cassette.sqlite``)."""
        write_cassette(path, self.entries)

    def sent(self, models: Sequence[str]) -> dict[str, dict[str, Any]]:
        """What the providers were sent for ``models`` (rules applied, parameters refused),
        by preset and model, for the run's manifest; empty on a replay or the stub."""
        run = self.run
        return run.inner.sent(models) if run is not None and isinstance(run.inner, Router) else {}

    def stats(self) -> dict[str, Any]:
        """Counters of this trial alone (a shared backend's totals are :meth:`RunBackend.stats`)."""
        out: dict[str, Any] = dict(self.counts)
        out["system_fingerprints"] = {m: sorted(f) for m, f in sorted(self.fingerprints.items())}
        out["providers"] = self.tally.to_dict()
        out["spent_usd"] = sum(p.cost_usd for p in self.tally.providers.values())
        return out

    async def aclose(self) -> None:
        """Close the cassette of a strict replay view (run views are closed by their owner)."""
        if self.run is None and self.source is not None:
            self.source.close()
            self.source = None


def _rescoped(entry: Entry, scope: str | None) -> Entry:
    if scope is None or entry.scope == scope:
        return entry
    return Entry(scope, entry.digest, entry.occurrence, entry.model, entry.request, entry.kind, entry.body)
