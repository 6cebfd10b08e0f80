"""Shared fixtures: sample projects and agents written into tmp_path, the scripted model."""

from __future__ import annotations

import shutil
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from remora.agents.installed import installed_agents

SAMPLE_MODULE = '''\
"""Sample module."""


def shout(text):
    # TODO: handle None
    return text.upper()
'''

TWO_TOOL_AGENT = """\
name: probe
description: A two-tool agent used by the end-to-end tests.
node_types: [function]
max_turns: 3
system_prompt: You inspect code. Use the tools, then submit_result.
node_context: |
  Inspect {{ node.qualified_name }} in {{ node.file }}:
  {{ node.text }}
tools:
  - script: tools/find_todos.pym
  - script: tools/replace_text.pym
host_functions: [read_file, write_file, run_command]
done_when: [checked]
writes: [node_file]
submit_result:
  inputs:
    summary: {type: string, description: One sentence.}
    todo_count: {type: integer, description: How many TODOs were found.}
"""
PROBE_EXAMPLE = """\
examples:
  - context: "Inspect add in calc.py: def add(a, b): return a + b  # TODO types"
    turns:
      - call: find_todos
        result: {"findings": [], "outcome": "checked", "summary": "1 TODO comments"}
      - call: submit_result
        arguments: {summary: One TODO., todo_count: 1}
"""
"""The probe agent's worked example, appended to its YAML."""

FIND_TODOS = """\
# /// remora-tool
# description = "Report TODO comments in the node."
# context = ["file_text"]
#
# [inputs.marker]
# type = "string"
# default = "TODO"
# description = "The comment marker to look for."
# ///
findings = []
for offset, line in enumerate(node["text"].split("\\n")):
    col = line.find(marker)
    if col >= 0:
        line_no = node["start_line"] + offset
        finding = {"rule": "TD001", "message": line.strip(), "line": line_no, "column": col + 1}
        findings.append(finding)
summary = str(len(findings)) + " " + marker + " comments"
lines = len(file_text.split("\\n"))
{"findings": findings, "file_lines": lines, "outcome": "checked", "summary": summary}
"""

REPLACE_TEXT = """\
# /// remora-tool
# description = "Replace text in the node's file."
# inputs.old = {type = "string", description = "Text to replace."}
# inputs.new = {type = "string", description = "Replacement."}
# ///
text = read_file(node["file"])
write_file(node["file"], text.replace(old, new))
"replaced"
"""


if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background by a shell (`pytest &`, a CI step run with `&`), which ignores
    # SIGINT: the tests' `python -m remora` children would inherit that and never stop on the
    # Ctrl-C the tests send. (A handler, unlike SIG_IGN, does not survive exec.)
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def signal_handlers_restored() -> Iterator[None]:
    """A test that leaves SIGINT or SIGTERM handled otherwise fails, and the handlers are put
    back: a later test's `python -m remora` would inherit an ignored SIGINT and never stop."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    after = {number: signal.getsignal(number) for number in before}
    for number, handler in before.items():
        signal.signal(number, handler)
    changed = [signal.Signals(number).name for number in before if after[number] != before[number]]
    assert not changed, f"the test left the handlers of {', '.join(changed)} changed"


@pytest.fixture(autouse=True)
def own_user_folders(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads the user's own configuration or trust records (nor writes them): each gets
    empty ones, also in the `remora` processes it starts."""
    home = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    for name in ("REMORA_TRUST_PROJECT", "REMORA_TRUSTED_PROJECTS"):
        monkeypatch.delenv(name, raising=False)


def write_files(root: Path, files: dict[str, str]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content) if name.endswith(".yaml") else content)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_files(tmp_path / "project", {"pkg/shout.py": SAMPLE_MODULE})


@pytest.fixture
def probe_agent(tmp_path: Path) -> Path:
    # Inside the project, as a project ships its own agent (a project's configuration may
    # name only files inside the project).
    root = write_files(
        tmp_path / "project" / "agents" / "probe",
        {
            "agent.yaml": TWO_TOOL_AGENT,
            "tools/find_todos.pym": FIND_TODOS,
            "tools/replace_text.pym": REPLACE_TEXT,
        },
    )
    return root / "agent.yaml"


@pytest.fixture
def probe_config(project: Path, probe_agent: Path) -> Path:
    """remora.yaml in the project: only the probe agent enabled (every bundled agent off), no
    retries (fast tests)."""
    bundled = sorted(installed_agents())
    config = project / "remora.yaml"
    config.write_text(
        "server:\n  retries: 0\n  timeout: 10\n"
        "agents:\n"
        + "".join(f"  {name}: {{enabled: false}}\n" for name in bundled)
        + f"  probe: {{definition: {probe_agent}}}\n"
    )
    return config


DEMO = Path(__file__).parent.parent / "examples" / "demo"


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of examples/demo as the working directory."""
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns(".ruff_cache", "__pycache__"))
    monkeypatch.chdir(copy)
    return copy
