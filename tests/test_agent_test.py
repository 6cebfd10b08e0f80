"""The bundled test agent on a copy of the bundled example: real pytest in the job's workspace,
a scripted model that calls write_tests after the runner's inspect_function, and a scripted
completion endpoint that proposes calls (as a base model continues `result = f(` after the
module). The host's input generator (explore_calls) adds calls from the signature, runs them in
the sandbox under coverage, keeps the few that cover the most branches, and write_tests pins
what they returned or raised as a pytest module, kept only where it passes: characterization
tests."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call
from remora.sandbox.commands import CommandRunner
from remora.tool_library.call_candidates import candidate_calls
from remora.tool_library.callable_values import callable_arities, function_readers
from remora.tool_library.case_checks import constructed_value
from remora.tool_library.parameter_types import callee_usage, usage
from remora.tool_library.parameter_values import parameters_of

DEMO = Path(__file__).parent.parent / "examples" / "demo"
# hypothesis's pytest plugin adds seconds to the start of every pytest run (check_tests leaves
# it out by itself); the direct runs below turn it off too.
PYTEST_QUIET = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
TEMPERATURES = [0.0, 0.7, 1.0]
"""explore_calls' drafts, in order: the n-th answer of `completions` below goes to the n-th."""

CALLS = {
    "apply_discount": ["100.0, 10.0)", "19.99, 0)", "100.0, 150.0)"],
    "bulk_price": ["2.0, 5)", "1.0, 10)\n    assert x", "1.0, 100, {100: 50.0})"],
    "parse_sku": ['"bolt-0042")', '"NUT")'],
}


def function_of(body: dict[str, Any]) -> str:
    """The function a chat request is about, from the rendered node context."""
    context: str = body["messages"][1]["content"]
    assert context.startswith("Write tests for the function `")
    return context.split("`")[1]


def callee(prompt: str) -> str:
    """What a completion prompt asks the model to call: its last line is `    result = f(`,
    `    result = stock.add(` (the method's name) or `    stock = Stock(` (the constructor)."""
    last = prompt.rsplit("\n", 1)[1]
    assert last.endswith("("), last
    return last.rsplit("=", 1)[1].strip().rstrip("(").rpartition(".")[2]


def completions(calls: dict[str, list[str]], asked: list[str] | None = None) -> Any:
    """The completion endpoint: the arguments proposed for `result = NAME(`, one per draft
    (and NAME appended to `asked`)."""

    def complete(body: dict[str, Any]) -> str:
        index = TEMPERATURES.index(body.get("temperature", 0.0))
        name = callee(body["prompt"])
        if asked is not None:
            asked.append(name)
        proposed = calls.get(name, [])
        return proposed[index] if index < len(proposed) else ""

    return complete


def calls_write_tests(body: dict[str, Any]) -> Any:
    """write_tests once (the runner already ran inspect_function), then submit."""
    called = any(m["role"] == "tool" and m["name"] == "write_tests" for m in body["messages"])
    offered = {tool["function"]["name"] for tool in body["tools"]}
    if not called and "write_tests" in offered:
        return tool_call("write_tests", {})
    return tool_call("submit_result", {"summary": "done"})


def analyze(
    target: str,
    calls: dict[str, list[str]],
    capsys: pytest.CaptureFixture[str],
    *flags: str,
    asked: list[str] | None = None,
    cache: bool = False,
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    completion = completions(calls, asked)
    with ScriptedModelServer(rule=calls_write_tests, completion=completion) as server:
        code = main(
            [
                "analyze",
                target,
                "--agents",
                "test",
                "--format",
                "json",
                *([] if cache else ["--no-cache"]),
                "--base-url",
                server.base_url,
                *flags,
            ]
        )
        requests = list(server.requests)
    captured = capsys.readouterr()
    assert captured.out.strip(), captured.err
    return code, json.loads(captured.out), requests


def by_function(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {result["node"]["qualified_name"]: result for result in report["results"]}


def written_count(summary: str) -> int:
    """N of write_tests' "N tests written and passing (FILE)"."""
    match = re.match(r"(\d+) tests? written and passing \(", summary)
    assert match, summary
    return int(match.group(1))


def pytest_direct(tests: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real pytest on the files that landed, from outside the project (so nothing but the
    generated file's own sys.path line makes the package importable)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *PYTEST_QUIET, str(tests)],
        cwd=cwd,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_characterization_tests_land_with_fix_and_pass_under_pytest(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (demo / "inventory" / "pricing.py").read_bytes()
    asked: list[str] = []
    code, report, requests = analyze("inventory/pricing.py", CALLS, capsys, "--fix", asked=asked)

    results = by_function(report)
    assert set(results) == set(CALLS)
    total = 0
    for name, result in results.items():
        assert result["status"] == "success", result["error"]
        assert result["outcome"] == "written"
        # One file per function: parallel jobs never write the same file. The module itself is
        # never a change: the calls ran in the sandbox, the tests in a throwaway copy.
        assert [change["file"] for change in result["changes"]] == [f"tests/test_pricing_{name}.py"]
        # The demo has no tests: each function gets TST100 from inspect_function.
        assert [f["rule"] for f in result["findings"]] == ["TST100"]
        assert result["turns"] == 0  # observed: write_tests ran and ended the job, no chat turn
        assert result["summary"].endswith(f" written and passing (tests/test_pricing_{name}.py)")
        total += written_count(result["summary"])
    assert code == 1  # the TST100 findings
    assert all(function_of(body) in CALLS for body in requests)
    # The calls built from the signatures, the compared literals and the docstring's example
    # take every branch of the three functions: the model is not asked for calls.
    assert asked == []
    assert (demo / "inventory" / "pricing.py").read_bytes() == source

    text = (demo / "tests" / "test_pricing_apply_discount.py").read_text()
    assert text.startswith('"""Tests for `apply_discount`, generated by Remora\'s test agent.')
    assert "from inventory.pricing import apply_discount  # noqa: E402" in text
    # What the function did, pinned: -1% is refused, with the function's own message; 0% and
    # 100% (the compared literals) are pinned too. Calls that only return a value are the
    # rows of one parametrized test.
    assert "def test_apply_discount(price, percent, expected):\n" in text
    assert "    assert apply_discount(price, percent) == pytest.approx(expected)\n" in text
    assert "        (2.5, 0, 2.5),\n" in text
    assert (
        "    with pytest.raises(ValueError, match='percent must be between 0 and 100, "
        "not -1'):\n        apply_discount(2.5, -1)\n"
    ) in text
    assert "        (2.5, 100, 0.0),\n" in text
    # One case per raise site: -1 is the only ValueError pinned, not 101 as well.
    assert text.count("pytest.raises(") == 1
    sku = (demo / "tests" / "test_pricing_parse_sku.py").read_text()
    assert "    assert parse_sku('BOLT-0042') == ('BOLT', 42)\n" in sku  # the docstring's example
    assert (
        '    with pytest.raises(ValueError, match="invalid literal for int\\\\(\\\\) with base '
        "10: ''\"):\n        parse_sku('abc')\n"
    ) in sku
    bulk = (demo / "tests" / "test_pricing_bulk_price.py").read_text()
    assert "        (2.5, 10, 23.75),\n" in bulk  # 10 items: the first tier's 5 % off

    # The files that landed pass under the real pytest, run from outside the project.
    done = pytest_direct(demo / "tests", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{total} passed" in done.stdout
    # And they are clean under the project's own ruff configuration.
    ruff = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "tests"],
        cwd=demo,
        capture_output=True,
        text=True,
    )
    assert ruff.returncode == 0, ruff.stdout


def test_the_model_is_asked_only_for_a_branch_the_tools_calls_leave(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No string built from `name: str` is longer than 40 characters, so the tools' own calls
    leave `label`'s first branch untaken and the model is asked for calls of `label`: its
    call takes the branch and is pinned (cut at its closing parenthesis). Every branch of
    `shout` is taken without it: the model is not asked for `shout`."""
    (demo / "inventory" / "labels.py").write_text(
        "def label(name: str) -> str:\n"
        "    if len(name) > 40:\n"
        '        return name[:12] + "..."\n'
        "    return name\n"
        "\n\n"
        "def shout(text: str) -> str:\n"
        "    return text.upper()\n"
    )
    long_name = '"a rather long product name, in a long catalogue"'
    calls = {"label": [f"{long_name})\n    assert x", '"bolt")'], "shout": ["'x')"]}
    asked: list[str] = []
    code, report, _ = analyze("inventory/labels.py", calls, capsys, "--fix", asked=asked)
    results = by_function(report)
    assert {name: result["outcome"] for name, result in results.items()} == {
        "label": "written",
        "shout": "written",
    }
    assert set(asked) == {"label"}  # one request per draft, all of them for `label`
    text = (demo / "tests" / "test_labels_label.py").read_text()
    assert f"        ({long_name}, 'a rather lon...'),\n" in text
    assert "assert x" not in text  # the completion was cut at the call's closing parenthesis
    assert code == 1


def test_calls_that_cannot_be_pinned_leave_the_job_not_done(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Wrong arity, code that is not a plain call, unclosed calls, and an annotation with no
    example values (every value from the signature raises AttributeError on `.size`): a
    TypeError or AttributeError from an argument that contradicts its use pins nothing, so the
    tool writes nothing and the job ends not done at once."""
    (demo / "inventory" / "odd.py").write_text(
        'def odd(widget: "Widget") -> int:\n    return widget.size\n'
    )
    calls = {
        "odd": [
            "1, 2, 3)",  # TypeError: not pinned
            "__import__('os').getcwd())",  # refused before running
            "'A-1'",  # never closed
        ]
    }
    code, report, _ = analyze("inventory/odd.py", calls, capsys)
    (result,) = report["results"]
    assert result["status"] == "not_possible" and result["error"] is None
    message = result["summary"]  # the reason, whole
    assert re.search(r"no call of odd could be pinned \((\d+) tried: none ", message)
    assert "raised an exception the code raises itself" in message
    assert result["changes"] == []
    assert result["turns"] == 0  # observed: no chat turn
    assert not (demo / "tests").exists()
    assert code == 1


def test_src_layout_in_a_subproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The package's import root (src/) and the project folder (the nearest pyproject.toml) are
    found from the file: analysed from the repository root, the tests land in the subproject."""
    project = tmp_path / "repo" / "services" / "calc"
    (project / "src" / "calc").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "calc"\n')
    (project / "src" / "calc" / "__init__.py").write_text("")
    (project / "src" / "calc" / "ops.py").write_text(
        "def double(x: int) -> int:\n    return 2 * x\n"
    )
    monkeypatch.chdir(tmp_path / "repo")
    code, report, _ = analyze("services", {"double": ["2)", "-3)"]}, capsys, "--fix")
    (result,) = report["results"]
    assert result["status"] == "success", result["error"]
    assert [c["file"] for c in result["changes"]] == ["services/calc/tests/test_ops_double.py"]
    text = (project / "tests" / "test_ops_double.py").read_text()
    assert "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))" in text
    assert "from calc.ops import double  # noqa: E402" in text
    assert (
        "        (2, 4),\n" in text and "        (1, 2),\n" in text
    )  # what tells `2 * x` from `x + 2`
    done = pytest_direct(project / "tests", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{written_count(result['summary'])} passed" in done.stdout
    assert code == 1


def test_tests_go_into_the_folder_the_project_keeps_its_tests_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A project whose tests live in `test/` (tabulate, requests) gets its new tests there,
    beside its maintainers' ones, not in a second `tests/` folder; they pass together."""
    project = tmp_path / "calc"
    (project / "calc").mkdir(parents=True)
    (project / "test").mkdir()
    (project / "setup.cfg").write_text("[metadata]\nname = calc\n")
    (project / "calc" / "__init__.py").write_text("")
    (project / "calc" / "ops.py").write_text(
        "def double(x: int) -> int:\n    return 2 * x\n\n\n"
        "def half(x: int) -> float:\n    return x / 2\n"
    )
    (project / "test" / "test_half.py").write_text(
        "from calc.ops import half\n\n\ndef test_half():\n    assert half(4) == 2\n"
    )
    monkeypatch.chdir(project)
    code, report, _ = analyze("calc", {"double": ["2)", "-3)"]}, capsys, "--fix")
    results = by_function(report)
    assert results["half"]["outcome"] == "tested", results["half"]
    written = results["double"]
    assert written["status"] == "success", written["error"]
    assert [c["file"] for c in written["changes"]] == ["test/test_ops_double.py"]
    assert not (project / "tests").exists()
    done = pytest_direct(project / "test", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{written_count(written['summary']) + 1} passed" in done.stdout
    assert code == 1


def test_tool_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "check", "test"]) == 0, capsys.readouterr()


def test_the_module_is_never_changed_even_by_a_function_that_writes_it(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The calls run in the sandbox on throwaway copies and the tests in a throwaway copy of the
    project: a function that overwrites its own module when called leaves the project's module
    as it was, and the job's only change (if any) is its one test file."""
    module = demo / "inventory" / "stamp.py"
    module.write_text(
        "from pathlib import Path\n\n\n"
        "def stamp(n: int) -> int:\n"
        '    Path(__file__).write_text("# stamped\\n")\n'
        "    return n\n"
    )
    source = module.read_bytes()
    code, report, _ = analyze("inventory/stamp.py", {}, capsys, "--fix")
    (result,) = report["results"]
    assert {change["file"] for change in result["changes"]} <= {"tests/test_stamp_stamp.py"}
    assert module.read_bytes() == source
    assert sorted(p.relative_to(demo).as_posix() for p in demo.rglob("*.py")) == sorted(
        [
            "inventory/__init__.py",
            "inventory/pricing.py",
            "inventory/report.py",
            "inventory/stock.py",
            "inventory/stamp.py",
            *(["tests/test_stamp_stamp.py"] if result["changes"] else []),
        ]
    )
    assert code == 1


def test_a_call_that_does_not_repeat_under_pytest_is_dropped_and_the_rest_kept(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`argv_len(0)` (0: the literal `n` is compared with) gives the same answer in both probe
    runs but another under the pytest run that checks the file (its command line differs): it
    is dropped, the other calls are kept, and the file that lands passes under the real
    pytest."""
    (demo / "inventory" / "argv.py").write_text(
        "import sys\n\n\ndef argv_len(n: int) -> int:\n"
        "    if n == 0:\n        return len(sys.argv)\n    return n\n"
    )
    code, report, _ = analyze("inventory/argv.py", {}, capsys, "--fix")
    (result,) = report["results"]
    assert result["status"] == "success", result["error"]
    assert result["summary"].endswith("; 1 dropped: they failed under pytest")
    written = demo / "tests" / "test_argv_argv_len.py"
    text = written.read_text()
    assert "argv_len(3) == 3" in text and "argv_len(0)" not in text
    done = pytest_direct(written, demo.parent)
    assert done.returncode == 0, done.stdout
    assert f"{written_count(result['summary'])} passed" in done.stdout
    assert code == 1  # the TST100 finding on the untested function


PAYLOAD = "import pathlib; pathlib.Path('PWNED').write_text('x'); print('PWNED-MARKER')"
HOSTILE = f'(x for x in [1]).gi_frame.f_builtins["exec"]("{PAYLOAD}") or 100, 10)'
"""A completion the old regex deny-list let through: `exec` reached through a generator's frame;
if it ran, it would leave a file and a marker on stdout, and `or 100` makes the call pinnable."""


def spy_on_commands(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every process the job starts (the call probe and pytest alike): its arguments, the
    Python and JSON files in its directory as it saw them (the probe's request included), what
    it printed, and whether PWNED exists in its directory afterwards."""
    seen: list[dict[str, Any]] = []
    original = CommandRunner._run

    async def run(
        self: CommandRunner, name: str, args: list[str], argv: list[str], cwd: Path, **kw: Any
    ) -> dict[str, Any]:
        files = {}
        for folder, _, names in os.walk(cwd):  # symlinks to the project are not followed
            for file in names:
                path = Path(folder) / file
                if file.endswith((".py", ".json")) and not path.is_symlink():
                    files[path.relative_to(cwd).as_posix()] = path.read_text()
        result = await original(self, name, args, argv, cwd, **kw)
        output = result["stdout"] + result["stderr"]
        seen.append(
            {"args": args, "files": files, "output": output, "pwned": (cwd / "PWNED").exists()}
        )
        return result

    monkeypatch.setattr(CommandRunner, "_run", run)
    return seen


def test_a_hostile_completion_is_refused_by_the_allow_list_before_it_runs(
    demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model proposes `surcharge(<exec through a generator's frame> or 100, 10)`: the
    allow-list (parse_test_case) refuses it before the probe, so no command ever sees its text,
    nothing prints its marker or leaves its file, and no test is written for it; the tools'
    calls are probed, pinned and written as usual. (No list built from the signature has more
    than three prices: the model is asked for the branch they leave.)"""
    (demo / "inventory" / "fees.py").write_text(
        "def surcharge(prices: list, percent: float) -> float:\n"
        "    if len(prices) > 3:\n"
        '        raise ValueError("too many prices")\n'
        "    return round(sum(prices) * percent / 100, 2)\n"
    )
    seen = spy_on_commands(monkeypatch)
    asked: list[str] = []
    code, report, _ = analyze(
        "inventory/fees.py", {"surcharge": [HOSTILE]}, capsys, "--fix", asked=asked
    )

    (result,) = report["results"]
    assert result["status"] == "success", result["error"]
    assert asked  # the model was asked, and proposed the hostile call
    text = (demo / "tests" / "test_fees_surcharge.py").read_text()
    assert "([1, 2, 3], 2.5, 0.15)," in text, text  # the tools' calls, parametrized
    assert "gi_frame" not in text and "exec" not in text
    # The spy saw the probe runs of the tools' calls, and pytest on the file...
    probes = [c for c in seen if '"surcharge"' in c["files"].get(".remora_probe.json", "")]
    assert probes and any("tests/test_fees_surcharge.py" in c["args"] for c in seen)
    # ...and the hostile case reached none of them.
    for command in seen:
        assert not any("gi_frame" in t or "PWNED" in t for t in command["files"].values())
        assert "PWNED-MARKER" not in command["output"]
        assert not command["pwned"]
    assert not list(demo.rglob("PWNED"))
    assert code == 1


def test_cases_construct_the_modules_own_classes(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A constructor of a class defined in the module is an allowed argument: the case is
    pinned, the class and the module's exception are imported, and the file passes. The
    instances built from the constructor's parameters and the compared `minimum` take both
    branches: the model is not asked."""
    (demo / "inventory" / "shapes.py").write_text(
        "class Box:\n    def __init__(self, side):\n        self.side = side\n\n\n"
        "class TooSmall(Exception):\n    pass\n\n\n"
        "def area(box: Box, minimum: int = 0) -> int:\n"
        "    if box.side < minimum:\n        raise TooSmall(box.side)\n"
        "    return box.side * box.side\n"
    )
    asked: list[str] = []
    code, report, _ = analyze("inventory/shapes.py", {}, capsys, "--fix", asked=asked)
    result = by_function(report)["area"]
    assert result["status"] == "success", result["error"]
    assert asked == []
    text = (demo / "tests" / "test_shapes_area.py").read_text()
    assert "from inventory.shapes import Box, TooSmall, area  # noqa: E402" in text
    assert "assert area(Box(3)) == 9" in text
    assert (
        "    with pytest.raises(TooSmall, match='3'):\n        area(Box(3), minimum=10)\n"
    ) in text
    done = pytest_direct(demo / "tests", cwd=demo.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{written_count(result['summary'])} passed" in done.stdout
    assert code == 1


def test_a_folder_named_with_quotes_cannot_end_the_test_files_docstring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The module's path is written into the test file's docstring; a repository's folder
    named with three double quotes must not close it (and put what follows into the file as
    code)."""
    root = tmp_path / "project"
    folder = root / 'q"""x'
    folder.mkdir(parents=True)
    (folder / "mod.py").write_text("def double(x: int) -> int:\n    return 2 * x\n")
    monkeypatch.chdir(root)
    _, report, _ = analyze('q"""x/mod.py', {"double": ["3)"]}, capsys, "--fix")
    (result,) = report["results"]
    assert result["status"] == "success", result["summary"]
    (change,) = result["changes"]
    text = (root / change["file"]).read_text()
    assert "in q'''x/mod.py returned" in text
    ast.parse(text)


VALUES_MODULE = """\
import datetime
import enum
from collections import namedtuple
from dataclasses import dataclass
from decimal import Decimal


class Color(enum.Enum):
    RED = 1
    BLUE = 2


Point = namedtuple("Point", "x y")


@dataclass(frozen=True)
class Span:
    start: int
    end: int


def days(count: int) -> datetime.timedelta:
    return datetime.timedelta(days=count)


def price(cents: int) -> Decimal:
    return Decimal(cents) / 100


def color(code: int) -> Color:
    return Color(code)


def mirrored(x: int, y: int) -> Point:
    return Point(y, x)


def span(start: int, length: int) -> Span:
    return Span(start, start + length)
"""


def test_values_that_are_no_literal_are_pinned_through_their_repr(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A timedelta, a Decimal, a member of the module's enum, a named tuple and a frozen
    dataclass of the module are held by their repr and the import it needs, as a person writes
    them; the file passes under pytest."""
    (demo / "inventory" / "values.py").write_text(VALUES_MODULE)
    code, report, _ = analyze("inventory/values.py", {}, capsys, "--fix")
    results = by_function(report)
    for name in ("days", "price", "color", "mirrored", "span"):
        assert results[name]["status"] == "success", (name, results[name]["summary"])
    text = {
        name: (demo / "tests" / f"test_values_{name}.py").read_text()
        for name in ("days", "price", "color", "mirrored", "span")
    }
    assert "import datetime\nimport pathlib\nimport sys\n" in text["days"]
    assert re.search(r"datetime\.timedelta\(days=-?\d+\)", text["days"]), text["days"]
    assert "from decimal import Decimal\n" in text["price"]
    assert re.search(r"Decimal\('-?[\d.]+'\)", text["price"]), text["price"]
    assert re.search(r"Color\.(RED|BLUE)", text["color"]), text["color"]
    assert "import Color, color  # noqa: E402" in text["color"]
    assert re.search(r"Point\(x=-?\d+, y=-?\d+\)", text["mirrored"]), text["mirrored"]
    assert re.search(r"Span\(start=-?\d+, end=-?\d+\)", text["span"]), text["span"]
    done = pytest_direct(demo / "tests", cwd=demo.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert code == 1


@pytest.mark.parametrize(
    "text",
    [
        "Point(x=__import__('os').system('id'))",  # a name nobody declared
        "Color.__class__",  # a dunder
        "Decimal('1')('x')",  # a call of a call
        "Point(x=[1][0])",  # a subscript
        "Point(**{'x': 1})",  # keywords by mapping
        "Point(x=(lambda: 1)())",
        "Color.RED; import os",  # not one expression
    ],
)
def test_a_constructed_value_is_only_calls_of_known_names_with_literals(text: str) -> None:
    assert constructed_value(text, ["Point", "Color"]) is None


def test_a_constructed_value_names_its_imports() -> None:
    assert constructed_value("datetime.timedelta(days=-1, seconds=3)", []) == (
        "datetime.timedelta(days=-1, seconds=3)",
        ["import datetime"],
        [],
    )
    assert constructed_value("Point(x=Decimal('1.5'), y=Color.RED)", ["Point", "Color"]) == (
        "Point(x=Decimal('1.5'), y=Color.RED)",
        ["from decimal import Decimal"],
        ["Color", "Point"],
    )
    assert constructed_value("Point(x=1)", ["Point", "not a name"]) is None


MEMO_MODULE = '''\
import re

_PATTERNS = {}
_COUNTS = {}


def _compiled(unit):
    if unit not in _PATTERNS:
        _PATTERNS[unit] = re.compile(r"^(\\d+)" + unit + "$")
    return _PATTERNS[unit]


def parse_size(text: str, unit: str = "kb") -> int:
    """The number in a size.

    >>> parse_size("10kb")
    10
    """
    match = _compiled(unit).match(text)
    if match is None:
        raise ValueError(f"not a size in {unit}: {text!r}")
    return int(match.group(1))


def hit(name: str) -> int:
    _COUNTS[name] = _COUNTS.get(name, 0) + 1
    return _COUNTS[name]


_TIME_PATTERNS = []
_LOG = []


def parse_time(text: str) -> int:
    """Minutes.

    >>> parse_time("1:30")
    90
    """
    if not _TIME_PATTERNS:
        _TIME_PATTERNS.append(re.compile(r"^(\\d+):(\\d+)$"))
    match = _TIME_PATTERNS[0].match(text)
    if match is None:
        raise ValueError(f"not a time: {text!r}")
    return int(match.group(1)) * 60 + int(match.group(2))


def logged(entry: str) -> int:
    _LOG.append(entry)
    return len(_LOG)


_WORD = None
_LAST = None


class Checker:
    def is_word(self, text: str) -> bool:
        global _WORD
        if _WORD is None:
            _WORD = re.compile(r"^[a-z]+$")
        return _WORD.match(text) is not None


def remember(text: str) -> str:
    global _LAST
    _LAST = text
    return text.upper()
'''


def test_a_memo_cache_is_no_state_a_test_sees_but_a_counter_is(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module-level dict or list a call only adds entries to, where the same call made again
    returns the same, is a cache: the parsers get tests of valid and invalid input. A dict whose
    entry a call changes (a counter: the call made again returns 2), or a list every call
    appends to, stays state other tests see; so does a global every call sets, where one set
    only while it is None is built on first use, a cache."""
    (demo / "inventory" / "sizes.py").write_text(MEMO_MODULE)
    code, report, _ = analyze("inventory/sizes.py", {}, capsys, "--fix")
    results = by_function(report)
    assert results["parse_size"]["status"] == "success", results["parse_size"]["summary"]
    text = (demo / "tests" / "test_sizes_parse_size.py").read_text()
    assert "parse_size('10kb') == 10" in text or "('10kb', 10)" in text, text
    assert "pytest.raises(ValueError" in text
    assert results["hit"]["status"] != "success"
    assert "changes state other tests see (_COUNTS)" in results["hit"]["summary"]
    # A list the call appends to once is a cache too; one it appends to on every call is not.
    assert results["parse_time"]["status"] == "success", results["parse_time"]["summary"]
    timed = (demo / "tests" / "test_sizes_parse_time.py").read_text()
    assert "parse_time('1:30') == 90" in timed or "('1:30', 90)" in timed, timed
    assert "changes state other tests see (_LOG)" in results["logged"]["summary"]
    # A global built on first use (only under `if _WORD is None:`) is one too, for a method
    # as well; one every call sets stays state.
    assert results["Checker.is_word"]["status"] == "success", results["Checker.is_word"]
    worded = (demo / "tests" / "test_sizes_Checker_is_word.py").read_text()
    assert "('abc', True)" in worded or "is_word('abc') is True" in worded, worded
    assert "changes state other tests see (_LAST)" in results["remember"]["summary"]
    done = pytest_direct(demo / "tests", cwd=demo.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert code == 1


COLLECTIONS_MODULE = """\
from collections.abc import Mapping, MutableMapping


class Ranked(MutableMapping):
    \"\"\"Keys by rank: the lowest first.\"\"\"

    def __init__(self, *args, **kwargs):
        self.ranks = {}
        self.update(*args, **kwargs)

    def __setitem__(self, key, rank):
        if rank < 0:
            raise ValueError("a rank is never negative")
        self.ranks[key] = rank

    def __delitem__(self, key):
        del self.ranks[key]

    def __getitem__(self, key):
        return self.ranks[key]

    def __iter__(self):
        return iter(sorted(self.ranks, key=self.ranks.__getitem__))

    def __len__(self):
        return len(self.ranks)

    def best(self):
        return min(self.ranks.items(), key=lambda item: item[1])


class Frozen(Mapping):
    def __init__(self, data=None):
        self._data = dict(data or {})

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __eq__(self, other):
        return isinstance(other, Frozen) and self._data == other._data

    def __repr__(self):
        return f"Frozen({self._data!r})"

    def with_item(self, key, value):
        return Frozen({**self._data, key: value})

    def keys(self):
        return self._data.keys()
"""


def test_a_collection_is_tested_holding_entries(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mapping class whose constructor passes on what it is given is built holding entries
    (not only empty): its methods' tests read a held key, pin what `d[k] = v` and `del d[k]`
    change, list what keys() holds, and hold a returned object of the module's class by its
    repr where that builds an equal one; the files pass under pytest."""
    (demo / "inventory" / "ranked.py").write_text(COLLECTIONS_MODULE)
    code, report, _ = analyze("inventory/ranked.py", {}, capsys, "--fix")
    results = by_function(report)
    names = ("Ranked.best", "Ranked.__getitem__", "Ranked.__setitem__", "Ranked.__delitem__")
    names += ("Frozen.with_item", "Frozen.keys")
    for name in names:
        assert results[name]["status"] == "success", (name, results[name]["summary"])
    text = {name: (demo / "tests" / f"test_ranked_{name.replace('.', '_')}.py").read_text()
            for name in names}  # fmt: skip
    assert "ranked = Ranked({'a': 3, 'b': 1, 'c': 2})" in text["Ranked.best"]
    assert "assert ranked.best() == ('b', 1)" in text["Ranked.best"]
    assert "assert ranked['a'] == 3" in text["Ranked.__getitem__"]
    assert re.search(r"\n    ranked\['a'\] = -?\d+\n    assert ranked.ranks == \{",
                     text["Ranked.__setitem__"]), text["Ranked.__setitem__"]  # fmt: skip
    assert (
        "    del ranked['a']\n    assert ranked.ranks == {'b': 1, 'c': 2}\n"
        in (text["Ranked.__delitem__"])
    )
    assert "Frozen({'a': 3, 'b': 1, 'c': 2, " in text["Frozen.with_item"]
    assert "assert list(frozen.keys()) == ['a', 'b', 'c']" in text["Frozen.keys"]
    done = pytest_direct(demo / "tests", cwd=demo.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert code == 1


ATTRIBUTES_MODULE = """\
class Settings:
    \"\"\"Settings read and written as attributes: `settings.colour = 'red'`.\"\"\"

    def __init__(self, values=None):
        object.__setattr__(self, "_values", dict(values or {}))

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no setting {name!r}") from None

    def __setattr__(self, name, value):
        if name.startswith("_"):
            raise AttributeError("names starting with _ are private")
        self._values[name] = value

    def __delattr__(self, name):
        del self._values[name]

    def names(self):
        return sorted(self._values)
"""


def test_attribute_hooks_are_tested_as_attributes(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`__getattr__`, `__setattr__` and `__delattr__` are tested the way code uses them
    (`settings.abc`, `settings.abc = 3`, `del settings.abc`), not skipped as special methods;
    what the statements change is read back through the class's reader after the instance was
    filled (`__delattr__` takes out: it is no mutator, and is read back after one)."""
    (demo / "inventory" / "settings.py").write_text(ATTRIBUTES_MODULE)
    code, report, _ = analyze("inventory/settings.py", {}, capsys, "--fix")
    results = by_function(report)
    text = {}
    for name in ("Settings.__getattr__", "Settings.__setattr__", "Settings.__delattr__"):
        assert results[name]["status"] == "success", (name, results[name]["summary"])
        path = demo / "tests" / f"test_settings_{name.replace('.', '_')}.py"
        text[name] = path.read_text()
    assert "    settings.abc = 3\n    assert settings.abc == 3\n" in text["Settings.__getattr__"]
    assert (
        "with pytest.raises(AttributeError, match=\"no setting 'abc'\"):\n        settings.abc\n"
        in (text["Settings.__getattr__"])
    )
    # What a statement changed is read back through a reader; what it refuses is pinned.
    assert (
        "    settings.abc = 3\n    assert settings.names() == ['abc']\n"
        in (text["Settings.__setattr__"])
    )
    assert "are private'):\n        settings._ = 3\n" in text["Settings.__setattr__"]
    # A remover is read back after the instance was filled with what it removes.
    assert (
        "    settings.abc = 3\n    del settings.abc\n    assert settings.names() == []\n"
        in (text["Settings.__delattr__"])
    )
    assert "__getattr__(" not in "".join(text.values())
    # A method's finding points at its `def` (line and column), not at the line's start.
    untested = [f for f in results["Settings.names"]["findings"] if f["rule"] == "TST100"]
    assert [(f["line"], f["column"]) for f in untested] == [(21, 5)], untested
    assert untested[0]["message"].startswith("`Settings.names` has no tests")
    done = pytest_direct(demo / "tests", cwd=demo.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert code == 1


CALLED_MODULE = """\
class Shout:
    def __init__(self, mark: str = "!"):
        self.mark = mark

    def __call__(self, text):
        return text.upper() + self.mark


def framed(label):
    return "[" + label + "]"


def depth(tree):
    if not isinstance(tree, dict) or not tree:
        return 0
    return 1 + max(depth(child) for child in tree.values())
"""


def test_an_instance_is_called_text_is_joined_and_trees_are_nested(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`__call__` is tested the way code uses it (`shout('abc')`); a parameter joined with a
    string literal is text, not a number; an unannotated parameter is also given a tree of
    mappings, so code that walks nested dicts gets past their first level."""
    (demo / "inventory" / "called.py").write_text(CALLED_MODULE)
    code, report, _ = analyze("inventory/called.py", {}, capsys, "--fix")
    results = by_function(report)
    for name in ("Shout.__call__", "framed", "depth"):
        assert results[name]["status"] == "success", (name, results[name]["summary"])
    called = (demo / "tests" / "test_called_Shout___call__.py").read_text()
    assert re.search(r"assert shout\((text|'[^']*')\) == (expected|'[^']*!')", called), called
    assert "__call__(" not in called.split('"""', 2)[2]
    framed = (demo / "tests" / "test_called_framed.py").read_text()
    assert "('abc', '[abc]')" in framed or "framed('abc') == '[abc]'" in framed, framed
    nested = (demo / "tests" / "test_called_depth.py").read_text()
    assert "{'a': {'b': {}, 'c': {'d': {}}}}" in nested and ", 3)" in nested, nested
    done = pytest_direct(demo / "tests", cwd=demo.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert code == 1


PROTOCOL_MODULE = """\
import unittest
from typing import Protocol


class Sized(Protocol):
    def size(self) -> int: ...


class Box:
    def __init__(self, items: list | None = None):
        self.items = items or []

    def size(self) -> int:
        return len(self.items)


class BoxTestCase(unittest.TestCase):
    def test_size(self):
        self.assertEqual(Box([1]).size(), 1)
"""


def test_a_protocols_methods_are_types_and_a_test_cases_are_tests_not_code_to_test(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A method of a typing.Protocol class, or of a unittest.TestCase the module ships, is
    skipped with the reason and no TST100 finding; the class that implements it is tested."""
    (demo / "inventory" / "shapes.py").write_text(PROTOCOL_MODULE)
    _, report, _ = analyze("inventory/shapes.py", {}, capsys)
    results = by_function(report)
    stub = results["Sized.size"]
    assert (stub["status"], stub["outcome"]) == ("success", "skipped"), stub
    assert "method of a Protocol" in stub["summary"]
    assert not stub["findings"]
    assert results["Box.size"]["outcome"] == "written", results["Box.size"]["summary"]
    # A test case the module ships is a test already: not tested (it was "not possible").
    shipped = results["BoxTestCase.test_size"]
    assert (shipped["status"], shipped["outcome"]) == ("success", "skipped"), shipped
    assert (
        "test code, a method of the test case `BoxTestCase` (unittest.TestCase)"
        in shipped["summary"]
    )


CALLABLES_MODULE = """\
def double(value):
    return value * 2


def apply_all(items: list, transform) -> list:
    return [transform(item) for item in items]


class Sorter:
    def __init__(self, key):
        self.key = key

    def ordered(self, items: list) -> list:
        return sorted(items, key=lambda item: self.key(item))
"""


def test_a_parameter_the_code_calls_is_given_the_modules_functions_never_a_literal(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`transform` is called with one argument, and `Sorter` stores `key` that `ordered`
    calls: both get the module's function of one argument, imported by the test; no test
    passes a number where a function is called (the model proposes one, and it is refused)."""
    (demo / "inventory" / "mapping.py").write_text(CALLABLES_MODULE)
    proposals = {"apply_all": ["[1, 2], 3)"], "Sorter": ["7)"]}
    code, report, _ = analyze("inventory/mapping.py", proposals, capsys, "--fix")
    results = by_function(report)
    assert results["apply_all"]["status"] == "success", results["apply_all"]["summary"]
    assert results["Sorter.ordered"]["status"] == "success", results["Sorter.ordered"]["summary"]
    applied = (demo / "tests" / "test_mapping_apply_all.py").read_text()
    assert "import apply_all, double  # noqa: E402" in applied
    assert re.search(r"\[[^]]*\], double[,)]", applied), applied
    ordered = (demo / "tests" / "test_mapping_Sorter_ordered.py").read_text()
    assert "Sorter(double)" in ordered and "Sorter(7)" not in ordered, ordered
    assert ", 3)" not in applied
    done = pytest_direct(demo / "tests", cwd=demo.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert code == 1


def test_a_nested_function_is_left_to_its_parents_tests(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A function nested in another cannot be imported; the parent's calls reach it, so its
    job is skipped with that reason, not a job left undone, and the parent is tested."""
    (demo / "inventory" / "nested.py").write_text(
        "def total(prices: list) -> int:\n"
        "    def cents(price):\n"
        "        return round(price * 100)\n"
        "    return sum(cents(price) for price in prices)\n"
    )
    _, report, _ = analyze("inventory/nested.py", {}, capsys, "--fix")
    results = by_function(report)
    nested = results["total.cents"]
    assert (nested["status"], nested["outcome"]) == ("success", "skipped"), nested
    assert "nested in `total` (tests of `total` call it" in nested["summary"]
    assert results["total"]["status"] == "success", results["total"]["summary"]


def test_test_code_in_the_package_is_skipped_not_tested(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A library's own tests inside its package (titlecase ships `titlecase/tests.py`): tests
    are written for the code, not for its tests; the job is skipped with that reason."""
    (demo / "inventory" / "tests.py").write_text(
        "from inventory.pricing import apply_discount\n\n\n"
        "def test_discount():\n    assert apply_discount(10.0, 0.5) == 5.0\n"
    )
    _, report, _ = analyze("inventory/tests.py", {}, capsys, "--fix")
    (job,) = report["results"]
    assert (job["status"], job["outcome"]) == ("success", "skipped"), job
    assert job["summary"].startswith("it is test code (inventory/tests.py)"), job["summary"]
    assert not list((demo / "tests").glob("test_tests_*.py"))


def test_a_stored_tests_exist_is_not_reused_once_that_test_module_is_gone(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test agent's answer reads the project's test modules (its `reads:`): a stored
    "tests exist: test_inventory.py" was answered from the cache after the user deleted that
    file, and the function got no test. Unchanged, the second run is answered from the cache;
    a test module added elsewhere, or the one it named deleted, asks again."""
    test_module = demo / "test_inventory.py"
    test_module.write_text(
        "from inventory.pricing import apply_discount\n\n\n"
        "def test_discount():\n    assert apply_discount(10.0, 0.5) == 5.0\n"
    )

    def discount() -> tuple[str, str, bool]:
        report = analyze("inventory/pricing.py", {}, capsys, cache=True)[1]
        job = by_function(report)["apply_discount"]
        return job["outcome"], job["summary"], job["cached"]

    assert discount() == ("tested", "tests exist: test_inventory.py", False)
    assert discount() == ("tested", "tests exist: test_inventory.py", True)
    (demo / "test_other.py").write_text("def test_nothing():\n    pass\n")
    assert discount() == ("tested", "tests exist: test_inventory.py", False)
    test_module.unlink()
    outcome, summary, cached = discount()
    assert (outcome, cached) != ("tested", True) and "tests exist" not in summary, summary


def test_tests_at_the_projects_top_count_as_existing_tests(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pytest finds test modules anywhere: a library's own `test_<name>.py` beside its package
    (inflection ships `test_inflection.py` at its top) tests the function; no TST100, no file
    written. A function no test module mentions still gets both."""
    (demo / "test_inventory.py").write_text(
        "from inventory.pricing import apply_discount\n\n\n"
        "def test_discount():\n    assert apply_discount(10.0, 0.5) == 5.0\n"
    )
    _, report, _ = analyze("inventory/pricing.py", {}, capsys, "--fix")
    results = by_function(report)
    tested = results["apply_discount"]
    assert (tested["status"], tested["outcome"]) == ("success", "tested"), tested
    assert tested["summary"] == "tests exist: test_inventory.py"
    assert not tested["findings"]
    assert not list((demo / "tests").glob("test_pricing_apply_discount*.py"))
    others = [job for name, job in results.items() if name != "apply_discount"]
    assert others and all(job["outcome"] != "tested" for job in others), others


def test_a_module_named_like_its_function_is_no_test_of_the_function(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """decorator's `decorator` function was "tested" by every `from decorator import ...` (and
    every comment naming the module): a mention counts where code uses the name, not where a
    module of that name is imported."""
    (demo / "inventory" / "rounding.py").write_text(
        "def rounding(value):\n    return round(value, 2)\n\n\n"
        "def halve(value):\n    return value / 2\n"
    )
    (demo / "test_rounding.py").write_text(
        "# Tests of inventory.rounding\nfrom inventory.rounding import halve\n\n\n"
        "def test_halve():\n    assert halve(3) == 1.5\n"
    )
    _, report, _ = analyze("inventory/rounding.py", {}, capsys, "--fix")
    results = by_function(report)
    assert results["halve"]["summary"] == "tests exist: test_rounding.py"
    assert results["rounding"]["outcome"] != "tested", results["rounding"]
    assert [f["rule"] for f in results["rounding"]["findings"]] == ["TST100"]


UNITTEST_DISCOUNT = (
    "import unittest\n\nfrom inventory.pricing import apply_discount\n\n\n"
    "class Discount(unittest.TestCase):\n"
    "    def test_half(self):\n        self.assertEqual(apply_discount(10.0, 0.5), 5.0)\n"
)
"""A project's own unittest test of `apply_discount`, in a module pytest's defaults skip."""


@pytest.mark.parametrize(
    "where",
    [
        # pytimeparse ships its tests in `pytimeparse/tests/testtimeparse.py`.
        "inventory/tests/testpricing.py",
        # jsonpointer keeps them in `tests.py` beside its module (unittest's `test*.py` finds
        # it): found on a user trial, where TST100 said `join` had no tests and a second suite
        # was written beside the project's.
        "tests.py",
    ],
)
def test_unittest_modules_pytest_would_not_collect_count_as_existing_tests(
    demo: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """A tests folder inside the package, or a `tests.py` at the project's top: they test the
    function, no TST100, no file written."""
    (demo / where).parent.mkdir(exist_ok=True)
    (demo / where).write_text(UNITTEST_DISCOUNT)
    _, report, _ = analyze("inventory/pricing.py", {}, capsys, "--fix")
    tested = by_function(report)["apply_discount"]
    assert (tested["status"], tested["outcome"]) == ("success", "tested"), tested
    assert tested["summary"] == f"tests exist: {where}"
    assert not list((demo / "tests").glob("test_pricing_apply_discount*.py"))


def test_shared_tests_in_a_tests_package_and_a_classes_protocol_count_as_tests(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cachetools keeps its shared cache tests in `tests/__init__.py` (a mixin each test module
    subclasses) and reaches `__getitem__` as `cache[key]`: every module of a tests folder is
    test code, and a test naming the class tests its special methods. Neither gets TST100."""
    (demo / "inventory" / "shelf.py").write_text(
        "class Shelf:\n"
        "    def __init__(self, items):\n        self.items = list(items)\n\n"
        "    def __getitem__(self, index):\n        return self.items[index]\n\n"
        "    def __len__(self):\n        return len(self.items)\n\n"
        "    def first(self):\n        return self.items[0]\n\n"
        "    def last(self):\n        return self.items[-1]\n"
    )
    (demo / "tests").mkdir(exist_ok=True)
    (demo / "tests" / "__init__.py").write_text(
        "class ShelfTests:\n    def test_first(self):\n        assert self.shelf.first() == 1\n"
    )
    (demo / "tests" / "test_shelf.py").write_text(
        "from inventory.shelf import Shelf\nfrom tests import ShelfTests\n\n\n"
        "class TestShelf(ShelfTests):\n    shelf = Shelf([1, 2])\n\n"
        "    def test_index(self):\n        assert self.shelf[1] == 2\n"
    )
    _, report, _ = analyze("inventory/shelf.py", {}, capsys)
    results = by_function(report)
    for name in ("Shelf.first", "Shelf.__getitem__", "Shelf.__len__"):
        job = results[name]
        assert (job["status"], job["outcome"]) == ("success", "tested"), (name, job)
        assert not job["findings"], (name, job)
    untested = results["Shelf.last"]
    assert untested["outcome"] != "tested"
    assert [f["rule"] for f in untested["findings"]] == ["TST100"], untested


def test_private_code_is_tested_unless_the_option_leaves_it_to_the_public_codes_tests(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the option include_private false, a private helper (or any member of a private
    class) is left to the tests of the public code that uses it, as the docstring agent
    leaves it: skipped with that reason, no TST100. By default it is tested (ordered-set's
    `_is_atomic` has mutants only its own tests kill)."""
    (demo / "inventory" / "ledger.py").write_text(
        "def _cents(price):\n    return round(price * 100)\n\n\n"
        "class _Ledger:\n    def __len__(self):\n        return 0\n\n"
        "    def total(self, prices):\n        return sum(_cents(p) for p in prices)\n\n\n"
        "def total(prices: list) -> int:\n    return _Ledger().total(prices)\n"
    )
    _, report, _ = analyze(
        "inventory/ledger.py", {}, capsys, "-c", "agents.test.options.include_private=false"
    )
    results = by_function(report)
    for name, private in (
        ("_cents", "_cents"),
        ("_Ledger.__len__", "_Ledger"),
        ("_Ledger.total", "_Ledger"),
    ):
        job = results[name]
        assert (job["status"], job["outcome"]) == ("success", "skipped"), (name, job)
        assert job["summary"].startswith(f"it is private (`{private}`"), job["summary"]
        assert not job["findings"], job
    assert results["total"]["outcome"] != "skipped", results["total"]
    _, report, _ = analyze("inventory/ledger.py", {}, capsys)
    assert by_function(report)["_cents"]["outcome"] != "skipped"


def test_how_many_arguments_a_callable_parameter_is_called_with() -> None:
    source = (
        "from typing import Callable\n\n"
        "def retry(func, times=2):\n"
        "    def wrapper(*args, **kwargs):\n"
        "        return func(*args, **kwargs)\n"
        "    return wrapper\n\n"
        "def pick(items, key: Callable[[int, int], int], label: str):\n"
        "    return items\n\n"
        "class Timer:\n"
        "    def __init__(self, clock, name):\n"
        "        self.clock = clock\n"
        "        self.name = name\n\n"
        "    def now(self):\n"
        "        return self.clock()\n"
    )
    tree = ast.parse(source)
    retry, pick, timer = tree.body[1], tree.body[2], tree.body[3]
    assert isinstance(retry, ast.FunctionDef) and isinstance(pick, ast.FunctionDef)
    assert isinstance(timer, ast.ClassDef) and isinstance(timer.body[0], ast.FunctionDef)
    init = timer.body[0]
    assert callable_arities(retry, None, parameters_of(retry, False)) == {"func": None}
    assert callable_arities(pick, None, parameters_of(pick, False)) == {"key": 2}
    assert callable_arities(init, timer, parameters_of(init, True)) == {"clock": 0}


def test_a_parameter_a_builtin_calls_is_callable() -> None:
    """toolz's `valmap(func, d)` runs `map(func, d.values())` and had been given `3`: a
    function handed to `map`, `filter`, `functools.reduce` or a `key=` is called too."""
    source = (
        "import functools\n\n"
        "def valmap(func, d):\n    return dict(zip(d, map(func, d.values())))\n\n"
        "def pairs(func, a, b):\n    return list(map(func, a, b))\n\n"
        "def keep(predicate, items, order):\n"
        "    return sorted(filter(predicate, items), key=order)\n\n"
        "def fold(step, items, start):\n    return functools.reduce(step, items, start)\n\n"
        "def count(items, key):\n    return len(items)\n"  # named key, but not called
    )
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = callable_arities(node, None, parameters_of(node, False))
    assert found == {
        "valmap": {"func": 1},
        "pairs": {"func": 2},
        "keep": {"predicate": 1, "order": 1},
        "fold": {"step": 2},
        "count": {},
    }


def test_a_constructor_parameter_is_what_the_class_uses_the_attribute_keeping_it_as() -> None:
    """pylru's `WriteThroughCacheManager(store, size)` keeps `self.store = store` and reads
    `self.store[key]`, `self.store.keys()` in its other methods: `store` was given `3`, and
    every call of its 13 methods raised AttributeError (not pinned: the code raises nothing)."""
    source = (
        "class Mirror:\n"
        "    def __init__(self, backing, limit):\n"
        "        self.backing = backing\n"
        "        self.limit = limit\n"
        "        self.hits = 0\n\n"
        "    def names(self):\n"
        "        return sorted(self.backing.keys())[: self.limit]\n"
    )
    tree = ast.parse(source)
    owner = tree.body[0]
    assert isinstance(owner, ast.ClassDef) and isinstance(owner.body[0], ast.FunctionDef)
    assert callee_usage(owner.body[0], tree, owner) == {"backing": "dict"}
    instances = {str(c.instance) for c in candidate_calls(source, "Mirror.names")}
    assert "Mirror({'a': 1, 'b': 2}, 3)" in instances, instances
    assert not any(i.startswith("Mirror(3,") for i in instances), instances


def test_a_parameter_whose_reads_are_a_temporal_types_is_given_that_type() -> None:
    """rfc3339's `_string(d, timezone)` reads `d.year` to `d.second`, `_timedelta_to_seconds(td)`
    `td.days`, `td.seconds`: they were given `3` and `'abc'`, and nothing was pinned. A name
    whose every read is an attribute of datetime, date or timedelta, one of them its own, gets
    that type; `d.replace(...)` alone says nothing (text has `replace` too), nor does a flag
    named `use_...` get anything but a bool."""
    source = (
        "def stamp(moment, zone, use_seconds):\n"
        "    text = '%04d-%02d-%02dT%02d:%02d' % (moment.year, moment.month, moment.day,\n"
        "                                         moment.hour, moment.minute)\n"
        "    return text + zone\n\n"
        "def total(span):\n    return span.days * 86400 + span.seconds\n\n"
        "def label(day):\n    return f'{day.year}/{day.month} {day.isoformat()}'\n\n"
        "def swap(word):\n    return word.replace('a', 'b')\n"
    )
    used = {
        node.name: usage(node)
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }
    assert used["stamp"]["moment"] == "datetime.datetime"
    assert used["total"] == {"span": "datetime.timedelta"}
    assert used["label"] == {"day": "datetime.date"}
    assert used["swap"] == {"word": "str"}
    first = candidate_calls(source, "total")[0].arguments
    assert first == "datetime.timedelta(days=1)", first
    flags = {c.arguments.rsplit(", ", 1)[-1] for c in candidate_calls(source, "stamp")}
    assert flags <= {"True", "False"}, flags


def test_a_parameter_whose_length_is_compared_is_given_values_of_those_lengths() -> None:
    """mnemonic's `to_mnemonic(data: bytes)` raises unless `len(data)` is 16, 20, 24, 28 or 32:
    it was given only `b'abc'`, and its one test was the ValueError. The shortest and longest
    of the lengths the code asks for, in the parameter's type."""
    source = (
        "def words(data: bytes) -> int:\n"
        "    if len(data) not in [16, 20, 24]:\n"
        "        raise ValueError('16, 20 or 24 bytes')\n"
        "    return data[0] * 2\n"
    )
    given = [c.arguments for c in candidate_calls(source, "words")]
    assert given[1:3] == ["b'abcdefghijklmnop'", "b'abcdefghijklmnopqrstuvwx'"], given
    assert not any(g.startswith(("'", "[")) for g in given), given  # text or lists: not bytes


def test_an_instance_is_built_with_the_authors_defaults_first_but_never_a_shared_one() -> None:
    """json5's `Parser(msg, fname, pos=0)` was only ever built with `pos=10`, past the end of
    any text it was given, so `parse()` only raised IndexError. An instance with the defaults
    left to the signature comes first; a mutable default (`items=[]`) is given a value even
    there: every instance built on it, and every test, would share one list."""
    source = (
        "class Reader:\n"
        "    def __init__(self, msg, fname, pos=0):\n"
        "        self.msg, self.fname, self.pos = msg, fname, pos\n\n"
        "    def peek(self):\n"
        "        return self.msg[self.pos]\n\n\n"
        "class Cart:\n"
        "    def __init__(self, owner, items=[]):\n"
        "        self.owner, self.items = owner, items\n\n"
        "    def count(self):\n"
        "        return len(self.items)\n"
    )
    readers = list(dict.fromkeys(str(c.instance) for c in candidate_calls(source, "Reader.peek")))
    assert readers[0] == "Reader('abc', 'Hello world')", readers
    assert any("pos=" in reader for reader in readers[1:]), readers
    carts = {str(c.instance) for c in candidate_calls(source, "Cart.count")}
    assert all("items=" in cart for cart in carts), carts


def test_a_parameter_read_as_a_function_is_callable_one_read_as_a_class_is_not() -> None:
    """decorator's `decorate(func, caller)` reads `func.__name__` and passes it to its own
    `inspect_sig`; it got strings, never a function, and nothing of it was pinned."""
    source = (
        "import inspect\nfrom typing import Callable\n\n"
        "try:\n"
        "    from annotationlib import Format\n"
        "    def sig(func):\n"
        "        return inspect.signature(func, annotation_format=Format.FORWARDREF)\n"
        "except ImportError:\n"
        "    sig = inspect.signature\n\n"
        "def describe(func, label):\n"
        "    return label + func.__name__\n\n"
        "def arity(fn, extra):\n"
        "    return len(sig(fn).parameters) + extra\n\n"
        "def named(cls, value):\n"
        "    return cls.__name__ if issubclass(cls, Exception) else value\n\n"
        "def klass_name(klass):\n"
        "    return klass.__qualname__\n\n"
        "def tagged(value, kind):\n"
        "    return isinstance(value, kind) and kind.__name__ + value.__name__\n\n"
        "def labelled(func: Callable[[int], str]):\n"
        "    return func.__qualname__\n"
    )
    tree = ast.parse(source)
    readers = function_readers(tree)
    assert "sig" in readers and "signature" in readers
    found = {}
    for node in tree.body[3:]:
        assert isinstance(node, ast.FunctionDef)
        parameters = parameters_of(node, False)
        found[node.name] = callable_arities(node, None, parameters, None, readers)
    assert found == {
        "describe": {"func": None},
        "arity": {"fn": None},
        "named": {},  # issubclass: a class
        "klass_name": {},  # named as a class
        "tagged": {"value": None},  # `kind` is the class an isinstance checks against
        "labelled": {"func": 1},  # the annotation's arity, not "not known"
    }
    arity = tree.body[4]
    assert isinstance(arity, ast.FunctionDef)
    # Without the module's own reader, `sig(fn)` says nothing.
    assert callable_arities(arity, None, parameters_of(arity, False)) == {}


def test_a_function_defined_in_a_block_is_not_possible_not_a_failure(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A function defined under an `if` at the module's top level (per platform, or under
    `if __name__ == "__main__":`) may not exist when a test imports the module: the job says
    so (not possible), where it ended as an error after write_tests refused it."""
    (demo / "inventory" / "platform_bits.py").write_text(
        "import sys\n\n"
        "if sys.platform == 'win32':\n"
        "    def separator():\n        return '\\\\'\n"
        "else:\n"
        "    def separator():\n        return '/'\n"
    )
    _, report, _ = analyze("inventory/platform_bits.py", {}, capsys)
    jobs = [r for r in report["results"] if r["node"]["name"] == "separator"]
    assert len(jobs) == 2
    for job in jobs:
        assert job["status"] == "not_possible", job
        assert "defined inside a block" in job["summary"]


def test_a_pytest_configuration_that_needs_a_missing_plugin_ends_the_job_as_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A project whose `addopts` names an option of a plugin its Python lacks (`--cov=...`
    without pytest-cov): pytest exits with a usage error before any test, with our plugins
    disabled and without. The job ends as an environment error that names pytest's complaint
    and what to do; it had ended "not done" with "pytest ran no test:" and nothing after."""
    project = tmp_path / "calc"
    (project / "calc").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "calc"\n')
    (project / "tox.ini").write_text("[pytest]\naddopts = --no-such-plugin-option=calc\n")
    (project / "calc" / "__init__.py").write_text("")
    (project / "calc" / "ops.py").write_text("def double(x: int) -> int:\n    return 2 * x\n")
    monkeypatch.chdir(project)
    code, report, _ = analyze("calc/ops.py", {"double": ["2)"]}, capsys, "--fix")
    (result,) = report["results"]
    assert result["status"] == "error", result
    assert result["error"]["code"] == "tool_environment", result["error"]
    message = result["error"]["message"]
    assert "pytest could not start with the project's configuration" in message, message
    assert "--no-such-plugin-option" in message, message
    assert "(tox.ini): " in message and "Remora with that environment active" in message
    reasons = [f["message"] for f in result["findings"] if f["rule"] == "TST102"]
    assert reasons and all("--no-such-plugin-option" in reason for reason in reasons), reasons
    assert not (project / "tests").exists()
    assert code == 2
