"""Checklist votes per answer: the ``two`` policy against ``adaptive``, on the bundled papers.

Each bundled paper (the demo triplet and the two NeurIPS papers, from ``../shared/data`` where
present, else the sample data) is assessed through ``assess_checklist`` with every vote kept
(CHECKLIST_VOTES=two); :func:`scoring.checklist.votes.compare_policies` then gives the votes
each policy asks and how often their outcomes agree (``manage.py checklist_votes`` does the
same on any site's recorded runs). The judge is BENCH_CHECKLIST_JUDGE (default ``offline``:
deterministic, so a second vote can never disagree; name an LLM judge record, e.g. one on a
local llama.cpp server, for figures that say something about a model).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.core.management import call_command
from django.test.utils import override_settings

SAMPLE = Path(settings.BASE_DIR) / "benchmarks_app" / "sample_data" / "checklist"
SHARED = Path(settings.BASE_DIR).parent / "shared" / "data" / "checklist"


def papers() -> list[Path]:
    found = [SAMPLE / "demo" / f"{kind}.tex" for kind in ("genuine", "adversarial", "truth")]
    folder = SHARED / "papers" if (SHARED / "papers").is_dir() else SAMPLE / "papers"
    return found + sorted(folder.glob("*.pdf"))


def run(out: TextIO) -> None:
    from benchmarks_app.management.commands.checklist_votes import comparison_lines
    from benchmarks_app.models import Challenge, EvaluationRun
    from benchmarks_app.selectors.checklist import checklist_recorded_votes
    from scoring.checklist.votes import compare_policies

    judge = os.environ.get("BENCH_CHECKLIST_JUDGE", "offline")
    Challenge.objects.get_or_create(name="Bench votes", slug="bench-votes")
    runs: list[int] = []
    with override_settings(CHECKLIST_VOTES="two", CHECKLIST_SINGLE_VOTE=False):
        for path in papers():
            kwargs: dict[str, Any] = {"stdout": io.StringIO(), "stderr": io.StringIO()}
            try:
                call_command("assess_checklist", str(path), "--judge", judge, "--wait", **kwargs)
            except Exception as exc:  # one paper's failure is reported, the others go on
                out.write(f"{path.name}: not assessed ({exc})\n")
            latest = EvaluationRun.objects.order_by("-pk").first()
            if latest is not None and latest.pk not in runs:
                runs.append(latest.pk)
    out.write(f"judge {judge}; papers: {', '.join(p.name for p in papers())}\n")
    for line in comparison_lines(compare_policies(checklist_recorded_votes(run_ids=runs))):
        out.write(f"  {line}\n")
