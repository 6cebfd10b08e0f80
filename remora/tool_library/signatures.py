"""A function's signature as a JSON schema of its arguments, from `node_info()`'s annotations:
int, float, str, bool, None, list/set/tuple/dict and their typing aliases, unions (`A | B`,
Union, Optional) and Literal; a parameter with a default is not required; an unannotated one,
or a type with no JSON form, accepts any JSON value (and gets an informational finding)."""

from __future__ import annotations

import re
from typing import Any

import jsonschema

TOKEN = re.compile(
    r"\s*(\.\.\.|[A-Za-z_][\w.]*|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|-?\d+(?:\.\d+)?|[\[\],|()])"
)
SCALARS: dict[str, dict[str, Any]] = {
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "None": {"type": "null"},
    "NoneType": {"type": "null"},
    "Any": {},
    "object": {},
}
ARRAYS = {"list", "List", "Sequence", "MutableSequence", "Iterable", "Collection"}
SETS = {"set", "Set", "frozenset", "FrozenSet", "AbstractSet", "MutableSet"}
MAPPINGS = {
    "dict",
    "Dict",
    "Mapping",
    "MutableMapping",
    "OrderedDict",
    "defaultdict",
    "DefaultDict",
}
WRAPPERS = {"Annotated", "Final", "ClassVar", "Required", "NotRequired", "ReadOnly"}
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

Tree = dict[str, Any]
"""An annotation's parse tree: {"kind": "name" | "union" | "list" | "string" | "number" |
"ellipsis", ...}."""


def signature_schema(
    info: dict[str, Any], module: str, qualified_name: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The schema of the arguments as one JSON object, and findings for what it cannot check:
    one SMP100 naming every parameter without an annotation (one line per function, not per
    parameter: an unannotated library would get a line for each), and an SMP101 per annotation
    with a part that has no JSON form."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra: Any = False
    findings: list[dict[str, Any]] = []
    unannotated: list[str] = []
    for parameter in info.get("parameters", []):
        name, annotation = parameter["name"], parameter["annotation"]
        unknown: list[str] = []
        schema = annotation_schema(annotation, unknown) if annotation else {}
        if annotation is None:
            unannotated.append(f"`{name}`")
        elif unknown:
            findings.append(_finding("SMP101", f"parameter `{name}: {annotation}`: "
                                     f"{', '.join(unknown)} has no JSON form; that part accepts "
                                     "any JSON value"))  # fmt: skip
        described = name + (": " + annotation if annotation else "")
        if parameter["default"] is not None:
            described += " = " + parameter["default"]
        if parameter["kind"] == "var_keyword":
            extra = schema
            continue
        if parameter["kind"] == "var_positional":
            schema = {"type": "array", "items": schema} if schema else {"type": "array"}
            described = "*" + described
        elif parameter["default"] is None:
            required.append(name)
        schema["description"] = "Python: " + described
        properties[name] = schema
    if unannotated:
        names = ", ".join(unannotated)
        findings.insert(0, _finding("SMP100", (
            f"parameter {names} has no type annotation: any JSON value is accepted for it"
            if len(unannotated) == 1 else
            f"parameters {names} have no type annotation: any JSON value is accepted for them"
        )))  # fmt: skip
    document = {
        "$schema": SCHEMA_DIALECT,
        "title": "Arguments of " + (module + "." if module else "") + qualified_name,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": extra,
    }
    return document, findings


def describe_schema(schema: dict[str, Any]) -> str:
    """A short type name for the model: 'number', 'list of integer', 'object of string keys
    to integer'."""
    if not schema or (len(schema) == 1 and "description" in schema):
        return "any"
    if "enum" in schema:
        return "one of " + ", ".join(repr(value) for value in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(describe_schema(option) for option in schema["anyOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(describe_schema({"type": item}) for item in kind)
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(describe_schema(item) for item in schema["prefixItems"]) + "]"
        items = schema.get("items")
        return "list of " + describe_schema(items) if isinstance(items, dict) else "list"
    if kind == "object":
        values = schema.get("additionalProperties")
        keys = "integer" if "propertyNames" in schema else "string"
        if isinstance(values, dict):
            return "object of " + keys + " keys to " + describe_schema(values)
        return "object"
    return str(kind)


def annotation_schema(text: str, unknown: list[str]) -> dict[str, Any]:
    try:
        tokens = _tokenize(text)
        tree, index = _parse_union(tokens, 0)
        if index != len(tokens):
            raise ValueError("unexpected " + repr(tokens[index]))
    except ValueError:
        unknown.append(text)
        return {}
    return _to_schema(tree, unknown)


def _finding(rule: str, message: str) -> dict[str, Any]:
    return {"rule": rule, "message": message, "severity": "info"}


def _tokenize(text: str) -> list[str]:
    tokens = []
    index = 0
    while index < len(text):
        match = TOKEN.match(text, index)
        if not match or not match.group(0):
            if not text[index:].strip():
                break
            raise ValueError("cannot read " + repr(text))
        tokens.append(match.group(1))
        index = match.end()
    return tokens


def _parse_union(tokens: list[str], index: int) -> tuple[Tree, int]:
    members = []
    while True:
        member, index = _parse_atom(tokens, index)
        members.append(member)
        if index < len(tokens) and tokens[index] == "|":
            index += 1
        else:
            break
    if len(members) == 1:
        return members[0], index
    return {"kind": "union", "members": members}, index


def _parse_atom(tokens: list[str], index: int) -> tuple[Tree, int]:
    if index >= len(tokens):
        raise ValueError("unexpected end")
    token = tokens[index]
    if token[0] in "\"'":
        return {"kind": "string", "value": token[1:-1]}, index + 1
    if token[0] == "-" or token[0].isdigit():
        value: float | int = float(token) if "." in token else int(token)
        return {"kind": "number", "value": value}, index + 1
    if token == "...":
        return {"kind": "ellipsis"}, index + 1
    if token in ("[", "("):
        items, index = _parse_list(tokens, index + 1, "]" if token == "[" else ")")
        return {"kind": "list", "items": items}, index
    if token[0].isalpha() or token[0] == "_":
        node: Tree = {"kind": "name", "name": token.rsplit(".", 1)[-1], "args": None}
        index += 1
        if index < len(tokens) and tokens[index] == "[":
            node["args"], index = _parse_list(tokens, index + 1, "]")
        return node, index
    raise ValueError("unexpected " + repr(token))


def _parse_list(tokens: list[str], index: int, closing: str) -> tuple[list[Tree], int]:
    items = []
    while index < len(tokens) and tokens[index] != closing:
        item, index = _parse_union(tokens, index)
        items.append(item)
        if index < len(tokens) and tokens[index] == ",":
            index += 1
    if index >= len(tokens):
        raise ValueError("missing " + closing)
    return items, index + 1


def _merge(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """One schema accepting any of `schemas`: a type list when they are all plain types."""
    if any(not schema for schema in schemas):
        return {}
    types: list[Any] = []
    for schema in schemas:
        kind = schema.get("type")
        if len(schema) != 1 or kind is None:
            return {"anyOf": schemas}
        for item in kind if isinstance(kind, list) else [kind]:
            if item not in types:
                types.append(item)
    return {"type": types[0] if len(types) == 1 else types}


def _literal_value(node: Tree) -> Any:
    if node["kind"] in ("string", "number"):
        return node["value"]
    if node["kind"] == "name" and node["name"] in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node["name"]]
    raise ValueError("Literal of something other than a str, int, bool or None")


def _to_schema(node: Tree, unknown: list[str]) -> dict[str, Any]:
    """The JSON schema of an annotation's parse tree; names with no JSON form go to `unknown`."""
    kind = node["kind"]
    if kind == "string":  # a forward reference: "list[int]"
        return annotation_schema(node["value"], unknown)
    if kind == "union":
        return _merge([_to_schema(member, unknown) for member in node["members"]])
    if kind != "name":
        unknown.append(kind)
        return {}
    head: str = node["name"]
    args: list[Tree] = node["args"] or []
    if head in SCALARS and not args:
        return dict(SCALARS[head])
    if head in ("bytes", "bytearray"):
        return {"type": "string"}
    if head == "Optional" and len(args) == 1:
        return _merge([_to_schema(args[0], unknown), {"type": "null"}])
    if head == "Union" and args:
        return _merge([_to_schema(arg, unknown) for arg in args])
    if head == "Literal" and args:
        try:
            return {"enum": [_literal_value(arg) for arg in args]}
        except ValueError:
            unknown.append(head)
            return {}
    if head in WRAPPERS and args:
        return _to_schema(args[0], unknown)
    if head in ARRAYS or head in SETS:
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _to_schema(args[0], unknown)
        if head in SETS:
            schema["uniqueItems"] = True
        return schema
    if head in ("tuple", "Tuple"):
        return _tuple_schema(args, unknown)
    if head in MAPPINGS:
        schema = {"type": "object"}
        if len(args) == 2:
            key = _to_schema(args[0], unknown)
            if key.get("type") == "integer":
                schema["propertyNames"] = {"pattern": "^-?[0-9]+$"}  # JSON keys are strings
            schema["additionalProperties"] = _to_schema(args[1], unknown)
        return schema
    unknown.append(head)
    return {}


def _tuple_schema(args: list[Tree], unknown: list[str]) -> dict[str, Any]:
    if len(args) == 2 and args[1]["kind"] == "ellipsis":
        return {"type": "array", "items": _to_schema(args[0], unknown)}
    if len(args) == 1 and args[0]["kind"] == "list" and not args[0]["items"]:
        return {"type": "array", "maxItems": 0}  # tuple[()]
    if not args:
        return {"type": "array"}
    return {
        "type": "array",
        "prefixItems": [_to_schema(arg, unknown) for arg in args],
        "items": False,
        "minItems": len(args),
    }


def validate_json(value: object, schema: dict[str, Any]) -> list[str]:
    """`value` against a JSON schema (Draft 2020-12) with the jsonschema library: one
    `path: message` per error, [] when it is valid."""
    try:
        validator = jsonschema.Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(value), key=lambda error: list(error.path))
    except jsonschema.SchemaError as exc:
        raise ValueError(f"validate_json: not a valid schema: {exc.message}") from None
    return [
        f"{'.'.join(str(part) for part in error.absolute_path) or 'value'}: {error.message}"
        for error in errors
    ]
