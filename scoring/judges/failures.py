"""Why votes failed, in words a person can act on.

A failed vote's reason travels as text (into result rows, the ledger, the API), so its kind
travels with it as a ``[kind]`` prefix (see :func:`tag`). :func:`summarize` groups the reasons
of a run into distinct causes with counts, and says for each whether resuming the run can help
or which setting has to change first.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

TRANSIENT = "transient"  # timeouts, connection errors, 429, 5xx: retried, then resumable
CONTEXT = "context"  # the prompt does not fit the server's context, even split
TRUNCATED = "truncated"  # the answer hit the answer bound twice
INVALID = "invalid"  # the answer did not parse or validate twice
REJECTED = "rejected"  # the server refused the request (4xx other than context)
REPLAY = "replay"  # the replay judge has no recorded verdict: asking again cannot change it
SERVER = "server"  # HTTP 200 with something that is not a chat completion: the server's fault
SLOW = "slow"  # the server was generating but could not finish the bound within the timeout
REASONING = "reasoning"  # a reasoning model spent its whole answer bound thinking
PROMPT_CUT = "prompt_cut"  # the server cut the prompt to its context without an error (Ollama)
OTHER = "other"

RESUMABLE = frozenset({TRANSIENT, INVALID})

ADVICE = {
    TRANSIENT: "The judge server was unreachable or overloaded; resume the run to judge these.",
    CONTEXT: "The prompt does not fit the server's context even as a batch of one: start the "
    "server with a larger context per request (llama-server -c N with --parallel P gives N/P "
    "each), lower JUDGE_MAX_ANSWER_TOKENS, or lower CHECKLIST_BODY_WORD_CAP for papers.",
    TRUNCATED: "The model's answer was cut at the answer bound twice: raise "
    "JUDGE_MAX_ANSWER_TOKENS (reasoning models count hidden reasoning against it) or use a "
    "model that follows the JSON schema.",
    INVALID: "The model answered outside the JSON schema twice; resume to ask again, or use a "
    "stronger model (JUDGE_MODELS) or a server that enforces json_schema.",
    REJECTED: "The server refused the request: check OPENAI_BASE_URL, OPENAI_API_KEY and "
    "JUDGE_MODELS, then resume.",
    SERVER: "The server at OPENAI_BASE_URL is not answering as an OpenAI-compatible "
    "chat-completions API (a proxy's page, another API, an empty shell): point OPENAI_BASE_URL "
    "at the server's /v1 endpoint, then resume.",
    SLOW: "The server is live but too slow to finish an answer within JUDGE_TIMEOUT_S: lower "
    "JUDGE_MAX_ANSWER_TOKENS (a CPU model makes a few tokens a second) or raise "
    "JUDGE_TIMEOUT_S, then resume; resuming alone will time out again.",
    REASONING: "A reasoning model spent the whole answer bound thinking and never answered: "
    "raise JUDGE_MAX_ANSWER_TOKENS (reasoning counts against it) or lower the model's "
    "reasoning effort, then resume.",
    PROMPT_CUT: "The server cut prompts to its context without an error (Ollama does), so the "
    "judge never saw them whole: raise its context per request (OLLAMA_CONTEXT_LENGTH=N "
    "ollama serve, or PARAMETER num_ctx N in the model's Modelfile; ollama ps shows the context "
    "in use), or lower CHECKLIST_BODY_WORD_CAP for papers, then resume.",
    REPLAY: "The replay judge only repeats recorded verdicts: add verdicts for these items to "
    "the recording, or evaluate with a live judge (openai:MODEL) or the offline judge.",
    OTHER: "See the error; resume the run once it is fixed.",
}

_TAG = re.compile(r"^\[(\w+)\]\s*")
# Ids and timings vary between otherwise identical failures: they are dropped.
_VARYING = re.compile(r"\b(?:req|chatcmpl)[-_][A-Za-z0-9]+\b|\b\d+(?:\.\d+)?\s*(?:ms|s)\b")
# Other numbers (token counts, sizes) are kept, as a range where the failures differ; an HTTP
# status is part of what the failure is, and a number inside an address or a name is not a count.
_NUMBER = re.compile(r"(?<!HTTP )(?<![\w.:/-])\d[\d,]*(?:\.\d+)?(?![\w:/]|\.\d)")
_SLOT = "\x00"


class JudgeUnavailable(Exception):
    """The judge stayed unreachable for longer than the outage patience.

    Deliberately not a :class:`~scoring.judges.consensus.VoteFailed`: nothing was learnt about
    the item, so it must not be recorded as a failed vote (which would fail the run). It
    propagates out of every judge so that the run pauses ("waiting for judge") and is picked
    up again once the judge answers.
    """

    def __init__(
        self, reason: str, *, model: str = "", base_url: str = "", waited_s: float = 0.0
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.model = model
        self.base_url = base_url
        self.waited_s = waited_s


def tag(kind: str, reason: str) -> str:
    return f"[{kind}] {reason}"


def kind_of(reason: str) -> str:
    m = _TAG.match(reason or "")
    return m.group(1) if m and m.group(1) in ADVICE else OTHER


def _message(reason: str) -> str:
    text = _TAG.sub("", reason or "", count=1).strip()
    return _VARYING.sub("…", text)[:300]


def _fold(message: str) -> tuple[str, tuple[float, ...]]:
    """The message with its numbers taken out, and the numbers."""
    numbers = tuple(float(m.group().replace(",", "")) for m in _NUMBER.finditer(message))
    return _NUMBER.sub(_SLOT, message), numbers


def _number(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}".rstrip("0")


def _unfold(template: str, seen: list[tuple[float, ...]]) -> str:
    """The template with each number as it was, or as the range it took across failures."""
    parts = template.split(_SLOT)
    out = [parts[0]]
    for i, rest in enumerate(parts[1:]):
        values = [numbers[i] for numbers in seen if len(numbers) > i]
        low, high = min(values), max(values)
        out.append(_number(low) if low == high else f"{_number(low)} to {_number(high)}")
        out.append(rest)
    return "".join(out)


@dataclass(frozen=True)
class FailureCause:
    kind: str
    message: str
    count: int
    advice: str

    @property
    def resumable(self) -> bool:
        return self.kind in RESUMABLE

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "message": self.message,
            "count": self.count,
            "resumable": self.resumable,
            "advice": self.advice,
        }


def summarize(reasons: Iterable[str]) -> list[FailureCause]:
    """Distinct causes, most frequent first; ``count`` counts reasons."""
    return summarize_items([reason] for reason in reasons)


def headline(causes: list[FailureCause], failed_items: int) -> str:
    """One paragraph for a run page or CLI: what failed, why, and what to do."""
    if not failed_items:
        return ""
    if not causes:
        return f"{failed_items} item(s) could not be judged; resume the run to judge them."
    # Each message is cut: the run's error is one paragraph, the causes list has the rest.
    parts = [f"{c.count} x {_cut(c.message, 200)}" for c in causes[:5]]
    advice = " ".join(dict.fromkeys(c.advice for c in causes[:5]))
    return f"{failed_items} item(s) could not be judged. Causes: {'; '.join(parts)}. {advice}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def reason_key(reason: str) -> tuple[str, str]:
    """What makes two reasons one cause: their kind and their message without ids and timings.

    A reason that quotes its kind's advice loses the quote: the cause carries the advice.
    """
    kind = kind_of(reason)
    text = reason or ""
    if ADVICE[kind] in text:
        text = text.replace(ADVICE[kind], "").rstrip(" :;,")
    return kind, _message(text)


def cause_key(reason: str) -> tuple[str, str]:
    """What makes two reasons one cause in :func:`summarize_items`: kind and message with its
    ids, timings and numbers taken out."""
    kind, message = reason_key(reason)
    return kind, _fold(message)[0]


def summarize_items(items: Iterable[Iterable[str]]) -> list[FailureCause]:
    """Distinct causes over failed items (each given by its votes' reasons), most frequent first.

    Unlike :func:`summarize`, ``count`` counts items: an item whose three votes failed the same
    way counts once for that cause (an item whose votes failed in two ways counts for both).
    """
    counts: Counter[tuple[str, str]] = Counter()
    numbers: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    for reasons in items:
        keys = {}
        for reason in reasons:
            if not reason:
                continue
            kind, message = reason_key(reason)
            template, seen = _fold(message)
            keys[(kind, template)] = seen
        counts.update(keys.keys())
        for key, seen in keys.items():
            numbers.setdefault(key, []).append(seen)
    return [
        FailureCause(kind=k, message=_unfold(t, numbers[(k, t)]), count=n, advice=ADVICE[k])
        for (k, t), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def details(causes: list[FailureCause], *, indent: str = "  ") -> str:
    """The causes as lines of text for a terminal: count, kind, message, then the advice.

    The advice is marked ``resumable`` when resuming the run can judge the items, and
    ``fix first`` when a setting or the server has to change before a resume can help.
    """
    lines = []
    for c in causes:
        lines.append(f"{indent}{c.count} x {c.kind}: {c.message}")
        lines.append(f"{indent}    {'resumable' if c.resumable else 'fix first'}: {c.advice}")
    return "\n".join(lines)
