"""mem.remember over stdio: a memory recorded on committed lines shows on hover at once; one
recorded on lines not committed yet shows once a commit holds them, and never on a line
edited before that commit."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from poimen_memory.lsp import commands

from ..gitrepo import BOB
from .conftest import World, start_client
from .test_server import hover, hover_text, open_doc

HANDLER = "src/kong/handler.rs"


async def test_remember_on_committed_and_uncommitted_lines(world: World) -> None:
    client = await start_client(world, "visual-studio-code")
    try:
        uri = world.uri(HANDLER)
        done = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                commands.REMEMBER,
                [{"uri": uri, "line": 3, "text": "Line 3 is the handler's entry; keep it first."}],
            )
        )
        assert done["anchored"]
        assert done["pending"] == []
        assert done["created"] is True
        open_doc(client, world, HANDLER)
        assert "keep it first" in hover_text(await hover(client, uri, 3))
        assert await hover(client, uri, 4) is None

        # New lines in the middle of the file, saved but not committed.
        lines = world.kong.lines(HANDLER)
        lines[14:14] = [
            "let limit = body_limit(cfg);",
            "if limit == 0 { return reject(); }",
            "log_limit(&cfg, limit);",
        ]
        world.kong.write(HANDLER, "\n".join(lines) + "\n")
        done = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                commands.REMEMBER,
                [{"uri": uri, "lines": [15, 17], "text": "A zero limit means uploads are off."}],
            )
        )
        assert done["anchored"] == []
        assert [(p["line_start"], p["line_end"]) for p in done["pending"]] == [(15, 17)]
        lines[15] = "if limit == 0 { return forbid(); }"  # edited before the commit
        world.kong.write(HANDLER, "\n".join(lines) + "\n")
        text = "\n".join(lines) + "\n"
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=2, uri=uri),
                [types.TextDocumentContentChangeWholeDocument(text)],
            )
        )
        assert await hover(client, uri, 15) is None  # not committed yet
        world.kong.commit("limit", "Body limit", BOB)
        assert "uploads are off" in hover_text(await hover(client, uri, 15))
        assert "uploads are off" in hover_text(await hover(client, uri, 17))
        assert await hover(client, uri, 16) is None  # edited before the commit
        assert await hover(client, uri, 14) is None
        assert await hover(client, uri, 18) is None
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.parametrize(
    ("argument", "field"),
    [
        ({"uri": "URI", "line": 3}, "text"),
        ({"uri": "URI", "text": "x"}, "line"),
        ({"uri": "URI", "line": 9999, "text": "x"}, "line"),
        ({"uri": "file:///etc/passwd", "line": 1, "text": "x"}, "uri"),
        ({"file": "../outside", "line": 1, "text": "x"}, "file"),
    ],
)
async def test_bad_arguments_name_the_field(
    world: World, argument: dict[str, object], field: str
) -> None:
    client = await start_client(world, "neovim")
    try:
        body = {k: world.uri(HANDLER) if v == "URI" else v for k, v in argument.items()}
        with pytest.raises(JsonRpcException) as info:
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(commands.REMEMBER, [body])
            )
        assert info.value.code == -32602
        assert info.value.message.startswith(f"{field}:"), info.value.message
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_a_crowded_line_s_hover_shows_the_newest_and_counts_the_rest(world: World) -> None:
    """Ten memories on one line: the hover (as VS Code renders it) shows the newest eight and
    a last line counting the two others."""
    client = await start_client(world, "visual-studio-code")
    try:
        uri = world.uri(HANDLER)
        for n in range(10):
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    commands.REMEMBER, [{"uri": uri, "line": 5, "text": f"Crowd note {n}."}]
                )
            )
        open_doc(client, world, HANDLER)
        text = hover_text(await hover(client, uri, 5))
        shown = [n for n in range(10) if f"Crowd note {n}." in text]
        assert shown == list(range(2, 10)), text
        assert text.startswith("**poimen-memory** · 10 memories")
        assert text.rstrip().endswith("*and 2 more: the code lens or* `mem why` *shows every one*")
    finally:
        await client.shutdown_session()
        await client.stop()
