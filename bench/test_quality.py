"""Test quality: Remora's test agent (embedded engine) beside Pynguin, on real open-source modules
(bench/corpus/test_quality: inflection, ordered-set, jsonpointer and toposort, vendored unchanged
with their licences), each tool given the same wall-time budget per module, in one run.

    python bench/test_quality.py             # 4 libraries, 60 s per module, 60 mutants each
    python bench/test_quality.py --quick     # toposort only, 10 s, 10 mutants (about a minute)
    python bench/test_quality.py --budget-s 120 --libraries inflection,toposort
    python bench/test_quality.py --pynguin none --every-call [--adapter DIR]   # the ceiling

Per library and tool: the functions and methods the kept tests call directly (and, for Remora,
those its report says it wrote tests for); whether the kept files pass together in three orders
(as sorted, reversed, seeded shuffle: of the files and of the tests within the session); branch
coverage (coverage.py) of the module and of the functions tested; a mutation score with the
same mutants for both tools (this file's own mutator, below: seeded sample of at most
--mutants per module), over all sampled mutants and over those in the functions each tool
tested; tests pinning a TypeError or AttributeError, and which of those pass an argument that
contradicts the function's annotation (a static heuristic, `pinned_type_errors`); wall time.

Remora: one `python -m remora analyze PROJECT --engine local --no-cache --agents test --fix`
per library (the packaged model, no server), timed whole (model load included). Pynguin: one
`pynguin --maximum-search-time BUDGET` per module, in its own virtual environment (found with
--pynguin, $PYNGUIN, PATH, ~/.pynguin-venv or ../pynguin-venv beside the work tree; install:
`python3.11 -m venv ~/.pynguin-venv && ~/.pynguin-venv/bin/pip install pynguin==0.48.0`),
timed whole; without it Pynguin's figures are N/A. Both tools' tests run with this Python's
pytest, each in a fresh copy of the library. The two generators run one after the other, alone;
the evaluation then runs two at a time.

Goals (the issue that asked for this benchmark), for Remora: the kept suite passes together
in every order, always; mutation score >= 50 % and >= Pynguin's on the same modules, in no more
wall time than Pynguin was given per module; no pinned TypeError/AttributeError for an argument
that contradicts an annotation.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import Deadline, Report, common_arguments, stop_process_group, workdir
from _library_pool import definitions, draw

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
CORPUS = BENCH / "corpus" / "test_quality"
LIBRARIES = ("inflection", "ordered_set", "jsonpointer", "toposort")
QUICK_LIBRARY = "toposort"
TOOLS = ("remora", "pynguin")
ORDERS = ("sorted", "reversed", "shuffled")
PYTHON = sys.executable
ADAPTER: Path | None = None
"""--adapter: the test agent runs with it (results: test_quality_adapter.json)."""
EVERY_CALL = False
"""--every-call: Remora through bench/_every_call_run.py (every pinnable call kept, the model
always asked): what its candidates could kill at most, not what it ships."""
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
PINNED = ("TypeError", "AttributeError")

# --------------------------------------------------------------------------- processes

_ACTIVE: set[subprocess.Popen[str]] = set()
_ACTIVE_LOCK = threading.Lock()
_STOP = threading.Event()


@dataclass
class Ran:
    code: int
    out: str
    seconds: float
    timed_out: bool


def run(
    command: Sequence[str | Path],
    cwd: Path,
    timeout: float,
    env: dict[str, str] | None = None,
) -> Ran:
    """Run a command in a session of its own; on timeout (or SIGTERM) kill its whole group."""
    if _STOP.is_set():
        raise SystemExit("stopped")
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(part) for part in command], cwd=cwd, env=env, text=True, errors="replace",
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    with _ACTIVE_LOCK:
        _ACTIVE.add(process)
    timed_out = False
    try:
        try:
            out, _ = process.communicate(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_process_group(process, grace=2)  # type: ignore[arg-type]
            out = process.communicate()[0]
    except BaseException:
        stop_process_group(process, grace=2)  # type: ignore[arg-type]
        raise
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.discard(process)
    return Ran(process.returncode, out or "", time.perf_counter() - started, timed_out)


def stop_all() -> None:
    _STOP.set()
    with _ACTIVE_LOCK:
        active = list(_ACTIVE)
    for process in active:
        stop_process_group(process, grace=2)  # type: ignore[arg-type]


def copy_project(source: Path, target: Path) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(
        source, target, ignore=shutil.ignore_patterns("__pycache__", ".remora_cache", "*.pyc")
    )
    return target


# --------------------------------------------------------------------------- the corpus


@dataclass
class Library:
    name: str
    root: Path
    """The project folder in the corpus (pyproject.toml, licence, SOURCE.md, module, tests/)."""
    module: str
    module_file: str
    """The module's path relative to `root`."""
    source: str
    definitions: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]
    """(qualified name, node) of every top-level function and method of a top-level class, in
    source order; overloads and property setters repeat a name."""

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys(name for name, _ in self.definitions))

    def ranges(self, names: set[str]) -> list[tuple[int, int]]:
        return [
            (n.lineno, n.end_lineno or n.lineno) for name, n in self.definitions if name in names
        ]


def load_library(name: str) -> Library:
    root = CORPUS / name
    for relative in (f"{name}.py", f"{name}/__init__.py"):
        if (root / relative).is_file():
            return library_of(name, root, name, relative)
    raise SystemExit(f"{root}: no module {name}.py or package {name}/")


def library_of(name: str, root: Path, module: str, module_file: str) -> Library:
    # Line endings as they are: mutants are byte offsets into the file (word2number's and
    # pyqtree's are CRLF; read as text, every mutant landed one byte further per line).
    source = (root / module_file).read_bytes().decode("utf-8")
    return Library(name, root, module, module_file, source, definitions(ast.parse(source)))


# --------------------------------------------------------------------------- the mutator
#
# Mutants are made inside the bodies of the module's functions and methods (docstrings,
# annotations, decorators and f-strings left alone), one change each, in source order:
#   comparisons  < <=, > >=, == !=, in / not in, is / is not (each swapped with its partner)
#   arithmetic   + -, * /, // %  (binary operators and augmented assignments)
#   numbers      n -> n + 1 (not booleans)
#   strings      'x' -> '' and '' -> 'XX'
#   not x        -> x
#   return X     -> return None
#   and / or     swapped
# The node's source text is replaced by the mutated node (ast.unparse, in parentheses for an
# expression): the rest of the file keeps its bytes. A mutant that does not compile, or whose
# tree equals the original's, is dropped. None goes in a unittest case the module ships
# (shipped_test_cases). Then a seeded sample of --mutants per module, the same for both tools.

COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
ARITHMETIC_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mod, ast.Mod: ast.FloorDiv,
}  # fmt: skip
SYMBOLS = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+",
    ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    id: int
    function: str
    line: int
    """First line of the innermost statement holding the change: coverage.py reports
    statements by their first line, so a mutant on a line no test ran cannot be killed."""
    operator: str
    before: str
    after: str
    start: int
    end: int
    """Byte offsets of the replaced text in the module's UTF-8 source."""
    replacement: str

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.replacement.encode() + source[self.end :]

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "function": self.function,
            "line": self.line,
            "operator": self.operator,
            "before": self.before,
            "after": self.after,
        }


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _body_nodes(function: ast.AST) -> Iterator[tuple[ast.stmt, ast.AST]]:
    """(innermost statement, node) of every node of a function's body, in source order."""
    stack: list[tuple[ast.stmt, ast.AST]] = []

    def push_body(body: list[ast.stmt]) -> None:
        if body and _is_docstring(body[0]):
            body = body[1:]
        stack.extend((statement, statement) for statement in reversed(body))

    push_body(function.body)  # type: ignore[attr-defined]
    while stack:
        statement, node = stack.pop()
        yield statement, node
        children: list[tuple[ast.stmt, ast.AST]] = []
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "decorator_list", "type_comment"):
                continue
            if field == "body" and isinstance(node, (*FUNCTIONS, ast.ClassDef)):
                body = [s for i, s in enumerate(value) if i or not _is_docstring(s)]
                children += [(s, s) for s in body]
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.JoinedStr) or not isinstance(child, ast.AST):
                    continue
                children.append(
                    (child, child) if isinstance(child, ast.stmt) else (statement, child)
                )
        stack.extend(reversed(children))


def _variants(node: ast.AST) -> Iterator[tuple[str, str]]:
    """(operator, replacement source) for each mutation of `node`."""
    if isinstance(node, ast.Compare):
        for index, op in enumerate(node.ops):
            swap = COMPARE_SWAP.get(type(op))
            if swap:
                ops = [*node.ops[:index], swap(), *node.ops[index + 1 :]]
                new = ast.Compare(left=node.left, ops=ops, comparators=node.comparators)
                yield f"{SYMBOLS[type(op)]} -> {SYMBOLS[swap]}", f"({ast.unparse(new)})"
    elif isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC_SWAP:
        swap = ARITHMETIC_SWAP[type(node.op)]
        new_op = ast.BinOp(left=node.left, op=swap(), right=node.right)
        yield f"{SYMBOLS[type(node.op)]} -> {SYMBOLS[swap]}", f"({ast.unparse(new_op)})"
    elif isinstance(node, ast.AugAssign) and type(node.op) in ARITHMETIC_SWAP:
        swap = ARITHMETIC_SWAP[type(node.op)]
        new_aug = ast.AugAssign(target=node.target, op=swap(), value=node.value)
        yield f"{SYMBOLS[type(node.op)]}= -> {SYMBOLS[swap]}=", ast.unparse(new_aug)
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        names = ("and -> or", "or -> and")[isinstance(node.op, ast.Or)]
        yield names, f"({ast.unparse(ast.BoolOp(op=other, values=node.values))})"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "drop not", f"({ast.unparse(node.operand)})"
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or value is None or value is Ellipsis:
            return
        if isinstance(value, int | float):
            yield "n -> n + 1", f"({value + 1!r})"
        elif isinstance(value, str):
            yield ("'' -> 'XX'", "'XX'") if value == "" else ("'x' -> ''", "''")
    elif isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
        yield "return X -> return None", "return None"


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def make_mutants(library: Library) -> list[Mutant]:
    source = library.source.encode()
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    original = ast.dump(ast.parse(library.source))
    found: list[Mutant] = []
    shipped = shipped_test_cases(library.source)
    for function, definition in library.definitions:
        if function.split(".")[0] in shipped:
            continue
        for statement, node in _body_nodes(definition):
            if not hasattr(node, "end_lineno") or node.end_lineno is None:
                continue
            start = starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
            end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
            if isinstance(statement, ast.Expr) and statement.value is node:
                continue  # a bare expression statement: changing a constant there does nothing
            for operator, replacement in _variants(node):
                mutant = Mutant(
                    id=len(found), function=function, line=statement.lineno, operator=operator,
                    before=_short(source[start:end].decode()), after=_short(replacement),
                    start=start, end=end, replacement=replacement,
                )  # fmt: skip
                mutated = mutant.apply(source).decode()
                try:
                    tree = ast.parse(mutated)
                    compile(tree, library.module_file, "exec")
                except (SyntaxError, ValueError):
                    continue
                if ast.dump(tree) != original:
                    found.append(mutant)
    return found


def shipped_test_cases(source: str) -> set[str]:
    """The unittest cases a module ships in itself (rfc3339's `LocalTimeTestCase`): no mutant
    goes in them, as the test files a package ships are left out (_library_pool): a mutant
    there breaks the library's own test, not its code, and was "killed" by calling that test
    (Pynguin's `LocalTimeTestCase().test_1920()`), where the test agent writes tests for the
    code they test."""
    return {
        node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base).endswith("TestCase") for base in node.bases)
    }


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def sample_mutants(mutants: list[Mutant], cap: int, seed: int, name: str) -> list[Mutant]:
    if len(mutants) <= cap:
        return mutants
    chosen = random.Random(f"{seed}:{name}").sample(mutants, cap)
    return sorted(chosen, key=lambda mutant: mutant.id)


# --------------------------------------------------------------------------- pytest runs

PLUGIN = '''\
"""pytest plugin of bench/test_quality.py: puts the tests in the order $TQ_ORDER asks
(sorted: as collected; reversed; shuffled:SEED) and, with $TQ_CALLS, records the functions of the
module under test ($TQ_MODULE) that code in the tests folder ($TQ_TESTS) calls directly."""
import json
import os
import random
import sys
import threading

_called = set()
_module = os.environ.get("TQ_MODULE", "")
_tests = os.environ.get("TQ_TESTS", "") + os.sep
_in_module = {}
_in_tests = {}


def pytest_collection_modifyitems(session, config, items):
    order = os.environ.get("TQ_ORDER", "sorted")
    if order == "reversed":
        items.reverse()
    elif order.startswith("shuffled:"):
        random.Random(int(order.partition(":")[2])).shuffle(items)


def _profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    hit = _in_module.get(code)
    if hit is None:
        hit = _in_module[code] = os.path.realpath(code.co_filename) == _module
    if not hit or frame.f_back is None:
        return
    caller = frame.f_back.f_code
    tested = _in_tests.get(caller)
    if tested is None:
        tested = _in_tests[caller] = os.path.realpath(caller.co_filename).startswith(_tests)
    if tested:
        _called.add(code.co_qualname)


def pytest_configure(config):
    if os.environ.get("TQ_CALLS"):
        sys.setprofile(_profile)
        threading.setprofile(_profile)


def pytest_unconfigure(config):
    if os.environ.get("TQ_CALLS"):
        sys.setprofile(None)
        threading.setprofile(None)
        with open(os.environ["TQ_CALLS"], "w") as file:
            json.dump(sorted(_called), file)
'''

PYTEST = (
    "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "tq_plugin",
    "-q", "--tb=no", "-rfE",
)  # fmt: skip
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")


@dataclass
class Suite:
    """One tool's kept test files for one library, in a fresh copy of the library."""

    tool: str
    library: Library
    project: Path
    files: list[str]
    """Relative to `project`, sorted."""
    plugin_dir: Path

    @property
    def module_path(self) -> Path:
        return (self.project / self.library.module_file).resolve()

    def env(self, order: str, calls: Path | None = None) -> dict[str, str]:
        env = {
            **os.environ,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": os.pathsep.join(
                [str(self.plugin_dir), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "TQ_ORDER": order,
            "TQ_MODULE": str(self.module_path),
            "TQ_TESTS": str((self.project / "tests").resolve()),
        }
        env.pop("TQ_CALLS", None)
        if calls is not None:
            env["TQ_CALLS"] = str(calls)
        return env

    def pytest(
        self,
        files: Sequence[str],
        order: str,
        timeout: float,
        *,
        extra: Sequence[str] = (),
        calls: Path | None = None,
        prefix: Sequence[str] = (),
    ) -> Ran:
        command = [PYTHON, *prefix, *PYTEST, *extra, *files]
        return run(command, self.project, timeout, env=self.env(order, calls))


def parse_pytest(out: str) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    lines = out.strip().splitlines()
    for line in reversed(lines):
        if SUMMARY.search(line):
            for number, word in SUMMARY.findall(line):
                counts["errors" if word.startswith("error") else word] += int(number)
            break
    failed, broken_files = [], []
    for line in lines:
        if line.startswith(("FAILED ", "ERROR ")):
            node = line.split(" ", 1)[1].split(" - ", 1)[0].strip()
            (failed if "::" in node else broken_files).append(node)
    return {"counts": dict(counts), "failed": failed, "broken_files": broken_files}


def arrange(files: list[str], order: str, seed: int) -> tuple[list[str], str]:
    if order == "reversed":
        return files[::-1], "reversed"
    if order == "shuffled":
        return random.Random(seed).sample(files, len(files)), f"shuffled:{seed}"
    return list(files), "sorted"


# --------------------------------------------------------------------------- evaluation


def evaluate(
    suite: Suite, mutants: list[Mutant], args: argparse.Namespace, deadline: Deadline
) -> dict[str, Any]:
    library, result = suite.library, {}
    result["test_files"] = suite.files
    if not suite.files:
        statuses = "S" * len(mutants)
        result.update(
            tests=0, called_functions=[],
            orders={order: {"passed": None, "note": "no test files"} for order in ORDERS},
            coverage=None, pinned=[], mutation=score(library, mutants, statuses, set()),
        )  # fmt: skip
        return result
    # Three orders; the first also records which functions the tests call directly.
    calls_file = suite.project.parent / f".{suite.tool}-{library.name}-calls.json"
    orders: dict[str, Any] = {}
    failing: set[str] = set()
    broken: set[str] = set()
    for order in ORDERS:
        files, tag = arrange(suite.files, order, args.seed)
        ran = suite.pytest(
            files, tag, args.suite_timeout_s, calls=calls_file if order == "sorted" else None
        )
        parsed = parse_pytest(ran.out)
        orders[order] = {
            "passed": ran.code == 0,
            "exit_code": ran.code,
            "timed_out": ran.timed_out,
            "seconds": round(ran.seconds, 2),
            "counts": parsed["counts"],
            "failed_tests": parsed["failed"][:20],
            "broken_files": parsed["broken_files"],
        }
        if ran.code not in (0, 1) and not parsed["broken_files"] and not parsed["failed"]:
            orders[order]["output_tail"] = ran.out[-1500:]
        failing |= set(parsed["failed"])
        broken |= set(parsed["broken_files"])
    result["orders"] = orders
    result["tests"] = max(
        sum(o["counts"].get(key, 0) for key in ("passed", "failed", "errors"))
        for o in orders.values()
    )
    called: set[str] = set()
    with contextlib.suppress(OSError, ValueError):
        called = {name.split(".<locals>")[0] for name in json.loads(calls_file.read_text())}
    result["called_functions"] = sorted(called & set(library.names))
    tested = set(result["called_functions"])
    result["coverage"] = coverage_of(suite, tested, args)
    result["pinned"] = pinned_type_errors(suite, library)
    # Mutation: the tests that passed in every order, on the unmutated module first.
    files = [f for f in suite.files if f not in broken]
    deselect = [arg for test in sorted(failing) for arg in ("--deselect", test)]
    mutation_note = None
    baseline = (
        suite.pytest(files, "sorted", args.suite_timeout_s, extra=deselect) if files else None
    )
    if baseline is None or baseline.code != 0:
        mutation_note = "no test passes on the unmodified module: no mutant run"
        statuses = "S" * len(mutants)
    else:
        if failing or broken:
            mutation_note = (
                f"{len(failing)} failing tests and {len(broken)} files that do not import "
                f"left out of the mutant runs"
            )
        executed = set((result["coverage"] or {}).get("executed_lines", [])) or None
        timeout = max(args.mutant_timeout_s, 3 * baseline.seconds + 2)
        statuses = run_mutants(suite, mutants, files, deselect, executed, timeout, deadline)
    result["mutation"] = score(library, mutants, statuses, tested)
    result["mutation"]["note"] = mutation_note
    if result["coverage"]:
        result["coverage"].pop("executed_lines", None)
    return result


def run_mutants(
    suite: Suite,
    mutants: list[Mutant],
    files: list[str],
    deselect: list[str],
    executed: set[int] | None,
    timeout: float,
    deadline: Deadline,
) -> str:
    """One letter per mutant: K killed (a test failed), T killed by the timeout, S survived,
    U survived unrun (no test ran its line: coverage), X not run (the benchmark's time ran out).
    """
    path = suite.project / suite.library.module_file
    original = path.read_bytes()
    statuses = []
    try:
        for mutant in mutants:
            if executed is not None and mutant.line not in executed:
                statuses.append("U")
                continue
            if deadline.left() < timeout:
                statuses.append("X")
                continue
            path.write_bytes(mutant.apply(original))
            ran = suite.pytest(files, "sorted", timeout, extra=["-x", *deselect])
            statuses.append("T" if ran.timed_out else "K" if ran.code != 0 else "S")
    finally:
        path.write_bytes(original)
    return "".join(statuses)


def score(
    library: Library, mutants: list[Mutant], statuses: str, tested: set[str]
) -> dict[str, Any]:
    killed = [status in "KT" for status in statuses]
    in_tested = [i for i, mutant in enumerate(mutants) if mutant.function in tested]
    tally = Counter(statuses)
    return {
        "mutants": len(mutants),
        "killed": sum(killed),
        "score": round(sum(killed) / len(mutants), 4) if mutants else None,
        "mutants_in_tested_functions": len(in_tested),
        "killed_in_tested_functions": sum(killed[i] for i in in_tested),
        "score_in_tested_functions": (
            round(sum(killed[i] for i in in_tested) / len(in_tested), 4) if in_tested else None
        ),
        "timeouts": tally["T"],
        "survived_unrun": tally["U"],
        "not_run": tally["X"],
        "statuses": statuses,
    }


def coverage_of(suite: Suite, tested: set[str], args: argparse.Namespace) -> dict[str, Any] | None:
    """Branch coverage (coverage.py) of the module, and of the functions tested, the suite run
    once as sorted."""
    data = suite.project.parent / f".{suite.tool}-{suite.library.name}.coverage"
    output = data.with_suffix(".json")
    prefix = ["-m", "coverage", "run", "--branch", f"--data-file={data}",
              f"--include={suite.module_path}"]  # fmt: skip
    ran = suite.pytest(suite.files, "sorted", args.suite_timeout_s, prefix=prefix)
    if "No module named coverage" in ran.out:
        return {"error": "coverage.py is not installed in this Python"}
    done = run(
        [PYTHON, "-m", "coverage", "json", f"--data-file={data}", "-o", output, "-q"],
        suite.project, 60,
    )  # fmt: skip
    try:
        files = json.loads(output.read_text())["files"]
        entry = next(iter(files.values()))
    except (OSError, ValueError, StopIteration, KeyError):
        return {"error": f"no coverage data (exit {ran.code}, {done.code}): {done.out[-300:]}"}
    summary = entry["summary"]
    ranges = suite.library.ranges(tested)

    def inside(line: int) -> bool:
        return any(first <= line <= last for first, last in ranges)

    covered = sum(inside(a) for a, _ in entry["executed_branches"])
    missing = sum(inside(a) for a, _ in entry["missing_branches"])
    lines_in = [line for line in entry["executed_lines"] if inside(line)]
    statements = lines_in + [line for line in entry["missing_lines"] if inside(line)]
    return {
        "module_branches": summary["num_branches"],
        "module_branches_covered": summary["covered_branches"],
        "module_branch_coverage": _ratio(summary["covered_branches"], summary["num_branches"]),
        "module_line_coverage": _ratio(summary["covered_lines"], summary["num_statements"]),
        "tested_functions_branches": covered + missing,
        "tested_functions_branches_covered": covered,
        "tested_functions_branch_coverage": _ratio(covered, covered + missing),
        "tested_functions_line_coverage": _ratio(len(lines_in), len(statements)),
        "executed_lines": entry["executed_lines"],
    }


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


# --------------------------------------------------------------------------- pinned TypeErrors
#
# The heuristic: every `with pytest.raises(E)` (or `pytest.raises(E, f, ...)`) with E a
# TypeError or AttributeError is a pin. The calls inside it are resolved statically to a
# function or method of the module (a module-level name, `module.name`, `obj.method` where obj
# was assigned an instance of one of its classes, or a method name only one class defines;
# `Class(...)` is `Class.__init__`) and their arguments bound to its parameters. An argument
# contradicts an annotation when its type is known statically (a literal, a builtin's or one of
# the module's classes' constructor, or a variable assigned one of those in the test) and the
# annotation (str, int, float, bool, bytes, None, list/dict/set/tuple and typing's aliases,
# Optional, Union, X | Y, Sequence, Mapping, Iterable and the like) does not admit it. Unknown
# types and annotations (TypeVars, Any, the module's own aliases) never contradict.

ABSTRACT = "<a class of the module may fit>"
ITERABLES = {"list", "tuple", "dict", "set", "frozenset", "str", "bytes", "range", ABSTRACT}
HASHABLE = {"str", "int", "float", "bool", "bytes", "tuple", "frozenset", "NoneType", "complex",
            "function", "object", ABSTRACT}  # fmt: skip
ANNOTATIONS: dict[str, set[str]] = {
    "str": {"str"}, "int": {"int", "bool"}, "float": {"float", "int", "bool"},
    "complex": {"complex", "float", "int", "bool"}, "bool": {"bool"}, "bytes": {"bytes"},
    "list": {"list"}, "List": {"list"}, "tuple": {"tuple"}, "Tuple": {"tuple"},
    "dict": {"dict"}, "Dict": {"dict"}, "set": {"set"}, "Set": {"set"},
    "frozenset": {"frozenset"}, "FrozenSet": {"frozenset"}, "None": {"NoneType"},
    "Sequence": {"list", "tuple", "str", "bytes", "range", ABSTRACT},
    "MutableSequence": {"list", ABSTRACT}, "Mapping": {"dict", ABSTRACT},
    "MutableMapping": {"dict", ABSTRACT}, "AbstractSet": {"set", "frozenset", ABSTRACT},
    "MutableSet": {"set", ABSTRACT}, "Iterable": ITERABLES, "Iterator": ITERABLES,
    "Collection": ITERABLES, "Container": ITERABLES, "Reversible": ITERABLES, "Sized": ITERABLES,
    "Hashable": HASHABLE, "Callable": {"function", ABSTRACT},
}  # fmt: skip
BUILTIN_TYPES = {"list", "dict", "set", "tuple", "str", "int", "float", "bytes", "frozenset",
                 "bool", "complex", "object", "range"}  # fmt: skip


def accepted(annotation: ast.expr | None) -> set[str] | None:
    """The type names an annotation admits; None: anything (or not understood)."""
    if annotation is None:
        return None
    if isinstance(annotation, ast.Constant):
        if annotation.value is None:
            return {"NoneType"}
        if isinstance(annotation.value, str):
            with contextlib.suppress(SyntaxError):
                return accepted(ast.parse(annotation.value, mode="eval").body)
        return None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, right = accepted(annotation.left), accepted(annotation.right)
        return None if left is None or right is None else left | right
    if isinstance(annotation, ast.Subscript):
        base = _name(annotation.value)
        parts = (
            annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        )
        if base in ("Optional", "Union"):
            found = [accepted(part) for part in parts]
            if any(part is None for part in found):
                return None
            union = set().union(*found)  # type: ignore[arg-type]
            return union | {"NoneType"} if base == "Optional" else union
        return ANNOTATIONS.get(base or "")
    return ANNOTATIONS.get(_name(annotation) or "")


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def infer(node: ast.expr, variables: dict[str, str], classes: set[str]) -> str | None:
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis:
            return None
        return type(node.value).__name__
    kinds = {ast.List: "list", ast.ListComp: "list", ast.Tuple: "tuple", ast.Dict: "dict",
             ast.DictComp: "dict", ast.Set: "set", ast.SetComp: "set", ast.JoinedStr: "str",
             ast.Lambda: "function", ast.GeneratorExp: "generator"}  # fmt: skip
    if type(node) in kinds:
        return kinds[type(node)]
    if isinstance(node, ast.Name):
        return variables.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return infer(node.operand, variables, classes)
    if isinstance(node, ast.Call):
        name = _name(node.func)
        if name in classes or (name in BUILTIN_TYPES and isinstance(node.func, ast.Name)):
            return name
    return None


def pinned_type_errors(suite: Suite, library: Library) -> list[dict[str, Any]]:
    module = ast.parse(library.source)
    classes = {node.name for node in module.body if isinstance(node, ast.ClassDef)}
    by_name: dict[str, list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]] = {}
    for qualname, node in library.definitions:
        by_name.setdefault(qualname.rsplit(".", 1)[-1], []).append((qualname, node))
    pins = []
    for relative in suite.files:
        path = suite.project / relative
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for test in ast.walk(tree):
            if not isinstance(test, FUNCTIONS) or not test.name.startswith("test"):
                continue
            variables: dict[str, str] = {}
            for node in sorted(
                (n for n in ast.walk(test) if isinstance(n, ast.Assign)), key=lambda n: n.lineno
            ):
                kind = infer(node.value, variables, classes)
                for target in node.targets:
                    if isinstance(target, ast.Name) and kind:
                        variables[target.id] = kind
            for raises, calls, line in _raises_blocks(test):
                pinned = [name for name in raises if name in PINNED]
                if not pinned:
                    continue
                reasons = []
                for call in calls:
                    reason = _contradiction(call, variables, classes, by_name)
                    if reason:
                        reasons.append(reason)
                pins.append({
                    "file": relative, "test": test.name, "line": line,
                    "exception": "/".join(pinned),
                    "code": _short(" ; ".join(ast.unparse(call) for call in calls), 160),
                    "contradicts_annotation": "; ".join(reasons) or None,
                })  # fmt: skip
    return pins


def _raises_blocks(test: ast.AST) -> Iterator[tuple[list[str], list[ast.Call], int]]:
    """(exception names, calls made under it, line) of each pytest.raises in a test."""

    def exceptions(call: ast.expr) -> list[str] | None:
        if not (isinstance(call, ast.Call) and _name(call.func) == "raises" and call.args):
            return None
        first = call.args[0]
        items = first.elts if isinstance(first, ast.Tuple) else [first]
        return [name for name in map(_name, items) if name]

    for node in ast.walk(test):
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                names = exceptions(item.context_expr)
                if names is not None:
                    calls = [c for s in node.body for c in ast.walk(s) if isinstance(c, ast.Call)]
                    yield names, calls, node.lineno
        elif isinstance(node, ast.Call):
            names = exceptions(node)
            if names is not None and len(node.args) > 1:
                call = ast.Call(func=node.args[1], args=node.args[2:], keywords=node.keywords)
                yield names, [call], node.lineno


def _contradiction(
    call: ast.Call,
    variables: dict[str, str],
    classes: set[str],
    by_name: dict[str, list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]],
) -> str | None:
    name = _name(call.func)
    if name is None:
        return None
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    owner = infer(receiver, variables, classes) if receiver is not None else None
    if name in classes:
        candidates = by_name.get("__init__", [])
        candidates = [(q, n) for q, n in candidates if q == f"{name}.__init__"]
        bound = True
    elif owner in classes:
        candidates = [(q, n) for q, n in by_name.get(name, []) if q == f"{owner}.{name}"]
        bound = True
    else:
        candidates = by_name.get(name, [])
        functions = [(q, n) for q, n in candidates if "." not in q]
        candidates = functions or (candidates if len({q for q, _ in candidates}) == 1 else [])
        bound = not functions
    # Overloads: a contradiction only if every definition of the name rejects the call.
    reasons = [_check(call, node, bound, variables, classes) for _, node in candidates]
    if not candidates or not all(reasons):
        return None
    return f"{candidates[0][0]}: {reasons[0]}"


def _check(
    call: ast.Call,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    bound: bool,
    variables: dict[str, str],
    classes: set[str],
) -> str | None:
    decorators = {_name(d) for d in function.decorator_list}
    params = function.args.posonlyargs + function.args.args
    if bound and "staticmethod" not in decorators:
        params = params[1:]
    pairs: list[tuple[ast.arg, ast.expr]] = []
    for param, argument in zip(params, call.args, strict=False):
        if isinstance(argument, ast.Starred):
            break
        pairs.append((param, argument))
    named = {p.arg: p for p in params + function.args.kwonlyargs}
    pairs += [(named[k.arg], k.value) for k in call.keywords if k.arg in named]
    for param, argument in pairs:
        kind, admits = infer(argument, variables, classes), accepted(param.annotation)
        if kind is None or admits is None:
            continue
        fits = ABSTRACT in admits if kind in classes else kind in admits
        if not fits:
            annotation = ast.unparse(param.annotation) if param.annotation else "?"
            return f"{param.arg}: {annotation} given {ast.unparse(argument)} ({kind})"
    return None


# --------------------------------------------------------------------------- the two tools


def run_remora(library: Library, folder: Path, timeout: float) -> tuple[dict[str, Any], Path]:
    project = copy_project(library.root, folder / "remora" / library.name)
    report_path = folder / f"remora-{library.name}.json"
    wrapper = [str(BENCH / "_every_call_run.py")] if EVERY_CALL else []
    # The module measured, not the whole project: a drawn library may have other modules.
    command = [PYTHON, *wrapper, "-m", "remora", "analyze", library.module_file, "--engine",
               "local", "--no-cache",
               "--agents", "test", "--fix", "--format", "json", "-o", report_path]  # fmt: skip
    if ADAPTER:  # an adapter for the test agent (e.g. from `remora train test --from-tests`)
        command += ["-c", f"agents.test.adapter={ADAPTER}"]
    ran = run(command, project, timeout)
    measured: dict[str, Any] = {
        "wall_s": round(ran.seconds, 1), "exit_code": ran.code, "timed_out": ran.timed_out,
    }  # fmt: skip
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        measured["error"] = f"no report (exit {ran.code}): {ran.out[-1500:]}"
        return measured, project
    results = [r for r in report.get("results", []) if r.get("agent") == "test"]
    measured["jobs"] = len(results)
    measured["statuses"] = dict(Counter(r["status"] for r in results))
    measured["outcomes"] = dict(Counter(str(r.get("outcome")) for r in results))
    measured["model_requests"] = sum((r.get("usage") or {}).get("requests", 0) for r in results)
    measured["kept_functions_report"] = sorted(
        {r["node"]["qualified_name"] for r in results if r["status"] == "success" and r["changes"]}
    )  # overloads are separate jobs of one name
    measured["job_types"] = dict(Counter(r["node"]["type"] for r in results))
    return measured, project


def find_pynguin(given: Path | None) -> Path | None:
    if given is not None:  # named: that one or none
        return given if given.is_file() and os.access(given, os.X_OK) else None
    candidates = [os.environ.get("PYNGUIN"), shutil.which("pynguin"),
                  Path.home() / ".pynguin-venv" / "bin" / "pynguin",
                  REPO.parent / "pynguin-venv" / "bin" / "pynguin"]  # fmt: skip
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def pynguin_version(executable: Path) -> str | None:
    python = executable.parent / "python"
    if not python.exists():
        return None
    code = "import importlib.metadata as m; print(m.version('pynguin'))"
    ran = run([python, "-c", code], executable.parent, 60)
    return ran.out.strip().splitlines()[-1] if ran.code == 0 and ran.out.strip() else None


def run_pynguin(
    library: Library, folder: Path, executable: Path, budget: int, seed: int
) -> tuple[dict[str, Any], list[Path]]:
    project = copy_project(library.root, folder / "pynguin-src" / library.name)
    output = folder / "pynguin-out" / library.name
    scratch = folder / "pynguin-cwd" / library.name  # its statistics (pynguin-report/)
    scratch.mkdir(parents=True, exist_ok=True)
    command = [executable, "--project-path", project, "--module-name", library.module,
               "--output-path", output, "--maximum-search-time", str(budget),
               "--seed", str(seed), "--no-rich"]  # fmt: skip
    env = {**os.environ, "PYNGUIN_DANGER_AWARE": "1"}
    for variable in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(variable, None)
    ran = run(command, scratch, budget + 600, env=env)
    files = sorted(output.glob("test_*.py")) if output.is_dir() else []
    measured: dict[str, Any] = {
        "wall_s": round(ran.seconds, 1), "exit_code": ran.code, "timed_out": ran.timed_out,
        "generated_files": [f.name for f in files],
    }  # fmt: skip
    if ran.code != 0 or not files:
        measured["log_tail"] = ran.out[-1500:]
    return measured, files


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument("--budget-s", type=int, help="Pynguin's search time per module "
                        "(default 60; 10 with --quick)")  # fmt: skip
    parser.add_argument("--libraries", help=f"comma-separated, of {', '.join(LIBRARIES)}")
    parser.add_argument("--mutants", type=int, help="mutants sampled per module (default 60; "
                        "10 with --quick)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="mutant sample, shuffle, Pynguin")
    parser.add_argument("--draw", type=int, metavar="SEED", help="five libraries drawn with "
                        "SEED from the pool (bench/corpus/test_quality_pool.json), one module "
                        "each, instead of the fixed corpus; results: "
                        "test_quality_draw-SEED.json")  # fmt: skip
    parser.add_argument("--pynguin", type=Path, help="the pynguin executable (a path that is "
                        "not one, e.g. `none`: Pynguin not run)")  # fmt: skip
    parser.add_argument(
        "--adapter",
        type=Path,
        help="run the test agent with this adapter "
        "(e.g. from `remora train test --from-tests`); results go to "
        "test_quality_adapter.json",
    )
    parser.add_argument(
        "--every-call",
        action="store_true",
        help="the ceiling of the test agent's candidates: keep every call it could pin and "
        "always ask the model (bench/_every_call_run.py); results go to "
        "test_quality_every_call.json (or _every_call_adapter with --adapter)",
    )
    parser.add_argument("--remora-timeout-s", type=float, default=1200)
    parser.add_argument("--suite-timeout-s", type=float, default=120)
    parser.add_argument("--mutant-timeout-s", type=float, default=10)
    parser.add_argument("--max-minutes", type=float, help="mutants not run after this "
                        "(default 50; 10 with --quick)")  # fmt: skip
    parser.add_argument("--table", action="store_true", help="print the Markdown table of the "
                        "last results file (bench/README.md) and exit; runs nothing")  # fmt: skip
    args = parser.parse_args()
    if args.table:
        results_dir = args.results_dir or (BENCH / "results" / ("quick" if args.quick else ""))
        if (results_dir / "test_quality.json").is_file():
            document = json.loads((results_dir / "test_quality.json").read_text())
            print("\n".join(markdown_table(document["libraries"], document["totals"])))
        print("\n".join(draws_table(sorted(results_dir.glob("test_quality_draw-*.json")))))
        return 0
    budget = args.budget_s or (10 if args.quick else 60)
    cap = args.mutants or (10 if args.quick else 60)
    deadline = Deadline(60 * (args.max_minutes or (10 if args.quick else 50)))
    names = (args.libraries or (QUICK_LIBRARY if args.quick else ",".join(LIBRARIES))).split(",")
    global ADAPTER, EVERY_CALL
    ADAPTER = args.adapter.resolve() if args.adapter else None
    EVERY_CALL = args.every_call
    name = "test_quality" + ("_every_call" if EVERY_CALL else "") + ("_adapter" if ADAPTER else "")
    if args.draw is not None:
        name += f"_draw-{args.draw}"
    report = Report(name, args)
    if args.draw is not None:
        print(f"draw: seed {args.draw}", flush=True)
        pool_folder = Path(tempfile.mkdtemp(prefix="remora-bench-pool-"))
        drawn = draw(args.draw, pool_folder)
        report.data["draw"] = {
            "seed": args.draw,
            "libraries": [
                {"name": d.entry.name, "version": d.entry.version, "module": d.module,
                 "licence": d.entry.license, "sdist_sha256": d.sdist_sha256,
                 "tests_left_out": list(d.tests_left_out)}
                for d in drawn
            ],
        }  # fmt: skip
        print(f"drawn: {json.dumps(report.data['draw']['libraries'])}", flush=True)
        libraries = [library_of(d.entry.name, d.root, d.module, d.module_file) for d in drawn]
    else:
        libraries = [load_library(name.strip()) for name in names if name.strip()]
    pynguin = find_pynguin(args.pynguin)
    settings: dict[str, Any] = {
        "libraries": [library.name for library in libraries],
        "budget_s_per_module": budget,
        "mutants_per_module": cap,
        "seed": args.seed,
        "adapter": str(ADAPTER) if ADAPTER else None,
        "every_call": EVERY_CALL,
        "mutant_timeout_s": args.mutant_timeout_s,
        "pynguin": str(pynguin) if pynguin else None,
        "pynguin_version": pynguin_version(pynguin) if pynguin else None,
        "pytest_python": PYTHON,
    }
    report.data["settings"] = settings
    print(f"settings: {json.dumps(settings)}", flush=True)
    per_library: dict[str, dict[str, Any]] = {}
    mutants_by_library: dict[str, list[Mutant]] = {}
    for library in libraries:
        every = make_mutants(library)
        mutants_by_library[library.name] = sample_mutants(every, cap, args.seed, library.name)
        per_library[library.name] = {
            "module": f"{library.name}/{library.module_file}",
            "lines": library.source.count("\n"),
            "functions_and_methods": len(library.names),
            "mutants_total": len(every),
            "mutants_sampled": len(mutants_by_library[library.name]),
            "mutant_operators": dict(Counter(m.operator for m in every)),
        }
    report.data["libraries"] = per_library
    try:
        with workdir("test-quality") as folder:
            (folder / "plugin").mkdir()
            (folder / "plugin" / "tq_plugin.py").write_text(PLUGIN)
            started = time.perf_counter()
            suites = generate(libraries, folder, args, budget, pynguin, per_library)
            phases = report.data["phases_s"] = {"generation": round(time.perf_counter() - started)}
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                try:
                    futures = {
                        (s.tool, s.library.name): pool.submit(
                            evaluate, s, mutants_by_library[s.library.name], args, deadline
                        )
                        for s in suites
                    }
                    for (tool, name), future in futures.items():
                        per_library[name][tool].update(future.result())
                        print(f"{name} {tool}: {one_line(per_library[name][tool])}", flush=True)
                except BaseException:
                    stop_all()  # before the pool waits for its threads
                    raise
            phases["evaluation"] = round(time.perf_counter() - started) - phases["generation"]
    finally:
        stop_all()
    report.data["mutants"] = {
        name: [m.describe() for m in mutants] for name, mutants in mutants_by_library.items()
    }
    report.data["totals"] = totals = {tool: total(per_library, tool) for tool in TOOLS}
    verdicts(report, per_library, totals, budget, pynguin is not None)
    print("\n".join(markdown_table(per_library, totals)))
    report.save()
    return 0


def generate(
    libraries: list[Library],
    folder: Path,
    args: argparse.Namespace,
    budget: int,
    pynguin: Path | None,
    per_library: dict[str, dict[str, Any]],
) -> list[Suite]:
    """Run both generators, one library at a time, alone; a fresh copy of each library holds
    each tool's kept test files."""
    suites = []
    for library in libraries:
        measured, project = run_remora(library, folder, args.remora_timeout_s)
        files = sorted((project / "tests").glob("test_*.py"))
        measured["kept_files"] = len(files)
        per_library[library.name]["remora"] = measured
        print(f"{library.name} remora: {json.dumps(measured)}", flush=True)
        suites.append(suite_of("remora", library, folder, files))
    for library in libraries:
        if pynguin is None:
            per_library[library.name]["pynguin"] = {
                "error": "pynguin not found (--pynguin, $PYNGUIN, PATH, ~/.pynguin-venv, "
                "../pynguin-venv); install: python3.11 -m venv ~/.pynguin-venv && "
                "~/.pynguin-venv/bin/pip install pynguin==0.48.0"
            }
            continue
        measured, files = run_pynguin(library, folder, pynguin, budget, args.seed)
        per_library[library.name]["pynguin"] = measured
        print(f"{library.name} pynguin: {json.dumps(measured)}", flush=True)
        suites.append(suite_of("pynguin", library, folder, files))
    return suites


def suite_of(tool: str, library: Library, folder: Path, files: list[Path]) -> Suite:
    project = copy_project(library.root, folder / "eval" / tool / library.name)
    for file in files:
        shutil.copy2(file, project / "tests" / file.name)
    return Suite(
        tool, library, project, sorted(f"tests/{f.name}" for f in files), folder / "plugin"
    )


def one_line(result: dict[str, Any]) -> str:
    coverage = result.get("coverage") or {}
    mutation = result.get("mutation") or {}
    orders = "".join(
        {True: "P", False: "F", None: "-"}[o.get("passed")]
        for o in result.get("orders", {}).values()
    )
    return (
        f"{len(result.get('called_functions', []))} functions called, {result.get('tests')} "
        f"tests, orders {orders}, branch coverage module "
        f"{_percent(coverage.get('module_branch_coverage'))} tested "
        f"{_percent(coverage.get('tested_functions_branch_coverage'))}, mutation "
        f"{mutation.get('killed')}/{mutation.get('mutants')} "
        f"({_percent(mutation.get('score'))}; {mutation.get('statuses')}), pins "
        f"{len(result.get('pinned', []))}"
    )


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def total(per_library: dict[str, dict[str, Any]], tool: str) -> dict[str, Any]:
    results = [lib[tool] for lib in per_library.values() if "orders" in lib.get(tool, {})]
    if not results:
        return {"measured": False}
    mutation = [r["mutation"] for r in results]
    coverage = [
        r["coverage"] for r in results if r.get("coverage") and "error" not in r["coverage"]
    ]
    orders = [o["passed"] for r in results for o in r["orders"].values()]

    def summed(key: str, rows: list[dict[str, Any]]) -> int:
        return sum(row.get(key) or 0 for row in rows)

    return {
        "measured": True,
        "libraries": len(results),
        "functions_and_methods": sum(lib["functions_and_methods"] for lib in per_library.values()),
        "called_functions": sum(len(r["called_functions"]) for r in results),
        "kept_functions_report": sum(len(r.get("kept_functions_report", [])) for r in results),
        "tests": sum(r["tests"] or 0 for r in results),
        "order_runs": len(orders),
        "order_runs_passed": sum(o is True for o in orders),
        "order_runs_failed": sum(o is False for o in orders),
        "mutants": summed("mutants", mutation),
        "killed": summed("killed", mutation),
        "score": _ratio(summed("killed", mutation), summed("mutants", mutation)),
        "mutants_in_tested_functions": summed("mutants_in_tested_functions", mutation),
        "score_in_tested_functions": _ratio(
            summed("killed_in_tested_functions", mutation),
            summed("mutants_in_tested_functions", mutation),
        ),
        "module_branch_coverage": _ratio(
            summed("module_branches_covered", coverage), summed("module_branches", coverage)
        ),
        "tested_functions_branch_coverage": _ratio(
            summed("tested_functions_branches_covered", coverage),
            summed("tested_functions_branches", coverage),
        ),
        "wall_s": round(sum(r.get("wall_s") or 0 for r in results), 1),
        "pinned": sum(len(r["pinned"]) for r in results),
        "pinned_contradicting": sum(
            1 for r in results for pin in r["pinned"] if pin["contradicts_annotation"]
        ),
    }


def markdown_table(
    per_library: dict[str, dict[str, Any]], totals: dict[str, dict[str, Any]]
) -> list[str]:
    """Per library and tool, and the totals, as in bench/README.md."""
    rows = [
        "| library | tool | functions and methods with kept tests | tests | orders passing "
        "| branch coverage: tested functions; module | mutation score: all; in tested functions "
        "| wall | pinned TypeError/AttributeError (contradicting an annotation) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, lib in [*per_library.items(), ("**total**", None)]:
        for tool in TOOLS:
            result = (lib or {}).get(tool, {}) if lib else totals.get(tool, {})
            if lib is not None and "orders" not in result:
                rows.append(
                    f"| {name} | {tool} | n/a: {result.get('error', 'not run')[:80]} |||||||"
                )
                continue
            if lib is None and not result.get("measured"):
                continue
            if lib is not None:
                coverage, mutation = result.get("coverage") or {}, result["mutation"]
                of = lib["functions_and_methods"]
                called = len(result["called_functions"])
                report_count = result.get("kept_functions_report")
                orders = sum(o.get("passed") is True for o in result["orders"].values())
                orders_text = f"{orders}/3" if result["test_files"] else "no tests"
                killed, mutants = mutation["killed"], mutation["mutants"]
                score, tested_score = mutation["score"], mutation["score_in_tested_functions"]
                in_tested = mutation["mutants_in_tested_functions"]
                pins = result["pinned"]
                contradicting = sum(1 for pin in pins if pin["contradicts_annotation"])
                tests = result["tests"]
            else:
                coverage, of = result, result["functions_and_methods"]
                called = result["called_functions"]
                report_count = result["kept_functions_report"] if tool == "remora" else None
                orders_text = f"{result['order_runs_passed']}/{result['order_runs']}"
                killed, mutants = result["killed"], result["mutants"]
                score, tested_score = result["score"], result["score_in_tested_functions"]
                in_tested = result["mutants_in_tested_functions"]
                pins, contradicting = [None] * result["pinned"], result["pinned_contradicting"]
                tests = result["tests"]
            by_report = (
                f" ({len(report_count) if isinstance(report_count, list) else report_count} "
                "by its report)"
                if report_count is not None
                else ""
            )
            rows.append(
                f"| {name} | {tool} | {called} of {of}{by_report} | {tests} | {orders_text} | "
                f"{_percent(coverage.get('tested_functions_branch_coverage'))}; "
                f"{_percent(coverage.get('module_branch_coverage'))} | "
                f"{_percent(score)} ({killed}/{mutants}); {_percent(tested_score)} "
                f"(of {in_tested}) | {result.get('wall_s')} s | {len(pins)} ({contradicting}) |"
            )
    return rows


def draws_table(files: list[Path]) -> list[str]:
    """Per draw (its seed and libraries) and the mean over the draws: each tool's mutation score
    on the same mutants, and the suites' order runs."""
    lines = ["", "| draw (seed) | libraries | mutants | Remora | Pynguin | Remora - Pynguin |",
             "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    differences = []
    scores: dict[str, list[float]] = {tool: [] for tool in TOOLS}
    for file in files:
        document = json.loads(file.read_text())
        totals = document["totals"]
        row = {tool: totals[tool].get("score") for tool in TOOLS}
        names = ", ".join(f"{d['name']} ({d['module']})" for d in document["draw"]["libraries"])
        difference = (
            row["remora"] - row["pynguin"]
            if row["remora"] is not None and row["pynguin"] is not None
            else None
        )
        for tool in TOOLS:
            if row[tool] is not None:
                scores[tool].append(row[tool])
        if difference is not None:
            differences.append(difference)
        shown = f"{difference * 100:+.1f} points" if difference is not None else "n/a"
        lines.append(
            f"| {document['draw']['seed']} | {names} | {totals['remora'].get('mutants')} | "
            f"{_percent(row['remora'])} | {_percent(row['pynguin'])} | {shown} |"
        )
    if files:
        mean = {tool: sum(v) / len(v) if v else None for tool, v in scores.items()}
        gap = f"{sum(differences) / len(differences) * 100:+.1f} points" if differences else "n/a"
        lines.append(
            f"| mean of {len(files)} | | | {_percent(mean['remora'])} | "
            f"{_percent(mean['pynguin'])} | {gap} |"
        )
    return lines


def verdicts(
    report: Report,
    per_library: dict[str, dict[str, Any]],
    totals: dict[str, dict[str, Any]],
    budget: int,
    have_pynguin: bool,
) -> None:
    remora, pynguin = totals["remora"], totals["pynguin"]
    if not remora.get("measured"):
        report.verdict("Remora's test agent ran", False, "no library measured")
        return
    other = pynguin.get("measured")

    def beside(text: str) -> str:
        return f"; Pynguin {text}" if other else "; Pynguin n/a"

    report.verdict(
        "functions and methods with kept tests (called directly by them)",
        None,
        f"Remora {remora['called_functions']} of {remora['functions_and_methods']} "
        f"({remora['kept_functions_report']} with a test file by its report)"
        + beside(f"{pynguin.get('called_functions')} of {pynguin.get('functions_and_methods')}"),
    )
    failed = [
        f"{name} {order}"
        for name, lib in per_library.items()
        for order, o in lib["remora"].get("orders", {}).items()
        if o.get("passed") is False
    ]
    report.verdict(
        "the kept suite passes together in every order (sorted, reversed, shuffled)",
        not failed,
        f"Remora {remora['order_runs_passed']} of {remora['order_runs']} runs pass, "
        f"{remora['order_runs'] - remora['order_runs_passed'] - remora['order_runs_failed']} "
        f"without tests{', failing: ' + ', '.join(failed) if failed else ''}"
        + beside(f"{pynguin.get('order_runs_passed')} of {pynguin.get('order_runs')}"),
    )
    report.verdict(
        "branch coverage (tested functions; whole modules)",
        None,
        f"Remora {_percent(remora['tested_functions_branch_coverage'])}; "
        f"{_percent(remora['module_branch_coverage'])}"
        + beside(
            f"{_percent(pynguin.get('tested_functions_branch_coverage'))}; "
            f"{_percent(pynguin.get('module_branch_coverage'))}"
        ),
    )
    score = remora["score"] or 0.0
    report.verdict(
        "mutation score >= 50 % (all sampled mutants)",
        score >= 0.5,
        f"Remora {_percent(remora['score'])} ({remora['killed']} of {remora['mutants']}; "
        f"{_percent(remora['score_in_tested_functions'])} of the "
        f"{remora['mutants_in_tested_functions']} in its tested functions)"
        + beside(
            f"{_percent(pynguin.get('score'))} ({pynguin.get('killed')} of "
            f"{pynguin.get('mutants')}; {_percent(pynguin.get('score_in_tested_functions'))} of "
            f"the {pynguin.get('mutants_in_tested_functions')} in its tested functions)"
        ),
    )
    per = ", ".join(
        f"{name} {_percent(lib['remora'].get('mutation', {}).get('score'))} vs "
        f"{_percent(lib.get('pynguin', {}).get('mutation', {}).get('score'))}"
        for name, lib in per_library.items()
    )
    report.verdict(
        "mutation score >= Pynguin's on the same mutants",
        score >= (pynguin.get("score") or 0.0) if other else None,
        f"{_percent(remora['score'])} vs {_percent(pynguin.get('score'))} ({per})"
        if other
        else f"Pynguin not measured: {next(iter(per_library.values()))['pynguin'].get('error')}",
    )
    walls = {name: lib["remora"].get("wall_s") or 0.0 for name, lib in per_library.items()}
    pynguin_walls = ", ".join(
        f"{name} {lib['pynguin'].get('wall_s')} s"
        for name, lib in per_library.items()
        if lib.get("pynguin", {}).get("wall_s") is not None
    )
    report.verdict(
        f"Remora's wall time <= Pynguin's budget ({budget} s per module)",
        all(wall <= budget for wall in walls.values()),
        ", ".join(f"{name} {wall:.0f} s" for name, wall in walls.items())
        + (f"; Pynguin's whole runs: {pynguin_walls}" if pynguin_walls else ""),
    )
    contradicting = [
        f"{name}: {pin['code']}"
        for name, lib in per_library.items()
        for pin in lib["remora"].get("pinned", [])
        if pin["contradicts_annotation"]
    ]
    report.verdict(
        "no pinned TypeError/AttributeError for an argument contradicting an annotation",
        not contradicting,
        f"Remora {len(contradicting)} of {remora['pinned']} pinned TypeError/AttributeError"
        + (f" ({'; '.join(contradicting[:3])})" if contradicting else "")
        + beside(f"{pynguin.get('pinned_contradicting')} of {pynguin.get('pinned')}"),
    )
    if not have_pynguin:
        print("Pynguin was not found: its column is n/a (see the docstring to install it)")


if __name__ == "__main__":
    sys.exit(main())
