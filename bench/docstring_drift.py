"""Docstrings that agree with the code, on real libraries: the docstring agent's drift findings
side by side with pydoclint's under the same configuration, then `--fix` and pydoclint again.

    python bench/docstring_drift.py          # natsort 8.4.0 (NumPy), webcolors 24.11.1 (Sphinx)
    python bench/docstring_drift.py --quick  # webcolors only

Each library's sdist is downloaded from PyPI (`pip download --no-binary :all:`) into a temporary
folder. Neither has a `[tool.pydoclint]`, so both sides use Remora's configuration for a project
without one (docs/WRITING_AGENTS.md): `--style` the library's (the agent's option `style`),
`--arg-type-hints-in-signature=False --arg-type-hints-in-docstring=False
--check-return-types=False --check-yield-types=False`, `--allow-init-docstring` False for NumPy
and True otherwise, `--exclude=`, and DOC108/DOC111 (which only say that a type is written
somewhere) not counted. pydoclint checks private definitions too, so the agent runs with
`include_private: true`.

1. `pydoclint` on the package (one run) and `remora analyze PKG --agents docstring --engine
   local` (the embedded model, which drafts the sentences new entries need: suggestions, not
   written): the findings compared as (file, line, code).
2. In a copy: `remora analyze PKG --agents docstring --fix` until the files stop changing (one
   edit per file per run: a second job's edit to the same file waits for the next run), then
   pydoclint again: every finding the first run marked as fixed by its edit (`[*]`) must be
   gone (matched by definition and code: lines move), and no definition may gain a code.
3. The library's own tests (pytest, its test dependencies installed into a folder of their own
   when pip can get them) before and after the fix.

Results: bench/results/docstring_drift.json.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, BenchError, Report, common_arguments, fmt_s, workdir
from lint_step import Library as Sdist
from lint_step import download

TIMEOUT_S = 1800.0
FIX_ROUNDS = 8
IGNORED = {"DOC108", "DOC111"}


@dataclass(frozen=True)
class Library:
    name: str
    version: str
    package: str
    """The package's folder inside the sdist, what is analysed."""
    style: str
    pythonpath: str
    """Where the tests import the package from, relative to the sdist's root."""
    test_dependencies: tuple[str, ...] = field(default=())


LIBRARIES = (
    Library("natsort", "8.4.0", "natsort", "numpy", ".", ("pytest-mock",)),
    Library("webcolors", "24.11.1", "src/webcolors", "sphinx", "src"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    args = parser.parse_args()
    report = Report("docstring_drift", args)
    libraries = LIBRARIES[1:] if args.quick else LIBRARIES
    report.data["libraries"] = {}
    for library in libraries:
        try:
            with workdir(f"docstring-drift-{library.name}") as work:
                measure(report, library, work)
        except BenchError as exc:
            report.verdict(f"{library.name} {library.version}", None, str(exc))
    report.save()
    return 0


def pydoclint_args(library: Library) -> list[str]:
    return [
        "--quiet",
        "--show-filenames-in-every-violation-message=True",
        f"--style={library.style}",
        "--arg-type-hints-in-signature=False",
        "--arg-type-hints-in-docstring=False",
        "--check-return-types=False",
        "--check-yield-types=False",
        f"--allow-init-docstring={library.style != 'numpy'}",
        "--exclude=",
    ]


def measure(report: Report, library: Library, work: Path) -> None:
    root = download(Sdist(library.name, library.version, library.package), work)
    package = root / library.package
    files = sorted(package.rglob("*.py"))
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
    data: dict[str, Any] = {
        "version": library.version,
        "package": library.package,
        "style": library.style,
        "files": len(files),
        "lines": lines,
        "pydoclint_args": pydoclint_args(library),
        "has_pydoclint_config": has_config(root),
    }
    report.data["libraries"][library.name] = data
    print(f"{library.name} {library.version}: {len(files)} files, {lines:,} lines", flush=True)
    deps = install_test_dependencies(library, work)
    data["tests_before"] = library_tests(root, library, deps)
    print(f"  tests before: {data['tests_before']['summary']}", flush=True)

    started = time.monotonic()
    expected = pydoclint(root, library)
    data["pydoclint_s"] = round(time.monotonic() - started, 3)
    data["pydoclint_findings"] = len(expected)
    data["pydoclint_by_code"] = dict(collections.Counter(code for _, _, code in expected))

    fixing = work / "fixing"
    shutil.copytree(root, fixing)
    first = analyze(root, library, fix=False, cache=False)
    data["analyze"] = {k: v for k, v in first.items() if k != "report"}
    if first["report"] is None:
        raise BenchError(f"remora analyze exited {first['exit_code']}: {first['stderr_tail']}")
    findings = [
        f for r in first["report"]["results"] for f in r["findings"] if f["rule"].startswith("DOC")
    ]
    found = {(f["file"], f["line"], f["rule"]) for f in findings}
    wanted = {key for key in expected if key[2] not in IGNORED}
    missing, extra = sorted(wanted - found), sorted(found - wanted)
    data["comparison"] = {
        "pydoclint": len(wanted),
        "agent": len(found),
        "same": len(wanted & found),
        "missing": [list(key) for key in missing],
        "extra": [list(key) for key in extra],
    }
    report.verdict(
        f"{library.name}: the agent's drift findings = pydoclint's (file, line, code)",
        not missing and not extra,
        f"{len(wanted & found)} of {len(wanted)} pydoclint findings reported, "
        f"{len(missing)} missing, {len(extra)} extra",
    )
    by_job = collections.Counter(f.get("fix") or "none" for f in findings)
    decided = [f for f in findings if f.get("fix") == "edit"]
    data["fix_marks"] = dict(by_job)
    data["fixed_by_code"] = dict(collections.Counter(f["rule"] for f in decided))
    data["left_by_code"] = dict(
        collections.Counter(f["rule"] for f in findings if f.get("fix") != "edit")
    )
    written_drafts = [
        r["node"]["id"] for r in first["report"]["results"] if r.get("outcome") == "written"
    ]
    data["new_docstrings_written"] = written_drafts
    data["reasons_left"] = reasons(first["report"])

    rounds = []
    for _ in range(FIX_ROUNDS):
        before = snapshot(fixing, library)
        run = analyze(fixing, library, fix=True, cache=True)
        rounds.append({k: v for k, v in run.items() if k != "report"})
        if snapshot(fixing, library) == before:
            break
    data["fix_rounds"] = rounds
    targets = {(f["file"], definition_of(root / f["file"], f["line"]), f["rule"]) for f in decided}
    after = pydoclint(fixing, library)
    after_keys = {(file, definition_of(fixing / file, line), code) for file, line, code in after}
    still = sorted(targets & after_keys)
    before_keys = {(file, definition_of(root / file, line), code) for file, line, code in expected}
    new = sorted(after_keys - before_keys)
    data["recheck"] = {
        "fixed_targets": len(targets),
        "still_reported": [list(key) for key in still],
        "new_findings": [list(key) for key in new],
        "pydoclint_after": len([k for k in after if k[2] not in IGNORED]),
        "pydoclint_after_by_code": dict(
            collections.Counter(code for _, _, code in after if code not in IGNORED)
        ),
    }
    report.verdict(
        f"{library.name}: every fix the code decides written, pydoclint re-check 0 for them",
        bool(targets) and not still and not new,
        f"{len(targets)} findings fixed by the agent's edits "
        f"({', '.join(f'{c} {n}' for c, n in sorted(data['fixed_by_code'].items()))}); "
        f"pydoclint after --fix: {len(still)} of them still reported, {len(new)} new",
    )
    report.verdict(
        f"{library.name}: no model-drafted prose written by default",
        not written_drafts,
        f"{len(written_drafts)} new docstrings written; drafts left as suggestions: "
        f"{by_job.get('suggestion', 0)} findings",
    )
    data["tests_after"] = library_tests(fixing, library, deps)
    print(f"  tests after: {data['tests_after']['summary']}", flush=True)
    # The same outcome before and after: tests that error here before the fix (natsort's
    # locale tests, where the machine has no such locale) are the machine's, not the fix's.
    counts = ("passed", "failed", "errors")
    tests_ok = data["tests_before"]["passed"] > 0 and all(
        data["tests_after"][key] == data["tests_before"][key] for key in counts
    )
    report.verdict(
        f"{library.name}: the library's own tests still pass",
        tests_ok,
        f"before: {data['tests_before']['summary']}; after: {data['tests_after']['summary']}",
    )
    data["diff_lines"] = diff_size(root, fixing, library)


def has_config(root: Path) -> bool:
    pyproject = root / "pyproject.toml"
    return pyproject.is_file() and "[tool.pydoclint]" in pyproject.read_text(encoding="utf-8")


def pydoclint(root: Path, library: Library) -> list[tuple[str, int, str]]:
    program = Path(PYTHON).with_name("pydoclint")
    done = subprocess.run(
        [str(program), *pydoclint_args(library), library.package],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise BenchError(f"pydoclint failed: {done.stderr[-300:]}")
    found = []
    for line in done.stderr.splitlines():
        parts = line.split(": ", 2)
        if len(parts) == 3 and parts[1].startswith("DOC"):
            file, _, number = parts[0].rpartition(":")
            found.append((file, int(number), parts[1]))
    return found


def analyze(root: Path, library: Library, *, fix: bool, cache: bool) -> dict[str, Any]:
    command = [
        PYTHON, "-m", "remora", "analyze", library.package, "--agents", "docstring",
        "--engine", "local", "--format", "json", "-o", "report.json",
        "-c", f"agents.docstring.options.style={library.style}",
        "-c", "agents.docstring.options.include_private=true",
    ]  # fmt: skip
    if fix:
        command.append("--fix")
    if not cache:
        command.append("--no-cache")
    (root / "report.json").unlink(missing_ok=True)
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=root, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    wall = time.monotonic() - started
    path = root / "report.json"
    document = json.loads(path.read_text()) if path.is_file() else None
    path.unlink(missing_ok=True)
    results = document["results"] if document else []
    summary = {
        "exit_code": done.returncode,
        "wall_s": round(wall, 2),
        "jobs": len(results),
        "statuses": dict(collections.Counter(r["status"] for r in results)),
        "outcomes": dict(collections.Counter(r.get("outcome") or "-" for r in results)),
        "stderr_tail": done.stderr.strip()[-400:],
        "report": document,
    }
    print(
        f"  remora analyze{' --fix' if fix else ''}: exit {done.returncode} in {fmt_s(wall)}; "
        f"{len(results)} jobs {summary['statuses']}",
        flush=True,
    )
    return summary


def reasons(document: dict[str, Any]) -> dict[str, int]:
    """Why findings were not fixed, counted (the jobs' summaries name each code's reason)."""
    counted: collections.Counter[str] = collections.Counter()
    for result in document["results"]:
        for finding in result["findings"]:
            if finding["rule"].startswith("DOC") and finding.get("fix") != "edit":
                summary = result.get("summary") or ""
                code = finding["rule"]
                at = summary.find(code + " (")
                why = summary[at + len(code) + 2 :].split(")")[0] if at >= 0 else summary[:120]
                counted[f"{code}: {why}"] += 1
    return dict(counted.most_common())


def definition_of(path: Path, line: int) -> str:
    """The qualified name of the class or function whose def line is `line`."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return f"line {line}"

    def walk(node: ast.AST, prefix: str) -> str | None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                if child.lineno == line:
                    return name
                found = walk(child, name + ".")
                if found:
                    return found
        return None

    return walk(tree, "") or f"line {line}"


def snapshot(root: Path, library: Library) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted((root / library.package).rglob("*.py"))
    }


def diff_size(before: Path, after: Path, library: Library) -> int:
    done = subprocess.run(
        ["diff", "-ru", str(before / library.package), str(after / library.package)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return len([line for line in done.stdout.splitlines() if line[:1] in "+-"])


def install_test_dependencies(library: Library, work: Path) -> Path | None:
    if not library.test_dependencies:
        return None
    target = work / "test-deps"
    done = subprocess.run(
        [PYTHON, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
         *library.test_dependencies],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return target if done.returncode == 0 else None


def library_tests(root: Path, library: Library, deps: Path | None) -> dict[str, Any]:
    paths = [str(root / library.pythonpath)] + ([str(deps)] if deps else [])
    env = {**os.environ, "PYTHONPATH": ":".join(paths)}
    done = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=root, capture_output=True, text=True, timeout=900, env=env, check=False,
    )  # fmt: skip
    tail = [line for line in done.stdout.splitlines() if line.strip()][-1:] or [""]
    found = {
        key: int(next(iter(re.findall(rf"(\d+) {word}", tail[0])), 0))
        for key, word in (("passed", "passed"), ("failed", "failed"), ("errors", "error"))
    }
    return {"exit_code": done.returncode, **found, "summary": tail[0].strip("= ")}


if __name__ == "__main__":
    sys.exit(main())
