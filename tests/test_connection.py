"""Where the store is: --dsn, POIMEN_DSN, config file, else embedded; clear errors fast."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from poimen_memory.errors import ConfigError, StoreUnavailable
from poimen_memory.settings import load_settings
from poimen_memory.store import connect
from poimen_memory.store.connection import describe_target

from .serving import free_port, silent_port

FLAG = "postgresql://flag@127.0.0.1/a"
ENV = "postgresql://env@127.0.0.1/b"
CONF = "postgresql://conf@127.0.0.1/c"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in ("POIMEN_DSN", "POIMEN_PROJECT", "POIMEN_DATA_DIR", "POIMEN_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("POIMEN_CONFIG", str(tmp_path / "missing.toml"))
    return monkeypatch


def test_resolution_order(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'dsn = "{CONF}"\nproject = "from-file"\n')
    clean_env.setenv("POIMEN_DSN", ENV)
    clean_env.setenv("POIMEN_CONFIG", str(config))
    flagged = load_settings({"dsn": FLAG})
    assert (flagged.dsn, flagged.origin("dsn")) == (FLAG, "--dsn")
    from_env = load_settings({"dsn": None})
    assert (from_env.dsn, from_env.origin("dsn")) == (ENV, "POIMEN_DSN")
    assert (from_env.project, from_env.origin("project")) == ("from-file", f"config file {config}")
    clean_env.delenv("POIMEN_DSN")
    from_conf = load_settings()
    assert (from_conf.dsn, from_conf.origin("dsn")) == (CONF, f"config file {config}")
    clean_env.setenv("POIMEN_DSN", "")  # empty is unset
    assert load_settings().dsn == CONF
    clean_env.setenv("POIMEN_CONFIG", str(tmp_path / "missing.toml"))
    nothing = load_settings()
    assert (nothing.dsn, nothing.origin("dsn")) == (None, None)


def test_default_paths_follow_platform_dirs(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.delenv("POIMEN_CONFIG")
    defaults = load_settings()
    assert defaults.config.name == "config.toml"
    assert "poimen-memory" in str(defaults.config)
    assert "poimen-memory" in str(defaults.cache_dir)
    clean_env.setenv("POIMEN_DATA_DIR", str(tmp_path))
    assert load_settings().data_dir == tmp_path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("dsn = ", "not valid TOML"),
        ("dsn = 5\n", "dsn must be a non-empty string, got 5"),
        ('dsn = "host=x port"\n', "is not a valid connection string"),
        ('project = "bad project"\n', "has characters outside"),
    ],
)
def test_bad_config_names_the_file(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, content: str, message: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(content)
    clean_env.setenv("POIMEN_CONFIG", str(config))
    with pytest.raises(ConfigError, match=message) as info:
        load_settings()
    assert str(config) in str(info.value)


def test_bad_flag_dsn_is_a_config_error(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="--dsn: dsn 'host=x port' is not a valid"):
        load_settings({"dsn": "host=x port"})
    clean_env.setenv("POIMEN_DSN", "host=y port")
    with pytest.raises(ConfigError, match="POIMEN_DSN: dsn 'host=y port' is not a valid"):
        load_settings()


def test_refused_connection_names_host_port_and_what_to_check() -> None:
    port = free_port()
    with pytest.raises(StoreUnavailable) as info:
        connect(f"postgresql://u@127.0.0.1:{port}/db")
    message = str(info.value)
    assert f"host 127.0.0.1 port {port} database db" in message
    assert "Connection refused" in message
    assert "Check that the server is running" in message


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP listener on loopback that accepts and never answers, like a hung Postgres."""
    with silent_port() as port:
        yield port


def test_silent_server_fails_within_the_connect_timeout(silent_server: int) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=f"port {silent_server}"):
        connect(f"postgresql://u@127.0.0.1:{silent_server}/db", timeout=2)
    # Bounded by the timeout, not by the kernel's TCP retries (minutes).
    assert time.monotonic() - started < 6


def test_describe_target_hides_password() -> None:
    text = describe_target("postgresql://bob:hunter2@db.internal:6543/mem")
    assert text == "host db.internal port 6543 database mem"
    assert "hunter2" not in text
