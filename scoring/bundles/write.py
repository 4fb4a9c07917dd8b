"""Writing a run bundle: the members' JSON and their manifest in one zip, byte for byte the same
for the same run (fixed member times, sorted keys)."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Mapping
from typing import Any

from scoring.bundles.layout import (
    FORMAT,
    MANIFEST,
    REQUIRED,
    VERSION,
    ZIP_TIME,
    BundleError,
    Manifest,
    Member,
)


def _encode(value: Any) -> bytes:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")


def write_bundle(
    *,
    benchmark: str,
    run_id: int,
    members: Mapping[str, Any],
    truth_withheld: bool,
) -> bytes:
    """The archive of ``members`` (name → JSON value) with its manifest; same input, same bytes."""
    missing = [name for name in REQUIRED if name not in members]
    if missing:
        raise BundleError(f"members: {', '.join(missing)} missing")
    encoded = {name: _encode(value) for name, value in sorted(members.items())}
    manifest = Manifest(
        format=FORMAT,
        version=VERSION,
        benchmark=benchmark,  # type: ignore[arg-type]
        run_id=run_id,
        truth_withheld=truth_withheld,
        members=[
            Member(name=name, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
            for name, data in encoded.items()
        ],
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in [(MANIFEST, _encode(manifest.model_dump())), *encoded.items()]:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return out.getvalue()
