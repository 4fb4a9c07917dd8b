"""One visibility policy, held to by construction (issue 36).

Two rules, checked on the source (no database: a few hundred milliseconds), each chosen for
the way a new surface would get it wrong:

* **Surfaces read through selectors.** A page or endpoint (``views/``, ``api/``) never reads a
  model's manager itself (``Model.objects``, ``get_object_or_404(Model, ...)``): it asks a
  selector, which starts from the policy (``selectors/visibility.py``) with the viewer as an
  argument. Every model is covered unless :data:`PUBLIC_CATALOGUES` names it with a reason,
  so a new model is policed the day it is added, and a new view that writes
  ``EvaluationRun.objects.filter(pk=pk)`` (the way runs of hidden phases, other teams' entries
  and secrets leaked before) fails here before any leak test has a fixture for it.
* **The hidden-phase and hidden-truth rule is written once.** Outside the policy module (and
  the models that define the fields, the admin, where staff see all, and the phase services
  that set them), no query filters on ``is_hidden``, ``revealed_at`` or ``is_public``: a
  selector or service that needs "what the public may see" excludes
  ``visibility.in_unrevealed_phase()`` (or asks ``truth_details_visible``). A second copy of
  the rule is how the audit boards, the probe boards and the runs in progress came to disagree
  on what a revealed phase shows; a copy that forgets the owner or the reveal is a leak.

The route-generated leak test (``test_route_leaks.py``) checks the answers; this checks that
there is one place they come from. It cannot see a read through a relation
(``request.user.scanners``) or a raw SQL string: those remain the leak test's to catch.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from django.apps import apps

APP = Path(__file__).resolve().parents[3] / "benchmarks_app"
SURFACES = ("views", "api")

# Models a surface may read directly: public catalogues with nothing of a participant's in
# them, each with the reason.
PUBLIC_CATALOGUES = {
    "AuditDataset": "datasets and their published releases are listed for everybody",
    "Challenge": "checklist challenges are listed for everybody",
    "ProbeSuite": "probe suites (names and probe counts) are listed for everybody",
}

# The fields that make a row hidden from someone: a hidden phase not yet revealed, a repo
# whose truth is not public.
HIDDEN_FIELDS = re.compile(r"(?:^|__)(?:is_hidden|revealed_at|is_public)(?:__|$)")
QUERY_CALLS = {"filter", "exclude", "get", "Q", "When", "FilteredRelation"}
# Where the fields may be read in queries: the policy, the models defining them (QuerySet
# methods such as ``Phase.objects.unrevealed()``), the admin (staff see all) and the phase
# services that write them.
POLICY_HOMES = (
    "selectors/visibility.py",
    "models/",
    "admin/",
    "migrations/",
    "services/phases.py",
)


def _modules(*folders: str) -> Iterator[tuple[str, ast.Module]]:
    for folder in folders:
        for path in sorted((APP / folder).rglob("*.py")):
            yield str(path.relative_to(APP)), ast.parse(path.read_text(), str(path))


def _app_models() -> set[str]:
    return {model.__name__ for model in apps.get_app_config("benchmarks_app").get_models()}


def direct_reads(tree: ast.Module, models: set[str]) -> Iterator[tuple[int, str]]:
    """(line, what) of each read of a model's rows that does not go through a selector."""
    nones = {
        id(node.func.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "none"
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("objects", "_default_manager", "_base_manager")
            and isinstance(node.value, ast.Name)
            and node.value.id in models
            # An empty queryset reads nothing.
            and id(node) not in nones
        ):
            yield node.lineno, f"{node.value.id}.{node.attr}"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("get_object_or_404", "get_list_or_404")
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in models
        ):
            yield node.lineno, f"{node.func.id}({node.args[0].id}, ...)"


def hidden_field_lookups(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, lookup) of each query condition on a field that hides rows."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in QUERY_CALLS:
            continue
        for keyword in node.keywords:
            if keyword.arg and HIDDEN_FIELDS.search(keyword.arg):
                yield node.lineno, f"{name}({keyword.arg}=...)"
        # Q(("phase__is_hidden", True)) and similar spellings.
        for arg in node.args:
            if (
                isinstance(arg, ast.Tuple)
                and arg.elts
                and isinstance(arg.elts[0], ast.Constant)
                and isinstance(arg.elts[0].value, str)
                and HIDDEN_FIELDS.search(arg.elts[0].value)
            ):
                yield node.lineno, f"{name}(({arg.elts[0].value!r}, ...))"


def test_pages_and_endpoints_read_rows_only_through_selectors() -> None:
    models = _app_models()
    assert {"EvaluationRun", "Scanner", "ResponseSubmission", "JudgeRecord"} <= models
    assert set(PUBLIC_CATALOGUES) <= models, "a public catalogue that is no model any more"
    policed = models - set(PUBLIC_CATALOGUES)
    found = [
        f"{module}:{line}: {what}"
        for module, tree in _modules(*SURFACES)
        for line, what in direct_reads(tree, policed)
    ]
    assert not found, (
        "pages and endpoints must read through a selector that applies the visibility policy "
        "(selectors/visibility.py) for the viewer, not a model's manager:\n" + "\n".join(found)
    )


def test_the_hidden_rows_rule_is_written_only_in_the_policy() -> None:
    found = [
        f"{module}:{line}: {lookup}"
        for module, tree in _modules(".")
        if not module.startswith(POLICY_HOMES)
        for line, lookup in hidden_field_lookups(tree)
    ]
    assert not found, (
        "filter on who may see a row through the policy (visibility.in_unrevealed_phase, "
        "visible_runs, truth_details_visible...), not on its fields:\n" + "\n".join(found)
    )


def test_the_checks_find_what_they_look_for() -> None:
    """Each check reports the readings a new surface would add (so passing means something)."""
    source = ast.parse(
        "from django.db.models import Q\n"
        "def view(request, pk):\n"
        "    run = get_object_or_404(EvaluationRun, pk=pk)\n"
        "    rows = Scanner.objects.filter(runs__phase__is_hidden=False)\n"
        "    empty = Scanner.objects.none()\n"
        "    shown = Q(phase__revealed_at__isnull=False) | Q(repo__is_public=True)\n"
        "    datasets = AuditDataset.objects.all()\n"
    )
    reads = [what for _, what in direct_reads(source, {"EvaluationRun", "Scanner"})]
    assert reads == ["get_object_or_404(EvaluationRun, ...)", "Scanner.objects"]
    lookups = sorted(what for _, what in hidden_field_lookups(source))
    assert lookups == [
        "Q(phase__revealed_at__isnull=...)",
        "Q(repo__is_public=...)",
        "filter(runs__phase__is_hidden=...)",
    ]
