"""The ethical vignettes of the LLM-auction scenario, kept as data in ``vignettes.json``.

Each vignette has 3-4 lettered options, a consensus answer, the rationale for it
(which guidance or mainstream view makes it the consensus) and a *distractor*: the
most tempting wrong option, which the stub behaviour model uses so that wrong
private answers cluster the way they do in real panels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("vignettes.json")
LETTERS = "ABCD"


@dataclass(frozen=True)
class Option:
    """One answer option."""

    key: str
    text: str
    principle: str


@dataclass(frozen=True)
class Vignette:
    """One dilemma with its consensus answer."""

    id: str
    title: str
    domain: str
    text: str
    options: tuple[Option, ...]
    consensus: str
    distractor: str
    rationale: str

    @property
    def keys(self) -> tuple[str, ...]:
        """Option letters, in order."""
        return tuple(o.key for o in self.options)

    @property
    def choices(self) -> dict[str, str]:
        """Each option's letter and text: what a reply may name (see :func:`simcore.replies.schema.option`)."""
        return {o.key: o.text for o in self.options}

    def option(self, key: str) -> Option:
        """The option lettered ``key``."""
        return self.options[self.keys.index(key)]

    def render(self) -> str:
        """The vignette as prompt text: title, story and lettered options."""
        lines = [f"Vignette: {self.title}", self.text, "", "Options:"]
        lines += [f"{o.key}) {o.text}" for o in self.options]
        return "\n".join(lines)


def _parse(raw: dict) -> Vignette:
    options = tuple(Option(o["key"], o["text"], o["principle"]) for o in raw["options"])
    v = Vignette(
        raw["id"], raw["title"], raw["domain"], raw["text"], options,
        raw["consensus"], raw["distractor"], raw["rationale"],
    )
    if not 3 <= len(options) <= 4 or v.keys != tuple(LETTERS[: len(options)]):
        raise ValueError(f"vignette {v.id}: needs 3-4 options lettered A.. in order")
    if v.consensus not in v.keys or v.distractor not in v.keys or v.consensus == v.distractor:
        raise ValueError(f"vignette {v.id}: consensus and distractor must be two different options")
    if not v.rationale.strip():
        raise ValueError(f"vignette {v.id}: the consensus needs a rationale")
    return v


@lru_cache(maxsize=1)
def load() -> tuple[Vignette, ...]:
    """All vignettes, in file order (validated)."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    vignettes = tuple(_parse(raw) for raw in data["vignettes"])
    ids = [v.id for v in vignettes]
    if len(set(ids)) != len(ids):
        raise ValueError("vignettes: ids must be unique")
    return vignettes


VIGNETTES = load()
BY_ID = {v.id: v for v in VIGNETTES}
