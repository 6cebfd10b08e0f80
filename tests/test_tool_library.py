"""The host-side libraries tool scripts share (remora/tool_library): real inputs, real outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonschema
import pytest

from remora.bundled_agents.docstring.library.findings import (
    docstring_finding,
    docstring_skip_reason,
)
from remora.bundled_agents.lint.host import ruff_finding
from remora.tool_library.calls import closing_call, propose_calls
from remora.tool_library.module_paths import locate_tests, module_of, project_of
from remora.tool_library.signatures import annotation_schema, describe_schema, signature_schema


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        ("int", {"type": "integer"}),
        ("float | None", {"type": ["number", "null"]}),
        ("Optional[str]", {"type": ["string", "null"]}),
        ("list[int]", {"type": "array", "items": {"type": "integer"}}),
        ("set[str]", {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        ("tuple[int, ...]", {"type": "array", "items": {"type": "integer"}}),
        (
            "tuple[str, int]",
            {
                "type": "array",
                "prefixItems": [{"type": "string"}, {"type": "integer"}],
                "items": False,
                "minItems": 2,
            },
        ),
        (
            "dict[int, float]",
            {
                "type": "object",
                "propertyNames": {"pattern": "^-?[0-9]+$"},
                "additionalProperties": {"type": "number"},
            },
        ),
        ("Literal['a', 2, None]", {"enum": ["a", 2, None]}),
        ("typing.Annotated[int, 'x']", {"type": "integer"}),
        ('"list[bool]"', {"type": "array", "items": {"type": "boolean"}}),
    ],
)
def test_annotations_to_json_schema(annotation: str, schema: dict[str, Any]) -> None:
    unknown: list[str] = []
    assert annotation_schema(annotation, unknown) == schema
    assert unknown == []


def test_types_with_no_json_form_accept_anything_and_are_named() -> None:
    unknown: list[str] = []
    assert annotation_schema("Widget | int", unknown) == {}
    assert unknown == ["Widget"]
    assert annotation_schema("list[", unknown) == {} and unknown[-1] == "list["


def test_signature_schema_validates_real_calls() -> None:
    def parameter(name: str, annotation: str | None, default: str | None, kind: str) -> Any:
        return {"name": name, "annotation": annotation, "default": default, "kind": kind}

    info = {
        "parameters": [
            parameter("price", "float", None, "positional_or_keyword"),
            parameter("tiers", "dict[int, float] | None", "None", "positional_or_keyword"),
            parameter("note", None, None, "keyword_only"),
            parameter("flag", None, "False", "keyword_only"),
            parameter("extra", "Widget", None, "var_keyword"),
        ]
    }
    schema, findings = signature_schema(info, "shop.pricing", "bulk_price")
    assert schema["title"] == "Arguments of shop.pricing.bulk_price"
    assert schema["required"] == ["price", "note"]
    assert schema["additionalProperties"] == {}  # **extra: Widget has no JSON form
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"price": 2.5, "tiers": {"10": 5.0}, "note": [1]})
    assert not validator.is_valid({"price": "cheap", "note": 1})
    # One line for the function's unannotated parameters, not one per parameter.
    assert [(f["rule"], f["message"].split(":")[0]) for f in findings] == [
        ("SMP100", "parameters `note`, `flag` have no type annotation"),
        ("SMP101", "parameter `extra"),
    ]
    assert describe_schema(schema["properties"]["tiers"]) == (
        "object of integer keys to number or null"
    )
    assert describe_schema({"type": "array", "items": {"type": "integer"}}) == "list of integer"


def test_module_names_and_project_folders() -> None:
    files = {"pyproject.toml", "src/shop/__init__.py", "src/shop/sub/__init__.py", "tools/x.py"}
    exists = files.__contains__
    assert module_of("src/shop/sub/pricing.py", exists) == ("shop.sub.pricing", "src")
    assert module_of("src/shop/__init__.py", exists) == ("shop", "src")
    assert module_of("tools/x.py", exists) == ("x", "tools")
    assert project_of("src/shop/sub/pricing.py", exists) == ""
    assert project_of("lib/a.py", {"lib/setup.py"}.__contains__) == "lib"


def test_where_the_tests_of_a_function_go() -> None:
    files = {"pyproject.toml", "src/shop/__init__.py", "src/shop/sub/__init__.py", "lib/setup.py"}
    exists = files.__contains__
    assert locate_tests("src/shop/sub/pricing.py", "total", "/checks/", exists) == {
        "module": "shop.sub.pricing",
        "import_root": "src",
        "project": "",
        "folder": "src/shop/sub",
        "tests_folder": "checks",
        "test_file": "checks/test_pricing_total.py",
    }
    place = locate_tests("lib/a.py", "f", "", exists)
    assert (place["project"], place["tests_folder"], place["test_file"]) == (
        "lib", "lib/tests", "lib/tests/test_a_f.py"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "call"),
    [
        ("1, 2)\n    assert x", "1, 2"),
        ("'a)', [1, (2)])", "'a)', [1, (2)]"),
        ('"""x)""", 3) # done', '"""x)""", 3'),
        ('"\\")", 1)', '"\\")", 1'),
        ("1, (2", None),
    ],
)
def test_closing_call(text: str, call: str | None) -> None:
    assert closing_call(text) == call


def test_findings_two_tools_share() -> None:
    problem = {"code": None, "message": "bad", "location": {"row": 3, "column": 2}}
    assert ruff_finding(problem, 3) == {
        "rule": "syntax-error", "message": "bad", "line": 3, "column": 2, "severity": "error",
        "help_uri": None,
    }  # fmt: skip
    unused = {**problem, "code": "F401", "url": "https://docs.astral.sh/ruff/rules/unused-import"}
    assert ruff_finding(unused, 3)["help_uri"] == unused["url"]
    check: dict[str, Any] = {
        "status": "missing", "line": 4, "column": 5, "skip_reason": None, "nested": False,
        "method": True,
    }  # fmt: skip
    # A missing docstring is pydocstyle's rule for its kind, with ruff's message.
    found = docstring_finding(check, "Cart.total", "method")
    assert (found["rule"], found["severity"]) == ("D102", "info")
    assert found["message"] == "Missing docstring in public method"
    assert docstring_finding(check, "Cart.__init__", "method")["rule"] == "D107"
    assert docstring_finding(check, "Cart.__eq__", "method")["rule"] == "D105"
    assert docstring_finding({**check, "method": False}, "Cart", "class")["rule"] == "D101"
    assert docstring_finding({**check, "method": False}, "Cart.Row", "class")["rule"] == "D106"
    assert docstring_finding({**check, "method": False}, "load", "function")["rule"] == "D103"
    assert docstring_skip_reason(check, "Cart._total", include_private=False) == (
        "`_total` is private (set the option include_private to document it)"
    )
    assert docstring_skip_reason(check, "Cart.__init__", include_private=False) is None
    assert docstring_skip_reason(check, "Cart._total", include_private=True) is None


@pytest.mark.anyio
async def test_proposed_calls_are_distinct_closed_calls() -> None:
    asked: list[tuple[str, list[float]]] = []

    async def draft(
        prompt: str, stop: list[str], max_tokens: int, temperatures: Sequence[float]
    ) -> list[str]:
        asked.append((prompt, list(temperatures)))
        return ["1, 2)\n", "1, 2) + 3", "(x", "'a')"]

    source = "def f(a, b=0):\n    return a\n"
    calls = await propose_calls(source, "f", [0.0, 0.5, 0.7, 0.9], 40, draft)
    assert calls == ["f(1, 2)", "f('a')"]
    assert asked == [(asked[0][0], [0.0, 0.5, 0.7, 0.9])]  # one request for every draft
    assert asked[0][0].endswith("def test_f():\n    result = f(")


@pytest.mark.anyio
async def test_no_calls_are_proposed_when_the_model_cannot_be_asked() -> None:
    async def draft(
        prompt: str, stop: list[str], max_tokens: int, temperatures: Sequence[float]
    ) -> list[str]:
        raise RuntimeError("the prompt has 9000 tokens, more than the context of 8192")

    assert await propose_calls("def f(a):\n    return a\n", "f", [0.0, 0.7], 40, draft) == []


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
