"""The unit of analysis: a file, class, function or method found by discovery."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class NodeType(StrEnum):
    FILE = "file"
    CLASS = "class"
    FUNCTION = "function"
    METHOD = "method"


MODULE_QUALNAME = "<module>"

Definition = tuple[NodeType, str, str, int, int, int, int, int]
"""A class or function as discovery finds it: (type, name, qualified name, start line, start
column, end line, start byte, end byte). Lines and columns are 1-based, lines inclusive; bytes
index the file's bytes. A plain tuple: worker processes send thousands back, and the parse cache
stores them, and tuples are cheap to pickle and to build."""


class Node(BaseModel):
    """One analysable piece of a Python file.

    `file` is a POSIX path relative to the discovery root (absolute when the file lies outside
    it). Lines and columns are 1-based, lines inclusive; bytes are offsets into the file's
    UTF-8 bytes. `text` starts at `start_column` of `start_line`, so a tool that reports a
    column on the node's first line must add `start_column - 1`. The range
    of a decorated definition starts at its first decorator.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    type: NodeType
    name: str
    qualified_name: str
    file: str
    start_line: int
    start_column: int
    """1-based column of the first line (indentation + 1 for methods; 1 for files)."""
    end_line: int
    start_byte: int
    end_byte: int
    text: str

    def public_fields(self) -> dict[str, object]:
        """The node as reports show it: everything but the text."""
        return self.model_dump(mode="json", exclude={"text"})


def node_id(file: str, qualified_name: str, ordinal: int) -> str:
    """Stable id: the same file and qualified name give the same id across runs.

    `ordinal` counts earlier nodes with the same qualified name in the file (a property's getter
    and setter, a function defined in both branches of an `if`), so ids stay unique.
    """
    base = f"{file}::{qualified_name}"
    return base if ordinal == 0 else f"{base}@{ordinal + 1}"
