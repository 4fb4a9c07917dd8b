"""The transport of the LLM judges: an ``openai.AsyncOpenAI`` client per run, with its own
retries off (:func:`scoring.judges.llm.structured_call` retries) and the process's one TLS
context. ``openai`` is imported only here and only when a client is made, so importing the
judges stays light."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai
from scoring.judges.llm_config import LLMConfig


def make_client(config: LLMConfig, http_client: Any = None) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` client whose own retries are off: :func:`structured_call` retries.

    The client's pooled connections belong to the event loop that first used them: create one
    client per loop (per run) and close it in that loop.
    """
    kwargs: dict[str, Any] = {
        "api_key": config.api_key or "not-needed",
        "timeout": config.timeout_s,
        "max_retries": 0,
    }
    if config.base_url:
        kwargs["base_url"] = config.base_url
    import openai  # only where a client is made: importing the judges stays light

    # The process's one verifying TLS context, not one per client (see _tls_context).
    kwargs["http_client"] = http_client or openai.DefaultAsyncHttpxClient(verify=_tls_context())
    return openai.AsyncOpenAI(**kwargs)


@functools.lru_cache(maxsize=1)
def _tls_context() -> Any:
    """The TLS context every client of this process verifies servers with (the client
    library's default one, made once).

    Making one loads the CA bundle: about 50 ms of CPU, holding the GIL. A worker that drives
    eleven run pieces builds eleven clients at once, and no call went out for half a second.
    A context is safe to share between clients, threads and event loops.
    """
    import httpx2  # the client library's HTTP layer, imported with it

    return httpx2.create_ssl_context()


def client_warm_up() -> None:
    """Load the client library and its TLS context now, before a process builds many clients
    at once (each would otherwise wait on the import lock and the GIL)."""
    import anyio

    # The library, and what its first call would load in each process: the chat resource
    # (``client.chat`` imports it on first use, about 0.15 CPU-s) and the parts of the HTTP
    # layer's socket support that anyio imports lazily. Loaded before a fork, the helpers
    # share them (each imported them itself once the run's calls had started).
    import openai.resources.chat.chat  # noqa: F401

    anyio.connect_tcp  # noqa: B018 - the attribute's first use imports it
    anyio.create_memory_object_stream  # noqa: B018

    _tls_context()
