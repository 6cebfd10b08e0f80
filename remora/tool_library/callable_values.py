"""Parameters the code calls, and what they are given: the module's own functions that take as
many arguments as the parameter is called with, never a literal. A constructor that stores a
number where a later method calls a function passes only while nothing calls it: a test of that
pins nothing a reviewer keeps, so such calls are refused (`degenerate`).

A parameter is callable when the function calls it (`key(item)`) or hands it to a call that
calls it (`map(func, items)`, `sorted(items, key=key)`), when a constructor stores it
(`self.key = key`) and a method of the class calls that attribute (`self.key(item)`), when
its annotation says so (`Callable[[int], str]`, `callable`), or when the code reads it as a
function (`func.__name__`, `inspect.signature(func)`)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Collection, Mapping, Sequence

from remora.tool_library.class_shapes import base_names
from remora.tool_library.parameter_types import names_a_class
from remora.tool_library.parameter_values import Parameter, Refusal
from remora.tool_library.standard_values import CALLABLE_BUILTINS, union_members
from remora.tool_library.value_flow import stored_attributes

MAX_FUNCTIONS = 3
"""The module's functions tried for one callable parameter."""
BUILTIN_KINDS = frozenset(
    {"str", "bytes", "int", "float", "complex", "bool", "list", "tuple", "dict", "set", "None"}
)
FUNCTION_ATTRIBUTES = frozenset(
    {"__name__", "__qualname__", "__code__", "__wrapped__", "__defaults__", "__kwdefaults__"}
)
"""What only a function (or a class, which a function-taking parameter also accepts) has."""
FUNCTION_READERS = frozenset(
    {"signature", "getfullargspec", "getargspec", "isroutine", "isfunction", "ismethod",
     "iscoroutinefunction", "isgeneratorfunction", "isasyncgenfunction", "update_wrapper",
     "wraps", "unwrap", "getsource", "getsourcelines"}
)  # fmt: skip
"""Calls (by their last name: `inspect.signature`) whose first argument is a function."""
CALLERS = {"map": None, "filter": 1, "filterfalse": 1, "takewhile": 1, "dropwhile": 1,
           "reduce": 2, "accumulate": 2, "starmap": None}  # fmt: skip
"""Calls (by their last name) that call the function they are given first (`accumulate`'s
second), with how many arguments (None: `map`'s as many as its iterables)."""
KEY_CALLERS = frozenset({"sorted", "sort", "min", "max", "groupby", "nlargest", "nsmallest"})
"""Calls that call their `key=` with one argument."""
CLASS_READERS = frozenset({"isinstance", "issubclass", "isclass"})
"""Calls that read a parameter as a class (`issubclass(cls, Base)`, `isinstance(x, kind)`)."""
CLASS_NAMED = ("cls", "klass", "class", "type")


def callable_arities(
    definition: ast.FunctionDef,
    owner: ast.ClassDef | None,
    parameters: Sequence[Parameter],
    aliases: Mapping[str, str] | None = None,
    readers: Collection[str] = FUNCTION_READERS,
) -> dict[str, int | None]:
    """The callable parameters, by name, with how many arguments they are called with (None:
    not known, an annotation without its argument list). `aliases`: what the module's type
    aliases and TypeVars stand for (`F` bound to `Callable[..., Any]`: type_aliases);
    `readers`: the calls whose first argument is a function (function_readers)."""
    names = {parameter.name for parameter in parameters}
    found: dict[str, int | None] = {}
    for parameter in parameters:
        text = (aliases or {}).get(parameter.annotation, parameter.annotation)
        if "Callable" in text or text == "callable":
            arguments = _annotated_arguments(text)
            found[parameter.name] = None if arguments is None else len(arguments)
    # Read as a function, its arity is not known: an annotation's says more.
    found = dict.fromkeys(read_as_function(definition, names, readers), None) | found
    for node in ast.walk(definition):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            found[node.func.id] = _arity(node)
        elif isinstance(node, ast.Call):  # `map(func, items)`, `sorted(items, key=key)`
            found = passed_to_callers(node, names) | found
    if owner is not None and definition.name == "__init__":
        stored = {a: name for a, name in stored_attributes(definition).items() if name in names}
        for node in ast.walk(owner):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
                and node.func.attr in stored
            ):
                found[stored[node.func.attr]] = _arity(node)
    # A class it builds (flatdict's `dict_class: type[dict] = dict`, called `dict_class()`):
    # its default is the class to use; `str` would make every instance break.
    classes = {p.name for p in parameters if names_a_class(p.annotation)}
    return {name: arity for name, arity in found.items() if name not in classes}


def passed_to_callers(call: ast.Call, names: Collection[str]) -> dict[str, int | None]:
    """The parameters a call of CALLERS or KEY_CALLERS calls, with their arity: toolz's
    `valmap(func, d)` runs `map(func, d.values())`, and had been given `3`."""
    called = ast.unparse(call.func).rpartition(".")[2]
    given: list[tuple[ast.expr, int | None]] = [
        (k.value, 1) for k in call.keywords if k.arg == "key" and called in KEY_CALLERS
    ]
    if called in CALLERS and call.args:
        position = 1 if called == "accumulate" else 0
        arity = CALLERS[called] if called != "map" else len(call.args) - 1
        given += [(call.args[position], arity)] if len(call.args) > position else []
    return {n.id: a for n, a in given if isinstance(n, ast.Name) and n.id in names}


def read_as_function(
    definition: ast.FunctionDef, names: Collection[str], readers: Collection[str]
) -> set[str]:
    """The parameters the body reads as functions: a function's own attribute read or set
    (`func.__name__`), passed first to a call that takes a function (`getfullargspec(func)`);
    not one it also reads as a class (`issubclass(func, Base)`): decorator's `decorate(func,
    caller)` got strings for `func`, and `FunctionMaker(func)` was never built."""
    found: set[str] = set()
    classes: set[str] = set()
    for node in ast.walk(definition):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in names and node.attr in FUNCTION_ATTRIBUTES:
                found.add(node.value.id)  # not `cls.__name__` (CLASS_NAMED)
        elif isinstance(node, ast.Call) and node.args:
            called = ast.unparse(node.func).rpartition(".")[2]
            # `isinstance(value, kind)`: `kind` is a class; `value` may be a function still.
            read = node.args[1] if called == "isinstance" and len(node.args) > 1 else node.args[0]
            if not (isinstance(read, ast.Name) and read.id in names):
                continue
            if called in CLASS_READERS:
                classes.add(read.id)
            elif called in readers and read is node.args[0]:
                found.add(read.id)
    return {name for name in found - classes if not name.startswith(CLASS_NAMED)}


@functools.lru_cache(maxsize=8)  # by the tree's identity: once per module, not per definition
def function_readers(tree: ast.Module) -> frozenset[str]:
    """FUNCTION_READERS and the module's own names for them: an alias (`sig =
    inspect.signature`) or a function that passes its first parameter to one (decorator's
    `def inspect_sig(func): return inspect.signature(func, ...)`), at any depth (a `try`)."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute | ast.Name):
            if ast.unparse(node.value).rpartition(".")[2] in FUNCTION_READERS:
                own.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.FunctionDef) and node.args.args:
            first = node.args.args[0].arg
            if first in read_as_function(node, {first}, FUNCTION_READERS):
                own.add(node.name)
    return FUNCTION_READERS | own


def type_aliases(tree: ast.Module) -> dict[str, str]:
    """The module's top-level `F = TypeVar("F", bound=Callable[...])` (its bound),
    `Handler = Callable[[int], str]` (its value) and callable protocols (a `Protocol` class
    whose `__call__(self, value: T, /) -> T` says `Callable[[T], T]`), by name, as text."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and "Protocol" in base_names(node):
            call = next((m for m in node.body if getattr(m, "name", "") == "__call__"), None)
            if isinstance(call, ast.FunctionDef) and not (call.args.vararg or call.args.kwarg):
                taken = [a.annotation for a in [*call.args.posonlyargs, *call.args.args][1:]]
                shown = ", ".join("Any" if a is None else ast.unparse(a) for a in taken)
                returned = "Any" if call.returns is None else ast.unparse(call.returns)
                found[node.name] = f"Callable[[{shown}], {returned}]"
            continue
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not isinstance(target, ast.Name):
            continue
        if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("TypeVar"):
            bound = next((k.value for k in value.keywords if k.arg == "bound"), None)
            if bound is not None:
                found[target.id] = ast.unparse(bound).strip("'\"")
        elif isinstance(value, ast.Subscript) and "Callable" in ast.unparse(value.value):
            found[target.id] = ast.unparse(value)
    return found


def _arity(call: ast.Call) -> int | None:
    """How many arguments a call passes; None when it unpacks some (`func(*args, **kwargs)`)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None
    return len(call.args) + len(call.keywords)


def _annotated_arguments(text: str) -> list[ast.expr] | None:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
        first = node.slice.elts[0] if node.slice.elts else None
        if isinstance(first, ast.List):
            return list(first.elts)
    return None


def _annotated_return(text: str) -> str:
    """What a `Callable[[...], R]` or `Callable[..., R]` annotation says its function returns
    (R, as text), or ""."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return ""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple)):
        return ""
    first, *rest = node.slice.elts or [ast.Constant(None)]
    given = isinstance(first, ast.List) or (isinstance(first, ast.Constant) and first.value == ...)
    return ast.unparse(rest[-1]).strip("'\"") if given and rest else ""


def _returned_kinds(text: str) -> set[str]:
    """The names of what an annotation says is returned, one per member of a union, without
    their parameters: {"Trie"} for `Trie[K, V]`, {"str", "None"} for `Optional[str]`; a
    `TypeGuard` is a bool."""
    kinds = set()
    for member in union_members(text.strip("'\"")):
        outer = member.value if isinstance(member, ast.Subscript) else member
        name = ast.unparse(outer).strip("'\"").rpartition(".")[2]
        kinds.add("bool" if name in ("TypeGuard", "TypeIs") else name)
    return kinds


def fitting_functions(
    tree: ast.Module, arity: int | None, exclude: str, returns: str = ""
) -> list[str]:
    """The module's top-level functions (those annotated to return `returns` first, public
    before private, in their order) that can be called with `arity` positional arguments (1
    when not known), at most MAX_FUNCTIONS; where none can, the CALLABLE_BUILTINS that can and
    that the module does not define (blinker's `connect(receiver)` in a module that defines no
    function: `connect(str)`, then `send('a')` returns `[(str, 'a')]`). Never one annotated to
    return something else: pygtrie's `PrefixSet(factory: Callable[..., Trie])` given its
    `_is_not_sentinel` (a TypeGuard) was a receiver that could not be built."""
    wanted = 1 if arity is None else arity
    # Only a return this module or the builtins name is a kind to check (not `Any`, a TypeVar).
    known = {n.name for n in tree.body if isinstance(n, ast.ClassDef)} | BUILTIN_KINDS
    kinds = _returned_kinds(returns) if returns else set()
    kinds = kinds if kinds <= known else set()
    found = []
    for node in tree.body:
        # `test_item`, imported into a test file to be passed, pytest would run as a test.
        if not isinstance(node, ast.FunctionDef) or node.name == exclude:
            continue
        if node.name.startswith("test"):
            continue
        arguments = node.args
        positional = len(arguments.posonlyargs) + len(arguments.args)
        required = positional - len(arguments.defaults)
        required_keywords = [d for d in arguments.kw_defaults if d is None]
        fits = required <= wanted and (wanted <= positional or arguments.vararg is not None)
        given = ast.unparse(node.returns).strip("'\"") if node.returns else ""
        if given and kinds and not kinds & _returned_kinds(given):
            continue
        if fits and not required_keywords:
            found.append((returns != "" and given != returns, node.name.startswith("_"), node.name))
    if not found:
        defined = {name for node in tree.body for name in _defined_names(node)}
        return [
            name
            for name, counts in CALLABLE_BUILTINS.items()
            if wanted in counts and name not in defined and (not kinds or name in kinds)
        ]
    return [name for *_, name in sorted(found, key=lambda item: item[:2])][:MAX_FUNCTIONS]


def _defined_names(node: ast.stmt) -> list[str]:
    """The names a top-level statement binds (a definition, an assignment, an import)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def give_functions(
    parameters: Sequence[Parameter], arities: dict[str, int | None], tree: ast.Module, exclude: str
) -> None:
    """Each callable parameter's pool: the fitting functions, then its default (none at all
    when neither: no call of the target is made without one)."""
    for parameter in parameters:
        if parameter.name in arities:
            # `Callable[[str, int], Result]`: functions that return a Result first.
            returns = _annotated_return(parameter.annotation)
            functions = fitting_functions(tree, arities[parameter.name], exclude, returns)
            default = [] if parameter.default is None else [parameter.default]
            parameter.pool = [*functions, *default]
            parameter.boundaries = []


def degenerate(arguments: str, parameters: Sequence[Parameter], callables: set[str]) -> bool:
    """Whether the call gives a callable parameter a literal that is no function (a number, a
    string, a container; None stays: "no function" is a common default)."""
    try:
        call = ast.parse(f"_({arguments})", mode="eval").body
    except SyntaxError:
        return False
    if not isinstance(call, ast.Call):
        return False
    bound = [(p.name, value) for p, value in zip(parameters, call.args, strict=False)]
    bound += [(str(keyword.arg), keyword.value) for keyword in call.keywords]
    return any(name in callables and _literal(value) for name, value in bound)


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is not None
    return isinstance(node, ast.UnaryOp | ast.List | ast.Tuple | ast.Set | ast.Dict)


def refusal(
    definition: ast.FunctionDef,
    owner: ast.ClassDef | None,
    parameters: Sequence[Parameter],
    tree: ast.Module,
    exclude: str = "",
) -> Refusal:
    """Gives the definition's callable parameters the module's functions (not `exclude`, the
    target itself); what says a call's arguments are degenerate, or None without callables."""
    readers = function_readers(tree)
    arities = callable_arities(definition, owner, parameters, type_aliases(tree), readers)
    if not arities:
        return None
    give_functions(parameters, arities, tree, exclude)
    return lambda arguments: degenerate(arguments, parameters, set(arities))
