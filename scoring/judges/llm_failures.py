"""Why an LLM call failed on the server's limits, in words that name the setting to change:
a prompt that does not fit the context (:class:`ContextOverflow`, which the caller may answer
by splitting its batch), a prompt the server cut to its context without saying so, and an
answer the server could not finish within the timeout."""

from __future__ import annotations

from scoring.judges import failures
from scoring.judges.consensus import VoteFailed
from scoring.judges.llm_config import LLMConfig
from scoring.judges.reply import AnswerTimeout
from scoring.judges.server import ContextError


class ContextOverflow(VoteFailed):
    """This request alone does not fit the server's context: ask about fewer candidates."""

    def __init__(self, reason: str, *, detail: ContextError) -> None:
        super().__init__(reason)
        self.detail = detail


def slow_reason(config: LLMConfig, timeout: AnswerTimeout) -> str:
    speed = timeout.tokens / timeout.seconds if timeout.seconds > 0 else 0.0
    need = config.max_answer_tokens / speed if speed > 0 else 0.0
    return (
        f"{timeout}; an answer of up to {config.max_answer_tokens} tokens "
        f"(JUDGE_MAX_ANSWER_TOKENS) needs about {need:.0f} s at that speed, more than "
        f"JUDGE_TIMEOUT_S={config.timeout_s:.0f}"
    )


def cut_reason(cut: ContextError, config: LLMConfig) -> str:
    if config.profile.server == "ollama":
        return (
            f"Ollama at {config.base_url}: {cut.message}; raise its context "
            "(OLLAMA_CONTEXT_LENGTH=N ollama serve, or the model's num_ctx)"
        )
    return f"the server at {config.base_url}: {cut.message}; give it a larger context"


def overflow_error(message: str, overflow: ContextError, bound: int = 0) -> ContextOverflow:
    sizes = ""
    if overflow.prompt_tokens and overflow.context_tokens:
        sizes = f" (prompt {overflow.prompt_tokens:,} tokens, context {overflow.context_tokens:,})"
    if bound and overflow.context_tokens and bound >= overflow.context_tokens:
        # No split can help: the answer bound alone takes the whole context.
        message = (
            f"the answer bound alone fills the context: JUDGE_MAX_ANSWER_TOKENS={bound:,} "
            f"against a context of {overflow.context_tokens:,} tokens per request; lower "
            f"JUDGE_MAX_ANSWER_TOKENS or give the server a larger context ({message})"
        )
    return ContextOverflow(failures.tag(failures.CONTEXT, f"{message}{sizes}"), detail=overflow)
