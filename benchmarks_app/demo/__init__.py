"""What ``make demo`` loads and runs, one module per benchmark.

Each module exposes ``run_demo(out)``: import the bundled sample data (idempotently), run the
benchmark through the queue with the offline judge, and write its leaderboard to ``out``.
"""

from __future__ import annotations

from pathlib import Path

SAMPLE_DATA = Path(__file__).resolve().parent.parent / "sample_data"
