"""rc1's package structure: the layers contract in pyproject.toml holds, rc1's top-level packages form
no import cycle, neither do its modules, and no module reaches into another package's private names.

Function-level imports count as much as module-level ones: a lazy import still makes the importing
package depend on the imported one."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]


def package_of(module: str) -> str:
    """rc1.gates.scale -> gates; a top-level module (rc1.pipeline) is its own package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


def test_package_cycles_are_found():
    assert package_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert package_cycles({"a": {"b"}, "b": set()}) == []


def test_layers_contract_is_kept():
    """`lint-imports` (import-linter's own command) on this checkout's rc1 and pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "1 kept, 0 broken" in run.stdout, run.stdout + run.stderr


def test_no_import_cycle_between_rc1_packages():
    graph = grimp.build_graph("rc1", cache_dir=None)
    edges: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = package_of(module), package_of(imported)
            if a != b and "rc1" not in (a, b):
                edges.setdefault(a, set()).add(b)
                where.setdefault((a, b), f"{module} -> {imported}")
    cycles = package_cycles(edges)
    detail = [where[(a, b)] for c in cycles for a in c for b in c if (a, b) in where]
    assert not cycles, f"package import cycles {cycles}: {detail}"


def test_no_import_cycle_between_rc1_modules():
    """Within a package too: two modules that import each other (even lazily) are one module split in two."""
    graph = grimp.build_graph("rc1", cache_dir=None)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert not package_cycles(edges), package_cycles(edges)


def test_no_private_name_is_imported_across_packages():
    found = []
    for path in sorted((REPO / "rc1").rglob("*.py")):
        own = package_of(".".join(path.relative_to(REPO).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rc1."):
                found += [f"{path.relative_to(REPO)}:{node.lineno} {node.module}.{a.name}"
                          for a in node.names if a.name.startswith("_") and package_of(node.module) != own]
    assert not found, found
