"""The audit judges: ``openai``, ``offline`` (TF-IDF, no network) and ``replay:DIR``.

All three answer the same question — does any scan finding of this batch describe this truth
finding? — with an :class:`~scoring.audit.types.AuditVerdict`, go through the same cache and
ledger, and reject a claimed match whose index is not in the batch.

One module each: :mod:`.prompts` (the prompt all three are keyed on), :mod:`.llm`,
:mod:`.offline`, :mod:`.replay`, and :mod:`.factory` (``--judge`` specs); the public names are
re-exported here.
"""

from __future__ import annotations

from scoring.audit.judges.factory import JudgeSpec, make_judge, parse_judge_spec
from scoring.audit.judges.llm import OpenAIAuditJudge
from scoring.audit.judges.offline import (
    OfflineAuditJudge,
    OfflineParams,
    analyze,
    code_identifiers,
    scan_document,
    scan_identifiers,
    similarity_matrix,
    truth_document,
    truth_identifiers,
)
from scoring.audit.judges.prompts import (
    PROMPT_V1,
    PROMPT_V2,
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    AuditPrompt,
    build_user_prompt,
    clean_truth_text,
    prompt_for,
)
from scoring.audit.judges.replay import ReplayAuditJudge

__all__ = [
    "PROMPT_V1",
    "PROMPT_V2",
    "PROMPT_VERSION",
    "SYSTEM_PROMPT",
    "AuditPrompt",
    "JudgeSpec",
    "OfflineAuditJudge",
    "OfflineParams",
    "OpenAIAuditJudge",
    "ReplayAuditJudge",
    "analyze",
    "build_user_prompt",
    "clean_truth_text",
    "code_identifiers",
    "make_judge",
    "parse_judge_spec",
    "prompt_for",
    "scan_document",
    "scan_identifiers",
    "similarity_matrix",
    "truth_document",
    "truth_identifiers",
]
