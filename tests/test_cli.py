"""The `mem` command: version, db migrate, db status; clear one-line errors and exit codes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from poimen_memory import __version__
from poimen_memory.cli import main
from poimen_memory.domain import ProjectId
from poimen_memory.store import Store

from .test_store import graph


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version_console_script() -> None:
    done = subprocess.run(["mem", "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stdout.strip() == f"mem {__version__}"


def test_db_migrate_twice(capsys: pytest.CaptureFixture[str], empty_dsn: str) -> None:
    code, out, err = run(capsys, "--dsn", empty_dsn, "db", "migrate")
    assert (code, err) == (0, "")
    assert "applied 0001_initial" in out
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "migrate")
    assert (code, out) == (0, "schema is up to date\n")
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "migrate", "--json")
    assert json.loads(out) == {"applied": []}


def test_db_status_counts(capsys: pytest.CaptureFixture[str], empty_dsn: str) -> None:
    run(capsys, "--dsn", empty_dsn, "db", "migrate")
    with Store(empty_dsn) as store:
        store.insert_batch(graph(ProjectId("cli-status"))[0])
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "status", "--json")
    assert code == 0
    body = json.loads(out)
    assert body["nodes"] == {"L0": 2, "L1": 2, "L2": 1}
    assert (body["edges"], body["anchors"], body["commits"]) == (5, 2, 2)
    assert body["schema_version"] == body["latest_version"]
    assert body["store"].endswith("(from --dsn)")
    code, out, _ = run(capsys, "--dsn", empty_dsn, "db", "status")
    assert code == 0
    assert "nodes           L0 2 · L1 2 · L2 1" in out


def test_status_on_unmigrated_database(capsys: pytest.CaptureFixture[str]) -> None:
    from .conftest import create_database, drop_database

    name, dsn = create_database("cli_unmigrated")
    try:
        code, out, _ = run(capsys, "--dsn", dsn, "db", "status")
    finally:
        drop_database(name)
    assert code == 0
    assert "schema version  none: run `mem db migrate`" in out


def test_unreachable_store_is_one_line_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = run(capsys, "--dsn", f"postgresql://u@127.0.0.1:{port}/x", "db", "status")
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert f"port {port}" in err
    assert "Traceback" not in err


def test_env_dsn_is_used(
    capsys: pytest.CaptureFixture[str], store_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POIMEN_DSN", store_dsn)
    code, out, _ = run(capsys, "db", "status", "--json")
    assert code == 0
    assert json.loads(out)["store"].endswith("(from POIMEN_DSN)")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "missing command"),
        (["db"], "missing command; see `mem db --help`"),
        (["nope"], "invalid choice: 'nope'"),
        (["--dsn", "host=x port", "db", "status"], "--dsn: dsn 'host=x port' is not a valid"),
    ],
)
def test_bad_input_exit_2_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("mem: error: ")
    assert err.count("\n") == 1
    assert message in err


def test_module_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.startswith("mem ")
