"""YAML files that remember where each key was written, so errors can name file, line and key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from remora.errors import UserInputError

MAX_EXPANDED_NODES = 100_000
"""Most nodes a document may hold once its aliases are expanded. A configuration or an agent
definition holds hundreds; nine levels of lists of nine aliases ("billion laughs") hold 9**9."""


@dataclass(frozen=True)
class YamlFile:
    path: Path
    data: Any
    _root: yaml.Node | None

    @classmethod
    def load(cls, path: Path) -> YamlFile:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserInputError(f"{path}: cannot read: {exc}") from exc
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
            _check_nodes(path, root)  # before anything walks the data
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            problem = getattr(exc, "problem", None) or str(exc)
            raise UserInputError(f"{where}: not valid YAML: {problem}") from exc
        except RecursionError as exc:  # PyYAML composes and constructs recursively
            raise UserInputError(f"{path}: refused: values nested too deeply") from exc
        return cls(path=path, data=data, _root=root)

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        """1-based line of the deepest key in `loc` that exists in the file."""
        node = self._root
        line = None
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                match = next((kv for kv in node.value if kv[0].value == str(part)), None)
                if match is None:
                    break
                line = match[0].start_mark.line + 1
                node = match[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                if part >= len(node.value):
                    break
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        return line

    def where(self, loc: Sequence[str | int]) -> str:
        line = self.line_of(loc)
        return f"{self.path}:{line}" if line else str(self.path)


def _check_nodes(path: Path, root: yaml.Node | None) -> None:
    """Refuse duplicate keys, recursive aliases and alias bombs, visiting each node once.

    Aliases make the composed document a graph in which one node may be reached many times
    (9**9 times in a "billion laughs"); a walk along every path takes exponential time. Here
    each node is visited once (depth first), its size once expanded is the sum of its
    children's, and a document over `MAX_EXPANDED_NODES` is refused before anything reads it
    (every later reader of the loaded data, pydantic included, would walk every path).
    """
    if root is None:
        return
    sizes: dict[int, int] = {}
    """Nodes done: their size with every alias expanded."""
    open_nodes: set[int] = set()
    """Nodes whose children are being visited: the path from the root to the current node."""
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_EXPANDED_NODES:
                raise UserInputError(
                    f"{path}:{node.start_mark.line + 1}: this value expands to more than "
                    f"{MAX_EXPANDED_NODES:,} nodes through YAML aliases (*name); refused"
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise UserInputError(
                f"{path}:{node.start_mark.line + 1}: a YAML alias refers to a value that contains "
                "it (a recursive alias); refused"
            )
        _refuse_duplicate_keys(path, node)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _refuse_duplicate_keys(path: Path, node: yaml.Node) -> None:
    """PyYAML keeps the last of two equal keys silently; a typo'd config must not."""
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key, _ in node.value:
        line = key.start_mark.line + 1
        if isinstance(key, yaml.ScalarNode):
            if key.value in seen:
                raise UserInputError(
                    f"{path}:{line}: {key.value}: duplicate key (first at line {seen[key.value]})"
                )
            seen[key.value] = line


def format_loc(loc: Sequence[str | int]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The pydantic model that holds the key at the end of `loc`."""
    current: Any = model
    parts = list(loc[:-1])
    while parts:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(parts.pop(0)))
        if field is None:
            return None
        current = field.annotation
        # Unwrap containers (dict[str, Model], list[Model], Model | None) down to the model.
        while get_origin(current) is not None:
            args = [a for a in get_args(current) if a is not type(None)]
            if get_origin(current) in (dict, list) and parts:
                parts.pop(0)
            current = args[-1] if args else None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current
    return None


def describe_error(error: Any, model: type[BaseModel] | None = None) -> str:
    """One pydantic error in words a user can act on (pydantic already lists allowed values)."""
    if error["type"] == "extra_forbidden":
        holder = _model_at(model, error["loc"]) if model else None
        if holder is None:
            return "unknown key"
        return "unknown key; allowed keys: " + ", ".join(sorted(holder.model_fields))
    message = str(error["msg"])
    value = error.get("input")
    if error["type"] != "missing" and isinstance(value, str | int | float | bool):
        shown = repr(value)
        if len(shown) > _SHOWN_CHARS:  # a template of megabytes: its start says which
            shown = f"{shown[:_SHOWN_CHARS]}... ({len(str(value)):,} characters)"
        message += f" (got {shown})"
    return message


_SHOWN_CHARS = 200
"""How much of a value an error message quotes."""


def validation_messages(
    exc: ValidationError, where: Any, model: type[BaseModel] | None = None
) -> list[str]:
    """`where(loc)` tells where a location came from, e.g. 'remora.yaml:12'."""
    return [
        f"{where(err['loc'])}: {format_loc(err['loc'])}: {describe_error(err, model)}"
        for err in exc.errors()
    ]
