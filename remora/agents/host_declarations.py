"""Which host functions an agent declares (`host_functions:` in its YAML) and their stubs.

A job gets exactly the declared functions (remora/host/library.py): those every agent may
declare (stubs in host_functions.pyi beside this module) and those of its own host library
(host_functions.pyi in its package). `remora tool check` type-checks a script against the stubs
of the declared functions only, so a call of anything else is reported before it runs."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from remora.agents.installed import HOST_STUBS_FILE
from remora.config.yamlfile import YamlFile
from remora.errors import UserInputError

SHARED_STUBS = Path(__file__).with_name(HOST_STUBS_FILE)


@cache
def stub_functions(path: Path) -> dict[str, str]:
    """Each function a stub file declares, with its source (signature, docstring), by name;
    the file's imports under the key "" (what the stubs' annotations need)."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    found = {"": "\n".join(ast.get_source_segment(text, s) or "" for s in tree.body if _imports(s))}
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            found[statement.name] = ast.get_source_segment(text, statement) or ""
    return found


def available_functions(own_stubs: Path | None) -> dict[str, str]:
    """What an agent may declare: the shared functions and its own library's."""
    own = stub_functions(own_stubs) if own_stubs is not None else {}
    shared = stub_functions(SHARED_STUBS)
    return {**shared, **own, "": shared[""] + "\n" + own.get("", "")}


def declared_stubs(declared: list[str], own_stubs: Path | None) -> str:
    """The stubs a script of the agent is type-checked against."""
    available = available_functions(own_stubs)
    return "\n\n".join([available[""], *(available[name] for name in declared)]) + "\n"


def unknown_functions(declared: list[str], own_stubs: Path | None) -> list[str]:
    available = available_functions(own_stubs)
    return [name for name in declared if name not in available or not name]


def _imports(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Import | ast.ImportFrom)


def check_declarations(declared: list[str], own_stubs: Path | None, document: YamlFile) -> None:
    """Every declared name is a function the agent may have (file, line and key named)."""
    unknown = unknown_functions(declared, own_stubs)
    if unknown:
        index = declared.index(unknown[0])
        known = ", ".join(sorted(n for n in available_functions(own_stubs) if n))
        whose = "the shared ones and its package's" if own_stubs else "the shared ones"
        raise UserInputError(
            f"{document.where(['host_functions', index])}: host_functions: no host function "
            f"{unknown[0]!r} for this agent ({whose}: {known})"
        )
