"""Every error as a kind: one classification, by the error's class, for every surface. Each
surface maps the kinds to its own statuses through one small table (the CLI's exit codes,
HTTP's statuses, MCP's tool errors, LSP's error codes)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

import psycopg

from poimen_memory.domain import ContentError
from poimen_memory.errors import ConfigError, ErrorKind, Refused, SchemaMissing, StoreUnavailable
from poimen_memory.ingest import IngestError
from poimen_memory.lookup import LookupFailed, LookupInputError, NotInRepository
from poimen_memory.store import MigrationError

__all__ = ["KINDS", "Failure", "classify"]

log = logging.getLogger("poimen_memory")

# Each error class, and the kind it is reported as. An error is looked up by its class, then
# its bases in method resolution order: the most specific entry wins, whatever the order here.
KINDS: Final[dict[type[BaseException], ErrorKind]] = {
    ContentError: ErrorKind.INPUT,
    LookupInputError: ErrorKind.INPUT,
    NotInRepository: ErrorKind.INPUT,  # a LookupFailed too: the caller named a path not in a tree
    ConfigError: ErrorKind.INPUT,
    IngestError: ErrorKind.INPUT,
    psycopg.errors.UndefinedObject: ErrorKind.INPUT,  # a role that does not exist
    LookupFailed: ErrorKind.NOT_FOUND,
    StoreUnavailable: ErrorKind.UNAVAILABLE,
    MigrationError: ErrorKind.UNAVAILABLE,
    psycopg.OperationalError: ErrorKind.UNAVAILABLE,
    Refused: ErrorKind.REFUSED,
    psycopg.errors.InsufficientPrivilege: ErrorKind.REFUSED,
}


@dataclass(frozen=True, slots=True)
class Failure:
    """An error as surfaces report it: its kind, the message for the one who ran the command
    (``message``), the message for a remote client (``public``: no store address, no
    internals) and the field it is about."""

    kind: ErrorKind
    message: str
    public: str
    field: str | None = None


def _kind(exc: BaseException) -> ErrorKind:
    for cls in type(exc).__mro__:
        if cls in KINDS:
            return KINDS[cls]
    kind = getattr(exc, "kind", None)  # errors of an outer layer say their own kind
    return kind if isinstance(kind, ErrorKind) else ErrorKind.INTERNAL


def _field(exc: BaseException, kind: ErrorKind) -> str | None:
    field = getattr(exc, "field", None)
    if isinstance(field, str):
        return field
    if kind is ErrorKind.INPUT and isinstance(exc, ContentError) and ":" in str(exc):
        return str(exc).split(":", 1)[0]
    return None


def classify(exc: BaseException, *, logger: logging.Logger | None = log) -> Failure:
    """The failure ``exc`` is. An internal one (a bug) is logged with its stack on ``logger``
    (a server's, whose log is where bugs are found; None for a command that says it in one
    line)."""
    kind = _kind(exc)
    message = " ".join(str(exc).split())
    if kind is ErrorKind.INTERNAL:
        if logger is not None:
            logger.error("internal error: %s", type(exc).__name__, exc_info=exc)
        public = f"internal error: {type(exc).__name__}"
        return Failure(kind, public, public)
    if kind is ErrorKind.UNAVAILABLE:
        if isinstance(exc, SchemaMissing):  # said without the store's address
            public = f"memory store {exc.detail}"
        else:
            public = "memory store unreachable"
        return Failure(kind, message, public)
    return Failure(kind, message, message, _field(exc, kind))
