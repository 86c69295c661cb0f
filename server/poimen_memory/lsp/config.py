"""The language server's settings: initializationOptions and the "poimenMemory" section,
validated into the one settings model (``poimen_memory.settings.Settings``).

camelCase on the wire (``poimenMemory.hover.excerptLength``). Keys may be
nested (``{"poimenMemory": {"hover": {"excerptLength": 400}}}``), flat as VS Code writes them
(``{"poimenMemory.hover.excerptLength": 400}``) or both at once; an object that names no
``poimenMemory`` key is the section itself. A setting that is given overrides the one in
force, so a client may send only what changed. An invalid value is reported (by name, with
the value) and replaced by its default; unknown keys are reported and ignored. Every key has
its own heading in the README.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from poimen_memory.settings import LOG_LEVELS, MARKUP, Settings

__all__ = [
    "LOG_LEVELS",
    "MARKUP",
    "SECTION",
    "SETTINGS",
    "Setting",
    "names_section",
    "parse_config",
]

SECTION: Final = "poimenMemory"

# The settings an editor may give the language server (the others are the machine's).
_FIELDS: Final = ("dsn", "project", "repo", "hover", "code_lens", "blame", "log_level")


@dataclass(frozen=True, slots=True)
class Setting:
    """One key below the section: the settings model's field it sets, its default and the
    JSON Schema of its value."""

    key: str
    path: tuple[str, ...]
    default: object
    schema: Mapping[str, Any]


def _leaves(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Iterator[Setting]:
    for name in _FIELDS:
        prop = schema["properties"][name]
        ref = prop.get("$ref")
        if ref is None:
            yield Setting(to_camel(name), (name,), prop.get("default"), prop)
            continue
        for sub, leaf in defs[ref.rsplit("/", 1)[-1]]["properties"].items():
            yield Setting(f"{to_camel(name)}.{to_camel(sub)}", (name, sub), leaf["default"], leaf)


def _settings() -> dict[str, Setting]:
    schema = Settings.model_json_schema()
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


def _put(tree: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    *parents, leaf = path
    for name in parents:
        tree = tree[name]
    tree[leaf] = value


def _key_of(loc: tuple[int | str, ...]) -> str:
    """The setting an error location points into (a location may go below the key)."""
    parts = tuple(str(p) for p in loc)
    for setting in SETTINGS.values():
        if parts[: len(setting.path)] == setting.path:
            return setting.key
    raise AssertionError(loc)


def _validated(tree: Mapping[str, Any]) -> Settings:
    return Settings.model_validate(tree)


_JSON_TYPES: Final[Mapping[str, Callable[[object], bool]]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _of_its_type(value: object, schema: Mapping[str, Any]) -> bool:
    """Whether ``value`` has a JSON type the key's schema allows: a setting's type is part of
    it ("400" is not a number, 1 is not true), whatever the model would convert."""
    options = schema.get("anyOf", [schema])
    return any(_JSON_TYPES[o["type"]](value) for o in options if o.get("type") in _JSON_TYPES)


def _invalid_keys(tree: Mapping[str, Any]) -> set[str]:
    try:
        _validated(tree)
    except ValidationError as exc:
        return {_key_of(error["loc"]) for error in exc.errors(include_url=False)}
    return set()


def parse_config(raw: object, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """The settings model with a client's settings (a JSON object) over ``base`` (the
    settings the server started with); returns it and the problems found, each naming the
    key (as ``poimenMemory.x``) and the value."""
    config = base or Settings()
    if raw is None:
        return config, []
    if not isinstance(raw, Mapping):
        return config, [f"{SECTION}: expected an object, got {raw!r}"]
    given, problems = _section(raw)
    tree = config.model_dump()
    tree["origins"] = dict(config.origins)
    for key, value in given.items():
        if key in SETTINGS:
            _put(tree, SETTINGS[key].path, value)
    bad = _invalid_keys(tree) | {
        key
        for key, value in given.items()
        if key in SETTINGS and not _of_its_type(value, SETTINGS[key].schema)
    }
    for key, value in given.items():
        if key in SETTINGS:
            if key in bad:
                default = SETTINGS[key].default
                problems.append(
                    f"{SECTION}.{key}: invalid value {value!r}; using the default {default!r}"
                )
                _put(tree, SETTINGS[key].path, default)
            else:
                tree["origins"][".".join(SETTINGS[key].path)] = f"{SECTION}.{key}"
        elif any(k.startswith(f"{key}.") for k in SETTINGS):
            problems.append(f"{SECTION}.{key}: expected an object, got {value!r}")
        else:
            problems.append(f"{SECTION}.{key}: unknown setting (ignored)")
    return _validated(tree), problems
