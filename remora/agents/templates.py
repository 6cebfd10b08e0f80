"""Agent templates render within bounds on size and time.

An agent folder may come with a project the user did not write, so its node_context template is
untrusted. jinja2's sandbox keeps it from Python's internals, not from memory or time: `{{ 'a' *
10**10 }}` takes 10 GB in one step, two nested `range(99999)` loops run for minutes. Here each
value a template makes (by an operator, a call, a filter, a literal, `~`, output) is sized, and
where one step could make it huge, before it is made (template_costs.py); what it renders is
capped; and it is stopped once it has run for RENDER_SECONDS. A bound broken raises
TemplateBoundError.

The clock is looked at in every loop's every item, every call (macros included), filter,
operator and output, and every item of a lazy filter's result (map, select, batch...): all a
template can do between two looks is straight-line code and one step on values the size bound
keeps small. No trace function: under one, Python 3.11 runs all code several times slower.

A template nested deeper than jinja2's parser and code generator can recurse (both recurse in
Python, per level: `{% if %}` or `(` 50,000 deep, a chain of 50,000 `+` or filters), or than
Python's compiler takes (20 nested loops, 100 levels of indentation), is a TemplateSyntaxError
naming the template line, never a RecursionError or SyntaxError out of a load.
"""

from __future__ import annotations

import inspect
import re
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from functools import wraps
from typing import Any, TypeVar

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import TemplateSyntaxError
from jinja2.parser import Parser
from jinja2.runtime import Context, Macro, markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range
from jinja2.utils import Namespace, generate_lorem_ipsum, pass_context

from remora.agents.template_costs import (
    FILTER_COSTS,
    MADE_CHARS,
    MAX_CHARS,
    MAX_INT_BITS,
    NAMESPACE_CHARS,
    TemplateBoundError,
    binop_cost,
    call_cost,
    refuse_over,
    size,
)

__all__ = ["MAX_CHARS", "RENDER_SECONDS", "BoundedEnvironment", "TemplateBoundError", "render"]

RENDER_SECONDS = 0.5
"""Longest a render may run, its loops and macro calls included."""

_FLATTEN = (
    "flatten it: fewer blocks inside blocks, parentheses inside parentheses, operators or "
    "filters in one expression"
)
"""What to do about a template nested too deeply."""
_DEBUG_INFO = re.compile(r"^debug_info = '([0-9=&]*)'$", re.MULTILINE)
"""The last line of the code jinja2 generates: `template line=code line` pairs."""

_TIMED = "remora_timed_items"
"""The filter every `{% for %}` takes its items through (jinja2 lets no new kind of node be
made, so the loop calls one it knows)."""

_V = TypeVar("_V")


class _Render:
    """One render's deadline and what its values took so far."""

    __slots__ = ("deadline", "made")

    def __init__(self) -> None:
        self.deadline = time.monotonic() + RENDER_SECONDS
        self.made = 0


_RENDER: ContextVar[_Render | None] = ContextVar("remora_template_render", default=None)


def _tick() -> None:
    render = _RENDER.get()
    if render is not None and time.monotonic() > render.deadline:
        raise TemplateBoundError(f"the template ran for more than {RENDER_SECONDS} s")


def _timed_items(iterable: Iterable[_V]) -> Iterator[_V]:
    for item in iterable:
        _tick()
        yield item


def render(template: jinja2.Template, values: Mapping[str, Any]) -> str:
    """`template` (of a BoundedEnvironment) rendered with `values`, or TemplateBoundError."""
    token = _RENDER.set(_Render())
    try:
        return template.render(values)
    except RecursionError as exc:
        raise TemplateBoundError("macro calls or values nest too deeply") from exc
    finally:
        _RENDER.reset(token)


def template_line(exc: BaseException) -> int | None:
    """The template line an error was raised on (jinja2 rewrites tracebacks to name it)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _made(value: _V, what: str) -> _V:
    """`value`, once the template made it: refused past the bounds, counted against the render's
    budget (characters for text, references for the rest)."""
    if isinstance(value, str):  # most values: spared the walk below
        chars = len(value)
        refuse_over(chars, what)
    else:
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise TemplateBoundError(f"{what} would make an integer of over {MAX_INT_BITS:,} bits")
        refuse_over(size(value), what)
        chars = len(value) if isinstance(value, bytes | list | tuple | dict) else 1
    render = _RENDER.get()
    if render is not None:
        render.made += chars
        if render.made > MADE_CHARS:
            raise TemplateBoundError(
                f"the values the template made would take more than {MADE_CHARS:,} characters"
            )
    return value


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    cost = FILTER_COSTS.get(name)
    signature = inspect.signature(function) if cost else None
    what = f"the {name} filter"

    @wraps(function)  # keeps jinja2's pass_context and the like
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        if cost is not None and signature is not None:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            refuse_over(cost(bound.arguments), what)  # may list an iterable to join first
            args, kwargs = bound.args, bound.kwargs
        result = _made(function(*args, **kwargs), what)
        # A lazy result (map, select, batch...) runs later, item by item, in whatever takes it.
        return _timed_items(result) if isinstance(result, Iterator) else result

    return bounded


class _Namespace(Namespace):
    """namespace(), held to NAMESPACE_CHARS as it changes."""

    def __setitem__(self, name: str, value: Any) -> None:
        # `_Namespace__attrs` is the one attribute Namespace lets through: its contents.
        _refuse_namespace({**object.__getattribute__(self, "_Namespace__attrs"), name: value})
        super().__setitem__(name, value)


def _refuse_namespace(contents: dict[str, Any]) -> None:
    if size(contents) > NAMESPACE_CHARS:
        raise TemplateBoundError(f"a namespace would hold more than {NAMESPACE_CHARS:,} characters")


def _namespace(*args: Any, **kwargs: Any) -> _Namespace:
    _refuse_namespace(dict(*args, **kwargs))
    return _Namespace(*args, **kwargs)


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    refuse_over(n * max * 12, "lipsum()")  # n paragraphs of up to max words
    return generate_lorem_ipsum(n, html, min, max)


def _range(*args: int) -> range:
    try:
        return safe_range(*args)
    except OverflowError as exc:
        raise TemplateBoundError(str(exc)) from None


@pass_context
def _output(context: Context, value: Any) -> Any:
    """`{{ value }}`, sized before `str()` makes its text. Taking the context keeps jinja2 from
    finalizing constant output at compile time, where no bound applies."""
    return _made(value, "the output")


class _BoundedCodeGenerator(CodeGenerator):
    """Routes through the environment what the sandbox's hooks do not see: loops, which make no
    call per item (`{% for i in x %}{% for j in x %}{% endfor %}{% endfor %}`); list,
    tuple and dict literals, which hold a value twice without copying it (`{% set a = [a, a] %}`
    forty times makes a value whose text is 2**40 times longer, and comparing or printing it
    never ends); and `~`, which joins all its operands in one step."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        # Before jinja2 lists the filters each function uses.
        for loop in list(node.find_all(nodes.For)):
            loop.iter = nodes.Filter(loop.iter, _TIMED, [], [], None, None, lineno=loop.lineno)
        super().visit_Template(node, frame)

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self.write("environment.bounded_literal(")
        super().visit_List(node, frame)
        self.write(")")

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        if node.ctx != "load":  # a target: {% for a, b in pairs %}
            return super().visit_Tuple(node, frame)
        self.write("environment.bounded_literal(")
        super().visit_Tuple(node, frame)
        self.write(")")

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self.write("environment.bounded_literal(")
        super().visit_Dict(node, frame)
        self.write(")")

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat(context, (")
        for operand in node.nodes:
            self.visit(operand, frame)
            self.write(", ")
        self.write("))")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox, with each way a template makes a value bounded. Templates
    render with `render()`, which times them."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset(ImmutableSandboxedEnvironment.default_binop_table)

    def __init__(self, **options: Any) -> None:
        # Not optimized: jinja2's optimizer evaluates constant expressions at compile time,
        # where no bound applies.
        super().__init__(**options, optimized=False, finalize=_output)
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters[_TIMED] = _timed_items
        self.globals.update(range=_range, namespace=_namespace, lipsum=_lipsum)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        parser = Parser(self, source, name, filename)
        try:
            return parser.parse()
        except RecursionError:
            line = parser.stream.current.lineno
        message = f"the template nests too deeply to parse; {_FLATTEN}"
        raise TemplateSyntaxError(message, line, name, filename)

    def _generate(
        self,
        source: nodes.Template,
        name: str | None,
        filename: str | None,
        defer_init: bool = False,
    ) -> str:
        try:
            return super()._generate(source, name, filename, defer_init)
        except RecursionError:
            pass
        message = f"the template nests too deeply to compile; {_FLATTEN}"
        raise TemplateSyntaxError(message, _deepest_line(source), name, filename)

    def _compile(self, source: str, filename: str) -> types.CodeType:
        try:
            return super()._compile(source, filename)
        except (SyntaxError, RecursionError, MemoryError) as exc:
            # Python's own limits on the code generated (20 nested loops, 100 indents).
            why = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
            at = exc.lineno if isinstance(exc, SyntaxError) else None
            line = _template_line(source, at)
        message = f"the template nests too deeply for Python to compile ({why}); {_FLATTEN}"
        raise TemplateSyntaxError(message, line, filename=filename)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _tick()
        binop_cost(operator, left, right)
        return _made(super().call_binop(context, operator, left, right), f"'{operator}'")

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _tick()
        what = f"{obj.name}()" if isinstance(obj, Macro) else "a call"
        if isinstance(obj, types.BuiltinMethodType | types.MethodType | types.FunctionType):
            what = f"{obj.__name__}()"
        # What is passed can be kept (a macro's varargs, cycler's items): sized as a literal.
        refuse_over(size((args, kwargs)), f"the arguments of {what}")
        args = call_cost(obj, args, kwargs, what)
        return _made(super().call(context, obj, *args, **kwargs), what)

    def concat(self, parts: Iterable[str]) -> str:
        """Every buffer jinja2 joins: the render's output, a macro's, a block's, `{% set %}`'s.
        The parts are only listed (references) before their total is known."""
        pieces = list(parts)
        refuse_over(sum(map(len, pieces)), "the rendered text")
        return _made("".join(pieces), "the rendered text")

    def bounded_literal(self, value: _V) -> _V:
        return _made(value, "a literal")

    def bounded_concat(self, context: Context, operands: tuple[Any, ...]) -> str:
        chars = sum(len(o) if isinstance(o, str) else size(o) for o in operands)
        refuse_over(chars, "'~'")
        join = markup_join if context.eval_ctx.autoescape else str_join
        return _made(join(operands), "'~'")


def _deepest_line(template: nodes.Template) -> int:
    """The template line of the node nested deepest (found without recursion)."""
    deepest, line = -1, 1
    stack: list[tuple[nodes.Node, int]] = [(template, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest, line = depth, getattr(node, "lineno", None) or line
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())
    return line


def _template_line(code: str, code_line: int | None) -> int:
    """The template line of a line of the code jinja2 generated (its debug info maps them);
    without one, of the most indented line."""
    lines = code.splitlines()
    if code_line is None:
        indents = [len(text) - len(text.lstrip(" ")) for text in lines]
        code_line = indents.index(max(indents, default=0)) + 1 if indents else 1
    found = _DEBUG_INFO.search(code)
    pairs = [pair.split("=") for pair in found.group(1).split("&")] if found else []
    lines_before = [int(t) for t, c in pairs if t.isdigit() and c.isdigit() and int(c) <= code_line]
    return lines_before[-1] if lines_before else 1
