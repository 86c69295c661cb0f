"""How domain values travel as query parameters: each newtype and ``Level`` as the text it wraps.

Registered on every pooled connection, so queries take ``ProjectId``, ``Sha256Hash``, lists of
them and the rest as they are. They are dumped in text format with the unknown oid, exactly as
psycopg dumps a ``str``: Postgres types them from where they stand, and the text ``COPY`` of
bulk writes takes them like any other value.

Reading goes the other way per row shape (``store.reads``): a loader is chosen by the column's
Postgres type, and every identifier column is ``text``, so no loader could tell a ``sha256``
column from a ``file`` column.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Dumper
from psycopg.types.datetime import TimestamptzBinaryLoader, TimestamptzLoader

from poimen_memory.domain import CommitSha, Level, ProjectId, QueryId, RepoId, RunId, Sha256Hash

__all__ = ["DUMPED_AS_VALUE", "ValueDumper", "register_domain_types"]

# The domain types whose ``value`` is the text stored for them.
DUMPED_AS_VALUE: tuple[type, ...] = (
    ProjectId,
    QueryId,
    RunId,
    Sha256Hash,
    CommitSha,
    RepoId,
    Level,
)


class ValueDumper(Dumper):
    """Dumps a domain value as its ``value``, in text format and untyped like a ``str``."""

    def dump(self, obj: Any) -> Buffer:
        """The UTF-8 bytes of ``obj.value`` (validated ASCII, so right for any server encoding)."""
        value: str = obj.value
        return value.encode()


class _ReadableTimestamptz(TimestamptzLoader):
    """A ``timestamptz`` as a datetime, or None when Python cannot hold it (a year before 1
    or after 9999, stored before timestamps were checked at the door): the reader skips the
    row instead of failing the whole answer."""

    def load(self, data: Buffer) -> Any:
        try:
            return super().load(data)
        except psycopg.DataError:
            return None


class _ReadableTimestamptzBinary(TimestamptzBinaryLoader):
    """The binary form of ``_ReadableTimestamptz``."""

    def load(self, data: Buffer) -> Any:
        try:
            return super().load(data)
        except psycopg.DataError:
            return None


def register_domain_types(context: AdaptContext) -> None:
    """Let ``context`` (a connection, a cursor or an adapters map) take domain values, and
    read a ``timestamptz`` out of Python's range as None."""
    for cls in DUMPED_AS_VALUE:
        context.adapters.register_dumper(cls, ValueDumper)
    context.adapters.register_loader("timestamptz", _ReadableTimestamptz)
    context.adapters.register_loader("timestamptz", _ReadableTimestamptzBinary)
