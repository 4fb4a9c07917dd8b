"""Hostile run bundles, built byte by byte: each one is something a stranger could mail, and
each must end in a one-line BundleError naming its member (exit 2), quickly and in little memory.

Shared by the reader's tests (``python -m scoring.bundles``) and the commands' tests
(``verify_run``, ``judge_add --from-bundle``).
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
import zlib
from collections.abc import Callable
from typing import Any

from scoring import bundles

# Inflates to this many bytes: past every cap of the reader, from a file of tens of KB.
BOMB_BYTES = 200 * 2**20


def base_members(**extra: Any) -> dict[str, Any]:
    """A small audit bundle that reads and checks (it holds nothing to compare)."""
    members: dict[str, Any] = {
        bundles.RUN: {"status": "succeeded"},
        bundles.INPUTS: {"repos": [{"project_id": "repo_2025_01", "truth": [], "scan": []}]},
        bundles.VERDICTS: {"truth_results": []},
        bundles.METRICS: {"repos": {}, "overall": None, "interval": None},
        bundles.CALLS: [],
        bundles.PROMPTS: {},
    }
    members.update(extra)
    return members


def base_bundle() -> bytes:
    return bundles.write_bundle(
        benchmark="audit", run_id=1, members=base_members(), truth_withheld=False
    )


def _entries(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def with_raw_member(name: str, raw: bytes, *, data: bytes | None = None) -> bytes:
    """``data`` (the base bundle) with member ``name`` holding ``raw``, its manifest entry
    rewritten to match, as a forger would, so that the reader decodes it."""
    entries = _entries(data or base_bundle())
    manifest = json.loads(entries[bundles.MANIFEST])
    manifest["members"] = [m for m in manifest["members"] if m["name"] != name]
    manifest["members"].append(
        {"name": name, "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}
    )
    entries[bundles.MANIFEST] = json.dumps(manifest).encode()
    entries[name] = raw
    return zip_of(entries)


def zip_of(entries: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive:
        for name, raw in entries.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=bundles.ZIP_TIME), raw, compression)
    return out.getvalue()


def patch_entry(
    data: bytes,
    name: str,
    *,
    method: int | None = None,
    flags: int | None = None,
    file_size: int | None = None,
) -> bytes:
    """``data`` with the local and central headers of ``name`` edited (compression method,
    flag bits, stated uncompressed size), the member's bytes left as they are."""
    buf = bytearray(data)
    encoded = name.encode()
    # (signature, offset of flags, of method, of uncompressed size, of name length, header size)
    for signature, flag_at, method_at, size_at, name_len_at, fixed in (
        (b"PK\x03\x04", 6, 8, 22, 26, 30),
        (b"PK\x01\x02", 8, 10, 24, 28, 46),
    ):
        start = 0
        while (at := buf.find(signature, start)) >= 0:
            start = at + 4
            (length,) = struct.unpack_from("<H", buf, at + name_len_at)
            if bytes(buf[at + fixed : at + fixed + length]) != encoded:
                continue
            if flags is not None:
                struct.pack_into("<H", buf, at + flag_at, flags)
            if method is not None:
                struct.pack_into("<H", buf, at + method_at, method)
            if file_size is not None:
                struct.pack_into("<I", buf, at + size_at, file_size)
    return bytes(buf)


def _deflated(size: int, byte: bytes = b" ") -> tuple[bytes, int]:
    """``size`` copies of ``byte`` as a raw deflate stream (made in 1 MB pieces), and its CRC."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk, crc, parts = byte * 2**20, 0, []
    for _ in range(size // len(chunk)):
        parts.append(packer.compress(chunk))
        crc = zlib.crc32(chunk, crc)
    parts.append(packer.flush())
    return b"".join(parts), crc


def bomb_member(name: str, *, stated_size: int, real_size: int = BOMB_BYTES) -> bytes:
    """The base bundle plus a member ``name`` whose deflate stream inflates to ``real_size``
    bytes while its headers state ``stated_size``: a zip bomb, or a liar about its size."""
    packed, crc = _deflated(real_size)
    entries = _entries(base_bundle())
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for entry, raw in entries.items():
            if entry != name:
                archive.writestr(zipfile.ZipInfo(entry, date_time=bundles.ZIP_TIME), raw)
        info = zipfile.ZipInfo(name, date_time=bundles.ZIP_TIME)
        info.compress_type = zipfile.ZIP_STORED  # written raw, marked deflate below
        archive.writestr(info, packed)
    data = out.getvalue()
    data = patch_entry(data, name, method=zipfile.ZIP_DEFLATED, file_size=stated_size)
    # The CRC of what it inflates to, so that only its size gives it away.
    buf = bytearray(data)
    encoded = name.encode()
    for signature, crc_at, fixed, name_len_at in (
        (b"PK\x03\x04", 14, 30, 26),
        (b"PK\x01\x02", 16, 46, 28),
    ):
        at = buf.find(signature)
        while at >= 0:
            (length,) = struct.unpack_from("<H", buf, at + name_len_at)
            if bytes(buf[at + fixed : at + fixed + length]) == encoded:
                struct.pack_into("<I", buf, at + crc_at, crc)
            at = buf.find(signature, at + 4)
    return bytes(buf)


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# name → (builder, text the one error line must hold: the member it names)
HOSTILE: dict[str, tuple[Callable[[], bytes], str]] = {
    "deep nesting": (lambda: with_raw_member(bundles.VERDICTS, _deep(200_000)), "verdicts.json"),
    "nesting under the recursion limit": (
        lambda: with_raw_member(bundles.VERDICTS, _deep(500)),
        "verdicts.json: nested deeper",
    ),
    "huge integer": (
        lambda: with_raw_member(bundles.METRICS, b'{"repos": {}, "x": ' + b"9" * 100_000 + b"}"),
        "metrics.json: an integer of 100000 digits",
    ),
    "integer past 64 bits": (
        lambda: with_raw_member(
            bundles.INPUTS,
            b'{"repos": [{"project_id": "r", "truth": [], "scan": [{"index": 1'
            + b"0" * 40
            + b"}]}]}",
        ),
        "inputs.json: an integer of 41 digits",
    ),
    "float overflow": (
        lambda: with_raw_member(bundles.METRICS, b'{"overall": 1e999}'),
        "metrics.json: the number 1e999 is out of range",
    ),
    "NaN": (lambda: with_raw_member(bundles.METRICS, b'{"overall": NaN}'), "metrics.json: NaN"),
    "not UTF-8": (lambda: with_raw_member(bundles.PROMPTS, b'{"\xff\xfe": 1}'), "prompts.json"),
    "wrong types": (
        lambda: with_raw_member(bundles.VERDICTS, b'{"truth_results": 5}'),
        "verdicts.json: truth_results",
    ),
    "deflate64": (
        lambda: patch_entry(base_bundle(), bundles.VERDICTS, method=9),
        "verdicts.json: compression method 9",
    ),
    "encrypted flag": (
        lambda: patch_entry(base_bundle(), bundles.CALLS, flags=0x1),
        "calls.json: encrypted",
    ),
    "size stated smaller than it inflates": (
        lambda: bomb_member(bundles.CALLS, stated_size=1000),
        "calls.json: cannot be unpacked",
    ),
    "size stated larger than it is": (
        lambda: patch_entry(base_bundle(), bundles.PROMPTS, file_size=5000),
        "prompts.json",
    ),
    "size stated past the cap": (
        lambda: bomb_member(bundles.CALLS, stated_size=BOMB_BYTES),
        "calls.json: unpacks to",
    ),
    "inflates past the ratio": (
        lambda: bomb_member(bundles.CALLS, stated_size=40 * 2**20, real_size=40 * 2**20),
        "calls.json: compressed",
    ),
    "traversal member name": (
        lambda: zip_of({**_entries(base_bundle()), "../../evil.json": b"{}"}),
        "'../../evil.json': not a member name",
    ),
    "absolute member name": (
        lambda: zip_of({**_entries(base_bundle()), "/tmp/evil.json": b"{}"}),
        "'/tmp/evil.json': not a member name",
    ),
    "traversal repo id": (
        lambda: with_raw_member(
            bundles.INPUTS,
            json.dumps({"repos": [{"project_id": "../../../x", "truth": [], "scan": []}]}).encode(),
        ),
        "inputs.json: repos.0.project_id",
    ),
    "absolute repo id": (
        lambda: with_raw_member(
            bundles.INPUTS,
            json.dumps({"repos": [{"project_id": "/tmp/x", "truth": [], "scan": []}]}).encode(),
        ),
        "inputs.json: repos.0.project_id",
    ),
    "too many members": (
        lambda: zip_of({**_entries(base_bundle()), **{f"x{i}.json": b"{}" for i in range(40)}}),
        "more than 20",
    ),
    "empty metrics": (lambda: with_raw_member(bundles.METRICS, b"{}"), "metrics.json: empty"),
    "not a zip": (lambda: b"garbage, not a zip", "not a readable .zip"),
}
