"""`remora server`: the Language Server Protocol over stdio (pygls), for any editor.

The server is `remora analyze` run in the workspace folder, one file at a time: the same
configuration, agents and result cache. A file is analysed when it is opened and when it is
saved (what is on disk is what the agents read and what `--fix` would write); typing cancels a
run of that file, whose results would describe text that is going away. Diagnostics come from
the cache at once and from the model as jobs finish; a verified change is offered as a code
action (docs/EDITORS.md)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Protocol

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import RPCMessage
from pygls.uris import to_fs_path

from remora import __version__
from remora.agents.definition import RuleSpec
from remora.agents.registry import select_agents
from remora.config.loading import load_settings
from remora.discovery.discover import discover_nodes
from remora.discovery.walk import walked
from remora.editor.diagnostics import diagnostics
from remora.editor.edits import change_action
from remora.editor.progress import RunProgress, client_gone_is_fine
from remora.editor.runs import FileRuns, FileState, RunOptions
from remora.errors import RunFailed, UserInputError
from remora.findings.results import JobStatus

log = logging.getLogger("remora.editor")
RUN_NODE = "remora.runNode"
"""The command behind "run agents on this node": arguments [document URI, node id]."""

MAX_MESSAGE_BYTES = 64 << 20
"""The largest message from the editor the server reads (a Python file of tens of MiB still
fits). A larger one is skipped unread, in pieces: pygls alone reads whatever `Content-Length`
declares in one allocation, and one frame of `Content-Length: 99999999999` ended the server
with a MemoryError."""
MAX_HEADER_LINE = 4096
"""LSP headers are `Content-Length` and `Content-Type`: a longer line is skipped unread."""
REFUSED = "$/remora/refusedMessage"
"""Not sent by editors: what the server's own reader hands pygls in place of a skipped message,
so the skip is said where the editor shows it (`$/`: a notification the protocol may ignore)."""
_PIECE = 1 << 20
"""The most a body is read at a time."""
_NEXT_MESSAGE = re.compile(rb"Content-Length: [0-9]{1,20}\r\n")
"""A message's header as pygls reads it. No JSON body can hold one: a raw CR or LF may stand
only between a JSON text's tokens, and `Content-Length:` is none; so one inside a body is the
next message, and the body was shorter than it declared."""
_OVERLAP = 64
"""The end of what a body held so far, searched again with its next piece: a header split
between two pieces is found."""


class _Input(Protocol):
    """What the reader needs of stdin (a BufferedReader)."""

    def readline(self, size: int | None = -1, /) -> bytes: ...

    def read1(self, size: int = -1, /) -> bytes: ...


class BoundedStdin:
    """stdin as pygls reads LSP frames from it: header lines (`readline`), then the body
    (`read(Content-Length)`), each read bounded. A message over `MAX_MESSAGE_BYTES` is skipped
    and the server goes on: an editor restarts a language server that ends, and sends the same
    documents again, so ending would repeat; skipping loses only that message.

    A body is read as it comes, never waited for beyond the next message's header: a frame
    that declares more than it holds (`Content-Length: 99999999999`, then the next request)
    would otherwise have the server wait, alive and answering nothing, for bytes that never
    come. It is skipped where the next message begins, and said like an oversized one."""

    def __init__(self, stream: _Input) -> None:
        self._stream = stream
        self._ahead = b""
        """Read past a body that was shorter than it declared: the next message's start."""

    def readline(self) -> bytes:
        line = self._line(MAX_HEADER_LINE)
        if len(line) < MAX_HEADER_LINE or line.endswith(b"\n"):
            return line
        while (rest := self._line(MAX_HEADER_LINE)) and not rest.endswith(b"\n"):
            pass
        log.warning("skipped a header line longer than %d bytes from the editor", MAX_HEADER_LINE)
        # A line pygls ignores, so the header's end is still the blank line that ends it.
        return b"X-Remora-Skipped: a header line too long\r\n" if rest else b""

    def read(self, size: int) -> bytes:
        oversized = size > MAX_MESSAGE_BYTES
        if oversized:
            log.error(
                "skipping a message of %d bytes from the editor: larger than the %d MiB a "
                "message may have",
                size,
                MAX_MESSAGE_BYTES >> 20,
            )
        body = bytearray()  # an oversized one is not kept
        done, tail = 0, b""
        while done < size:
            piece = self._piece(min(size - done, _PIECE))
            if not piece:
                which = "that" if oversized else "a"
                log.error("the editor closed the connection inside %s message: ending", which)
                return b""  # pygls ends on an empty read
            window = tail + piece
            found = _NEXT_MESSAGE.search(window)
            if found is not None:
                sent = done - len(tail) + found.start()
                self._ahead = window[found.start() :] + self._ahead
                log.error(
                    "skipped a message from the editor that declared %d bytes: the next message "
                    "began after %d of them",
                    size,
                    sent,
                )
                return _refused({"bytes": size, "sent": sent})
            if not oversized:
                body += piece
            done += len(piece)
            tail = window[-_OVERLAP:]
        return _refused({"bytes": size}) if oversized else bytes(body)

    def _line(self, limit: int) -> bytes:
        if not self._ahead:
            return self._stream.readline(limit)
        end = self._ahead.find(b"\n", 0, limit)
        cut = end + 1 if end >= 0 else min(limit, len(self._ahead))
        line, self._ahead = self._ahead[:cut], self._ahead[cut:]
        if end >= 0 or len(line) == limit:
            return line
        return line + self._stream.readline(limit - len(line))

    def _piece(self, size: int) -> bytes:
        """Up to `size` bytes, as they come (b"": the end)."""
        if not self._ahead:
            return self._stream.read1(size)
        piece, self._ahead = self._ahead[:size], self._ahead[size:]
        return piece


def _refused(params: dict[str, int]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": REFUSED, "params": params}).encode()


class _Protocol(LanguageServerProtocol):
    """pygls, with LSP's first rule: before `initialize`, a request is answered with
    ServerNotInitialized (-32002) and a notification is dropped (`exit` excepted). pygls runs
    them, and a handler that needs the workspace answered with a Python traceback."""

    initialize_seen = False

    def handle_message(self, message: RPCMessage) -> None:
        method = getattr(message, "method", None)
        if method == types.INITIALIZE:
            self.initialize_seen = True
        elif not self.initialize_seen and method not in (None, types.EXIT, REFUSED):
            if hasattr(message, "id"):  # a request (notifications have no id)
                error = JsonRpcServerNotInitialized(
                    f"{method}: the server is not initialized yet (send initialize first)"
                )
                self._send_response(message.id, None, error.to_response_error())
            else:
                log.info("ignored %s: sent before initialize", method)
            return
        super().handle_message(message)

    def _send_response(
        self, msg_id: Any, result: Any = None, error: types.ResponseError | None = None
    ) -> None:
        # pygls puts the server's traceback (paths, code) in an internal error's `data`: the
        # editor gets the message, the traceback stays in the server's own log.
        if error is not None and error.code == JsonRpcInternalError.CODE and error.data:
            error = types.ResponseError(code=error.code, message=error.message)
        super()._send_response(msg_id, result, error)


class RemoraServer(LanguageServer):
    def __init__(self, options: RunOptions, debounce: float) -> None:
        super().__init__("remora", __version__, protocol_cls=_Protocol)
        self.options = options
        self.debounce = debounce
        self.runs = FileRuns(
            options,
            publish=self.publish,
            tell=self.tell,
            progress=lambda title: RunProgress(self, title, self.runs.start_soon),
        )
        self._told: str | None = None
        self._serving: asyncio.Task[None] | None = None
        self._rules: dict[str, dict[str, RuleSpec]] = {}

    def publish(self, path: Path, state: FileState) -> None:
        found = diagnostics(state.results.values(), state.text, self.rules())
        params = types.PublishDiagnosticsParams(uri=path.as_uri(), diagnostics=found)
        with client_gone_is_fine():
            self.text_document_publish_diagnostics(params)

    def tell(self, problem: str | None) -> None:
        """Say a problem once (not on every save), and again only after a run without it."""
        if problem is not None and problem != self._told:
            log.warning("%s", problem)
            message = types.ShowMessageParams(type=types.MessageType.Error, message=problem)
            with client_gone_is_fine():
                self.window_show_message(message)
        self._told = problem

    def rules(self) -> dict[str, dict[str, RuleSpec]]:
        """Each agent's declared rules (their help links), read once."""
        if not self._rules:
            try:
                o = self.options
                loaded = load_settings(o.config, cli=o.flags, isolated=o.isolated)
                agents = select_agents(loaded, list(o.agents) or None)
            except (UserInputError, RunFailed):
                return {}
            self._rules = {agent.name: dict(agent.definition.rules) for agent in agents}
        return self._rules

    def start_serving(self) -> None:
        self._serving = asyncio.ensure_future(self.runs.serve())


def build_server(options: RunOptions, *, debounce: float) -> RemoraServer:
    server = RemoraServer(options, debounce)

    @server.feature(types.INITIALIZE)
    def initialize(ls: RemoraServer, params: types.InitializeParams) -> None:
        folders = params.workspace_folders or []
        uri = folders[0].uri if folders else params.root_uri
        root = to_fs_path(uri) if uri else None
        if root and Path(root).is_dir():
            # The server is `remora analyze` run in the workspace folder: the configuration is
            # found, the cache kept and paths are relative there, as on the command line.
            os.chdir(root)

    @server.feature(types.INITIALIZED)
    def initialized(ls: RemoraServer, params: types.InitializedParams) -> None:
        ls.start_serving()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: RemoraServer, params: types.DidOpenTextDocumentParams) -> None:
        if (path := _python_file(params.text_document.uri)) is not None:
            ls.runs.schedule(path, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: RemoraServer, params: types.DidSaveTextDocumentParams) -> None:
        if (path := _python_file(params.text_document.uri)) is not None:
            ls.runs.schedule(path, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: RemoraServer, params: types.DidChangeTextDocumentParams) -> None:
        if (path := _python_file(params.text_document.uri)) is not None:
            ls.runs.cancel(path)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: RemoraServer, params: types.DidCloseTextDocumentParams) -> None:
        if (path := _python_file(params.text_document.uri)) is not None:
            ls.runs.cancel(path)
            ls.runs.files.pop(path, None)
            empty = types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
            ls.text_document_publish_diagnostics(empty)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_action(
        ls: RemoraServer, params: types.CodeActionParams
    ) -> list[types.CodeAction | types.Command]:
        path = _python_file(params.text_document.uri)
        return [] if path is None else _actions(ls, path, params)

    @server.command(RUN_NODE)
    def run_node(ls: RemoraServer, *arguments: Any) -> None:
        if len(arguments) != 2 or not all(isinstance(argument, str) for argument in arguments):
            raise JsonRpcInvalidParams(f"{RUN_NODE} takes the file's URI and the node's id")
        uri, node = arguments
        if (path := _python_file(uri)) is not None:
            ls.runs.schedule(path, 0, nodes=frozenset({node}), cache=False)

    @server.feature(REFUSED)
    def refused(ls: RemoraServer, params: Any) -> None:
        # The reader's numbers, unless an editor sent this itself.
        size, sent = getattr(params, "bytes", None), getattr(params, "sent", None)
        size = size if isinstance(size, int) else "?"
        if isinstance(sent, int):
            problem = f"Remora skipped a message from the editor that declared {size} bytes: "
            problem += f"the next message began after {sent} of them"
        else:
            problem = f"Remora skipped a message of {size} bytes from the editor: larger than "
            problem += f"the {MAX_MESSAGE_BYTES >> 20} MiB a message may have"
        # Before initialize is answered the protocol lets the server say nothing to the editor;
        # the reader has logged it.
        if isinstance(ls.protocol, _Protocol) and ls.protocol.initialize_seen:
            message = types.ShowMessageParams(type=types.MessageType.Error, message=problem)
            with client_gone_is_fine():
                ls.window_show_message(message)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: RemoraServer, *_: Any) -> None:
        for path in list(ls.runs.files):
            ls.runs.cancel(path)

    return server


def _actions(
    ls: RemoraServer, path: Path, params: types.CodeActionParams
) -> list[types.CodeAction | types.Command]:
    """The verified changes of nodes under the range, then "run agents" for the innermost
    node there."""
    first, last = params.range.start.line + 1, params.range.end.line + 1
    state = ls.runs.files.get(path, FileState())
    document = ls.workspace.text_documents.get(params.text_document.uri)
    buffer, version = (document.source, document.version) if document else (None, None)
    actions: list[types.CodeAction | types.Command] = []
    for (node_id, agent), result in state.results.items():
        node = result.node
        outside = node.end_line < first or node.start_line > last
        if result.status is not JobStatus.SUCCESS or outside:
            continue
        related = [
            diagnostic
            for diagnostic in params.context.diagnostics
            if isinstance(diagnostic.data, dict)
            and diagnostic.data.get("node") == node_id
            and diagnostic.data.get("agent") == agent
        ]
        for change in result.changes:
            target = (Path.cwd() / change.file).resolve()
            here = target == path.resolve()
            actions.append(
                change_action(
                    result,
                    change,
                    target,
                    buffer=buffer if here else None,
                    version=version if here else None,
                    diagnostics=related,
                )
            )
    try:
        found = discover_nodes([path], root=Path.cwd()).nodes
    except Exception:  # a file that cannot be read now offers no "run agents" action
        found = []
    under = [node for node in found if node.start_line <= first <= node.end_line]
    if under:
        node = min(under, key=lambda node: node.end_line - node.start_line)
        # A bare command, which the protocol allows next to actions: lsprotocol's own client
        # reads any action that has a command as a command, and mangles it.
        title = f"Remora: run agents on `{node.qualified_name}`"
        actions.append(
            types.Command(title, RUN_NODE, arguments=[params.text_document.uri, node.id])
        )
    return actions


def _python_file(uri: str) -> Path | None:
    """The file, when `remora analyze .` in the workspace would analyse it: not a library's
    source opened by "go to definition", nor a file in .venv/ or one .gitignore ignores."""
    path = to_fs_path(uri)
    if not path or not path.endswith(".py") or not walked(Path(path), Path.cwd()):
        return None
    return Path(path)
