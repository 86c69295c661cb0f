"""Lines typed in the middle of a file, between two lines with memories: the typed line has
none, the others keep theirs where they moved to, hovers and lenses alike. And memories whose
anchors only partly overlap the lines asked for: exactly which lines each one is on, in a
by-git range (LSP and CLI), in the whole file, and in the code lenses' blocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from poimen_memory.lsp import commands

from ..gitrepo import BOB, CAROL, FixtureRepo
from .conftest import PROJECT, World
from .test_server import hover, open_doc

TYPING = "src/typing.rs"
LEDGER = "src/ledger.rs"
REPO = "github.com/org/ledger"

UPPER = "The upper guard: checked before the lower one, never after."
LOWER = "The lower guard: runs only once the upper one has passed."
# Anchored in the first commit, as lines of that commit: lines 10-14 (line 13 rewritten by
# a later commit, so no longer its), 16, 18-25 and 5-8.
TEN = "Steps ten to fourteen settle the ledger."
SIXTEEN = "Step sixteen posts the totals."
EIGHTEEN = "Steps eighteen to twenty-five close the period."
FIVE = "Steps five to eight open the period."


def code(prefix: str, n: int) -> str:
    return "".join(f"    let {prefix}_{i:02} = {i};\n" for i in range(1, n + 1))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> World:
    """A repository of its own: typing.rs (memories on lines 20 and 21) and ledger.rs
    (memories on overlapping ranges of its first commit), in the project PROJECT."""
    root = tmp_path_factory.mktemp("typing")
    repo = FixtureRepo.create(root / "ledger", "git@github.com:org/ledger.git")
    repo.write(TYPING, code("guard", 40))
    repo.write(LEDGER, code("step", 40))
    first = repo.commit("initial", "Initial ledger", CAROL)
    repo.set_line(LEDGER, 13, "    let step_13 = reworked();")
    repo.commit("rework", "Rework step 13", BOB)
    env = {k: v for k, v in os.environ.items() if k not in ("POIMEN_DSN", "POIMEN_PROJECT")}
    env["POIMEN_CONFIG"] = str(root / "no-config.toml")
    w = World(root, repo, store_dsn, root / "no-git-log", root, env)
    at_first = {"file": LEDGER, "commit": first}

    def node(text: str, anchor: dict[str, Any]) -> dict[str, Any]:
        return {"type": "node", "level": "L0", "query_id": f"q-{len(text)}", "text": text,
                "anchors": [anchor], "created_at": "2026-08-20T07:00:00Z"}  # fmt: skip

    w.ingest(
        [
            node(UPPER, {"file": TYPING, "line": 20}),
            node(LOWER, {"file": TYPING, "line": 21}),
            node(TEN, {**at_first, "lines": [10, 14]}),
            node(SIXTEEN, {**at_first, "line": 16}),
            node(EIGHTEEN, {**at_first, "lines": [18, 25]}),
            node(FIVE, {**at_first, "lines": [5, 8]}),
        ]
    )
    return w


async def hovered(client: LanguageClient, uri: str, line: int, texts: list[str]) -> list[str]:
    """Which of ``texts`` the hover on ``line`` shows ([] for no hover)."""
    result = await hover(client, uri, line)
    if result is None:
        return []
    assert isinstance(result.contents, types.MarkupContent)
    shown = result.contents.value.replace("\\", "")
    found = [t for t in texts if t in shown]
    assert found, shown  # a hover shows some memory
    return found


async def lens_blocks(client: LanguageClient, uri: str) -> dict[int, tuple[str, list[int]]]:
    """Each block lens: its 1-based line -> (title, the lines it shows)."""
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    assert lenses is not None
    blocks = {}
    for lens in lenses:
        assert lens.command is not None
        argument = (lens.command.arguments or [{}])[0]
        assert isinstance(argument, dict)
        if "lines" in argument:
            blocks[lens.range.start.line + 1] = (lens.command.title, argument["lines"])
    return blocks


def type_line(client: LanguageClient, uri: str, version: int, before: int, text: str) -> None:
    """Type ``text`` as a new line before 1-based line ``before``."""
    at = types.Position(before - 1, 0)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text + "\n")
            ],
        )
    )


# -- typing in the middle ----------------------------------------------------------------------


async def test_a_line_typed_between_two_remembered_lines_has_no_memory(
    client: LanguageClient, world: World
) -> None:
    uri = open_doc(client, world, TYPING)
    both = [UPPER, LOWER]

    async def check(upper: int, lower: int, typed: list[int]) -> None:
        assert await hovered(client, uri, upper, both) == [UPPER]
        assert await hovered(client, uri, lower, both) == [LOWER]
        for line in typed:
            assert await hovered(client, uri, line, both) == [], line
        blocks = await lens_blocks(client, uri)
        if lower == upper + 1:  # adjacent: one block of two memories
            assert {k: v[1] for k, v in blocks.items()} == {upper: [upper, lower]}
            assert blocks[upper][0].startswith("2 memories · Carol")
        else:
            assert {k: v[1] for k, v in blocks.items()} == {
                upper: [upper, upper],
                lower: [lower, lower],
            }
            assert all(title.startswith("1 memory · Carol") for title, _ in blocks.values())

    await check(20, 21, [])
    # Just below the upper line and just above the lower one.
    type_line(client, uri, 2, 21, "    let typed_between = 0;")
    await check(20, 22, [21])
    # Higher up in the middle of the file: both move down by one.
    type_line(client, uri, 3, 10, "    let typed_higher = 0;")
    await check(21, 23, [10, 22])
    # Another just above the lower line, and one just below it.
    type_line(client, uri, 4, 23, "    let typed_above_lower = 0;")
    type_line(client, uri, 5, 25, "    let typed_below_lower = 0;")
    await check(21, 24, [10, 22, 23, 25])
    # Lines without memories around them have none either.
    for line in (9, 11, 20, 26):
        assert await hovered(client, uri, line, both) == [], line


# -- partly overlapping memories ---------------------------------------------------------------

ALL = [TEN, SIXTEEN, EIGHTEEN, FIVE]
# Current line -> the memories on it (line 13 is the later commit's: none).
ON_LINE = {
    **{line: [FIVE] for line in (5, 6, 7, 8)},
    **{line: [TEN] for line in (10, 11, 12, 14)},
    16: [SIXTEEN],
    **{line: [EIGHTEEN] for line in range(18, 26)},
}


def lines_by_text(response: dict[str, Any]) -> dict[str, list[int]]:
    """Each L0 memory of a response and the lines it is on."""
    return {n["text"]: n.get("lines") for n in response["nodes"] if n["level"] == "L0"}


async def test_partly_overlapping_memories_keep_to_their_own_lines(
    client: LanguageClient, world: World
) -> None:
    uri = open_doc(client, world, LEDGER)
    for line in range(1, 41):
        assert await hovered(client, uri, line, ALL) == ON_LINE.get(line, []), line

    async def by_git(argument: dict[str, Any]) -> dict[str, list[int]]:
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                commands.BY_GIT, [{"file": LEDGER, "repo": REPO, **argument}]
            )
        )
        assert isinstance(result, dict)
        return lines_by_text(result)

    # The lines 12-20: each memory on the lines of the range its anchor covers, no others.
    assert await by_git({"lines": [12, 20]}) == {
        TEN: [12, 14],
        SIXTEEN: [16],
        EIGHTEEN: [18, 19, 20],
    }
    assert await by_git({"lines": [9, 10]}) == {TEN: [10]}
    assert await by_git({"lines": [13, 13]}) == {}
    # The whole file.
    assert await by_git({"line": 0}) == {
        TEN: [10, 11, 12, 14],
        SIXTEEN: [16],
        EIGHTEEN: list(range(18, 26)),
        FIVE: [5, 6, 7, 8],
    }


async def test_lens_blocks_of_partly_overlapping_memories(
    client: LanguageClient, world: World
) -> None:
    uri = open_doc(client, world, LEDGER)
    blocks = await lens_blocks(client, uri)
    assert {line: lines for line, (_, lines) in blocks.items()} == {
        5: [5, 8],
        10: [10, 12],
        14: [14, 14],
        16: [16, 16],
        18: [18, 25],
    }
    assert all(title.startswith("1 memory · Carol") for title, _ in blocks.values())
    # What each lens shows: its block's memory, on the block's lines.
    shown = {}
    for line, (_, lines) in blocks.items():
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(commands.SHOW_MEMORIES, [{"uri": uri, "lines": lines}])
        )
        assert isinstance(result, dict)
        shown[line] = lines_by_text(result)
    assert shown == {
        5: {FIVE: [5, 6, 7, 8]},
        10: {TEN: [10, 11, 12]},
        14: {TEN: [14]},
        16: {SIXTEEN: [16]},
        18: {EIGHTEEN: list(range(18, 26))},
    }


def test_cli_by_git_range_puts_partly_overlapping_memories_on_their_lines(world: World) -> None:
    def by_git(location: str) -> dict[str, list[int]]:
        done = subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", "--dsn", world.dsn, "by-git", location,
             "--repo", str(world.kong.root), "--project", PROJECT, "--json"],
            env=world.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return lines_by_text(json.loads(done.stdout))

    assert by_git(f"{LEDGER}:12-20") == {TEN: [12, 14], SIXTEEN: [16], EIGHTEEN: [18, 19, 20]}
    assert by_git(f"{LEDGER}:24-30") == {EIGHTEEN: [24, 25]}
    assert by_git(f"{LEDGER}:1-6") == {FIVE: [5, 6]}
    assert by_git(LEDGER) == {
        TEN: [10, 11, 12, 14],
        SIXTEEN: [16],
        EIGHTEEN: list(range(18, 26)),
        FIVE: [5, 6, 7, 8],
    }
