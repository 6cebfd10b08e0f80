"""pydoclint as the docstring agent's ground truth: the real pydoclint (run in the OS sandbox, as
the agent runs it) on code written for these tests, one function or class per pydoclint code.
Each test asserts what `remora analyze --agents docstring --fix` reported (pydoclint's code and
message, on the node that owns it), what it wrote, and that pydoclint run again on the fixed
file reports none of the fixed codes. The model is the scripted one (tests/test_agent_docstring.py):
it writes "The NAME to use." where a sentence is needed, and drafts stay suggestions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer
from tests.test_agent_docstring import DocstringWriter, docstring_of, without_docstrings

PYDOCLINT = shutil.which("pydoclint") or str(Path(__file__).parents[1] / ".venv/bin/pydoclint")

GOOGLE = '''\
"""Functions whose docstrings disagree with their code (Google style)."""

from collections.abc import Iterator


def scale(value, factor):
    """Scale a value.

    Args:
        value: The value to scale.
        ratio: How much to scale it by.

    Returns:
        The scaled value.
    """
    return value * factor


def area(width):
    """Compute an area.

    Args:
        width: The width of the square.
        height: The height of the rectangle.

    Returns:
        The area.
    """
    return width * width


def pair(first, second):
    """Pair two values.

    Args:
        second: The value that goes second.
        first: The value that goes first.

    Returns:
        The pair.
    """
    return (first, second)


def greet(name, punctuation):
    """Greet someone.

    Args:
        name: Who to greet.

    Returns:
        The greeting.
    """
    return "Hello " + name + punctuation


def validated(check):
    def wrapper(*args):
        try:
            return check(*args)
        except ValueError:
            return False

    return wrapper


@validated
def positive(value):
    """Say whether a value is positive.

    Args:
        value: The value to check.

    Returns:
        Whether it is positive.
    """
    if value is None:
        raise ValueError("no value")
    return value > 0


def clamp(value, low, high):
    """Clamp a value between two bounds.

    Args:
        value: The value to clamp.
        low: The lowest value allowed.
        high: The highest value allowed.

    Returns:
        The value, within the bounds.

    Raises:
        (ValueError): If `low` is greater than `high`.
    """
    if low > high:
        raise ValueError("low cannot be greater than high")
    return max(low, min(value, high))


def lookup(table, key):
    """Look a key up.

    Args:
        table: Where to look.
        key: What to look for.

    Returns:
        The value.

    Raises:
        KeyError: If the key is missing.
    """
    if key not in table:
        raise ValueError("the key is not in the table")
    return table[key]


def check(amount):
    """Check an amount.

    Args:
        amount: The amount to check.
    """
    if amount < 0:
        raise ValueError("amounts must not be negative")


def log(message):
    """Print a message.

    Args:
        message: What to print.

    Returns:
        Whether it was printed.
    """
    print(message)


def count(limit: int) -> Iterator[int]:
    """Count up to a limit.

    Args:
        limit: Where to stop.

    Returns:
        The numbers up to the limit.
    """
    yield from range(limit)


def double(number):
    """Double a number.

    Args:
        number: The number to double.

    Yields:
        Twice the number.
    """
    return number * 2


def shout(text):
    """Shout a text.

    Args:
        text: The text to shout.

    Yields:
        The text, louder.
    """
    print(text.upper())


def undocumented(value):
    return value


def relay(callback):
    """Call a callback.

    Args:
        callback: What to call.

    Raises:
        RuntimeError: If the callback fails.
    """
    callback()
'''

ATTRIBUTES = '''\
"""Classes whose docstrings disagree with their attributes (Google style)."""


class Box:
    """A box.

    Attributes:
        width: How wide it is.
        colour: What colour it is.
    """

    width = 1


class Shelf:
    """A shelf.

    Attributes:
        size: How many boxes fit.
    """

    capacity = 10


class Crate:
    """A crate.

    Attributes:
        width: How wide it is.
    """

    width = 1
    height = 2
'''

NUMPY = '''\
def halve(number: float) -> float:
    """Halve a number.

    Parameters
    ----------
    number
        The number to halve.
    """
    return number / 2
'''

SPHINX = '''\
def third(number: float) -> float:
    """Divide a number by three.

    :param number: The number to divide.
    """
    return number / 3


def scaled(number: float, factor: float = 2.0) -> float:
    """
    :param number: The number to scale.
    :rtype: float
    """
    return number * factor
'''

FILES = {
    "pkg/google.py": GOOGLE,
    "pkg/attributes.py": ATTRIBUTES,
    "pkg/numpy_style.py": NUMPY,
    "pkg/sphinx_style.py": SPHINX,
}


def make_project(root: Path, files: dict[str, str], pyproject: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "drift"\nversion = "0"\n' + pyproject)
    (root / "remora.yaml").write_text("server:\n  retries: 0\n  timeout: 10\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def analyze(
    root: Path, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, Any]]:
    model = DocstringWriter()
    command = ["analyze", ".", "--agents", "docstring", "--format", "json", "--no-cache", *args]
    with ScriptedModelServer(rule=model, completion=model.complete) as server:
        code = main([*command, "--base-url", server.base_url])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, json.loads(out)


def pydoclint(root: Path, path: str, *options: str) -> list[tuple[int, str]]:
    """(line, code) of what the real pydoclint reports on `path`."""
    ran = subprocess.run(
        [PYDOCLINT, "--quiet", "--show-filenames-in-every-violation-message=True", *options, path],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode in (0, 1), ran.stderr
    found = []
    for line in ran.stderr.splitlines():
        parts = line.split(": ", 2)
        if len(parts) == 3 and parts[1].startswith("DOC"):
            found.append((int(parts[0].rsplit(":", 1)[1]), parts[1]))
    return found


REMORA_DEFAULT = (
    "--arg-type-hints-in-signature=False",
    "--arg-type-hints-in-docstring=False",
    "--check-return-types=False",
    "--check-yield-types=False",
    "--exclude=",
)
"""Remora's configuration for a project without [tool.pydoclint] (with --style)."""


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `remora analyze --fix` over the project: the report, and the files before/after."""
    root = make_project(tmp_path_factory.mktemp("drift") / "project", FILES)
    before = {name: (root / name).read_text() for name in FILES}
    found = {
        name: pydoclint(root, name, f"--style={style}", *REMORA_DEFAULT)
        for name, style in (
            ("pkg/google.py", "google"),
            ("pkg/attributes.py", "google"),
            ("pkg/numpy_style.py", "numpy"),
            ("pkg/sphinx_style.py", "sphinx"),
        )
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        model = DocstringWriter()
        command = ["analyze", ".", "--agents", "docstring", "--format", "json", "--no-cache"]
        out = root / "report.json"
        with ScriptedModelServer(rule=model, completion=model.complete) as server:
            code = main([*command, "--fix", "-o", str(out), "--base-url", server.base_url])
    report = json.loads(out.read_text())
    jobs = {f"{r['node']['file']}::{r['node']['qualified_name']}": r for r in report["results"]}
    after = {name: (root / name).read_text() for name in FILES}
    return {
        "root": root,
        "code": code,
        "jobs": jobs,
        "before": before,
        "after": after,
        "pydoclint_before": found,
    }


def job(fixed: dict[str, Any], name: str) -> dict[str, Any]:
    return fixed["jobs"][name]  # type: ignore[no-any-return]


def rules(result: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(f["rule"], f.get("fix")) for f in result["findings"]]


def recheck(fixed: dict[str, Any], path: str, style: str = "google") -> list[tuple[int, str]]:
    return pydoclint(fixed["root"], path, f"--style={style}", *REMORA_DEFAULT)


def doc(fixed: dict[str, Any], path: str, qualname: str) -> str:
    text = docstring_of(fixed["root"] / path, qualname)
    assert text is not None
    return text


def test_the_agent_reports_what_pydoclint_reports(fixed: dict[str, Any]) -> None:
    """Every pydoclint finding (same file, line, code) is a finding of the job whose node owns
    it, and the agent reports nothing pydoclint does not."""
    expected = {
        (name, line, code)
        for name, found in fixed["pydoclint_before"].items()
        for line, code in found
    }
    expected = {item for item in expected if item[2] not in ("DOC108", "DOC111")}
    reported = {
        (f["file"], f["line"], f["rule"])
        for r in fixed["jobs"].values()
        for f in r["findings"]
        if f["rule"].startswith("DOC")
    }
    assert reported == expected
    assert fixed["code"] == 1  # findings were reported


def test_only_docstrings_changed(fixed: dict[str, Any]) -> None:
    for name, text in fixed["after"].items():
        assert without_docstrings(text) == without_docstrings(fixed["before"][name]), name


def test_doc103_renamed_parameter_keeps_its_description(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/google.py::scale")
    assert rules(result) == [("DOC103", "edit")]
    assert "[factor: ]" in result["findings"][0]["message"]
    assert "factor: How much to scale it by." in doc(fixed, "pkg/google.py", "scale")
    assert "ratio" not in doc(fixed, "pkg/google.py", "scale")
    assert result["outcome"] == "updated" and result["turns"] == 0


def test_doc102_extra_parameter_is_dropped(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/google.py::area")
    assert rules(result) == [("DOC102", "edit"), ("DOC103", "edit")]
    assert doc(fixed, "pkg/google.py", "area") == textwrap.dedent(
        """\
        Compute an area.

        Args:
            width: The width of the square.

        Returns:
            The area."""
    )


def test_doc104_parameters_follow_the_signature(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/google.py::pair")
    assert rules(result) == [("DOC104", "edit")]
    text = doc(fixed, "pkg/google.py", "pair")
    assert text.index("first: The value that goes first.") < text.index("second: The value")


def test_doc101_missing_parameter_is_a_suggestion(fixed: dict[str, Any]) -> None:
    """A new entry needs a sentence: the model's draft is a suggestion, nothing is written."""
    result = job(fixed, "pkg/google.py::greet")
    assert [rule for rule, _ in rules(result)] == ["DOC101", "DOC103"]
    assert all(fix == "suggestion" for _, fix in rules(result))
    assert result["status"] == "suggested" and result["changes"] == []
    assert "punctuation: The punctuation to use." in result["suggestions"][0]["diff"]
    assert "punctuation" not in doc(fixed, "pkg/google.py", "greet")


def test_doc503_a_documented_exception_no_raise_shows_is_left_as_written(
    fixed: dict[str, Any],
) -> None:
    """`KeyError: If the key is missing.` with a body that raises ValueError: the KeyError may
    still come from an operation or a call (humanize's `OverflowError` from `timedelta(...)`
    was dropped, and its sentence given to ValueError). Remora cannot tell: the finding
    stays, without an edit, and says why."""
    result = job(fixed, "pkg/google.py::lookup")
    assert rules(result) == [("DOC503", None)]
    assert "Raised exceptions in the body: ['ValueError']" in result["findings"][0]["message"]
    text = doc(fixed, "pkg/google.py", "lookup")
    assert text.endswith("Raises:\n    KeyError: If the key is missing.")
    assert "KeyError, which no raise statement of the body raises" in result["summary"]


def test_a_raises_section_in_a_form_remora_does_not_read_is_left_as_written(
    fixed: dict[str, Any],
) -> None:
    """validators writes `(ValueError): If ...`: no entry is read from it, and rewriting the
    section from the raise statements replaced the author's sentence with the exception's
    message (`ValueError: low cannot be greater than high`). The finding stays, says why."""
    result = job(fixed, "pkg/google.py::clamp")
    assert [rule for rule, _ in rules(result)] == ["DOC503"]
    assert all(fix is None for _, fix in rules(result))
    text = doc(fixed, "pkg/google.py", "clamp")
    assert text.endswith("Raises:\n    (ValueError): If `low` is greater than `high`.")
    assert "Raises is written in a form Remora does not read" in result["summary"]


def test_no_raises_section_is_added_under_a_decorator_that_may_catch(
    fixed: dict[str, Any],
) -> None:
    """`@validated` turns the body's ValueError into `False` (validators' `@validator` does):
    "Raises: ValueError" would tell callers of something they never see. The finding stays,
    says why; `@functools.lru_cache` and the like pass exceptions through and do not stop it."""
    result = job(fixed, "pkg/google.py::positive")
    assert [rule for rule, _ in rules(result)] == ["DOC501", "DOC503"]
    assert all(fix is None for _, fix in rules(result))
    assert "Raises" not in doc(fixed, "pkg/google.py", "positive")
    assert "decorated with @validated, which may catch" in result["summary"]


def test_doc501_raises_section_added(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/google.py::check")
    assert rules(result) == [("DOC501", "edit"), ("DOC503", "edit")]
    assert doc(fixed, "pkg/google.py", "check").endswith(
        "Raises:\n    ValueError: Amounts must not be negative."
    )


def test_doc202_returns_dropped(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/google.py::log")
    assert rules(result) == [("DOC202", "edit")]
    assert "Returns" not in doc(fixed, "pkg/google.py", "log")


def test_doc402_returns_of_a_generator_made_yields(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/google.py::count")
    assert rules(result) == [("DOC402", "edit")]
    assert doc(fixed, "pkg/google.py", "count").endswith(
        "Yields:\n    The numbers up to the limit."
    )


def test_doc403_yields_made_returns_or_dropped(fixed: dict[str, Any]) -> None:
    double = job(fixed, "pkg/google.py::double")
    assert rules(double) == [("DOC201", "edit"), ("DOC403", "edit")]
    assert doc(fixed, "pkg/google.py", "double").endswith("Returns:\n    Twice the number.")
    shout = job(fixed, "pkg/google.py::shout")
    assert rules(shout) == [("DOC403", "edit")]
    assert "Yields" not in doc(fixed, "pkg/google.py", "shout")


def test_doc201_returns_from_the_annotation_in_numpy_and_sphinx(fixed: dict[str, Any]) -> None:
    """NumPy's Returns entry is the type, Sphinx's :rtype: too: both come from the annotation."""
    assert rules(job(fixed, "pkg/numpy_style.py::halve")) == [("DOC201", "edit")]
    assert doc(fixed, "pkg/numpy_style.py", "halve").endswith("Returns\n-------\nfloat")
    assert rules(job(fixed, "pkg/sphinx_style.py::third")) == [("DOC201", "edit")]
    assert doc(fixed, "pkg/sphinx_style.py", "third").endswith(":rtype: float")


def test_a_docstring_without_a_summary_gets_its_missing_parameter(fixed: dict[str, Any]) -> None:
    """A docstring that opens with its fields (titlecase's, in the wild): the model drafts the
    missing parameter after the prompt's empty summary; the tool script crashed on it."""
    result = job(fixed, "pkg/sphinx_style.py::scaled")
    assert (result["status"], rules(result)) == (
        "suggested",
        [("DOC101", "suggestion"), ("DOC103", "suggestion")],
    ), result["summary"]
    assert result["summary"] == (
        "drafted by the model (parameter factor): a suggestion, not written; it would fix "
        "DOC101, DOC103"
    )


def test_doc602_extra_attribute_is_dropped(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/attributes.py::Box")
    assert rules(result) == [("DOC602", "edit"), ("DOC603", "edit")]
    assert (
        doc(fixed, "pkg/attributes.py", "Box")
        == "A box.\n\nAttributes:\n    width: How wide it is."
    )


def test_doc603_renamed_attribute_keeps_its_description(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/attributes.py::Shelf")
    assert rules(result) == [("DOC603", "edit")]
    assert doc(fixed, "pkg/attributes.py", "Shelf").endswith("capacity: How many boxes fit.")


def test_doc601_missing_attribute_is_a_suggestion(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/attributes.py::Crate")
    assert [rule for rule, _ in rules(result)] == ["DOC601", "DOC603"]
    assert result["status"] == "suggested"
    assert "height: The height to use." in result["suggestions"][0]["diff"]


def test_doc502_stays_a_finding(fixed: dict[str, Any]) -> None:
    """Documented exceptions with no raise statement may come from callees: not decidable."""
    result = job(fixed, "pkg/google.py::relay")
    assert rules(result) == [("DOC502", None)]
    assert result["status"] == "not_possible" and "callees" in result["summary"]
    assert "RuntimeError" in doc(fixed, "pkg/google.py", "relay")


def test_missing_docstring_is_pydocstyle_d103(fixed: dict[str, Any]) -> None:
    result = job(fixed, "pkg/google.py::undocumented")
    assert [(f["rule"], f["message"].split(";")[0]) for f in result["findings"]] == [
        ("D103", "Missing docstring in public function")
    ]
    assert result["changes"] == []  # the model's draft is a suggestion


def test_pydoclint_reports_none_of_the_fixed_codes_after_the_fix(fixed: dict[str, Any]) -> None:
    for path, style in (
        ("pkg/google.py", "google"),
        ("pkg/attributes.py", "google"),
        ("pkg/numpy_style.py", "numpy"),
        ("pkg/sphinx_style.py", "sphinx"),
    ):
        fixed_codes = {
            (f["line"], f["rule"])
            for r in fixed["jobs"].values()
            if r["node"]["file"] == path
            for f in r["findings"]
            if f.get("fix") == "edit"
        }
        assert fixed_codes, path
        assert not fixed_codes & set(recheck(fixed, path, style)), path


# --------------------------------------------------------------------------- configuration

CONFIGURED = '''\
def lookup(table: dict, key: str) -> str:
    """Look a key up.

    Args:
        table (list): Where to look.
        key (str): What to look for.

    Returns:
        int: The value.

    Raises:
        KeyError: If the key is missing.
    """
    if key not in table:
        raise ValueError("the key is not in the table")
    return table[key]
'''


def test_the_projects_pydoclint_configuration_is_honoured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """[tool.pydoclint] decides: its style, its skip-checking-raises (no DOC503), and
    pydoclint's own defaults for what it leaves out (types in docstrings are checked: DOC105
    and DOC203 are fixed from the annotations)."""
    root = make_project(
        tmp_path / "p",
        {"pkg/m.py": CONFIGURED},
        '\n[tool.pydoclint]\nstyle = "google"\nskip-checking-raises = true\n',
    )
    monkeypatch.chdir(root)
    _, report = analyze(root, capsys, "--fix")
    result = next(r for r in report["results"] if r["node"]["qualified_name"] == "lookup")
    assert rules(result) == [("DOC105", "edit"), ("DOC203", "edit")]
    text = docstring_of(root / "pkg/m.py", "lookup")
    assert text is not None
    assert "table (dict): Where to look." in text and "int:" not in text
    assert "str: The value." in text
    assert "KeyError" in text  # raises are not checked here
    assert pydoclint(root, "pkg/m.py", "--config=pyproject.toml") == []


def test_a_numpy_project_without_configuration_documents_init_in_the_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without [tool.pydoclint], the style option gives the defaults: NumPy documents the
    constructor's arguments in the class docstring, so an __init__ without a docstring is
    left alone (no D107), and the class docstring's arguments are checked against __init__'s
    signature (pydoclint reports them on the __init__ line; the class's job fixes them)."""
    source = textwrap.dedent(
        '''\
        class Point:
            """A point.

            Parameters
            ----------
            x
                Across.
            z
                Up.
            """

            def __init__(self, x, y):
                self.x = x
                self.y = y
        '''
    )
    root = make_project(tmp_path / "p", {"pkg/point.py": source})
    monkeypatch.chdir(root)
    _, report = analyze(root, capsys, "--fix", "-c", "agents.docstring.options.style=numpy")
    jobs = {r["node"]["qualified_name"]: r for r in report["results"]}
    assert jobs["Point.__init__"]["outcome"] == "skipped"
    assert jobs["Point.__init__"]["findings"] == []
    assert [(f["rule"], f["line"], f.get("fix")) for f in jobs["Point"]["findings"]] == [
        ("DOC103", 12, "edit")
    ]
    assert (
        docstring_of(root / "pkg/point.py", "Point")
        == "A point.\n\nParameters\n----------\nx\n    Across.\ny\n    Up."
    )


def test_a_configuration_pydoclint_refuses_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(
        tmp_path / "p", {"pkg/m.py": CONFIGURED}, '\n[tool.pydoclint]\nstyle = "nonsense"\n'
    )
    monkeypatch.chdir(root)
    model = DocstringWriter()
    command = ["analyze", ".", "--agents", "docstring", "--format", "json", "--no-cache"]
    with ScriptedModelServer(rule=model, completion=model.complete) as server:
        code = main([*command, "--base-url", server.base_url])
    out, _ = capsys.readouterr()
    assert code == 2
    result = json.loads(out)["results"][0]
    assert result["status"] == "error" and "pydoclint failed" in result["error"]["message"]


AUTHORS_LAYOUT = '''\
def name_to_hex(name: str, spec: str = "css3") -> str:
    """
    Convert a color name to a normalized hexadecimal color value, looked up in the
    given specification.

    :param label: The color name to convert.
    :param spec: The specification from which to draw the list of color names. Default
       is ``css3``.
    :raises ValueError: when the given name has no definition in the given spec.

    """
    if name not in ("red", "blue"):
        raise ValueError(f"{name} has no definition in {spec}")
    return "#" + name
'''


def test_a_fix_changes_only_its_own_lines_of_the_authors_docstring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The author's layout (the summary on the line after the quotes, wrapped their way, a
    three-space continuation, a blank line before the closing quotes) is not Remora's; a fix
    rewrites the lines it fixes (a renamed parameter, the return type from the annotation)
    and no other."""
    root = make_project(tmp_path / "p", {"pkg/colors.py": AUTHORS_LAYOUT})
    monkeypatch.chdir(root)
    _, report = analyze(root, capsys, "--fix", "-c", "agents.docstring.options.style=sphinx")
    result = next(r for r in report["results"] if r["node"]["qualified_name"] == "name_to_hex")
    assert sorted(rules(result)) == [("DOC103", "edit"), ("DOC201", "edit")]
    expected = AUTHORS_LAYOUT.replace(":param label:", ":param name:").replace(
        "       is ``css3``.\n", "       is ``css3``.\n    :rtype: str\n"
    )
    assert (root / "pkg/colors.py").read_text() == expected
    after = pydoclint(root, "pkg/colors.py", "--style=sphinx", *REMORA_DEFAULT)
    assert [code for _, code in after] == ["DOC108"]  # types in the signature: not reported


AFTER_THE_FIELDS = '''\
class Name:
    def initials(self, first: str, constants: object = None) -> str:
        """
            Return the initials of a name written in the form its owner uses for it.

            :param first: The first name, as the person writes it.
            :param constants: a :py:class:`~pkg.config.Constants` instance. Pass ``None`` for
                `per-instance config <customize.html>`_.
            :param bool include_last_name: Include the last name as part of the initials
            :rtype: str

            .. doctest::

                >>> Name().initials("Bob")
                'B.'
        """
        return first[:1] + "."
'''


def test_a_rewritten_sphinx_docstring_keeps_text_after_its_fields_apart_and_reflows_prose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """nameparser's `HumanName.initials`, dropped parameter and all: when the author's layout
    cannot carry the fix (rewritten whole), a directive after the field list stays a paragraph
    of its own (glued to `:rtype:` it is part of the field list for docutils), and a two-line
    description that no longer fits is re-flowed, not wrapped line by line ("for" alone)."""
    root = make_project(tmp_path / "p", {"pkg/names.py": AFTER_THE_FIELDS})
    monkeypatch.chdir(root)
    _, report = analyze(root, capsys, "--fix", "-c", "agents.docstring.options.style=sphinx")
    result = next(r for r in report["results"] if r["node"]["qualified_name"] == "Name.initials")
    assert ("DOC102", "edit") in rules(result)
    text = doc({"root": root}, "pkg/names.py", "Name.initials")
    assert "include_last_name" not in text
    assert ':rtype: str\n\n.. doctest::\n\n    >>> Name().initials("Bob")' in text
    fields = text[: text.index(".. doctest::")].split("\n")
    assert all(len(line.split()) != 1 for line in fields), text  # no word left alone
    assert "Pass ``None`` for `per-instance config <customize.html>`_." in " ".join(text.split())
