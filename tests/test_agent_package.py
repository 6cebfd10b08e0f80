"""A third party ships an agent as a package: a wheel built here, installed apart from Remora,
found through the `remora.agents` entry point group, run end to end with its own host
function, and kept from every host function it does not declare (another agent's above all)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from remora.agents import installed
from remora.agents.definition import load_agent
from remora.agents.installed import InstalledAgent, installed_agents
from remora.config.settings import CommandSettings
from remora.discovery.discover import discover_nodes
from remora.edits.workspace import Workspace
from remora.errors import UserInputError
from remora.host.context import HostContext
from remora.host.library import job_functions, shared_functions
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer
from remora.sandbox.commands import CommandRunner

PACKAGE = "greet_agent"
DISTRIBUTION = "remora-greet-agent"
FILES = {
    f"{PACKAGE}/__init__.py": '"""An agent that greets each file."""\n',
    f"{PACKAGE}/agent.yaml": """\
name: greet
description: Greets each file through its own host function.
node_types: [file]
max_turns: 2
system_prompt: You greet files.
node_context: "Greet {{ node.file }}."
tools:
  - script: tools/greet.pym
  - script: tools/sneak.pym
host_functions: [read_file, greeting]
observe: [greet]
done_when: [checked]
submit_result:
  description: Call it once, when done.
""",
    f"{PACKAGE}/tools/greet.pym": """\
# /// remora-tool
# description = "Greet the file."
# ///
lines = len(read_file(node["file"]).splitlines())
finding = {"rule": "GR001", "message": greeting(lines), "line": 1, "column": 1}
{"findings": [finding], "outcome": "checked", "summary": "greeted", "final": True}
""",
    # The lint agent's host function, which this agent neither has nor declares.
    f"{PACKAGE}/tools/sneak.pym": """\
# /// remora-tool
# description = "Call another agent's host function."
# ///
ruff_finding({"code": "X", "message": "m", "location": {"column": 1}}, 1)
""",
    f"{PACKAGE}/host.py": '''\
"""The greet agent's host functions: made per job from its context."""


def host_functions(host):
    def greeting(lines):
        return f"hello {host.node.file} ({lines} lines)"

    return {"greeting": greeting}
''',
    f"{PACKAGE}/host_functions.pyi": "def greeting(lines: int) -> str: ...\n",
}


def build_wheel(folder: Path) -> Path:
    """The wheel a build backend would make of the package: its files, METADATA, the entry
    point, and a RECORD with each file's hash."""
    dist_info = f"{DISTRIBUTION.replace('-', '_')}-1.0.dist-info"
    files = {name: text.encode() for name, text in FILES.items()}
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 1.0\n".encode()
    )
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{dist_info}/entry_points.txt"] = f"[remora.agents]\ngreet = {PACKAGE}\n".encode()
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = folder / f"{DISTRIBUTION.replace('-', '_')}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a folder of its own (put on the path of `remora` runs)."""
    folder = tmp_path_factory.mktemp("greet")
    target = folder / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    subprocess.run([*command, "--target", str(target), str(build_wheel(folder))], check=True)
    return target


def remora(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "remora", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_installed_agent_package_is_listed_with_where_it_came_from(
    site: Path, tmp_path: Path
) -> None:
    listed = remora(site, tmp_path, "list-agents", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["greet"]["origin"] == DISTRIBUTION and not rows["greet"]["bundled"]
    assert rows["greet"]["definition"] == str(site / PACKAGE / "agent.yaml")
    assert rows["lint"]["origin"] == "remora" and rows["lint"]["bundled"]


def test_an_installed_agent_runs_end_to_end_with_its_own_host_function(
    site: Path, tmp_path: Path
) -> None:
    (tmp_path / "mod.py").write_text("x = 1\ny = 2\n")
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        done = remora(
            site,
            tmp_path,
            *("analyze", ".", "--agents", "greet", "--format", "json", "--no-cache"),
            *("--base-url", server.base_url),
        )
    assert done.returncode == 1, done.stderr  # a finding
    report = json.loads(done.stdout)
    [result] = report["results"]
    assert result["status"] == "success", result
    [finding] = result["findings"]
    assert (finding["rule"], finding["message"]) == ("GR001", "hello mod.py (2 lines)")


def test_an_installed_agent_cannot_call_another_agents_host_function(
    site: Path, tmp_path: Path
) -> None:
    (tmp_path / "mod.py").write_text("x = 1\n")
    ran = remora(site, tmp_path, "tool", "run", "greet", "sneak", "--node", "mod.py")
    assert ran.returncode == 1, ran.stderr
    outcome = json.loads(ran.stdout)
    assert not outcome["ok"] and "NameError" in outcome["error"], outcome
    assert "ruff_finding" in outcome["error"]
    checked = remora(site, tmp_path, "tool", "check", "greet")
    assert checked.returncode == 1
    assert "sneak.pym:4:1:" in checked.stdout and "`ruff_finding`" in checked.stdout


def test_an_agent_declaring_another_agents_host_function_is_refused(tmp_path: Path) -> None:
    """A definition from a path (a project's own agent) may declare the shared functions only:
    not the test agent's check_tests, whatever its YAML says."""
    folder = tmp_path / "agents" / "copycat"
    (folder / "tools").mkdir(parents=True)
    yaml = FILES[f"{PACKAGE}/agent.yaml"].replace(
        "[read_file, greeting]", "[read_file, check_tests]"
    )
    (folder / "agent.yaml").write_text(yaml.replace("name: greet", "name: copycat"))
    for tool in ("greet", "sneak"):
        (folder / "tools" / f"{tool}.pym").write_text(FILES[f"{PACKAGE}/tools/{tool}.pym"])
    with pytest.raises(UserInputError) as raised:
        load_agent(folder / "agent.yaml", model="m")
    message = str(raised.value)
    assert f"{folder / 'agent.yaml'}:10" in message, message
    assert "host_functions: no host function 'check_tests' for this agent" in message


def test_a_job_gets_exactly_the_host_functions_its_agent_declares(tmp_path: Path) -> None:
    """The lint agent declares eight: its jobs get those, not the call probe (explore_calls),
    the model (complete) or another agent's functions, though the host library has them all."""
    (tmp_path / "mod.py").write_text("x = 1\n")
    lint = installed_agents()["lint"]
    agent = load_agent(lint.definition, model="m")
    node = discover_nodes([tmp_path / "mod.py"], root=tmp_path).nodes[0]
    context = HostContext(Workspace(tmp_path), node, CommandRunner(CommandSettings()))
    functions = job_functions(agent, context)
    assert set(functions) == set(agent.definition.host_functions)
    assert {"ruff_finding", "run_command"} <= set(functions)
    assert not {"explore_calls", "complete", "check_tests", "docstring_lint"} & set(functions)
    assert "explore_calls" in shared_functions(context)  # there, but not the lint agent's


@pytest.mark.parametrize(
    ("host", "stubs", "message"),
    [
        ("raise ImportError('no module named tomlkit')", True, "does not import: ImportError"),
        ("def other(host):\n    return {}\n", True, "has no function host_functions(context)"),
        (FILES[f"{PACKAGE}/host.py"], False, "comes without host_functions.pyi"),
    ],
)
def test_a_broken_host_library_stops_the_run_at_load_naming_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, stubs: bool, message: str
) -> None:
    """Once, when the agent is loaded, with the package and its distribution: not as an error
    in each of its jobs."""
    name = f"broken_{abs(hash((host, stubs)))}"  # a fresh module name: no import is cached
    folder = tmp_path / "site" / name
    for path, text in FILES.items():
        if path.endswith("host_functions.pyi") and not stubs:
            continue
        target = folder / path.removeprefix(f"{PACKAGE}/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(host if path.endswith("host.py") else text)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    agent = InstalledAgent(name="greet", package=name, folder=folder, distribution="broken-dist")
    monkeypatch.setattr(installed, "installed_agents", lambda: {"greet": agent})
    with pytest.raises(UserInputError) as raised:
        load_agent(folder / "agent.yaml", model="m")
    assert str(raised.value).startswith(f"{name} (broken-dist): "), raised.value
    assert message in str(raised.value)


def test_only_the_packages_own_definition_brings_its_host_library(tmp_path: Path) -> None:
    """Another YAML in an installed agent's folder (or a path that resolves there) is not the
    package's agent: it gets no host library of the package's."""
    lint = installed_agents()["lint"]
    assert installed.installed_agent_at(lint.definition) == lint
    assert installed.installed_agent_at(lint.folder / "other.yaml") is None
    link = tmp_path / "agent.yaml"
    link.symlink_to(lint.definition)  # a project's path that resolves to the package's file
    assert installed.installed_agent_at(link) == lint
