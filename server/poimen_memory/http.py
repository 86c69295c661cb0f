"""The seed's HTTP API (M3.5.9) over the lookup service: a thin Starlette adapter.

    POST /memory/nodes/by-git      {"repo", "file", "line" | "lines", "project", "commit_sha"?}
    POST /memory/nodes/by-commit   {"repo"?, "commit_sha", "project"}
    POST /memory/nodes/by-author   {"author", "project", "repo"?}
    GET  /memory/query?query=...&project=...&git_repo=...&limit=...
    GET  /openapi.json             this API, described
    GET  /health                   {"status": "ok"}

Bad input: 422 ``{"error": "...", "field": "..."}`` naming the field. Bound to a non-loopback
address, every request needs ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from poimen_memory.domain import ContentError
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupFailed,
    LookupInputError,
    LookupResult,
    LookupService,
    QueryRequest,
)

__all__ = ["create_app", "is_loopback", "openapi_spec"]

_MAX_BODY = 64 * 1024


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status)


async def _json_body(request: Request) -> object:
    raw = await request.body()
    if len(raw) > _MAX_BODY:
        raise LookupInputError("body", f"larger than {_MAX_BODY} bytes")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LookupInputError("body", f"not valid JSON ({exc})") from None


Handler = Callable[[Request], Awaitable[Response]]


def create_app(service: LookupService, token: str | None = None) -> Starlette:
    """The ASGI app; ``token`` (when set) is required as a bearer token on every request."""

    def guarded(answer: Callable[[Request], Awaitable[LookupResult]]) -> Handler:
        async def endpoint(request: Request) -> Response:
            if token is not None:
                given = request.headers.get("authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return _error(401, "missing or wrong bearer token")
            try:
                result = await answer(request)
            except LookupInputError as exc:
                return _error(422, str(exc), exc.field)
            except ContentError as exc:
                return _error(422, str(exc), str(exc).split(":", 1)[0])
            except LookupFailed as exc:
                return _error(404, str(exc))
            except psycopg.OperationalError:
                return _error(503, "memory store unreachable")
            return JSONResponse(result.to_json())

        return endpoint

    def post(parse: Callable[[object, Any], Any], run: Callable[[Any], LookupResult]) -> Handler:
        async def answer(request: Request) -> LookupResult:
            req = parse(await _json_body(request), service.default_project)
            return await run_in_threadpool(run, req)

        return guarded(answer)

    async def query(request: Request) -> LookupResult:
        params: dict[str, object] = dict(request.query_params)
        req = QueryRequest.from_json(params, service.default_project)
        return await run_in_threadpool(service.query, req)

    async def spec(_: Request) -> Response:
        return JSONResponse(openapi_spec())

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [
        Route(
            "/memory/nodes/by-git", post(ByGitRequest.from_json, service.by_git), methods=["POST"]
        ),
        Route(
            "/memory/nodes/by-commit",
            post(ByCommitRequest.from_json, service.by_commit),
            methods=["POST"],
        ),
        Route(
            "/memory/nodes/by-author",
            post(ByAuthorRequest.from_json, service.by_author),
            methods=["POST"],
        ),
        Route("/memory/query", guarded(query), methods=["GET"]),
        Route("/openapi.json", spec, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
    return Starlette(routes=routes)


def _schema_ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def openapi_spec() -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route."""
    project = {
        "type": ["string", "null"],
        "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}$",
        "description": "project scope (default: the server's)",
    }
    repo = {
        "type": ["string", "null"],
        "minLength": 1,
        "maxLength": 512,
        "pattern": "^[A-Za-z0-9]",
        "description": "repository identity or remote URL, e.g. github.com/org/x",
    }
    commit = {"type": ["string", "null"], "pattern": "^[0-9a-fA-F]{4,64}$"}
    responses = {
        "200": {
            "description": "the memories found",
            "content": {"application/json": {"schema": _schema_ref("LookupResult")}},
        },
        "401": {"description": "missing or wrong bearer token"},
        "404": {"description": "the repository or file is not known here"},
        "422": {
            "description": "bad input; names the field",
            "content": {"application/json": {"schema": _schema_ref("Error")}},
        },
        "503": {"description": "memory store unreachable"},
    }

    def body(name: str) -> dict[str, Any]:
        return {
            "required": True,
            "content": {"application/json": {"schema": _schema_ref(name)}},
        }

    git_commit = {
        "type": ["object", "null"],
        "properties": {
            "sha": {"type": "string"},
            "message": {"type": "string"},
            "author": {"type": "string"},
            "author_name": {"type": "string"},
            "date": {"type": "string", "format": "date-time"},
        },
    }
    git_context = {
        "type": ["object", "null"],
        "properties": {
            "repo": {"type": "string"},
            "file": {"type": "string"},
            "line": {"type": "integer"},
            "line_end": {"type": "integer"},
            "commit_sha": {"type": "string"},
            "commit_msg": {"type": "string"},
            "author": {"type": "string"},
            "author_name": {"type": "string"},
            "author_date": {"type": "string", "format": "date-time"},
        },
    }
    node = {
        "type": "object",
        "required": ["sha256", "level", "brief", "text", "created_at", "git_ref"],
        "properties": {
            "sha256": {"type": "string"},
            "level": {"enum": ["L0", "L1", "L2"]},
            "brief": {"type": "string"},
            "text": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "query_id": {"type": ["string", "null"]},
            "run_id": {"type": "string"},
            "git_ref": {"type": ["string", "null"], "description": "file:line, ready to cite"},
            "git_commit": git_commit,
            "git_context": git_context,
            "anchors": {"type": "array", "items": git_context},
            "lines": {"type": "array", "items": {"type": "integer"}},
            "parents": {"type": "array", "items": _schema_ref("Node")},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "poimen-memory", "version": "1"},
        "paths": {
            "/memory/nodes/by-git": {
                "post": {
                    "summary": "Memories at a code location (current lines mapped through blame)",
                    "requestBody": body("ByGit"),
                    "responses": responses,
                }
            },
            "/memory/nodes/by-commit": {
                "post": {
                    "summary": "Evidence anchored in a commit, with the memories above it",
                    "requestBody": body("ByCommit"),
                    "responses": responses,
                }
            },
            "/memory/nodes/by-author": {
                "post": {
                    "summary": "Evidence from an author's commits",
                    "requestBody": body("ByAuthor"),
                    "responses": responses,
                }
            },
            "/memory/query": {
                "get": {
                    "summary": "Full-text search, optionally cited by evidence in a repository",
                    "parameters": [
                        {
                            "name": "query",
                            "in": "query",
                            "required": True,
                            "schema": {"type": "string", "minLength": 1, "maxLength": 1000},
                        },
                        {"name": "project", "in": "query", "schema": project},
                        {"name": "git_repo", "in": "query", "schema": repo},
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 100},
                        },
                    ],
                    "responses": responses,
                }
            },
            "/health": {
                "get": {"summary": "liveness", "responses": {"200": {"description": "ok"}}}
            },
        },
        "components": {
            "schemas": {
                "ByGit": {
                    "type": "object",
                    "required": ["file"],
                    "not": {"required": ["line", "lines"]},
                    "properties": {
                        "file": {"type": "string", "minLength": 1},
                        "line": {"type": "integer", "minimum": 0},
                        "lines": {
                            "type": "array",
                            "items": {"type": "integer", "minimum": 1},
                            "minItems": 2,
                            "maxItems": 2,
                        },
                        "project": project,
                        "repo": repo,
                        "commit_sha": commit,
                        "at": commit,
                    },
                },
                "ByCommit": {
                    "type": "object",
                    "required": ["commit_sha"],
                    "properties": {
                        "commit_sha": commit,
                        "project": project,
                        "repo": repo,
                        "limit": {"type": "integer", "minimum": 1, "maximum": 10000},
                    },
                },
                "ByAuthor": {
                    "type": "object",
                    "required": ["author"],
                    "properties": {
                        "author": {"type": "string", "minLength": 1, "maxLength": 320},
                        "project": project,
                        "repo": repo,
                        "limit": {"type": "integer", "minimum": 1, "maximum": 10000},
                    },
                },
                "Node": node,
                "LookupResult": {
                    "type": "object",
                    "required": ["repo", "nodes"],
                    "properties": {
                        "repo": {"type": ["string", "null"]},
                        "nodes": {"type": "array", "items": _schema_ref("Node")},
                    },
                },
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "string"}, "field": {"type": "string"}},
                },
            }
        },
    }
