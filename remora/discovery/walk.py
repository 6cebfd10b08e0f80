"""Find the Python files named by, or lying under, the paths given to discovery."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

DEFAULT_EXCLUDES = frozenset(
    {
        ".git",
        ".hg",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "build",
        "dist",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "node_modules",
        ".remora_cache",
        # Installed third-party code is not the code under analysis; a Python installation's
        # stdlib directory holds its site-packages.
        "site-packages",
        "dist-packages",
    }
)
"""Directory names not walked into (a directory given as a path argument is still walked)."""

EXCLUDED_SUFFIXES = (".egg-info",)

OnSkip = Callable[[Path, str], None]
"""Told about each path that could not be walked, and why."""


@dataclass(frozen=True, slots=True)
class _IgnoreFile:
    base: str  # the directory holding the .gitignore, with a trailing separator
    spec: GitIgnoreSpec


_Ignores = tuple[_IgnoreFile, ...]


def iter_python_files(
    paths: Sequence[Path], root: Path, on_skip: OnSkip | None = None
) -> Iterator[Path]:
    """Yield the absolute paths of the Python files to analyse, each once.

    A file argument always counts. A directory argument is walked for `*.py` files, leaving out
    default excludes and what `.gitignore` files ignore: its own, nested ones (each relative to
    its directory) and those from `root` down to it, unless those ignore the argument itself.
    Symlinked directories met while walking are not followed, so links cannot make loops.
    """
    report: OnSkip = on_skip if on_skip is not None else _skip_silently
    root = Path(os.path.abspath(root))
    inside = _Inside(root)
    seen: set[Path] = set()
    for argument in paths:
        path = Path(os.path.abspath(argument))
        if path.is_dir():
            found = _walk(path, _ancestor_ignores(path, root, report, inside), report, inside)
        elif path.is_file():
            found = iter((path,))
        else:
            report(path, "skipped: neither a regular file nor a directory")
            continue
        for file in found:
            if file in seen:
                continue
            seen.add(file)
            if inside(file):
                yield file
            else:
                report(file, inside.outside(file))


@dataclass(frozen=True)
class _Inside:
    """Whether a path, once symbolic links are resolved, lies inside the project. Nothing
    outside it is read through a link: a cloned repository could link `secrets.py` to any file
    of the host, and its text would become a node and reach the model's prompt (and the
    sandboxed programs could not see it anyway: only the project is bound there)."""

    root: Path

    def __call__(self, path: Path | str) -> bool:
        """False only for a path inside the project that a link takes out of it (a file you
        name outside the project is yours to name)."""
        if not Path(os.path.abspath(path)).is_relative_to(self.root):
            return True
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(self.root))

    def outside(self, path: Path | str) -> str:
        target = os.path.realpath(path)
        return f"skipped: a symbolic link to {target}, outside the project ({self.root})"


def _skip_silently(path: Path, reason: str) -> None:
    pass


def _walk(top: Path, inherited: _Ignores, report: OnSkip, inside: _Inside) -> Iterator[Path]:
    # An explicit stack rather than recursion: deep trees cannot hit the recursion limit.
    stack: list[tuple[str, _Ignores]] = [(str(top), inherited)]
    while stack:
        directory, ignores = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError as exc:
            report(Path(directory), f"skipped unreadable directory: {exc.strerror or exc}")
            continue
        subdirectories: list[str] = []
        files: list[os.DirEntry[str]] = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirectories.append(entry.path)
                elif entry.name == ".gitignore":
                    own = _load_ignore_file(Path(directory), report, inside)
                    ignores = ignores if own is None else (*ignores, own)
                elif entry.name.endswith(".py") and entry.is_file():
                    files.append(entry)
            except OSError as exc:
                report(Path(entry.path), f"skipped unreadable entry: {exc.strerror or exc}")
        for entry in files:
            if not _ignored(entry.path, False, ignores):
                yield Path(entry.path)
        # Pushed in reverse so that they come off the stack in name order.
        stack.extend(
            (sub, ignores)
            for sub in reversed(subdirectories)
            if not _excluded_name(os.path.basename(sub)) and not _ignored(sub, True, ignores)
        )


def _excluded_name(name: str) -> bool:
    return name in DEFAULT_EXCLUDES or name.endswith(EXCLUDED_SUFFIXES)


def _ignored(path: str, is_dir: bool, ignores: _Ignores) -> bool:
    # The deepest .gitignore with a matching pattern decides, as in git (`!` re-includes).
    for ignore in reversed(ignores):
        if not path.startswith(ignore.base):
            continue
        relative = path[len(ignore.base) :]
        if os.sep != "/":
            relative = relative.replace(os.sep, "/")
        verdict = ignore.spec.check_file(relative + "/" if is_dir else relative).include
        if verdict is not None:
            return verdict
    return False


def _ancestor_ignores(directory: Path, root: Path, report: OnSkip, inside: _Inside) -> _Ignores:
    """The .gitignore files from `root` down to, not including, `directory`.

    None when they ignore `directory` itself: asking for an ignored directory overrides them.
    """
    try:
        relative = directory.relative_to(root)
    except ValueError:
        return ()
    if not relative.parts:
        return ()
    ancestors = [root]
    for part in relative.parts[:-1]:
        ancestors.append(ancestors[-1] / part)
    loaded = (
        _load_ignore_file(a, report, inside) for a in ancestors if (a / ".gitignore").is_file()
    )
    ignores = tuple(ignore for ignore in loaded if ignore is not None)
    return () if _ignored(str(directory), True, ignores) else ignores


def _load_ignore_file(directory: Path, report: OnSkip, inside: _Inside) -> _IgnoreFile | None:
    path = directory / ".gitignore"
    if not inside(path):
        report(path, inside.outside(path))
        return None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        report(path, f"ignored unreadable .gitignore: {exc.strerror or exc}")
        return None
    return _IgnoreFile(base=str(directory) + os.sep, spec=GitIgnoreSpec.from_lines(lines))


def walked(path: Path, root: Path) -> bool:
    """Whether walking `root` would reach the file `path`: inside `root`, under no default
    exclude, not ignored by a .gitignore (for an editor, which opens any file, including a
    library's source)."""
    root = Path(os.path.abspath(root))
    path = Path(os.path.abspath(path))
    inside = _Inside(root)
    try:
        relative = path.relative_to(root)
    except ValueError:
        return False
    if not inside(path):
        return False
    if any(_excluded_name(part) for part in relative.parts[:-1]):
        return False
    folders = [root, *(root / Path(*relative.parts[:n]) for n in range(1, len(relative.parts)))]
    loaded = (
        _load_ignore_file(f, _skip_silently, inside)
        for f in folders
        if (f / ".gitignore").is_file()
    )
    ignores = tuple(ignore for ignore in loaded if ignore is not None)
    parts = [str(folder) for folder in folders[1:]]
    return not any(_ignored(part, True, ignores) for part in parts) and not _ignored(
        str(path), False, ignores
    )
