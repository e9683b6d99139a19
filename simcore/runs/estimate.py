"""``--estimate``: expected calls, tokens and cost of a run or sweep, without spending.

The trials are run as a dry run on the stub backend (with the scenario's behaviour
model) under the real model names, so the count of calls, the prompts and the
per-model split are those the scenario would make. Two figures per model:

- **expected**: prompt tokens of the dry run and completions of stub length;
- **ceiling**: the same prompts, and every completion at its ``max_tokens``.

Both are estimates: tokens are counted at four characters per token, real replies
are longer or shorter than the stub's (and later prompts quote them), and a
scenario whose control flow depends on replies may make more or fewer calls.

:func:`check_fit` uses the same dry run to refuse, before any work, a run whose
prompts cannot fit the model's context window even with their history trimmed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Sequence

from backends.base import LLMRequest, LLMResponse
from backends.errors import ContextOverflow
from backends.middleware import Halt, Ledger, Router
from backends.pricing import cost_usd
from backends.registry import BackendSpec, price_table
from backends.stub import StubBackend
from simcore.base.config import Config, ConfigError
from simcore.runs.runner import build_world
from simcore.runs.scenario import Scenario
from simcore.sim.kernel import run_worlds

CHUNK = 256  # worlds per loop pass, to bound memory on big sweeps


class _Counting:
    """The stub, also adding up ``max_tokens`` per model."""

    name = "estimate"

    def __init__(self, stub: StubBackend, max_tokens: dict[str, int]) -> None:
        self.stub = stub
        self.max_tokens = max_tokens

    async def complete_batch(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        for r in requests:
            self.max_tokens[r.model] = self.max_tokens.get(r.model, 0) + r.max_tokens
        return await self.stub.complete_batch(requests)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return (await self.complete_batch([request]))[0]


@dataclass(frozen=True)
class Estimate:
    """Expected calls, tokens and cost.

    Attributes:
        trials: Trials counted.
        backend: The backend the estimate is for.
        by_model: Per model: calls, prompt_tokens, completion_tokens,
            max_completion_tokens, cost_usd, max_cost_usd (None when unpriced).
        unpriced_models: Models without a price (their cost is not included).
    """

    trials: int
    backend: str
    by_model: dict[str, dict[str, Any]]
    unpriced_models: list[str]

    def total(self, key: str) -> float | int:
        """Sum of ``key`` over models (unpriced costs count as 0)."""
        return sum(m[key] or 0 for m in self.by_model.values())

    def to_dict(self) -> dict[str, Any]:
        """Plain form (``--estimate --json``)."""
        keys = ("calls", "prompt_tokens", "completion_tokens", "max_completion_tokens", "cost_usd", "max_cost_usd")
        return {
            "trials": self.trials,
            "backend": self.backend,
            "by_model": self.by_model,
            "total": {k: self.total(k) for k in keys},
            "unpriced_models": self.unpriced_models,
        }

    def table(self) -> str:
        """A terminal table."""
        head = f"{'model':<36} {'calls':>7} {'prompt tok':>11} {'compl tok':>10} {'max compl':>10} " \
               f"{'cost $':>10} {'max cost $':>11}"
        lines = [f"estimate for {self.trials} trial(s) on backend {self.backend} (stub dry run; "
                 "nothing was sent)", head, "-" * len(head)]

        def money(v: Any) -> str:
            return "unpriced" if v is None else f"{v:.4f}"

        for model, m in sorted(self.by_model.items()):
            lines.append(f"{model[:36]:<36} {m['calls']:>7} {m['prompt_tokens']:>11} {m['completion_tokens']:>10} "
                         f"{m['max_completion_tokens']:>10} {money(m['cost_usd']):>10} {money(m['max_cost_usd']):>11}")
        d = self.to_dict()["total"]
        lines.append(f"{'total':<36} {int(d['calls']):>7} {int(d['prompt_tokens']):>11} "
                     f"{int(d['completion_tokens']):>10} {int(d['max_completion_tokens']):>10} "
                     f"{d['cost_usd']:>10.4f} {d['max_cost_usd']:>11.4f}")
        if self.unpriced_models:
            lines.append(f"no price for: {', '.join(self.unpriced_models)} (add them with --prices FILE)")
        return "\n".join(lines)


def estimate(scenario: Scenario, trials: Sequence[tuple[Config, int]], spec: BackendSpec) -> Estimate:
    """Dry-run ``trials`` (config, seed) on the stub and price them for ``spec``.

    Args:
        scenario: The scenario.
        trials: (config, seed) pairs, e.g. a sweep's whole grid.
        spec: The backend the real run would use (its default model and prices).
    """
    max_tokens: dict[str, int] = {}
    usage: dict[str, dict[str, int]] = {}

    async def run_chunk(chunk: Sequence[tuple[Config, int]]) -> None:
        worlds = []
        for cfg, seed in chunk:
            stub = StubBackend(scenario.behaviour(cfg) if scenario.behaviour else None)
            worlds.append(build_world(scenario, cfg, seed, spec, _Counting(stub, max_tokens)))
        await run_worlds(worlds)
        for w in worlds:
            for model, led in w.usage.items():
                acc = usage.setdefault(model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
                for k in acc:
                    acc[k] += led[k]

    for i in range(0, len(trials), CHUNK):
        asyncio.run(run_chunk(trials[i : i + CHUNK]))
    prices = price_table(spec)
    by_model: dict[str, dict[str, Any]] = {}
    unpriced = []
    for model, led in sorted(usage.items()):
        row: dict[str, Any] = {**led, "max_completion_tokens": max_tokens.get(model, 0)}
        row["cost_usd"] = cost_usd(model, led["prompt_tokens"], led["completion_tokens"], prices)
        row["max_cost_usd"] = cost_usd(model, led["prompt_tokens"], row["max_completion_tokens"], prices)
        if row["cost_usd"] is None:
            unpriced.append(model)
        by_model[model] = row
    return Estimate(len(trials), spec.name, by_model, unpriced)


class _Fitting:
    """The stub for completions; the real server's tokenizer (where it has one) for counts."""

    name = "fit-check"
    dry_run = True  # (its worlds answer nothing real: what records replies leaves their calls out)

    def __init__(self, stub: StubBackend, router: Router | None) -> None:
        self.stub = stub
        self.router = router

    async def complete_batch(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        return await self.stub.complete_batch(requests)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await self.stub.complete(request)

    async def count_tokens(self, requests: Sequence[LLMRequest]) -> list[int | None]:
        if self.router is None:
            return [None] * len(requests)
        return [await self.router.count_tokens(r) for r in requests]


def check_fit(scenario: Scenario, trials: Sequence[tuple[Config, int]], spec: BackendSpec) -> None:
    """Refuse a run whose prompts cannot fit ``spec``'s context window, before any work.

    Each distinct config is dry-run once on the stub, with its requests fitted to
    the window (``context_window`` of the spec; no window, no check) and counted by
    the server's tokenizer where it has one (else estimated, on the safe side). A
    prompt that does not fit even with its history trimmed away fails the check.

    Raises:
        ConfigError: one line naming the model, its window and what would fit.
    """
    if spec.options.get("context_window") is None:
        return
    distinct: dict[str, tuple[Config, int]] = {}
    for cfg, seed in trials:
        distinct.setdefault(repr(cfg.to_dict()), (cfg, seed))
    # Only the providers' tokenizers are used: no cassette, ledger or key is touched.
    router = None if spec.name == "stub" else Router(spec.name, spec.options, spec.base_url,
                                                     Ledger(price_table(spec)), Halt())
    worlds = []

    async def dry_run() -> None:
        try:
            for cfg, seed in distinct.values():
                stub = StubBackend(scenario.behaviour(cfg) if scenario.behaviour else None)
                worlds.append(build_world(scenario, cfg, seed, spec, _Fitting(stub, router)))
            await run_worlds(worlds)
        finally:
            if router is not None:
                await router.aclose()

    try:
        asyncio.run(dry_run())
    except ContextOverflow:
        pass  # (the fitter keeps why; a scenario may also have caught the failed call)
    for world in worlds:
        if world.fit is not None and world.fit.refused:
            raise ConfigError(f"{scenario.name}: {world.fit.refused[0]}")
