"""The codebase's own rules, run as tests: layers (import-linter), ruff, mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, timeout=300)


def test_layers_are_kept() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    done = _run(str(exe) if exe.exists() else "lint-imports", "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_ruff_check_and_format() -> None:
    check = _run(sys.executable, "-m", "ruff", "check", "server", "tests", "bench", "mutation")
    assert check.returncode == 0, check.stdout
    fmt = _run(
        sys.executable, "-m", "ruff", "format", "--check", "server", "tests", "bench", "mutation"
    )
    assert fmt.returncode == 0, fmt.stdout


@pytest.mark.slow
def test_mypy_strict_on_server() -> None:
    done = _run(sys.executable, "-m", "mypy")
    assert done.returncode == 0, done.stdout


def _deptry(*args: str) -> subprocess.CompletedProcess[str]:
    return _run(sys.executable, "-m", "deptry", *args)


def test_dependencies_declared_in_server() -> None:
    """Every import of server/ is a declared runtime dependency: none missing, none only there
    through another package, no test tool, none declared and unused."""
    done = _deptry("server")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No dependency issues found" in done.stdout + done.stderr


def test_dependencies_declared_in_tests_and_bench() -> None:
    """Every import of tests/, bench/ and mutation/ is declared, the test extra counted as
    theirs."""
    done = _deptry(
        "tests", "bench", "mutation",
        "--known-first-party", "poimen_memory",
        "--known-first-party", "tests",
        "--known-first-party", "bench",
        "--known-first-party", "mutation",
        "--optional-dependencies-dev-groups", "dev",
        "--exclude", r"\.venv|node_modules",
        # Tools run as programs or plugins (ruff, mypy, pytest-asyncio, ...) are never imported.
        "--ignore", "DEP002",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No dependency issues found" in done.stdout + done.stderr
