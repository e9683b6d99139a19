"""Typed backend errors, and the key scrubbing that keeps secrets out of them.

Every failure a real backend can report is a :class:`~backends.base.BackendError`
subclass. ``retryable`` says whether the middleware may try again. ``str(error)``
is the whole message, so an error recorded in a cassette can be raised again on
replay with the same type name and text (the trace records both).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from backends.base import BackendError

__all__ = [
    "AuthenticationError",
    "BackendConfigError",
    "BackendError",
    "BadRequest",
    "BudgetExceeded",
    "CassetteMiss",
    "ContextOverflow",
    "DamagedFile",
    "HTTPStatusError",
    "MalformedResponse",
    "MissingAPIKey",
    "ProviderError",
    "RateLimited",
    "RequestTimeout",
    "RunHalted",
    "ServerError",
    "ServerNotListening",
    "TransportError",
    "UnpricedModel",
    "error_from_record",
    "redact",
]

RETRY_STATUSES = frozenset({408, 409, 429})


class BackendConfigError(ValueError):
    """Bad backend settings: a one-line message naming the field and what is allowed."""


class DamagedFile(BackendConfigError):
    """A file read back (a run record, a cassette, ...) failed its hash or schema check.

    Bad input like a bad setting, and reported the same way (one line, exit
    status 2), so it derives from :class:`BackendConfigError`; every entry point
    that reports bad backend input reports damaged files too.

    Attributes:
        path: The damaged file.
        problem: What is wrong with it.
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(problem.split())  # one line, whatever a library said
        super().__init__(f"{self.path}: {self.problem}")


class TransportError(BackendError):
    """The connection failed: refused, reset or dropped before a full response."""

    retryable = True


class ServerNotListening(TransportError):
    """A local server (Ollama, llama.cpp, vLLM) refused the connection: it is not running.

    Not retried: a server that is not started does not start itself in the next seconds.
    """

    retryable = False


class RequestTimeout(TransportError):
    """No complete response within the per-request timeout."""


class MalformedResponse(BackendError):
    """A 2xx response whose body is not the JSON the protocol promises.

    Retried: a truncated or garbled body is a transport fault, not the model's answer.
    """

    retryable = True


class ProviderError(BackendError):
    """A 2xx response whose body reports that the provider failed after it started
    (OpenRouter: ``finish_reason: "error"`` or an ``error`` object). Retried like a 5xx."""

    retryable = True


class HTTPStatusError(BackendError):
    """A non-2xx HTTP status.

    Attributes:
        status: The HTTP status code.
        retry_after: Seconds the server asked us to wait, if it said (a header, or
            Gemini's ``RetryInfo.retryDelay`` in the body).
        should_retry: The server's ``x-should-retry`` header (True/False), which
            overrides the status as both official SDKs obey it; None without one.
        param: The request parameter the server refused by name, if it named one.
    """

    def __init__(self, message: str, status: int = 0, retry_after: float | None = None,
                 should_retry: bool | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.should_retry = should_retry
        self.param: str | None = None

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        if self.should_retry is not None:
            return self.should_retry
        return self.status in RETRY_STATUSES or self.status >= 500


class RateLimited(HTTPStatusError):
    """HTTP 429."""


class ServerError(HTTPStatusError):
    """HTTP 5xx."""


class AuthenticationError(HTTPStatusError):
    """HTTP 401 or 403: a missing, wrong or unauthorised key."""


class BadRequest(HTTPStatusError):
    """HTTP 400, 404, 422 and other client errors that retrying cannot fix."""


class ContextOverflow(BadRequest):
    """HTTP 400: the prompt and completion budget do not fit the model's context window.

    The server's message names the window and, mostly, the prompt's tokens; both are
    read from the message, so an error replayed from a cassette carries them too. The
    wordings read (:data:`OVERFLOWS`):

    - OpenAI, DeepSeek, llama-cpp-python, vLLM: "maximum context length is 4096 tokens.
      However, you requested 5760 tokens (4160 in the messages, 1600 in the completion)"
      (or "your messages resulted in N tokens", or "your request has N input tokens");
    - Anthropic: "prompt is too long: 208310 tokens > 200000 maximum", and "input
      length and `max_tokens` exceed context limit: 199000 + 8192 > 200000";
    - the llama.cpp server and Ollama: "request (4476 tokens) exceeds the available
      context size (4096 tokens)";
    - Gemini: "The input token count (1200293) exceeds the maximum number of tokens
      allowed (1048576)";
    - xAI: "This model's maximum prompt length is 131072 but the request contains
      136973 tokens".

    Attributes:
        window: The window the server named, or None.
        prompt_tokens: The prompt's tokens as the server counted them, or None.
    """

    def __init__(self, message: str, status: int = 400, retry_after: float | None = None,
                 should_retry: bool | None = None) -> None:
        super().__init__(message, status, retry_after, should_retry)
        self.window, self.prompt_tokens = overflow(message) or (None, None)


# (pattern, group of the window, group of the prompt's tokens or 0)
OVERFLOWS = (
    (re.compile(r"maximum context length is (\d+) tokens(?:.*?(?:\((\d+) in (?:the messages|your prompt)"
                r"|resulted in (\d+) tokens|has (\d+) input tokens))?", re.S), 1, (2, 3, 4)),
    (re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum"), 2, (1,)),
    (re.compile(r"input length and `max_tokens` exceed context limit: (\d+) \+ \d+ > (\d+)"), 2, (1,)),
    (re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"), 2, (1,)),
    (re.compile(r"input token count \((\d+)\) exceeds the maximum number of tokens allowed \((\d+)\)"), 2, (1,)),
    (re.compile(r"maximum prompt length is (\d+) but the request contains (\d+) tokens"), 1, (2,)),
)


def overflow(message: str) -> tuple[int, int | None] | None:
    """(window, prompt tokens or None) named by a context-overflow message, or None when it is none."""
    for pattern, window, prompt in OVERFLOWS:
        hit = pattern.search(message)
        if hit:
            counted = next((int(hit.group(g)) for g in prompt if hit.group(g)), None)
            return int(hit.group(window)), counted
    return None


class MissingAPIKey(BackendError):
    """The environment variable that should hold the API key is not set."""


class BudgetExceeded(BackendError):
    """The next call could take the run past ``--budget-usd``; it was not sent."""


class UnpricedModel(BudgetExceeded):
    """A budget is set but the model has no price, so the budget cannot be enforced."""


class CassetteMiss(BackendError):
    """Replay found no recorded response for a request."""


class RunHalted(BackendError):
    """``--fail-fast``: another call failed for good, so this one was not made."""


_BY_NAME: dict[str, type[BackendError]] = {
    cls.__name__: cls
    for cls in (
        BackendError, TransportError, RequestTimeout, MalformedResponse, HTTPStatusError,
        RateLimited, ServerError, AuthenticationError, BadRequest, MissingAPIKey,
        BudgetExceeded, UnpricedModel, CassetteMiss, RunHalted, ServerNotListening, ContextOverflow,
        ProviderError,
    )
}


def http_error(status: int, message: str, retry_after: float | None = None,
               should_retry: bool | None = None) -> HTTPStatusError:
    """The typed error for an HTTP status (``should_retry``: the server's x-should-retry)."""
    if status == 429:
        cls: type[HTTPStatusError] = RateLimited
    elif status >= 500:
        cls = ServerError
    elif status in (401, 403):
        cls = AuthenticationError
    elif status in RETRY_STATUSES:
        cls = HTTPStatusError
    elif status in (400, 413) and overflow(message) is not None:
        cls = ContextOverflow
    else:
        cls = BadRequest
    return cls(message, status, retry_after, should_retry)


def not_listening(url: str, server: str | None) -> str:
    """The one sentence for a local server that refuses connections."""
    parts = urlsplit(url)
    where = f"{parts.scheme}://{parts.netloc}" if parts.netloc else url
    return f"nothing is listening at {where}: is {server or 'the server'} running?"


def error_from_record(type_name: str, message: str) -> BackendError:
    """Rebuild a recorded error: same type name, same message.

    Types outside this module (a bug in a client, say) come back as a
    :class:`BackendError` subclass of the same name, so the trace matches.
    """
    cls = _BY_NAME.get(type_name)
    if cls is None:
        cls = type(type_name, (BackendError,), {})
    return cls(message)


# Common key shapes, scrubbed even when we do not know the key itself (a provider
# may echo a masked key in an error body).
_KEY_PATTERNS = re.compile(
    r"\b(sk-[A-Za-z0-9_\-*]{6,}|sk_[A-Za-z0-9_\-*]{6,}|AIza[0-9A-Za-z_\-]{10,}|xai-[A-Za-z0-9_\-*]{6,}"
    r"|gsk_[A-Za-z0-9_\-*]{6,}|Bearer\s+\S+)"
)


MIN_SECRET = 8


def redact(text: str, *secrets: str | None, key_shapes: bool = True) -> str:
    """Remove ``secrets`` from ``text``, and (``key_shapes``) anything shaped like an API key.

    Model output is scrubbed of the exact key only (``key_shapes=False``), so that a
    reply mentioning, say, "sk-learn" is not altered; error messages get both.
    """
    for secret in secrets:
        # A placeholder key ("x", "none", "EMPTY", as local servers take) is no secret, and
        # removing it wherever it occurs mangled every reply: a body's "text" lost its "x".
        if secret and len(secret) >= MIN_SECRET:
            text = text.replace(secret, "[redacted]")
            # A provider may quote a masked form: the first and last few characters.
            if len(secret) >= 12:
                text = text.replace(secret[-6:], "[redacted]")
    return _KEY_PATTERNS.sub("[redacted]", text) if key_shapes else text
