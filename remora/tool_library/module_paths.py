"""Where a Python file sits in its project: the dotted module name it is imported as, the folder
it is imported from, and the project folder (the nearest one up with a project or pytest
configuration file). `exists` is the job's view of the files (the workspace)."""

from __future__ import annotations

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


def parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def joined(folder: str, child: str) -> str:
    return folder + "/" + child if folder else child
