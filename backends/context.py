"""What a server says about its context window, and how many tokens a prompt takes.

**The window.** Before a run, :func:`probe_window` asks the server where it says:

- the llama.cpp server: ``GET /props`` (``default_generation_settings.n_ctx``);
- vLLM: ``GET /v1/models`` (``max_model_len`` of the model);
- Ollama: ``POST /api/show`` (the model's ``num_ctx`` parameter, else its
  ``*.context_length``; Ollama's own default may be smaller: pass
  ``--context-window`` then).

llama-cpp-python's server (``python -m llama_cpp.server``) says none of these; it
names its window only in the error that refuses a prompt too long ("maximum context
length is 4096 tokens ..."), which :class:`~backends.errors.ContextOverflow` reads.

**Token counts.** Where the server has a tokenizer endpoint (llama-cpp-python:
``POST /extras/tokenize/count``; the llama.cpp server and vLLM: ``POST /tokenize``),
a prompt is counted there: its messages' text, plus :func:`template_margin` for the
chat template the server wraps them in (role markers, and a default system prompt
some templates add). Otherwise :func:`estimate_prompt_tokens` counts three
characters per token, which English prose, code and digits rarely exceed.
"""

from __future__ import annotations

import json
import math
import urllib.request
from typing import Any, Mapping, Sequence

from backends.base import LLMRequest

#: Tokens a chat template may add to a request, and to each message (measured on
#: SmolLM2's template, which adds a default system prompt of about 30 tokens when a
#: request has none; see docs/backends.md).
TEMPLATE_TOKENS = 32
MESSAGE_TOKENS = 8

#: Window probes per preset, tried in order (see the module docstring).
PROBES: Mapping[str, tuple[str, ...]] = {
    "llamacpp": ("props",),
    "vllm": ("models",),
    "ollama": ("show",),
    "openai-compatible": ("props", "models"),
}

#: Tokenizer endpoints per preset, tried in order until one answers: (path, body key).
TOKENIZERS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "llamacpp": (("/extras/tokenize/count", "input"), ("/tokenize", "content")),
    "vllm": (("/tokenize", "prompt"),),
    "openai-compatible": (("/extras/tokenize/count", "input"), ("/tokenize", "content")),
}


def template_margin(request: LLMRequest) -> int:
    """Tokens a chat template may wrap ``request``'s messages in."""
    return TEMPLATE_TOKENS + MESSAGE_TOKENS * len(request.messages)


def prompt_text(request: LLMRequest) -> str:
    """The text of ``request``'s messages, as one string to count."""
    return "\n\n".join(m.content for m in request.messages)


def estimate_prompt_tokens(request: LLMRequest) -> int:
    """A conservative prompt count: one token per three characters, plus the template margin."""
    return sum(math.ceil(len(m.content) / 3) for m in request.messages) + template_margin(request)


def count_request(request: LLMRequest) -> LLMRequest:
    """The request under which a count of ``request``'s prompt is recorded in a cassette.

    Its own digest (``max_tokens`` 0 and a ``count`` mark), so a count never answers
    a completion and a completion never answers a count.
    """
    return LLMRequest(model=request.model, messages=request.messages, max_tokens=0, temperature=0.0,
                      seed=None, schema=None, metadata={**request.metadata, "count": "prompt_tokens"})


def server_root(base_url: str) -> str:
    """The server's root URL: ``base_url`` without a trailing ``/v1``."""
    base = base_url.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def count_from(data: Any) -> int | None:
    """The token count in a tokenizer endpoint's answer (``count``, or the length of ``tokens``)."""
    if not isinstance(data, Mapping):
        return None
    if isinstance(data.get("count"), int):
        return int(data["count"])
    tokens = data.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


# -- the window ---------------------------------------------------------------------


def window_from_props(data: Any) -> int | None:
    """``n_ctx`` from a llama.cpp server's ``/props``."""
    if not isinstance(data, Mapping):
        return None
    settings = data.get("default_generation_settings")
    for where in (settings, data):
        if isinstance(where, Mapping) and isinstance(where.get("n_ctx"), int) and where["n_ctx"] > 0:
            return int(where["n_ctx"])
    return None


def window_from_models(data: Any, model: str) -> int | None:
    """``max_model_len`` of ``model`` (or of the only model) in an OpenAI-style model list."""
    rows = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(rows, list):
        return None
    rows = [r for r in rows if isinstance(r, Mapping)]
    picked = [r for r in rows if r.get("id") == model] or (rows if len(rows) == 1 else [])
    for row in picked:
        if isinstance(row.get("max_model_len"), int) and row["max_model_len"] > 0:
            return int(row["max_model_len"])
    return None


def window_from_show(data: Any) -> int | None:
    """The context an Ollama model runs with: its ``num_ctx`` parameter, else its ``context_length``."""
    if not isinstance(data, Mapping):
        return None
    for line in str(data.get("parameters") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "num_ctx" and parts[1].isdigit():
            return int(parts[1])
    info = data.get("model_info")
    if isinstance(info, Mapping):
        for key, value in sorted(info.items()):
            if key.endswith(".context_length") and isinstance(value, int) and value > 0:
                return int(value)
    return None


def _http_json(url: str, body: Mapping[str, Any] | None, timeout_s: float) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"},
                                 method="GET" if body is None else "POST")
    try:
        # (no proxy: the servers asked are local ones)
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=timeout_s) as res:
            return json.loads(res.read().decode("utf-8", errors="replace"))
    except (OSError, ValueError):  # refused, 404, timed out, not JSON: the server does not say
        return None


def probe_window(preset: str, base_url: str, model: str, timeout_s: float = 3.0) -> tuple[int, str] | None:
    """The context window a server says it has, and where it said it; None where it says nothing.

    Args:
        preset: The backend preset (see :data:`PROBES`; others are never asked).
        base_url: The OpenAI-compatible base URL (``.../v1``).
        model: The model asked for (vLLM and Ollama serve several).
    """
    root = server_root(base_url)
    for probe in PROBES.get(preset, ()):
        if probe == "props":
            found = window_from_props(_http_json(f"{root}/props", None, timeout_s))
            where = f"{root}/props"
        elif probe == "models":
            found = window_from_models(_http_json(f"{root}/v1/models", None, timeout_s), model)
            where = f"{root}/v1/models"
        else:
            found = window_from_show(_http_json(f"{root}/api/show", {"model": model}, timeout_s))
            where = f"{root}/api/show"
        if found is not None:
            return found, where
    return None


async def count_tokens(backend: Any, requests: Sequence[LLMRequest]) -> list[int]:
    """Prompt tokens of ``requests`` as ``backend`` counts them, else as estimated.

    A backend with an ``async count_tokens(requests)`` method (a trial's view of a
    real backend, which records the counts in its cassette) answers for each request
    the tokens of :func:`prompt_text` or None; its counts get the template margin.
    """
    counter = getattr(backend, "count_tokens", None)
    counted = list(await counter(requests)) if counter is not None else [None] * len(requests)
    return [estimate_prompt_tokens(r) if n is None else n + template_margin(r) for r, n in zip(requests, counted)]
