"""The bundled sample_data agent on a copy of the bundled example: a sensible scripted model
that reads the schema, writes samples (fixing them when told they are invalid) and submits; the
fixtures that land are checked with the real jsonschema."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from remora.cli import main
from remora.models.scripted import ScriptedModelServer, tool_call

AGENT = Path(__file__).parent.parent / "agents" / "sample_data"
DEMO = Path(__file__).parent.parent / "examples" / "demo"

GOOD_SAMPLES = {
    "apply_discount": ["apply_discount(price=100.0, percent=10.0)", "apply_discount(19.99, 0)"],
    "bulk_price": [
        "bulk_price(unit_price=2.5, quantity=12)",
        "bulk_price(unit_price=1.0, quantity=150, tiers={10: 5.0, 100: 12.5})",
        '{"unit_price": 4, "quantity": 1, "tiers": null}',
    ],
    "parse_sku": ['parse_sku(sku="BOLT-0042")', "parse_sku('NUT-7')"],
}
EXPECTED = {
    "apply_discount": [{"price": 100.0, "percent": 10.0}, {"price": 19.99, "percent": 0}],
    "bulk_price": [
        {"unit_price": 2.5, "quantity": 12},
        {"unit_price": 1.0, "quantity": 150, "tiers": {"10": 5.0, "100": 12.5}},
        {"unit_price": 4, "quantity": 1, "tiers": None},
    ],
    "parse_sku": [{"sku": "BOLT-0042"}, {"sku": "NUT-7"}],
}


def function_of(body: dict[str, Any]) -> str:
    context: str = body["messages"][1]["content"]
    assert context.startswith("Write example inputs for the function `")
    return context.split("`")[1]


def sensible_model(attempts: dict[str, list[list[str]]]) -> Callable[[dict[str, Any]], Any]:
    """signature_schema; then write_samples with each attempt in turn until one is written;
    then submit_result with the count."""

    def rule(body: dict[str, Any]) -> Any:
        offered = {tool["function"]["name"] for tool in body["tools"]}
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        writes = results[1:]
        planned = attempts.get(function_of(body), [])
        if not results and "signature_schema" in offered:
            return tool_call("signature_schema", {})
        written = writes[-1].get("samples", 0) if writes else 0
        if not written and len(writes) < len(planned) and "write_samples" in offered:
            return tool_call("write_samples", {"samples": planned[len(writes)]})
        return tool_call(
            "submit_result", {"summary": f"{written} samples", "samples_written": written}
        )

    return rule


def analyze(
    target: str,
    attempts: dict[str, list[list[str]]],
    capsys: pytest.CaptureFixture[str],
    *flags: str,
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    with ScriptedModelServer(rule=sensible_model(attempts)) as server:
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


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns(".ruff_cache", "__pycache__"))
    monkeypatch.chdir(copy)
    return copy


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
    attempts = {name: [samples] for name, samples in GOOD_SAMPLES.items()}
    code, report, requests = analyze("inventory/pricing.py", attempts, capsys, "--fix")

    results = by_function(report)
    assert set(results) == set(GOOD_SAMPLES)
    for name, result in results.items():
        assert result["status"] == "success", result["error"]
        assert [c["file"] for c in result["changes"]] == [f"fixtures/pricing_{name}.json"]
        assert result["submitted"]["samples_written"] == len(GOOD_SAMPLES[name])
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

    # What the model was shown first: each parameter's JSON type and the sample format.
    first = next(
        json.loads(body["messages"][-1]["content"])
        for body in requests
        if function_of(body) == "bulk_price" and len(body["messages"]) == 4
    )
    assert first["sample_format"] == "bulk_price(unit_price=<number>, quantity=<integer>)"
    assert first["parameters"][2] == {
        "name": "tiers",
        "type": "object of integer keys to number or null",
        "required": False,
    }


def test_an_invalid_sample_gets_the_errors_and_no_file(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts = {
        # Only a wrong type: the model gives up after the error, nothing is written.
        "apply_discount": [["apply_discount(price='cheap', percent=10)"]],
        # A wrong type next to a good sample, then the fix: the fixed set lands.
        "parse_sku": [["parse_sku('BOLT-0042')", "parse_sku(sku=42)"], ["parse_sku('BOLT-0042')"]],
    }
    code, report, requests = analyze("inventory/pricing.py", attempts, capsys, "--fix")

    results = by_function(report)
    rejected = results["apply_discount"]
    # The model submitted, but no sample was written: not done, with the refusal.
    assert rejected["status"] == "failed"
    assert rejected["error"]["code"] == "not_done"
    refusal = "write_samples: apply_discount(price='cheap', percent=10)"
    assert refusal in rejected["error"]["message"]
    assert rejected["changes"] == []
    assert rejected["submitted"]["samples_written"] == 0
    reply = next(
        json.loads(body["messages"][-1]["content"])
        for body in requests
        if function_of(body) == "apply_discount" and len(body["messages"]) == 6
    )
    assert reply["error"] == "1 of 1 samples do not fit the signature; nothing was written"
    assert reply["invalid_samples"] == [
        {
            "sample": "apply_discount(price='cheap', percent=10)",
            "errors": ['price: expected number, got "cheap"'],
        }
    ]
    assert not (demo / "fixtures" / "pricing_apply_discount.json").exists()

    fixed = results["parse_sku"]
    assert fixed["turns"] == 4
    assert [c["file"] for c in fixed["changes"]] == ["fixtures/pricing_parse_sku.json"]
    assert load_fixture(demo / "fixtures" / "pricing_parse_sku.json")["samples"] == [
        {"sku": "BOLT-0042"}
    ]
    assert code == 1  # apply_discount's job was not done


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
    attempts = {"place": [[invalid], [good, "place(ids=[], prices={}, pair=[0, ''])"]]}
    code, report, requests = analyze("project", attempts, capsys, "--fix")

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

    errors = next(
        json.loads(body["messages"][-1]["content"])
        for body in requests
        if len(body["messages"]) == 6
    )["invalid_samples"][0]["errors"]
    assert errors == [
        'ids[0]: expected integer, got "1"',
        "prices.a: expected array, got 1",
        "pair[1]: expected string, got 2",
        "pair: expected 2 items, got 3",
        'mode: "z" is not one of ["fast", "slow", 3]',
        "tags: items must be unique",
        "dry: expected boolean, got 1",
        'cost: expected number, got "s"',
    ]
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


def test_the_two_tools_share_one_schema_derivation() -> None:
    """Tool calls share no state, so write_samples carries a copy of signature_schema's code."""
    first = (AGENT / "tools" / "signature_schema.pym").read_text()
    second = (AGENT / "tools" / "write_samples.pym").read_text()
    shared = first[first.index("info = node_info()") : first.index("schema, findings = ")]
    assert shared in second


def test_tool_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "check", "sample_data"]) == 0, capsys.readouterr()
