"""The code examples of a project's documentation (its README, its docs/ folder), as Python text:
calls people wrote, read for the input generator beside the project's Python files.

A README's examples are how a library's author says it is called, and often the only place that
shows what valid input looks like (`parser.parse('2 * x')`, `pyotp.HOTP('base32secret3232')`,
`iso8601.parse_date('2007-01-25T12:00:00Z')`). Read, never run: the statements are parsed with
`ast` and only their literal arguments reach a test, through the allow-list (test_cases).

Examples are taken from doctest lines (`>>> `, read by the standard library's DocTestParser),
Markdown code fences (```` ```python ````, or without a language), and reStructuredText code
blocks (`.. code-block:: python`, `.. code:: python`, a paragraph ending in `::`). A block that
does not parse as a whole (console prompts, output lines, an elided `...`) is read line by line,
each line that parses alone kept, or with the lines that close the brackets it opens.
"""

from __future__ import annotations

import ast
import doctest
import re
import textwrap
from collections.abc import Callable
from functools import lru_cache

from remora.tool_library.doctest_examples import code_lines, with_bound

DOCUMENT_SUFFIXES = (".md", ".rst", ".txt", ".markdown")
DOCUMENT_FOLDERS = ("docs", "doc")
MAX_DOCUMENTS = 40
"""Documentation files read per project (the README first, then docs/ in name order)."""
MAX_DOCUMENT_BYTES = 256 * 1024
"""Bigger files are not read: a generated reference or a changelog, not examples."""

FENCE = re.compile(r"[ \t]*(```+|~~~+)[ \t]*([\w+-]*)")
PYTHON_FENCES = frozenset({"", "python", "py", "python3", "py3", "pycon", "pyi", "ipython"})
RST_DIRECTIVE = re.compile(r"[ \t]*\.\. (?:code-block|code|sourcecode)::[ \t]*(\w*)[ \t]*$")
PROMPT = re.compile(r"^(?:>>> |\.\.\. |>>>$|> |In \[\d+\]: |\s*\.\.\.: )")


def documented_sources(
    folder: str,
    word: str,
    list_dir: Callable[[str], list[str]],
    read: Callable[[str], str],
) -> dict[str, str]:
    """The code examples of the project's documentation files that mention `word`, path:
    Python text (which parses); the project folder's README files, then docs/ and doc/."""
    found: dict[str, str] = {}
    for path in documentation_files(folder, list_dir)[:MAX_DOCUMENTS]:
        try:
            text = read(path)
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if word in text and len(text) <= MAX_DOCUMENT_BYTES:
            code = example_code(text)
            if word in code:
                found[path] = code
    return found


def documentation_files(folder: str, list_dir: Callable[[str], list[str]]) -> list[str]:
    def listed(path: str) -> list[str]:
        try:
            return sorted(list_dir(path or "."))
        except (OSError, ValueError):
            return []

    prefix = folder + "/" if folder else ""
    entries = listed(folder)
    files = [prefix + e for e in entries if e.lower().startswith("readme") and is_document(e)]
    for name in DOCUMENT_FOLDERS:
        if name in entries:
            inner = listed(prefix + name)
            files += [f"{prefix}{name}/{entry}" for entry in inner if is_document(entry)]
    return files


def is_document(name: str) -> bool:
    return name.lower().endswith(DOCUMENT_SUFFIXES) or name.lower() == "readme"


@lru_cache(maxsize=64)
def example_code(text: str) -> str:
    """The Python statements of the text's examples, one block after another; "" for none.
    Read once per text: every job of a run reads the same README."""
    # By line, as written: a name is bound (`x = {...}`) before the calls that read it.
    try:
        blocks = [(e.lineno, e.source) for e in doctest.DocTestParser().get_examples(text)]
    except ValueError:  # an example doctest cannot read (`...:` of an IPython session)
        blocks = []
    lines = text.splitlines()
    blocks += fenced_blocks(lines) + rst_blocks(lines)
    kept: list[str] = []
    for _, block in sorted(blocks, key=lambda numbered: numbered[0]):
        for statement in statements(block):
            if statement not in kept:
                kept.append(statement)
    return with_bound_literals("\n".join(kept))


def with_bound_literals(code: str) -> str:
    """The code with each name an earlier statement bound to a literal read as that literal
    (`x = {'a': {'b': 1}}`, then `dpath.get(x, 'a/b')`): the calls' arguments become values."""
    bound: dict[str, ast.expr] = {}
    read = [with_bound(ast.Module([s], []), bound) for s in ast.parse(code).body]
    return ast.unparse(ast.Module([s for module in read for s in module.body], []))


def fenced_blocks(lines: list[str]) -> list[tuple[int, str]]:
    """Markdown's fenced blocks in Python (or none named), with the line each starts on: one
    pass over the lines (the text is the repository's: no pattern that backtracks over it)."""
    blocks = []
    opened: tuple[int, str, str] | None = None  # (line, fence, language)
    body: list[str] = []
    for index, line in enumerate(lines):
        match = FENCE.match(line)
        if opened is None and match:
            opened, body = (index, match.group(1), match.group(2)), []
        elif opened is not None and match and line.strip() == match.group(1):
            if match.group(1).startswith(opened[1]) and opened[2] in PYTHON_FENCES:
                blocks.append((opened[0], "\n".join(body)))
            opened = None
        elif opened is not None:
            body.append(line)
    return blocks


def rst_blocks(lines: list[str]) -> list[tuple[int, str]]:
    """The indented blocks after a code directive for Python (or none named) or a paragraph
    ending in `::`, with the line each starts on; each line read once."""
    blocks = []
    index = 0
    while index < len(lines):
        line, index = lines[index], index + 1
        directive = RST_DIRECTIVE.match(line)
        if not line.rstrip().endswith("::") and not (directive and directive[1] in PYTHON_FENCES):
            continue
        first = index
        while index < len(lines) and (not lines[index].strip() or lines[index].lstrip()[:1] == ":"):
            index += 1  # a blank line, or a directive's options (`:linenos:`)
        block = []
        while index < len(lines) and (not lines[index].strip() or lines[index][:1].isspace()):
            block.append(lines[index])
            index += 1
        blocks.append((first, textwrap.dedent("\n".join(block))))
    return blocks


def statements(block: str) -> list[str]:
    """The block as one statement text when it parses, else each line that parses alone or with
    the lines that close its brackets (its prompt taken off)."""
    block = textwrap.dedent(block).strip("\n")
    if parses(block):
        return [block] if block.strip() else []
    return code_lines([PROMPT.sub("", line.strip(), count=1) for line in block.splitlines()])


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True
