"""Behaviour unchanged across a refactor: the demo analysed by an earlier commit (checked out in
a git worktree) and by this checkout, against the same scripted server, in every output format
and with --fix, compared byte for byte with durations and times masked.

    python bench/same_reports.py --before REV [--results-dir DIR]

Both sides run the same copy of this checkout's examples/demo at the same path (so paths in the
reports agree), each with a fresh scripted server (CallEveryTool, its default completion), no
cache and one job at a time (`--concurrency 1`: the server's reply ids then follow the same order).
Exit 1 when a report or a fixed file differs.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from remora.models.scripted.server import CallEveryTool, ScriptedModelServer

REPO = Path(__file__).resolve().parent.parent
FORMATS = ("text", "table", "json", "jsonl", "sarif", "github")
MASKS = (
    # Durations and rates: "duration_s": 0.12, "wall_s", "elapsed", "in 1.2 s", "3.4 jobs/s".
    (re.compile(r'("[a-z_]*(?:duration|_s|seconds|elapsed|_ms)"\s*:\s*)-?[0-9.eE+-]+'), r"\g<1>0"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|jobs/s)\b"), "N s"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "TIME"),
)


def masked(text: str) -> str:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def files_of(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".remora_cache" not in path.parts and "__pycache__" not in path.parts
    }


def run_side(code: Path, demo: Path) -> dict[str, str]:
    """Every format's report (masked) and the files after --fix, for the code at `code`."""
    if demo.exists():
        shutil.rmtree(demo)
    shutil.copytree(REPO / "examples" / "demo", demo, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(code), "NO_COLOR": "1", "COLUMNS": "120"}
    outputs: dict[str, str] = {}
    for fmt in (*FORMATS, "fix"):
        extra = ["--fix"] if fmt == "fix" else ["--format", fmt]
        with ScriptedModelServer(rule=CallEveryTool()) as server:
            done = subprocess.run(
                [
                    *(sys.executable, "-m", "remora", "analyze", ".", "--no-cache"),
                    *("--concurrency", "1", "--workers", "1", "--base-url", server.base_url),
                    *extra,
                ],
                cwd=demo,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
        outputs[fmt] = f"exit {done.returncode}\n" + masked(done.stdout)
    outputs["files after --fix"] = json.dumps(files_of(demo), indent=1)
    return outputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--results-dir", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="remora-same-") as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(before), args.before],
            check=True,
        )
        try:
            sides = {
                "before": run_side(before, Path(tmp) / "demo"),
                "after": run_side(REPO, Path(tmp) / "demo"),
            }
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)])
    revision = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    compared = {}
    for name, old in sides["before"].items():
        new = sides["after"][name]
        same = old == new
        compared[name] = {"same": same, "bytes": len(new)}
        print(f"{name:18} {'same' if same else 'DIFFERS'} ({len(new)} bytes)")
        if not same:
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after")
            print("\n".join(list(diff)[:40]))
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / "same_reports.json"
    result = {"before": args.before, "after": revision + "+worktree", "outputs": compared}
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(item["same"] for item in compared.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
