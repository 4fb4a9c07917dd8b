"""Rules shared by every form and endpoint that takes a file: its size, the limit as users
read it, and (probe uploads) the problems that deserve one message rather than one per line."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from scoring.limits import TextLimits

#: Problems listed for one upload; the rest are counted ("… and 618 more problems").
MAX_ERRORS_SHOWN = 20


def upload_max_bytes() -> int:
    return int(settings.UPLOAD_MAX_MB) * 1024 * 1024


def upload_text_limits() -> TextLimits:
    """The site's limits on one field of an uploaded finding or response (``UPLOAD_MAX_*``)."""
    return TextLimits(
        title=int(settings.UPLOAD_MAX_TITLE_CHARS),
        ref=int(settings.UPLOAD_MAX_REF_CHARS),
        text=int(settings.UPLOAD_MAX_TEXT_CHARS),
    )


def upload_lines(upload: UploadedFile) -> Iterator[str]:
    """The upload's text one line at a time (endings kept), decoded as UTF-8 as it is read.

    A reader that stops early (a row cap) reads no further than it got, and no copy of the
    whole file is made; a line with no end (one 15 MB field) is joined once, not chunk by
    chunk. Bytes that are not UTF-8 raise ``UnicodeDecodeError`` when reached.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    pending: list[str] = []
    for chunk in upload.chunks():
        text = decoder.decode(chunk)
        start = 0
        while (stop := text.find("\n", start)) >= 0:
            yield "".join(pending) + text[start : stop + 1]
            pending.clear()
            start = stop + 1
        if start < len(text):
            pending.append(text[start:])
    tail = "".join(pending) + decoder.decode(b"", final=True)
    if tail:
        yield tail


def upload_limit_text() -> str:
    """The size limit as a help text says it: ``up to 20 MB`` (the value, not the setting)."""
    return f"up to {settings.UPLOAD_MAX_MB} MB"


def upload_too_large(size: int | None, name: str) -> str | None:
    """The error message for a file over the upload limit, or ``None`` when it fits."""
    if (size or 0) <= upload_max_bytes():
        return None
    return (
        f"{name}: file is {(size or 0) / 2**20:.1f} MB, larger than the "
        f"{settings.UPLOAD_MAX_MB} MB limit."
    )


def errors_capped(errors: list[str], limit: int = MAX_ERRORS_SHOWN) -> list[str]:
    """``errors`` with at most ``limit`` listed and one last line counting the rest."""
    if len(errors) <= limit:
        return list(errors)
    rest = len(errors) - limit
    return [*errors[:limit], f"… and {rest} more problem{'s' if rest != 1 else ''}"]


def json_document_problem(text: str, name: str) -> str | None:
    """One message when a JSON Lines upload is a JSON document (an array, or one object
    spread over several lines); ``None`` when it looks like JSON Lines.

    Read line by line, such a file gives an "invalid JSON" error on nearly every line
    (hundreds for a pretty-printed file) that hide the one real problem.
    """
    body = text.lstrip("\ufeff \t\r\n")
    if not body.startswith(("[", "{")):
        return None
    first_line = body[: body.find("\n") if "\n" in body else len(body)].strip()
    if body.startswith("{"):  # an array is never a JSON Lines record: parsed once, below
        try:
            json.loads(first_line)
            return None  # the first line is a whole JSON value: JSON Lines (or one bad line)
        except RecursionError:
            return None  # one line nested too deeply: the line-by-line reader names that
        except ValueError:
            pass
    try:
        document = json.loads(body)
    except RecursionError:
        return None  # nested too deeply: the line-by-line reader names that
    except ValueError:
        document = None
    if isinstance(document, list):
        what = f"a JSON array of {len(document)} item{'s' if len(document) != 1 else ''}"
    elif isinstance(document, dict):
        what = "one JSON object spread over several lines"
    elif body.startswith("["):
        what = "a JSON array (not valid JSON either)"
    else:
        return None
    return (
        f"{name}: this looks like a JSON document ({what}), not JSON Lines: put each "
        f'response on a line of its own, e.g. {{"probe_id": "p1", "output": "…"}}, with no '
        f"enclosing [ ] (jq -c '.[]' file.json > file.jsonl converts an array)."
    )
