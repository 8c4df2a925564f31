"""Every third-party module the package imports is declared in pyproject.toml (issue 25).

A missing declaration only shows on a machine whose Python happens not to carry the module
(``pip install odradek`` then ``odradek server`` ended in ``No module named 'cryptography'``),
so this reads the imports from the source with ``ast`` instead of relying on the environment:
every ``import x`` / ``from x import``, at module level or inside a function, and
``importlib.import_module("x...")`` with a literal name. Each third-party top-level module is
mapped to the distributions that provide it (``importlib.metadata.packages_distributions``;
its own name when nothing installed provides it) and one of them must be declared: in
``dependencies``, or in the extra that the importing file belongs to (OPTIONAL below).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("odradek", "pyspark_odradek")

# Files whose imports may come from an extra instead of the runtime dependencies:
# {path prefix under the repository: extra}.
OPTIONAL = {
    "odradek/pipeline/": "spark",  # `odradek pipeline`, imported only by that command
    "pyspark_odradek/": "spark",  # found by Spark, so only where pyspark runs
    "odradek/schema_registry/spark_": "spark",  # the registry's Spark side, imported by odradek/pipeline
    # Streams runs on Spark; its serdes import pyspark only in their spark_* methods.
    "odradek/streams/": "spark",
    "odradek/testing/spark_cluster.py": "spark",
    # Loaded only by pytest (the pytest11 entry point), so pytest is there whenever it runs.
    "odradek/testing/pytest_plugin.py": "test",
}


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))


def declared() -> tuple[list[str], dict[str, list[str]]]:
    """(runtime requirements, {extra: requirements}) as pyproject.toml writes them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["dependencies"], project.get("optional-dependencies", {})


def _literal_prefix(node: ast.expr) -> str | None:
    """The constant start of ``"a.b"`` or ``f"a.b.{x}"``, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value
    return None


def imports(path: Path) -> list[tuple[str, int]]:
    """(top-level module, line) for each absolute import in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.module.split(".")[0], node.lineno))
        elif (
            isinstance(node, ast.Call)
            and (ast.unparse(node.func) in ("importlib.import_module", "import_module"))
            and node.args
        ):
            name = _literal_prefix(node.args[0])
            if name and name.split(".")[0]:
                found.append((name.split(".")[0], node.lineno))
    return found


def third_party_imports() -> list[tuple[str, str, int]]:
    """(module, file under the repository, line) for every third-party import of the package."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for module, line in imports(path):
                if module in sys.stdlib_module_names or module in PACKAGES or module == "__future__":
                    continue
                found.append((module, where, line))
    return found


def extra_of(path: str) -> str | None:
    return next((extra for prefix, extra in OPTIONAL.items() if path.startswith(prefix)), None)


def test_every_third_party_import_is_declared():
    runtime, extras = declared()
    runtime_names = {requirement_name(r) for r in runtime}
    providers = packages_distributions()
    undeclared = []
    for module, path, line in third_party_imports():
        allowed = set(runtime_names)
        extra = extra_of(path)
        if extra is not None:
            allowed |= {requirement_name(r) for r in extras.get(extra, [])}
        candidates = {normalize(d) for d in providers.get(module, [module])}
        if not candidates & allowed:
            where = f"neither dependencies nor the {extra!r} extra" if extra else "not in dependencies"
            undeclared.append(
                f"{path}:{line} imports {module!r} (distribution {' or '.join(sorted(candidates))}), "
                f"which pyproject.toml declares {where}"
            )
    assert not undeclared, "declare these in pyproject.toml, with a version range:\n" + "\n".join(undeclared)


def test_every_runtime_dependency_is_imported():
    """A declared runtime dependency nothing imports is one every user installs for nothing."""
    runtime, extras = declared()
    providers = packages_distributions()
    used = {normalize(d) for module, _, _ in third_party_imports() for d in providers.get(module, [module])}
    unused = {requirement_name(r) for r in runtime} - used
    assert not unused, f"runtime dependencies nothing in {PACKAGES} imports: {sorted(unused)}"
    unused_spark = {requirement_name(r) for r in extras["spark"]} - used
    assert not unused_spark, f"the 'spark' extra declares what nothing imports: {sorted(unused_spark)}"


def test_every_declaration_has_a_version_range():
    runtime, extras = declared()
    loose = [
        r
        for r in runtime + [r for reqs in extras.values() for r in reqs]
        if not (">=" in r.split(";")[0] and "<" in r.split(";")[0].replace("<=", ""))
    ]
    assert not loose, f"give these a lower and an upper bound (>=a,<b): {loose}"


def test_the_import_reader_sees_every_form(tmp_path):
    """The reader catches what the package does: plain, from-, nested and literal dynamic imports."""
    source = tmp_path / "sample.py"
    source.write_text(
        "import os, zstandard.core\n"
        "from kio.schema import x\n"
        "from . import sibling\n"
        "def f():\n"
        "    import cryptography.x509\n"
        "    importlib.import_module(f'pyarrow.{name}')\n"
        "    importlib.import_module(name)\n"
    )
    assert sorted(m for m, _ in imports(source)) == ["cryptography", "kio", "os", "pyarrow", "zstandard"]
