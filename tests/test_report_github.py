"""GitHub workflow-command output: escaping, GitHub's annotation caps, the job summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from remora.cli.main import main
from remora.discovery.nodes import Node, NodeType
from remora.findings.results import ErrorCode, Finding, JobError, JobResult, JobStatus, RunSummary
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer
from remora.report.github import escape_data, escape_property, render_github

NODE = Node(
    id="pkg/mod.py::f",
    type=NodeType.FUNCTION,
    name="f",
    qualified_name="f",
    file="pkg/mod.py",
    start_line=1,
    start_column=1,
    end_line=200,
    start_byte=0,
    end_byte=10,
    text="def f():\n    pass\n",
)


def job(findings: list[Finding], agent: str = "lint") -> JobResult:
    return JobResult(node=NODE, agent=agent, status=JobStatus.SUCCESS, findings=findings)


def errored(message: str = "connection refused") -> JobResult:
    return JobResult(
        node=NODE,
        agent="lint",
        status=JobStatus.ERROR,
        error=JobError(code=ErrorCode.SERVER_UNREACHABLE, message=message),
    )


def warning(line: int, **kw: str) -> Finding:
    return Finding(
        rule=kw.get("rule", "T201"),
        message=kw.get("message", f"print on line {line}"),
        file=kw.get("file", "pkg/mod.py"),
        line=line,
        column=5,
        severity="warning",
    )


def error(line: int) -> Finding:
    return Finding(
        rule="E722", message="bare except", file="pkg/mod.py", line=line, severity="error"
    )


def commands(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("::")]


def test_escaping_follows_githubs_rules() -> None:
    assert escape_data("100% done\r\nnext: a, b") == "100%25 done%0D%0Anext: a, b"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    # Escaping "%" first keeps a literal "%0A" from turning into a newline.
    assert escape_data("literal %0A") == "literal %250A"


def test_one_annotation_per_finding_with_escaped_properties_and_message() -> None:
    tricky = Finding(
        rule="E722",
        message="bare `except:` 100%\nsecond line",
        file="pkg/odd, name:1.py",
        line=7,
        column=5,
        severity="error",
    )
    note = Finding(rule="FIX002", message="TODO", file="pkg/mod.py", line=3, severity="info")
    results = [job([tricky, note, warning(2)], agent="lint")]
    output = render_github(results, RunSummary.of(1, results), step_summary=None)
    assert commands(output) == [
        "::warning file=pkg/mod.py,line=2,col=5,title=remora lint/T201::print on line 2",
        "::notice file=pkg/mod.py,line=3,col=1,title=remora lint/FIX002::TODO",
        "::error file=pkg/odd%2C name%3A1.py,line=7,col=5,title=remora lint/E722"
        "::bare `except:` 100%25%0Asecond line",
    ]
    assert output.splitlines()[-1] == (
        "remora: 1 node, 1 job: 1 success, 0 failed, 0 error, 0 skipped; 3 findings"
    )


def test_errored_jobs_are_error_annotations() -> None:
    results = [errored("refused:\nretry later")]
    output = render_github(results, RunSummary.of(1, results), step_summary=None)
    assert commands(output) == [
        "::error title=remora job error::pkg/mod.py::f [lint]: server_unreachable: refused:%0A"
        "retry later"
    ]


def test_caps_ten_annotations_per_level_and_says_where_the_rest_are(tmp_path: Path) -> None:
    warnings = [warning(line) for line in range(1, 31)]
    errors = [error(line) for line in range(101, 112)]
    results = [job(warnings + errors), errored()]
    summary_file = tmp_path / "summary.md"
    output = render_github(results, RunSummary.of(1, results), step_summary=summary_file)

    annotations = commands(output)
    by_level = {
        level: [c for c in annotations if c.startswith(f"::{level} ")]
        for level in ("error", "warning", "notice")
    }
    assert len(by_level["error"]) == 10
    assert len(by_level["warning"]) == 10
    assert by_level["notice"] == []
    # The job error comes first; then findings in file order.
    assert by_level["error"][0].startswith("::error title=remora job error::")
    assert by_level["warning"][0].endswith("::print on line 1")
    assert by_level["warning"][-1].endswith("::print on line 10")
    (notice,) = [c for c in annotations if c.startswith("::notice::")]
    assert "22 more not shown as annotations (2 errors, 20 warnings)" in notice
    assert "listed below and in the job summary" in notice

    plain = [line for line in output.splitlines() if not line.startswith("::")]
    # The left-out findings, then one line per agent and the totals line.
    assert len(plain) == 22 + 2
    assert plain[0] == "pkg/mod.py:11:5: warning: lint/T201 print on line 11"
    assert plain[20] == "pkg/mod.py:110:1: error: lint/E722 bare except"
    assert plain[-2].startswith("remora: lint: 2 jobs: ")
    assert plain[-1].startswith("remora: 1 node, 2 jobs: 1 success, 0 failed, 1 error")


def test_a_notice_slot_is_kept_for_the_summary_notice() -> None:
    notes = [
        Finding(rule="FIX002", message=f"todo {i}", file="pkg/mod.py", line=i, severity="info")
        for i in range(1, 13)
    ]
    results = [job(notes)]
    output = render_github(results, RunSummary.of(1, results), step_summary=None)
    notices = [c for c in commands(output) if c.startswith("::notice")]
    assert len(notices) == 10  # 9 findings and the one that counts the rest
    assert notices[-1].startswith("::notice::remora: 3 more not shown as annotations (3 notices)")
    assert "They are listed below." in notices[-1]


def test_step_summary_lists_every_finding_and_the_totals(tmp_path: Path) -> None:
    summary_file = tmp_path / "summary.md"
    summary_file.write_text("earlier step\n")
    findings = [warning(line) for line in range(1, 31)] + [error(line) for line in range(1, 13)]
    findings.append(warning(99, message="pipe | <b>bold</b> *star*\nnext", file="pkg/x_y.py"))
    results = [job(findings), errored()]
    render_github(results, RunSummary.of(4, results), step_summary=summary_file)

    text = summary_file.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n## Remora\n\n")
    assert (
        "**43 findings** (12 errors, 31 warnings) in 4 nodes. 2 jobs: 1 succeeded, "
        "0 did not finish, 1 errored, 0 skipped." in text
    )
    rows = [line for line in text.splitlines() if " | lint/" in line]
    assert len(rows) == 43
    assert "| warning | pkg/mod.py:1:5 | lint/T201 | print on line 1 |" in text
    assert "| error | pkg/mod.py:1:1 | lint/E722 | bare except |" in text
    escaped = r"pipe \| &lt;b&gt;bold&lt;/b&gt; \*star\* next"
    assert rf"| warning | pkg/x\_y.py:99:5 | lint/T201 | {escaped} |" in text
    assert "### Jobs that errored or did not finish" in text
    assert "| error | pkg/mod.py::f | lint | server\\_unreachable: connection refused |" in text


def test_an_unwritable_step_summary_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    results = [job([warning(1)])]
    missing = tmp_path / "no" / "such" / "dir" / "summary.md"
    output = render_github(results, RunSummary.of(1, results), step_summary=missing)
    assert any(c.startswith("::warning::remora: no job summary: ") for c in commands(output))


def test_analyze_with_github_format_writes_annotations_and_summary(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    summary_file = project / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    rule = CallEveryTool(arguments={"replace_text": {"old": "zzz", "new": "zzz"}})
    with ScriptedModelServer(rule=rule) as server:
        code = main(
            [
                "analyze",
                "pkg",
                "--output-format",
                "github",
                "--no-cache",
                "--base-url",
                server.base_url,
            ]
        )
    assert code == 1
    out = capsys.readouterr().out
    assert commands(out) == [
        "::warning file=pkg/shout.py,line=5,col=7,title=remora probe/TD001::# TODO: handle None"
    ]
    assert "| warning | pkg/shout.py:5:7 | probe/TD001 | # TODO: handle None |" in (
        summary_file.read_text()
    )
