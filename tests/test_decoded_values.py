"""Text in the format a standard decoder reads: a parameter that reaches `base64.b32decode`,
`json.loads` and the like (directly, through a local made of it, or through the attribute the
constructor stores it in, decoded by another method) is given text that decoder accepts, so a
class built on a secret is built at all. Written on modules made for these tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from remora.tool_library.decoded_values import decoded_shapes
from tests.test_call_exploration import analyze, make_project, passes_under_pytest, written

TOKENS = """import base64
import hashlib
import hmac
import json


class Token:
    def __init__(self, secret: str, digest=hashlib.sha256):
        self.secret = secret
        self.digest = digest
        self.key()

    def key(self) -> bytes:
        text = self.secret.upper()
        data = base64.b32decode(text)
        if len(data) < 16:
            raise ValueError("a key holds 128 bits at least")
        return data

    def sign(self, message: bytes) -> str:
        return hmac.new(self.key(), message, self.digest).hexdigest()[:8]


def settings(text: str) -> dict:
    loaded = json.loads(text)
    if not isinstance(loaded, dict):
        raise ValueError("settings are an object")
    return loaded
"""


def test_a_secret_a_method_decodes_builds_the_instance_and_a_function_reads_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, {"tokens": TOKENS})
    results = analyze(project, "pkg/tokens.py", capsys, monkeypatch)
    text = written(results["Token.sign"], "tests/test_tokens_Token_sign.py", project)
    # Built on a base32 secret of 160 bits; the digest, a function of hashlib, is left at its
    # default (an `Any` without annotation got `3`, and every signature raised TypeError).
    assert "Token('GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ')" in text, text
    assert "digest=" not in text, text
    assert "TypeError" not in text, text
    text = written(results["settings"], "tests/test_tokens_settings.py", project)
    assert "{'a': 1, 'b': [True, None]}" in text, text  # an object read, not only refused
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_what_reaches_a_decoder_through_an_import_a_local_or_an_attribute() -> None:
    module = ast.parse(
        "from base64 import b32decode as decode\n"
        "from datetime import date\n"
        "class Key:\n"
        "    def __init__(self, s, when, label):\n"
        "        self.secret = s\n"
        "        self.day = date.fromisoformat(when)\n"
        "        self.label = label\n"
        "    def raw(self):\n"
        "        padded = self.secret + '=' * (-len(self.secret) % 8)\n"
        "        return decode(padded, casefold=True)\n"
        "    def mixed(self, other):\n"
        "        return decode(self.label + other)\n"  # two inputs: neither is the text alone
    )
    owner = module.body[2]
    assert isinstance(owner, ast.ClassDef)
    init = owner.body[0]
    assert isinstance(init, ast.FunctionDef)
    imports = {"decode": "base64.b32decode", "date": "datetime.date"}
    found = decoded_shapes(init, owner, imports)
    assert found["s"][0] == "'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ'"
    assert found["when"][0] == "'2024-01-15'"
    assert "label" not in found
    assert decoded_shapes(init, None, {}) == {}  # `date` of no known module, and no methods
