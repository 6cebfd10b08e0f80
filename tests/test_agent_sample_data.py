"""The bundled sample_data agent on a copy of the bundled example: the scripted model calls
write_samples after the runner's signature_schema, the scripted completion endpoint proposes the
calls (as a base model continues `result = f(`), and the fixtures that land are checked with the
real jsonschema."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call

AGENT = Path(__file__).parent.parent / "agents" / "sample_data"
DEMO = Path(__file__).parent.parent / "examples" / "demo"

TEMPERATURES = [0.0, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3]
"""write_samples' drafts, in order: the n-th proposal below answers the n-th."""
GOOD_SAMPLES = {
    "apply_discount": ["price=100.0, percent=10.0)", "19.99, 0)"],
    "bulk_price": [
        "unit_price=2.5, quantity=12)",
        "unit_price=1.0, quantity=150, tiers={10: 5.0, 100: 12.5})\n",
        "4, 1, None)",
        "4, 1, None)",  # the same again: kept once
    ],
    "parse_sku": ['sku="BOLT-0042")', "'NUT-7')"],
}
EXPECTED = {
    # Two proposed by the model, then one from the schema (fewer than 3 proposals fit).
    "apply_discount": [
        {"price": 100.0, "percent": 10.0},
        {"price": 19.99, "percent": 0},
        {"price": 2.5, "percent": 2.5},
    ],
    "bulk_price": [
        {"unit_price": 2.5, "quantity": 12},
        {"unit_price": 1.0, "quantity": 150, "tiers": {"10": 5.0, "100": 12.5}},
        {"unit_price": 4, "quantity": 1, "tiers": None},
    ],
    "parse_sku": [{"sku": "BOLT-0042"}, {"sku": "NUT-7"}, {"sku": "hello world"}],
}


def function_of(body: dict[str, Any]) -> str:
    context: str = body["messages"][1]["content"]
    assert context.startswith("Write example inputs for the function `")
    return context.split("`")[1]


def proposals(calls: dict[str, list[str]]) -> Callable[[dict[str, Any]], str]:
    """The completion endpoint: the arguments proposed after `result = NAME(`, one per draft."""

    def complete(body: dict[str, Any]) -> str:
        name = body["prompt"].rsplit("result = ", 1)[1].rstrip("(")
        index = TEMPERATURES.index(body.get("temperature", 0.0))
        proposed = calls.get(name, [])
        return proposed[index] if index < len(proposed) else ""

    return complete


def calls_write_samples(body: dict[str, Any]) -> Any:
    if any(m["role"] == "tool" and m["name"] == "write_samples" for m in body["messages"]):
        return tool_call("submit_result", {"summary": "done"})
    return tool_call("write_samples", {})


def analyze(
    target: str,
    calls: dict[str, list[str]],
    capsys: pytest.CaptureFixture[str],
    *flags: str,
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    with ScriptedModelServer(rule=calls_write_samples, completion=proposals(calls)) as server:
        code = main(
            [
                "analyze",
                target,
                "--agents",
                "sample_data",
                "--format",
                "json",
                "--no-cache",
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


def load_fixture(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(document["schema"])
    for sample in document["samples"]:
        jsonschema.validate(sample, document["schema"], cls=jsonschema.Draft202012Validator)
    return document


def test_fixtures_land_with_fix_and_validate_against_the_signature_schema(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, requests = analyze("inventory/pricing.py", GOOD_SAMPLES, capsys, "--fix")

    results = by_function(report)
    assert set(results) == set(GOOD_SAMPLES)
    for name, result in results.items():
        assert result["status"] == "success", result["error"]
        assert [c["file"] for c in result["changes"]] == [f"fixtures/pricing_{name}.json"]
        assert result["outcome"] == "written" and result["turns"] == 1
        assert result["findings"] == []  # every parameter is annotated with a JSON type
    assert code == 0

    for name, samples in EXPECTED.items():
        document = load_fixture(demo / "fixtures" / f"pricing_{name}.json")
        assert document["samples"] == samples
        assert document["function"] == f"inventory.pricing.{name}"
        assert document["source"] == "inventory/pricing.py"
    schema = load_fixture(demo / "fixtures" / "pricing_bulk_price.json")["schema"]
    assert schema["required"] == ["unit_price", "quantity"]  # tiers has a default
    assert schema["additionalProperties"] is False
    assert schema["properties"]["quantity"]["type"] == "integer"
    tiers = schema["properties"]["tiers"]
    assert {option.get("type") for option in tiers["anyOf"]} == {"object", "null"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"unit_price": 1.0, "quantity": "many"}, schema)

    # What the model was shown first, from the runner's signature_schema: each parameter's
    # JSON type and the sample format.
    first = next(
        json.loads(body["messages"][3]["content"])
        for body in requests
        if function_of(body) == "bulk_price"
    )
    assert first["sample_format"] == "bulk_price(unit_price=<number>, quantity=<integer>)"
    assert first["parameters"][2] == {
        "name": "tiers",
        "type": "object of integer keys to number or null",
        "required": False,
    }


def test_invalid_proposals_are_left_out_and_none_valid_is_not_done(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A parameter without a JSON form: no sample from the schema either.
    (demo / "inventory" / "odd.py").write_text(
        'def draw(widget: "Widget", scale: float) -> None:\n    pass\n'
    )
    calls = {
        # Only wrong types: nothing is written, the job ends not done with jsonschema's errors.
        "draw": ["widget=1, scale='big')", "1, 2, 3)"],
        # A wrong type next to a good sample: the good one lands, with one from the schema.
        "parse_sku": ["sku=42)", "'BOLT-0042')"],
    }
    code, report, _ = analyze("inventory", calls, capsys, "--fix")

    results = by_function(report)
    rejected = results["draw"]
    assert rejected["status"] == "failed"
    assert rejected["error"]["code"] == "not_done"
    message = rejected["error"]["message"]
    assert "write_samples: draw(widget=1, scale='big'): scale: 'big' is not of type 'number'" in (
        message
    )
    assert "draw(1, 2, 3): draw() takes 2 positional arguments" in message
    assert rejected["changes"] == [] and rejected["turns"] == 1
    assert not (demo / "fixtures" / "odd_draw.json").exists()

    fixed = results["parse_sku"]
    assert fixed["status"] == "success"
    assert [c["file"] for c in fixed["changes"]] == ["fixtures/pricing_parse_sku.json"]
    assert load_fixture(demo / "fixtures" / "pricing_parse_sku.json")["samples"] == [
        {"sku": "BOLT-0042"},
        {"sku": "hello world"},
    ]
    assert code == 1  # draw's job was not done


def test_schema_for_richer_signatures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Containers, unions, Optional, Literal, tuples, *args/**kwargs, positional-only and
    keyword-only parameters; unannotated and non-JSON parameters are findings."""
    project = tmp_path / "project"
    (project / "src" / "shop").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "shop"\n')
    (project / "src" / "shop" / "__init__.py").write_text("")
    (project / "src" / "shop" / "orders.py").write_text(
        "from typing import Literal, Optional, Union\n"
        "import typing\n\n\n"
        "def place(ids: list[int], prices: dict[str, list[float]], pair: tuple[int, str],\n"
        "          /, note: Optional[str] = None, code: Union[int, 'str'] = 1,\n"
        "          mode: Literal['fast', 'slow', 3] = 'fast', tags: set[str] = frozenset(),\n"
        "          flags: typing.Sequence[bool] = (), when: 'Clock' = None, extra=3,\n"
        "          *rest: int, dry: bool = False, **more: float) -> None:\n"
        "    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    good = (
        "place([1, 2], {'a': [1.5, 2]}, (1, 'x'), None, 'c', 'slow', {'t'}, [True], "
        "{'any': 1}, 'e', 7, 8, dry=True, cost=2.5)"
    )
    invalid = "place(['1'], {'a': 1}, [1, 2, 3], mode='z', tags=['t', 't'], dry=1, cost='s')"
    calls = {"place": [invalid[6:], good[6:], "ids=[], prices={}, pair=[0, ''])"]}
    code, report, _ = analyze("project", calls, capsys, "--fix")

    (result,) = report["results"]
    assert [c["file"] for c in result["changes"]] == ["project/fixtures/orders_place.json"]
    document = load_fixture(project / "fixtures" / "orders_place.json")
    assert document["function"] == "shop.orders.place"
    assert document["samples"][0] == {
        "ids": [1, 2],
        "prices": {"a": [1.5, 2]},
        "pair": [1, "x"],
        "note": None,
        "code": "c",
        "mode": "slow",
        "tags": ["t"],
        "flags": [True],
        "when": {"any": 1},
        "extra": "e",
        "rest": [7, 8],
        "dry": True,
        "cost": 2.5,
    }
    schema = document["schema"]
    assert schema["required"] == ["ids", "prices", "pair"]
    assert schema["additionalProperties"] == {"type": "number"}  # **more: float
    assert schema["properties"]["code"]["type"] == ["integer", "string"]
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow", 3]
    assert schema["properties"]["tags"]["uniqueItems"] is True

    # The invalid proposal was left out; the fixture holds the two that fit.
    assert len(document["samples"]) == 2
    assert document["samples"][1] == {"ids": [], "prices": {}, "pair": [0, ""]}
    # The real jsonschema agrees that the rejected sample is invalid, for every one of them.
    wrong = {
        "ids": ["1"],
        "prices": {"a": 1},
        "pair": [1, 2, 3],
        "mode": "z",
        "tags": ["t", "t"],
        "dry": 1,
        "cost": "s",
    }
    validator = jsonschema.Draft202012Validator(schema)
    assert {error.path[0] for error in validator.iter_errors(wrong)} == {
        "ids",
        "prices",
        "pair",
        "mode",
        "tags",
        "dry",
        "cost",
    }

    assert sorted((f["rule"], f["severity"]) for f in result["findings"]) == [
        ("SMP100", "info"),
        ("SMP101", "info"),
    ]
    assert code == 1


def test_tool_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "check", "sample_data"]) == 0, capsys.readouterr()
