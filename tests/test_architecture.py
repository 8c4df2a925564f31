"""The shape of the tree (issue 14): imports point one way, no circles, short modules, unique names.

The import graph is read from the source with ``ast`` (nothing is imported): an edge for
every ``import odradek...`` and ``from odradek... import``, at module level or inside a
function (a lazy import is still a dependency). An import names the most specific module it
reaches: ``from odradek.protocol import records`` is an edge to ``odradek.protocol.records``.

Imports under ``if TYPE_CHECKING:`` (annotations only, never run) count for circles but not
for the layering: a module that names another's type for its annotations still depends on
it, and a circle closed that way is still two modules that cannot be read (or changed)
apart. The lower module owns an interface (a ``Protocol``) instead, or the shared type moves
down. Circles are strongly connected components, so a circle of any length is found.

Known breaches still being fixed elsewhere are listed below with who removes them. An entry
that no longer matches anything fails the test too, so the lists only ever shrink.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "odradek"

# Import circles not yet broken: {frozenset of modules: who breaks it}.
KNOWN_CYCLES: dict[frozenset[str], str] = {
}

# Modules still over the length limit: {path under odradek/: who splits it}.
MAX_LINES = 800
KNOWN_LONG: dict[str, str] = {
}

# File names still used by more than one module: {name: who renames them}.
KNOWN_SAME_NAMES: dict[str, str] = {
}

# What each layer may import besides itself (``_tasks``, ``faults``, ``metrics``, ``properties`` and
# ``config_def`` are modules at the bottom: they import nothing of ours but protocol's errors).
MAY_IMPORT_ONLY = {
    "protocol": set(),
    "storage": {"protocol", "faults", "metrics", "properties", "config_def"},
    "net": {"protocol", "_tasks"},
    "client": {"protocol", "net", "_tasks"},
    # pipeline's typed columns (registry_format) use the registry's client-side codecs.
    "pipeline": {"protocol", "net", "client", "_tasks", "schema_registry"},
    # Connect is a client of the broker (DESIGN.md): never its internals, nor the CLI above it.
    "connect": {
        "protocol", "net", "client", "schema_registry", "_tasks", "faults", "metrics", "properties", "config_def",
    },
    # Kafka Streams' DSL on Spark: a client of the broker through the pipeline data source.
    "streams": {"protocol", "net", "client", "pipeline", "schema_registry", "_tasks"},
}
# What each layer must never import.
NEVER_IMPORTS = {
    "cluster": {"broker", "client", "cli", "pipeline", "testing"},
    "broker": {"client", "cli", "pipeline", "testing"},
}


def _modules() -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (file, is a package __init__)}`` for every module under odradek/."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` blocks."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    return skipped


def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    """``{module: the modules it imports}``; with ``type_checking``, imports under
    ``if TYPE_CHECKING:`` too."""
    modules = _modules()

    def resolve(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        skipped = set() if type_checking else _type_checking_nodes(tree)
        package = name if is_package else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(resolve(a.name) for a in node.names if a.name.startswith("odradek"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "odradek":
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    targets.add(full if full in modules else resolve(source))
        targets.discard(name)
        targets.discard("")
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _describe(circle: frozenset[str], graph: dict[str, set[str]], run_time: dict[str, set[str]]) -> str:
    """The circle's modules and the imports between them (those only for annotations marked)."""
    edges = [
        f"    {source} -> {target}" + ("" if target in run_time[source] else "  (under TYPE_CHECKING)")
        for source in sorted(circle)
        for target in sorted(graph[source] & circle)
    ]
    return f"  {', '.join(sorted(circle))}:\n" + "\n".join(edges)


def test_no_import_cycles():
    graph = import_graph(type_checking=True)
    found = set(cycles(graph))
    new = [c for c in found if c not in KNOWN_CYCLES]
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    described = "\n".join(_describe(c, graph, import_graph()) for c in sorted(new, key=sorted))
    assert not new, f"modules that import each other, directly or round a circle (break it):\n{described}"
    assert not gone, f"these circles are gone: remove them from KNOWN_CYCLES: {gone}"


def test_cycles_are_found_whatever_their_length():
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"d", "x"},
        "d": {"a"},  # a -> b -> c -> d -> a
        "x": {"y"},
        "y": {"x"},  # x <-> y, reached from the first circle but not part of it
        "z": {"a", "y"},  # imports both circles, in neither
    }
    assert sorted(sorted(c) for c in cycles(graph)) == [["a", "b", "c", "d"], ["x", "y"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_layers_point_one_way():
    wrong = []
    for module, targets in import_graph().items():
        source = layer(module)
        for target in targets:
            to = layer(target)
            if to == source:
                continue
            allowed = MAY_IMPORT_ONLY.get(source)
            if (allowed is not None and to not in allowed) or to in NEVER_IMPORTS.get(source, ()):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the layering (docs/architecture.md):\n" + "\n".join(sorted(wrong))


def test_no_module_over_the_length_limit():
    lengths = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")
    }
    long = sorted(p for p, n in lengths.items() if n > MAX_LINES and p not in KNOWN_LONG)
    fixed = sorted(p for p in KNOWN_LONG if lengths.get(p, 0) <= MAX_LINES)
    assert not long, f"modules over {MAX_LINES} lines (split them): {long}"
    assert not fixed, f"these are short now: remove them from KNOWN_LONG: {fixed}"


def test_module_file_names_are_unique():
    names = Counter(p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")
    repeated = {n for n, count in names.items() if count > 1}
    new = sorted(repeated - set(KNOWN_SAME_NAMES))
    fixed = sorted(set(KNOWN_SAME_NAMES) - repeated)
    where = {n: sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob(n)) for n in new}
    assert not new, f"one file name, several modules (a reader opens the wrong one): {where}"
    assert not fixed, f"these names are unique now: remove them from KNOWN_SAME_NAMES: {fixed}"
