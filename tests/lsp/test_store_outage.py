"""The store goes away and comes back: the server never exits, answers within 2 s, says so
once, and recovers by itself."""

from __future__ import annotations

import asyncio
import time

from psycopg import conninfo

from ..tcpproxy import TcpProxy
from .conftest import PROJECT, World, start_client
from .test_server import BUFFER, hover, hover_text, open_doc


async def test_store_stopped_and_back(world: World) -> None:
    params = conninfo.conninfo_to_dict(world.dsn)
    proxy = TcpProxy(str(params.get("host", "127.0.0.1")), int(params.get("port", 5432)))
    proxy.start()
    params.update(host="127.0.0.1", port=str(proxy.port))
    dsn = conninfo.make_conninfo(**params)
    client = await start_client(
        world, "visual-studio-code", {"poimenMemory": {"dsn": dsn, "project": PROJECT}}
    )
    try:
        uri = open_doc(client, world, BUFFER)
        assert "Raised BODY\\_BUFFER" in hover_text(await hover(client, uri, 42))

        proxy.stop()
        # Line 42's answer is cached (and still shown); line 41 needs the store.
        assert "Raised BODY\\_BUFFER" in hover_text(await hover(client, uri, 42))
        for _ in range(3):
            started = time.monotonic()
            down = await hover(client, uri, 41)
            assert time.monotonic() - started < 2.0
            assert "memory store unreachable" in hover_text(down)
        await asyncio.sleep(0.2)
        said = [m for m in client.messages if "unreachable" in m.message]
        assert len(said) == 1  # once, not per request

        proxy.start()
        back_at = time.monotonic()
        while True:
            result = await hover(client, uri, 41)  # no memories there: null once answered
            if result is None:
                break
            assert time.monotonic() - back_at < 5, "no recovery within 5 s of the store returning"
            await asyncio.sleep(0.2)
    finally:
        proxy.stop()
        await client.shutdown_session()
        await client.stop()
