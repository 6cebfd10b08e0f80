"""The installed wheel carries the bundled agents: `remora analyze` works outside a checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from remora.models.scripted.server import CallEveryTool, ScriptedModelServer

REPO = Path(__file__).parent.parent


def test_wheel_finds_the_bundled_agents(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(wheels),
            str(REPO),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("remora-*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--quiet",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    assert (target / "remora" / "bundled_agents" / "lint" / "agent.yaml").is_file()
    demo = tmp_path / "demo"
    shutil.copytree(REPO / "examples" / "demo", demo)
    # The wheel's package comes first on the path, ahead of the checkout's editable install.
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run(
        [sys.executable, "-c", "import remora; print(remora.__file__)"],
        cwd=demo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(target))
    listed = subprocess.run(
        [sys.executable, "-m", "remora", "list-agents", "--format", "json"],
        cwd=demo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    agents = {row["name"]: row for row in json.loads(listed.stdout)}
    assert "lint" in agents and agents["lint"]["bundled"]
    assert agents["lint"]["definition"].startswith(str(target))
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "remora",
                "analyze",
                ".",
                "--agents",
                "lint",
                "--format",
                "json",
                "--no-cache",
                "--base-url",
                server.base_url,
            ],
            cwd=demo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["findings"] == 6
