"""`remora server` end to end: a real LSP client (pygls's) talks over stdio to `python -m remora
server`, which runs agents against the scripted model server in this process.

The scripted model answers the probe agent (conftest): for `shout` it finds the TODO, rewrites
it (a change inside the node) and submits; for `whisper` it finds the TODO and submits. A job's
first request has two messages, the second naming the node ("Inspect <name> in <file>:"), so
the model requests per node are counted from what the server received.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from remora.models.scripted.server import ScriptedModelServer, tool_call
from tests.test_cache_honest import TWO_FUNCTIONS
from tests.test_local_engine import needs_engine

pytestmark = pytest.mark.anyio

FIXED = "handle None or b''"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pygls's client is asyncio


def probe_rule(body: dict[str, Any]) -> Any:
    node = body["messages"][1]["content"].split()[1]
    called = [m["name"] for m in body["messages"] if m["role"] == "tool"]
    if not called:
        return tool_call("find_todos", {})
    if node == "shout" and called == ["find_todos"]:
        return tool_call("replace_text", {"old": "handle None", "new": FIXED})
    return tool_call("submit_result", {"summary": "One TODO.", "todo_count": 1})


def jobs(server: ScriptedModelServer) -> Counter[str]:
    """How many jobs of each node reached the model."""
    return Counter(
        request["messages"][1]["content"].split()[1]
        for request in list(server.requests)
        if len(request["messages"]) == 2
    )


class Editor:
    """What the test sees of the editor's side: diagnostics, messages, progress, by arrival."""

    def __init__(self, client: LanguageClient, process: Callable[[], Any]) -> None:
        self.client = client
        self.process = process
        self.published: list[tuple[float, str, list[types.Diagnostic]]] = []
        self.messages: list[str] = []
        self.progress: list[str] = []

    def latest(self, uri: str) -> list[types.Diagnostic] | None:
        found = [diagnostics for _, at, diagnostics in self.published if at == uri]
        return found[-1] if found else None

    def cleared(self, uri: str) -> bool:
        found = self.latest(uri)
        return found is not None and len(found) == 0

    async def until(self, condition: Callable[[], object], within: float = 20) -> float:
        """Wait for `condition`; returns when it first held (perf_counter)."""
        deadline = time.perf_counter() + within
        while not condition():
            assert time.perf_counter() < deadline, f"timed out: {self.messages} {self.progress}"
            await asyncio.sleep(0.01)
        return time.perf_counter()


@asynccontextmanager
async def editor(project: Path, *flags: str, log: Path) -> AsyncIterator[Editor]:
    client = LanguageClient("remora-tests", "1")
    seen = Editor(client, lambda: client._server)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        seen.published.append((time.perf_counter(), params.uri, params.diagnostics))

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_message(params: types.ShowMessageParams) -> None:
        seen.messages.append(params.message)

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def on_create(params: types.WorkDoneProgressCreateParams) -> None:
        return None

    @client.feature(types.PROGRESS)
    def on_progress(params: types.ProgressParams) -> None:
        value = params.value  # the client does not know the shape: a dict
        seen.progress.append(value["kind"] if isinstance(value, dict) else str(value))

    command = ["-m", "remora", "server", "--debounce", "50", "--log-file", str(log), *flags]
    await client.start_io(sys.executable, *command, cwd=str(project))
    capabilities = types.ClientCapabilities(
        window=types.WindowClientCapabilities(work_done_progress=True),
        workspace=types.WorkspaceClientCapabilities(
            workspace_edit=types.WorkspaceEditClientCapabilities(
                document_changes=True, resource_operations=[types.ResourceOperationKind.Create]
            )
        ),
    )
    await client.initialize_async(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=project.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=project.as_uri(), name="project")],
        )
    )
    client.initialized(types.InitializedParams())
    try:
        yield seen
    finally:
        if client._server is not None and client._server.returncode is None:
            await client.shutdown_async(None)
            client.exit(None)
        await asyncio.wait_for(client.stop(), 20)


def open_file(client: LanguageClient, path: Path, version: int = 1) -> None:
    document = types.TextDocumentItem(path.as_uri(), "python", version, path.read_text())
    client.text_document_did_open(types.DidOpenTextDocumentParams(document))


def save_file(client: LanguageClient, path: Path, text: str, version: int) -> None:
    """The user types the new text, then saves it."""
    uri = path.as_uri()
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    path.write_text(text)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=uri))
    )


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def messages(diagnostics: list[types.Diagnostic] | None) -> list[str]:
    return sorted(diagnostic.message.split("\n")[0] for diagnostic in diagnostics or [])


def apply_edit(edit: types.WorkspaceEdit) -> None:
    """What an editor does with a workspace edit (then saves): here, line-based text edits."""
    for change in edit.document_changes or []:
        assert isinstance(change, types.TextDocumentEdit)
        path = Path.cwd() / Path(change.text_document.uri.removeprefix("file://"))
        lines = path.read_text().splitlines(keepends=True)
        for text_edit in change.edits:
            assert isinstance(text_edit, types.TextEdit)
            start, end = text_edit.range.start, text_edit.range.end
            assert start.character == 0 and end.character == 0  # whole lines
            lines[start.line : end.line] = [text_edit.new_text]
        path.write_text("".join(lines))


async def test_cached_diagnostics_changed_node_only_and_code_actions(
    project: Path, probe_config: Path, tmp_path: Path
) -> None:
    source = project / "pkg" / "shout.py"
    source.write_text(TWO_FUNCTIONS)
    uri = source.as_uri()
    expected = ["# TODO: handle None", "# TODO: handle empty strings"]
    with ScriptedModelServer(rule=probe_rule) as model:
        async with editor(project, "--base-url", model.base_url, log=tmp_path / "log") as ed:
            client = ed.client
            # Opened with an empty cache: both nodes go to the model, with progress shown.
            open_file(client, source)
            await ed.until(lambda: messages(ed.latest(uri)) == expected)
            await ed.until(lambda: "end" in ed.progress, within=3)
            assert jobs(model) == {"shout": 1, "whisper": 1}
            (diagnostic,) = [d for d in ed.latest(uri) or [] if "None" in d.message]
            assert diagnostic.code == "probe/TD001" and diagnostic.source == "remora"
            assert diagnostic.message == "# TODO: handle None\nprobe: 1 TODO comments"
            assert diagnostic.range.start == types.Position(4, 6)
            assert diagnostic.severity == types.DiagnosticSeverity.Warning

            # Closed and opened again: every diagnostic from the cache, no model request.
            client.text_document_did_close(
                types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
            )
            await ed.until(lambda: ed.cleared(uri))
            ed.progress.clear()
            opened = time.perf_counter()
            open_file(client, source)
            shown = await ed.until(lambda: messages(ed.latest(uri)) == expected)
            await asyncio.sleep(0.3)
            assert jobs(model) == {"shout": 1, "whisper": 1} and ed.progress == []
            print(f"\nopen to cached diagnostics: {1000 * (shown - opened):.0f} ms")

            # whisper edited and saved: shout from the cache at once, only whisper asked again.
            edited = TWO_FUNCTIONS.replace("empty strings", "empty or blank strings")
            saved = time.perf_counter()
            save_file(client, source, edited, version=2)
            first = await ed.until(lambda: ed.published[-1][0] > saved)
            changed = await ed.until(
                lambda: "# TODO: handle empty or blank strings" in messages(ed.latest(uri))
            )
            assert jobs(model) == {"shout": 1, "whisper": 2}
            print(f"save to first diagnostics: {1000 * (first - saved):.0f} ms")
            print(f"save to the changed node's diagnostics: {1000 * (changed - saved):.0f} ms")

            # The agent's change to shout is a code action; applied, it changes the file.
            shout = [d for d in ed.latest(uri) or [] if "None" in d.message]
            actions = await client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri),
                    range=types.Range(types.Position(4, 0), types.Position(4, 0)),
                    context=types.CodeActionContext(diagnostics=shout),
                )
            )
            assert actions is not None
            (fix,) = [a for a in actions if isinstance(a, types.CodeAction) and a.edit]
            assert fix.title == "Remora probe: 1 TODO comments" and fix.disabled is None
            assert list(fix.diagnostics or []) == shout
            assert fix.edit is not None
            apply_edit(fix.edit)
            assert source.read_text() == edited.replace("handle None", FIXED)

            # The file changed since the agent read it: the action is refused, with the reason.
            actions = await client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri),
                    range=types.Range(types.Position(4, 0), types.Position(4, 0)),
                    context=types.CodeActionContext(diagnostics=[]),
                )
            )
            assert actions is not None
            (refused,) = [a for a in actions if isinstance(a, types.CodeAction) and a.disabled]
            assert refused.edit is None and refused.disabled is not None
            assert "shout.py changed since the agent read it" in refused.disabled.reason

            # "Run agents on this node": shout, and only shout, asked again (no cache).
            (run,) = [a for a in actions if isinstance(a, types.Command)]
            assert run.title == "Remora: run agents on `shout`"
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(run.command, run.arguments)
            )
            await ed.until(lambda: jobs(model)["shout"] == 2)
            await ed.until(lambda: "end" in ed.progress)
            assert jobs(model) == {"shout": 2, "whisper": 2}
            assert ed.messages == []
        assert ed.process().returncode == 0
    log = (tmp_path / "log").read_text()
    assert "Traceback" not in log


@pytest.mark.parametrize("problem", ["unreachable server", "missing program"])
async def test_a_problem_is_said_once_and_the_editor_is_still_served(
    project: Path, probe_config: Path, probe_agent: Path, tmp_path: Path, problem: str
) -> None:
    source = project / "pkg" / "shout.py"
    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    if problem == "missing program":
        append(probe_agent, "requires:\n  programs: [remora-no-such-tool]\n")
    with ScriptedModelServer(rule=probe_rule) as model:
        url = dead if problem == "unreachable server" else model.base_url
        async with editor(project, "--base-url", url, log=tmp_path / "log") as ed:
            open_file(ed.client, source)
            await ed.until(lambda: ed.messages)
            save_file(ed.client, source, source.read_text() + "\n", version=2)
            await asyncio.sleep(1.5)
            (message,) = ed.messages  # said once, not once per save
            expected = "127.0.0.1:9" if problem == "unreachable server" else "remora-no-such-tool"
            assert expected in message
            actions = await ed.client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(source.as_uri()),
                    range=types.Range(types.Position(4, 0), types.Position(4, 0)),
                    context=types.CodeActionContext(diagnostics=[]),
                )
            )
            assert [(type(a), a.title) for a in actions or []] == [
                (types.Command, "Remora: run agents on `shout`")
            ]
        assert ed.process().returncode == 0
        print(f"\n{problem}: {message}")


async def test_a_file_with_a_syntax_error_gets_diagnostics_for_what_parses(
    project: Path, probe_config: Path, tmp_path: Path
) -> None:
    source = project / "pkg" / "shout.py"
    source.write_text(TWO_FUNCTIONS + "\n\ndef broken(:\n    pass\n")
    with ScriptedModelServer(rule=probe_rule) as model:
        async with editor(project, "--base-url", model.base_url, log=tmp_path / "log") as ed:
            open_file(ed.client, source)
            await ed.until(lambda: len(messages(ed.latest(source.as_uri()))) == 2)
            assert ed.messages == []


async def test_the_server_survives_a_client_that_goes_away_mid_run(
    project: Path, probe_config: Path, tmp_path: Path
) -> None:
    """The client's end of stdin closes while a job waits on a slow model: the server cancels
    the run and exits 0, without a traceback."""
    source = project / "pkg" / "shout.py"
    log = tmp_path / "log"
    with ScriptedModelServer(rule=probe_rule, latency=2.0) as model:
        client = LanguageClient("remora-tests", "1")
        await client.start_io(
            sys.executable, "-m", "remora", "server", "--log-file", str(log),
            "--base-url", model.base_url, cwd=str(project),
        )  # fmt: skip
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(), root_uri=project.as_uri()
            )
        )
        client.initialized(types.InitializedParams())
        open_file(client, source)
        deadline = time.perf_counter() + 20
        while not model.requests:
            assert time.perf_counter() < deadline
            await asyncio.sleep(0.05)
        process = client._server
        assert process is not None and process.stdin is not None
        process.stdin.close()  # the editor is gone
        started = time.perf_counter()
        await asyncio.wait_for(process.wait(), 15)
        print(f"\nexit after the client went away: {time.perf_counter() - started:.2f} s")
        await asyncio.wait_for(client.stop(), 10)
    assert process.returncode == 0
    assert "Traceback" not in log.read_text()


@pytest.mark.local_engine
@needs_engine
async def test_requests_are_answered_while_the_embedded_engine_loads_and_runs(
    project: Path, tmp_path: Path
) -> None:
    """llama-cpp points file descriptor 1 at /dev/null while it loads a model; the protocol has
    its own copy of stdout, so no response sent meanwhile is lost."""
    source = project / "pkg" / "shout.py"
    flags = ["--engine", "local", "--agents", "docstring"]  # drafts: the model loads
    async with editor(project, *flags, log=tmp_path / "log") as ed:
        open_file(ed.client, source)
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(source.as_uri()),
            range=types.Range(types.Position(4, 0), types.Position(4, 0)),
            context=types.CodeActionContext(diagnostics=[]),
        )
        waits = []
        deadline = time.perf_counter() + 120
        while "end" not in ed.progress:
            assert time.perf_counter() < deadline, "the run did not end"
            asked = time.perf_counter()
            await asyncio.wait_for(ed.client.text_document_code_action_async(params), 10)
            waits.append(time.perf_counter() - asked)
            await asyncio.sleep(0.05)
        assert "begin" in ed.progress and len(waits) > 10
        print(f"\n{len(waits)} code actions during the run, slowest {max(waits):.2f} s")
        assert max(waits) < 2
    assert ed.process().returncode == 0
    assert "loaded" in (tmp_path / "log").read_text()  # the engine did load meanwhile
