"""Property-based tests: whatever arrives, Remora answers with its own errors, never a crash."""

from __future__ import annotations

import json
import sysconfig
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remora.agents.definition import load_agent
from remora.config.loading import load_settings
from remora.config.settings import CommandSettings, ModelProfileName, RunnerSettings
from remora.discovery.discover import discover_nodes
from remora.edits.workspace import Workspace
from remora.errors import UserInputError
from remora.jobs.profiles import PROFILES
from remora.jobs.runner import BadCall, JobRunner
from remora.protocol import functiongemma as fg
from remora.protocol.messages import ToolCall
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- the FunctionGemma parser: bounded time on hostile input -------------------------------


@pytest.mark.parametrize(
    "text",
    [
        fg.START_FUNCTION_CALL * 20_000,
        fg.START_FUNCTION_CALL + "call:f{" + "a:{" * 50_000,
        fg.START_FUNCTION_CALL + "call:f{a:[" + "[" * 50_000,
        fg.START_FUNCTION_CALL + "call:f{a:" + fg.ESCAPE * 30_000,
        (fg.START_FUNCTION_CALL + "call:f{a:1}" + fg.END_FUNCTION_CALL) * 5_000,
    ],
)
def test_parser_takes_bounded_time_on_pathological_output(text: str) -> None:
    started = time.perf_counter()
    result = fg.parse_output(text)
    assert time.perf_counter() - started < 2.0
    assert isinstance(result, fg.ParsedOutput)


# --- tool-argument validation --------------------------------------------------------------


@pytest.fixture
def runner(probe_agent: Path, project: Path) -> JobRunner:
    agent = load_agent(probe_agent, model="m")
    node = discover_nodes([project], root=project).nodes[0]
    return JobRunner(
        agent,
        node,
        model=None,  # type: ignore[arg-type]  # validation never calls the model
        sandbox=ToolSandbox(),
        commands=CommandRunner(CommandSettings()),
        workspace=Workspace(project),
        profile=PROFILES[ModelProfileName.FUNCTIONGEMMA],
        settings=RunnerSettings(),
    )


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@FUZZ
@given(
    name=st.sampled_from(["find_todos", "replace_text", "submit_result", "nope", ""]),
    raw=st.one_of(
        st.text(max_size=200),
        JSONISH.map(lambda value: json.dumps(value)),
        st.dictionaries(
            st.sampled_from(["marker", "old", "new", "summary", "todo_count", "x"]), JSONISH
        ).map(lambda value: json.dumps(value)),
    ),
)
def test_argument_validation_only_ever_says_bad_call(
    runner: JobRunner, name: str, raw: str
) -> None:
    runner.seen_calls.clear()
    offered = {"find_todos", "replace_text", "submit_result"}
    try:
        arguments = runner._validate(ToolCall(id="c", name=name, arguments=raw), offered)
    except BadCall as bad:
        assert str(bad)
    else:
        assert isinstance(arguments, dict)
        assert runner.validators[name].is_valid(arguments)


# --- discovery -----------------------------------------------------------------------------


def check_nodes(root: Path, data: bytes) -> None:
    found = discover_nodes([root], root=root)
    lines = data.count(b"\n") + 1
    for node in found.nodes:
        assert 0 <= node.start_byte <= node.end_byte <= len(data)
        assert 1 <= node.start_line <= node.end_line <= lines
        assert node.text == data[node.start_byte : node.end_byte].decode("utf-8")


@FUZZ
@given(data=st.binary(max_size=400))
def test_discovery_survives_random_bytes(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    root = tmp_path_factory.mktemp("random")
    (root / "fuzz.py").write_bytes(data)
    check_nodes(root, data)


REAL_SOURCE = (Path(sysconfig.get_paths()["stdlib"]) / "json" / "decoder.py").read_bytes()


@FUZZ
@given(
    cuts=st.lists(
        st.tuples(
            st.integers(0, len(REAL_SOURCE)),
            st.integers(0, 40),
            st.sampled_from(
                [b"", b"def ", b"class X:", b"(", b")", b"\n    ", b":", b"@d\n", b"'"]
            ),
        ),
        max_size=6,
    )
)
def test_discovery_survives_mutated_real_files(
    tmp_path_factory: pytest.TempPathFactory, cuts: list[tuple[int, int, bytes]]
) -> None:
    data = REAL_SOURCE
    for start, length, insert in cuts:
        data = data[:start] + insert + data[start + length :]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return  # a cut inside a multi-byte character: skipped by design, tested elsewhere
    root = tmp_path_factory.mktemp("mutated")
    (root / "mutated.py").write_bytes(data)
    check_nodes(root, data)


# --- configuration -------------------------------------------------------------------------

YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "server",
                    "runner",
                    "sandbox",
                    "agents",
                    "concurrency",
                    "base_url",
                    "timeout",
                    "max_turns",
                    "model_profile",
                    "commands",
                    "lint",
                    "enabled",
                    "options",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=15,
)


@FUZZ
@given(document=YAML_VALUES)
def test_config_loading_fails_only_with_user_errors(
    tmp_path_factory: pytest.TempPathFactory, document: object
) -> None:
    root = tmp_path_factory.mktemp("config")
    (root / "remora.yaml").write_text(yaml.safe_dump(document))
    try:
        load_settings(cwd=root)
    except UserInputError as exc:
        assert "remora.yaml" in str(exc)


@FUZZ
@given(text=st.text(max_size=200))
def test_config_loading_of_arbitrary_text(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    root = tmp_path_factory.mktemp("config")
    (root / "remora.yaml").write_text(text)
    try:
        load_settings(cwd=root)
    except UserInputError as exc:
        assert "remora.yaml" in str(exc)
