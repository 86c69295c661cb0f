"""ContentError and the validators every domain value is built with.

Each check raises ``ContentError`` with a message that names the field and shows the value, so
the same words reach the user on every surface.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

# Postgres `integer` bounds every turn index and line number we store; `bigint` the rest.
INT4_MAX: Final = 2**31 - 1
BIGINT_MAX: Final = 2**63 - 1
# Years every timestamp must fall in once converted to UTC: what Postgres and Python share.
MIN_YEAR: Final = 1
MAX_YEAR: Final = 9999

_E = TypeVar("_E", bound=enum.Enum)


class ContentError(ValueError):
    """A value that does not satisfy the domain's rules; the message names field and value."""


def show(value: object, limit: int = 80) -> str:
    """repr() of a value, cut to keep error messages one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_wire(kind: type[_E], name: str, expected: str, value: object) -> _E:
    """The member of ``kind`` whose value is exactly the string ``value``; nothing else."""
    if isinstance(value, str):
        for member in kind:
            if member.value == value:
                return member
    raise ContentError(f"{name}: expected {expected}, got {show(value)}")


def check_match(name: str, value: object, pattern: re.Pattern[str], expected: str) -> str:
    """``value`` as a string that ``pattern`` matches in full; ``expected`` describes the form."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ContentError(f"{name}: expected {expected}, got {show(value)}")
    return value


def check_int(name: str, value: object, minimum: int, maximum: int) -> int:
    """An integer (not a bool) from ``minimum`` to ``maximum`` inclusive."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContentError(f"{name}: expected an integer, got {show(value)}")
    if not minimum <= value <= maximum:
        raise ContentError(f"{name}: must be between {minimum} and {maximum}, got {value}")
    return value


def check_text(name: str, value: object) -> str:
    """A string Postgres can store as ``text``: no NUL, no lone surrogate."""
    if not isinstance(value, str):
        raise ContentError(f"{name}: expected a string, got {show(value)}")
    if "\x00" in value:
        # Postgres text cannot hold NUL; refusing here keeps a batch from failing half-way.
        raise ContentError(f"{name}: contains a NUL character")
    check_unicode(name, value)
    return value


def check_unicode(name: str, value: str) -> None:
    """Refuse a string that cannot be encoded as UTF-8 (a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ContentError(f"{name}: not valid Unicode text (lone surrogate)") from None


def require_keys(kind: str, obj: object, keys: Iterable[str]) -> Mapping[str, Any]:
    """``obj`` as a JSON object holding every one of ``keys``; the first missing one is named."""
    if not isinstance(obj, Mapping):
        raise ContentError(f"{kind}: expected a JSON object, got {show(obj)}")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise ContentError(f"{kind}: missing field {missing[0]!r}")
    return obj


def parse_timestamp(name: str, value: object) -> datetime:
    """An ISO 8601 timestamp with a UTC offset; naive times are refused (they are ambiguous)."""
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str):
        try:
            ts = datetime.fromisoformat(
                value.replace("Z", "+00:00", 1) if value.endswith("Z") else value
            )
        except ValueError:
            raise ContentError(f"{name}: not an ISO 8601 timestamp: {show(value)}") from None
    else:
        raise ContentError(f"{name}: expected an ISO 8601 timestamp string, got {show(value)}")
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise ContentError(f"{name}: timestamp needs a UTC offset (e.g. 'Z'): {show(value)}")
    # The store and every reader share years 1 to 9999 only: an instant outside them once in
    # UTC (``0001-01-01T00:00:00+14:00`` is 1 BC) would be stored but could never be read back.
    try:
        utc = ts.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise ContentError(
            f"{name}: timestamp outside the years {MIN_YEAR} to {MAX_YEAR} in UTC: {show(value)}"
        )
    return ts


def format_timestamp(ts: datetime) -> str:
    """The JSON form of a timestamp that ``parse_timestamp`` accepted, with its own offset;
    UTC is written ``Z`` (``2026-08-20T07:00:00Z``)."""
    text = ts.isoformat()
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def format_utc(ts: datetime) -> str:
    """A timestamp as every response writes it: the same instant in UTC, with ``Z``
    (``2026-08-20T07:00:00Z``), whatever offset it was given or read with."""
    return format_timestamp(ts.astimezone(UTC))
