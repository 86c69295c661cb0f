"""The JSON-RPC side of the server: pygls's protocol, with what the LSP specification asks
before ``initialize`` and at ``exit``.

Before ``initialize`` a request is answered with ``ServerNotInitialized`` (-32002) and a
notification is dropped, except ``exit``. ``exit`` ends the process with status 0 after a
``shutdown`` request, else 1, and within EXIT_GRACE seconds even when a thread is stuck
(reading a FIFO in some ``.git``: such a thread cannot be stopped, and Python waits for
worker threads before it ends).

A handler may answer with ``JsonText``: a result serialized once and kept (a file's code
lenses), sent as it is instead of being serialized again on every request.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from lsprotocol import types
from pygls.exceptions import JsonRpcServerNotInitialized
from pygls.protocol import LanguageServerProtocol

from poimen_memory.wiring import note_activity, stop_git

__all__ = ["EXIT_GRACE", "JsonText", "PoimenProtocol"]

EXIT_GRACE: Final = 5.0


@dataclass(frozen=True, slots=True)
class JsonText:
    """A request's result already serialized as JSON, sent without serializing it again."""

    text: str


class PoimenProtocol(LanguageServerProtocol):
    """pygls's language server protocol, with the specification's lifecycle rules."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_received = False
        self.exit_status: int | None = None
        """Set by ``exit``: the status the process ends with."""
        self._writing: set[asyncio.Future[Any]] = set()  # kept until done (not collected)

    def handle_message(self, message: Any) -> None:
        """Refuse what comes before ``initialize``; note how ``exit`` should end."""
        note_activity()  # blames are written to the local cache between requests
        method = getattr(message, "method", None)
        if method == types.EXIT:
            self.exit_status = 0 if self._shutdown else 1
            # The usual way out runs first; this one ends the process if that one hangs.
            deadline = threading.Timer(EXIT_GRACE, _leave, (self.exit_status,))
            deadline.daemon = True
            deadline.start()
        elif method == types.INITIALIZE:
            self.initialize_received = True
        elif method is not None and not self.initialize_received:
            msg_id = getattr(message, "id", None)
            if msg_id is not None:
                error = JsonRpcServerNotInitialized(f"{method}: the server is not initialized")
                self._send_response(msg_id, error=error.to_response_error())
            return
        super().handle_message(message)

    def prepare(self, methods: Iterable[str], results: Iterable[Any] = ()) -> None:
        """Make the converter's functions for the messages of ``methods`` (requests in,
        results out) and for ``results`` (types given to ``to_json``) now, at start: cattrs
        writes and compiles one per type on its first use, a few milliseconds each, which
        the first request of each method would wait for."""
        for kind in results:
            self._converter.get_unstructure_hook(kind)
        for method in methods:
            known = types.METHOD_TO_TYPES.get(method)
            if known is None:
                continue
            message, result = known[0], known[1]
            self._converter.get_structure_hook(message)
            if result is not None:
                self._converter.get_unstructure_hook(result)

    def to_json(self, value: Any, kind: Any) -> JsonText:
        """``value`` (of type ``kind``) serialized as the protocol would send it."""
        return JsonText(json.dumps(self._converter.unstructure(value, kind), separators=(",", ":")))

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if error is not None or not isinstance(result, JsonText):
            super()._send_response(msg_id, result, error)
            return
        self._result_types.pop(msg_id, None)
        if self.writer is None:
            return
        body = f'{{"id": {json.dumps(msg_id)}, "jsonrpc": "2.0", "result": {result.text}}}'
        data = body.encode(self.CHARSET)
        if self._include_headers:
            header = (
                f"Content-Length: {len(data)}\r\n"
                f"Content-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
            )
            data = header.encode(self.CHARSET) + data
        written = self.writer.write(data)
        if inspect.isawaitable(written):
            future = asyncio.ensure_future(written)
            self._writing.add(future)
            future.add_done_callback(self._writing.discard)


def _leave(status: int) -> None:
    """End the process now (the usual way out hung): no git of ours left running."""
    stop_git()
    os._exit(status)
