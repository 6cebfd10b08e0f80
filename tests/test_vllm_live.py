"""Against a real model server: opt-in, skipped unless `REMORA_TEST_BASE_URL` is set.

Environment:

- `REMORA_TEST_BASE_URL` (required to run): the server's OpenAI-compatible URL, e.g.
  `http://127.0.0.1:8000/v1` for vLLM started with `server/entrypoint.sh`.
- `REMORA_TEST_MODEL` (optional): the served model name; default Remora's `server.model`
  (`google/functiongemma-270m-it`).
- `REMORA_TEST_API_KEY` (optional): the server's `REMORA_API_KEY`, if it requires one.

    REMORA_TEST_BASE_URL=http://127.0.0.1:8000/v1 python -m pytest tests/test_vllm_live.py -v

The checks: `check_server` finds no problem (models listed, every tool-call probe answered with a
structured call), and `remora analyze examples/demo` with the bundled agents ends every job in
`success` or `failed` (a model may fail a job; none may error) with a well-formed JSON report.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from remora.config.settings import ModelProfileName, ServerSettings
from remora.models.http.server_check import CheckReport, check_server, render_text

BASE_URL = os.environ.get("REMORA_TEST_BASE_URL", "")
MODEL = os.environ.get("REMORA_TEST_MODEL") or ServerSettings().model
API_KEY = os.environ.get("REMORA_TEST_API_KEY") or "EMPTY"
REPOSITORY = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not BASE_URL,
        reason="needs a real model server: set REMORA_TEST_BASE_URL (e.g. "
        "http://127.0.0.1:8000/v1, see docs/SERVER_SETUP.md)",
    ),
]


def run_check() -> CheckReport:
    return anyio.run(
        functools.partial(
            check_server,
            [BASE_URL],
            api_key=API_KEY,
            agent_models={"default": MODEL},
            request_timeout=60,
        )
    )


def test_check_server_finds_no_problem() -> None:
    report = run_check()
    assert report.ok, render_text(report)
    assert report.profile is not None


def test_analyze_the_demo_with_the_bundled_agents() -> None:
    report = run_check()
    command = [
        sys.executable,
        "-m",
        "remora",
        "analyze",
        "examples/demo",
        "--format",
        "json",
        "--base-url",
        BASE_URL,
        "--model",
        MODEL,
        "--no-cache",
    ]
    known_profiles = {profile.value for profile in ModelProfileName}
    if report.profile in known_profiles:  # the profile this server's behaviour calls for
        command += ["-c", f"runner.model_profile={report.profile}"]
    environment = {**os.environ, "REMORA_SERVER__API_KEY": API_KEY}
    done = subprocess.run(
        command,
        cwd=REPOSITORY,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-4000:]
    document = json.loads(done.stdout)
    assert set(document) >= {"version", "summary", "results"}
    results = document["results"]
    assert results, "the demo project should give jobs to the bundled agents"
    for result in results:
        assert {"node", "agent", "status", "findings", "turns"} <= set(result)
        assert result["status"] in ("success", "failed"), (result["agent"], result["error"])
        assert isinstance(result["findings"], list)
        assert result["turns"] >= 1
        for finding in result["findings"]:
            assert {"rule", "message", "file", "line"} <= set(finding)
    summary = document["summary"]
    assert summary["error"] == 0
    assert summary["jobs"] == len(results) == summary["success"] + summary["failed"]
