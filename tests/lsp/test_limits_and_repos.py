"""The language server end to end: blame.maxFileBytes and blame.maxFileLines hold on every
hover and lens (the first, the next ones, and after a restart with a warm blame cache), and
``repo`` in a command's argument is a work tree's path or a repository identity alike."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from poimen_memory.lsp import commands

from ..gitrepo import ALICE
from .conftest import PROJECT, REPO, World, server_env, start_client

BUFFER = "src/kong/buffer.rs"


def _open(client: LanguageClient, world: World, text: str) -> str:
    uri = world.uri(BUFFER)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "rust", 1, text))
    )
    return uri


async def _hover(client: LanguageClient, uri: str, line: int) -> types.Hover | None:
    return await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line - 1, 0))
    )


async def _lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    return found or []


def _options(world: World, blame: dict[str, int]) -> dict[str, Any]:
    return {"poimenMemory": {"dsn": world.dsn, "project": PROJECT, "blame": blame}}


async def _answers(world: World, env: dict[str, str], blame: dict[str, int]) -> list[bool]:
    """Start a server with ``blame`` limits, open buffer.rs as HEAD has it: whether the hover
    on its remembered line shows the memory, three times, then whether its lenses show any,
    then whether a hover after an edit (the buffer no longer HEAD's text) shows it."""
    text = (world.kong.root / BUFFER).read_text()
    client = await start_client(world, "visual-studio-code", _options(world, blame), env)
    try:
        uri = _open(client, world, text)
        shown = [await _hover(client, uri, 42) is not None for _ in range(3)]
        shown.append(bool(await _lenses(client, uri)))
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
                        text="// typed\n",
                    )
                ],
            )
        )
        shown.append(await _hover(client, uri, 43) is not None)
        return shown
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.parametrize("setting", ["maxFileBytes", "maxFileLines"])
async def test_blame_limits_hold_on_every_hover_and_after_a_restart(
    world: World, setting: str
) -> None:
    data = (world.kong.root / BUFFER).read_bytes()
    size = len(data) if setting == "maxFileBytes" else data.count(b"\n")
    env = server_env(world)  # one blame cache for every server below: warm after the first
    over = {setting: size - 1}
    # A cold server: the first hover, the next ones, the lenses, a hover after an edit.
    assert await _answers(world, env, over) == [False] * 5
    # Within the limit (exactly at it) the memory shows, and the blame cache gets warm.
    assert await _answers(world, env, {setting: size + 9}) == [True] * 5
    # Restarted over the limit, with the blame cache warm: still nothing, every time.
    assert await _answers(world, env, over) == [False] * 5
    assert await _answers(world, env, over) == [False] * 5


async def _command(client: LanguageClient, command: str, argument: dict[str, Any]) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command, [argument])
    )


def _l0_texts(answer: dict[str, Any]) -> list[str]:
    return [n["text"].split("\n")[0] for n in answer["nodes"] if n["level"] == "L0"]


async def test_repo_is_a_work_tree_path_or_an_identity_in_commands(world: World) -> None:
    client = await start_client(world, "neovim", _options(world, {}))
    try:
        root = str(world.kong.root)
        for repo in (root, REPO, root + "/src/kong", "https://github.com/org/poimen.git"):
            by_git = await _command(
                client, commands.BY_GIT, {"file": BUFFER, "line": 42, "repo": repo}
            )
            assert _l0_texts(by_git) == [
                "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module."
            ], repo
            assert by_git["repo"] == REPO
            assert by_git["mapped"] is True
            by_author = await _command(
                client, commands.BY_AUTHOR, {"author": ALICE[1], "repo": repo}
            )
            assert _l0_texts(by_author) == _l0_texts(by_git), repo
            assert by_author["repo"] == REPO
        # A path outside every known work tree, and an identity known nowhere: errors naming
        # the field and the value, never an empty answer.
        outside = str(world.root / "elsewhere")
        arguments = {
            commands.BY_GIT: {"file": BUFFER, "line": 42},
            commands.BY_AUTHOR: {"author": ALICE[1]},
            commands.BY_COMMIT: {"commit_sha": world.kong.commits["abc123"]},
            commands.QUERY: {"query": "buffer"},
        }
        for command, argument in arguments.items():
            field = "git_repo" if command == commands.QUERY else "repo"
            for repo, words in (
                (outside, f"{outside!r} is not in a work tree known here (known: {root})"),
                ("github.com/nobody/nothing", "'github.com/nobody/nothing' is not known here"),
            ):
                with pytest.raises(JsonRpcException) as info:
                    await _command(client, command, {**argument, field: repo})
                assert info.value.code == -32602
                assert info.value.message.startswith(f"{field}: "), info.value.message
                assert words in info.value.message, info.value.message
    finally:
        await client.shutdown_session()
        await client.stop()
