from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks_app.services.checklist import PaperUpload

SAMPLE = Path(__file__).resolve().parents[3] / "benchmarks_app" / "sample_data" / "checklist"


def upload(path: Path) -> PaperUpload:
    return PaperUpload(name=path.name, data=path.read_bytes())


@pytest.fixture
def demo_triplet() -> dict[str, PaperUpload]:
    return {
        "G": upload(SAMPLE / "demo" / "genuine.tex"),
        "A": upload(SAMPLE / "demo" / "adversarial.tex"),
        "T": upload(SAMPLE / "demo" / "truth.tex"),
    }


@pytest.fixture
def genuine_tex() -> PaperUpload:
    return upload(SAMPLE / "demo" / "genuine.tex")
