"""The layout the architecture promises (docs/architecture.md): packages by stage in layers that
import only downward, a handful of modules at the top, no import cycles between Remora's
modules, and no module over 400 lines but the protocol module and the call probe (which the
server image and the sandbox copy as one file each)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "remora"
DOC = PACKAGE.parent / "docs" / "architecture.md"
TOP_LEVEL = {"__init__.py", "__main__.py", "errors.py", "signals.py", "events.py"}
LONG_ALLOWED = {"protocol/functiongemma.py", "tool_library/call_probe.py"}
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, known: set[str]) -> set[str]:
    """The Remora modules `path` imports at its top level, those under `if TYPE_CHECKING:`
    included (a cycle the type checker needs is a cycle of the design), not those inside
    functions (those run later, and break no cycle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    statements = list(tree.body)
    for statement in tree.body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            statements += statement.body
    for statement in statements:
        names: list[str] = []
        if isinstance(statement, ast.Import):
            names = [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            names = [statement.module]
            names += [f"{statement.module}.{alias.name}" for alias in statement.names]
        for name in names:
            if name in known:
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    known = set(paths)
    edges = {name: imports(path, known) - {name} for name, path in paths.items()}
    for name in known:  # importing a.b.c imports a and a.b first
        parts = name.split(".")
        for end in range(1, len(parts)):
            parent = ".".join(parts[:end])
            if parent in known and parent != name:
                edges[name].add(parent)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
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
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_sees_a_cycle_through_type_checking(tmp_path: Path) -> None:
    module = tmp_path / "a.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import remora.b\n")
    assert imports(module, {"remora.b"}) == {"remora.b"}


def private_imports() -> list[str]:
    """Every private name (`_x`, not `__x__`) imported from another Remora module, at any depth
    of a module (lazy and TYPE_CHECKING imports too): `importer: module._x`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if not (node.level or (node.module or "").split(".")[0] == "remora"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.endswith("__"):
                    found.append(f"{module_name(path)}: {node.module}.{alias.name}")
    return found


def test_no_private_name_is_imported_from_another_module() -> None:
    """A name another module needs is part of its module's interface: it gets a public name (a
    module's private names are its own to change)."""
    assert private_imports() == []


def test_the_cycle_check_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_over_400_lines_but_the_protocol_module() -> None:
    long = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert set(long) <= LONG_ALLOWED, long


def test_importing_a_node_does_not_load_tree_sitter() -> None:
    code = "import sys, remora.discovery.nodes; print('tree_sitter' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_every_module_has_its_line_in_the_architecture_doc() -> None:
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(remora/[\w/]+\.py)` \|", doc, re.MULTILINE))
    modules = {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.read_text(encoding="utf-8").strip()
    }
    assert listed == modules


def layers() -> dict[str, int]:
    """The layer of each package (or top-level module), from the doc's table."""
    table = re.findall(r"^\| (\d+) \| ([^|]+) \|", DOC.read_text(encoding="utf-8"), re.MULTILINE)
    return {name: int(n) for n, names in table for name in re.findall(r"`(\w+)`", names)}


def upward_imports(layer: dict[str, int]) -> list[str]:
    """Every import (at any depth of a module, lazy ones too) of a package from a lower or the
    same layer: `importer -> imported`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path).split(".")[1:2] or ["__init__"]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module]
            for target in targets:
                parts = target.split(".")
                if parts[0] != "remora" or len(parts) < 2 or parts[1] == source[0]:
                    continue
                if source[0] == "__init__" or layer[parts[1]] >= layer[source[0]]:
                    found.append(f"{module_name(path)} -> {target}")
    return found


def test_only_a_handful_of_modules_at_the_top() -> None:
    assert {path.name for path in PACKAGE.glob("*.py")} <= TOP_LEVEL


def test_every_package_has_a_layer_and_imports_only_lower_ones() -> None:
    layer = layers()
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    tops = {name.removesuffix(".py") for name in TOP_LEVEL} - {"__init__"}
    assert packages | tops == set(layer)
    assert upward_imports(layer) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    layer = layers()
    lowered = {**layer, "cli": 0}  # every import of the command line's is now upward
    assert any(line.startswith("remora.cli.") for line in upward_imports(lowered))


def test_every_package_says_its_job() -> None:
    quiet = [
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("__init__.py")
        if path.parent != PACKAGE and not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert quiet == []
