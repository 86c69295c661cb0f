"""Arbitrary input at every command, malformed JSON-RPC frames, and awkward files."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.lspclient import LspClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poimen_memory.lsp import commands

from ..gitrepo import BOB, FixtureRepo
from .conftest import Faults, hover_text

INVALID_PARAMS = -32602

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50)
    | st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3)
    | st.just("--upload-pack=touch /tmp/pwned")
    | st.just("x" * 100_000),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
KEYS = [
    "file",
    "line",
    "lines",
    "repo",
    "commit_sha",
    "author",
    "query",
    "git_repo",
    "limit",
    "project",
    "uri",
    "at",
]
plausible = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5)


@pytest.fixture(scope="module")
def shared_server(faults: Faults) -> Iterator[LspClient]:
    client = faults.server()
    yield client
    client.close()


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    command=st.sampled_from(commands.ALL), arguments=st.lists(plausible | json_values, max_size=2)
)
def test_arbitrary_arguments_never_crash_a_command(
    shared_server: LspClient, command: str, arguments: list[Any]
) -> None:
    reply = shared_server.wait(
        shared_server.send(
            "workspace/executeCommand", {"command": command, "arguments": arguments}
        ),
        timeout=30,
    )
    if "error" in reply:
        assert reply["error"]["code"] == INVALID_PARAMS, reply["error"]
        assert "traceback" not in json.dumps(reply["error"]).lower()
    else:
        assert isinstance(reply["result"], dict)
    assert shared_server.proc.poll() is None


def test_malformed_frames_do_not_kill_the_server(faults: Faults) -> None:
    client = faults.server()
    try:
        bodies = [
            b"{not json}",
            b'{"jsonrpc": "2.0"}',
            b'{"jsonrpc":"2.0","id":99,"method":"no/such/method"}',
            b'{"jsonrpc":"2.0","id":"a","method":"textDocument/hover","params":7}',
            b'{"jsonrpc":"2.0","id":5,"method":"workspace/executeCommand","params":{"command":3}}',
            b"[1, 2, 3]",
            '{"jsonrpc":"2.0","method":"\u00e9"}'.encode(),
        ]
        for body in bodies:
            # Honest lengths, dishonest contents: a lying length would desynchronise any
            # LSP stream, which is framing, not input.
            client.write_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        result = client.request(
            "workspace/executeCommand", {"command": "mem.ping", "arguments": [{}]}
        )
        assert result["version"]
        assert client.proc.poll() is None
    finally:
        client.close()


@pytest.fixture(scope="module")
def odd_repo(faults: Faults, tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path_factory.mktemp("odd") / "odd", "git@github.com:org/odd.git")
    repo.write(
        "huge.txt", "".join(f"line {i:06d} of a large generated file\n" for i in range(100_000))
    )
    repo.write("logo.bin", bytes(range(256)) * 64)
    repo.write("latin1.txt", "caf\xe9 au lait\nna\xefve\n".encode("latin-1"))
    repo.write("crlf.txt", "one\r\ntwo\r\nthree\r\n")
    for name in ("with space.txt", "-leading-dash.txt", "ünïcödé.txt", "new\nline.txt"):
        repo.write(f"names/{name}", "first\nsecond\n")
    repo.commit("odd", "Add odd files", BOB)
    outside = repo.root.parent / "secret.txt"
    outside.write_text("top secret\n")
    os.symlink(outside, repo.root / "escape.txt")
    return repo


@pytest.mark.slow
def test_awkward_files_get_defined_answers(faults: Faults, odd_repo: FixtureRepo) -> None:
    client = faults.server(root=odd_repo.root)
    try:
        outside = odd_repo.root.parent / "outside.txt"
        outside.write_text("not in any repository\n")
        cases: dict[str, Path] = {
            "huge": odd_repo.root / "huge.txt",
            "binary": odd_repo.root / "logo.bin",
            "latin1": odd_repo.root / "latin1.txt",
            "crlf": odd_repo.root / "crlf.txt",
            "symlink-out": odd_repo.root / "escape.txt",
            "outside": outside,
            **{
                name: odd_repo.root / "names" / name for name in os.listdir(odd_repo.root / "names")
            },
        }
        for label, path in cases.items():
            text = path.read_bytes().decode("utf-8", "replace")
            uri = client.open(path, text)
            hover = client.hover(uri, 2)[1]
            lenses = client.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
            # No memories anywhere here: every answer is null or empty, never an error.
            assert hover is None, label
            assert lenses in (None, []), label
        # Over blame.maxFileBytes: no blame is even attempted (no lenses, quickly).
        assert (odd_repo.root / "huge.txt").stat().st_size > 2_000_000
        assert client.proc.poll() is None
        assert "top secret" not in (faults.root / "server.log").read_text(errors="replace")
    finally:
        client.close()


def test_hover_on_memory_after_awkward_files(faults: Faults) -> None:
    client = faults.server()
    try:
        buffer = faults.kong.root / "src/kong/buffer.rs"
        uri = client.open(buffer, buffer.read_text())
        assert "Raised BODY\\_BUFFER" in hover_text(client.hover(uri, 42)[1])
    finally:
        client.close()
