"""Text that the module's own regular expressions match, for the parameters they read.

A parser of a format got only `'abc'` and `''`: error tests. The module says what valid input
looks like in its patterns, `TEMPLATE = re.compile("{([^}]+)}")` and `TEMPLATE.finditer(uri)`
or `re.match(r"(\\d+)\\.(\\d+)", text)`: the parameter that reaches such a call (directly, or
through the attribute a constructor stores it in, `self.uri = uri`) is given strings the pattern
matches in full, made by hypothesis's `from_regex` (the simplest one, shrunk, and the simplest
of five characters or more: `'{0}'`, `'{000}'`), printable ASCII only; not text of one character
or none, or only spaces, which shows no format. The pattern is compiled,
never run on anything here but what hypothesis makes of it; patterns over MAX_PATTERN
characters, or whose shortest match is over MAX_TEXT, are left alone.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import re
import warnings
from collections.abc import Mapping, Sequence

from remora.tool_library.code_literals import compared_literals
from remora.tool_library.decoded_values import decoded_shapes
from remora.tool_library.value_flow import origins, stored_attributes

MAX_PATTERN = 200
"""Characters of a pattern worth making text for (longer ones are rarely one format)."""
MAX_TEXT = 64
"""Characters of the shortest text a pattern matches, at most, for it to be given."""
READ_FIRST = frozenset({"match", "fullmatch", "search", "finditer", "findall", "split"})
"""A compiled pattern's methods whose first argument is the text read (`sub`'s is second)."""
READ_SECOND = frozenset({"sub", "subn"})
Pattern = tuple[str, int]
"""A pattern's text and its flags."""


def module_patterns(tree: ast.Module) -> dict[str, Pattern]:
    """The module's top-level `NAME = re.compile(TEXT[, FLAGS])`, by name, where TEXT is a
    string literal or a top-level name bound to one (`TZ_RE = re.compile(TZ_REGEX)`); also
    under a top-level `if` or `try` (a pattern for each Python, the last one `re` compiles
    kept) and through the name `re` was imported as (`import re as regex`)."""
    found: dict[str, Pattern] = {}
    texts: dict[str, ast.expr] = {}
    statements = top_level(tree.body)
    aliases = {"re"} | {
        alias.asname
        for node in statements
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "re" and alias.asname
    }
    for node in statements:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if not isinstance(target, ast.Name):
                continue
            texts[target.id] = node.value
            pattern = compiled(node.value, texts, aliases)
            if pattern is not None and valid(pattern):
                found[target.id] = pattern
    return found


def top_level(statements: Sequence[ast.stmt]) -> list[ast.stmt]:
    """The statements, and those of the `if`, `else`, `try` and `except` blocks among them, in
    order; not those of functions and classes."""
    found: list[ast.stmt] = []
    for statement in statements:
        found.append(statement)
        if isinstance(statement, ast.If):
            found += top_level([*statement.body, *statement.orelse])
        elif isinstance(statement, ast.Try):
            handlers = [s for handler in statement.handlers for s in handler.body]
            found += top_level([*statement.body, *handlers, *statement.orelse])
    return found


def valid(pattern: Pattern) -> bool:
    """Whether the pattern is short enough to be one format (MAX_PATTERN) and `re` compiles
    it (one written for the `regex` module may not)."""
    if len(pattern[0]) > MAX_PATTERN:
        return False
    try:
        re.compile(*pattern)
    except (re.error, ValueError, TypeError, OverflowError, RecursionError):
        return False
    return True


MAX_TABLE_PATTERNS = 40
"""Patterns of a module's tables given text (hypothesis takes about 15 ms for each)."""


def table_texts(trees: Sequence[ast.Module]) -> list[str]:
    """Literals of text that the patterns compiled in the modules' tables match in full (the
    simplest of two characters or more, in lower case where the pattern ignores case):
    `RULES = [(re.compile(r"(?i)(x|ch|ss|sh|zz)$"), "$1es"), ...]` gives `'ch'`. A function
    that walks such a table turns each of them by another rule, where the table's words
    (code_literals.words) are mostly its exceptions. A pattern bound to a name of its own is
    read through that name (pattern_shapes)."""
    found: list[Pattern] = []
    for tree in trees:
        for statement in tree.body:
            value = statement.value if isinstance(statement, ast.Assign | ast.AnnAssign) else None
            if value is None or compiled(value, {}) is not None:
                continue
            calls = [node for node in ast.walk(value) if isinstance(node, ast.Call)]
            found += [p for p in (compiled(call, {}) for call in calls) if p is not None]
    texts: list[str] = []
    for text, flags in found[:MAX_TABLE_PATTERNS]:
        # Two characters or more: a suffix rule's `x` alone is no word (`ch` is one).
        for match in matching(text, flags, (2,)):
            with contextlib.suppress(re.error, RecursionError):  # compiled once already
                if re.fullmatch(text, match.lower(), flags):
                    match = match.lower()
            texts.append(repr(match))
    return list(dict.fromkeys(texts))


def compiled(
    node: ast.expr, texts: Mapping[str, ast.expr], aliases: frozenset[str] | set[str] = frozenset()
) -> Pattern | None:
    """`re.compile(TEXT[, FLAGS])` as (text, flags), else None; `texts`: what the module's
    names were bound to before it; `aliases`: the names `re` is imported as."""
    names = {f"{alias}.compile" for alias in aliases or {"re"}}
    if not (isinstance(node, ast.Call) and ast.unparse(node.func) in names and node.args):
        return None
    flags = node.args[1:2] or [k.value for k in node.keywords if k.arg == "flags"]
    text = node.args[0]
    if isinstance(text, ast.Name):
        text = texts.get(text.id, text)
    return literal_pattern(text, flags)


def literal_pattern(node: ast.expr, flags: list[ast.expr]) -> Pattern | None:
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    value = 0
    for name in re.findall(r"\w+", ast.unparse(flags[0])) if flags else []:
        member = getattr(re.RegexFlag, name, None)
        value |= int(member) if isinstance(member, re.RegexFlag) else 0
    return node.value, value


def pattern_shapes(
    definition: ast.FunctionDef, patterns: Mapping[str, Pattern]
) -> dict[str, list[str]]:
    """For each parameter the definition reads with a pattern (`TEMPLATE.finditer(uri)`,
    `re.match(r"...", text)`, `PATTERN.match(self.uri)` where `self.uri = uri`, or a local made
    of it alone: `for word in text.split()`, then `MAC_MC.match(word)`), literals of text the
    pattern matches: a word the pattern reads is a text of one word."""
    stored = stored_attributes(definition)  # `self.uri = uri`, `self.uri: str = uri`
    derived = origins(definition)
    found: dict[str, list[str]] = {}
    for node in ast.walk(definition):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner, method = node.func.value, node.func.attr
        pattern, read = None, None
        position = 0 if method in READ_FIRST else 1 if method in READ_SECOND else -1
        if position < 0:
            continue
        if isinstance(owner, ast.Name) and owner.id in patterns:  # PATTERN.match(text)
            pattern, read = patterns[owner.id], node.args[position : position + 1]
        elif isinstance(owner, ast.Name) and owner.id == "re" and node.args:  # re.match(p, text)
            flags = [k.value for k in node.keywords if k.arg == "flags"]
            pattern = literal_pattern(node.args[0], flags or node.args[2:3] if not position else [])
            read = node.args[position + 1 : position + 2]
        if pattern is None or not read:
            continue
        subject = read[0]
        if isinstance(subject, ast.Attribute) and isinstance(subject.value, ast.Name):
            name = stored.get(subject.attr, "")  # self.uri, stored from `uri`
        else:
            name = subject.id if isinstance(subject, ast.Name) else ""
        name = derived.get(name, name)
        texts = [repr(text) for text in matching(*pattern)]
        if name and texts:
            found.setdefault(name, []).extend(texts)
    return found


def shapes(
    definition: ast.FunctionDef,
    patterns: Mapping[str, Pattern],
    owner: ast.ClassDef | None = None,
    imports: Mapping[str, str] | None = None,
) -> dict[str, list[str]]:
    """Each name's values shaped by the code: the literals it is compared with and beside them,
    text the standard decoders that read it accept (decoded_values; `owner`: the class whose
    methods read what it stores, `imports`: what the module's names stand for), then text the
    patterns that read it match."""
    found = compared_literals(definition)
    decoded = decoded_shapes(definition, owner, imports or {})
    for name, texts in [*decoded.items(), *pattern_shapes(definition, patterns).items()]:
        found[name] = list(dict.fromkeys([*found.get(name, []), *texts]))
    return found


@functools.lru_cache(maxsize=256)
def matching(text: str, flags: int, lengths: tuple[int, ...] = (0, 5)) -> tuple[str, ...]:
    """The simplest text `text` (with `flags`) matches in full, and the simplest of five
    characters or more (of each of `lengths` or more), each where it has two characters or
    more and not only spaces; none for a pattern too long, invalid, or that hypothesis cannot
    satisfy."""
    if not valid((text, flags)):
        return ()
    pattern = re.compile(text, flags)
    try:
        # The shortest text it matches, from the parse `re` compiled: a short pattern can ask
        # for a billion characters (`((a{1000}){1000}){1000}`), which no test holds and a
        # repository must not make the host build.
        shortest = re._parser.parse(text, flags).getwidth()[0]  # type: ignore[attr-defined]
    except (re.error, ValueError, TypeError, OverflowError, RecursionError, AttributeError):
        return ()
    if shortest > MAX_TEXT:
        return ()
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import HypothesisException
    from hypothesis.strategies import characters, from_regex

    quick = settings(
        database=None,
        derandomize=True,  # the same text every run: a test file that is written again is alike
        max_examples=10,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    strategy = from_regex(
        pattern, fullmatch=True, alphabet=characters(min_codepoint=32, max_codepoint=126)
    )
    found: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for wanted in lengths:

            def enough(made: str, wanted: int = wanted) -> bool:
                return len(made) >= wanted

            try:
                found.append(find(strategy, enough, settings=quick))
            except (HypothesisException, re.error, ValueError, TypeError, RecursionError):
                continue
    # Text of one character or none, or only spaces (`(?:^|_)(.)`, `\s+`, a pattern whose
    # parts are all optional at its simplest) shows no format.
    return tuple(dict.fromkeys(t for t in found if len(t) >= 2 and not t.isspace()))
