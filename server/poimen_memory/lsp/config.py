"""The server's settings: initializationOptions and the "poimenMemory" configuration section.

Keys are camelCase on the wire. An invalid value is reported (by name, with the value) and
replaced by its default; unknown keys are reported and ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["SECTION", "Config", "parse_config"]

SECTION = "poimenMemory"
_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}")
LOG_LEVELS = ("error", "warning", "info", "debug")
MARKUP = ("auto", "markdown", "plaintext")


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting with its default."""

    dsn: str | None = None
    project: str | None = None
    repo: str | None = None
    hover_enabled: bool = True
    hover_excerpt_length: int = 400
    hover_markup: str = "auto"
    code_lens_enabled: bool = True
    code_lens_file_summary: bool = True
    max_file_bytes: int = 2_000_000
    detect_moves: bool = False
    log_level: str = "warning"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


# wire path -> (field, kind, check)
_KEYS: dict[str, tuple[str, str]] = {
    "dsn": ("dsn", "str?"),
    "project": ("project", "project?"),
    "repo": ("repo", "str?"),
    "hover.enabled": ("hover_enabled", "bool"),
    "hover.excerptLength": ("hover_excerpt_length", "int:40:20000"),
    "hover.markup": ("hover_markup", "enum:" + ",".join(MARKUP)),
    "codeLens.enabled": ("code_lens_enabled", "bool"),
    "codeLens.fileSummary": ("code_lens_file_summary", "bool"),
    "blame.maxFileBytes": ("max_file_bytes", "int:1:1000000000"),
    "blame.detectMoves": ("detect_moves", "bool"),
    "logLevel": ("log_level", "enum:" + ",".join(LOG_LEVELS)),
}


def _flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and path not in _KEYS:
            out.update(_flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def _check(kind: str, value: Any) -> tuple[bool, Any]:
    if kind.endswith("?") and value is None:
        return True, None
    if kind.startswith("str"):
        return isinstance(value, str) and bool(value.strip()), value
    if kind.startswith("project"):
        return isinstance(value, str) and _PROJECT.fullmatch(value) is not None, value
    if kind == "bool":
        return isinstance(value, bool), value
    if kind.startswith("int:"):
        _, low, high = kind.split(":")
        in_range = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and int(low) <= value <= int(high)
        )
        return in_range, value
    if kind.startswith("enum:"):
        return value in kind.removeprefix("enum:").split(","), value
    raise AssertionError(kind)


def parse_config(raw: object, base: Config | None = None) -> tuple[Config, list[str]]:
    """Settings from a JSON object (over ``base``); returns the config and the problems found,
    each naming the key (as ``poimenMemory.x``) and the value."""
    config = base or Config()
    problems: list[str] = []
    if raw is None:
        return config, problems
    if not isinstance(raw, Mapping):
        return config, [f"{SECTION}: expected an object, got {raw!r}"]
    if SECTION in raw and isinstance(raw[SECTION], Mapping):
        raw = raw[SECTION]
        assert isinstance(raw, Mapping)
    changes: dict[str, Any] = {}
    for path, value in _flatten(raw).items():
        spec = _KEYS.get(path)
        if spec is None:
            problems.append(f"{SECTION}.{path}: unknown setting (ignored)")
            continue
        name, kind = spec
        ok, checked = _check(kind, value)
        if not ok:
            default = getattr(Config(), name)
            problems.append(
                f"{SECTION}.{path}: invalid value {value!r}; using the default {default!r}"
            )
            changes[name] = default
            continue
        changes[name] = checked
    return replace(config, **changes), problems
