"""Print the checklist extracted from a paper (PDF, .tex or .zip of LaTeX sources)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from scoring.checklist.extract import ExtractionError, extract_paper


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
            paper = extract_paper(
                path.read_bytes(), path.name, word_cap=settings.CHECKLIST_BODY_WORD_CAP
            )
        except ExtractionError as exc:
            raise CommandError(str(exc)) from exc
        if options["format"] == "json":
            self.stdout.write(json.dumps(paper.as_json(), indent=2, ensure_ascii=False))
            return
        self.stdout.write(f"{path.name}: {paper.title or '(untitled)'}")
        cut = f" (cut at {settings.CHECKLIST_BODY_WORD_CAP})" if paper.body_truncated else ""
        self.stdout.write(f"body: {paper.body_words} words{cut}")
        for a in paper.answers:
            self.stdout.write(f"{a.number:>2}. {a.title}: {a.answer}")
            self.stdout.write(f"    {a.justification or '(no justification)'}")
