"""Where the capture proxy sends a program's calls: simcore's stub, or an HTTP server.

- :class:`StubUpstream`: the stub backend in this process (deterministic, free);
  it speaks chat completions;
- :class:`HttpUpstream`: a server (a provider, llama.cpp, vLLM ...) that speaks
  one or more of the APIs of :data:`~simcore.capture.wire.API_NAMES`, each call's
  body forwarded as the proxy has it.

:func:`make_upstream` builds one from ``--upstream``: ``stub``, the name of a
preset of :mod:`backends.providers` (an OpenAI-protocol one, or ``anthropic``), or
a base URL (ending before ``/chat/completions``, ``/responses`` or ``/messages``),
and ``--upstream-api``: which APIs it speaks (default: :data:`SPEAKS` for a
preset, chat completions otherwise). A call in an API the upstream speaks is
forwarded as it is; any other is translated to chat completions. The upstream's
key comes from an environment variable (``--api-key-env``, else the preset's);
without one, the program's own key header is passed on. Keys are never recorded
(see :class:`~simcore.capture.recording.Redactor`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from backends.base import LLMRequest
from backends.providers import PRESETS
from backends.registry import BackendSpec
from backends.stub import StubBackend
from simcore.base.config import ConfigError
from simcore.capture.wire import API_NAMES, error_body, reply_body

#: What a preset's server speaks where it is not chat completions alone (checked 2026-11-28): OpenAI
#: serves /v1/responses beside /v1/chat/completions (developers.openai.com/api/reference); Anthropic serves
#: /v1/messages (platform.claude.com/docs/en/api/messages), and its OpenAI-compatibility layer
#: (platform.claude.com/docs/en/api/openai-sdk) is left out: Anthropic calls it a way to test, not for
#: production, and it ignores response_format (--upstream-api messages,chat takes it all the same).
SPEAKS = {"openai": ("chat", "responses"), "anthropic": ("messages",)}
#: Where each API's calls go, after the upstream's base URL.
PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}
#: The Messages API's version header, for programs that send none (the one the SDKs send).
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Answer:
    """An upstream's answer: HTTP status and body (parsed JSON, or None with its text)."""

    status: int
    data: Any
    text: str = ""


class StubUpstream:
    """The stub backend, answering in this process (its generic behaviour: filler prose,
    or schema-valid JSON in JSON mode). It speaks chat completions."""

    speaks: tuple[str, ...] = ("chat",)

    def __init__(self) -> None:
        self.spec = BackendSpec()
        self.key: str | None = None
        self._backend = StubBackend()

    async def send(self, api: str, body: Mapping[str, Any], request: LLMRequest,
                   headers: Mapping[str, str]) -> Answer:
        """Answer a call (``api`` is always chat: the proxy translates the others)."""
        response = self._backend.respond(request)
        return Answer(200, reply_body(response, request.digest()[:12]))

    async def models(self, authorization: str | None) -> Answer:
        return Answer(200, {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "simcore"}]})

    async def aclose(self) -> None:
        """Nothing to close."""


class HttpUpstream:
    """A server at ``base_url`` (which ends before the APIs' paths, :data:`PATHS`).

    Args:
        spec: What manifests record (no key).
        key: The upstream's key, or None to pass on the program's key header.
        timeout_s: Per-call limit.
        speaks: The APIs it speaks (of :data:`~simcore.capture.wire.API_NAMES`).
    """

    def __init__(self, spec: BackendSpec, key: str | None, timeout_s: float = 600.0,
                 speaks: tuple[str, ...] = ("chat",)) -> None:
        self.spec = spec
        self.key = key
        self.url = str(spec.base_url).rstrip("/")
        self.timeout_s = timeout_s
        self.speaks = speaks
        self._session: Any = None

    def _headers(self, api: str, given: Mapping[str, str]) -> dict[str, str]:
        """The upstream's key in the API's header (else the program's), and the Messages API's version."""
        headers = {"Content-Type": "application/json"}
        if api == "messages":
            headers["anthropic-version"] = given.get("anthropic-version") or ANTHROPIC_VERSION
            if given.get("anthropic-beta"):
                headers["anthropic-beta"] = given["anthropic-beta"]
            if self.key:
                headers["x-api-key"] = self.key
                return headers
        elif self.key:
            headers["Authorization"] = f"Bearer {self.key}"
            return headers
        for name in ("Authorization", "x-api-key"):
            if given.get(name):
                headers[name] = given[name]
        return headers

    async def _send(self, method: str, path: str, headers: Mapping[str, str], body: Any = None) -> Answer:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        try:
            async with self._session.request(method, self.url + path, json=body, headers=dict(headers)) as resp:
                raw = await resp.read()
                status = resp.status
        except (TimeoutError, aiohttp.ClientError) as exc:
            message = f"upstream {self.url} unreachable: {type(exc).__name__}"
            return Answer(502, error_body(502, message), message)
        text = raw.decode("utf-8", errors="replace")
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        return Answer(status, data, text[:2000])

    async def send(self, api: str, body: Mapping[str, Any], request: LLMRequest,
                   headers: Mapping[str, str]) -> Answer:
        """Forward a call in ``api`` (one the upstream speaks); ``headers``: the program's."""
        return await self._send("POST", PATHS[api], self._headers(api, headers), dict(body))

    async def models(self, authorization: str | None) -> Answer:
        return await self._send("GET", "/models", self._headers("chat", {"Authorization": authorization or ""}))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def capture_presets() -> list[str]:
    """The presets a program can be pointed at through the proxy: those that speak an API of
    :data:`~simcore.capture.wire.API_NAMES`."""
    return [name for name, p in PRESETS.items() if p.protocol in ("openai", "anthropic") and p.base_url]


def parse_speaks(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """``--upstream-api``: comma-separated API names, in :data:`~simcore.capture.wire.API_NAMES` order.

    Raises:
        ConfigError: one line naming ``upstream_api``.
    """
    if text is None:
        return default
    names = [n.strip() for n in text.split(",") if n.strip()]
    wrong = [n for n in names if n not in API_NAMES]
    if wrong or not names:
        raise ConfigError(f"upstream_api: must be one or more of {', '.join(API_NAMES)}, comma-separated; "
                          f"got {text!r}")
    return tuple(n for n in API_NAMES if n in names)


def make_upstream(upstream: str, api_key_env: str | None = None, model: str | None = None,
                  timeout_s: float = 600.0, upstream_api: str | None = None) -> StubUpstream | HttpUpstream:
    """The upstream ``--upstream`` and ``--upstream-api`` name (see the module docstring).

    Raises:
        ConfigError: one line naming ``upstream``, ``upstream_api`` or ``api_key_env``, before anything runs.
    """
    if upstream == "stub":
        if api_key_env:
            raise ConfigError("api_key_env: the stub upstream takes no key; drop --api-key-env")
        if upstream_api is not None and parse_speaks(upstream_api, ()) != StubUpstream.speaks:
            raise ConfigError("upstream_api: the stub speaks chat completions only (the proxy translates the "
                              "others to them); drop --upstream-api")
        return StubUpstream()
    presets = capture_presets()
    if upstream in PRESETS:
        preset = PRESETS[upstream]
        if upstream not in presets:
            raise ConfigError(f"upstream: {upstream} speaks none of {', '.join(API_NAMES)}; use stub, one of "
                              f"{', '.join(presets)}, or a base URL")
        # The Anthropic preset's URL is the backends' (which add /v1/messages); the proxy adds /messages.
        base_url = preset.base_url + ("/v1" if preset.protocol == "anthropic" else "")
        name, env, speaks = upstream, api_key_env or preset.api_key_env, SPEAKS.get(upstream, ("chat",))
    elif upstream.startswith(("http://", "https://")) and len(upstream) > len("https://"):
        name, base_url, env, speaks = "openai-compatible", upstream, api_key_env, ("chat",)
    else:
        raise ConfigError(f"upstream: must be stub, one of {', '.join(presets)}, or a base URL "
                          f"(http://... ending before /chat/completions, /responses or /messages); got {upstream!r}")
    speaks = parse_speaks(upstream_api, speaks)
    key = None
    if env:
        key = os.environ.get(env)
        if not key:
            raise ConfigError(f"api_key_env: ${env} is not set; export the upstream's key in it")
    options = {"api_key_env": env} if env else {}
    options["upstream_api"] = ",".join(speaks)
    return HttpUpstream(BackendSpec(name, model or "as requested", base_url, options), key, timeout_s, speaks)
