"""Repository identity: one normalized name for every remote spelling of the same repository.

``git@github.com:org/x.git``, ``https://github.com/org/x`` and
``ssh://git@github.com/org/x.git`` all become ``github.com/org/x``: host lowercased, user,
password and port dropped, ``.git`` and trailing slashes removed. Hosts known to ignore case
in paths (github.com, gitlab.com, bitbucket.org) have their paths lowercased too. A remote
that is a local path, and a repository without remotes, get ``local/<16 hex digits>``.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit

from poimen_memory.domain import ContentError, RepoId
from poimen_memory.gitio.errors import UnsafeArgument

__all__ = ["local_identity", "normalize_remote"]

_CASE_INSENSITIVE_HOSTS = frozenset({"github.com", "gitlab.com", "bitbucket.org"})
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/]+)@)?(?P<host>[^:/]+):(?P<path>(?!/).*)$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def local_identity(seed: str) -> RepoId:
    """A stable identity for a repository known only locally (seed: root commit or path)."""
    return RepoId(
        "local/" + hashlib.sha256(seed.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    )


def _clean_path(path: str) -> str:
    path = path.strip().strip("/")
    while path.endswith("/"):
        path = path[:-1]
    path = path.removesuffix(".git").strip("/")
    return re.sub(r"/{2,}", "/", path)


def normalize_remote(url: str) -> RepoId:
    """The identity of a remote URL, in any of git's spellings."""
    raw = url.strip()
    if not raw:
        raise UnsafeArgument("repo: an empty remote URL has no identity")
    if raw.startswith("-"):
        raise UnsafeArgument(f"repo: {raw!r} looks like an option; refused")
    if raw.startswith("file://"):
        return local_identity(raw.removeprefix("file://"))
    if raw.startswith(("/", ".", "~")) or re.match(r"^[A-Za-z]:[\\/]", raw):
        return local_identity(raw)
    if _SCHEME.match(raw):
        parts = urlsplit(raw)
        host = (parts.hostname or "").lower()
        path = parts.path
    else:
        scp = _SCP_LIKE.match(raw)
        if scp is None:
            # A bare name ("github.com/org/x" or an override) is already an identity.
            host, _, path = raw.partition("/")
            host = host.lower()
        else:
            host, path = scp.group("host").lower(), scp.group("path")
    path = _clean_path(path)
    if host in _CASE_INSENSITIVE_HOSTS:
        path = path.lower()
    if not host:
        raise UnsafeArgument(f"repo: cannot find a host in remote URL {raw!r}")
    try:
        return RepoId(f"{host}/{path}" if path else host)
    except ContentError as exc:
        raise UnsafeArgument(f"repo: remote URL {raw!r} gives no valid identity ({exc})") from None
