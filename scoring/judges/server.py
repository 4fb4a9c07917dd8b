"""What an OpenAI-compatible server accepts, and how its failures are told apart.

Real servers differ from the OpenAI API in ways that decide whether a run finishes:

* which ``response_format`` they enforce (``json_schema`` with a grammar, only ``json_object``,
  or none), whether they take ``max_completion_tokens`` or only ``max_tokens``, a ``seed``, a
  ``temperature``. :func:`probe_server` finds out with one cheap call when a run starts, and the
  run records the :class:`ServerProfile` it used;
* how they say a prompt does not fit: llama.cpp answers HTTP 400 ``exceed_context_size_error``
  (with ``n_prompt_tokens`` and ``n_ctx``) for one request that is too long, and HTTP 500
  "Context size has been exceeded" when requests *in flight together* overflow a shared context;
  OpenAI and vLLM answer 400 "maximum context length is N tokens".
  :func:`context_error` recognises all of them, so the caller can split the batch (the same
  question over fewer candidates) or narrow its concurrency instead of retrying into the wall;
  Ollama says nothing at all and answers a prompt cut to its context: :func:`prompt_cut` tells
  that from the prompt tokens it reports;
* what the server says it can do: llama.cpp's ``/props``, vLLM's ``max_model_len``, Ollama's
  ``/api/version`` and the loaded model's context (:func:`server_limits`);
* :class:`AdaptiveLimiter` is the concurrency gate that narrows to one call at a time on such an
  overflow and widens again after a run of successes.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from scoring.judges.reply import AnswerTimeout, ServerFault, StreamBroken, send

if TYPE_CHECKING:
    import openai

# Response formats, from the strictest to none at all.
JSON_SCHEMA = "json_schema"
JSON_OBJECT = "json_object"
PROMPT_ONLY = "none"
RESPONSE_FORMATS = (JSON_SCHEMA, JSON_OBJECT, PROMPT_ONLY)


@dataclass(frozen=True)
class ServerProfile:
    """The request options a server accepted; recorded on every run that used them."""

    response_format: str = JSON_SCHEMA
    token_param: str = "max_completion_tokens"
    send_seed: bool = True
    send_temperature: bool = True
    stream: bool = True
    probed: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What the server answered to the probe, where it said: a reply that is not a chat
    # completion (``fault``), its context per request and slots (llama.cpp's /props, vLLM's
    # max_model_len), its generation speed, and whether it reasons before answering.
    fault: str = ""
    context_tokens: int | None = None
    slots: int | None = None
    tokens_per_s: float | None = None
    speed_source: str = ""  # "server" (llama.cpp's timings) or "measured" (probe's latency)
    reasoning: bool = False
    # Which server it is, where it says: "llama.cpp" (/props), "vllm" (max_model_len),
    # "ollama" (/api/version); empty when it does not say.
    server: str = ""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data


@dataclass(frozen=True)
class ContextError:
    """A server's word that a request does not fit its context."""

    shared: bool  # the overflow came from requests in flight together, not from this one alone
    prompt_tokens: int | None
    context_tokens: int | None
    message: str


_CONTEXT_PATTERNS = re.compile(
    r"exceed_context_size|context_length_exceeded|maximum context length|context size has been "
    r"exceeded|exceeds the available context|larger than the max context|longer than the "
    r"maximum model length|prompt is too long|context window",
    re.IGNORECASE,
)
_NUMBERS = (
    re.compile(r"\((\d+) tokens\)[^()]*?\((\d+) tokens\)"),  # llama.cpp: request (P) ... (C)
    re.compile(r"maximum context length is (\d+) tokens.*?(\d+) tokens", re.IGNORECASE | re.DOTALL),
)


def error_body(exc: BaseException) -> dict[str, Any]:
    """The JSON error object of an API error, whatever nesting the server used."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        return inner if isinstance(inner, dict) else {"message": str(inner)}
    response = getattr(exc, "response", None)
    if response is not None:
        try:
            data = json.loads(response.text)
        except (ValueError, AttributeError):
            return {}
        if isinstance(data, dict):
            inner = data.get("error", data)
            return inner if isinstance(inner, dict) else {"message": str(inner)}
    return {}


def raw_error(exc: BaseException) -> str:
    """The error's body as the server sent it, where there was one (for the ledger)."""
    try:
        text = getattr(getattr(exc, "response", None), "text", None)
    except Exception:  # a streamed body that was never read
        text = None
    if isinstance(text, str) and text:
        return text
    body = getattr(exc, "body", None)
    if body is None:
        return ""
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)


def error_message(exc: BaseException) -> str:
    """One line: the status code and the server's own message, without the client's noise."""
    body = error_body(exc)
    message = str(body.get("message") or exc).strip().replace("\n", " ")
    status = getattr(exc, "status_code", None)
    prefix = f"HTTP {status} " if status else ""
    return f"{type(exc).__name__}: {prefix}{message}"[:600]


def context_error(exc: BaseException) -> ContextError | None:
    """A :class:`ContextError` when ``exc`` says the prompt did not fit, else ``None``."""
    import openai  # imported where used: loading the judges must not load the client

    if not isinstance(exc, openai.APIStatusError):
        return None
    body = error_body(exc)
    text = " ".join(str(body.get(k) or "") for k in ("message", "type", "code")) or str(exc)
    if not _CONTEXT_PATTERNS.search(text):
        return None
    prompt = body.get("n_prompt_tokens")
    context = body.get("n_ctx")
    if prompt is None or context is None:
        for pattern in _NUMBERS:
            m = pattern.search(text)
            if m:
                first, second = int(m.group(1)), int(m.group(2))
                if pattern is _NUMBERS[0]:
                    prompt, context = first, second
                else:
                    context, prompt = first, second
                break
    # llama.cpp's 500 means the slots' *shared* context overflowed while several requests were
    # decoding together: the same request alone may well fit.
    shared = exc.status_code >= 500
    return ContextError(
        shared=shared,
        prompt_tokens=int(prompt) if prompt is not None else None,
        context_tokens=int(context) if context is not None else None,
        message=str(body.get("message") or exc)[:300],
    )


def is_transient(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError | StreamBroken):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, asyncio.TimeoutError)


class AdaptiveLimiter:
    """A concurrency gate of ``width`` that narrows to 1 on a shared-context overflow.

    After ``widen_after`` successes in a row it lets one more call through again, up to the
    configured width: a server whose slots share one context is driven as wide as it copes with.
    """

    def __init__(self, width: int, *, widen_after: int = 8) -> None:
        self.max_width = max(1, int(width))
        self.width = self.max_width
        self.widen_after = widen_after
        self.in_flight = 0
        self.narrowed = 0
        self._streak = 0
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        # Created lazily so that the gate belongs to the loop that uses it.
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.in_flight < self.width)
            self.in_flight += 1
        try:
            yield
        finally:
            async with cond:
                self.in_flight -= 1
                cond.notify_all()

    def succeeded(self) -> None:
        self._streak += 1
        if self.width < self.max_width and self._streak >= self.widen_after:
            self.width += 1
            self._streak = 0

    def narrow(self) -> None:
        self._streak = 0
        if self.width > 1:
            self.width = 1
            self.narrowed += 1


# --- probing --------------------------------------------------------------------------------

_PROBE_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


def _rejects(exc: openai.APIStatusError, *words: str) -> bool:
    text = f"{json.dumps(error_body(exc))} {exc}".lower()
    return any(w in text for w in words)


async def probe_server(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    temperature: float | None,
    timeout_s: float = 60.0,
    preferred_format: str = JSON_SCHEMA,
    base_url: str | None = None,
    stream: bool = True,
) -> ServerProfile:
    """Find the request options the server takes, with one small call (a few on refusals).

    Only an explicit 4xx refusal changes an option; a server that cannot be reached keeps the
    defaults (the run's own calls then retry and record why they failed).
    """
    import openai

    profile = ServerProfile(response_format=preferred_format, probed=True, stream=stream)
    for _ in range(6):
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": 'Reply with the JSON object {"ok": true}.'}],
            profile.token_param: 16,
            "timeout": timeout_s,
        }
        if profile.response_format == JSON_SCHEMA:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "Probe", "schema": _PROBE_SCHEMA, "strict": True},
            }
        elif profile.response_format == JSON_OBJECT:
            kwargs["response_format"] = {"type": "json_object"}
        if profile.send_seed:
            kwargs["seed"] = 1
        if temperature is not None and profile.send_temperature:
            kwargs["temperature"] = temperature
        started = time.perf_counter()
        try:
            reply = await send(
                client,
                kwargs,
                stream=profile.stream,
                timeout_s=timeout_s,
                base_url=base_url,
            )
        except ServerFault as fault:
            note = f"server fault: {fault}"
            return replace(profile, fault=str(fault), notes=(*profile.notes, note))
        except (AnswerTimeout, StreamBroken) as exc:
            return replace(profile, notes=(*profile.notes, f"probe failed: {exc}"))
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (401, 403, 404, 408, 429):
                note = f"probe inconclusive: {error_message(exc)}"
                return replace(profile, notes=(*profile.notes, note))
            if profile.stream and _rejects(exc, "stream_options", "streaming"):
                profile = replace(profile, stream=False, notes=(*profile.notes, "no streaming"))
                continue
            if profile.token_param == "max_completion_tokens" and _rejects(
                exc, "max_completion_tokens"
            ):
                profile = replace(profile, token_param="max_tokens")
            elif profile.send_seed and _rejects(exc, "seed"):
                profile = replace(profile, send_seed=False, notes=(*profile.notes, "no seed"))
            elif (
                profile.send_temperature
                and temperature is not None
                and _rejects(exc, "temperature")
            ):
                profile = replace(
                    profile, send_temperature=False, notes=(*profile.notes, "no temperature")
                )
            elif profile.response_format != PROMPT_ONLY and _rejects(
                exc, "response_format", "json_schema", "json_object", "schema"
            ):
                nxt = RESPONSE_FORMATS[RESPONSE_FORMATS.index(profile.response_format) + 1]
                note = f"{profile.response_format} refused: {error_message(exc)[:200]}"
                profile = replace(profile, response_format=nxt, notes=(*profile.notes, note))
            else:
                note = f"probe refused: {error_message(exc)}"
                return replace(profile, notes=(*profile.notes, note))
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            return replace(profile, notes=(*profile.notes, f"probe failed: {error_message(exc)}"))
        else:
            elapsed = time.perf_counter() - started
            speed, source = reply.tokens_per_s, "server"
            if speed is None and reply.tokens_out >= 4 and elapsed > 0:
                # Includes the prompt's processing: a lower bound of the generation speed.
                speed, source = reply.tokens_out / elapsed, "measured"
            limits = await server_limits(client, base_url=base_url, model=model)
            return replace(
                profile,
                tokens_per_s=round(speed, 2) if speed else None,
                speed_source=source if speed else "",
                reasoning=bool(reply.reasoning or reply.tokens_reasoning),
                context_tokens=limits.context,
                slots=limits.slots,
                server=limits.server,
                notes=(*profile.notes, *limits.notes),
            )
    return profile


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


async def _get_json(client: Any, url: str) -> Any:
    try:
        return await client.get(url, cast_to=dict, options={"timeout": 10.0})
    except Exception:  # not offered by this server (404, not JSON, ...): nothing learnt
        return None


OLLAMA = "ollama"
LLAMA_CPP = "llama.cpp"
VLLM = "vllm"


@dataclass(frozen=True)
class ServerLimits:
    context: int | None = None  # tokens per request
    slots: int | None = None
    server: str = ""
    notes: tuple[str, ...] = ()


async def _post_json(client: Any, url: str, body: dict[str, Any]) -> Any:
    try:
        return await client.post(url, cast_to=dict, body=body, options={"timeout": 10.0})
    except Exception:  # not offered by this server: nothing learnt
        return None


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


async def _ollama_context(client: Any, root: str, model: str) -> int | None:
    """The context Ollama gives ``model`` per request: ``/api/ps`` says it for a loaded model
    (the probe has just loaded it), ``/api/show`` where the model sets ``num_ctx``."""
    running = await _get_json(client, f"{root}/api/ps")
    entries = running.get("models") if isinstance(running, dict) else None
    names = {model, f"{model}:latest"}
    for entry in entries if isinstance(entries, list) else []:
        named = isinstance(entry, dict) and {entry.get("name"), entry.get("model")} & names
        if named and (context := _positive(entry.get("context_length"))):
            return context
    shown = await _post_json(client, f"{root}/api/show", {"model": model})
    parameters = shown.get("parameters") if isinstance(shown, dict) else None
    m = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    return int(m.group(1)) if m else None


async def server_limits(client: Any, *, base_url: str | None, model: str) -> ServerLimits:
    """What the server says of itself: llama.cpp's ``/props``
    (``default_generation_settings.n_ctx`` is one slot's context, ``total_slots``), vLLM's
    ``max_model_len`` on ``/v1/models``, Ollama's ``/api/version`` and the model's context
    (:func:`_ollama_context`). ``None`` for what it does not say."""
    if not base_url:
        return ServerLimits()  # the OpenAI API: none of it is published
    api = base_url.rstrip("/")
    root = api[: -len("/v1")] if api.endswith("/v1") else api
    version = await _get_json(client, f"{root}/api/version")
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        # Ollama answers a prompt over its context without an error, cut to fit: the run must
        # know it talks to Ollama to notice (see :func:`prompt_cut`).
        context = await _ollama_context(client, root, model)
        where = f"{context} tokens per request" if context else "not published"
        note = (
            f"Ollama {version['version']}: context {where}; a prompt over it is cut without "
            "an error (noticed from the prompt tokens it reports; OLLAMA_CONTEXT_LENGTH or "
            "the model's num_ctx raises it)"
        )
        return ServerLimits(context=context, server=OLLAMA, notes=(note,))
    context = slots = None
    server = ""
    props = await _get_json(client, f"{root}/props")
    if isinstance(props, dict):
        slots = _positive(props.get("total_slots"))
        settings = props.get("default_generation_settings")
        if isinstance(settings, dict):
            context = _positive(settings.get("n_ctx"))
        context = context or _positive(props.get("n_ctx"))
        server = LLAMA_CPP if context or slots else ""
    if context is None:
        models = await _get_json(client, f"{api}/models")
        data = models.get("data") if isinstance(models, dict) else None
        for entry in data if isinstance(data, list) else []:
            if isinstance(entry, dict) and entry.get("id") in (model, None):
                context = _positive(entry.get("max_model_len"))
                break
        else:
            if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
                context = _positive(data[0].get("max_model_len"))
        server = VLLM if context else server
    return ServerLimits(context=context, slots=slots, server=server)


# A prompt the server reports at its whole context (less this slack) was cut to fit it.
_FULL_SLACK = 8
# Without a known context: Ollama reports this much fewer prompt tokens than were estimated
# (four characters a token; real tokenizers count more for code and numbers, never 1.5x
# fewer), over a prompt of at least this many tokens.
_CUT_RATIO = 1.5
_CUT_FLOOR = 1024


def prompt_cut(profile: ServerProfile, *, estimated: int, reported: int) -> ContextError | None:
    """A :class:`ContextError` when the server's reported prompt tokens show it cut the prompt
    to fit its context without saying so (Ollama does), else ``None``.

    Any server that reports a prompt filling its whole known context cut it (nothing would be
    left for the answer). For Ollama without a known context, a reported count far below the
    estimate of a long prompt is the cut. Other servers report small counts for small prompts,
    and refuse an overlong prompt with an error instead.
    """
    if reported <= 0:
        return None
    context = profile.context_tokens
    full = bool(context) and reported >= (context or 0) - _FULL_SLACK
    short = (
        profile.server == OLLAMA and reported >= _CUT_FLOOR and estimated >= reported * _CUT_RATIO
    )
    if not (full or short):
        return None
    return ContextError(
        shared=False,
        prompt_tokens=max(estimated, reported),
        context_tokens=context or reported,
        message=(
            f"the server kept {reported:,} prompt tokens of about {estimated:,} sent: it cut "
            "the prompt to its context without an error"
        ),
    )
