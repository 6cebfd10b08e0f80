"""Where an agent's changes may go: its `writes:` entries, checked against every change a job
makes and every change read back from the cache.

An agent folder may come with a project nobody here wrote, and its tools run a model's code:
what a job may change is declared, not inferred from what it did. Entries are

- `node`: inside the node's own span of its file as Python parses it (a docstring): the text
  before and after the node unchanged, and the new text one definition of the same kind and
  qualified name, ending where the old one ended. Checked on lines alone, a node's last line
  replaced by `return x` and a dedented `import os` would add module code;
- `node_file`: anywhere in the node's file (a lint fix);
- a path in the project, with placeholders `{project}` (the nearest folder up with a project
  or pytest configuration file), `{folder}` (the node's file's folder), `{module}` (the last
  name of its module), `{name}` (the node's name), `{qualname}` (its qualified name with dots as
  underscores: `Stock_add` for the method `Stock.add`), `{tests}` (the project's tests folder
  in it: the agent's `tests_dir` option when set, else `tests`, or `test` when the project has
  only that) and `{options.KEY}` (the agent's effective option), and wildcards of the agent's
  own (`*` and `?` within one name, `[...]`). A path matches that one file: not, as a
  gitignore pattern would, a folder of that name and every file below it
  (`tests/test_a_f.py/conftest.py`).

Placeholders are filled from the project as it is on disk, never from a job's own writes (a job
that creates a `pyproject.toml` does not move its own scope), and their values are matched
literally.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remora.discovery.nodes import Definition, Node, NodeType
from remora.discovery.parse import definitions_by_ast, find_definitions
from remora.edits.workspace import Workspace, WorkspaceError, file_diff
from remora.findings.results import Change
from remora.tool_library.module_paths import module_of, project_of, tests_folder_of

NODE = "node"
NODE_FILE = "node_file"
PLACEHOLDER = re.compile(r"\{([a-z_]+(?:\.[A-Za-z0-9_]+)?)\}")
NAMES = ("project", "folder", "module", "name", "qualname", "tests")


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
    try:
        _pattern(stripped)
    except re.error as exc:
        raise ValueError(f"{entry!r}: a wildcard that is not one ({exc})") from None


@dataclass(frozen=True)
class WriteScope:
    """An agent's `writes:` for one node."""

    entries: tuple[str, ...]
    node: Node
    files: tuple[re.Pattern[str], ...]
    """The path entries, filled in, each matching one whole path."""
    exact: tuple[str, ...] = ()
    """The path entries that name one file (no wildcard), filled in: a job's result depends on
    what is there (a test file that exists already), so the result cache's key holds them."""

    def refusal(self, file: str, before: str | None, after: str) -> str | None:
        """Why a change of `file` from `before` (None: a new file) to `after` is out of scope;
        None when it may be written."""
        if file == self.node.file and NODE_FILE in self.entries:
            return None
        if any(pattern.fullmatch(file) for pattern in self.files):
            return None
        if file == self.node.file and NODE in self.entries:
            outside = _outside_node(before, after, self.node)
            return None if outside is None else f"{file}: {outside}"
        allowed = ", ".join(self.entries) or "nothing (the agent declares no writes:)"
        return f"{file}: outside what the agent may write ({allowed})"


def write_scope(
    entries: Sequence[str], node: Node, options: Mapping[str, Any], root: Path
) -> WriteScope:
    """The scope of `entries` for `node`, placeholders filled from the project at `root`."""

    def exists(path: str) -> bool:
        return (root / path).exists()

    module, _ = module_of(node.file, exists)
    project = project_of(node.file, exists)
    tests_dir = options.get("tests_dir")
    values = {
        "project": project,
        "folder": node.file.rsplit("/", 1)[0] if "/" in node.file else "",
        "module": module.rsplit(".", 1)[-1] or "module",
        "name": node.name,
        "qualname": node.qualified_name.replace(".", "_"),
        "tests": tests_folder_of(project, tests_dir if isinstance(tests_dir, str) else "", exists),
    }
    patterns = []
    exact = []
    for entry in entries:
        if entry in (NODE, NODE_FILE):
            continue
        filled = _fill(entry, values, options)
        if filled is not None:
            try:
                patterns.append(_pattern(filled))
            except re.error:  # check_scope refused the entry's own wildcards: not reached
                continue
            if re.search(r"(?<!\\)[*?\[]", filled) is None:
                exact.append(re.sub(r"\\(.)", r"\1", filled))
    return WriteScope(entries=tuple(entries), node=node, files=tuple(patterns), exact=tuple(exact))


def _pattern(path: str) -> re.Pattern[str]:
    """A filled-in path entry as a regular expression for `fullmatch` on a POSIX path: `*`
    and `?` stand for any text and any one character within one name, `[...]` (`[!...]`
    negated) for one character of a set, other than `/`; a backslash makes the next character
    literal (placeholder values come escaped). Nothing stands for a folder and all below it."""
    out, index = [], 0
    while index < len(path):
        char = path[index]
        index += 1
        if char == "\\" and index < len(path):
            out.append(re.escape(path[index]))
            index += 1
        elif char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (close := path.find("]", index + 1)) > 0:
            members = path[index:close]
            if members[0] in "!^":
                members = "^" + members[1:]
            out.append("(?!/)[" + members.replace("\\", "\\\\").replace("[", "\\[") + "]")
            index = close + 1
        else:
            out.append(re.escape(char))
    return re.compile("".join(out))


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


def _outside_node(before: str | None, after: str, node: Node) -> str | None:
    """What a change of the node's file from `before` to `after` does outside the node; None
    when it changes only the node's own span as parsed, and that span still holds one
    definition of the node's kind and qualified name (a docstring added, its body rewritten).

    Lines alone cannot tell: the node's last line replaced by `return x`, then `import os`
    dedented, changes only the node's lines and adds module code. So the text before the node's
    first byte and after its last must be the same bytes, and in `after`, as Python parses it,
    the node's definition must span exactly what lies between them: code dedented out of it, a
    string or a line continued into what follows, a syntax error, another name or kind, each
    leaves it spanning something else."""
    what = f"{node.type.value} {node.qualified_name}"
    if before is None:
        return f"a new file, outside {node.qualified_name}"
    if node.type is NodeType.FILE:
        return None  # the file is the node's span
    old, new = before.encode(), after.encode()
    definitions, parsed = _definitions(old)
    span = next(
        (
            (first, last)
            for kind, _, qualified_name, line, _, _, first, last in definitions
            if kind is node.type
            and qualified_name == node.qualified_name
            and line == node.start_line
        ),
        None,
    )
    if span is None:
        return f"no {what} on line {node.start_line} to change"
    head, tail = old[: span[0]], old[span[1] :]
    if not new.startswith(head):
        return f"changes line {_line(old, _common_prefix(old, new))}, outside {node.qualified_name}"
    if not new.endswith(tail):
        changed = len(old) - _common_suffix(old, new) - 1
        return f"changes line {_line(old, changed)}, outside {node.qualified_name}"
    start, end = len(head), len(new) - len(tail)
    now, still_parsed = _definitions(new)
    if parsed and not still_parsed:
        return f"leaves a syntax error in {what}"
    if end <= start or not any(
        kind is node.type
        and qualified_name == node.qualified_name
        and (first, last) == (start, end)
        for kind, _, qualified_name, _, _, _, first, last in now
    ):
        return (
            f"the new text of {what} does not parse as that {node.type.value} alone, ending "
            "where it ended: it would change code outside it"
        )
    return None


def _definitions(data: bytes) -> tuple[list[Definition], bool]:
    """The file's definitions as Python parses it (what will run), and True; where Python
    cannot, as discovery's tree-sitter recovers them, and False."""
    exact = definitions_by_ast(data)
    return (exact, True) if exact is not None else (find_definitions(data), False)


def _common_prefix(a: bytes, b: bytes) -> int:
    """How many bytes `a` and `b` start with alike (slices compared in C, halving the range)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: bytes, b: bytes) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low


def _line(data: bytes, offset: int) -> int:
    """The 1-based line of `data` that byte `offset` lies on."""
    return data.count(b"\n", 0, max(offset, 0)) + 1


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
