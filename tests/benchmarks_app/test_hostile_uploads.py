"""Hostile paper uploads (issue 11, items 1, 2 and 4): every one a clear error naming the field,
nothing left in MEDIA_ROOT or the database, and no extraction for a team over its quota."""

from __future__ import annotations

import io
import struct
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.db import DataError

from benchmarks_app.models import ChecklistAnswer, ChecklistSubmission, Paper
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    PaperUpload,
    QuotaExceeded,
    checklist_submission_create,
)
from tests.factories.checklist import ChecklistSubmissionFactory, MembershipFactory

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[2] / "benchmarks_app" / "sample_data" / "checklist"
GENUINE = (SAMPLE / "demo" / "genuine.tex").read_bytes()


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _fan_out_zip(k: int, depth: int = 10) -> bytes:
    members = {"main.tex": b"\\documentclass{article}\\begin{document}\\input{l0}\\end{document}"}
    for i in range(depth):
        members[f"l{i}.tex"] = (f"\\input{{l{i + 1}}}\n" * k).encode()
    members[f"l{depth}.tex"] = b"Some words of the paper. " * 40
    return _zip(members)


def _submit(member: Any, name: str, data: bytes) -> ChecklistSubmission:
    return checklist_submission_create(
        team=member.team, user=member.user, files={"G": PaperUpload(name, data)}
    )


def _media_files(media_root: Path) -> list[Path]:
    return [p for p in Path(media_root).rglob("*") if p.is_file()]


def test_input_fan_out_is_refused_quickly_naming_the_field(_media_root: Path) -> None:
    member = MembershipFactory()
    data = _fan_out_zip(k=3)  # 3**10 = 59,049 copies once inlined
    assert len(data) < 10_000
    started = time.monotonic()
    with pytest.raises(ChecklistSubmissionError) as info:
        _submit(member, "bomb.zip", data)
    assert time.monotonic() - started < 5
    assert info.value.field == "genuine"
    assert "more than 200 times" in str(info.value) and "bomb.zip" in str(info.value)
    assert not ChecklistSubmission.objects.exists() and not _media_files(_media_root)


def test_inlined_size_is_capped() -> None:
    from scoring.checklist.extract import ExtractionError
    from scoring.checklist.latex import extract_latex

    files = {"big.tex": "x" * 5000}
    tex = "\\begin{document}" + "\\input{big}" * 30
    with pytest.raises(ExtractionError, match="beyond 0 MB"):
        extract_latex(tex, files=files, max_chars=100_000, file="paper.zip")


def test_quota_is_checked_before_any_extraction(monkeypatch: Any) -> None:
    member: Any = MembershipFactory(team__challenge__daily_limit=1)
    ChecklistSubmissionFactory(team=member.team, challenge=member.team.challenge)

    def no_extraction(**_: Any) -> Any:
        raise AssertionError("extraction ran for a team over its quota")

    monkeypatch.setattr(
        "benchmarks_app.services.checklist.submissions.checklist_extract_upload", no_extraction
    )
    with pytest.raises(QuotaExceeded):
        _submit(member, "bomb.zip", _fan_out_zip(k=2))


def _patch_method(data: bytes, method: int) -> bytes:
    """The archive with every member's compression method (both headers) set to ``method``."""
    raw = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = raw.find(signature)
        while at != -1:
            struct.pack_into("<H", raw, at + offset, method)
            at = raw.find(signature, at + 4)
    return bytes(raw)


def _patch_flags(data: bytes, flag: int) -> bytes:
    raw = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.find(signature)
        while at != -1:
            (flags,) = struct.unpack_from("<H", raw, at + offset)
            struct.pack_into("<H", raw, at + offset, flags | flag)
            at = raw.find(signature, at + 4)
    return bytes(raw)


def _bad_crc() -> bytes:
    stored = _zip({"main.tex": GENUINE}, zipfile.ZIP_STORED)
    at = stored.index(b"\\begin{document}")
    return stored[:at] + b"X" + stored[at + 1 :]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_bad_crc, "damaged"),
        (lambda: _patch_flags(_zip({"main.tex": GENUINE}), 0x1), "encrypted"),
        (lambda: _patch_method(_zip({"main.tex": GENUINE}, zipfile.ZIP_STORED), 99), "compression"),
    ],
    ids=["bad-crc", "encrypted", "unknown-method"],
)
def test_broken_zip_members_are_a_400_naming_the_field(
    make: Any, words: str, client: Any, _media_root: Path
) -> None:
    member: Any = MembershipFactory()
    with pytest.raises(ChecklistSubmissionError) as info:
        _submit(member, "paper.zip", make())
    assert info.value.field == "genuine"
    assert words in str(info.value) and "'main.tex'" in str(info.value)
    # The same file through the web form: a 400 page, not a server error.
    client.force_login(member.user)
    answer = client.post(
        "/checklist/submit/",
        {"team": member.team.pk, "genuine": io.BytesIO(make()), "label": "x"},
    )
    assert answer.status_code in (200, 400), answer.status_code
    assert not ChecklistSubmission.objects.exists() and not _media_files(_media_root)


def test_nul_in_a_tex_body_is_dropped_before_storing() -> None:
    member = MembershipFactory()
    data = GENUINE.replace(b"\\begin{document}", b"\\begin{document}\x00 A\x00B ", 1)
    data = data.replace(b"Justification:", b"Justification: \x00", 1)
    submission = _submit(member, "genuine.tex", data)
    paper = Paper.objects.get(submission=submission)
    assert "AB" in paper.extracted_text and "\x00" not in paper.extracted_text
    answers = ChecklistAnswer.objects.filter(paper=paper)
    assert answers.count() == 15
    assert not any("\x00" in a.justification + a.raw_answer for a in answers)


def test_a_row_that_fails_takes_its_file_with_it(monkeypatch: Any, _media_root: Path) -> None:
    member = MembershipFactory()

    def refuse(*_: Any, **__: Any) -> Any:
        raise DataError("A string literal cannot contain NUL (0x00) characters.")

    monkeypatch.setattr(ChecklistAnswer.objects, "bulk_create", refuse)
    with pytest.raises(DataError):
        _submit(member, "genuine.tex", GENUINE)
    assert not ChecklistSubmission.objects.exists() and not Paper.objects.exists()
    assert _media_files(_media_root) == []
