"""Large files: a million-line file gets no lenses at once, 2,000 edits to it do not hold up
the server, an edited file of repeated lines maps to HEAD in linear time, and edits queued
by the server make exactly the text the editor has."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from bench.lspclient import LspClient
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from poimen_memory.lsp.buffers import Buffer, apply_changes, count_breaks

from ..gitrepo import BOB, FixtureRepo
from .conftest import PROJECT, Faults, hover_text

MILLION = 1_000_000
REPEATED = 18_000
ANCHOR = 9_001  # "fn item_90() {" in repeated.rs: a unique line among repeated ones


def _repeated_lines() -> list[str]:
    """Code-like: a unique line every 100 lines, the same body line everywhere else."""
    return [
        f"fn item_{i // 100}() {{\n" if i % 100 == 0 else "    step();\n" for i in range(REPEATED)
    ]


@pytest.fixture(scope="module")
def large(faults: Faults, tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    repo = FixtureRepo.create(
        tmp_path_factory.mktemp("large") / "large", "git@github.com:org/large.git"
    )
    # 1,000,000 lines in exactly 2,000,000 bytes: within the default blame.maxFileBytes.
    repo.write("million.txt", "".join(chr(97 + i % 26) + "\n" for i in range(MILLION)))
    repo.write("repeated.rs", "".join(_repeated_lines()))
    repo.write("small.rs", "".join(f"let v{i} = {i};\n" for i in range(1, 11)))
    repo.commit("large", "Add large files", BOB)
    rows = [
        {"type": "node", "id": "r", "level": "L0", "query_id": "q-rep", "text": "Item 90 is where the loop starts.", "anchors": [{"file": "repeated.rs", "line": ANCHOR}], "created_at": "2026-08-20T07:00:00Z"},
        {"type": "node", "id": "s", "level": "L0", "query_id": "q-small", "text": "v5 is five on purpose.", "anchors": [{"file": "small.rs", "line": 5}], "created_at": "2026-08-20T07:00:00Z"},
    ]  # fmt: skip
    src = faults.root / f"large-{uuid.uuid4().hex[:6]}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = faults.mem("ingest", str(src), "--repo", str(repo.root), "--project", PROJECT)
    assert done.returncode == 0, done.stderr
    return repo


def _server(faults: Faults, large: FixtureRepo, **settings: Any) -> LspClient:
    options = {"poimenMemory": {"dsn": faults.dsn, "project": PROJECT, **settings}}
    return faults.server(options=options, root=large.root)


@pytest.fixture
def server(faults: Faults, large: FixtureRepo) -> Iterator[LspClient]:
    client = _server(faults, large)
    yield client
    client.close()


def _ping(client: LspClient, timeout: float = 60) -> float:
    started = time.perf_counter()
    assert client.request(
        "workspace/executeCommand", {"command": "mem.ping", "arguments": []}, timeout
    )["version"]
    return time.perf_counter() - started


def _change(client: LspClient, uri: str, version: int, changes: list[dict[str, Any]]) -> None:
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes},
    )


def _edit(line: int, char: int, end_line: int, end_char: int, text: str) -> dict[str, Any]:
    return {
        "range": {
            "start": {"line": line, "character": char},
            "end": {"line": end_line, "character": end_char},
        },
        "text": text,
    }


@pytest.mark.slow
def test_a_million_line_file_gets_no_lenses_at_once(server: LspClient, large: FixtureRepo) -> None:
    path = large.root / "million.txt"
    assert path.stat().st_size <= 2_000_000
    _ping(server)
    rss_before = server.rss_bytes()
    uri = server.open(path, path.read_text())
    started = time.perf_counter()
    lenses = server.request("textDocument/codeLens", {"textDocument": {"uri": uri}}, timeout=10)
    elapsed = time.perf_counter() - started
    assert lenses in (None, [])
    assert elapsed < 2, elapsed  # over blame.maxFileLines: not blamed at all
    assert server.hover(uri, 500_000)[1] is None
    assert server.rss_bytes() - rss_before < 100 * 1024 * 1024
    assert _ping(server) < 1


@pytest.mark.slow
def test_two_thousand_edits_to_a_million_line_file_keep_ping_fast(
    server: LspClient, large: FixtureRepo
) -> None:
    path = large.root / "million.txt"
    uri = server.open(path, path.read_text())
    _ping(server)
    for k in range(2_000):
        line = 500_000 + k // 10
        # Typing, with a new line every tenth keystroke (the line count changes too).
        text = "\n" if k % 10 == 9 else "z"
        _change(server, uri, k + 2, [_edit(line, 1, line, 1, text)])
    assert _ping(server) < 1
    # Still answering documents afterwards, and still without lenses for it.
    assert server.request("textDocument/codeLens", {"textDocument": {"uri": uri}}, 10) in (
        None,
        [],
    )


@pytest.mark.slow
def test_max_file_lines_refuses_a_file_over_it(faults: Faults, large: FixtureRepo) -> None:
    path = large.root / "small.rs"
    for limit, expected in ((9, False), (10, True)):
        client = _server(faults, large, blame={"maxFileLines": limit})
        try:
            uri = client.open(path, path.read_text())
            hover = client.hover(uri, 5)[1]
            lenses = client.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
            if expected:
                assert "v5 is five" in hover_text(hover)
                assert lenses
            else:
                assert hover is None
                assert lenses in (None, [])
        finally:
            client.close()
    # The buffer counts too: HEAD within the limit, the buffer over it.
    client = _server(faults, large, blame={"maxFileLines": 10})
    try:
        uri = client.open(path, path.read_text() + "let extra = 0;\n")
        assert client.hover(uri, 5)[1] is None
    finally:
        client.close()


@pytest.mark.slow
def test_max_file_lines_rejects_bad_values_by_name(faults: Faults, large: FixtureRepo) -> None:
    for bad in (0, "100", 1.5):
        client = _server(faults, large, blame={"maxFileLines": bad})
        try:
            _ping(client)
            messages = [p["message"] for m, p in client.notifications if m == "window/showMessage"]
            expected = f"poimenMemory.blame.maxFileLines: invalid value {bad!r}"
            assert any(m.startswith(expected) for m in messages), messages
        finally:
            client.close()


@pytest.mark.slow
def test_an_edited_file_of_repeated_lines_maps_quickly(
    server: LspClient, large: FixtureRepo
) -> None:
    path = large.root / "repeated.rs"
    uri = server.open(path, path.read_text())
    assert "Item 90" in hover_text(server.hover(uri, ANCHOR)[1])
    # Edits at the top, in the middle and at the bottom: the common prefix and suffix are
    # short and the middle is almost all one repeated line.
    _change(server, uri, 2, [_edit(1, 0, 1, 0, "// typed at the top\n")])
    _change(server, uri, 3, [_edit(5_001, 4, 5_001, 4, "// changed ")])
    _change(server, uri, 4, [_edit(REPEATED - 1, 0, REPEATED - 1, 0, "// typed at the end\n")])
    elapsed, hover = server.hover(uri, ANCHOR + 1)
    assert "Item 90" in hover_text(hover)
    assert elapsed < 1, elapsed
    assert server.hover(uri, 2)[1] is None  # the typed line has no origin
    lenses = server.request("textDocument/codeLens", {"textDocument": {"uri": uri}}, 10)
    assert [lens["range"]["start"]["line"] for lens in lenses] == [0, ANCHOR]


@pytest.mark.slow
def test_incremental_edits_keep_the_buffer_exact(server: LspClient, large: FixtureRepo) -> None:
    path = large.root / "small.rs"
    uri = server.open(path, path.read_text())
    edits = [
        _edit(0, 0, 0, 0, "// typed\n"),  # line 0 is new
        _edit(1, 0, 1, 0, "a\nb\nc\n"),  # three lines in front of v1
        _edit(2, 0, 4, 0, ""),  # two of them removed again, across lines
        _edit(11, 3, 11, 6, "eleven"),  # v10's line, within the line
        _edit(12, 0, 12, 0, "tail\n"),  # at the very end
        # On v5's line: an emoji (two UTF-16 units), an "x" after it, then both removed. The
        # line is HEAD's again only if columns are counted in UTF-16 units.
        _edit(6, 0, 6, 0, "\U0001f600"),
        _edit(6, 2, 6, 2, "x"),
        _edit(6, 0, 6, 3, ""),
    ]
    for version, edit in enumerate(edits, start=2):
        _change(server, uri, version, [edit])
    # "// typed", "a", then v1..v10 (shifted by 2), then "tail".
    assert "v5 is five" in hover_text(server.hover(uri, 5 + 2)[1])
    assert server.hover(uri, 5 + 1)[1] is None  # v4: no memory
    assert server.hover(uri, 1)[1] is None  # typed
    # The whole document replaced (a client may send the full text at any time).
    _change(server, uri, 20, [{"text": "let v0 = 0;\n" + path.read_text()}])
    assert "v5 is five" in hover_text(server.hover(uri, 6)[1])
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert "v5 is five" in hover_text(server.hover(uri, 5)[1])  # closed: the file on disk


# -- the edits a Buffer queues, against the editor's text -------------------------------------


def _offset(text: str, line: int, character: int) -> int:
    """Where an LSP position (UTF-16 columns) is in ``text``, the slow and obvious way."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    content = text[start:end].rstrip("\r\n")
    units = 0
    for index, char in enumerate(content):
        if units >= character:
            return start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(content)


def _edited(text: str, change: types.TextDocumentContentChangeEvent) -> str:
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return change.text
    start, end = change.range.start, change.range.end
    a, b = _offset(text, start.line, start.character), _offset(text, end.line, end.character)
    a, b = min(a, b), max(a, b)
    return text[:a] + change.text + text[b:]


texts = st.text(alphabet="ab\r\n\U0001f600\u00e9\x0c\u2028", max_size=30)
positions = st.builds(types.Position, st.integers(0, 7), st.integers(0, 7))
changes = st.one_of(
    st.builds(
        types.TextDocumentContentChangePartial,
        st.builds(types.Range, positions, positions),
        texts,
    ),
    st.builds(types.TextDocumentContentChangeWholeDocument, texts),
)


@settings(max_examples=400, deadline=None)
@given(texts, st.lists(changes, max_size=8))
def test_queued_changes_make_the_editors_text(text: str, edits: list[Any]) -> None:
    expected = text
    for change in edits:
        expected = _edited(expected, change)
    assert apply_changes(text, edits) == expected


@settings(max_examples=200, deadline=None)
@given(texts, st.lists(st.tuples(changes, st.booleans()), max_size=10))
def test_a_buffer_read_between_edits_stays_exact(text: str, steps: list[Any]) -> None:
    buffer = Buffer("file:///tmp/x.txt", text, 1)
    expected = text
    for change, read in steps:
        buffer.apply_change(change)
        expected = _edited(expected, change)
        if read:
            assert buffer.source == expected
            assert buffer.line_breaks == count_breaks(expected)
    assert buffer.source == expected
