"""The bundled sample_data agent on a copy of the bundled example: the scripted model calls
write_samples after the runner's signature_schema, the scripted completion endpoint proposes
calls (as a base model continues `result = f(`), the host's input generator (explore_calls) adds
calls from the signature and runs them all in the sandbox; a sample is the arguments of a chosen
call that returned. The fixtures that land are checked with the real jsonschema and by calling
the function on each sample."""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer, tool_call

AGENT = Path(__file__).parent.parent / "remora" / "bundled_agents" / "sample_data"
DEMO = Path(__file__).parent.parent / "examples" / "demo"

TEMPERATURES = [0.0, 0.7, 1.0]
"""explore_calls' drafts, in order: the n-th proposal below answers the n-th."""
GOOD_SAMPLES = {
    "apply_discount": ["price=100.0, percent=10.0)", "19.99, 0)", "100.0, 150.0)"],
    "bulk_price": [
        "unit_price=2.5, quantity=12)",
        "unit_price=1.0, quantity=150, tiers={10: 5.0, 100: 12.5})\n",
        "4, 1, None)",
    ],
    "parse_sku": ['sku="BOLT-0042")', "'NUT-7')", "'NUT')"],
}
WANTED_SAMPLES = 3
"""write_samples' most samples per function."""


def function_of(body: dict[str, Any]) -> str:
    context: str = body["messages"][1]["content"]
    assert context.startswith("Write example inputs for the function `")
    return context.split("`")[1]


def proposals(calls: dict[str, list[str]]) -> Callable[[dict[str, Any]], str]:
    """The completion endpoint: the arguments proposed after `result = NAME(`, one per draft."""

    def complete(body: dict[str, Any]) -> str:
        last = body["prompt"].rsplit("\n", 1)[1]
        assert last.startswith("    result = ") and last.endswith("("), last
        name = last.removeprefix("    result = ").rstrip("(")
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


@pytest.fixture
def project_imports(demo: Path) -> Iterator[Callable[[str], Any]]:
    """The copied project's modules, imported for real (to call a function on its samples)."""
    before = set(sys.modules)
    sys.path.insert(0, str(demo))
    yield importlib.import_module
    sys.path.remove(str(demo))
    for name in set(sys.modules) - before:
        del sys.modules[name]


def load_fixture(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(document["schema"])
    for sample in document["samples"]:
        jsonschema.validate(sample, document["schema"], cls=jsonschema.Draft202012Validator)
    return document


def test_fixtures_land_with_fix_and_validate_against_the_signature_schema(
    demo: Path, capsys: pytest.CaptureFixture[str], project_imports: Callable[[str], Any]
) -> None:
    code, report, requests = analyze("inventory/pricing.py", GOOD_SAMPLES, capsys, "--fix")

    results = by_function(report)
    assert set(results) == set(GOOD_SAMPLES)
    for name, result in results.items():
        assert result["status"] == "success", result["error"]
        assert [c["file"] for c in result["changes"]] == [f"fixtures/pricing_{name}.json"]
        assert result["outcome"] == "written" and result["turns"] == 0
        assert result["findings"] == []  # every parameter is annotated with a JSON type
        assert result["summary"].endswith(
            f" accepted by the function and validated (fixtures/pricing_{name}.json)"
        )
    assert code == 0

    pricing = project_imports("inventory.pricing")
    for name in GOOD_SAMPLES:
        document = load_fixture(demo / "fixtures" / f"pricing_{name}.json")
        assert document["function"] == f"inventory.pricing.{name}"
        assert document["source"] == "inventory/pricing.py"
        samples = document["samples"]
        assert 1 <= len(samples) <= WANTED_SAMPLES
        assert len({json.dumps(sample, sort_keys=True) for sample in samples}) == len(samples)
        # A sample is a call the function accepted: each one returns, here too.
        for sample in samples:
            getattr(pricing, name)(**sample)
    # The model's proposals come first where the function accepted them (its own quoting and
    # keywords bound to the parameters); the calls it rejected are never samples.
    discounts = load_fixture(demo / "fixtures" / "pricing_apply_discount.json")["samples"]
    assert discounts[0] == {"price": 19.99, "percent": 0}
    assert all(0 <= sample["percent"] <= 100 for sample in discounts)
    skus = load_fixture(demo / "fixtures" / "pricing_parse_sku.json")["samples"]
    assert {"sku": "NUT-7"} in skus and {"sku": "NUT"} not in skus
    bulk = load_fixture(demo / "fixtures" / "pricing_bulk_price.json")["samples"]
    assert bulk[0] == {"unit_price": 4, "quantity": 1, "tiers": None}
    schema = load_fixture(demo / "fixtures" / "pricing_bulk_price.json")["schema"]
    assert schema["required"] == ["unit_price", "quantity"]  # tiers has a default
    assert schema["additionalProperties"] is False
    assert schema["properties"]["quantity"]["type"] == "integer"
    tiers = schema["properties"]["tiers"]
    assert {option.get("type") for option in tiers["anyOf"]} == {"object", "null"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"unit_price": 1.0, "quantity": "many"}, schema)

    # Both tools are observed: the chat model is never asked (the model's part is the
    # completions that propose calls).
    assert not any(body.get("messages") for body in requests)
    # What signature_schema observes: each parameter's JSON type and the sample format.
    capsys.readouterr()
    assert (
        main(
            [
                "tool",
                "run",
                "sample_data",
                "signature_schema",
                "--node",
                "inventory/pricing.py::bulk_price",
            ]
        )
        == 0
    )
    first = json.loads(capsys.readouterr().out)["value"]
    assert first["sample_format"] == "bulk_price(unit_price=<number>, quantity=<integer>)"
    assert first["parameters"][2] == {
        "name": "tiers",
        "type": "object of integer keys to number or null",
        "required": False,
    }


def test_rejected_and_invalid_samples_are_left_out_and_none_accepted_is_not_done(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (demo / "inventory" / "odd.py").write_text(
        # No JSON value has `.size`: the function rejects every call (AttributeError).
        'def draw(widget: "Widget", scale: float) -> float:\n    return widget.size * scale\n'
    )
    (demo / "inventory" / "labels.py").write_text(
        # Accepts anything str() takes, a str too: more than its schema (an integer) allows.
        'def label(count: int) -> str:\n    return "#" + str(count)\n'
    )
    calls = {
        # Rejected by the function: nothing is written, the job ends not done saying why.
        "draw": ["widget=1, scale=2.5)", "{'size': 2}, 2.0)"],
        # Accepted by the function but not by the schema: left out, the rest land.
        "label": ["count='many')"],
        # Rejected by the function (42 has no .partition): never a sample.
        "parse_sku": ["sku=42)", "'BOLT-0042')"],
    }
    code, report, _ = analyze("inventory", calls, capsys, "--fix")

    results = by_function(report)
    rejected = results["draw"]
    assert rejected["status"] == "not_possible" and rejected["error"] is None
    message = rejected["summary"]
    assert re.search(r"^no call of draw that returned could be found \(\d+ tried\)", message)
    assert rejected["changes"] == [] and rejected["turns"] == 0
    assert not (demo / "fixtures" / "odd_draw.json").exists()

    labels = results["label"]
    assert labels["status"] == "success", labels["error"]
    samples = load_fixture(demo / "fixtures" / "labels_label.json")["samples"]
    assert samples and {"count": "many"} not in samples
    assert all(isinstance(sample["count"], int) for sample in samples)

    fixed = results["parse_sku"]
    assert fixed["status"] == "success", fixed["error"]
    assert [c["file"] for c in fixed["changes"]] == ["fixtures/pricing_parse_sku.json"]
    skus = load_fixture(demo / "fixtures" / "pricing_parse_sku.json")["samples"]
    assert skus[0] == {"sku": "BOLT-0042"}
    assert {"sku": 42} not in skus
    assert code == 1  # draw's job was not done


def test_schema_for_richer_signatures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Containers, unions, Optional, Literal, tuples, *args/**kwargs, positional-only and
    keyword-only parameters; unannotated and non-JSON parameters are findings. The sample is
    the model's call as the function bound it (a tuple parameter passed a list, as JSON has)."""
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
        "place([1, 2], {'a': [1.5, 2]}, [1, 'x'], None, 'c', 'slow', ['t'], [True], "
        "{'any': 1}, 'e', dry=True)"
    )
    invalid = "place(['1'], {'a': 1}, [1, 2, 3], mode='z', tags=['t', 't'], dry=1, cost='s')"
    calls = {"place": [invalid[6:], good[6:], "[], {}, [0, ''])"]}
    code, report, _ = analyze("project", calls, capsys, "--fix")

    (result,) = report["results"]
    assert result["status"] == "success", result["error"]
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
        "dry": True,
    }
    schema = document["schema"]
    assert schema["required"] == ["ids", "prices", "pair"]
    assert schema["additionalProperties"] == {"type": "number"}  # **more: float
    assert schema["properties"]["rest"]["type"] == "array"  # *rest: int
    assert schema["properties"]["code"]["type"] == ["integer", "string"]
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow", 3]
    assert schema["properties"]["tags"]["uniqueItems"] is True
    # *rest is an array of its items and **more's keywords sit beside the parameters.
    jsonschema.validate(
        {"ids": [], "prices": {}, "pair": [0, ""], "rest": [7, 8], "cost": 2.5},
        schema,
        cls=jsonschema.Draft202012Validator,
    )

    # The invalid proposal (which the function accepts: it ignores its arguments) is never
    # written; the real jsonschema agrees that it is invalid, for every one of them.
    wrong = {
        "ids": ["1"],
        "prices": {"a": 1},
        "pair": [1, 2, 3],
        "mode": "z",
        "tags": ["t", "t"],
        "dry": 1,
        "cost": "s",
    }
    assert not any(sample.get("mode") == "z" for sample in document["samples"])
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


def test_a_function_defined_in_a_block_is_not_possible_not_a_failure(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A function defined under an `if` at the module's top level: no call of it is explored
    (a fixture's test may not find it), and the job says why instead of ending as an error."""
    (demo / "inventory" / "platform_bits.py").write_text(
        "import sys\n\nif sys.platform == 'win32':\n"
        "    def separator(path: str) -> str:\n        return path + '\\\\'\n"
    )
    _, report, _ = analyze("inventory/platform_bits.py", {}, capsys)
    (job,) = [r for r in report["results"] if r["node"]["name"] == "separator"]
    assert job["status"] == "not_possible", job
    assert "not defined at the top level of the module (inside a block)" in job["summary"]


def test_a_function_that_takes_no_arguments_gets_no_fixture(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """wcwidth's `list_versions()` got a fixture whose one sample was `{}`: no input to give
    samples of, so no file; the job says why. A function beside it still gets its fixture."""
    (demo / "inventory" / "versions.py").write_text(
        "def list_versions() -> list[str]:\n    return ['4.1.0', '5.0.0']\n\n\n"
        "def newest(versions: list[str]) -> str:\n    return max(versions)\n"
    )
    code, report, _ = analyze("inventory/versions.py", {}, capsys, "--fix")
    assert code == 1, report  # findings (ruff's exit codes), no error
    jobs = by_function(report)
    assert jobs["list_versions"]["status"] == "not_possible", jobs["list_versions"]
    assert "takes no arguments" in jobs["list_versions"]["summary"]
    assert not (demo / "fixtures" / "versions_list_versions.json").exists()
    assert jobs["newest"]["status"] == "success", jobs["newest"]
    assert load_fixture(demo / "fixtures" / "versions_newest.json")["samples"]
