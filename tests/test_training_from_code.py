"""`remora train docstring --from-code`: examples from documented code, rendered exactly as the
docstring agent renders a job's summary prompt; what should not be learnt is left out."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer
from remora.training.from_code import examples_from_code
from tests.test_agent_docstring import DocstringWriter

PACKAGE = {
    "pyproject.toml": "[project]\nname = 'words'\n",
    "words/__init__.py": "",
    "words/text.py": '''
        """Helpers for text."""

        import re


        def shout(text):
            """Return the text in upper case with an exclamation mark."""
            return text.upper() + "!"


        def whisper(text, *, level=1):
            """Return the text in lower case, quieter at each level."""
            quiet = text.lower()
            return quiet + "." * level


        def collapse(text):
            """Replace every run of whitespace in the text by one space."""
            return re.sub(r"\\s+", " ", text)


        def short(text):
            """Trim it."""
            return text.strip()


        def later(text):
            """TODO: write the docstring of this function."""
            return text


        def stub(text):
            """Return nothing, to be overridden by subclasses of this module."""


        class Speaker:
            """Say things to a listener in a chosen voice."""

            def __init__(self, voice):
                """Initialize self.  See help(type(self)) for accurate signature."""
                self.voice = voice

            def say(self, text):
                """Return the text in the speaker's voice, ready to print."""
                return self.voice + ": " + text
    ''',
    "words/tools.py": '''
        def shout_twice(text):
            """Return the text in upper case with an exclamation mark."""
            return (text.upper() + "!") * 2


        def count_words(text):
            """Count the words of the text, separated by whitespace."""
            return len(text.split())
    ''',
}


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for name, text in PACKAGE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def test_documented_definitions_become_examples_and_the_rest_is_counted(package: Path) -> None:
    found = examples_from_code([package], share=0, seed=0)
    replies = sorted(example.reply for example in found.train)
    assert replies == [
        'Count the words of the text, separated by whitespace."""',
        'Replace every run of whitespace in the text by one space."""',
        'Return the text in lower case, quieter at each level."""',
        'Return the text in the speaker\'s voice, ready to print."""',
        'Say things to a listener in a chosen voice."""',
    ]
    assert found.files == 3 and found.read == 11 and not found.held_out
    # short, TODO, only a docstring, __init__; shout and shout_twice share a summary, which
    # each one's prompt shows (the other is its nearest example): learning it teaches copying.
    assert found.left_out == {
        "short": 1,
        "placeholder": 1,
        "only_docstring": 1,
        "special": 1,
        "repeated": 2,
    }
    whisper = next(e for e in found.train if e.reply.startswith("Return the text in lower"))
    # The code without its docstring, its header again and the quotes: what the model continues.
    assert whisper.prompt.endswith(
        'def whisper(text, *, level=1):\n    quiet = text.lower()\n    return quiet + "." * level'
        '\n\ndef whisper(text, *, level=1):\n    """'
    )
    assert whisper.file == "project/words/text.py"
    assert "Return the text in lower case" not in whisper.prompt
    # The project's nearest documented definitions come first, with their summaries.
    assert '"""Return the text in upper case with an exclamation mark."""' in whisper.prompt


def test_whole_files_are_held_out_and_the_count_can_be_capped(package: Path) -> None:
    found = examples_from_code([package], share=0.5, seed=3)
    assert found.held_out_files and found.held_out
    held = {example.file for example in found.held_out}
    assert held == set(found.held_out_files)
    assert not held & {example.file for example in found.train}
    capped = examples_from_code([package], share=0, seed=0, max_examples=2)
    assert len(capped.train) == 2 and capped.trainable == 5
    assert found.trainable == len(found.train)  # no --max-examples: nothing was left aside
    assert examples_from_code([package], share=0, seed=0, max_examples=2).train == capped.train


def test_the_prompt_is_the_one_the_agent_sends_for_that_definition(
    package: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The docstring agent, run on the same file with shout's docstring removed, asks the
    model to continue exactly the example's prompt."""
    (example,) = [
        e for e in examples_from_code([package], share=0, seed=0).train
        if e.reply.startswith("Return the text in lower")
    ]  # fmt: skip
    text = package / "words" / "text.py"
    source = text.read_text()
    text.write_text(
        source.replace('    """Return the text in lower case, quieter at each level."""\n', "")
    )
    monkeypatch.chdir(package)
    writer = DocstringWriter()
    with ScriptedModelServer(rule=writer, completion=writer.complete) as server:
        code = main(
            ["analyze", "words/text.py", "--agents", "docstring", "--format", "json",
             "--no-cache", "--base-url", server.base_url]
        )  # fmt: skip
        prompts = [body["prompt"] for body in server.completion_requests]
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert json.loads(out)["results"]
    assert example.prompt in prompts


def test_from_code_is_for_the_docstring_agent_and_needs_code(
    package: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(package)
    results: list[tuple[int, str]] = []
    for args in (
        ["train", "lint", "--from-code", "words"],
        ["train", "docstring"],
        ["train", "docstring", "words", "--from-code", "words"],
        ["train", "docstring", "--from-code", "nowhere"],
        ["train", "docstring", "--from-code", "words", "--max-examples", "0"],
    ):
        code = main(args)
        results.append((code, capsys.readouterr().err))
    assert all(code == 2 for code, _ in results), results
    messages: list[Any] = [err for _, err in results]
    assert "learns from its verified runs" in messages[0]
    assert "--from-code PATH" in messages[1]
    assert "not both" in messages[2]
    assert "no such file or folder: nowhere" in messages[3]
    assert "--max-examples must be at least 1" in messages[4]
