"""Text in the format a standard decoder reads, for the inputs that reach one.

pyotp's `OTP(s)` stores `s` as `self.secret`, and every method decodes it with
`base64.b32decode(secret)` after checking it holds 112 bits: `'abc'` and `'Hello world'` never
build an instance, so no method of the class was tested. The decoder says what valid input
looks like as plainly as a regular expression does (pattern_values). A parameter that reaches
one (directly, through a local made of it alone, or through the attribute its constructor
stores it in, read by any method of the class) is given text that decoder reads, the ordinary
value first: the RFC 4226 test secret for base32 (160 bits, as a one-time password wants),
`'Hello world'` encoded, a JSON object, an address, a date.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from remora.tool_library.value_flow import inputs, origins, stored_attributes

HELLO_HEX = "48656c6c6f20776f726c64"
DECODERS: dict[str, list[str]] = {
    "base64.b32decode": ["'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ'", "'MFRGG==='"],
    "base64.b64decode": ["'SGVsbG8gd29ybGQ='", "'YWJj'"],
    "base64.standard_b64decode": ["'SGVsbG8gd29ybGQ='", "'YWJj'"],
    "base64.urlsafe_b64decode": ["'SGVsbG8gd29ybGQ='", "'YWJj'"],
    "base64.b16decode": [repr(HELLO_HEX.upper()), "'616263'"],
    "binascii.unhexlify": [repr(HELLO_HEX), "'616263'"],
    "binascii.a2b_hex": [repr(HELLO_HEX), "'616263'"],
    "bytes.fromhex": [repr(HELLO_HEX), "'61 62 63'"],
    "json.loads": ["'{\"a\": 1, \"b\": [true, null]}'", "'[1, 2.5, \"x\"]'"],
    "urllib.parse.urlparse": ["'https://example.com/a/b?q=1#top'", "'/a/b'"],
    "urllib.parse.urlsplit": ["'https://example.com/a/b?q=1#top'", "'/a/b'"],
    "ipaddress.ip_address": ["'192.168.0.1'", "'::1'"],
    "ipaddress.ip_network": ["'192.168.0.0/24'", "'2001:db8::/32'"],
    "ipaddress.ip_interface": ["'192.168.0.1/24'", "'::1/128'"],
    "datetime.datetime.fromisoformat": ["'2024-01-15T10:30:00'", "'2000-02-29'"],
    "datetime.date.fromisoformat": ["'2024-01-15'", "'2000-02-29'"],
    "datetime.time.fromisoformat": ["'10:30:00'", "'23:59:59.5'"],
    "uuid.UUID": ["'12345678-1234-5678-1234-567812345678'", "'{12345678123456781234567812345678}'"],
}  # fmt: skip
"""Texts each decoder reads, by its dotted name, the most ordinary first."""


def decoder(call: ast.Call, imports: Mapping[str, str]) -> str:
    """The DECODERS name a call's function stands for (`b32decode` after `from base64 import
    b32decode`, `base64.b32decode`, `bytes.fromhex`), or ""."""
    text = ast.unparse(call.func)
    head, _, rest = text.partition(".")
    dotted = imports.get(head, head) + (f".{rest}" if rest else "")
    return dotted if dotted in DECODERS else ""


def decoded_inputs(definition: ast.FunctionDef, imports: Mapping[str, str]) -> dict[str, str]:
    """The inputs of `definition` (parameters, and attributes of `self` as `self.name`) whose
    text reaches a decoder's first argument alone, with that decoder."""
    made_of = origins(definition, attributes=True)
    found: dict[str, str] = {}
    for node in ast.walk(definition):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        used = decoder(node, imports)
        roots = inputs(node.args[0], made_of, attributes=True) if used else set()
        if len(roots) == 1:
            found.setdefault(roots.pop(), used)
    return found


def decoded_shapes(
    definition: ast.FunctionDef, owner: ast.ClassDef | None, imports: Mapping[str, str]
) -> dict[str, list[str]]:
    """Each parameter of `definition` that reaches a decoder, with texts it reads; a parameter
    stored as an attribute (`self.secret = s`) reaches what any method of `owner` decodes."""
    read = decoded_inputs(definition, imports)
    methods = [n for n in owner.body if isinstance(n, ast.FunctionDef)] if owner else []
    for method in methods:
        for name, used in decoded_inputs(method, imports).items():
            if name.startswith("self."):  # what another method decodes of the instance
                read.setdefault(name, used)
    stored = {f"self.{name}": value for name, value in stored_attributes(definition).items()}
    found: dict[str, list[str]] = {}
    for name, used in read.items():
        parameter = stored.get(name, name)
        if not parameter.startswith("self."):
            found.setdefault(parameter, DECODERS[used])
    return found
