"""The `mem` command: version, db migrate, db status; clear one-line errors and exit codes."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from poimen_memory import __version__
from poimen_memory.cli import build_parser, main
from poimen_memory.domain import ProjectId
from poimen_memory.store import Store

from .conftest import admin_dsn
from .gitrepo import kong_repo
from .test_store import graph


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version_console_script() -> None:
    """`mem --version` names mem, git and the Postgres in use (for bug reports)."""
    store_dsn = admin_dsn()
    env = {**os.environ, "POIMEN_DSN": store_dsn}
    done = subprocess.run(
        [Path(sys.executable).parent / "mem", "--version"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"mem {__version__}"
    git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    assert git.stdout.strip() in lines
    with psycopg.connect(store_dsn) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    assert row is not None
    assert any(line.startswith(f"PostgreSQL {row[0]} (") for line in lines), lines
    assert "from POIMEN_DSN" in done.stdout


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_version_with_the_store_down_still_answers(capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    code, out, _ = run(capsys, "--dsn", f"postgresql://u@127.0.0.1:{port}/x", "--version", "--json")
    assert code == 0
    body = json.loads(out)
    assert body["mem"] == f"mem {__version__}"
    assert body["git"].startswith("git version ")
    assert body["postgres"].startswith("Postgres: cannot connect")


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
    code, out, _ = run(capsys, "--dsn", empty_dsn, "doctor", "--json")
    assert json.loads(out)["store"]["source"] == "--dsn"
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
    port = _closed_port()
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
    assert json.loads(out)["schema_version"] >= 1
    code, out, _ = run(capsys, "doctor", "--json")
    assert (code, json.loads(out)["store"]["source"]) == (0, "POIMEN_DSN")


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


# -- CLI conventions: options after the command, examples in --help, exit codes ---------------


def test_global_options_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    from .conftest import create_database, drop_database

    name, dsn = create_database("cli_options_after")
    try:
        code, out, err = run(capsys, "db", "migrate", "--dsn", dsn, "--json")
        assert (code, err) == (0, ""), err
        assert json.loads(out)["applied"]
        code, out, _ = run(capsys, "--json", "db", "status", "--dsn", dsn)
        assert code == 0
        assert json.loads(out)["schema_version"] >= 1
        code, out, _ = run(capsys, "--json", "doctor", "--dsn", dsn)
        assert json.loads(out)["store"]["source"] == "--dsn"
        # The option before the command still counts when the command does not repeat it.
        code, out, _ = run(capsys, "--dsn", dsn, "--json", "db", "migrate")
        assert (code, json.loads(out)) == (0, {"applied": []})
    finally:
        drop_database(name)


def test_project_after_or_before_the_command(
    capsys: pytest.CaptureFixture[str], store_dsn: str, tmp_path: Path
) -> None:
    repo = kong_repo(tmp_path / "kong")
    for argv in (
        ["by-git", "src/kong/buffer.rs:42", "--repo", str(repo.root), "--project", "p1"],
        ["--project", "p1", "by-git", "src/kong/buffer.rs:42", "--repo", str(repo.root)],
    ):
        code, out, err = run(capsys, "--dsn", store_dsn, *argv, "--json")
        assert (code, err) == (0, ""), err
        assert json.loads(out)["nodes"] == []


def _leaf_commands() -> list[list[str]]:
    parser = build_parser()
    leaves: list[list[str]] = []

    def walk(p: argparse.ArgumentParser, prefix: list[str]) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            leaves.append(prefix)
        for action in subs:
            for name, child in action.choices.items():
                walk(child, [*prefix, name])

    walk(parser, [])
    return leaves


@pytest.mark.parametrize("argv", _leaf_commands(), ids=lambda a: " ".join(a) or "mem")
def test_every_help_shows_an_example(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", *argv, "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    examples = done.stdout.split("examples:\n", 1)
    assert len(examples) == 2, done.stdout
    first = examples[1].splitlines()[0].strip()
    assert first.startswith(" ".join(["mem", *argv])), first


def test_leaf_commands_cover_everything() -> None:
    names = {" ".join(a) for a in _leaf_commands()}
    assert {"db migrate", "db status", "by-git", "ingest", "lsp", "http", "demo"} <= names


@pytest.mark.parametrize(
    "case", ["outside", "root", "not-a-repo", "untracked", "escape"]
)  # fmt: skip
def test_paths_outside_a_repository_are_bad_input(
    capsys: pytest.CaptureFixture[str], store_dsn: str, tmp_path: Path, case: str
) -> None:
    repo = kong_repo(tmp_path / "kong")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("x\n")
    argv = {
        "outside": ["by-git", f"{plain / 'notes.txt'}:1"],
        "root": ["by-git", "src/kong/buffer.rs:1", "--repo", "/"],
        "not-a-repo": ["by-commit", "abcdef12", "--repo", str(plain)],
        "untracked": ["by-git", "src/kong/nothere.rs:1", "--repo", str(repo.root)],
        "escape": ["by-git", "../plain/notes.txt:1", "--repo", str(repo.root)],
    }[case]
    code, out, err = run(capsys, "--dsn", store_dsn, "--project", "p", *argv)
    assert code == 2, err
    assert out == ""
    assert err.startswith("mem: error: ")
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_ingest_outside_a_repository_is_bad_input(
    capsys: pytest.CaptureFixture[str], store_dsn: str, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"type": "node", "level": "L1", "query_id": "q", "text": "x"}\n')
    for repo in ("/", str(tmp_path)):
        code, _, err = run(
            capsys, "ingest", str(transcript), "--repo", repo, "--project", "p", "--dsn", store_dsn
        )
        assert code == 2, err
        assert "not inside a git work tree" in err
