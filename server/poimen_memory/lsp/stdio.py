"""The server's stdin read on its event loop, not through a thread per read.

pygls reads each header line and each body of stdio through a thread pool: three hand-offs
between threads per message, most of what a request answered from a cache costs. When stdin
is a pipe or a socket (what an editor gives a language server), it is read here by an
``asyncio.StreamReader`` instead, with the same framing and message loop as pygls's
(``pygls.io_.run_async``); anything else (a terminal, a regular file) is read by pygls's
reader, through the same loop. Watching it makes the descriptor non-blocking, which a child
process would inherit with it: git runs with its stdin on ``/dev/null``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from typing import BinaryIO

__all__ = ["LINE_LIMIT", "PipeReader", "is_pipe"]

log = logging.getLogger(__name__)

LINE_LIMIT = 1 << 20
"""Longest header line read; a longer one is dropped, and the line after it read."""


def is_pipe(stream: BinaryIO) -> bool:
    """Whether ``stream`` is a pipe or a socket (what the event loop can watch; a regular
    file it cannot, and a terminal is shared with the shell, so it is left blocking)."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):  # no descriptor (a test's BytesIO), or closed
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeReader:
    """What ``pygls.io_.run_async`` reads messages with (``readline``, ``readexactly``),
    over a stream reader attached to ``stdin`` on first use; b"" at the end of input."""

    def __init__(self, stdin: BinaryIO) -> None:
        self._stdin = stdin
        self._reader: asyncio.StreamReader | None = None

    async def _stream(self) -> asyncio.StreamReader:
        if self._reader is None:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=LINE_LIMIT)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self._stdin)
            self._reader = reader
        return self._reader

    async def readline(self) -> bytes:
        """The next line with its end (a partial one at the end of input). A line longer
        than ``LINE_LIMIT`` is not a header: it is dropped (logged), and so is what is left
        of it, and the line after it is read."""
        stream = await self._stream()
        dropping = False
        while True:
            try:
                line = await stream.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the end of input
                return b"" if dropping else exc.partial
            except asyncio.LimitOverrunError as exc:  # no end within the limit: skip on
                await stream.readexactly(exc.consumed)
                dropping = True
                continue
            if not dropping:
                return line
            log.error("a header line over %d bytes was dropped", LINE_LIMIT)
            dropping = False

    async def readexactly(self, n: int) -> bytes:
        """The next ``n`` bytes, or those left when input ends sooner."""
        try:
            return await (await self._stream()).readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial
