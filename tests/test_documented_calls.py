"""Calls people wrote in the project's documentation (remora/tool_library/documented_calls.py):
the README's and docs/' code examples read as call sites, so a parser is tested on the input
its author documents, not only on `'abc'`. The end-to-end case runs the bundled test agent on a
small project: the real OS sandbox, call probe and pytest; only the language model is scripted
(it calls the agent's tool and proposes nothing)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from remora.tool_library.call_candidates import candidate_calls
from remora.tool_library.call_sites import call_sites, value_calls
from remora.tool_library.documented_calls import documentation_files, example_code
from tests.test_call_exploration import analyze, make_project, passes_under_pytest, written

README = """# calc

A calculator that reads expressions of numbers, names, `+` and `-`.

```python
from pkg.calc import Parser

parser = Parser()
parser.parse('2 + x - 1').evaluate({'x': 5})  # 6
```

In a console:

```
> parser.parse('4 - 1')
Out: <pkg.calc.Expression object>
```
"""

CALC = """class Expression:
    def __init__(self, tokens):
        self.tokens = tokens

    def evaluate(self, values):
        total, sign = 0, 1
        for token in self.tokens:
            if token == "+":
                sign = 1
            elif token == "-":
                sign = -1
            elif token.isdigit():
                total += sign * int(token)
            elif token in values:
                total += sign * values[token]
            else:
                raise KeyError(f"undefined variable: {token}")
        return total


class Parser:
    def __init__(self, operators=("+", "-")):
        self.operators = operators

    def parse(self, text):
        tokens = text.split()
        for index, token in enumerate(tokens):
            if (index % 2 == 1) != (token in self.operators):
                raise ValueError(f"unexpected {token!r} at {index}")
        return Expression(tokens)
"""


def test_the_code_examples_of_markdown_and_restructured_text_are_read_in_order() -> None:
    rst = """Usage
=====

Build one::

    table = {'a': {'b': 1}}

.. code-block:: python
   :linenos:

   store.get(table, 'a/b')

>>> store.get({'a': 2}, 'a')
2

.. code-block:: bash

   pip install store(1)
"""
    code = example_code(rst)
    # The name bound to a literal above is read as that literal where a later call uses it.
    assert value_calls(code)[("method", "get")] == ("{'a': {'b': 1}}, 'a/b'", "{'a': 2}, 'a'")
    assert "pip" not in code  # a shell block is not Python
    markdown = example_code(README)
    assert "parser.parse('4 - 1')" in markdown  # the console prompt taken off
    assert "Out:" not in markdown or ast.parse(markdown)  # what is kept parses as a whole
    ast.parse(markdown)


def test_a_call_through_an_imported_module_is_a_call_of_its_function() -> None:
    code = "import otp\n\ntoken = otp.HOTP('JBSWY3DPEHPK3PXP')\nother.HOTP(3)\n"
    assert call_sites("HOTP", False, {"README.md": code}) == ["'JBSWY3DPEHPK3PXP'"]
    assert call_sites("HOTP", True, {"README.md": code}) == ["'JBSWY3DPEHPK3PXP'", "3"]


def test_documentation_is_the_readme_and_the_docs_folder(tmp_path: Path) -> None:
    for name in ("README.md", "CHANGES.md", "setup.py", "docs/usage.rst", "docs/conf.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    listed = documentation_files(
        "", lambda folder: sorted(p.name for p in (tmp_path / folder).iterdir())
    )
    assert listed == ["README.md", "docs/usage.rst"]


def test_a_container_default_is_varied_with_its_own_kind_of_elements() -> None:
    """`operators=("+", "-")` got `(1, 2)`: a tuple of quote characters given integers."""
    calls = candidate_calls(CALC, "Parser.parse")
    instances = {c.instance for c in calls}
    assert "Parser(operators=('+',))" in instances and "Parser(operators=(1, 2))" not in instances


def test_a_parser_is_tested_on_the_input_its_readme_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the README, `parse` only ever got `'abc'`-like text and `Expression.evaluate`
    found nothing it knew; with it, the documented call and its reader are pinned, on the
    instance the README builds (`Parser()`, not a boundary of its defaults)."""
    project = make_project(tmp_path, {"calc": CALC})
    (project / "README.md").write_text(README)
    results = analyze(project, "pkg/calc.py", capsys, monkeypatch)
    text = written(results["Parser.parse"], "tests/test_calc_Parser_parse.py", project)
    assert "parser = Parser()\n" in text, text
    assert "assert parser.parse('2 + x - 1').evaluate({'x': 5}) == 6\n" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


CALENDAR = """class Calendar:
    def __init__(self):
        self.year = self.month = self.day = 0

    def set_date(self, year, month, day):
        if not (1 <= month <= 12 and 1 <= day <= 31 and year > 1000):
            raise ValueError("no such date")
        self.year, self.month, self.day = year, month, day

    def iso(self):
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"
"""


def test_a_reader_is_called_after_the_setter_as_the_readme_calls_it() -> None:
    """`iso()` reads what `set_date` stored; the setter's own pool (`3, 3, 3`) is no date, the
    README's `cal.set_date(2017, 6, 24)` is."""
    readme = example_code(
        "```python\ncal = Calendar()\ncal.set_date(2017, 6, 24)\ncal.iso()\n```\n"
    )
    calls = candidate_calls(CALENDAR, "Calendar.iso", {"README.md": readme})
    setups = [c.setup for c in calls if c.setup]
    assert setups[0] == (("set_date", "2017, 6, 24"),), setups


def test_a_readme_written_to_stall_the_reader_is_read_in_one_pass() -> None:
    """The README is the repository's: fences that never close at ever other indents and `::`
    on every line made a backtracking pattern and a rescan per start take minutes; each line is
    now read once (a generous bound: well under a second each here)."""
    import time

    unclosed = "".join(" " * (i % 50) + "```\n" for i in range(60_000))
    literals = "  a::\n" * 40_000
    for text in (unclosed, literals):
        started = time.perf_counter()
        example_code(text)
        assert time.perf_counter() - started < 10


def test_a_readme_doctest_cannot_read_still_gives_its_code_blocks() -> None:
    """bitmath's README shows an IPython session (`...: text` without a blank after the
    prompt), which doctest's parser refuses with ValueError: that failed every test job of the
    module. Its code blocks are still read."""
    rst = """Usage
=====

.. code-block:: python

   size.to_MiB(3)

   >>> print(size.format("{value}"))
      ...: a line doctest cannot read
"""
    code = example_code(rst)
    assert "size.to_MiB(3)" in code
