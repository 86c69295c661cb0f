"""Server settings in every shape clients send them: nested objects, the flat keys VS Code
writes (``"poimenMemory.project"``) and both at once, in initializationOptions and in
workspace/configuration answers; an invalid value is reported once, naming key and value."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from poimen_memory.lsp.config import parse_config

from .conftest import PROJECT, World, server_env
from .test_server import BUFFER, hover, hover_text, open_doc


async def start(
    world: World, options: dict[str, Any], answer: object = None, spec: str = "visual-studio-code"
) -> LanguageClient:
    """A client sending ``options`` as initializationOptions, and ``answer`` for the
    "poimenMemory" section of workspace/configuration; returns once that has been asked."""
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "poimen_memory.cli", "lsp"],
        server_env=server_env(world),
    )
    client = await config.start()
    assert isinstance(client, LanguageClient)
    if answer is not None:
        client.set_configuration({"poimenMemory": answer})
    asked = asyncio.Event()
    answer_section = client.get_configuration

    def get_configuration(**kwargs: Any) -> Any:
        asked.set()
        return answer_section(**kwargs)

    client.get_configuration = get_configuration  # type: ignore[method-assign]
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(spec),
            root_uri=world.kong.root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=world.kong.root.as_uri(), name="kong")],
            initialization_options=options,
        )
    )
    await asyncio.wait_for(asked.wait(), 10)
    await asyncio.sleep(0.3)  # the answer is applied
    return client


async def stop(client: LanguageClient) -> None:
    await client.shutdown_session()
    await client.stop()


def messages(client: LanguageClient, needle: str = "") -> list[str]:
    return [m.message for m in client.messages if needle in m.message]


async def test_flat_keys_in_initialization_options_take_effect(world: World) -> None:
    client = await start(world, {"poimenMemory.dsn": world.dsn, "poimenMemory.project": PROJECT})
    try:
        uri = open_doc(client, world, BUFFER)
        assert "Raised BODY\\_BUFFER" in hover_text(await hover(client, uri, 42))
        assert messages(client) == []
    finally:
        await stop(client)
    # The project is read from its flat key: another project has no memory on that line.
    client = await start(
        world, {"poimenMemory.dsn": world.dsn, "poimenMemory.project": "another-project"}
    )
    try:
        assert await hover(client, open_doc(client, world, BUFFER), 42) is None
        assert messages(client) == []
    finally:
        await stop(client)


async def test_nested_and_mixed_keys(world: World) -> None:
    nested = {"poimenMemory": {"dsn": world.dsn, "project": PROJECT}}
    client = await start(world, nested, spec="neovim")
    try:
        assert "Raised BODY\\_BUFFER" in hover_text(
            await hover(client, open_doc(client, world, BUFFER), 42)
        )
        assert messages(client) == []
    finally:
        await stop(client)
    mixed = {
        "poimenMemory": {"project": PROJECT},
        "poimenMemory.dsn": world.dsn,
        "poimenMemory.hover": {"markup": "plaintext"},
        "editor.fontSize": 12,  # another extension's setting, not ours to report
    }
    client = await start(world, mixed)
    try:
        result = await hover(client, open_doc(client, world, BUFFER), 42)
        assert result is not None
        assert isinstance(result.contents, types.MarkupContent)
        assert result.contents.kind == types.MarkupKind.PlainText
        assert "Raised BODY_BUFFER" in result.contents.value
        assert messages(client) == []
    finally:
        await stop(client)


async def test_flat_keys_in_a_workspace_configuration_answer(world: World) -> None:
    options = {"poimenMemory": {"dsn": world.dsn, "project": PROJECT}}
    client = await start(world, options, answer={"poimenMemory.project": "another-project"})
    try:
        assert await hover(client, open_doc(client, world, BUFFER), 42) is None
        assert messages(client) == []
    finally:
        await stop(client)


async def test_an_invalid_value_is_reported_once(world: World) -> None:
    # As VS Code and Neovim do: the same settings as initializationOptions (flat here) and
    # in the workspace/configuration answer (nested there).
    options = {
        "poimenMemory.dsn": world.dsn,
        "poimenMemory.project": PROJECT,
        "poimenMemory.blame.maxFileBytes": "big",
    }
    answer = {"dsn": world.dsn, "project": PROJECT, "blame": {"maxFileBytes": "big"}}
    client = await start(world, options, answer=answer)
    try:
        assert messages(client, "maxFileBytes") == [
            "poimenMemory.blame.maxFileBytes: invalid value 'big'; using the default 2000000"
        ]
        # The default is in force: the file is blamed and hovers.
        uri = open_doc(client, world, BUFFER)
        assert "Raised BODY\\_BUFFER" in hover_text(await hover(client, uri, 42))
        # A new invalid value is reported, once, even given flat and nested together.
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={
                    "poimenMemory.hover.excerptLength": -5,
                    "poimenMemory": {"hover": {"excerptLength": -5}},
                }
            )
        )
        await asyncio.sleep(0.5)
        assert messages(client, "excerptLength") == [
            "poimenMemory.hover.excerptLength: invalid value -5; using the default 400"
        ]
        assert len(messages(client, "maxFileBytes")) == 1
    finally:
        await stop(client)


def test_parse_config_shapes() -> None:
    flat, problems = parse_config(
        {"poimenMemory.blame.maxFileBytes": 10, "poimenMemory.project": "p"}
    )
    nested, _ = parse_config({"poimenMemory": {"blame": {"maxFileBytes": 10}, "project": "p"}})
    partly, _ = parse_config(
        {"poimenMemory.blame": {"maxFileBytes": 10}, "poimenMemory": {"project": "p"}}
    )
    bare, _ = parse_config({"blame": {"maxFileBytes": 10}, "project": "p"})
    assert problems == []
    assert flat == nested == partly == bare
    assert flat.blame.max_file_bytes == 10
    assert flat.project == "p"
    _, problems = parse_config({"poimenMemory.hover": 5, "poimenMemory.nope": 1, "poimenMemory": 3})
    assert sorted(problems) == [
        "poimenMemory.hover: expected an object, got 5",
        "poimenMemory.nope: unknown setting (ignored)",
        "poimenMemory: expected an object, got 3",
    ]
