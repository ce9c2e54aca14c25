"""The import graph of our packages, read from the source (every import statement, lazy ones included)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "server": "skillstate.server",
    "cli": "skillstate.cli",
    "agents": "skillstate.agents",
    "clients": "skillstate.clients",
}
"""Our source folders and the import names they are installed under."""


def module_files() -> dict[str, Path]:
    """Every module of ours by its import name."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """The modules `module` imports: ours resolved to the module named (`from . import x` names module x
    when x is one), others by their top-level package."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name if alias.name.startswith("skillstate.") else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not target.startswith("skillstate."):
                yield target.split(".")[0]
                continue
            named = [f"{target}.{alias.name}" for alias in node.names]
            submodules = [name for name in named if name in known]
            yield from submodules
            if len(submodules) < len(named):
                yield target


def import_graph() -> dict[str, set[str]]:
    """module -> the modules it imports (ours and third-party top-level names)."""
    files = module_files()
    known = set(files)
    return {module: set(imports_of(module, path, known)) for module, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
