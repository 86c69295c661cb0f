"""The DSN's password never reaches a message: not on the command line, not in the editor's
pop-up, not in an HTTP answer, whether the DSN parses or not."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from lsprotocol import types
from psycopg import conninfo
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from ..serving import free_port, wait_until_healthy
from ..tcpproxy import TcpProxy
from .conftest import PROJECT, Faults

SECRET = "s3cret"

# DSNs that do not parse, and DSNs that parse but name a server that does not answer.
BAD_DSNS = [
    f"postgresql://u:{SECRET}@h/db%zz",
    f"postgresql://u:{SECRET}%zz@h/db",
    f"host=h password={SECRET} port",
    f"host=h password='{SECRET}",
    f"host=h password='{SECRET} x' bogus",
    f"postgresql://u@h/db?sslpassword={SECRET}&nope=%zz",
    f"host=h passfile=/home/u/{SECRET}.pgpass =x",
    f"host=127.0.0.1 port=x password={SECRET}",
    f"host=127.0.0.1 port=1 password={SECRET}",
    f"host=127.0.0.1 port=1 dbname=postgresql://u:{SECRET}@h/db",
    f"postgresql://u:{SECRET}@127.0.0.1:1/db?connect_timeout=2",
]


@pytest.mark.parametrize("dsn", BAD_DSNS)
def test_the_cli_never_shows_the_dsn_password(faults: Faults, dsn: str) -> None:
    for args, env in (
        (["--dsn", dsn, "db", "status"], {}),
        (["db", "status"], {"POIMEN_DSN": dsn}),
        (["--version"], {"POIMEN_DSN": dsn}),
    ):
        done = faults.mem(*args, env=env, timeout=60)
        shown = done.stdout + done.stderr
        assert SECRET not in shown, (args, shown)
        if args != ["--version"]:
            assert done.returncode in (1, 2), shown
            assert done.stderr.count("\n") == 1, shown
            assert "Traceback" not in shown


def test_a_config_file_dsn_is_redacted_too(faults: Faults) -> None:
    config = faults.root / f"secret-{uuid.uuid4().hex[:6]}.toml"
    config.write_text(f'dsn = "postgresql://u:{SECRET}@h/db%zz"\n')
    done = faults.mem("db", "status", env={"POIMEN_DSN": "", "POIMEN_CONFIG": str(config)})
    assert done.returncode == 2
    assert SECRET not in done.stderr
    assert str(config) in done.stderr


async def _messages(faults: Faults, dsn: str) -> list[str]:
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "poimen_memory.cli", "lsp"],
        server_env={
            **faults.env,
            "POIMEN_CACHE_DIR": str(faults.root / f"c-{uuid.uuid4().hex[:6]}"),
        },
    )
    client = await config.start()
    assert isinstance(client, LanguageClient)
    try:
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=faults.kong.root.as_uri(),
                initialization_options={"poimenMemory": {"dsn": dsn, "project": PROJECT}},
            )
        )
        buffer = faults.kong.root / "src/kong/buffer.rs"
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(buffer.as_uri(), "rust", 1, buffer.read_text())
            )
        )
        await client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(buffer.as_uri()), types.Position(41, 0))
        )
        deadline = time.monotonic() + 5
        while not client.messages and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return [m.message for m in client.messages] + [m.message for m in client.log_messages]
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.parametrize("dsn", [BAD_DSNS[0], BAD_DSNS[1], BAD_DSNS[3], BAD_DSNS[5], BAD_DSNS[9]])
async def test_the_editor_pop_up_never_shows_the_dsn_password(faults: Faults, dsn: str) -> None:
    shown = await _messages(faults, dsn)
    assert shown, "no message about the bad DSN"
    assert any("poimenMemory.dsn" in m or "unreachable" in m for m in shown), shown
    for message in shown:
        assert SECRET not in message, message


def test_http_never_shows_the_dsn_password(faults: Faults) -> None:
    # One that does not parse: refused at start, redacted.
    refused = faults.mem("http", "--dsn", BAD_DSNS[0], "--port", str(free_port()))
    assert refused.returncode == 2
    assert SECRET not in refused.stderr
    # The store behind a proxy, with a password in the DSN: up, then gone while serving.
    params = conninfo.conninfo_to_dict(faults.dsn)
    proxy = TcpProxy(str(params.get("host", "127.0.0.1")), int(params.get("port", 5432)))
    secret = str(params.get("password") or SECRET)
    params.update(host="127.0.0.1", port=str(proxy.port), password=secret)
    dsn = conninfo.make_conninfo(**params)
    port = free_port()
    log = faults.root / "http-secret.log"
    with log.open("wb") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "poimen_memory.cli", "http", "--port", str(port), "--repo", str(faults.kong.root),
             "--project", PROJECT, "--dsn", dsn],
            env=faults.env, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, server, log)  # the proxy is not started: it serves all the same
        early = httpx.get(f"{url}/memory/query", params={"query": "buffer"}, timeout=20)
        assert early.status_code == 503, early.text
        assert secret not in early.text
        proxy.start()
        deadline = time.monotonic() + 10
        while (
            ok := httpx.get(f"{url}/memory/query", params={"query": "buffer"}, timeout=20)
        ).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ok.status_code == 200, ok.text
        proxy.stop()
        answers = [
            httpx.get(f"{url}/memory/query", params={"query": "handler"}, timeout=20),
            httpx.post(f"{url}/memory/nodes/by-commit", json={"commit_sha": "abcd"}, timeout=20),
            httpx.post(
                f"{url}/memory/nodes/by-git",
                json={"file": "src/kong/handler.rs", "line": 10},
                timeout=20,
            ),
        ]
        for answer in answers:
            assert answer.status_code == 503, answer.text
            assert secret not in answer.text
    finally:
        proxy.stop()
        server.terminate()
        server.wait(10)
    assert secret not in log.read_text()


@pytest.mark.parametrize(
    ("dsn", "kept", "secret"),
    [
        ("postgresql://bob:hunter2@db.internal:6543/mem", "postgresql://bob:***@db.internal:6543/mem", "hunter2"),
        ("postgres://bob:hun:ter2@db/x", "postgres://bob:***@db/x", "hun:ter2"),
        ("postgresql://bob:hun/t@r2@db/x", "postgresql://bob:***@db/x", "hun/t@r2"),
        ("postgresql://bob:hunter%7A@db/x", "postgresql://bob:***@db/x", "hunterz"),
        ("postgresql://bob@db/x?password=hunter2&sslmode=require", "postgresql://bob@db/x?password=***&sslmode=require", "hunter2"),
        ("postgresql://db/x?sslpassword=hunter2&passfile=/p/hunter2", "postgresql://db/x?sslpassword=***&passfile=***", "/p/hunter2"),
        ("host=db password=hunter2 port=5", "host=db password=*** port=5", "hunter2"),
        ("host=db password = 'hun ter\\' 2' port=5", "host=db password = *** port=5", "hun ter' 2"),
        ("host=db password='hunter2", "host=db password=***", "hunter2"),
        ("host=db PassWord=hunter2", "host=db PassWord=***", "hunter2"),
        ("dbname=postgresql://u:hunter2@h/db", "dbname=postgresql://u:***@h/db", "hunter2"),
        ("host=db sslpassword=hunter2 passfile=/x/hunter2", "host=db sslpassword=*** passfile=***", "/x/hunter2"),
        ("host=db password=ab", "host=db password=***", "ab"),
    ],
)  # fmt: skip
def test_redact_dsn_by_pattern(dsn: str, kept: str, secret: str) -> None:
    from poimen_memory.settings import redact_dsn

    assert redact_dsn(dsn) == kept
    for message in (f"error in {dsn!r}: bad", f'invalid percent-encoded token: "{secret}"'):
        assert secret not in redact_dsn(message, dsn), message
