"""MkDocs hook: the reference sections generated from the code when the site is built.

A page asks for a section with a marker on a line of its own:

- ``<!-- poimen:settings -->``: every key of ``poimen_memory.settings.Settings`` (nested
  models as dotted keys) with its type, default, description, environment variable and
  language-server key;
- ``<!-- poimen:cli -->``: the ``--help`` of ``mem`` and of each of its commands;
- ``<!-- poimen:operations -->``, or ``<!-- poimen:operations surface=http -->`` (``mcp``,
  ``lsp``, ``cli``): one section per operation with its surfaces, its request fields and its
  response's top-level fields, from ``poimen_memory.operations.OPERATIONS`` when the project
  has it, else from the request models in ``poimen_memory.lookup.requests``; with
  ``view=table``, one row per operation with its name on each surface instead;
- ``<!-- poimen:errors -->``: the kinds of failure (``poimen_memory.errors.ErrorKind``) and
  what each surface answers for each: the CLI's exit status (``cli.EXIT_STATUS``), HTTP's
  status (``http.STATUS``), the language server's error code (``lsp.lookups.ERROR_CODES``)
  and MCP's tool error.

An unknown marker, or a setting without a description (while ``REQUIRE_DESCRIPTIONS``), fails
the build.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Every setting must say what it means: a field without a description fails the build.
REQUIRE_DESCRIPTIONS = True

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- poimen:([a-z]+)((?: [a-z]+=[a-z]+)*) -->$", re.MULTILINE)
LSP_SECTION = "poimenMemory"
HELP_COLUMNS = "100"
SURFACES = ("http", "mcp", "lsp", "cli")
NOT_LSP = "— (not a language-server setting)"
NOT_IN_FILE = "— (not in the config file)"


class ReferenceBuildError(Exception):
    """A generated section that cannot be built; MkDocs stops with its message."""


def _project() -> None:
    """Import the project from the installed package, else from this checkout's ``server/``."""
    try:
        importlib.import_module("poimen_memory")
    except ImportError:
        sys.path.insert(0, str(ROOT / "server"))
        importlib.import_module("poimen_memory")


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each marker of the page with its generated section."""
    if "<!-- poimen:" not in markdown:
        return markdown
    _project()

    def render(match: re.Match[str]) -> str:
        name, options = match[1], dict(o.split("=") for o in match[2].split())
        renderer = RENDERERS.get(name)
        if renderer is None:
            raise ReferenceBuildError(f"unknown reference marker {match[0]!r}")
        return renderer(**options)

    out = MARKER.sub(render, markdown)
    if "<!-- poimen:" in out:
        raise ReferenceBuildError(f"a reference marker not on a line of its own: {out!r:.200}")
    return out


# --- text helpers -------------------------------------------------------------------------


def _cell(text: object) -> str:
    """Text for one Markdown table cell: one line, pipes escaped outside code spans (inside
    them a pipe is no column separator, and a backslash would show)."""
    parts = re.split(r"(`+[^`]*?`+)", " ".join(str(text).split()))
    return "".join(p if p.startswith("`") else p.replace("|", "\\|") for p in parts)


def _code(text: object) -> str:
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --- settings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SettingRow:
    key: str
    type: str
    default: str
    description: str
    env: str
    lsp: str | None
    config_file: bool


def _type_name(annotation: Any) -> str:
    """A reader's name for a type: ``str | None``, ``"a" | "b"``, ``tuple[str, ...]``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if annotation is type(None):
        return "None"
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{name}[{inner}]" if args else name
    if isinstance(annotation, type):
        return "path" if issubclass(annotation, os.PathLike) else annotation.__name__
    return str(annotation).replace("typing.", "")


def _bounds(metadata: Iterable[object]) -> str:
    """The numeric bounds among a field's constraints, e.g. ``>= 40, <= 20000``."""
    found = []
    for item in metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(item, attr, None)
            if value is not None:
                found.append(f"{sign} {value:g}" if isinstance(value, float) else f"{sign} {value}")
    return ", ".join(found)


def _show_default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, os.PathLike):
            home = str(Path.home())
            shown = str(value).replace(home, "~", 1) if str(value).startswith(home) else value
            return f"{_code(shown)} (depends on the platform)"
        return _code(_json_like(value))
    if field.is_required():
        return "required"
    return _code(_json_like(field.default))


def _json_like(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_json_like(v) for v in value) + "]"
    return str(value)


def _nested_model(annotation: Any) -> type | None:
    """The pydantic model a field holds (also inside ``Model | None``), else None."""
    from pydantic import BaseModel

    candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        if typing.get_origin(candidate) is typing.Annotated:
            candidate = typing.get_args(candidate)[0]
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _lsp_keys() -> set[str] | None:
    """The keys the language server reads, when the project says (else None: every key)."""
    try:
        config = importlib.import_module("poimen_memory.lsp.config")
    except ImportError:
        return None
    keys = getattr(config, "SETTINGS", None)
    return None if keys is None else {str(k) for k in keys}


def setting_rows() -> list[SettingRow]:
    """Every key of the settings model, nested models flattened into dotted keys."""
    from poimen_memory import settings

    model = settings.Settings
    prefix = str(model.model_config.get("env_prefix") or "")
    delimiter = str(model.model_config.get("env_nested_delimiter") or "__")
    config_keys = getattr(settings, "CONFIG_KEYS", None)
    lsp_keys = _lsp_keys()
    rows: list[SettingRow] = []
    missing: list[str] = []

    def walk(cls: type, path: tuple[str, ...]) -> None:
        for name, field in cls.model_fields.items():  # type: ignore[attr-defined]
            if field.exclude:
                continue
            here = (*path, name)
            nested = _nested_model(field.annotation)
            if nested is not None:
                walk(nested, here)
                continue
            key = ".".join(here)
            description = " ".join((field.description or "").split())
            if not description:
                missing.append(key)
            # pydantic-settings reads a top-level alias as the variable's whole name.
            alias = field.validation_alias if isinstance(field.validation_alias, str) else None
            alias = None if path else alias or field.alias
            env = (alias or prefix + delimiter.join(here)).upper()
            lsp = ".".join(_camel(part) for part in here)
            bounds = _bounds(field.metadata)
            kind = _type_name(field.annotation) + (f" ({bounds})" if bounds else "")
            rows.append(
                SettingRow(
                    key=key,
                    type=kind,
                    default=_show_default(field),
                    description=description,
                    env=env,
                    lsp=f"{LSP_SECTION}.{lsp}" if lsp_keys is None or lsp in lsp_keys else None,
                    config_file=config_keys is None or key in config_keys or here[0] in config_keys,
                )
            )

    walk(model, ())
    if missing and REQUIRE_DESCRIPTIONS:
        raise ReferenceBuildError(
            "settings without a description (Field(description=...)): " + ", ".join(missing)
        )
    return rows


def render_settings() -> str:
    out = []
    for row in setting_rows():
        group, _, leaf = row.key.rpartition(".")
        in_file = f"[{group}] {leaf}" if group else row.key
        out += [
            f"### `{row.key}`",
            "",
            row.description or "*(no description yet)*",
            "",
            f"- type: {_code(row.type)}",
            f"- default: {row.default}",
            f"- environment variable: {_code(row.env)}",
            f"- language server: {_code(row.lsp) if row.lsp else NOT_LSP}",
            f"- config file: {_code(in_file) if row.config_file else NOT_IN_FILE}",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


# --- CLI ----------------------------------------------------------------------------------


def _commands(
    parser: argparse.ArgumentParser, words: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*words, name))


def render_cli() -> str:
    from poimen_memory.cli.parser import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS  # argparse wraps help at the terminal's width
    try:
        out = []
        for words, parser in _commands(build_parser(), ("mem",)):
            out.append(f"### `{' '.join(words)}`\n")
            out.append("```text")
            out.append(parser.format_help().rstrip())
            out.append("```\n")
        return "\n".join(out)
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


# --- operations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    """The fields of an operations-table entry that the reference shows."""

    name: str
    summary: str
    description: str
    request: type
    response: type
    writes: bool
    http_path: str | None = None
    http_method: str | None = None
    mcp_tool: str | None = None
    lsp_command: str | None = None
    cli_command: str | None = None


def _doc(cls: type) -> tuple[str, str]:
    """A model's docstring as (first sentence-paragraph, whole text)."""
    text = " ".join((cls.__doc__ or "").split())
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0] if text else ""
    return first, text


def _from_requests() -> list[Operation]:
    """The operations as the request models describe them, for a project without a table."""
    from poimen_memory.lookup import requests, results

    known = [
        ("by_git", requests.ByGitRequest, results.LookupResponse, False,
         ("POST", "/memory/nodes/by-git"), "by_git", "mem.byGit", "mem by-git"),
        ("by_commit", requests.ByCommitRequest, results.LookupResponse, False,
         ("POST", "/memory/nodes/by-commit"), "by_commit", "mem.byCommit", "mem by-commit"),
        ("by_author", requests.ByAuthorRequest, results.LookupResponse, False,
         ("POST", "/memory/nodes/by-author"), "by_author", "mem.byAuthor", "mem by-author"),
        ("query", requests.QueryRequest, results.LookupResponse, False,
         ("GET", "/memory/query"), "query", "mem.query", "mem query"),
        ("remember", requests.RememberRequest, results.RememberResponse, True,
         None, "remember", "mem.remember", "mem remember"),
    ]  # fmt: skip
    operations = []
    for name, request, response, writes, http, mcp, lsp, cli in known:
        summary, description = _doc(request)
        operations.append(
            Operation(
                name=name,
                summary=summary,
                description=description,
                request=request,
                response=response,
                writes=writes,
                http_method=http[0] if http else None,
                http_path=http[1] if http else None,
                mcp_tool=mcp,
                lsp_command=lsp,
                cli_command=cli,
            )
        )
    return operations


def operations() -> list[Any]:
    """The operations table of the project when it has one, else the request models'."""
    try:
        module = importlib.import_module("poimen_memory.operations")
    except ModuleNotFoundError as exc:
        if exc.name != "poimen_memory.operations":
            raise
        return _from_requests()
    table = module.OPERATIONS
    return list(table.values() if isinstance(table, dict) else table)


def _schema_type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            kinds = [_schema_type(s, defs) for s in schema[key]]
            return " | ".join(dict.fromkeys(kinds))
    if "enum" in schema:
        return " | ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " | ".join(kind)
    if kind == "array":
        items = schema.get("items") or schema.get("prefixItems")
        if isinstance(items, list):
            return "[" + ", ".join(_schema_type(i, defs) for i in items) + "]"
        inner = _schema_type(items, defs) if items else "any"
        size = ""
        if schema.get("minItems") is not None and schema.get("minItems") == schema.get("maxItems"):
            size = f", {schema['minItems']} items"
        return f"array of {inner}{size}"
    bounds = []
    for word, sign in (("minimum", ">="), ("maximum", "<="), ("maxLength", "length <=")):
        if word in schema:
            bounds.append(f"{sign} {schema[word]}")
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _fields(model: type, mode: str) -> list[tuple[str, str, str, str]]:
    schema = model.model_json_schema(mode=mode)  # type: ignore[attr-defined]
    if "properties" not in schema:  # a custom serializer hides them: the fields as declared
        schema = model.model_json_schema(mode="validation")  # type: ignore[attr-defined]
    defs = schema.get("$defs", {})
    required = set(schema.get("required", ()))
    fields = getattr(model, "model_fields", {})
    rows = []
    for name, prop in schema.get("properties", {}).items():
        field = fields.get(name)
        description = prop.get("description") or (field.description if field else None) or ""
        rows.append((_code(name), _code(_schema_type(prop, defs)),
                     "yes" if name in required else "no", description))  # fmt: skip
    return rows


def _surface(op: Any, surface: str) -> str | None:
    """How ``op`` is reached on ``surface``, or None where it is not served. Reads the flat
    names (``http_method``/``http_path``, ``mcp_tool``, ``lsp_command``, ``cli_command``) or
    the grouped ones (``http`` with ``method`` and ``path``; ``cli`` with ``words``)."""
    if surface == "http":
        route = getattr(op, "http", None)
        method = getattr(route, "method", None) or getattr(op, "http_method", None)
        path = getattr(route, "path", None) or getattr(op, "http_path", None)
        return f"{(method or 'POST').upper()} {path}" if path else None
    if surface == "cli":
        words = getattr(getattr(op, "cli", None), "words", None)
        command = " ".join(("mem", *words)) if words else getattr(op, "cli_command", None)
        return str(command) if command else None
    value = getattr(op, {"mcp": "mcp_tool", "lsp": "lsp_command"}[surface], None)
    return str(value) if value else None


def _surfaces(op: Any) -> list[tuple[str, str]]:
    labels = {"http": "HTTP", "mcp": "MCP tool", "lsp": "LSP command", "cli": "CLI"}
    found = []
    for surface in SURFACES:
        value = _surface(op, surface)
        if value:
            found.append((labels[surface], _code(value)))
    return found


def _writes(op: Any) -> str:
    return "yes" if op.writes else "no (read only)"


def render_operations_table(surface: str | None = None) -> str:
    """One row per operation (served on ``surface``, or everywhere): its name on each
    surface and whether it writes."""
    labels = {"http": "HTTP", "mcp": "MCP tool", "lsp": "LSP command", "cli": "CLI"}
    rows = []
    for op in operations():
        if surface is not None and not _surface(op, surface):
            continue
        title = getattr(op, "title", None) or getattr(op, "summary", "")
        reached = [_code(_surface(op, s)) if _surface(op, s) else "—" for s in SURFACES]
        rows.append([_code(op.name), *reached, "yes" if op.writes else "no", title])
    if not rows:
        raise ReferenceBuildError(f"no operation is served on {surface}")
    header = ["operation", *(labels[s] for s in SURFACES), "writes", "what it does"]
    return _table(header, rows) + "\n"


def render_operations(surface: str | None = None, view: str = "sections") -> str:
    if surface is not None and surface not in SURFACES:
        raise ReferenceBuildError(f"unknown surface {surface!r}; one of {', '.join(SURFACES)}")
    if view == "table":
        return render_operations_table(surface)
    if view != "sections":
        raise ReferenceBuildError(f"unknown view {view!r}; one of sections, table")
    out = []
    for op in operations():
        if surface is not None and not _surface(op, surface):
            continue
        title = getattr(op, "title", None)
        out.append(f"### `{op.name}`" + (f": {title}" if title else "") + "\n")
        summary = " ".join(str(getattr(op, "summary", "") or "").split())
        description = " ".join(str(getattr(op, "description", "") or "").split())
        if summary and not description.startswith(summary):
            out += [f"**{summary}**", ""]
        if description or summary:
            out += [description or summary, ""]
        rows = [*_surfaces(op), ("writes", _writes(op))]
        out.append(_table(["surface", "name"], rows))
        out.append("")
        examples = getattr(getattr(op, "cli", None), "examples", None) or ()
        if examples:
            out += ["```sh", *examples, "```", ""]
        out.append(f"Request (`{op.request.__name__}`):\n")
        out.append(_table(["field", "type", "required", "description"],
                          _fields(op.request, "validation")))  # fmt: skip
        out.append("")
        out.append(f"Response (`{op.response.__name__}`), top-level fields:\n")
        about = _doc(op.response)[1]
        if about:
            out += [about, ""]
        response = [(f, k, d) for f, k, _, d in _fields(op.response, "serialization")]
        if not response:
            raise ReferenceBuildError(f"{op.name}: no fields found in {op.response.__name__}")
        out.append(_table(["field", "type", "description"], response))
        out.append("")
    if not out:
        raise ReferenceBuildError(f"no operation is served on {surface}")
    return "\n".join(out).rstrip() + "\n"


# --- errors -------------------------------------------------------------------------------

MCP_ERROR = "tool error (`isError`), the message as its text"


def render_errors() -> str:
    """Each kind of failure, the error classes reported as it, and what each surface
    answers for it (from the surfaces' own tables)."""
    from poimen_memory.cli import EXIT_STATUS
    from poimen_memory.errors import ErrorKind
    from poimen_memory.http import STATUS
    from poimen_memory.lsp.lookups import ERROR_CODES
    from poimen_memory.operations.failures import KINDS

    rows = []
    for kind in ErrorKind:
        classes = sorted(cls.__name__ for cls, k in KINDS.items() if k is kind)
        rows.append(
            [
                _code(kind.value),
                ", ".join(_code(c) for c in classes) or "any other error (a bug)",
                _code(EXIT_STATUS[kind]),
                _code(STATUS[kind]),
                _code(ERROR_CODES[kind]),
                MCP_ERROR,
            ]
        )
    header = ["kind", "raised as", "CLI exit status", "HTTP status", "LSP error code", "MCP"]
    return _table(header, rows) + "\n"


RENDERERS: dict[str, Callable[..., str]] = {
    "settings": render_settings,
    "cli": render_cli,
    "operations": render_operations,
    "errors": render_errors,
}
