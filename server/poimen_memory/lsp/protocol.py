"""The JSON-RPC side of the server: pygls's protocol, with what the LSP specification asks
before ``initialize`` and at ``exit``.

Before ``initialize`` a request is answered with ``ServerNotInitialized`` (-32002) and a
notification is dropped, except ``exit``. ``exit`` ends the process with status 0 after a
``shutdown`` request, else 1, and within EXIT_GRACE seconds even when a thread is stuck
(reading a FIFO in some ``.git``: such a thread cannot be stopped, and Python waits for
worker threads before it ends).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Final

from lsprotocol import types
from pygls.exceptions import JsonRpcServerNotInitialized
from pygls.protocol import LanguageServerProtocol

__all__ = ["EXIT_GRACE", "PoimenProtocol"]

EXIT_GRACE: Final = 5.0


class PoimenProtocol(LanguageServerProtocol):
    """pygls's language server protocol, with the specification's lifecycle rules."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_received = False
        self.exit_status: int | None = None
        """Set by ``exit``: the status the process ends with."""

    def handle_message(self, message: Any) -> None:
        """Refuse what comes before ``initialize``; note how ``exit`` should end."""
        method = getattr(message, "method", None)
        if method == types.EXIT:
            self.exit_status = 0 if self._shutdown else 1
            # The usual way out runs first; this one ends the process if that one hangs.
            deadline = threading.Timer(EXIT_GRACE, os._exit, (self.exit_status,))
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
