"""A written test holds the model's choices as data only. Every name the renderer writes as code
(an attribute after `result.` or the instance, a keyword argument, a test's parameter or
variable, an imported name, an exception, a test's name) is checked on the host as an identifier
that is not a keyword (case_render.code_name); every value is a literal read back on the host
(case_render.data_literal). An entry that fails is not pinned; a call that cannot be written is
not rendered.

The end-to-end proof: a class that sets its attributes from a mapping turns a dict key the model
chose into an attribute name; through `--fix` and the user's own pytest, that key never becomes
code."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from remora.tool_library.case_checks import code_name, data_literal
from remora.tool_library.case_render import render_module, render_tests
from tests.test_call_exploration import PYTEST_QUIET, analyze, make_project, written

HOSTILE = 'a == 0 or __import__("os").system("touch PWNED") == 0 or result.a'
"""A dict key that, written after `result.` with `== 1` behind it, runs a shell command and
passes whatever the command did: `assert result.a == 0 or ... or result.a == 1`."""


def observation(**seen: Any) -> dict[str, Any]:
    """What the probe reports of one call that returned."""
    return {
        "outcome": "returned",
        "type": "int",
        "value": "1",
        "arcs": [[1, 2]],
        "state_changed": [],
        "mutated": {},
    } | seen


def chosen(arguments: str, seen: Mapping[str, Any], instance: str | None = None) -> dict[str, Any]:
    return {
        "candidate": {"arguments": arguments, "instance": instance, "origin": "model"},
        "seen": dict(seen),
    }


def runs_nothing(code: str) -> None:
    """The code compiles and names nothing the renderer never writes: no `__import__`, no
    `os`, no `system` (the hostile text may stay inside a string literal: data)."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        assert not (isinstance(node, ast.Name) and node.id in ("__import__", "os")), code
        assert not (isinstance(node, ast.Attribute) and node.attr == "system"), code
    compile(tree, "<test>", "exec")


@pytest.mark.parametrize(
    ("name", "writable"),
    [
        ("kind", True),
        ("_private", True),
        ("match", True),  # a soft keyword is a name
        ("größe", True),
        (HOSTILE, False),
        ("class", False),
        ("None", False),
        ("", False),
        ("a b", False),
        ("1a", False),
        ("ﬁle", False),  # NFKC folds it to `file`: the code would name another attribute
        (None, False),
    ],
)
def test_code_name_is_an_identifier_that_is_not_a_keyword(name: Any, writable: bool) -> None:
    assert code_name(name) is writable


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("1", "1"),
        ("-2.5", "-2.5"),
        ("'a\\nb'", "'a\\nb'"),
        ("{'a': [1, (2,)], 'b': None}", "{'a': [1, (2,)], 'b': None}"),
        ("set()", "set()"),
        ("1 # a comment", "1"),  # only the tree is written, never the text around it
        ("__import__('os').system('touch PWNED')", None),
        ("print(1)", None),
        ("x", None),
        ("[(str, 'a')]", "[(str, 'a')]"),  # the builtin a callable parameter was given
        ("{len: 1}", "{len: 1}"),
        ("[open]", None),
        ("str('a')", None),
        ("1; 2", None),
        ("", None),
        (None, None),
        (["1"], None),
    ],
)
def test_data_literal_writes_only_literals(text: Any, code: str | None) -> None:
    assert data_literal(text) == code


def test_a_state_entry_whose_name_is_not_an_identifier_is_not_pinned() -> None:
    """The returned object's attributes, the instance's state after a method and an argument
    it mutated: entries named by a hostile key or a keyword are dropped, the rest pinned; a
    value that is not a literal is not pinned either."""
    returned = observation(
        type="Record",
        value=None,
        attributes={"a": "1", HOSTILE: "1", "class": "2", "kind": "__import__('os')"},
    )
    (test,) = render_tests("load", [chosen("{'a': 1}", returned)], ["fields"], "pkg.records")
    assert "    assert result.a == 1\n" in test["code"]
    assert "__import__" not in test["code"] and "result.class" not in test["code"]
    assert "result.kind" not in test["code"]
    runs_nothing(test["code"])

    changed = observation(value="None", instance={HOSTILE: "1", "if": "2", "count": "3"})
    (test,) = render_tests(
        "Stock.add", [chosen("1", changed, instance="Stock()")], ["amount"], "pkg.stock"
    )
    assert "    assert stock.count == 3\n" in test["code"]
    assert "__import__" not in test["code"] and "stock.if" not in test["code"]
    runs_nothing(test["code"])

    mutated = observation(mutated={"items": "[]", HOSTILE: "[1]"})
    (test,) = render_tests("drain", [chosen("[1, 2]", mutated)], ["items"], "pkg.queue")
    assert "    items = [1, 2]\n" in test["code"] and "    assert items == []\n" in test["code"]
    assert "__import__" not in test["code"]
    runs_nothing(test["code"])


def test_names_that_are_not_identifiers_are_never_written_as_code() -> None:
    """A keyword argument without a name (`**{...}`) or named by a keyword, a parameter that is
    not an identifier, an exception or a constructor named by hostile text: the call is not
    rendered, or the name is written another way (the exception as its built-in base)."""
    unpacked = chosen(
        '**{\'x) or __import__("os").system("touch PWNED") or (x\': 1}', observation()
    )
    assert render_tests("f", [unpacked], ["x"], "pkg.m") == []
    assert render_tests("f", [chosen("**{'class': 1}", observation())], ["x"], "pkg.m") == []

    # Two calls that only return a value would be one parametrized test, whose parameters are
    # the call's parameter names: not with a name that is not an identifier.
    rows = [chosen("1", observation(value="2")), chosen("2", observation(value="3"))]
    tests = render_tests("f", rows, [HOSTILE], "pkg.m")
    assert tests and all("parametrize" not in test["code"] for test in tests)
    for test in tests:
        runs_nothing(test["code"])

    error = HOSTILE.replace("result.a", "ValueError")
    seen = observation(
        outcome="raised",
        value=None,
        type=None,
        exception=error,
        exception_module="pkg.m",
        exception_bases=[HOSTILE, "ValueError", "Exception", "BaseException", "object"],
        message="bad",
    )
    (test,) = render_tests("f", [chosen("1", seen)], ["x"], "pkg.m")
    assert "    with pytest.raises(ValueError, match='bad'):\n" in test["code"]
    assert test["names"] == ["f"]
    assert test["name"].isidentifier()
    runs_nothing(test["code"])

    text = render_module(['"""Tests."""'], "pkg.m", "tests", "", [test | {"names": ["f", HOSTILE]}])
    assert "from pkg.m import f  # noqa: E402" in text
    runs_nothing(text)
    with pytest.raises(ValueError, match="cannot be imported"):
        render_module([], "pkg.class", "tests", "", [test])


def test_an_instance_of_a_class_named_like_a_keyword_gets_a_variable_it_can_have() -> None:
    """`class Lambda` (an AST library's): its instance is `lambda_`, not `lambda`."""
    seen = observation(value="2")
    (test,) = render_tests("Lambda.arity", [chosen("", seen, instance="Lambda()")], [], "pkg.m")
    assert "    lambda_ = Lambda()\n    assert lambda_.arity() == 2\n" in test["code"]
    compile(test["code"], "<test>", "exec")


def test_an_instance_of_a_lowercase_class_does_not_shadow_the_class() -> None:
    """`class immutabledict` (drawn by the benchmark): `immutabledict = immutabledict()` made the
    name local to the test, which then failed with UnboundLocalError before the call."""
    seen = observation(value="0")
    (test,) = render_tests("frozenmap.size", [chosen("", seen, instance="frozenmap()")], [], "m")
    assert "    frozenmap_ = frozenmap()\n    assert frozenmap_.size() == 0\n" in test["code"]
    namespace: dict[str, Any] = {"frozenmap": type("frozenmap", (), {"size": lambda self: 0})}
    exec(compile(test["code"], "<test>", "exec"), namespace)
    namespace[test["name"]]()


RECORDS = (
    "class Record:\n"
    '    """One row of a file: an attribute per field."""\n\n'
    "    def __init__(self, fields):\n"
    "        self.__dict__.update(fields)\n\n\n"
    "def load(fields: dict) -> Record:\n"
    '    if len(fields) >= 3 and fields.get("kind") == "row":\n'
    "        return Record(fields)\n"
    '    raise ValueError("not a row")\n'
)
"""A class that sets its attributes from a mapping (`__dict__.update`): a key of the mapping
is an attribute name. No dict built from the signature or the keys the body reads has three
keys with kind 'row': the model is asked for the branch they leave."""


def test_a_hostile_key_of_a_mapping_never_becomes_code_through_fix_and_pytest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model proposes `load({'kind': 'row', 'a': 1, HOSTILE: 1})`: an allowed call (a dict
    of literals), which returns a Record whose public state holds the hostile key. Through
    `--fix`, the file written holds the key only as data (the call's own literal); the user's
    pytest runs it and nothing creates PWNED."""
    project = make_project(tmp_path, {"records": RECORDS})
    proposal = "{'kind': 'row', 'a': 1, " + repr(HOSTILE) + ": 1})"
    results = analyze(
        project, "pkg/records.py", capsys, monkeypatch, proposals={"load": [proposal]}
    )

    text = written(results["load"], "tests/test_records_load.py", project)
    # The user's own pytest, from a folder of their choosing: nothing runs the command (its
    # marker would land in pytest's working folder), and the tests pass.
    user = tmp_path / "user"
    user.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *PYTEST_QUIET, str(project / "tests")],
        cwd=user,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert not list(tmp_path.rglob("PWNED")), text
    assert done.returncode == 0, done.stdout + done.stderr
    assert "    assert result.kind == 'row'\n" in text  # the model's call is pinned...
    assert "    assert result.a == 1\n" in text
    assert "assert result.a == 0 or" not in text  # ...but not its hostile key
    runs_nothing(text)
