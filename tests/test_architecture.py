"""The project's layering, read from the source with ``ast`` (nothing is imported).

Imports point down and never in a circle, so a change low in the house cannot need one high
up, and every module can be read (and tested) with only what lies below it. The layers,
lowest first; a module may import its own layer and those below:

0. ``scoring``: pure Python, no Django (``tests/scoring/test_no_django.py`` checks that too).
1. support: ``formatting``, ``client_address``, ``cache_backends``, ``rate_limits``,
   ``request_checks``, ``checks``. Site-wide helpers that know no model of this app (text
   formatting, the client's address, the shared cache and the counts kept in it, the
   request guard, system checks); models, services and views all lean on them.
2. ``models`` (fields, constraints, QuerySet methods) and ``migrations`` (they import model
   helpers such as the board sort fields, nothing above).
3. ``selectors``: reads.
4. ``services``: writes.
5. ``tasks``: the queue's entry points, thin over services.
6. ``demo``: the sample data of ``make demo``, built through services; the demo command
   and the benchmarks run it.
7. entry points: ``admin``, ``views``, ``api``, ``management``, ``templatetags``,
   ``urls``, ``apps`` (the app's wiring: its ``ready`` hooks connect services) and
   ``bench`` (the benchmark drivers, which exercise the API and commands as a user would;
   ``manage.py run_benchmarks`` starts them).

Every import counts: module level, function level (lazy imports still tie the modules
together, and a lazy import up the layers only hides a cycle) and ``TYPE_CHECKING`` blocks.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scoring", "benchmarks_app")

SUPPORT = (
    "formatting",
    "client_address",
    "cache_backends",
    "rate_limits",
    "request_checks",
    "checks",
    "db_pool",
    "db_retry",
    "cpu_priority",
)
RANKS = {
    "scoring": 0,
    **dict.fromkeys(SUPPORT, 1),
    "models": 2,
    "migrations": 2,
    "selectors": 3,
    "services": 4,
    "tasks": 5,
    "demo": 6,
    **dict.fromkeys(
        ("admin", "views", "api", "management", "templatetags", "urls", "apps", "bench"), 7
    ),
    # A decorator of the upload views (web and API) that holds a reader slot (a service).
    "upload_reads": 7,
    # The middleware that answers a rate-refused token early; it drains bodies as the upload
    # views do, and the API's error handler marks the refusals it answers.
    "refused_senders": 7,
}

# Known edges still to fix, each with why it is left: keep this tiny. An entry that no longer
# matches an import fails the test (so a fix removes its entry too).
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """Each module of ``known`` that ``name`` imports, with the line (a ``from`` import of a
    submodule counts as the submodule; of a name, as the module that holds it)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                kept = package[: len(package) - node.level + 1]
                base = ".".join([*kept, node.module] if node.module else kept)
            else:
                base = node.module or ""
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts and ".".join(parts) != name:
                yield ".".join(parts), node.lineno


@functools.cache
def _graph() -> dict[str, dict[str, int]]:
    # Parsed once for every test of this file (about 500 modules).
    known = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        graph[name] = {}
        for target, line in _imported(name, path, known):
            graph[name].setdefault(target, line)
    return graph


def import_graph() -> dict[str, dict[str, int]]:
    """Each module's imports of the project's modules, with the first line of each."""
    return {name: dict(targets) for name, targets in _graph().items()}


def rank(name: str) -> int:
    parts = name.split(".")
    if parts[0] == "scoring":
        return 0
    if len(parts) == 1:
        return RANKS["apps"]  # benchmarks_app/__init__.py: above all, it may name anything
    return RANKS[parts[1]]


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_package_of_the_app_has_a_layer() -> None:
    top = {name.split(".")[1] for name in modules() if name.startswith("benchmarks_app.")}
    assert top - set(RANKS) == set(), "give each new package or module a layer in RANKS"


def test_no_import_points_up_a_layer() -> None:
    graph = import_graph()
    upward = [
        f"{name}:{line} imports {target} (layer {rank(target)} above {rank(name)})"
        for name, targets in sorted(graph.items())
        for target, line in sorted(targets.items())
        if rank(target) > rank(name)
    ]
    assert upward == []


def test_no_import_cycle() -> None:
    graph = import_graph()
    stale = [edge for edge in KNOWN_CYCLE_EDGES if edge[1] not in graph.get(edge[0], {})]
    assert stale == [], "remove fixed edges from KNOWN_CYCLE_EDGES"
    for source, target in KNOWN_CYCLE_EDGES:
        del graph[source][target]
    assert cycles(graph) == []


def test_the_graph_sees_lazy_relative_and_package_imports(tmp_path: Path) -> None:
    # The reader must not miss the imports the rules are about: a function-level import, a
    # relative one and ``from package import submodule``.
    graph = import_graph()
    # services/audit/processing.py asks for the paired refresh inside a function.
    assert "benchmarks_app.services.paired" in graph["benchmarks_app.services.audit.processing"]
    assert "benchmarks_app.demo.verdicts" in graph["benchmarks_app.management.commands.demo_setup"]
    source = tmp_path / "module.py"
    source.write_text("def f():\n    from . import b\n    from .. import c\n", encoding="utf-8")
    known = {"p.q.a": source, "p.q.b": source, "p.c": source}
    assert sorted(_imported("p.q.a", source, known)) == [("p.c", 3), ("p.q.b", 2)]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


LONGEST_MODULE = 480


def long_modules() -> dict[str, int]:
    """Each module over ``LONGEST_MODULE`` lines (migrations aside: generated, read once)."""
    found = {}
    for path in modules().values():
        relative = path.relative_to(ROOT).as_posix()
        if "/migrations/" in relative:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > LONGEST_MODULE:
            found[relative] = lines
    return found


def test_a_long_module_says_why_it_is_one_concern() -> None:
    # A long module is usually several concerns side by side; one that is really a single
    # concern reading top to bottom may stay long if its opening docstring says so.
    long = long_modules()
    unexplained = []
    for relative, lines in sorted(long.items()):
        docstring = ast.get_docstring(ast.parse((ROOT / relative).read_text(encoding="utf-8")))
        if "one concern" not in (docstring or ""):
            unexplained.append(f"{relative}: {lines} lines")
    assert unexplained == [], "split these by concern, or say in the docstring why one concern"
