"""`remora train test --from-tests`: the calls people wrote in their tests as examples, each
behind the prompt the test agent sends to ask for a call's arguments."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call
from remora.tool_library.call_prompts import call_prompt, constructor_prompt
from remora.training.from_tests import examples_from_tests

SHAPES = '''
"""Shapes."""


def area(width, height=1):
    return width * height


class Box:
    def __init__(self, side):
        self.side = side

    def grow(self, by):
        return Box(self.side + by)
'''

PROJECT = {
    "pyproject.toml": "[project]\nname = 'shapes'\n",
    "src/shapes/__init__.py": "from .geometry import area as surface\n",
    "src/shapes/geometry.py": SHAPES,
    "tests/test_geometry.py": """
        import pytest

        import shapes
        from shapes import geometry
        from shapes.geometry import Box, area

        SIDES = [(1, 2), (3, 4)]


        def test_area():
            assert area(2, height=3) == 6
            assert geometry.area(5) == 5
            assert area(2, height=3) == 6
            assert shapes.surface(4) == 4  # re-exported by the package


        def test_box_grows():
            box = Box(3)
            assert box.grow(2).side == 5


        @pytest.mark.parametrize(("side", "bigger"), SIDES)
        def test_grow_table(side, bigger):
            assert Box(side).side == side


        def test_helpers(tmp_path):
            assert area(len(str(tmp_path))) > 0
            assert area(
                1,
                2,
            ) == 2
            assert area(*[1, 2]) == 2
    """,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "shapes"
    for name, text in PROJECT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def test_calls_in_tests_become_examples_behind_the_agents_prompts(project: Path) -> None:
    found = examples_from_tests([project], share=0, seed=0)
    source = (project / "src" / "shapes" / "geometry.py").read_text()
    pairs = sorted((example.prompt, example.reply) for example in found.train)
    assert pairs == sorted(
        [
            (call_prompt(source, "", "area"), "2, height=3)\n"),
            (call_prompt(source, "", "area"), "5)\n"),  # geometry.area(5)
            (call_prompt(source, "", "area"), "4)\n"),  # shapes.surface(4): area, re-exported
            (constructor_prompt(source, "Box"), "3)\n"),
            (call_prompt(source, "Box", "grow", "Box(3)"), "2)\n"),
            # the parametrized table's rows, the values in place of the parameter
            (constructor_prompt(source, "Box"), "1)\n"),
        ]
    )
    assert found.files == 1 and found.kept == 6
    # tmp_path is the test's fixture, not a value; a call over lines; * unpacking; the same
    # call twice; Box(3) again from row (3, 4)
    assert found.left_out == {"variable": 1, "multiline": 1, "unpacking": 1, "repeated": 2}
    assert call_prompt(source, "", "area").endswith("def test_area():\n    result = area(")
    assert all(example.file == "shapes/tests/test_geometry.py" for example in found.train)


def test_the_prompt_is_the_one_the_agent_sends(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The input generator the test agent shares with the sample_data agent, run on the module
    once its tests are gone, asks the model for `area`'s arguments with exactly the example's
    prompt. (The sample_data agent asks the model for every function; the test agent only for
    a function whose branches the other calls leave untaken, and `area` has none.)"""
    (example,) = {
        e.prompt for e in examples_from_tests([project], share=0, seed=0).train
        if e.prompt.endswith("result = area(")
    }  # fmt: skip
    shutil.rmtree(project / "tests")
    monkeypatch.chdir(project)

    def rule(body: dict[str, Any]) -> Any:  # the agent's tools run before the model is asked
        return tool_call("submit_result", {"summary": "Done."})

    with ScriptedModelServer(rule=rule, completion=lambda body: "2, 3)\n") as server:
        code = main(
            ["analyze", "src/shapes/geometry.py", "--agents", "sample_data", "--format", "json",
             "--no-cache", "--base-url", server.base_url]
        )  # fmt: skip
        prompts = [body["prompt"] for body in server.completion_requests]
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    results = json.loads(out)["results"]
    assert any(result["node"]["qualified_name"] == "area" for result in results)
    assert example in prompts


def test_from_tests_is_for_the_test_agent(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    code = main(["train", "docstring", "--from-tests", "."])
    err = capsys.readouterr().err
    assert code == 2 and "--from-tests teaches the test agent" in err
    code = main(["train", "test", "--from-tests", ".", "--from-code", "."])
    assert code == 2 and "not both" in capsys.readouterr().err


def test_the_prompt_shows_the_imports_of_the_names_the_code_under_test_uses() -> None:
    """The module's docstring, then one block of only the imports the target (its class's
    bases, `__init__` and the method) names, then the target: the other imports would be
    prompt the engine evaluates for every completion, for nothing."""
    source = textwrap.dedent(
        '''
        """Shapes."""
        import math
        import os.path
        from collections import OrderedDict as Ordered
        from decimal import Decimal
        from typing import Any


        class Box(Ordered):
            def __init__(self, side: Decimal):
                self.side = side

            def grow(self, by):
                return math.floor(self.side + by)

            def save(self, path: Any):
                return os.path.join(path, "box")
        '''
    ).lstrip("\n")
    prompt = call_prompt(source, "Box", "grow", "Box(3)")
    assert prompt.startswith(
        '"""Shapes."""\n\n\n'
        "import math\nfrom collections import OrderedDict as Ordered\nfrom decimal import Decimal"
        "\n\n\nclass Box(Ordered):\n"
    )
    assert "os.path" not in prompt and "typing" not in prompt and "def save" not in prompt
    assert prompt.endswith("    box = Box(3)\n    result = box.grow(")
