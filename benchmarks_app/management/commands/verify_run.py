"""Verify a run bundle offline: every metric recomputed from its verdicts with scoring/ alone."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from scoring.bundles import BundleError, read_bundle_file, report, verify


class Command(BaseCommand):
    help = (
        "Recompute every metric of a run bundle (/api/runs/<id>/bundle/, run_bundle) from its "
        "verdicts, and each audit verdict from its votes, with scoring/ alone: no database, no "
        "network. Prints each mismatch (every check with -v 2) and exits 1 when a figure "
        "differs, a promised figure is missing or a member's checksum does not match the "
        "manifest; exits 2 with one line naming the member when the bundle cannot be read "
        "(as python -m scoring.bundles does)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("bundle", help="the bundle's .zip file")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            bundle = read_bundle_file(options["bundle"])
            checks = verify(bundle)
        except BundleError as exc:
            # Malformed is not a mismatch: exit 2, as ``python -m scoring.bundles`` does.
            raise CommandError(f"bundle: {exc}", returncode=2) from None
        text, ok = report(checks, verbose=int(options["verbosity"]) > 1)
        manifest = bundle.manifest
        self.stdout.write(
            f"{manifest.benchmark} run #{manifest.run_id}"
            + (" (hidden truth withheld)" if manifest.truth_withheld else "")
        )
        self.stdout.write(text)
        if not ok:
            # A mismatch is the answer, not a usage error: exit 1 without a traceback.
            sys.exit(1)
