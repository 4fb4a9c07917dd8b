"""The bundle format and the checks that need no run: manifest, checksums, votes, comparison."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from scoring import bundles
from scoring.bundles import (
    BundleError,
    correct_from_votes,
    outcome_from_votes,
    read_bundle,
    same,
    write_bundle,
)


def _members(**extra: Any) -> dict[str, Any]:
    members: dict[str, Any] = {name: {} for name in bundles.REQUIRED}
    members.update(extra)
    return members


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def _unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def test_written_bundle_reads_back_with_every_member_checked() -> None:
    data = write_bundle(benchmark="probes", run_id=7, members=_members(), truth_withheld=False)
    assert data == write_bundle(
        benchmark="probes", run_id=7, members=_members(), truth_withheld=False
    )
    bundle = read_bundle(data)
    assert bundle.manifest.run_id == 7 and bundle.tampered == ()
    assert {m.name for m in bundle.manifest.members} == set(bundles.REQUIRED)


def test_a_member_missing_from_what_is_written_is_named() -> None:
    members = _members()
    del members[bundles.VERDICTS]
    with pytest.raises(BundleError, match=r"verdicts\.json missing"):
        write_bundle(benchmark="audit", run_id=1, members=members, truth_withheld=False)


def test_manifest_problems_name_the_field() -> None:
    files = _unzip(
        write_bundle(benchmark="audit", run_id=1, members=_members(), truth_withheld=True)
    )
    manifest = json.loads(files[bundles.MANIFEST])
    manifest["version"] = 99
    files[bundles.MANIFEST] = json.dumps(manifest).encode()
    with pytest.raises(BundleError, match=r"manifest\.json: version"):
        read_bundle(_zip(files))
    del files[bundles.MANIFEST]
    with pytest.raises(BundleError, match=r"manifest\.json: missing"):
        read_bundle(_zip(files))
    with pytest.raises(BundleError, match=r"not a readable \.zip"):
        read_bundle(b"PK\x03\x04 not really")


def test_edited_missing_and_unlisted_members_are_tampered() -> None:
    files = _unzip(
        write_bundle(benchmark="audit", run_id=1, members=_members(), truth_withheld=False)
    )
    files[bundles.METRICS] = b'{"overall": {"tp": 99}}'
    del files[bundles.CALLS]
    files["extra.json"] = b"{}"
    bundle = read_bundle(_zip(files))
    assert bundle.tampered == tuple(sorted([bundles.METRICS, bundles.CALLS, "extra.json"]))
    checks = bundles.verify(bundle)
    assert checks and not any(c.ok for c in checks)
    assert {c.name for c in checks} == {f"member {n} checksum" for n in bundle.tampered}


def test_a_member_without_its_fields_is_an_error_naming_the_member_and_field() -> None:
    data = write_bundle(benchmark="audit", run_id=1, members=_members(), truth_withheld=False)
    with pytest.raises(BundleError, match=r"^inputs\.json: repos: Field required"):
        bundles.verify(read_bundle(data))
    members = _members(**{bundles.VERDICTS: {"cases": [{"case": {"probe_id": 3}}]}})
    members[bundles.INPUTS] = {"responses": []}
    data = write_bundle(benchmark="probes", run_id=1, members=members, truth_withheld=False)
    with pytest.raises(BundleError, match=r"^verdicts\.json: cases\.0\.response_id: Field"):
        bundles.verify(read_bundle(data))
    case = {"response_id": 1, "probe_id": "x", "passed": True, "weighted_risk": "high"}
    members[bundles.VERDICTS] = {"cases": [{**case, "case": case}]}
    data = write_bundle(benchmark="probes", run_id=1, members=members, truth_withheld=False)
    with pytest.raises(BundleError, match=r"^verdicts\.json: cases\.0\.weighted_risk: "):
        bundles.verify(read_bundle(data))


def test_same_allows_float_noise_only() -> None:
    assert same(0.1 + 0.2, 0.3) and same({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not same(0.5, 0.5001) and not same(None, 0) and not same({"a": 1}, {"a": 1, "b": 2})
    assert not same([1, 2], [1, 2, 3]) and not same(True, False)


def _vote(batch: int, number: int, verdict: str, index: int | None = -1) -> dict[str, Any]:
    return {"batch": batch, "vote": number, "verdict": verdict, "index": index}


def test_outcome_from_votes_follows_the_consensus_and_tie_break() -> None:
    assert outcome_from_votes([_vote(1, 1, "match", 3), _vote(1, 2, "match", 3)]) == ("match", 3)
    # One of each: the partial (the audit tie-break).
    split = [_vote(1, 1, "match", 2), _vote(1, 2, "none"), _vote(1, 3, "partial", 4)]
    assert outcome_from_votes(split) == ("partial", 4)
    # A partial in batch 1 is kept while batch 2 is asked; batch 2's match wins.
    later = [
        _vote(1, 1, "partial", 1),
        _vote(1, 2, "partial", 1),
        _vote(2, 1, "match", 12),
        _vote(2, 2, "match", 12),
    ]
    assert outcome_from_votes(later) == ("match", 12)
    assert outcome_from_votes(later[:2]) == ("partial", 1)
    # A failed vote beside a disagreeing one: no majority, the truth finding failed.
    failed = [_vote(1, 1, "match", 0), _vote(1, 2, "failed", None), _vote(1, 3, "none")]
    assert outcome_from_votes(failed) == ("judge_failed", None)
    assert outcome_from_votes([]) == ("none", None)


def test_checklist_verdicts_allowed_by_their_votes() -> None:
    def votes(*values: bool | None) -> list[dict[str, Any]]:
        return [{"number": n, "correct": v, "error": ""} for n, v in enumerate(values, start=1)]

    assert correct_from_votes(votes(True, True)) == {1}
    assert correct_from_votes(votes(False, True, False)) == {0}
    # A single vote asked after a failed one (CHECKLIST_SINGLE_VOTE) decides; a majority run
    # with the same votes would have failed, so both readings are allowed.
    assert correct_from_votes(votes(None, True)) == {None, 1}
    assert correct_from_votes(votes(None, None)) == {None}


def test_main_exits_2_on_an_unreadable_bundle(tmp_path: Path, capsys: Any) -> None:
    assert bundles.main([str(tmp_path / "missing.zip")]) == 2
    assert "missing.zip" in capsys.readouterr().err
