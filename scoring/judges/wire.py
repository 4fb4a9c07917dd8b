"""What goes over the wire to an OpenAI-compatible judge, and how its answers are read.

The request side follows the :class:`~scoring.judges.server.ServerProfile` a run probed (which
response format, token parameter, seed and temperature the server takes); the answer side
turns a reply into the expected pydantic model or a *short* description of what was wrong
(never the answer itself, which may be as long as the context).
"""

from __future__ import annotations

import functools
import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from scoring.judges.server import JSON_OBJECT, JSON_SCHEMA, PROMPT_ONLY

M = TypeVar("M", bound=BaseModel)


# A field's own bound on its text, declared in the model (``json_schema_extra``): sent as
# ``maxLength`` (capped by ``text_bound``) where the text is bounded, dropped everywhere else.
MAX_CHARS = "x-max-chars"


def strict_json_schema(schema: type[BaseModel], *, text_bound: int = 0) -> dict[str, Any]:
    """The model's JSON schema in the strict form OpenAI structured outputs require (a fresh
    copy: the caller may change it); with ``text_bound``, every free-text string (no enum,
    const or pattern) also gets a ``maxLength``: its field's :data:`MAX_CHARS` or
    ``text_bound``, whichever is lower (for llama.cpp's grammar; OpenAI's strict mode refuses
    length keywords)."""
    result: dict[str, Any] = json.loads(_strict_schema_text(schema, text_bound))
    return result


# Every judge call sends its schema, and pydantic builds a model's JSON schema from scratch each
# time (0.3 ms of CPU per call on a loaded 2-core machine, 1,000 calls per audit run): built
# once per model class. The audit's per-batch models are cached classes too
# (``batch_verdict_schema``), so the same class comes back for the same batch.
@functools.lru_cache(maxsize=1024)
def _strict_schema_text(schema: type[BaseModel], text_bound: int) -> str:
    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            own = node.get(MAX_CHARS)
            skip = ("default", "title", MAX_CHARS)
            node = {k: fix(v) for k, v in node.items() if k not in skip}
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            free_text = not {"enum", "const", "pattern", "maxLength"} & set(node)
            if text_bound and node.get("type") == "string" and free_text:
                node["maxLength"] = min(text_bound, int(own or text_bound))
            return node
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return json.dumps(fix(schema.model_json_schema()))


def response_format(
    mode: str, schema: type[BaseModel], *, text_bound: int = 0
) -> dict[str, Any] | None:
    if mode == JSON_OBJECT:
        return {"type": "json_object"}
    if mode == PROMPT_ONLY:
        return None
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema.__name__,
            "schema": strict_json_schema(schema, text_bound=text_bound),
            "strict": True,
        },
    }


def system_text(mode: str, system: str, schema: type[BaseModel]) -> str:
    if mode == JSON_SCHEMA:
        return system
    # Without json_schema the server guarantees at most *some* JSON: the schema travels in the
    # prompt.
    return (
        f"{system}\n\nAnswer with a single JSON object, no prose, matching this JSON schema:\n"
        f"{json.dumps(strict_json_schema(schema), sort_keys=True)}"
    )


def parse_answer(schema: type[M], content: str | None) -> tuple[M | None, str]:
    """The parsed answer, or a *short* description of the problem (never the answer itself)."""
    if not content:
        return None, "empty answer"
    text = content.strip()
    if text.startswith("```"):
        # Some compatible servers wrap JSON in a code fence even in JSON mode.
        text = text.strip("`")
        text = text[text.find("{") :] if "{" in text else text
    try:
        return schema.model_validate_json(text), ""
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False, include_context=False)[:3]
        ]
        return None, f"answer does not match {schema.__name__}: {'; '.join(problems)}"[:300]


def correction(problem: str, *, truncated: bool, bound: int) -> str:
    """What is added to the question when it is asked again after an invalid answer."""
    if truncated:
        return (
            f"\n\nNote: a previous answer to this question was invalid: it was cut off after "
            f"{bound} tokens. Answer again with only the JSON object and keep every text field "
            "to at most three short sentences."
        )
    return (
        f"\n\nNote: a previous answer to this question was invalid ({problem}). Answer again, "
        "following the instructions and the JSON schema exactly, with only the JSON object."
    )
