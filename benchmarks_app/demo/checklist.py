from __future__ import annotations

from typing import TextIO


def run_demo(out: TextIO) -> None:
    out.write("checklist: demo not wired yet\n")
