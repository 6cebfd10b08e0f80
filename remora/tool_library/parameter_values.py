"""Values for a function's parameters, from its code alone (ast, no model). A pool, most
telling first: quoted examples in the docstring for text, a value of its annotated type (or its
default's, or what its use or name suggests: `.upper()` text, `- 1` a number, `rgb[0]` to
`rgb[2]` a tuple of three), the literals the body compares it with and their neighbours, the
module's other literals of its type, its default. Parameters annotated with one of the module's
classes, or named after one (`stock` for `Stock`), get instances: constructor calls found in the
project, built from the constructor's own parameters, or proposed by the model."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from remora.tool_library.call_sites import call_sites
from remora.tool_library.class_shapes import (
    abstract,
    base_names,
    collection_contents,
    held_in,
    inherited_init,
    snake_to_class,
)
from remora.tool_library.code_literals import (
    delimited_texts,
    fits,
    literal_kind,
    literals,
    quoted_examples,
    read_words,
    shorter,
    table_keys,
    words,
)
from remora.tool_library.parameter_types import (
    annotation,
    callee_usage,
    documented,
    keyed_dicts,
    named_type,
    names_a_class,
    sized_tuples,
    usage,
)
from remora.tool_library.pattern_values import Pattern, shapes
from remora.tool_library.standard_values import (
    STANDARD_VALUES,
    contradicts_elements,
    isinstance_checks,
    standard_type,
    union_members,
    union_standard_types,
)

POOL_SIZE = 10
"""Values tried per parameter in one-at-a-time variations."""
VARIATIONS = 36
"""Values tried across all parameters: a function of one or two parameters tries more of each."""

TREE = "{'a': {'b': {}, 'c': {'d': {}}}}"
FOUR, EIGHT = "b'\\x00\\x00\\x00\\x01'", "b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01'"
TYPE_VALUES: dict[str, list[str]] = {
    "int": ["3", "10", "0", "-2", "1"],
    "float": ["2.5", "10.0", "0.0", "-1.5"],
    "complex": ["1j"],
    # Two indented lines, the first a sentence: what code that splits or wraps lines reads.
    "str": ["'abc'", "'Hello world'", "''", "'a-b_c 1'", "'  Hello world.\\n    Second line'"],
    # A high-bit byte (varints, UTF-8 read on while it is set); 32- and 64-bit big-endian 1s.
    "bytes": ["b'abc'", "b''", "b'\\xff\\x01'", FOUR, EIGHT],
    "bytearray": ["bytearray(b'abc')", "bytearray()", "bytearray(b'\\xff\\x01')"],
    "memoryview": [f"memoryview({b})" for b in ("b'abc'", "b''", FOUR, EIGHT)],
    "bool": ["True", "False"],
    "list": ["[1, 2, 3]", "[]", "['a', 'b']"],
    "tuple": ["(1, 2)", "()"],
    "set": ["{1, 2}", "{'a'}"],
    # Mappings of sets too (graphs, dependency tables), and a tree of them (JSON, configuration).
    "dict": ["{'a': 1, 'b': 2}", "{}", "{1: {2, 3}, 2: {3}, 3: {4}}", "{1: {2}, 2: {1}}", TREE],
    "none": ["None"],
}
"""Values by the annotation's outer type (after `Optional`, `Sequence` ... are read as their
plain container)."""
INDEX_VALUES = ["1", "0", "-1", "slice(1, 3)", "slice(None)"]
"""Values for `__getitem__`'s index when it is not annotated otherwise: positions, slices."""
UNTYPED = ["3", "'abc'", "[1, 2]", "0", "None", "{'a': 1}", TREE]
"""Values for a parameter with neither annotation nor default (the last a tree of mappings:
JSON-like data and trees are nested dicts, where `{'a': 1}` only reaches the top level)."""
ALIASES = {"sequence": "list", "iterable": "list", "collection": "list", "mutablesequence": "list",
           "frozenset": "set", "mapping": "dict", "mutablemapping": "dict", "ordereddict": "dict",
           "defaultdict": "dict", "none": "none", "any": "", "object": ""}  # fmt: skip

Refusal = Callable[[str], bool] | None
"""Whether a call's argument text is one no test should make (None: every one is fine)."""


@dataclass
class Parameter:
    name: str
    annotation: str
    default: str | None
    keyword_only: bool
    positional_only: bool = False
    used_as: str = ""
    """For a parameter without annotation or default: the type its use in the body suggests
    (a class an `isinstance` check names, as written there; else a TYPE_VALUES kind)."""
    pool: list[str] = field(default_factory=list)
    boundaries: list[str] = field(default_factory=list)
    """The pool's values that sit on or beside a literal the body compares the parameter with."""


def parameters_of(definition: ast.FunctionDef, method: bool) -> list[Parameter]:
    """The parameters a call passes (self/cls of a method left out; *args and **kwargs too:
    calls without them are the common case)."""
    arguments = definition.args
    positional, only = [*arguments.posonlyargs, *arguments.args], len(arguments.posonlyargs)
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    defaults += list(arguments.defaults)
    found = [
        Parameter(arg.arg, annotation(arg), None if d is None else ast.unparse(d), False, i < only)
        for i, (arg, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    found += [
        Parameter(arg.arg, annotation(arg), None if d is None else ast.unparse(d), True)
        for arg, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    if method and found and "staticmethod" not in map(ast.unparse, definition.decorator_list):
        found = found[1:]
    uses = usage(definition) | documented(definition)  # the author's word before a guess
    checked = isinstance_checks(definition)
    for parameter in found:
        named = uses.get(parameter.name, "") or named_type(parameter.name)
        check = checked.get(parameter.name, "")
        builtin = outer_type(check) if outer_type(check) in TYPE_VALUES else ""
        # A class (`Node`, `datetime.date`) says what it is; a lower-case alias the module
        # binds (`string_types = (str,)`) says less than the str methods the body calls on it.
        a_class = check if check[:1].isupper() or "." in check else ""
        parameter.used_as = builtin or a_class or named or check
    return found


class InstanceFactory:
    """Constructor calls of the module's classes: from call sites, the model's completions and
    the constructor's own parameters (one level deep)."""

    def __init__(
        self,
        classes: Mapping[str, ast.ClassDef],
        sources: Mapping[str, str],
        constructors: Sequence[str],
        examples: Mapping[str, Sequence[str]] | None = None,
        imports: Mapping[str, str] | None = None,
    ) -> None:
        self.classes = classes
        self.sources = sources
        self.constructors = constructors
        self.examples = examples or {}
        """Constructor calls in the module's docstring examples, by class."""
        self.imports = imports or {}
        """What the names the module imports stand for (standard_values.imported_names)."""
        self.callables: Callable[[ast.FunctionDef, ast.ClassDef, list[Parameter]], Refusal]
        self.callables = lambda init, cls, parameters: None
        """Gives a constructor's callable parameters functions (callable_values.refusal)."""
        self.patterns: Mapping[str, Pattern] = {}
        """The module's compiled regular expressions, by name (pattern_values)."""
        self.bound: Mapping[str, list[str]] = {}
        """The one-word strings of the module's tables, by name (code_literals.bound_words)."""
        self.building: set[str] = set()
        """The abstract classes whose subclasses are being built (a cycle ends there)."""

    def instances(self, name: str, depth: int = 0) -> list[str]:
        node = self.classes.get(name)
        if node is None:
            return []
        if abstract(node, self.classes):  # its methods run on what its subclasses build
            if name in self.building:  # a cycle of bases, or a base redefined under its name
                return []
            self.building.add(name)
            below = [other for other, c in self.classes.items() if name in base_names(c)]
            built = [
                text for other in below if other != name for text in self.instances(other, depth)
            ]
            self.building.discard(name)
            return list(dict.fromkeys(built))[:4]
        # Most trusted first: calls people wrote, values of the constructor's types (a mutable
        # default given one: every instance built on it, and every test, shares it), the
        # model's completions, then a bare `C()`.
        written = [f"{name}({arguments})" for arguments in call_sites(name, False, self.sources)]
        written += self.examples.get(name, [])
        proposed = list(self.constructors)
        typed: list[str] = []
        init = inherited_init(node, self.classes)
        if init is not None and depth <= 1:  # a parameter's class built from its own types too
            parameters = parameters_of(init, method=True)
            defining = next((c for c in self.classes.values() if init in c.body), node)
            passed_on = callee_usage(init, None, defining)  # `self.get(text)`: what get takes
            shaped = shapes(init, self.patterns, defining, self.imports)
            table_word = read_words(node, self.bound)[:1]  # of its tables: Scale('century')
            for parameter in parameters:
                if not parameter.annotation and parameter.default is None and not parameter.used_as:
                    parameter.used_as = passed_on.get(parameter.name, "")
                kind = outer_type(parameter.annotation) or parameter.used_as
                near = [v for v in shaped.get(parameter.name, []) if fits(v, kind)]
                made = typed_values(parameter, self, depth + 1)
                known = table_word if kind == "str" else []
                values = [*near[:2], *made[:1], *known, *made[1:]]
                values = [v for v in values if not contradicts_elements(v, parameter.annotation)]
                parameter.pool = [v for v in dict.fromkeys(values) if v != parameter.default][:2]
            refused = self.callables(init, node, parameters)
            if refused is not None:  # no literal where the class calls a function
                written = [t for t in written if not refused(t[len(name) + 1 : -1])]
                proposed = [arguments for arguments in proposed if not refused(arguments)]
            # A defaulted parameter may go without (funcparserlib's `Token(..., start=None)`).
            if all(p.pool or p.default is not None for p in parameters):
                # The author's defaults first (json5's `Parser(msg, fname)`, not only `pos=10`).
                shared = ("[", "{", "list(", "dict(", "set(")  # a mutable default
                kept = [p for p in parameters if p.default is None or p.default.startswith(shared)]
                needed = distinct_values(kept, {})
                for chosen in (needed, distinct_values(parameters, needed)):  # `Index(3, 10)`
                    typed.append(f"{name}({', '.join(call_arguments(parameters, chosen))})")
                if all(p.pool[1:] or p.default is not None for p in parameters):
                    second = {p.name: p.pool[1] for p in parameters if p.pool[1:]}
                    typed.append(f"{name}({', '.join(call_arguments(parameters, second))})")
        proposed = [f"{name}({arguments})" for arguments in proposed]
        defaulted = init is None or all(p.default is not None for p in parameters_of(init, True))
        bare = [f"{name}()"] if defaulted else []
        typed += [f"{name}({contents})" for contents in collection_contents(node, self.classes)]
        found = list(dict.fromkeys([*written, *typed, *proposed]))
        # A bare `C()` last, unless people wrote it (`parser = Parser()` in the README).
        found = [text for text in found if text in written or not text.endswith("()")]
        found += [text for text in bare if text not in found]
        return found[:4]


def fill_pools(
    parameters: list[Parameter],
    definition: ast.FunctionDef,
    tree: ast.Module,
    classes: Mapping[str, ast.ClassDef],
    factory: InstanceFactory,
    values: tuple[list[str], list[str]] | None = None,
) -> None:
    """Each parameter's values, most telling first: its boundaries from the body, its type's
    values, the module's literals of that type, its default. `values`: the module's literals
    and words (`literals(tree)`, `words(tree)`), when worked out once for all its functions."""
    owner = next((cls for cls in classes.values() if definition in cls.body), None)
    boundaries = shapes(definition, factory.patterns, owner, factory.imports)
    module_literals, module_words = values or (literals(tree), words(tree))
    size = max(POOL_SIZE, VARIATIONS // max(1, len(parameters)))
    quoted = quoted_examples(definition)
    passed_on = callee_usage(definition, tree, owner)
    checked = isinstance_checks(definition)
    keyed, looked_up = keyed_dicts(definition), table_keys(definition, tree)
    for parameter in parameters:
        if not parameter.annotation and parameter.default is None and not parameter.used_as:
            parameter.used_as = passed_on.get(parameter.name, "")
        typed = typed_values(parameter, factory, 0)
        typed = [*looked_up.get(parameter.name, []), *typed]  # `TABLE[word]`: a key of it
        typed = [v for v in typed if not contradicts_elements(v, parameter.annotation)]
        if outer_type(parameter.annotation) in ("dict", "") and parameter.name in keyed:
            typed = [*keyed[parameter.name], *typed]  # `matches['tz_hour']`: the keys it reads
        other = outer_type(parameter.annotation) not in TYPE_VALUES  # an alias: `Comparable`
        if parameter.name == "other" and owner is not None and other:
            typed = [*factory.instances(owner.name), *typed]  # `other`: another of its kind
        indexed = not parameter.annotation or re.search(r"int|slice|Index", parameter.annotation)
        if definition.name == "__getitem__" and parameter is parameters[0] and indexed:
            typed = [*INDEX_VALUES, *typed]  # what `items[...]` is mostly given
        kind = outer_type(parameter.annotation) or parameter.used_as
        near = [value for value in boundaries.get(parameter.name, []) if fits(value, kind)]
        others = [value for value in module_literals if fits(value, kind) and kind][:5]
        if kind == "str":  # the module's words, not its patterns and punctuation: inputs
            others = [value for value in others if value not in module_words]
            others = [*module_words, *others]
        elif not kind and not parameter.annotation:  # anything: text too (metaphone's `input`)
            others = module_words
        examples = quoted if kind == "str" else []
        tagged = delimited_texts(module_literals) if kind == "str" else []
        pool = [*examples[:2], *typed[:1], *near, *tagged, *typed[1:]]
        pool += [] if parameter.default is None else [parameter.default]
        pool += ["None"] if parameter.name in checked else []  # what `isinstance` turns away
        parameter.boundaries = near
        parameter.pool = list(dict.fromkeys([*pool, *others]))[:size]


def typed_values(parameter: Parameter, factory: InstanceFactory, depth: int) -> list[str]:
    if names_a_class(parameter.annotation):  # a class, never `3`
        return []  # flatdict's `dict_class: type[dict] = dict` gets its default
    kind = outer_type(parameter.annotation)
    annotated_class = re.findall(r"[A-Za-z_]\w*", parameter.annotation or parameter.used_as)
    named = snake_to_class(parameter.name, factory.classes) if kind not in TYPE_VALUES else ""
    for name in [*annotated_class, named]:  # not `mnemonic: str` for a class `Mnemonic`
        if name in factory.classes:  # `Flag`, or a collection of them: `Iterable[Flag]`
            return held_in(parameter.annotation, name, factory.instances(name, depth))
    none = ["None"] if re.search(r"None|Optional", parameter.annotation) else []  # `| None`
    standard = standard_type(parameter.annotation or parameter.used_as, factory.imports)
    if standard:  # `uuid.UUID(...)`, `datetime.date(...)`: built with the type's module
        return [*STANDARD_VALUES[standard], *none]
    if kind in TYPE_VALUES:
        return [*TYPE_VALUES[kind], *none]
    members = union_kinds(parameter.annotation)
    made = union_standard_types(parameter.annotation, factory.imports)  # `datetime | int`
    if members or made:  # `str | bytes | list`: each member's values, the first member's first
        values = [value for name in made for value in STANDARD_VALUES[name]]
        return list(dict.fromkeys([*values, *(v for kind in members for v in TYPE_VALUES[kind])]))
    if not parameter.annotation and parameter.default is not None:
        default_kind = literal_kind(parameter.default)
        if default_kind in TYPE_VALUES:
            return [parameter.default, *shorter(parameter.default), *TYPE_VALUES[default_kind]]
    if parameter.used_as in TYPE_VALUES:
        return list(TYPE_VALUES[parameter.used_as])
    sized = re.fullmatch(r"tuple\[(\d)\]", parameter.used_as)
    if sized:  # read item by item at positions 0 to n - 1 (parameter_types.usage)
        return sized_tuples(int(sized.group(1)))
    if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", parameter.default or ""):
        return []  # `digest=hashlib.sha1`: the class uses one of that kind, never `3`
    return list(UNTYPED)


def outer_type(text: str) -> str:
    """ "int" for `int`, "list" for `Sequence[int]`, "" for an unknown or union type; an
    Optional/`| None` is read as its other member."""
    text = text.replace("typing.", "").strip()
    match = re.fullmatch(r"Optional\[(.*)\]", text)
    if match:
        text = match.group(1)
    parts = [part.strip() for part in text.split("|") if part.strip() != "None"]
    if len(parts) != 1:
        return ""
    outer = parts[0].split("[", 1)[0].strip().lower().rpartition(".")[2]
    return ALIASES.get(outer, outer)


def union_kinds(text: str) -> list[str]:
    """The TYPE_VALUES kinds of a union's members, `None` last (`str | bytes | list`), or [];
    a member of no such kind gives none (`str | re.Pattern[str]`: the text)."""
    members = union_members(text)
    kinds = [outer_type(ast.unparse(m)) or ast.unparse(m).lower() for m in members]
    if len(kinds) < 2:
        return []
    kinds = [kind for kind in kinds if kind in TYPE_VALUES]
    if not kinds or kinds == ["none"]:
        return []
    return sorted(dict.fromkeys(kinds), key=lambda kind: kind == "none")


def call_arguments(parameters: Sequence[Parameter], chosen: Mapping[str, str]) -> list[str]:
    """Argument texts: a parameter without a default gets its `chosen` value (else its pool's
    first), positionally unless keyword-only; one with a default is passed, by keyword, only
    when `chosen` names it, and a positional-only one by position, after the defaults of those
    before it (by keyword, pygtrie's `Trie(other=3)` went to `**kwargs`: a key named other)."""
    parts: list[str] = []
    over: list[str] = []
    for parameter in parameters:
        if parameter.default is not None and parameter.name not in chosen:
            over += [parameter.default] if parameter.positional_only else []
            continue
        value = chosen.get(parameter.name, parameter.pool[0] if parameter.pool else "None")
        by_keyword = parameter.keyword_only or parameter.default is not None
        if parameter.positional_only:
            parts, over = [*parts, *over, value], []
        else:
            parts.append(f"{parameter.name}={value}" if by_keyword else value)
    return parts


def combinations(
    parameters: list[Parameter], around: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """A base call (each required parameter's first value, distinct values for parameters of
    one type so that `f(1, 1, 1)` is not the base; defaults left to the signature) and, for
    each parameter, the base with one of its other values: the one-at-a-time variations that
    tell which parameter a behaviour depends on. `around`: another base, one of these calls
    that reached code the first did not (`force_color=True` past an early return): the
    variations of the others then show what that code does."""
    return [(text, origin) for text, (origin, _) in variations(parameters, around).items()]


def distinct_values(parameters: Sequence[Parameter], chosen: Mapping[str, str]) -> dict[str, str]:
    """`chosen`, and each other parameter's first value none before it took: not `f(1, 1, 1)`."""
    found = dict(chosen)
    for p in [p for p in parameters if p.pool and p.name not in chosen]:
        found[p.name] = next((v for v in p.pool if v not in found.values()), p.pool[0])
    return found


def variations(
    parameters: list[Parameter], around: Mapping[str, str] | None = None
) -> dict[str, tuple[str, dict[str, str]]]:
    """`combinations`' calls, each argument text with its origin and the values it chose."""
    required = [p for p in parameters if p.default is None]
    if any(not p.pool for p in required):
        return {}
    base = distinct_values(required, around or {})
    calls = {", ".join(call_arguments(parameters, base)): ("types", base)}
    for parameter in parameters:
        for value in parameter.pool:
            if value != base.get(parameter.name, parameter.default):
                chosen = base | {parameter.name: value}
                origin = "boundary" if value in parameter.boundaries else "values"
                calls.setdefault(", ".join(call_arguments(parameters, chosen)), (origin, chosen))
    return calls
