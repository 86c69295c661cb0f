"""What a secret looks like: one detector per kind, an RE2 pattern and a check in Python.

RE2 matches in time linear in the input whatever the pattern, so no transcript can make a
search slow; the patterns say as much as they can (so hostile text yields few candidates) and
the checks only veto a candidate, reading nothing but the candidate (and the character after
it). Token shapes follow
the issuers' documented prefixes, as gitleaks' rules do. Assignments are recognised by the
key's name and judged by the value, so code such as ``password = get_password()`` or
``token_count = 5`` is left alone while a literal after ``"DB_PASSWORD":`` is not, even a
short one or one with spaces.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

import re2  # type: ignore[import-untyped]  # the package ships no type information

__all__ = ["ANY_CANDIDATE", "DETECTORS", "Detector", "Span"]

Span = tuple[int, int]


class _Match(Protocol):
    def span(self, group: int = 0) -> Span: ...  # (-1, -1) when the group did not take part


class _Pattern(Protocol):
    def finditer(self, text: bytes, pos: int = 0) -> Iterator[_Match]: ...

    def search(self, text: bytes) -> _Match | None: ...


Locate = Callable[[str, _Match], Span | None]
Resume = Callable[[str, _Match], int | None]


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of secret: ``pattern`` finds candidates in the Latin-1 bytes of a text (one
    byte a character, so offsets are the text's); ``locate`` gives the secret's span in the
    text, or None when the candidate is no secret after all. A candidate turned down may
    have taken the start of another one (``secret: client_secret = "…"``: the second key
    read as the first one's value); ``resume``, when set, says where to search again then
    (None: after the candidate, as for any other). With ``resume`` set, a secret found short
    of its candidate's end (a value that ran into the next key of a query string, ``…&key=``)
    is searched on from its own end, so that next key is read as one."""

    kind: str
    pattern: _Pattern
    locate: Locate
    resume: Resume | None = None

    def spans(self, text: str, data: bytes) -> Iterator[Span]:
        """Spans of this kind of secret in ``text`` (``data``: its Latin-1 bytes)."""
        pos: int | None = 0
        while pos is not None:
            start, pos = pos, None
            for match in self.pattern.finditer(data, start):
                span = self.locate(text, match)
                if span is not None and span[0] < span[1]:
                    yield span
                    if self.resume is not None and span[1] < match.span()[1]:
                        pos = span[1]  # past the candidate's start: always moves on
                        break
                elif self.resume is not None:
                    again = self.resume(text, match)
                    if again is not None and again > match.span()[0]:
                        pos = again  # strictly after the candidate's start: always moves on
                        break


def _re2(pattern: str, *, ignore_case: bool = False) -> _Pattern:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.case_sensitive = not ignore_case
    return cast(_Pattern, re2.compile(pattern.encode("latin-1"), options))


_PLACEHOLDER_WORDS = frozenset(
    {
        *("password", "passwd", "pass", "secret", "token", "changeme", "changeit"),
        *("redacted", "hidden", "masked", "none", "null", "nil", "true", "false", "undefined"),
    }
)


# A leading sigil, an ellipsis or "your…"; or one character repeated (***, xxxx).
_PLACEHOLDER = re.compile(r"\s*(?:[-$%{<…]|\[REDACTED|\.\.\.|#\{|(?i:your)|(\S)\1*\s*\Z)")


def _is_placeholder(value: str) -> bool:
    """A stand-in for a secret (``$TOKEN``, ``<password>``, ``***``, ``your-key``), not one."""
    return (
        not value.strip()
        or "***" in value
        or _PLACEHOLDER.match(value) is not None
        or value.strip().lower() in _PLACEHOLDER_WORDS
    )


def _real(value: str) -> bool:
    return not _is_placeholder(value)


_NAME = re.compile(r"[A-Za-z_.-]+")


def _machine_made(value: str) -> bool:
    """Issued tokens hold a digit, mix cases or carry other symbols; ``SOME-NAME`` or
    ``a_setting`` is a name."""
    return (
        any(c.isdigit() for c in value)
        or value not in (value.lower(), value.upper())
        or not _NAME.fullmatch(value)
    )


def _issued(value: str) -> bool:
    return _real(value) and _machine_made(value)


def _whole(text: str, match: _Match) -> Span | None:
    return match.span()


def _group(accept: Callable[[str], bool], groups: int = 1) -> Locate:
    """The first of groups 1..``groups`` that took part, when ``accept`` takes its text."""

    def locate(text: str, match: _Match) -> Span | None:
        for group in range(1, groups + 1):
            start, end = match.span(group)
            if start >= 0:
                return (start, end) if accept(text[start:end]) else None
        return None

    return locate


# -- assignments: key = value -----------------------------------------------------------------

# A value runs to whitespace, a quote or the end; "&" and ";" are characters of a value
# (Tr0ub4dor&3), and where one starts the next key of a query or connection string
# (…&user=, …;Database=) the value is cut back to it (``_value_end``).
_VALUE_CHAR = r"[^\s\"'`,(){}\[\]<>|\\=]"
_QUOTED = r"[bBrRuUfF]{0,2}(?:\"(?:[^\"\\\n]|\\.)+\"|'(?:[^'\\\n]|\\.)+')"
_KEY_QUOTED = r"[bBrRuUfF]{0,2}(?:\"(?:[^\"\\\s]|\\.){8,}\"|'(?:[^'\\\s]|\\.){8,}')"
# A password: two characters or more, one of them no letter, "_" or "." (not a bare name).
_NOT_NAME_CHAR = r"[^\s\"'`,(){}\[\]<>|\\=A-Za-z_.]"
_LOGIN_RUN = rf"(?:[A-Za-z_.]+{_NOT_NAME_CHAR}|{_NOT_NAME_CHAR}{_VALUE_CHAR}){_VALUE_CHAR}*=*"
_KEY_RUN = rf"{_VALUE_CHAR}{{8,}}=*"
_LOGIN_NAMES = r"(?:[A-Za-z0-9_-]*(?:passw(?:or)?d|passphrase|[_-]p(?:ass|wd))|pass)"
_KEY_NAMES = (
    r"[A-Za-z0-9_-]*(?:secret|token|credentials?"
    r"|(?:api|access|secret|private|auth|client|signing|encryption|master)[_-]?key)"
)
# Group 1: the key and the separator, the value after it; or, unset, an upper-case shell or
# .env assignment (KEY=value), whose value may be a bare word.
_ASSIGNMENT = (
    r"((?:--)?\b{key}[\"']?(?:[ \t]*(?::=|=>|[:=])[ \t]*|[ \t]+))(?:{quoted}|{run})"
    r"|(?-i:\b{upper_key}={value}+=*)"
)
_SEPARATOR = " \t:=>\"'"
_IDENTIFIER = re.compile(r"[A-Za-z_]+(?:\.[A-Za-z_]\w*)*")  # a dotted name: code, not a secret
_NUMBER = re.compile(r"[+-]?[0-9][0-9.]*")
_NEXT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*=+")


def _value_end(text: str, start: int, end: int) -> int:
    """Where an unquoted value that runs from ``start`` to ``end`` ends: before the next key
    of a query or connection string it ran into (``…&user=``, ``…;Database=``; a value holds
    no "=" but at its end), and before the "&" or ";" that ends it (``x; make``)."""
    value = text[start:end]
    if value.endswith("="):
        cut = max(value.rfind("&"), value.rfind(";"))
        if cut >= 0 and _NEXT_KEY.fullmatch(value, cut + 1):
            value = value[:cut]
    return start + len(value.rstrip("&;"))


def _assignment(key: str, quoted: str, run: str) -> _Pattern:
    pattern = _ASSIGNMENT.format(
        key=key, quoted=quoted, run=run, upper_key=key.upper(), value=_VALUE_CHAR
    )
    return _re2(pattern, ignore_case=True)


def _assigned(password: bool) -> Locate:
    """The value assigned to a secret's key, when it is a literal rather than code."""

    def locate(text: str, match: _Match) -> Span | None:
        first, end = match.span()
        head_start, start = match.span(1)
        if head_start < 0:  # an upper-case KEY=value
            start = text.index("=", first) + 1
            end = _value_end(text, start, end)
            return (start, end) if _real(text[start:end]) else None
        key = text[first:start].rstrip(_SEPARATOR)
        sep = text[first + len(key) : start]
        quoted = text[end - 1] in "\"'"
        sql = quoted and password and key.lower().endswith(("password", "passwd"))
        if not sep.strip() and not text.startswith("--", first) and not sql:
            return None  # "pass x" is prose, "--pass x" a flag; SQL writes PASSWORD 'x'
        if quoted:
            quote = text.index(text[end - 1], start)
            if not set(text[start:quote]).isdisjoint("rRfF"):
                return None  # a raw or format string: a pattern or a template
            value = text[quote + 1 : end - 1]
            secret = _real(value) and (password or _machine_made(value))
            return (quote + 1, end - 1) if secret else None
        if sep[0] not in "\"'" and sep.strip() == ":" and sep[-1] == ":":
            return None  # key:value with nothing between is a URL, a path or a role
        if text[end : end + 1] in ("(", "["):
            return None  # f(…), x[…]: code
        end = _value_end(text, start, end)
        value = text[start:end]
        if _is_placeholder(value) or "://" in value:
            return None
        if sep == "=" and key.isupper():
            return start, end  # KEY=value in a shell or .env file holds the secret itself
        if _IDENTIFIER.fullmatch(value.rstrip("=")):
            return None
        if password:
            return start, end
        return (start, end) if _machine_made(value) and not _NUMBER.fullmatch(value) else None

    return locate


def _value_start(text: str, match: _Match) -> int | None:
    """Where a turned-down assignment's value starts, when that value may be the key of the
    next assignment (``secret: client_secret = "…"``): an unquoted value without ``:``. Such
    a value holds no separator, so a key in it ends where the value does and the next match
    ends past it: each character is read at most twice."""
    first, end = match.span()
    head_start, start = match.span(1)
    if head_start < 0:  # an upper-case KEY=value
        start = text.index("=", first) + 1
    value = text[start:end]
    if not value or value[-1] in "\"'" or ":" in value:
        return None
    return start


# -- the detectors, most specific first (an overlap is reported as the earlier kind) -----------

_PEM_LABEL = r"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
# Header lines first: RE2 keeps the first alternative that matches, as Perl does.
_PEM_BODY = r"(?:(?:Proc-Type|DEK-Info|Version|Comment|Hash):[^\n]*|[A-Za-z0-9+/=\s])*"


def _detectors() -> tuple[Detector, ...]:
    def token(kind: str, pattern: str, locate: Locate = _whole) -> Detector:
        return Detector(kind, _re2(pattern), locate)

    return (
        # A key cut short (no END line) is redacted as far as its body goes.
        token("private-key", f"-----BEGIN {_PEM_LABEL}{_PEM_BODY}(?:-----END {_PEM_LABEL})?"),
        token(
            "aws-access-key",
            r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[0-9A-Z]{16}\b",
        ),
        token("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
        token(
            "gitlab-token",
            r"\b(?:gl(?:pat|ptt|dt|rt|soat|cbt|ft|imt|agent|oas)-[0-9A-Za-z_-]{20,}"
            r"(?:\.[0-9A-Za-z_-]+)*|GR1348941[0-9A-Za-z_-]{20,})",
        ),
        token("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b"),
        # A PyPI API token: a macaroon whose base64 starts with its location (pypi.org or
        # test.pypi.org), ~170 characters in all.
        token("pypi-token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
        token("dockerhub-token", r"\bdckr_pat_[A-Za-z0-9_-]{27,}"),
        token("sendgrid-key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"),
        token("huggingface-token", r"\b(?:hf|api_org)_[A-Za-z0-9]{34}\b"),
        token("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        token(
            "openai-key",
            r"\bsk-((?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})",
            # sk-ant- is Anthropic's; an issued key holds a digit, a package name rarely does.
            _group(lambda v: not v.startswith("ant-") and any(c.isdigit() for c in v)),
        ),
        token(
            "stripe-key",
            r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|\bwhsec_[0-9A-Za-z]{24,}",
        ),
        token("slack-token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
        token("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
        token(
            "azure-storage-key",
            r"\bAccountKey[ \t]*=[ \t]*([A-Za-z0-9+/]{20,}={0,2})",
            _group(_real),
        ),
        token("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        Detector(
            "basic-auth",
            _re2(
                r"\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+([A-Za-z0-9+/_-]{6,}=*)",
                ignore_case=True,
            ),
            _group(_real),
        ),
        Detector(
            "bearer-token",
            _re2(r"\bbearer[ \t]+([A-Za-z0-9._~+/=-]{8,})", ignore_case=True),
            _group(_issued),
        ),
        # The password of -u user:password; without one, curl asks for it.
        token(
            "curl-password",
            r"\bcurl\b[^\n]*?[ \t](?:-u|--user)(?:=|[ \t]+)"
            r"(?:\"[^\"\n:]*:([^\"\n]+)\"|'[^'\n:]*:([^'\n]+)'|[^\s\"':]*:[\"']?([^\s\"']+))",
            _group(_real, groups=3),
        ),
        token(
            "url-password",
            r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\[\]\"'<>]*:([^\s@/\[\]\"'<>]+)@",
            _group(_real),
        ),
        Detector(
            "assigned-password",
            _assignment(_LOGIN_NAMES, _QUOTED, _LOGIN_RUN),
            _assigned(password=True),
            _value_start,
        ),
        Detector(
            "assigned-secret",
            _assignment(_KEY_NAMES, _KEY_QUOTED, _KEY_RUN),
            _assigned(password=False),
            _value_start,
        ),
    )


DETECTORS = _detectors()


def _any_candidate(detectors: tuple[Detector, ...]) -> _Pattern | None:
    """One pattern that finds something wherever any of ``detectors``' patterns would (each
    an alternative, with its own case rule): text where it finds nothing holds no candidate
    of any of them, and one pass over it replaces one per detector. None when the patterns
    do not combine (then every detector looks, as without it)."""
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    parts = []
    for detector in detectors:
        compiled = cast(Any, detector.pattern)
        if any(
            getattr(compiled.options, name) != getattr(options, name)
            for name in re2.Options.NAMES
            if name != "case_sensitive"
        ):
            return None  # compiled with another option than its case: not combined
        flags = b"" if compiled.options.case_sensitive else b"i"
        parts.append(b"(?" + flags + b":" + compiled.pattern + b")")
    try:
        return cast(_Pattern, re2.compile(b"|".join(parts), options))
    except re2.error:
        return None


ANY_CANDIDATE = _any_candidate(DETECTORS)
"""Finds something in the Latin-1 bytes of any text where a detector has a candidate."""
