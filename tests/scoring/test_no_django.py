from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SCORING = Path(__file__).resolve().parents[2] / "scoring"


def test_scoring_sources_never_import_django() -> None:
    offenders = []
    for path in SCORING.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path}: {n}"
                for n in names
                if n.split(".")[0]
                in {"django", "rest_framework", "django_q", "benchmarks_app", "config"}
            ]
    assert offenders == []


def test_importing_every_scoring_module_loads_no_django() -> None:
    modules = sorted(
        ".".join(p.relative_to(SCORING.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in SCORING.rglob("*.py")
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = [m for m in sys.modules if m == 'django' or m.startswith('django.')]\n"
        "print(len(bad)); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=SCORING.parent, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
