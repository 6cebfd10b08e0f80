"""Text inputs in the module's own format: a parameter that a regular expression of the module
reads is given strings the pattern matches in full, made by hypothesis's from_regex (not a
hand-written regex walker), so a parser is tested on valid input, not only on `'abc'`. Written
on modules made for these tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from remora.tool_library.candidate import module_facts
from remora.tool_library.code_literals import words
from remora.tool_library.pattern_values import (
    matching,
    module_patterns,
    pattern_shapes,
    table_texts,
)
from tests.test_call_exploration import analyze, make_project, passes_under_pytest, written

VERSIONS = r"""import re

VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple:
    found = VERSION.fullmatch(text)
    if found is None:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(part) for part in found.groups())


class Template:
    def __init__(self, uri: str):
        self.uri: str = uri
        self.names = [m.group(1) for m in re.finditer(r"{(\w+)}", self.uri)]

    def variables(self) -> list:
        return list(self.names)
"""


def test_a_parameter_a_module_pattern_reads_is_given_text_it_matches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, {"versions": VERSIONS})
    results = analyze(project, "pkg/versions.py", capsys, monkeypatch)

    # A version parsed, not only turned away.
    text = written(results["parse_version"], "tests/test_versions_parse_version.py", project)
    assert "    assert parse_version('0.0.0') == (0, 0, 0)\n" in text
    assert "parse_version('abc')" in text  # and what it turns away
    # A constructor stores the text a pattern then reads (`self.uri`): instances are built
    # from text it matches, and their methods see its variables.
    text = written(
        results["Template.variables"], "tests/test_versions_Template_variables.py", project
    )
    assert "    template = Template('{0}')\n    assert template.variables() == ['0']\n" in text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_patterns_are_read_from_the_syntax_tree_with_their_flags() -> None:
    source = (
        "import re\n"
        "WORD = re.compile('[a-z]{2,}', re.IGNORECASE | re.ASCII)\n"
        "SPACE = re.compile(r'\\s+')\n"
        "DIGITS = r'[0-9]{4}'\n"
        "YEAR = re.compile(DIGITS)\n"
        "OTHER = compile('x')\n"
        "def split(line, limit):\n"
        "    return SPACE.split(line)\n"
        "def pairs(text, spec):\n"
        "    return re.sub(r'(\\w)=(\\w)', '', spec, flags=re.I) + WORD.match(text).group()\n"
    )
    tree = ast.parse(source)
    patterns = module_patterns(tree)
    assert patterns == {
        "WORD": ("[a-z]{2,}", int(re.IGNORECASE | re.ASCII)),
        "SPACE": ("\\s+", 0),
        "YEAR": ("[0-9]{4}", 0),  # through the name its text was bound to
    }
    split, pairs = (node for node in tree.body if isinstance(node, ast.FunctionDef))
    # `\s+` matches nearly anything: no format to give.
    assert pattern_shapes(split, patterns) == {}
    shaped = pattern_shapes(pairs, patterns)
    assert set(shaped) == {"text", "spec"}
    for name, pattern, flags in (("text", "[a-z]{2,}", re.I), ("spec", r"(\w)=(\w)", 0)):
        assert shaped[name]
        for literal in shaped[name]:
            made = ast.literal_eval(literal)
            assert re.fullmatch(pattern, made, flags) and made.isascii() and made.isprintable()


def test_patterns_under_blocks_and_aliases_reach_the_words_a_text_is_split_into() -> None:
    """A pattern compiled for each Python under `try`/`except ImportError` (through the name
    `re` was imported as; one only the `regex` module compiles is left out, the fallback
    kept) reads a word the text was split into: the text is given words it matches."""
    source = (
        "try:\n"
        "    import regex\n"
        "    NAME = regex.compile(r'^[\\p{Lu}]c\\w+$')\n"
        "except ImportError:\n"
        "    import re as regex\n"
        "    NAME = regex.compile(r'^Mc[A-Z][a-z]+$')\n"
        "if True:\n"
        "    INITIALS = regex.compile(r'^(?:[A-Z]\\.)+$')\n"
        "def tidy(text, mark):\n"
        "    out = []\n"
        "    for line in text.splitlines():\n"
        "        words = regex.split(' ', line)\n"
        "        for word in words:\n"
        "            joined = word + mark\n"
        "            if NAME.match(word) or INITIALS.match(joined):\n"
        "                out.append(word)\n"
        "    return out\n"
    )
    tree = ast.parse(source)
    patterns = module_patterns(tree)
    assert patterns == {"NAME": ("^Mc[A-Z][a-z]+$", 0), "INITIALS": ("^(?:[A-Z]\\.)+$", 0)}
    (tidy,) = (node for node in tree.body if isinstance(node, ast.FunctionDef))
    shaped = pattern_shapes(tidy, patterns)
    # `word` is made of `text` alone; `joined` of `text` and `mark`: no one origin.
    assert "text" in shaped and "mark" not in shaped
    assert shaped["text"] and all(
        re.fullmatch("^Mc[A-Z][a-z]+$", ast.literal_eval(made)) for made in shaped["text"]
    )


def test_text_is_made_only_for_patterns_it_can_be_made_for() -> None:
    assert matching(r"#[0-9a-f]{6}", 0) == ("#000000",)  # the simplest, and it is 7 long
    assert matching("(", 0) == ()  # not a pattern
    assert matching("a" * 201, 0) == ()  # too long to be one format
    # Short, but its shortest match is a billion characters: nothing is built.
    assert matching("((a{1000}){1000}){1000}", 0) == ()
    assert matching("a{64}", 0) == ("a" * 64,) and matching("a{65}", 0) == ()
    assert matching(r"(a|b)\1", 0) == ("aa",)  # a backreference, satisfied; none of 5
    assert matching(r"\d+", 0) == ("00000",)  # its simplest, one character, shows no format
    assert matching(r"\s+", 0) == ()  # nor do spaces
    # All of it optional: only the longer one (ISO 8601's time zone designator).
    assert matching(r"(Z|(?P<sign>[+-])(?P<hour>[0-9]{2})(:?(?P<min>[0-9]{2}))?)?", 0) == ("-0000",)
    assert matching(r"{([^}]+)}", 0) == matching(r"{([^}]+)}", 0) == ("{0}", "{000}")


RULES = """import re

IRREGULAR = [("person", "people"), ("child", "children"), ("ox", "oxen")]
UNCOUNTABLE = ["sheep", "fish", "rice"]
RULES = [
    (re.compile(r"(?i)(x|ch|ss|sh)$"), r"\\1es"),
    (re.compile(r"(?i)([^aeiouy])y$"), r"\\1ies"),
    (re.compile("s?$"), "s"),
]
NAMED = re.compile(r"\\d+")
"""


def test_the_patterns_of_a_table_give_words_that_take_turns_with_the_tables_words() -> None:
    """A pluralizer's tables: its irregular words, its uncountable ones and its rules, compiled
    patterns in a list. The words take turns table by table (the first hundred were all
    irregular words); each rule gives the simplest text it matches, in lower case where it
    ignores case, and they take turns with the words. NAMED is read through its name."""
    tree = ast.parse(RULES)
    assert words(tree)[:4] == ["'person'", "'sheep'", "'people'", "'fish'"]
    texts = table_texts([tree])
    # `s?$` matches nothing of two characters: no text (a word of one says nothing).
    assert texts == ["'ch'", "'0y'"]
    facts = module_facts(RULES)
    assert facts.values[1][:4] == ["'person'", texts[0], "'sheep'", texts[1]]
    # A rule module its own package imports counts as its own (`from .rules import RULES`).
    imported = module_facts("from .rules import RULES\n", (RULES,))
    assert texts[0] in imported.values[1][:2]
