"""Where a Python file sits in its project: the dotted module name it is imported as, the folder
it is imported from, and the project folder (the nearest one up with a project or pytest
configuration file), and where the tests of a function in it go. `exists` is the job's view of
the files (the workspace)."""

from __future__ import annotations

import ast
from collections.abc import Callable

PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini")


def module_of(path: str, exists: Callable[[str], bool]) -> tuple[str, str]:
    """The dotted module name and its import root: the first folder up without `__init__.py`."""
    folder = parent(path)
    base = path.rsplit("/", 1)[-1]
    stem = base[:-3] if base.endswith(".py") else base
    names = [] if stem == "__init__" else [stem]
    while folder and exists(joined(folder, "__init__.py")):
        names.insert(0, folder.rsplit("/", 1)[-1])
        folder = parent(folder)
    return ".".join(names), folder


def own_imports(path: str, source: str, exists: Callable[[str], bool]) -> list[str]:
    """The files of the modules the file imports from its own package (`from .rules import
    RULES`, `from . import rules`, `from pkg.rules import RULES`) that exist: where the tables
    its functions read often live (a pluralizer's irregular words). At most MAX_IMPORTED."""
    module, root = module_of(path, exists)
    package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not package:
            continue
        named = (node.module or "").split(".") if node.module else []
        if 0 < node.level <= len(package):
            base = package[: len(package) - node.level + 1]
        elif not node.level and named[:1] == package[:1]:
            base = []
        else:
            continue
        dotted = [[*base, *named]] if named else [[*base, alias.name] for alias in node.names]
        for parts in dotted:
            folder = joined(root, "/".join(parts))
            found += [f for f in (folder + ".py", joined(folder, "__init__.py")) if exists(f)][:1]
    return [file for file in dict.fromkeys(found) if file != path][:MAX_IMPORTED]


MAX_IMPORTED = 5


def project_of(path: str, exists: Callable[[str], bool]) -> str:
    """The nearest folder up from the file with a project or pytest configuration file ("" for
    the project root)."""
    folder = parent(path)
    while True:
        if any(exists(joined(folder, marker)) for marker in PROJECT_MARKERS):
            return folder
        if not folder:
            return ""
        folder = parent(folder)


def locate_tests(
    path: str, function: str, tests_dir: str, exists: Callable[[str], bool]
) -> dict[str, str]:
    """Where the tests of `function` in the file at `path` go: module and import_root (as
    module_of gives them), project (as project_of gives it), folder (the file's own),
    tests_folder (in the project, as tests_folder_of names it) and test_file (test_<the
    module's last name>_<function>.py in tests_folder)."""
    module, import_root = module_of(path, exists)
    project = project_of(path, exists)
    tests_folder = joined(project, tests_folder_of(project, tests_dir, exists))
    test_file = "test_" + module.rsplit(".", 1)[-1] + "_" + function + ".py"
    return {
        "module": module,
        "import_root": import_root,
        "project": project,
        "folder": parent(path),
        "tests_folder": tests_folder,
        "test_file": joined(tests_folder, test_file),
    }


def tests_folder_of(project: str, tests_dir: str, exists: Callable[[str], bool]) -> str:
    """The folder of the project's tests, relative to the project: `tests_dir` when it names
    one; else the project's own, `tests`, or `test` when the project has only that (tabulate,
    requests): new tests go beside the ones its maintainers wrote."""
    chosen = tests_dir.strip("/")
    if chosen:
        return chosen
    if not exists(joined(project, "tests")) and exists(joined(project, "test")):
        return "test"
    return "tests"


def parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def joined(folder: str, child: str) -> str:
    return folder + "/" + child if folder else child


SKIPPED_FOLDERS = frozenset(
    {"__pycache__", "node_modules", "venv", "build", "dist", "site-packages"}
)
MAX_SOURCES = 400


def python_sources(
    folder: str,
    word: str,
    list_dir: Callable[[str], list[str]],
    read: Callable[[str], str],
) -> dict[str, str]:
    """The Python files under `folder` (the project) that mention `word`, path: text, at most
    MAX_SOURCES files looked at; hidden and virtual-environment folders are skipped."""
    found: dict[str, str] = {}
    pending = [folder]
    looked = 0
    while pending and looked < MAX_SOURCES:
        current = pending.pop(0)
        try:
            entries = sorted(list_dir(current or "."))
        except (OSError, ValueError):
            continue
        for entry in entries:
            path = joined(current, entry)
            if entry.startswith(".") or entry in SKIPPED_FOLDERS:
                continue
            if entry.endswith(".py"):
                looked += 1
                try:
                    text = read(path)
                except (OSError, ValueError, UnicodeDecodeError):
                    continue
                if word in text:
                    found[path] = text
            elif "." not in entry:
                pending.append(path)
    return found


def root_expression(from_folder: str, to_folder: str) -> str:
    """Python code for `to_folder`, computed at run time from a file in `from_folder` (both
    relative to the project root)."""
    start = [part for part in from_folder.split("/") if part]
    end = [part for part in to_folder.split("/") if part]
    common = 0
    while common < len(start) and common < len(end) and start[common] == end[common]:
        common += 1
    code = f"pathlib.Path(__file__).resolve().parents[{len(start) - common}]"
    for part in end[common:]:
        code += f" / {part!r}"
    return code
