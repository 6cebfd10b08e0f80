"""Where an agent's changes may go: its `writes:` entries, checked against every change a job
makes and every change read back from the cache.

An agent folder may come with a project nobody here wrote, and its tools run a model's code:
what a job may change is declared, not inferred from what it did. Entries are

- `node`: inside the node's own lines of its file (a docstring);
- `node_file`: anywhere in the node's file (a lint fix);
- a path in the project, with placeholders `{project}` (the nearest folder up with a project
  or pytest configuration file), `{folder}` (the node's file's folder), `{module}` (the last
  name of its module), `{name}` (the node's name), `{qualname}` (its qualified name with dots as
  underscores: `Stock_add` for the method `Stock.add`) and `{options.KEY}` (the agent's effective
  option), and gitignore-style wildcards of the agent's own (`*`, `?`, `[...]`).

Placeholders are filled from the project as it is on disk, never from a job's own writes (a job
that creates a `pyproject.toml` does not move its own scope), and their values are matched
literally.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathspec import GitIgnoreSpec

from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace, WorkspaceError, file_diff
from remora.findings.results import Change
from remora.tool_library.module_paths import module_of, project_of

NODE = "node"
NODE_FILE = "node_file"
PLACEHOLDER = re.compile(r"\{([a-z_]+(?:\.[A-Za-z0-9_]+)?)\}")
NAMES = ("project", "folder", "module", "name", "qualname")


def check_scope(entry: str) -> None:
    """ValueError saying what is wrong with one `writes:` entry."""
    if entry in (NODE, NODE_FILE):
        return
    if not entry.strip() or "\x00" in entry or "\\" in entry:
        raise ValueError(f"{entry!r}: expected node, node_file or a path in the project")
    for name in PLACEHOLDER.findall(entry):
        if name not in NAMES and not name.startswith("options."):
            known = ", ".join("{" + known + "}" for known in (*NAMES, "options.KEY"))
            raise ValueError(f"{entry!r}: unknown placeholder {{{name}}} (known: {known})")
    stripped = PLACEHOLDER.sub("x", entry)
    if "{" in stripped or "}" in stripped:
        raise ValueError(f"{entry!r}: a '{{' or '}}' that is not a placeholder")
    if stripped.startswith(("/", "~")) or ".." in stripped.split("/"):
        raise ValueError(f"{entry!r}: a path relative to the project, without '..'")


@dataclass(frozen=True)
class WriteScope:
    """An agent's `writes:` for one node."""

    entries: tuple[str, ...]
    node: Node
    files: GitIgnoreSpec
    """The path entries, filled in, as anchored gitignore patterns."""

    def refusal(self, file: str, before: str | None, after: str) -> str | None:
        """Why a change of `file` from `before` (None: a new file) to `after` is out of scope;
        None when it may be written."""
        if file == self.node.file and NODE_FILE in self.entries:
            return None
        if self.files.match_file(file):
            return None
        if file == self.node.file and NODE in self.entries:
            outside = _outside_node(before, after, self.node)
            if outside is None:
                return None
            return f"{file}: changes line {outside}, outside {self.node.qualified_name}"
        allowed = ", ".join(self.entries) or "nothing (the agent declares no writes:)"
        return f"{file}: outside what the agent may write ({allowed})"


def write_scope(
    entries: Sequence[str], node: Node, options: Mapping[str, Any], root: Path
) -> WriteScope:
    """The scope of `entries` for `node`, placeholders filled from the project at `root`."""

    def exists(path: str) -> bool:
        return (root / path).exists()

    module, _ = module_of(node.file, exists)
    values = {
        "project": project_of(node.file, exists),
        "folder": node.file.rsplit("/", 1)[0] if "/" in node.file else "",
        "module": module.rsplit(".", 1)[-1] or "module",
        "name": node.name,
        "qualname": node.qualified_name.replace(".", "_"),
    }
    patterns = []
    for entry in entries:
        if entry in (NODE, NODE_FILE):
            continue
        filled = _fill(entry, values, options)
        if filled is not None:
            patterns.append("/" + filled)
    return WriteScope(
        entries=tuple(entries),
        node=node,
        files=GitIgnoreSpec.from_lines(patterns),
    )


def _fill(entry: str, values: Mapping[str, str], options: Mapping[str, Any]) -> str | None:
    """The entry with its placeholders' values (wildcards in them escaped), empty segments
    dropped; None when an option is missing or its value leaves the project."""
    parts: list[str] = []
    position = 0
    for match in PLACEHOLDER.finditer(entry):
        parts.append(entry[position : match.start()])
        name = match.group(1)
        value = options.get(name[8:]) if name.startswith("options.") else values.get(name)
        if not isinstance(value, str | int) or isinstance(value, bool):
            return None
        text = str(value).strip("/")
        if "\x00" in text or ".." in text.split("/") or text.startswith("~"):
            return None
        parts.append(re.sub(r"([*?\[\]\\!#])", r"\\\1", text))
        position = match.end()
    parts.append(entry[position:])
    filled = "/".join(segment for segment in "".join(parts).split("/") if segment not in ("", "."))
    return filled or None


def _outside_node(before: str | None, after: str, node: Node) -> int | None:
    """The first line (1-based, of `before`) a change touches outside the node's lines; None
    when every changed line lies inside them. An insertion counts as inside when it falls
    after the node's first line and before its last, where a docstring goes."""
    if before is None:
        return 1
    first, last = node.start_line - 1, node.end_line  # the node is lines[first:last]
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert":
            if not first < i1 < last:
                return i1 + 1
        elif i1 < first or i2 > last:
            return (i1 if i1 < first else i2 - 1) + 1
    return None


def in_scope(
    scope: WriteScope, changes: Sequence[Change], before: Callable[[str], str | None]
) -> tuple[list[Change], list[str]]:
    """The changes the scope allows, and why each other one was refused; `before` gives a
    file's text as the change was made against it (None: it did not exist)."""
    kept, refused = [], []
    for change in changes:
        reason = scope.refusal(change.file, before(change.file), change.new_text)
        if reason is None:
            kept.append(change)
        else:
            refused.append(reason)
    return kept, refused


def scoped_changes(
    writes: Sequence[str], options: Mapping[str, Any], node: Node, workspace: Workspace
) -> tuple[list[Change], list[str]]:
    """A job's changes inside its agent's `writes:`, and why each other one was refused: a
    tool (or a model's code under it) that wrote elsewhere changes nothing there."""
    scope = write_scope(writes, node, options, workspace.root)
    return in_scope(scope, workspace.diff(), workspace.before)


def scoped_suggestion(
    writes: Sequence[str],
    options: Mapping[str, Any],
    node: Node,
    workspace: Workspace,
    suggestion: Mapping[str, Any],
) -> list[Change]:
    """An edit a tool proposed but did not make (`{"file", "text"}`: a withheld docstring
    draft), as a change to show a reviewer, never to apply; none when it changes nothing or
    lies outside the agent's `writes:`."""
    file, text = suggestion.get("file"), suggestion.get("text")
    if not isinstance(file, str) or not isinstance(text, str):
        return []
    try:
        key, now = workspace.key(file), workspace.read_text(file)
    except (WorkspaceError, OSError, UnicodeDecodeError):
        return []
    scope = write_scope(writes, node, options, workspace.root)
    if now == text or scope.refusal(key, now, text) is not None:
        return []
    return [Change(file=key, diff=file_diff(key, now, text))]


def text_on_disk(path: Path) -> str | None:
    """A project file's text as a job reads it ('\n' line endings); None: missing, unreadable."""
    try:
        return path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    except (OSError, UnicodeDecodeError):
        return None
