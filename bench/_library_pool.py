"""The libraries bench/test_quality.py draws from (`--draw SEED`): small pure-Python libraries
from PyPI that nobody here chose the test agent on, listed with exact versions in
bench/corpus/test_quality_pool.json (name, version, the importable package, where it lies in
the sdist, its licence and licence file, its modules). A draw samples five libraries with the
seed, and one module of each (a module with at least MIN_DEFINITIONS functions and methods);
the seed is printed and kept in the results, so a draw can be repeated and a new result must
use a new seed.

Each drawn library is made into a project like the fixed corpus's (bench/corpus/test_quality):
its sdist downloaded once by exact version (`pip download --no-deps --no-binary :all:`, kept in
~/.cache/remora-bench/pool with its sha256 recorded in the results), the package (or
single-module file) copied unchanged with the licence file, a `pyproject.toml` naming it, an
empty `tests/` and a SOURCE.md saying where it came from. Test files the package ships inside
itself (shortuuid's `test_shortuuid.py`) are left out and named in SOURCE.md: with them the test
agent finds the methods tested and writes nothing for them, as it should for a user, and its
mutation score would measure the library's own suite being there, not what either tool writes.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

BENCH = Path(__file__).resolve().parent
POOL = BENCH / "corpus" / "test_quality_pool.json"
CACHE = Path.home() / ".cache" / "remora-bench" / "pool"
DRAWN = 5
"""Libraries per draw."""
MIN_DEFINITIONS = 3


@dataclass(frozen=True)
class PoolEntry:
    name: str
    version: str
    package: str
    path: str
    """The package folder (or the single module's file) in the sdist, from its root."""
    license: str
    licence_file: str | None
    modules: tuple[str, ...]
    """Module files in the sdist, from its root."""


@dataclass(frozen=True)
class Drawn:
    entry: PoolEntry
    root: Path
    """The project made of it."""
    module: str
    """The dotted module the benchmark measures."""
    module_file: str
    """Its file, relative to `root`."""
    sdist_sha256: str
    tests_left_out: tuple[str, ...] = ()
    """The package's own test files, not copied (make_project)."""


def load_pool() -> list[PoolEntry]:
    rows = json.loads(POOL.read_text(encoding="utf-8"))
    fields = ("name", "version", "package", "path", "license")
    return [
        PoolEntry(
            **{key: row[key] for key in fields},
            licence_file=row.get("licence_file"),
            modules=tuple(row["modules"]),
        )
        for row in rows
    ]


def draw(seed: int, into: Path) -> list[Drawn]:
    """Five libraries of the pool, drawn with `seed`, each made into a project under `into`."""
    chooser = random.Random(seed)
    pool = sorted(load_pool(), key=lambda entry: entry.name)
    drawn = []
    for entry in chooser.sample(pool, DRAWN):
        sdist, digest = download(entry)
        drawn.append(make_project(entry, sdist, digest, into / entry.name, chooser))
    return drawn


def download(entry: PoolEntry) -> tuple[Path, str]:
    """The sdist's unpacked root folder and the archive's sha256 (downloaded once)."""
    folder = CACHE / f"{entry.name}-{entry.version}"
    archives = sorted(p for p in folder.glob("*.*") if p.suffix in (".gz", ".zip"))
    if not archives:
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "--quiet", "--dest", str(folder), f"{entry.name}=={entry.version}"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        archives = sorted(p for p in folder.glob("*") if p.suffix in (".gz", ".zip"))
        if done.returncode != 0 or not archives:
            raise SystemExit(f"{entry.name}=={entry.version}: pip download failed: "
                             f"{(done.stderr or done.stdout).strip()[-300:]}")  # fmt: skip
    archive = archives[0]
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    unpacked = folder / "unpacked"
    if not unpacked.is_dir():
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as opened:
                opened.extractall(unpacked)
        else:
            with tarfile.open(archive) as opened:
                opened.extractall(unpacked, filter="data")
    (root,) = unpacked.iterdir()
    return root, digest


DOCUMENTATION = (".md", ".rst", ".txt")


def copy_documentation(sdist: Path, root: Path) -> None:
    """The README and the docs/ (or doc/) folder's text files, as a clone of the repository
    has them (Remora reads their code examples; Pynguin does not); no code, no tests."""
    for path in sorted(sdist.iterdir()):
        if path.is_file() and path.name.lower().startswith("readme"):
            shutil.copy2(path, root / path.name)
        elif path.is_dir() and path.name in ("docs", "doc"):
            for document in sorted(path.iterdir()):
                if document.is_file() and document.suffix.lower() in DOCUMENTATION:
                    (root / path.name).mkdir(exist_ok=True)
                    shutil.copy2(document, root / path.name / document.name)


def make_project(
    entry: PoolEntry, sdist: Path, digest: str, root: Path, chooser: random.Random
) -> Drawn:
    shutil.rmtree(root, ignore_errors=True)
    (root / "tests").mkdir(parents=True)
    source = sdist / entry.path
    prefix = entry.path.rsplit("/", 1)[0] + "/" if "/" in entry.path else ""
    shipped: list[str] = []
    if source.is_dir():
        shipped = shipped_tests(source)
        ignored = shutil.ignore_patterns("__pycache__", *SHIPPED_TESTS)
        shutil.copytree(source, root / source.name, ignore=ignored)
    else:
        shutil.copy2(source, root / source.name)
    if entry.licence_file and (sdist / entry.licence_file).is_file():
        shutil.copy2(sdist / entry.licence_file, root / Path(entry.licence_file).name)
    copy_documentation(sdist, root)
    candidates = []
    for module in entry.modules:
        relative = module.removeprefix(prefix)
        tree = ast.parse((root / relative).read_text(encoding="utf-8"))
        if len(definitions(tree)) >= MIN_DEFINITIONS:
            candidates.append(relative)
    if not candidates:
        raise SystemExit(f"{entry.name}: no module with {MIN_DEFINITIONS} functions or methods")
    module_file = chooser.choice(sorted(candidates))
    dotted = module_file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    (root / "pyproject.toml").write_text(
        f"# bench/test_quality.py --draw: {entry.name} {entry.version}, unchanged; see SOURCE.md.\n"
        f'[project]\nname = "{entry.name}"\nversion = "{entry.version}"\ndependencies = []\n\n'
        '[tool.pytest.ini_options]\npythonpath = ["."]\n'
    )
    # Installed, as a user's project is in the environment they test it in: a package that
    # asks importlib.metadata for its own version (semantic_version, uuid6) imports only so;
    # until 2026-12-01 neither tool could import them, and both measured 0 of their mutants.
    info = root / f"{re.sub(r'[-_.]+', '_', entry.name)}-{entry.version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {entry.name}\nVersion: {entry.version}\n"
    )
    (root / "SOURCE.md").write_text(
        f"# {entry.name} {entry.version}\n\nDrawn by bench/test_quality.py from its pool: the "
        f"sdist of https://pypi.org/project/{entry.name}/{entry.version}/ (sha256 {digest}), "
        f"`{entry.path}` copied unchanged, licence {entry.license} "
        f"({entry.licence_file or 'in the package metadata'})."
        + (f" Its own tests left out: {', '.join(shipped)}.\n" if shipped else "\n")
    )
    return Drawn(entry, root, dotted, module_file, digest, tuple(shipped))


SHIPPED_TESTS = ("test_*.py", "*_test.py", "test.py", "tests.py", "conftest.py", "tests", "test")
"""What a package ships of its own suite (files, and folders of them). `test.py` was missing
until draw 9091: dotmap ships dotmap/test.py, and the test agent found 27 of its methods
already tested there (outcome `tested`, no file written), where Pynguin ignores it."""


def shipped_tests(package: Path) -> list[str]:
    """The files of `package` that are its own tests (or in a test folder), from its parent."""
    return sorted(
        str(path.relative_to(package.parent))
        for path in package.rglob("*.py")
        if any(fnmatch(part, pattern) for part in path.relative_to(package).parts
               for pattern in SHIPPED_TESTS)
    )  # fmt: skip


def definitions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every top-level function and method of a top-level class (what
    the test agent writes tests for), in source order; the benchmark's mutants go in them."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, functions):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            found += [(f"{node.name}.{c.name}", c) for c in node.body if isinstance(c, functions)]
    return found
