"""What an LLM judge is asked with: its configuration (:class:`LLMConfig`), the options each
request sends where the probed server takes them (answer bound, seed, temperature), the answer
bound fitted to the server's speed and context, the cache key's version and the backoff between
retries. :mod:`scoring.judges.llm` asks; :mod:`scoring.judges.llm_client` connects."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from scoring.judges.server import (
    JSON_OBJECT,
    JSON_SCHEMA,
    LLAMA_CPP,
    ServerProfile,
)

# The smallest answer bound worth asking with (a verdict is ~100-300 tokens), and the tokens a
# chat template adds around the messages.
_MIN_BOUND = 256
_TEMPLATE_TOKENS = 64
# The share of the timeout an answer of the full bound may take at the server's speed.
_SPEED_MARGIN = 0.8


@dataclass
class LLMConfig:
    model: str
    api_key: str = ""
    base_url: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 4
    json_mode: bool = False
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    # Bound on every answer. Reasoning models spend hidden reasoning tokens from the same
    # budget, so the default leaves them room while a looping local model still stops.
    max_answer_tokens: int = 4096
    # Characters each free-text field of an answer may hold, sent as the schema's maxLength
    # only to servers that compile the schema into a grammar (llama.cpp): there a small model
    # otherwise writes its explanation until the token bound cuts the answer mid-string, which
    # fails the call and leaves every later call of the batch without its warm prefix. OpenAI
    # refuses length keywords in strict schemas, so other servers never get it. 0: no bound.
    text_max_chars: int = 600
    temperature: float | None = None
    seed: int | None = 0  # vote n is sent seed + n; None sends no seed
    profile: ServerProfile = field(default_factory=ServerProfile)
    # How long a call waits out a judge that answers nothing before the run pauses, and how
    # many transient failures in a row (no answer in between) make it an outage.
    outage_patience_s: float = 300.0
    breaker_threshold: int = 5
    # Stream answers: a request given up on is then stopped on the server (the connection
    # closes), and a slow server is told apart from a dead one by the tokens it sent.
    stream: bool = True
    # Send calls that open alike (the votes of one question, a repo's batch, a paper's
    # questions) to one llama.cpp slot, where its prompt cache serves what they share
    # (:mod:`scoring.judges.slots`); only where the probe found llama.cpp with several slots.
    pin_slots: bool = True

    @property
    def pinned_slots(self) -> int:
        """The server's slots when calls are pinned to them (``id_slot``), else 0."""
        slots = self.profile.slots or 0
        if self.pin_slots and self.base_url and self.profile.server == LLAMA_CPP and slots > 1:
            return slots
        return 0

    @property
    def grammar(self) -> bool:
        """The answer's schema is compiled into llama.cpp's grammar: it may carry what OpenAI's
        strict mode refuses (length bounds, alternatives at the root)."""
        return self.response_format == JSON_SCHEMA and self.profile.server == LLAMA_CPP

    @property
    def text_bound(self) -> int:
        """The maxLength sent for free-text fields (0: none): only to llama.cpp's grammar."""
        return self.text_max_chars if self.grammar else 0

    @property
    def response_format(self) -> str:
        # JUDGE_JSON_MODE forces the fallback; otherwise what the probe found the server takes.
        return JSON_OBJECT if self.json_mode else self.profile.response_format

    def answer_bound(self, prompt_tokens: int = 0) -> int:
        """The bound sent: ``max_answer_tokens``, lowered so that prompt and answer fit the
        context per request where the probe learnt it (llama.cpp, vLLM)."""
        bound = self.max_answer_tokens
        context = self.profile.context_tokens
        if context and prompt_tokens:
            # The estimate counts four characters a token; code and numbers take more.
            room = context - int(prompt_tokens * 1.25) - _TEMPLATE_TOKENS
            bound = min(bound, max(_MIN_BOUND, room))
        return bound

    def request_options(self, vote_number: int, prompt_tokens: int = 0) -> dict[str, Any]:
        """Bound, seed and temperature, each only where the server takes it."""
        options: dict[str, Any] = {self.profile.token_param: self.answer_bound(prompt_tokens)}
        if self.seed is not None and self.profile.send_seed:
            options["seed"] = self.seed + vote_number
        if self.temperature is not None and self.profile.send_temperature:
            options["temperature"] = self.temperature
        return options

    @property
    def streams(self) -> bool:
        return self.stream and self.profile.stream

    def request_record(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """What the ledger keeps of one request's options (not its messages)."""
        fmt = kwargs.get("response_format")
        record = {
            k: kwargs[k]
            for k in ("model", "temperature", "seed", "max_tokens", "max_completion_tokens")
            if k in kwargs
        }
        extra = kwargs.get("extra_body")
        if isinstance(extra, dict) and "id_slot" in extra:
            record["id_slot"] = extra["id_slot"]
        record["response_format"] = fmt.get("type") if isinstance(fmt, dict) else "none"
        record["stream"] = self.streams
        return record

    def sampling_record(self) -> dict[str, Any]:
        """What a run records about how it asked (so it can be reproduced)."""
        return {
            "response_format": self.response_format,
            "text_max_chars": self.text_bound,
            "max_answer_tokens": self.max_answer_tokens,
            "token_param": self.profile.token_param,
            "stream": self.streams,
            "temperature": self.temperature if self.profile.send_temperature else None,
            "seed": (
                f"{self.seed} + vote number"
                if self.seed is not None and self.profile.send_seed
                else None
            ),
            "pin_slots": self.pinned_slots > 0,
            "probe": self.profile.as_dict(),
        }


def fit_to_server(config: LLMConfig) -> list[str]:
    """Lower the answer bound to what the probed server can produce within the timeout.

    Only a speed the server itself reported (llama.cpp's timings) is trusted: the probe's own
    measure of a 16-token answer includes the network and the prompt, and would cut a remote
    reasoning model's room for no reason. Returns what was changed, in words for the run.
    """
    p = config.profile
    notes: list[str] = []
    if p.tokens_per_s and p.speed_source == "server":
        fits = int(p.tokens_per_s * config.timeout_s * _SPEED_MARGIN)
        if fits < config.max_answer_tokens:
            new = max(_MIN_BOUND // 4, fits)
            notes.append(
                f"answer bound lowered from {config.max_answer_tokens} to {new} tokens: the "
                f"server generates about {p.tokens_per_s:g} tokens/s, and JUDGE_TIMEOUT_S="
                f"{config.timeout_s:g} leaves room for no more (lower JUDGE_MAX_ANSWER_TOKENS "
                "or raise JUDGE_TIMEOUT_S to choose)"
            )
            config.max_answer_tokens = new
    if p.context_tokens and config.max_answer_tokens >= p.context_tokens:
        notes.append(
            f"JUDGE_MAX_ANSWER_TOKENS={config.max_answer_tokens} alone fills the server's "
            f"context of {p.context_tokens} tokens per request: each request's bound is "
            "lowered to what its prompt leaves"
        )
    return notes


def key_version(config: LLMConfig, prompt_version: str) -> str:
    # The cache key must follow what was actually sent. The default request (json_schema, no
    # temperature) keeps the historical key so existing caches stay valid.
    suffix = ""
    if config.response_format != JSON_SCHEMA:
        suffix += f"|{config.response_format}"
    if config.temperature is not None and config.profile.send_temperature:
        suffix += f"|t={config.temperature}"
    if config.grammar:
        # The grammar's schema (bounded text, claims that name a finding) shapes the answer.
        suffix += f"|grammar,text<={config.text_bound}"
    return prompt_version + suffix


def backoff_delay(config: LLMConfig, retry: int, rng: random.Random | None = None) -> float:
    """Full jitter: uniform in [0, min(max, base * 2**retry)]."""
    cap = min(config.backoff_max_s, config.backoff_base_s * (2**retry))
    return (rng or random).uniform(0, cap)
