"""Where the capture proxy sends a program's calls: simcore's stub, or an HTTP server.

- :class:`StubUpstream`: the stub backend in this process (deterministic, free);
- :class:`HttpUpstream`: any OpenAI-compatible server (a provider, llama.cpp,
  vLLM ...), the request body forwarded as the program wrote it.

:func:`make_upstream` builds one from ``--upstream``: ``stub``, the name of an
OpenAI-protocol preset of :mod:`backends.providers` (``openai``, ``openrouter``,
``llamacpp`` ...), or a base URL. The upstream's key comes from an environment
variable (``--api-key-env``, else the preset's); without one, the program's own
``Authorization`` header is passed on. Keys are never recorded (see
:class:`~simcore.capture.recording.Redactor`).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any, Mapping

from backends.base import LLMRequest
from backends.providers import PRESETS
from backends.registry import BackendSpec
from backends.stub import StubBackend
from simcore.base.config import ConfigError
from simcore.capture.wire import error_body, reply_body


@dataclass(frozen=True)
class Answer:
    """An upstream's answer: HTTP status and body (parsed JSON, or None with its text)."""

    status: int
    data: Any
    text: str = ""


class StubUpstream:
    """The stub backend, answering in this process (its generic behaviour: filler prose,
    or schema-valid JSON in JSON mode)."""

    def __init__(self) -> None:
        self.spec = BackendSpec()
        self.key: str | None = None
        self._backend = StubBackend()

    async def chat(self, body: Mapping[str, Any], request: LLMRequest, authorization: str | None) -> Answer:
        response = self._backend.respond(request)
        return Answer(200, reply_body(response, request.digest()[:12]))

    async def models(self, authorization: str | None) -> Answer:
        return Answer(200, {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "simcore"}]})

    async def aclose(self) -> None:
        """Nothing to close."""


class HttpUpstream:
    """An OpenAI-compatible server at ``base_url`` (which ends before ``/chat/completions``).

    Args:
        spec: What manifests record (no key).
        key: The upstream's key, or None to pass on the program's Authorization header.
        timeout_s: Per-call limit.
    """

    def __init__(self, spec: BackendSpec, key: str | None, timeout_s: float = 600.0) -> None:
        self.spec = spec
        self.key = key
        self.url = str(spec.base_url).rstrip("/")
        self.timeout_s = timeout_s
        self._session: Any = None

    def _headers(self, authorization: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        auth = f"Bearer {self.key}" if self.key else authorization
        if auth:
            headers["Authorization"] = auth
        return headers

    async def _send(self, method: str, path: str, authorization: str | None, body: Any = None) -> Answer:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        try:
            async with self._session.request(method, self.url + path, json=body,
                                             headers=self._headers(authorization)) as resp:
                raw = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            message = f"upstream {self.url} unreachable: {type(exc).__name__}"
            return Answer(502, error_body(502, message), message)
        text = raw.decode("utf-8", errors="replace")
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        return Answer(status, data, text[:2000])

    async def chat(self, body: Mapping[str, Any], request: LLMRequest, authorization: str | None) -> Answer:
        return await self._send("POST", "/chat/completions", authorization, dict(body))

    async def models(self, authorization: str | None) -> Answer:
        return await self._send("GET", "/models", authorization)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def openai_presets() -> list[str]:
    """The presets an OpenAI-compatible program can be pointed at through the proxy."""
    return [name for name, p in PRESETS.items() if p.protocol == "openai" and p.base_url]


def make_upstream(upstream: str, api_key_env: str | None = None, model: str | None = None,
                  timeout_s: float = 600.0) -> StubUpstream | HttpUpstream:
    """The upstream ``--upstream`` names (see the module docstring).

    Raises:
        ConfigError: one line naming ``upstream`` or ``api_key_env``, before anything runs.
    """
    if upstream == "stub":
        if api_key_env:
            raise ConfigError("api_key_env: the stub upstream takes no key; drop --api-key-env")
        return StubUpstream()
    if upstream in PRESETS:
        preset = PRESETS[upstream]
        if upstream not in openai_presets():
            raise ConfigError(f"upstream: {upstream} does not speak the OpenAI chat API; use stub, one of "
                              f"{', '.join(openai_presets())}, or a base URL")
        name, base_url, env = upstream, preset.base_url, api_key_env or preset.api_key_env
    elif upstream.startswith(("http://", "https://")) and len(upstream) > len("https://"):
        name, base_url, env = "openai-compatible", upstream, api_key_env
    else:
        raise ConfigError(f"upstream: must be stub, one of {', '.join(openai_presets())}, or a base URL "
                          f"(http://... ending before /chat/completions); got {upstream!r}")
    key = None
    if env:
        key = os.environ.get(env)
        if not key:
            raise ConfigError(f"api_key_env: ${env} is not set; export the upstream's key in it")
    options = {"api_key_env": env} if env else {}
    return HttpUpstream(BackendSpec(name, model or "as requested", base_url, options), key, timeout_s)
