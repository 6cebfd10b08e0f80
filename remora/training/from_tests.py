"""Training examples from existing tests (`remora train test --from-tests PATH`): the calls
people wrote, each behind the prompt the test agent sends when it asks the model for a call's
arguments (`call_prompts`), so its proposals look like the calls people write.

In every test file under PATH (`test_*.py`, `*_test.py`), a call of a function or class that the
test imports from the project (a module under PATH), or of a method on a variable the same test
built by calling a project class (`box = Box(3)` then `box.grow(2)`), becomes an example: the
prompt is the module's code as the agent shows it and a test's first lines up to the call's
opening parenthesis, the reply is the call's arguments as written, then `)`. Calls over several
lines, with `*`/`**` unpacking or longer than `MAX_ARGUMENTS` characters are left out.
"""

from __future__ import annotations

import ast
import builtins
import copy
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path

from remora.discovery.walk import iter_python_files
from remora.tool_library.call_prompts import call_prompt, constructor_prompt
from remora.training.dataset import Example, WrittenExamples

MAX_ROWS = 12
"""Rows of one parametrized table used per call: a table of a hundred words is one lesson."""
MAX_ARGUMENTS = 160
"""Longer argument lists are data, not a call worth learning to propose."""
FILTERS = {
    "multiline": "written over several lines",
    "unpacking": "* or ** unpacking",
    "long": f"arguments longer than {MAX_ARGUMENTS} characters",
    "variable": "arguments name the test's own variables (parameters, fixtures), not values",
    "repeated": "the same call as before",
}


def examples_from_tests(
    paths: Sequence[Path],
    *,
    share: float,
    seed: int,
    max_examples: int | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> WrittenExamples:
    """The examples of every call of project code in the tests under `paths`; about `share` of
    the test files held out; at most `max_examples` for training (a seeded choice)."""
    found = WrittenExamples()
    seen: set[tuple[str, str]] = set()
    roots = sorted({path.resolve() if path.is_dir() else path.resolve().parent for path in paths})
    projects = [(root, _modules(root)) for root in roots]
    total = sum(1 for _, modules in projects for file in modules.values() if _is_test(file.name))
    for root, modules in projects:
        for file in sorted(file for file in modules.values() if _is_test(file.name)):
            found.files += 1
            name = f"{root.name}/{file.relative_to(root).as_posix()}"
            examples = []
            for reason, example in _calls(file, modules, name):
                found.read += 1
                if example is not None and (example.prompt, example.reply) in seen:
                    reason = "repeated"
                if reason is not None:
                    found.left_out[reason] += 1
                elif example is not None:
                    seen.add((example.prompt, example.reply))
                    examples.append(example)
            if examples:
                found.by_file[name] = examples
            progress(found.files, total)
    return found.split(share, seed, max_examples)


def _is_test(name: str) -> bool:
    return name.startswith("test_") or name.endswith("_test.py")


def _modules(root: Path) -> dict[str, Path]:
    """Module name -> file for the Python files under `root` (a `src/` folder is a root of its
    own, as packaging puts it)."""
    found: dict[str, Path] = {}
    for file in iter_python_files([root], root):
        parts = list(file.relative_to(root).with_suffix("").parts)
        if parts and parts[0] == "src":
            parts = parts[1:]
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found.setdefault(".".join(parts), file)
    return found


def _calls(
    file: Path, modules: dict[str, Path], name: str
) -> Iterator[tuple[str | None, Example | None]]:
    """(why it is left out, None) or (None, example) for each call of project code in `file`."""
    try:
        text = file.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, UnicodeError, SyntaxError, ValueError):
        return
    imported = _imports(tree, modules)
    # What an argument may name: builtins and the project's own names, not the test's variables.
    known = frozenset(dir(builtins)) | {key for key in imported if not key.endswith(".")}
    sources: dict[Path, str] = {}

    def source(path: Path) -> str:
        if path not in sources:
            sources[path] = path.read_text(encoding="utf-8")
        return sources[path]

    names = {path: module for module, path in modules.items()}

    def defined(found: tuple[Path, str] | None) -> tuple[Path, str] | None:
        return _defined(found, modules, names, source) if found else None

    for test in ast.walk(tree):
        if not isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        rows = _parameter_rows(test, tree)
        built: dict[str, tuple[Path, str, str]] = {}
        """Variables holding a project class's instance: (module file, class, construction)."""
        for node in ast.walk(test):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                target = defined(_target(imported, node.value.func))
                made = ast.get_source_segment(text, node.value)
                if target and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    path, what = target
                    if made and "\n" not in made and _kind(source(path), what) == "class":
                        built[node.targets[0].id] = (path, what, made)
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            variable = (
                func.value.id
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                else None
            )
            if isinstance(func, ast.Attribute) and variable in built:
                path, owner, made = built[variable]
                if _kind(source(path), func.attr, owner) == "function":
                    prompt = call_prompt(source(path), owner, func.attr, made)
                    yield from _examples(text, node, prompt, name, known, rows)
                continue
            target = defined(_target(imported, func))
            if target is None:
                continue
            path, what = target
            kind = _kind(source(path), what)
            if kind == "function":
                yield from _examples(
                    text, node, call_prompt(source(path), "", what), name, known, rows
                )
            elif kind == "class":
                yield from _examples(
                    text, node, constructor_prompt(source(path), what), name, known, rows
                )


def _imports(tree: ast.Module, modules: dict[str, Path]) -> dict[str, tuple[Path, str]]:
    """How the test file can call the project: `from m import f as g` gives "g" -> (m's file,
    "f"); `import m as mm` and `from package import m as mm` give "mm." -> (m's file, ""),
    looked up for `mm.f(...)`."""
    found: dict[str, tuple[Path, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in modules:  # from package import module
                    found[(alias.asname or alias.name) + "."] = (modules[submodule], "")
                elif node.module in modules:
                    found[alias.asname or alias.name] = (modules[node.module], alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    found[(alias.asname or alias.name) + "."] = (modules[alias.name], "")
    return found


def _target(imported: dict[str, tuple[Path, str]], func: ast.expr) -> tuple[Path, str] | None:
    """The project module's file and the name a call calls, or None."""
    if isinstance(func, ast.Name):
        return imported.get(func.id)
    if isinstance(func, ast.Attribute):
        prefix = ast.unparse(func.value) + "."
        if prefix in imported:
            return imported[prefix][0], func.attr
    return None


def _defined(
    found: tuple[Path, str],
    modules: dict[str, Path],
    names: dict[Path, str],
    read: Callable[[Path], str],
    depth: int = 0,
) -> tuple[Path, str] | None:
    """Where a name a test imports is defined: in its module, or in the project module that
    module imports it from (a package's `__init__.py` re-exporting `from .core import f`, or
    `from .core import *`), a few imports deep."""
    path, name = found
    if _kind(read(path), name) is not None:
        return path, name
    if depth >= 3:
        return None
    body = _body(read(path))
    here = names.get(path, "")
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in body:
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = f"{base}.{node.module}" if node.module else base
        else:
            module = node.module or ""
        if module not in modules:
            continue
        for alias in node.names:
            if alias.name == "*" or (alias.asname or alias.name) == name:
                inner = name if alias.name == "*" else alias.name
                deeper = _defined((modules[module], inner), modules, names, read, depth + 1)
                if deeper is not None:
                    return deeper
    return None


def _kind(source: str, name: str, owner: str = "") -> str | None:
    """ "function", "class" or None: what `name` is at the top of `source` (in class `owner`)."""
    return _kinds(source).get((owner, name))


@lru_cache(maxsize=64)
def _body(source: str) -> tuple[ast.stmt, ...]:
    """A project module's top-level statements, parsed once for every call that names it."""
    try:
        return tuple(ast.parse(source).body)
    except (SyntaxError, ValueError):
        return ()


@lru_cache(maxsize=64)
def _kinds(source: str) -> dict[tuple[str, str], str]:
    """(owner, name) -> "function" or "class" for the module's top-level definitions and its
    classes' methods."""
    found: dict[tuple[str, str], str] = {}
    for node in _body(source):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found["", node.name] = "function"
        elif isinstance(node, ast.ClassDef):
            found["", node.name] = "class"
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[node.name, member.name] = "function"
    return found


def _examples(
    text: str,
    call: ast.Call,
    prompt: str,
    file: str,
    known: frozenset[str],
    rows: list[dict[str, ast.expr]],
) -> Iterator[tuple[str | None, Example | None]]:
    """The call's examples: one, or one per parametrized row when its arguments name the
    test's parameters (the row's values put in their place)."""
    if call.lineno != call.end_lineno:
        yield "multiline", None
        return
    names = {
        node.id
        for argument in [*call.args, *(keyword.value for keyword in call.keywords)]
        for node in ast.walk(argument)
        if isinstance(node, ast.Name)
    }
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(
        keyword.arg is None for keyword in call.keywords
    ):
        yield "unpacking", None
        return
    used = [row for row in rows if names & row.keys()] if names - known else [{}]
    if not used or any(names - known - row.keys() for row in used):
        yield "variable", None
        return
    for row in used:
        if row:
            filled = _Filled(row).visit(
                ast.Call(func=ast.Name("f"), args=call.args, keywords=call.keywords)
            )
            arguments = ast.unparse(filled)[2:-1]
        else:
            whole = ast.get_source_segment(text, call) or ""
            head = ast.get_source_segment(text, call.func) or ""
            arguments = whole[len(head) :].strip()[1:-1]
        if len(arguments) > MAX_ARGUMENTS or "\n" in arguments:
            yield "long", None
        else:
            yield None, Example(prompt=prompt, reply=arguments + ")\n", file=file)


class _Filled(ast.NodeTransformer):
    """A call's arguments with the test's parameters replaced by one row's values."""

    def __init__(self, row: dict[str, ast.expr]) -> None:
        self.row = row

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return copy.deepcopy(self.row.get(node.id, node))


def _parameter_rows(
    test: ast.FunctionDef | ast.AsyncFunctionDef, tree: ast.Module
) -> list[dict[str, ast.expr]]:
    """The rows of the test's `pytest.mark.parametrize` decorators (names -> value nodes), at
    most `MAX_ROWS`: the values written in the decorator, or in a module-level table it names."""
    tables = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    }
    rows: list[dict[str, ast.expr]] = []
    for decorator in test.decorator_list:
        if not (
            isinstance(decorator, ast.Call)
            and ast.unparse(decorator.func).endswith("parametrize")
            and len(decorator.args) >= 2
        ):
            continue
        spec, values = decorator.args[0], decorator.args[1]
        if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
            names = [name.strip() for name in spec.value.split(",") if name.strip()]
        elif isinstance(spec, ast.Tuple | ast.List):
            names = [
                e.value
                for e in spec.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            ]
        else:
            continue
        if isinstance(values, ast.Name):
            values = tables.get(values.id, values)
        if not isinstance(values, ast.Tuple | ast.List):
            continue
        for value in values.elts[:MAX_ROWS]:
            if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("param"):
                value = ast.Tuple(elts=value.args) if len(names) > 1 else value.args[0]
            if len(names) == 1:
                rows.append({names[0]: value})
            elif isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(names):
                rows.append(dict(zip(names, value.elts, strict=True)))
    return rows
