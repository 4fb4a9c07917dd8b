"""Print the checklist extracted from a paper (PDF, .tex or .zip of LaTeX sources).

Each question is reported with its answer, justification and page, or as missing, so that
a participant can see what a submission would read before making it. The exit status is 1
when a question is missing or its answer is unreadable: such a paper would be refused at
submission. ``--format json`` prints what ``POST /api/checklist/extract/`` returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.services.checklist.papers import paper_read
from benchmarks_app.services.reader_slots import PaperReadRefused
from scoring.checklist.extract import ExtractedPaper, ExtractionError


def _text_lines(name: str, paper: ExtractedPaper) -> list[str]:
    cut = f" (cut at {settings.CHECKLIST_BODY_WORD_CAP})" if paper.body_truncated else ""
    pages = f", {paper.pages} pages" if paper.pages else ""
    lines = [f"{name}: {paper.title or '(untitled)'}"]
    lines.append(f"body: {paper.body_words} words{cut}{pages}")
    lines += [f"note: {note}" for note in paper.notes]
    for a in paper.answers:
        page = f" (page {a.page})" if a.page else ""
        if a.status == "missing":
            lines.append(f"{a.number:>2}. {a.title}: MISSING - {a.problem}")
            continue
        answer = a.answer if a.status == "found" else f"UNRECOGNIZED {a.raw_answer!r}"
        lines.append(f"{a.number:>2}. {a.title}: {answer}{page}")
        lines.append(f"    {a.justification or '(no justification)'}")
        if a.problem and a.status == "found":
            lines.append(f"    note: {a.problem}")
    return lines


class Command(BaseCommand):
    help = "Extract the NeurIPS checklist answers and justifications from a paper."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="A .pdf, .tex or .zip file")
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            # A maintainer's command waits for a free reader slot rather than failing at once.
            paper = paper_read(path.read_bytes(), path.name, strict=False, slot_wait_s=300)
        except (ExtractionError, PaperReadRefused) as exc:
            raise CommandError(str(exc)) from exc
        if options["format"] == "json":
            self.stdout.write(json.dumps(paper.as_json(), indent=2, ensure_ascii=False))
        else:
            for line in _text_lines(path.name, paper):
                self.stdout.write(line)
        if not paper.complete:
            try:
                paper.require_complete(file=path.name)
            except ExtractionError as exc:
                raise CommandError(f"{exc} (a submission of this paper would be refused)") from exc
