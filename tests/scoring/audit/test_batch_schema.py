"""The audit judge's answer schema names the batch's findings, so a server that enforces
json_schema (llama.cpp's grammar, vLLM) cannot answer an index that is not in the batch."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from scoring.audit.types import AuditVerdict, batch_verdict_schema
from scoring.judges.wire import JSON_OBJECT, JSON_SCHEMA, response_format, strict_json_schema

VERDICT = {
    "is_match": True,
    "is_partial_match": False,
    "explanation": "same issue",
    "severity_from_junior_auditor": "High",
    "severity_from_truth": "High",
}


def test_the_schema_allows_the_batch_indices_and_minus_one_only() -> None:
    schema = batch_verdict_schema((5, 6, 7))
    sent = strict_json_schema(schema)["properties"]["index_of_finding_from_junior_auditor"]
    assert sent == {"enum": [-1, 5, 6, 7], "type": "integer"}
    for index in (-1, 5, 7):
        verdict = schema.model_validate({**VERDICT, "index_of_finding_from_junior_auditor": index})
        assert isinstance(verdict, AuditVerdict) and verdict.label == "match"
    with pytest.raises(ValidationError):
        schema.model_validate({**VERDICT, "index_of_finding_from_junior_auditor": 512})
    assert batch_verdict_schema((5, 6, 7)) is schema  # one class per batch, not per call


def test_the_request_carries_it_as_the_json_schema() -> None:
    fmt = response_format(JSON_SCHEMA, batch_verdict_schema((0, 3)))
    assert fmt is not None and fmt["json_schema"]["name"] == "AuditVerdict"
    index = fmt["json_schema"]["schema"]["properties"]["index_of_finding_from_junior_auditor"]
    assert index["enum"] == [-1, 0, 3]
    assert response_format(JSON_OBJECT, batch_verdict_schema((0, 3))) == {"type": "json_object"}


def test_free_text_is_bounded_for_llama_cpp_only_and_the_cache_key_says_so() -> None:
    """A 135M model on llama.cpp wrote its explanation until the token bound cut the answer
    (512 tokens, unparseable); its grammar holds a maxLength. OpenAI's strict mode refuses
    length keywords, so a server not known to be llama.cpp never gets one."""
    from scoring.judges.llm_config import LLMConfig, key_version
    from scoring.judges.server import LLAMA_CPP, ServerProfile

    schema = batch_verdict_schema((1, 2))
    local = LLMConfig(model="m", profile=ServerProfile(server=LLAMA_CPP))
    remote = LLMConfig(model="m", profile=ServerProfile(server=""))
    assert (local.text_bound, remote.text_bound) == (600, 0)

    bounded = response_format(JSON_SCHEMA, schema, text_bound=local.text_bound)
    assert bounded is not None
    props = bounded["json_schema"]["schema"]["properties"]
    # Each field's own bound (a severity is a word), under the config's ceiling.
    assert {k: v.get("maxLength") for k, v in props.items() if v.get("type") == "string"} == {
        "explanation": 400,
        "severity_from_junior_auditor": 24,
        "severity_from_truth": 24,
    }
    lowered = response_format(JSON_SCHEMA, schema, text_bound=100)
    assert lowered is not None
    assert lowered["json_schema"]["schema"]["properties"]["explanation"]["maxLength"] == 100
    # Fields with their own shape (booleans, the enum of indices) keep it.
    assert "maxLength" not in props["index_of_finding_from_junior_auditor"]
    plain = response_format(JSON_SCHEMA, schema, text_bound=remote.text_bound)
    # Nothing of the bounds reaches other servers: no maxLength, no private keyword.
    assert plain is not None and "maxLength" not in json.dumps(plain)
    assert "x-max-chars" not in json.dumps(plain)

    # What was sent is in the cache key: a bounded answer is not served to an unbounded ask.
    assert key_version(remote, "v2") == "v2"
    assert key_version(local, "v2") == "v2|grammar,text<=600"
    # Off by setting, and never with the json_object fallback (no grammar from a schema).
    assert LLMConfig(model="m", profile=local.profile, text_max_chars=0).text_bound == 0
    assert LLMConfig(model="m", profile=local.profile, json_mode=True).text_bound == 0


def test_under_a_grammar_a_claim_must_name_a_finding_of_the_batch() -> None:
    """llama.cpp gets two shapes: a match or partial naming a finding of the batch, or neither
    with -1; a claim with -1 (refused by invalid_reason, twice stops the repo) cannot be
    written. The answer is validated as before."""
    from scoring.audit.matching import invalid_reason
    from scoring.audit.types import ScanItem

    schema = batch_verdict_schema((3, 4), claims_name_a_finding=True)
    sent = strict_json_schema(schema, text_bound=600)
    claim, neither = sent["anyOf"]
    assert set(sent) == {"anyOf"}
    assert claim["properties"]["index_of_finding_from_junior_auditor"] == {"enum": [3, 4]}
    assert claim["properties"]["is_match"]["type"] == "boolean"
    assert neither["properties"]["index_of_finding_from_junior_auditor"] == {"const": -1}
    assert neither["properties"]["is_match"] == {"const": False}
    assert neither["properties"]["is_partial_match"] == {"const": False}
    for shape in (claim, neither):
        assert shape["additionalProperties"] is False
        assert shape["required"] == list(shape["properties"])
        assert shape["properties"]["explanation"]["maxLength"] == 400

    batch = [ScanItem(index=i, title="t", description="d") for i in (3, 4)]
    claimed = schema.model_validate({**VERDICT, "index_of_finding_from_junior_auditor": 4})
    assert invalid_reason(claimed, batch) is None
    # The validation itself is unchanged (-1 still parses; the grammar is what prevents it).
    assert schema.model_validate({**VERDICT, "index_of_finding_from_junior_auditor": -1})
    # Without the grammar: one shape, as OpenAI's strict mode requires.
    assert "anyOf" not in strict_json_schema(batch_verdict_schema((3, 4)))
