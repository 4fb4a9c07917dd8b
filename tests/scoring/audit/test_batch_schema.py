"""The audit judge's answer schema names the batch's findings, so a server that enforces
json_schema (llama.cpp's grammar, vLLM) cannot answer an index that is not in the batch."""

from __future__ import annotations

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
