"""`remora server` in an editor: how soon diagnostics come, and what an idle server holds.

    python bench/editor.py            # a module of 20 functions, L = 50 ms
    python bench/editor.py --quick    # 3 functions, L = 10 ms: checks that it runs

A real LSP client (pygls's) starts `python -m remora server` over stdio in a generated project
whose agent has one sandboxed tool that reports one finding per function (its message quotes
the function's last line), against the benchmarks' scripted model server (bench/_common.py) at
latency L: a job is 2 model turns. Measured:

1. the server's memory once initialised, before any file (RSS and PSS, from /proc);
2. a module opened with an empty cache: time to all its diagnostics;
3. the module closed and opened again: time to all its diagnostics, all from the cache;
4. one function edited and saved: time to the first diagnostics (the other functions, from
   the cache) and to the edited function's new diagnostic, and the model requests it took;
5. the server's memory again, idle after those runs.

Goals (ours; the issue asks for the figures): cached diagnostics within 0.3 s of the open or
the save; the edited function's within 2 turns x L + 0.5 s; only its 2 requests reach the
model; an idle server under 150 MB RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    PYTHON,
    BenchError,
    ModelServer,
    Report,
    common_arguments,
    fmt_s,
    workdir,
    write_project,
)
from lsprotocol import types
from pygls.lsp.client import LanguageClient

TOOL = """\
# /// remora-tool
# description = "Report the function."
# ///
last = node["text"].strip().split("\\n")[-1].strip()
finding = {"rule": "B001", "message": node["name"] + ": " + last, "line": node["start_line"]}
{"findings": [finding], "outcome": "done", "summary": "checked"}
"""
AGENT = """\
name: edit
description: One tool that reports each function.
node_types: [function]
max_turns: 2
system_prompt: Call the tool, then submit_result.
node_context: "Inspect {{ node.qualified_name }}."
done_when: [done]
tools:
  - script: tools/report.pym
submit_result:
  inputs:
    summary: {type: string, description: One sentence.}
"""


def write_agent_and_config(project: Path) -> None:
    folder = project / "agents" / "edit"  # the project's own agent: inside it
    (folder / "tools").mkdir(parents=True)
    (folder / "tools" / "report.pym").write_text(TOOL)
    (folder / "agent.yaml").write_text(AGENT)
    (project / "remora.yaml").write_text(
        "server:\n  retries: 0\n  timeout: 300\n"
        f"agents:\n  edit: {{definition: {folder / 'agent.yaml'}}}\n"
    )


def memory(pid: int) -> dict[str, float]:
    """RSS and PSS in MB (PSS shares the interpreter's pages fairly with other processes)."""
    fields = {}
    for name, path in (("rss_mb", "status"), ("pss_mb", "smaps_rollup")):
        key = "VmRSS:" if name == "rss_mb" else "Pss:"
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(key):
                fields[name] = round(int(line.split()[1]) / 1024, 1)
    return fields


class Session:
    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.published: list[tuple[float, list[types.Diagnostic]]] = []

    def messages(self) -> list[str]:
        return (
            sorted(d.message.split("\n")[0] for d in self.published[-1][1])
            if self.published
            else []
        )

    async def until(self, condition: Any, within: float = 120) -> float:
        deadline = time.perf_counter() + within
        while not condition():
            if time.perf_counter() > deadline:
                raise BenchError(f"timed out; last diagnostics: {self.messages()}")
            await asyncio.sleep(0.002)
        return time.perf_counter()


async def scenario(project: Path, server: ModelServer, functions: int) -> dict[str, Any]:
    client = LanguageClient("remora-bench", "1")
    session = Session(client)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        session.published.append((time.perf_counter(), list(params.diagnostics)))

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_message(params: types.ShowMessageParams) -> None:
        print(f"server says: {params.message}", file=sys.stderr)

    log = project.parent / "server.log"
    await client.start_io(
        PYTHON, "-m", "remora", "server", "--base-url", server.base_url, "--agents", "edit",
        "--debounce", "0", "--log-file", str(log), cwd=str(project),
    )  # fmt: skip
    process = client._server
    assert process is not None
    await client.initialize_async(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=project.as_uri())
    )
    client.initialized(types.InitializedParams())
    await asyncio.sleep(1.0)
    data: dict[str, Any] = {"memory_initialised": memory(process.pid)}
    module = project / "pkg" / "mod00000.py"
    uri = module.as_uri()
    expected = sorted(f"f{i}: return x + {i}" for i in range(functions))

    def opened() -> float:
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri, "python", 1, module.read_text())
            )
        )
        return time.perf_counter()

    server.reset()
    start = opened()
    done = await session.until(lambda: session.messages() == expected)
    data["cold_open"] = {"all_s": done - start, "model_requests": server.stats()["chat_requests"]}

    client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
    )
    await session.until(lambda: session.published and not session.published[-1][1])
    server.reset()
    start = opened()
    done = await session.until(lambda: session.messages() == expected)
    data["cached_open"] = {"all_s": done - start, "model_requests": server.stats()["chat_requests"]}

    server.reset()
    edited = module.read_text().replace("return x + 1\n", "return x - 1\n")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=2, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text=edited)],
        )
    )
    module.write_text(edited)
    saved = time.perf_counter()
    before = len(session.published)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri))
    )
    first = await session.until(lambda: len(session.published) > before)
    changed = await session.until(lambda: "f1: return x - 1" in session.messages())
    data["save_one_changed"] = {
        "first_diagnostics_s": first - saved,
        "first_count": len(session.published[before][1]),
        "changed_node_s": changed - saved,
        "model_requests": server.stats()["chat_requests"],
    }
    await asyncio.sleep(2.0)
    data["memory_idle_after_runs"] = memory(process.pid)
    await client.shutdown_async(None)
    client.exit(None)
    await asyncio.wait_for(client.stop(), 30)
    data["exit_code"] = process.returncode
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--latency-ms", type=float, help="L (default 50; 10 with --quick)")
    args = parser.parse_args()
    latency = (args.latency_ms or (10 if args.quick else 50)) / 1000
    functions = 3 if args.quick else 20
    report = Report("editor", args)
    report.data["size"] = {"functions": functions, "turns_per_job": 2, "latency_s": latency}
    try:
        with workdir("editor") as work, ModelServer(latency) as server:
            project = write_project(work / "project", functions=functions)
            write_agent_and_config(project)
            data = asyncio.run(scenario(project, server, functions))
    except BenchError as exc:
        report.data["error"] = str(exc)
        report.verdict("editor diagnostics", False, f"could not run: {exc}")
        report.save()
        return
    report.data.update(data)
    cached, save = data["cached_open"], data["save_one_changed"]
    print(
        f"cold open: {functions} functions' diagnostics in {fmt_s(data['cold_open']['all_s'])} "
        f"({data['cold_open']['model_requests']} model requests)"
    )
    report.verdict(
        "open with a warm cache: every diagnostic at once, no model request",
        cached["all_s"] <= 0.3 and cached["model_requests"] == 0,
        f"{fmt_s(cached['all_s'])}, {cached['model_requests']} model requests",
    )
    report.verdict(
        "save after editing one function: the others' diagnostics at once",
        save["first_diagnostics_s"] <= 0.3 and save["first_count"] == functions - 1,
        f"{fmt_s(save['first_diagnostics_s'])} ({save['first_count']} diagnostics)",
    )
    bound = 2 * latency + 0.5
    report.verdict(
        "the edited function's diagnostic within 2 turns x L + 0.5 s, 2 model requests",
        save["changed_node_s"] <= bound and save["model_requests"] == 2,
        f"{fmt_s(save['changed_node_s'])} (bound {fmt_s(bound)}), "
        f"{save['model_requests']} model requests",
    )
    idle = data["memory_idle_after_runs"]
    report.verdict(
        "an idle server holds under 150 MB",
        idle["rss_mb"] <= 150,
        f"RSS {data['memory_initialised']['rss_mb']} MB initialised, {idle['rss_mb']} MB "
        f"after the runs (PSS {idle['pss_mb']} MB)",
    )
    report.save()


if __name__ == "__main__":
    main()
    sys.exit(0)
