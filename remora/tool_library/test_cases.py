"""The test agent's cases, checked on the syntax tree before any of them runs.

A case is model-proposed code that pytest will execute, so it is read with an allow-list, never a
deny-list: one call of the function under test whose arguments are literals, containers of
literals, constructors of the module's own top-level classes and of the standard library's value
types written through their module (`datetime.date(2024, 1, 15)`, standard_values), optionally
`== literal` or `raises ExceptionName`. The text a script renders is the checked tree's: the
proposer's own text only where it reads back as the very same tree, else the tree unparsed, so
nothing the check did not see (comments, NFKC-folded identifiers) reaches a test file.
"""

from __future__ import annotations

import ast
import builtins
import functools
from typing import Any

from remora.tool_library import class_shapes
from remora.tool_library.method_roles import factory_functions
from remora.tool_library.standard_values import BYTE_BUILDERS, CALLABLE_BUILTINS, STANDARD_VALUES

MAX_CASE_LENGTH = 500
"""Characters of one case: parsing stays cheap, and longer values make unreadable tests."""
MAX_NODES = 200
"""Syntax-tree nodes of one case (contexts such as Load not counted)."""
MAX_DEPTH = 10
"""Levels of the case's syntax tree: `f(x=[[1]]) == 2` has 6 (Expression, Compare, Call,
keyword, List, List, then the Constant)."""

BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if not name.startswith("_") and isinstance(value, type) and issubclass(value, Exception)
)
"""What `raises NAME` may name besides the module's classes (a characterization run records
only exceptions derived from Exception)."""

ALLOWED = (
    "arguments must be literals (numbers, strings, bytes, True, False, None), lists, tuples, "
    "sets or dicts of them, slice(...) of integers, "
    + " and ".join(f"{builder}(...)" for builder in BYTE_BUILDERS)
    + " of bytes, constructors of the module's classes (or its functions that build them), "
    + "the module's functions by name, "
    + " or ".join(CALLABLE_BUILTINS)
    + " as functions, or "
    + ", ".join(f"{dotted}(...)" for dotted in STANDARD_VALUES)
    + " of literals"
)

REFUSED = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts",
    ast.BinOp: "operators",
    ast.BoolOp: "'and'/'or'",
    ast.UnaryOp: "unary operators other than a sign on a number",
    ast.Compare: "comparisons inside the call",
    ast.Lambda: "lambdas",
    ast.IfExp: "conditional expressions",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.NamedExpr: "':='",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.JoinedStr: "f-strings",
    ast.Starred: "'*' unpacking",
    ast.Slice: "slices",
}
"""How a refused node is named in the error the model reads."""


def parse_test_case(case: str, function: str, source: str) -> dict[str, Any]:
    """`case` (`f(...) == literal`, `f(...) raises NAME` or `f(...)`, an optional leading
    `assert`) as {kind, call, expected, names, case}, or ValueError saying what is not allowed.

    kind: "equals", "approx" (the expected value is a float), "raises" or "call"; call and
    expected: the code to render for the checked tree (see `rendered`; expected: the
    exception's name for "raises", "" for "call"); names: the module's names the case uses,
    `function` first (for a method, "Class.method", its class); case: the whole case as
    rendered. A method's case calls it on a fresh instance: `Class(...).method(...)`."""
    for value in (case, function, source):
        if not isinstance(value, str):
            raise TypeError("parse_test_case: case, function and source must be str")
    text = case.strip()
    if text.startswith("assert "):
        text = text[len("assert ") :].strip()
    if not text:
        raise ValueError("empty case")
    if "\n" in text or "\r" in text:
        raise ValueError("one line per case")
    if len(text) > MAX_CASE_LENGTH:
        raise ValueError(f"longer than {MAX_CASE_LENGTH} characters")
    functions, classes = module_definitions(source)
    # An argument may be built as a receiver is: `bm < parse_string('4k')` compares two.
    builders = classes | factories(source)
    top = frozenset(name for name in functions if "." not in name)
    owner, _, method = function.rpartition(".")
    if owner and function not in functions:
        raise ValueError(f"{function} is not a method of a class at the top level of the module")
    if not owner and function not in functions:
        raise ValueError(f"{function} is not a function defined at the top level of the module")

    error = ""
    head, raises, tail = text.rpartition(" raises ")
    # The last " raises " followed by a bare name is the keyword; one inside a string literal
    # never is (a name cannot hold the closing quote and parenthesis).
    if raises and tail.strip().isidentifier():
        error = tail.strip()
        text = head.strip()
        if not error.isascii():
            raise ValueError("'raises' must be followed by one exception name, e.g. ValueError")
        if error not in BUILTIN_EXCEPTIONS and error not in classes:
            raise ValueError(f"{error} is neither a built-in exception nor a class of the module")
    body = expression(text)

    expected: ast.expr | None = None
    call = body
    if isinstance(body, ast.Compare) and not error:
        if len(body.ops) != 1 or not isinstance(body.ops[0], ast.Eq):
            raise ValueError(f"compare the call with one '==': {function}(...) == expected")
        call, expected = body.left, body.comparators[0]
    if owner and function in class_bound(source):
        # A class- or static method is called on the class itself, by its name.
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == method
            and is_name(call.func.value, owner)
        ):
            raise ValueError(f"the case must be one call {owner}.{method}(...)")
        names = [owner]
    elif owner:
        # A method is called on an instance built by the class's constructor (or by one of
        # its subclasses in the module: an abstract class is never built itself; or by a
        # function of the module that builds it: kdtree's `create([...])`), in one case.
        receivers = {owner} | subclasses(source, owner) | factories(source, owner)
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == method
            and isinstance(call.func.value, ast.Call)
            and isinstance(call.func.value.func, ast.Name)
            and call.func.value.func.id in receivers
        ):
            raise ValueError(
                f"the case must be one call {owner}(...).{method}(...) (or on a subclass of it)"
            )
        names = [owner, *({call.func.value.func.id} - {owner})]
        check_arguments(call.func.value, builders, names, top)
    elif not (isinstance(call, ast.Call) and is_name(call.func, function)):
        raise ValueError(f"the case must be one call of {function}(...)")
    else:
        names = [function]
    check_arguments(call, builders, names, top)
    call_text = rendered(call, text)
    # Belt and braces: what is rendered passes the compiler's checks too, not only the parser's.
    try:
        compile(call_text, "<case>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"not valid Python: {exc}") from None

    if error:
        if error in classes:
            names.append(error)
        kind, expected_text = "raises", error
    elif expected is not None:
        try:
            value = ast.literal_eval(expected)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise ValueError(
                "the expected value must be a literal (numbers, strings, bytes, True, False, "
                "None, and lists, tuples, sets or dicts of them)"
            ) from None
        kind = "approx" if isinstance(value, float) else "equals"
        expected_text = rendered(expected, text)
    else:
        kind, expected_text = "call", ""
    whole = call_text
    if kind != "call":
        whole += (" raises " if kind == "raises" else " == ") + expected_text
    return {
        "kind": kind,
        "call": call_text,
        "expected": expected_text,
        "names": names,
        "case": whole,
    }


@functools.lru_cache(maxsize=16)
def module_definitions(source: str) -> tuple[frozenset[str], frozenset[str]]:
    """The functions (and methods, as "Class.method") and the classes defined at the top level
    of `source` (cached: one job checks dozens of cases against the same module)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ValueError("the module is not valid Python") from None
    functions = frozenset(
        node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ) | frozenset(
        f"{node.name}.{member.name}"
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for member in node.body
        if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef))
    )
    classes = frozenset(node.name for node in tree.body if isinstance(node, ast.ClassDef))
    return functions, classes


@functools.lru_cache(maxsize=32)
def class_bound(source: str) -> frozenset[str]:
    """The class and static methods of `source`'s top-level classes, as "Class.method"."""
    tree = ast.parse(source)
    return frozenset(
        f"{node.name}.{member.name}"
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for member in node.body
        if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(
            is_name(d, "classmethod") or is_name(d, "staticmethod") for d in member.decorator_list
        )
    )


@functools.lru_cache(maxsize=32)
def subclasses(source: str, owner: str) -> frozenset[str]:
    """The top-level classes of `source` that derive from `owner`, directly or through each
    other (a base read by its last name, `pkg.Owner` as Owner: class_shapes.subclasses)."""
    tree = ast.parse(source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    return frozenset(class_shapes.subclasses(classes, owner))


@functools.lru_cache(maxsize=32)
def factories(source: str, owner: str = "") -> frozenset[str]:
    """The public top-level functions of `source` that build an `owner` (without one, any of
    its classes) (method_roles.result_class: every `return` constructs it, or the return
    annotation names it)."""
    tree = ast.parse(source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    built = factory_functions(tree, classes)
    return frozenset(f.name for cls in built if owner in ("", cls) for f in built[cls])


def expression(text: str) -> ast.expr:
    """`text` parsed as one expression within the size limits."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        hint = "; 'raises' takes one exception name" if " raises " in text else ""
        raise ValueError(f"not a Python expression ({reason}){hint}") from None
    # Iterative, so a deep tree cannot exhaust the stack before it is refused.
    count = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.expr_context):
            continue
        count += 1
        if count > MAX_NODES:
            raise ValueError(f"more than {MAX_NODES} parts: use smaller values")
        if depth > MAX_DEPTH:
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep: use flatter values")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree.body


def check_arguments(
    call: ast.Call, classes: frozenset[str], names: list[str], functions: frozenset[str]
) -> None:
    """The arguments of a call of the function or of a class's constructor: allowed values,
    plain keywords (no `**`), each keyword once."""
    for argument in call.args:
        check_value(argument, classes, names, functions)
    seen: set[str] = set()
    for keyword in call.keywords:
        if keyword.arg is None:
            raise ValueError(f"'**' unpacking cannot be part of a case: {ALLOWED}")
        if keyword.arg in seen:
            raise ValueError(f"keyword argument {keyword.arg} given twice")
        seen.add(keyword.arg)
        check_value(keyword.value, classes, names, functions)


def check_value(
    node: ast.expr, classes: frozenset[str], names: list[str], functions: frozenset[str]
) -> None:
    """An argument's value is allowed, or ValueError naming what is not. `names` collects the
    `classes` built (with the functions that build one) and the `functions` passed by name."""
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis:
            raise ValueError(f"'...' cannot be part of a case: {ALLOWED}")
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = node.operand
        # bool is an int, but `-True` is arithmetic, not a literal.
        if isinstance(operand, ast.Constant) and type(operand.value) in (int, float, complex):
            return
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        for element in node.elts:
            check_value(element, classes, names, functions)
        return
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ValueError(f"'**' unpacking cannot be part of a case: {ALLOWED}")
            check_value(key, classes, names, functions)
            check_value(value, classes, names, functions)
        return
    if isinstance(node, ast.Call) and is_name(node.func, "slice") and "slice" not in classes:
        # The built-in, for an index (`items[1:3]` calls `__getitem__(slice(1, 3))`): numbers
        # and None only.
        if node.keywords or not 1 <= len(node.args) <= 3:
            raise ValueError("slice(...) takes one to three numbers or None")
        for part in node.args:
            if not (isinstance(part, ast.Constant) and part.value is None):
                check_value(part, frozenset(), [], frozenset())
                if type(ast.literal_eval(part)) is not int:  # not a float, nor True
                    raise ValueError("slice(...) takes one to three integers or None")
        return
    builder = getattr(getattr(node, "func", None), "id", "")
    if isinstance(node, ast.Call) and builder in BYTE_BUILDERS and builder not in classes:
        # The built-ins, for bytes a function changes, returns or reads through a view: of a
        # bytes literal (a bytearray also of a list of integers below 256).
        lists = " or list of integers below 256" if builder == "bytearray" else ""
        wrong = f"{builder}(...) takes one bytes literal{lists}"
        if node.keywords or len(node.args) > 1:
            raise ValueError(wrong)
        for part in node.args:
            check_value(part, frozenset(), [], frozenset())
            held = ast.literal_eval(part)
            if not isinstance(held, bytes) and not (
                builder == "bytearray"
                and isinstance(held, list)
                and all(type(item) is int and 0 <= item < 256 for item in held)
            ):
                raise ValueError(wrong)
        return
    if isinstance(node, ast.Call) and standard_constructor(node.func, classes | functions):
        check_arguments(node, classes, names, functions)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes:
        if node.func.id not in names:
            names.append(node.func.id)
        check_arguments(node, classes, names, functions)
        return
    if isinstance(node, ast.Name) and node.id in CALLABLE_BUILTINS:  # `str`, passed as a value
        if node.id in classes | functions:  # which one a test would mean is not clear
            raise ValueError(f"{node.id} is both the module's and a builtin")
        return
    if isinstance(node, ast.Name) and node.id in functions:  # a function, passed as a value
        if node.id not in names:
            names.append(node.id)
        return
    raise ValueError(f"{refused(node)} cannot be part of a case: {ALLOWED}")


def standard_constructor(node: ast.expr, defined: frozenset[str]) -> bool:
    """Whether `node` names a standard value type through its module (`datetime.date`), a
    module the module under test defines no function or class named after: a test file imports
    the standard one by that name."""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and f"{node.value.id}.{node.attr}" in STANDARD_VALUES
        and node.value.id not in defined
    )


def rendered(node: ast.expr, text: str) -> str:
    """The code for a checked node of `text`: its own text (the proposer's quoting kept) when
    that is ASCII and parses to the same tree, else the tree unparsed."""
    segment = ast.get_source_segment(text, node)
    if segment and segment.isascii():
        try:
            if ast.dump(ast.parse(segment, mode="eval").body) == ast.dump(node):
                return segment
        except SyntaxError:
            pass
    return ast.unparse(node)


def refused(node: ast.expr) -> str:
    """What the model wrote, in words."""
    if isinstance(node, ast.Name):
        return f"the name {node.id}"
    if isinstance(node, ast.Call):
        return f"calling {ast.unparse(node.func)[:40]}"
    return REFUSED.get(type(node), type(node).__name__)


def is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
