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
    check = _run(sys.executable, "-m", "ruff", "check", "server", "tests", "bench")
    assert check.returncode == 0, check.stdout
    fmt = _run(sys.executable, "-m", "ruff", "format", "--check", "server", "tests", "bench")
    assert fmt.returncode == 0, fmt.stdout


@pytest.mark.slow
def test_mypy_strict_on_server() -> None:
    done = _run(sys.executable, "-m", "mypy")
    assert done.returncode == 0, done.stdout
