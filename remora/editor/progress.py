"""LSP work-done progress for one run, driven by the analysis hooks (which are plain calls):
begun once the model is needed (loading it is part of the work), told the number of jobs once
it is loaded, a step per job answered, ended when the run ends or is cancelled. Nothing is
shown for a run the cache answered, nor to a client without progress."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer


def client_gone_is_fine() -> contextlib.AbstractContextManager[None]:
    """A notification to a client that went away is dropped: the run is being cancelled and
    the server is about to exit."""
    return contextlib.suppress(BrokenPipeError, ConnectionError)


class RunProgress:
    def __init__(
        self,
        server: LanguageServer,
        title: str,
        start_soon: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    ) -> None:
        self._server = server
        self._title = title
        self._start_soon = start_soon
        self._token = f"remora-{uuid.uuid4()}"
        self._total = 0
        self._done = 0
        self._begun = False
        self._ended = False

    def start(self) -> None:
        window = self._server.client_capabilities.window
        if window is not None and window.work_done_progress:
            self._start_soon(self._begin)

    def jobs(self, total: int) -> None:
        self._total = total
        self._report()

    def step(self) -> None:
        self._done += 1
        self._report()

    def _report(self) -> None:
        if self._begun and not self._ended:
            report = types.WorkDoneProgressReport(message=self._message(), percentage=self._pct())
            with client_gone_is_fine():
                self._server.work_done_progress.report(self._token, report)

    def end(self) -> None:
        if self._begun and not self._ended:
            with client_gone_is_fine():
                self._server.work_done_progress.end(self._token, types.WorkDoneProgressEnd())
        self._ended = True

    async def _begin(self) -> None:
        try:
            await self._server.work_done_progress.create_async(self._token)
        except Exception:  # the client refused the token: the run goes on without a bar
            return
        if self._ended:
            return
        begin = types.WorkDoneProgressBegin(
            title=self._title, message=self._message(), percentage=self._pct()
        )
        with client_gone_is_fine():
            self._server.work_done_progress.begin(self._token, begin)
        self._begun = True

    def _message(self) -> str:
        return f"{self._done}/{self._total} jobs" if self._total else "loading the model"

    def _pct(self) -> int:
        return 100 * self._done // max(self._total, 1)
