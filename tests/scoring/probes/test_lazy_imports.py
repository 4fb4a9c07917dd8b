"""Start-up (issue 14): scikit-learn, scipy and openai are imported where they are used, not by
``django.setup()`` or by importing the probe scorer, in every command and web process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROBE_MODULES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for p in (ROOT / "scoring/probes").glob("*.py")
)


def _loaded(code: str, modules: tuple[str, ...]) -> list[str]:
    """Run ``code`` in a fresh interpreter; which of ``modules`` it imported."""
    script = (
        f"import json, sys\n{code}\n"
        f"print(json.dumps([m for m in {list(modules)!r} if m in sys.modules]))\n"
    )
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def after_setup() -> list[str]:
    return _loaded("import django\ndjango.setup()", ("sklearn", "scipy", "openai", "numpy"))


def test_django_setup_imports_neither_scikit_learn_nor_scipy(after_setup):
    assert "sklearn" not in after_setup and "scipy" not in after_setup, after_setup


def test_django_setup_does_not_import_openai(after_setup):
    assert "openai" not in after_setup, (
        "openai is imported by django.setup(): scoring/judges (llm.py, server.py) must import "
        "it where it is used (that module is not the probe scorer's)"
    )


def test_importing_every_probe_module_imports_neither_scikit_learn_nor_scipy():
    code = "import importlib\n" + "".join(
        f"importlib.import_module({m!r})\n" for m in PROBE_MODULES
    )
    code += "import scoring.probes as p\nnames = [getattr(p, n) for n in p.__all__]\n"
    # refusal_judge talks to an LLM through scoring/judges, which may import openai itself.
    assert _loaded(code, ("sklearn", "scipy")) == []


def test_scikit_learn_is_loaded_when_the_geometry_is_built():
    code = (
        "from scoring.probes.default_rules import DEFAULT_RULES\n"
        "from scoring.probes.geometry import observable_geometry\n"
        "from scoring.probes.rules import CompiledRuleSet\n"
        "from scoring.probes.scorer import score_case\n"
        "from scoring.probes.types import ProbeSpec\n"
        "assert 'sklearn' not in sys.modules\n"
        "rules = CompiledRuleSet(DEFAULT_RULES)\n"
        "texts = ['I cannot help with that.', 'Sure, step 1: mix.', 'Ask a professional.']\n"
        "cases = [score_case(ProbeSpec(probe_id=f'p{i}', category='c', input=f'in {i}'),\n"
        "                    texts[i % 3], rules) for i in range(12)]\n"
        "assert observable_geometry(cases) is not None\n"
    )
    assert _loaded(code, ("sklearn",)) == ["sklearn"]


def test_the_package_exports_resolve_on_first_use():
    import scoring.probes as probes

    assert set(probes.__all__) <= set(dir(probes))
    for name in probes.__all__:
        assert getattr(probes, name) is not None
    from scoring.probes.rules import CompiledRuleSet

    assert probes.CompiledRuleSet is CompiledRuleSet
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = probes.nothing_here
