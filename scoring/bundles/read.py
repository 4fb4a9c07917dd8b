"""Reading a run bundle that comes from anywhere (a download passed around, a file a stranger
mails): every bound of :mod:`scoring.bundles.layout` is checked before the work it bounds, and
no zip or JSON error leaves here as anything but a :class:`BundleError` naming the member."""

from __future__ import annotations

import hashlib
import io
import json
import math
import struct
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scoring.bundles.layout import (
    MANIFEST,
    MAX_ARCHIVE_BYTES,
    MAX_DEPTH,
    MAX_DIRECTORY_BYTES,
    MAX_INT_DIGITS,
    MAX_JSON_VALUES,
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    MAX_RATIO,
    MAX_TOTAL_BYTES,
    MEMBER_NAME,
    RATIO_FLOOR_BYTES,
    READ_CHUNK,
    REQUIRED,
    Bundle,
    BundleError,
    Manifest,
)


def _archive_shape(data: bytes) -> None:
    """Refuse an archive whose end record announces more members, or a larger central
    directory, than a bundle has, before ``zipfile`` parses (and allocates) every entry."""
    tail = data[-(2**16 + 22) :]
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        raise BundleError("not a readable .zip archive (no end of central directory)")
    entries, directory_bytes = struct.unpack("<HI", tail[at + 10 : at + 16])
    if entries > MAX_MEMBERS:
        raise BundleError(f"the archive holds {entries} files, more than {MAX_MEMBERS}")
    if directory_bytes > MAX_DIRECTORY_BYTES:
        raise BundleError(
            f"the archive's directory is {directory_bytes} bytes, more than {MAX_DIRECTORY_BYTES}"
        )


def _check_entry(info: zipfile.ZipInfo) -> None:
    name = info.filename
    if not MEMBER_NAME.fullmatch(name) or ".." in name:
        # Folders, "../x", "/etc/x", "C:\\x": nothing a bundle writes, and names a careless
        # extractor would follow out of its folder.
        raise BundleError(f"{name!r}: not a member name (letters, digits, '.', '_', '-' only)")
    if info.flag_bits & 0x1:
        raise BundleError(f"{name}: encrypted; a bundle's members are never encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise BundleError(
            f"{name}: compression method {info.compress_type} (only stored or deflate)"
        )
    if info.file_size > MAX_MEMBER_BYTES:
        raise BundleError(
            f"{name}: unpacks to {info.file_size} bytes, more than {MAX_MEMBER_BYTES // 2**20} MB"
        )
    ratio = info.file_size / max(info.compress_size, 1)
    if info.file_size > RATIO_FLOOR_BYTES and ratio > MAX_RATIO:
        raise BundleError(f"{name}: compressed {ratio:.0f} to 1, more than {MAX_RATIO} to 1")


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> bytes:
    """The member's bytes, read in chunks that stop at the smaller of its stated size and the
    bytes left of the total: a header that understates its size ends in a CRC error, one that
    overstates it never gets more than the cap."""
    cap = min(info.file_size, MAX_MEMBER_BYTES, budget)
    out = bytearray()
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(min(READ_CHUNK, cap + 1 - len(out))):
                out += chunk
                if len(out) > cap:
                    raise BundleError(f"{info.filename}: unpacks past {cap} bytes; read no further")
            if len(out) < info.file_size:
                raise BundleError(f"{info.filename}: shorter than its stated size")
    except BundleError:
        raise
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        OSError,
        ValueError,
        NotImplementedError,
        RuntimeError,
        zlib.error,
    ) as exc:
        raise BundleError(f"{info.filename}: cannot be unpacked ({exc})") from None
    return bytes(out)


def _bounded_int(name: str) -> Any:
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            digits = len(text.lstrip("-"))
            raise BundleError(f"{name}: an integer of {digits} digits (at most {MAX_INT_DIGITS})")
        return int(text)

    return parse


def _finite_float(name: str) -> Any:
    def parse(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise BundleError(f"{name}: the number {text[:40]} is out of range")
        return value

    return parse


def _no_constant(name: str) -> Any:
    def parse(text: str) -> float:
        raise BundleError(f"{name}: {text} is not a JSON number")

    return parse


def _depth_over(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def decode_member(name: str, raw: bytes) -> Any:
    """A member's JSON, bounded: nesting, integer digits, finite floats, value count."""
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if values > MAX_JSON_VALUES:
        raise BundleError(f"{name}: holds about {values} values, more than {MAX_JSON_VALUES}")
    try:
        # Bytes straight in: json decodes them once, without a second copy held here.
        value = json.loads(
            raw,
            parse_int=_bounded_int(name),
            parse_float=_finite_float(name),
            parse_constant=_no_constant(name),
        )
    except BundleError:
        raise
    except RecursionError:
        raise BundleError(f"{name}: nested deeper than {MAX_DEPTH} levels") from None
    except UnicodeDecodeError as exc:
        raise BundleError(f"{name}: not UTF-8 (byte {exc.start})") from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise BundleError(f"{name}: not JSON ({exc})") from None
    if _depth_over(value, MAX_DEPTH):
        raise BundleError(f"{name}: nested deeper than {MAX_DEPTH} levels")
    return value


def read_bundle(data: bytes) -> Bundle:
    """The bundle in ``data``; a member whose bytes do not match the manifest is listed in
    ``tampered`` (and not decoded). Raises :class:`BundleError` when it cannot be read, or
    when reading it would pass one of the bounds above."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise BundleError(f"the archive is over {MAX_ARCHIVE_BYTES // 2**20} MB")
    _archive_shape(data)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        OSError,
        ValueError,
        NotImplementedError,
        RuntimeError,
    ):
        raise BundleError("not a readable .zip archive") from None
    if len(entries) > MAX_MEMBERS:
        raise BundleError(f"the archive holds more than {MAX_MEMBERS} files")
    infos: dict[str, zipfile.ZipInfo] = {}
    for info in entries:
        _check_entry(info)
        if info.filename in infos:
            raise BundleError(f"{info.filename}: appears twice in the archive")
        infos[info.filename] = info
    if sum(i.file_size for i in infos.values()) > MAX_TOTAL_BYTES:
        raise BundleError(f"the archive unpacks to more than {MAX_TOTAL_BYTES // 2**20} MB")
    if MANIFEST not in infos:
        raise BundleError(f"{MANIFEST}: missing; not a run bundle")
    budget = MAX_TOTAL_BYTES
    raw_manifest = _read_member(archive, infos[MANIFEST], budget)
    budget -= len(raw_manifest)
    try:
        manifest = Manifest.model_validate(decode_member(MANIFEST, raw_manifest))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise BundleError(f"{MANIFEST}: {where}: {first['msg']}") from None
    listed = {m.name: m for m in manifest.members}
    tampered = sorted(name for name in infos if name != MANIFEST and name not in listed)
    members: dict[str, Any] = {}
    for name, member in listed.items():
        found = infos.get(name)
        if found is None:
            tampered.append(name)
            continue
        raw = _read_member(archive, found, budget)
        budget -= len(raw)
        if len(raw) != member.bytes or hashlib.sha256(raw).hexdigest() != member.sha256:
            tampered.append(name)
            continue
        members[name] = decode_member(name, raw)
    missing = [name for name in REQUIRED if name not in listed]
    if missing:
        raise BundleError(f"{MANIFEST}: members {', '.join(missing)} not listed")
    return Bundle(manifest, members, tuple(sorted(set(tampered))))


def read_bundle_file(path: str | Path) -> Bundle:
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(MAX_ARCHIVE_BYTES + 1)
    except OSError as exc:
        raise BundleError(f"{path}: {exc.strerror or exc}") from None
    return read_bundle(data)
