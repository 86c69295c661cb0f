"""Input forged to get past the checks: page cursors (unsigned base64 JSON) with a NUL, an
integer out of range or a part of the wrong kind are refused naming ``cursor`` before any
query, and never name the store; a ``repo`` or ``file`` with ``..`` is taken as the path it
resolves to. The real CLI, a real ``mem http`` and the real server."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from psycopg import conninfo

from ..serving import mem_http
from .conftest import PROJECT, Faults

PREFIX = "c1."


@pytest.fixture(scope="module")
def paged(faults: Faults) -> str:
    """A project with two memories on one commit's line: by-commit and by-author page them."""
    project = f"paged-{uuid.uuid4().hex[:6]}"
    rows = [
        {"type": "node", "level": "L0", "query_id": f"q{i}", "text": f"Paged memory {i}.",
         "anchors": [{"file": "src/kong/buffer.rs", "line": 42}],
         "created_at": f"2026-08-20T07:0{i}:00Z"}
        for i in range(2)
    ]  # fmt: skip
    done = faults.ingest(rows, project)
    assert done.returncode == 0, done.stderr
    return project


def _commit(faults: Faults) -> str:
    return faults.kong.git("rev-parse", "HEAD~2").strip()


def _decode(token: str) -> list[Any]:
    body = token.removeprefix(PREFIX)
    value: list[Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return value


def _encode(parts: list[Any]) -> str:
    raw = json.dumps(parts, separators=(",", ":")).encode()
    return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _first_page(faults: Faults, project: str, *args: str) -> list[Any]:
    done = faults.mem(
        "--json", "--project", project, *args, "--limit", "1", "--repo", str(faults.kong.root)
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["truncated"], answer
    return _decode(answer["cursor"])


def _forgeries(real: list[Any]) -> Iterator[tuple[str, list[Any]]]:
    kind, lookup, after = real

    def at(i: int, value: Any) -> list[Any]:
        return [kind, lookup, [*after[:i], value, *after[i + 1 :]]]

    yield "NUL in the file", at(2, "src/kong/buffer.rs\x00x")
    yield "NUL in the repository", at(0, after[0] + "\x00")
    yield "line past int4", at(3, 2**31)
    yield "line past bigint", at(3, 2**70)
    yield "negative line", at(4, -5)
    yield "line as text", at(3, "42")
    yield "commit not hex", at(1, "zz" * 20)
    yield "node not a sha256", at(5, "x")
    yield "lone surrogate in the file", at(2, "\udc80")
    yield "fingerprint not hex", [kind, "\x00" * 16, after]
    if kind == "by-author":
        yield "BC date", at(6, "0001-01-01T00:00:00+14:00")
        yield "not a date", at(6, "yesterday")


def _names_no_store(faults: Faults, text: str) -> None:
    params = conninfo.conninfo_to_dict(faults.dsn)
    for part in (params.get("dbname"), f"port {params.get('port') or 5432}", "SQLSTATE"):
        assert str(part) not in text, text


@pytest.mark.parametrize("kind", ["by-commit", "by-author"])
def test_a_forged_cursor_is_refused_naming_cursor_in_the_cli(
    faults: Faults, paged: str, kind: str
) -> None:
    target = _commit(faults) if kind == "by-commit" else "alice@org.test"
    real = _first_page(faults, paged, kind, target)
    for what, forged in _forgeries(real):
        done = faults.mem(
            "--json", "--project", paged, kind, target, "--cursor", _encode(forged),
            "--repo", str(faults.kong.root),
        )  # fmt: skip
        assert done.returncode == 2, (what, done.stderr)
        assert done.stderr.startswith("mem: error: cursor: "), (what, done.stderr)
        assert "Traceback" not in done.stderr, (what, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (what, done.stderr)
        _names_no_store(faults, done.stderr)
    done = faults.mem(
        "--json", "--project", paged, kind, target, "--cursor", _encode(real),
        "--repo", str(faults.kong.root),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Paged memory" in done.stdout


def test_a_forged_cursor_is_refused_naming_cursor_over_http(faults: Faults, paged: str) -> None:
    log = faults.root / f"http-{uuid.uuid4().hex[:8]}.log"
    args = ("--repo", str(faults.kong.root), "--project", paged)
    with mem_http(args, faults.env, log) as base:
        first = httpx.post(
            f"{base}/memory/nodes/by-commit",
            json={"commit_sha": _commit(faults), "limit": 1},
            timeout=30,
        )
        assert first.json()["truncated"], first.text
        real = _decode(first.json()["cursor"])
        for what, forged in _forgeries(real):
            r = httpx.post(
                f"{base}/memory/nodes/by-commit",
                json={"commit_sha": _commit(faults), "limit": 1, "cursor": _encode(forged)},
                timeout=30,
            )
            assert r.status_code == 422, (what, r.text)
            assert r.json()["field"] == "cursor", (what, r.text)
            _names_no_store(faults, r.text)
        # The real cursor still gives the next page.
        r = httpx.post(
            f"{base}/memory/nodes/by-commit",
            json={"commit_sha": _commit(faults), "limit": 1, "cursor": _encode(real)},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        assert "Paged memory" in r.text


def _beside(faults: Faults) -> str:
    """A directory next to the served work tree, named through it with ``..``."""
    other = faults.root / f"other-{uuid.uuid4().hex[:6]}"
    other.mkdir()
    return f"{faults.kong.root}/../{other.name}"


def test_a_repo_path_with_dotdot_is_the_tree_it_resolves_to_over_http(faults: Faults) -> None:
    log = faults.root / f"http-{uuid.uuid4().hex[:8]}.log"
    args = ("--repo", str(faults.kong.root), "--project", PROJECT)
    with mem_http(args, faults.env, log) as base:
        r = httpx.post(
            f"{base}/memory/nodes/by-git",
            json={"file": "src/kong/buffer.rs", "line": 42, "repo": _beside(faults)},
            timeout=30,
        )
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "repo", r.text
        assert "Raised BODY" not in r.text
        # ``..`` that leads back into the served tree is that tree.
        back = f"{faults.kong.root}/src/../../{faults.kong.root.name}"
        r = httpx.post(
            f"{base}/memory/nodes/by-git",
            json={"file": "src/kong/buffer.rs", "line": 42, "repo": back},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        assert "Raised BODY" in r.text


def test_a_repo_path_with_dotdot_is_the_tree_it_resolves_to_in_the_editor(
    faults: Faults,
) -> None:
    client = faults.server()
    try:
        reply = client.wait(
            client.send(
                "workspace/executeCommand",
                {
                    "command": "mem.byGit",
                    "arguments": [
                        {"file": "src/kong/buffer.rs", "line": 42, "repo": _beside(faults)}
                    ],
                },
            ),
            timeout=60,
        )
        assert "error" in reply, reply
        assert reply["error"]["code"] == -32602, reply
        assert "repo" in reply["error"]["message"], reply
        assert "Raised BODY" not in json.dumps(reply)
    finally:
        client.close()
