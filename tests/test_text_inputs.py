"""Text inputs for a function that rewrites words: the words people wrote, also in capitals (text
code keeps a word's case), and the words of the tables its module imports from its own package
(a pluralizer's irregular words live in a rules module beside it). Written on a package made for
these tests, not on a library of the benchmark's pool."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from remora.tool_library.call_candidates import candidate_calls
from remora.tool_library.code_literals import case_variants
from remora.tool_library.method_roles import private_definitions, steps
from remora.tool_library.module_paths import own_imports
from remora.tool_library.parameter_types import documented, named_type
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


CASED = '''from .rules import IRREGULAR

IRREGULARS = dict(IRREGULAR)


def _restore_case(word, token):
    if word == word.lower():
        return token
    if word == word.upper():
        return token.upper()
    if word[0] == word[0].upper():
        return token.capitalize()
    return token + "!"


def plural(word: str) -> str:
    """The plural of a word.

    >>> plural("book")
    'books'
    """
    token = word.lower()
    if token in IRREGULARS:
        return _restore_case(word, IRREGULARS[token])
    return word + "s"
'''


def test_a_word_that_went_further_is_tried_in_each_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an irregular word reaches the code that keeps its case, and no call people wrote
    gives one: the table's word that went further than the base call is tried capitalised, in
    capitals and in mixed case, each a branch of its own."""
    project = make_project(tmp_path, {"rules": RULES, "plurals": CASED})
    results = analyze(project, "pkg/plurals.py", capsys, monkeypatch)
    text = written(results["plural"], "tests/test_plurals_plural.py", project)
    assert "('child', 'children')" in text or "('goose', 'geese')" in text, text
    for cased in (
        ("'Children'", "'CHILDREN'", "'children!'")
        if "child'" in text
        else ("'Geese'", "'GEESE'", "'geese!'")
    ):
        assert cased in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_only_a_lower_case_word_is_cased() -> None:
    assert case_variants("'apple', 2") == ["'APPLE', 2", "'Apple', 2", "'aPPLE', 2"]
    assert case_variants("word='goose'") == ["word='GOOSE'", "word='Goose'", "word='gOOSE'"]
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


UNITS = """from collections import namedtuple

Unit = namedtuple("Unit", ["short", "singular", "plural"])

SEPARATORS = ("and", "plus")
GRAM = Unit("g", "gram", "grams")
KILOGRAM = Unit("kg", "kilogram", "kilograms")
"""

MEASURES = '''from pkg.units import *


class Measure:
    UNITS = (GRAM, KILOGRAM)

    def __init__(self, written):
        self.unit = self.find(written)

    def __str__(self):
        return "<Measure {0}>".format(self.unit.singular)

    def find(self, written):
        """The unit written so.

        :param written: its short name, singular or plural
        :type written: string
        :returns: the unit
        """
        for unit in self.UNITS:
            if written in unit:
                return unit
        raise ValueError("Unknown unit: {0}".format(written))
'''


def test_a_class_that_looks_its_text_up_in_star_imported_tables_is_built_with_a_word_of_theirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The constructor passes its text to a method documented as taking a string, which finds it
    in tables a star import brings: every made-up word raises, a word of those tables builds
    it, and what it returns (a named tuple of the other module) is pinned and imported from
    the module under test."""
    project = make_project(tmp_path, {"units": UNITS, "measures": MEASURES})
    results = analyze(project, "pkg/measures.py", capsys, monkeypatch)
    found = written(results["Measure.find"], "tests/test_measures_Measure_find.py", project)
    assert "Measure('gram')" in found, found
    assert "Unit(short='kg', singular='kilogram', plural='kilograms')" in found, found
    assert "from pkg.measures import Measure, Unit" in found, found
    shown = written(results["Measure.__str__"], "tests/test_measures_Measure___str__.py", project)
    assert "'<Measure gram>'" in shown, shown
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_parameter_is_what_its_docstring_says_it_is() -> None:
    definition = ast.parse(
        'def f(a, b, c, d, e):\n    """Do.\n\n'
        + "".join(f"    :param {name}: x\n" for name in "abcde")
        + "    :type a: string\n    :type b: list of int\n    :type c: str or None\n"
        + '    :type d: Widget\n    :type e: integer, optional\n    """\n'
    ).body[0]
    assert isinstance(definition, ast.FunctionDef)
    assert documented(definition) == {"a": "str", "b": "list", "e": "int"}
    google = ast.parse('def g(name):\n    """Do.\n\n    Args:\n        name (str): it\n    """\n')
    numpy = ast.parse('def h(n):\n    """Do.\n\n    Parameters\n    ----------\n    n : int\n"""\n')
    assert documented(google.body[0]) == {"name": "str"}  # type: ignore[arg-type]
    assert documented(numpy.body[0]) == {"n": "int"}  # type: ignore[arg-type]


WORD_NUMBERS = """NUMBERS = {"one": 1, "two": 2, "three": 3, "twenty": 20, "thousand": 1000}


def sentence_value(sentence):
    if not isinstance(sentence, str):
        raise TypeError("Give a sentence of number words (e.g. 'two thousand twenty three')")
    words = [word for word in sentence.split() if word in NUMBERS]
    if not words:
        raise ValueError("No number words in '%s'" % sentence)
    total, current = 0, 0
    for word in words:
        value = NUMBERS[word]
        if value == 1000:
            total, current = total + max(current, 1) * value, 0
        elif value == 100:
            current = max(current, 1) * value
        else:
            current += value
    return total + current
"""


def test_the_example_a_raised_message_quotes_is_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message a function raises for bad input shows a good one: the only input made of
    several table words, which alone reaches the thousands' branch."""
    project = make_project(tmp_path, {"words": WORD_NUMBERS})
    results = analyze(project, "pkg/words.py", capsys, monkeypatch)
    text = written(results["sentence_value"], "tests/test_words_sentence_value.py", project)
    assert "('two thousand twenty three', 2023)" in text, text
    assert "'%s'" not in text.split("def test")[1], text  # a placeholder is no example
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


TABLE = """UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3}


def combine(words):
    values = []
    for word in words:
        values.append(UNITS[word])
    if len(values) == 3:
        return values[0] * values[1] + values[2]
    if len(values) == 2:
        return values[0] + values[1]
    return values[0]
"""


def test_a_parameter_whose_items_are_looked_up_in_a_table_is_given_lists_of_its_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`[1, 2, 3]` only raises KeyError; lists of the table's keys reach every branch, its zero
    last (it would multiply away what the code computes)."""
    project = make_project(tmp_path, {"numbers": TABLE})
    results = analyze(project, "pkg/numbers.py", capsys, monkeypatch)
    text = written(results["combine"], "tests/test_numbers_combine.py", project)
    assert "(['one', 'two', 'three'], 5)" in text, text
    assert "(['one', 'two'], 3)" in text, text
    assert "(['one'], 1)" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


READER = """class Reader:
    def __init__(self):
        self.count = 0

    def read(self, text):
        self.text = text.upper()
        self.position = 0
        while self.position < len(self.text):
            self.step()
        return self.count

    def step(self):
        if self.text[self.position : self.position + 2] == "QU":
            self.count += 10
            self.position += 2
        elif self.text[self.position] in "AEIOU":
            self.count += 1
            self.position += 1
        else:
            self.position += 1


def score(given):
    return Reader().read(given)
"""


def test_a_parameter_of_no_known_type_is_given_the_module_words_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`score(given)`: nothing says what `given` is; `'QU'`, a word of the module, takes the
    branch of `step` no made-up word does."""
    project = make_project(tmp_path, {"reader": READER})
    results = analyze(project, "pkg/reader.py", capsys, monkeypatch)
    text = written(results["score"], "tests/test_reader_score.py", project)
    assert "('QU', 10)" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_step_only_another_method_can_run_counts_as_code_its_callers_reach() -> None:
    """`step` reads the `self.text` only `read` sets: no test can call it alone, so its branches
    count for the calls that reach it, as a private function's do; `read` takes an argument,
    and a method reading only what the constructor sets is no step."""
    tree = ast.parse(
        READER + "\n\nclass Plain:\n    def __init__(self):\n        self.n = 1\n\n"
        "    def twice(self):\n        return self.n * 2\n"
    )
    reader, plain = (node for node in tree.body if isinstance(node, ast.ClassDef))
    assert [method.name for method in steps(reader)] == ["step"]
    assert steps(plain) == []
    score = tree.body[1]
    assert isinstance(score, ast.FunctionDef)
    assert "step" in [node.name for node in private_definitions(tree, score)]


def test_a_parameter_annotated_with_a_builtin_is_not_given_the_class_its_name_matches() -> None:
    """`check(self, mnemonic: str)` of a class `Mnemonic` is text: given instances, its tests
    pinned the TypeError they raised. Unannotated, a parameter named after a class is one."""
    source = (
        "class Mnemonic:\n"
        "    def __init__(self, language='english'):\n        self.language = language\n\n"
        "    def check(self, mnemonic: str) -> bool:\n"
        "        return mnemonic.startswith(self.language)\n\n"
        "    def same(self, mnemonic):\n        return mnemonic.language == self.language\n"
    )
    checked = [candidate.arguments for candidate in candidate_calls(source, "Mnemonic.check")]
    assert checked and not any("Mnemonic(" in arguments for arguments in checked), checked
    same = [candidate.arguments for candidate in candidate_calls(source, "Mnemonic.same")]
    assert any(arguments.startswith("Mnemonic(") for arguments in same), same


def test_a_parameter_is_given_what_the_last_word_of_its_name_says() -> None:
    """retrying's `Attempt(value, attempt_number, has_exception)` was built with
    `attempt_number='abc'` and its repr pinned as `'Attempts: abc, ...'`; `fixed_sleep(self,
    previous_attempt_number, delay_since_first_attempt_ms)` with a delay of `'abc'`. A name's
    last word says what it holds where nothing else does; a one-letter word says nothing."""
    assert named_type("attempt_number") == "int"
    assert named_type("delay_since_first_attempt_ms") == "int"
    assert named_type("retry_timeout") == "float"
    assert named_type("file_name") == "str"
    assert named_type("is_count") == "bool"  # a flag's prefix first
    assert named_type("total_s") == "" and named_type("numbers") == ""
    source = (
        "class Attempt:\n"
        "    def __init__(self, value, attempt_number):\n"
        "        self.value = value\n        self.attempt_number = attempt_number\n\n"
        "    def __repr__(self):\n"
        "        return 'Attempts: {0}, Value: {1}'.format(self.attempt_number, self.value)\n\n"
        "def fixed_sleep(previous_attempt_number, delay_since_first_attempt_ms):\n"
        "    return 1000\n"
    )
    calls = [candidate.arguments for candidate in candidate_calls(source, "fixed_sleep")]
    assert calls and all("'" not in arguments for arguments in calls), calls
    built = {candidate.instance for candidate in candidate_calls(source, "Attempt.__repr__")}
    assert built and all(", '" not in str(instance) for instance in built), built


HOOKS = """class Retrying:
    def __init__(self, stop_func=None):
        self._stop_func = stop_func

    def fixed_sleep(self, previous_attempt_number, delay_ms):
        return 1000

    def should_stop(self, attempt_number, delay_ms):
        if self._stop_func is not None:
            return self._stop_func(attempt_number, delay_ms)
        return attempt_number > 3


def never(attempt_number, delay_ms):
    return False
"""


def test_a_call_that_sees_the_same_on_the_bare_instance_is_kept_on_that_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """retrying's `fixed_sleep(3, 10) == 1000` was kept on a `Retrying` given a function for
    every hook, which the method never reads: noise a reviewer deletes. Where the bare
    instance saw the same, the test builds that one; where the hook changes what the method
    returns, the instance that has it stays."""
    project = make_project(tmp_path, {"retry": HOOKS})
    results = analyze(project, "pkg/retry.py", capsys, monkeypatch)
    sleep = written(
        results["Retrying.fixed_sleep"], "tests/test_retry_Retrying_fixed_sleep.py", project
    )
    assert "retrying = Retrying()\n" in sleep and "stop_func" not in sleep, sleep
    stop = written(
        results["Retrying.should_stop"], "tests/test_retry_Retrying_should_stop.py", project
    )
    assert "Retrying(stop_func=never)" in stop and "Retrying()" in stop, stop
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


ITERATORS = """import itertools


def cons(item, items: list):
    return itertools.chain([item], items)


def pairs(items: list):
    return zip(items, items[1:])
"""


def test_an_iterator_of_the_builtins_or_itertools_is_listed_and_pinned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function that returns `itertools.chain(...)` or `zip(...)` returned nothing a test can
    hold (its repr is an address); what it yields is its behaviour, as a generator's is."""
    project = make_project(tmp_path, {"iterators": ITERATORS})
    results = analyze(project, "pkg/iterators.py", capsys, monkeypatch)
    text = written(results["cons"], "tests/test_iterators_cons.py", project)
    assert "list(cons(" in text and "[3, 1, 2, 3]" in text, text
    text = written(results["pairs"], "tests/test_iterators_pairs.py", project)
    assert "list(pairs(" in text and "[(1, 2), (2, 3)]" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)
