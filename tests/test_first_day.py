"""A newcomer's first day, end to end through real `mem` processes: the demo never touches a
directory it did not make and builds the same commits every time; a store without its schema
says so in one line (the embedded one migrates itself); `mem http` starts with the store
down, answers 503 until it is back and says in /health how the store is; SIGTERM and SIGHUP
release the embedded Postgres; and the small things (a closed pipe, a missing newline, a
missing project, what `mem http` says at start)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from bench.lspclient import LspClient
from psycopg import conninfo

from poimen_memory.demo import DEMO_HEAD, MARKER, MARKER_TEXT
from poimen_memory.store import migrate
from poimen_memory.store import migrations as migrations_module

from .conftest import create_database, drop_database
from .embedded import ROOT_ENV, pgdata_of
from .gitrepo import FixtureRepo, kong_repo
from .serving import free_port
from .tcpproxy import TcpProxy

MEM = [sys.executable, "-m", "poimen_memory.cli"]
# Outside any work tree, with no project set: nothing decides it (the one project rule).
NO_PROJECT = (
    "project: required: no project is set (POIMEN_PROJECT, --project, the config file) and no "
    "single repository to derive it from"
)


def _env(root: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without any poimen-memory setting (but this run's directory
    for embedded stores run as root), and directories of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POIMEN_") or k == ROOT_ENV}
    env.update(
        POIMEN_CONFIG=str(root / "no-config.toml"),
        POIMEN_DATA_DIR=str(root / "data"),
        POIMEN_CACHE_DIR=str(root / "cache"),
    )
    env.update(extra)
    return env


def mem(
    *args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MEM, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed command prints (and nothing else: no traceback)."""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mem: error: "), done.stderr
    return lines[0].removeprefix("mem: error: ")


@pytest.fixture
def empty_db() -> Iterator[str]:
    """A database of its own with nothing in it: a new external store."""
    name, dsn = create_database("first_day_new")
    try:
        yield dsn
    finally:
        drop_database(name)


@pytest.fixture(scope="module")
def kong(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    return kong_repo(tmp_path_factory.mktemp("first-day") / "kong")


# -- 1 and 16: the demo's directory, and the demo's commits -------------------------------------


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file, link and directory under ``root`` (``.git`` included), with its content."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = path.read_bytes()
    return found


def _someones_repo(root: Path) -> FixtureRepo:
    repo = kong_repo(root)
    (repo.root / "notes.txt").write_text("uncommitted work\n")
    return repo


def test_demo_refuses_a_working_copy_and_leaves_it_alone(tmp_path: Path, store_dsn: str) -> None:
    repo = _someones_repo(tmp_path / "work")
    before = _snapshot(repo.root)
    env = _env(tmp_path, POIMEN_DSN=store_dsn)
    for args, cwd in (
        (["--dir", str(repo.root)], None),
        (["--dir", "."], repo.root),  # inside the repository
        (["--dir", "src/.."], repo.root),
    ):
        done = mem("demo", *args, env=env, cwd=cwd)
        assert done.returncode == 2, done.stderr
        message = one_error_line(done)
        assert message.startswith("--dir: "), message
        assert "is not empty and holds no demo" in message, message
        assert done.stdout == ""
    assert _snapshot(repo.root) == before


def test_demo_refuses_a_link_a_file_and_a_forged_marker(tmp_path: Path, store_dsn: str) -> None:
    env = _env(tmp_path, POIMEN_DSN=store_dsn)
    repo = _someones_repo(tmp_path / "work")
    link = tmp_path / "link"
    link.symlink_to(repo.root, target_is_directory=True)
    before = _snapshot(repo.root)
    done = mem("demo", "--dir", str(link), env=env)
    assert done.returncode == 2, done.stderr
    assert "is not empty and holds no demo" in one_error_line(done)
    assert link.is_symlink()

    # The marker copied into someone's repository does not make it the demo's.
    (repo.root / MARKER).write_text(MARKER_TEXT)
    forged = _snapshot(repo.root)
    done = mem("demo", "--dir", str(repo.root), env=env)
    assert done.returncode == 2, done.stderr
    assert "was changed since it was built (other commits)" in one_error_line(done)
    assert _snapshot(repo.root) == forged
    (repo.root / MARKER).unlink()
    assert _snapshot(repo.root) == before

    plain = tmp_path / "a-file"
    plain.write_text("keep me\n")
    done = mem("demo", "--dir", str(plain), env=env)
    assert done.returncode == 2, done.stderr
    assert one_error_line(done) == f"--dir: {plain} exists and is not a directory"
    assert plain.read_text() == "keep me\n"

    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("\\begin{document}\n")
    done = mem("demo", "--dir", str(other), env=env)
    assert done.returncode == 2, done.stderr
    assert [p.name for p in other.iterdir()] == ["thesis.tex"]


def _hostile_git(root: Path) -> dict[str, str]:
    """Git settings of a user that change commits: identity, dates, signing, branch, hooks."""
    root.mkdir()
    config = root / ".gitconfig"
    config.write_text(
        "[user]\n\tname = Someone Else\n\temail = else@example.org\n"
        "[init]\n\tdefaultBranch = trunk\n"
        "[commit]\n\tgpgsign = true\n"
        "[i18n]\n\tcommitEncoding = ISO-8859-1\n"
    )
    return {
        "HOME": str(root),
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_AUTHOR_NAME": "Env Author",
        "GIT_COMMITTER_DATE": "2001-01-01T00:00:00Z",
        "GIT_AUTHOR_DATE": "2001-01-01T00:00:00Z",
    }


def _head(repo: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_demo_builds_the_same_commits_every_time(tmp_path: Path, empty_db: str) -> None:
    env = _env(tmp_path, POIMEN_DSN=empty_db, **_hostile_git(tmp_path / "home"))
    first = tmp_path / "demo-a"
    done = mem("demo", "--dir", str(first), env=env)
    assert done.returncode == 0, done.stderr
    assert "Increase buffer — Alice Smith, 2026-08-06 · src/kong/buffer.rs:42" in done.stdout
    assert _head(first) == DEMO_HEAD
    # Again in the same directory: the demo recognised and used as it is.
    again = mem("demo", "--dir", str(first), env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout == done.stdout
    assert _head(first) == DEMO_HEAD
    # Elsewhere, in an empty directory, with none of those settings: the same commits.
    empty = tmp_path / "demo-b"
    empty.mkdir()
    elsewhere = mem("demo", "--dir", str(empty), env=_env(tmp_path, POIMEN_DSN=empty_db))
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert _head(empty) == DEMO_HEAD
    with psycopg.connect(empty_db) as conn:
        rows = conn.execute(
            "SELECT commit_sha, author_name FROM git_commit WHERE project = 'demo'"
        ).fetchall()
    # The two commits memories are anchored in, the same each time: nothing else piled up.
    assert sorted(rows) == [
        ("7cf8db624d94ece8a68586ffc5dde94e430a0ccb", "Bob Jones"),
        ("b4b77fb69cb631ad5f387f5fd8ec12671339f157", "Alice Smith"),
    ]
    assert DEMO_HEAD == "7cf8db624d94ece8a68586ffc5dde94e430a0ccb"
    # Nothing was written next to the directories.
    assert not list(tmp_path.glob("*memories*"))


def test_demo_refuses_a_demo_that_was_changed(tmp_path: Path, store_dsn: str) -> None:
    env = _env(tmp_path, POIMEN_DSN=store_dsn)
    root = tmp_path / "demo"
    assert mem("demo", "--dir", str(root), env=env).returncode == 0
    edited = root / "src/kong/buffer.rs"
    edited.write_text(edited.read_text() + "// my experiment\n")
    before = _snapshot(root)
    done = mem("demo", "--dir", str(root), env=env)
    assert done.returncode == 2, done.stderr
    message = one_error_line(done)
    assert message == (
        f"--dir: {root} holds a demo repository that was changed since it was built "
        "(files added or edited); remove it yourself, or choose another directory"
    )
    assert _snapshot(root) == before


# -- 2: a store without its schema ---------------------------------------------------------------

MISSING = "has no poimen-memory schema; run `mem db migrate`"


def _lookups(kong: FixtureRepo, src: Path) -> list[list[str]]:
    repo = str(kong.root)
    return [
        ["query", "buffer"],
        ["by-commit", "abcdef1", "--repo", repo],
        ["by-author", "alice@example.org", "--repo", repo],
        ["by-git", "src/kong/buffer.rs:42", "--repo", repo],
        ["remember", "src/kong/buffer.rs:42", "a memory", "--repo", repo],
        ["ingest", str(src), "--repo", repo],
        ["db", "resolve-pending", "--repo", repo],
    ]


def _memories(root: Path) -> Path:
    src = root / "memories.jsonl"
    row = {"type": "node", "id": "e1", "level": "L0", "query_id": "q", "text": "Raised BODY_BUFFER.",
           "anchors": [{"file": "src/kong/buffer.rs", "line": 42}],
           "created_at": "2026-08-20T07:00:00Z"}  # fmt: skip
    src.write_text(json.dumps(row) + "\n")
    return src


def test_a_new_external_store_says_to_migrate(
    tmp_path: Path, empty_db: str, kong: FixtureRepo
) -> None:
    env = _env(tmp_path, POIMEN_DSN=empty_db, POIMEN_PROJECT="first-day")
    target = conninfo.conninfo_to_dict(empty_db)
    where = f"host {target['host']} port {target['port']} database {target['dbname']}"
    for args in _lookups(kong, _memories(tmp_path)):
        done = mem(*args, env=env)
        assert done.returncode == 1, (args, done.stderr)
        assert one_error_line(done) == f"the memory store at {where} {MISSING}", args
    migrated = mem("db", "migrate", env=env)
    assert migrated.returncode == 0, migrated.stderr
    assert mem("query", "buffer", env=env).returncode == 0


def test_an_older_schema_says_to_migrate(
    tmp_path: Path, empty_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = migrations_module.available()
    with monkeypatch.context() as m:
        m.setattr(migrations_module, "available", lambda: shipped[:-1])
        with psycopg.connect(empty_db) as conn:
            migrate(conn)
    env = _env(tmp_path, POIMEN_DSN=empty_db, POIMEN_PROJECT="first-day")
    done = mem("query", "buffer", env=env)
    assert done.returncode == 1, done.stderr
    assert one_error_line(done).endswith(
        f"has schema version {len(shipped) - 1}, older than this poimen-memory's "
        f"{len(shipped)}; run `mem db migrate`"
    )
    status = mem("db", "status", env=env)  # still says where the schema stands
    assert status.returncode == 0, status.stderr
    assert "(run `mem db migrate`)" in status.stdout
    assert (
        mem("db", "migrate", env=env).stdout
        == f"applied {shipped[-1].version:04d}_{shipped[-1].name}\n"
    )
    done = mem("query", "buffer", env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "no memories found\n", "")


def _postmaster_pid(pgdata: Path) -> int | None:
    """The embedded Postgres's pid while it runs, else None."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[Path]:
    """A data directory for an embedded store of its own; its Postgres stopped at the end
    whatever the test did to the processes using it."""
    yield tmp_path / "data"
    pid = _postmaster_pid(pgdata_of(tmp_path / "data"))
    if pid is not None:
        os.kill(pid, signal.SIGINT)  # fast shutdown


def _handles(data: Path) -> list[int]:
    path = pgdata_of(data) / ".handle_pids.json"
    text = path.read_text().strip() if path.exists() else ""
    return list(json.loads(text)) if text else []


@pytest.mark.slow
def test_the_embedded_store_migrates_itself_on_first_use(tmp_path: Path, embedded: Path) -> None:
    # Two first runs at once, in a root shell or container without XDG_RUNTIME_DIR.
    env = _env(tmp_path, POIMEN_PROJECT="first-day")
    env.pop("XDG_RUNTIME_DIR", None)
    runs = [
        subprocess.Popen(
            [*MEM, "query", "buffer"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for run in runs:
        out, err = run.communicate(timeout=180)
        assert (run.returncode, out, err) == (0, "no memories found\n", "")
    status = mem("db", "status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["schema_version"] == body["latest_version"]
    assert _postmaster_pid(pgdata_of(embedded)) is None
    assert _handles(embedded) == []


@pytest.mark.slow
def test_the_editor_is_told_once_that_the_schema_is_missing(
    tmp_path: Path, empty_db: str, kong: FixtureRepo
) -> None:
    client = LspClient([*MEM, "lsp"], _env(tmp_path), kong.root, tmp_path / "lsp.log")
    try:
        client.initialize(kong.root, {"poimenMemory": {"dsn": empty_db, "project": "p"}})
        buffer = kong.root / "src/kong/buffer.rs"
        uri = client.open(buffer, buffer.read_text())
        for line in (42, 41, 10):
            client.hover(uri, line)
        assert client.request("textDocument/codeLens", {"textDocument": {"uri": uri}}) is None
        told = [
            p["message"]
            for method, p in client.notifications
            if method == "window/showMessage" and "mem db migrate" in p["message"]
        ]
        assert len(told) == 1, client.notifications
        assert MISSING in told[0]
        assert client.proc.poll() is None
    finally:
        client.close()


# -- 3 and 15: mem http with the store away ------------------------------------------------------


class Served:
    def __init__(self, proc: subprocess.Popen[bytes], base: str, log: Path) -> None:
        self.proc, self.base, self.log = proc, base, log

    def health(self) -> dict[str, Any]:
        answer = httpx.get(f"{self.base}/health", timeout=20)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def query(self, **params: str) -> httpx.Response:
        return httpx.get(f"{self.base}/memory/query", params=params, timeout=20)

    def until(self, store: str) -> None:
        deadline = time.monotonic() + 15
        while self.health()["store"] != store:
            assert time.monotonic() < deadline, f"/health never said store {store}"
            time.sleep(0.2)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []

    def start(*args: str, env: dict[str, str]) -> Served:
        port = free_port()
        log = tmp_path / f"http-{uuid.uuid4().hex[:6]}.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [*MEM, "http", "--port", str(port), *args],
                env=env,
                cwd=tmp_path,  # not a work tree: the server serves only what it is given
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        served = Served(proc, f"http://127.0.0.1:{port}", log)
        started.append(served)
        deadline = time.monotonic() + 60
        while True:
            try:
                served.health()
                return served
            except httpx.TransportError:
                pass
            assert proc.poll() is None, f"mem http exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"mem http did not start: {log.read_text()}"
            time.sleep(0.1)

    yield start
    for served in started:
        if served.proc.poll() is None:
            served.proc.terminate()
            served.proc.wait(20)


def test_http_starts_with_the_store_down_and_answers_503_until_it_is_back(
    tmp_path: Path, store_dsn: str, serve: Any
) -> None:
    params = conninfo.conninfo_to_dict(store_dsn)
    proxy = TcpProxy(str(params.get("host", "127.0.0.1")), int(params.get("port", 5432)))
    params.update(host="127.0.0.1", port=str(proxy.port))
    dsn = conninfo.make_conninfo(**params)
    try:
        served = serve("--dsn", dsn, "--project", "first-day", env=_env(tmp_path))
        start = served.log.read_text().splitlines()
        port = served.base.rsplit(":", 1)[1]
        where = f"host 127.0.0.1 port {proxy.port} database {params['dbname']}"
        assert start[:2] == [
            f"mem http: serving http://127.0.0.1:{port}",
            f"mem http: memory store {where} (from --dsn)",
        ], start
        assert start[2].startswith(f"mem http: cannot connect to Postgres at {where}"), start
        assert start[2].endswith("; answering 503 until it is fixed"), start
        assert served.health() == {"status": "ok", "store": "unreachable"}

        def lookups() -> list[httpx.Response]:
            return [
                served.query(query="buffer"),
                httpx.post(
                    f"{served.base}/memory/nodes/by-commit",
                    json={"commit_sha": "abcdef1", "repo": "github.com/org/poimen"},
                    timeout=20,
                ),
                httpx.post(
                    f"{served.base}/memory/nodes/by-author",
                    json={"author": "alice@example.org"},
                    timeout=20,
                ),
            ]

        for answer in lookups():
            assert answer.status_code == 503, answer.text
            assert answer.json() == {"error": "memory store unreachable"}
        proxy.start()
        served.until("ok")
        assert served.query(query="buffer").status_code == 200
        proxy.stop()  # gone while serving
        served.until("unreachable")
        for answer in lookups():
            assert answer.status_code == 503, answer.text
        assert served.proc.poll() is None
    finally:
        proxy.stop()


def test_http_on_a_new_store_answers_503_until_it_is_migrated(
    tmp_path: Path, empty_db: str, serve: Any
) -> None:
    env = _env(tmp_path, POIMEN_DSN=empty_db)
    served = serve(env=env)  # no project: each request names its own
    assert served.health() == {"status": "ok", "store": "schema missing"}
    assert (
        served.log.read_text()
        .splitlines()[2]
        .endswith(f"{MISSING}; answering 503 until it is fixed")
    )
    answer = served.query(query="buffer", project="first-day")
    assert answer.status_code == 503, answer.text
    assert answer.json() == {"error": f"memory store {MISSING}"}
    unnamed = served.query(query="buffer")
    assert unnamed.status_code == 422, unnamed.text
    assert unnamed.json() == {
        "error": NO_PROJECT,
        "field": "project",
    }
    assert mem("db", "migrate", env=env).returncode == 0
    served.until("ok")
    assert served.query(query="buffer", project="first-day").status_code == 200


def test_http_says_which_option_keeps_it_from_listening(tmp_path: Path, store_dsn: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = mem("http", "--port", str(port), env=_env(tmp_path, POIMEN_DSN=store_dsn))
    assert done.returncode == 2, done.stderr
    assert one_error_line(done) == (
        f"--port: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


# -- 4: signals and the embedded Postgres ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_http_on_a_signal_releases_the_embedded_postgres(
    tmp_path: Path, embedded: Path, serve: Any, signum: signal.Signals
) -> None:
    served = serve("--project", "first-day", env=_env(tmp_path))
    assert served.health() == {"status": "ok", "store": "ok"}  # migrated by itself
    assert served.log.read_text().splitlines()[1].endswith("(from embedded)")
    assert _handles(embedded) == [served.proc.pid]
    assert _postmaster_pid(pgdata_of(embedded)) is not None
    served.proc.send_signal(signum)
    assert served.proc.wait(30) == 128 + signum
    assert "Traceback" not in served.log.read_text()
    assert _postmaster_pid(pgdata_of(embedded)) is None
    assert _handles(embedded) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_lsp_on_a_signal_releases_the_embedded_postgres(
    tmp_path: Path, embedded: Path, kong: FixtureRepo, signum: signal.Signals
) -> None:
    # Started in a directory the embedded server's own user may enter (it runs as root here).
    client = LspClient([*MEM, "lsp"], _env(tmp_path), tmp_path, tmp_path / "lsp.log")
    try:
        client.initialize(kong.root, {"poimenMemory": {"project": "first-day"}})
        assert client.request(
            "workspace/executeCommand", {"command": "mem.ping", "arguments": [{}]}
        )["version"]
        assert _handles(embedded) == [client.proc.pid]
        # The store answers (the embedded server is up, not still starting).
        assert "nodes" in client.request(
            "workspace/executeCommand", {"command": "mem.query", "arguments": [{"query": "x"}]}
        )
        client.proc.send_signal(signum)  # its stdin stays open: the editor is still there
        assert client.proc.wait(60) == 128 + signum
    finally:
        client.close()
    assert _postmaster_pid(pgdata_of(embedded)) is None
    assert _handles(embedded) == []


@pytest.mark.slow
def test_a_killed_user_of_the_embedded_postgres_is_ignored(
    tmp_path: Path, embedded: Path, serve: Any
) -> None:
    served = serve("--project", "first-day", env=_env(tmp_path))
    served.proc.kill()  # no chance to take itself off the list
    served.proc.wait(10)
    assert _handles(embedded) == [served.proc.pid]
    assert _postmaster_pid(pgdata_of(embedded)) is not None
    done = mem("query", "buffer", "--project", "first-day", env=_env(tmp_path))
    assert (done.returncode, done.stderr) == (0, "")
    assert _postmaster_pid(pgdata_of(embedded)) is None  # the last live user stopped it
    assert _handles(embedded) == []


# -- 15: the small things -----------------------------------------------------------------------


def test_output_to_a_closed_pipe_ends_quietly(tmp_path: Path, store_dsn: str) -> None:
    env = _env(tmp_path, POIMEN_DSN=store_dsn, POIMEN_PROJECT="first-day")
    buffered = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}  # as in a shell
    for args, run_env in (
        (["query", "buffer", "--json"], buffered),
        (["query", "buffer", "--json"], {**env, "PYTHONUNBUFFERED": "1"}),
        (["db", "status"], buffered),
        (["--version"], buffered),
    ):
        read, write = os.pipe()
        os.close(read)  # `| head -1` that has already left
        try:
            done = subprocess.run(
                [*MEM, *args],
                env=run_env,
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
                check=False,
            )
        finally:
            os.close(write)
        assert (done.returncode, done.stderr) == (128 + signal.SIGPIPE, ""), args


def test_no_memories_found_ends_its_line(tmp_path: Path, store_dsn: str) -> None:
    env = _env(tmp_path, POIMEN_DSN=store_dsn, POIMEN_PROJECT=f"p-{uuid.uuid4().hex[:8]}")
    done = mem("query", "buffer", env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "no memories found\n", "")


def test_a_lookup_without_a_project_says_how_to_give_one(
    tmp_path: Path, store_dsn: str, kong: FixtureRepo
) -> None:
    env = _env(tmp_path, POIMEN_DSN=store_dsn)
    for args in (
        ["query", "buffer"],
        ["by-commit", "abcdef1"],
        ["by-author", "alice@example.org"],
    ):
        done = mem(*args, env=env, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert one_error_line(done) == NO_PROJECT, args
    # A repository named decides it: its memories are looked for in the project it derives.
    named = mem("by-commit", "abcdef1", "--repo-id", "github.com/org/poimen", env=env, cwd=tmp_path)
    assert "project 'poimen' has no memories in it" in one_error_line(named)
