"""`remora analyze` with no server: the embedded engine on the Gemma 3 270M stand-in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli.main import main
from remora.models.local.model import llama_cpp_available

pytestmark = [
    pytest.mark.local_engine,
    pytest.mark.skipif(
        not llama_cpp_available(), reason="needs the embedded engine: pip install 'remora[local]'"
    ),
]


def test_analyze_with_the_embedded_engine_and_its_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "app.py").write_text("import os\n\n\ndef area(w, h):\n    return w * h\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REMORA_SERVER__BASE_URL", raising=False)
    code = main(["analyze", "app.py", "--agents", "lint", "--format", "json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert "Gemma 3 270M" in captured.err  # the chosen model, said once
    assert code == 1
    assert {r["status"] for r in report["results"]} <= {"success", "failed"}
    assert ("F401", 1) in {(f["rule"], f["line"]) for r in report["results"] for f in r["findings"]}
    # The second run is answered from the cache, keyed on the engine's model file.
    assert main(["analyze", "app.py", "--agents", "lint", "--format", "json"]) == 1
    err = capsys.readouterr().err
    if report["summary"]["failed"] == 0:
        assert "1 of 1 jobs answered from the cache" in err
    assert main(["analyze", "app.py", "--agents", "lint", "--engine", "server"]) == 2
    assert "pip install 'remora[local]'" in capsys.readouterr().err
