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


class HTTPStatusError(BackendError):
    """A non-2xx HTTP status.

    Attributes:
        status: The HTTP status code.
        retry_after: Seconds the server asked us to wait, if it said.
    """

    def __init__(self, message: str, status: int = 0, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:  # type: ignore[override]
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

    The server's message names the window and the prompt's tokens ("maximum context
    length is 4096 tokens. However, you requested 5760 tokens (4160 in the messages,
    1600 in the completion)", as llama-cpp-python and vLLM write it); both are read
    from the message, so an error replayed from a cassette carries them too.

    Attributes:
        window: The window the server named, or None.
        prompt_tokens: The prompt's tokens as the server counted them, or None.
    """

    def __init__(self, message: str, status: int = 400, retry_after: float | None = None) -> None:
        super().__init__(message, status, retry_after)
        window = _WINDOW.search(message)
        prompt = _PROMPT.search(message)
        self.window = int(window.group(1)) if window else None
        self.prompt_tokens = int(prompt.group(1)) if prompt else None


_WINDOW = re.compile(r"maximum context length is (\d+) tokens")
_PROMPT = re.compile(r"\((\d+) in (?:the messages|your prompt)")


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
    )
}


def http_error(status: int, message: str, retry_after: float | None = None) -> HTTPStatusError:
    """The typed error for an HTTP status."""
    if status == 429:
        cls: type[HTTPStatusError] = RateLimited
    elif status >= 500:
        cls = ServerError
    elif status in (401, 403):
        cls = AuthenticationError
    elif status in RETRY_STATUSES:
        cls = HTTPStatusError
    elif status == 400 and _WINDOW.search(message):
        cls = ContextOverflow
    else:
        cls = BadRequest
    return cls(message, status, retry_after)


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


def redact(text: str, *secrets: str | None, key_shapes: bool = True) -> str:
    """Remove ``secrets`` from ``text``, and (``key_shapes``) anything shaped like an API key.

    Model output is scrubbed of the exact key only (``key_shapes=False``), so that a
    reply mentioning, say, "sk-learn" is not altered; error messages get both.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
            # A provider may quote a masked form: the first and last few characters.
            if len(secret) >= 12:
                text = text.replace(secret[-6:], "[redacted]")
    return _KEY_PATTERNS.sub("[redacted]", text) if key_shapes else text
