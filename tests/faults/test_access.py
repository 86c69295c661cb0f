"""Access: a read-only role serves every lookup, projects never leak into each other, HTTP
binds loopback or demands a token, and secrets never reach the store."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import conninfo, sql

from poimen_memory.cli import build_parser
from poimen_memory.domain import ProjectId
from poimen_memory.http import create_app
from poimen_memory.lookup import build_service
from poimen_memory.operations import Services
from poimen_memory.store import Store

from ..conftest import admin_dsn
from .conftest import PROJECT, Faults, hover_text


@pytest.fixture(scope="module")
def readonly_dsn(faults: Faults) -> str:
    role = f"poimen_ro_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin_dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    printed = faults.mem("db", "grant-readonly", role)
    assert printed.returncode == 0, printed.stderr
    assert f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}";' in printed.stdout
    applied = faults.mem("db", "grant-readonly", role, "--apply")
    assert applied.returncode == 0, applied.stderr
    params = conninfo.conninfo_to_dict(faults.dsn)
    params["user"] = role
    return conninfo.make_conninfo(**params)


def test_read_path_works_under_a_readonly_role(faults: Faults, readonly_dsn: str) -> None:
    # CLI
    done = faults.mem(
        "--dsn",
        readonly_dsn,
        "by-git",
        "src/kong/buffer.rs:42",
        "--repo",
        str(faults.kong.root),
        "--project",
        PROJECT,
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nodes"][0]["text"].startswith("Raised BODY_BUFFER")
    # LSP
    client = faults.server({"poimenMemory": {"dsn": readonly_dsn, "project": PROJECT}})
    try:
        buffer = faults.kong.root / "src/kong/buffer.rs"
        uri = client.open(buffer, buffer.read_text())
        assert "Raised BODY\\_BUFFER" in hover_text(client.hover(uri, 42)[1])
        assert client.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
    finally:
        client.close()
    # HTTP
    with Store(readonly_dsn) as store:
        service = build_service(
            store, [faults.kong.root], ProjectId(PROJECT), cache_path=faults.root / "ro.db"
        )
        transport = httpx.ASGITransport(app=create_app(Services.over(service)))
        import asyncio

        async def call() -> httpx.Response:
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                return await http.post(
                    "/memory/nodes/by-git", json={"file": "src/kong/buffer.rs", "line": 42}
                )

        response = asyncio.run(call())
        assert response.status_code == 200
        assert response.json()["nodes"]
    # ...and that role cannot write.
    denied = faults.mem(
        "--dsn",
        readonly_dsn,
        "ingest",
        str(faults.root / "none.jsonl"),
        "--repo",
        str(faults.kong.root),
        "--project",
        PROJECT,
    )
    assert denied.returncode != 0


def test_a_server_for_one_project_never_returns_another(faults: Faults) -> None:
    other = f"other-{uuid.uuid4().hex[:6]}"
    done = faults.ingest(
        [{"type": "node", "level": "L0", "query_id": "q", "text": "Secret of the other project.", "anchors": [{"file": "src/kong/handler.rs", "line": 5}]}],
        other,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    client = faults.server()  # configured for PROJECT
    try:
        handler = faults.kong.root / "src/kong/handler.rs"
        uri = client.open(handler, handler.read_text())
        assert client.hover(uri, 5)[1] is None
        for command, argument in (
            ("mem.query", {"query": "secret other project"}),
            ("mem.byAuthor", {"author": "carol@org.test"}),
            ("mem.byGit", {"uri": uri, "line": 5}),
        ):
            result = client.request(
                "workspace/executeCommand", {"command": command, "arguments": [argument]}
            )
            assert "Secret of the other project." not in json.dumps(result), command
        # Asked for explicitly, it is there: the isolation is by project, not by accident.
        result = client.request(
            "workspace/executeCommand",
            {
                "command": "mem.query",
                "arguments": [{"query": "secret other project", "project": other}],
            },
        )
        assert result["nodes"]
    finally:
        client.close()


def test_http_binds_loopback_by_default_and_requires_a_token_elsewhere(faults: Faults) -> None:
    args = build_parser().parse_args(["http"])
    assert args.host == "127.0.0.1"
    refused = faults.mem("http", "--host", "0.0.0.0", "--port", "8799")
    assert refused.returncode == 2
    assert "requires" in refused.stderr or "token" in refused.stderr
    with Store(faults.dsn) as store:
        service = build_service(
            store, [faults.kong.root], ProjectId(PROJECT), cache_path=faults.root / "tok.db"
        )
        transport = httpx.ASGITransport(
            app=create_app(Services.over(service), token="s3cret-token")
        )
        import asyncio

        async def calls() -> list[int]:
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                body = {"commit_sha": faults.kong.commits["abc123"]}
                return [
                    (await http.post("/memory/nodes/by-commit", json=body)).status_code,
                    (
                        await http.post(
                            "/memory/nodes/by-commit",
                            json=body,
                            headers={"Authorization": "Bearer wrong"},
                        )
                    ).status_code,
                    (
                        await http.post(
                            "/memory/nodes/by-commit",
                            json=body,
                            headers={"Authorization": "Bearer s3cret-token"},
                        )
                    ).status_code,
                ]

        assert asyncio.run(calls()) == [401, 401, 200]


SECRETS = {
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
    "github-token": "ghp_" + "a1B2c3D4" * 5,
    "openai-key": "sk-proj-" + "Zx9" * 10,
    "anthropic-key": "sk-ant-api03-" + "Qw8" * 10,
    "slack-token": "xoxb-123456789012-abcdefghijkl",
    "stripe-key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "url-password": "hunter2-db-pass",
    "private-key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7fake\nfakekeymaterial==\n-----END RSA PRIVATE KEY-----",
    "assigned-secret": "correct-horse-battery",
}


def _texts(secret_lines: list[str]) -> str:
    return "\n".join(secret_lines)


def test_ingest_redacts_secrets_before_hashing_and_storing(faults: Faults, tmp_path: Path) -> None:
    lines = [
        f"export AWS_ACCESS_KEY_ID={SECRETS['aws-access-key']}",
        f"git remote set-url origin https://{SECRETS['github-token']}@github.com/org/x",
        f"OPENAI_KEY {SECRETS['openai-key']} and {SECRETS['anthropic-key']}",
        f"slack {SECRETS['slack-token']} stripe {SECRETS['stripe-key']}",
        f"Authorization: Bearer {SECRETS['jwt']}",
        f"DATABASE_URL=postgresql://app:{SECRETS['url-password']}@db.internal:5432/app",
        SECRETS["private-key"],
        f"db_password = '{SECRETS['assigned-secret']}'",
    ]
    project = f"redact-{uuid.uuid4().hex[:6]}"
    kept = f"keep-{uuid.uuid4().hex[:6]}"
    row = {"type": "node", "level": "L1", "query_id": "q", "text": _texts(lines)}
    assert faults.ingest([row], project).returncode == 0
    assert faults.ingest([row], kept, "--no-redact").returncode == 0
    with psycopg.connect(faults.dsn) as conn:
        (stored,) = conn.execute(
            "SELECT text FROM memory_node WHERE project = %s", (project,)
        ).fetchone() or ("",)
        (raw,) = conn.execute(
            "SELECT text FROM memory_node WHERE project = %s", (kept,)
        ).fetchone() or ("",)
    for kind, secret in SECRETS.items():
        assert secret not in stored, kind
        assert secret.splitlines()[0] in raw, kind
    for kind in (
        "aws-access-key",
        "github-token",
        "openai-key",
        "anthropic-key",
        "slack-token",
        "stripe-key",
        "private-key",
        "url-password",
    ):
        assert f"[REDACTED:{kind}]" in stored, kind
    assert "postgresql://app:[REDACTED:url-password]@db.internal" in stored
    # The structure around the secrets is kept for the reader.
    assert "export AWS_ACCESS_KEY_ID=" in stored
    assert "db.internal:5432/app" in stored
