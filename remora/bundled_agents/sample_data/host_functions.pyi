# The sample_data agent's own host functions (host.py), beside the shared ones.
from typing import Any

# A function's arguments as JSON (the node's signature; annotations read, never evaluated).
def arguments_schema() -> dict[str, Any]:
    """schema: the JSON schema (Draft 2020-12) of the node's arguments as one object (int,
    float, str, bool, None, list/set/tuple/dict, unions, Literal; a default makes a parameter
    optional; no annotation or no JSON form accepts any value); findings: SMP100/SMP101 for
    the parameters it cannot check."""

def describe_schema(schema: dict[str, Any]) -> str:
    """A short type name for a schema: "number", "list of integer", "one of 'a', 'b'"."""
