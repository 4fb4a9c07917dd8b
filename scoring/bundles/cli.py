"""``python -m scoring.bundles BUNDLE``: read and verify a bundle without Django and print the
checks (exit 0 when all hold, 1 on a mismatch, 2 when the bundle cannot be read)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scoring.bundles.layout import (
    BundleError,
    Check,
)
from scoring.bundles.read import read_bundle_file
from scoring.bundles.verify import verify


def report(checks: Sequence[Check], *, verbose: bool = False) -> tuple[str, bool]:
    """The lines to print (every mismatch; every check with ``verbose``) and whether all held."""
    bad = [c for c in checks if not c.ok]
    lines = [c.line() for c in (checks if verbose else bad)]
    if not checks:
        lines.append("nothing to check: the bundle holds no metrics")
    lines.append(
        f"{len(checks) - len(bad)} of {len(checks)} checks match"
        + ("" if not bad else f"; {len(bad)} MISMATCH")
    )
    return "\n".join(lines), bool(checks) and not bad


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scoring.bundles BUNDLE``: verify without Django (what ``verify_run`` runs)."""
    parser = argparse.ArgumentParser(prog="python -m scoring.bundles", description=main.__doc__)
    parser.add_argument("bundle")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every check")
    args = parser.parse_args(argv)
    try:
        bundle = read_bundle_file(args.bundle)
        checks = verify(bundle)
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text, ok = report(checks, verbose=args.verbose)
    print(text)
    return 0 if ok else 1
