"""The host's input generator (remora/tool_library/characterize.py: explore_calls) through the
bundled test and sample_data agents, on small projects: the real OS sandbox, the real call
probe under the real coverage.py, the real pytest. Only the language model is scripted: it calls
the agent's tool and, where a test says so, proposes calls by completion (most tests need no
proposal: the calls come from the signature and the body). Then the pure parts (candidates,
selection, rendering) on hand-written inputs."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call
from remora.tool_library.call_candidates import candidate_calls
from remora.tool_library.call_forms import is_operator, method_call, negated
from remora.tool_library.call_selection import assertable, select_calls
from remora.tool_library.call_sites import call_sites
from remora.tool_library.candidate import Candidate, find_definition
from remora.tool_library.case_checks import pattern_literal, standard_imports, used_names
from remora.tool_library.case_render import render_tests
from remora.tool_library.characterize import allowed, branches_left
from remora.tool_library.class_shapes import (
    abstract,
    attributes_defined,
    held_in,
    inherited_init,
    overrides,
)
from remora.tool_library.doctest_examples import example_trees
from remora.tool_library.method_roles import mutators, private_definitions
from remora.tool_library.test_cases import parse_test_case

PYTEST_QUIET = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
TEMPERATURES = [0.0, 0.7, 1.0]
"""explore_calls' drafts, in order: the n-th proposal of a test goes to the n-th."""
TOOLS = {"test": "write_tests", "sample_data": "write_samples"}


def make_project(root: Path, modules: Mapping[str, str]) -> Path:
    """A project folder with a pyproject.toml and the package `pkg` holding `modules`."""
    project = root / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (project / "pkg" / "__init__.py").write_text("")
    for name, text in modules.items():
        (project / "pkg" / f"{name}.py").write_text(text)
    return project


def calls_the_tool(tool: str) -> Callable[[dict[str, Any]], Any]:
    """The chat model: the agent's one writing tool (after the runner's observation), then
    submit_result."""

    def rule(body: dict[str, Any]) -> Any:
        called = any(m["role"] == "tool" and m["name"] == tool for m in body["messages"])
        offered = {t["function"]["name"] for t in body["tools"]}
        if not called and tool in offered:
            return tool_call(tool, {})
        return tool_call("submit_result", {"summary": "done"})

    return rule


def proposing(calls: Mapping[str, list[str]]) -> Callable[[dict[str, Any]], str]:
    """The completion model: for a prompt ending `result = NAME(` (or `.NAME(`), the arguments
    of `calls[NAME]` for this draft; nothing (no proposal) otherwise."""

    def complete(body: dict[str, Any]) -> str:
        last = body["prompt"].rsplit("\n", 1)[1]
        name = last.rsplit("=", 1)[-1].strip().rstrip("(").rpartition(".")[2]
        index = TEMPERATURES.index(body.get("temperature", 0.0))
        proposed = calls.get(name, [])
        return proposed[index] if index < len(proposed) else ""

    return complete


def analyze(
    project: Path,
    target: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *,
    agent: str = "test",
    proposals: Mapping[str, list[str]] | None = None,
    asked: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """`remora analyze TARGET --fix` with the agent: each job's result by qualified name;
    `asked` gets the last line of each completion prompt (what the model was asked to go on)."""
    monkeypatch.chdir(project)
    propose = proposing(proposals or {})

    def completion(body: dict[str, Any]) -> str:
        if asked is not None:
            asked.append(body["prompt"].rsplit("\n", 1)[1])
        return propose(body)

    model = ScriptedModelServer(rule=calls_the_tool(TOOLS[agent]), completion=completion)
    with model as server:
        args = ["analyze", target, "--agents", agent, "--format", "json", "--no-cache"]
        main([*args, "--base-url", server.base_url, "--fix"])
    captured = capsys.readouterr()
    assert captured.out.strip(), captured.err
    report = json.loads(captured.out)
    return {result["node"]["qualified_name"]: result for result in report["results"]}


def probed_module(project: Path, name: str) -> tuple[types.ModuleType, str, list[str]]:
    """The module `pkg.NAME` of `project` imported as the probe imports it, its real path and
    its lines (call_probe.observe's first three arguments)."""
    spec = importlib.util.spec_from_file_location(f"probed_{name}", project / "pkg" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = os.path.realpath(str(module.__file__))
    return module, path, Path(path).read_text().split("\n")


def written(result: dict[str, Any], path: str, project: Path) -> str:
    """The one file the job wrote, `path`, as it landed."""
    assert result["status"] == "success", result["error"]
    assert result["outcome"] == "written"
    assert [change["file"] for change in result["changes"]] == [path]
    return (project / path).read_text()


def not_done(result: dict[str, Any]) -> str:
    """The reason a job that wrote nothing gives: no call could be pinned, so nothing is
    possible here (`not_possible`, the reason its summary)."""
    assert result["status"] == "not_possible"
    assert result["error"] is None
    assert result["changes"] == []
    message: str = result["summary"]
    return message


def passes_under_pytest(test_file: Path, cwd: Path) -> str:
    """The real pytest on a file that landed, from outside the project; its summary line."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *PYTEST_QUIET, str(test_file)],
        cwd=cwd,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_call_that_changes_module_state_is_never_pinned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call of add_rule appends to the module's RULES, which other tests see: none is
    pinned, the model is not asked, and the job ends not done naming the state; the pure
    function beside it is tested."""
    project = make_project(
        tmp_path,
        {
            "rules": "RULES = []\n\n\n"
            "def add_rule(rule: str) -> int:\n"
            "    RULES.append(rule)\n"
            "    return len(RULES)\n\n\n"
            "def normalize(rule: str) -> str:\n"
            "    return rule.strip().lower()\n"
        },
    )
    proposals = {"add_rule": ["'other')", "'x')"]}
    results = analyze(project, "pkg/rules.py", capsys, monkeypatch, proposals=proposals)

    message = not_done(results["add_rule"])
    assert "every call that could be pinned changes state other tests see (RULES)" in message
    # A call went through and changed the state: other arguments change it too, so the model,
    # which has calls to propose, is not asked for any.
    assert results["add_rule"]["usage"]["requests"] == 0
    assert not (project / "tests" / "test_rules_add_rule.py").exists()
    text = written(results["normalize"], "tests/test_rules_normalize.py", project)
    # Calls that only return a value are rows of one parametrized test.
    assert "def test_normalize(rule, expected):\n    assert normalize(rule) == expected\n" in text
    assert "        ('Hello world', 'hello world'),\n" in text
    assert "add_rule" not in text
    count = results["normalize"]["summary"].split()[0]  # a table's rows count, as in pytest
    assert passes_under_pytest(project / "tests", tmp_path).startswith(f"{count} passed")


def test_a_method_is_tested_on_instances_of_its_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counter.increment: each test builds a Counter (from the constructor's own parameters),
    calls the method, asserts what it returned and the instance's state afterwards; the file
    (named for the class and the method) passes under the real pytest."""
    project = make_project(
        tmp_path,
        {
            "counting": "class Counter:\n"
            "    def __init__(self, start: int = 0):\n"
            "        self.value = start\n\n"
            "    def increment(self, by: int) -> int:\n"
            "        if by < 0:\n"
            '            raise ValueError("by must not be negative")\n'
            "        self.value += by\n"
            "        return self.value\n"
        },
    )
    results = analyze(project, "pkg/counting.py", capsys, monkeypatch)

    # The constructor is not a test subject of its own (a special method).
    # Special methods are reached through the public methods' tests: skipped, not left undone.
    init = results["Counter.__init__"]
    assert init["status"] == "success" and init["outcome"] == "skipped"
    assert "private or special method" in init["summary"] and not init["changes"]
    path = "tests/test_counting_Counter_increment.py"
    text = written(results["Counter.increment"], path, project)
    assert "from pkg.counting import Counter  # noqa: E402" in text
    tests = text.split("\n\n\ndef ")[1:]
    assert tests
    for test in tests:
        assert re.search(r"^    counter = Counter\(((start=)?-?\d+)?\)$", test, re.MULTILINE), test
    assert "    counter = Counter(start=10)\n    assert counter.increment(1) == 11\n" in text
    assert "    assert counter.value == 11\n" in text
    assert (
        "    with pytest.raises(ValueError, match='by must not be negative'):\n"
        "        counter.increment(-1)\n"
    ) in text
    assert passes_under_pytest(project / path, tmp_path).startswith(f"{len(tests)} passed")


def test_a_text_function_is_tested_on_the_words_of_its_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """plural() looks words up in the module's table, then falls back to rules: branch coverage
    cannot tell `child` from `abc`, but the tests cover each way the word is rewritten (the
    table's irregular words and the suffix rules), one row each, not every word of the table."""
    project = make_project(
        tmp_path,
        {
            "words": "IRREGULAR = {'child': 'children', 'person': 'people', 'mouse': 'mice'}\n"
            "SAME = ('sheep', 'fish')\n\n\n"
            "def plural(word: str) -> str:\n"
            "    if word in SAME:\n"
            "        return word\n"
            "    for singular, plural_form in IRREGULAR.items():\n"
            "        if word.endswith(singular):\n"
            "            return word[: -len(singular)] + plural_form\n"
            "    return word + ('es' if word.endswith(('s', 'x')) else 's')\n"
        },
    )
    results = analyze(project, "pkg/words.py", capsys, monkeypatch)

    text = written(results["plural"], "tests/test_words_plural.py", project)
    for row in ("('child', 'children')", "('person', 'people')", "('mouse', 'mice')"):
        assert f"        {row},\n" in text
    # sheep and fish take the same path (the uncovered branch): one of them is enough.
    assert ("('sheep', 'sheep')" in text) != ("('fish', 'fish')" in text)
    assert re.search(r"\('\w+', '\w+s'\)", text)  # the plain rule
    count = results["plural"]["summary"].split()[0]
    assert passes_under_pytest(project / "tests", tmp_path).startswith(f"{count} passed")


def test_a_class_is_tested_on_the_instances_and_indexing_of_its_docstring_examples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class's `>>>` examples build the instance (`Row([3, 1, 2])`, not an empty one) and
    show `__getitem__` the way code calls it; its tests index with positions and slices and
    are written as `row[1]` and `row[1:3]`."""
    project = make_project(
        tmp_path,
        {
            "rows": "class Row:\n"
            '    """Values in order.\n\n'
            "    >>> row = Row([3, 1, 2])\n"
            "    >>> row[0]\n"
            "    3\n"
            '    """\n\n'
            "    def __init__(self, values=()):\n"
            "        self.values = list(values)\n\n"
            "    def __getitem__(self, index):\n"
            "        if isinstance(index, slice):\n"
            "            return Row(self.values[index])\n"
            "        return self.values[index]\n"
        },
    )
    results = analyze(project, "pkg/rows.py", capsys, monkeypatch)

    text = written(results["Row.__getitem__"], "tests/test_rows_Row___getitem__.py", project)
    assert "    row = Row([3, 1, 2])\n" in text
    assert "        (0, 3),\n" in text
    assert "    result = row[1:3]\n" in text
    assert "    assert result.values == [1, 2]\n" in text
    assert "slice(" not in text
    count = results["Row.__getitem__"]["summary"].split()[0]
    assert passes_under_pytest(project / "tests", tmp_path).startswith(f"{count} passed")


def test_a_parameter_annotated_with_a_module_class_gets_an_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(
        tmp_path,
        {
            "carts": "class Cart:\n"
            "    def __init__(self, prices: list):\n"
            "        self.prices = prices\n\n\n"
            "def total(cart: Cart) -> int:\n"
            "    return sum(cart.prices)\n"
        },
    )
    results = analyze(project, "pkg/carts.py", capsys, monkeypatch)

    text = written(results["total"], "tests/test_carts_total.py", project)
    assert "from pkg.carts import Cart, total  # noqa: E402" in text
    assert "        (Cart([1, 2, 3]), 6),\n" in text
    assert "    assert total(cart) == expected\n" in text
    rows = re.findall(r"^        \((.*), \d+\),$", text, re.MULTILINE)
    assert rows and all(row.startswith("Cart(") for row in rows)
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_type_errors_are_pinned_only_where_the_module_raises_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model proposes `shout(None)` and `shout(42)` (it is asked: no string built from
    the signature or the module's literals is longer than 40 characters): they raise
    TypeError inside `len(text)`, the argument contradicting its use, which is the call's
    fault: never pinned. `check(None)`, the value its `isinstance` check turns away, raises
    the TypeError the module raises itself: pinned, with its message."""
    project = make_project(
        tmp_path,
        {
            "words": "def shout(text: str) -> str:\n"
            "    if len(text) > 40:\n"
            "        text = text[:40]\n"
            '    return text.upper() + "!"\n\n\n'
            "def check(value: int) -> int:\n"
            "    if not isinstance(value, int):\n"
            '        raise TypeError("value must be an int")\n'
            "    return value * 2\n"
        },
    )
    proposals = {"shout": ["None)", "42)"]}
    results = analyze(project, "pkg/words.py", capsys, monkeypatch, proposals=proposals)

    assert results["shout"]["usage"]["requests"] > 0  # the model was asked for shout's calls
    shout = written(results["shout"], "tests/test_words_shout.py", project)
    assert "        ('abc', 'ABC!'),\n" in shout
    assert "pytest.raises" not in shout
    assert "None" not in shout and "42" not in shout
    check = written(results["check"], "tests/test_words_check.py", project)
    assert (
        "def test_check_value_none_raises_type_error():\n"
        "    with pytest.raises(TypeError, match='value must be an int'):\n"
        "        check(None)\n"
    ) in check
    assert "assert check(3) == 6" in check or "        (3, 6),\n" in check
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_both_sides_of_a_boundary_are_asserted_and_messages_matched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`score >= 90`: the literal the body compares with and its neighbours become calls, and
    the tests pin 90 and 89 (what tells `>=` from `>`); an exception's message, parentheses
    and all, is asserted with `match=` escaped."""
    project = make_project(
        tmp_path,
        {
            "grades": "def grade(score: int) -> str:\n"
            "    if score >= 90:\n"
            '        return "A"\n'
            '    return "B"\n\n\n'
            "def percent(part: int, whole: int) -> float:\n"
            "    if whole <= 0:\n"
            '        raise ValueError(f"whole must be positive, not {whole} (part={part})")\n'
            "    return part / whole * 100\n"
        },
    )
    results = analyze(project, "pkg/grades.py", capsys, monkeypatch)

    grade = written(results["grade"], "tests/test_grades_grade.py", project)
    assert "        (90, 'A'),\n" in grade
    assert "        (89, 'B'),\n" in grade
    assert "    assert grade(score) == expected\n" in grade
    percent = written(results["percent"], "tests/test_grades_percent.py", project)
    (raised,) = re.findall(
        r"pytest\.raises\(ValueError, match=(.*)\):\n\s+(percent\(.*\))", percent
    )
    pattern = ast.literal_eval(raised[0])
    arguments = re.fullmatch(r"percent\((-?\d+), (-?\d+)\)", raised[1])
    assert arguments
    part, whole = arguments.groups()
    assert int(whole) <= 0
    assert re.fullmatch(pattern, f"whole must be positive, not {whole} (part={part})")
    assert "pytest.approx(" in percent  # a float return
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_an_argument_the_call_mutates_is_asserted_afterwards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(
        tmp_path,
        {
            "queue": "def drain(items: list) -> int:\n"
            "    n = len(items)\n"
            "    items.clear()\n"
            "    return n\n"
        },
    )
    results = analyze(project, "pkg/queue.py", capsys, monkeypatch)

    text = written(results["drain"], "tests/test_queue_drain.py", project)
    assert ("    items = [1, 2, 3]\n    assert drain(items) == 3\n    assert items == []\n") in text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_samples_are_calls_the_function_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """sample_data: `ratio(3, 0)` is among the calls tried and raises ZeroDivisionError, so no
    sample has b == 0; a function that rejects every call gets no fixture and is not done."""
    source = (
        "def ratio(a: int, b: int) -> float:\n"
        "    return a / b\n\n\n"
        "def size_of(widget: 'Widget') -> int:\n"
        "    return widget.size\n"
    )
    project = make_project(tmp_path, {"maths": source})
    tried = [candidate.arguments for candidate in candidate_calls(source, "ratio")]
    assert any(arguments.endswith(", 0") for arguments in tried)
    results = analyze(project, "pkg/maths.py", capsys, monkeypatch, agent="sample_data")

    written(results["ratio"], "fixtures/maths_ratio.json", project)
    document = json.loads((project / "fixtures" / "maths_ratio.json").read_text())
    assert document["function"] == "pkg.maths.ratio"
    samples = document["samples"]
    assert samples
    for sample in samples:
        assert set(sample) == {"a", "b"}
        assert sample["b"] != 0
        assert isinstance(sample["a"] / sample["b"], float)
    message = not_done(results["size_of"])
    assert re.search(r"no call of size_of that returned could be found \(\d+ tried\)", message)
    assert not (project / "fixtures" / "maths_size_of.json").exists()


def test_calls_that_depend_on_the_process_are_not_pinned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process id and a random token differ between the probe's runs or under the pytest
    run that checks the file: never pinned. The deterministic raise of the same function is;
    of a token, where nothing else can be, only its kind, the same in every run."""
    project = make_project(
        tmp_path,
        {
            "process": "import os\nimport uuid\n\n\n"
            "def pid() -> int:\n"
            "    return os.getpid()\n\n\n"
            "def token() -> str:\n"
            "    return uuid.uuid4().hex\n\n\n"
            "def tag(label: str) -> str:\n"
            "    if not label:\n"
            '        raise ValueError("label must not be empty")\n'
            '    return label + "-" + uuid.uuid4().hex\n'
        },
    )
    results = analyze(project, "pkg/process.py", capsys, monkeypatch)

    not_done(results["pid"])
    assert not (project / "tests" / "test_process_pid.py").exists()
    token = written(results["token"], "tests/test_process_token.py", project)
    assert token.count("def test_") == 1 and "    assert isinstance(token(), str)\n" in token
    text = written(results["tag"], "tests/test_process_tag.py", project)
    assert "def test_tag" in text
    assert "with pytest.raises(ValueError, match='label must not be empty'):\n" in text
    assert text.count("def test_") == 1  # only the raise repeats: no kind beside it
    assert "2 passed" in passes_under_pytest(project / "tests", tmp_path)


# -- the pure parts, on hand-written inputs


GRADE = (
    "def grade(score: int) -> str:\n"
    '    """Letter grade.\n\n'
    "    >>> grade(95)\n"
    "    'A'\n"
    '    """\n'
    "    if score >= 90:\n"
    '        return "A"\n'
    '    return "B"\n'
)


def test_candidates_come_from_call_sites_doctests_and_boundaries() -> None:
    sites = {"pkg/report.py": "from pkg.grades import grade\n\nprint(grade(77), grade(x))\n"}
    found = candidate_calls(GRADE, "grade", sites, proposals=["88"])
    by_origin: dict[str, list[str]] = {}
    for call in found:
        assert call.instance is None
        by_origin.setdefault(call.origin, []).append(call.arguments)
    # People's calls first (a call site with a literal; `grade(x)` is not one), the model's next.
    assert [c.origin for c in found[:3]] == ["call site", "doctest", "model"]
    assert by_origin["call site"] == ["77"]
    assert by_origin["doctest"] == ["95"]
    assert by_origin["model"] == ["88"]
    # The compared literal and both its neighbours.
    assert {"91", "90", "89"} <= set(by_origin["boundary"])
    assert all(call.case("grade").startswith("grade(") for call in found)


def test_usage_shown_as_code_lines_in_a_docstring_gives_candidates_too() -> None:
    """A docstring without `>>>` that shows usage as code (an "Usage:" block of asserts) is
    read line by line; prose, and lines that call nothing, are not."""
    source = (
        "class Plurals:\n"
        '    """Plural forms of English words.\n\n'
        "    Usage:\n"
        "        from plurals import Plurals\n"
        "        plurals = Plurals()\n"
        "        assert plurals.plural('apple') == 'apples'\n"
        "        plurals.plural('person', count=2)  # people\n"
        "    Call plural(word) for a word's plural form.\n"
        '    """\n\n'
        "    def plural(self, word: str, count: int = 2) -> str:\n"
        "        return word if count == 1 else word + 's'\n"
    )
    examples = example_trees(ast.parse(source))
    assert [ast.unparse(example) for _, example in examples] == [
        "plurals = Plurals()",  # the import calls nothing; the prose does not parse
        "assert plurals.plural('apple') == 'apples'",
        "plurals.plural('person', count=2)",
    ]
    found = candidate_calls(source, "Plurals.plural")
    doctests = [c.arguments for c in found if c.origin == "doctest"]
    assert doctests == ["'apple'", "'person', count=2"]


def test_names_an_example_bound_before_the_call_are_read_as_their_values() -> None:
    """`>>> argv = [...]` then `>>> parse(spec, argv)`: the call made is of those values, and
    a value written over several lines without `...` (doctest reads its lines as expected
    output) is the statement it was meant to be."""
    source = (
        "def parse(spec, argv):\n"
        '    """Match argv against a spec.\n\n'
        "    >>> spec = '''\n"
        "    Usage: prog <name>\n\n"
        "    Options: -v\n"
        "    '''\n"
        "    >>> argv = ['ann']\n"
        "    >>> parse(spec, argv)\n"
        "    {'<name>': 'ann'}\n"
        "    >>> argv = sorted(argv)\n"
        "    >>> parse(spec, argv)\n"
        '    """\n'
        "    return {}\n"
    )
    found = candidate_calls(source, "parse")
    doctests = [c.arguments for c in found if c.origin == "doctest"]
    # Rebound to something that is no value: that call is not a plain one, and not taken.
    assert doctests == ["'\\nUsage: prog <name>\\n\\nOptions: -v\\n', ['ann']"]


def test_candidates_for_a_method_are_called_on_instances() -> None:
    source = (
        "class Counter:\n"
        "    def __init__(self, start: int = 0):\n"
        "        self.value = start\n\n"
        "    def increment(self, by: int) -> int:\n"
        "        self.value += by\n"
        "        return self.value\n"
    )
    found = candidate_calls(source, "Counter.increment")
    assert found
    assert all(c.instance is not None and c.instance.startswith("Counter(") for c in found)
    assert found[0].case("Counter.increment").startswith("Counter(")
    assert ".increment(" in found[0].case("Counter.increment")


RECORDS_MODULE = """\
import abc
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple


@dataclass(frozen=True)
class Settings:
    registry: ClassVar[dict] = {}
    width: int
    step: int = 1
    tags: list = field(default_factory=list)


class Pair(NamedTuple):
    left: str
    right: str


class Counter(abc.ABC):
    def __init__(self, settings: Settings):
        self.settings = settings
        self.total = 0

    @abc.abstractmethod
    def weight(self, value: int) -> int: ...

    def add(self, value: int) -> int:
        self.total = (self.total + self.weight(value)) % (2 ** self.settings.width)
        return self.total


class Plain(Counter):
    def weight(self, value):
        return value


class Own(Counter):
    def weight(self, value):
        return 0

    def add(self, value):
        return -1


def joined(pair: Pair) -> str:
    return pair.left + pair.right


def scaled(settings: Settings, value: int) -> int:
    return value * settings.step
"""


def test_records_are_built_from_their_fields_and_abstract_classes_through_a_subclass() -> None:
    """A dataclass or NamedTuple without an `__init__` is built from its annotated fields
    (ClassVar left out; one with a default may be left out); an abstract class's method is
    called on a subclass that inherits it (not on one that overrides it), and the allow-list
    reads that call as a call of the method."""
    found = candidate_calls(RECORDS_MODULE, "scaled")
    settings = {c.arguments.split("), ")[0] + ")" for c in found}
    shape = r"Settings\(-?\d+(, step=-?\d+)?(, tags=\[[\d, ]*\])?\)"  # never `registry`
    assert settings and all(re.fullmatch(shape, text) for text in settings), settings
    pairs = {c.arguments for c in candidate_calls(RECORDS_MODULE, "joined")}
    assert pairs and all(re.fullmatch(r"Pair\('.*', '.*'\)", text) for text in pairs), pairs
    on = candidate_calls(RECORDS_MODULE, "Counter.add")
    assert on and all(str(c.instance).startswith("Plain(Settings(") for c in on), on
    assert all(allowed(c, "Counter.add", RECORDS_MODULE) for c in on)
    wrong = Candidate("1", "Own(Settings(8))", "types")
    assert allowed(wrong, "Counter.add", RECORDS_MODULE)  # a subclass: the allow-list reads it
    assert not allowed(Candidate("1", "Pair('a', 'b')", "types"), "Counter.add", RECORDS_MODULE)


def test_a_modules_own_constructor_calls_build_its_classes() -> None:
    """How the module itself builds a class (a constant, an enum of configurations) is how
    its methods' tests build it, before values of the constructor's types."""
    source = RECORDS_MODULE + "\n\nPRESET = Settings(width=4, step=3)\n"
    found = candidate_calls(source, "scaled")
    assert found[0].arguments.startswith("Settings(width=4, step=3), "), found[0]


def test_special_methods_get_their_docstring_calls_and_another_instance() -> None:
    """`x | {2}` in an example is a call of `__or__`; `other` of `__eq__` is another instance;
    the example's `Tags(['a'])` builds the instances."""
    source = (
        "class Tags:\n"
        '    """Labels.\n\n'
        "    >>> Tags(['a']) | {'b'}\n"
        "    Tags(['a', 'b'])\n"
        '    """\n\n'
        "    def __init__(self, labels=()):\n"
        "        self.labels = list(labels)\n\n"
        "    def __or__(self, other):\n"
        "        return Tags(self.labels + sorted(other))\n\n"
        "    def __eq__(self, other):\n"
        "        return isinstance(other, Tags) and self.labels == other.labels\n"
    )
    union = candidate_calls(source, "Tags.__or__")
    assert (union[0].arguments, union[0].instance, union[0].origin) == (
        "{'b'}",
        "Tags(['a'])",
        "doctest",
    )
    equal = candidate_calls(source, "Tags.__eq__")
    assert any(c.arguments == "Tags(['a'])" for c in equal)


def observation(**seen: Any) -> dict[str, Any]:
    """What the probe reports of one call, with the defaults of a plain return."""
    return {
        "outcome": "returned",
        "type": "int",
        "value": "1",
        "arcs": [[1, 2]],
        "state_changed": [],
        "mutated": {},
    } | seen


def raised(name: str, site: int, *, explicit: bool = True, arcs: Any = None) -> dict[str, Any]:
    return observation(
        outcome="raised",
        exception=name,
        exception_module="builtins",
        exception_bases=[name, "Exception", "BaseException"],
        message=f"{name} at {site}",
        site=site,
        site_is_raise=explicit,
        arcs=arcs if arcs is not None else [[1, site]],
        value=None,
        type=None,
    )


def candidate(arguments: str, origin: str = "types") -> dict[str, Any]:
    return {"arguments": arguments, "instance": None, "origin": origin}


def test_selection_drops_state_changes_and_calls_that_do_not_repeat() -> None:
    candidates = [candidate("1"), candidate("2"), candidate("3")]
    first = [
        observation(value="1", arcs=[[1, 2]]),
        observation(value="2", arcs=[[1, 3]], state_changed=["RULES"]),
        observation(value="7", arcs=[[1, 4]]),
    ]
    second = [dict(first[0]), dict(first[1]), observation(value="8", arcs=[[1, 4]])]
    chosen = select_calls(candidates, [first, second], [], "pkg.m")

    assert [item["candidate"]["arguments"] for item in chosen["chosen"]] == ["1"]
    assert chosen["state"] == ["RULES"]
    assert chosen["tried"] == 3
    assert any("changes state other tests see (RULES)" in r for r in chosen["dropped"])
    assert any("behaves differently from run to run" in r for r in chosen["dropped"])
    assert len(chosen["dropped"]) == 2


def test_a_call_that_returns_none_whatever_it_is_given_is_no_test() -> None:
    """`set_hue(3)` returns None for every argument and changes nothing a test can see (the
    state is private): `assert ... is None` would pass whatever the method did, so nothing is
    chosen. Where another argument returns something else, None is a result worth pinning;
    where the call changed an argument or the instance, that is asserted beside it."""
    candidates = [candidate("3"), candidate("0"), candidate("-1")]
    nothing = [observation(value="None", type="NoneType", arcs=[[1, n]]) for n in (2, 3, 4)]
    chosen = select_calls(candidates, [nothing, nothing], [], "pkg.m", "set_hue")
    assert chosen["chosen"] == []
    assert chosen["dropped"] == [
        "set_hue(3): every call returned None and changed nothing a test can see"
    ]
    other = [*nothing[:2], observation(value="5", arcs=[[1, 4]])]
    chosen = select_calls(candidates, [other, other], [], "pkg.m", "parse")
    assert sorted(item["seen"]["value"] for item in chosen["chosen"]) == ["5", "None", "None"]
    changed = [observation(value="None", instance={"hue": "3"}, arcs=[[1, 2]])]
    chosen = select_calls(candidates[:1], [changed, changed], [], "pkg.m", "set_hue")
    assert len(chosen["chosen"]) == 1


def test_selection_keeps_one_case_per_raise_site_and_no_contradiction_errors() -> None:
    candidates = [
        candidate("1"),
        candidate("-1"),
        candidate("-2"),
        candidate("None"),
        candidate("'x'"),
    ]
    run = [
        observation(value="1", arcs=[[1, 2], [2, 3]]),
        raised("ValueError", 4, arcs=[[1, 4]]),
        raised("ValueError", 4, arcs=[[1, 4], [4, 5]]),  # more arcs, but the same raise site
        raised("AttributeError", 2, explicit=False, arcs=[[1, 9]]),  # `None.upper()`
        raised("TypeError", 7, explicit=True, arcs=[[1, 7]]),  # `raise TypeError(...)`
    ]
    chosen = select_calls(candidates, [run, [dict(seen) for seen in run]], [], "pkg.m")

    picked = {item["candidate"]["arguments"]: item["seen"] for item in chosen["chosen"]}
    assert "1" in picked and "'x'" in picked
    assert "None" not in picked  # an AttributeError from inside an expression
    assert len([seen for seen in picked.values() if seen.get("exception") == "ValueError"]) == 1
    assert chosen["dropped"] == [] and chosen["state"] == []


@pytest.mark.parametrize(
    "message",
    [
        "percent must be between 0 and 100, not 150.0",
        "invalid literal for int() with base 10: ''",
        "a [b] {c} * + ? ^ $ | d",
        "path C:\\temp\\new is 'odd'",
        'say "hi" \\',
        "tab\there",
    ],
)
def test_pattern_literal_matches_the_message_literally(message: str) -> None:
    literal = pattern_literal(message)
    pattern = ast.literal_eval(literal)
    assert re.fullmatch(pattern, message)
    assert re.search(pattern, f"prefix {message} suffix")
    # Spaces and dashes stay readable: only what regular expressions give a meaning is escaped.
    assert "\\ " not in literal and "\\-" not in literal


def test_rendered_tests_are_named_for_their_inputs_and_outcomes() -> None:
    chosen = [
        {
            "candidate": candidate("100.0, 10.0", "model"),
            "seen": observation(type="float", value="90.0"),
        },
        {
            "candidate": candidate("100.0, 150.0", "model"),
            "seen": raised("ValueError", 3) | {"message": "percent must be <= 100 (not 150.0)"},
        },
        {
            "candidate": candidate("100.0, 0", "boundary"),
            "seen": observation(type="float", value="100.0"),
        },
    ]
    tests = render_tests("apply_discount", chosen, ["price", "percent"], "pkg.pricing")

    # The two calls that only return a value are one parametrized test (its rows also come
    # as tests of their own, named for their inputs, for when one row fails under pytest).
    names = [test["name"] for test in tests]
    assert names == ["test_apply_discount", "test_apply_discount_percent_150_0_raises_value_error"]
    assert tests[0]["code"] == (
        "@pytest.mark.parametrize(\n"
        "    ('price', 'percent', 'expected'),\n"
        "    [\n"
        "        (100.0, 10.0, 90.0),\n"
        "        (100.0, 0, 100.0),\n"
        "    ],\n"
        ")\n"
        "def test_apply_discount(price, percent, expected):\n"
        "    assert apply_discount(price, percent) == pytest.approx(expected)\n"
    )
    assert tests[0]["cases"] == 2
    assert [single["name"] for single in tests[0]["singles"]] == [
        "test_apply_discount_1",
        "test_apply_discount_percent_0_2",
    ]
    assert (
        "    with pytest.raises(ValueError, match=r'percent must be <= 100 \\(not 150\\.0\\)'):\n"
        "        apply_discount(100.0, 150.0)\n"
    ) in tests[1]["code"]
    assert all(test["uses_pytest"] for test in tests)
    assert all(test["names"] == ["apply_discount"] for test in tests)
    for test in tests:
        compile(test["code"], test["name"], "exec")


def test_without_fix_nothing_reaches_an_existing_tests_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project's tests/ folder exists (a link in each command's copy of the project): the
    test file checked under pytest and the probe's files are written into that copy only, and
    `analyze` without --fix leaves the folder exactly as it was."""
    project = make_project(
        tmp_path, {"text": "def shout(text: str) -> str:\n    return text.upper() + '!'\n"}
    )
    (project / "tests").mkdir()
    (project / "tests" / "test_existing.py").write_text("def test_nothing():\n    pass\n")
    before = sorted(path.name for path in project.rglob("*") if "__pycache__" not in str(path))
    monkeypatch.chdir(project)
    model = ScriptedModelServer(rule=calls_the_tool("write_tests"), completion=proposing({}))
    with model as server:
        args = ["analyze", "pkg/text.py", "--agents", "test", "--format", "json", "--no-cache"]
        main([*args, "--base-url", server.base_url])
    report = json.loads(capsys.readouterr().out)
    [result] = report["results"]
    assert result["status"] == "success"
    assert [change["file"] for change in result["changes"]] == ["tests/test_text_shout.py"]
    after = sorted(path.name for path in project.rglob("*") if "__pycache__" not in str(path))
    assert after == before


def test_the_variations_around_a_call_that_got_past_an_early_return_are_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`paint` returns its text unchanged unless `force` is set (termcolor's `colored` outside
    a terminal): each one-at-a-time variation of `color` stops at that return, and only
    `force=True` gets past it. The variations around that call are tried next, so the colours'
    branches are taken and pinned, where a mutant of them survived before; so is the call the
    project writes, with `force=True` added."""
    project = make_project(
        tmp_path,
        {
            "paint": "def paint(text: str, color: str | None = None, *, force: bool = False)"
            " -> str:\n"
            "    if not force:\n"
            "        return text\n"
            "    if color == 'red':\n"
            "        return '<r>' + text\n"
            "    if color is not None:\n"
            "        return '<' + color + '>' + text\n"
            "    return '<>' + text\n",
            "use": "from pkg.paint import paint\n\n\ndef banner() -> str:\n"
            "    return paint('Hi', 'blue')\n",
        },
    )
    results = analyze(project, "pkg/paint.py", capsys, monkeypatch)

    text = written(results["paint"], "tests/test_paint_paint.py", project)
    assert "    assert paint(text, color, force=force) == expected\n" in text
    assert "        ('abc', 'red', True, '<r>abc'),\n" in text
    # What got it further, given to the call the project writes too: another colour.
    assert "        ('Hi', 'blue', True, '<blue>Hi'),\n" in text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_method_that_takes_no_arguments_asks_the_model_only_for_its_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Door.opens and Door.unlock each keep a branch no call of the tools takes (a digest), so
    the model is asked for both: for the call's arguments only where the method takes some
    (`door.opens(` has one form: its drafts would be calls that raise TypeError, prompts
    evaluated for nothing), for its constructor's only where it takes none (the instance is
    all there is to vary; `unlock` runs on a Door the tools built)."""
    project = make_project(
        tmp_path,
        {
            "doors": "import hashlib\n\n\n"
            "class Door:\n"
            "    def __init__(self, code: str = ''):\n"
            "        self.code = code\n\n"
            "    def opens(self) -> bool:\n"
            "        if hashlib.sha256(self.code.encode()).hexdigest().startswith('0000'):\n"
            "            return True\n"
            "        return False\n\n"
            "    def unlock(self, code: str) -> bool:\n"
            "        if hashlib.sha256(code.encode()).hexdigest().startswith('0000'):\n"
            "            self.code = code\n"
            "            return True\n"
            "        return False\n"
        },
    )
    prompts: list[str] = []

    def recorded(body: dict[str, Any]) -> str:
        prompts.append(body["prompt"])
        return ""

    monkeypatch.chdir(project)
    model = ScriptedModelServer(rule=calls_the_tool("write_tests"), completion=recorded)
    with model as server:
        args = ["analyze", "pkg/doors.py", "--agents", "test", "--format", "json", "--no-cache"]
        main([*args, "--base-url", server.base_url])
    report = json.loads(capsys.readouterr().out)
    statuses = {r["node"]["qualified_name"]: r["status"] for r in report["results"]}
    assert statuses["Door.opens"] == statuses["Door.unlock"] == "success"

    endings = [prompt.rsplit("\n", 1)[1].strip() for prompt in prompts]
    # Asked for the instance (its greedy draft: write_tests asks for no other) for `opens` only.
    assert endings.count("door = Door(") == 1
    assert "result = door.unlock(" in endings
    assert not [ending for ending in endings if ending.startswith("result = door.opens")]


def test_branches_left_reads_the_branch_arcs_of_the_targets_lines() -> None:
    """Whether the chosen calls leave a branch arc of the target untaken: the arcs from its
    branching lines (coverage.py's parser), against the arcs the chosen calls' probe saw."""
    source = (
        "def clip(x: int) -> int:\n"  # 1
        "    if x > 10:\n"  # 2: a branch, to 3 or 4
        "        return 10\n"  # 3
        "    return x\n"  # 4
        "\n\n"
        "def double(x: int) -> int:\n"  # 7
        "    return 2 * x\n"  # 8: no branch
    )

    def chosen(*arcs: list[list[int]]) -> list[dict[str, Any]]:
        return [{"candidate": {}, "seen": {"arcs": taken}} for taken in arcs]

    low = [[-1, 2], [2, 4], [4, -1]]
    high = [[-1, 2], [2, 3], [3, -1]]
    assert branches_left(source, [[1, 4]], chosen(low))
    assert not branches_left(source, [[1, 4]], chosen(low, high))
    assert not branches_left(source, [[7, 8]], chosen([[-7, 8], [8, -7]]))  # nothing to branch
    assert branches_left(source, [[7, 8]], [])  # nothing chosen: nothing to pin yet
    # `reached`: only ranges a chosen call ran code of (the private code a call reaches)
    both = [[7, 8], [1, 4]]
    assert not branches_left(source, both, chosen([[-7, 8], [8, -7]]), reached=True)
    assert branches_left(source, both, chosen([[-7, 8], [8, -7]], low), reached=True)


HIERARCHY_MODULE = """\
import abc
from dataclasses import dataclass, field
from base import Node


class Node(Node):
    @abc.abstractmethod
    def run(self): ...


class Owner(abc.ABC):
    @abc.abstractmethod
    def weight(self) -> int: ...

    def add(self, value: int) -> int:
        return value + self.weight()


class Mid(Owner):
    def add(self, value: int) -> int:
        return -value


class Leaf(Mid):
    def weight(self) -> int:
        return 1


class Half(Owner):
    pass


@dataclass
class Base:
    width: int


@dataclass
class Sized(Base):
    step: int = 1
    cache: dict = field(init=False, default_factory=dict)


def rule(width):
    return "-" * width
"""


def test_class_hierarchies_are_read_without_loops_and_overrides_on_the_way_count() -> None:
    """A base redefined under its own name ends the walk (no recursion); a subclass is no
    receiver for the owner's method when a class between them overrides it; a subclass that
    leaves an abstract method unimplemented is abstract too; a dataclass's constructor takes
    its base record's fields first and never an `init=False` field; `"-" * width` is no text."""
    assert all(c.instance == "Node()" for c in candidate_calls(HIERARCHY_MODULE, "Node.run"))
    tree = ast.parse(HIERARCHY_MODULE)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    assert overrides(classes, "Leaf", "Owner", "add")
    assert not overrides(classes, "Half", "Owner", "add")
    assert abstract(classes["Half"], classes) and not abstract(classes["Leaf"], classes)
    init = inherited_init(classes["Sized"], classes)
    assert init is not None
    assert ast.unparse(init.args) == "self, width: int, step: int=1"
    found = candidate_calls(HIERARCHY_MODULE, "rule")
    assert found and all(c.arguments.lstrip("-").isdigit() for c in found), found


def test_a_mapping_built_on_a_base_from_another_module_is_built_holding_entries() -> None:
    """A base named like a mapping (bidict's `BidirectionalMapping`, imported from its own
    module) makes the class a mapping, and a constructor it inherits from another module is
    tried with entries (the probe drops a build that fails); a base that names no collection
    gives none."""
    source = (
        "from ._abc import BidirectionalMapping\n"
        "from ._base import Base\n\n\n"
        "class Two(BidirectionalMapping):\n"
        "    def first(self, key):\n"
        "        return self[key]\n\n\n"
        "class Plain(Base):\n"
        "    def first(self, key):\n"
        "        return key\n"
    )
    two = {c.instance for c in candidate_calls(source, "Two.first")}
    assert "Two({'a': 3, 'b': 1, 'c': 2})" in two, two
    assert ("'a'", "Two({'a': 3, 'b': 1, 'c': 2})") in {
        (c.arguments, c.instance) for c in candidate_calls(source, "Two.first")
    }
    assert {c.instance for c in candidate_calls(source, "Plain.first")} == {"Plain()"}


def test_the_probe_walks_the_folder_twice_a_call_and_sees_files_written_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's files are compared by one walk of the folder before it and one after: once per
    file in the folder (as it was) made each call of a 200-file project cost a third of a
    second. What it wrote and what it removed are both still seen."""
    import remora.tool_library.call_probe as call_probe

    project = make_project(
        tmp_path,
        {
            "tidy": "import os\n\ndef tidy(name):\n    os.remove(name)\n"
            '    open("new.txt", "w").close()\n'
        },
    )
    for index in range(30):
        (project / f"data{index}.txt").write_text(str(index))
    monkeypatch.chdir(project)
    walks = 0
    walk = call_probe.files_state

    def counted() -> dict[str, tuple[int, int]]:
        nonlocal walks
        walks += 1
        return walk()

    monkeypatch.setattr(call_probe, "files_state", counted)
    module, path, lines = probed_module(project, "tidy")
    request = {"function": "tidy", "method": None, "lines": [[3, 5]]}
    call = {"arguments": "'data7.txt'", "instance": None}
    seen = call_probe.observe(module, path, lines, request, call, False)
    assert seen["outcome"] == "returned"
    assert seen["files_changed"] == ["new.txt", "data7.txt"]
    assert walks == 2


STAMPS = """import datetime as dt
import uuid as _uu
from decimal import Decimal


def short(value: _uu.UUID) -> str:
    if not isinstance(value, _uu.UUID):
        raise ValueError("not a UUID")
    return value.hex[:8]


def weekday(day):
    if not isinstance(day, dt.date):
        raise TypeError("not a date")
    return day.strftime("%A")


def halve(amount: Decimal) -> Decimal:
    return amount / 2
"""


def test_parameters_of_standard_value_types_get_values_built_through_their_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, {"stamps": STAMPS})
    results = analyze(project, "pkg/stamps.py", capsys, monkeypatch)

    # An annotation through an aliased import, and an isinstance check without annotation:
    # values of the type, written through its module, and the value the check turns away.
    text = written(results["short"], "tests/test_stamps_short.py", project)
    assert "import uuid\n" in text
    assert "from pkg.stamps import short  # noqa: E402" in text
    assert "(uuid.UUID('12345678-1234-5678-1234-567812345678'), '12345678')" in text
    assert "with pytest.raises(ValueError, match='not a UUID'):\n        short(None)" in text
    text = written(results["weekday"], "tests/test_stamps_weekday.py", project)
    assert "import datetime\n" in text
    assert "(datetime.date(2024, 1, 15), 'Monday')" in text
    # A returned Decimal is pinned through its repr, beside the argument built the same way.
    text = written(results["halve"], "tests/test_stamps_halve.py", project)
    assert "import decimal\n" in text and "from decimal import Decimal\n" in text
    assert "(decimal.Decimal('1.5'), Decimal('0.75'))" in text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_standard_value_is_allowed_only_through_a_module_the_module_does_not_redefine() -> None:
    source = (
        "import datetime as dt\n\ndef datetime(x):\n    return x\n\n\ndef stamp(when: dt.date):\n"
    )
    source += "    return when\n"
    with pytest.raises(ValueError, match="cannot be part of a case"):
        parse_test_case("stamp(datetime.date(2024, 1, 1))", "stamp", source)
    plain = "def stamp(when):\n    return when\n"
    case = parse_test_case("stamp(datetime.timezone(datetime.timedelta(hours=1)))", "stamp", plain)
    assert case["names"] == ["stamp"]
    arguments = case["call"].removeprefix("stamp(")[:-1]
    assert standard_imports(arguments) == ["import datetime"] and used_names(arguments) == []
    refused = [
        "stamp(datetime.date.today())",  # a method of the type: not a constructor
        "stamp(datetime.date(__import__('os')))",  # arguments are literals only
        "stamp(os.path('x'))",
        "stamp(uuid.uuid4())",
    ]
    for text in refused:
        with pytest.raises(ValueError):
            parse_test_case(text, "stamp", plain)


VARINTS = """import typing


class _Varint:
    @staticmethod
    def encode(n: int) -> bytearray:
        out = bytearray()
        while True:
            low, n = n & 0x7F, n >> 7
            if n == 0:
                out.append(low)
                return out
            out.append(0x80 | low)

    @staticmethod
    def total(data: bytearray) -> int:
        return sum(data)

    @staticmethod
    def read(stream: typing.BinaryIO) -> int:
        first = stream.read(1)
        if not first:
            raise EOFError
        return first[0] & 0x7F


def words(text: typing.TextIO) -> int:
    return len(text.read().split())

"""
WORDS32 = """def word32(data: memoryview) -> int:
    if len(data) < 4:
        raise ValueError("a 32-bit word takes 4 bytes")
    return int.from_bytes(data[:4], "big")
"""


def test_bytes_and_streams_are_given_and_returned_bytearrays_pinned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, {"varints": VARINTS, "words32": WORDS32})
    results = analyze(project, "pkg/varints.py", capsys, monkeypatch)

    # A returned bytearray is pinned through its repr (a builtin: nothing to import).
    text = written(results["_Varint.encode"], "tests/test_varints__Varint_encode.py", project)
    assert "(128, bytearray(b'\\x80\\x01'))," in text
    # A bytearray parameter gets bytearrays, a BinaryIO one and a TextIO one streams of io.
    text = written(results["_Varint.total"], "tests/test_varints__Varint_total.py", project)
    assert "(bytearray(b'abc'), 294)," in text
    text = written(results["_Varint.read"], "tests/test_varints__Varint_read.py", project)
    assert "import io\n" in text and "(io.BytesIO(b'\\xff\\x01'), 127)," in text
    # Static methods are called on the class, as code calls them.
    raising = "def test_varint_read_stream_empty_raises_eoferror():\n"
    raising += "    with pytest.raises(EOFError):\n        _Varint.read(io.BytesIO(b''))"
    assert raising in text
    text = written(results["words"], "tests/test_varints_words.py", project)
    assert "(io.StringIO('line one\\nline two\\n'), 4)," in text
    # A memoryview one views bytes, of the lengths binary protocols read too.
    results = analyze(project, "pkg/words32.py", capsys, monkeypatch)
    text = written(results["word32"], "tests/test_words32_word32.py", project)
    assert "(memoryview(b'\\x00\\x00\\x00\\x01'), 1)," in text
    assert "        word32(memoryview(b'abc'))\n" in text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_table_column_named_like_the_instance_or_a_module_takes_a_suffix() -> None:
    chosen = [
        {
            "candidate": {"arguments": str(n), "instance": "_I()", "origin": "types"},
            "seen": observation(value=str(n * 2)),
        }
        for n in (3, 4)
    ]
    (test,) = render_tests("_I.encode", chosen, ["i"], "pkg.codes")
    assert "    ('i_value', 'expected'),\n" in test["code"]
    assert "    i = _I()\n    assert i.encode(i_value) == expected\n" in test["code"]
    # By keyword too, and for a standard module the arguments are built with.
    chosen = [
        {
            "candidate": {"arguments": f"uuid=uuid.UUID(int={n})", "origin": "types"},
            "seen": observation(value=str(n)),
        }
        for n in (1, 2)
    ]
    (test,) = render_tests("number", chosen, ["uuid"], "pkg.codes")
    assert "def test_number(uuid_value, expected):\n" in test["code"]
    assert "    assert number(uuid=uuid_value) == expected\n" in test["code"]
    assert test["imports"] == ["import uuid"]


def test_bytearray_arguments_are_allowed_of_bytes_or_integers_only() -> None:
    source = "def total(data):\n    return sum(data)\n"
    allowed = ["total(bytearray(b'ab'))", "total(bytearray([1, 2]))", "total(bytearray())"]
    for text in [*allowed, "total(memoryview(b'ab'))"]:
        assert parse_test_case(text, "total", source)["names"] == ["total"]
    refused = [
        "total(bytearray('abc', 'ascii'))",  # text and an encoding: two arguments
        "total(bytearray('abc'))",
        "total(bytearray(size=3))",
        "total(bytearray([1, 256]))",
        "total(bytearray(['a']))",
        "total(memoryview([1, 2]))",  # a view of bytes only
        "total(memoryview(bytearray(b'a')))",
        "total(bytearray(__import__('os')))",
    ]
    for text in refused:
        with pytest.raises(ValueError):
            parse_test_case(text, "total", source)
    assert used_names("bytearray(b'ab'), memoryview(b''), 3") == []


def test_tables_of_calls_on_several_instances_get_distinct_names() -> None:
    chosen = [
        {
            "candidate": {"arguments": str(n), "instance": f"Box({size})", "origin": "types"},
            "seen": observation(value=str(n * size)),
        }
        for size in (1, 2, 3)
        for n in (4, 5)
    ]
    tests = render_tests("Box.scale", chosen, ["n"], "pkg.boxes")
    assert [test["name"] for test in tests] == [
        "test_box_scale",
        "test_box_scale_examples",
        "test_box_scale_examples_2",
    ]


MONEY = """class Money:
    def __init__(self, cents: int):
        self.cents = cents

    def __repr__(self):
        return f"Money({self.cents})"

    def __eq__(self, other):
        return isinstance(other, Money) and self.cents == other.cents

    def __lt__(self, other):
        return self.cents < other.cents

    def __add__(self, other):
        return Money(self.cents + other.cents)

    def __neg__(self):
        return Money(-self.cents)
"""


def test_comparison_and_arithmetic_methods_are_tested_as_operators(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, {"money": MONEY})
    results = analyze(project, "pkg/money.py", capsys, monkeypatch)

    # A comparison is parenthesised before `== expected` (`money < other == True` would chain).
    less = written(results["Money.__lt__"], "tests/test_money_Money___lt__.py", project)
    assert "    assert (money < other) == expected\n" in less
    assert "        (Money(10), True),\n" in less
    added = written(results["Money.__add__"], "tests/test_money_Money___add__.py", project)
    assert "    assert money + other == expected\n" in added
    negated = written(results["Money.__neg__"], "tests/test_money_Money___neg__.py", project)
    assert "    assert -money == Money(-3)\n" in negated
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_comparison_that_is_false_is_asserted_negated() -> None:
    assert negated("money < Money(3)") == "not (money < Money(3))"
    assert negated("'a' in items") == "'a' not in items"
    assert negated("items == [1]") == "items != [1]"
    assert is_operator("money >= other") and not is_operator("money + other")


KEYWORDS = """class KeywordTree:
    def __init__(self):
        self.words = []
        self.done = False

    def add(self, word: str):
        self.words.append(word)

    def finalize(self):
        self.done = True

    def search(self, text: str):
        if not self.done:
            raise ValueError("not finalized")
        return [w for w in self.words if w in text]
"""


def test_a_method_is_also_tested_on_an_instance_its_class_filled_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`search` finds something only after `add` put a word in and `finalize` ran: the calls
    on a fresh instance reach only the error; those after the mutators reach the result."""
    project = make_project(tmp_path, {"keywords": KEYWORDS})
    results = analyze(project, "pkg/keywords.py", capsys, monkeypatch)

    text = written(
        results["KeywordTree.search"], "tests/test_keywords_KeywordTree_search.py", project
    )
    assert (
        "    keyword_tree = KeywordTree()\n"
        "    keyword_tree.add('abc')\n"
        "    keyword_tree.finalize()\n"
        "    assert keyword_tree.search(text) == expected\n"
    ) in text
    assert "        ('abc', ['abc']),\n" in text
    assert "        keyword_tree.search('abc')\n" in text  # the fresh instance's error stays
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_setups_are_the_mutators_that_take_arguments_then_one_that_finishes() -> None:
    calls = candidate_calls(KEYWORDS, "KeywordTree.search")
    setups = {c.setup for c in calls if c.origin == "sequence"}
    assert setups == {(("add", "'abc'"),), (("add", "'abc'"), ("finalize", ""))}
    # Each step is checked by the allow-list as a call on the instance.
    sequenced = next(c for c in calls if c.setup)
    assert allowed(sequenced, "KeywordTree.search", KEYWORDS)
    forged = Candidate("'abc'", "KeywordTree()", "sequence", (("__class__", ""),))
    assert not allowed(forged, "KeywordTree.search", KEYWORDS)
    forged = Candidate("'abc'", "KeywordTree()", "sequence", (("add", "__import__('os')"),))
    assert not allowed(forged, "KeywordTree.search", KEYWORDS)


RECENT = """class Recent:
    def __init__(self, size: int = 2):
        self.size = size
        self.table = {}

    def __setitem__(self, key, value):
        if len(self.table) >= self.size:
            del self.table[next(iter(self.table))]
        self.table[key] = value

    def get(self, key, default=None):
        if key not in self.table:
            return default
        return self.table[key]

    def clear(self):
        self.table.clear()
"""


def test_a_container_that_is_not_a_dict_is_filled_by_item_assignment_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache read on an empty instance gives only its default: `recent['abc'] = ...` first
    (the key the reader is then asked for), written as code fills it, reaches the stored value."""
    calls = candidate_calls(RECENT, "Recent.get")
    setups = {c.setup for c in calls if c.origin == "sequence"}
    assert setups == {(("__setitem__", "'abc', 3"),)}
    assert allowed(next(c for c in calls if c.setup), "Recent.get", RECENT)

    project = make_project(tmp_path, {"recent": RECENT})
    results = analyze(project, "pkg/recent.py", capsys, monkeypatch)
    text = written(results["Recent.get"], "tests/test_recent_Recent_get.py", project)
    assert "    recent['abc'] = 3\n" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


TABLE = """class Table:
    def __init__(self, width: int = 20):
        self.width = width
        self._rows = []
        self._align = "<"

    def set_align(self, align):
        self._align = align
        return self

    def add_row(self, cells):
        row = []
        for i, cell in enumerate(cells):
            row.append(format(cell, self._align + str(i + 1)))
        self._rows.append(row)
        return self

    def draw(self):
        if not self._rows:
            return None
        text = "\\n".join(" | ".join(row) for row in self._rows)
        if len(text) > self.width:
            raise ValueError("too narrow")
        return text
"""


def test_a_table_is_drawn_after_a_row_was_added_on_the_plainest_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutator that grows what the instance holds (`add_row`) comes before the one that
    only sets an attribute (`set_align`); a parameter the body iterates through `enumerate`
    is given a list; and the calls made after it are also made on `Table()`, not only on the
    first instance (built on a boundary, where what was put in may not fit)."""
    tree = ast.parse(TABLE)
    table = next(node for node in tree.body if isinstance(node, ast.ClassDef))
    assert [method.name for method in mutators(table, {"Table": table})] == ["add_row", "set_align"]
    calls = candidate_calls(TABLE, "Table.add_row")
    assert calls[0].arguments.startswith("["), calls[0]

    project = make_project(tmp_path, {"table": TABLE})
    results = analyze(project, "pkg/table.py", capsys, monkeypatch)
    text = written(results["Table.draw"], "tests/test_table_Table_draw.py", project)
    assert "    table = Table()\n    table.add_row([1, 2, 3])\n" in text, text
    assert "    assert table.draw() == '1 | 2  | 3  '\n" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_parameter_read_by_a_string_key_is_given_a_dict_first() -> None:
    """`mdict['hours']` says mapping, though `mdict.pop(...)` is a list's method too: a list
    given to it only ever took the early return (pytimeparse's `_interpret_as_minutes`)."""
    source = (
        "def as_minutes(text, mdict):\n"
        "    if text.count(':') == 1 and 'hours' not in mdict:\n"
        "        mdict['hours'] = mdict['mins']\n"
        "        mdict.pop('secs')\n"
        "    return mdict\n"
    )
    calls = candidate_calls(source, "as_minutes")
    mdicts = [ast.parse(f"_({c.arguments})", mode="eval").body.args[1] for c in calls]  # type: ignore[attr-defined]
    assert all(isinstance(node, ast.Dict) for node in mdicts[:3]), [ast.unparse(n) for n in mdicts]


def test_a_dict_parameter_is_given_the_keys_the_body_reads_and_the_values_it_compares() -> None:
    """iso8601's `parse_timezone(matches)` reads a regular expression's groups by name: a
    generic `{'a': 1}` only ever raised KeyError. Given the keys, with `'Z'` where the body
    compares with it, the call reaches both the early return and the arithmetic."""
    source = (
        "def offset(matches):\n"
        "    if matches['timezone'] == 'Z':\n"
        "        return 0\n"
        "    sign = -1 if matches.get('sign') == '-' else 1\n"
        "    return sign * int(matches['hours']) * 60\n"
    )
    given = [c.arguments for c in candidate_calls(source, "offset")]
    assert given[:3] == [
        "{'timezone': 'Z', 'sign': '-', 'hours': '1'}",
        "{'timezone': '1', 'sign': '1', 'hours': '1'}",
        "{'timezone': 1, 'sign': 1, 'hours': 1}",
    ], given


USAGE = """class Usage(Exception):
    text = ""

    def __init__(self, message=""):
        super().__init__(message + ": " + self.text)


class Options(dict):
    def __repr__(self):
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in sorted(self.items())) + "}"


def parse(spec: str, words: list):
    Usage.text = spec
    if not spec.startswith("usage:"):
        raise Usage("not a usage")
    return Options((word, True) for word in words)
"""


def test_a_class_attribute_the_call_sets_is_put_back_after_the_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`parse` sets `Usage.text` before it reads it: other tests would see it, so the test
    hands it to pytest's monkeypatch, which puts it back. What it returns, a dict subclass whose
    repr is a dict's, is compared with the dict."""
    project = make_project(tmp_path, {"usage": USAGE})
    results = analyze(project, "pkg/usage.py", capsys, monkeypatch)
    text = written(results["parse"], "tests/test_usage_parse.py", project)
    assert "    monkeypatch.setattr(Usage, 'text', Usage.text)\n" in text, text
    assert "(monkeypatch):\n    # parse sets Usage.text: monkeypatch puts it back" in text
    assert "        ('usage:', [1, 2, 3], {1: True, 2: True, 3: True}),\n" in text
    assert "def test_parse(spec, words, expected, monkeypatch):\n" in text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_typevar_bound_to_a_callable_gets_a_function_never_a_literal() -> None:
    source = (
        "import typing as t\n\n"
        'F = t.TypeVar("F", bound=t.Callable[..., t.Any])\n\n\n'
        "class Signal:\n"
        "    def __init__(self):\n"
        "        self.receivers = {}\n\n"
        "    def connect(self, receiver: F) -> F:\n"
        "        self.receivers[id(receiver)] = receiver\n"
        "        return receiver\n\n"
        "    def send(self, sender):\n"
        "        return [r(sender) for r in self.receivers.values()]\n\n"
        "    @contextmanager\n"
        "    def muted(self):\n"
        "        self.is_muted = True\n"
        "        yield\n"
    )
    # No function of the module fits: the builtins that take one argument, never connect(3).
    assert [c.arguments for c in candidate_calls(source, "Signal.connect")] == ["str", "len"]
    # connect(str) is a step before send (muted, a context manager, is not).
    steps = {c.setup for c in candidate_calls(source, "Signal.send")}
    assert steps == {(), (("connect", "str"),)}
    # A module that defines `str` itself gets no builtin of that name.
    shadowed = source + "\n\ndef str(value):\n    return value\n"
    assert [c.arguments for c in candidate_calls(shadowed, "Signal.connect")] == ["str"]
    ready = source + "\n\ndef shout(sender):\n    return str(sender).upper()\n"
    sequenced = [c for c in candidate_calls(ready, "Signal.send") if c.setup]
    assert sequenced and all(c.setup[0] == ("connect", "shout") for c in sequenced)


HUB = """from typing import Any, Callable


class Hub:
    def __init__(self) -> None:
        self.handlers: list[Callable[..., Any]] = []

    def on(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        self.handlers.append(handler)
        return handler

    def emit(self, value: Any) -> list[Any]:
        return [handler(value) for handler in self.handlers]
"""


def test_a_callback_parameter_the_module_has_no_function_for_is_given_str(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event hub whose module defines no function: `on(handler)` got no call at all, and
    `emit` ran on a hub with no handler (`== []` only). A builtin is a real function a reader
    knows: `on(str)` returns it and holds it, and `emit` after it returns what `str` made."""
    project = make_project(tmp_path, {"hub": HUB})
    results = analyze(project, "pkg/hub.py", capsys, monkeypatch)
    on = written(results["Hub.on"], "tests/test_hub_Hub_on.py", project)
    assert "    assert hub.on(str) is str\n    assert hub.handlers == [str]\n" in on, on
    assert "import str" not in on and "import len" not in on, on
    emit = written(results["Hub.emit"], "tests/test_hub_Hub_emit.py", project)
    assert "    hub.on(str)\n    assert hub.emit(value) == expected\n" in emit, emit
    assert "        (3, ['3']),\n" in emit, emit
    for name in ("on", "emit"):
        assert "passed" in passes_under_pytest(project / f"tests/test_hub_Hub_{name}.py", tmp_path)


WORDS = """class Words:
    def __init__(self) -> None:
        self._irregular = {"child": "children"}
        self._notes = []

    def add_irregular(self, single: str, plural: str) -> None:
        self._irregular[single.lower()] = plural.lower()

    def add_note(self, note: str) -> None:
        self._notes.append(note)

    def plural(self, word: str) -> str:
        return self._irregular.get(word, word + "s")
"""


def test_a_mutator_that_returns_nothing_is_tested_through_what_reads_it_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`add_irregular` returns None and keeps its rule where no literal shows it: its test was
    `assert words.add_irregular('abc', ...) is None`, or none. Now the reader after it, on the
    same instance, shows the rule; a mutator whose effect the readers do not show (`add_note`)
    still gets no test: the read is compared with one from an instance built without the call."""
    project = make_project(tmp_path, {"words": WORDS})
    results = analyze(project, "pkg/words.py", capsys, monkeypatch)
    text = written(
        results["Words.add_irregular"], "tests/test_words_Words_add_irregular.py", project
    )
    assert "    words = Words()\n    words.add_irregular('abc', " in text, text
    assert "    assert words.plural('abc') == " in text, text
    assert "is None" not in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)
    assert "changed nothing a test can see" in not_done(results["Words.add_note"])


CHECKS = """class Words:
    def __init__(self) -> None:
        self._plurals = {"men": "man", "mice": "mouse"}
        self._singulars = {"man": "men", "mouse": "mice"}

    def is_plural(self, word: str) -> bool:
        return self._check(word, self._plurals, self._singulars)

    def _check(self, word, keep, replace):
        token = word.lower()
        if token in keep:
            return True
        if token in replace:
            return False
        return self._ends_in_s(token)

    def _ends_in_s(self, token):
        return token.endswith("s")
"""


def test_the_branches_of_the_private_functions_a_method_calls_count_with_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`is_plural` is one line; its branches are in the `_check` it calls (and `_ends_in_s`,
    which that calls). Counted only in its own lines, one call covered it all: two rows, `True`
    and `False`, and the table's words never tried. Counted with its private helpers, the
    branch cover keeps a word of each table too."""
    project = make_project(tmp_path, {"words": CHECKS})
    results = analyze(project, "pkg/words.py", capsys, monkeypatch)
    text = written(results["Words.is_plural"], "tests/test_words_Words_is_plural.py", project)
    assert "('men', True)" in text and "('man', False)" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)
    tree = ast.parse(CHECKS)
    is_plural = find_definition(tree, "Words", "is_plural")
    assert is_plural is not None
    helpers = [f.name for f in private_definitions(tree, is_plural)]
    assert helpers == ["_check", "_ends_in_s"]


def test_a_random_result_is_seen_to_vary_within_one_probe_run(tmp_path: Path) -> None:
    """Every child forks the same state of `random`, so the two probe runs were two draws: a
    function returning one of few words passed both by chance and failed in a suite. The child
    now draws again after reseeding, and the selection drops a call whose result varies."""
    import remora.tool_library.call_probe as call_probe

    project = make_project(
        tmp_path,
        {
            "draws": "import random\n\n\ndef coin():\n    return random.randrange(10**9)\n\n\n"
            "def double(x):\n    return 2 * x\n"
        },
    )
    module, path, lines = probed_module(project, "draws")
    coin = call_probe.observe(
        module, path, lines, {"function": "coin", "method": None, "lines": [[4, 5]]},
        {"arguments": "", "instance": None}, False,
    )  # fmt: skip
    double = call_probe.observe(
        module, path, lines, {"function": "double", "method": None, "lines": [[8, 9]]},
        {"arguments": "3", "instance": None}, False,
    )  # fmt: skip
    assert coin["varies"] is True and double["varies"] is False and double["value"] == "6"
    runs = [[coin], [dict(coin, varies=False)]]
    chosen = select_calls([candidate("")], runs, [], "pkg.draws", "coin")
    assert chosen["dropped"] == ["coin(): returns what random numbers or the clock give"]
    # Only its kind, which every run saw, is pinned (nothing else of it could be).
    assert [(c["seen"]["kind_only"], c["seen"]["value"]) for c in chosen["chosen"]] == [
        (True, None)
    ]
    other = [[coin], [dict(coin, type="str")]]
    assert select_calls([candidate("")], other, [], "pkg.draws", "coin")["chosen"] == []


def test_the_model_is_not_asked_when_what_a_call_returns_is_the_obstacle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`open_handle` returns a Handle whose state is all private: the calls built from its
    signature go through and return nothing a test can hold, and other arguments would return
    another such Handle, so the model (which has calls to propose) is not asked. Where a call
    was pinned and a branch is left, it is (test_type_errors_are_pinned_only_where_...)."""
    project = make_project(
        tmp_path,
        {
            "handles": "class Handle:\n"
            "    def __init__(self, path):\n"
            "        self._path = path\n\n\n"
            "def open_handle(path: str) -> Handle:\n"
            "    return Handle(path)\n"
        },
    )
    proposals = {"open_handle": ["'/tmp/x')", "'')"]}
    results = analyze(project, "pkg/handles.py", capsys, monkeypatch, proposals=proposals)

    assert "no call of open_handle could be pinned" in not_done(results["open_handle"])
    assert results["open_handle"]["usage"]["requests"] == 0


WALKER = """class Walker:
    \"\"\"Evaluates the nodes of a parsed expression.\"\"\"

    def __init__(self, names=None):
        self.names = dict(names or {})

    def on_constant(self, node):
        return node.value

    def on_sum(self, node):
        return node.left + node.right


class Pair:
    def __init__(self, left, right):
        self.left = left
        self.right = right
"""


def test_the_model_is_not_asked_for_an_attribute_no_allowed_value_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """asteval's `on_constant(node)` reads `node.value` of an ast node: every call raised an
    AttributeError for `value`, and the model was asked, though its calls pass the same
    allow-list and no value it may write (a literal, a standard value, one of the module's own
    objects) has that attribute: 43 such jobs made 215 requests for nothing. Where the module's
    own objects have it (`Pair(...).left`), the model is still asked."""
    project = make_project(tmp_path, {"walker": WALKER})
    proposals = {"on_constant": ["3)", "'abc')"], "on_sum": ["Pair(1, 2))", "3)"]}
    results = analyze(project, "pkg/walker.py", capsys, monkeypatch, proposals=proposals)

    constant = results["Walker.on_constant"]
    assert "no call of Walker.on_constant could be pinned" in not_done(constant)
    assert constant["usage"]["requests"] == 0
    assert results["Walker.on_sum"]["usage"]["requests"] > 0
    text = written(results["Walker.on_sum"], "tests/test_walker_Walker_on_sum.py", project)
    assert ".on_sum(Pair(1, 2)) == 3" in text, text


def test_the_attributes_a_module_may_give_its_objects_are_known_or_said_to_be_unknown() -> None:
    """What `attributes_defined` reads: class bodies, attributes written, `setattr` with a
    literal name, builtin bases; unknown (None) where a class sets its own attributes by
    computed names, reads them through `__getattr__`, or derives from a class imported."""
    known = attributes_defined(ast.parse(WALKER + "setattr(Pair, 'total', 0)\n"))
    assert known is not None and {"on_sum", "left", "names", "total"} <= known
    assert "value" not in known
    assert "keys" in (attributes_defined(ast.parse("class Table(dict):\n    pass\n")) or ())
    for unknown in (
        "class A:\n    def __init__(self, **kw):\n        for k in kw:\n"
        "            setattr(self, k, kw[k])\n",
        "class A:\n    def __init__(self, **kw):\n        self.__dict__.update(kw)\n",
        "class A:\n    def __getattr__(self, name):\n        return name\n",
        "from collections import OrderedDict\n\n\nclass A(OrderedDict):\n    pass\n",
    ):
        assert attributes_defined(ast.parse(unknown)) is None, unknown


COLORS = """\
from typing import NamedTuple


class Color(NamedTuple):
    name: str
    triplet: tuple

    @classmethod
    def from_rgb(cls, red: int, green: int, blue: int) -> "Color":
        if not 0 <= red <= 255:
            raise ValueError("red out of range")
        return cls(f"#{red:02x}{green:02x}{blue:02x}", (red, green, blue))

    @staticmethod
    def clamp(value: int) -> int:
        return max(0, min(255, value))
"""


def test_class_and_static_methods_are_called_on_the_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Color.from_rgb(...)` and `Color.clamp(...)` read no instance: they are called on the
    class, as code calls them, and the allow-list takes that form for them (not for a plain
    method, whose case is `Color(...).method(...)`)."""
    project = make_project(tmp_path, {"colors": COLORS})
    results = analyze(project, "pkg/colors.py", capsys, monkeypatch)

    text = written(results["Color.from_rgb"], "tests/test_colors_Color_from_rgb.py", project)
    assert "    assert Color.from_rgb(red, green, blue) == expected\n" in text
    assert "Color(name='#000a00', triplet=(0, 10, 0))" in text
    assert "        Color.from_rgb(-1, " in text  # under pytest.raises(ValueError, ...)
    assert "color = " not in text
    clamp = written(results["Color.clamp"], "tests/test_colors_Color_clamp.py", project)
    assert "    assert Color.clamp(value) == expected\n" in clamp
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)
    with pytest.raises(ValueError, match=r"one call Color\.from_rgb"):
        parse_test_case("Color('a', (1, 2, 3)).from_rgb(1, 2, 3)", "Color.from_rgb", COLORS)
    assert parse_test_case("Color.clamp(300) == 255", "Color.clamp", COLORS)["kind"] == "equals"


TAGS = """from typing import Iterable, NamedTuple


class Tag(NamedTuple):
    name: str
    weight: int


class TagSet:
    def __init__(self, known: Iterable[Tag]) -> None:
        self._known = {tag.name for tag in known}
        self._chosen: set[str] = set()

    def __len__(self) -> int:
        return len(self._chosen)

    def __repr__(self) -> str:
        return repr(sorted(self._chosen))

    def choose(self, name: str) -> None:
        if name not in self._known:
            raise ValueError(f"unknown tag: {name}")
        self._chosen.add(name)
"""


def test_a_collection_of_the_modules_class_is_given_in_a_collection_and_read_back_filled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`known: Iterable[Tag]` was given one `Tag(...)`: iterating its fields, the constructor
    raised AttributeError and no method got a test. Now a list of tags; and a reader is pinned
    on the instance a mutator filled (`len(tag_set) == 1` after `choose`), beside the empty
    instance's `0`, which alone pins little."""
    project = make_project(tmp_path, {"tags": TAGS})
    results = analyze(project, "pkg/tags.py", capsys, monkeypatch)
    choose = written(results["TagSet.choose"], "tests/test_tags_TagSet_choose.py", project)
    assert "TagSet([Tag(" in choose and "pytest.raises(ValueError" in choose, choose
    size = written(results["TagSet.__len__"], "tests/test_tags_TagSet___len__.py", project)
    assert "    assert len(tag_set) == 0\n" in size, size
    assert "    tag_set.choose('abc')\n    assert len(tag_set) == 1\n" in size, size
    shown = written(results["TagSet.__repr__"], "tests/test_tags_TagSet___repr__.py", project)
    assert "    assert repr(tag_set) == \"['abc']\"\n" in shown, shown
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_collection_annotation_holds_the_instances() -> None:
    built = ["Tag('abc', 3)", "Tag('x', 1)"]
    assert held_in("Iterable[Tag]", "Tag", built)[:2] == [
        "[Tag('abc', 3)]",
        "[Tag('abc', 3), Tag('x', 1)]",
    ]
    assert held_in("Optional[list[Tag]]", "Tag", built)[0] == "[Tag('abc', 3)]"
    assert held_in("tuple[Tag, ...]", "Tag", built)[0] == "(Tag('abc', 3),)"
    assert held_in("dict[str, Tag]", "Tag", built)[0] == "{'abc': Tag('abc', 3)}"
    assert held_in("set[Tag] | None", "Tag", built)[0] == "{Tag('abc', 3)}"
    assert held_in("Tag", "Tag", built) == built
    assert held_in("Optional[Tag]", "Tag", built) == built
    assert held_in("dict[Tag, int]", "Tag", built) == built  # keys: not built here
    # Quoted, generic, and held a level deeper (pygtrie's `queue: list[Iterable['_Node[S,
    # V]']]` was given one node, and `queue.append` raised AttributeError on every call).
    assert held_in("'Tag'", "Tag", built) == held_in("Tag[K, V]", "Tag", built) == built
    assert held_in("list[Iterable['Tag[S, V]']]", "Tag", built) == [
        "[[Tag('abc', 3)]]",
        "[[Tag('abc', 3)], [Tag('abc', 3), Tag('x', 1)]]",
        "[]",
    ]
    assert held_in("list[int]", "Tag", built) == built  # not held: as before


BOARD = '''class Board:
    def __init__(self, width=None, cells=None):
        self.width = width
        self.cells = cells

    def row(self, index):
        if self.width is None:
            raise ValueError("an empty board has no rows")
        start = index * self.width
        return self.cells[start : start + self.width]


def board(rows):
    """A board of the given rows.

    >>> board([[1, 2], [3, 4]]).width
    2
    """
    return Board(len(rows[0]), [cell for row in rows for cell in row])
'''


def test_a_class_the_module_builds_through_a_function_is_tested_on_what_that_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kdtree's KDNode is built by `create([...])`; its constructor alone gives an empty node,
    and every method tested on `KDNode()` raised. A public function of the module that builds
    the class (every `return` constructs it) is called as its examples call it, and the
    method tested on what it built. A `KeyError` of a number (`cells[0]` of a dict given for
    a sequence) is not pinned: the call's fault, not the code's behaviour."""
    project = make_project(tmp_path, {"board": BOARD})
    results = analyze(project, "pkg/board.py", capsys, monkeypatch)
    text = written(results["Board.row"], "tests/test_board_Board_row.py", project)
    assert "from pkg.board import Board, board  # noqa: E402\n" in text, text  # isort's order
    # Not `board = board(...)`: the name is the function's (an UnboundLocalError).
    assert "    board_ = board([[1, 2], [3, 4]])\n    assert board_.row(index) == " in text, text
    assert "        (1, [3, 4]),\n" in text, text
    assert "KeyError" not in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


SIZES = """import numbers
import re

PATTERN = re.compile(r"(\\d+)([kM]?)")
UNITS = {"": 1, "k": 1024, "M": 1024 * 1024}


class Size:
    \"\"\"An amount of bytes, built from the match of a size text (`parse_size`).\"\"\"

    def __init__(self, match):
        self.count = int(match.group(1))
        self.bytes = self.count * UNITS[match.group(2)]

    def __lt__(self, other):
        if isinstance(other, numbers.Number):
            return self.bytes < other
        return self.bytes < other.bytes

    def __sub__(self, other):
        if isinstance(other, numbers.Number):
            return self.bytes - other
        return self.bytes - other.bytes


def parse_size(text) -> Size:
    \"\"\"The size a text such as '4k' says.

    >>> parse_size('4k').bytes
    4096
    \"\"\"
    return Size(PATTERN.fullmatch(text))
"""


def test_an_operator_is_given_another_of_its_kind_built_as_its_receiver_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """bitmath's `Bitmath.__lt__(other)` compares with a number or with another Bitmath, and a
    Bitmath is built by `parse_string('4k')`: the receiver could be built so, but the allow-list
    refused the same call as an argument, so the second branch was never taken and the model
    was asked for it in 15 of the module's jobs. An argument may be built as a receiver is (a
    public function of the module that builds one of its classes, with allowed arguments)."""
    project = make_project(tmp_path, {"sizes": SIZES})
    results = analyze(project, "pkg/sizes.py", capsys, monkeypatch)
    for method, operator in (("__lt__", "<"), ("__sub__", "-")):
        text = written(results[f"Size.{method}"], f"tests/test_sizes_Size_{method}.py", project)
        assert "from pkg.sizes import parse_size  # noqa: E402\n" in text, text
        assert "size = parse_size('4k')\n" in text, text
        assert "parse_size('4k')," in text or f"{operator} parse_size('4k')" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_value_error_from_unpacking_an_argument_of_another_shape_is_not_pinned(
    tmp_path: Path,
) -> None:
    """python-slugify's `add_uppercase_char(char_list)` reads pairs (`char, xlate = item`);
    given `['a', 'b']` it raised "not enough values to unpack", and that was pinned: a test of
    the argument, like a TypeError. Unpacking what the code computed (`text.split('=')`) is its
    behaviour for such a text, and stays."""
    import remora.tool_library.call_probe as call_probe

    source = (
        "def upper_pairs(pairs):\n    for item in pairs:\n        low, up = item\n"
        "    return pairs\n\n\ndef setting(text):\n    key, value = text.split('=')\n"
        "    return key\n"
    )
    project = make_project(tmp_path, {"pairs": source})
    module, path, lines = probed_module(project, "pairs")
    seen = [
        call_probe.observe(
            module,
            path,
            lines,
            {"function": name, "method": None, "lines": [[1, 9]]},
            {"arguments": arguments, "instance": None},
            False,
        )
        for name, arguments in (("upper_pairs", "['a', 'b']"), ("setting", "'abc'"))
    ]
    assert [item["exception"] for item in seen] == ["ValueError", "ValueError"], seen
    assert [item["site_unpacks_name"] for item in seen] == [True, False]
    assert not assertable(seen[0], [], "pkg.pairs")
    assert assertable(seen[1], [], "pkg.pairs")


def test_a_key_error_of_a_number_is_the_calls_fault_unless_the_module_raises_it() -> None:
    """`point[0]` of `{'a': 1}` given where a sequence is read raises KeyError(0): a test of
    that is a test of the argument. A KeyError the module raises itself is its behaviour."""
    read = {"outcome": "raised", "exception": "KeyError", "exception_bases": ["LookupError"]}
    assert not assertable(read | {"message": "0", "site_is_raise": False}, [], "pkg.points")
    assert assertable(read | {"message": "'x'", "site_is_raise": False}, [], "pkg.points")
    assert assertable(read | {"message": "3", "site_is_raise": True}, [], "pkg.points")


SPANS = """from datetime import datetime, timedelta
from typing import Union


def span(moment: Union[datetime, timedelta, int]) -> tuple[timedelta, bool]:
    if isinstance(moment, timedelta):
        delta = moment
    elif isinstance(moment, datetime):
        delta = datetime.now() - moment
    else:
        delta = datetime.now() - datetime.fromtimestamp(moment)
    return delta, delta >= timedelta(0)


def in_days(moment: Union[datetime, int]) -> str:
    return f"{(datetime.now() - datetime.fromtimestamp(moment)).days // 365} years"
"""


def test_a_call_that_reads_the_clock_is_not_pinned_and_a_union_gets_its_standard_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`in_days(3)` is '56 years' for a year: run twice in a row it looked stable, and its test
    would fail later. What a call that read the clock (`datetime.now()`, `time.time()`)
    returned is not pinned, only its kind. `Union[datetime, timedelta, int]` was given only
    numbers (the members of no plain kind were left out): now also timedeltas, whose result
    holds, and a tuple holding one is pinned through its repr."""
    project = make_project(tmp_path, {"spans": SPANS})
    results = analyze(project, "pkg/spans.py", capsys, monkeypatch)
    text = written(results["span"], "tests/test_spans_span.py", project)
    assert "import datetime\n" in text, text
    assert "(datetime.timedelta(days=1), (datetime.timedelta(days=1), True))" in text, text
    assert "(datetime.timedelta(days=-1), (datetime.timedelta(days=-1), False))" in text, text
    assert "datetime.datetime(" not in text and "span(3)" not in text, text
    in_days = written(results["in_days"], "tests/test_spans_in_days.py", project)
    assert in_days.count("def test_") == 1 and "    assert isinstance(in_days(" in in_days
    assert "years" not in in_days, in_days
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_call_site_that_unpacks_a_mapping_is_no_plain_call_and_never_none_equals() -> None:
    """semver's `Version.replace(**parts)` is called as `self.replace(**parts)` elsewhere: the
    call site was read as plain (a `**` keyword's value was not looked at) and written
    `None=parts`, which failed the job with a SyntaxError. A `**mapping` is written as such,
    and a name in it makes the call site no call of plain values."""
    source = (
        "class Version:\n"
        "    def __init__(self, major=0):\n        self.major = major\n\n"
        "    def replace(self, **parts):\n        return Version(**parts)\n"
    )
    sources = {"pkg/bump.py": "def bump(v, parts):\n    return v.replace(**parts)\n"}
    calls = candidate_calls(source, "Version.replace", sources)
    assert calls and not any("None=" in call.arguments for call in calls)
    assert not any(call.origin == "call site" for call in calls)
    assert call_sites("replace", True, {"a.py": "v.replace(**{'major': 2})\n"}) == [
        "**{'major': 2}"
    ]


MOMENTS = """import datetime


def shifted(value, hours):
    if isinstance(value, datetime.datetime):
        return value + datetime.timedelta(hours=hours)
    return value + hours / 2
"""


def test_a_project_that_colours_pytest_and_a_table_of_floats_and_datetimes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """humanize's `addopts = "--color=yes"`: pytest's report, read line by line, had every
    PASSED behind a colour code, and ten jobs "ran no test". And a table whose rows return a
    float and a datetime was asserted with `pytest.approx`, which refuses a datetime: each
    failed under pytest. pytest runs with `--color=no`; approx only for a table of numbers."""
    project = make_project(tmp_path, {"moments": MOMENTS})
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text() + '\n[tool.pytest.ini_options]\naddopts = "--color=yes"\n'
    )
    results = analyze(project, "pkg/moments.py", capsys, monkeypatch)
    text = written(results["shifted"], "tests/test_moments_shifted.py", project)
    assert "datetime.datetime(" in text and "pytest.approx(expected)" not in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_attribute_hooks_are_written_as_attributes_only_for_names() -> None:
    """`__getattr__('colour')` is written `settings.colour`; a name the probe got that is no
    identifier (or a keyword, or one Python folds to another) stays a string argument, so no
    text of a call becomes code of its own."""
    assert method_call("s", "__getattr__", ["'colour'"]) == "s.colour"
    assert method_call("s", "__setattr__", ["'colour'", "'red'"]) == "s.colour = 'red'"
    assert method_call("s", "__delattr__", ["'colour'"]) == "del s.colour"
    hostile = "'x; import os'"
    assert method_call("s", "__getattr__", [hostile]) == f"getattr(s, {hostile})"
    assert method_call("s", "__setattr__", ["'class'", "1"]) == "setattr(s, 'class', 1)"
    assert method_call("s", "__delattr__", ["'\ufb01le'"]) == "delattr(s, '\ufb01le')"
    assert method_call("s", "__getattr__", ["name"]) == "getattr(s, name)"


MACHINE = """\
class Machine:
    def __init__(self, events, initial):
        self.events = list(events)
        self.state = initial

    def can(self, event):
        return event in self.events
"""


def test_a_method_is_asked_first_for_the_words_its_instance_was_built_with() -> None:
    """`Machine(['go', 'stop'], 'idle').can(...)` is asked `can('go')` before `can('abc')`: what
    was put in is what is then looked for; a sentence is no such word."""
    uses = {"app.py": "machine = Machine(['go', 'stop'], 'idle')\n"}
    built = "Machine(['go', 'stop'], 'idle')"
    calls = [
        c.arguments for c in candidate_calls(MACHINE, "Machine.can", uses) if c.instance == built
    ]
    assert calls[:3] == ["'go'", "'stop'", "3"]
    said = {"app.py": "machine = Machine(['one two'], 'idle')\n"}
    assert candidate_calls(MACHINE, "Machine.can", said)[0].arguments != "'one two'"


METERS = """class Meter:
    def __init__(self, unit="m"):
        self.unit = unit

    def read(self, text):
        if text == "-".join(["a"] * 9):
            return "long"
        return text.upper()


class Sealed:
    def __init__(self, key):
        if key != "-".join(["k"] * 9):
            raise ValueError("wrong key")
        self.key = key

    def read(self, text):
        if text == "-".join(["a"] * 9):
            return "long"
        return text.upper()
"""


def test_the_model_is_asked_for_a_constructor_only_where_the_tools_built_no_receiver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A method with a branch the tools' calls leave asks the model for arguments; for its
    class's constructor only where none of the tools' receivers was built (`Sealed`, whose key
    only the model gives): on pygtrie and the fixed corpus the constructors it proposed for a
    class the tools had built never gave a test the tools' did not."""
    project = make_project(tmp_path, {"meters": METERS})
    asked: list[str] = []
    key = "'" + "-".join(["k"] * 9) + "'"
    proposals = {"Sealed": [key + ")"], "read": ["'" + "-".join(["a"] * 9) + "')"]}
    results = analyze(
        project, "pkg/meters.py", capsys, monkeypatch, proposals=proposals, asked=asked
    )
    assert any(line.endswith("meter.read(") for line in asked), asked
    assert not any(line.endswith("Meter(") for line in asked), asked
    assert any(line.endswith("Sealed(") for line in asked), asked
    sealed = written(results["Sealed.read"], "tests/test_meters_Sealed_read.py", project)
    assert f"Sealed({key})" in sealed, sealed
    meter = written(results["Meter.read"], "tests/test_meters_Meter_read.py", project)
    assert "'long'" in meter, meter


BAG = """class Bag:
    def __init__(self, items=(), /, **named):
        self.items = [*items, *named]

    def size(self, at_least=0, /):
        return max(len(self.items), at_least)
"""


def test_a_positional_only_parameter_is_passed_by_position() -> None:
    """pygtrie's `Trie(other=(), /, **kwargs)` was built as `Trie(other=3)`: by keyword, the
    value went to `**kwargs`, a trie holding one key named "other", and its methods' tests
    pinned that. A positional-only parameter is passed by position."""
    cases = [c.case("Bag.size") for c in candidate_calls(BAG, "Bag.size")]
    assert cases and not any("items=" in case or "at_least=" in case for case in cases), cases
    assert "Bag((1, 2)).size()" in cases and "Bag((1, 2)).size(3)" in cases, cases


TOKENS = """class Token:
    def __init__(self, type, value, start=None, end=None):
        self.type = type
        self.value = value
        self.start = start
        self.end = end

    def __repr__(self):
        return "Token(%r, %r)" % (self.type, self.value)
"""


def test_a_parameter_whose_only_value_is_its_default_does_not_stop_a_constructor() -> None:
    """funcparserlib's `Token(type, value, start=None, end=None)`: `start` has no value but
    its default None, and the one typed constructor the tools build was dropped for it, so
    every method ran on a bare `Token()`, which raised TypeError (only the model's
    constructors gave tests). A parameter with a default goes without."""
    instances = {c.instance for c in candidate_calls(TOKENS, "Token.__repr__")}
    assert "Token('abc', 'abc')" in instances and "Token()" not in instances, instances


INDEX = '''class Index(int):
    """A position in a list of `size` items."""

    def __new__(cls, value: int, size: int):
        if value >= size:
            raise ValueError("past the end")
        made = super().__new__(cls, value)
        made.size = size
        return made

    def from_end(self) -> int:
        return self.size - int(self)
'''


def test_a_class_built_by_its_new_is_built_with_its_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An int subclass has `__new__` and no `__init__` (dpath's `ListIndex(value,
    list_length)`): it was built as `Index()`, which raised TypeError, and nothing of it was
    tested."""
    project = make_project(tmp_path, {"index": INDEX})
    results = analyze(project, "pkg/index.py", capsys, monkeypatch)
    text = written(results["Index.from_end"], "tests/test_index_Index_from_end.py", project)
    assert "Index(3, 10)" in text or "Index(value=3, size=10)" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)
