"""Agent templates are untrusted (an agent folder can come with a project): they render within
bounds on size and time, and one that breaks a bound is refused at load, naming file and line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from remora.agents.context import provide
from remora.agents.definition import TEMPLATES, load_agent
from remora.agents.installed import installed_agents
from remora.agents.templates import MAX_CHARS, RENDER_SECONDS, TemplateBoundError, render
from remora.cli.main import main
from remora.discovery.nodes import Node, NodeType
from remora.errors import UserInputError
from remora.models.scripted.server import ScriptedModelServer

AGENT = """\
name: bounded
description: An agent whose template is under test.
node_types: [function]
system_prompt: x
node_context: |
  Inspect {{{{ node.qualified_name }}}}:
  {template}
done_when: [x]
submit_result:
  inputs:
    summary: {{type: string, description: One sentence.}}
"""
NODE_CONTEXT_LINE = 5
"""The line of `node_context:` in AGENT; the template's second line holds the case."""

BOMBS = {
    "string": "{{ 'a' * 10**10 }}",
    "list": "{{ [0] * 10**9 }}",
    "power": "{{ 10 ** (10**9) }}",
    "nested ranges": (
        "{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}"
    ),
    "nested ranges, empty": (
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    ),
    "doubled literal": "{% set a = ['x'] %}" + "{% set a = [a, a] %}" * 40 + "{{ a == a }}",
    "doubled block": "{% set a = 'x' * 1000 %}" + "{% set a %}{{ a }}{{ a }}{% endset %}" * 40,
    "macro recursion": (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"
    ),
    "center": "{{ 'a' | center(10**10) }}",
    "ljust": "{{ 'a'.ljust(10**10) }}",
    "format width": "{{ '{:>{}}'.format('a', 10**10) }}",
    "printf width": "{{ '%*s' % (10**10, 'a') }}",
    "indent": "{{ ('a\\n' * 100000) | indent(' ' * 100000) }}",
    "replace": "{{ ('a' * 100000).replace('', 'b' * 100000) }}",
    "joined": "{{ ('x' * 100000).join(range(100000) | map('string')) }}",
    "concatenated": "{% set a = 'x' * 1000000 %}{{ a ~ a ~ a ~ a ~ a }}",
}


def sample(text: str) -> Node:
    return Node(
        id="m.py::f",
        type=NodeType.FUNCTION,
        name="f",
        qualified_name="f",
        file="m.py",
        start_line=1,
        start_column=1,
        end_line=text.count("\n") + 1,
        start_byte=0,
        end_byte=len(text),
        text=text,
    )


def write_agent(tmp_path: Path, template: str) -> Path:
    path = tmp_path / "agents" / "bounded" / "agent.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(AGENT.format(template=template))
    return path


@pytest.mark.parametrize("template", BOMBS.values(), ids=BOMBS.keys())
def test_a_template_that_breaks_a_bound_is_refused_at_load_within_a_second(
    tmp_path: Path, template: str
) -> None:
    path = write_agent(tmp_path, template)
    started = time.monotonic()
    with pytest.raises(UserInputError) as caught:
        load_agent(path, model="m")
    assert time.monotonic() - started < 1.0
    message = str(caught.value)
    assert message.startswith(f"{path}:{NODE_CONTEXT_LINE}: node_context: cannot render")
    assert "(template line 2)" in message
    assert isinstance(caught.value.__cause__, TemplateBoundError)


def test_a_template_that_raises_is_refused_at_load_too(tmp_path: Path) -> None:
    """Not only jinja2's errors: what an expression raises stops the load with file and line,
    where it used to end Remora with a traceback."""
    path = write_agent(tmp_path, "{{ 1 / 0 }}")
    with pytest.raises(UserInputError, match="cannot render template \\(template line 2\\): "):
        load_agent(path, model="m")


def test_a_bound_broken_by_one_node_raises_template_bound_error(tmp_path: Path) -> None:
    """The sample node at load is small; a node's own text can make the same template break a
    bound at job time, for that node only."""
    agent = load_agent(write_agent(tmp_path, "{{ node.text * 1000 }}"), model="m")
    assert "x = 1\n" * 1000 in agent.render_context(sample("x = 1\n"), tmp_path)
    with pytest.raises(TemplateBoundError, match="'\\*' would make more than 1,048,576"):
        agent.render_context(sample("x = 1\n" * 1000), tmp_path)
    assert issubclass(TemplateBoundError, jinja2.TemplateError)


def test_a_loop_over_a_nodes_text_is_stopped_at_the_time_limit(tmp_path: Path) -> None:
    template = "{% for a in node.text %}{% for b in node.text %}{% endfor %}{% endfor %}"
    agent = load_agent(write_agent(tmp_path, template), model="m")
    started = time.monotonic()
    with pytest.raises(TemplateBoundError, match=f"ran for more than {RENDER_SECONDS} s"):
        agent.render_context(sample("x" * 100_000), tmp_path)
    assert RENDER_SECONDS <= time.monotonic() - started < RENDER_SECONDS + 0.5


def test_ctrl_c_during_a_render_interrupts_it_at_once() -> None:
    """A render never swallows KeyboardInterrupt (SIGTERM becomes one, remora/signals.py);
    inside an event loop, where a signal waits for the render to return, the time limit ends
    it within RENDER_SECONDS."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    loops = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    template = TEMPLATES.from_string(loops)
    previous = signal.signal(signal.SIGALRM, interrupt)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, 0.1)
    try:
        with pytest.raises(KeyboardInterrupt):
            render(template, {})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 0.3


def test_the_rendered_text_is_capped(tmp_path: Path) -> None:
    agent = load_agent(write_agent(tmp_path, "{{ node.text }}"), model="m")
    with pytest.raises(TemplateBoundError, match="the output would make more than"):
        agent.render_context(sample("x" * (MAX_CHARS + 1)), tmp_path)
    static = "{% for i in range(100000) %}" + "static text " * 100 + "{% endfor %}"
    with pytest.raises(TemplateBoundError, match="the rendered text would make more than"):
        render(TEMPLATES.from_string(static), {})


@pytest.mark.parametrize(
    "template",
    [
        # A namespace counts as its largest wherever it is held: what holds it cannot grow later.
        "{% set ns = namespace(a='x' * 200000) %}",
        "{% set ns = namespace() %}{% set ns.a = 'x' * 200000 %}",
        "{% set ns = namespace() %}{% set held = [ns] * 10 %}",
        "{{ (('<>' * 100000) | safe).striptags() }}",  # copies the text once per tag
        "{{ (('a' * 100000) | safe).replace('', 'b' * 100) }}",  # Markup's own methods
        "{{ [[1]] * 100 | sum(start=[]) }}",  # copies the lists quadratically
        "{{ (2 ** 60000) * (2 ** 60000) }}",
        "{{ '%.2000000f' | format(1.5) }}",
        "{{ range(1000000) | list }}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    ],
)
def test_other_ways_to_make_too_much_are_refused(template: str) -> None:
    with pytest.raises(TemplateBoundError):
        render(TEMPLATES.from_string(template), {})


NORMAL = {
    "loops": "{% for x in items %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% else %}-"
    "{% endfor %}{% for a, b in pairs %}{{ a }}{{ b }}{% endfor %}",
    "filters": "{{ text | truncate(20) }}|{{ text | wordwrap(10) }}|{{ text | indent(2) }}|"
    "{{ items | join(', ') }}|{{ text | replace('o', '0') }}|{{ 'x' | center(9) }}|"
    "{{ items | map('upper') | list }}|{{ pairs | tojson(indent=2) }}|{{ items | sum }}",
    "formatting": "{{ '%s-%05d' % ('a', 42) }}|{{ '{}:{:>6}'.format('b', 7) }}|"
    "{{ '%(k)s' | format(k='v') }}|{{ 'a' ~ 1 ~ [2] }}|{{ 'ab' * 3 }}|{{ 2 ** 10 }}",
    "macros": "{% macro row(x, sep=': ') %}{{ x }}{{ sep }}{{ varargs }}{% endmacro %}"
    "{{ row('a') }}{{ row('b', '=', 1, 2) }}"
    "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside{% endcall %}",
    "namespace": "{% set ns = namespace(total=0, seen=[]) %}{% for x in items %}"
    "{% set ns.total = ns.total + x %}{% set ns.seen = ns.seen + [x] %}{% endfor %}"
    "{{ ns.total }} {{ ns.seen }} {{ {'k': ns.seen, 't': (1, 2)} }}",
    "markup": "{% autoescape true %}{{ '<b>' }}{{ '<i>' ~ 'x' }}{% endautoescape %}"
    "{{ ('<u>' | safe) ~ '<s>' }}",
}


@pytest.mark.parametrize("template", NORMAL.values(), ids=NORMAL.keys())
def test_normal_templates_render_as_they_did(template: str) -> None:
    plain = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined)
    values = {"items": [1, 2, 3], "pairs": [(1, 2), (3, 4)], "text": "hello world " * 4}
    expected = plain.from_string(template).render(values)
    assert render(TEMPLATES.from_string(template), values) == expected


BUNDLED = sorted(agent.definition for agent in installed_agents().values())


@pytest.mark.parametrize("path", BUNDLED)
def test_bundled_agents_render_as_they_did(path: Path, tmp_path: Path) -> None:
    agent = load_agent(path, model="m")
    node = sample("def f(x):\n" + "    x += 1  # step\n" * 300 + "    return x\n")
    plain = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    expected = plain.from_string(agent.definition.node_context).render(
        node=node.model_dump(),
        agent=agent.name,
        options=agent.options,
        context=provide(agent.definition.context, node, tmp_path),
    )
    assert agent.render_context(node, tmp_path) == expected


def test_a_bound_broken_at_job_time_is_that_jobs_error(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The load check passes (the sample node is small), the real node breaks the bound: that
    job ends as `agent_template` with the bound's message, no model request, exit 2."""
    monkeypatch.chdir(project)
    definition = probe_agent.read_text()
    probe_agent.write_text(
        definition.replace("  {{ node.text }}\n", "  {{ node.text * 20000 }}\n", 1)
    )
    with ScriptedModelServer(script=[]) as server:
        code = main(["analyze", "pkg", "--base-url", server.base_url, "--format", "json"])
        assert server.requests == []
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert result["status"] == "error" and code == 2
    assert result["error"]["code"] == "agent_template"
    assert "would make more than 1,048,576" in result["error"]["message"]


DEEP = {
    # Too deep for jinja2's parser, which recurses per level.
    "if, 50,000 deep": "{% if x %}" * 50_000 + "{% endif %}" * 50_000,
    "with, 50,000 deep": "{% with %}" * 50_000 + "{% endwith %}" * 50_000,
    "parentheses, 50,000 deep": "{{ " + "(" * 50_000 + "1" + ")" * 50_000 + " }}",
    "lists, 50,000 deep": "{{ " + "[" * 50_000 + "]" * 50_000 + " }}",
    "not, 50,000 deep": "{{ " + "not " * 50_000 + "1 }}",
    # Parsed in a loop, then too deep for its code generator, which recurses per operand.
    "'+', 50,000 operands": "{{ " + "1 + " * 50_000 + "1 }}",
    "filters, 50,000 in a row": "{{ 1" + " | abs" * 50_000 + " }}",
    # Fine for jinja2, too deep for Python's compiler (its own limits, a SyntaxError).
    "for, 25 deep": "{% for i in [1] %}" * 25 + "{% endfor %}" * 25,
    "if, 150 deep": "{% if 1 %}" * 150 + "{% endif %}" * 150,
}


@pytest.mark.parametrize("template", DEEP.values(), ids=DEEP.keys())
def test_a_template_nested_too_deeply_is_refused_with_file_and_line(
    tmp_path: Path, template: str
) -> None:
    """Nested past what jinja2 (or Python's compiler) can take: the agent's file, the line of
    `node_context`, and what to do; it was `internal error: RecursionError`."""
    path = write_agent(tmp_path, template)
    with pytest.raises(UserInputError) as caught:
        load_agent(path, model="m")
    message = str(caught.value)
    assert f"{path}:{NODE_CONTEXT_LINE}: node_context: " in message
    assert "template line 2" in message and "nests too deeply" in message
    assert "flatten" in message  # what to do
    assert len(message) < 2_000  # the template quoted by its start only


def test_a_template_nested_too_deeply_ends_remora_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_agent(tmp_path, DEEP["if, 50,000 deep"])
    code = main(["list-agents", "--isolated", "-c", f"agents.bounded.definition={path}"])
    error = capsys.readouterr().err
    assert code == 2
    assert f"{path}:{NODE_CONTEXT_LINE}: node_context: " in error
    assert "internal error" not in error and "RecursionError" not in error


DEEPER = {
    # Left open: the parser gives up long before it could miss an `endif` (and a 5 MB agent
    # file takes PyYAML seconds to read; the test is the nesting).
    "if, 500,000 deep": "{% if x %}" * 500_000,
    "parentheses, 500,000 deep": "{{ " + "(" * 500_000 + "1" + ")" * 500_000 + " }}",
}


@pytest.mark.parametrize("template", DEEPER.values(), ids=DEEPER.keys())
def test_a_template_nested_500_000_deep_is_refused_not_a_crash(
    tmp_path: Path, template: str
) -> None:
    """Ten times deeper, in a process of its own: jinja2's parser and code generator recurse in
    Python, where the recursion limit stops them; never a crash of the C stack."""
    path = write_agent(tmp_path, template)
    agent = f"agents.bounded.definition={path}"
    done = subprocess.run(
        [sys.executable, "-m", "remora", "list-agents", "--isolated", "-c", agent],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert f"{path}:{NODE_CONTEXT_LINE}: node_context: " in done.stderr
    assert "nests too deeply" in done.stderr and "internal error" not in done.stderr
