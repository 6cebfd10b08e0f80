"""The embedded engine on real code: the docstring and test agents on the test-quality corpus,
what the engine evaluated, reused and generated, beside llama-cpp-python's plain `Llama` given
the same completion prompts one at a time.

    python bench/engine_on_corpus.py                         # inflection, ordered_set: ~8 min
    python bench/engine_on_corpus.py --before 1da2de2        # and the engine of that commit
    python bench/engine_on_corpus.py --quick                 # toposort, test agent only

For each library (a copy of bench/corpus/test_quality/<library>), `remora analyze <package>
--agents docstring,test --engine local --record DIR` runs once: its wall time, its requests, and
the JSON report's `summary.engine` (prompt tokens counted, evaluated and reused, tokens
generated, seconds spent on each). With `--before COMMIT`, the same command runs with Remora's
code from that commit (a git worktree, on this environment's packages), and the files the two
runs would write are compared: the same outputs, or the difference is reported.

The baseline replays every completion the run recorded (the prompts the agents' tools sent)
through `llama_cpp.Llama` on the same GGUF file, 2048-token context, one prompt at a time, in
the order recorded per job (which favours its cache: `Llama` reuses the longest common prefix
with the previous prompt only), generating as many tokens as the engine did for that prompt,
greedily. Chat turns (a few per run: most jobs end on their tools' observations) and score
requests are not replayed.

Goals (issue "Real code at the machine's limit"): at most 25 % of the counted prompt tokens
evaluated; half the wall time of the engine before (with `--before`), with the same outputs.
Aggregate generation (goal: 1.5x the single-sequence baseline), on the same prompts, each
replayed after the run on an otherwise idle machine: the engine (a fresh `LocalChatModel`) gets
each job's consecutive completions of one prompt as one drafts request (temperatures 0, 0.7,
1.0, ...; one batch of two to four rows, as the agents ask), generating as many tokens per row
as the longest recorded reply; `Llama` gets every completion alone, generating as many tokens as
its recorded reply. Tokens generated per second of decoding: the engine's own counter (Python's
sampling included), `Llama`'s from llama.cpp's performance counters (decoding only). The
engine's counters during the analysis itself are reported too: there its decoding shares the
cores with the jobs' tools.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, REPO, Report, common_arguments, workdir

CORPUS = REPO / "bench" / "corpus" / "test_quality"
PACKAGES = {
    "inflection": "inflection",
    "ordered_set": "ordered_set",
    "jsonpointer": "jsonpointer.py",
    "toposort": "toposort.py",
}
EVALUATED_GOAL = 0.25
RUN_TIMEOUT_S = 1800
ENVIRONMENT = dict(os.environ)
"""The runs' environment, taken before this process loads the engine (which sets OpenMP's
variables for itself): each run, the engine before included, sets its own."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument(
        "--libraries", default=None, help="comma-separated, of " + ", ".join(PACKAGES)
    )
    parser.add_argument("--agents", default=None, help="default docstring,test (--quick: test)")
    parser.add_argument("--before", metavar="COMMIT", help="also run Remora's code of COMMIT")
    args = parser.parse_args()
    report = Report("engine_on_corpus", args)
    libraries = args.libraries or ("toposort" if args.quick else "inflection,ordered_set")
    agents = args.agents or ("test" if args.quick else "docstring,test")
    report.data["settings"] = {"libraries": libraries, "agents": agents, "before": args.before}
    rows: dict[str, Any] = {}
    with workdir("engine-on-corpus") as folder, worktree(folder, args.before) as before_code:
        for library in libraries.split(","):
            row: dict[str, Any] = {}
            now = analyze(folder / "now" / library, library, agents, None)
            row["now"] = {key: value for key, value in now.items() if key != "changes"}
            row["baseline"] = replay(now["transcripts"], now["model_path"])
            row["engine_replay"] = replay_engine(now["transcripts"], now["model_path"])
            if before_code is not None:
                before = analyze(folder / "before" / library, library, agents, before_code)
                row["before"] = {key: value for key, value in before.items() if key != "changes"}
                row["same_outputs"] = now["changes"] == before["changes"]
                row["differing_files"] = sorted(
                    set(now["changes"].items()) ^ set(before["changes"].items())
                )
            rows[library] = row
            print(library, json.dumps(summary_line(row)), flush=True)
    report.data["libraries"] = rows
    verdicts(report, rows)
    report.save()
    return 0


@contextlib.contextmanager
def worktree(folder: Path, commit: str | None) -> Iterator[Path | None]:
    """Remora's code at `commit` checked out beside this one (run on this environment's
    packages), removed afterwards; None without a commit."""
    if commit is None:
        yield None
        return
    path = folder / "before-code"
    git = ["git", "-C", str(REPO), "worktree"]
    subprocess.run([*git, "add", "--detach", str(path), commit], check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run([*git, "remove", "--force", str(path)], check=False, capture_output=True)


def analyze(project: Path, library: str, agents: str, code: Path | None) -> dict[str, Any]:
    shutil.copytree(CORPUS / library, project, ignore=shutil.ignore_patterns("tests"))
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    record = project.parent / f".transcripts-{library}"
    shutil.rmtree(record, ignore_errors=True)
    env = ENVIRONMENT if code is None else {**ENVIRONMENT, "PYTHONPATH": str(code)}
    command = [
        PYTHON, "-m", "remora", "analyze", PACKAGES[library], "--agents", agents,
        "--engine", "local", "--no-cache", "--format", "json", "--output", "report.json",
        "--diff", "--record", str(record),
    ]  # fmt: skip
    started = time.perf_counter()
    ran = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    wall = time.perf_counter() - started
    if ran.returncode not in (0, 1):
        raise SystemExit(f"remora analyze failed ({ran.returncode}): {ran.stderr[-2000:]}")
    report = json.loads((project / "report.json").read_text())
    changes = {
        change["file"]: change["diff"]
        for result in report["results"]
        if result["status"] == "success"
        for change in result["changes"]
    }
    requests = sum(result["usage"]["requests"] for result in report["results"])
    model_line = next((line for line in ran.stderr.splitlines() if ".gguf" in line), "")
    return {
        "wall_s": round(wall, 1),
        "jobs": len(report["results"]),
        "requests": requests,
        "engine": report["summary"].get("engine"),
        "agents": report["summary"]["agents"],
        "changes": changes,
        "transcripts": str(record),
        "model_path": model_path(model_line),
    }


def model_path(line: str) -> str:
    """The GGUF file the run loaded, from its stderr line naming it."""
    for word in line.replace(",", " ").split():
        if word.endswith(".gguf") and Path(word).exists():
            return word
    from remora.config.settings import LocalSettings
    from remora.models.local.resolve import open_local_model

    model, _ = open_local_model(LocalSettings())
    return str(model.path)


def completion_groups(transcripts: str) -> list[list[tuple[str, str]]]:
    """Each job's completions (prompt, reply), consecutive ones of one prompt grouped: the
    drafts the agents ask for at once (at most 4)."""
    groups: list[list[tuple[str, str]]] = []
    for file in sorted(Path(transcripts).glob("*.jsonl")):
        for line in file.read_text().splitlines():
            previous = None
            for turn in json.loads(line)["turns"]:
                if turn["kind"] != "completion":
                    previous = None
                    continue
                if turn["prompt"] == previous and len(groups[-1]) < 4:
                    groups[-1].append((turn["prompt"], turn["reply"]))
                else:
                    groups.append([(turn["prompt"], turn["reply"])])
                previous = turn["prompt"]
    return groups


def replay_engine(transcripts: str, path: str) -> dict[str, Any]:
    """The recorded completions through the embedded engine, as drafts requests."""
    import anyio
    import llama_cpp

    from remora.models.local.model import LocalChatModel
    from remora.protocol.completion import DraftsRequest

    tokenize = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False).tokenize
    engine = LocalChatModel(Path(path))
    engine.load_sync()

    def length(text: str) -> int:
        return max(1, len(tokenize(text.encode(), add_bos=False, special=True)))

    async def run() -> None:
        for group in completion_groups(transcripts):
            prompt = group[0][0]
            if len(tokenize(b"<bos>" + prompt.encode(), add_bos=False, special=True)) >= 1800:
                continue
            request = DraftsRequest(
                prompt=prompt,
                max_tokens=min(256, max(length(reply) for _, reply in group)),
                temperatures=[0.0, 0.7, 1.0, 1.0][: len(group)],
            )
            await engine.complete_drafts(model="replay", request=request)

    anyio.run(run)
    usage = engine.usage()
    engine.close()
    return {
        "requests": usage.requests,
        "prompt_tokens": usage.prompt_tokens,
        "prompt_tokens_evaluated": usage.prompt_tokens_evaluated,
        "completion_tokens": usage.completion_tokens,
        "decode_s": usage.completion_seconds,
        "generated_per_second": round(usage.completion_tokens / usage.completion_seconds, 1)
        if usage.completion_seconds
        else 0.0,
    }


def replay(transcripts: str, path: str) -> dict[str, Any]:
    """The recorded completions through plain `llama_cpp.Llama`, one at a time."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=path, n_ctx=2048, n_threads=2, verbose=False, seed=0)
    llama_cpp.llama_perf_context_reset(llm.ctx)
    prompts: list[tuple[str, str]] = []
    for file in sorted(Path(transcripts).glob("*.jsonl")):
        for line in file.read_text().splitlines():
            for turn in json.loads(line)["turns"]:
                if turn["kind"] == "completion":
                    prompts.append((turn["prompt"], turn["reply"]))
    counted = evaluated = generated = 0
    previous: list[int] = []
    started = time.perf_counter()
    for prompt, reply in prompts:
        tokens = llm.tokenize(b"<bos>" + prompt.encode(), add_bos=False, special=True)
        if len(tokens) >= 2000:
            continue
        wanted = max(1, len(llm.tokenize(reply.encode(), add_bos=False, special=True)))
        shared = next(
            (i for i, (a, b) in enumerate(zip(previous, tokens, strict=False)) if a != b),
            min(len(previous), len(tokens)),
        )
        out = llm.create_completion(
            tokens, max_tokens=min(wanted, 2040 - len(tokens)), temperature=0.0
        )
        counted += len(tokens)
        evaluated += len(tokens) - min(shared, len(tokens) - 1)
        generated += int(out["usage"]["completion_tokens"])
        previous = tokens
    seconds = time.perf_counter() - started
    perf = llama_cpp.llama_perf_context(llm.ctx)
    llm.close()
    return {
        "requests": len(prompts),
        "prompt_tokens": counted,
        "prompt_tokens_evaluated": evaluated,
        "completion_tokens": generated,
        "seconds": round(seconds, 1),
        "decode_s": round(perf.t_eval_ms / 1000, 2),
        "decoded_tokens": int(perf.n_eval),
        "generated_per_second": round(generated / seconds, 1) if seconds else 0.0,
    }


def summary_line(row: dict[str, Any]) -> dict[str, Any]:
    engine = row["now"]["engine"] or {}
    line = {
        "wall_s": row["now"]["wall_s"],
        "requests": row["now"]["requests"],
        "evaluated": f"{engine.get('prompt_tokens_evaluated')} of {engine.get('prompt_tokens')}",
        "baseline": row["baseline"],
    }
    if "before" in row:
        line["before_wall_s"] = row["before"]["wall_s"]
        line["same_outputs"] = row["same_outputs"]
    return line


def verdicts(report: Report, rows: dict[str, Any]) -> None:
    engines = [row["now"]["engine"] or {} for row in rows.values()]
    counted = sum(engine.get("prompt_tokens", 0) for engine in engines)
    evaluated = sum(engine.get("prompt_tokens_evaluated", 0) for engine in engines)
    share = evaluated / counted if counted else 1.0
    report.verdict(
        f"prompt tokens evaluated <= {EVALUATED_GOAL:.0%} of those counted",
        share <= EVALUATED_GOAL,
        f"{share:.0%} ({evaluated:,} of {counted:,}); per library: "
        + ", ".join(
            f"{name} {(row['now']['engine'] or {}).get('prompt_tokens_evaluated', 0):,} of "
            f"{(row['now']['engine'] or {}).get('prompt_tokens', 0):,}"
            for name, row in rows.items()
        ),
    )
    generated = sum(row["engine_replay"]["completion_tokens"] for row in rows.values())
    decoding = sum(row["engine_replay"]["decode_s"] for row in rows.values())
    rate = generated / max(decoding, 1e-9)
    base_decoded = sum(row["baseline"]["decoded_tokens"] for row in rows.values())
    base_decoding = sum(row["baseline"]["decode_s"] for row in rows.values())
    base_rate = base_decoded / max(base_decoding, 1e-9)
    during = sum(engine.get("completion_tokens", 0) for engine in engines)
    during_s = sum(engine.get("completion_seconds", 0.0) for engine in engines)
    report.verdict(
        "aggregate generation >= 1.5x the single-sequence baseline",
        rate >= 1.5 * base_rate,
        f"on the same prompts: engine {generated:,} tokens in {decoding:.1f} s of decoding "
        f"({rate:.1f}/s); `Llama`, one sequence at a time, {base_decoded:,} tokens in "
        f"{base_decoding:.1f} s ({base_rate:.1f}/s): {rate / max(base_rate, 1e-9):.2f}x. "
        f"During the analysis (tools sharing the cores): {during:,} tokens in {during_s:.1f} s "
        f"({during / max(during_s, 1e-9):.1f}/s)",
    )
    if all("before" in row for row in rows.values()):
        now_wall = sum(row["now"]["wall_s"] for row in rows.values())
        before_wall = sum(row["before"]["wall_s"] for row in rows.values())
        same = all(row["same_outputs"] for row in rows.values())
        report.verdict(
            "half the wall time of the engine before, with the same outputs",
            now_wall <= before_wall / 2 and same,
            f"{now_wall:.0f} s vs {before_wall:.0f} s ({now_wall / before_wall:.0%}); same "
            f"outputs: {same}",
        )


if __name__ == "__main__":
    sys.exit(main())
