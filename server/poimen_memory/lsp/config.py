"""The server's settings: initializationOptions and the "poimenMemory" configuration section.

One typed model, camelCase on the wire (``poimenMemory.hover.excerptLength``). Keys may be
nested (``{"poimenMemory": {"hover": {"excerptLength": 400}}}``), flat as VS Code writes them
(``{"poimenMemory.hover.excerptLength": 400}``) or both at once; an object that names no
``poimenMemory`` key is the section itself. A setting that is given overrides the one in
force, so a client may send only what changed. An invalid value is reported (by name, with
the value) and replaced by its default; unknown keys are reported and ignored. Every key has
its own heading in the README.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

__all__ = [
    "LOG_LEVELS",
    "MARKUP",
    "SECTION",
    "SETTINGS",
    "BlameConfig",
    "CodeLensConfig",
    "Config",
    "HoverConfig",
    "Setting",
    "names_section",
    "parse_config",
]

SECTION: Final = "poimenMemory"

LogLevel = Literal["error", "warning", "info", "debug"]
Markup = Literal["auto", "markdown", "plaintext"]
LOG_LEVELS: Final = get_args(LogLevel)
MARKUP: Final = get_args(Markup)

_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}")


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("blank")
    return value


def _project(value: str) -> str:
    if _PROJECT.fullmatch(value) is None:
        raise ValueError("not a project id")
    return value


Text = Annotated[str, AfterValidator(_not_blank)]
Project = Annotated[str, AfterValidator(_project)]


class _Section(BaseModel):
    # Strict: a setting's JSON type is part of it ("400" is not a number, 1 is not true).
    model_config = ConfigDict(
        strict=True, frozen=True, alias_generator=to_camel, validate_by_name=True
    )


class HoverConfig(_Section):
    """``hover.*``: whether hovers are shown, how long an excerpt is, which markup, and how
    many earlier versions of the line to show memories of (``history``: 0, off by default)."""

    enabled: bool = True
    excerpt_length: Annotated[int, Field(ge=40, le=20_000)] = 400
    markup: Markup = "auto"
    history: Annotated[int, Field(ge=0, le=10)] = 0


class CodeLensConfig(_Section):
    """``codeLens.*``: whether lenses are shown, and the file's total at the top."""

    enabled: bool = True
    file_summary: bool = True


class BlameConfig(_Section):
    """``blame.*``: the largest file blamed (bytes and lines), and whether moved lines are
    followed."""

    max_file_bytes: Annotated[int, Field(ge=1, le=1_000_000_000)] = 2_000_000
    max_file_lines: Annotated[int, Field(ge=1, le=100_000_000)] = 100_000
    detect_moves: bool = False
    shared_cache: bool = True


class Config(_Section):
    """Every setting with its default."""

    dsn: Text | None = None
    project: Project | None = None
    repo: Text | None = None
    hover: HoverConfig = Field(default_factory=HoverConfig)
    code_lens: CodeLensConfig = Field(default_factory=CodeLensConfig)
    blame: BlameConfig = Field(default_factory=BlameConfig)
    log_level: LogLevel = "warning"


@dataclass(frozen=True, slots=True)
class Setting:
    """One key below the section: its default and the JSON Schema of its value."""

    key: str
    default: object
    schema: Mapping[str, Any]


def _leaves(
    schema: Mapping[str, Any], defs: Mapping[str, Any], prefix: str = ""
) -> Iterator[Setting]:
    for name, prop in schema["properties"].items():
        ref = prop.get("$ref")
        if ref is not None:
            yield from _leaves(defs[ref.rsplit("/", 1)[-1]], defs, f"{prefix}{name}.")
        else:
            yield Setting(f"{prefix}{name}", prop["default"], prop)


def _settings() -> dict[str, Setting]:
    schema = Config.model_json_schema(by_alias=True)
    return {s.key: s for s in _leaves(schema, schema.get("$defs", {}))}


SETTINGS: Final[Mapping[str, Setting]] = _settings()
"""Every key (``hover.excerptLength``), in the model's order."""


def _flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"hover": {"enabled": x}}`` -> ``{"hover.enabled": x}`` (dotted keys stay as given)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and path not in SETTINGS:
            out.update(_flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def _in_section(key: object) -> bool:
    return isinstance(key, str) and (key == SECTION or key.startswith(f"{SECTION}."))


def names_section(raw: object) -> bool:
    """Whether a settings object holds the section: a ``poimenMemory`` key, or flat
    ``poimenMemory.*`` keys."""
    return isinstance(raw, Mapping) and any(_in_section(key) for key in raw)


def _section(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The section's keys, dotted and relative to it (``hover.enabled``), from the nested
    form, the flat form or both; with neither, the whole object is the section."""
    if not names_section(raw):
        return _flatten(raw), []
    given: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        if key == SECTION:
            if value is None:
                continue
            if isinstance(value, Mapping):
                given.update(_flatten(value))
            else:
                problems.append(f"{SECTION}: expected an object, got {value!r}")
        elif _in_section(key):
            given.update(_flatten({key.removeprefix(f"{SECTION}."): value}))
    return given, problems


def _put(tree: dict[str, Any], path: str, value: object) -> None:
    *parents, leaf = path.split(".")
    for name in parents:
        tree = tree[name]
    tree[leaf] = value


def _key_of(loc: tuple[int | str, ...]) -> str:
    """The setting an error location points into (a location may go below the key)."""
    parts = [str(p) for p in loc]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in SETTINGS:
            return ".".join(parts[:end])
    raise AssertionError(loc)


def _invalid_keys(tree: Mapping[str, Any]) -> set[str]:
    try:
        Config.model_validate(tree)
    except ValidationError as exc:
        return {_key_of(error["loc"]) for error in exc.errors(include_url=False)}
    return set()


def parse_config(raw: object, base: Config | None = None) -> tuple[Config, list[str]]:
    """Settings from a JSON object (over ``base``); returns the config and the problems found,
    each naming the key (as ``poimenMemory.x``) and the value."""
    config = base or Config()
    if raw is None:
        return config, []
    if not isinstance(raw, Mapping):
        return config, [f"{SECTION}: expected an object, got {raw!r}"]
    given, problems = _section(raw)
    tree = config.model_dump(by_alias=True)
    for path, value in given.items():
        if path in SETTINGS:
            _put(tree, path, value)
    bad = _invalid_keys(tree)
    for path, value in given.items():
        if path in SETTINGS:
            if path in bad:
                default = SETTINGS[path].default
                problems.append(
                    f"{SECTION}.{path}: invalid value {value!r}; using the default {default!r}"
                )
                _put(tree, path, default)
        elif any(key.startswith(f"{path}.") for key in SETTINGS):
            problems.append(f"{SECTION}.{path}: expected an object, got {value!r}")
        else:
            problems.append(f"{SECTION}.{path}: unknown setting (ignored)")
    return Config.model_validate(tree), problems
