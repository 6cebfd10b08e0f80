"""The bundled docstring agent end to end, and the host functions it stands on.

The scripted model plays a sensible small model: it calls inspect_docstring, fills in the
arguments that tool asks for, calls write_docstring, then submit_result. What the tests assert
is the effect on the files (`remora analyze --fix` on a copy of examples/demo), not the prose.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remora.agents import installed, registry
from remora.agents.installed import InstalledAgent
from remora.bundled_agents.docstring.library.check import check_docstring
from remora.bundled_agents.docstring.library.parse import parse_docstring
from remora.bundled_agents.docstring.library.render import render_docstring
from remora.bundled_agents.docstring.library.source_compare import compare_python
from remora.cli.main import main
from remora.jobs.transcripts import read_transcripts
from remora.models.scripted.server import Reply, ScriptedModelServer, tool_call

REPO = Path(__file__).parent.parent
DEMO = REPO / "examples" / "demo"
AGENT = REPO / "remora" / "bundled_agents" / "docstring"

# Extra modules written into the copy, one job with a change per file at most: --fix applies one
# change per file per run (a second change to a file conflicts), and these tests run once.
PRICE = """\
def discounted(price: float, percent: float = 0.0) -> float:
    return round(price * (1 - percent / 100), 2)
"""
SHELF = '''\
class Shelf:
    """A shelf of items."""

    def add(self, name: str, count: int) -> None:
        # Counts may be negative: a return to stock.
        self.items[name] = self.items.get(name, 0) + count
'''
DOCUMENTED = '''\
def restock(name, count):
    """Order more of an item.

    Args:
        name: The item to order.
        count: How many to order.

    Returns:
        The order number.
    """
    return place_order(name, count)


def _helper(value):
    return value * 2
'''
OUTDATED = '''\
def transfer(name, count, destination):
    """Move items to another store.

    Args:
        name: The item to move.
        count: How many to move.
        target: Where they go.

    Raises:
        KeyError: When the item is unknown.
    """
    if count < 0:
        raise ValueError("count must not be negative")
    destination.add(name, count)
'''
EXTRA = {
    "styled/price.py": PRICE,
    "styled/shelf.py": SHELF,
    "styled/documented.py": DOCUMENTED,
    "styled/outdated.py": OUTDATED,
}


# --------------------------------------------------------------------------- the model


class DocstringWriter:
    """A sensible model. The runner observes inspect_docstring and write_docstring, so the chat
    rule is asked only when a job stays open (it then submits). As the completion endpoint it
    continues the code as a base model would: "Summary of NAME" after the opening quotes,
    "The PARAM to use." after an Args entry, "value of NAME" after "Returns: The"; as the
    reviewer (`score_text`) it finds the code likelier after a summary than without one.

    `summary` overrides the greedy summary (to make it write something bad); `retry` makes the
    tool's sampled drafts a plain summary.
    """

    def __init__(self, summary: str | None = None, *, retry: bool = False) -> None:
        self.summary = summary
        self.retry = retry
        self.writes: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        offered = [tool["function"]["name"] for tool in body["tools"]]
        messages = body["messages"]
        results = {m["name"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}
        inspected = results["inspect_docstring"]  # the runner's observation, always first
        written = results.get("write_docstring", {}).get("written", False)
        if offered == ["submit_result"] or "write_docstring" in results:
            return self._submit()
        if inspected.get("status") not in ("missing", "outdated"):
            return self._submit()
        self.writes.append({})
        return tool_call("write_docstring", {}) if not written else self._submit()

    def complete(self, body: dict[str, Any]) -> str | float:
        prompt = body["prompt"]
        if body.get("echo"):  # the reviewer: log-probability per token of the code
            return -0.2 if '"""Summary of' in prompt else -1.0
        if prompt.endswith('"""'):
            if self.summary is not None and not (self.retry and body.get("temperature")):
                return self.summary
            names = re.findall(r"(?:def|class) ([A-Za-z_]\w*)", prompt)
            return f"\n    Summary of {names[-1]}.\n    "
        parameter = re.search(r"\n +\**(\w+)(?: \([^)]*\))?:$", prompt)
        if parameter:
            return f" The {parameter[1]} to use.\n"
        if prompt.endswith("The"):
            names = re.findall(r"(?:def|class) ([A-Za-z_]\w*)", prompt)
            return f" value of {names[-1]}.\n"
        return ""

    @staticmethod
    def _submit() -> Reply:
        return tool_call("submit_result", {"summary": "Done."})


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of examples/demo plus the extra modules, as the working directory."""
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("__pycache__", ".remora_cache"))
    for name, text in EXTRA.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    # The scripted model's reviewer favours its own summaries: with the reviewer on, they are
    # confident enough to be written (its grounding alone is not: "Summary of" is in no code).
    (root / "remora.yaml").write_text(
        "server:\n  retries: 0\n  timeout: 10\n"
        "agents:\n  docstring:\n    options:\n      reviewer: true\n      drafts: write\n"
    )
    monkeypatch.chdir(root)
    return root


def analyze(
    rule: Callable[[dict[str, Any]], Reply],
    *args: str,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, dict[str, Any]]:
    completion = rule.complete if isinstance(rule, DocstringWriter) else None
    with ScriptedModelServer(rule=rule, completion=completion) as server:
        command = ["analyze", ".", "--agents", "docstring", "--format", "json", "--no-cache"]
        code = main([*command, "--base-url", server.base_url, *args])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, json.loads(out)


def results_by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{r['node']['file']}::{r['node']['qualified_name']}": r for r in report["results"]}


def without_docstrings(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def docstring_of(path: Path, qualname: str) -> str | None:
    node: Any = ast.parse(path.read_text())
    for part in qualname.split("."):
        node = next(child for child in node.body if getattr(child, "name", None) == part)
    return ast.get_docstring(node)


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))}


# --------------------------------------------------------------------------- end to end

EXPECTED_PRICE_DOCSTRING = {
    "google": """\
        Summary of discounted.

        Args:
            price: The price to use.
            percent: The percent to use. Defaults to ``0.0``.

        Returns:
            The value of discounted.""",
    "numpy": """\
        Summary of discounted.

        Parameters
        ----------
        price
            The price to use.
        percent
            The percent to use. Defaults to ``0.0``.

        Returns
        -------
        float
            The value of discounted.""",
    "sphinx": """\
        Summary of discounted.

        :param price: The price to use.
        :param percent: The percent to use. Defaults to ``0.0``.
        :returns: The value of discounted.""",
}
EXPECTED_SHELF_ADD = {
    "google": '''\
    def add(self, name: str, count: int) -> None:
        """Summary of add.

        Args:
            name: The name to use.
            count: The count to use.
        """
        # Counts may be negative: a return to stock.
''',
    "numpy": '''\
    def add(self, name: str, count: int) -> None:
        """Summary of add.

        Parameters
        ----------
        name
            The name to use.
        count
            The count to use.
        """
        # Counts may be negative: a return to stock.
''',
    "sphinx": '''\
    def add(self, name: str, count: int) -> None:
        """Summary of add.

        :param name: The name to use.
        :param count: The count to use.
        """
        # Counts may be negative: a return to stock.
''',
}


@pytest.mark.parametrize("style", ["google", "numpy", "sphinx"])
def test_fix_writes_docstrings_in_the_configured_style(
    demo: Path, style: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(demo)
    code, report = analyze(
        DocstringWriter(), "--fix", "-c", f"agents.docstring.options.style={style}", capsys=capsys
    )
    assert code == 1  # findings
    jobs = results_by_name(report)
    assert all(r["status"] == "success" for r in report["results"]), report["results"]

    # A function: the whole docstring, in the chosen style.
    price = demo / "styled/price.py"
    assert docstring_of(price, "discounted") == textwrap.dedent(EXPECTED_PRICE_DOCSTRING[style])
    # A method: indented at the body's eight spaces, above the comment that opened the body.
    assert EXPECTED_SHELF_ADD[style] in (demo / "styled/shelf.py").read_text()
    # A class whose docstring is fine is left alone, as is its file beyond the method's edit.
    assert jobs["styled/shelf.py::Shelf"]["changes"] == []
    assert jobs["styled/shelf.py::Shelf"]["findings"] == []

    # Every file still parses and keeps its code; only docstrings differ.
    after = snapshot(demo)
    assert after.keys() == before.keys()
    for name, text in after.items():
        assert without_docstrings(text) == without_docstrings(before[name]), name
    changed = {name for name in after if after[name] != before[name]}
    assert {"styled/price.py", "styled/shelf.py", "styled/outdated.py"} <= changed
    assert "styled/documented.py" not in changed
    # The demo's files each took one docstring (a second change to a file waits for the next
    # run), written in the chosen style.
    marker = {"google": "Args:", "numpy": "----------", "sphinx": ":param "}[style]
    for name in changed - set(EXTRA):
        added = (
            after[name].replace(before[name], "") if before[name] in after[name] else after[name]
        )
        assert "Summary of " in added, name
        assert marker in after[name] or "Summary of Stock." in after[name], name

    findings = {
        (f["file"], f["line"], f["rule"]): f for r in report["results"] for f in r["findings"]
    }
    # A missing docstring is pydocstyle's D1xx, as ruff reports it (code, message, column).
    assert findings[("styled/price.py", 1, "D103")]["column"] == 5
    assert findings[("styled/shelf.py", 4, "D102")]["message"] == (
        "Missing docstring in public method"
    )


def test_outdated_docstring_is_fixed_in_its_own_style(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # NumPy is configured, but the docstring is Google: without a [tool.pydoclint], pydoclint
    # reads it as Google, and it is fixed in Google style, keeping what the author wrote: the
    # renamed parameter keeps its sentence. The Raises section is left as written: its KeyError
    # ("when the item is unknown") may come from `destination.add(...)`, which no raise
    # statement shows; DOC503 stays a finding without an edit.
    _, report = analyze(
        DocstringWriter(), "--fix", "-c", "agents.docstring.options.style=numpy", capsys=capsys
    )
    job = results_by_name(report)["styled/outdated.py::transfer"]
    assert [(f["rule"], f["line"], f["severity"], f["fix"]) for f in job["findings"]] == [
        ("DOC103", 1, "warning", "edit"),
        ("DOC503", 1, "warning", None),
    ]
    # pydoclint's own messages.
    assert job["findings"][0]["message"].startswith("Function `transfer`: Docstring arguments")
    assert "[destination: ]" in job["findings"][0]["message"]
    assert "Raised exceptions in the body: ['ValueError']" in job["findings"][1]["message"]
    assert job["outcome"] == "updated" and job["turns"] == 0
    assert (
        (demo / "styled/outdated.py").read_text()
        == '''\
def transfer(name, count, destination):
    """Move items to another store.

    Args:
        name: The item to move.
        count: How many to move.
        destination: Where they go.

    Raises:
        KeyError: When the item is unknown.
    """
    if count < 0:
        raise ValueError("count must not be negative")
    destination.add(name, count)
'''
    )


def test_correct_and_private_definitions_are_left_alone(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = DocstringWriter()
    _, report = analyze(model, capsys=capsys)
    jobs = results_by_name(report)
    for name in ("styled/documented.py::restock", "styled/documented.py::_helper"):
        assert jobs[name]["status"] == "success"
        assert jobs[name]["changes"] == []
        assert jobs[name]["findings"] == []
    # Finished by the runner's own inspection: no model request at all.
    assert jobs["styled/documented.py::restock"]["outcome"] == "current"
    assert jobs["styled/documented.py::_helper"]["outcome"] == "skipped"
    assert jobs["styled/documented.py::restock"]["turns"] == 0
    assert jobs["styled/documented.py::restock"]["submitted"] is None
    # The short docstring of the demo's parse_sku has no sections to disagree: it stays.
    assert jobs["inventory/pricing.py::parse_sku"]["changes"] == []
    # No job asked the model for a chat turn: the tools settled every one.
    assert model.writes == []
    assert all(r["turns"] == 0 for r in report["results"]), report["results"]


def test_drafts_that_copy_code_are_refused(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(demo)
    model = DocstringWriter(summary="return round(price, 2)")
    code, report = analyze(model, "--fix", capsys=capsys)
    assert code == 1  # the findings are still reported
    after = snapshot(demo)
    # Only the out-of-date docstring, which needs no summary, was written.
    assert {name for name in after if after[name] != before[name]} == {"styled/outdated.py"}
    job = results_by_name(report)["styled/price.py::discounted"]
    assert job["changes"] == []
    assert job["status"] == "not_possible" and job["error"] is None  # no draft fits: the reason
    assert "summary: the draft 'Return round(price, 2).' copies code" in job["summary"]
    assert [f["rule"] for f in job["findings"]] == ["D103"]


def test_a_refused_draft_is_drafted_again(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The greedy draft copies code; the tool's second, sampled draft stands."""
    model = DocstringWriter(summary="return round(price, 2)", retry=True)
    _, report = analyze(model, "--fix", capsys=capsys)
    job = results_by_name(report)["styled/price.py::discounted"]
    assert job["outcome"] == "written"
    assert job["turns"] == 0  # write_docstring, observed by the runner, ended the job
    written = docstring_of(demo / "styled/price.py", "discounted")
    assert written is not None and written.startswith("Summary of discounted.\n")


def test_a_tool_that_breaks_indentation_is_stopped_by_the_check(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "site" / "docstring"  # an installed copy of the agent's package
    shutil.copytree(AGENT, broken)
    copy = InstalledAgent(
        name="docstring", package="remora.bundled_agents.docstring", folder=broken, distribution="t"
    )
    for module in (installed, registry):
        monkeypatch.setattr(module, "installed_agents", lambda: {"docstring": copy})
    script = broken / "tools/write_docstring.pym"
    source = script.read_text()
    rendering = 'render_docstring(template, template["style"], check["indent"], width)'
    assert rendering in source
    # Two spaces short: the docstring's lines come out left of its opening quotes.
    script.write_text(source.replace(rendering, rendering.replace('"indent"]', '"indent"][2:]')))
    before = snapshot(demo)
    model = DocstringWriter()
    _, report = analyze(model, "--fix", capsys=capsys)
    # One-line docstrings (the classes') have no lines to misplace; every other edit is refused.
    assert all(r["changes"] == [] for r in report["results"] if r["node"]["type"] != "class")
    after = snapshot(demo)
    assert after["styled/price.py"] == before["styled/price.py"]
    assert after["styled/shelf.py"] == before["styled/shelf.py"]
    price = results_by_name(report)["styled/price.py::discounted"]
    assert price["status"] == "not_possible" and price["summary"].startswith("no sound draft")


def test_fix_until_done_documents_the_whole_demo(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run --fix as a user would, until nothing is left: one change per file per run, and the
    cache answers the jobs whose file did not change."""
    before = snapshot(demo)
    for _ in range(10):
        current = snapshot(demo)
        model = DocstringWriter()
        with ScriptedModelServer(rule=model, completion=model.complete) as server:
            main(["analyze", ".", "--agents", "docstring", "--fix", "--base-url", server.base_url])
        capsys.readouterr()
        if snapshot(demo) == current:
            break
    after = snapshot(demo)
    for name, text in after.items():
        assert without_docstrings(text) == without_docstrings(before[name]), name
    stock = demo / "inventory/stock.py"
    for qualname in ("Stock", "Stock.__init__", "Stock.add", "Stock.remove", "Stock.total", "load"):
        assert docstring_of(stock, qualname), qualname
    code, report = analyze(DocstringWriter(), capsys=capsys)
    # What is left: transfer's Raises documents a KeyError that may come from a call
    # (`destination.add`), and says nothing of its ValueError: reported, never rewritten.
    left = [
        (r["node"]["qualified_name"], f["rule"]) for r in report["results"] for f in r["findings"]
    ]
    assert left == [("transfer", "DOC503")], left
    assert code == 1


def test_tool_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "check", "docstring"]) == 0, capsys.readouterr()


# --------------------------------------------------------------------------- compare_python

ORIGINAL = """\
class Box:
    def fill(self, items):
        # keep the order
        for item in items:
            self.add(item)
"""


def documented(docstring_lines: str) -> str:
    return ORIGINAL.replace("        # keep", docstring_lines + "        # keep")


def test_compare_python_accepts_a_new_docstring() -> None:
    after = documented(
        '        """Fill the box.\n\n        Args:\n            items: What.\n        """\n'
    )
    verdict = compare_python(ORIGINAL, after)
    assert verdict == {
        "ok": True,
        "problems": [],
        "parses": True,
        "same_code": True,
        "changed_docstrings": [3],
    }


def test_compare_python_accepts_changed_and_removed_docstrings() -> None:
    before = '"""Module."""\n\n\nclass A:\n    """Old."""\n\n    x = 1\n'
    after = '"""Module, better."""\n\n\nclass A:\n    x = 1\n'
    assert compare_python(before, after)["ok"]


@pytest.mark.parametrize(
    ("after", "problem"),
    [
        (ORIGINAL.replace("self.add(item)", "self.add(items)"), "line 5: the code differs"),
        (ORIGINAL.replace("keep the order", "keep order"), "line 3: a comment changed"),
        (ORIGINAL.replace("for item in items:", "for item in items"), "does not parse"),
        (documented('        """Fill the """box""" now."""\n'), "does not parse"),
        # The model's text closing the docstring early and carrying code along.
        (documented('        """Fill."""; import os; """x."""\n'), "the code differs"),
        (
            documented(
                '        """Fill the box.\n\n      Args:\n            items: What.\n        """\n'
            ),
            "line 5: a docstring line is indented with 6 spaces, less than the docstring's 8",
        ),
        (
            documented('        """Fill the box.\n\n        More.\n    """\n'),
            "line 6: the closing quotes are indented with 4 spaces, not 8 spaces",
        ),
        (documented('        x = 1; """Fill."""\n'), "the code differs"),
        # A docstring in tabs over a body in spaces: Python refuses it or the check does.
        (documented('\t\t"""Fill the box."""\n'), "line 3"),
    ],
)
def test_compare_python_refuses(after: str, problem: str) -> None:
    verdict = compare_python(ORIGINAL, after)
    assert not verdict["ok"]
    assert any(problem in text for text in verdict["problems"]), verdict["problems"]


def test_compare_python_refuses_an_original_that_does_not_parse() -> None:
    broken = "def f(:\n    pass\n"
    verdict = compare_python(broken, broken)
    assert not verdict["ok"]
    assert "the original does not parse" in verdict["problems"][0]


def test_compare_python_does_not_take_an_fstring_for_a_docstring() -> None:
    before = 'def f(x):\n    f"{x}"\n    return x\n'
    assert not compare_python(before, 'def f(x):\n    f"{x}!"\n    return x\n')["ok"]
    docstring_above = 'def f(x):\n    """Doc."""\n    f"{x}"\n    return x\n'
    assert compare_python(before, docstring_above)["ok"]


# --------------------------------------------------------------------------- the other helpers


def test_check_docstring_reports_what_the_signature_needs() -> None:
    source = textwrap.dedent(
        '''\
        import typing


        class Store:
            @staticmethod
            def make(name, *args, key=None, **options) -> "Store":
                return Store()

            @property
            def size(self) -> int:
                """The number of items."""
                return 0

            @typing.overload
            def get(self, name: str) -> int: ...

            def walk(self):
                """Walk the items.

                Returns:
                    Nothing useful.
                """
                yield from ()

        def inline(a): return a
        '''
    )
    make = check_docstring(source, 5)
    assert make is not None
    assert (make["status"], make["method"], make["line"], make["column"]) == ("missing", True, 6, 9)
    assert [p["doc_name"] for p in make["parameters"]] == ["name", "*args", "key", "**options"]
    assert make["result"] == {"section": "Returns", "annotation": '"Store"'}
    assert make["needs"] == {
        "summary": True,
        "parameters": ["name", "*args", "key", "**options"],
        "result": "Returns",
    }
    size = check_docstring(source, 10)
    assert size is not None and (size["status"], size["result"]) == ("present", None)
    get = check_docstring(source, 15)
    assert get is not None and get["status"] == "skipped"
    walk = check_docstring(source, 17)
    assert walk is not None and walk["status"] == "present"  # pydoclint judges it, not this
    inline = check_docstring(source, 25)
    assert inline is not None
    assert inline["splice"]["before"] == "\n    " and inline["splice"]["after"] == "\n    "
    assert check_docstring(source, 2) is None


def test_inline_body_moves_under_the_new_docstring() -> None:
    source = "class A:\n    def f(self): return 1\n"
    check = check_docstring(source, 2, "google")
    assert check is not None
    template = {**check["template"], "summary": "Return one."}
    template["returns"] = {**template["returns"], "description": "One."}
    literal = render_docstring(template, "google", check["indent"])
    splice = check["splice"]
    after = source[: splice["start"]] + splice["before"] + literal + splice["after"]
    after += source[splice["end"] :]
    assert after == (
        'class A:\n    def f(self):\n        """Return one.\n\n        Returns:\n'
        '            One.\n        """\n        return 1\n'
    )
    assert compare_python(source, after)["ok"]


@pytest.mark.parametrize(
    "docstring",
    [
        """\
        Fetch rows.

        Longer text
        over two lines.

        Args:
            table (str): The table.
            *columns: Columns to read,
                all of them when empty.

        Keyword Args:
            timeout: Seconds.

        Returns:
            list[Row]: The rows.

        Raises:
            KeyError: No such table.
        """,
        """\
        Fetch rows.

        Parameters
        ----------
        table : str
            The table.
        *columns
            Columns to read.

        Returns
        -------
        list of Row
            The rows.

        Notes
        -----
        Slow.
        """,
        """\
        Fetch rows.

        :param table: The table.
        :type table: str
        :param columns: Columns to read.
        :returns: The rows.
        :rtype: list[Row]
        :raises KeyError: No such table.
        """,
    ],
    ids=["google", "numpy", "sphinx"],
)
def test_parse_and_render_round_trip(docstring: str) -> None:
    text = textwrap.dedent(docstring).strip()
    parts = parse_docstring(text)
    assert parts["summary"] == "Fetch rows."
    assert [p["name"].lstrip("*") for p in parts["parameters"]][:2] == ["table", "columns"]
    assert parts["returns"] is not None
    literal = render_docstring(parts, parts["style"], indent="")
    assert literal == f'"""{text}\n"""'


def test_recorded_drafts_say_which_the_tool_kept(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """For `remora train`: a draft the tool refused is not a lesson, even though its text (code
    it copied) is in the file; the draft it wrote is."""
    model = DocstringWriter(summary="return round(price, 2)", retry=True)
    analyze(model, "--record", str(tmp_path / "record"), capsys=capsys)
    (job,) = [
        transcript
        for transcript in read_transcripts(tmp_path / "record")
        if transcript.node == "styled/price.py::discounted"
    ]
    assert job.verified
    # No chat turn: the runner observed both tools; the completions are what write_docstring
    # asked for (the reviewer's scores are not recorded: the model wrote nothing).
    assert all(turn.kind == "completion" for turn in job.turns)
    drafts = {turn.kept_part().strip(): turn.kept for turn in job.turns}
    assert drafts["return round(price, 2)"] is False
    # Drafting stops at the end of the first sentence, its full stop with it (the tool
    # writes it back): that is the recorded text.
    assert drafts["Summary of discounted"] is True
