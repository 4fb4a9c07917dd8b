"""Reading what a judge server sent back, whatever it sent.

A server that answers HTTP 200 is not necessarily a chat-completions server: a proxy's HTML
page, a JSON content type over a body that is not JSON, a completion with no choices, another
API's ``{"result": "ok"}``, a message whose content is null. None of these is the model's
answer, so none may be judged as one (nor crash the run): :func:`read_body` and
:func:`read_stream` turn every such body into a :class:`ServerFault` that names the server and
quotes the first bytes it sent.

Answers may come streamed (server-sent events): the client then stops a request it gives up
on by closing the connection, which llama.cpp and vLLM take as a cancellation, instead of
leaving the server generating for nobody. A server that ignores ``stream`` and answers one JSON
body is read the same way.

Reasoning models (``reasoning_content`` on llama.cpp, vLLM and DeepSeek; ``reasoning`` on
Ollama and OpenRouter) are read too: their reasoning tokens are counted, and an answer that
spent its whole bound thinking is told apart from an answer that is invalid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# How much of an unexpected body a failure quotes.
FIRST_BYTES = 120


class ServerFault(Exception):
    """The server answered HTTP 200 with something that is not a chat completion."""

    def __init__(self, what: str, *, base_url: str | None, body: str, content_type: str) -> None:
        self.raw = body
        self.what = what
        where = base_url or "https://api.openai.com/v1"
        first = " ".join(body[:FIRST_BYTES].split())
        more = "…" if len(body) > FIRST_BYTES else ""
        kind = content_type.split(";")[0].strip() or "no content type"
        super().__init__(
            f"the server at {where} (OPENAI_BASE_URL) answered HTTP 200 with {what}, "
            f"not a chat completion ({kind}, first bytes: {first!r}{more})"
        )


class AnswerTimeout(TimeoutError):
    """No complete answer within the timeout; ``tokens`` counts what had arrived by then."""

    def __init__(self, seconds: float, tokens: int) -> None:
        self.seconds = seconds
        self.tokens = tokens
        speed = tokens / seconds if seconds > 0 else 0.0
        if tokens:
            text = (
                f"no complete answer within {seconds:.0f} s: the server was still generating "
                f"({tokens} tokens so far, about {speed:.1f} tokens/s)"
            )
        else:
            text = f"no answer within {seconds:.0f} s"
        super().__init__(text)

    @property
    def live(self) -> bool:
        """The server sent tokens: it is slow, not down."""
        return self.tokens > 0


class StreamBroken(Exception):
    """The server reported an error inside a stream it had begun (retried as transient)."""


@dataclass
class Reply:
    content: str | None
    finish_reason: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_reasoning: int = 0
    # Of tokens_in, those the server read from its prompt cache (a prefix it had seen).
    tokens_cached: int = 0
    reasoning: str = ""
    refusal: str = ""
    raw: str = ""
    # Generation speed the server reported (llama.cpp's timings), if any.
    tokens_per_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    @property
    def thought_out(self) -> bool:
        """Cut at the bound while still reasoning: no answer text at all, only thoughts."""
        return self.truncated and not (self.content or "").strip() and bool(self.reasoning)


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _usage(reply: Reply, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    reply.tokens_in = _int(usage.get("prompt_tokens"))
    reply.tokens_out = _int(usage.get("completion_tokens"))
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict):
        reply.tokens_reasoning = _int(details.get("reasoning_tokens"))
    # OpenAI, vLLM and SGLang: the prompt tokens served from the prefix cache.
    prompt_details = usage.get("prompt_tokens_details")
    if isinstance(prompt_details, dict):
        reply.tokens_cached = max(reply.tokens_cached, _int(prompt_details.get("cached_tokens")))


def _timings(reply: Reply, timings: Any) -> None:
    if isinstance(timings, dict):
        speed = timings.get("predicted_per_second")
        if isinstance(speed, int | float) and speed > 0:
            reply.tokens_per_s = float(speed)
        # llama.cpp: the prompt tokens its slot kept from the previous prompt (cache_n); the
        # prompt_n others were evaluated.
        reply.tokens_cached = max(reply.tokens_cached, _int(timings.get("cache_n")))


def _cached_field(reply: Reply, data: dict[str, Any]) -> None:
    # llama.cpp's own completion format says ``tokens_cached`` at the top level.
    reply.tokens_cached = max(reply.tokens_cached, _int(data.get("tokens_cached")))


def _bounded_cache(reply: Reply) -> None:
    # A server never serves more of a prompt from cache than the prompt had.
    if reply.tokens_in:
        reply.tokens_cached = min(reply.tokens_cached, reply.tokens_in)


def _reasoning_of(message: dict[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def read_body(body: str, *, content_type: str, base_url: str | None) -> Reply:
    """One chat completion from a whole body, or :class:`ServerFault`."""

    def fault(what: str) -> ServerFault:
        return ServerFault(what, base_url=base_url, body=body, content_type=content_type)

    if not body.strip():
        raise fault("an empty body")
    try:
        data = json.loads(body)
    except ValueError:
        if "json" in content_type.lower():
            raise fault("a JSON content type over a body that is not JSON") from None
        raise fault("a body that is not JSON") from None
    if not isinstance(data, dict):
        raise fault("JSON that is not an object")
    choices = data.get("choices")
    if not isinstance(choices, list):
        raise fault("JSON without 'choices'")
    if not choices or not isinstance(choices[0], dict):
        raise fault("a completion with no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise fault("a choice without a message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise fault("a message whose content is not text")
    reply = Reply(
        content=content,
        finish_reason=choice.get("finish_reason"),
        reasoning=_reasoning_of(message),
        refusal=str(message.get("refusal") or ""),
    )
    _usage(reply, data.get("usage"))
    _timings(reply, data.get("timings"))
    _cached_field(reply, data)
    _bounded_cache(reply)
    _check_message(reply, fault)
    # The ledger keeps the answer's text, as it was before parsing (the body's envelope says
    # nothing more); a reply without text keeps what explains it.
    reply.raw = reply.content or reply.refusal or reply.reasoning
    return reply


def _check_message(reply: Reply, fault: Any) -> None:
    # Null content is an answer only when something explains it: the bound was reached (while
    # reasoning or not) or the model refused. Otherwise the server sent an empty shell.
    if reply.content is None and not reply.truncated and not reply.refusal:
        raise fault("a message whose content is null")


class StreamReader:
    """Accumulates a streamed chat completion (server-sent events), line by line."""

    def __init__(self, *, content_type: str, base_url: str | None) -> None:
        self.content_type = content_type
        self.base_url = base_url
        self.parts: list[str] = []
        self.thoughts: list[str] = []
        self.lines: list[str] = []
        self.reply = Reply(content=None, finish_reason=None)
        self.chunks = 0
        self.tokens_seen = 0  # content and reasoning pieces: about one token each
        self.done = False
        self.refusal: list[str] = []

    def _fault(self, what: str) -> ServerFault:
        return ServerFault(
            what,
            base_url=self.base_url,
            body="\n".join(self.lines),
            content_type=self.content_type,
        )

    def feed(self, line: str) -> None:
        if len(self.lines) < 40:
            self.lines.append(line)
        line = line.strip()
        if not line or line.startswith(":") or self.done:
            return
        if line.startswith(("event:", "id:", "retry:")):
            return
        if not line.startswith("data:"):
            raise self._fault("a stream line that is not an event")
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            raise self._fault("a stream event that is not JSON") from None
        if not isinstance(chunk, dict):
            raise self._fault("a stream event that is not an object")
        if "error" in chunk and "choices" not in chunk:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise StreamBroken(f"the server broke off its answer: {str(message)[:300]}")
        self.chunks += 1
        if chunk.get("usage"):
            _usage(self.reply, chunk["usage"])
        _timings(self.reply, chunk.get("timings"))
        _cached_field(self.reply, chunk)
        choices = chunk.get("choices")
        if choices is None and chunk.get("usage") is None:
            raise self._fault("a stream event without 'choices'")
        for choice in choices or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise self._fault("a stream event whose delta is not an object")
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.parts.append(text)
                self.tokens_seen += 1
            thought = _reasoning_of(delta)
            if thought:
                self.thoughts.append(thought)
                self.tokens_seen += 1
            if delta.get("refusal"):
                self.refusal.append(str(delta["refusal"]))
            if choice.get("finish_reason"):
                self.reply.finish_reason = choice["finish_reason"]

    def finish(self) -> Reply:
        if not self.chunks:
            raise self._fault("an empty stream" if not self.lines else "a stream with no answer")
        reply = self.reply
        reply.content = "".join(self.parts) if self.parts else None
        reply.reasoning = "".join(self.thoughts)
        reply.refusal = "".join(self.refusal)
        reply.raw = reply.content or reply.refusal or reply.reasoning
        if not reply.tokens_out:
            # No usage in the stream (a server that ignores stream_options): count pieces.
            reply.tokens_out = self.tokens_seen
        _bounded_cache(reply)
        _check_message(reply, self._fault)
        return reply


# The request fields that the client library would otherwise walk on every call.
_PLAIN_FIELDS = ("messages", "response_format")


def _untransformed(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the messages and the response format passed as ``extra_body``: the
    same JSON goes out, without the client library's per-call transform.

    ``create`` walks every parameter through its typed-dict annotations (the messages match a
    union of six message types) to rename and format fields; plain strings and dicts come out
    as they went in. That walk cost 0.5 ms of CPU per call on a loaded 2-core machine (1,000
    calls per audit run, on the same cores as the calls' scheduling); ``extra_body`` is
    merged into the request body as it is.
    """
    plain = {k: kwargs[k] for k in _PLAIN_FIELDS if k in kwargs}
    if not plain:
        return kwargs
    rest = {k: v for k, v in kwargs.items() if k not in plain}
    # ``messages`` stays a required argument of ``create``: an empty list that extra_body's
    # value replaces (the body's keys keep their order).
    return {**rest, "messages": [], "extra_body": {**rest.get("extra_body", {}), **plain}}


async def send(
    client: Any,
    kwargs: dict[str, Any],
    *,
    stream: bool,
    timeout_s: float,
    base_url: str | None,
) -> Reply:
    """Send one chat-completions request and read the reply (see the module docstring).

    Raises the client's own errors for HTTP errors and connection failures, :class:`ServerFault`
    for a 200 that is not a completion, :class:`AnswerTimeout` when no complete answer came
    within ``timeout_s`` (the connection is closed: a streaming server stops generating).
    """
    import asyncio

    kwargs = _untransformed(kwargs)
    if not stream:
        raw = await client.chat.completions.with_raw_response.create(**kwargs)
        http = raw.http_response
        return read_body(
            http.text, content_type=http.headers.get("content-type", ""), base_url=base_url
        )
    kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
    reader: StreamReader | None = None
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with asyncio.timeout(timeout_s):
            async with client.chat.completions.with_streaming_response.create(**kwargs) as resp:
                content_type = resp.headers.get("content-type", "")
                if "event-stream" not in content_type.lower():
                    # A server that ignores ``stream``: one body, read as such.
                    body = (await resp.read()).decode("utf-8", errors="replace")
                    return read_body(body, content_type=content_type, base_url=base_url)
                reader = StreamReader(content_type=content_type, base_url=base_url)
                async for line in resp.iter_lines():
                    reader.feed(line)
                return reader.finish()
    except TimeoutError as exc:
        if isinstance(exc, AnswerTimeout):
            raise
        tokens = reader.tokens_seen if reader is not None else 0
        raise AnswerTimeout(loop.time() - started, tokens) from None
