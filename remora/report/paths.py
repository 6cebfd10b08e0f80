"""Paths as the user can open them, as ruff prints them: relative to the current directory when
the file is inside it, absolute otherwise. Results keep paths relative to the project root
(node ids, the cache and `--fix` rely on that); only what is printed changes. SARIF keeps
repository-relative URIs with a `uriBaseId`, and patches (`--diff`, a change's `diff`) stay
relative to the project root, where they apply."""

from __future__ import annotations

import os
from pathlib import Path

from remora.discovery.nodes import Node
from remora.findings.results import JobResult


def shown_path(file: str, root: Path, cwd: Path | None = None) -> str:
    path = Path(os.path.abspath(root / file))
    here = Path(os.path.abspath(cwd or Path.cwd()))
    return path.relative_to(here).as_posix() if path.is_relative_to(here) else path.as_posix()


def as_shown(results: list[JobResult], root: Path) -> list[JobResult]:
    """`results` with every printed path re-expressed for the current directory (the same
    objects when the project root is the current directory)."""
    if Path(os.path.abspath(root)) == Path(os.path.abspath(Path.cwd())):
        return results
    return [shown(result, root) for result in results]


def shown_node(node: Node, root: Path) -> Node:
    file = shown_path(node.file, root)
    return node.model_copy(update={"file": file, "id": file + node.id[len(node.file) :]})


def shown(result: JobResult, root: Path) -> JobResult:
    return result.model_copy(
        update={
            "node": shown_node(result.node, root),
            "findings": [
                finding.model_copy(update={"file": shown_path(finding.file, root)})
                for finding in result.findings
            ],
            "changes": [
                change.model_copy(update={"file": shown_path(change.file, root)})
                for change in result.changes
            ],
        }
    )
