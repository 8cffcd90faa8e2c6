"""No import circles inside the transformer_jax package (DESIGN.md: layered, no import pointing up, no circle).

The graph is read from the source with `ast`, not from an import run: every ``import`` and ``from ... import``
counts, at module level or inside a function (a lazy import is still a dependency, and is how circles hide), and
relative imports are resolved. The package is its own folder plus the folders pyproject.toml maps into it
(configs/, launch/, experiments/ as transformer_jax.configs, .launch, .experiments).
"""

from __future__ import annotations

import ast
import pkgutil
import tomllib
from pathlib import Path

import transformer_jax

PACKAGE = "transformer_jax"
ROOT = Path(__file__).resolve().parent.parent


def _package_roots() -> dict[str, Path]:
    """Package name → folder, for the package and each subpackage pyproject.toml maps from another folder."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapped = config.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    roots = {PACKAGE: Path(transformer_jax.__file__).parent}
    roots.update({name: ROOT / folder for name, folder in mapped.items() if name.startswith(f"{PACKAGE}.")})
    return roots


def package_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name → its file (a package's file is its ``__init__.py``)."""
    modules: dict[str, Path] = {}

    def walk(name: str, folder: Path) -> None:
        modules[name] = folder / "__init__.py"
        for info in pkgutil.iter_modules([str(folder)]):
            if info.ispkg:
                walk(f"{name}.{info.name}", folder / info.name)
            else:
                modules[f"{name}.{info.name}"] = folder / f"{info.name}.py"

    for name, folder in _package_roots().items():
        walk(name, folder)
    return modules


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: dict[str, Path]
              ) -> set[str]:
    """The package modules one import statement uses: ``from a import b`` uses the module ``a.b`` when there is one
    (else ``a``, where ``b`` is defined); ``import a.b`` uses ``a.b``. Ancestor packages, which Python also runs,
    are not counted: every module would depend on them."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & modules.keys()
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    used = {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names}
    return used & modules.keys()


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the package modules it imports, at module level or inside a function."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        graph[module] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[module] |= _imported(node, module, is_package, modules)
        graph[module].discard(module)
    return graph


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``graph`` (Tarjan): modules that import each other, directly or not."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _shortest_cycle(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest path start → ... → start through ``within`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & within):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise ValueError(f"{start} is on no cycle")


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle [a, b, ..., a] for each group of modules that import each other (empty: no circle)."""
    return [_shortest_cycle(graph, min(c), c) for c in _components(graph) if len(c) > 1]


def test_the_walk_sees_the_whole_package():
    modules = package_modules()
    for name in ("transformer_jax.data.sources", "transformer_jax.data.ptb", "transformer_jax.launch.cli",
                 "transformer_jax.configs.base", "transformer_jax.model.attention"):
        assert name in modules, name
    graph = import_graph(modules)
    assert "transformer_jax.data.pipeline" in graph["transformer_jax.launch.train"]  # a mapped folder's imports
    assert "transformer_jax.parsing.trees" in graph["transformer_jax.data.ptb"]


def test_the_graph_sees_lazy_and_relative_imports(tmp_path):
    (tmp_path / "pkg").mkdir()
    files = {"pkg": "from . import a\n", "pkg.a": "def f():\n    from .b import g\n", "pkg.b": "import pkg.a\n"}
    modules = {}
    for name, text in files.items():
        path = tmp_path / "pkg" / ("__init__.py" if name == "pkg" else f"{name.split('.')[1]}.py")
        path.write_text(text)
        modules[name] = path
    graph = import_graph(modules)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]
    assert find_cycles({"x": {"y"}, "y": set()}) == []


def test_no_import_cycle():
    cycles = find_cycles(import_graph(package_modules()))
    assert not cycles, "import cycles:\n" + "\n".join(" → ".join(cycle) for cycle in cycles)
