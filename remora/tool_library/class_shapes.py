"""What a class of the module is, read from its syntax tree for building its instances: the
`__init__` that builds it (its own, the one a dataclass's fields make, or a base's), whether it
is abstract (built through a subclass), and whether it is a collection that is built holding
entries (a mapping or a sequence whose constructor passes on what it is given)."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Mapping

from remora.tool_library.standard_values import union_members

MAPPING_BASES = frozenset({"dict", "Mapping", "MutableMapping", "OrderedDict", "UserDict"})
SEQUENCE_BASES = frozenset(
    {"list", "set", "frozenset", "Sequence", "MutableSequence", "Set", "MutableSet", "UserList"}
)
BUILTIN_COLLECTIONS = frozenset({"dict", "OrderedDict", "UserDict", "list", "set", "frozenset"})
EMPTY_DEFAULTS = frozenset({"None", "()", "[]", "{}"})
MAPPING_CONTENTS = "{'a': 3, 'b': 1, 'c': 2}"
SEQUENCE_CONTENTS = "[3, 1, 2]"
"""What a collection class is built holding: three entries out of order, so a test tells a
heap, a sort or an insertion order from the others, and the empty instance from a full one."""


def collection_contents(node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> list[str]:
    """The argument that builds a populated instance of a mapping or sequence class (a base
    of dict, Mapping, list, Set..., here or in a class of the module it derives from) whose
    constructor passes on what it is given (`*args`: `self.update(*args, **kw)`,
    `dict(*args, **kwargs)`; or optional initial contents, `data=None`; or a builtin base's
    own); empty for other classes. Without it a container's methods were
    only ever called on an empty one (heapdict's popitem: only its IndexError)."""
    chain = lineage(node, classes)
    kinds = [
        collection_kind(base)
        for current in chain
        for base in bases_in_order(current)
        if base not in classes
    ]
    kind = next((found for found in kinds if found), "")
    constructor = next((found for current in chain if (found := constructor_of(current))), None)
    if not kind:
        return []
    if constructor is None:
        # The base's: dict(m), list(s) take it, an ABC's object() does not; a base imported
        # from another module may (bidict's): the probe tries, and a failed build is dropped.
        named = {base for current in chain for base in base_names(current)}
        foreign = named - set(classes) - MAPPING_BASES - SEQUENCE_BASES
        return (
            [kind]
            if named & BUILTIN_COLLECTIONS or foreign - {"ABC", "Generic", "Protocol"}
            else []
        )
    positional = [*constructor.args.posonlyargs, *constructor.args.args][1:]
    optional = positional and len(positional) == len(constructor.args.defaults)
    first_default = ast.unparse(constructor.args.defaults[0]) if optional else ""
    passes_on = constructor.args.vararg is not None or first_default in EMPTY_DEFAULTS
    return [kind] if passes_on else []


def collection_kind(base: str) -> str:
    """What a class built on `base` (a name from outside the module) is built holding: a
    mapping's contents, a sequence's, or "" for a base that names no collection."""
    if base in MAPPING_BASES or base.endswith(("Mapping", "Dict")):
        return MAPPING_CONTENTS  # bidict's BidirectionalMapping too
    if base in SEQUENCE_BASES or base.endswith(("List", "Sequence", "Set")):
        return SEQUENCE_CONTENTS
    return ""


def subclasses(classes: Mapping[str, ast.ClassDef], owner: str) -> set[str]:
    """The classes of `classes` that derive from `owner`, directly or through each other."""
    found: set[str] = set()
    pending = [owner]
    while pending:
        parent = pending.pop()
        for name, node in classes.items():
            if parent in base_names(node) and name not in found and name != owner:
                found.add(name)
                pending.append(name)
    return found


def constructor_of(node: ast.ClassDef) -> ast.FunctionDef | None:
    """The class's own `__init__`, else its `__new__` (the last definition: the implementation
    after `@overload` signatures)."""
    for wanted in ("__init__", "__new__"):
        found = [m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == wanted]
        if found:
            return found[-1]
    return None


def lineage(node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> list[ast.ClassDef]:
    """The class, then the module's classes it derives from, nearest first, each once (bases
    in the order written; a cycle or a base redefined under its own name ends the walk)."""
    found: list[ast.ClassDef] = []
    pending = [node]
    while pending:
        current = pending.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        pending += [classes[name] for name in bases_in_order(current) if name in classes]
    return found


def inherited_init(
    node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]
) -> ast.FunctionDef | None:
    """The `__init__` that builds the class: its own, the one its fields make (a dataclass), or
    the nearest one of the module's classes it derives from (`Plain(Counter)` is built as
    `Counter.__init__` says); a class with a `__new__` and no `__init__` is built as its
    `__new__` says (an int subclass: dpath's `ListIndex(value, list_length)` was `ListIndex()`)."""
    for current in lineage(node, classes):
        methods = [m for m in current.body if isinstance(m, ast.FunctionDef)]
        own = [m for m in methods if m.name == "__init__"] or [
            m for m in methods if m.name == "__new__"
        ]
        found = own[-1] if own else fields_init(current, classes)
        if found is not None:
            return found
    return None


def abstract(node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> bool:
    """Whether an `@abstractmethod` of the class or of a module class it derives from is not
    implemented on the way down to it, or the class is a `Protocol`: then it cannot be built
    (`_MakeCopy()` of pygtrie raised "Protocols cannot be instantiated")."""
    if "Protocol" in base_names(node):
        return True
    first: dict[str, ast.FunctionDef] = {}
    for current in lineage(node, classes):
        for member in current.body:
            if isinstance(member, ast.FunctionDef):
                first.setdefault(member.name, member)
    return any(
        ast.unparse(decorator).rsplit(".", 1)[-1] == "abstractmethod"
        for member in first.values()
        for decorator in member.decorator_list
    )


def methods_of(
    node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]
) -> dict[str, ast.FunctionDef]:
    """The methods the class has, its own and those it inherits from the module's classes, by
    name: the nearest definition of each (the one a call on its instance runs)."""
    found: dict[str, ast.FunctionDef] = {}
    for member in (m for current in lineage(node, classes) for m in current.body):
        if isinstance(member, ast.FunctionDef):
            found.setdefault(member.name, member)
    return found


def overrides(classes: Mapping[str, ast.ClassDef], receiver: str, owner: str, name: str) -> bool:
    """Whether `receiver`, a subclass of `owner`, or a class between them defines the method
    `name`: a test on a receiver's instance would then run that code, not the owner's."""
    node = classes.get(receiver)
    if node is None or receiver == owner:
        return False
    for current in lineage(node, classes):
        if current.name == owner:
            return False
        if any(isinstance(m, ast.FunctionDef) and m.name == name for m in current.body):
            return True
    return False


def bases_in_order(node: ast.ClassDef) -> list[str]:
    """The last names of the class's bases as written (`Mapping[K, V]` and `abc.ABC` as
    `Mapping`, `ABC`)."""
    return [
        ast.unparse(base.value if isinstance(base, ast.Subscript) else base).rsplit(".", 1)[-1]
        for base in node.bases
    ]


def base_names(node: ast.ClassDef) -> set[str]:
    return set(bases_in_order(node))


RECORD_DECORATORS = frozenset({"dataclass", "define", "frozen", "mutable", "s", "attrs"})


def fields_init(node: ast.ClassDef, classes: Mapping[str, ast.ClassDef]) -> ast.FunctionDef | None:
    """The `__init__` a dataclass, an attrs class or a NamedTuple gets from its annotated
    fields (a base record's of the module first; ClassVar and `field(init=False)` left out; a
    default kept as written), as if written out: their constructors take the fields (crc's
    `Configuration(width, polynomial, ...)` was built bare, and every class holding one failed
    to build). None for a class that is no record, or one this reading would get wrong
    (`init=False`, keyword-only fields)."""
    required: list[str] = []
    optional: list[str] = []
    for current in reversed(lineage(node, classes)):
        fields = record_fields(current)
        if fields is None:
            if current is node:
                return None
            continue
        for written, default in fields:
            if default is None:
                required.append(written)
            else:
                optional.append(f"{written} = {default}")
    if not required and not optional:
        return None
    # Fields with defaults after those without, as a dataclass requires them to be written.
    source = f"def __init__(self, {', '.join([*required, *optional])}): pass"
    try:
        function = ast.parse(source).body[0]
    except SyntaxError:
        return None
    return function if isinstance(function, ast.FunctionDef) else None


def record_fields(node: ast.ClassDef) -> list[tuple[str, str | None]] | None:
    """The fields a record class's `__init__` takes, `name: type` and the default's text; None
    when it is no record or takes them another way."""
    decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
    names = {ast.unparse(d).rsplit(".", 1)[-1] for d in decorators}
    if not (names & RECORD_DECORATORS or "NamedTuple" in base_names(node)):
        return None
    refused = {("init", "False"), ("kw_only", "True")}  # no __init__, or keyword-only fields
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and any(
            (k.arg, ast.unparse(k.value)) in refused for k in decorator.keywords
        ):
            return None
    fields: list[tuple[str, str | None]] = []
    for statement in node.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        kind = ast.unparse(statement.annotation)
        outer = kind.split("[", 1)[0].rsplit(".", 1)[-1]
        if outer == "KW_ONLY":
            return None
        if outer == "ClassVar":
            continue
        value = statement.value
        if isinstance(value, ast.Call) and any(
            k.arg == "init" and ast.unparse(k.value) == "False" for k in value.keywords
        ):
            continue
        written = f"{statement.target.id}: {kind}"
        fields.append((written, None if value is None else ast.unparse(value)))
    return fields


def names_class(node: ast.expr, name: str) -> bool:
    """Whether an annotation is the class `name` itself: `Node`, `'Node'`, `Node[S, V]`."""
    text = ast.unparse(node).strip("'\"")
    return re.fullmatch(rf"(\w+\.)*{re.escape(name)}(\[.*\])?", text) is not None


def held_in(annotation: str, name: str, instances: list[str]) -> list[str]:
    """Instances of the module's class `name` as the annotation holds them: in a list for
    `Iterable[Flag]` or `list[Flag]`, a tuple for `tuple[Flag, ...]`, a set for `set[Flag]`,
    a dict's values for `dict[str, Flag]` (an `Optional` around it read as its inside); the
    instances themselves where the class is the annotation. Given `Flag('abc', 3)` itself,
    `Flags(defined_flags: Iterable[Flag])` iterated over its fields: an AttributeError."""
    held = [member for member in union_members(annotation) if ast.unparse(member) != "None"]
    node = held[0] if len(held) == 1 else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # `'Node'`, quoted
        return held_in(node.value, name, instances)
    if not isinstance(node, ast.Subscript) or not instances or names_class(node, name):
        return instances
    outer = ast.unparse(node.value).rpartition(".")[2]
    inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if not names_class(inner[-1], name) and outer not in ("tuple", "Tuple"):
        # Held deeper (`list[Iterable[Node]]`): the containers of the inner annotation, held.
        text = inner[-1].value if isinstance(inner[-1], ast.Constant) else ast.unparse(inner[-1])
        deeper = held_in(str(text), name, instances)
        if deeper is instances:
            return instances
        instances = deeper
    first, both = instances[0], ", ".join(instances[:2])
    if outer in ("tuple", "Tuple") and ast.unparse(inner[0]) == name:
        return [f"({first},)", f"({both},)", "()"]
    if outer in ("set", "Set", "frozenset", "FrozenSet", "AbstractSet", "MutableSet"):
        return [f"{{{first}}}", f"{{{both}}}", "set()"]
    if outer in ("dict", "Dict", "Mapping", "MutableMapping") and len(inner) == 2:
        key = {"str": "'abc'", "int": "1"}.get(ast.unparse(inner[0]))
        return [f"{{{key}: {first}}}", "{}"] if key else instances
    if outer in SEQUENCE_BASES | {"List", "Iterable", "Collection", "Reversible"}:
        return [f"[{first}]", f"[{both}]", "[]"]
    return instances


def attributes_defined(tree: ast.Module) -> frozenset[str] | None:
    """Every attribute name an object the module's own code builds could have: its classes'
    body names, every `x.name = ...` (or `setattr(x, 'name', ...)`) it writes, and the
    attributes of the builtin classes its classes derive from; None where that cannot be known
    (a base imported from elsewhere, a `__getattr__`, a class that sets its own attributes by
    computed names: `setattr(self, name, ...)`, `self.__dict__`)."""
    names: set[str] = set()
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Attribute) and node.attr == "__dict__":
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return None
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "setattr" and len(node.args) > 1:
                name, owner = node.args[1], node.args[0]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    names.add(name.value)
                elif isinstance(owner, ast.Name) and owner.id == "self":
                    return None
        elif isinstance(node, ast.ClassDef):
            for base in base_names(node):
                builtin = getattr(builtins, base, None)
                if isinstance(builtin, type):
                    names.update(dir(builtin))
                elif base not in classes:
                    return None
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if member.name in ("__getattr__", "__getattribute__"):
                        return None
                    names.add(member.name)
                targets = member.targets if isinstance(member, ast.Assign) else [member]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
                if isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                    names.add(member.target.id)
    return frozenset(names)


def snake_to_class(name: str, classes: Mapping[str, ast.ClassDef]) -> str:
    """The module's class a parameter is named after (`stock`, `order_line`), or ""."""
    wanted = name.replace("_", "").lower()
    return next((cls for cls in classes if cls.lower() == wanted), "")
