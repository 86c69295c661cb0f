"""The ``mem`` subcommands of the operations table: each operation with a ``CliSpec`` is a
subcommand whose options are its request model's fields (help from their descriptions),
run the same way: settings, store, services, request, answer, print (``--json``: the
response model, as every surface sends it; else its text)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    LookupFailed,
    LookupInputError,
    LookupRequest,
    LookupService,
    identity_of,
    is_path,
)
from poimen_memory.operations import OPERATIONS, Operation, Services, build_services
from poimen_memory.settings import Settings, load_settings
from poimen_memory.wiring import Store, store_target

__all__ = ["add_operations", "settings_of", "work_trees"]

# Request fields the CLI gives another way: the project is a setting (--project), a location
# argument gives file, line and lines; repo is --repo DIR (a work tree) or --repo-id ID.
_NOT_OPTIONS = frozenset({"project", "repo", "file", "line", "lines"})
# Older spellings of options, kept: (operation, field) -> extra flag.
_ALIASES = {("by_git", "commit_sha"): "--commit"}
# A store for commands that need none unless one is configured (blame): never connected.
_NO_STORE = "dbname=poimen-memory-no-store"


def settings_of(args: argparse.Namespace, *, identity: bool = True, **more: Any) -> Settings:
    """The settings, with the command line's --dsn, --project and (``identity``: where it
    names the work tree's identity, not a lookup's scope) --repo-id over the rest."""
    flags = {
        "dsn": getattr(args, "dsn", None),
        "project": getattr(args, "project", None),
        "repo": _identity_flag(args) if identity else None,
    }
    return load_settings({**flags, **more})


def _identity_flag(args: argparse.Namespace) -> str | None:
    repo_id = getattr(args, "repo_id", None)
    return None if repo_id is None or is_path(repo_id) else repo_id


def work_trees(given: Sequence[str] | str | None) -> list[str]:
    """The work trees a command serves: those given, else the one the current directory is
    in (none when it is in none)."""
    if given:
        return [given] if isinstance(given, str) else list(given)
    return [str(Path.cwd())] if _in_work_tree(Path.cwd()) else []


def _in_work_tree(path: Path) -> bool:
    try:
        identity_of(path)
    except (LookupFailed, LookupInputError):
        return False
    return True


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_field(
    p: argparse.ArgumentParser, op: Operation[Any, Any, Any], name: str, prop: dict[str, Any]
) -> None:
    info: FieldInfo = op.request.model_fields[name]
    flags = [_option(name), *([_ALIASES[(op.name, name)]] if (op.name, name) in _ALIASES else [])]
    help_text = info.description or name
    kinds = {k.get("type") for k in prop.get("anyOf", prop.get("oneOf", [prop]))}
    if kinds == {"boolean"}:
        p.add_argument(*flags, dest=name, action="store_true", help=help_text)
    elif "boolean" in kinds:  # a flag that may take a value (--history [DEPTH])
        p.add_argument(*flags, dest=name, nargs="?", const="true", metavar="N", help=help_text)
    elif "integer" in kinds:
        p.add_argument(*flags, dest=name, type=int, metavar="N", help=help_text)
    else:
        p.add_argument(*flags, dest=name, metavar=name.upper(), help=help_text)


def add_operations(
    commands: dict[tuple[str, ...], Any],
    command: Callable[..., argparse.ArgumentParser],
) -> None:
    """A subcommand for every operation with a CLI form, under ``commands`` (the
    subparsers by the words before, ``()`` for the top level); ``command`` makes one."""
    for op in OPERATIONS:
        spec = op.cli
        if spec is None:
            continue
        *parents, word = spec.words
        p = command(
            commands[tuple(parents)],
            word,
            op.summary,
            _runner(op),
            spec.examples,
            json_output=True,
            project=True,
        )
        positional = {name for name, _ in spec.positional}
        for name, metavar in spec.positional:
            field = op.request.model_fields.get(name)
            help_text = field.description if field is not None else "a file, a line or a range"
            p.add_argument(name, metavar=metavar, help=help_text)
        properties = op.request.model_json_schema()["properties"]
        for name in op.request.model_fields:
            if name not in _NOT_OPTIONS and name not in positional:
                _add_field(p, op, name, properties[name])
        if "repo" in op.request.model_fields or spec.many_trees:
            many = spec.many_trees
            p.add_argument(
                "--repo",
                action="append" if many else "store",
                metavar="DIR",
                help="a work tree to answer for (default: the one the current directory is in)"
                + (" (repeatable)" if many else ""),
            )
            p.add_argument(
                "--repo-id",
                metavar="ID",
                help="the repository's identity (github.com/org/app), instead of the one "
                "derived from the work tree's origin remote",
            )
        if "cursor" in op.request.model_fields:
            p.add_argument(
                "--all", action="store_true", help="follow the cursor until every page is read"
            )


def _runner(op: Operation[Any, Any, Any]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return run_operation(op, args)

    run.__doc__ = op.summary
    return run


@contextlib.contextmanager
def _services(op: Operation[Any, Any, Any], args: argparse.Namespace) -> Iterator[Services]:
    spec = op.cli
    assert spec is not None
    # --repo-id names the identity of the work tree a file is in; else the lookup's scope.
    names_tree = "file" in op.request.model_fields or spec.many_trees
    settings = settings_of(args, identity=names_tree)
    configured = settings.dsn is not None and settings.blame.shared_cache
    needs_store = not spec.store_optional or configured
    if needs_store:
        dsn, _ = store_target(settings, migrate_embedded=not spec.admin)
    else:
        dsn = _NO_STORE
    with Store(dsn, max_size=1, lazy=not needs_store) as store:
        trees = [] if spec.admin else _trees(args)
        services = build_services(
            store,
            settings,
            trees,
            shared_blames=needs_store and spec.shares_blames,
        )
        yield services
        services.service.checkouts.flush()


def _trees(args: argparse.Namespace) -> list[str]:
    trees = work_trees(getattr(args, "repo", None))
    repo_id = getattr(args, "repo_id", None)
    git_repo = getattr(args, "git_repo", None)
    for path in (repo_id, git_repo):
        if path is not None and is_path(path):
            trees.append(path)
    return trees


def run_operation(op: Operation[Any, Any, Any], args: argparse.Namespace) -> int:
    """Answer ``op`` with the request the arguments make; print it."""
    with _services(op, args) as services:
        body = _body(op, args, services)
        req = op.request.parse(body)
        if getattr(args, "all", False):
            assert isinstance(req, ByCommitRequest | ByAuthorRequest)
            out: Any = services.service.every_page(req)
        else:
            out = op.run(services, req)
        answer = op.answer(out)
    if args.json:
        print(json.dumps(answer.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(op.text(req, out))
    return 0 if op.exit_status is None else op.exit_status(answer)


def _body(op: Operation[Any, Any, Any], args: argparse.Namespace, services: Services) -> Any:
    """The request's JSON from the arguments."""
    service = services.service
    spec = op.cli
    assert spec is not None
    body: dict[str, Any] = {}
    names = op.request.model_fields
    for name, _ in spec.positional:
        value = getattr(args, name)
        if name == "location":
            body.update(_place(value, getattr(args, "repo", None), service))
        elif name == "file":
            body.update(_place(value, getattr(args, "repo", None), service, lines=False))
        else:
            body[name] = value
    for name in names:
        if name not in _NOT_OPTIONS and name not in body:
            value = getattr(args, name, None)
            if value is not None and value is not False:
                body[name] = value
    if "repo" in names and "repo" not in body:
        body.update(_scope(args, service))
    if "project" in names and not issubclass(op.request, LookupRequest):
        body["project"] = services.settings.project  # a filter, not a scope: only if set
    return body


def _scope(args: argparse.Namespace, service: LookupService) -> dict[str, Any]:
    """The repository a lookup is scoped to: --repo-id, else the identity of --repo."""
    if args.repo_id:  # checked by the request model
        return {"repo": args.repo_id}
    if args.repo:
        return {"repo": service.checkouts.identities()[0].value}
    return {}


def _place(
    location: str, repo: str | None, service: LookupService, *, lines: bool = True
) -> dict[str, Any]:
    """``FILE``, ``FILE:LINE`` or ``FILE:START-END`` (the last colon separates the lines) as
    the file in its repository (relative to ``repo``, else the current directory) and the
    lines."""
    path, sep, numbers = location.rpartition(":")
    start, dash, end = numbers.partition("-")
    given = lines and sep and path and start.isdigit() and (not dash or end.isdigit())
    if not given:
        path, start = location, ""
    base = Path(repo) if repo else Path.cwd()
    identity, _, relpath = service.checkouts.locate(base / path)
    body: dict[str, Any] = {"file": relpath, "repo": identity.value}
    if start:
        body.update({"lines": [int(start), int(end)]} if dash else {"line": int(start)})
    return body
