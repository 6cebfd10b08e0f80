"""Text inputs for a function that rewrites words: the words people wrote, also in capitals (text
code keeps a word's case), and the words of the tables its module imports from its own package
(a pluralizer's irregular words live in a rules module beside it). Written on a package made for
these tests, not on a library of the benchmark's pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from remora.tool_library.call_candidates import candidate_calls
from remora.tool_library.code_literals import case_variants
from remora.tool_library.module_paths import own_imports
from tests.test_call_exploration import analyze, make_project, passes_under_pytest, written

RULES = """IRREGULAR = [("child", "children"), ("goose", "geese")]
UNCOUNTABLE = ["sheep"]
"""

PLURALS = '''from .rules import IRREGULAR, UNCOUNTABLE

IRREGULARS = dict(IRREGULAR)


def restore_case(word, token):
    if word.isupper():
        return token.upper()
    if word[:1].isupper():
        return token.capitalize()
    return token


def plural(word: str) -> str:
    """The plural of a word.

    >>> plural("book")
    'books'
    """
    token = word.lower()
    if token in UNCOUNTABLE:
        return word
    if token in IRREGULARS:
        return restore_case(word, IRREGULARS[token])
    return restore_case(word, token + "s")
'''


def test_a_word_is_tried_in_capitals_and_with_the_words_of_the_tables_it_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, {"rules": RULES, "plurals": PLURALS})
    results = analyze(project, "pkg/plurals.py", capsys, monkeypatch)
    text = written(results["plural"], "tests/test_plurals_plural.py", project)
    assert "('book', 'books')" in text, text
    assert "('BOOK', 'BOOKS')" in text, text  # the case kept: a branch of its own
    assert "('child', 'children')" in text, text  # an irregular word of the imported table
    assert "('sheep', 'sheep')" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_the_modules_a_file_imports_from_its_own_package() -> None:
    files = {
        "src/pkg/__init__.py",
        "src/pkg/plurals.py",
        "src/pkg/rules.py",
        "src/pkg/data/__init__.py",
        "src/pkg/data/words.py",
    }
    source = (
        "import os\n"
        "from .rules import IRREGULAR\n"
        "from . import data\n"
        "from pkg.data.words import WORDS\n"
        "from .. import elsewhere\n"  # beyond the top package: Python refuses it too
        "from other.rules import THINGS\n"
        "from .plurals import plural\n"  # itself
    )
    found = own_imports("src/pkg/plurals.py", source, files.__contains__)
    assert found == ["src/pkg/rules.py", "src/pkg/data/__init__.py", "src/pkg/data/words.py"]
    assert own_imports("src/pkg/plurals.py", "from .rules import (", files.__contains__) == []


def test_only_a_lower_case_word_is_cased() -> None:
    assert case_variants("'apple', 2") == ["'APPLE', 2", "'Apple', 2"]
    assert case_variants("word='goose'") == ["word='GOOSE'", "word='Goose'"]
    assert case_variants("'Apple'") == []  # already cased: as written
    assert case_variants("'a-b', 'x'") == []  # neither a word of two letters or more
    assert case_variants("3") == []


STACK = """class List(list):
    def __init__(self, *items):
        super().__init__(items)
        self.frozen = False

    def push(self, item):
        if self.frozen:
            raise ValueError("frozen")
        self.append(item)

    def freeze(self):
        self.frozen = True
"""


def test_a_collection_is_asserted_by_what_it_holds_and_never_hides_a_builtin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list subclass whose method returns None and changes only what it holds: the test
    makes the call and compares the instance with a list (it had "changed nothing a test can
    see"); the instance is not called `list`, which would hide the builtin, and a flag is
    asserted with `is` (`== True` is what linters flag)."""
    project = make_project(tmp_path, {"stack": STACK})
    results = analyze(project, "pkg/stack.py", capsys, monkeypatch)
    text = written(results["List.push"], "tests/test_stack_List_push.py", project)
    assert "    list_.push(3)\n    assert list_ == [[3, 1, 2], 3]\n" in text, text  # *items
    assert "list = " not in text and "is None" not in text
    text = written(results["List.freeze"], "tests/test_stack_List_freeze.py", project)
    assert "    list_.freeze()\n    assert list_.frozen is True\n" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_an_isinstance_check_against_a_module_alias_leaves_the_str_methods_to_say_str() -> None:
    """`isinstance(s, string_types)` (a module's `string_types = (str,)`) names no type a value
    can be made of; the str methods the body calls on `s` do: it is given text, not 3."""
    source = (
        "string_types = (str,)\n\n\n"
        "def normalize(symbol_string, strict=False):\n"
        "    if not isinstance(symbol_string, string_types):\n"
        "        raise TypeError('not a string')\n"
        "    norm = symbol_string.replace('-', '').upper()\n"
        "    if strict and norm != symbol_string:\n"
        "        raise ValueError('requires normalization')\n"
        "    return norm\n"
    )
    calls = [c.arguments for c in candidate_calls(source, "normalize")]
    assert calls[0].startswith("'"), calls
    assert "None" in calls  # what the check turns away


def test_a_name_joined_with_another_name_is_not_taken_for_a_number() -> None:
    """`prefix + line` (a name added to another name) joins text as often as it adds numbers;
    the parameter's name then says what it holds: `prefix` is text. It had been given `3`,
    and the only call that did not raise was the one with empty text."""
    source = (
        "def indent(text, prefix):\n"
        "    return ''.join(prefix + line for line in text.splitlines(True))\n\n\n"
        "def scaled(values, factor):\n"
        "    return [value * factor for value in values]\n\n\n"
        "def shifted(count):\n"
        "    return count + 1\n"
    )
    first = candidate_calls(source, "indent")[0].arguments
    assert first.count("'") == 4, first  # both text
    assert candidate_calls(source, "scaled")[0].arguments == "[1, 2, 3], 2.5"  # by its name
    assert candidate_calls(source, "shifted")[0].arguments.isdigit()


TEMPLATES = '''def render(template, opener="{{", closer="}}"):
    """Each `{{name}}` of the template in capitals."""
    out = []
    while opener in template:
        literal, template = template.split(opener, 1)
        name, template = template.split(closer, 1)
        out.append(literal + name.strip().upper())
    return "".join(out) + template


def closes(rest, closer, is_last):
    if is_last or closer == "}}":
        return rest.startswith(closer)
    return False
'''


def test_a_template_is_given_a_word_between_its_delimiters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's `'{{'` and `'}}'` make `'Hello {{name}}!'`, the only kind of text whose tag
    code runs; a delimiter a text is split at or compared with is text (`closer` had been given
    `3`), and `is_last` a bool (it had been given `[1, 2]`)."""
    project = make_project(tmp_path, {"templates": TEMPLATES})
    results = analyze(project, "pkg/templates.py", capsys, monkeypatch)
    text = written(results["render"], "tests/test_templates_render.py", project)
    assert "'Hello {{name}}!'" in text and "'Hello NAME!'" in text, text
    calls = [c.arguments for c in candidate_calls(TEMPLATES, "closes")]
    assert calls[0].count("'") == 4 and calls[0].endswith(", True"), calls
    assert not any("[1, 2]" in call or call.startswith("'abc', 3") for call in calls), calls
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


WRAPPING = """def wrap(text, width=70):
    return _lines(text.split(), width)


def _lines(words, width):
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        elif line:
            line += " " + word
        else:
            line = word
    if line:
        lines.append(line)
    return lines
"""


def test_a_call_that_reached_further_is_varied_where_private_code_it_reaches_has_branches_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`wrap` has no branch of its own, so the model is not asked, and no text of its values
    wraps at the default width; `wrap('text', width=3)` reached code the base call did not,
    and the texts tried with that width too wrap a line of several words in `_lines`."""
    project = make_project(tmp_path, {"wrapping": WRAPPING})
    results = analyze(project, "pkg/wrapping.py", capsys, monkeypatch)
    text = written(results["wrap"], "tests/test_wrapping_wrap.py", project)
    assert "('Hello world', 3, ['Hello', 'world'])" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_container_is_given_only_items_of_the_types_its_annotation_names() -> None:
    """`list[str] | list[bytes]`: `[1, 2, 3]` contradicts the annotation, and a function that
    passes it through unchanged had its test pin that call; `['a', 'b']` and `[]` stay, and an
    annotation that says nothing of the items (`dict[str, int]`, bare `list`) filters nothing."""
    source = (
        "def keys(secret: str | bytes | list[str] | list[bytes]) -> list:\n"
        "    if isinstance(secret, (str, bytes)):\n"
        "        return [secret]\n"
        "    return list(secret)\n\n\n"
        "def counts(items: list) -> int:\n"
        "    return len(items)\n"
    )
    calls = [c.arguments for c in candidate_calls(source, "keys")]
    assert "['a', 'b']" in calls and "[]" in calls, calls
    assert "[1, 2, 3]" not in calls, calls
    assert "[1, 2, 3]" in [c.arguments for c in candidate_calls(source, "counts")]
