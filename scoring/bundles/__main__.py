"""``python -m scoring.bundles BUNDLE``: see :mod:`scoring.bundles.cli`."""

from __future__ import annotations

from scoring.bundles.cli import main

if __name__ == "__main__":  # importing it (as the no-Django test does) runs nothing
    raise SystemExit(main())
