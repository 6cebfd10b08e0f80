"""What a class's methods do with their instance, read from their code: those that put something
into it (`mutators`, called on a fresh instance before the method a test is about), those that
read it (`readers`, called on an object another call returned), those that give it back
(`returns_itself`: a builder's setters), and the class or function a call returns."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from remora.tool_library.class_shapes import methods_of

GROWING = frozenset({"append", "add", "extend", "insert", "update", "setdefault", "appendleft"})
"""Methods of a held list, set or dict that put something in it."""
REMOVING = frozenset({"clear", "pop", "popitem", "remove", "discard", "popleft"})
"""Methods of a held list, set or dict that take something out of it."""
FILLING = frozenset({"__setitem__", "__setattr__"})
"""The special methods that fill an instance, written as statements: `store[key] = value`."""
SETTING = re.compile(r"_*(set|add|insert|put|push|store|register)(_|$)")
"""Names of methods that put something in (`_set_node`, `add_item`, `register`): called on an
object the instance holds (`self._trie._set_node_if_no_prefix(key)`), they change it."""
SPECIAL_READERS = ("__iter__", "__contains__", "__len__")
"""What a container shows of what it holds (written `list(x)`, `'a' in x`, `len(x)`), read
after the public readers."""
NOT_MUTATORS = frozenset(
    {"property", "setter", "staticmethod", "classmethod", "abstractmethod", "contextmanager"}
)
"""Decorators (by their last name: `x.setter`, `contextlib.contextmanager`) of a method that is
no call putting something into an instance."""


def mutators(node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> list[ast.FunctionDef]:
    """The class's public methods that put something into the instance (`changing_methods`):
    they assign one of its attributes or items (`self.count += 1`, `self.items[key] = value`,
    `self[key] = value`) or grow one it holds (`self.receivers.append(...)`,
    `self._trie._set_node(...)`), those taking arguments first (they
    add, where one without finishes: `finalize()`), and of those the ones that grow what it
    holds before the ones that only set an attribute (a table's `add_row` before its
    `set_max_width`: its readers draw what was put in). Properties, static and class methods are
    left out; a test calls these on the instance before the method it tests. Of the special
    methods only `__setitem__` and `__setattr__` (FILLING): a container that is not a dict (a
    cache, a registry, a settings object) is filled by `store[key] = value` or `store.key =
    value` before its readers (`get`, `peek`, `pop`, `store.key`) are asked for the key."""
    changing, growing = changing_methods(node, classes)
    found: list[ast.FunctionDef] = []
    for method in node.body:
        if not isinstance(method, ast.FunctionDef) or method.name not in changing:
            continue
        if method.name.startswith("_") and method.name not in FILLING:
            continue
        names = {ast.unparse(d).rsplit(".", 1)[-1] for d in method.decorator_list}
        if names & NOT_MUTATORS:
            continue
        if any(isinstance(inner, ast.Yield | ast.YieldFrom) for inner in ast.walk(method)):
            continue  # a generator changes nothing until it is iterated
        found.append(method)

    def order(method: ast.FunctionDef) -> tuple[bool, bool]:
        only_self = len(method.args.args) + len(method.args.kwonlyargs) == 1
        return only_self, method.name not in growing

    return sorted(found, key=order)


def changing_methods(
    node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]
) -> tuple[set[str], set[str]]:
    """The names of the class's methods (and those it inherits from the module's classes) that
    change its instance, and of those that grow what it holds (`self.rows.append(...)`, `+= 1`,
    `self.items[key] = value`) rather than only set an attribute: directly, or by calling such
    a method of its own (`add_rows` calling `self.add_row`; pyqtree's `Index.insert` calling
    the `_insert` of its base)."""
    methods = [m for m in methods_of(node, classes).values() if m.args.args]
    changing = {
        m.name
        for m in methods
        if any(changes(n, m.args.args[0].arg) for n in ast.walk(m)) or sets_through(m)
    }
    growing = {m.name for m in methods if m.name in FILLING or fills(m)}
    for names in (changing, growing):
        while more := {m.name for m in methods if m.name not in names and calls_own(m, names)}:
            names |= more
    return changing, growing


def sets_through(method: ast.FunctionDef) -> bool:
    """Whether a method named for setting (SETTING) assigns through an object it reached from
    its instance: pygtrie's `_set_node` walks `node = self._root` down, then sets
    `node.value = value`."""
    if SETTING.match(method.name) is None:
        return False
    this = method.args.args[0].arg
    reached = {  # `node = self._root`, `node = node.children...`
        target.id
        for n in ast.walk(method)
        if isinstance(n, ast.Assign)
        and this in {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)}
        for target in n.targets
        if isinstance(target, ast.Name)
    }
    return any(
        isinstance(n, ast.Assign | ast.AugAssign)
        and any(
            held(t, name)
            for name in reached
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
        for n in ast.walk(method)
    )


def fills(method: ast.FunctionDef) -> bool:
    """Whether a method's own statements grow what its instance holds."""
    this = method.args.args[0].arg
    return any(
        changes(n, this)
        for n in ast.walk(method)
        if isinstance(n, ast.Call | ast.AugAssign)
        or (isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Subscript))
    )


def calls_own(method: ast.FunctionDef, names: set[str]) -> bool:
    """Whether the method calls one of `names` on its own instance (`self.add_row(row)`)."""
    this = method.args.args[0].arg
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == this
        and n.func.attr in names
        for n in ast.walk(method)
    )


def changes(node: ast.AST, this: str) -> bool:
    """Whether a node assigns an attribute of `this` (or an item of one) or grows one."""
    if isinstance(node, ast.Assign):
        return any(held(target, this) for target in node.targets)
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return held(node.target, this)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        named = node.func.attr in GROWING or SETTING.match(node.func.attr) is not None
        return named and held(node.func.value, this)
    return False


def removes(method: ast.FunctionDef) -> bool:
    """Whether a method takes something out of what its instance holds (`del self.items[key]`,
    `self._map.clear()`): no mutator to fill an instance with, but a test reads its effect back
    through a reader after filling one."""
    if not method.args.args:
        return False
    this = method.args.args[0].arg
    return any(
        (isinstance(node, ast.Delete) and any(held(t, this) for t in node.targets))
        or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in REMOVING
            and held(node.func.value, this)
        )
        for node in ast.walk(method)
    )


def held(target: ast.expr, this: str) -> bool:
    """Whether a target is `this`'s: `self.x`, `self.x[k]`, `self.x.y`, or an item of it
    (`self[k] = v`, through its `__setitem__`: dotmap's `__setattr__`)."""
    if isinstance(target, ast.Tuple | ast.List):  # `self.year, self.month = year, month`
        return any(held(element, this) for element in target.elts)
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return target.value.id == this
    while isinstance(target, ast.Subscript | ast.Attribute | ast.Starred):
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            return target.value.id == this
        target = target.value
    return False


def result_class(
    definition: ast.FunctionDef, owner: str, classes: Mapping[str, ast.ClassDef]
) -> str:
    """The module's class whose instance the function returns, or "": the one its return
    annotation names (`-> Parser`, `-> "Parser"`, `-> Parser | None`, `-> Self` for its own
    class), else, without one, the class every `return` of its own body constructs."""
    if definition.returns is not None:
        words = re.findall(r"[A-Za-z_]\w*", ast.unparse(definition.returns))
        named = [owner if word == "Self" else word for word in words if word not in UNNAMED]
        return named[0] if len(named) == 1 and named[0] in classes else ""
    returns = [node for node in own_nodes(definition) if isinstance(node, ast.Return)]
    made = {
        node.value.func.id if isinstance(node.value.func, ast.Name) else ""
        for node in returns
        if isinstance(node.value, ast.Call)
    }
    if len(made) != 1 or len(returns) != sum(isinstance(r.value, ast.Call) for r in returns):
        return ""
    (name,) = made
    return name if name in classes else ""


def factory_functions(
    tree: ast.Module, classes: Mapping[str, ast.ClassDef]
) -> dict[str, list[ast.FunctionDef]]:
    """The module's public top-level functions that build one of its classes (`result_class`),
    by the class they build: kdtree's `create` for `KDNode`."""
    found: dict[str, list[ast.FunctionDef]] = {}
    for function in tree.body:
        if isinstance(function, ast.FunctionDef) and not function.name.startswith("_"):
            made = result_class(function, "", classes)
            if made:
                found.setdefault(made, []).append(function)
    return found


UNNAMED = frozenset({"Optional", "None", "typing", "t"})
"""Words of a return annotation that name no class of its own: `Optional[...]`, `typing.X`."""


def own_nodes(definition: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of a function's body, not those of functions and classes defined inside it."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(definition.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return found


def private_definitions(tree: ast.Module, definition: ast.FunctionDef) -> list[ast.FunctionDef]:
    """The module's private functions and methods (one underscore, not special), wherever they
    are, but the definition: the code a test of it may run that no test of a public function
    names. Whatever a call reaches counts, not only what the definition calls by name:
    pluralizer's `is_plural` is one line, its branches are in the `_check_word` it calls, and
    json5's `dumps` reaches the `_encode_dict` of the encoder object it builds. So do the
    `steps` of its classes, public in name only."""
    private = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and node.name.startswith("_")
        and not node.name.endswith("__")
    ]
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    found = [*private, *(step for node in classes for step in steps(node))]
    return [node for node in found if node is not definition]


def steps(node: ast.ClassDef) -> list[ast.FunctionDef]:
    """Methods that take nothing but the instance and read an attribute of it that only
    another method sets, not its constructor: steps of that method, no test can call them on
    their own (metaphone's `process_c` reads the `self.word` its `parse(input)` sets)."""
    methods = [m for m in node.body if isinstance(m, ast.FunctionDef)]
    set_by: dict[str, set[str]] = {}
    for method in methods:
        for name in attributes_of_self(method, ast.Store):
            set_by.setdefault(name, set()).add(method.name)
    return [
        method
        for method in methods
        if not method.name.startswith("_")
        and len(method.args.args) == 1
        and not method.args.vararg
        and any(
            "__init__" not in set_by.get(name, {"__init__"}) and set_by[name] - {method.name}
            for name in attributes_of_self(method, ast.Load)
        )
    ]


def attributes_of_self(method: ast.FunctionDef, context: type[ast.expr_context]) -> set[str]:
    return {
        inner.attr
        for inner in ast.walk(method)
        if isinstance(inner, ast.Attribute)
        and isinstance(inner.ctx, context)
        and isinstance(inner.value, ast.Name)
        and inner.value.id == "self"
    }


def readers(node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> list[ast.FunctionDef]:
    """The class's public methods that give back something other than one of its own kind
    (a parser's `parse(text)`, not its `then(other)`): what a test asks of an object another
    call returned, whose behaviour shows only then. Not properties, static or class methods,
    generators, nor the methods that put something into the instance (`mutators`) but those
    that take nothing and give back a value (a table's `draw()`, which keeps its widths).
    After them, the container protocol it defines (SPECIAL_READERS: `list(x)`, `'a' in x`,
    `len(x)`): pygtrie's `PrefixSet.add('abc')` had no public reader to show what it did."""
    changing = {id(method) for method in mutators(node, classes)}
    found: list[ast.FunctionDef] = []
    special: dict[str, ast.FunctionDef] = {}
    for method in node.body:
        if isinstance(method, ast.FunctionDef) and method.name in SPECIAL_READERS:
            special[method.name] = method
        if not isinstance(method, ast.FunctionDef) or method.name.startswith("_"):
            continue
        names = {ast.unparse(d).rsplit(".", 1)[-1] for d in method.decorator_list}
        if names & NOT_MUTATORS or not method.args.args:
            continue
        if id(method) in changing and (len(method.args.args) > 1 or not gives_value(method)):
            continue  # what puts something in; not a table's `draw()` that keeps its widths
        if any(isinstance(inner, ast.Yield | ast.YieldFrom) for inner in own_nodes(method)):
            continue
        if not gives_value(method):  # `clear()`, `discard()` raising NotImplementedError
            continue
        if not returns_itself(method) and result_class(method, node.name, classes) != node.name:
            found.append(method)
    return found + [special[name] for name in SPECIAL_READERS if name in special]


def gives_value(method: ast.FunctionDef) -> bool:
    """Whether a `return` of the method's own body gives back a value."""
    return any(
        isinstance(inner, ast.Return) and inner.value is not None for inner in own_nodes(method)
    )


def returns_itself(method: ast.FunctionDef) -> bool:
    """Whether a method gives back its own instance (`return self`): a builder's setter."""
    if not method.args.args:
        return False
    this = method.args.args[0].arg
    return any(
        isinstance(inner, ast.Return)
        and isinstance(inner.value, ast.Name)
        and inner.value.id == this
        for inner in own_nodes(method)
    )


def returned_function(definition: ast.FunctionDef) -> ast.FunctionDef | None:
    """The function defined in the body that every `return` of it gives back (a decorator's
    `wrapper`), or None."""
    nodes = own_nodes(definition)  # a `def` under an `if` too; not one inside another `def`
    inner = {node.name: node for node in nodes if isinstance(node, ast.FunctionDef)}
    returns = [node for node in nodes if isinstance(node, ast.Return)]
    names = {ast.unparse(node.value) if node.value is not None else "" for node in returns}
    if len(names) != 1:
        return None
    return inner.get(names.pop())
