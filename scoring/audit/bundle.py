"""A whole-dataset upload: a zip of ``<project_id>_results.json`` files, or one JSON object
``{project_id: findings}``, read into one findings document per repo.

Archives are checked before anything is unpacked: the number of members, their total and
single unpacked sizes (zip bombs), encrypted or unreadable members, and names that do not say
which repo they are for. Every problem is a :class:`~scoring.audit.parsing.ParseError` naming
the member.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import PurePosixPath
from typing import Any

from scoring.audit.parsing import ParseError, loads

ZIP_MAX_MEMBERS = 1000
RESULTS_SUFFIX = "_results.json"
# Keys of a JSON body that are not repos (the API also takes them from the query).
RESERVED_KEYS = frozenset({"scanner", "judge", "declared_empty"})


def is_zip(data: bytes) -> bool:
    return data[:4] == b"PK\x03\x04" or data[:4] == b"PK\x05\x06"


def _member_project(name: str) -> str | None:
    """The repo of a member ``[folder/]<project_id>_results.json``; None for other files."""
    base = PurePosixPath(name).name
    if not base.endswith(RESULTS_SUFFIX):
        return None
    return base.removesuffix(RESULTS_SUFFIX)


def _ignored(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return any(p == "__MACOSX" or p.startswith(".") for p in parts)


def read_zip(data: bytes, *, max_member_bytes: int, max_total_bytes: int) -> dict[str, Any]:
    """``{project_id: decoded JSON}`` from an archive of ``<project_id>_results.json`` files."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError):
        raise ParseError("not a readable .zip archive") from None
    infos = [i for i in archive.infolist() if not i.is_dir() and not _ignored(i.filename)]
    if len(infos) > ZIP_MAX_MEMBERS:
        raise ParseError(f"the archive holds more than {ZIP_MAX_MEMBERS} files")
    if sum(i.file_size for i in infos) > max_total_bytes:
        raise ParseError(f"the archive unpacks to more than {max_total_bytes // 2**20} MB")
    out: dict[str, Any] = {}
    where: dict[str, str] = {}
    for info in infos:
        project = _member_project(info.filename)
        if not project:
            raise ParseError(
                f"{info.filename}: not a results file; name each file <project_id>{RESULTS_SUFFIX}"
            )
        if project in out:
            raise ParseError(
                f"{info.filename}: a second results file for {project!r} "
                f"(the first is {where[project]})"
            )
        if info.file_size > max_member_bytes:
            raise ParseError(
                f"{info.filename}: unpacks to more than {max_member_bytes // 2**20} MB"
            )
        if info.flag_bits & 0x1:
            raise ParseError(f"{info.filename}: encrypted; zip it without a password")
        try:
            raw = archive.read(info)
        except NotImplementedError:
            raise ParseError(
                f"{info.filename}: compressed with a method that cannot be read; zip it again "
                "with the usual (deflate) method"
            ) from None
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, RuntimeError):
            raise ParseError(f"{info.filename}: damaged in the archive") from None
        if len(raw) > max_member_bytes:  # the header lied about the size
            raise ParseError(
                f"{info.filename}: unpacks to more than {max_member_bytes // 2**20} MB"
            )
        try:
            out[project] = loads(raw)
        except ParseError as exc:
            raise ParseError(f"{info.filename}: {exc}") from None
        where[project] = info.filename
    if not out:
        raise ParseError(f"the archive holds no <project_id>{RESULTS_SUFFIX} file")
    return out


# What a whole-dataset upload holds instead, when it is one repo's results file.
ONE_REPO = (
    "this is the results of one repo, not of a dataset: upload a .zip of "
    f"<project_id>{RESULTS_SUFFIX} files or one object {{project_id: findings, ...}}, or "
    "submit this file for its repo alone"
)


def is_one_repo_results(data: Any) -> bool:
    """A findings list, or an object with a ``findings`` list: one repo's results file (the
    shapes the one-repo upload takes), not a ``{project_id: findings}`` mapping."""
    if isinstance(data, list):
        return True
    return isinstance(data, dict) and isinstance(data.get("findings"), list)


def read_mapping(data: Any) -> dict[str, Any]:
    """``{project_id: findings}`` from a decoded JSON object (reserved keys left out)."""
    if is_one_repo_results(data):
        raise ParseError(ONE_REPO)
    if not isinstance(data, dict):
        raise ParseError(
            "expected one JSON object {project_id: findings, ...} (or a .zip of "
            f"<project_id>{RESULTS_SUFFIX} files)"
        )
    mapping = {str(k): v for k, v in data.items() if k not in RESERVED_KEYS}
    if not mapping:
        raise ParseError("no repo in the upload; expected {project_id: findings, ...}")
    return mapping


def read_bundle(data: bytes, *, max_member_bytes: int, max_total_bytes: int) -> dict[str, Any]:
    """A zip archive or a JSON object, as ``{project_id: decoded findings document}``."""
    if is_zip(data):
        return read_zip(data, max_member_bytes=max_member_bytes, max_total_bytes=max_total_bytes)
    return read_mapping(loads(data))
