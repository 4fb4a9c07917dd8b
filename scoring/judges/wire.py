"""What goes over the wire to an OpenAI-compatible judge, and how its answers are read.

The request side follows the :class:`~scoring.judges.server.ServerProfile` a run probed (which
response format, token parameter, seed and temperature the server takes); the answer side
turns a reply into the expected pydantic model or a *short* description of what was wrong
(never the answer itself, which may be as long as the context).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from scoring.judges.server import JSON_OBJECT, JSON_SCHEMA, PROMPT_ONLY

M = TypeVar("M", bound=BaseModel)


def strict_json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema in the strict form OpenAI structured outputs require."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: fix(v) for k, v in node.items() if k not in ("default", "title")}
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            return node
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    result: dict[str, Any] = fix(schema.model_json_schema())
    return result


def response_format(mode: str, schema: type[BaseModel]) -> dict[str, Any] | None:
    if mode == JSON_OBJECT:
        return {"type": "json_object"}
    if mode == PROMPT_ONLY:
        return None
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema.__name__,
            "schema": strict_json_schema(schema),
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
