"""The language server end to end over stdio, speaking as VS Code and as Neovim."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from poimen_memory.lsp import commands

from ..processes import running
from .conftest import PROJECT, REPO, World, start_client

BUFFER = "src/kong/buffer.rs"


def open_doc(client: LanguageClient, world: World, rel: str, text: str | None = None) -> str:
    uri = world.uri(rel)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(
                uri=uri,
                language_id="rust",
                version=1,
                text=text if text is not None else (world.kong.root / rel).read_text(),
            )
        )
    )
    return uri


async def hover(client: LanguageClient, uri: str, line: int) -> types.Hover | None:
    """Hover on 1-based ``line``."""
    return await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line - 1, 0))
    )


def hover_text(result: types.Hover | None) -> str:
    assert result is not None
    contents = result.contents
    assert isinstance(contents, types.MarkupContent)
    return contents.value


async def test_hover_shows_the_memory_stack(client: LanguageClient, world: World) -> None:
    uri = open_doc(client, world, BUFFER)
    result = await hover(client, uri, 42)
    text = hover_text(result)
    assert result is not None
    assert isinstance(result.contents, types.MarkupContent)
    assert result.contents.kind == types.MarkupKind.Markdown
    # L2 and L1 first, then the evidence with commit, author, date and reference.
    assert text.index("**L2**") < text.index("**L1**") < text.index("Raised BODY\\_BUFFER")
    assert "Kong body buffer raised to 16MB" in text
    assert f"`{world.kong.commits['abc123'][:7]}` Increase buffer — Alice Smith, 2026-08-06" in text
    assert "`src/kong/buffer.rs:42`" in text


async def test_hover_on_a_line_without_memories_is_null(
    client: LanguageClient, world: World
) -> None:
    uri = open_doc(client, world, BUFFER)
    assert await hover(client, uri, 41) is None
    assert await hover(client, uri, 60) is None
    # A file outside the workspace, and one that is not in git, get nothing either.
    (world.kong.root / "notes.txt").write_text("untracked\n")
    assert await hover(client, open_doc(client, world, "notes.txt"), 1) is None


async def test_unsaved_edits_map_in_process(client: LanguageClient, world: World) -> None:
    uri = open_doc(client, world, BUFFER)
    assert await hover(client, uri, 42) is not None  # warm: HEAD text read, line blamed
    # The first hover also starts the whole-file blame in the background: let it finish.
    settled, stable_since = len(world.git_calls()), time.monotonic()
    while time.monotonic() - stable_since < 1.0:
        await asyncio.sleep(0.1)
        if len(world.git_calls()) != settled:
            settled, stable_since = len(world.git_calls()), time.monotonic()
    before = len(world.git_calls())
    for version in range(2, 12):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
                        text=f"// typed line {version}\n",
                    )
                ],
            )
        )
        shifted = 42 + version - 1
        assert "Raised BODY\\_BUFFER" in hover_text(await hover(client, uri, shifted))
        assert await hover(client, uri, 1) is None  # a line typed in the buffer has no origin
    assert world.git_calls()[before:] == []  # no git process per edit


async def test_code_lens_resolve_and_command(client: LanguageClient, world: World) -> None:
    uri = open_doc(client, world, BUFFER)
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    assert lenses is not None
    titles = {lens.range.start.line: lens.command.title for lens in lenses if lens.command}
    assert titles[0] == "1 memory in this file"
    assert titles[41] == "1 memory · Alice · Increase buffer"
    # Asked again for the same version: the same lenses, sent as they were serialized.
    again = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    assert again == lenses
    lens = next(lens for lens in lenses if lens.range.start.line == 41)
    assert lens.command is not None
    # A client may drop the command and ask for it again from the lens's data.
    data = (lens.command.arguments or [None])[0]
    resolved = await client.code_lens_resolve_async(types.CodeLens(range=lens.range, data=data))
    assert resolved.command is not None
    assert resolved.command.command == commands.SHOW_MEMORIES
    assert resolved.command.title == "1 memory · Alice · Increase buffer"
    assert lens.command is not None
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(lens.command.command, list(lens.command.arguments or []))
    )
    assert [n["text"].split("\n")[0] for n in result["nodes"] if n["level"] == "L0"] == [
        "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module."
    ]
    # Shown to the user: as a document where the client can open one, else as a message.
    await asyncio.sleep(0.2)
    if client.shown_documents:
        shown = client.shown_documents[-1].uri
        assert shown.endswith(".md")
    else:
        assert any("Raised BODY_BUFFER" in m.message for m in client.messages)


async def test_lenses_follow_their_lines_while_typing(client: LanguageClient, world: World) -> None:
    uri = open_doc(client, world, BUFFER)
    params = types.CodeLensParams(types.TextDocumentIdentifier(uri))
    first = await client.text_document_code_lens_async(params)
    assert first is not None
    assert {lens.range.start.line for lens in first} == {0, 41}
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(10, 0), types.Position(10, 0)),
                    text="// one\n// two\n",
                )
            ],
        )
    )
    second = await client.text_document_code_lens_async(params)
    assert second is not None
    assert {lens.range.start.line for lens in second} == {0, 43}


@pytest.mark.parametrize(
    ("command", "argument", "expected"),
    [
        (commands.BY_GIT, {"file": BUFFER, "line": 42, "repo": REPO}, "Raised BODY_BUFFER"),
        (commands.BY_GIT, {"uri": "URI", "line": 42}, "Raised BODY_BUFFER"),
        (commands.BY_COMMIT, {"commit_sha": "ABC123"}, "Raised BODY_BUFFER"),
        (commands.BY_AUTHOR, {"author": "bob@org.test"}, "Handler streams"),
        (commands.QUERY, {"query": "streamed", "git_repo": REPO}, "Handler streams"),
    ],
)
async def test_commands_answer_with_the_response_model(
    client: LanguageClient, world: World, command: str, argument: dict[str, object], expected: str
) -> None:
    argument = {
        k: (
            world.uri(BUFFER)
            if v == "URI"
            else world.kong.commits["abc123"][:10]
            if v == "ABC123"
            else v
        )
        for k, v in argument.items()
    }
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command, [argument])
    )
    assert any(n["text"].startswith(expected) for n in result["nodes"]), result
    assert result["nodes"][0]["git_ref"] is not None
    assert {"sha256", "level", "brief", "git_commit", "git_context", "parents"} <= set(
        result["nodes"][0]
    )


@pytest.mark.parametrize(
    ("command", "arguments", "field"),
    [
        (commands.BY_GIT, [], "arguments"),
        (commands.BY_GIT, ["src/kong/buffer.rs"], "arguments"),
        (commands.BY_GIT, [{"line": 42}], "file"),
        (commands.BY_GIT, [{"file": BUFFER, "line": -3, "repo": REPO}], "line"),
        (commands.BY_GIT, [{"file": BUFFER, "line": "42", "repo": REPO}], "line"),
        (commands.BY_GIT, [{"uri": "file:///etc/passwd", "line": 1}], "uri"),
        (commands.BY_COMMIT, [{"commit_sha": "--upload-pack=touch /tmp/pwned"}], "commit_sha"),
        (commands.BY_AUTHOR, [{"author": ""}], "author"),
        (commands.QUERY, [{"query": "x", "limit": 10_000}], "limit"),
        (commands.SHOW_MEMORIES, [{"uri": "URI", "lines": [0, 2]}], "lines"),
    ],
)
async def test_bad_arguments_are_invalid_params_naming_the_field(
    client: LanguageClient, world: World, command: str, arguments: list[object], field: str
) -> None:
    arguments = [
        {k: world.uri(BUFFER) if v == "URI" else v for k, v in a.items()}
        if isinstance(a, dict)
        else a
        for a in arguments
    ]
    with pytest.raises(JsonRpcException) as info:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(command, arguments))
    assert info.value.code == -32602
    assert field in info.value.message
    # The server keeps serving.
    uri = open_doc(client, world, BUFFER)
    assert await hover(client, uri, 42) is not None


async def test_execute_command_provider_lists_every_command(world: World) -> None:
    client = await start_client(world, "visual-studio-code")
    try:
        capabilities = client.init_result.capabilities  # type: ignore[attr-defined]
        provider = capabilities.execute_command_provider
        assert capabilities.code_lens_provider is not None
        assert capabilities.code_lens_provider.resolve_provider is True
        assert capabilities.hover_provider
        assert provider is not None
        assert set(provider.commands) == set(commands.ALL)
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_configuration_change_and_invalid_values(
    client: LanguageClient, world: World
) -> None:
    uri = open_doc(client, world, BUFFER)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"poimenMemory": {"hover": {"enabled": False, "excerptLength": -5}}}
        )
    )
    await asyncio.sleep(0.3)
    assert await hover(client, uri, 42) is None
    assert any(
        "poimenMemory.hover.excerptLength: invalid value -5; using the default 400" in m.message
        for m in client.messages
    )
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"poimenMemory": {"hover": {"enabled": True, "markup": "plaintext"}}}
        )
    )
    await asyncio.sleep(0.3)
    result = await hover(client, uri, 42)
    assert result is not None
    assert isinstance(result.contents, types.MarkupContent)
    assert result.contents.kind == types.MarkupKind.PlainText
    assert "poimen-memory · 1 memory" in result.contents.value


async def test_live_refresh_after_ingest_in_another_process(world: World) -> None:
    client = await start_client(world, "visual-studio-code")
    try:
        uri = open_doc(client, world, "src/kong/handler.rs")
        params = types.CodeLensParams(types.TextDocumentIdentifier(uri))
        before = await client.text_document_code_lens_async(params)
        assert before is not None
        assert {lens.range.start.line for lens in before} == {0, 9}
        world.ingest(
            [{"type": "node", "level": "L0", "query_id": "q-live", "text": "Live: handler line 5 explained.",
              "anchors": [{"file": "src/kong/handler.rs", "line": 5}], "created_at": "2026-08-21T00:00:00Z"}],
            name="live.jsonl",
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while client.lens_refreshes == 0 and time.monotonic() < deadline:  # type: ignore[attr-defined]
            await asyncio.sleep(0.1)
        assert client.lens_refreshes >= 1  # type: ignore[attr-defined]
        after = await client.text_document_code_lens_async(params)
        assert after is not None
        assert {lens.range.start.line for lens in after} == {0, 4, 9}
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_neovim_07_gets_no_refresh_or_show_document(world: World) -> None:
    client = await start_client(world, "neovim@v0.7.0")
    try:
        uri = open_doc(client, world, BUFFER)
        assert "Raised BODY\\_BUFFER" in hover_text(await hover(client, uri, 42))
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(commands.SHOW_MEMORIES, [{"uri": uri, "lines": [42, 42]}])
        )
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(commands.REFRESH, [{}])
        )
        await asyncio.sleep(0.2)
        assert client.shown_documents == []
        assert any("Raised BODY_BUFFER" in m.message for m in client.messages)
        assert client.lens_refreshes == 0  # type: ignore[attr-defined]
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_project_option_scopes_lookups(world: World) -> None:
    client = await start_client(
        world,
        "visual-studio-code",
        {"poimenMemory": {"dsn": world.dsn, "project": "another-project"}},
    )
    try:
        uri = open_doc(client, world, BUFFER)
        assert await hover(client, uri, 42) is None
    finally:
        await client.shutdown_session()
        await client.stop()
    assert PROJECT != "another-project"


async def test_cold_code_lens_reports_progress_and_logs_reach_the_client(world: World) -> None:
    client = await start_client(
        world,
        "visual-studio-code",
        {"poimenMemory": {"dsn": world.dsn, "project": PROJECT, "logLevel": "info"}},
    )
    try:
        uri = open_doc(client, world, "src/kong/handler.rs")
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(types.TextDocumentIdentifier(uri))
        )
        assert lenses
        kinds = [p.kind for reports in client.progress_reports.values() for p in reports]  # type: ignore[attr-defined]
        assert kinds[0] == "begin"
        assert kinds[-1] == "end"
        await asyncio.sleep(0.5)
        assert any("poimen_memory" in m.message for m in client.log_messages)
    finally:
        await client.shutdown_session()
        await client.stop()


def test_the_first_request_of_each_method_finds_its_converter_ready() -> None:
    """cattrs writes (and compiles) a function per message type on first use: the server
    makes those of the methods it serves at start, so no first hover, lens or command waits
    for them (no code is generated while its messages are read and its results written)."""
    import linecache

    from poimen_memory.lsp.server import create_server

    server = create_server()
    converter = server.protocol._converter
    uri = {"uri": "file:///w/a.rs"}
    messages = {
        types.HoverRequest: {
            "method": types.TEXT_DOCUMENT_HOVER, "id": 1,
            "params": {"textDocument": uri, "position": {"line": 1, "character": 0}},
        },
        types.CodeLensRequest: {
            "method": types.TEXT_DOCUMENT_CODE_LENS, "id": 2, "params": {"textDocument": uri},
        },
        types.DidOpenTextDocumentNotification: {
            "method": types.TEXT_DOCUMENT_DID_OPEN,
            "params": {"textDocument": {**uri, "languageId": "rust", "version": 1, "text": ""}},
        },
        types.ExecuteCommandRequest: {
            "method": types.WORKSPACE_EXECUTE_COMMAND, "id": 3,
            "params": {"command": "mem.ping", "arguments": [{}]},
        },
    }  # fmt: skip
    generated = {name for name in linecache.cache if "cattrs generated" in name}
    for kind, message in messages.items():
        converter.structure({"jsonrpc": "2.0", **message}, kind)
    lens = types.CodeLens(types.Range(types.Position(0, 0), types.Position(0, 0)))
    converter.unstructure([lens], list[types.CodeLens])  # lenses: serialized once, by type
    converter.unstructure(types.HoverResponse(id=1, result=types.Hover(contents="x")))
    converter.unstructure(types.Hover(contents="x"), types.Hover)
    made = {name for name in linecache.cache if "cattrs generated" in name} - generated
    assert not made, f"made on first use: {sorted(made)}"


def test_a_server_start_up_heap_is_left_out_of_later_collections() -> None:
    """What start-up made goes to the collector's permanent generation: a full collection
    during the first request walked all of it (70 ms on a fresh server's first lens)."""
    import gc

    from poimen_memory.wiring import settle_heap

    before = gc.get_freeze_count()
    made = [[n] for n in range(1000)]  # objects of a start-up
    try:
        settle_heap()
        assert gc.get_freeze_count() >= before + len(made)
    finally:
        gc.unfreeze()


async def test_a_background_blame_does_not_outlive_the_server(world: World, tmp_path: Path) -> None:
    """A hover starts the file's whole-file blame in the background; git computes it before
    writing a byte. When the editor shuts the server down, that git ends with it."""
    real_git = shutil.which("git", path=os.environ.get("PATH"))
    assert real_git is not None
    pid_file = tmp_path / "whole-file-blame.pid"
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    shim = shim_dir / "git"
    # A whole-file blame (no -L) notes its pid and computes for a minute; the rest is git.
    shim.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" -L"*) ;; *" blame "*) echo $$ > "{pid_file}"; sleep 60 ;; esac\n'
        f'exec "{real_git}" "$@"\n'
    )
    shim.chmod(0o755)
    env = {**world.env, "PATH": f"{shim_dir}{os.pathsep}{world.env['PATH']}",
           "POIMEN_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    # No blame shared by the module's other servers: this one blames the file itself.
    options = {"poimenMemory": {"dsn": world.dsn, "project": PROJECT,
                                "blame": {"sharedCache": False}}}  # fmt: skip
    client = await start_client(world, "visual-studio-code", options, env=env)
    try:
        uri = open_doc(client, world, BUFFER)
        assert "Raised BODY\\_BUFFER" in hover_text(await hover(client, uri, 42))
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline, "the hover started no whole-file blame"
            await asyncio.sleep(0.05)
        git_pid = int(pid_file.read_text())
        os.kill(git_pid, 0)  # running
    finally:
        await client.shutdown_session()
        await client.stop()
    deadline = time.monotonic() + 10
    while running(git_pid):
        assert time.monotonic() < deadline, "the server's git kept running after it ended"
        await asyncio.sleep(0.05)
