"""LLM backends: request/response types, the deterministic stub, and real clients."""

from backends.base import Backend, BackendError, LLMRequest, LLMResponse, Message, Usage
from backends.stub import StubBackend

__all__ = [
    "Backend",
    "BackendError",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "StubBackend",
    "Usage",
]
